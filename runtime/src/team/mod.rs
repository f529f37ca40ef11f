//! Teams (OpenSHMEM 1.5 §9.4, NVSHMEM `nvshmem_team_*`): ordered subsets of the PEs, with
//! their own PE numbering, created collectively by splitting a parent team.
//!
//! # Slots
//! The runtime reserves a *team area* in the symmetric heap at init, right after its own
//! reserved part: `SYMMEM_MAX_TEAMS` slots of the same size. Slot 0 belongs to
//! [`Runtime::team_world`], slot 1 to [`Runtime::team_node`]. A new team takes the lowest
//! slot that is free on every one of its members, so the slot, and everything in it, is at
//! the same heap offset on all of them: the slot is the team's own symmetric memory. Today
//! a slot holds the team's barrier flags, this PE's barrier epoch word, its two exchange
//! buffers, the two halves of the collectives' scratch (`SCRATCH_WORDS` words per PE
//! each, see [`collectives`]) and, last, two buffers of host collectives' argument
//! fingerprints (`FINGERPRINT_WORDS` words per PE each). [`Team::device`] hands the
//! offsets of the flags, epoch and scratch to kernels, whose collectives
//! (`symmem_device::team_sync` and the others) use them too; the fingerprints are the host
//! collectives' alone.
//!
//! # Creating a team is verified like allocation
//! Every PE of the parent calls the split with its arguments. Each puts its request (the
//! operation, its arguments and its set of free slots) into every parent PE's exchange
//! buffer in the parent's slot, completes the puts (`quiet`) and synchronizes the parent.
//! Then every PE reads the same requests: if they differ, every PE returns
//! [`Error::TeamMismatch`] naming which PEs asked for what and the differing argument;
//! otherwise every PE computes the same new teams and the same slots from the same data, so
//! argument errors and [`Error::TeamLimit`] are also returned on every PE alike (the
//! comparison and its error are `alike.rs`'s, shared with allocation and the host
//! collectives). Two
//! buffers alternate: a PE writes buffer `k % 2` for the parent's `k`-th exchange only after
//! the barrier of exchange `k - 1`, which every PE enters after reading exchange `k - 2`.
//!
//! # Barrier: dissemination over signals
//! `sync` is a dissemination barrier among the team's PEs: ceil(log2 n) rounds; in round `r`
//! team PE `i` adds 1 to flag `r` of team PE `i + 2^r` (a `signal_op`, so it works on every
//! route: mapped heaps, GPU heaps, and remote PEs over the transport) and waits until its
//! own flag `r` reaches the barrier's epoch. Flags count barriers, so signals may arrive in
//! any order and a partner one barrier ahead is harmless. The epoch (barriers this PE has
//! started on the team) is a word of the slot in this PE's own heap rather than a host
//! counter, so that device barriers on the team (which advance the same word) and host
//! barriers continue one sequence when they follow each other. A free slot's flags and
//! epoch are zero:
//! the heap starts zeroed, and `destroy` zeroes this PE's flags after the team's last
//! barrier, when no member can signal them any more; a member of a later team in that slot
//! signals them only after the creating exchange, which this PE enters after `destroy`.
//! A host barrier's signal also carries its call's identity, checked by the receiver, so
//! that different collectives never pair silently ([`identity`]).

mod alltoallv;
pub mod collectives;
mod identity;
mod on_stream;

use std::sync::atomic::Ordering;

use symmem_device::DeviceTeam;
use symmem_sync::barrier::{self, Round};

use self::identity::{Identity, Witness};
use crate::alike::{self, Described, Pes};
use crate::error::{Error, Result};
use crate::route::Word;
use crate::runtime::Runtime;
use crate::sym::SymBuf;
use symmem_transport::int::{Cmp, SymInt};

use crate::team_state::{
    SlotCounters, TeamState, AREA_ID, FINGERPRINT_WORDS, NODE_SLOT, REQUEST_HEAD, SCRATCH_WORDS,
    WORLD_SLOT,
};

/// A team's PEs (world PE numbers, ascending), in team order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Members {
    /// `start + stride * i` for `i` in `0..size`; `stride >= 1`.
    Strided {
        start: usize,
        stride: usize,
        size: usize,
    },
    /// Any ascending list (TEAM_NODE when its PEs are not evenly spaced).
    List(Box<[usize]>),
}

impl Members {
    fn from_list(pes: &[usize]) -> Self {
        let strided = match pes {
            [] => None,
            [one] => Some((*one, 1)),
            [a, b, ..] => {
                let stride = b - a;
                pes.windows(2)
                    .all(|w| w[1] - w[0] == stride)
                    .then_some((*a, stride))
            }
        };
        match strided {
            Some((start, stride)) => Members::Strided {
                start,
                stride,
                size: pes.len(),
            },
            None => Members::List(pes.into()),
        }
    }

    fn len(&self) -> usize {
        match self {
            Members::Strided { size, .. } => *size,
            Members::List(l) => l.len(),
        }
    }

