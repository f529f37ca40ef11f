//! GPU (nvptx64) primitives.
//!
//! Ordered and system-scope memory operations are inline PTX: LLVM drops the ordering of
//! RMW atomics on nvptx64 (it emits a relaxed, GPU-scope `atom`), and peers (other GPUs,
//! the host proxy) observe at system scope, so `.sys` and the explicit semantics are
//! required. Addresses are generic (no state space), valid for global memory of this GPU,
//! of P2P-mapped peers and for mapped host memory.

use core::arch::asm;
use core::arch::nvptx;

use crate::geometry::Dim3;
use crate::stall::Stall;
use crate::state::{error_code, DeviceState, ErrorRecord, WaitSite};

/// One field of the module's state: a load from the constant bank by the symbol's name
/// (the PTX build places [`crate::state::SYMMEM_DEVICE_STATE`] in `.const`), declared `pure` and
/// `nomem` so that the compiler reads each field once per kernel: the host writes the
/// state before a launch and never during one.
macro_rules! state_field {
    ($field:ident: u32) => {{
        let v: u32;
        // SAFETY: a load of a field of the module's state (layout checked in `state.rs`),
        // which nothing writes during a launch.
        unsafe {
            asm!(
                "ld.const.u32 {v}, [SYMMEM_DEVICE_STATE+{off}];",
                v = out(reg32) v,
                off = const core::mem::offset_of!(DeviceState, $field),
                options(pure, nomem, nostack)
            )
        };
        v
    }};
    ($field:ident: u64) => {{
        let v: u64;
        // SAFETY: as for the u32 fields.
        unsafe {
            asm!(
                "ld.const.u64 {v}, [SYMMEM_DEVICE_STATE+{off}];",
                v = out(reg64) v,
                off = const core::mem::offset_of!(DeviceState, $field),
                options(pure, nomem, nostack)
            )
        };
        v
    }};
}

/// The module's device state, by value.
///
/// Read from the constant bank, field by field, by loads the compiler may merge and hoist:
/// a plain read of a `.global` state was repeated after every fence or atomic (their
/// inline asm clobbers memory), and a system fence also empties the L1 cache, so each
/// operation after a `quiet` paid a chain of dependent L2 loads (state, then the peer
/// table) before its first store. Fields a caller does not use are not loaded.
#[inline(always)]
pub fn state() -> DeviceState {
    DeviceState {
        version: state_field!(version: u32),
        my_pe: state_field!(my_pe: u32),
        n_pes: state_field!(n_pes: u32),
        wait_timeout_ms: state_field!(wait_timeout_ms: u32),
        heap_base: state_field!(heap_base: u64),
        heap_size: state_field!(heap_size: u64),
        peer_bases: state_field!(peer_bases: u64),
        barrier_off: state_field!(barrier_off: u64),
        epoch_off: state_field!(epoch_off: u64),
        error: state_field!(error: u64),
        proxy: state_field!(proxy: u64),
        wait_record: state_field!(wait_record: u64),
    }
}

/// A load of global memory that nothing writes while a kernel runs (the peer table; the
/// state itself is in the constant bank, see [`state`]), through the non-coherent
/// read-only path. Declared `pure` and `nomem`, so
/// that the compiler reads each address once per kernel instead of after every fence.
///
/// # Safety
/// `p` must be a valid, aligned address of global memory that no one writes during the
/// launch.
#[inline(always)]
pub unsafe fn load_invariant_u64(p: *const u64) -> u64 {
    let v: u64;
    // SAFETY: the caller guarantees `p` is valid, aligned, global and unchanging for the
    // launch, which is what `pure`/`nomem` and `.nc` assume.
    unsafe {
        asm!(
            "{{ .reg .u64 %g; cvta.to.global.u64 %g, {p}; ld.global.nc.u64 {v}, [%g]; }}",
            v = out(reg64) v,
            p = in(reg64) p,
            options(pure, nomem, nostack)
        )
    };
    v
}

