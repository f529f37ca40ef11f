//! Put and get at thread, warp and block scope, blocking and `_nbi`, and `p`/`g`.
//!
//! A launch is divided into `U` *units*: its threads (thread scope), its warps, or its
//! blocks. The symmetric buffer `dst` holds `n_pes * U` regions of `len` u64s (plus
//! whatever guard the host adds). Unit `u` of PE `s` owns region `s * U + u` and writes
//! it on PE `(s + 1 + u) % n_pes`; [`put_target`] says where. In the get phase unit `u`
//! of PE `me` reads back the region that PE `(me + 1) % n_pes`'s unit `u` wrote, from the
//! PE it wrote it to (a third PE when there are more than two); [`get_source`] says where.

use symmem_device::*;

use crate::{global_thread, pattern, warps_per_block};

/// The PE that unit `u` of PE `me` writes its region to.
#[inline(always)]
pub const fn put_target(me: u32, u: u32, n_pes: u32) -> u32 {
    (me + 1 + u) % n_pes
}

/// Where unit `u` of PE `me` reads in the get phase: `(pe, region)`.
#[inline(always)]
pub const fn get_source(me: u32, u: u32, units: u32, n_pes: u32) -> (u32, u32) {
    let writer = (me + 1) % n_pes;
    (put_target(writer, u, n_pes), writer * units + u)
}

/// Puts region `me * units + u` from unit `u`'s part of `src` (host, `units * len`).
#[inline(always)]
unsafe fn put_unit(
    dst: *mut u64,
    src: *const u64,
    len: usize,
    u: u32,
    units: u32,
) -> (*mut u64, *const u64, u32) {
    let (me, n) = (my_pe(), n_pes());
    let d = dst.add((me * units + u) as usize * len);
    (d, src.add(u as usize * len), put_target(me, u, n))
}

/// The get phase's source address and PE, and unit `u`'s part of `got` (host).
#[inline(always)]
unsafe fn get_unit(
    dst: *const u64,
    got: *mut u64,
    len: usize,
    u: u32,
    units: u32,
) -> (*mut u64, *const u64, u32) {
    let (pe, region) = get_source(my_pe(), u, units, n_pes());
    (
        got.add(u as usize * len),
        dst.add(region as usize * len),
        pe,
    )
}

/// Units of a thread-scope launch: every thread of the grid.
#[inline(always)]
fn thread_units() -> u32 {
    grid_dim().volume() * block_dim().volume()
}

/// This warp's unit number in a warp-scope launch, and the number of units.
#[inline(always)]
fn warp_unit() -> (u32, u32) {
    let wpb = warps_per_block();
    (block_rank() * wpb + warp_id(), grid_dim().volume() * wpb)
}

kernel! {
    /// Thread scope: every thread puts its `len` u64s from `src` (host) into its region of
    /// `dst` (sym) with `put`, or with `put_nbi` then `quiet` if `nbi != 0`.
    pub fn rma_put_threads(dst: *mut u64, src: *const u64, len: usize, nbi: u32) {
        let (d, s, pe) = put_unit(dst, src, len, global_thread(), thread_units());
        if nbi == 0 {
            put(d, s, len, pe);
        } else {
            put_nbi(d, s, len, pe);
            quiet();
        }
    }

    /// Thread scope: every thread gets its get-phase region of `dst` (sym) into its part
    /// of `got` (host) with `get`, or `get_nbi` then `quiet`.
    pub fn rma_get_threads(dst: *mut u64, got: *mut u64, len: usize, nbi: u32) {
        let (g_dst, s, pe) = get_unit(dst, got, len, global_thread(), thread_units());
        if nbi == 0 {
            get(g_dst, s, len, pe);
        } else {
            get_nbi(g_dst, s, len, pe);
            quiet();
        }
    }

    /// Thread scope, one element at a time: every thread stores `pattern(my_pe, u, i)`
    /// into element `i` of its region of `dst` (sym) with `p`.
    pub fn rma_p_threads(dst: *mut u64, len: usize) {
        let (me, n, u, units) = (my_pe(), n_pes(), global_thread(), thread_units());
        let d = dst.add((me * units + u) as usize * len);
        let pe = put_target(me, u, n);
        for i in 0..len {
            p(d.add(i), pattern(me, u, i), pe);
        }
    }

    /// Thread scope, one element at a time: every thread loads its get-phase region of
    /// `dst` (sym) with `g` into its part of `got` (host).
    pub fn rma_g_threads(dst: *mut u64, got: *mut u64, len: usize) {
        let (g_dst, s, pe) = get_unit(dst, got, len, global_thread(), thread_units());
        for i in 0..len {
            g_dst.add(i).write(g(s.add(i), pe));
        }
    }

    /// Warp scope: every warp puts its region with `put_warp`, or `put_nbi_warp` then
    /// `quiet`. Blocks may end in a partial warp.
    pub fn rma_put_warps(dst: *mut u64, src: *const u64, len: usize, nbi: u32) {
        let (u, units) = warp_unit();
        let (d, s, pe) = put_unit(dst, src, len, u, units);
        if nbi == 0 {
            put_warp(d, s, len, pe);
        } else {
            put_nbi_warp(d, s, len, pe);
            quiet();
        }
    }

    /// Warp scope: every warp gets its get-phase region with `get_warp`, or
    /// `get_nbi_warp` then `quiet`.
    pub fn rma_get_warps(dst: *mut u64, got: *mut u64, len: usize, nbi: u32) {
        let (u, units) = warp_unit();
        let (g_dst, s, pe) = get_unit(dst, got, len, u, units);
        if nbi == 0 {
            get_warp(g_dst, s, len, pe);
        } else {
            get_nbi_warp(g_dst, s, len, pe);
            quiet();
        }
    }

    /// Block scope: every block puts its region with `put_block`, or `put_nbi_block` then
    /// `quiet_block`.
    pub fn rma_put_blocks(dst: *mut u64, src: *const u64, len: usize, nbi: u32) {
        let (d, s, pe) = put_unit(dst, src, len, block_rank(), grid_dim().volume());
        if nbi == 0 {
            put_block(d, s, len, pe);
        } else {
            put_nbi_block(d, s, len, pe);
            quiet_block();
        }
    }

    /// Block scope: every block gets its get-phase region with `get_block`, or
    /// `get_nbi_block` then `quiet_block`.
    pub fn rma_get_blocks(dst: *mut u64, got: *mut u64, len: usize, nbi: u32) {
        let (g_dst, s, pe) = get_unit(dst, got, len, block_rank(), grid_dim().volume());
        if nbi == 0 {
            get_block(g_dst, s, len, pe);
        } else {
            get_nbi_block(g_dst, s, len, pe);
            quiet_block();
        }
    }

    /// One block (or, with `warp == 1`, its first warp) puts `len` bytes from `src + soff`
    /// (sym) to `dst + doff` (sym) on the right neighbour, then gets them back from there
    /// into `got + doff` (sym): copies whose ends and alignments vary, so the 16-byte
    /// vector body, the element-wise head and tail, and the fallback for unequal
    /// alignments all run.
    pub fn rma_bytes(dst: *mut u8, src: *const u8, got: *mut u8, doff: usize, soff: usize, len: usize, warp: u32) {
        let right = (my_pe() + 1) % n_pes();
        let (d, s, g) = (dst.add(doff), src.add(soff), got.add(doff));
        if warp == 1 {
            if thread_rank() < WARP_SIZE {
                put_warp(d, s, len, right);
                get_warp(g, d.cast_const(), len, right);
            }
        } else {
            put_block(d, s, len, right);
            get_block(g, d.cast_const(), len, right);
        }
    }
}