    /// The world PE of team PE `i < len`.
    fn world(&self, i: usize) -> usize {
        match self {
            Members::Strided { start, stride, .. } => start + stride * i,
            Members::List(l) => l[i],
        }
    }

    /// The team PE of world PE `pe`, if it is a member.
    fn index_of(&self, pe: usize) -> Option<usize> {
        match self {
            Members::Strided {
                start,
                stride,
                size,
            } => {
                let d = pe.checked_sub(*start)?;
                (d % stride == 0 && d / stride < *size).then_some(d / stride)
            }
            Members::List(l) => l.binary_search(&pe).ok(),
        }
    }

    /// Team PEs `start + stride * i` of this team (a valid triplet, `stride >= 1`).
    fn subset(&self, start: usize, stride: usize, size: usize) -> Members {
        match self {
            Members::Strided {
                start: s0,
                stride: st,
                ..
            } => Members::Strided {
                start: s0 + st * start,
                stride: if size == 1 { 1 } else { st * stride },
                size,
            },
            Members::List(_) => Members::from_list(
                &(0..size)
                    .map(|i| self.world(start + stride * i))
                    .collect::<Vec<_>>(),
            ),
        }
    }
}

/// Which team a handle is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    World,
    Node,
    Split,
}

/// A team of PEs (OpenSHMEM 1.5 §9.4 `shmem_team_t`, NVSHMEM `nvshmem_team_t`), as seen by
/// one of its members: it numbers its PEs `0..n_pes()` in the order of their world PE
/// numbers.
///
/// A handle exists only on the team's members: a split returns `None` where
/// OpenSHMEM returns `SHMEM_TEAM_INVALID`. It borrows the [`Runtime`], so it cannot outlive
/// it, and it is not `Clone`: [`Team::destroy`] consumes it. Dropping a split team without
/// `destroy` keeps its slot reserved until finalize (like a [`SymBuf`] dropped without
/// `free`). [`Runtime::team_world`] and [`Runtime::team_node`] hand out new handles to the
/// predefined teams whenever asked; those cannot be destroyed.
///
/// ```no_run
/// # fn main() -> symmem_runtime::Result<()> {
/// let rt = symmem_runtime::init()?;
/// let world = rt.team_world();
/// // Collective over the parent: every PE calls, with the same arguments.
/// if let Some(evens) = world.split_strided(0, 2, rt.n_pes().div_ceil(2))? {
///     // One-sided operations take world PE numbers.
///     let next = evens.world_pe((evens.my_pe() + 1) % evens.n_pes())?;
///     println!("my right neighbour among the even PEs is PE {next}");
///     assert_eq!(evens.translate_pe(evens.my_pe(), &world), Some(rt.my_pe()));
///     evens.barrier()?;
///     evens.destroy()?;
/// }
/// let (row, column) = world.split_2d(2)?;
/// assert_eq!((row.my_pe(), column.my_pe()), (rt.my_pe() % 2, rt.my_pe() / 2));
/// row.destroy()?;
/// column.destroy()?;
/// # drop(world);
/// # rt.finalize()
/// # }
/// ```
///
/// A team cannot outlive its runtime (E0505, `rt` moved while borrowed):
///
/// ```compile_fail
/// # fn main() -> symmem_runtime::Result<()> {
/// let rt = symmem_runtime::init()?;
/// let world = rt.team_world();
/// rt.finalize()?;
/// world.sync()?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Team<'rt> {
    rt: &'rt Runtime,
    kind: Kind,
    slot: usize,
    members: Members,
    my_index: usize,
}

impl Runtime {
    /// TEAM_WORLD (`SHMEM_TEAM_WORLD`, `NVSHMEM_TEAM_WORLD`): every PE, numbered as in the
    /// job.
    pub fn team_world(&self) -> Team<'_> {
        Team {
            rt: self,
            kind: Kind::World,
            slot: WORLD_SLOT,
            members: Members::Strided {
                start: 0,
                stride: 1,
                size: self.n_pes(),
            },
            my_index: self.my_pe(),
        }
    }

    /// TEAM_NODE (`SHMEM_TEAM_SHARED`, `NVSHMEM_TEAM_NODE`): the PEs on this PE's node,
    /// those that share its memory ([`Runtime::local_pes`]), numbered in world order.
    pub fn team_node(&self) -> Team<'_> {
        let local = self.local_pes();
        Team {
            rt: self,
            kind: Kind::Node,
            slot: NODE_SLOT,
            members: Members::from_list(local),
            my_index: local
                .binary_search(&self.my_pe())
                .expect("a PE is on its own node"),
        }
    }

    /// `SYMMEM_MAX_TEAMS`: how many teams may exist at once on a PE, TEAM_WORLD and
    /// TEAM_NODE included.
    pub fn max_teams(&self) -> usize {
        self.teams.max_teams
    }

    /// How many more teams this PE could be a member of now (free slots).
    pub fn teams_available(&self) -> usize {
        self.teams
            .lock()
            .free
            .iter()
            .map(|w| w.count_ones() as usize)
            .sum()
    }

    /// The team area as an allocation, for the host operations.
    fn team_area(&self) -> SymBuf<u64> {
        SymBuf {
            runtime: self.path.runtime_id(),
            id: AREA_ID,
            offset: self.teams.offset,
            len: self.teams.area_words(),
            _elem: std::marker::PhantomData,
        }
    }
}

