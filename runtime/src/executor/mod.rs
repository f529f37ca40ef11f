//! The CPU executor: runs device kernels on host threads against this PE's
//! [`DeviceState`](symmem_device::DeviceState).
//!
//! # Fibers
//! Every kernel thread is a fiber, a stackful coroutine, and all threads of a block are
//! fibers of one OS thread (a worker). A fiber gives way only at switch points:
//! `sync_threads`, `sync_warp` (so every `_warp`/`_block` operation, which end with them),
//! and each round of a device wait (`wait_until`, `signal_wait_until`, waits for the proxy
//! channel, `sync_all`). A barrier therefore costs a few context switches of a few
//! nanoseconds each, not a futex wake-up per thread.
//!
//! The coroutines are [corosensei](https://docs.rs/corosensei)'s, chosen for what this
//! executor needs: hand-written context switches (a few instructions) for x86-64, AArch64
//! and other targets; `mmap`ed stacks with a guard page; panics that unwind the fiber's
//! own stack and come out of `resume` (so a panicking kernel thread fails only its launch);
//! and a trap handler that can end a fiber that overflowed its stack, which is how an
//! overflow is reported as such. It is small, has no runtime or scheduler of its own (this
//! executor needs its own, deterministic or seeded), is written by a Rust library team
//! member (Amanieu d'Antras, of `parking_lot` and `hashbrown`) and runs in production in
//! Wasmer. Runtimes such as `may` bring an M:N scheduler of their own, which would take
//! the lane order out of our hands; OS threads, the previous design, made every warp and
//! block operation cost hundreds of microseconds.
//!
//! # What a kernel may assume
//! - The threads of a block run interleaved on one OS thread, so `sync_threads`,
//!   `sync_warp` and the `_warp`/`_block` operations behave as on a GPU. Blocks may have up
//!   to [`MAX_BLOCK_THREADS`] threads. A thread runs until it reaches a switch point: a
//!   thread that spins on memory without a device wait (a plain loop) never lets its
//!   block's other threads run.
//! - [`Runtime::launch`] (on a CPU PE) and [`Runtime::launch_closure`] run the blocks **one
//!   after another** on the calling thread (any grid size), so a block must never
//!   spin-wait for another block of the same launch; as on a GPU without cooperative
//!   launch, that could wait forever.
//! - [`Runtime::launch_cooperative`] and [`Runtime::launch_closure_cooperative`] run every
//!   block at once (at most [`MAX_COOPERATIVE_THREADS`] threads in total), spread over at
//!   most one worker per core (`std::thread::available_parallelism`), so blocks may
//!   synchronize with each other. A worker whose fibers all wait backs off at the OS level
//!   (spin, then yield, then sleep), so a block waiting for another block's worker does not
//!   starve it.
//! - Waiting for other PEs is always allowed: their kernels run in other processes.
//!
//! # Schedules
//! After each round of switch points a worker resumes its fibers in thread index order,
//! the same in every run. With `SYMMEM_EXEC_SEED=N` it draws each round's order from the
//! seed instead: rerunning with the same seed replays the same interleaving of a block's
//! threads (given the same values from other PEs). A failed launch names its schedule in
//! its error, so a failure seen under one seed can be replayed.
//!
//! # Failures
//! A panic in any kernel thread (including a device operation failing visibly, such as a
//! put to an unreachable PE) stops the launch: the other threads unwind at their next
//! switch point, and `launch` returns [`Error::KernelFailed`] naming the first failing
//! block and thread. A thread whose kernel returns counts as arrived at every later
//! barrier of its block and warp. A barrier that can never open (some threads of the
//! group skipped it, and every running thread of the block waits at a barrier) fails the
//! launch at once, naming a waiting thread. Device waits also stop when a peer PE dies or
//! `SYMMEM_TIMEOUT` passes, so no launch waits forever. Each thread has a stack of
//! `SYMMEM_EXEC_STACK_SIZE` bytes (256 KiB by default); overflowing it fails the launch
//! with a stack-overflow error naming the block and thread (on x86-64 Linux; see
//! `executor/overflow.rs`).