/// `threadIdx`.
#[inline(always)]
pub fn thread_idx() -> Dim3 {
    // SAFETY: reading special registers has no preconditions.
    unsafe {
        Dim3::new(
            nvptx::_thread_idx_x() as u32,
            nvptx::_thread_idx_y() as u32,
            nvptx::_thread_idx_z() as u32,
        )
    }
}

/// `blockIdx`.
#[inline(always)]
pub fn block_idx() -> Dim3 {
    // SAFETY: reading special registers has no preconditions.
    unsafe {
        Dim3::new(
            nvptx::_block_idx_x() as u32,
            nvptx::_block_idx_y() as u32,
            nvptx::_block_idx_z() as u32,
        )
    }
}

/// `blockDim`.
#[inline(always)]
pub fn block_dim() -> Dim3 {
    // SAFETY: reading special registers has no preconditions.
    unsafe {
        Dim3::new(
            nvptx::_block_dim_x() as u32,
            nvptx::_block_dim_y() as u32,
            nvptx::_block_dim_z() as u32,
        )
    }
}

/// `gridDim`.
#[inline(always)]
pub fn grid_dim() -> Dim3 {
    // SAFETY: reading special registers has no preconditions.
    unsafe {
        Dim3::new(
            nvptx::_grid_dim_x() as u32,
            nvptx::_grid_dim_y() as u32,
            nvptx::_grid_dim_z() as u32,
        )
    }
}

/// `__syncthreads()`, as the non-aligned `barrier.sync 0`.
///
/// Not `bar.sync` (what `_syncthreads` emits), which is `barrier.sync.aligned`: it
/// requires every thread to execute the *same* barrier instruction. LLVM does not know
/// that: it duplicated the barrier after `if thread_rank() == 0 { … }` into both branches,
/// and on an H100 the warp then deadlocked, lane 0 waiting at one copy's `WARPSYNC.ALL`
/// and lanes 1–7 at the other's (seen with cuda-gdb in the `signal_cmp` test). The
/// non-aligned form lets threads arrive at different barrier instructions (sm_70+).
#[inline(always)]
pub fn sync_threads() {
    // SAFETY: a block-wide barrier; every thread of the block must reach one (caller
    // contract of the public API). Not `nomem`: memory accesses stay on their side.
    unsafe { asm!("barrier.sync 0;", options(nostack)) }
}

/// `__syncwarp()` over the threads of this warp: all 32 lanes, or the lanes that exist in
/// a block's partial last warp (a mask naming absent lanes would never complete).
#[inline(always)]
pub fn sync_warp() {
    let dim = block_dim();
    let tid = dim.linear(thread_idx());
    let width = (dim.volume() - tid / crate::geometry::WARP_SIZE * crate::geometry::WARP_SIZE)
        .min(crate::geometry::WARP_SIZE);
    let mask: u32 = if width >= 32 {
        u32::MAX
    } else {
        (1u32 << width) - 1
    };
    // SAFETY: a warp barrier over exactly the lanes of this warp; each must reach it
    // (caller contract).
    unsafe { asm!("bar.warp.sync {m};", m = in(reg32) mask, options(nostack)) }
}

/// This thread's lane in its warp.
#[inline(always)]
pub fn lane_id() -> u32 {
    let lane: u32;
    // SAFETY: reading %laneid has no preconditions.
    unsafe { asm!("mov.u32 {l}, %laneid;", l = out(reg32) lane, options(nomem, nostack, pure)) };
    lane
}

/// `fence.sc.sys` (`__threadfence_system`): orders all earlier memory operations of this
/// thread before all later ones, for every observer in the system.
#[inline(always)]
pub fn fence_sys() {
    // SAFETY: a fence has no operands.
    unsafe { asm!("fence.sc.sys;", options(nostack)) }
}

/// Sleeps about `ns` nanoseconds (PTX `nanosleep`, sm_70+).
#[inline(always)]
pub fn nanosleep(ns: u32) {
    // SAFETY: nanosleep has no memory effects.
    unsafe { asm!("nanosleep.u32 {t};", t = in(reg32) ns, options(nomem, nostack)) }
}

