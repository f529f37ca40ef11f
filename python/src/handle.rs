//! The process's one runtime, as Python sees it: set by `init`, taken by `finalize`, and
//! shared by every call in between (a call holds it only while it runs); the ballot the
//! PEs vote with; and the arrays dropped without `free()`, which [`reclaim`] frees once
//! every PE dropped them.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use pyo3::prelude::*;
use symmem::{Runtime, SymBuf};

use crate::errors::SymmemError;

/// The runtime between `init` and `finalize`.
static RUNTIME: RwLock<Option<Arc<Runtime>>> = RwLock::new(None);

/// How many runtimes `init` has installed: an array belongs to the runtime of the
/// generation it was allocated in, and is dead once that one is finalized.
static GENERATIONS: AtomicU64 = AtomicU64::new(0);

/// The generation of the installed runtime; 0 between `finalize` and the next `init`.
static CURRENT: AtomicU64 = AtomicU64::new(0);

/// DLPack views of symmetric arrays that consumers still hold, over all arrays: a
/// `finalize` with some alive would leave them pointing at unmapped memory.
pub static LIVE_VIEWS: std::sync::LazyLock<Arc<AtomicUsize>> =
    std::sync::LazyLock::new(|| Arc::new(AtomicUsize::new(0)));

/// Allocation ids one PE offers per round of [`reclaim`].
const RECLAIM_IDS: usize = 14;

/// Words of a PE's ballot: its vote, its count of dropped arrays, then up to
/// [`RECLAIM_IDS`] of their ids.
const BALLOT_WORDS: usize = 2 + RECLAIM_IDS;

/// The symmetric words of [`vote`] and [`reclaim`]: this PE's ballot and every PE's,
/// allocated by `init` with the runtime.
struct Ballot {
    mine: SymBuf<u64>,
    all: SymBuf<u64>,
}

/// The ballot between `init` and `finalize`.
static BALLOT: Mutex<Option<Ballot>> = Mutex::new(None);

/// Symmetric arrays that were garbage-collected without `free()` on this PE, with the
/// runtime generation each belongs to, waiting for [`reclaim`].
static DROPPED: Mutex<Vec<(u64, SymBuf<u8>)>> = Mutex::new(Vec::new());

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
        mine: rt.calloc(BALLOT_WORDS)?,
        all: rt.calloc(rt.n_pes() * BALLOT_WORDS)?,
    };
    *BALLOT.lock().expect("never poisoned") = Some(ballot);
    let mut slot = RUNTIME.write().expect("never poisoned");
    CURRENT.store(
        GENERATIONS.fetch_add(1, Ordering::AcqRel) + 1,
        Ordering::Release,
    );
    *slot = Some(Arc::new(rt));
    Ok(())
}

/// The installed runtime's generation (see [`GENERATIONS`]); 0 when none is.
pub fn generation() -> u64 {
    CURRENT.load(Ordering::Acquire)
}

/// Whether memory allocated in runtime generation `generation` is still mapped: that
/// runtime is the installed one (not finalized). One atomic load: operands ask it on
/// every call.
pub fn alive(generation: u64) -> bool {
    generation != 0 && self::generation() == generation
}

/// Exchanges this PE's ballot `mine` with every PE's and returns them all by PE: a
/// collective over the world, called in the same order as the others.
fn exchange(rt: &Runtime, mine: &[u64; BALLOT_WORDS]) -> symmem::Result<Vec<[u64; BALLOT_WORDS]>> {
    let ballot = BALLOT.lock().expect("never poisoned");
    let b = ballot
        .as_ref()
        .expect("the ballot is installed with the runtime");
    rt.put(b.mine.at(0), mine, rt.my_pe())?;
    rt.team_world().fcollect(&b.all, &b.mine, BALLOT_WORDS)?;
    let mut all = vec![0; rt.n_pes() * BALLOT_WORDS];
    rt.read_local(b.all.at(0), &mut all)?;
    Ok(all
        .chunks_exact(BALLOT_WORDS)
        .map(|c| c.try_into().expect("chunks of BALLOT_WORDS"))
        .collect())
}

