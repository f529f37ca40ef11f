//! Library setup, exit and queries (OpenSHMEM 1.5 §9.2): init/finalize, my_pe/n_pes,
//! accessibility, `shmem_ptr`, `shmem_global_exit`, `shmem_info_*`.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use std::sync::Arc;

use symmem_runtime::Runtime;

use crate::{die, state, try_state, CTeam, State, STATE};

/// `SHMEM_THREAD_MULTIPLE`: the runtime is `Send + Sync`, so any thread may call.
const THREAD_MULTIPLE: c_int = 3;
/// `SHMEM_MAX_NAME_LEN`.
const MAX_NAME_LEN: usize = 256;
/// The first handle of a split team (1 and 2 are the predefined teams).
pub(crate) const FIRST_SPLIT_TEAM: usize = 16;

/// Starts the runtime; the second and later calls do nothing. Returns what went wrong.
fn start() -> Result<(), symmem_runtime::Error> {
    if try_state().is_some() {
        tracing::debug!("shmem_init: already initialized; nothing to do");
        return Ok(());
    }
    // Leaked so that teams can borrow it for 'static; shmem_finalize takes it back (a
    // failed init leaks it, and the process exits).
    let rt: &'static Runtime = Box::leak(Box::new(symmem_runtime::init()?));
    let statics = crate::statics::register(rt);
    let exit_word = rt.calloc::<u64>(1)?;
    let shared = shared_team(rt, &exit_word)?;
    // No PE may write a peer's statics before that peer has moved them onto its heap.
    rt.barrier_all()?;
    let state = Box::new(State {
        statics,
        exit_word,
        shared,
        rt,
        allocs: Mutex::new(BTreeMap::new()),
        teams: Mutex::new(HashMap::new()),
        next_team: AtomicUsize::new(FIRST_SPLIT_TEAM),
    });
    STATE.store(Box::into_raw(state), Ordering::Release);
    Ok(())
}

/// SHMEM_TEAM_SHARED when it cannot be the runtime's TEAM_NODE: the specification makes
/// it the PEs whose memory `shmem_ptr` reaches, and with P2P off (`SYMMEM_DISABLE_P2P`)
/// or weak ordering (`SYMMEM_ORDERING=weak`) no peer's is, so it is then each PE alone (the
/// rows of a collective `split_2d(1)`). None where every PE of the node is mapped.
fn shared_team(
    rt: &'static Runtime,
    probe: &symmem_runtime::SymBuf<u64>,
) -> Result<Option<Arc<CTeam>>, symmem_runtime::Error> {
    let mut mapped = true;
    for &pe in rt.local_pes() {
        mapped &= rt.ptr(probe, pe)?.is_some();
    }
    if mapped {
        return Ok(None);
    }
    tracing::info!(
        pe = rt.my_pe(),
        "SHMEM_TEAM_SHARED is this PE alone: shmem_ptr reaches no other PE's memory"
    );
    let (alone, world) = rt.team_world().split_2d(1)?;
    world.destroy()?;
    Ok(Some(Arc::new(CTeam {
        team: alone,
        num_contexts: 0,
    })))
}

/// `shmem_init` (§9.2.1): collective; starts this PE under whatever launched it (symrun,
/// mpirun, srun, …; a lone process is one PE). On failure it logs why and exits with 1.
#[no_mangle]
pub extern "C" fn shmem_init() {
    if let Err(e) = start() {
        tracing::error!("shmem_init: {e}");
        std::process::exit(1);
    }
}

/// `shmem_init_thread` (§9.2.2): as `shmem_init`; every thread level is provided as
/// `SHMEM_THREAD_MULTIPLE`. Returns 0, or -1 (logged) when init fails.
///
/// # Safety
/// `provided` is NULL or valid for a write of one `int`.
#[no_mangle]
pub unsafe extern "C" fn shmem_init_thread(_requested: c_int, provided: *mut c_int) -> c_int {
    if let Err(e) = start() {
        tracing::error!("shmem_init_thread: {e}");
        return -1;
    }
    if !provided.is_null() {
        // SAFETY: non-null and valid for a write (the caller's contract).
        unsafe { provided.write(THREAD_MULTIPLE) };
    }
    0
}

