//! MPI bootstrap (crate feature `mpi`): PEs find each other through an MPI communicator, under
//! `mpirun`/`mpiexec`/`srun` ([`MpiBootstrap::from_world`]) or inside a program that already
//! uses MPI ([`MpiBootstrap::from_communicator`], NVSHMEM's `NVSHMEMX_INIT_WITH_MPI_COMM`).
//!
//! # Design
//!
//! **One MPI initialization per process, finalized at exit.** MPI can be initialized once per
//! process and never again after `MPI_Finalize`, but symmem supports init -> finalize -> init in
//! one process, creating a new [`MpiBootstrap`] each time. So MPI's lifetime is not tied to any
//! bootstrap: when symmem is the one that initializes MPI, the rsmpi [`Universe`] is kept in a
//! process-global and dropped (which calls `MPI_Finalize`) exactly once, by a `libc::atexit`
//! handler, when the process exits. Open MPI's `mpirun` reports a process that exits without
//! `MPI_Finalize` as an error, so the finalization matters. When the program initialized MPI
//! itself, symmem never finalizes it. Each bootstrap owns a duplicate of its communicator
//! (freed on drop), so its collectives never match the program's own MPI traffic.
//!
//! **Immediate collectives polled against a deadline.** Every blocking MPI collective can wait
//! forever for a rank that never arrives. The bootstrap promises to return within its deadline,
//! so it starts each step as a nonblocking ("immediate") collective inside
//! [`mpi::request::scope`] and polls it with `MPI_Test` under symmem's one wait policy,
//! [`symmem_sync::Backoff`] (spin, then yield, then sleeps of at most 1 ms), until it
//! completes or the deadline passes. Variable-length payloads take two steps (exchange the
//! lengths, then `MPI_Iallgatherv` / `MPI_Ialltoallv` / `MPI_Ibcast` the bytes); one deadline
//! covers both. Duplicating the communicator uses `MPI_Comm_idup` for the same reason. MPI
//! cannot tell which rank is missing, so a timeout names the operation and the deadline but
//! no rank.
//!
//! **A timed-out operation leaks its buffers.** MPI offers no way to withdraw a pending
//! collective (`MPI_Cancel` and `MPI_Request_free` are erroneous on them): it may still read the
//! send buffer and write the receive buffer whenever the missing rank arrives. Freeing them
//! would be a use-after-free, so on a timeout the request is detached from its scope and every
//! buffer it uses (payload copies, lengths, counts, displacements) is deliberately leaked. To
//! make that possible the collectives never hand the caller's slices to MPI: they copy them into
//! buffers they own, always real allocations (Open MPI reads an empty `Vec`'s dangling pointer,
//! 1, as `MPI_IN_PLACE`). The leak is bounded by the payload of the one failed call, and a
//! timeout is fatal to symmem's init anyway. For the same reason the communicator of a bootstrap
//! that timed out is never freed (Open MPI 4.1 crashes progressing a collective on a freed
//! communicator). After a timeout the bootstrap refuses every further call: MPI matches
//! collectives on a communicator by their order, so a late rank would pair the second step of an
//! abandoned two-step operation with the other ranks' next call.
//!
//! **Threads.** When symmem initializes MPI it asks for `MPI_THREAD_MULTIPLE` and takes what
//! is granted ([`MpiBootstrap::threading`]). Calls on one bootstrap are serialized by a mutex,
//! which is enough at `MPI_THREAD_SERIALIZED` as long as the program makes no MPI calls of its
//! own concurrently. At `MPI_THREAD_FUNNELED` or `MPI_THREAD_SINGLE`, every call checks
//! `MPI_Is_thread_main` and fails (instead of breaking MPI's rules) on any other thread.
//!
//! **Launcher mismatch.** A binary built against one MPI implementation and started by
//! another implementation's launcher does not fail: each process silently becomes rank 0 of a
//! one-process world. [`MpiBootstrap::from_world`] compares the world size with what the
//! launcher announced in the environment ([`launcher_world_size`]) and refuses to run when they
//! differ.

