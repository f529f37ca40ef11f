//! Stream-ordered collectives on a team (NVSHMEM's `nvshmemx_barrier_on_stream`,
//! `nvshmemx_team_sync_on_stream`, `nvshmemx_TYPENAME_broadcast_on_stream`, `_fcollect_`,
//! `_alltoall_`, `nvshmemx_TYPENAME_OP_reduce_on_stream` and `_reducescatter_`).
//!
//! On a GPU PE each call checks its arguments on the host, then queues one helper kernel
//! of `symmem-runtime-kernels` (`stream_team_*`) on the stream: one block of
//! `TEAM_THREADS` threads running the device `_block` collective on the team's
//! [`Team::device`] handle, so the collective runs after the work already on the stream and
//! before the work queued after it, without blocking the host. Errors of the kernel itself
//! (a member that dies, `SYMMEM_TIMEOUT`) surface when the stream is synchronized. An
//! argument error is returned before anything is queued, and only on the PE that made it:
//! the other members' kernels wait for this PE's, until `SYMMEM_TIMEOUT` if it is set
//! (agreeing on a verdict would need the device collectives to exchange one; they do not
//! yet). On a CPU PE a stream is the calling thread and the call is the host collective,
//! which judges the same arguments and exchanges the verdict: one PE's bad argument fails
//! the call on every member, which stay in step, as with the host collectives.
//!
//! # Rules (beyond the host collectives')
//! - The team's PEs must be evenly spaced (it needs a device handle), on both kinds of PE,
//!   so that one program behaves the same on both.
//! - `dest` and `src` must be different allocations, except for reductions (the device
//!   collectives push straight from `src`, without copying it first).
//! - Host collectives on a team must not run while a stream collective on the same team is
//!   still queued: both advance the team's barrier epoch and use its scratch. Synchronize
//!   the stream first (as NVSHMEM requires for its stream and host collectives).
//! - Collect (sizes differing per PE) has no stream form: its `dest` could only be checked
//!   against the sum of the sizes on the device, after queueing.

use bytemuck::Pod;

#[cfg(feature = "cuda")]
use super::collectives::Args;
use super::collectives::{Bad, ReduceOp, Reducible};
use super::Team;
use crate::error::{Error, Result};
use crate::ops::stream::Stream;
use crate::sym::SymBuf;
use symmem_device::DeviceTeam;

