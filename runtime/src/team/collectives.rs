//! Collectives on a team from host code (OpenSHMEM 1.5 collective routines, NVSHMEM's `nvshmem_*`
//! collectives with a team argument): [`Team::broadcast`], [`Team::fcollect`],
//! [`Team::collect`], [`Team::alltoall`], [`Team::reduce`] and [`Team::reducescatter`].
//!
//! # Algorithm: direct push between team barriers
//! Broadcast, fcollect, collect and alltoall run the same steps, on every route:
//! 1. copy this PE's contribution out of its `src` (so `src` and `dest` may be the same
//!    allocation, which OpenSHMEM allows only for reductions);
//! 2. the team barrier (*entry*): every member has entered the call, so no member still
//!    uses its `dest` from before the call, and the previous collective on the team is done
//!    with the team's scratch;
//! 3. *direct push*: each PE puts its contribution straight into the memory of the PEs
//!    that need it, starting with its right neighbour in the team so that PEs do not all
//!    write to the same PE first. Within a node (every member's heap mapped here, that is
//!    [`crate::Runtime::ptr`] is `Some` for all) a put is a copy of stores through the P2P
//!    mapping; to a GPU heap a copy by the copy engine; to another node a `put_nbi` over
//!    the remote transport;
//! 4. the team barrier (*exit*) after a `quiet`, so every put is complete and visible
//!    when any member returns.
//!
//! Reductions ([`Team::reduce`], [`Team::reducescatter`]) pick one of three algorithms,
//! the same on every member since the choice depends only on the team's size and where
//! its members are:
//! - **direct-load reduce**, when every member's heap is mapped here (one node, P2P on):
//!   the entry barrier, then each PE loads its block of every member's `src` straight from
//!   that member's heap, combining as it goes, then the exit barrier (which keeps every
//!   `src` unchanged until all loads are done), and only then writes its `dest`: two
//!   barriers whatever the size;
//! - **recursive-doubling reduce** for [`Team::reduce`] on a team of `2^k` PEs that are
//!   not all mapped here (several nodes, or P2P off): chunk by chunk (`SCRATCH_WORDS`
//!   words per chunk), `k` rounds; in round `r` each PE puts its partial result into part
//!   `r` of team PE `i ^ 2^r`'s scratch, the team barrier, then combines it with its own,
//!   the lower PE's partial first. After round `r` every PE holds the reduction of its
//!   aligned group of `2^(r+1)` PEs, so every PE ends with the same tree,
//!   `((x_0 op x_1) op (x_2 op x_3)) ...`;
//! - **all-gather reduce** otherwise (other team sizes, and every [`Team::reducescatter`]
//!   not within one node): chunk by chunk, `SCRATCH_WORDS` words per PE a chunk, each PE
//!   puts its chunk into every receiving PE's part of the team's scratch (for
//!   `reducescatter`, only the block of that PE), the team barrier, then each receiver
//!   combines the `n` contributions in team order, `((x_0 op x_1) op x_2) ...`.
//!
//! The chunked algorithms alternate the two halves of the scratch: a PE writes half
//! `c % 2` for chunk `c` only after the last barrier of chunk `c - 1`, which every PE enters
//! after reading chunk `c - 2` (the same argument as the team's exchange buffers). Each
//! algorithm combines in one fixed order, so floating-point results are the same on every
//! PE and do not depend on timing; the tree of recursive doubling may round differently
//! from the team-order fold of the others.
//!
//! # A PE's own bad arguments
//! Every member takes a collective's entry barrier whatever its arguments: a PE whose own
//! arguments are bad (a root outside the team, `src` or `dest` too small for `nelems` or
//! of another runtime, a `src` it cannot read) does not return before it, which would
//! leave the others waiting for it (until `SYMMEM_TIMEOUT`, forever by default) or pair
//! their barrier with its *next* collective, shifting every later call by one. Its
//! fingerprint (below) carries a *verdict*, three words saying what is wrong, and every
//! member returns the same [`Error::InvalidArgument`] after the entry barrier, before any
//! data moves, naming each such member and what was wrong: "team_broadcast: bad
//! arguments on 1 of the team's 4 PEs (team PE 3 (world PE 3): root 4 is not a PE of
//! the team (n_pes = 4)); …". When every member's arguments are bad alike (the usual
//! programming error), each returns its own, more detailed error instead. Without
//! `SYMMEM_CHECK_COLLECTIVES` the members compare nothing, so the PE with bad arguments
//! puts its fingerprint into its part of every member's fingerprint buffer and the
//! entry barrier's epoch into every member's *alert word* of that buffer, `quiet`s, and
//! enters the barrier; after the barrier each member loads its own alert word (one
//! load of a word in its own heap, the whole cost on the default path) and reads the
//! verdicts only when it holds this barrier's epoch. Stamped with the epoch, an alert
//! or verdict from an earlier call is never taken for this one; `destroy` zeroes them
//! for the slot's next team, whose epochs start again.
//!
//! # Arguments verified across PEs
//! Each call computes a *fingerprint* of its arguments, thirteen words: which collective and
//! the element size, the element type's name (16 bytes), the operator's name
//! (reductions), `nelems` (not for `collect`, whose counts may differ), the root
//! (broadcast), the heap offsets of `dest` and `src`, the entry barrier's epoch, the
//! call's number among the host collectives on the team, and the verdict. At the entry
//! barrier every member compares every member's fingerprint with its own; when any
//! differ, every member returns the same [`Error::TeamMismatch`] before the data phase,
//! naming the groups of team (and world) PEs, what each called, and the differing
//! arguments: "team PE 0, 1, 3 (world PE 0, 1, 3) called team_broadcast(u64 (8 bytes),
//! nelems 256, root 0, …) [its host collective #5 on the team, at the team's barrier 9];
//! team PE 2 (world PE 2) called team_broadcast(u64 (8 bytes), nelems 128, root 0, …)
//! […] (differs in nelems)". The epoch and the number keep back-to-back calls from
//! masking a mismatch: a member that entered the barrier from `sync`, `barrier` or a
//! device collective left a fingerprint of an earlier barrier, and one that skipped a
//! host collective compares its call `k + 1` with the others' `k`; both are named.
//! Every member reads the same `n` fingerprints, so all detect a mismatch or none does,
//! and all have then passed exactly one team barrier: nothing waits for a member that
//! left.
//! The check runs under `SYMMEM_CHECK_COLLECTIVES=1`, which every PE must set alike (init
//! fails otherwise, naming the variable and each PE's value; a development and
//! debugging switch, like MPI libraries' argument checking); without it members that
//! disagree get undefined results (or a timeout), as in OpenSHMEM and NVSHMEM.
//! It is off by default because even the cheap form doubles the latency of a small
//! collective: a u64 sum reduce on 2 PEs of one node took 0.52 µs with it against 0.29 µs
//! without (`symmem-perf`, 2026-11-23, this 2-core VM), the cost of the cache lines each
//! fingerprint moves between cores and of locating every member's copy.
//! - **Every member mapped here** (one node, P2P on; the teams of the direct-load
//!   reduce): each PE stores its fingerprint into its own heap, in its part of the team
//!   slot's fingerprint buffer, before the entry barrier (whose release signal publishes
//!   it), and after it loads the others' straight through the P2P mapping. No put, no
//!   quiet, no extra barrier: a few stores and `13 (n - 1)` loads a call.
//! - **Some member remote** (several nodes, or P2P off): there is no exchange to fold the
//!   check into (a broadcast's other PEs send nothing, recursive doubling talks to `log n`
//!   partners only, and every algorithm's data moves after the entry barrier), so each PE
//!   puts its fingerprint to every member and `quiet`s (a round trip over the transport)
//!   before the entry barrier.
//!
//! Two buffers (and two alert words) alternate by the parity of the entry barrier's
//! epoch, the same on every member: a PE rewrites buffer `e % 2` for a later barrier
//! `e + 2k` only after finishing barrier `e + 2k - 1 >= e + 1`, which every member enters
//! after reading buffer `e % 2`, so no exit barrier is needed (a reduction of 0 elements
//! has none). The buffers come after the slot's scratch, which the device collectives use
//! with the flags and epoch.
//!
//! Which collective each member called is checked always, without the fingerprints:
//! every team barrier carries its call's identity (see `identity.rs`), so a member that
//! calls `sync`/`barrier`, or another collective, where the others call this one fails
//! with them, naming both calls. Limits: the stream-ordered forms (`team/on_stream.rs`)
//! still return a PE's own argument errors before their barrier; `collect`'s `dest`, checked against the sum of the counts after
//! the exchange, is refused by the PE whose `dest` is too small alone.
//!
//! # Where this differs from OpenSHMEM 1.5
//! - Arguments must be the same on every member (as in OpenSHMEM); under
//!   `SYMMEM_CHECK_COLLECTIVES=1` they are verified across PEs (above).
//! - Every call starts with a team barrier, so a PE's `dest` is written only after that PE
//!   entered the call: OpenSHMEM lets a peer write `dest` as soon as it enters.
//! - `src` and `dest` may be the same allocation for every collective.
//! - Integer sums and products wrap; `min`/`max` of floats compare with `<`/`>`, so a NaN
//!   in the first contribution is kept and a later NaN ignored.
//!
//! # Not yet
//! These are the host, blocking forms; the device (thread, warp, block) forms are
//! `symmem_device`'s (`device/src/ops/collective.rs`, on a handle from [`Team::device`]),
//! sharing this module's reduction vocabulary and each team's barrier and scratch; the
//! stream-ordered `*_on_stream` forms are in `team/on_stream.rs`. The algorithms are the
//! ones above: a tree or ring for large broadcasts across nodes, recursive halving for
//! `reducescatter`, and recursive doubling for teams whose size is not a power of two, are
//! not built (see the book, `docs/src/collectives.md`).