use std::mem;
use std::os::raw::c_int;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use mpi::collective::{CommunicatorCollectives, Root};
use mpi::datatype::{Partition, PartitionMut};
use mpi::environment::{self, Threading, Universe};
use mpi::ffi;
use mpi::raw::FromRaw;
use mpi::request::{self, Request, Scope};
use mpi::topology::{Communicator, Rank, SimpleCommunicator};
use mpi::Count;
use symmem_sync::Backoff;

use crate::error::BootstrapError;
use crate::interface::{Bootstrap, BootstrapKind};

/// The MPI environment, when symmem initialized MPI. Taken and dropped (`MPI_Finalize`) by
/// [`finalize_at_exit`]; `None` while MPI is not initialized or belongs to the program.
static UNIVERSE: Mutex<Option<Universe>> = Mutex::new(None);
/// Set once the runtime found a peer dead ([`Bootstrap::peer_lost`]): [`finalize_at_exit`]
/// then leaves MPI unfinalized rather than wait in `MPI_Finalize` for a dead rank.
static PEER_LOST: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Environment variables through which launchers announce how many processes they started,
/// checked in this order: Open MPI's `mpirun` (also PRRTE), then MPICH's Hydra `mpiexec`
/// (also Intel MPI, MVAPICH and Slurm's PMI-2 plugin).
const LAUNCHER_SIZE_VARS: [&str; 2] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"];

/// Slurm's announcements, checked after [`LAUNCHER_SIZE_VARS`] and only inside a job step
/// started by `srun` (`SLURM_STEP_ID` set): a batch script also carries `SLURM_NTASKS` and
/// `SLURM_NPROCS` for the whole allocation, although a program it runs without `srun` is alone.
const SLURM_SIZE_VARS: [&str; 3] = ["SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"];

/// Reads the number of processes that the launcher announced through the environment, as
/// `(variable, size)`.
///
/// Checks, in this order, and returns the first that is set: `OMPI_COMM_WORLD_SIZE` (Open MPI's
/// `mpirun`), `PMI_SIZE` (MPICH's Hydra `mpiexec`, Intel MPI, Slurm's PMI-2 plugin), then, only
/// inside an `srun` job step (`SLURM_STEP_ID` set), `SLURM_STEP_NUM_TASKS`, `SLURM_NTASKS` and
/// `SLURM_NPROCS`. `PMIx` launchers announce no size in the environment. Returns `Ok(None)` when
/// none is set. [`MpiBootstrap::from_world`] fails when the size disagrees with
/// `MPI_COMM_WORLD`'s.
///
/// # Errors
///
/// [`BootstrapError::Config`] naming the variable when its value is not a positive integer.
pub fn launcher_world_size() -> Result<Option<(&'static str, usize)>, BootstrapError> {
    let slurm: &[&'static str] = if std::env::var_os("SLURM_STEP_ID").is_some() {
        &SLURM_SIZE_VARS
    } else {
        &[]
    };
    for &var in LAUNCHER_SIZE_VARS.iter().chain(slurm) {
        let Some(value) = std::env::var_os(var) else {
            continue;
        };
        let size = value
            .to_str()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n > 0)
            .ok_or_else(|| {
                BootstrapError::Config(format!(
                    "launcher world-size check: environment variable {var}={value:?} is not \
                     a process count (it is meant to be set by the MPI launcher)"
                ))
            })?;
        return Ok(Some((var, size)));
    }
    Ok(None)
}

/// Whether the MPI library this binary links can join a job whose launcher offers only a
/// PMI-1 server (`PMI_FD`/`PMI_PORT`, as Hydra and `srun --mpi=pmi2` do). Open MPI cannot:
/// its `MPI_Init` needs PMIx or its own launcher, and fails with "OPAL ERROR: Unreachable"
/// under `srun --mpi=pmi2`. Reads `MPI_Get_library_version`, which MPI allows before
/// `MPI_Init`.
pub(crate) fn speaks_pmi1() -> bool {
    mpi::environment::library_version().map_or(true, |v| !v.contains("Open MPI"))
}