/// `shmem_query_thread` (§9.2.9): the thread level, `SHMEM_THREAD_MULTIPLE`.
///
/// # Safety
/// `provided` is valid for a write of one `int`.
#[no_mangle]
pub unsafe extern "C" fn shmem_query_thread(provided: *mut c_int) {
    if provided.is_null() {
        die("shmem_query_thread", "provided is NULL");
    }
    // SAFETY: non-null and valid for a write (the caller's contract).
    unsafe { provided.write(THREAD_MULTIPLE) };
}

/// `shmem_finalize` (§9.2.6): collective; completes this PE's operations, waits for every
/// PE, destroys the teams and releases the heap. A later `shmem_init` starts afresh.
#[no_mangle]
pub extern "C" fn shmem_finalize() {
    let p = STATE.swap(std::ptr::null_mut(), Ordering::AcqRel);
    if p.is_null() {
        tracing::debug!("shmem_finalize: not initialized; nothing to do");
        return;
    }
    // SAFETY: `p` came from Box::into_raw in `start` and was swapped out, so this is the
    // only owner; the C contract forbids calls concurrent with or after finalize.
    let state = unsafe { Box::from_raw(p) };
    let rt: *const symmem_runtime::Runtime = state.rt;
    // Teams and allocation handles borrow or name the runtime: drop them first.
    drop(state);
    // SAFETY: `rt` came from Box::leak in `start`; every borrow of it (teams, the state)
    // is gone, so the box may be rebuilt and dropped.
    let rt = unsafe { Box::from_raw(rt.cast_mut()) };
    if let Err(e) = rt.finalize() {
        tracing::error!("shmem_finalize: {e}");
    }
}

/// `shmem_my_pe` (§9.2.3): this PE's number in SHMEM_TEAM_WORLD.
#[no_mangle]
pub extern "C" fn shmem_my_pe() -> c_int {
    state("shmem_my_pe").rt.my_pe() as c_int
}

/// `shmem_n_pes` (§9.2.4): the number of PEs in the job.
#[no_mangle]
pub extern "C" fn shmem_n_pes() -> c_int {
    state("shmem_n_pes").rt.n_pes() as c_int
}

/// `shmem_pe_accessible` (§9.2.7): 1 if `pe` is a PE of the job (every PE is reachable,
/// by pointer or by transport), else 0.
#[no_mangle]
pub extern "C" fn shmem_pe_accessible(pe: c_int) -> c_int {
    let s = state("shmem_pe_accessible");
    c_int::from(usize::try_from(pe).is_ok_and(|p| p < s.rt.n_pes()))
}

/// `shmem_addr_accessible` (§9.2.8): 1 if `addr` is symmetric (in the symmetric heap, or
/// a static or global variable of the program) and `pe` is a PE of the job, else 0.
#[no_mangle]
pub extern "C" fn shmem_addr_accessible(addr: *const c_void, pe: c_int) -> c_int {
    let s = state("shmem_addr_accessible");
    let in_heap = s.rt.heap_offset_of(s.translate(addr as usize)).is_some();
    c_int::from(in_heap && usize::try_from(pe).is_ok_and(|p| p < s.rt.n_pes()))
}

/// `shmem_ptr` (§9.2.10): a pointer through which this process can load and store `pe`'s
/// copy of `dest`, or NULL when `pe`'s heap is not mapped here (another node, P2P off) or
/// `dest` is not symmetric.
#[no_mangle]
pub extern "C" fn shmem_ptr(dest: *const c_void, pe: c_int) -> *mut c_void {
    let s = state("shmem_ptr");
    ptr_of(s, "shmem_ptr", dest, pe)
}

