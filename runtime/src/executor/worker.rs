//! A worker: one OS thread running the fibers of some blocks to completion. It resumes
//! every live fiber once per round, in the [`LaneOrder`], installing the fiber's thread
//! context first. A round in which no fiber made progress (every one still waits) makes
//! the worker back off at the OS level, with the one wait policy of symmem
//! ([`symmem_sync::Backoff`]: spin, then yield, then sleep); the fibers learn when that
//! backoff has become slow, which is when their waits run the launch's checks. A round in
//! which every running thread of a block waited at a closed barrier proves a deadlock
//! (only the block's own threads can open its barriers), and fails the launch.

use corosensei::CoroutineResult;
use symmem_device::host::{set_context, ThreadContext};
use symmem_sync::Backoff;

use super::block::{self, Block, Wait};
use super::block_barrier::Group;
use super::fiber::{self, End, Fiber, Suspend};
use super::launch::Launch;
use super::order::LaneOrder;
use super::unravel;

/// One kernel thread: its fiber and the barrier it waits at.
struct Lane {
    /// `None` once the fiber has ended and its stack went back to the pool.
    fiber: Option<Fiber>,
    /// The barrier or exchange it arrived at and the generation to wait out, until it
    /// opens.
    blocked: Option<(Wait, u64)>,
}

/// How a block's running threads spent one round.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Round {
    /// It has no running threads.
    Idle,
    /// Every running thread is at a barrier that has not opened.
    Stuck,
    /// Some thread ran.
    Moving,
}

/// Runs blocks' fibers on the calling OS thread.
pub(super) struct Worker<'l> {
    launch: &'l Launch<'l>,
    order: LaneOrder,
}

impl<'l> Worker<'l> {
    /// Worker number `index` of `launch` (seeds differ per worker).
    pub(super) fn new(launch: &'l Launch<'l>, index: usize) -> Self {
        Worker {
            launch,
            order: LaneOrder::new(launch.seed, index),
        }
    }

    /// Runs every thread of `blocks` (linear block indices) together, to completion.
    pub(super) fn run(&mut self, blocks: &[u32], kernel: &dyn Fn()) {
        let launch = self.launch;
        let (grid_dim, block_dim) = (launch.grid_dim, launch.block_dim);
        let per_block = block_dim.volume() as usize;
        let contexts: Vec<ThreadContext<'_>> = blocks
            .iter()
            .flat_map(|&b| {
                (0..per_block as u32).map(move |t| ThreadContext {
                    state: &launch.rt.device_state,
                    thread_idx: unravel(block_dim, t),
                    block_idx: unravel(grid_dim, b),
                    block_dim,
                    grid_dim,
                    executor: launch,
                })
            })
            .collect();
        let states: Vec<Block> = blocks
            .iter()
            .map(|_| Block::new(block_dim.volume(), launch.shared_bytes as usize))
            .collect();
        let mut lanes = Vec::with_capacity(contexts.len());
        for ctx in &contexts {
            let stack = match fiber::take_stack(launch.stack_size) {
                Ok(stack) => stack,
                Err(e) => {
                    launch.fail(
                        ctx.block_idx,
                        ctx.thread_idx,
                        format!(
                            "cannot map a {} byte kernel thread stack (SYMMEM_EXEC_STACK_SIZE): {e}",
                            launch.stack_size
                        ),
                    );
                    break;
                }
            };
            let (block, thread) = (ctx.block_idx, ctx.thread_idx);
            // SAFETY: the fiber borrows `launch` and `kernel`, which outlive this call,
            // and every fiber is run to its end below before they go.
            let fiber =
                unsafe { Fiber::new(stack, move || launch.run_thread(kernel, block, thread)) };
            lanes.push(Lane {
                fiber: Some(fiber),
                blocked: None,
            });
        }
        self.schedule(&contexts, &states, &mut lanes);
        // SAFETY: clears this thread's context, whose fibers have all ended.
        unsafe { set_context(std::ptr::null()) };
        block::set_running(std::ptr::null());
    }

