//! Teams (OpenSHMEM 1.5 §9.4): SHMEM_TEAM_WORLD, SHMEM_TEAM_SHARED, strided and 2D
//! splits, translation, sync, destroy, `shmem_team_get_config`, `shmem_team_ptr`.
//!
//! A `shmem_team_t` is a handle: 1 is SHMEM_TEAM_WORLD, 2 SHMEM_TEAM_SHARED (the PEs
//! sharing this PE's memory, the runtime's TEAM_NODE), 0 SHMEM_TEAM_INVALID, and split
//! teams take numbers from 16 up, never reused within a run.

use std::ffi::{c_int, c_long, c_void};
use std::ops::Deref;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use symmem_runtime::Team;

use crate::{code, die, state, CTeam, State};

/// SHMEM_TEAM_INVALID.
pub(crate) const INVALID: usize = 0;
/// SHMEM_TEAM_WORLD.
pub(crate) const WORLD: usize = 1;
/// SHMEM_TEAM_SHARED.
pub(crate) const SHARED: usize = 2;
/// `SHMEM_TEAM_NUM_CONTEXTS`: the config mask bit of `num_contexts`.
const NUM_CONTEXTS: c_long = 1;

/// `shmem_team_config_t`.
#[repr(C)]
pub struct TeamConfig {
    /// Contexts the team's users will create (symmem has no contexts; kept as given).
    pub num_contexts: c_int,
}

/// A team named by a handle: a predefined one, made on the spot, or a split one.
pub(crate) enum TeamRef {
    /// SHMEM_TEAM_WORLD or SHMEM_TEAM_SHARED.
    Predefined(Team<'static>),
    /// A split team from the table.
    Split(Arc<CTeam>),
}

impl Deref for TeamRef {
    type Target = Team<'static>;
    fn deref(&self) -> &Team<'static> {
        match self {
            TeamRef::Predefined(t) => t,
            TeamRef::Split(c) => &c.team,
        }
    }
}

/// The team named by `handle`, or None for SHMEM_TEAM_INVALID or an unknown handle.
pub(crate) fn lookup(s: &State, handle: usize) -> Option<TeamRef> {
    match handle {
        INVALID => None,
        WORLD => Some(TeamRef::Predefined(s.rt.team_world())),
        SHARED => Some(match &s.shared {
            Some(alone) => TeamRef::Split(alone.clone()),
            None => TeamRef::Predefined(s.rt.team_node()),
        }),
        h => s.team_table().get(&h).cloned().map(TeamRef::Split),
    }
}

/// The team named by `handle`, or an `InvalidArgument` error naming `func` and it.
pub(crate) fn team_or_err(
    s: &State,
    func: &'static str,
    handle: usize,
) -> symmem_runtime::Result<TeamRef> {
    lookup(s, handle).ok_or_else(|| symmem_runtime::Error::InvalidArgument {
        op: func,
        reason: format!(
            "team handle {handle:#x} is not a valid team on PE {}",
            s.rt.my_pe()
        ),
    })
}

/// Registers a new split team and returns its handle.
fn register(s: &State, team: Team<'static>, config: *const TeamConfig, mask: c_long) -> usize {
    let num_contexts = if !config.is_null() && mask & NUM_CONTEXTS != 0 {
        // SAFETY: a non-null config points to a shmem_team_config_t (the C contract).
        unsafe { (*config).num_contexts }
    } else {
        0
    };
    let handle = s.next_team.fetch_add(1, Ordering::Relaxed);
    s.team_table()
        .insert(handle, Arc::new(CTeam { team, num_contexts }));
    handle
}

/// Writes a team handle to a C out-parameter.
///
/// # Safety
/// `out` is valid for a write of one handle.
unsafe fn give(func: &str, out: *mut usize, handle: usize) {
    if out.is_null() {
        die(func, "the new team's out-parameter is NULL");
    }
    // SAFETY: the caller's contract; checked non-null.
    unsafe { out.write(handle) }
}

