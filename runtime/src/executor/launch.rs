//! One launch in progress: what its workers share (stop flag, first failure, schedule and
//! stack settings) and the [`Executor`] that device operations call.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use symmem_device::host::{Executor, Stop, Stopped, ThreadContext};
use symmem_device::state::WaitSite;
use symmem_device::{Dim3, WARP_SIZE};

use super::block::{self, Wait};
use super::block_barrier::Group;
use super::fiber::{self, Suspend};

use crate::error::{Error, Result};
use crate::runtime::Runtime;
use crate::wait_report::{describe_wait, timed_out};

/// One launch in progress, shared by its workers.
pub(super) struct Launch<'a> {
    /// The runtime whose PE runs the kernel.
    pub(super) rt: &'a Runtime,
    /// `gridDim`.
    pub(super) grid_dim: Dim3,
    /// `blockDim`.
    pub(super) block_dim: Dim3,
    /// `SYMMEM_EXEC_SEED`: the lane schedule.
    pub(super) seed: Option<u64>,
    /// `SYMMEM_EXEC_STACK_SIZE`: bytes of stack per kernel thread.
    pub(super) stack_size: usize,
    /// Bytes of dynamic shared memory per block.
    pub(super) shared_bytes: u32,
    stop: AtomicBool,
    first_failure: Mutex<Option<(Dim3, Dim3, String)>>,
    /// Counts this launch for the proxy thread, which sleeps between launches.
    _running: Option<crate::proxy::RunningKernel<'a>>,
}

impl<'a> Launch<'a> {
    /// A launch of `grid` blocks of `block` threads, each with `shared_bytes` of dynamic
    /// shared memory, on `rt`'s executor.
    pub(super) fn new(rt: &'a Runtime, grid: Dim3, block: Dim3, shared_bytes: u32) -> Self {
        Launch {
            rt,
            grid_dim: grid,
            block_dim: block,
            seed: rt.config.exec_seed,
            stack_size: rt.config.exec_stack_size,
            shared_bytes,
            stop: AtomicBool::new(false),
            first_failure: Mutex::new(None),
            _running: rt.proxy.as_ref().map(|p| p.kernel_running()),
        }
    }

    /// Whether the launch is stopping (a thread failed).
    pub(super) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Records a failure (the first one wins) and stops every other thread.
    pub(super) fn fail(&self, block: Dim3, thread: Dim3, message: String) {
        {
            let mut first = self.first_failure.lock().unwrap_or_else(|p| p.into_inner());
            if first.is_none() {
                *first = Some((block, thread, message));
            }
        }
        self.stop.store(true, Ordering::Release);
    }

    /// Runs the kernel as the thread `thread` of block `block` (its fiber's body).
    pub(super) fn run_thread(&self, kernel: &dyn Fn(), block: Dim3, thread: Dim3) {
        if self.stopping() {
            return;
        }
        if let Err(payload) = catch_unwind(AssertUnwindSafe(kernel)) {
            if payload.is::<Stopped>() {
                return;
            }
            let message = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic with a non-string payload".into());
            self.fail(block, thread, message);
        }
    }

    /// Stops the calling kernel thread if the launch is stopping.
    fn check_stop(&self) -> std::result::Result<(), Stop> {
        if self.stopping() {
            return Err(Stop::Sibling);
        }
        Ok(())
    }

    /// Waits at the calling thread's barrier of `group`. The thread gives way even when
    /// it is the last to arrive, so that the order in which the group leaves the barrier
    /// is the schedule's; the worker resumes it once the barrier has opened (or the launch
    /// stops).
    fn barrier(&self, group: Group) -> std::result::Result<(), Stop> {
        let barrier = block::running().barriers.get(group);
        let closed = barrier.arrive();
        fiber::suspend(Suspend::Arrived {
            at: Wait::Barrier(group),
            closed,
        });
        self.check_stop()?;
        debug_assert!(closed.is_none_or(|g| barrier.is_open(g)));
        Ok(())
    }