/// A [`Bootstrap`] over a private duplicate of an MPI intra-communicator.
///
/// Created by [`MpiBootstrap::from_world`] or [`MpiBootstrap::from_communicator`]; dropping it
/// frees the duplicate but never finalizes MPI (see the [module docs](self)).
pub struct MpiBootstrap {
    /// The duplicated communicator and the call counter; the lock serializes MPI calls.
    inner: Mutex<Inner>,
    /// The same communicator's handle, for [`Bootstrap::abort`], which must not wait for the
    /// lock (another thread may be polling a collective that will never complete).
    raw: RawComm,
    /// This process's rank in the communicator.
    rank: usize,
    /// The communicator's size.
    size: usize,
    /// Deadline of each blocking call.
    timeout: Duration,
    /// The thread support MPI granted.
    threading: Threading,
}

/// State used under the lock.
struct Inner {
    /// The duplicated communicator.
    comm: Comm,
    /// Number of collectives started on it, to name them in errors (`allgather #3`).
    seq: u64,
    /// The collective that did not complete everywhere (it timed out, or failed on this rank
    /// between its two steps), after which every call is refused: MPI matches collectives on a
    /// communicator by their order, so the ranks' next calls would pair up wrongly.
    out_of_step: Option<String>,
}

impl Inner {
    /// Records that `op` timed out and returns its error.
    fn timed_out(&mut self, op: &str, deadline: Deadline) -> BootstrapError {
        self.out_of_step = Some(op.to_owned());
        timeout_error(op, deadline)
    }
}

/// A communicator that may move between threads.
struct Comm(SimpleCommunicator);

// SAFETY: `SimpleCommunicator` is only an MPI handle (an opaque pointer under Open MPI), which
// Rust never dereferences. MPI objects are process-wide and usable from any thread as far as the
// granted thread level allows; `MpiBootstrap` keeps the handle behind a mutex and checks the
// level (`check_thread`) before each use and before freeing it.
unsafe impl Send for Comm {}

/// A raw communicator handle, used only by `MPI_Abort`.
struct RawComm(ffi::MPI_Comm);

// SAFETY: an opaque MPI handle that Rust never dereferences; it is only passed to `MPI_Abort`,
// which may be called from any thread and terminates the job.
unsafe impl Send for RawComm {}
// SAFETY: as above; the handle is never mutated after construction.
unsafe impl Sync for RawComm {}

impl MpiBootstrap {
    /// Initializes MPI if nobody has (once per process, asking for `MPI_THREAD_MULTIPLE`;
    /// symmem then finalizes MPI at process exit) and duplicates `MPI_COMM_WORLD`.
    ///
    /// `timeout` is the deadline of the duplication and of every later collective;
    /// `MPI_Init_thread` itself cannot be bounded.
    ///
    /// # Errors
    ///
    /// - [`BootstrapError::Mpi`] when MPI was already finalized in this process, when the world
    ///   size differs from what the launcher announced ([`launcher_world_size`]: the binary was
    ///   probably built against a different MPI than the launcher), or when the duplication
    ///   times out;
    /// - [`BootstrapError::Config`] when a launcher variable is malformed.
    pub fn from_world(timeout: Duration) -> Result<Self, BootstrapError> {
        ensure_initialized()?;
        let world = SimpleCommunicator::world();
        let mpi_size = world.size();
        if let Some((var, announced)) = launcher_world_size()? {
            if usize::try_from(mpi_size) != Ok(announced) {
                return Err(BootstrapError::Mpi(format!(
                    "MPI_COMM_WORLD size check: the launcher announced {var}={announced} \
                     processes but MPI_COMM_WORLD has {mpi_size}: this binary was probably \
                     built against a different MPI implementation than the launcher that \
                     started it (each process then runs as a separate one-rank job)"
                )));
            }
        }
        Self::duplicate(&world, "MPI_COMM_WORLD", timeout)
    }