impl Team<'_> {
    /// A barrier of the team in stream order: every earlier operation of this PE's
    /// `stream` is complete and visible, and later work of `stream` starts once every
    /// member has reached it (`nvshmemx_barrier_on_stream`). GPU PE: `team_barrier_block`
    /// in a helper kernel; CPU PE: [`Self::barrier`].
    pub fn barrier_on_stream(&self, stream: &Stream) -> Result<()> {
        const OP: &str = "team_barrier_on_stream";
        let _team = self.prepare(OP, stream)?;
        #[cfg(feature = "cuda")]
        if self.rt.is_gpu() {
            return self.queue(
                OP,
                stream,
                symmem_runtime_kernels::stream_team_barrier::KERNEL,
                (_team, 0u32),
            );
        }
        self.barrier()
    }

    /// [`Self::barrier_on_stream`] without completing earlier operations first
    /// (`nvshmemx_team_sync_on_stream`). GPU PE: `team_sync_block`; CPU PE:
    /// [`Self::sync`].
    pub fn sync_on_stream(&self, stream: &Stream) -> Result<()> {
        const OP: &str = "team_sync_on_stream";
        let _team = self.prepare(OP, stream)?;
        #[cfg(feature = "cuda")]
        if self.rt.is_gpu() {
            return self.queue(
                OP,
                stream,
                symmem_runtime_kernels::stream_team_barrier::KERNEL,
                (_team, 1u32),
            );
        }
        self.sync()
    }

    /// [`Self::broadcast`] in stream order (`nvshmemx_broadcast_on_stream`): `nelems`
    /// elements of `src` on team PE `root` into `dest` on every member. `dest` and `src`
    /// must be different allocations. Errors: `root` outside the team, `nelems` past `src`
    /// or `dest`, the same allocation twice, a team whose PEs are not evenly spaced, a
    /// stream or allocation of another runtime (see the module docs for which PEs return
    /// them).
    pub fn broadcast_on_stream<T: Pod>(
        &self,
        dest: &SymBuf<T>,
        src: &SymBuf<T>,
        nelems: usize,
        root: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.copy_on_stream(Copying::Broadcast { root }, dest, src, nelems, stream)
    }

    /// [`Self::fcollect`] in stream order (`nvshmemx_fcollect_on_stream`): team PE `i`'s
    /// `nelems` elements of `src` land at `dest[i * nelems..]` on every member. `dest`
    /// (`nelems * n_pes()` elements) and `src` must be different allocations. Errors as
    /// [`Self::broadcast_on_stream`].
    pub fn fcollect_on_stream<T: Pod>(
        &self,
        dest: &SymBuf<T>,
        src: &SymBuf<T>,
        nelems: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.copy_on_stream(Copying::Fcollect, dest, src, nelems, stream)
    }

    /// [`Self::alltoall`] in stream order (`nvshmemx_alltoall_on_stream`): block `j` of
    /// `src` on team PE `i` lands in block `i` of `dest` on team PE `j`. Both hold
    /// `nelems * n_pes()` elements and must be different allocations. Errors as
    /// [`Self::broadcast_on_stream`].
    pub fn alltoall_on_stream<T: Pod>(
        &self,
        dest: &SymBuf<T>,
        src: &SymBuf<T>,
        nelems: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.copy_on_stream(Copying::Alltoall, dest, src, nelems, stream)
    }

    /// [`Self::reduce`] in stream order (`nvshmemx_<op>_reduce_on_stream`): `nelems`
    /// elements of every member's `src` combined with `op` in team order into `dest` on
    /// every member. `dest` and `src` may be the same allocation. Errors as
    /// [`Self::broadcast_on_stream`], less the root.
    pub fn reduce_on_stream<T: Reducible, O: ReduceOp<T>>(
        &self,
        dest: &SymBuf<T>,
        src: &SymBuf<T>,
        nelems: usize,
        op: O,
        stream: &Stream,
    ) -> Result<()> {
        self.combine_on_stream(Combining::Reduce, dest, src, nelems, op, stream)
    }

    /// [`Self::reducescatter`] in stream order (`nvshmemx_<op>_reducescatter_on_stream`):
    /// team PE `j` receives in `dest` (`nelems` elements) block `j` of every member's
    /// `src` (`nelems * n_pes()` elements) combined with `op`. `dest` and `src` may be the
    /// same allocation. Errors as [`Self::reduce_on_stream`].
    pub fn reducescatter_on_stream<T: Reducible, O: ReduceOp<T>>(
        &self,
        dest: &SymBuf<T>,
        src: &SymBuf<T>,
        nelems: usize,
        op: O,
        stream: &Stream,
    ) -> Result<()> {
        self.combine_on_stream(Combining::Reducescatter, dest, src, nelems, op, stream)
    }

    /// The copying stream collectives (`kind`): on a GPU PE, checks the arguments, refuses
    /// one allocation twice and queues `kind`'s helper kernel on `stream`; on a CPU PE, the
    /// host collective, which judges the same arguments and exchanges the verdict.
    fn copy_on_stream<T: Pod>(
        &self,
        kind: Copying,
        dest: &SymBuf<T>,
        src: &SymBuf<T>,
        nelems: usize,
        stream: &Stream,
    ) -> Result<()> {
        let op = kind.op();
        let _team = self.prepare(op, stream)?;
        #[cfg(feature = "cuda")]
        if self.rt.is_gpu() {
            use symmem_runtime_kernels::{
                stream_team_alltoall, stream_team_broadcast, stream_team_fcollect,
            };
            self.check_args(op, kind.args(), dest, src, nelems)?;
            refuse(same_allocation(op, dest, src))?;
            let (width, words) = words::<T>(nelems);
            let (d, s) = self.addrs(dest, src);
            return match kind {
                Copying::Broadcast { root } => self.queue(
                    op,
                    stream,
                    stream_team_broadcast::KERNEL,
                    (_team, d, s, words, width, root as u32),
                ),
                Copying::Fcollect => self.queue(
                    op,
                    stream,
                    stream_team_fcollect::KERNEL,
                    (_team, d, s, words, width),
                ),
                Copying::Alltoall => self.queue(
                    op,
                    stream,
                    stream_team_alltoall::KERNEL,
                    (_team, d, s, words, width),
                ),
            };
        }
        let refusal = same_allocation(op, dest, src);
        match kind {
            Copying::Broadcast { root } => self.broadcast_as(op, dest, src, nelems, root, refusal),
            Copying::Fcollect => self.fcollect_as(op, dest, src, nelems, refusal),
            Copying::Alltoall => self.alltoall_as(op, dest, src, nelems, refusal),
        }
    }

    /// The reducing stream collectives (`kind`): on a GPU PE, checks the arguments and
    /// queues `stream_team_reduce` on `stream`; on a CPU PE, the host collective.
    fn combine_on_stream<T: Reducible, O: ReduceOp<T>>(
        &self,
        kind: Combining,
        dest: &SymBuf<T>,
        src: &SymBuf<T>,
        nelems: usize,
        op: O,
        stream: &Stream,
    ) -> Result<()> {
        let name = kind.op();
        let _team = self.prepare(name, stream)?;
        #[cfg(feature = "cuda")]
        if self.rt.is_gpu() {
            let (args, scatter) = match kind {
                Combining::Reduce => (Args::Reduce, 0u32),
                Combining::Reducescatter => (Args::Reducescatter, 1u32),
            };
            self.check_args(name, args, dest, src, nelems)?;
            let (d, s) = self.addrs(dest, src);
            return self.queue(
                name,
                stream,
                symmem_runtime_kernels::stream_team_reduce::KERNEL,
                (_team, d, s, nelems, T::CODE, O::CODE, scatter),
            );
        }
        match kind {
            Combining::Reduce => self.reduce_as(name, dest, src, nelems, op),
            Combining::Reducescatter => self.reducescatter_as(name, dest, src, nelems, op),
        }
    }

    /// The checks every stream collective starts with: `stream` is this runtime's and of
    /// this kind of PE, and the team has a device handle (which this returns).
    pub(super) fn prepare(&self, op: &'static str, stream: &Stream) -> Result<DeviceTeam> {
        self.rt.check_stream(op, stream)?;
        self.device().map_err(|e| match e {
            Error::InvalidArgument { reason, .. } => Error::InvalidArgument { op, reason },
            e => e,
        })
    }

    /// The symmetric addresses of `dest` and `src` (this PE's copies), for a kernel.
    #[cfg(feature = "cuda")]
    fn addrs<T>(&self, dest: &SymBuf<T>, src: &SymBuf<T>) -> (*mut u8, *const u8) {
        (
            self.rt.path.sym_addr(dest.at(0)) as *mut u8,
            self.rt.path.sym_addr(src.at(0)) as *const u8,
        )
    }

    /// Queues a `stream_team_*` helper kernel (one block) on a GPU PE's stream.
    #[cfg(feature = "cuda")]
    pub(super) fn queue<A: symmem_device::KernelArgs>(
        &self,
        op: &'static str,
        stream: &Stream,
        kernel: symmem_device::Kernel<A>,
        args: A,
    ) -> Result<()> {
        self.rt.block_on_stream(
            op,
            stream,
            kernel,
            args,
            symmem_runtime_kernels::TEAM_THREADS,
        )
    }
}