use std::sync::atomic::{AtomicU64, Ordering};

use bytemuck::Pod;

use super::{Team, FINGERPRINT_WORDS, SCRATCH_WORDS};
use crate::alike::{self, Described, Pes};
use crate::error::{Error, Result};
use crate::route::Located;
use crate::sym::SymBuf;

/// Bytes of each member's block a direct-load reduce combines at a time: two such chunks
/// (the result and one member's data) stay in the core's L2 cache.
const REDUCE_CHUNK_BYTES: usize = 32 << 10;

pub use symmem_device::reduce::{
    And, BitwiseReducible, Max, Min, Or, Prod, ReduceOp, Reducible, Sum, Xor,
};

impl Team<'_> {
    /// Copies `nelems` elements of `src` on team PE `root` into `dest` on every PE of the
    /// team, the root included (`shmem_broadcast`, OpenSHMEM 1.5;
    /// `nvshmem_broadcast`). Collective over the team; algorithm: direct push by the root
    /// (see the [module docs](self)).
    ///
    /// Errors, the same on every PE: `root` outside the team ([`Error::InvalidPe`]),
    /// `nelems` past `src` or `dest`, an allocation of another runtime.
    pub fn broadcast<T: Pod>(
        &self,
        dest: &SymBuf<T>,
        src: &SymBuf<T>,
        nelems: usize,
        root: usize,
    ) -> Result<()> {
        self.broadcast_as("team_broadcast", dest, src, nelems, root, None)
    }

    /// [`Self::broadcast`] as operation `op`, with `refusal` (an argument this PE's caller
    /// found bad) judged like the collective's own checks.
    pub(super) fn broadcast_as<T: Pod>(
        &self,
        op: &'static str,
        dest: &SymBuf<T>,
        src: &SymBuf<T>,
        nelems: usize,
        root: usize,
        refusal: Option<(Bad, Error)>,
    ) -> Result<()> {
        let mut call = Call::new(
            self.rt.config.check_collectives,
            op,
            dest,
            src,
            Some(nelems),
            Some(root),
            None,
        );
        self.judge_args(&mut call, Args::Broadcast { root }, dest, src, nelems);
        call.refuse_with(refusal);
        let data = if self.my_index == root {
            self.read_judged(&mut call, src, nelems)
        } else {
            Vec::new()
        };
        self.push(&call, dest, |_| {
            (self.my_index == root).then_some((0, &data[..]))
        })
    }

    /// Concatenates `nelems` elements of `src` from every PE of the team, in team order,
    /// into `dest` on every PE: team PE `i`'s block lands at `dest[i * nelems..]`
    /// (`shmem_fcollect`, OpenSHMEM 1.5; `nvshmem_fcollect`). `dest` must hold
    /// `nelems * n_pes()` elements. Collective over the team; algorithm: direct push of each
    /// PE's block to every PE.
    pub fn fcollect<T: Pod>(&self, dest: &SymBuf<T>, src: &SymBuf<T>, nelems: usize) -> Result<()> {
        self.fcollect_as("team_fcollect", dest, src, nelems, None)
    }

    /// [`Self::fcollect`] as `op`, judging `refusal` (see [`Self::broadcast_as`]).
    pub(super) fn fcollect_as<T: Pod>(
        &self,
        op: &'static str,
        dest: &SymBuf<T>,
        src: &SymBuf<T>,
        nelems: usize,
        refusal: Option<(Bad, Error)>,
    ) -> Result<()> {
        let mut call = Call::new(
            self.rt.config.check_collectives,
            op,
            dest,
            src,
            Some(nelems),
            None,
            None,
        );
        self.judge_args(&mut call, Args::Fcollect, dest, src, nelems);
        call.refuse_with(refusal);
        let data = self.read_judged(&mut call, src, nelems);
        // Used only when no member refused, so that it fits `dest` and cannot wrap.
        let at = self.my_index.wrapping_mul(nelems);
        self.push(&call, dest, |_| Some((at, &data[..])))
    }

    /// Concatenates `nelems` elements of `src` from every PE of the team, where `nelems`
    /// may differ between PEs, in team order, into `dest` on every PE (`shmem_collect`,
    /// OpenSHMEM 1.5). `dest` must hold the sum of every PE's `nelems`; when it does
    /// not, every PE returns the same error. Collective over the team; algorithm: the PEs
    /// first push their `nelems` to every PE's scratch (one barrier), then their blocks
    /// to every PE, each at the sum of the `nelems` of the PEs before it.
    pub fn collect<T: Pod>(&self, dest: &SymBuf<T>, src: &SymBuf<T>, nelems: usize) -> Result<()> {
        const OP: &str = "team_collect";
        let rt = self.rt;
        let n = self.n_pes();
        let mut call = Call::new(
            self.rt.config.check_collectives,
            OP,
            dest,
            src,
            None,
            None,
            None,
        );
        if let Some(bad) = self
            .misfit(OP, Which::Src, src, Some(nelems), || {
                format!("nelems {nelems}")
            })
            .or_else(|| self.foreign(OP, Which::Dest, dest))
        {
            call.refuse(bad);
        }
        let data = self.read_judged(&mut call, src, nelems);
        let area = rt.team_area();
        let ts = &rt.teams;
        self.enter(&call)?;
        let mine = (nelems as u64).to_le_bytes();
        for k in 0..n {
            let j = (self.my_index + k) % n;
            rt.putmem(
                &area,
                ts.scratch(self.slot, 0, self.my_index) * 8,
                &mine,
                self.members.world(j),
            )?;
        }
        rt.quiet()?;
        rt.team_sync(OP, self)?;
        let mut sizes = Vec::with_capacity(n);
        for i in 0..n {
            let mut b = [0u8; 8];
            rt.getmem(&area, ts.scratch(self.slot, 0, i) * 8, &mut b, rt.my_pe())?;
            sizes.push(u64::from_le_bytes(b));
        }
        let total = sizes
            .iter()
            .try_fold(0usize, |t, &s| t.checked_add(s as usize));
        let sizes_text = || {
            sizes
                .iter()
                .enumerate()
                .map(|(i, s)| format!("team PE {i}: {s}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        self.fits(OP, Which::Dest, dest, total, || {
            format!("the sum of the team's nelems: {}", sizes_text())
        })?;
        let at: usize = sizes[..self.my_index].iter().map(|&s| s as usize).sum();
        self.push_entered(OP, dest, |_| Some((at, &data[..])))
    }

    /// Exchanges blocks of `nelems` elements between every pair of team PEs: block `j` of
    /// `src` on team PE `i` (`src[j * nelems..]`) lands in block `i` of `dest` on team PE
    /// `j` (`shmem_alltoall`, OpenSHMEM 1.5; `nvshmem_alltoall`). Both must hold
    /// `nelems * n_pes()` elements. Collective over the team; algorithm: direct push of each
    /// block to its PE.
    pub fn alltoall<T: Pod>(&self, dest: &SymBuf<T>, src: &SymBuf<T>, nelems: usize) -> Result<()> {
        self.alltoall_as("team_alltoall", dest, src, nelems, None)
    }

    /// [`Self::alltoall`] as `op`, judging `refusal` (see [`Self::broadcast_as`]).
    pub(super) fn alltoall_as<T: Pod>(
        &self,
        op: &'static str,
        dest: &SymBuf<T>,
        src: &SymBuf<T>,
        nelems: usize,
        refusal: Option<(Bad, Error)>,
    ) -> Result<()> {
        let n = self.n_pes();
        let mut call = Call::new(
            self.rt.config.check_collectives,
            op,
            dest,
            src,
            Some(nelems),
            None,
            None,
        );
        self.judge_args(&mut call, Args::Alltoall, dest, src, nelems);
        call.refuse_with(refusal);
        // Unless refused, `nelems * n` fits `src`, so it does not overflow.
        let data = self.read_judged(&mut call, src, nelems.saturating_mul(n));
        // Used only when no member refused, so that it fits `dest` and cannot wrap.
        let at = self.my_index.wrapping_mul(nelems);
        self.push(&call, dest, |j| {
            Some((at, &data[j * nelems..(j + 1) * nelems]))
        })
    }

    /// Combines `nelems` elements of `src` from every PE of the team with `op`, element by
    /// element, into `dest` on every PE (`shmem_<op>_reduce`, OpenSHMEM 1.5;
    /// `nvshmem_<op>_reduce`): `reduce(&dest, &src, n, Sum)`. `src` and `dest` may be the
    /// same allocation. Collective over the team; algorithm: all-gather reduce through the
    /// team's scratch, combining in team order (see the [module docs](self)).
    ///
    /// Bitwise operators on floats do not compile:
    ///
    /// ```compile_fail
    /// # fn main() -> symmem_runtime::Result<()> {
    /// use symmem_runtime::collectives::And;
    /// let rt = symmem_runtime::init()?;
    /// let buf = rt.alloc::<f32>(4)?;
    /// rt.team_world().reduce(&buf, &buf, 4, And)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn reduce<T: Reducible, O: ReduceOp<T>>(
        &self,
        dest: &SymBuf<T>,
        src: &SymBuf<T>,
        nelems: usize,
        op: O,
    ) -> Result<()> {
        self.reduce_as("team_reduce", dest, src, nelems, op)
    }

    /// [`Self::reduce`] as operation `name` (its stream form, on a CPU PE).
    pub(super) fn reduce_as<T: Reducible, O: ReduceOp<T>>(
        &self,
        name: &'static str,
        dest: &SymBuf<T>,
        src: &SymBuf<T>,
        nelems: usize,
        op: O,
    ) -> Result<()> {
        let n = self.n_pes();
        let mut call = Call::new(
            self.rt.config.check_collectives,
            name,
            dest,
            src,
            Some(nelems),
            None,
            Some(op_name::<O>),
        );
        self.judge_args(&mut call, Args::Reduce, dest, src, nelems);
        if n >= 2 && n.is_power_of_two() && !self.all_mapped()? {
            let data = self.read_judged(&mut call, src, nelems);
            return self.recursive_doubling(&call, dest, &data, op);
        }
        self.reduce_blocks(&mut call, dest, src, nelems, |_| 0, op)
    }

    /// Reduces and scatters: team PE `j` receives in `dest` the combination with `op` of
    /// block `j` (`src[j * nelems..(j + 1) * nelems]`) of every PE's `src`
    /// (`nvshmem_<op>_reducescatter`; OpenSHMEM 1.5 has no reduce-scatter). `src` must hold
    /// `nelems * n_pes()` elements and `dest` `nelems`. Collective over the team;
    /// algorithm: all-gather reduce as in [`Self::reduce`], each PE sending block `j` to
    /// team PE `j` only.
    pub fn reducescatter<T: Reducible, O: ReduceOp<T>>(
        &self,
        dest: &SymBuf<T>,
        src: &SymBuf<T>,
        nelems: usize,
        op: O,
    ) -> Result<()> {
        self.reducescatter_as("team_reducescatter", dest, src, nelems, op)
    }

    /// [`Self::reducescatter`] as operation `name` (its stream form, on a CPU PE).
    pub(super) fn reducescatter_as<T: Reducible, O: ReduceOp<T>>(
        &self,
        name: &'static str,
        dest: &SymBuf<T>,
        src: &SymBuf<T>,
        nelems: usize,
        op: O,
    ) -> Result<()> {
        let mut call = Call::new(
            self.rt.config.check_collectives,
            name,
            dest,
            src,
            Some(nelems),
            None,
            Some(op_name::<O>),
        );
        self.judge_args(&mut call, Args::Reducescatter, dest, src, nelems);
        self.reduce_blocks(&mut call, dest, src, nelems, |j| j * nelems, op)
    }

    /// The argument checks of a collective, which its `_on_stream` form makes on a GPU
    /// PE: `root` in the team (broadcast), then `src` and `dest` of this runtime and large
    /// enough for `nelems` as `args` sizes them.
    #[cfg(feature = "cuda")]
    pub(super) fn check_args<T>(
        &self,
        op: &'static str,
        args: Args,
        dest: &SymBuf<T>,
        src: &SymBuf<T>,
        nelems: usize,
    ) -> Result<()> {
        match self.bad_args(op, args, dest, src, nelems) {
            Some((_, e)) => Err(e),
            None => Ok(()),
        }
    }

    /// [`Self::check_args`] for a host collective: a bad argument is not returned but
    /// recorded in `call`, whose entry barrier this PE still takes so that every member
    /// returns the same error (see the module docs).
    fn judge_args<T>(
        &self,
        call: &mut Call,
        args: Args,
        dest: &SymBuf<T>,
        src: &SymBuf<T>,
        nelems: usize,
    ) {
        if let Some(bad) = self.bad_args(call.op, args, dest, src, nelems) {
            call.refuse(bad);
        }
    }

    /// The first bad argument [`Self::check_args`] finds, as a verdict for the
    /// fingerprint and the error this PE would return on its own.
    fn bad_args<T>(
        &self,
        op: &'static str,
        args: Args,
        dest: &SymBuf<T>,
        src: &SymBuf<T>,
        nelems: usize,
    ) -> Option<(Bad, Error)> {
        let n = self.n_pes();
        // Whether `src` and `dest` hold a block of `nelems` per team PE.
        let (src_blocks, dest_blocks) = match args {
            Args::Broadcast { root } if root >= n => {
                return Some((
                    Bad::Root { root },
                    Error::InvalidPe {
                        op,
                        pe: root,
                        n_pes: n,
                        access: " in this team (the root)".into(),
                    },
                ))
            }
            Args::Broadcast { .. } | Args::Reduce => (false, false),
            Args::Fcollect => (false, true),
            Args::Alltoall => (true, true),
            Args::Reducescatter => (true, false),
        };
        let fits = |which, buf, blocks: bool| {
            let need = if blocks {
                nelems.checked_mul(n)
            } else {
                Some(nelems)
            };
            self.misfit(op, which, buf, need, || {
                if blocks {
                    format!("nelems {nelems} × {n} PEs of the team")
                } else {
                    format!("nelems {nelems}")
                }
            })
        };
        fits(Which::Src, src, src_blocks).or_else(|| fits(Which::Dest, dest, dest_blocks))
    }

    /// Fails unless `buf` belongs to this runtime and holds `need` elements (`None`: the
    /// count overflowed); `which` is the argument and `why` says where `need` comes from.
    fn fits<T>(
        &self,
        op: &'static str,
        which: Which,
        buf: &SymBuf<T>,
        need: Option<usize>,
        why: impl FnOnce() -> String,
    ) -> Result<()> {
        match self.misfit(op, which, buf, need, why) {
            Some((_, e)) => Err(e),
            None => Ok(()),
        }
    }

    /// [`Self::fits`]' verdict: `None` when `buf` fits.
    fn misfit<T>(
        &self,
        op: &'static str,
        which: Which,
        buf: &SymBuf<T>,
        need: Option<usize>,
        why: impl FnOnce() -> String,
    ) -> Option<(Bad, Error)> {
        if let Some(bad) = self.foreign(op, which, buf) {
            return Some(bad);
        }
        match need {
            Some(need) if need <= buf.len => None,
            _ => Some((
                Bad::TooSmall {
                    which,
                    len: buf.len,
                    need,
                },
                Error::InvalidArgument {
                    op,
                    reason: format!(
                        "on PE {}: {} (allocation #{}, {} elements of {} bytes) is too small: {} elements needed ({})",
                        self.rt.my_pe(),
                        which.name(),
                        buf.id,
                        buf.len,
                        std::mem::size_of::<T>(),
                        need.map_or_else(|| "more than usize::MAX".into(), |n| n.to_string()),
                        why()
                    ),
                },
            )),
        }
    }

    /// The verdict on `buf` when it is an allocation of another runtime.
    fn foreign<T>(&self, op: &'static str, which: Which, buf: &SymBuf<T>) -> Option<(Bad, Error)> {
        self.rt.path.check_buf(op, buf).err().map(|e| {
            (
                Bad::Foreign {
                    which,
                    alloc: buf.id,
                    owner: buf.runtime,
                },
                e,
            )
        })
    }

    /// The first `count` elements of this PE's `src`, unless `call` is already refused
    /// (then none); a failure to read refuses `call`.
    fn read_judged<T: Pod>(&self, call: &mut Call, src: &SymBuf<T>, count: usize) -> Vec<T> {
        if call.refused() {
            return Vec::new();
        }
        match self.read_src(call.op, src, count) {
            Ok(data) => data,
            Err(e) => {
                call.refuse((Bad::Local, e));
                Vec::new()
            }
        }
    }

    /// The first `count` elements of this PE's `src` (bounds already checked).
    fn read_src<T: Pod>(&self, op: &'static str, src: &SymBuf<T>, count: usize) -> Result<Vec<T>> {
        let mut data = vec![T::zeroed(); count];
        self.rt
            .path
            .read(op, src.at(0), &mut data, self.rt.my_pe())?;
        Ok(data)
    }

    /// The direct push (see the module docs): the entry barrier, verifying `call`, then
    /// [`Self::push_entered`].
    fn push<'a, T: Pod>(
        &self,
        call: &Call,
        dest: &SymBuf<T>,
        block: impl Fn(usize) -> Option<(usize, &'a [T])>,
    ) -> Result<()> {
        self.enter(call)?;
        self.push_entered(call.op, dest, block)
    }

    /// The direct push after the entry barrier: `block(j)` (if any) put at element `at` of
    /// `dest` on team PE `j`, for every `j` from this PE's right neighbour round to itself,
    /// then `quiet` and the exit barrier.
    fn push_entered<'a, T: Pod>(
        &self,
        op: &'static str,
        dest: &SymBuf<T>,
        block: impl Fn(usize) -> Option<(usize, &'a [T])>,
    ) -> Result<()> {
        let rt = self.rt;
        let n = self.n_pes();
        for k in 1..=n {
            let j = (self.my_index + k) % n;
            if let Some((at, data)) = block(j).filter(|(_, d)| !d.is_empty()) {
                rt.path
                    .write(op, dest.at(at), data, self.members.world(j))?;
            }
        }
        rt.quiet()?;
        rt.team_sync(op, self)
    }

    /// Whether every member's heap is mapped here ([`crate::Runtime::ptr`] is `Some`):
    /// the team is within one P2P domain, and the direct-load reduce applies.
    fn all_mapped(&self) -> Result<bool> {
        let area = self.rt.team_area();
        for j in 0..self.n_pes() {
            if self.rt.ptr(&area, self.members.world(j))?.is_none() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// A reduction of `nelems` elements into `dest`, where team PE `j` combines the blocks
    /// at element `first(j)` of every PE's `src`: the direct-load reduce when every member
    /// is mapped here, else the all-gather reduce (see the module docs). `call` is the
    /// public operation, verified at the entry barrier, and `_op` is the operator (its
    /// type, `O`, is what counts).
    fn reduce_blocks<T: Reducible, O: ReduceOp<T>>(
        &self,
        call: &mut Call,
        dest: &SymBuf<T>,
        src: &SymBuf<T>,
        nelems: usize,
        first: impl Fn(usize) -> usize,
        _op: O,
    ) -> Result<()> {
        let rt = self.rt;
        let n = self.n_pes();
        let me = rt.my_pe();
        let name = call.op;
        if self.all_mapped()? {
            // Direct-load reduce: after the entry barrier every `src` holds its data; this
            // PE loads its block from each member in team order, a cache-sized chunk at a
            // time, and combines it there; the exit barrier keeps every `src` unchanged
            // until all loads are done. Each chunk's result goes straight to `dest` unless
            // `dest` overlaps `src` (the members still read it), when it waits in `held`
            // until after the barrier.
            self.enter(call)?;
            let at = first(self.my_index);
            let size = std::mem::size_of::<T>();
            let chunk = (REDUCE_CHUNK_BYTES / size).max(1).min(nelems.max(1));
            let span = |b: &SymBuf<T>| b.offset()..b.offset() + b.len() * size;
            let (d, s) = (span(dest), span(src));
            let overlaps = d.start < s.end && s.start < d.end;
            let mut held = Vec::with_capacity(if overlaps { nelems } else { 0 });
            let mut out = vec![T::zeroed(); chunk];
            let mut got = vec![T::zeroed(); chunk];
            for start in (0..nelems).step_by(chunk) {
                let len = chunk.min(nelems - start);
                let (out, got) = (&mut out[..len], &mut got[..len]);
                rt.path
                    .read(name, src.at(at + start), out, self.members.world(0))?;
                for i in 1..n {
                    rt.path
                        .read(name, src.at(at + start), got, self.members.world(i))?;
                    for (o, g) in out.iter_mut().zip(got.iter()) {
                        *o = O::apply(*o, *g);
                    }
                }
                if overlaps {
                    held.extend_from_slice(out);
                } else {
                    rt.path.write(name, dest.at(start), out, me)?;
                }
            }
            rt.team_sync(name, self)?;
            return if overlaps {
                rt.path.write(name, dest.at(0), &held, me)
            } else {
                Ok(())
            };
        }
        let count = (0..n)
            .map(|j| first(j).saturating_add(nelems))
            .max()
            .unwrap_or(0);
        let data = self.read_judged(call, src, count);
        self.gather_reduce(
            call,
            dest,
            nelems,
            |j| &data[first(j)..first(j) + nelems],
            _op,
        )
    }

    /// The recursive-doubling reduce (see the module docs) of `data` into `dest`, on a team
    /// of `2^k >= 2` PEs; `call` and `_op` as in [`Self::reduce_blocks`].
    fn recursive_doubling<T: Reducible, O: ReduceOp<T>>(
        &self,
        call: &Call,
        dest: &SymBuf<T>,
        data: &[T],
        _op: O,
    ) -> Result<()> {
        let rt = self.rt;
        let ts = &rt.teams;
        let n = self.n_pes();
        debug_assert!(n >= 2 && n.is_power_of_two());
        let me = rt.my_pe();
        let i = self.my_index;
        let area = rt.team_area();
        let per = (SCRATCH_WORDS * 8 / std::mem::size_of::<T>()).max(1);
        let name = call.op;
        self.enter(call)?;
        let mut theirs = vec![T::zeroed(); per];
        for (c, start) in (0..data.len()).step_by(per).enumerate() {
            let len = per.min(data.len() - start);
            let half = c % 2;
            let mut partial = data[start..start + len].to_vec();
            // Round r: exchange partials with team PE i ^ 2^r through scratch part r of
            // the partner's half; the lower PE's partial goes first, so both partners
            // (and, inductively, every PE) combine the same tree in team order.
            for r in 0..n.trailing_zeros() as usize {
                let partner = i ^ (1 << r);
                rt.putmem(
                    &area,
                    ts.scratch(self.slot, half, r) * 8,
                    bytemuck::cast_slice(&partial),
                    self.members.world(partner),
                )?;
                rt.quiet()?;
                rt.team_sync(name, self)?;
                rt.getmem(
                    &area,
                    ts.scratch(self.slot, half, r) * 8,
                    bytemuck::cast_slice_mut(&mut theirs[..len]),
                    me,
                )?;
                for (p, t) in partial.iter_mut().zip(&theirs[..len]) {
                    *p = if partner < i {
                        O::apply(*t, *p)
                    } else {
                        O::apply(*p, *t)
                    };
                }
            }
            rt.path.write(name, dest.at(start), &partial, me)?;
        }
        Ok(())
    }

    /// The all-gather reduce (see the module docs): `nelems` elements into `dest`, where
    /// this PE contributes `block(j)` to team PE `j`; `call` and `_op` as in
    /// [`Self::reduce_blocks`].
    fn gather_reduce<'a, T: Reducible, O: ReduceOp<T>>(
        &self,
        call: &Call,
        dest: &SymBuf<T>,
        nelems: usize,
        block: impl Fn(usize) -> &'a [T],
        _op: O,
    ) -> Result<()> {
        let rt = self.rt;
        let ts = &rt.teams;
        let n = self.n_pes();
        let me = rt.my_pe();
        let area = rt.team_area();
        let per = (SCRATCH_WORDS * 8 / std::mem::size_of::<T>()).max(1);
        let name = call.op;
        self.enter(call)?;
        let mut out = vec![T::zeroed(); per];
        let mut got = vec![T::zeroed(); per];
        for (c, start) in (0..nelems).step_by(per).enumerate() {
            let len = per.min(nelems - start);
            let half = c % 2;
            for k in 1..=n {
                let j = (self.my_index + k) % n;
                rt.putmem(
                    &area,
                    ts.scratch(self.slot, half, self.my_index) * 8,
                    bytemuck::cast_slice(&block(j)[start..start + len]),
                    self.members.world(j),
                )?;
            }
            rt.quiet()?;
            rt.team_sync(name, self)?;
            for i in 0..n {
                let into = if i == 0 { &mut out } else { &mut got };
                rt.getmem(
                    &area,
                    ts.scratch(self.slot, half, i) * 8,
                    bytemuck::cast_slice_mut(&mut into[..len]),
                    me,
                )?;
                if i > 0 {
                    for (o, g) in out[..len].iter_mut().zip(&got[..len]) {
                        *o = O::apply(*o, *g);
                    }
                }
            }
            rt.path.write(name, dest.at(start), &out[..len], me)?;
        }
        Ok(())
    }
}