    /// Duplicates `comm`, an intra-communicator the caller owns (NVSHMEM's
    /// `NVSHMEMX_INIT_WITH_MPI_COMM`). Every rank of `comm` must call this.
    ///
    /// MPI must have been initialized by the caller, who must keep it initialized while the
    /// bootstrap lives; symmem never finalizes it. `timeout` is the deadline of the duplication
    /// and of every later collective. If the duplication times out, it stays pending on `comm`,
    /// which the caller must then not free.
    ///
    /// # Errors
    ///
    /// - [`BootstrapError::Mpi`] when MPI is not initialized or already finalized, or when the
    ///   duplication times out;
    /// - [`BootstrapError::Config`] when `comm` is an inter-communicator.
    pub fn from_communicator<C: Communicator>(
        comm: &C,
        timeout: Duration,
    ) -> Result<Self, BootstrapError> {
        if !environment::is_initialized() || environment::is_finalized() {
            return Err(BootstrapError::Mpi(
                "from_communicator: MPI is not initialized (or already finalized); the caller \
                 must initialize MPI before handing symmem a communicator"
                    .into(),
            ));
        }
        if comm.test_inter() {
            return Err(BootstrapError::Config(
                "from_communicator: an inter-communicator was passed; symmem needs an \
                 intra-communicator"
                    .into(),
            ));
        }
        Self::duplicate(comm, "the caller's communicator", timeout)
    }

    /// The thread support level MPI granted (`MPI_Query_thread`). Below
    /// [`Threading::Serialized`], bootstrap calls from any thread but the one that initialized
    /// MPI fail.
    pub fn threading(&self) -> Threading {
        self.threading
    }

    /// Duplicates `comm` with `MPI_Comm_idup`, giving up after `timeout`.
    fn duplicate<C: Communicator>(
        comm: &C,
        what: &str,
        timeout: Duration,
    ) -> Result<Self, BootstrapError> {
        let deadline = Deadline::after(timeout);
        let threading = environment::threading_support();
        let op = format!("duplication of {what}");
        check_thread(threading, &op)?;
        // MPI writes the new handle when the duplication completes, possibly after a timeout,
        // so the slot lives on the heap and is only reclaimed once the request has completed.
        // SAFETY: reading an MPI-provided constant handle.
        let slot = Box::into_raw(Box::new(unsafe { ffi::RSMPI_COMM_NULL }));
        let started = request::scope(|scope| {
            // SAFETY: reading an MPI-provided constant handle.
            let mut raw_request = unsafe { ffi::RSMPI_REQUEST_NULL };
            // SAFETY: `comm` is a live intra-communicator (checked by the callers), `slot` is a
            // valid, exclusively owned `MPI_Comm` that stays allocated until the request
            // completes, and `raw_request` is a valid out-parameter.
            let rc = unsafe { ffi::MPI_Comm_idup(comm.as_raw(), slot, &raw mut raw_request) };
            if rc != ffi::MPI_SUCCESS as c_int {
                return None;
            }
            // SAFETY: `raw_request` is the active, non-persistent request just started. It
            // borrows nothing from this scope: its only buffer is `slot`, which is leaked
            // unless the request completes.
            let pending = unsafe { Request::from_raw(raw_request, &(), scope) };
            Some(wait(pending, deadline))
        });
        match started {
            None => {
                // SAFETY: the duplication did not start, so MPI holds no pointer to `slot`,
                // which came from `Box::into_raw` above.
                drop(unsafe { Box::from_raw(slot) });
                return Err(BootstrapError::Mpi(format!("{op}: MPI_Comm_idup failed")));
            }
            Some(false) => return Err(timeout_error(&op, deadline)),
            Some(true) => {}
        }
        // SAFETY: the request completed, so MPI no longer touches `slot`, which came from
        // `Box::into_raw` above and is reclaimed exactly once here.
        let handle = *unsafe { Box::from_raw(slot) };
        // SAFETY: `handle` is a new intra-communicator (a duplicate of one), owned by nothing
        // else and not a predefined handle; the `SimpleCommunicator` frees it on drop.
        let dup = unsafe { SimpleCommunicator::from_raw(handle) };
        let (rank, size) = (dup.rank(), dup.size());
        let (Ok(rank), Ok(size)) = (usize::try_from(rank), usize::try_from(size)) else {
            return Err(BootstrapError::Mpi(format!(
                "{op}: MPI reported rank {rank} of size {size}"
            )));
        };
        tracing::debug!(
            rank,
            size,
            ?threading,
            "MPI bootstrap over a duplicate of {what}"
        );
        Ok(MpiBootstrap {
            raw: RawComm(handle),
            inner: Mutex::new(Inner {
                comm: Comm(dup),
                seq: 0,
                out_of_step: None,
            }),
            rank,
            size,
            timeout,
            threading,
        })
    }

