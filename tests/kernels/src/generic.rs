//! Generic kernels (type, scope and const parameters, several instances each), the
//! scope-generic operations at every [`Scope`], and typed symmetric slices.
//!
//! Launches use [`THREADS`] threads in one block. At scope `S` the calling group is
//! thread 0 ([`Thread`]), warp 1 (threads 32..48, a partial warp of 16: [`Warp`]) or the
//! whole block ([`Block`]); [`calls`] says whether this thread is in it. The kernels' bodies
//! are safe code (`safe fn`): the slices check every range.

use symmem_device::*;

pub use crate::collective::THREADS;

/// Whether this thread is in the group that calls at scope `S`.
#[inline(always)]
pub fn calls<S: Scope>() -> bool {
    match S::NAME {
        "thread" => thread_rank() == 0,
        "warp" => warp_id() == 1,
        _ => true,
    }
}

kernel! {
    /// The group of scope `S` puts `src` (this PE's, `CHUNKS` equal chunks) into `dst` on
    /// the right neighbour chunk by chunk with `put_signal_nbi::<S>`, adding 1 to signal
    /// word `c` for chunk `c`; quiets; waits for the left neighbour's `CHUNKS` signals;
    /// then gets `dst` of the right neighbour (this PE's `src`, as put there) into `got`
    /// with `get::<S>`, and the first half again with `get_nbi::<S>` then `put::<S>` and
    /// `put_nbi::<S>` of it into `echo` on the right neighbour.
    pub safe fn slice_rma[type T, type S, const CHUNKS: usize](
        dst: SymSlice<T>,
        src: SymSlice<T>,
        got: SymSlice<T>,
        echo: SymSlice<T>,
        sig: SymSlice<u64>
    ) where [T: Copy, S: Scope] {
        if !calls::<S>() {
            return;
        }
        let (me, n) = (my_pe(), n_pes());
        let right = (me + 1) % n;
        let chunk = src.len() / CHUNKS;
        for c in 0..CHUNKS {
            let part = src.sub(c * chunk, chunk);
            dst.put_signal_nbi::<S>(c * chunk, part, sig, c, 1, SignalOp::Add, right);
        }
        S::quiet();
        for c in 0..CHUNKS {
            sig.signal_wait_until::<S>(c, Cmp::Ge, 1);
        }
        // Every PE's group must have received its data before any reads it back.
        S::sync_all();
        dst.get::<S>(0, got, right);
        let half = got.len() / 2;
        dst.get_nbi::<S>(0, got.sub(0, half), right);
        S::quiet();
        echo.put::<S>(0, got.sub(0, half), right);
        echo.put_nbi::<S>(half, got.sub(half, got.len() - half), right);
        S::quiet();
    }
    instances {
        slice_rma_u64_thread_4 = [u64, Thread, 4],
        slice_rma_u32_warp_2 = [u32, Warp, 2],
        slice_rma_f64_block_8 = [f64, Block, 8],
        slice_rma_u8_block_1 = [u8, Block, 1],
    }

    /// Thread `i < a.len()` of each block: `out[i]` on the right neighbour = `a[i] * K`
    /// (`p`), `got[i]` = `a[i]` of the right neighbour (`g`, then a local `write`), and
    /// `count[0]` on the right neighbour += 1 (`atomic_add`).
    pub safe fn slice_elems[type T, const K: u32](
        a: SymSlice<T>,
        out: SymSlice<T>,
        got: SymSlice<T>,
        count: SymSlice<u64>
    ) where [T: Pod + core::ops::Mul<Output = T> + From<u8>] {
        let i = thread_rank() as usize;
        if i >= a.len() {
            return;
        }
        let right = (my_pe() + 1) % n_pes();
        let k = T::from(K as u8);
        out.p(i, a.read(i) * k, right);
        got.write(i, a.g(i, right));
        count.atomic_add(0, 1, right);
    }
    instances {
        slice_elems_u32_3 = [u32, 3],
        slice_elems_f64_2 = [f64, 2],
    }

    /// The group of scope `S`: `S::copy` of `mine` into `local`, `S::fcollect` of
    /// `mine` into `all` and `S::broadcast` of team PE 0's `mine` into `bcast` over
    /// `team`, then `S::barrier_all`.
    pub fn scope_collectives[type S](
        team: DeviceTeam,
        mine: SymSlice<u64>,
        local: SymSlice<u64>,
        all: SymSlice<u64>,
        bcast: SymSlice<u64>
    ) where [S: Scope] {
        if !calls::<S>() {
            return;
        }
        let n = mine.len();
        S::copy(local.as_ptr(), mine.as_ptr(), n);
        S::fcollect(&team, all.as_ptr(), mine.as_ptr(), n);
        S::broadcast(&team, bcast.as_ptr(), mine.as_ptr(), n, 0);
        S::barrier_all();
    }
    instances {
        scope_collectives_thread = [Thread],
        scope_collectives_warp = [Warp],
        scope_collectives_block = [Block],
    }

    /// Thread 0 puts `n` elements of `src` at `at` of `dst` on `pe` (checked, scope
    /// thread): the out-of-bounds case fails the launch naming the operation.
    pub safe fn slice_put_at(dst: SymSlice<u64>, src: SymSlice<u64>, at: usize, n: usize, pe: u32) {
        if thread_rank() == 0 {
            dst.put::<Thread>(at, src.sub(0, n), pe);
        }
    }

    /// Every thread of warp 0 calls `put_nbi::<Warp>` of `src` at `at` of `dst` on `pe`.
    pub safe fn slice_put_warp_at(dst: SymSlice<u64>, src: SymSlice<u64>, at: usize, pe: u32) {
        if warp_id() == 0 {
            dst.put_nbi::<Warp>(at, src, pe);
            Warp::quiet();
        }
    }
}