/// Records an error in the state's error word and traps: the kernel fails visibly.
#[cold]
pub fn fail(code: u32, pe: u32) -> ! {
    let word = state().error;
    if word != 0 {
        // SAFETY: `error` is a host-provided, 8-byte aligned, device-accessible
        // ErrorRecord, whose first field is the word.
        unsafe { store_release_u64(word as *mut u64, ((pe as u64) << 32) | code as u64) };
    }
    fence_sys();
    // SAFETY: trap aborts the kernel; it has no preconditions.
    unsafe { nvptx::trap() }
}

/// The error word's value while one failing thread fills the record's details.
const CLAIMED: u64 = u64::MAX;

/// Claims the error record `rec` for this thread's details: true for the first thread to
/// get here; every later one waits (boundedly) until the first has published its word,
/// then gets false and should trap (a trap ends the whole grid, so an early one could
/// leave the record half written).
///
/// # Safety
/// `rec` must be the state's error record: host-provided, aligned, device-accessible.
#[inline(always)]
unsafe fn claim_record(rec: *mut ErrorRecord) -> bool {
    // SAFETY: the caller's contract; the word is the record's first field.
    unsafe {
        let word = core::ptr::addr_of_mut!((*rec).word);
        if atom_cas_u64(word, 0, CLAIMED) == 0 {
            return true;
        }
        let mut polls = 0u32;
        while load_relaxed_u64(word) == CLAIMED && polls < 1 << 20 {
            polls += 1;
        }
    }
    false
}

/// Fails the kernel for a wait that had to stop (`code`: it outlasted its deadline, or
/// the host found a failed peer): the first thread to get here fills the error record
/// (what it waited for, the value it saw) and traps; the others wait until it has, then
/// trap too. Not named `*wait*`: the PTX check holds functions so named to the rules of
/// waits.
#[cold]
#[inline(never)]
fn fail_stalled(code: u32, site: &WaitSite, seen: u64) -> ! {
    let rec = state().error as *mut ErrorRecord;
    if rec.is_null() {
        fail(code, site.pe);
    }
    // SAFETY: `error` is a host-provided, aligned, device-accessible ErrorRecord.
    unsafe {
        if !claim_record(rec) {
            nvptx::trap()
        }
        store_relaxed_u64(
            core::ptr::addr_of_mut!((*rec).wait),
            site.op as u64 | (site.cmp as u64) << 32,
        );
        store_relaxed_u64(core::ptr::addr_of_mut!((*rec).addr), site.addr);
        store_relaxed_u64(core::ptr::addr_of_mut!((*rec).seen), seen);
        store_relaxed_u64(core::ptr::addr_of_mut!((*rec).wanted), site.wanted);
    }
    fence_sys();
    fail(code, site.pe)
}

/// `%globaltimer`: nanoseconds of the GPU's global clock.
#[inline(always)]
fn global_timer_ns() -> u64 {
    let t: u64;
    // SAFETY: reading a special register has no preconditions.
    unsafe { asm!("mov.u64 {t}, %globaltimer;", t = out(reg64) t, options(nomem, nostack)) };
    t
}

/// `ld.acquire.sys.u32`.
///
/// # Safety
/// `p` must be a valid, aligned address.
#[inline(always)]
pub unsafe fn load_acquire_u32(p: *const u32) -> u32 {
    let v: u32;
    // SAFETY: the caller guarantees `p` is valid and aligned.
    unsafe {
        asm!("ld.acquire.sys.u32 {v}, [{p}];", v = out(reg32) v, p = in(reg64) p, options(nostack))
    };
    v
}

/// `ld.acquire.sys.u64`.
///
/// # Safety
/// `p` must be a valid, aligned address.
#[inline(always)]
pub unsafe fn load_acquire_u64(p: *const u64) -> u64 {
    let v: u64;
    // SAFETY: the caller guarantees `p` is valid and aligned.
    unsafe {
        asm!("ld.acquire.sys.u64 {v}, [{p}];", v = out(reg64) v, p = in(reg64) p, options(nostack))
    };
    v
}

