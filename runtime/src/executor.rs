//! The CPU executor: runs device kernels on host threads against this PE's
//! [`DeviceState`](symmem_device::DeviceState).
//!
//! # What a kernel may assume
//! - Every thread of a block runs concurrently on its own OS thread, so `sync_threads`,
//!   `sync_warp` and the `_warp`/`_block` operations behave as on a GPU. Blocks may have up
//!   to [`MAX_BLOCK_THREADS`] threads.
//! - [`Runtime::launch`] (on a CPU PE) and [`Runtime::launch_closure`] run the blocks **one after another** (any grid size, reusing one
//!   set of threads), so a block must never spin-wait for another block of the same
//!   launch; as on a GPU without cooperative launch, that could wait forever.
//! - [`Runtime::launch_cooperative`] and [`Runtime::launch_closure_cooperative`] run every block at once (at most
//!   [`MAX_COOPERATIVE_THREADS`] threads in total), so blocks may synchronize with each
//!   other.
//! - Waiting for other PEs is always allowed: their kernels run in other processes.
//!
//! # Failures
//! A panic in any kernel thread (including a device operation failing visibly, such as a
//! put to an unreachable PE) stops the launch: sibling threads unwind at their next
//! barrier or wait, and `launch` returns [`Error::KernelFailed`] naming the first failing
//! block and thread. Device waits also stop when a peer PE dies or `SYMMEM_TIMEOUT` passes,
//! so no launch waits forever.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use symmem_device::host::{with_context, Executor, ThreadContext};
use symmem_device::{Dim3, WARP_SIZE};

use crate::error::{Error, Result};
use crate::runtime::Runtime;

/// Most threads per block (as on CUDA GPUs).
pub const MAX_BLOCK_THREADS: u32 = 1024;
/// Most threads of a cooperative launch, all of which run at once.
pub const MAX_COOPERATIVE_THREADS: u32 = 4096;
/// Stack size of each kernel thread.
const KERNEL_STACK: usize = 1 << 20;

/// The unwind payload of threads stopped because another thread failed: not a failure of
/// their own, so it is never reported.
struct Stopped;

/// Counts of a [`GroupBarrier`].
#[derive(Default)]
struct BarrierCounts {
    /// Threads waiting in the current generation.
    arrived: usize,
    /// Threads of the group whose kernel has returned: as on a GPU, an exited thread
    /// counts as arrived at every later barrier of its group.
    departed: usize,
    /// Incremented each time the barrier releases.
    generation: u64,
}

/// A reusable barrier for a fixed group of threads. It can be broken: once the launch
/// stops, every waiter (present and future) unwinds. Waiters also run the launch's
/// checks (dead peers, `SYMMEM_TIMEOUT`), so a barrier that can never complete, such as
/// a `sync_threads` some threads skip, fails the launch instead of hanging it.
struct GroupBarrier {
    size: usize,
    state: Mutex<BarrierCounts>,
    cv: Condvar,
}

