//! The process's one runtime, as Python sees it: set by `init`, taken by `finalize`, and
//! shared by every call in between (a call holds it only while it runs).

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, RwLock};

use pyo3::prelude::*;
use symmem::Runtime;

use crate::errors::SymmemError;

/// The runtime between `init` and `finalize`.
static RUNTIME: RwLock<Option<Arc<Runtime>>> = RwLock::new(None);

/// DLPack views of symmetric arrays that consumers still hold, over all arrays: a
/// `finalize` with some alive would leave them pointing at unmapped memory.
pub static LIVE_VIEWS: std::sync::LazyLock<Arc<AtomicUsize>> =
    std::sync::LazyLock::new(|| Arc::new(AtomicUsize::new(0)));

/// The runtime, or the error a call before `init` (or after `finalize`) gets.
pub fn runtime() -> PyResult<Arc<Runtime>> {
    RUNTIME
        .read()
        .expect("the runtime lock is never poisoned: no call panics while holding it")
        .clone()
        .ok_or_else(|| SymmemError::new_err("symmem is not initialized: call symmem.init() first"))
}

/// Whether `init` has run and `finalize` has not.
pub fn is_initialized() -> bool {
    RUNTIME.read().expect("never poisoned").is_some()
}

/// Installs `rt` (`init`).
pub fn install(rt: Runtime) {
    *RUNTIME.write().expect("never poisoned") = Some(Arc::new(rt));
}

/// Takes the runtime out for `finalize`, after dropping every team (which borrow it);
/// fails, changing nothing, while another thread is inside a call.
pub fn take() -> PyResult<Option<Runtime>> {
    let busy = || {
        SymmemError::new_err(
            "finalize: another thread is inside a symmem call (a wait, say); finish it first",
        )
    };
    let mut slot = RUNTIME.write().expect("never poisoned");
    // The write lock keeps every other thread from taking a new reference meanwhile.
    let ready = match &*slot {
        Some(rt) if Arc::strong_count(rt) > 1 => Err(busy()),
        _ => Ok(()),
    };
    let taken = crate::team::drop_all_then(move || ready, || slot.take())?;
    Ok(taken.map(|rt| {
        Arc::try_unwrap(rt).unwrap_or_else(|_| unreachable!("checked: the only reference"))
    }))
}