/// A collective, as [`Team::check_args`] checks its arguments: how its buffers are sized.
#[derive(Debug, Clone, Copy)]
pub(super) enum Args {
    /// `src` and `dest` hold `nelems`; `root` must be a team PE.
    Broadcast {
        /// The team PE whose `src` is copied.
        root: usize,
    },
    /// `src` holds `nelems`, `dest` a block of `nelems` per team PE.
    Fcollect,
    /// `src` and `dest` hold a block of `nelems` per team PE.
    Alltoall,
    /// `src` and `dest` hold `nelems`.
    Reduce,
    /// `src` holds a block of `nelems` per team PE, `dest` `nelems`.
    Reducescatter,
}

/// The host collectives, in the order of their fingerprints' first word.
const COLLECTIVES: [&str; 6] = [
    "team_broadcast",
    "team_fcollect",
    "team_collect",
    "team_alltoall",
    "team_reduce",
    "team_reducescatter",
];

/// A fingerprint word for an argument the collective does not take.
const NONE: u64 = u64::MAX;

/// Fingerprint word: the entry barrier's epoch (stamped by [`Team::enter`]).
const EPOCH: usize = 8;
/// Fingerprint word: the call's number among the host collectives on the team
/// (`SYMMEM_CHECK_COLLECTIVES` only).
const SEQ: usize = 9;
/// Fingerprint words: this PE's verdict on its own arguments ([`Bad::words`]; 0: good).
const VERDICT: usize = 10;