impl GroupBarrier {
    fn new(size: usize) -> Self {
        GroupBarrier {
            size,
            state: Mutex::new(BarrierCounts::default()),
            cv: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BarrierCounts> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens the barrier if everyone is in (or gone); `on_release` runs first, while the
    /// whole group is still held.
    fn release_if_complete(&self, st: &mut BarrierCounts, on_release: impl FnOnce()) -> bool {
        if st.arrived == 0 || st.arrived + st.departed < self.size {
            return false;
        }
        on_release();
        st.arrived = 0;
        st.generation += 1;
        self.cv.notify_all();
        true
    }

    fn wait(&self, launch: &Launch<'_>) {
        self.wait_then(launch, || {});
    }

    /// Waits for the group; the last thread to arrive runs `on_release` before the others
    /// are let go.
    fn wait_then(&self, launch: &Launch<'_>, on_release: impl FnOnce()) {
        let mut st = self.lock();
        let generation = st.generation;
        st.arrived += 1;
        if self.release_if_complete(&mut st, on_release) {
            return;
        }
        let started = std::time::Instant::now();
        while st.generation == generation {
            if launch.stop.load(Ordering::Acquire) {
                drop(st);
                resume_unwind(Box::new(Stopped));
            }
            // A short timeout re-checks `stop` (which `fail` also announces) and runs the
            // launch's checks, without the lock.
            let (guard, timeout) = self
                .cv
                .wait_timeout(st, Duration::from_millis(10))
                .unwrap_or_else(|p| p.into_inner());
            st = guard;
            if timeout.timed_out() && st.generation == generation {
                drop(st);
                launch.check_timeout("a barrier (sync_threads, sync_warp)", started.elapsed());
                st = self.lock();
            }
        }
    }

    /// Marks one thread of the group as exited: it counts as arrived from now on.
    fn depart(&self) {
        let mut st = self.lock();
        st.departed += 1;
        self.release_if_complete(&mut st, || {});
    }

    /// Forgets departures, for the next block that reuses the barrier.
    fn reset_departures(&self) {
        self.lock().departed = 0;
    }

    fn wake(&self) {
        let _guard = self.lock();
        self.cv.notify_all();
    }
}

/// The barriers of one block: the block's, one per warp, and (for blocks that reuse the
/// same threads one after another) the end-of-block barrier, which is never the one a
/// kernel's `sync_threads` uses.
struct BlockBarriers {
    block: GroupBarrier,
    warps: Vec<GroupBarrier>,
    end: GroupBarrier,
}

impl BlockBarriers {
    fn new(threads: u32) -> Self {
        let warps = threads.div_ceil(WARP_SIZE);
        BlockBarriers {
            block: GroupBarrier::new(threads as usize),
            warps: (0..warps)
                .map(|w| GroupBarrier::new((threads - w * WARP_SIZE).min(WARP_SIZE) as usize))
                .collect(),
            end: GroupBarrier::new(threads as usize),
        }
    }

    /// The thread `thread` of the block returned from the kernel.
    fn depart(&self, block_dim: Dim3, thread: Dim3) {
        self.block.depart();
        self.warps[(block_dim.linear(thread) / WARP_SIZE) as usize].depart();
    }

    fn reset_departures(&self) {
        self.block.reset_departures();
        self.warps.iter().for_each(GroupBarrier::reset_departures);
    }
}

/// One launch in progress.
struct Launch<'a> {
    rt: &'a Runtime,
    block_dim: Dim3,
    /// One entry, reused by every block, or (cooperative) one per block.
    barriers: Vec<BlockBarriers>,
    stop: AtomicBool,
    first_failure: Mutex<Option<(Dim3, Dim3, String)>>,
}

impl Launch<'_> {
    fn barriers_of(&self, ctx: &ThreadContext<'_>) -> &BlockBarriers {
        if self.barriers.len() == 1 {
            &self.barriers[0]
        } else {
            &self.barriers[ctx.grid_dim.linear(ctx.block_idx) as usize]
        }
    }

    /// Records a failure (the first one wins) and stops every other thread.
    fn fail(&self, block: Dim3, thread: Dim3, message: String) {
        {
            let mut first = self.first_failure.lock().unwrap_or_else(|p| p.into_inner());
            if first.is_none() {
                *first = Some((block, thread, message));
            }
        }
        self.stop.store(true, Ordering::Release);
        for b in &self.barriers {
            b.block.wake();
            b.warps.iter().for_each(GroupBarrier::wake);
        }
    }

    /// Runs the kernel as one thread; returns false if the launch is stopping.
    fn run_thread(
        &self,
        kernel: &dyn Fn(),
        block_idx: Dim3,
        thread_idx: Dim3,
        grid_dim: Dim3,
    ) -> bool {
        if self.stop.load(Ordering::Acquire) {
            return false;
        }
        let ctx = ThreadContext {
            state: &self.rt.device_state,
            thread_idx,
            block_idx,
            block_dim: self.block_dim,
            grid_dim,
            executor: self,
        };
        // SAFETY: the state is this runtime's, whose heap mappings outlive the launch.
        let outcome = catch_unwind(AssertUnwindSafe(|| unsafe { with_context(&ctx, kernel) }));
        match outcome {
            Ok(()) => true,
            Err(payload) if payload.is::<Stopped>() => false,
            Err(payload) => {
                let message = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panic with a non-string payload".into());
                self.fail(block_idx, thread_idx, message);
                false
            }
        }
    }
}

impl Executor for Launch<'_> {
    fn sync_threads(&self, ctx: &ThreadContext<'_>) {
        self.barriers_of(ctx).block.wait(self);
    }

    fn sync_warp(&self, ctx: &ThreadContext<'_>) {
        let warp = ctx.block_dim.linear(ctx.thread_idx) / WARP_SIZE;
        self.barriers_of(ctx).warps[warp as usize].wait(self);
    }

    fn check(&self, waited: Duration) {
        if let Err(e) = self.rt.check_health("a kernel wait") {
            panic!("{e}");
        }
        self.check_timeout("a kernel wait", waited);
    }
}

