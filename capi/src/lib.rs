//! symmem's C API: the OpenSHMEM 1.5 host API (`include/shmem.h`) and the NVSHMEM host
//! subset (`include/nvshmem.h`), built as `libsymmem.so` and `libsymmem.a`.
//!
//! Every function maps onto the safe runtime ([`symmem_runtime::Runtime`]): a C pointer
//! into the symmetric heap becomes a view ([`Runtime::view_at`], a `SymView`) of the same heap range,
//! which the typed operations check and route (direct stores to mapped peers, the socket or
//! ibverbs transport to other nodes).
//!
//! # Errors
//!
//! C callers get the C contract: functions with a return code return nonzero (and log
//! why), `shmem_malloc` and friends return NULL (and log why). A `void` function given bad
//! input (an address outside the symmetric heap, a PE out of range) or whose operation
//! fails (a peer died) logs an error naming the function, the PE and the address, then
//! ends the job as `shmem_global_exit(1)` would: there is no way to report it, and
//! carrying on would compute with data that never arrived. Logs go through `tracing` to
//! stderr; errors always show, `SYMMEM_DEBUG=info|debug` shows more.
//!
//! # State
//!
//! The C API has one runtime per process, set by `shmem_init` and taken down by
//! `shmem_finalize`: `state()` returns it, or ends the job with an error naming the
//! function called before `shmem_init`.

use std::collections::{BTreeMap, HashMap};
use std::ffi::c_int;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use symmem_runtime::{Runtime, SymBuf, SymView, Team};

mod active_set;
mod amo;
mod collectives;
mod contexts;
mod locks;
mod memory;
mod rma;
mod setup;
mod statics;
mod sync;
mod teams;

// C's `long` is Rust's i64 here, and `size_t`/`ptrdiff_t` are 8 bytes: the exported
// signatures rely on it.
const _: () = assert!(std::mem::size_of::<std::ffi::c_long>() == 8);
const _: () = assert!(std::mem::size_of::<usize>() == 8);

/// The process's runtime and what the C API keeps beside it.
pub(crate) struct State {
    /// The runtime, leaked by `shmem_init` so that teams can borrow it for `'static`;
    /// `shmem_finalize` takes it back.
    pub(crate) rt: &'static Runtime,
    /// Live `shmem_malloc` allocations by their local address, for `shmem_free`.
    pub(crate) allocs: Mutex<BTreeMap<usize, SymBuf<u8>>>,
    /// Split teams by handle (handles 1 and 2 are SHMEM_TEAM_WORLD and SHMEM_TEAM_SHARED).
    pub(crate) teams: Mutex<HashMap<usize, Arc<CTeam>>>,
    /// The next split team's handle.
    pub(crate) next_team: AtomicUsize,
    /// The main program's data segment, when it is symmetric (`statics.rs`).
    pub(crate) statics: Option<statics::Statics>,
    /// The global-exit word: `shmem_global_exit(status)` sets it on every PE to
    /// [`EXITING`] | status before ending the job, so that the PEs which then fail exit
    /// with `status` too (§9.2.5: the job exits with it).
    pub(crate) exit_word: SymBuf<u64>,
    /// SHMEM_TEAM_SHARED where it is not the runtime's TEAM_NODE (see
    /// `setup::shared_team`).
    pub(crate) shared: Option<Arc<CTeam>>,
}

/// The flag bit of the global-exit word; the low 32 bits are the status.
pub(crate) const EXITING: u64 = 1 << 32;

impl State {
    /// The status another PE passed to `shmem_global_exit`, if one did.
    pub(crate) fn global_exit_status(&self) -> Option<c_int> {
        let word = self
            .rt
            .atomic_fetch(self.exit_word.at(0), self.rt.my_pe())
            .ok()?;
        (word & EXITING != 0).then_some(word as u32 as c_int)
    }
}

/// A split team and the configuration it was created with.
pub(crate) struct CTeam {
    /// The team.
    pub(crate) team: Team<'static>,
    /// `shmem_team_config_t::num_contexts` as given at the split (0 without a config).
    pub(crate) num_contexts: c_int,
}

/// The runtime set by `shmem_init`; null before it and after `shmem_finalize`.
pub(crate) static STATE: AtomicPtr<State> = AtomicPtr::new(std::ptr::null_mut());

/// The runtime, or None before `shmem_init`.
pub(crate) fn try_state() -> Option<&'static State> {
    let p = STATE.load(Ordering::Acquire);
    // SAFETY: a non-null STATE points to the leaked Box of `shmem_init`, freed only by
    // `shmem_finalize`, after which the C contract forbids further calls.
    unsafe { p.as_ref() }
}

/// The runtime; ends the process with an error naming `func` when called before
/// `shmem_init` (or after `shmem_finalize`).
pub(crate) fn state(func: &str) -> &'static State {
    match try_state() {
        Some(s) => s,
        None => {
            tracing::error!("{func} called before shmem_init (or after shmem_finalize)");
            std::process::exit(1)
        }
    }
}