/// `ld.relaxed.sys.u32`: a strong load that sees a whole value written by any observer;
/// orders nothing (the polls of a wait, `atomic_fetch`).
///
/// # Safety
/// `p` must be a valid, aligned address.
#[inline(always)]
pub unsafe fn load_relaxed_u32(p: *const u32) -> u32 {
    let v: u32;
    // SAFETY: the caller guarantees `p` is valid and aligned.
    unsafe {
        asm!("ld.relaxed.sys.u32 {v}, [{p}];", v = out(reg32) v, p = in(reg64) p, options(nostack))
    };
    v
}

/// `ld.relaxed.sys.u64`: as [`load_relaxed_u32`].
///
/// # Safety
/// `p` must be a valid, aligned address.
#[inline(always)]
pub unsafe fn load_relaxed_u64(p: *const u64) -> u64 {
    let v: u64;
    // SAFETY: the caller guarantees `p` is valid and aligned.
    unsafe {
        asm!("ld.relaxed.sys.u64 {v}, [{p}];", v = out(reg64) v, p = in(reg64) p, options(nostack))
    };
    v
}

/// A 16-byte vector load (`ld.v4.u32`): one element of a copy's body.
///
/// # Safety
/// `p` must be valid for 16 bytes and 16-byte aligned.
#[inline(always)]
pub unsafe fn load16(p: *const u8) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: the caller guarantees `p` is valid and aligned.
    unsafe {
        asm!(
            "ld.v4.u32 {{{a}, {b}, {c}, {d}}}, [{p}];",
            a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d,
            p = in(reg64) p,
            options(readonly, nostack)
        )
    };
    [a, b, c, d]
}

/// A 16-byte vector store (`st.v4.u32`): one element of a copy's body.
///
/// # Safety
/// `p` must be valid for 16 bytes and 16-byte aligned.
#[inline(always)]
pub unsafe fn store16(p: *mut u8, [a, b, c, d]: [u32; 4]) {
    // SAFETY: the caller guarantees `p` is valid and aligned.
    unsafe {
        asm!(
            "st.v4.u32 [{p}], {{{a}, {b}, {c}, {d}}};",
            p = in(reg64) p,
            a = in(reg32) a, b = in(reg32) b, c = in(reg32) c, d = in(reg32) d,
            options(nostack)
        )
    };
}

/// `st.release.sys.u64`.
///
/// # Safety
/// `p` must be a valid, aligned address.
#[inline(always)]
pub unsafe fn store_release_u64(p: *mut u64, v: u64) {
    // SAFETY: the caller guarantees `p` is valid and aligned.
    unsafe {
        asm!("st.release.sys.u64 [{p}], {v};", p = in(reg64) p, v = in(reg64) v, options(nostack))
    };
}

/// `st.relaxed.sys.u8`: a strong store of a byte (text of the panic record).
///
/// # Safety
/// `p` must be a valid address.
#[inline(always)]
pub unsafe fn store_relaxed_u8(p: *mut u8, v: u8) {
    // SAFETY: the caller guarantees `p` is valid.
    unsafe {
        asm!("st.relaxed.sys.u8 [{p}], {v};", p = in(reg64) p, v = in(reg16) v as u16, options(nostack))
    };
}

/// `st.relaxed.sys.u32`: a strong store other observers see whole and in fence order.
///
/// # Safety
/// `p` must be a valid, aligned address.
#[inline(always)]
pub unsafe fn store_relaxed_u32(p: *mut u32, v: u32) {
    // SAFETY: the caller guarantees `p` is valid and aligned.
    unsafe {
        asm!("st.relaxed.sys.u32 [{p}], {v};", p = in(reg64) p, v = in(reg32) v, options(nostack))
    };
}