impl Launch<'_> {
    /// Unwinds if the launch is stopping or `waited` exceeds `SYMMEM_TIMEOUT`. Barrier
    /// waits use only this: a thread waiting for its siblings leaves the diagnosis of a
    /// dead peer to the sibling that waits on that peer.
    fn check_timeout(&self, what: &str, waited: Duration) {
        if self.stop.load(Ordering::Acquire) {
            resume_unwind(Box::new(Stopped));
        }
        if let Some(limit) = self.rt.config.timeout {
            if waited >= limit {
                panic!(
                    "{what} on PE {} timed out after {limit:?} (SYMMEM_TIMEOUT)",
                    self.rt.my_pe()
                );
            }
        }
    }
}

/// Lets the kernel closure be shared by the launch's threads: the caller of the unsafe
/// launch functions promises that this is sound, exactly as a CUDA kernel's arguments are
/// shared by all its threads.
struct SharedKernel<F>(F);
// SAFETY: the launch functions' safety contract makes the caller vouch for it.
unsafe impl<F> Sync for SharedKernel<F> {}

impl<F: Fn()> SharedKernel<F> {
    /// The kernel. (A method, so closures capture the whole wrapper, not the field.)
    fn get(&self) -> &F {
        &self.0
    }
}

/// Unravels a linear index into a 3-D index of `dim` (x fastest).
fn unravel(dim: Dim3, i: u32) -> Dim3 {
    Dim3::new(i % dim.x, (i / dim.x) % dim.y, i / (dim.x * dim.y))
}

pub(crate) fn check_dims(op: &'static str, grid: Dim3, block: Dim3) -> Result<()> {
    let bad = |what: &str, d: Dim3| Error::InvalidArgument {
        op,
        reason: format!("{what} {d:?} has a zero extent"),
    };
    if grid.x == 0 || grid.y == 0 || grid.z == 0 {
        return Err(bad("grid", grid));
    }
    if block.x == 0 || block.y == 0 || block.z == 0 {
        return Err(bad("block", block));
    }
    let threads = block.x as u64 * block.y as u64 * block.z as u64;
    if threads > MAX_BLOCK_THREADS as u64 {
        return Err(Error::InvalidArgument {
            op,
            reason: format!(
                "block {block:?} has {threads} threads; at most {MAX_BLOCK_THREADS} are allowed"
            ),
        });
    }
    let blocks = grid.x as u64 * grid.y as u64 * grid.z as u64;
    if blocks > u32::MAX as u64 {
        return Err(Error::InvalidArgument {
            op,
            reason: format!(
                "grid {grid:?} has {blocks} blocks; at most {} are allowed",
                u32::MAX
            ),
        });
    }
    Ok(())
}