/// A request in a team's exchange: what one PE called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Request {
    SplitStrided {
        start: usize,
        stride: usize,
        size: usize,
    },
    Split2d {
        xrange: usize,
    },
    Destroy,
}

impl Request {
    /// The words compared across the team's PEs: a tag, then the arguments.
    fn head(self) -> [u64; REQUEST_HEAD] {
        match self {
            Request::SplitStrided {
                start,
                stride,
                size,
            } => [1, start as u64, stride as u64, size as u64],
            Request::Split2d { xrange } => [2, xrange as u64, 0, 0],
            Request::Destroy => [3, 0, 0, 0],
        }
    }
}

impl Described for Request {
    fn describe(head: &[u64]) -> String {
        match head {
            [1, start, stride, size] => {
                format!("split_strided(start {start}, stride {stride}, size {size})")
            }
            [2, xrange, ..] => format!("split_2d(xrange {xrange})"),
            [3, ..] => "destroy".into(),
            other => format!("an unknown team call {other:?}"),
        }
    }

    fn differing(a: &[u64], b: &[u64]) -> Vec<&'static str> {
        if a[0] != b[0] {
            return vec!["the operation"];
        }
        let names: &[&str] = match a[0] {
            1 => &["start", "stride", "size"],
            2 => &["xrange"],
            _ => &[],
        };
        names
            .iter()
            .enumerate()
            .filter(|(i, _)| a[i + 1] != b[i + 1])
            .map(|(_, n)| *n)
            .collect()
    }
}

impl<'rt> Team<'rt> {
    /// This PE's number in the team, `0..n_pes()` (`shmem_team_my_pe`).
    pub fn my_pe(&self) -> usize {
        self.my_index
    }

    /// The number of PEs in the team (`shmem_team_n_pes`).
    pub fn n_pes(&self) -> usize {
        self.members.len()
    }

    /// The world PE number of team PE `pe`, for the one-sided operations (which take world
    /// PE numbers): `self.translate_pe(pe, &rt.team_world())`, but an error naming the
    /// team's size when `pe` is not in the team.
    pub fn world_pe(&self, pe: usize) -> Result<usize> {
        if pe < self.n_pes() {
            Ok(self.members.world(pe))
        } else {
            Err(Error::InvalidPe {
                op: "Team::world_pe",
                pe,
                n_pes: self.n_pes(),
                access: " in this team".into(),
            })
        }
    }

    /// The number in `dest` of this team's PE `pe` (`shmem_team_translate_pe`): `None` where
    /// OpenSHMEM returns -1, that is when `pe` is not a PE of this team, when that PE is not
    /// in `dest`, or when `dest` belongs to another runtime. Local, not collective.
    pub fn translate_pe(&self, pe: usize, dest: &Team<'_>) -> Option<usize> {
        if !std::ptr::eq(self.rt, dest.rt) || pe >= self.n_pes() {
            return None;
        }
        dest.members.index_of(self.members.world(pe))
    }

    /// Whether this is TEAM_WORLD or TEAM_NODE (which cannot be destroyed).
    pub fn is_predefined(&self) -> bool {
        self.kind != Kind::Split
    }

    /// The team's handle for kernels (NVSHMEM's `nvshmem_team_t` as a kernel argument):
    /// pass it to a launch and call the device collectives (`symmem_device::team_sync`,
    /// `broadcast`, `reduce` …) with it. It is this PE's: each PE passes its own. Host and
    /// device barriers on the team share its flags and epoch, so they may alternate.
    ///
    /// Fails with [`Error::InvalidArgument`] for a team whose world PEs are not evenly
    /// spaced (a TEAM_NODE such as PEs 0, 1 and 5), which the handle cannot describe.
    pub fn device(&self) -> Result<DeviceTeam> {
        let Members::Strided {
            start,
            stride,
            size,
        } = self.members
        else {
            return Err(Error::InvalidArgument {
                op: "Team::device",
                reason: "the team's world PEs are not evenly spaced; a device team handle describes only teams of PEs start + stride * i".into(),
            });
        };
        let ts = &self.rt.teams;
        let heap_off = |word: usize| (ts.offset + word * 8) as u64;
        Ok(DeviceTeam {
            start: start as u32,
            stride: stride as u32,
            size: size as u32,
            my_index: self.my_index as u32,
            flags_off: heap_off(ts.flag(self.slot, 0)),
            epoch_off: heap_off(ts.epoch(self.slot)),
            scratch_off: heap_off(ts.scratch(self.slot, 0, 0)),
            scratch_words: SCRATCH_WORDS as u32,
            scratch_parts: ts.n_pes as u32,
        })
    }

