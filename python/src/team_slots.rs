//! Every live team's slot, so that finalize drops the teams (which borrow the runtime)
//! before it takes the runtime away.

use std::sync::{Arc, Mutex, TryLockError, Weak};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use symmem::{Runtime, Team};

/// A team's place: the team until it is destroyed, or until finalize takes every team
/// away before the runtime they borrow goes.
pub type Slot = Mutex<Option<Team<'static>>>;

/// Every live team's slot, for finalize.
static TEAMS: Mutex<Vec<Weak<Slot>>> = Mutex::new(Vec::new());

/// Runs `take` (finalize's taking of the runtime) with no team being made meanwhile, and
/// drops every team first when it will succeed (`ready`), since teams borrow the runtime.
/// Fails, changing nothing, while another thread's call holds a team. Called with the GIL
/// held, which every team call needs to start: no team is locked anew meanwhile.
pub fn drop_all_then<R>(
    ready: impl FnOnce() -> PyResult<()>,
    take: impl FnOnce() -> R,
) -> PyResult<R> {
    let mut teams = TEAMS.lock().expect("never poisoned");
    let live: Vec<Arc<Slot>> = teams.iter().filter_map(Weak::upgrade).collect();
    for slot in &live {
        if let Err(TryLockError::WouldBlock) = slot.try_lock() {
            return Err(PyValueError::new_err(
                "finalize: a team is in use by another thread's call; finish it first",
            ));
        }
    }
    ready()?;
    for slot in &live {
        slot.lock().expect("never poisoned").take();
    }
    teams.clear();
    Ok(take())
}

/// Registers `team`, which borrows the runtime that `handle` holds, for finalize; `_held`
/// is the caller's reference to that runtime, which keeps finalize out until the team is
/// registered.
pub fn register(_held: &Arc<Runtime>, team: Team<'_>) -> Arc<Slot> {
    let mut teams = TEAMS.lock().expect("never poisoned");
    // SAFETY: the team borrows the runtime in the allocation of the `Arc` that
    // `handle` holds until finalize, and finalize drops every registered team (under
    // this lock) before it takes the runtime; `_held`, a clone held by the caller
    // until the team is registered below, keeps finalize from taking it in between.
    let team = unsafe { std::mem::transmute::<Team<'_>, Team<'static>>(team) };
    let slot = Arc::new(Mutex::new(Some(team)));
    teams.retain(|w| w.strong_count() > 0);
    teams.push(Arc::downgrade(&slot));
    slot
}
