//! Every atomic on `u32`, `u64`, `i32` and `i64`, contended by every thread of every PE on
//! every PE.
//!
//! Each PE's `slots` (sym) hold [`SLOTS_SHARED`] words updated by every thread of every PE,
//! then one `SOLO` word per PE that only thread 0 of that PE touches. Thread `g` of PE
//! `s` (global number `gid = s * N + g`, `N` threads per PE, `M = n_pes * N` in all) does
//! on every PE, starting with PE `(s + g) % n_pes`:
//!
//! - `ADD`: `fetch_add` (even `g`) or `add` (odd `g`) of its `vals` entry 0;
//! - `INC`: `fetch_inc` (even `g`) or `inc` (odd `g`);
//! - `OR`, `AND`, `XOR`: the fetch (even `g`) or plain (odd `g`) form with entries 1, 2, 3;
//! - `SWAP`: `swap` in its token (entry 4), storing the old value in `res[gid]` on that PE;
//! - `TICKET`: `fetch_inc`, storing the ticket in `res[M + gid]` on that PE;
//! - `CAS`: a `fetch` + `compare_swap` loop until it replaces the current value with its
//!   token, storing the value it replaced in `res[2M + gid]` on that PE.
//!
//! Thread 0 then runs a fixed sequence on its `SOLO` word on every PE (see
//! [`SOLO_RESULTS`]). Every result is stored with `p`, so each PE can check exactly what
//! happened to its own words: final values, and `res` as permutations.

use symmem_device::*;

use crate::global_thread;

/// Word updated with `fetch_add` / `add`.
pub const ADD: usize = 0;
/// Word updated with `fetch_inc` / `inc`.
pub const INC: usize = 1;
/// Word updated with `fetch_or` / `or`.
pub const OR: usize = 2;
/// Word updated with `fetch_and` / `and`.
pub const AND: usize = 3;
/// Word updated with `fetch_xor` / `xor`.
pub const XOR: usize = 4;
/// Word every thread swaps its token into.
pub const SWAP: usize = 5;
/// Word every thread takes a ticket from with `fetch_inc`.
pub const TICKET: usize = 6;
/// Word every thread installs its token in with a compare-and-swap loop.
pub const CAS: usize = 7;
/// Words shared by all threads; the `SOLO` words follow.
pub const SLOTS_SHARED: usize = 8;
/// Entries of `vals` per thread: add amount, or mask, and mask, xor mask, token.
pub const VALS_PER_THREAD: usize = 5;
/// Values thread 0 uses on its SOLO words: `a b c d e f`.
pub const SOLO_VALUES: usize = 6;
/// Results of thread 0's sequence on one PE's SOLO word, in order: `fetch` after
/// `set(a)`; `fetch_add(b)`, `fetch_and(c)`, `fetch_or(d)`, `fetch_xor(e)`, `fetch_inc`,
/// `swap(f)`, `compare_swap(cond a, value b)` (fails), `compare_swap(cond f, value a)`
/// (succeeds); `fetch`; then `add(b)`, `and(c)`, `or(d)`, `xor(e)`, `inc` and a last
/// `fetch`.
pub const SOLO_RESULTS: usize = 11;

/// Stores `v` in `res[i]` on `pe`.
#[inline(always)]
unsafe fn record<T: DeviceInt>(res: *mut T, i: usize, v: T, pe: u32) {
    p(res.add(i), v, pe);
}