    /// Splits this team (the parent) into a new team of its PEs `start + stride * i` for
    /// `i` in `0..size`, numbered in that order (`shmem_team_split_strided`, OpenSHMEM 1.5
    /// §9.4.6). Collective over the parent: every PE of this team must call it with the same
    /// arguments, members of the new team or not; PEs that differ make every PE return
    /// [`Error::TeamMismatch`], naming them and the differing argument.
    ///
    /// Returns the new team on its members and `None` on the other PEs of the parent
    /// (OpenSHMEM's `SHMEM_TEAM_INVALID`). The triplet must lie in the parent: `size >= 1`,
    /// `start + stride * (size - 1) < n_pes()`, and `stride >= 1` unless `size` is 1 (the
    /// arguments are unsigned, so the team is in ascending parent order). When every PE
    /// already has `SYMMEM_MAX_TEAMS` teams, [`Error::TeamLimit`] says so.
    pub fn split_strided(
        &self,
        start: usize,
        stride: usize,
        size: usize,
    ) -> Result<Option<Team<'rt>>> {
        const OP: &str = "team_split_strided";
        let _creating = self.creating(OP)?;
        let requests = self.exchange(
            OP,
            Request::SplitStrided {
                start,
                stride,
                size,
            },
        )?;
        let n = self.n_pes();
        let bad = |reason: String| {
            Err(Error::InvalidArgument {
                op: OP,
                reason: format!("start {start}, stride {stride}, size {size} in a parent team of {n} PEs: {reason}"),
            })
        };
        if size == 0 {
            return bad("size must be at least 1".into());
        }
        if stride == 0 && size > 1 {
            return bad("stride 0 names one PE several times (a stride of at least 1 is needed when size > 1)".into());
        }
        let last = stride
            .checked_mul(size - 1)
            .and_then(|d| d.checked_add(start));
        match last {
            Some(l) if l < n => {}
            _ => {
                return bad(format!(
                    "the last PE, start + stride * (size - 1), is past the parent's last PE {}",
                    n - 1
                ))
            }
        }
        let members = self.members.subset(start, stride, size);
        let slots = self
            .rt
            .assign_slots(OP, &requests, &self.members, &[&members])?;
        Ok(self.rt.join(members, slots[0]))
    }

    /// Splits this team (the parent) along a 2D grid with `xrange` columns
    /// (`shmem_team_split_2d`, OpenSHMEM 1.5 §9.4.7) and returns `(xteam, yteam)`: parent PE
    /// `p` sits at `(x, y) = (p % xrange, p / xrange)`; its x-team is its row (the PEs with
    /// the same `y`, numbered by `x`) and its y-team its column (the same `x`, numbered by
    /// `y`). The grid has `ceil(n_pes() / xrange)` rows; when `xrange` does not divide
    /// `n_pes()` the last row, and so the last columns, are shorter. An `xrange` above
    /// `n_pes()` gives one row: the x-team is the whole parent and each y-team one PE.
    ///
    /// Collective over the parent, verified like [`Self::split_strided`]; every PE of the
    /// parent is in both of its teams. `xrange` must be at least 1.
    pub fn split_2d(&self, xrange: usize) -> Result<(Team<'rt>, Team<'rt>)> {
        const OP: &str = "team_split_2d";
        let _creating = self.creating(OP)?;
        let requests = self.exchange(OP, Request::Split2d { xrange })?;
        if xrange == 0 {
            return Err(Error::InvalidArgument {
                op: OP,
                reason: "xrange must be at least 1".into(),
            });
        }
        let n = self.n_pes();
        let xr = xrange.min(n);
        let rows = n.div_ceil(xr);
        let row = |y: usize| self.members.subset(y * xr, 1, xr.min(n - y * xr));
        let column = |x: usize| self.members.subset(x, xr, (n - x).div_ceil(xr));
        // Every PE assigns every row's and column's slot, so that a team limit reached by
        // any of them is an error on every PE alike.
        let mut teams: Vec<Members> = (0..rows).map(row).collect();
        teams.extend((0..xr).map(column));
        let refs: Vec<&Members> = teams.iter().collect();
        let slots = self.rt.assign_slots(OP, &requests, &self.members, &refs)?;
        let (x, y) = (self.my_index % xr, self.my_index / xr);
        let xteam = self.rt.join(teams[y].clone(), slots[y]);
        let yteam = self.rt.join(teams[rows + x].clone(), slots[rows + x]);
        match (xteam, yteam) {
            (Some(a), Some(b)) => Ok((a, b)),
            _ => unreachable!("every parent PE is in its row and its column"),
        }
    }

    /// Blocks until every PE of the team has called `sync` (`shmem_team_sync`), ordering
    /// memory like [`Runtime::sync_all`] among the team: blocking puts and AMOs done
    /// before it are visible to the team's PEs after it. Nonblocking operations are not
    /// completed (except over the remote transport, which it completes as `sync_all`
    /// does). Fails naming the PE waited for if it dies, and after `SYMMEM_TIMEOUT`.
    pub fn sync(&self) -> Result<()> {
        if let Some(t) = self.rt.path.transport() {
            t.quiet()?;
        }
        self.rt.team_sync("team_sync", self)
    }

    /// Completes this PE's outstanding operations ([`Runtime::quiet`]), then
    /// [`Self::sync`]s the team (`nvshmem_barrier(team)`; OpenSHMEM's `shmem_quiet` followed
    /// by `shmem_team_sync`).
    pub fn barrier(&self) -> Result<()> {
        self.rt.quiet()?;
        self.rt.team_sync("team_barrier", self)
    }

    /// Destroys the team (`shmem_team_destroy`), freeing its slot. Collective over the
    /// team: every member must destroy it, and a member that calls another team operation on
    /// it instead makes every member return [`Error::TeamMismatch`]. Destroying TEAM_WORLD
    /// or TEAM_NODE is an [`Error::InvalidArgument`] (and not collective).
    pub fn destroy(self) -> Result<()> {
        const OP: &str = "team_destroy";
        if self.is_predefined() {
            return Err(Error::InvalidArgument {
                op: OP,
                reason: format!(
                    "{} is predefined and cannot be destroyed",
                    if self.kind == Kind::World {
                        "TEAM_WORLD"
                    } else {
                        "TEAM_NODE"
                    }
                ),
            });
        }
        self.exchange(OP, Request::Destroy)?;
        // The exchange's barrier was the team's last use of the slot: every member has
        // received every signal and request sent to it there, so this PE's flags (and its
        // epoch word and barrier identity words, after them) can be zeroed for the slot's
        // next team, whose epochs count from 1 again: an old identity stamped with one of
        // them must not be taken for its own.
        let zeros = vec![0u8; (3 * self.rt.teams.rounds + 1) * 8];
        let rt = self.rt;
        rt.putmem(
            &rt.team_area(),
            rt.teams.flag(self.slot, 0) * 8,
            &zeros,
            rt.my_pe(),
        )?;
        // So are the fingerprints and alert words in this PE's heap, which members wrote
        // (if at all) before that barrier: the slot's next team counts its barrier
        // epochs from 1 again, and an old alert or verdict stamped with one of them must
        // not be taken for its own.
        let (first, end) = (
            rt.teams.fingerprint(self.slot, 0, 0),
            rt.teams.alert(self.slot, 2),
        );
        rt.putmem(
            &rt.team_area(),
            first * 8,
            &vec![0u8; (end - first) * 8],
            rt.my_pe(),
        )?;
        let mut table = rt.teams.lock();
        table.free[self.slot / 64] |= 1 << (self.slot % 64);
        table.slots[self.slot] = SlotCounters::default();
        Ok(())
    }

    /// Marks a split under way on this PE until the guard drops. Splits on one PE must not
    /// overlap: two would see the same free slots and could both take one. OpenSHMEM leaves
    /// this to the program; here a second, concurrent split on the same PE is an error
    /// rather than two teams sharing a slot (its peers, still waiting for it, time out).
    fn creating(&self, op: &'static str) -> Result<Creating<'_>> {
        let mut table = self.rt.teams.lock();
        if std::mem::replace(&mut table.creating, true) {
            return Err(Error::InvalidArgument {
                op,
                reason: format!(
                    "another thread of PE {} is creating a team; splits on one PE must not overlap",
                    self.rt.my_pe()
                ),
            });
        }
        Ok(Creating(&self.rt.teams))
    }

    /// Puts `request` (and this PE's free slots) to every team PE's exchange buffer,
    /// synchronizes the team, and returns every team PE's request, in team order, after
    /// checking that their heads agree.
    fn exchange(&self, op: &'static str, request: Request) -> Result<Vec<Vec<u64>>> {
        let rt = self.rt;
        let ts = &rt.teams;
        let (parity, mut words) = {
            let mut table = ts.lock();
            let counters = &mut table.slots[self.slot];
            let parity = (counters.exchanges % 2) as usize;
            counters.exchanges += 1;
            let mut words = request.head().to_vec();
            words.extend_from_slice(&table.free);
            (parity, words)
        };
        let area = rt.team_area();
        let bytes: &[u8] = bytemuck::cast_slice(&words);
        let at = ts.request(self.slot, parity, self.my_index) * 8;
        for i in 0..self.n_pes() {
            rt.putmem(&area, at, bytes, self.members.world(i))?;
        }
        rt.quiet()?;
        rt.team_sync(op, self)?;
        let rw = ts.request_words();
        words.resize(rw * self.n_pes(), 0);
        rt.getmem(
            &area,
            ts.request(self.slot, parity, 0) * 8,
            bytemuck::cast_slice_mut(&mut words),
            rt.my_pe(),
        )?;
        let all: Vec<Vec<u64>> = words.chunks(rw).map(|c| c.to_vec()).collect();
        let heads: Vec<&[u64]> = all.iter().map(|r| &r[..REQUEST_HEAD]).collect();
        alike::check::<Request, _>(&heads, Pes::Team(&|i| self.members.world(i)), |detail| {
            Error::TeamMismatch { op, detail }
        })?;
        Ok(all)
    }
}

