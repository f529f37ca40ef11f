//! Kernels of the distributed transpose example (`examples/transpose.rs`).
//!
//! The matrix `M` is `n × n` f64 with `n = nb × n_pes`, distributed by column blocks: PE
//! `p` holds `A_p[r][c] = M[r][p·nb + c]` (`n` rows of `nb`, row-major). The transpose is
//! distributed the same way: PE `p` accumulates `out_p[r][c] += M[p·nb + c][r]`. Element
//! `r` of that row lives on PE `j = r / nb`, so PE `p` needs from every PE `j` the
//! `nb × nb` block `D_j[a][b] = A_j[p·nb + a][b]` (rows `p·nb..` of `A_j`, contiguous), and
//! adds its transpose at rows `j·nb..` of `out_p`: `out_p[j·nb + b][a] += D_j[a][b]`.
//!
//! The transposes go by tiles of 32 × 32, one warp per tile and one lane per row of the
//! source tile: on a GPU a warp writes 32 neighbouring elements of `out` at each step
//! (coalesced). Each tile ends with `sync_warp`: on the CPU executor, where a lane runs
//! until its next switch point, that makes the 32 lanes go over a tile together while
//! its 16 KiB are in L1, instead of each lane walking the whole matrix alone.
//!
//! The kernels take typed symmetric slices ([`SymSlice`]) and are `safe fn`s: the get
//! and every block they hand to the tile loop are checked against the slices once, and
//! only the tile loop (indices bounded by `nb` at each step) and the fused kernel's peer
//! pointer use raw pointers, in `unsafe` blocks that say why they are in range.

use symmem_device::{
    block_dim, block_rank, grid_dim, my_pe, n_pes, ptr, sync_threads, sync_warp, thread_rank,
    Block, SymSlice, WARP_SIZE,
};

/// Side of the tiles: a warp.
const TILE: usize = WARP_SIZE as usize;

/// Which warp of a set of `warps` warps this thread is in, and its lane.
#[derive(Clone, Copy)]
struct Warp {
    warp: usize,
    warps: usize,
    lane: usize,
}

impl Warp {
    /// This thread's warp among all warps of the grid.
    #[inline(always)]
    fn of_grid() -> Warp {
        let per_block = (block_dim().volume() as usize).div_ceil(TILE);
        let block = Warp::of_block();
        Warp {
            warp: block_rank() as usize * per_block + block.warp,
            warps: grid_dim().volume() as usize * per_block,
            lane: block.lane,
        }
    }

    /// This thread's warp among the warps of its block.
    #[inline(always)]
    fn of_block() -> Warp {
        let t = thread_rank() as usize;
        Warp {
            warp: t / TILE,
            warps: (block_dim().volume() as usize).div_ceil(TILE),
            lane: t % TILE,
        }
    }
}

/// Adds the transpose of rows `a0..a1` of the `nb × nb` row-major block `src` to the
/// `nb × nb` block `out`: `out[b][a] += src[a][b]`, tile by tile over the warps of `w`.
///
/// Not inlined: inlined into `transpose_get`, rustc 1.95.0 at opt-level >= 2 miscompiles
/// the tile loop into a division by zero (SIGFPE); `docs/rustc_div_miscompile_repro.rs`
/// reproduces it without symmem.
///
/// # Safety
/// `src` and `out` hold `nb²` elements; `a1 <= nb`.
#[inline(never)]
unsafe fn add_transposed(src: *const f64, out: *mut f64, nb: usize, a0: usize, a1: usize, w: Warp) {
    let (tiles_a, tiles_b) = ((a1 - a0).div_ceil(TILE), nb.div_ceil(TILE));
    let mut tile = w.warp;
    while tile < tiles_a * tiles_b {
        let a = a0 + (tile % tiles_a) * TILE + w.lane;
        let b0 = (tile / tiles_a) * TILE;
        if a < a1 {
            let mut b = b0;
            while b < nb.min(b0 + TILE) {
                // SAFETY: `a < nb` and `b < nb`, inside both blocks of nb² elements.
                unsafe { *out.add(b * nb + a) += *src.add(a * nb + b) };
                b += 1;
            }
        }
        tile += w.warps;
        // Every lane of the warp runs the same tiles, so all of them reach this.
        sync_warp();
    }
}

