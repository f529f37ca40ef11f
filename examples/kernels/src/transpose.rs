//! Kernels of the distributed transpose example (`examples/transpose.rs`).
//!
//! The matrix `M` is `n × n` f64 with `n = nb × n_pes`, distributed by column blocks: PE
//! `p` holds `A_p[r][c] = M[r][p·nb + c]` (`n` rows of `nb`, row-major). The transpose is
//! distributed the same way: PE `p` accumulates `out_p[r][c] += M[p·nb + c][r]`. Element
//! `r` of that row lives on PE `j = r / nb`, so PE `p` needs from every PE `j` the
//! `nb × nb` block `D_j[a][b] = A_j[p·nb + a][b]` (rows `p·nb..` of `A_j`, contiguous), and
//! adds its transpose at rows `j·nb..` of `out_p`: `out_p[j·nb + b][a] += D_j[a][b]`.
//!
//! Every kernel walks the elements of `out` in order (grid-stride), so writes are
//! contiguous and reads of a block are strided by `nb`.

use symmem_device::{block_dim, block_rank, get_block, grid_dim, my_pe, n_pes, ptr, sync_threads, thread_rank};

/// This thread's index in the grid and the grid's thread count.
#[inline(always)]
fn grid_thread() -> (usize, usize) {
    let threads = block_dim().volume() as usize;
    (
        block_rank() as usize * threads + thread_rank() as usize,
        grid_dim().volume() as usize * threads,
    )
}

/// Adds the transpose of the `nb × nb` row-major block `src` to block `j` of `out`
/// (`out[j·nb + b][a] += src[a][b]`), `nb` elements a row, elements `first, first +
/// stride, …` of the block.
///
/// # Safety
/// `src` holds `nb²` elements; `out` holds `(j + 1)·nb²`.
#[inline(always)]
unsafe fn add_transposed(src: *const f64, out: *mut f64, nb: usize, j: usize, first: usize, stride: usize) {
    // SAFETY: block `j` of `out` is in bounds (caller contract).
    let out = unsafe { out.add(j * nb * nb) };
    let mut e = first;
    while e < nb * nb {
        let (b, a) = (e / nb, e % nb);
        // SAFETY: `e` and `a·nb + b` are below `nb²`, the size of both blocks.
        unsafe { *out.add(e) += *src.add(a * nb + b) };
        e += stride;
    }
}

symmem_device::kernel! {
    /// Local transpose and accumulate after `alltoall`: staged block `j` (at
    /// `staged + j·nb²`, the `D_j` that PE `j` sent) is transposed and added to block `j`
    /// of `out`, for `j < blocks`.
    pub fn transpose_staged(staged: *const f64, out: *mut f64, nb: usize, blocks: usize) {
        let (tid, threads) = grid_thread();
        let mut j = 0;
        while j < blocks {
            add_transposed(staged.add(j * nb * nb), out, nb, j, tid, threads);
            j += 1;
        }
    }

    /// Get, then transpose, interleaved: for each PE `j` (starting at this PE's right
    /// neighbour), each block `get_block`s its share of the rows of `D_j` from symmetric
    /// `a` on `j` into the same rows of symmetric `staging` (`nb²` elements), then adds
    /// their transpose to `out`. Works to any PE, through the proxy channel when `j` has
    /// no P2P path.
    pub fn transpose_get(a: *const f64, staging: *mut f64, out: *mut f64, nb: usize) {
        let (me, n) = (my_pe() as usize, n_pes() as usize);
        let (blocks, block) = (grid_dim().volume() as usize, block_rank() as usize);
        let rows = nb.div_ceil(blocks);
        let (r0, r1) = ((block * rows).min(nb), ((block + 1) * rows).min(nb));
        let (tid, threads) = (thread_rank() as usize, block_dim().volume() as usize);
        let mut i = 1;
        while i <= n {
            let j = (me + i) % n;
            get_block(staging.add(r0 * nb), a.add((me * nb + r0) * nb), (r1 - r0) * nb, j as u32);
            // This block's rows of D_j, transposed: out[j·nb + b][a] for a in r0..r1.
            let out_j = out.add(j * nb * nb);
            let width = r1 - r0;
            let mut e = tid;
            while e < width * nb {
                let (b, ra) = (e / width, r0 + e % width);
                *out_j.add(b * nb + ra) += *staging.add(ra * nb + b);
                e += threads;
            }
            // The next get overwrites these rows of `staging`.
            sync_threads();
            i += 1;
        }
    }

    /// Fused transpose: loads every PE's `D_j` straight from its memory through
    /// `ptr(a, j)` and adds the transpose to `out`, with no staging copy. Every PE must be
    /// P2P reachable (`ptr` not null); the host checks before launching.
    pub fn transpose_fused(a: *const f64, out: *mut f64, nb: usize) {
        let (me, n) = (my_pe() as usize, n_pes() as usize);
        let (tid, threads) = grid_thread();
        let mut i = 1;
        while i <= n {
            let j = (me + i) % n;
            let remote = ptr(a, j as u32).cast_const();
            add_transposed(remote.add(me * nb * nb), out, nb, j, tid, threads);
            i += 1;
        }
    }
}