/// `st.relaxed.sys.u64`: a strong store other observers see whole and in fence order.
///
/// # Safety
/// `p` must be a valid, aligned address.
#[inline(always)]
pub unsafe fn store_relaxed_u64(p: *mut u64, v: u64) {
    // SAFETY: the caller guarantees `p` is valid and aligned.
    unsafe {
        asm!("st.relaxed.sys.u64 [{p}], {v};", p = in(reg64) p, v = in(reg64) v, options(nostack))
    };
}

macro_rules! red {
    ($name:ident, $op:literal, $t:ty, $reg:ident) => {
        #[doc = concat!("`red.relaxed.sys.", $op, "`: an update that returns nothing and orders nothing.")]
        ///
        /// # Safety
        /// `p` must be a valid, aligned address.
        #[inline(always)]
        pub unsafe fn $name(p: *mut $t, v: $t) {
            // SAFETY: the caller guarantees `p` is valid and aligned.
            unsafe {
                asm!(
                    concat!("red.relaxed.sys.", $op, " [{p}], {v};"),
                    p = in(reg64) p,
                    v = in($reg) v,
                    options(nostack)
                )
            };
        }
    };
}

red!(red_add_u32, "add.u32", u32, reg32);
red!(red_add_u64, "add.u64", u64, reg64);
red!(red_and_u32, "and.b32", u32, reg32);
red!(red_and_u64, "and.b64", u64, reg64);
red!(red_or_u32, "or.b32", u32, reg32);
red!(red_or_u64, "or.b64", u64, reg64);
red!(red_xor_u32, "xor.b32", u32, reg32);
red!(red_xor_u64, "xor.b64", u64, reg64);

macro_rules! atom {
    ($name:ident, $op:literal, $t:ty, $reg:ident) => {
        #[doc = concat!("`atom.relaxed.sys.", $op, "`: returns the old value; orders nothing.")]
        ///
        /// # Safety
        /// `p` must be a valid, aligned address.
        #[inline(always)]
        pub unsafe fn $name(p: *mut $t, v: $t) -> $t {
            let old: $t;
            // SAFETY: the caller guarantees `p` is valid and aligned.
            unsafe {
                asm!(
                    concat!("atom.relaxed.sys.", $op, " {o}, [{p}], {v};"),
                    o = out($reg) old,
                    p = in(reg64) p,
                    v = in($reg) v,
                    options(nostack)
                )
            };
            old
        }
    };
}

atom!(atom_add_u32, "add.u32", u32, reg32);
atom!(atom_add_u64, "add.u64", u64, reg64);
atom!(atom_exch_u32, "exch.b32", u32, reg32);
atom!(atom_exch_u64, "exch.b64", u64, reg64);
atom!(atom_and_u32, "and.b32", u32, reg32);
atom!(atom_and_u64, "and.b64", u64, reg64);
atom!(atom_or_u32, "or.b32", u32, reg32);
atom!(atom_or_u64, "or.b64", u64, reg64);
atom!(atom_xor_u32, "xor.b32", u32, reg32);
atom!(atom_xor_u64, "xor.b64", u64, reg64);

/// `atom.acq_rel.gpu.add.u64`: returns the old value. For counters only this GPU's
/// threads update: at GPU scope an RMW is atomic on any memory, including mapped pinned
/// host memory, where a system-scope RMW is atomic only on systems whose GPU reports
/// `hostNativeAtomicSupported` (the proxy ring's ticket counter).
///
/// # Safety
/// `p` must be a valid, aligned address.
#[inline(always)]
pub unsafe fn atom_add_gpu_u64(p: *mut u64, v: u64) -> u64 {
    let old: u64;
    // SAFETY: the caller guarantees `p` is valid and aligned.
    unsafe {
        asm!(
            "atom.acq_rel.gpu.add.u64 {o}, [{p}], {v};",
            o = out(reg64) old,
            p = in(reg64) p,
            v = in(reg64) v,
            options(nostack)
        )
    };
    old
}

