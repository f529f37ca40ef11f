//! The runtime's own GPU helper kernels: what host code cannot do to GPU memory with a
//! copy. `Runtime` launches them, one thread each, for host atomics and signals on GPU
//! heaps and for the stream-ordered operations (`*_on_stream`). The arguments are the
//! encodings of the device crate's op vocabulary ([`AmoKind`], [`SignalOp`], [`Cmp`] as
//! `u32`), so the layout test and the PTX check cover them like every other kernel crate.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]

use symmem_device::*;

/// These kernels as PTX, built and embedded at build time.
#[cfg(not(target_arch = "nvptx64"))]
pub static PTX: symmem_device::EmbeddedPtx = symmem_device::embedded_ptx!();

/// One atomic of `kind` on `dest` (symmetric) on `pe`; the old value.
///
/// # Safety
/// `dest` is an aligned symmetric address of a `T`; `kind` is an [`AmoKind`] code.
#[inline(always)]
unsafe fn amo<T: DeviceInt + Default>(dest: *mut T, pe: u32, kind: u32, a: T, b: T) -> T {
    // SAFETY: forwarded from the caller.
    unsafe {
        match AmoKind::from_u32(kind) {
            Some(AmoKind::Fetch) => atomic_fetch(dest, pe),
            Some(AmoKind::Set) => {
                atomic_set(dest, a, pe);
                T::default()
            }
            Some(AmoKind::Swap) => atomic_swap(dest, a, pe),
            Some(AmoKind::CompareSwap) => atomic_compare_swap(dest, a, b, pe),
            Some(AmoKind::FetchAdd) => atomic_fetch_add(dest, a, pe),
            Some(AmoKind::FetchAnd) => atomic_fetch_and(dest, a, pe),
            Some(AmoKind::FetchOr) => atomic_fetch_or(dest, a, pe),
            Some(AmoKind::FetchXor) => atomic_fetch_xor(dest, a, pe),
            None => T::default(),
        }
    }
}

kernel! {
    /// Thread 0 performs one atomic of `kind` (an `AmoKind` code) on the `size`-byte (4 or
    /// 8) word at symmetric address `dest` on `pe`, with operands `a` and `b`, and stores
    /// the old value (zero-extended) in `out` (host-mapped memory).
    pub fn host_amo(dest: *mut u64, pe: u32, size: u32, kind: u32, a: u64, b: u64, out: *mut u64) {
        if thread_rank() == 0 {
            let old = if size == 4 {
                amo::<u32>(dest as *mut u32, pe, kind, a as u32, b as u32) as u64
            } else {
                amo::<u64>(dest, pe, kind, a, b)
            };
            out.write(old);
        }
    }

    /// Thread 0 updates signal `sig` (symmetric) on `pe` with `value` by `op` (a
    /// `SignalOp` code), after a system-scope fence: every write this GPU made before
    /// (the data of a put_signal) is visible first.
    pub fn host_signal(sig: *mut u64, value: u64, op: u32, pe: u32) {
        if thread_rank() == 0 {
            let op = if op == SignalOp::Add as u32 { SignalOp::Add } else { SignalOp::Set };
            signal_op(sig, value, op, pe);
        }
    }

    /// Thread 0 waits until this PE's `sig` (symmetric) satisfies `cmp` (a `Cmp` code)
    /// against `value`: the stream-ordered signal wait.
    pub fn stream_wait(sig: *mut u64, cmp: u32, value: u64) {
        if thread_rank() == 0 {
            let cmp = match Cmp::from_u32(cmp) {
                Some(c) => c,
                None => Cmp::Ge,
            };
            signal_wait_until(sig, cmp, value);
        }
    }

    /// Thread 0 runs `quiet`: every earlier write of this stream is complete and visible
    /// at system scope.
    pub fn stream_quiet() {
        if thread_rank() == 0 {
            quiet();
        }
    }

    /// Thread 0 runs the device `barrier_all` (quiet, then the device dissemination
    /// barrier with every PE).
    pub fn stream_barrier_all() {
        if thread_rank() == 0 {
            barrier_all();
        }
    }
}

/// Every kernel of this crate, for the check of each descriptor against its PTX `.entry`.
#[cfg(not(target_arch = "nvptx64"))]
pub const KERNELS: &[symmem_device::KernelInfo] = &[
    host_amo::KERNEL.info(),
    host_signal::KERNEL.info(),
    stream_wait::KERNEL.info(),
    stream_quiet::KERNEL.info(),
    stream_barrier_all::KERNEL.info(),
];