/// `shmem_team_my_pe` (§9.4.1): this PE's number in `team`, -1 for an invalid team.
#[no_mangle]
pub extern "C" fn shmem_team_my_pe(team: usize) -> c_int {
    let s = state("shmem_team_my_pe");
    lookup(s, team).map_or(-1, |t| t.my_pe() as c_int)
}

/// `shmem_team_n_pes` (§9.4.2): the number of PEs in `team`, -1 for an invalid team.
#[no_mangle]
pub extern "C" fn shmem_team_n_pes(team: usize) -> c_int {
    let s = state("shmem_team_n_pes");
    lookup(s, team).map_or(-1, |t| t.n_pes() as c_int)
}

/// `shmem_team_get_config` (§9.4.3): the configuration `team` was created with (the
/// fields selected by `config_mask`); 0, or nonzero for an invalid team.
///
/// # Safety
/// `config` is valid for a write of one `shmem_team_config_t`.
#[no_mangle]
pub unsafe extern "C" fn shmem_team_get_config(
    team: usize,
    config_mask: c_long,
    config: *mut TeamConfig,
) -> c_int {
    const F: &str = "shmem_team_get_config";
    let s = state(F);
    let Some(t) = lookup(s, team) else {
        tracing::error!("{F}: team handle {team:#x} is not a valid team");
        return -1;
    };
    if config.is_null() {
        tracing::error!("{F}: config is NULL");
        return -1;
    }
    if config_mask & NUM_CONTEXTS != 0 {
        let n = match &t {
            TeamRef::Split(c) => c.num_contexts,
            TeamRef::Predefined(_) => 0,
        };
        // SAFETY: non-null and valid for a write (the caller's contract).
        unsafe { (*config).num_contexts = n };
    }
    0
}

/// `shmem_team_translate_pe` (§9.4.4): the number in `dest_team` of `src_team`'s PE
/// `src_pe`, or -1 (not a member, or an invalid team).
#[no_mangle]
pub extern "C" fn shmem_team_translate_pe(
    src_team: usize,
    src_pe: c_int,
    dest_team: usize,
) -> c_int {
    let s = state("shmem_team_translate_pe");
    let (Some(src), Some(dest), Ok(pe)) = (
        lookup(s, src_team),
        lookup(s, dest_team),
        usize::try_from(src_pe),
    ) else {
        return -1;
    };
    src.translate_pe(pe, &dest).map_or(-1, |p| p as c_int)
}

/// `shmem_team_split_strided` (§9.4.6): collective over `parent_team`; the PEs `start +
/// i·stride` (`i < size`) of the parent form `*new_team`, the others get
/// SHMEM_TEAM_INVALID. Returns 0, or nonzero (logged) on error, the same on every PE.
/// Negative strides are not supported (nonzero).
///
/// # Safety
/// `config` is NULL or a `shmem_team_config_t`; `new_team` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmem_team_split_strided(
    parent_team: usize,
    start: c_int,
    stride: c_int,
    size: c_int,
    config: *const TeamConfig,
    config_mask: c_long,
    new_team: *mut usize,
) -> c_int {
    const F: &str = "shmem_team_split_strided";
    let s = state(F);
    // SAFETY: the caller's contract.
    unsafe { give(F, new_team, INVALID) };
    let split = (|| {
        let parent = team_or_err(s, F, parent_team)?;
        let arg = |name: &str, v: c_int| {
            usize::try_from(v).map_err(|_| symmem_runtime::Error::InvalidArgument {
                op: F,
                reason: format!("{name} {v} is negative (negative strides are not supported)"),
            })
        };
        parent.split_strided(
            arg("start", start)?,
            arg("stride", stride)?,
            arg("size", size)?,
        )
    })();
    match split {
        Ok(Some(t)) => {
            let h = register(s, t, config, config_mask);
            // SAFETY: the caller's contract.
            unsafe { give(F, new_team, h) };
            0
        }
        Ok(None) => 0,
        Err(e) => code(F, Err(e)),
    }
}

