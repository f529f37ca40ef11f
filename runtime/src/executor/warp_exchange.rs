//! The rendezvous behind the warp intrinsics on the CPU executor: the lanes of a mask
//! meet in a *round*, each leaving its value, and each leaves with every value once the
//! whole mask has arrived. Rounds of disjoint masks (the two sides of a divergent branch)
//! run side by side; lanes that pass overlapping but different masks, a mask naming a
//! lane the warp lacks or one that has exited, or a caller outside its own mask fail the
//! launch with a message saying which (CUDA leaves each undefined).
//!
//! Every fiber of a block runs on one OS thread, so this is plain cells. A waiting lane
//! sleeps until the warp's completion count moves (a round completed or a lane exited),
//! then looks at its round again.

use std::cell::{Cell, RefCell};

use symmem_device::WARP_SIZE;

/// One meeting of the lanes of `mask`.
struct Round {
    /// Tells rounds apart (indices move as finished rounds go).
    id: u64,
    mask: u32,
    /// The lanes that have left their value.
    arrived: u32,
    /// The lanes that have not yet taken the values of the completed round.
    unread: u32,
    values: [u64; WARP_SIZE as usize],
}

/// The exchanges of one warp.
pub(super) struct WarpExchange {
    /// The lanes the warp has (fewer in a block's partial last warp).
    lanes: u32,
    exited: Cell<u32>,
    rounds: RefCell<Vec<Round>>,
    next_id: Cell<u64>,
    /// Rounds completed plus lanes exited: what a waiting lane waits to see move.
    events: Cell<u64>,
}

impl WarpExchange {
    /// The exchanges of a warp of `width` lanes.
    pub(super) fn new(width: u32) -> Self {
        WarpExchange {
            lanes: if width >= WARP_SIZE {
                u32::MAX
            } else {
                (1 << width) - 1
            },
            exited: Cell::new(0),
            rounds: RefCell::new(Vec::new()),
            next_id: Cell::new(0),
            events: Cell::new(0),
        }
    }

    /// The lanes that have not exited.
    pub(super) fn active(&self) -> u32 {
        self.lanes & !self.exited.get()
    }

    /// The count a waiting lane waits to see change.
    pub(super) fn events(&self) -> u64 {
        self.events.get()
    }

    /// Whether anything happened since [`Self::events`] returned `seen`.
    pub(super) fn is_open(&self, seen: u64) -> bool {
        self.events.get() != seen
    }

    /// Lane `lane` returned from the kernel.
    pub(super) fn depart(&self, lane: u32) {
        self.exited.set(self.exited.get() | 1 << lane);
        self.events.set(self.events.get() + 1);
    }

    /// Lane `lane` leaves `value` in the open round of `mask` (opening one if none);
    /// returns the round's id, or what is wrong with the call.
    pub(super) fn join(&self, lane: u32, mask: u32, value: u64) -> Result<u64, String> {
        if mask & 1 << lane == 0 {
            return Err(format!(
                "lane {lane} called a warp intrinsic with the mask {mask:#010x}, which does not name it"
            ));
        }
        let missing = mask & !self.lanes;
        if missing != 0 {
            return Err(format!(
                "the mask {mask:#010x} names lanes {missing:#010x}, which this warp of {} lanes does not have",
                self.lanes.count_ones()
            ));
        }
        let exited = mask & self.exited.get();
        if exited != 0 {
            return Err(format!(
                "the mask {mask:#010x} names lanes {exited:#010x}, which have exited"
            ));
        }
        let mut rounds = self.rounds.borrow_mut();
        let open = rounds
            .iter_mut()
            .find(|r| r.arrived != r.mask && r.mask & mask != 0);
        let round = match open {
            Some(r) if r.mask != mask => {
                return Err(format!(
                    "lanes of one warp intrinsic disagree on its mask: {:#010x} and {mask:#010x}",
                    r.mask
                ))
            }
            Some(r) => r,
            None => {
                let id = self.next_id.get();
                self.next_id.set(id + 1);
                rounds.push(Round {
                    id,
                    mask,
                    arrived: 0,
                    unread: 0,
                    values: [0; WARP_SIZE as usize],
                });
                rounds.last_mut().expect("just pushed")
            }
        };
        debug_assert_eq!(
            round.arrived & 1 << lane,
            0,
            "a lane is in one round at a time"
        );
        round.values[lane as usize] = value;
        round.arrived |= 1 << lane;
        if round.arrived == mask {
            round.unread = mask;
            self.events.set(self.events.get() + 1);
        }
        Ok(round.id)
    }

    /// The values of round `id` for lane `lane` once every lane of its mask has arrived
    /// (`None` until then), or why it never will (a lane of its mask exited).
    pub(super) fn collect(&self, id: u64, lane: u32) -> Result<Option<[u64; 32]>, String> {
        let mut rounds = self.rounds.borrow_mut();
        let at = rounds
            .iter()
            .position(|r| r.id == id)
            .expect("a lane's round stays until the lane has read it");
        let round = &mut rounds[at];
        if round.arrived != round.mask {
            let gone = round.mask & !round.arrived & self.exited.get();
            if gone != 0 {
                return Err(format!(
                    "lanes {gone:#010x} of the mask {:#010x} exited without calling the warp intrinsic that lanes {:#010x} wait in",
                    round.mask, round.arrived
                ));
            }
            return Ok(None);
        }
        let values = round.values;
        round.unread &= !(1 << lane);
        if round.unread == 0 {
            rounds.swap_remove(at);
        }
        Ok(Some(values))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disjoint_masks_meet_apart_and_bad_masks_are_named() {
        let x = WarpExchange::new(8);
        let a = x.join(0, 0b0011, 10).unwrap();
        let b = x.join(2, 0b1100, 30).unwrap();
        assert_ne!(a, b);
        assert_eq!(x.collect(a, 0).unwrap(), None);
        x.join(1, 0b0011, 11).unwrap();
        let v = x.collect(a, 0).unwrap().expect("complete");
        assert_eq!(&v[..2], &[10, 11]);
        assert!(x.join(1, 0b0110, 0).unwrap_err().contains("disagree"));
        assert!(x
            .join(4, 0b1_0000_0000, 0)
            .unwrap_err()
            .contains("does not name it"));
        assert!(x
            .join(4, 0x1_0010, 0)
            .unwrap_err()
            .contains("which this warp of 8 lanes does not have"));
        x.depart(3);
        assert!(x
            .collect(b, 2)
            .unwrap_err()
            .contains("exited without calling"));
        assert!(x.join(5, 0b10_1000, 0).unwrap_err().contains("have exited"));
        assert_eq!(x.active(), 0b1111_0111);
    }
}