/// A collective call's arguments as its fingerprint (see the module docs): the words
/// every member of the team compares after the entry barrier.
pub(super) struct Call {
    /// The public operation, for errors.
    op: &'static str,
    /// The collective and element size; the element type's name (16 bytes); the operator's
    /// name; `nelems`, root, `dest` and `src` heap offsets (`NONE` where not taken); the
    /// entry barrier's epoch and the call's number; the verdict (three words).
    words: [u64; FINGERPRINT_WORDS],
    /// The error this PE's own arguments make, returned as such when every member's
    /// arguments are bad alike.
    local: std::cell::Cell<Option<Error>>,
}

/// An argument of a collective that names a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Which {
    /// `src`.
    Src,
    /// `dest`.
    Dest,
}

impl Which {
    /// The argument's name.
    fn name(self) -> &'static str {
        match self {
            Which::Src => "src",
            Which::Dest => "dest",
        }
    }
}

/// What is wrong with a PE's own arguments to a host collective: the verdict its
/// fingerprint carries to every member (three words, [`Bad::words`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Bad {
    /// The broadcast's root is not a team PE.
    Root {
        /// The root passed.
        root: usize,
    },
    /// A buffer is an allocation of another runtime instance.
    Foreign {
        /// Which buffer.
        which: Which,
        /// Its allocation number.
        alloc: u64,
        /// The runtime instance it belongs to.
        owner: u64,
    },
    /// A buffer holds fewer elements than the call needs.
    TooSmall {
        /// Which buffer.
        which: Which,
        /// The elements it holds.
        len: usize,
        /// The elements needed (`None`: more than `usize::MAX`).
        need: Option<usize>,
    },
    /// Reading this PE's `src` failed (its own error says why).
    Local,
    /// `dest` and `src` are one allocation, which a stream-ordered broadcast, fcollect or
    /// alltoall cannot take.
    SameAllocation {
        /// Its allocation number.
        alloc: u64,
    },
}