    /// Starts a collective: takes the lock, numbers the call, and checks that no earlier call
    /// timed out and that this thread may call MPI.
    fn begin(
        &self,
        name: &str,
    ) -> Result<(MutexGuard<'_, Inner>, String, Deadline), BootstrapError> {
        let deadline = Deadline::after(self.timeout);
        let mut inner = lock(&self.inner);
        inner.seq += 1;
        let op = format!("{name} #{}", inner.seq);
        if let Some(earlier) = &inner.out_of_step {
            return Err(BootstrapError::Mpi(format!(
                "{op} refused: {earlier} did not complete on every rank, which leaves this \
                 bootstrap's collectives out of step with the other ranks; it cannot be used \
                 any more"
            )));
        }
        check_thread(self.threading, &op)?;
        Ok((inner, op, deadline))
    }
}

impl Bootstrap for MpiBootstrap {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn kind(&self) -> BootstrapKind {
        BootstrapKind::Mpi
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }

    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        let (mut inner, op, deadline) = self.begin("allgather")?;
        let comm = &inner.comm.0;

        let my_len = vec![mine.len() as u64];
        let mut lens = vec![0u64; self.size];
        let done = request::scope(|scope| {
            wait(
                comm.immediate_all_gather_into(scope, &my_len[..], &mut lens[..]),
                deadline,
            )
        });
        if !done {
            abandon((my_len, lens));
            return Err(inner.timed_out(&op, deadline));
        }

