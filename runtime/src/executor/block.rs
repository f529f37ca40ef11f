//! What the threads of one block share on the CPU executor: its barriers, its warps'
//! exchanges and its shared memory, installed for the running fiber so that the
//! executor's calls from kernel threads find their block.

use std::cell::Cell;

use symmem_device::{Dim3, WARP_SIZE};

use super::block_barrier::{BlockBarriers, Group};
use super::block_memory::BlockMemory;
use super::warp_exchange::WarpExchange;

/// What a thread waits for when it gives way at a group operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Wait {
    /// A barrier of its block.
    Barrier(Group),
    /// A warp intrinsic's exchange in this warp.
    Exchange(u32),
}

/// One block's shared state.
pub(super) struct Block {
    pub(super) barriers: BlockBarriers,
    exchanges: Vec<WarpExchange>,
    pub(super) memory: BlockMemory,
}

impl Block {
    /// A block of `threads` threads with `shared_bytes` of dynamic shared memory.
    pub(super) fn new(threads: u32, shared_bytes: usize) -> Self {
        Block {
            barriers: BlockBarriers::new(threads),
            exchanges: (0..threads.div_ceil(WARP_SIZE))
                .map(|w| WarpExchange::new((threads - w * WARP_SIZE).min(WARP_SIZE)))
                .collect(),
            memory: BlockMemory::new(shared_bytes),
        }
    }

    /// The exchanges of warp `warp`.
    pub(super) fn exchange(&self, warp: u32) -> &WarpExchange {
        &self.exchanges[warp as usize]
    }

    /// Whether what a thread waits for, from `generation` on, has happened.
    pub(super) fn is_open(&self, wait: Wait, generation: u64) -> bool {
        match wait {
            Wait::Barrier(group) => self.barriers.get(group).is_open(generation),
            Wait::Exchange(warp) => self.exchange(warp).is_open(generation),
        }
    }

    /// The thread `thread` of a block shaped `block_dim` returned from the kernel.
    pub(super) fn depart(&self, block_dim: Dim3, thread: Dim3) {
        self.barriers.depart(block_dim, thread);
        let t = block_dim.linear(thread);
        self.exchange(t / WARP_SIZE).depart(t % WARP_SIZE);
    }
}

std::thread_local! {
    /// The block whose fiber this thread is running.
    static RUNNING: Cell<*const Block> = const { Cell::new(std::ptr::null()) };
}

/// The running fiber's block.
///
/// # Panics
/// Outside a fiber of the executor.
pub(super) fn running() -> &'static Block {
    let p = RUNNING.with(Cell::get);
    assert!(
        !p.is_null(),
        "a block operation was reached outside the CPU executor's fibers"
    );
    // SAFETY: the worker installs the running fiber's block before resuming it and keeps
    // it alive and in place until every fiber of the block has ended; the 'static never
    // escapes the executor call that asks for it.
    unsafe { &*p }
}

/// Makes `block` that of the running fiber on this worker thread (null when no fiber
/// runs): the worker calls it before resuming a fiber and after the last ends.
pub(super) fn set_running(block: *const Block) {
    RUNNING.with(|b| b.set(block));
}
