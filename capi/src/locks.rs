//! Distributed locking (OpenSHMEM 1.5 §9.12): `shmem_set_lock`, `shmem_test_lock`,
//! `shmem_clear_lock` on a symmetric `long` initialized to 0.
//!
//! The lock is PE 0's copy of the word: 0 when free, the holder's PE + 1 when held.
//! Acquiring is a compare-and-swap 0 → PE + 1, retried under the runtime's wait policy
//! (`Runtime::wait_local`: its backoff, its checks for dead peers, `SYMMEM_TIMEOUT`);
//! releasing completes this PE's operations (`shmem_quiet`), then swaps back to 0. The
//! AMOs are sequentially consistent, so what the holder wrote before releasing is visible
//! to the next holder. Not fair: waiting PEs race for the word. A wait that fails (a dead
//! peer, the timeout) ends the job naming the lock and its holder.

use std::cell::Cell;

use crate::{die, state, OrDie, State};

/// The PE whose copy of a lock word is the lock.
const HOME: usize = 0;

/// One attempt to take `lock` for this PE: Ok(0) if it was free (now ours), else the
/// holder's PE + 1.
fn attempt(s: &State, func: &'static str, lock: *mut i64) -> i64 {
    let view = s.view(func, lock.cast_const(), 1);
    let me = s.rt.my_pe() as i64 + 1;
    s.rt.atomic_compare_swap(view.at(0), 0, me, HOME)
        .or_die(func)
}

/// `shmem_set_lock` (§9.12.1): waits until this PE holds `lock`.
#[no_mangle]
pub extern "C" fn shmem_set_lock(lock: *mut i64) {
    const F: &str = "shmem_set_lock";
    let s = state(F);
    let me = s.rt.my_pe() as i64 + 1;
    let holder = Cell::new(attempt(s, F, lock));
    if holder.get() == me {
        die(
            F,
            format!("PE {} already holds the lock at {lock:p}", me - 1),
        );
    }
    s.rt.wait_local(
        F,
        || format!("the lock at {lock:p}, held by PE {}", holder.get() - 1),
        || {
            if holder.get() != 0 {
                holder.set(attempt(s, F, lock));
            }
            holder.get() == 0
        },
    )
    .or_die(F)
}

/// `shmem_test_lock` (§9.12.3): takes `lock` if it is free and returns 0; returns 1 if
/// another PE holds it.
#[no_mangle]
pub extern "C" fn shmem_test_lock(lock: *mut i64) -> std::ffi::c_int {
    const F: &str = "shmem_test_lock";
    let s = state(F);
    std::ffi::c_int::from(attempt(s, F, lock) != 0)
}

/// `shmem_clear_lock` (§9.12.2): completes this PE's operations, then releases `lock`,
/// which this PE must hold (else the job ends with an error naming the holder).
#[no_mangle]
pub extern "C" fn shmem_clear_lock(lock: *mut i64) {
    const F: &str = "shmem_clear_lock";
    let s = state(F);
    s.rt.quiet().or_die(F);
    let view = s.view(F, lock.cast_const(), 1);
    let me = s.rt.my_pe() as i64 + 1;
    let was = s.rt.atomic_compare_swap(view.at(0), me, 0, HOME).or_die(F);
    if was != me {
        die(
            F,
            format!(
                "PE {} does not hold the lock at {lock:p} (its word on PE 0 is {was}: {})",
                me - 1,
                if was == 0 {
                    "free".to_string()
                } else {
                    format!("held by PE {}", was - 1)
                }
            ),
        );
    }
}
