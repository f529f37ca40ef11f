//! Distributed locking (OpenSHMEM 1.5 §9.12): `shmem_set_lock`, `shmem_test_lock`,
//! `shmem_clear_lock` on a symmetric `long` initialized to 0.
//!
//! The lock is PE 0's copy of the word: 0 when free, the holder's PE + 1 when held.
//! Acquiring is a compare-and-swap 0 → PE + 1 (retried under the runtime's one
//! [`Backoff`] policy); releasing completes this PE's operations (`shmem_quiet`), then
//! swaps back to 0. The AMOs are sequentially consistent, so what the holder wrote before
//! releasing is visible to the next holder. Not fair: waiting PEs race for the word. A
//! wait longer than `SYMMEM_TIMEOUT` (when set) ends the job naming the lock and its
//! holder; the AMOs fail (and end the job) when PE 0 dies.

use std::time::Instant;

use symmem_sync::Backoff;

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
    let deadline = s.rt.config().timeout.map(|t| Instant::now() + t);
    let mut backoff = Backoff::new();
    loop {
        let holder = attempt(s, F, lock);
        if holder == 0 {
            return;
        }
        if holder == s.rt.my_pe() as i64 + 1 {
            die(
                F,
                format!("PE {} already holds the lock at {lock:p}", holder - 1),
            );
        }
        if backoff.is_slow() && deadline.is_some_and(|d| Instant::now() > d) {
            die(
                F,
                format!(
                    "the lock at {lock:p} is still held by PE {} after SYMMEM_TIMEOUT",
                    holder - 1
                ),
            );
        }
        backoff.snooze();
    }
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