/// `shmem_team_split_2d` (§9.4.7): collective over `parent_team`; parent PE `p` sits at
/// `(p % xrange, p / xrange)`, and `*xaxis_team` is its row (same y), `*yaxis_team` its
/// column (same x). Returns 0, or nonzero (logged).
///
/// # Safety
/// The configs are NULL or `shmem_team_config_t`s; the team pointers are valid for writes.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn shmem_team_split_2d(
    parent_team: usize,
    xrange: c_int,
    xaxis_config: *const TeamConfig,
    xaxis_mask: c_long,
    xaxis_team: *mut usize,
    yaxis_config: *const TeamConfig,
    yaxis_mask: c_long,
    yaxis_team: *mut usize,
) -> c_int {
    const F: &str = "shmem_team_split_2d";
    let s = state(F);
    // SAFETY: the caller's contract.
    unsafe {
        give(F, xaxis_team, INVALID);
        give(F, yaxis_team, INVALID);
    }
    let split = (|| {
        let parent = team_or_err(s, F, parent_team)?;
        let x = usize::try_from(xrange).map_err(|_| symmem_runtime::Error::InvalidArgument {
            op: F,
            reason: format!("xrange {xrange} is negative"),
        })?;
        parent.split_2d(x)
    })();
    match split {
        Ok((row, column)) => {
            let x = register(s, row, xaxis_config, xaxis_mask);
            let y = register(s, column, yaxis_config, yaxis_mask);
            // SAFETY: the caller's contract.
            unsafe {
                give(F, xaxis_team, x);
                give(F, yaxis_team, y);
            }
            0
        }
        Err(e) => code(F, Err(e)),
    }
}

/// `shmem_team_sync` (§9.9.3): waits for every PE of `team` (no quiet). Returns 0, or
/// nonzero (logged) for an invalid team or a failure.
#[no_mangle]
pub extern "C" fn shmem_team_sync(team: usize) -> c_int {
    const F: &str = "shmem_team_sync";
    let s = state(F);
    code(F, team_or_err(s, F, team).and_then(|t| t.sync()))
}

/// `shmem_team_destroy` (§9.4.9): collective over `team`; frees it. SHMEM_TEAM_INVALID
/// does nothing; a predefined team or an unknown handle ends the job (an error naming it).
#[no_mangle]
pub extern "C" fn shmem_team_destroy(team: usize) {
    const F: &str = "shmem_team_destroy";
    let s = state(F);
    if team == INVALID {
        return;
    }
    if team == WORLD || team == SHARED {
        die(
            F,
            "SHMEM_TEAM_WORLD and SHMEM_TEAM_SHARED cannot be destroyed",
        );
    }
    let Some(entry) = s.team_table().remove(&team) else {
        die(F, format!("team handle {team:#x} is not a valid team"));
    };
    match Arc::try_unwrap(entry) {
        Ok(c) => {
            if let Err(e) = c.team.destroy() {
                die(F, e);
            }
        }
        Err(_) => die(
            F,
            format!("team {team:#x} is in use by another thread (a collective on it is running)"),
        ),
    }
}

/// `shmem_team_ptr` (§9.4.5): a local pointer to `dest` on `team`'s PE `pe`, or NULL
/// (not mapped here, an invalid team or PE).
#[no_mangle]
pub extern "C" fn shmem_team_ptr(team: usize, dest: *const c_void, pe: c_int) -> *mut c_void {
    const F: &str = "shmem_team_ptr";
    let s = state(F);
    let world = lookup(s, team)
        .zip(usize::try_from(pe).ok())
        .and_then(|(t, p)| t.world_pe(p).ok());
    match world {
        Some(w) => crate::setup::ptr_of(s, F, dest, w as c_int),
        None => std::ptr::null_mut(),
    }
}