/// `atom.relaxed.sys.cas.b32`: stores `v` if `*p == cond`; returns the old value;
/// orders nothing.
///
/// # Safety
/// `p` must be a valid, aligned address.
#[inline(always)]
pub unsafe fn atom_cas_u32(p: *mut u32, cond: u32, v: u32) -> u32 {
    let old: u32;
    // SAFETY: the caller guarantees `p` is valid and aligned.
    unsafe {
        asm!("atom.relaxed.sys.cas.b32 {o}, [{p}], {c}, {v};",
            o = out(reg32) old, p = in(reg64) p, c = in(reg32) cond, v = in(reg32) v, options(nostack))
    };
    old
}

/// `atom.relaxed.sys.cas.b64`: stores `v` if `*p == cond`; returns the old value;
/// orders nothing.
///
/// # Safety
/// `p` must be a valid, aligned address.
#[inline(always)]
pub unsafe fn atom_cas_u64(p: *mut u64, cond: u64, v: u64) -> u64 {
    let old: u64;
    // SAFETY: the caller guarantees `p` is valid and aligned.
    unsafe {
        asm!("atom.relaxed.sys.cas.b64 {o}, [{p}], {c}, {v};",
            o = out(reg64) old, p = in(reg64) p, c = in(reg64) cond, v = in(reg64) v, options(nostack))
    };
    old
}

/// Polls of a device wait before it starts to sleep. A peer's answer takes about a
/// microsecond on one GPU; measured on an H100 (two PEs, MPS), starting to sleep after 8
/// polls with sleeps growing to 1 µs made the put_signal ping-pong 2× slower than
/// NVSHMEM's, which spins.
const SPIN_POLLS: u32 = 1024;

/// Sleeping rounds of a device wait between two reads of the host's failed-peer word
/// ([`ErrorRecord::peer_failed`], in host memory: about a microsecond across PCIe). At
/// 32–256 ns of sleep a round, 1024 rounds are well under a millisecond.
const PEER_CHECK_ROUNDS: u32 = 1024;

/// The backoff of a device wait loop: a spin of [`SPIN_POLLS`] polls, then `nanosleep`
/// with a period growing from 32 to 256 ns, short enough not to delay a late answer much.
/// The sleeping phase reads `%globaltimer` when it begins and, when the state has a
/// `wait_timeout_ms`, at each round: a wait that lasts longer fails the kernel, naming
/// what it waited for. Every [`PEER_CHECK_ROUNDS`] rounds it also reads whether the host
/// found a failed peer, and fails the kernel naming the wait if so (the host names the
/// peer); and, when the state has a wait record, publishes the wait there once it has
/// lasted [`crate::state::WAIT_RECORD_AFTER_MS`] (see [`crate::stall`]), cleared when
/// the backoff drops. The spin costs nothing more.
pub struct Backoff {
    step: u32,
    /// Sleeping rounds, wrapping.
    slept: u32,
    /// `%globaltimer` when the sleeping phase began; 0 before.
    since: u64,
    site: WaitSite,
    /// The wait's part in the PE's wait record.
    stall: Stall,
}

impl Backoff {
    /// A fresh backoff, for one wait for `site`.
    #[inline(always)]
    pub fn new(site: WaitSite) -> Self {
        Backoff {
            step: 0,
            slept: 0,
            since: 0,
            site,
            stall: Stall::new(),
        }
    }

    /// Waits a little, longer each time once past the spin; `seen` is the value the wait
    /// last read (reported if it has to stop).
    #[inline(always)]
    pub fn snooze(&mut self, seen: u64) {
        if self.step >= SPIN_POLLS {
            nanosleep(32u32 << (self.step - SPIN_POLLS).min(3));
            if self.since == 0 {
                self.since = global_timer_ns();
            } else {
                self.check_deadline(seen);
            }
            self.slept = self.slept.wrapping_add(1);
            if self.slept % PEER_CHECK_ROUNDS == 0 {
                self.check_peers(seen);
                self.stall.note(
                    state().wait_record,
                    &self.site,
                    seen,
                    self.since,
                    global_timer_ns(),
                );
            }
        }
        self.step = self.step.saturating_add(1);
    }