        let layout = Layout::new(&op, &lens)?;
        let send = mpi_buffer(&[mine]);
        let mut recv = mpi_zeroed(layout.total);
        let done = {
            let mut recv_part =
                PartitionMut::new(&mut recv[..], &layout.counts[..], &layout.displs[..]);
            request::scope(|scope| {
                wait(
                    comm.immediate_all_gather_varcount_into(scope, &send[..], &mut recv_part),
                    deadline,
                )
            })
        };
        if !done {
            abandon((send, recv, layout));
            return Err(inner.timed_out(&op, deadline));
        }
        Ok(layout.split(&recv))
    }

    fn alltoall(&self, outgoing: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        let (mut inner, op, deadline) = self.begin("alltoall")?;
        let comm = &inner.comm.0;
        if outgoing.len() != self.size {
            return Err(BootstrapError::Config(format!(
                "{op}: {} outgoing payloads for {} ranks",
                outgoing.len(),
                self.size
            )));
        }

        let send_lens: Vec<u64> = outgoing.iter().map(|p| p.len() as u64).collect();
        let send_layout = Layout::new(&op, &send_lens)?;
        let mut recv_lens = vec![0u64; self.size];
        let done = request::scope(|scope| {
            wait(
                comm.immediate_all_to_all_into(scope, &send_lens[..], &mut recv_lens[..]),
                deadline,
            )
        });
        if !done {
            abandon((send_lens, recv_lens));
            return Err(inner.timed_out(&op, deadline));
        }

        // The other ranks may accept what they receive and go on to the second step.
        let recv_layout = match Layout::new(&op, &recv_lens) {
            Ok(layout) => layout,
            Err(err) => {
                inner.out_of_step = Some(op);
                return Err(err);
            }
        };
        let send = mpi_buffer(outgoing);
        let mut recv = mpi_zeroed(recv_layout.total);
        let done = {
            let send_part =
                Partition::new(&send[..], &send_layout.counts[..], &send_layout.displs[..]);
            let mut recv_part = PartitionMut::new(
                &mut recv[..],
                &recv_layout.counts[..],
                &recv_layout.displs[..],
            );
            request::scope(|scope| {
                wait(
                    comm.immediate_all_to_all_varcount_into(scope, &send_part, &mut recv_part),
                    deadline,
                )
            })
        };
        if !done {
            abandon((send, recv, send_layout, recv_layout));
            return Err(inner.timed_out(&op, deadline));
        }
        Ok(recv_layout.split(&recv))
    }

    fn barrier(&self) -> Result<(), BootstrapError> {
        let (mut inner, op, deadline) = self.begin("barrier")?;
        // A barrier has no buffers, so nothing needs leaking on a timeout.
        if wait(inner.comm.0.immediate_barrier(), deadline) {
            Ok(())
        } else {
            Err(inner.timed_out(&op, deadline))
        }
    }

    fn broadcast(&self, root: usize, data: &[u8]) -> Result<Vec<u8>, BootstrapError> {
        let (mut inner, op, deadline) = self.begin("broadcast")?;
        let comm = &inner.comm.0;
        let root_rank = match Rank::try_from(root) {
            Ok(r) if root < self.size => r,
            _ => {
                return Err(BootstrapError::Config(format!(
                    "{op}: root {root} is not a rank of this {}-rank communicator",
                    self.size
                )))
            }
        };
        let root_process = comm.process_at_rank(root_rank);
        let is_root = root == self.rank;

        let mut len = vec![if is_root { data.len() as u64 } else { 0 }];
        let done = request::scope(|scope| {
            wait(
                root_process.immediate_broadcast_into(scope, &mut len[..]),
                deadline,
            )
        });
        if !done {
            abandon(len);
            return Err(inner.timed_out(&op, deadline));
        }

        // Every rank sees the same length, so all of them fail here alike.
        let total = Layout::new(&op, &len)?.total;
        let mut buf = if is_root {
            mpi_buffer(&[data])
        } else {
            mpi_zeroed(total)
        };
        let done = request::scope(|scope| {
            wait(
                root_process.immediate_broadcast_into(scope, &mut buf[..]),
                deadline,
            )
        });
        if !done {
            abandon(buf);
            return Err(inner.timed_out(&op, deadline));
        }
        Ok(buf)
    }

    /// Logs `reason` with `tracing::error!` and calls `MPI_Abort` with error code 1.
    ///
    /// Unlike the trait's general contract, this terminates the whole MPI job, this process
    /// included: MPI has no way to tell other ranks about a failure without killing them.
    fn peer_lost(&self) {
        PEER_LOST.store(true, std::sync::atomic::Ordering::Release);
    }

    fn abort(&self, reason: &str) {
        tracing::error!(
            rank = self.rank,
            "symmem aborts the MPI job (MPI_Abort, error code 1): {reason}"
        );
        // SAFETY: `raw` is the handle of this bootstrap's communicator, which stays allocated
        // while `self` lives. MPI_Abort does not return on Open MPI or MPICH.
        unsafe { ffi::MPI_Abort(self.raw.0, 1) };
        std::process::abort();
    }

    /// Always `None`: MPI reports no failure asynchronously. A rank that dies is handled by the
    /// launcher (which usually kills the job); one that never arrives makes the pending
    /// collective time out.
    fn failure(&self) -> Option<BootstrapError> {
        None
    }
}

impl Drop for MpiBootstrap {
    /// Frees the duplicated communicator (`MPI_Comm_free`). It is leaked instead when an
    /// abandoned operation may still use it, when MPI is already finalized, or when the thread
    /// level forbids MPI calls from this thread.
    fn drop(&mut self) {
        let inner = self.inner.get_mut().unwrap_or_else(PoisonError::into_inner);
        // A placeholder whose drop does nothing.
        let comm = mem::replace(&mut inner.comm.0, SimpleCommunicator::world());
        if let Some(op) = &inner.out_of_step {
            // An abandoned operation progresses whenever the late rank arrives, and Open MPI
            // (4.1) then dereferences the communicator: freeing it would be a use-after-free.
            tracing::debug!("the MPI bootstrap communicator is leaked: {op} may be pending");
            mem::forget(comm);
        } else if environment::is_finalized() {
            // MPI_Finalize released every communicator; MPI_Comm_free now would be erroneous.
            mem::forget(comm);
        } else if let Err(err) =
            check_thread(self.threading, "freeing the MPI bootstrap communicator")
        {
            tracing::warn!("{err}; the communicator is leaked instead");
            mem::forget(comm);
        } else {
            drop(comm);
        }
    }
}