/// Whether a barrier's partners may have entered finalize.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Partners {
    /// A partner in finalize will never join: fail naming it.
    MustJoin,
    /// The barrier is finalize's own: every partner has set its finalizing flag.
    MayBeFinalizing,
}

/// A split under way on this PE; clears the mark when dropped.
struct Creating<'a>(&'a TeamState);

impl Drop for Creating<'_> {
    fn drop(&mut self) {
        self.0.lock().creating = false;
    }
}

impl Runtime {
    /// The dissemination barrier among `team`'s PEs, in its slot (see the module docs);
    /// `op` names the public operation in errors.
    pub(crate) fn team_sync(&self, op: &'static str, team: &Team<'_>) -> Result<()> {
        self.team_sync_epoch(op, team).map(drop)
    }

    /// [`Self::team_sync`], returning the barrier's epoch (the same on every member).
    pub(crate) fn team_sync_epoch(&self, op: &'static str, team: &Team<'_>) -> Result<u64> {
        self.dissemination(op, team, Partners::MustJoin, "the team's barrier")
    }

    /// Waits until every PE has arrived at the collective `op` (`alloc`, `free`,
    /// `finalize`), in the arrival barrier (see [`TeamState::arrival_slot`]), before its
    /// bootstrap collective. The bootstrap's deadline (`SYMMEM_BOOTSTRAP_TIMEOUT`) runs
    /// from the first PE's arrival, so load imbalance alone would fail a PE that arrives
    /// more than that later; this barrier instead waits as long as every PE is alive,
    /// failing naming a PE that dies or (except in finalize, where every PE sets it)
    /// enters finalize, and only under `SYMMEM_TIMEOUT` if one is set. The bootstrap
    /// collective after it then only waits for PEs already on their way. A job that
    /// reaches some PE neither through the mapping nor a transport has only the bootstrap
    /// to synchronize with, and keeps its deadline.
    pub(crate) fn arrive_all(&self, op: &'static str) -> Result<()> {
        if !self.all_mapped && self.path.transport().is_none() {
            return Ok(());
        }
        let arrival = Team {
            rt: self,
            kind: Kind::World,
            slot: self.teams.arrival_slot(),
            members: Members::Strided {
                start: 0,
                stride: 1,
                size: self.n_pes(),
            },
            my_index: self.my_pe(),
        };
        let partners = if op == "finalize" {
            Partners::MayBeFinalizing
        } else {
            Partners::MustJoin
        };
        let label = match op {
            "finalize" => "the arrival barrier of finalize",
            "free" => "the arrival barrier of free",
            _ => "the arrival barrier of alloc",
        };
        self.dissemination(op, &arrival, partners, label).map(drop)
    }