impl Bad {
    /// The verdict's fingerprint words: a nonzero code, then two values.
    fn words(self) -> [u64; 3] {
        let which = |w: Which| u64::from(w == Which::Dest);
        match self {
            Bad::Root { root } => [1, root as u64, 0],
            Bad::Foreign {
                which: w,
                alloc,
                owner,
            } => [2 + which(w), alloc, owner],
            Bad::TooSmall {
                which: w,
                len,
                need,
            } => [4 + which(w), len as u64, need.map_or(NONE, |n| n as u64)],
            Bad::Local => [6, 0, 0],
            Bad::SameAllocation { alloc } => [7, alloc, 0],
        }
    }

    /// What the verdict `words` says was wrong, on a team of `n`.
    fn describe(words: &[u64], n: usize) -> String {
        let which = |code: u64| {
            if code.is_multiple_of(2) {
                "src"
            } else {
                "dest"
            }
        };
        match *words {
            [1, root, _] => format!("root {root} is not a PE of the team (n_pes = {n})"),
            [c @ (2 | 3), alloc, owner] => format!(
                "{} is allocation #{alloc} of another runtime instance ({owner})",
                which(c)
            ),
            [c @ (4 | 5), len, need] => format!(
                "{} ({len} elements) is too small: {} elements needed",
                which(c),
                if need == NONE {
                    "more than usize::MAX".to_string()
                } else {
                    need.to_string()
                }
            ),
            [6, ..] => "reading its src failed".to_string(),
            [7, alloc, _] => format!("dest and src are the same allocation (#{alloc})"),
            _ => format!("an unknown verdict {words:?}"),
        }
    }
}