    /// The launch's result: `Ok`, or the first failure with the schedule that led to it.
    pub(super) fn outcome(&self) -> Result<()> {
        let first = self
            .first_failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let Some((block, thread, message)) = first else {
            return Ok(());
        };
        // A failed proxy channel holds the transport's error, naming PE and op.
        let message = match self.rt.proxy.as_ref().and_then(|p| p.failure()) {
            Some(why) => format!("{message} ({why})"),
            None => message,
        };
        let schedule = match self.seed {
            Some(seed) => format!("{}={seed}", crate::config::EXEC_SEED.name()),
            None => "thread index order (SYMMEM_EXEC_SEED unset)".into(),
        };
        Err(Error::KernelFailed {
            pe: self.rt.my_pe(),
            block: (block.x, block.y, block.z),
            thread: (thread.x, thread.y, thread.z),
            message: format!("{message} [lane schedule: {schedule}]"),
        })
    }
}

impl Executor for Launch<'_> {
    fn sync_threads(&self, _ctx: &ThreadContext<'_>) -> std::result::Result<(), Stop> {
        self.barrier(Group::Block)
    }

    fn sync_warp(&self, ctx: &ThreadContext<'_>) -> std::result::Result<(), Stop> {
        self.barrier(Group::Warp(
            ctx.block_dim.linear(ctx.thread_idx) / WARP_SIZE,
        ))
    }

    fn block_shared(
        &self,
        _ctx: &ThreadContext<'_>,
        key: usize,
        size: usize,
        _align: usize,
    ) -> std::result::Result<*mut u8, Stop> {
        block::running()
            .memory
            .array(key, size)
            .map_err(Stop::Failed)
    }

    fn dynamic_shared(&self, _ctx: &ThreadContext<'_>) -> (*mut u8, usize) {
        block::running().memory.dynamic()
    }

    fn warp_exchange(
        &self,
        ctx: &ThreadContext<'_>,
        mask: u32,
        value: u64,
    ) -> std::result::Result<[u64; 32], Stop> {
        let t = ctx.block_dim.linear(ctx.thread_idx);
        let (warp, lane) = (t / WARP_SIZE, t % WARP_SIZE);
        let exchange = block::running().exchange(warp);
        let failed = |why: String| Stop::Failed(format!("warp {warp}: {why}"));
        let round = exchange.join(lane, mask, value).map_err(failed)?;
        loop {
            if let Some(values) = exchange.collect(round, lane).map_err(failed)? {
                return Ok(values);
            }
            fiber::suspend(Suspend::Arrived {
                at: Wait::Exchange(warp),
                closed: Some(exchange.events()),
            });
            self.check_stop()?;
        }
    }

    fn active_mask(&self, ctx: &ThreadContext<'_>) -> u32 {
        let warp = ctx.block_dim.linear(ctx.thread_idx) / WARP_SIZE;
        block::running().exchange(warp).active()
    }

    fn pause(&self, first: bool) -> std::result::Result<bool, Stop> {
        let slow = fiber::suspend(Suspend::Waiting { first });
        self.check_stop()?;
        Ok(slow)
    }

    unsafe fn copy(&self, dst: *mut u8, src: *const u8, len: usize) {
        // Shares below the device crate's bound skip this call and use `memcpy`, as the
        // host copy does below its smallest bounds.
        const {
            assert!(symmem_device::host::EXECUTOR_COPY_FROM <= crate::config::MIN_VECTOR_COPY);
            assert!(symmem_device::host::EXECUTOR_COPY_FROM <= crate::config::MIN_NT_COPY);
        }
        // SAFETY: forwarded from the caller.
        unsafe { self.rt.path.host_copy().copy(dst, src, len) }
    }

    fn check(&self, waited: Duration, site: &WaitSite, seen: u64) -> std::result::Result<(), Stop> {
        self.check_stop()?;
        let state = self.rt.device_state();
        if let Err(e) = self.rt.check_health("a kernel wait") {
            return Err(Stop::Failed(format!(
                "{e}; {} stopped",
                describe_wait(state, site, seen)
            )));
        }
        let limit = Duration::from_millis(state.wait_timeout_ms as u64);
        if !limit.is_zero() && waited >= limit {
            return Err(Stop::Failed(timed_out(state, site, seen, limit)));
        }
        Ok(())
    }
}
