//! The process's one runtime, as Python sees it: set by `init`, taken by `finalize`, and
//! shared by every call in between (a call holds it only while it runs).

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, RwLock};

use pyo3::prelude::*;
use symmem::{Runtime, SymBuf};

use crate::errors::SymmemError;

/// The runtime between `init` and `finalize`.
static RUNTIME: RwLock<Option<Arc<Runtime>>> = RwLock::new(None);

/// DLPack views of symmetric arrays that consumers still hold, over all arrays: a
/// `finalize` with some alive would leave them pointing at unmapped memory.
pub static LIVE_VIEWS: std::sync::LazyLock<Arc<AtomicUsize>> =
    std::sync::LazyLock::new(|| Arc::new(AtomicUsize::new(0)));

/// The symmetric words of [`vote`]: this PE's ballot and every PE's, allocated by
/// `init` with the runtime.
struct Ballot {
    mine: SymBuf<u64>,
    all: SymBuf<u64>,
}

/// The ballot between `init` and `finalize`.
static BALLOT: Mutex<Option<Ballot>> = Mutex::new(None);

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

/// Installs `rt` (`init`), with the ballot's words (collective: every PE allocates them).
pub fn install(rt: Runtime) -> symmem::Result<()> {
    let ballot = Ballot {
        mine: rt.calloc(1)?,
        all: rt.calloc(rt.n_pes())?,
    };
    *BALLOT.lock().expect("never poisoned") = Some(ballot);
    *RUNTIME.write().expect("never poisoned") = Some(Arc::new(rt));
    Ok(())
}

/// Exchanges `mine` (0: this PE agrees; else why it refuses) with every PE's, and returns
/// them all by PE: a collective over the world, called in the same order as the others.
/// A collective call that one PE would refuse on its own (`free`, `finalize` with views
/// alive) votes first, so that every PE refuses or none does: a PE refusing alone would
/// leave the others waiting in the call for it.
pub fn vote(rt: &Runtime, mine: u64) -> symmem::Result<Vec<u64>> {
    let ballot = BALLOT.lock().expect("never poisoned");
    let b = ballot
        .as_ref()
        .expect("the ballot is installed with the runtime");
    rt.put(b.mine.at(0), &[mine], rt.my_pe())?;
    rt.team_world().fcollect(&b.all, &b.mine, 1)?;
    let mut all = vec![0; rt.n_pes()];
    rt.read_local(b.all.at(0), &mut all)?;
    Ok(all)
}

/// Whether a thread other than the caller (which holds `rt`) is inside a call.
pub fn busy_elsewhere(rt: &Arc<Runtime>) -> bool {
    // The handle's reference and the caller's.
    Arc::strong_count(rt) > 2
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
    let taken = crate::team::drop_all_then(
        move || ready,
        || {
            BALLOT.lock().expect("never poisoned").take();
            slot.take()
        },
    )?;
    Ok(taken.map(|rt| {
        Arc::try_unwrap(rt).unwrap_or_else(|_| unreachable!("checked: the only reference"))
    }))
}