/// Up to `N * 8` bytes of a type name's last path segment, as little-endian words.
fn name_words<const N: usize>(full: &str) -> [u64; N] {
    let head = full.split('<').next().unwrap_or(full);
    let start = head.rfind("::").map_or(0, |i| i + 2);
    let mut bytes = [0u8; 64];
    for (b, s) in bytes.iter_mut().zip(full[start..].bytes()).take(N * 8) {
        *b = s;
    }
    std::array::from_fn(|i| {
        u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]))
    })
}

/// The text of words from [`name_words`].
fn words_name(words: &[u64]) -> String {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    String::from_utf8_lossy(&bytes)
        .trim_end_matches('\0')
        .to_string()
}

/// The operator `O`'s name as one fingerprint word (`Sum`, `Max` …).
fn op_name<O>() -> u64 {
    name_words::<1>(std::any::type_name::<O>())[0]
}

impl Call {
    /// The fingerprint of `op` on `dest` and `src` with these arguments (`None`: not
    /// taken, or allowed to differ, like `collect`'s counts); `reduce_op` is [`op_name`].
    /// Unless `checked` (`SYMMEM_CHECK_COLLECTIVES`), only `op` is kept: computing the
    /// words costs more than a small collective can spare.
    fn new<T: Pod>(
        checked: bool,
        op: &'static str,
        dest: &SymBuf<T>,
        src: &SymBuf<T>,
        nelems: Option<usize>,
        root: Option<usize>,
        reduce_op: Option<fn() -> u64>,
    ) -> Call {
        let mut words = [NONE; FINGERPRINT_WORDS];
        words[EPOCH..].fill(0);
        if checked {
            // A stream form on a CPU PE runs the host collective: the same kind.
            let host = op.trim_end_matches("_on_stream");
            let kind = COLLECTIVES
                .iter()
                .position(|c| *c == host)
                .map_or(0, |k| k + 1);
            let [n0, n1] = name_words::<2>(std::any::type_name::<T>());
            let opt = |v: Option<usize>| v.map_or(NONE, |v| v as u64);
            words[..EPOCH].copy_from_slice(&[
                kind as u64 | (std::mem::size_of::<T>() as u64) << 8,
                n0,
                n1,
                reduce_op.map_or(NONE, |name| name()),
                opt(nelems),
                opt(root),
                // The buffers of a call that moves nothing may differ (C passes NULL).
                if nelems == Some(0) {
                    NONE
                } else {
                    dest.offset as u64
                },
                if nelems == Some(0) {
                    NONE
                } else {
                    src.offset as u64
                },
            ]);
        }
        Call {
            op,
            words,
            local: std::cell::Cell::new(None),
        }
    }

    /// Records `refusal`, if any, as [`Self::refuse`] does.
    fn refuse_with(&mut self, refusal: Option<(Bad, Error)>) {
        if let Some(bad) = refusal {
            self.refuse(bad);
        }
    }

    /// Records this PE's verdict on its own arguments (the first bad one found wins).
    fn refuse(&mut self, (bad, error): (Bad, Error)) {
        if self.refused() {
            return;
        }
        self.words[VERDICT..].copy_from_slice(&bad.words());
        self.local.set(Some(error));
    }

    /// Whether this PE's own arguments are bad.
    fn refused(&self) -> bool {
        self.words[VERDICT] != 0
    }
}

