//! The order in which a worker resumes its fibers after each round of switch points:
//! thread index order by default, or an order drawn from `SYMMEM_EXEC_SEED`. Either way
//! it depends on nothing but the seed and the sequence of rounds, so a seed replays the
//! same interleaving of a block's threads.

use symmem_sync::split_mix::SplitMix64;

/// A worker's lane order.
pub(super) struct LaneOrder {
    /// The seeded stream; `None` = index order.
    rng: Option<SplitMix64>,
}

impl LaneOrder {
    /// Index order (`seed` `None`), or the order drawn from `seed` for worker `worker`
    /// (workers of one launch draw different orders from one seed).
    pub(super) fn new(seed: Option<u64>, worker: usize) -> Self {
        LaneOrder {
            rng: seed
                .map(|s| SplitMix64::new(s ^ (worker as u64).wrapping_mul(0xA076_1D64_78BD_642F))),
        }
    }

    /// Puts `lanes` (indices, kept in ascending order by the caller) in this round's
    /// order: unchanged by default, else a seeded Fisher–Yates shuffle.
    pub(super) fn arrange(&mut self, lanes: &mut [usize]) {
        let Some(rng) = self.rng.as_mut() else {
            return;
        };
        for i in (1..lanes.len()).rev() {
            let j = rng.up_to(i as u64) as usize;
            lanes.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rounds(seed: Option<u64>) -> Vec<Vec<usize>> {
        let mut order = LaneOrder::new(seed, 0);
        (0..4)
            .map(|_| {
                let mut lanes: Vec<usize> = (0..8).collect();
                order.arrange(&mut lanes);
                lanes
            })
            .collect()
    }

    #[test]
    fn index_order_by_default_and_seeds_replay() {
        assert!(rounds(None)
            .iter()
            .all(|r| *r == (0..8).collect::<Vec<_>>()));
        assert_eq!(rounds(Some(7)), rounds(Some(7)));
        assert_ne!(rounds(Some(7)), rounds(Some(8)));
        for r in rounds(Some(7)) {
            let mut sorted = r.clone();
            sorted.sort();
            assert_eq!(sorted, (0..8).collect::<Vec<_>>(), "a permutation");
        }
    }
}