    /// The dissemination barrier among `team`'s PEs in its slot; `label` names it in a
    /// timeout's message. Returns the barrier's epoch (0 on a team of one PE, which has
    /// no barrier).
    fn dissemination(
        &self,
        op: &'static str,
        team: &Team<'_>,
        partners: Partners,
        label: &'static str,
    ) -> Result<u64> {
        let n = team.n_pes();
        if n == 1 {
            return Ok(0);
        }
        let area = self.team_area();
        let me = self.my_pe();
        let epoch_word = area.at(self.teams.epoch(team.slot));
        let epoch = match self.path.word(op, epoch_word, me)? {
            // Only this PE advances its epoch word (host or device barriers, never both at
            // once), so a plain atomic add on a mapped heap is enough: no route, no AMO.
            Word::Host(a) => u64::fetch_add(a, 1, Ordering::AcqRel),
            _ => self.atomic_fetch_add(epoch_word, 1, me)?,
        } + 1;
        // What a slow wait below publishes for the hang report (only where it is on).
        let _in_collective = self.hang.is_some().then(|| {
            let team_name = match team.slot {
                WORLD_SLOT => "TEAM_WORLD".to_string(),
                s if s == self.teams.arrival_slot() => label.to_string(),
                s => format!("team slot {s}"),
            };
            crate::hang::record::in_collective(crate::hang::record::Collective {
                team: team_name,
                members: (0..n).map(|i| team.members.world(i)).collect(),
                seq: epoch,
            })
        });
        // The arrival barrier has no identity words: alloc, free and finalize compare
        // their requests in the bootstrap collective after it.
        let checked = team.slot != self.teams.arrival_slot();
        let mut identity = Identity::new(op, epoch, self.config.check_collectives);
        let parity = (epoch % 2) as usize;
        for Round { index, to, from } in barrier::rounds(team.my_index, n) {
            let flag = area.at(self.teams.flag(team.slot, index));
            let ident = area.at(self.teams.identity(team.slot, index, parity));
            let carried = checked.then_some((ident, identity.word()));
            self.barrier_signal(op, flag, carried, team.members.world(to))?;
            let word = self.path.word(op, flag, me)?;
            let from_pe = team.members.world(from);
            let leaving = match partners {
                Partners::MustJoin => Some(from_pe),
                Partners::MayBeFinalizing => None,
            };
            self.wait_team_flag(op, &word, epoch, leaving, || {
                format!(
                    "PE {from_pe} (team PE {from} of a team of {n}; round {index} of {label} {epoch})"
                )
            })?;
            if checked {
                // The flag's Acquire load made the word, put before the signal, visible.
                let heard = self.path.load_word(op, &self.path.word(op, ident, me)?)?;
                identity.hear(heard, from_pe);
            }
        }
        if let Some(w) = identity.witness() {
            return Err(self.mismatched(op, team, epoch, w));
        }
        Ok(epoch)
    }

