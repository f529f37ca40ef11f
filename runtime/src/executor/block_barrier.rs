//! Block and warp barriers of one block. Every thread of a block is a fiber of the same
//! OS thread, so a barrier is a few plain counters: no atomics, no locks. A thread that
//! arrives before the others suspends its fiber until the last one arrives.

use std::cell::Cell;

use symmem_device::{Dim3, WARP_SIZE};

/// Which barrier a thread waits at (for deadlock reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Group {
    /// `sync_threads` (and the `_block` operations).
    Block,
    /// `sync_warp` (and the `_warp` operations) of this warp.
    Warp(u32),
}

/// A reusable barrier for a fixed group of fibers.
pub(super) struct Barrier {
    size: usize,
    /// Threads waiting in the current generation.
    arrived: Cell<usize>,
    /// Threads of the group whose kernel has returned: as on a GPU, an exited thread
    /// counts as arrived at every later barrier of its group.
    departed: Cell<usize>,
    /// Incremented each time the barrier opens.
    generation: Cell<u64>,
}

impl Barrier {
    fn new(size: usize) -> Self {
        Barrier {
            size,
            arrived: Cell::new(0),
            departed: Cell::new(0),
            generation: Cell::new(0),
        }
    }

    /// Opens the barrier if everyone is in (or gone).
    fn open_if_complete(&self) -> bool {
        let arrived = self.arrived.get();
        if arrived == 0 || arrived + self.departed.get() < self.size {
            return false;
        }
        self.arrived.set(0);
        self.generation.set(self.generation.get() + 1);
        true
    }

    /// Counts the calling thread in. Returns `None` if that opened the barrier, else the
    /// generation to wait out with [`Self::is_open`].
    pub(super) fn arrive(&self) -> Option<u64> {
        let generation = self.generation.get();
        self.arrived.set(self.arrived.get() + 1);
        (!self.open_if_complete()).then_some(generation)
    }

    /// Whether the barrier has opened since [`Self::arrive`] returned `generation`.
    pub(super) fn is_open(&self, generation: u64) -> bool {
        self.generation.get() != generation
    }

    /// Marks one thread of the group as exited: it counts as arrived from now on.
    fn depart(&self) {
        self.departed.set(self.departed.get() + 1);
        self.open_if_complete();
    }
}

/// The barriers of one block: the block's, and one per warp (the last may be partial).
pub(super) struct BlockBarriers {
    block: Barrier,
    warps: Vec<Barrier>,
}

impl BlockBarriers {
    /// Barriers for a block of `threads` threads.
    pub(super) fn new(threads: u32) -> Self {
        let warps = threads.div_ceil(WARP_SIZE);
        BlockBarriers {
            block: Barrier::new(threads as usize),
            warps: (0..warps)
                .map(|w| Barrier::new((threads - w * WARP_SIZE).min(WARP_SIZE) as usize))
                .collect(),
        }
    }

    /// The barrier of `group`.
    pub(super) fn get(&self, group: Group) -> &Barrier {
        match group {
            Group::Block => &self.block,
            Group::Warp(w) => &self.warps[w as usize],
        }
    }

    /// The thread `thread` of a block shaped `block_dim` returned from the kernel.
    pub(super) fn depart(&self, block_dim: Dim3, thread: Dim3) {
        self.block.depart();
        self.warps[(block_dim.linear(thread) / WARP_SIZE) as usize].depart();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_arrival_opens_and_departures_count_as_arrived() {
        let b = Barrier::new(3);
        let g = b.arrive().expect("1 of 3 waits");
        assert!(!b.is_open(g));
        b.depart();
        assert!(!b.is_open(g));
        assert_eq!(
            b.arrive(),
            None,
            "the third (1 arrived + 1 departed + me) opens it"
        );
        assert!(b.is_open(g));
        // Next generation: 2 live threads, 1 departed.
        let g = b.arrive().expect("1 of 2 live waits");
        b.depart();
        assert!(b.is_open(g), "the last live thread exiting opens it");
    }

    #[test]
    fn partial_last_warp() {
        let bb = BlockBarriers::new(40);
        assert_eq!(bb.warps.len(), 2);
        assert_eq!(bb.get(Group::Warp(1)).size, 8);
        assert_eq!(bb.get(Group::Block).size, 40);
    }
}