/// Exchanges `mine` (0: this PE agrees; else why it refuses) with every PE's, and returns
/// them all by PE: a collective over the world, called in the same order as the others.
/// A collective call that one PE would refuse on its own (`free`, `finalize` with views
/// alive) votes first, so that every PE refuses or none does: a PE refusing alone would
/// leave the others waiting in the call for it. The same exchange reclaims (see
/// [`reclaim`]): a vote is a collective point.
pub fn vote(rt: &Runtime, mine: u64) -> symmem::Result<Vec<u64>> {
    let (votes, mut more) = round(rt, mine)?;
    while more {
        more = round(rt, 0)?.1;
    }
    Ok(votes)
}

/// Keeps `buf`, a symmetric array of runtime generation `generation` that this PE
/// dropped without `free()`, for [`reclaim`].
pub fn dropped(generation: u64, buf: SymBuf<u8>) {
    DROPPED
        .lock()
        .expect("never poisoned")
        .push((generation, buf));
}

/// Frees the arrays that every PE dropped without `free()`: a collective point (every
/// allocation from Python starts with it, and every vote, so every free and finalize,
/// does it too). Each PE offers the ids of its first [`RECLAIM_IDS`] dropped arrays,
/// oldest allocation first; the ids every PE offered are freed, in id order on every PE;
/// rounds repeat while they free something and some PE has more to offer. An array some
/// PE still holds waits for a later point.
pub fn reclaim(rt: &Runtime) -> symmem::Result<()> {
    vote(rt, 0).map(drop)
}

/// One exchange of [`vote`]: this PE's vote `mine` and its dropped arrays' ids out, every
/// PE's votes back, the arrays every PE offered freed; and whether another round could
/// free more (the same answer on every PE: it is read from the exchanged ballots).
fn round(rt: &Runtime, mine: u64) -> symmem::Result<(Vec<u64>, bool)> {
    let mut ids: Vec<u64> = {
        let mut list = DROPPED.lock().expect("never poisoned");
        // One dropped as its runtime was being finalized went with that heap.
        list.retain(|(g, _)| alive(*g));
        list.iter().map(|(_, b)| b.id()).collect()
    };
    ids.sort_unstable();
    let mut ballot = [0; BALLOT_WORDS];
    ballot[0] = mine;
    ballot[1] = ids.len() as u64;
    ids.truncate(RECLAIM_IDS);
    ballot[2..2 + ids.len()].copy_from_slice(&ids);
    let all = exchange(rt, &ballot)?;
    let offered = |b: &[u64; BALLOT_WORDS]| -> Vec<u64> {
        b[2..2 + (b[1] as usize).min(RECLAIM_IDS)].to_vec()
    };
    // The same on every PE: the ids in every PE's offer (this PE's included).
    let common: Vec<u64> = ids
        .into_iter()
        .filter(|id| all.iter().all(|b| offered(b).contains(id)))
        .collect();
    for id in &common {
        let buf = {
            let mut list = DROPPED.lock().expect("never poisoned");
            let at = list
                .iter()
                .position(|(_, b)| b.id() == *id)
                .expect("only reclaim takes from the list");
            list.swap_remove(at).1
        };
        rt.free(buf)?;
    }
    let more = !common.is_empty() && all.iter().any(|b| b[1] as usize > RECLAIM_IDS);
    Ok((all.iter().map(|b| b[0]).collect(), more))
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
    let taken = crate::team_slots::drop_all_then(
        move || ready,
        || {
            BALLOT.lock().expect("never poisoned").take();
            // Their memory goes with the heap.
            DROPPED.lock().expect("never poisoned").clear();
            CURRENT.store(0, Ordering::Release);
            slot.take()
        },
    )?;
    Ok(taken.map(|rt| {
        Arc::try_unwrap(rt).unwrap_or_else(|_| unreachable!("checked: the only reference"))
    }))
}