    /// The error of a barrier that met another kind of call, `w`, heard of in its
    /// identity words (see [`identity`]): every member returns one, having passed the
    /// barrier.
    #[cold]
    fn mismatched(&self, op: &'static str, team: &Team<'_>, epoch: u64, w: Witness) -> Error {
        let team_name = match team.slot {
            WORLD_SLOT => "TEAM_WORLD".to_string(),
            NODE_SLOT => "TEAM_NODE".to_string(),
            s => format!("the team in slot {s}"),
        };
        let who = w.pe.map_or("a PE numbered above 65534".to_string(), |p| {
            format!("PE {p}")
        });
        Error::TeamMismatch {
            op,
            detail: format!(
                "{who} called {} while PE {} called {op}, at barrier #{epoch} of {team_name} (a collective meets only the same call on every member; mismatched collectives)",
                identity::name(w.op),
                self.my_pe(),
            ),
        }
    }

    /// Waits until this PE's barrier flag `word` reaches `epoch`. With `leaving` set to
    /// the world PE that signals it, and where that PE's control block is mapped here,
    /// also fails as soon as it has entered finalize (or dropped its runtime) without
    /// signalling, as `barrier_all` does: it is alive, in finalize's own barrier, and
    /// will never come. (A PE on another node is not seen entering finalize: its barrier
    /// waits until it dies or `SYMMEM_TIMEOUT`.)
    fn wait_team_flag(
        &self,
        op: &'static str,
        word: &Word<'_, u64>,
        epoch: u64,
        leaving: Option<usize>,
        what: impl Fn() -> String,
    ) -> Result<()> {
        let watched = leaving.and_then(|from| Some((from, self.path.heap().control(from)?)));
        let Some((from, gone)) = watched.map(|(from, cb)| (from, &cb.finalizing.0)) else {
            return self.wait_word(op, word, what, Cmp::Ge, epoch).map(drop);
        };
        let seen = std::cell::Cell::new(None);
        let mut failed = None;
        let (mut polls, mut left) = (0u32, false);
        self.wait_for(
            op,
            || format!("{} Ge {epoch} (last seen {:?})", what(), seen.get()),
            || match self.path.load_word(op, word) {
                Ok(v) if v >= epoch => true,
                Ok(v) => {
                    seen.set(Some(v));
                    // Checked every 256 polls, as in `barrier_all`, to keep the spin on
                    // the flag's cache line. The Acquire load pairs with the Release store
                    // of the flag in finalize, after the failure cause it may record.
                    polls = polls.wrapping_add(1);
                    left = polls % 256 == 0 && gone.load(Ordering::Acquire) != 0;
                    left
                }
                Err(e) => {
                    failed = Some(e);
                    true
                }
            },
        )?;
        if let Some(e) = failed {
            return Err(e);
        }
        // A partner that signalled and then entered finalize did its part: look again.
        if left && !matches!(self.path.load_word(op, word), Ok(v) if v >= epoch) {
            return Err(self.partner_left_in(op, from));
        }
        Ok(())
    }

    /// The barriers this PE has started on `team` (its epoch word): the next barrier's
    /// epoch, less one, the same on every member between two of the team's barriers.
    fn team_epoch(&self, op: &'static str, team: &Team<'_>) -> Result<u64> {
        let area = self.team_area();
        let word = area.at(self.teams.epoch(team.slot));
        match self.path.word(op, word, self.my_pe())? {
            Word::Host(a) => Ok(a.load(Ordering::Relaxed)),
            _ => self.atomic_fetch(word, self.my_pe()),
        }
    }

    /// Chooses a slot for each of `teams`, new teams split from the parent whose exchanged
    /// `requests` (in parent order, over `parent`'s PEs) carry each PE's free slots: the
    /// lowest slot free on every member, taking earlier teams' slots into account. The same
    /// on every PE of the parent, since all see the same requests.
    fn assign_slots(
        &self,
        op: &'static str,
        requests: &[Vec<u64>],
        parent: &Members,
        teams: &[&Members],
    ) -> Result<Vec<usize>> {
        let mut free: Vec<Vec<u64>> = requests
            .iter()
            .map(|r| r[REQUEST_HEAD..].to_vec())
            .collect();
        let mut slots = Vec::with_capacity(teams.len());
        for team in teams {
            let parent_index = |i: usize| {
                parent
                    .index_of(team.world(i))
                    .expect("a new team's PEs are in its parent")
            };
            let mut common = vec![u64::MAX; self.teams.mask_words];
            for i in 0..team.len() {
                for (c, f) in common.iter_mut().zip(&free[parent_index(i)]) {
                    *c &= f;
                }
            }
            let slot = common
                .iter()
                .enumerate()
                .find(|(_, w)| **w != 0)
                .map(|(k, w)| k * 64 + w.trailing_zeros() as usize)
                .filter(|&s| s < self.teams.max_teams);
            let Some(slot) = slot else {
                return Err(Error::TeamLimit {
                    op,
                    max: self.teams.max_teams,
                });
            };
            for i in 0..team.len() {
                free[parent_index(i)][slot / 64] &= !(1 << (slot % 64));
            }
            slots.push(slot);
        }
        Ok(slots)
    }