/// Logs `msg` as the error of `func` and ends the job as `shmem_global_exit(1)` would.
#[cold]
pub(crate) fn die(func: &str, msg: impl std::fmt::Display) -> ! {
    if let Some(status) = try_state().and_then(State::global_exit_status) {
        // The failure is the job ending on another PE's request: exit as it asked.
        tracing::info!(
            "{func}: another PE called shmem_global_exit({status}); exiting with {status}"
        );
        std::process::exit(status);
    }
    let who = try_state().map_or(String::new(), |s| format!("PE {}: ", s.rt.my_pe()));
    let msg = msg.to_string();
    // Errors built for this routine already start with its name.
    let what = match msg.strip_prefix(func).and_then(|m| m.strip_prefix(": ")) {
        Some(rest) => format!("{func}: {rest}"),
        None => format!("{func}: {msg}"),
    };
    tracing::error!("{who}{what}; ending the job (as shmem_global_exit(1) would)");
    if let Some(s) = try_state() {
        s.rt.abort_job(&format!("PE {}: {what}", s.rt.my_pe()));
    }
    std::process::exit(1)
}

/// `Result` for `void` C functions: the error ends the job ([`die`]).
pub(crate) trait OrDie<T> {
    /// The value, or the job ends with the error named after `func`.
    fn or_die(self, func: &str) -> T;
}

impl<T> OrDie<T> for symmem_runtime::Result<T> {
    fn or_die(self, func: &str) -> T {
        match self {
            Ok(v) => v,
            Err(e) => die(func, e),
        }
    }
}

/// `Result` for C functions that return a code: 0, or -1 after logging the error.
pub(crate) fn code(func: &str, r: symmem_runtime::Result<()>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => {
            let text = e.to_string();
            if text.starts_with(func) {
                tracing::error!("{text}");
            } else {
                tracing::error!("{func}: {text}");
            }
            -1
        }
    }
}

impl State {
    /// `pe` as a PE of the job, or the job ends with an error naming `func`, the PE and
    /// `addr` (the symmetric address the call was for).
    pub(crate) fn pe(&self, func: &str, pe: c_int, addr: usize) -> usize {
        match usize::try_from(pe) {
            Ok(p) if p < self.rt.n_pes() => p,
            _ => die(
                func,
                format!(
                    "PE {pe} does not exist (n_pes = {}; address {addr:#x})",
                    self.rt.n_pes()
                ),
            ),
        }
    }

    /// The view of `len` elements at `addr` in the symmetric heap, or the job ends with
    /// an error naming `func`, the address and the size.
    pub(crate) fn view<T>(&self, func: &'static str, addr: *const T, len: usize) -> SymView<T> {
        self.try_view(func, addr, len).or_die(func)
    }

    /// The view of `len` elements at `addr`, a symmetric heap address or the address of a
    /// static or global variable (see `statics.rs`).
    pub(crate) fn try_view<T>(
        &self,
        func: &'static str,
        addr: *const T,
        len: usize,
    ) -> symmem_runtime::Result<SymView<T>> {
        self.rt
            .view_at(func, self.translate(addr as usize) as *const T, len)
    }

    /// The heap address of `addr` where it is a symmetric static, else `addr`.
    pub(crate) fn translate(&self, addr: usize) -> usize {
        self.statics.as_ref().map_or(addr, |s| s.translate(addr))
    }

    /// The split-team table, locked (a poisoned lock is still consistent: entries are
    /// inserted and removed whole).
    pub(crate) fn team_table(&self) -> MutexGuard<'_, HashMap<usize, Arc<CTeam>>> {
        self.teams.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The allocation table, locked (see [`Self::team_table`]).
    pub(crate) fn alloc_table(&self) -> MutexGuard<'_, BTreeMap<usize, SymBuf<u8>>> {
        self.allocs.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// `len` elements at `p` as a slice; an empty slice for `len == 0` (C may pass NULL then).
///
/// # Safety
/// For `len > 0`, `p` must be valid for reads of `len` elements for `'a`.
pub(crate) unsafe fn slice<'a, T>(p: *const T, len: usize) -> &'a [T] {
    if len == 0 {
        return &[];
    }
    // SAFETY: guaranteed by the caller.
    unsafe { std::slice::from_raw_parts(p, len) }
}

/// `len` elements at `p` as a mutable slice; empty for `len == 0`.
///
/// # Safety
/// For `len > 0`, `p` must be valid for writes of `len` elements for `'a`, with no other
/// reference to them.
pub(crate) unsafe fn slice_mut<'a, T>(p: *mut T, len: usize) -> &'a mut [T] {
    if len == 0 {
        return &mut [];
    }
    // SAFETY: guaranteed by the caller.
    unsafe { std::slice::from_raw_parts_mut(p, len) }
}
