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
//! # Where this differs from OpenSHMEM 1.5
//! - Arguments must be the same on every member (as in OpenSHMEM), but unlike a team split
//!   they are not verified across PEs: each PE checks its own arguments, which are the
//!   same on every PE when the program is correct, so every PE returns the same error.
//!   Members that pass different `nelems` or roots get undefined results (or a timeout).
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
//! not built (see the README).

use bytemuck::Pod;

use super::{Team, SCRATCH_WORDS};
use crate::error::{Error, Result};
use crate::sym::SymBuf;

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
        const OP: &str = "team_broadcast";
        if root >= self.n_pes() {
            return Err(Error::InvalidPe {
                op: OP,
                pe: root,
                n_pes: self.n_pes(),
                access: " in this team (the root)".into(),
            });
        }
        self.fits(OP, "src", src, Some(nelems), || format!("nelems {nelems}"))?;
        self.fits(OP, "dest", dest, Some(nelems), || {
            format!("nelems {nelems}")
        })?;
        let data = if self.my_index == root {
            self.read_src(OP, src, nelems)?
        } else {
            Vec::new()
        };
        self.push(OP, dest, |_| {
            (self.my_index == root).then_some((0, &data[..]))
        })
    }

    /// Concatenates `nelems` elements of `src` from every PE of the team, in team order,
    /// into `dest` on every PE: team PE `i`'s block lands at `dest[i * nelems..]`
    /// (`shmem_fcollect`, OpenSHMEM 1.5; `nvshmem_fcollect`). `dest` must hold
    /// `nelems * n_pes()` elements. Collective over the team; algorithm: direct push of each
    /// PE's block to every PE.
    pub fn fcollect<T: Pod>(&self, dest: &SymBuf<T>, src: &SymBuf<T>, nelems: usize) -> Result<()> {
        const OP: &str = "team_fcollect";
        let n = self.n_pes();
        self.fits(OP, "src", src, Some(nelems), || format!("nelems {nelems}"))?;
        self.fits(OP, "dest", dest, nelems.checked_mul(n), || {
            format!("nelems {nelems} × {n} PEs of the team")
        })?;
        let data = self.read_src(OP, src, nelems)?;
        let at = self.my_index * nelems;
        self.push(OP, dest, |_| Some((at, &data[..])))
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
        self.fits(OP, "src", src, Some(nelems), || format!("nelems {nelems}"))?;
        rt.check_buf(OP, dest)?;
        let data = self.read_src(OP, src, nelems)?;
        let area = rt.team_area();
        let ts = &rt.teams;
        rt.team_sync(OP, self)?;
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
        self.fits(OP, "dest", dest, total, || {
            format!("the sum of the team's nelems: {}", sizes_text())
        })?;
        let at: usize = sizes[..self.my_index].iter().map(|&s| s as usize).sum();
        self.push(OP, dest, |_| Some((at, &data[..])))
    }

    /// Exchanges blocks of `nelems` elements between every pair of team PEs: block `j` of
    /// `src` on team PE `i` (`src[j * nelems..]`) lands in block `i` of `dest` on team PE
    /// `j` (`shmem_alltoall`, OpenSHMEM 1.5; `nvshmem_alltoall`). Both must hold
    /// `nelems * n_pes()` elements. Collective over the team; algorithm: direct push of each
    /// block to its PE.
    pub fn alltoall<T: Pod>(&self, dest: &SymBuf<T>, src: &SymBuf<T>, nelems: usize) -> Result<()> {
        const OP: &str = "team_alltoall";
        let n = self.n_pes();
        let total = nelems.checked_mul(n);
        let why = || format!("nelems {nelems} × {n} PEs of the team");
        self.fits(OP, "src", src, total, why)?;
        self.fits(OP, "dest", dest, total, why)?;
        let data = self.read_src(OP, src, nelems * n)?;
        let at = self.my_index * nelems;
        self.push(OP, dest, |j| {
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
        const OP: &str = "team_reduce";
        self.fits(OP, "src", src, Some(nelems), || format!("nelems {nelems}"))?;
        self.fits(OP, "dest", dest, Some(nelems), || {
            format!("nelems {nelems}")
        })?;
        let n = self.n_pes();
        if n >= 2 && n.is_power_of_two() && !self.all_mapped()? {
            let data = self.read_src(OP, src, nelems)?;
            return self.recursive_doubling(OP, dest, &data, op);
        }
        self.reduce_blocks(OP, dest, src, nelems, |_| 0, op)
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
        const OP: &str = "team_reducescatter";
        let n = self.n_pes();
        self.fits(OP, "src", src, nelems.checked_mul(n), || {
            format!("nelems {nelems} × {n} PEs of the team")
        })?;
        self.fits(OP, "dest", dest, Some(nelems), || {
            format!("nelems {nelems}")
        })?;
        self.reduce_blocks(OP, dest, src, nelems, |j| j * nelems, op)
    }

    /// Fails unless `buf` belongs to this runtime and holds `need` elements (`None`: the
    /// count overflowed); `name` is the argument and `why` says where `need` comes from.
    fn fits<T>(
        &self,
        op: &'static str,
        name: &str,
        buf: &SymBuf<T>,
        need: Option<usize>,
        why: impl FnOnce() -> String,
    ) -> Result<()> {
        self.rt.check_buf(op, buf)?;
        match need {
            Some(need) if need <= buf.len => Ok(()),
            _ => Err(Error::InvalidArgument {
                op,
                reason: format!(
                    "on PE {}: {name} (allocation #{}, {} elements of {} bytes) is too small: {} elements needed ({})",
                    self.rt.my_pe(),
                    buf.id,
                    buf.len,
                    std::mem::size_of::<T>(),
                    need.map_or_else(|| "more than usize::MAX".into(), |n| n.to_string()),
                    why()
                ),
            }),
        }
    }

    /// The first `count` elements of this PE's `src` (bounds already checked).
    fn read_src<T: Pod>(&self, op: &'static str, src: &SymBuf<T>, count: usize) -> Result<Vec<T>> {
        let mut data = vec![T::zeroed(); count];
        self.rt
            .copy_from(op, src.at(0), &mut data, self.rt.my_pe())?;
        Ok(data)
    }

    /// The direct push (see the module docs): the entry barrier, then `block(j)` (if any)
    /// put at element `at` of `dest` on team PE `j`, for every `j` from this PE's right
    /// neighbour round to itself, then `quiet` and the exit barrier.
    fn push<'a, T: Pod>(
        &self,
        op: &'static str,
        dest: &SymBuf<T>,
        block: impl Fn(usize) -> Option<(usize, &'a [T])>,
    ) -> Result<()> {
        let rt = self.rt;
        let n = self.n_pes();
        rt.team_sync(op, self)?;
        for k in 1..=n {
            let j = (self.my_index + k) % n;
            if let Some((at, data)) = block(j).filter(|(_, d)| !d.is_empty()) {
                rt.copy_to(op, dest.at(at), data, self.members.world(j))?;
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
    /// is mapped here, else the all-gather reduce (see the module docs). `name` names the
    /// public operation in errors and `_op` is the operator (its type, `O`, is what counts).
    fn reduce_blocks<T: Reducible, O: ReduceOp<T>>(
        &self,
        name: &'static str,
        dest: &SymBuf<T>,
        src: &SymBuf<T>,
        nelems: usize,
        first: impl Fn(usize) -> usize,
        _op: O,
    ) -> Result<()> {
        let rt = self.rt;
        let n = self.n_pes();
        let me = rt.my_pe();
        if self.all_mapped()? {
            // Direct-load reduce: after the entry barrier every `src` holds its data; this
            // PE loads its block from each member in team order; the exit barrier keeps
            // every `src` unchanged until all loads are done, so `dest` (which may be
            // `src`) is written only after it.
            rt.team_sync(name, self)?;
            let at = first(self.my_index);
            let mut out = vec![T::zeroed(); nelems];
            let mut got = vec![T::zeroed(); nelems];
            for i in 0..n {
                let into = if i == 0 { &mut out } else { &mut got };
                rt.copy_from(name, src.at(at), into, self.members.world(i))?;
                if i > 0 {
                    for (o, g) in out.iter_mut().zip(&got) {
                        *o = O::apply(*o, *g);
                    }
                }
            }
            rt.team_sync(name, self)?;
            return rt.copy_to(name, dest.at(0), &out, me);
        }
        let count = (0..n).map(|j| first(j) + nelems).max().unwrap_or(0);
        let data = self.read_src(name, src, count)?;
        self.gather_reduce(
            name,
            dest,
            nelems,
            |j| &data[first(j)..first(j) + nelems],
            _op,
        )
    }

    /// The recursive-doubling reduce (see the module docs) of `data` into `dest`, on a team
    /// of `2^k >= 2` PEs; `name` and `_op` as in [`Self::reduce_blocks`].
    fn recursive_doubling<T: Reducible, O: ReduceOp<T>>(
        &self,
        name: &'static str,
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
        rt.team_sync(name, self)?;
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
            rt.copy_to(name, dest.at(start), &partial, me)?;
        }
        Ok(())
    }

    /// The all-gather reduce (see the module docs): `nelems` elements into `dest`, where
    /// this PE contributes `block(j)` to team PE `j`; `name` and `_op` as in
    /// [`Self::reduce_blocks`].
    fn gather_reduce<'a, T: Reducible, O: ReduceOp<T>>(
        &self,
        name: &'static str,
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
        rt.team_sync(name, self)?;
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
            rt.copy_to(name, dest.at(start), &out[..len], me)?;
        }
        Ok(())
    }
}
