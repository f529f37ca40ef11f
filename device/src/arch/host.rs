//! CPU-executor primitives: the same operations as on the GPU, with Rust atomics and a
//! per-thread context installed by the executor.
//!
//! The executor (in `symmem-runtime`) runs kernel threads as fibers, several on one OS
//! thread, and installs a [`ThreadContext`] for the fiber it resumes: the PE's
//! [`DeviceState`], the thread's indices, and the [`Executor`] that implements block and
//! warp barriers, lets a waiting thread give way to the others ([`Executor::pause`]) and
//! tells wait loops when to give up (a thread panicked, a peer died, a timeout).

extern crate std;

use core::cell::Cell;
use core::ffi::c_void;
use core::sync::atomic::{fence, AtomicPtr, AtomicU32, AtomicU64, Ordering};

use crate::geometry::Dim3;
use crate::stall::Stall;
use crate::state::{DeviceState, WaitSite};

/// What the executor provides to kernel threads. A method returns [`Stop`] when the launch
/// must stop (a sibling thread failed, a peer died, a timeout passed); the device
/// operation that called it then unwinds its kernel thread, from the kernel's own code, so
/// a kernel compiled into another library (see [`library`](crate::library)) never
/// unwinds through the executor's frames with a foreign panic.
pub trait Executor: Sync {
    /// Blocks until every thread of the calling thread's block has called it.
    fn sync_threads(&self, ctx: &ThreadContext<'_>) -> Result<(), Stop>;
    /// Blocks until every thread of the calling thread's warp has called it.
    fn sync_warp(&self, ctx: &ThreadContext<'_>) -> Result<(), Stop>;
    /// Called each time a device wait finds its condition still false (`first` on the
    /// wait's first round): lets the other kernel threads run, and backs off when all of
    /// them wait. Returns true when the wait should run [`check`](Self::check) now.
    fn pause(&self, first: bool) -> Result<bool, Stop>;
    /// Called from slow rounds of device wait loops with how long the current wait for
    /// `site` has lasted and the value it last saw: stops the kernel if it must stop (a
    /// sibling failed, a peer died, the state's `wait_timeout_ms` passed), naming the
    /// wait.
    fn check(&self, waited: core::time::Duration, site: &WaitSite, seen: u64) -> Result<(), Stop>;
    /// The memory of the calling thread's block for the [`shared!`](crate::shared) array
    /// whose key is `key` (the address of its static in this process): `size` bytes
    /// aligned to `align`, allocated at the block's first use, with unspecified contents.
    /// Stops the launch when the block's shared memory would exceed
    /// [`MAX_SHARED_BYTES`](crate::geometry::MAX_SHARED_BYTES).
    fn block_shared(
        &self,
        ctx: &ThreadContext<'_>,
        key: usize,
        size: usize,
        align: usize,
    ) -> Result<*mut u8, Stop>;
    /// The calling thread's block's dynamic shared memory: its address (16-byte aligned)
    /// and size, the launch's `shared_bytes`.
    fn dynamic_shared(&self, ctx: &ThreadContext<'_>) -> (*mut u8, usize);
    /// Exchanges `value` with the lanes of `mask` in the calling thread's warp: waits until
    /// every lane of `mask` has called it, then returns each lane's value (indexed by lane;
    /// 0 for lanes outside `mask`). Stops the launch, naming what was wrong, when the
    /// calling lane is not in `mask`, `mask` names lanes the warp does not have or that
    /// have exited, or lanes of one exchange pass different masks.
    fn warp_exchange(
        &self,
        ctx: &ThreadContext<'_>,
        mask: u32,
        value: u64,
    ) -> Result<[u64; 32], Stop>;
    /// The lanes of the calling thread's warp that have not exited.
    fn active_mask(&self, ctx: &ThreadContext<'_>) -> u32;
    /// Copies `len` bytes (at least [`EXECUTOR_COPY_FROM`]) from `src` to `dst` the way
    /// the PE's host puts and gets copy that many bytes: the runtime picks the method by
    /// size. By default `memcpy`.
    ///
    /// # Safety
    /// As [`core::ptr::copy_nonoverlapping`].
    unsafe fn copy(&self, dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: forwarded from the caller.
        unsafe { core::ptr::copy_nonoverlapping(src, dst, len) }
    }
}

/// The size from which a group's share of a copy goes to [`Executor::copy`]; smaller
/// shares are copied in line by `memcpy`, with no context lookup or virtual call (the
/// runtime's host copies use `memcpy` below this size too, which it checks).
pub const EXECUTOR_COPY_FROM: usize = 2 << 10;

/// Why the executor stops a kernel thread.
#[derive(Debug)]
pub enum Stop {
    /// Another thread of the launch failed: this one stops with no failure of its own.
    Sibling,
    /// The launch fails with this message (a dead peer, a wait past its timeout).
    Failed(std::string::String),
}

/// The unwind payload of a kernel thread stopped because another thread failed: not a
/// failure of its own, so the executor never reports it.
#[derive(Debug)]
pub struct Stopped;

/// Unwinds the calling kernel thread when the executor says it must stop.
#[inline]
pub(crate) fn obey<T>(verdict: Result<T, Stop>) -> T {
    match verdict {
        Ok(v) => v,
        Err(stop) => stop_thread(stop),
    }
}

#[cold]
#[inline(never)]
fn stop_thread(stop: Stop) -> ! {
    match stop {
        Stop::Sibling => std::panic::resume_unwind(std::boxed::Box::new(Stopped)),
        Stop::Failed(message) => panic!("{message}"),
    }
}

/// One kernel thread's view of the launch.
pub struct ThreadContext<'a> {
    /// The PE's state.
    pub state: &'a DeviceState,
    /// `threadIdx`.
    pub thread_idx: Dim3,
    /// `blockIdx`.
    pub block_idx: Dim3,
    /// `blockDim`.
    pub block_dim: Dim3,
    /// `gridDim`.
    pub grid_dim: Dim3,
    /// The executor running the launch.
    pub executor: &'a dyn Executor,
}

std::thread_local! {
    static CURRENT: Cell<*const ThreadContext<'static>> = const { Cell::new(core::ptr::null()) };
}

/// A function returning the calling OS thread's installed [`ThreadContext`] (null: none),
/// as [`installed_context`] does.
pub type ContextSource = extern "C" fn() -> *const c_void;

/// Where this copy of the device crate finds the running kernel thread's context: null
/// for its own thread-local, else the [`ContextSource`] of the executor's copy (a kernel
/// library loaded at run time links a copy of its own; see [`set_context_source`]).
static CONTEXT_SOURCE: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());

/// Installs `ctx` as this OS thread's kernel context (null: none), until the next call.
/// An executor that switches between kernel threads on one OS thread installs the
/// context of each thread it resumes.
///
/// # Safety
/// Until it is replaced, `ctx` must point to a live context, and device operations called
/// meanwhile dereference the addresses in its state (heap base, peer bases, barrier
/// offsets): they must describe live mappings, as the runtime's executor guarantees.
#[inline]
pub unsafe fn set_context(ctx: *const ThreadContext<'_>) {
    CURRENT.with(|c| c.set(ctx.cast::<ThreadContext<'static>>()));
}

/// The context [`set_context`] installed on the calling OS thread (null: none): the
/// [`ContextSource`] an executor hands to kernel libraries it loads.
pub extern "C" fn installed_context() -> *const c_void {
    CURRENT.with(Cell::get).cast()
}

/// Makes this copy of the device crate read kernel-thread contexts from `source` instead
/// of its own thread-local: what a kernel library does when the executor that loaded it
/// hands it that executor's [`installed_context`].
///
/// # Safety
/// `source` must return null or a context that stays live while a device function of
/// this copy uses it, laid out as this copy's [`ThreadContext`] (the same device-crate
/// version and compiler; the kernel library's ABI check guarantees it).
pub unsafe fn set_context_source(source: ContextSource) {
    CONTEXT_SOURCE.store(source as *mut (), Ordering::Release);
}

pub(crate) fn current() -> &'static ThreadContext<'static> {
    // Relaxed: on every device call; the value is a function (immutable code), stored
    // before the loader runs any kernel of this copy.
    let source = CONTEXT_SOURCE.load(Ordering::Relaxed);
    let p: *const ThreadContext<'static> = if source.is_null() {
        CURRENT.with(Cell::get)
    } else {
        // SAFETY: only `set_context_source` stores here, and only `ContextSource`s.
        let source: ContextSource =
            unsafe { core::mem::transmute::<*mut (), ContextSource>(source) };
        source().cast()
    };
    assert!(
        !p.is_null(),
        "a symmem device function was called outside a kernel launched by the CPU executor"
    );
    // SAFETY: `set_context`'s caller keeps the context alive while it is installed; the
    // 'static is never observable outside it because no reference escapes a device
    // function call.
    unsafe { &*p }
}

/// Copies `len` bytes from `src` to `dst` as the host's puts and gets copy that many
/// bytes: in line by `memcpy` below [`EXECUTOR_COPY_FROM`], by the executor's
/// [`Executor::copy`] from there on.
///
/// # Safety
/// As [`core::ptr::copy_nonoverlapping`].
#[inline]
pub unsafe fn copy_bytes(dst: *mut u8, src: *const u8, len: usize) {
    if len < EXECUTOR_COPY_FROM {
        // SAFETY: forwarded from the caller.
        unsafe { core::ptr::copy_nonoverlapping(src, dst, len) }
    } else {
        // SAFETY: forwarded from the caller.
        unsafe { current().executor.copy(dst, src, len) }
    }
}

/// The PE's device state, by value.
#[inline]
pub fn state() -> DeviceState {
    *current().state
}

/// A load of memory that nothing writes while a kernel runs (the peer table); the GPU
/// form lets the compiler read it once per kernel.
///
/// # Safety
/// `p` must be a valid, aligned address that no one writes during the launch.
#[inline]
pub unsafe fn load_invariant_u64(p: *const u64) -> u64 {
    // SAFETY: forwarded from the caller.
    unsafe { p.read() }
}

/// `threadIdx`.
#[inline]
pub fn thread_idx() -> Dim3 {
    current().thread_idx
}

/// `blockIdx`.
#[inline]
pub fn block_idx() -> Dim3 {
    current().block_idx
}

/// `blockDim`.
#[inline]
pub fn block_dim() -> Dim3 {
    current().block_dim
}

/// `gridDim`.
#[inline]
pub fn grid_dim() -> Dim3 {
    current().grid_dim
}

/// `__syncthreads()`.
pub fn sync_threads() {
    let ctx = current();
    obey(ctx.executor.sync_threads(ctx));
}

/// `__syncwarp()`.
pub fn sync_warp() {
    let ctx = current();
    obey(ctx.executor.sync_warp(ctx));
}

/// This thread's lane in its warp.
#[inline]
pub fn lane_id() -> u32 {
    let ctx = current();
    ctx.block_dim.linear(ctx.thread_idx) % crate::geometry::WARP_SIZE
}

/// A SeqCst fence, the CPU's counterpart of `fence.sc.sys`.
#[inline]
pub fn fence_sys() {
    fence(Ordering::SeqCst);
}

/// Fails the kernel visibly: panics with the error (the launch returns it).
#[cold]
pub fn fail(code: u32, pe: u32) -> ! {
    use crate::state::error_code::*;
    let st = state();
    match code {
        UNREACHABLE_PE => panic!(
            "symmem device: PE {pe} is not reachable from PE {}: no P2P path and no proxy channel (remote transport) yet",
            st.my_pe
        ),
        INVALID_PE => panic!("symmem device: PE {pe} does not exist (n_pes = {})", st.n_pes),
        PROXY_FAILED => panic!(
            "symmem device: PE {}'s proxy channel failed issuing a request to PE {pe} on the remote transport",
            st.my_pe
        ),
        INVALID_TEAM_PE => panic!(
            "symmem device: a collective named team PE {pe}, which is not in the team"
        ),
        INVALID_TEAM => panic!(
            "symmem device: a collective on PE {pe} got a team handle that does not describe a team of this PE (get it from Team::device on this PE)"
        ),
        _ => panic!("symmem device error {code} (PE {pe})"),
    }
}

/// Acquire load.
///
/// # Safety
/// `p` must be a valid, aligned address.
#[inline]
pub unsafe fn load_acquire_u32(p: *const u32) -> u32 {
    // SAFETY: the caller guarantees `p` is valid and aligned; other processes and
    // threads access it only atomically.
    unsafe { AtomicU32::from_ptr(p as *mut u32) }.load(Ordering::Acquire)
}

/// Acquire load.
///
/// # Safety
/// `p` must be a valid, aligned address.
#[inline]
pub unsafe fn load_acquire_u64(p: *const u64) -> u64 {
    // SAFETY: as in `load_acquire_u32`.
    unsafe { AtomicU64::from_ptr(p as *mut u64) }.load(Ordering::Acquire)
}

/// Release store.
///
/// # Safety
/// `p` must be a valid, aligned address.
#[inline]
pub unsafe fn store_release_u64(p: *mut u64, v: u64) {
    // SAFETY: as in `load_acquire_u32`.
    unsafe { AtomicU64::from_ptr(p) }.store(v, Ordering::Release)
}

/// A relaxed atomic load: whole, orders nothing (the polls of a wait, `atomic_fetch`).
///
/// # Safety
/// `p` must be a valid, aligned address.
#[inline]
pub unsafe fn load_relaxed_u32(p: *const u32) -> u32 {
    // SAFETY: the caller guarantees `p` is valid and aligned.
    unsafe { AtomicU32::from_ptr(p as *mut u32) }.load(Ordering::Relaxed)
}

/// A relaxed atomic load: whole, orders nothing (the polls of a wait, `atomic_fetch`).
///
/// # Safety
/// `p` must be a valid, aligned address.
#[inline]
pub unsafe fn load_relaxed_u64(p: *const u64) -> u64 {
    // SAFETY: the caller guarantees `p` is valid and aligned.
    unsafe { AtomicU64::from_ptr(p as *mut u64) }.load(Ordering::Relaxed)
}

/// A relaxed atomic store: whole, and ordered after an earlier fence.
///
/// # Safety
/// `p` must be a valid, aligned address.
#[inline]
pub unsafe fn store_relaxed_u32(p: *mut u32, v: u32) {
    // SAFETY: the caller guarantees `p` is valid and aligned.
    unsafe { AtomicU32::from_ptr(p) }.store(v, Ordering::Relaxed);
}

/// A relaxed atomic store: whole, and ordered after an earlier fence.
///
/// # Safety
/// `p` must be a valid, aligned address.
#[inline]
pub unsafe fn store_relaxed_u64(p: *mut u64, v: u64) {
    // SAFETY: the caller guarantees `p` is valid and aligned.
    unsafe { AtomicU64::from_ptr(p) }.store(v, Ordering::Relaxed);
}

macro_rules! atom {
    ($name:ident, $method:ident, $t:ty, $atomic:ty) => {
        /// Relaxed read-modify-write; returns the old value.
        ///
        /// # Safety
        /// `p` must be a valid, aligned address.
        #[inline]
        pub unsafe fn $name(p: *mut $t, v: $t) -> $t {
            // SAFETY: the caller guarantees `p` is valid and aligned.
            unsafe { <$atomic>::from_ptr(p) }.$method(v, Ordering::Relaxed)
        }
    };
}

macro_rules! red {
    ($name:ident, $method:ident, $t:ty, $atomic:ty) => {
        /// Relaxed read-modify-write whose old value is not needed (PTX `red`).
        ///
        /// # Safety
        /// `p` must be a valid, aligned address.
        #[inline]
        pub unsafe fn $name(p: *mut $t, v: $t) {
            // SAFETY: the caller guarantees `p` is valid and aligned.
            unsafe { <$atomic>::from_ptr(p) }.$method(v, Ordering::Relaxed);
        }
    };
}

red!(red_add_u32, fetch_add, u32, AtomicU32);
red!(red_add_u64, fetch_add, u64, AtomicU64);
red!(red_and_u32, fetch_and, u32, AtomicU32);
red!(red_and_u64, fetch_and, u64, AtomicU64);
red!(red_or_u32, fetch_or, u32, AtomicU32);
red!(red_or_u64, fetch_or, u64, AtomicU64);
red!(red_xor_u32, fetch_xor, u32, AtomicU32);
red!(red_xor_u64, fetch_xor, u64, AtomicU64);

atom!(atom_add_u32, fetch_add, u32, AtomicU32);
atom!(atom_add_u64, fetch_add, u64, AtomicU64);
atom!(atom_exch_u32, swap, u32, AtomicU32);
atom!(atom_exch_u64, swap, u64, AtomicU64);
atom!(atom_and_u32, fetch_and, u32, AtomicU32);
atom!(atom_and_u64, fetch_and, u64, AtomicU64);
atom!(atom_or_u32, fetch_or, u32, AtomicU32);
atom!(atom_or_u64, fetch_or, u64, AtomicU64);
atom!(atom_xor_u32, fetch_xor, u32, AtomicU32);
atom!(atom_xor_u64, fetch_xor, u64, AtomicU64);

macro_rules! cas {
    ($name:ident, $t:ty, $atomic:ty) => {
        /// Relaxed compare-and-swap: stores `v` if `*p == cond`; returns the old value.
        ///
        /// # Safety
        /// `p` must be a valid, aligned address.
        #[inline]
        pub unsafe fn $name(p: *mut $t, cond: $t, v: $t) -> $t {
            // SAFETY: the caller guarantees `p` is valid and aligned.
            match unsafe { <$atomic>::from_ptr(p) }.compare_exchange(
                cond,
                v,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(old) | Err(old) => old,
            }
        }
    };
}

cas!(atom_cas_u32, u32, AtomicU32);
cas!(atom_cas_u64, u64, AtomicU64);

/// Rounds of one wait between two executor checks while the executor does not ask for
/// them: bounds the time to notice a dead peer when other threads keep the OS thread busy.
const CHECK_EVERY: u32 = 1024;

/// The backoff of a device wait loop. Each round gives way to the launch's other kernel
/// threads through the executor, which backs off at the OS level (spin, then yield, then
/// sleep: the shared `symmem_sync::Backoff` policy) once every thread of its OS thread
/// waits. Slow rounds let the executor stop the kernel, so it never waits forever on a
/// dead peer, a silent one (the state's `wait_timeout_ms`) or a crashed sibling thread,
/// and, when the state has a wait record, publish the wait there once it has lasted
/// [`crate::state::WAIT_RECORD_AFTER_MS`] (see [`crate::stall`]), cleared when the
/// backoff drops (also when the thread unwinds).
pub struct Backoff {
    /// Rounds so far.
    rounds: u32,
    /// When the wait's first check ran: the executor's timeout counts from there.
    slow_since: Option<std::time::Instant>,
    /// What the wait waits for, named if it has to stop.
    site: WaitSite,
    /// The wait's part in the PE's wait record.
    stall: Stall,
}

impl Backoff {
    /// A fresh backoff, for one wait for `site`.
    #[inline]
    pub fn new(site: WaitSite) -> Self {
        Backoff {
            rounds: 0,
            slow_since: None,
            site,
            stall: Stall::new(),
        }
    }

    /// Gives way to the other kernel threads; when the executor asks for it (or every
    /// [`CHECK_EVERY`] rounds), also runs its checks, which unwind the kernel thread if the
    /// launch must stop. `seen` is the value the wait last read.
    #[inline]
    pub fn snooze(&mut self, seen: u64) {
        let executor = current().executor;
        let check_now = obey(executor.pause(self.rounds == 0));
        self.rounds = self.rounds.wrapping_add(1);
        if check_now || self.rounds.is_multiple_of(CHECK_EVERY) {
            self.check(executor, seen);
        }
    }

    /// The executor's checks, out of line to keep the wait loop tight; then the wait
    /// record.
    #[cold]
    #[inline(never)]
    fn check(&mut self, executor: &dyn Executor, seen: u64) {
        let origin = *CLOCK_ORIGIN.get_or_init(std::time::Instant::now);
        let since = *self.slow_since.get_or_insert_with(std::time::Instant::now);
        obey(executor.check(since.elapsed(), &self.site, seen));
        let ns = |t: std::time::Instant| t.saturating_duration_since(origin).as_nanos() as u64;
        self.stall.note(
            current().state.wait_record,
            &self.site,
            seen,
            ns(since),
            ns(std::time::Instant::now()),
        );
    }
}

impl Drop for Backoff {
    /// The wait ended, or its thread unwinds: its record, if it published one, is cleared.
    fn drop(&mut self) {
        self.stall.end();
    }
}

/// The origin of the CPU executor's device clock ([`crate::state::WaitRecord`]'s stamps).
static CLOCK_ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// [`printf!`](crate::printf!) on the CPU executor: formats as C's `printf` and writes the
/// line to this process's standard output in one write (threads' prints do not interleave
/// within one call).
#[cfg(feature = "printf")]
pub fn printf(format: &core::ffi::CStr, args: &[crate::printf::Arg]) {
    use std::io::Write as _;
    let mut text = std::string::String::new();
    crate::printf::format_into(&mut text, format, args);
    // A print that fails (a closed stdout) is dropped, as a GPU's full printf buffer is.
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}