impl Runtime {
    /// Runs `kernel` on every thread of a `grid` of `block`s on host threads, with this
    /// PE's device state installed, and returns when all threads have finished. Blocks run
    /// one after another; see the module docs for what a kernel may assume.
    ///
    /// # Safety
    /// As for a CUDA launch: whatever `kernel` captures (typically raw pointers into the
    /// symmetric heap and sizes) must be valid for, and safe to share among, all threads of
    /// the launch, and the device operations it calls must be given valid addresses.
    pub unsafe fn launch_closure<F: Fn()>(
        &self,
        grid: impl Into<Dim3>,
        block: impl Into<Dim3>,
        kernel: F,
    ) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.run_closure("launch_closure", grid.into(), block.into(), kernel) }
    }

    /// [`Self::launch_closure`], with `op` naming the public call in errors.
    ///
    /// # Safety
    /// As for [`Self::launch_closure`].
    pub(crate) unsafe fn run_closure<F: Fn()>(
        &self,
        op: &'static str,
        grid: Dim3,
        block: Dim3,
        kernel: F,
    ) -> Result<()> {
        self.check_host_pe(op)?;
        check_dims(op, grid, block)?;
        let launch = self.new_launch(block, 1);
        let kernel = SharedKernel(kernel);
        let n_blocks = grid.volume();
        self.run_threads(&launch, block.volume(), |t, launch| {
            let thread_idx = unravel(block, t);
            for b in 0..n_blocks {
                let block_idx = unravel(grid, b);
                if !launch.run_thread(kernel.get(), block_idx, thread_idx, grid) {
                    return;
                }
                let barriers = &launch.barriers[0];
                barriers.depart(block, thread_idx);
                // The next block reuses this block's barriers and threads; it starts only
                // when every thread is done with this one.
                barriers
                    .end
                    .wait_then(launch, || barriers.reset_departures());
            }
        })
    }

    /// Like [`launch_closure`](Self::launch_closure), but every block runs at the same time, so blocks
    /// may wait for each other (CUDA's cooperative launch). At most
    /// [`MAX_COOPERATIVE_THREADS`] threads in total.
    ///
    /// # Safety
    /// As for [`launch_closure`](Self::launch_closure).
    pub unsafe fn launch_closure_cooperative<F: Fn()>(
        &self,
        grid: impl Into<Dim3>,
        block: impl Into<Dim3>,
        kernel: F,
    ) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe {
            self.run_closure_cooperative(
                "launch_closure_cooperative",
                grid.into(),
                block.into(),
                kernel,
            )
        }
    }

    /// [`Self::launch_closure_cooperative`], with `op` naming the public call in errors.
    ///
    /// # Safety
    /// As for [`Self::launch_closure`].
    pub(crate) unsafe fn run_closure_cooperative<F: Fn()>(
        &self,
        op: &'static str,
        grid: Dim3,
        block: Dim3,
        kernel: F,
    ) -> Result<()> {
        self.check_host_pe(op)?;
        check_dims(op, grid, block)?;
        let total = grid.volume() as u64 * block.volume() as u64;
        if total > MAX_COOPERATIVE_THREADS as u64 {
            return Err(Error::InvalidArgument {
                op,
                reason: format!("grid {grid:?} × block {block:?} is {total} threads; a cooperative launch runs all at once, at most {MAX_COOPERATIVE_THREADS}"),
            });
        }
        let launch = self.new_launch(block, grid.volume() as usize);
        let kernel = SharedKernel(kernel);
        let per_block = block.volume();
        self.run_threads(&launch, total as u32, |i, launch| {
            let block_idx = unravel(grid, i / per_block);
            let thread_idx = unravel(block, i % per_block);
            if launch.run_thread(kernel.get(), block_idx, thread_idx, grid) {
                launch.barriers[(i / per_block) as usize].depart(block, thread_idx);
            }
        })
    }

    /// Fails on a GPU PE: its heap is device memory, which host threads cannot run
    /// kernels against.
    fn check_host_pe(&self, op: &'static str) -> Result<()> {
        if self.device.is_some() {
            return Err(Error::Unsupported {
                op,
                pe: self.my_pe(),
                reason: "this is a GPU PE: closures run on the CPU executor against host memory; launch kernel! kernels with Runtime::launch, which runs them on the GPU".into(),
            });
        }
        Ok(())
    }

    fn new_launch(&self, block: Dim3, barrier_sets: usize) -> Launch<'_> {
        Launch {
            rt: self,
            block_dim: block,
            barriers: (0..barrier_sets)
                .map(|_| BlockBarriers::new(block.volume()))
                .collect(),
            stop: AtomicBool::new(false),
            first_failure: Mutex::new(None),
        }
    }

    /// Runs `body(i, launch)` on `threads` OS threads and turns the first failure into
    /// the launch's error.
    fn run_threads(
        &self,
        launch: &Launch<'_>,
        threads: u32,
        body: impl Fn(u32, &Launch<'_>) + Sync,
    ) -> Result<()> {
        std::thread::scope(|s| {
            for i in 0..threads {
                let body = &body;
                let spawned = std::thread::Builder::new()
                    .name(format!("symmem-kernel-{i}"))
                    .stack_size(KERNEL_STACK)
                    .spawn_scoped(s, move || {
                        // Barrier waits unwind with `Stopped` once the launch stops; that
                        // is the expected way out for the other threads.
                        let _ = catch_unwind(AssertUnwindSafe(|| body(i, launch)));
                    });
                if let Err(e) = spawned {
                    launch.fail(
                        Dim3::new(0, 0, 0),
                        Dim3::new(i, 0, 0),
                        format!("cannot start kernel thread {i}: {e}"),
                    );
                    break;
                }
            }
        });
        let first = launch
            .first_failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        match first {
            None => Ok(()),
            Some((block, thread, message)) => Err(Error::KernelFailed {
                pe: self.my_pe(),
                block: (block.x, block.y, block.z),
                thread: (thread.x, thread.y, thread.z),
                // A failed proxy channel holds the transport's error, naming PE and op.
                message: match self.proxy.as_ref().and_then(|p| p.failure()) {
                    Some(why) => format!("{message} ({why})"),
                    None => message,
                },
            }),
        }
    }
}