    /// Fails the kernel if the host has found a failed peer.
    #[inline(always)]
    fn check_peers(&self, seen: u64) {
        let rec = state().error as *const ErrorRecord;
        if rec.is_null() {
            return;
        }
        // SAFETY: `error` is a host-provided, aligned ErrorRecord in memory the GPU reads;
        // the host writes `peer_failed` while kernels run, hence a system-scope load.
        let failed = unsafe { load_relaxed_u64(core::ptr::addr_of!((*rec).peer_failed)) };
        if failed != 0 {
            fail_stalled(error_code::PEER_FAILED, &self.site, seen);
        }
    }

    /// Fails the kernel once the sleeping phase has lasted the state's wait timeout.
    #[inline(always)]
    fn check_deadline(&mut self, seen: u64) {
        let limit_ms = state().wait_timeout_ms;
        if limit_ms == 0 {
            return;
        }
        if global_timer_ns().wrapping_sub(self.since) >= limit_ms as u64 * 1_000_000 {
            fail_stalled(error_code::WAIT_TIMEOUT, &self.site, seen);
        }
    }
}

impl Drop for Backoff {
    /// The wait ended: its record, if it published one, is cleared.
    #[inline(always)]
    fn drop(&mut self) {
        self.stall.end();
    }
}

/// [`printf!`](crate::printf!) on a GPU: CUDA's device `vprintf`, which the driver links
/// (a system call of the PTX ABI) and prints on the host when the launch ends.
#[cfg(feature = "printf")]
#[inline(always)]
pub fn printf(format: &core::ffi::CStr, args: &[crate::printf::Arg]) {
    extern "C" {
        fn vprintf(format: *const u8, args: *const u8) -> i32;
    }
    let buf = crate::printf::vprintf_args(args);
    // SAFETY: `format` is NUL-terminated and `buf` holds the arguments as vprintf lays
    // them out; both outlive the call.
    unsafe { vprintf(format.as_ptr().cast(), buf.as_ptr().cast()) };
}

/// A Rust panic in a kernel: the first panicking thread records where it panicked (file,
/// line, column, block, thread and a literal message: [`crate::panic_record`]) in the
/// error record, fences at system scope, publishes [`error_code::PANIC`] and traps; the
/// host names all of it in the launch's error. Another failing thread (or no record: a
/// kernel launched outside symmem) traps once the first has published its record.
///
/// Only a message that is a string literal is recorded: formatting one (`panic!("{x}")`)
/// would pull `core::fmt` into every kernel that can panic.
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    record_panic(info);
    // SAFETY: trap aborts the kernel; it has no preconditions.
    unsafe { nvptx::trap() }
}

/// The panic handler's record: if this thread is the first to fail, writes where it
/// panicked into the error record and publishes [`error_code::PANIC`].
///
/// Kept small: ptxas copies it into every kernel that can panic.
#[cold]
#[inline(never)]
fn record_panic(info: &core::panic::PanicInfo<'_>) {
    let rec = state().error as *mut ErrorRecord;
    // SAFETY: a non-null `error` is the host-provided, aligned, device-accessible
    // ErrorRecord; its `panic` field is lent to `write` after the claim.
    if rec.is_null() || !unsafe { claim_record(rec) } {
        return;
    }
    let (file, line, column) = info
        .location()
        .map_or(("<unknown>", 0, 0), |l| (l.file(), l.line(), l.column()));
    let site = crate::panic_record::PanicSite {
        file,
        line,
        column,
        block: block_idx(),
        thread: thread_idx(),
        message: info.message().as_str(),
    };
    let stores = crate::panic_record::Stores {
        word: store_relaxed_u32,
        byte: store_relaxed_u8,
    };
    // SAFETY: as above; the stores store at the addresses they are given.
    unsafe { crate::panic_record::write(core::ptr::addr_of_mut!((*rec).panic), &site, stores) };
    fence_sys();
    fail(error_code::PANIC, state().my_pe);
}
