//! Communication contexts (OpenSHMEM 1.5 §9.5): `shmem_ctx_create`,
//! `shmem_team_create_ctx`, `shmem_ctx_destroy`, `shmem_ctx_get_team`, `shmem_ctx_fence`,
//! `shmem_ctx_quiet`, and `symmem_ctx_pe`, which the `shmem_ctx_*` wrappers in shmem.h call
//! to turn a context's team-relative PE into a world PE.
//!
//! symmem has one ordering and completion domain per PE, so a context is a team and
//! nothing more: operations on it are this PE's operations, `shmem_ctx_fence` and
//! `shmem_ctx_quiet` fence and quiet all of them (which orders and completes at least
//! the context's, as the specification asks). A context handle is a boxed team handle;
//! `SHMEM_CTX_DEFAULT` (1) is SHMEM_TEAM_WORLD's, `SHMEM_CTX_INVALID` is NULL.

use std::ffi::{c_int, c_long};

use crate::teams::{lookup, INVALID, WORLD};
use crate::{die, state, OrDie};

/// SHMEM_CTX_DEFAULT.
const DEFAULT: usize = 1;

/// What a context handle (`shmem_ctx_t`) points to.
#[repr(C)]
pub struct Ctx {
    /// The team whose PE numbers the context's operations take.
    team: usize,
}

/// The team of context `ctx`, or None for SHMEM_CTX_INVALID.
fn team_of(ctx: *const Ctx) -> Option<usize> {
    match ctx as usize {
        0 => None,
        DEFAULT => Some(WORLD),
        // SAFETY: any other handle came from Box::into_raw in `create` and is live until
        // shmem_ctx_destroy (the C contract).
        _ => Some(unsafe { (*ctx).team }),
    }
}

/// Creates a context on `team`; writes it to `out` (SHMEM_CTX_INVALID on failure).
///
/// # Safety
/// `out` is valid for a write of one handle.
unsafe fn create(func: &'static str, team: usize, out: *mut *mut Ctx) -> c_int {
    let s = state(func);
    if out.is_null() {
        die(func, "ctx is NULL");
    }
    let ok = team != INVALID && lookup(s, team).is_some();
    let ctx = if ok {
        Box::into_raw(Box::new(Ctx { team }))
    } else if team == INVALID {
        // What a split gives the PEs outside the new team: the spec's examples pass it on
        // and check the result, so it is no error worth a log line.
        tracing::debug!("{func}: SHMEM_TEAM_INVALID gives SHMEM_CTX_INVALID");
        std::ptr::null_mut()
    } else {
        tracing::error!("{func}: team handle {team:#x} is not a valid team");
        std::ptr::null_mut()
    };
    // SAFETY: checked non-null; valid for a write (the caller's contract).
    unsafe { out.write(ctx) };
    if ok {
        0
    } else {
        -1
    }
}

/// `shmem_ctx_create` (§9.5.1): a context on SHMEM_TEAM_WORLD; the options are accepted.
/// Returns 0.
///
/// # Safety
/// `ctx` is valid for a write of one `shmem_ctx_t`.
#[no_mangle]
pub unsafe extern "C" fn shmem_ctx_create(_options: c_long, ctx: *mut *mut Ctx) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { create("shmem_ctx_create", WORLD, ctx) }
}

/// `shmem_team_create_ctx` (§9.4.8): a context whose operations take `team`'s PE numbers.
/// Returns 0, or nonzero (and SHMEM_CTX_INVALID) for an invalid team.
///
/// # Safety
/// `ctx` is valid for a write of one `shmem_ctx_t`.
#[no_mangle]
pub unsafe extern "C" fn shmem_team_create_ctx(
    team: usize,
    _options: c_long,
    ctx: *mut *mut Ctx,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { create("shmem_team_create_ctx", team, ctx) }
}

/// `shmem_ctx_destroy` (§9.5.2): quiets and frees `ctx`. SHMEM_CTX_INVALID does nothing;
/// SHMEM_CTX_DEFAULT ends the job (it cannot be destroyed).
///
/// # Safety
/// `ctx` came from `shmem_ctx_create` or `shmem_team_create_ctx` and is not used again.
#[no_mangle]
pub unsafe extern "C" fn shmem_ctx_destroy(ctx: *mut Ctx) {
    const F: &str = "shmem_ctx_destroy";
    let s = state(F);
    match ctx as usize {
        0 => {}
        DEFAULT => die(F, "SHMEM_CTX_DEFAULT cannot be destroyed"),
        _ => {
            s.rt.quiet().or_die(F);
            // SAFETY: the handle came from Box::into_raw in `create` (the caller's
            // contract) and is dropped once.
            drop(unsafe { Box::from_raw(ctx) });
        }
    }
}

/// `shmem_ctx_get_team` (§9.5.5): the team of `ctx`; 0, or nonzero (and
/// SHMEM_TEAM_INVALID) for SHMEM_CTX_INVALID.
///
/// # Safety
/// `ctx` is a live context handle; `team` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmem_ctx_get_team(ctx: *const Ctx, team: *mut usize) -> c_int {
    const F: &str = "shmem_ctx_get_team";
    state(F);
    if team.is_null() {
        die(F, "team is NULL");
    }
    let t = team_of(ctx);
    // SAFETY: checked non-null; valid for a write (the caller's contract).
    unsafe { team.write(t.unwrap_or(INVALID)) };
    if t.is_some() {
        0
    } else {
        -1
    }
}

/// `shmem_ctx_fence` (§9.10.1): orders this PE's operations (all contexts);
/// SHMEM_CTX_INVALID does nothing, as the spec says.
#[no_mangle]
pub extern "C" fn shmem_ctx_fence(ctx: *const Ctx) {
    const F: &str = "shmem_ctx_fence";
    let s = state(F);
    if team_of(ctx).is_some() {
        s.rt.fence().or_die(F)
    }
}

/// `shmem_ctx_quiet` (§9.10.2): completes this PE's operations (all contexts);
/// SHMEM_CTX_INVALID does nothing, as the spec says.
#[no_mangle]
pub extern "C" fn shmem_ctx_quiet(ctx: *const Ctx) {
    const F: &str = "shmem_ctx_quiet";
    let s = state(F);
    if team_of(ctx).is_some() {
        s.rt.quiet().or_die(F)
    }
}

/// The world PE of `ctx`'s team PE `pe`, for the `shmem_ctx_*` wrappers in shmem.h. An
/// invalid context or a PE outside its team ends the job (an error naming both).
///
/// # Safety
/// `ctx` is a live context handle.
#[no_mangle]
pub unsafe extern "C" fn symmem_ctx_pe(ctx: *const Ctx, pe: c_int) -> c_int {
    const F: &str = "shmem_ctx operation";
    let s = state(F);
    let Some(team) = team_of(ctx) else {
        die(F, format!("SHMEM_CTX_INVALID (PE {pe})"));
    };
    let t = lookup(s, team)
        .ok_or_else(|| format!("the context's team {team:#x} was destroyed"))
        .unwrap_or_else(|e| die(F, e));
    let p = usize::try_from(pe).unwrap_or(usize::MAX);
    t.world_pe(p).or_die(F) as c_int
}