/// A stream collective that copies `src` into `dest` without combining: these refuse
/// `dest` and `src` in one allocation, since the device collectives push straight from
/// `src`.
#[derive(Debug, Clone, Copy)]
enum Copying {
    /// `nvshmemx_broadcast_on_stream` from team PE `root`.
    Broadcast {
        /// The team PE whose `src` is copied.
        root: usize,
    },
    /// `nvshmemx_fcollect_on_stream`.
    Fcollect,
    /// `nvshmemx_alltoall_on_stream`.
    Alltoall,
}

impl Copying {
    /// The operation's name in errors and logs.
    fn op(self) -> &'static str {
        match self {
            Copying::Broadcast { .. } => "team_broadcast_on_stream",
            Copying::Fcollect => "team_fcollect_on_stream",
            Copying::Alltoall => "team_alltoall_on_stream",
        }
    }

    /// How [`Team::check_args`] sizes its buffers.
    #[cfg(feature = "cuda")]
    fn args(self) -> Args {
        match self {
            Copying::Broadcast { root } => Args::Broadcast { root },
            Copying::Fcollect => Args::Fcollect,
            Copying::Alltoall => Args::Alltoall,
        }
    }
}

/// A stream collective that combines every member's `src` with an operator (`dest` and
/// `src` may be one allocation).
#[derive(Debug, Clone, Copy)]
enum Combining {
    /// `nvshmemx_<op>_reduce_on_stream`.
    Reduce,
    /// `nvshmemx_<op>_reducescatter_on_stream`.
    Reducescatter,
}

impl Combining {
    /// The operation's name in errors and logs.
    fn op(self) -> &'static str {
        match self {
            Combining::Reduce => "team_reduce_on_stream",
            Combining::Reducescatter => "team_reducescatter_on_stream",
        }
    }
}

/// The verdict and error when `dest` and `src` are the same allocation (the
/// non-reducing stream collectives push straight from `src`).
fn same_allocation<T>(op: &'static str, dest: &SymBuf<T>, src: &SymBuf<T>) -> Option<(Bad, Error)> {
    (dest.id == src.id && dest.runtime == src.runtime).then(|| {
        let error = Error::InvalidArgument {
            op,
            reason: format!(
                "dest and src are the same allocation (#{}); the stream-ordered broadcast, fcollect and alltoall need separate buffers",
                dest.id
            ),
        };
        (Bad::SameAllocation { alloc: dest.id }, error)
    })
}

/// `refusal`'s error, if any, returned at once (a GPU PE, before queueing).
#[cfg(feature = "cuda")]
fn refuse(refusal: Option<(Bad, Error)>) -> Result<()> {
    refusal.map_or(Ok(()), |(_, e)| Err(e))
}

/// `nelems` elements of `T` as `(width, count)`: elements of the widest of 8, 4, 2 and 1
/// bytes that divides the block's size, so every block stays aligned for them (allocations
/// are at least 64-byte aligned). The same on every member, since `nelems` is.
#[cfg(feature = "cuda")]
fn words<T>(nelems: usize) -> (u32, usize) {
    let bytes = nelems * std::mem::size_of::<T>();
    let width = [8, 4, 2, 1]
        .into_iter()
        .find(|w| bytes.is_multiple_of(*w))
        .unwrap_or(1);
    (width as u32, bytes / width)
}