/// The body of the `amo_*` kernels.
#[inline(always)]
unsafe fn amo<T: DeviceInt>(
    slots: *mut T,
    res: *mut T,
    vals: *const T,
    solo: *const T,
    solo_out: *mut T,
) {
    let (me, n) = (my_pe(), n_pes());
    let per_pe = grid_dim().volume() * block_dim().volume();
    let g = global_thread();
    let gid = (me * per_pe + g) as usize;
    let all = (n * per_pe) as usize;
    let v = vals.add(g as usize * VALS_PER_THREAD);
    let (add, or, and, xor, token) = (*v, *v.add(1), *v.add(2), *v.add(3), *v.add(4));
    let fetching = g.is_multiple_of(2);
    for k in 0..n {
        let pe = (me + g + k) % n;
        if fetching {
            atomic_fetch_add(slots.add(ADD), add, pe);
            atomic_fetch_inc(slots.add(INC), pe);
            atomic_fetch_or(slots.add(OR), or, pe);
            atomic_fetch_and(slots.add(AND), and, pe);
            atomic_fetch_xor(slots.add(XOR), xor, pe);
        } else {
            atomic_add(slots.add(ADD), add, pe);
            atomic_inc(slots.add(INC), pe);
            atomic_or(slots.add(OR), or, pe);
            atomic_and(slots.add(AND), and, pe);
            atomic_xor(slots.add(XOR), xor, pe);
        }
        record(res, gid, atomic_swap(slots.add(SWAP), token, pe), pe);
        record(res, all + gid, atomic_fetch_inc(slots.add(TICKET), pe), pe);
        loop {
            let current = atomic_fetch(slots.add(CAS), pe);
            if atomic_compare_swap(slots.add(CAS), current, token, pe) == current {
                record(res, 2 * all + gid, current, pe);
                break;
            }
        }
    }
    if g == 0 {
        let (a, b, c, d, e, f) = (
            *solo,
            *solo.add(1),
            *solo.add(2),
            *solo.add(3),
            *solo.add(4),
            *solo.add(5),
        );
        let word = slots.add(SLOTS_SHARED + me as usize);
        for pe in 0..n {
            let out = solo_out.add(pe as usize * SOLO_RESULTS);
            atomic_set(word, a, pe);
            out.write(atomic_fetch(word, pe));
            out.add(1).write(atomic_fetch_add(word, b, pe));
            out.add(2).write(atomic_fetch_and(word, c, pe));
            out.add(3).write(atomic_fetch_or(word, d, pe));
            out.add(4).write(atomic_fetch_xor(word, e, pe));
            out.add(5).write(atomic_fetch_inc(word, pe));
            out.add(6).write(atomic_swap(word, f, pe));
            out.add(7).write(atomic_compare_swap(word, a, b, pe));
            out.add(8).write(atomic_compare_swap(word, f, a, pe));
            out.add(9).write(atomic_fetch(word, pe));
            atomic_add(word, b, pe);
            atomic_and(word, c, pe);
            atomic_or(word, d, pe);
            atomic_xor(word, e, pe);
            atomic_inc(word, pe);
            out.add(10).write(atomic_fetch(word, pe));
        }
    }
}

kernel! {
    /// Every atomic on u32 (see the module docs). `slots` (sym, `SLOTS_SHARED + n_pes`
    /// words, `AND` preset to all ones), `res` (sym, `3M` words), `vals` (host,
    /// `VALS_PER_THREAD` per thread of this PE), `solo` (host, `SOLO_VALUES`), `solo_out`
    /// (host, `SOLO_RESULTS` per PE).
    pub fn amo_u32(slots: *mut u32, res: *mut u32, vals: *const u32, solo: *const u32, solo_out: *mut u32) {
        amo(slots, res, vals, solo, solo_out);
    }

    /// As [`amo_u32`] on i32.
    pub fn amo_i32(slots: *mut i32, res: *mut i32, vals: *const i32, solo: *const i32, solo_out: *mut i32) {
        amo(slots, res, vals, solo, solo_out);
    }

    /// As [`amo_u32`] on u64.
    pub fn amo_u64(slots: *mut u64, res: *mut u64, vals: *const u64, solo: *const u64, solo_out: *mut u64) {
        amo(slots, res, vals, solo, solo_out);
    }

    /// As [`amo_u32`] on i64.
    pub fn amo_i64(slots: *mut i64, res: *mut i64, vals: *const i64, solo: *const i64, solo_out: *mut i64) {
        amo(slots, res, vals, solo, solo_out);
    }
}