/// The mapped address of `dest` on `pe`, or NULL (logged at debug level: why).
pub(crate) fn ptr_of(s: &State, func: &'static str, dest: *const c_void, pe: c_int) -> *mut c_void {
    let Ok(pe) = usize::try_from(pe) else {
        tracing::debug!("{func}: PE {pe} does not exist");
        return std::ptr::null_mut();
    };
    let view = match s.try_view(func, dest.cast::<u8>(), 1) {
        Ok(v) => v,
        Err(e) => {
            tracing::debug!("{func}: {e}");
            return std::ptr::null_mut();
        }
    };
    match s.rt.ptr(&view, pe) {
        // This PE's own copy: `dest` itself (for a static, its heap alias is another
        // address of the same memory).
        Ok(Some(_)) if pe == s.rt.my_pe() => dest.cast_mut(),
        Ok(Some(p)) => p.as_ptr().cast(),
        Ok(None) => std::ptr::null_mut(),
        Err(e) => {
            tracing::debug!("{func}: {e}");
            std::ptr::null_mut()
        }
    }
}

/// `shmem_global_exit` (§9.2.5): ends the job with `status`: this PE stores it in every
/// PE's global-exit word (best effort: a dead PE is skipped), completes those stores,
/// aborts the job and exits with `status`; the other PEs, failing in their next (or
/// current) symmem call, find the word and exit with `status` too.
#[no_mangle]
pub extern "C" fn shmem_global_exit(status: c_int) -> ! {
    match try_state() {
        Some(s) => {
            let me = s.rt.my_pe();
            tracing::info!(pe = me, "shmem_global_exit({status})");
            let word = crate::EXITING | u64::from(status as u32);
            for pe in 0..s.rt.n_pes() {
                // Best effort: a PE that cannot be reached is ending anyway.
                let _ = s.rt.atomic_set(s.exit_word.at(0), word, pe);
            }
            let _ = s.rt.quiet();
            s.rt.abort_job(&format!("PE {me} called shmem_global_exit({status})"));
        }
        None => tracing::info!("shmem_global_exit({status}) before shmem_init"),
    }
    std::process::exit(status)
}

/// `shmem_info_get_version` (§9.2.11): 1.5.
///
/// # Safety
/// `major` and `minor` are valid for a write of one `int` each.
#[no_mangle]
pub unsafe extern "C" fn shmem_info_get_version(major: *mut c_int, minor: *mut c_int) {
    if major.is_null() || minor.is_null() {
        die("shmem_info_get_version", "major or minor is NULL");
    }
    // SAFETY: both non-null and valid for writes (the caller's contract).
    unsafe {
        major.write(1);
        minor.write(5);
    }
}

/// `shmem_info_get_name` (§9.2.12): the vendor string, "symmem", NUL-terminated. The spec
/// requires it to equal the header's `SHMEM_VENDOR_STRING`; the version is
/// `shmem_info_get_version`'s and the library's own (`symmem-info`).
///
/// # Safety
/// `name` is valid for writes of `SHMEM_MAX_NAME_LEN` bytes.
#[no_mangle]
pub unsafe extern "C" fn shmem_info_get_name(name: *mut c_char) {
    if name.is_null() {
        die("shmem_info_get_name", "name is NULL");
    }
    const TEXT: &[u8] = b"symmem\0";
    const { assert!(TEXT.len() <= MAX_NAME_LEN) };
    // SAFETY: `name` holds SHMEM_MAX_NAME_LEN bytes and `TEXT` is shorter.
    unsafe { std::ptr::copy_nonoverlapping(TEXT.as_ptr().cast(), name, TEXT.len()) };
}

/// `shmem_pcontrol` (§9.16): symmem has no profiling interface, so every level is accepted
/// and only logged (at debug), as the spec allows.
///
/// The header declares it variadic, `shmem_pcontrol(const int level, ...)`, as the spec does;
/// it is defined here with `level` alone (Rust cannot define C variadics on stable). It reads
/// nothing past `level`, which the x86-64 SysV and AArch64 calling conventions pass in the
/// first integer register for variadic and fixed calls alike.
#[no_mangle]
pub extern "C" fn shmem_pcontrol(level: c_int) {
    tracing::debug!("shmem_pcontrol({level}): symmem has no profiling interface; ignored");
}