    /// Resumes the fibers round after round until all have ended.
    fn schedule(&mut self, contexts: &[ThreadContext<'_>], states: &[Block], lanes: &mut [Lane]) {
        let launch = self.launch;
        let per_block = launch.block_dim.volume() as usize;
        let mut live: Vec<usize> = (0..lanes.len()).collect();
        let mut rounds = vec![Round::Idle; states.len()];
        let mut ended = Vec::with_capacity(lanes.len());
        let mut idle = Backoff::new();
        while !live.is_empty() {
            self.order.arrange(&mut live);
            rounds.fill(Round::Idle);
            let mut progress = false;
            let mut waits = 0u32;
            let slow = idle.is_slow();
            let stopping = launch.stopping();
            live.retain(|&i| {
                let block = i / per_block;
                let lane = &mut lanes[i];
                if let Some((wait, generation)) = lane.blocked {
                    if !stopping && !states[block].is_open(wait, generation) {
                        if rounds[block] == Round::Idle {
                            rounds[block] = Round::Stuck;
                        }
                        return true;
                    }
                    lane.blocked = None;
                }
                rounds[block] = Round::Moving;
                let fiber = lane.fiber.as_mut().expect("a live lane has its fiber");
                // SAFETY: `contexts` and `states` stay in place until every fiber has
                // ended; the context is replaced before any other fiber runs.
                unsafe { set_context(&contexts[i]) };
                block::set_running(&states[block]);
                match fiber.resume(slow) {
                    CoroutineResult::Yield(why) => {
                        progress |= why.made_progress();
                        match why {
                            Suspend::Arrived { at, closed } => {
                                lane.blocked = closed.map(|g| (at, g));
                            }
                            Suspend::Waiting { .. } => waits += 1,
                        }
                        true
                    }
                    CoroutineResult::Return(end) => {
                        progress = true;
                        let ctx = &contexts[i];
                        states[block].depart(ctx.block_dim, ctx.thread_idx);
                        if end == End::Overflowed {
                            launch.fail(
                                ctx.block_idx,
                                ctx.thread_idx,
                                format!(
                                    "stack overflow: the kernel thread ran past the end of its {} byte stack (raise SYMMEM_EXEC_STACK_SIZE, or keep large arrays off the stack)",
                                    launch.stack_size
                                ),
                            );
                        }
                        ended.push(i);
                        false
                    }
                }
            });
            if !ended.is_empty() {
                fiber::give_back(
                    launch.stack_size,
                    ended
                        .drain(..)
                        .filter_map(|i| lanes[i].fiber.take())
                        .map(Fiber::into_stack),
                );
            }
            if !launch.stopping() {
                for (block, _) in rounds
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| **r == Round::Stuck)
                {
                    self.report_deadlock(contexts, lanes, block, per_block);
                }
            }
            if progress {
                idle = Backoff::new();
            } else {
                // One spin step per waiting fiber; past the spin phase, one yield or sleep
                // per round.
                for _ in 0..waits.max(1) {
                    idle.snooze();
                    if idle.is_slow() {
                        break;
                    }
                }
            }
        }
    }

    /// Fails the launch: every running thread of `block` waits at a closed barrier.
    fn report_deadlock(
        &self,
        contexts: &[ThreadContext<'_>],
        lanes: &[Lane],
        block: usize,
        per_block: usize,
    ) {
        let range = block * per_block..(block + 1) * per_block;
        let (mut at_block, mut at_warp, mut at_exchange, mut exited) = (0, 0, 0, 0);
        let mut first = None;
        for i in range {
            match (lanes[i].fiber.is_some(), lanes[i].blocked) {
                (false, _) => exited += 1,
                (true, Some((wait, _))) => {
                    first.get_or_insert((i, wait));
                    match wait {
                        Wait::Barrier(Group::Block) => at_block += 1,
                        Wait::Barrier(Group::Warp(_)) => at_warp += 1,
                        Wait::Exchange(_) => at_exchange += 1,
                    }
                }
                // Not stuck: the round said otherwise.
                (true, None) => return,
            }
        }
        let Some((i, wait)) = first else {
            return;
        };
        let what = match wait {
            Wait::Barrier(Group::Block) => "sync_threads".to_string(),
            Wait::Barrier(Group::Warp(w)) => format!("sync_warp (warp {w})"),
            Wait::Exchange(w) => format!("a warp intrinsic (warp {w})"),
        };
        let ctx = &contexts[i];
        self.launch.fail(
            ctx.block_idx,
            ctx.thread_idx,
            format!(
                "deadlock: this thread waits in {what}, and every running thread of its block waits at a barrier that cannot open ({at_block} at sync_threads, {at_warp} at sync_warp, {at_exchange} in warp intrinsics, {exited} exited): some threads of a group skipped a barrier the others wait at"
            ),
        );
    }
}