mod block;
mod block_barrier;
mod block_memory;
mod fiber;
mod launch;
mod order;
mod overflow;
#[cfg(test)]
mod tests;
mod warp_exchange;
mod worker;

use std::num::NonZeroUsize;

use symmem_device::Dim3;

use crate::error::{Error, Result};
use crate::runtime::Runtime;
use launch::Launch;
use worker::Worker;

/// Most threads per block (as on CUDA GPUs).
pub const MAX_BLOCK_THREADS: u32 = 1024;
/// Most threads of a cooperative launch, all of which run at once.
pub const MAX_COOPERATIVE_THREADS: u32 = 4096;

/// Lets the kernel closure be shared by the launch's workers: the caller of the unsafe
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

/// Refuses `shared_bytes` of dynamic shared memory per block for `kernel` beyond
/// [`MAX_SHARED_BYTES`](symmem_device::MAX_SHARED_BYTES), on GPU and CPU PEs alike.
pub(crate) fn check_shared(op: &'static str, kernel: &str, shared_bytes: u32) -> Result<()> {
    let max = symmem_device::MAX_SHARED_BYTES;
    if shared_bytes > max {
        return Err(Error::InvalidArgument {
            op,
            reason: format!(
                "kernel {kernel} asks for {shared_bytes} bytes of dynamic shared memory per block (shared_bytes); a block may have at most {max} (48 KiB, with its shared! arrays)"
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
        unsafe { self.run_closure("launch_closure", grid.into(), block.into(), 0, kernel) }
    }

    /// [`Self::launch_closure`] with `shared_bytes` of dynamic shared memory per block
    /// (checked by the caller against [`MAX_SHARED_BYTES`](symmem_device::MAX_SHARED_BYTES)),
    /// with `op` naming the public call in errors.
    ///
    /// # Safety
    /// As for [`Self::launch_closure`].
    pub(crate) unsafe fn run_closure<F: Fn()>(
        &self,
        op: &'static str,
        grid: Dim3,
        block: Dim3,
        shared_bytes: u32,
        kernel: F,
    ) -> Result<()> {
        self.check_host_pe(op)?;
        check_dims(op, grid, block)?;
        let launch = Launch::new(self, grid, block, shared_bytes);
        let kernel = SharedKernel(kernel);
        overflow::prepare_thread();
        let mut worker = Worker::new(&launch, 0);
        for b in 0..grid.volume() {
            if launch.stopping() {
                break;
            }
            worker.run(&[b], kernel.get());
        }
        launch.outcome()
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
                0,
                kernel,
            )
        }
    }

    /// [`Self::launch_closure_cooperative`], with `shared_bytes` and `op` as in
    /// [`Self::run_closure`].
    ///
    /// # Safety
    /// As for [`Self::launch_closure`].
    pub(crate) unsafe fn run_closure_cooperative<F: Fn()>(
        &self,
        op: &'static str,
        grid: Dim3,
        block: Dim3,
        shared_bytes: u32,
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
        let launch = Launch::new(self, grid, block, shared_bytes);
        let kernel = SharedKernel(kernel);
        let blocks = grid.volume();
        let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        let workers = cores.min(blocks as usize);
        // Worker `w` runs blocks w, w + workers, …; the calling thread is worker 0.
        let run = |w: usize| {
            overflow::prepare_thread();
            let mine: Vec<u32> = (w as u32..blocks).step_by(workers).collect();
            Worker::new(&launch, w).run(&mine, kernel.get());
        };
        std::thread::scope(|s| {
            for w in 1..workers {
                let run = &run;
                let spawned = std::thread::Builder::new()
                    .name(format!("symmem-worker-{w}"))
                    .spawn_scoped(s, move || run(w));
                if let Err(e) = spawned {
                    launch.fail(
                        Dim3::new(w as u32, 0, 0),
                        Dim3::new(0, 0, 0),
                        format!("cannot start executor worker thread {w}: {e}"),
                    );
                }
            }
            run(0);
        });
        launch.outcome()
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
}