/// Initializes MPI unless it is already, and arranges for `MPI_Finalize` at process exit when
/// symmem initialized it.
fn ensure_initialized() -> Result<(), BootstrapError> {
    let mut universe = lock(&UNIVERSE);
    if universe.is_some() {
        return Ok(());
    }
    if environment::is_finalized() {
        return Err(BootstrapError::Mpi(
            "MPI initialization: MPI has already been finalized in this process and cannot \
             be initialized again"
                .into(),
        ));
    }
    if environment::is_initialized() {
        tracing::debug!("MPI was initialized by the program; symmem will not finalize it");
        return Ok(());
    }
    // Registered before MPI_Init, so that MPI never stays initialized without a finalizer. This
    // point is reached at most once per process with success: afterwards MPI is initialized.
    // SAFETY: `finalize_at_exit` is an `extern "C" fn()` that does not unwind.
    if unsafe { libc::atexit(finalize_at_exit) } != 0 {
        return Err(BootstrapError::Mpi(
            "MPI initialization: atexit() could not register the MPI_Finalize handler".into(),
        ));
    }
    if let Some((initialized, granted)) =
        environment::initialize_with_threading(Threading::Multiple)
    {
        tracing::debug!(
            ?granted,
            "symmem initialized MPI; it is finalized when the process exits"
        );
        *universe = Some(initialized);
    } else {
        tracing::debug!(
            "MPI was initialized concurrently by the program; symmem will not finalize it"
        );
    }
    Ok(())
}

/// Finalizes MPI at process exit if symmem initialized it (registered with `libc::atexit`).
extern "C" fn finalize_at_exit() {
    if let Some(universe) = lock(&UNIVERSE).take() {
        if environment::is_finalized() {
            // The program called MPI_Finalize itself; a second call would be erroneous.
            mem::forget(universe);
        } else if PEER_LOST.load(std::sync::atomic::Ordering::Acquire) {
            // A rank is dead: MPI_Finalize may wait for it forever (Open MPI's did in the
            // kill matrix, under --enable-recovery), and this process has reported the
            // failure already. The launcher sees it exit without finalizing.
            mem::forget(universe);
        } else {
            // Dropping the universe calls MPI_Finalize.
            drop(universe);
        }
    }
}

/// Fails unless the calling thread may call MPI at the granted `threading` level.
fn check_thread(threading: Threading, op: &str) -> Result<(), BootstrapError> {
    if threading >= Threading::Serialized {
        return Ok(());
    }
    let mut is_main: c_int = 0;
    // SAFETY: MPI is initialized; MPI_Is_thread_main may be called from any thread and writes
    // one int.
    unsafe { ffi::MPI_Is_thread_main(&raw mut is_main) };
    if is_main != 0 {
        Ok(())
    } else {
        Err(BootstrapError::Mpi(format!(
            "{op}: MPI grants only {threading:?} thread support, which allows MPI calls only \
             from the thread that initialized MPI, and this call came from another thread"
        )))
    }
}

/// Locks `mutex`, ignoring poisoning: the protected state stays consistent across panics.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// When a blocking call gives up.
#[derive(Clone, Copy)]
struct Deadline {
    /// The instant, or `None` when `after` is too large to represent one.
    at: Option<Instant>,
    /// The timeout it was computed from.
    after: Duration,
}

impl Deadline {
    /// The deadline `after` from now.
    fn after(after: Duration) -> Self {
        Deadline {
            at: Instant::now().checked_add(after),
            after,
        }
    }

    /// Whether it has passed.
    fn passed(&self) -> bool {
        self.at.is_some_and(|at| Instant::now() >= at)
    }
}