kernel! {
    /// `S::put_nbi` instantiated at each group scope: the PTX test checks that each
    /// instance's entry is the same code as the explicit form's (`explicit_put_nbi_*`).
    pub fn scope_put_nbi[type S](dst: *mut u64, src: *const u64, n: usize, pe: u32) where [S: Scope] {
        S::put_nbi(dst, src, n, pe);
    }
    instances {
        scope_put_nbi_warp = [Warp],
        scope_put_nbi_block = [Block],
    }

    /// `put_nbi_warp`, for [`scope_put_nbi`]'s comparison.
    pub fn explicit_put_nbi_warp(dst: *mut u64, src: *const u64, n: usize, pe: u32) {
        put_nbi_warp(dst, src, n, pe);
    }

    /// `put_nbi_block`, for [`scope_put_nbi`]'s comparison.
    pub fn explicit_put_nbi_block(dst: *mut u64, src: *const u64, n: usize, pe: u32) {
        put_nbi_block(dst, src, n, pe);
    }

    /// `dst.p(i, i, pe)` for every `i < n` (checked): with [`slice_p_loop_unchecked`],
    /// what the bounds check costs in a loop of single-element puts (the PTX test counts
    /// their instructions).
    pub safe fn slice_p_loop(dst: SymSlice<u64>, n: usize, pe: u32) {
        for i in 0..n {
            dst.p(i, i as u64, pe);
        }
    }

    /// [`slice_p_loop`] with `p_unchecked`, after one check of the whole range.
    pub safe fn slice_p_loop_unchecked(dst: SymSlice<u64>, n: usize, pe: u32) {
        let dst = dst.sub(0, n);
        for i in 0..n {
            // SAFETY: `i < n == dst.len()`.
            unsafe { dst.p_unchecked(i, i as u64, pe) };
        }
    }

    /// `n` checked puts of `len` elements, one after another in `dst`: the block-put
    /// counterpart of [`slice_p_loop`].
    pub safe fn slice_put_loop(dst: SymSlice<u64>, src: SymSlice<u64>, n: usize, pe: u32) {
        for i in 0..n {
            dst.put::<Block>(i * src.len(), src, pe);
        }
    }

    /// [`slice_put_loop`] with `put_unchecked`.
    pub safe fn slice_put_loop_unchecked(dst: SymSlice<u64>, src: SymSlice<u64>, n: usize, pe: u32) {
        let dst = dst.sub(0, n * src.len());
        for i in 0..n {
            // SAFETY: `(i + 1) * src.len() <= dst.len()`.
            unsafe { dst.put_unchecked::<Block>(i * src.len(), src, pe) };
        }
    }
}