impl Described for Call {
    fn describe(w: &[u64]) -> String {
        let name = (w[0] & 0xff)
            .checked_sub(1)
            .and_then(|k| COLLECTIVES.get(k as usize))
            .map_or_else(|| format!("an unknown collective {w:?}"), |c| c.to_string());
        let mut args = vec![format!("{} ({} bytes)", words_name(&w[1..3]), w[0] >> 8)];
        if w[3] != NONE {
            args.push(words_name(&w[3..4]));
        }
        if w[4] != NONE {
            args.push(format!("nelems {}", w[4]));
        }
        if w[5] != NONE {
            args.push(format!("root {}", w[5]));
        }
        args.push(format!("dest at heap offset {}", w[6]));
        args.push(format!("src at heap offset {}", w[7]));
        format!(
            "{name}({}) [its host collective #{} on the team, at the team's barrier {}]",
            args.join(", "),
            w[SEQ],
            w[EPOCH]
        )
    }

    fn differing(a: &[u64], b: &[u64]) -> Vec<&'static str> {
        let mut out = Vec::new();
        if a[EPOCH] != b[EPOCH] {
            out.push("the barrier (a member entered this barrier from sync, barrier or a device collective, not from this call: what is shown for it is its last host collective)");
        }
        if a[SEQ] != b[SEQ] {
            out.push("the call's number (a member skipped a host collective on the team, or called one more)");
        }
        if a[0] & 0xff != b[0] & 0xff {
            out.push("the collective");
            return out;
        }
        if a[0] != b[0] || a[1..3] != b[1..3] {
            out.push("the element type");
        }
        let names = ["the operator", "nelems", "root", "dest", "src"];
        out.extend(
            names
                .iter()
                .enumerate()
                .filter(|(i, _)| a[i + 3] != b[i + 3])
                .map(|(_, n)| *n),
        );
        out
    }
}

