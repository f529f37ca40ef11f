//! Thread geometry, block and warp barriers, large launches and cooperative launches.

use symmem_device::*;

use crate::{global_thread, pattern};

/// u32 fields [`geometry()`] records per thread.
pub const GEOMETRY_FIELDS: usize = 17;

/// What thread `t` of block `b` stores in round `r` of [`sync_exchange()`].
#[inline(always)]
pub const fn exchange_value(r: u32, b: u32, t: u32) -> u32 {
    r.wrapping_mul(1_000_003)
        .wrapping_add(b.wrapping_mul(1009))
        .wrapping_add(t)
}

kernel! {
    /// Every thread stores, at record `global_thread` of `out` (host,
    /// [`GEOMETRY_FIELDS`] u32s per thread): `thread_idx`, `block_idx`, `block_dim`,
    /// `grid_dim` (x, y, z each), `thread_rank`, `block_rank`, `lane_id`, `warp_id`,
    /// `warp_width`.
    pub fn geometry(out: *mut u32) {
        let rec = out.add(global_thread() as usize * GEOMETRY_FIELDS);
        let dims = [thread_idx(), block_idx(), block_dim(), grid_dim()];
        for (k, d) in dims.iter().enumerate() {
            rec.add(3 * k).write(d.x);
            rec.add(3 * k + 1).write(d.y);
            rec.add(3 * k + 2).write(d.z);
        }
        rec.add(12).write(thread_rank());
        rec.add(13).write(block_rank());
        rec.add(14).write(lane_id());
        rec.add(15).write(warp_id());
        rec.add(16).write(warp_width());
    }

    /// `sync_threads` and `sync_warp` exchanging values over `rounds` rounds. In round
    /// `r` every thread stores `exchange_value(r, block, t)` in a double-buffered block
    /// scratch area, `sync_threads`, and adds the value of thread `(t + r) % B`; then the
    /// same within its warp with `sync_warp` (the partner is lane `(lane + r) % width`).
    /// `scratch` (host): `4 * B` u32s per block. Thread `t` stores its two sums in
    /// `out[2 * global_thread]` and `out[2 * global_thread + 1]` (host).
    pub fn sync_exchange(scratch: *mut u32, rounds: u32, out: *mut u64) {
        let (b, t, threads) = (block_rank(), thread_rank(), block_dim().volume());
        let (lane, width) = (lane_id(), warp_width());
        let warp_base = t - lane;
        let area = scratch.add((4 * threads * b) as usize);
        let (mut block_sum, mut warp_sum) = (0u64, 0u64);
        for r in 0..rounds {
            let buf = area.add(((r % 2) * threads) as usize);
            buf.add(t as usize).write(exchange_value(r, b, t));
            sync_threads();
            block_sum += buf.add(((t + r) % threads) as usize).read() as u64;
            let wbuf = area.add(((2 + r % 2) * threads) as usize);
            wbuf.add(t as usize).write(exchange_value(r, b, t));
            sync_warp();
            let partner = warp_base + (lane + r) % width;
            warp_sum += wbuf.add(partner as usize).read() as u64;
        }
        let g = global_thread() as usize;
        out.add(2 * g).write(block_sum);
        out.add(2 * g + 1).write(warp_sum);
    }

    /// A large launch: every thread adds 1 to its own entry of `ran` (host, one u32 per
    /// thread of the grid) and to `counter` (sym) on every PE, and block `b` puts its
    /// `chunk` u64s of `src` (host) into region `my_pe * blocks + b` of the right
    /// neighbour's `dst` (sym) with `put_block`.
    pub fn big_grid(dst: *mut u64, src: *const u64, chunk: usize, counter: *mut u64, ran: *mut u32) {
        let (me, n, b, blocks) = (my_pe(), n_pes(), block_rank(), grid_dim().volume());
        let mine = ran.add(global_thread() as usize);
        mine.write(mine.read() + 1);
        for pe in 0..n {
            atomic_inc(counter, (me + pe) % n);
        }
        let region = dst.add((me * blocks + b) as usize * chunk);
        put_block(region, src.add(b as usize * chunk), chunk, (me + 1) % n);
    }

    /// Adds 1 to `counter` (sym) on this PE from every thread: shows whether (and how
    /// often) a launch ran.
    pub fn count_threads(counter: *mut u64) {
        atomic_inc(counter, my_pe());
    }

    /// [`count_threads`] declared for blocks of at most 64 threads: a bigger block is
    /// refused before it runs.
    pub fn count_threads_64(counter: *mut u64) max_threads(64) {
        atomic_inc(counter, my_pe());
    }

    /// A cooperative launch whose blocks wait for each other, in two parts. First a
    /// chain: block `b` waits until block `b + 1` has set its flag, takes a position
    /// with `fetch_inc` on `words[G]` and stores it in `order[b]` (host), then sets its own
    /// flag `words[b]` (sym, `G + 2` u32s). Then `rounds` grid-wide barriers built on
    /// `words[G + 1]`: in round `r` thread `t` of block `b` stores `pattern(me, r, g)` in
    /// `data[g]` (host, one u64 per thread of the grid), all blocks meet, and the thread
    /// checks the entry of the same thread in the next block. `bad[g]` (host): mismatches.
    pub fn coop_blocks(words: *mut u32, order: *mut u32, data: *mut u64, rounds: u32, bad: *mut u32) {
        let (me, t, b, blocks) = (my_pe(), thread_rank(), block_rank(), grid_dim().volume());
        let threads = block_dim().volume();
        if t == 0 {
            if b + 1 < blocks {
                wait_until(words.add(b as usize + 1), Cmp::Eq, 1);
            }
            order.add(b as usize).write(atomic_fetch_inc(words.add(blocks as usize), me));
            atomic_set(words.add(b as usize), 1, me);
        }
        sync_threads();
        let g = global_thread();
        let next = ((b + 1) % blocks) * threads + t;
        let arrived = words.add(blocks as usize + 1);
        let mut mismatches = 0;
        for r in 0..rounds {
            data.add(g as usize).write(pattern(me, r, g as usize));
            sync_threads();
            if t == 0 {
                atomic_inc(arrived, me);
                wait_until(arrived, Cmp::Ge, (2 * r + 1) * blocks);
            }
            sync_threads();
            if data.add(next as usize).read() != pattern(me, r, next as usize) {
                mismatches += 1;
            }
            // Nobody overwrites `data` for round r + 1 before every block has read it.
            sync_threads();
            if t == 0 {
                atomic_inc(arrived, me);
                wait_until(arrived, Cmp::Ge, (2 * r + 2) * blocks);
            }
            sync_threads();
        }
        bad.add(g as usize).write(mismatches);
    }
}
