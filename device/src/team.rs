//! The device handle of a team ([`DeviceTeam`], NVSHMEM's `nvshmem_team_t` in a kernel):
//! a small `#[repr(C)]` value the host gets from `Team::device` and passes to a kernel
//! as an argument, holding what the device collectives ([`crate::team_sync`] and the
//! others) need.
//!
//! ```text
//! offset  field
//!  0      start          u32   world PE of team PE 0
//!  4      stride         u32   world PE distance between consecutive team PEs (>= 1)
//!  8      size           u32   PEs in the team
//! 12      my_index       u32   this PE's number in the team
//! 16      flags_off      u64   heap offset of the team's barrier flags (one u64 per round)
//! 24      epoch_off      u64   heap offset of this PE's barrier epoch word for the team
//! 32      scratch_off    u64   heap offset of the team's collective scratch
//! 40      scratch_words  u32   u64 words of one PE's part of a scratch half
//! 44      scratch_parts  u32   parts per scratch half (the job's PE count)
//! 48                           (size)
//! ```
//!
//! Every offset lies in the team's *slot* of the symmetric heap, at the same place on
//! every member. The barrier flags and the epoch word are the ones the host's
//! `Team::sync` uses, so host and device barriers on one team may follow each other in
//! any order: both continue the same epoch sequence. Scratch half `h`, part `i` starts at
//! `scratch_off + (h * scratch_parts + i) * scratch_words * 8`.

/// A team as a kernel sees it. Only teams whose PEs are evenly spaced in the world
/// (`start + stride * i`) have one: TEAM_WORLD, strided splits, 2-D splits, and TEAM_NODE
/// when its PEs are evenly spaced.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, bytemuck::Pod, bytemuck::Zeroable)]
pub struct DeviceTeam {
    /// World PE of team PE 0.
    pub start: u32,
    /// World PE distance between consecutive team PEs (at least 1).
    pub stride: u32,
    /// PEs in the team.
    pub size: u32,
    /// This PE's number in the team.
    pub my_index: u32,
    /// Heap offset of the team's barrier flags: one u64 per dissemination round.
    pub flags_off: u64,
    /// Heap offset of this PE's barrier epoch word for the team (local; read and advanced
    /// by every host or device barrier on the team).
    pub epoch_off: u64,
    /// Heap offset of the team's collective scratch: two halves of `scratch_parts` parts
    /// of `scratch_words` u64s each.
    pub scratch_off: u64,
    /// u64 words of one PE's part of a scratch half.
    pub scratch_words: u32,
    /// Parts per scratch half.
    pub scratch_parts: u32,
}

// The layout table above is the contract with every PTX module ever built: check it.
const _: () = {
    use core::mem::{align_of, offset_of, size_of};
    assert!(size_of::<DeviceTeam>() == 48);
    assert!(align_of::<DeviceTeam>() == 8);
    assert!(offset_of!(DeviceTeam, start) == 0);
    assert!(offset_of!(DeviceTeam, stride) == 4);
    assert!(offset_of!(DeviceTeam, size) == 8);
    assert!(offset_of!(DeviceTeam, my_index) == 12);
    assert!(offset_of!(DeviceTeam, flags_off) == 16);
    assert!(offset_of!(DeviceTeam, epoch_off) == 24);
    assert!(offset_of!(DeviceTeam, scratch_off) == 32);
    assert!(offset_of!(DeviceTeam, scratch_words) == 40);
    assert!(offset_of!(DeviceTeam, scratch_parts) == 44);
};

impl DeviceTeam {
    /// This PE's number in the team (`nvshmem_team_my_pe`).
    #[inline(always)]
    pub const fn my_pe(&self) -> u32 {
        self.my_index
    }

    /// The number of PEs in the team (`nvshmem_team_n_pes`).
    #[inline(always)]
    pub const fn n_pes(&self) -> u32 {
        self.size
    }

    /// The world PE of team PE `index` (`nvshmem_team_translate_pe` to TEAM_WORLD), or
    /// `None` when `index` is not in the team.
    #[inline(always)]
    pub const fn world_pe(&self, index: u32) -> Option<u32> {
        if index < self.size {
            Some(self.start + self.stride * index)
        } else {
            None
        }
    }

    /// Heap offset of part `part` of scratch half `half`.
    #[inline(always)]
    pub const fn scratch_part_off(&self, half: u32, part: u32) -> u64 {
        self.scratch_off
            + (half as u64 * self.scratch_parts as u64 + part as u64)
                * self.scratch_words as u64
                * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_members_and_scratch_parts() {
        let t = DeviceTeam {
            start: 1,
            stride: 2,
            size: 3,
            my_index: 1,
            flags_off: 64,
            epoch_off: 96,
            scratch_off: 1024,
            scratch_words: 64,
            scratch_parts: 6,
        };
        assert_eq!((t.my_pe(), t.n_pes()), (1, 3));
        assert_eq!(
            [t.world_pe(0), t.world_pe(2), t.world_pe(3)],
            [Some(1), Some(5), None]
        );
        assert_eq!(t.scratch_part_off(0, 2), 1024 + 2 * 512);
        assert_eq!(t.scratch_part_off(1, 0), 1024 + 6 * 512);
    }
}