impl Team<'_> {
    /// The entry barrier of a collective (see the module docs). Every member takes it,
    /// whatever its arguments, and then returns the same error when a member's own
    /// arguments were bad (the verdict in `call`) or, under
    /// `SYMMEM_CHECK_COLLECTIVES=1`, when the members' fingerprints differ
    /// ([`Error::TeamMismatch`]).
    fn enter(&self, call: &Call) -> Result<()> {
        let rt = self.rt;
        let n = self.n_pes();
        let local = call.local.take();
        if n == 1 {
            return match local {
                Some(e) => Err(e),
                None => rt.team_sync(call.op, self),
            };
        }
        let checked = rt.config.check_collectives;
        if !checked && local.is_none() {
            // The default path: the barrier and one load of this PE's alert word.
            let epoch = rt.team_sync_epoch(call.op, self)?;
            return self.alerted(call.op, epoch);
        }
        let ts = &rt.teams;
        let me = rt.my_pe();
        let area = rt.team_area();
        // Buffer `epoch % 2` of the entry barrier's epoch, the same on every member: the
        // next write of this buffer, two barriers on, follows a barrier that every member
        // enters only after reading this one.
        let epoch = rt.team_epoch(call.op, self)? + 1;
        let parity = (epoch % 2) as usize;
        let at = |i: usize| ts.fingerprint(self.slot, parity, i) * 8;
        let mut words = call.words;
        words[EPOCH] = epoch;
        if checked {
            let mut table = ts.lock();
            let counters = &mut table.slots[self.slot];
            counters.collectives += 1;
            words[SEQ] = counters.collectives;
        }
        let mine: &[u8] = bytemuck::cast_slice(&words);
        if !checked {
            // This PE's arguments are bad, and the others compare nothing: its verdict
            // goes to every member's buffer, and the epoch to every member's alert word,
            // before the barrier, which (after the quiet) publishes both.
            let alert = area.at(ts.alert(self.slot, parity));
            for k in 1..=n {
                let j = self.members.world((self.my_index + k) % n);
                rt.putmem(&area, at(self.my_index), mine, j)?;
                rt.atomic_set(alert, epoch, j)?;
            }
            rt.quiet()?;
            rt.team_sync(call.op, self)?;
            return self.judge(
                call.op,
                epoch,
                &self.read_fingerprints(call.op, parity)?,
                local,
            );
        }
        if self.all_mapped()? {
            match self.fingerprint_words(call.op, at(self.my_index), me)? {
                // Published by the barrier's release signal.
                Some(w) => w
                    .iter()
                    .zip(&words)
                    .for_each(|(w, v)| w.store(*v, Ordering::Relaxed)),
                None => rt.putmem(&area, at(self.my_index), mine, me)?,
            }
            rt.team_sync(call.op, self)?;
            return self.verify_mapped(call.op, &words, parity, local);
        }
        for k in 1..=n {
            let j = (self.my_index + k) % n;
            rt.putmem(&area, at(self.my_index), mine, self.members.world(j))?;
        }
        rt.quiet()?;
        rt.team_sync(call.op, self)?;
        self.judge(
            call.op,
            epoch,
            &self.read_fingerprints(call.op, parity)?,
            local,
        )
    }

    /// After the entry barrier of `epoch` on the default path (no check): Ok unless a
    /// member with bad arguments stored `epoch` in this PE's alert word, and then the
    /// error naming it, from the verdicts in this PE's fingerprint buffer.
    fn alerted(&self, op: &'static str, epoch: u64) -> Result<()> {
        let rt = self.rt;
        let parity = (epoch % 2) as usize;
        let area = rt.team_area();
        let alert = area.at(rt.teams.alert(self.slot, parity));
        // Stored before the barrier, whose acquire wait made it visible.
        if rt
            .path
            .load_word(op, &rt.path.word(op, alert, rt.my_pe())?)?
            != epoch
        {
            return Ok(());
        }
        self.judge(op, epoch, &self.read_fingerprints(op, parity)?, None)
    }

    /// Every member's fingerprint in buffer `parity` of this PE's heap, in team order.
    fn read_fingerprints(
        &self,
        op: &'static str,
        parity: usize,
    ) -> Result<Vec<[u64; FINGERPRINT_WORDS]>> {
        let rt = self.rt;
        let ts = &rt.teams;
        let mut all = vec![[0u64; FINGERPRINT_WORDS]; self.n_pes()];
        for (i, theirs) in all.iter_mut().enumerate() {
            let at = ts.fingerprint(self.slot, parity, i) * 8;
            match self.fingerprint_words(op, at, rt.my_pe())? {
                Some(w) => theirs
                    .iter_mut()
                    .zip(w)
                    .for_each(|(o, w)| *o = w.load(Ordering::Relaxed)),
                None => rt.getmem(
                    &rt.team_area(),
                    at,
                    bytemuck::cast_slice_mut(theirs),
                    rt.my_pe(),
                )?,
            }
        }
        Ok(all)
    }

    /// After the entry barrier on a team whose heaps are all mapped here: compares every
    /// other member's fingerprint in buffer `parity`, loaded from its heap, with
    /// `words`, and reads them all for the error when one differs or this PE's own
    /// arguments are bad (`local`).
    fn verify_mapped(
        &self,
        op: &'static str,
        words: &[u64; FINGERPRINT_WORDS],
        parity: usize,
        local: Option<Error>,
    ) -> Result<()> {
        let ts = &self.rt.teams;
        let n = self.n_pes();
        let at = |i: usize| ts.fingerprint(self.slot, parity, i) * 8;
        let load = |i: usize| -> Result<[u64; FINGERPRINT_WORDS]> {
            let pe = self.members.world(i);
            let fp = self.fingerprint_words(op, at(i), pe)?;
            let mut out = [0u64; FINGERPRINT_WORDS];
            match fp {
                // The barrier's acquire wait made the member's stores visible.
                Some(w) => out
                    .iter_mut()
                    .zip(w)
                    .for_each(|(o, w)| *o = w.load(Ordering::Relaxed)),
                None => self.rt.getmem(
                    &self.rt.team_area(),
                    at(i),
                    bytemuck::cast_slice_mut(&mut out),
                    pe,
                )?,
            }
            Ok(out)
        };
        for k in 1..n {
            if local.is_some() || load((self.my_index + k) % n)? != *words {
                let all = (0..n).map(load).collect::<Result<Vec<_>>>()?;
                return self.judge(op, words[EPOCH], &all, local);
            }
        }
        Ok(())
    }

    /// The fingerprint words at byte `at` of the team area in `pe`'s heap, as atomics,
    /// when that heap is host memory mapped here (`None`: a GPU heap or a remote PE).
    fn fingerprint_words(
        &self,
        op: &'static str,
        at: usize,
        pe: usize,
    ) -> Result<Option<&[AtomicU64]>> {
        let area = self.rt.team_area();
        match self
            .rt
            .path
            .locate(op, area.at(at / 8), FINGERPRINT_WORDS, pe)?
        {
            // SAFETY: `locate` checked that the FINGERPRINT_WORDS words lie in the team
            // area, which is mapped, 8-byte aligned, while the runtime (which `self`
            // borrows) lives; fingerprints in host memory are only accessed through
            // these atomics or by the runtime's own `putmem`/`getmem` of whole words.
            Located::Host(p) => Ok(Some(unsafe {
                std::slice::from_raw_parts(p.cast::<AtomicU64>(), FINGERPRINT_WORDS)
            })),
            _ => Ok(None),
        }
    }

    /// The verdict of the entry barrier of `epoch`, from every member's fingerprint
    /// `all` (in team order; under `SYMMEM_CHECK_COLLECTIVES` every member's, otherwise
    /// only those of members with bad arguments are stamped with `epoch`): when some
    /// member's own arguments were bad, the error naming each such member and what was
    /// wrong (this PE's own error, `local`, when every member's were bad alike); else,
    /// under the check, the [`Error::TeamMismatch`] of members that differ.
    fn judge(
        &self,
        op: &'static str,
        epoch: u64,
        all: &[[u64; FINGERPRINT_WORDS]],
        local: Option<Error>,
    ) -> Result<()> {
        let n = self.n_pes();
        let bad: Vec<usize> = (0..n)
            .filter(|&i| all[i][EPOCH] == epoch && all[i][VERDICT] != 0)
            .collect();
        if !bad.is_empty() {
            let alike = bad.len() == n && all.iter().all(|w| w[VERDICT..] == all[0][VERDICT..]);
            if let (true, Some(e)) = (alike, local) {
                return Err(e);
            }
            let each = bad
                .iter()
                .map(|&i| {
                    format!(
                        "team PE {i} (world PE {}): {}",
                        self.members.world(i),
                        Bad::describe(&all[i][VERDICT..], n)
                    )
                })
                .collect::<Vec<_>>()
                .join("; ");
            return Err(Error::InvalidArgument {
                op,
                reason: format!(
                    "bad arguments on {} of the team's {n} PEs ({each}); every member of the team returns this error after the entry barrier, and no data moved",
                    bad.len()
                ),
            });
        }
        if let Some(e) = local {
            // Not seen by the others: cannot happen, as this PE stamped its own verdict.
            return Err(e);
        }
        if !self.rt.config.check_collectives {
            return Ok(());
        }
        alike::check::<Call, _>(all, Pes::Team(&|i| self.members.world(i)), |calls| {
            Error::TeamMismatch {
                op,
                detail: format!("a collective on a team of {n}: {calls}"),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_round_trip_through_words() {
        let bad = [
            (
                Bad::Root { root: 9 },
                "root 9 is not a PE of the team (n_pes = 4)",
            ),
            (
                Bad::TooSmall {
                    which: Which::Dest,
                    len: 2,
                    need: Some(12),
                },
                "dest (2 elements) is too small: 12 elements needed",
            ),
            (
                Bad::TooSmall {
                    which: Which::Src,
                    len: 2,
                    need: None,
                },
                "src (2 elements) is too small: more than usize::MAX elements needed",
            ),
            (
                Bad::Foreign {
                    which: Which::Src,
                    alloc: 3,
                    owner: 1,
                },
                "src is allocation #3 of another runtime instance (1)",
            ),
            (Bad::Local, "reading its src failed"),
            (
                Bad::SameAllocation { alloc: 5 },
                "dest and src are the same allocation (#5)",
            ),
        ];
        for (b, text) in bad {
            assert_ne!(b.words()[0], 0, "a verdict is never 0, which means good");
            assert_eq!(Bad::describe(&b.words(), 4), text);
        }
    }

    #[test]
    fn names_round_trip_through_words() {
        assert_eq!(words_name(&name_words::<2>("u64")), "u64");
        assert_eq!(
            words_name(&[op_name::<Sum>()]),
            "Sum",
            "the operator's last path segment"
        );
        assert_eq!(
            words_name(&name_words::<2>("my_crate::pixels::Rgba<f32>")),
            "Rgba<f32>"
        );
        assert_eq!(
            words_name(&name_words::<2>("a::AVeryLongTypeNameIndeed")),
            "AVeryLongTypeNam",
            "truncated to 16 bytes"
        );
    }

    #[test]
    fn differing_names_the_arguments() {
        let [n0, n1] = name_words::<2>("u64");
        let a = [
            5 | 8 << 8,
            n0,
            n1,
            op_name::<Sum>(),
            3,
            NONE,
            64,
            128,
            7,
            2,
            0,
            0,
            0,
        ];
        let mut b = a;
        b[4] = 4;
        b[7] = 192;
        assert_eq!(Call::differing(&a, &b), vec!["nelems", "src"]);
        assert_eq!(
            Call::describe(&b),
            "team_reduce(u64 (8 bytes), Sum, nelems 4, dest at heap offset 64, src at heap offset 192) [its host collective #2 on the team, at the team's barrier 7]"
        );
        // A member that entered the barrier from elsewhere (a stale fingerprint), or
        // whose calls are one ahead, is named by the epoch and the number.
        let mut d = a;
        d[EPOCH] = 5;
        d[SEQ] = 1;
        let diff = Call::differing(&a, &d);
        assert!(
            diff.len() == 2
                && diff[0].starts_with("the barrier")
                && diff[1].starts_with("the call's number"),
            "{diff:?}"
        );
        let mut c = a;
        c[0] = 1 | 8 << 8;
        assert_eq!(Call::differing(&a, &c), vec!["the collective"]);
        c = a;
        c[0] = 5 | 4 << 8;
        c[3] = op_name::<Max>();
        assert_eq!(
            Call::differing(&a, &c),
            vec!["the element type", "the operator"]
        );
    }
}