symmem_device::kernel! {
    /// Local transpose and accumulate after `alltoall`: staged block `j` (elements
    /// `j·nb²..` of `staged`, the `D_j` that PE `j` sent) is transposed and added to block
    /// `j` of `out`, for `j < blocks`.
    pub safe fn transpose_staged(staged: SymSlice<f64>, out: SymSlice<f64>, nb: usize, blocks: usize) {
        let w = Warp::of_grid();
        let mut j = 0;
        while j < blocks {
            let (src, dst) = (staged.sub(j * nb * nb, nb * nb), out.sub(j * nb * nb, nb * nb));
            // SAFETY: both are checked sub-slices of nb² elements.
            unsafe { add_transposed(src.as_ptr(), dst.as_ptr(), nb, 0, nb, w) };
            j += 1;
        }
    }

    /// Get, then transpose, interleaved: for each PE `j` (starting at this PE's right
    /// neighbour), each block gets its share of the rows of `D_j` from `a` on `j` into
    /// the same rows of `staging` (`nb²` elements) with `get::<Block>`, then adds their
    /// transpose to `out`. Works to any PE, through the proxy channel when `j` has no
    /// P2P path.
    pub safe fn transpose_get(a: SymSlice<f64>, staging: SymSlice<f64>, out: SymSlice<f64>, nb: usize) {
        let (me, n) = (my_pe() as usize, n_pes() as usize);
        let (blocks, block) = (grid_dim().volume() as usize, block_rank() as usize);
        let rows = nb.div_ceil(blocks);
        let (r0, r1) = ((block * rows).min(nb), ((block + 1) * rows).min(nb));
        let stage = staging.sub(0, nb * nb);
        let mut i = 1;
        while i <= n {
            let j = (me + i) % n;
            // A block left without rows (grid not dividing nb) skips as a whole, so the
            // barrier inside the block get sees all of its threads or none.
            if r1 > r0 {
                a.get::<Block>((me * nb + r0) * nb, stage.sub(r0 * nb, (r1 - r0) * nb), j as u32);
            }
            // This block's rows of D_j, transposed, by the block's warps.
            let dst = out.sub(j * nb * nb, nb * nb);
            // SAFETY: `stage` and `dst` are checked slices of nb² elements; `r1 <= nb`.
            unsafe { add_transposed(stage.as_ptr(), dst.as_ptr(), nb, r0, r1, Warp::of_block()) };
            // The next get overwrites these rows of `staging`.
            sync_threads();
            i += 1;
        }
    }

    /// Fused transpose: loads every PE's `D_j` straight from its memory through
    /// `ptr(a, j)` and adds the transpose to `out`, with no staging copy. Every PE must be
    /// P2P reachable (`ptr` not null); the host checks before launching.
    pub safe fn transpose_fused(a: SymSlice<f64>, out: SymSlice<f64>, nb: usize) {
        let (me, n) = (my_pe() as usize, n_pes() as usize);
        let w = Warp::of_grid();
        let block = a.sub(me * nb * nb, nb * nb);
        let mut i = 1;
        while i <= n {
            let j = (me + i) % n;
            let dst = out.sub(j * nb * nb, nb * nb);
            // SAFETY: `block` is a checked symmetric range of nb² elements, so its copy on
            // `j` (every PE is P2P reachable, `j < n_pes`) holds nb² as well; `dst` is a
            // checked slice of nb².
            unsafe {
                let remote = ptr(block.as_ptr(), j as u32).cast_const();
                add_transposed(remote, dst.as_ptr(), nb, 0, nb, w);
            }
            i += 1;
        }
    }
}