/// The error of an operation that did not complete before `deadline`.
fn timeout_error(op: &str, deadline: Deadline) -> BootstrapError {
    BootstrapError::Mpi(format!(
        "{op} timed out after {:?} (SYMMEM_BOOTSTRAP_TIMEOUT): at least one rank has not \
         entered it, and MPI cannot tell which one is missing (look for a rank that is stuck, \
         died, or calls the bootstrap collectives in a different order); the operation stays \
         pending inside MPI, so its buffers were leaked",
        deadline.after
    ))
}

/// Polls `pending` under a backoff until it completes (`true`) or `deadline` passes (`false`).
///
/// On `false`, the request has been detached from its scope while still active: the caller must
/// leak every buffer it uses, through [`abandon`].
fn wait<'a, D: ?Sized, S: Scope<'a>>(mut pending: Request<'a, D, S>, deadline: Deadline) -> bool {
    let mut backoff = Backoff::new();
    loop {
        pending = match pending.test() {
            Ok(_) => return true,
            Err(still_pending) => still_pending,
        };
        if deadline.passed() {
            // SAFETY: `into_raw` lets the request outlive its scope's bookkeeping, and it will
            // never be completed. That is sound because, on this `false` return, every caller
            // leaks all the buffers the request uses, so they stay valid for as long as MPI may
            // touch them.
            let _abandoned = unsafe { pending.into_raw() };
            return false;
        }
        backoff.snooze();
    }
}

/// Leaks the buffers of an operation abandoned by [`wait`]: MPI may still read or write them
/// when the missing rank arrives, so they must never be freed (see the module docs).
fn abandon<T>(buffers: T) {
    mem::forget(buffers);
}

/// A buffer holding `parts` back to back, for MPI to read.
///
/// Its pointer is a real allocation even when it is empty: an empty `Vec`'s dangling pointer is
/// 1, which Open MPI takes for `MPI_IN_PLACE`.
fn mpi_buffer<P: AsRef<[u8]>>(parts: &[P]) -> Vec<u8> {
    let len = parts.iter().map(|p| p.as_ref().len()).sum::<usize>();
    let mut buf = Vec::with_capacity(len.max(1));
    for part in parts {
        buf.extend_from_slice(part.as_ref());
    }
    buf
}

/// A zeroed buffer of `len` bytes for MPI to write, allocated even when empty (see
/// [`mpi_buffer`]).
fn mpi_zeroed(len: usize) -> Vec<u8> {
    let mut buf = Vec::with_capacity(len.max(1));
    buf.resize(len, 0);
    buf
}

/// Where each rank's bytes sit in one contiguous buffer, in MPI's `int` counts.
struct Layout {
    /// Bytes per rank.
    counts: Vec<Count>,
    /// Offset of each rank's bytes.
    displs: Vec<Count>,
    /// Total bytes.
    total: usize,
}

impl Layout {
    /// Lays out payloads of `lens` bytes back to back; fails if they exceed MPI's `int` range.
    fn new(op: &str, lens: &[u64]) -> Result<Self, BootstrapError> {
        let too_big = || {
            BootstrapError::Mpi(format!(
                "{op}: the payloads add up to more than {} bytes, the most that MPI's int \
                 counts and displacements can address",
                Count::MAX
            ))
        };
        let mut counts = Vec::with_capacity(lens.len());
        let mut displs = Vec::with_capacity(lens.len());
        let mut total: Count = 0;
        for &len in lens {
            let count = Count::try_from(len).map_err(|_| too_big())?;
            counts.push(count);
            displs.push(total);
            total = total.checked_add(count).ok_or_else(too_big)?;
        }
        let total = usize::try_from(total).map_err(|_| too_big())?;
        Ok(Layout {
            counts,
            displs,
            total,
        })
    }

    /// Cuts `buf` into one payload per rank.
    fn split(&self, buf: &[u8]) -> Vec<Vec<u8>> {
        self.counts
            .iter()
            .zip(&self.displs)
            .map(|(&count, &displ)| {
                // Both are non-negative and within `buf`, by construction in `new`.
                let start = displ as usize;
                buf[start..start + count as usize].to_vec()
            })
            .collect()
    }
}