    /// This PE's handle to the new team `members` in `slot`, reserving the slot, or `None`
    /// if this PE is not a member.
    fn join(&self, members: Members, slot: usize) -> Option<Team<'_>> {
        let my_index = members.index_of(self.my_pe())?;
        let mut table = self.teams.lock();
        debug_assert!(table.free[slot / 64] & (1 << (slot % 64)) != 0);
        table.free[slot / 64] &= !(1 << (slot % 64));
        table.slots[slot] = SlotCounters::default();
        Some(Team {
            rt: self,
            kind: Kind::Split,
            slot,
            members,
            my_index,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DEFAULT_MAX_TEAMS;
    use crate::team_state::ALERT_WORDS;

    #[test]
    fn members_strided_and_lists() {
        let world = Members::Strided {
            start: 0,
            stride: 1,
            size: 8,
        };
        let odd = world.subset(1, 2, 4);
        assert_eq!(
            odd,
            Members::Strided {
                start: 1,
                stride: 2,
                size: 4
            }
        );
        assert_eq!(odd.index_of(5), Some(2));
        assert_eq!(odd.index_of(4), None);
        assert_eq!(odd.index_of(9), None);
        assert_eq!(odd.index_of(0), None);
        let list = Members::from_list(&[0, 1, 5]);
        assert!(matches!(list, Members::List(_)));
        assert_eq!(list.subset(1, 1, 2), Members::from_list(&[1, 5]));
        assert_eq!(
            Members::from_list(&[3]),
            Members::Strided {
                start: 3,
                stride: 1,
                size: 1
            }
        );
        // A one-PE subset with stride 0 is the one PE.
        assert_eq!(world.subset(6, 0, 1).index_of(6), Some(0));
    }

    #[test]
    fn layout_is_aligned_and_sized() {
        for n in [1, 2, 3, 4, 17, 1024] {
            let (words, rounds, mask) = TeamState::layout(DEFAULT_MAX_TEAMS, n);
            assert_eq!(words % 8, 0);
            assert!(rounds >= 1 && (1usize << rounds) >= n);
            assert!(
                words
                    >= rounds
                        + 1
                        + 2 * n * (REQUEST_HEAD + mask + SCRATCH_WORDS + FINGERPRINT_WORDS)
                        + ALERT_WORDS
            );
            let ts = TeamState::new(0, DEFAULT_MAX_TEAMS, n);
            assert!(
                ts.alert(0, 1) < ts.flag(1, 0),
                "fingerprints and alert words within slot 0"
            );
            let arrival = ts.arrival_slot();
            assert_eq!(ts.flag(arrival, 0), DEFAULT_MAX_TEAMS * words);
            assert!(
                ts.epoch(arrival) < ts.area_words(),
                "arrival barrier in the area"
            );
            assert_eq!(
                ts.area_words() * 8,
                TeamState::area_bytes(DEFAULT_MAX_TEAMS, n)
            );
            assert_eq!(ts.area_words() % 8, 0);
        }
        let ts = TeamState::new(0, 70, 4);
        assert_eq!(ts.mask_words, 2);
        assert_eq!(
            ts.lock().free.iter().map(|w| w.count_ones()).sum::<u32>(),
            68
        );
    }

    /// A single-PE runtime (no launcher in the environment of a unit test).
    #[test]
    fn overlapping_splits_on_one_pe_are_refused() {
        let rt = crate::init().expect("a single-PE init");
        assert_eq!(rt.n_pes(), 1);
        let world = rt.team_world();
        let guard = world.creating("test").unwrap();
        let err = world.split_strided(0, 1, 1).unwrap_err().to_string();
        assert!(
            err.contains("another thread of PE 0 is creating a team"),
            "{err}"
        );
        assert!(world.split_2d(1).is_err());
        drop(guard);
        let t = world.split_strided(0, 1, 1).unwrap().expect("a member");
        assert_eq!((t.my_pe(), t.n_pes()), (0, 1));
        t.sync().unwrap();
        t.destroy().unwrap();
        rt.finalize().unwrap();
    }

    #[test]
    fn mismatch_names_the_argument() {
        let a = Request::SplitStrided {
            start: 0,
            stride: 1,
            size: 2,
        }
        .head();
        let b = Request::SplitStrided {
            start: 0,
            stride: 2,
            size: 3,
        }
        .head();
        assert_eq!(Request::differing(&a, &b), vec!["stride", "size"]);
        assert_eq!(
            Request::differing(&a, &Request::Destroy.head()),
            vec!["the operation"]
        );
        assert_eq!(
            Request::describe(&b),
            "split_strided(start 0, stride 2, size 3)"
        );
    }
}
