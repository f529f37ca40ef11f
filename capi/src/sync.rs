//! Ordering, synchronization and point-to-point waits (OpenSHMEM 1.5 §9.8–§9.11):
//! `shmem_fence`, `shmem_quiet`, `shmem_barrier_all`, `shmem_sync_all`, the
//! `wait_until`/`test` family with its `_all`/`_any`/`_some` and `_vector` forms, and
//! `shmem_signal_fetch`/`shmem_signal_wait_until`.

use std::ffi::c_int;

use symmem_runtime::{Cmp, SymInt, SymView};

use crate::{die, slice, slice_mut, state, OrDie, State};

/// The C comparison constant as a [`Cmp`] (`SHMEM_CMP_EQ` 0, `NE` 1, `GT` 2, `GE` 3,
/// `LT` 4, `LE` 5).
pub(crate) fn cmp(func: &str, c: c_int) -> Cmp {
    match c {
        0 => Cmp::Eq,
        1 => Cmp::Ne,
        2 => Cmp::Gt,
        3 => Cmp::Ge,
        4 => Cmp::Lt,
        5 => Cmp::Le,
        _ => die(
            func,
            format!("cmp {c} is not one of SHMEM_CMP_EQ … SHMEM_CMP_LE (0 … 5)"),
        ),
    }
}

/// `shmem_fence` (§9.10.1): orders this PE's puts, AMOs and signals to each PE.
#[no_mangle]
pub extern "C" fn shmem_fence() {
    state("shmem_fence").rt.fence().or_die("shmem_fence")
}

/// `shmem_quiet` (§9.10.2): every earlier put, get and AMO of this PE is complete.
#[no_mangle]
pub extern "C" fn shmem_quiet() {
    state("shmem_quiet").rt.quiet().or_die("shmem_quiet")
}

/// `shmem_barrier_all` (§9.9.2): quiet, then wait for every PE.
#[no_mangle]
pub extern "C" fn shmem_barrier_all() {
    state("shmem_barrier_all")
        .rt
        .barrier_all()
        .or_die("shmem_barrier_all")
}

/// `shmem_sync_all` (§9.9.4): wait for every PE (no quiet).
#[no_mangle]
pub extern "C" fn shmem_sync_all() {
    state("shmem_sync_all")
        .rt
        .sync_all()
        .or_die("shmem_sync_all")
}

/// `shmem_signal_fetch` (§9.8.3): the value of this PE's signal at `sig_addr`.
#[no_mangle]
pub extern "C" fn shmem_signal_fetch(sig_addr: *const u64) -> u64 {
    const F: &str = "shmem_signal_fetch";
    let s = state(F);
    let v = s.view(F, sig_addr, 1);
    s.rt.signal_fetch(v.at(0)).or_die(F)
}

/// `shmem_signal_wait_until` (§9.11.6): waits until this PE's signal satisfies
/// `cmp cmp_value`; returns the value seen.
#[no_mangle]
pub extern "C" fn shmem_signal_wait_until(sig_addr: *mut u64, cmp_: c_int, cmp_value: u64) -> u64 {
    const F: &str = "shmem_signal_wait_until";
    let s = state(F);
    let c = cmp(F, cmp_);
    let v = s.view(F, sig_addr.cast_const(), 1);
    s.rt.signal_wait_until(v.at(0), c, cmp_value).or_die(F)
}

/// The exclude mask of a C `status` array (nonzero = excluded), None for NULL.
///
/// # Safety
/// `status` is NULL or valid for reads of `n` ints.
unsafe fn excluded(status: *const c_int, n: usize) -> Option<Vec<bool>> {
    // SAFETY: the caller's contract.
    (!status.is_null()).then(|| {
        unsafe { slice(status, n) }
            .iter()
            .map(|&s| s != 0)
            .collect()
    })
}

/// Writes `found` to `indices` and returns its length.
///
/// # Safety
/// `indices` is valid for writes of `n ≥ found.len()` elements.
unsafe fn report(func: &str, indices: *mut usize, n: usize, found: &[usize]) -> usize {
    if found.is_empty() {
        return 0;
    }
    if indices.is_null() {
        die(func, "indices is NULL");
    }
    // SAFETY: the caller's contract (found.len() <= n, as every index is below n).
    let out = unsafe { slice_mut(indices, n) };
    out[..found.len()].copy_from_slice(found);
    found.len()
}

/// Which comparison values: one for all, or one per element.
#[derive(Clone, Copy)]
enum Against<'a, T> {
    One(T),
    Each(&'a [T]),
}

/// The multi-ivar waits and tests, by kind.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    All,
    Any,
    Some,
}

/// The start [`multi`] and [`multi_small`] share: the runtime, the comparison `cmp_` and
/// the view of the `n` ivars at `ivars` (the job ends, naming `func`, on a bad one), or,
/// with `n == 0`, the C result at once as `Err`: `_all` 1 (tests) or 0, `_any` `SIZE_MAX`,
/// `_some` 0.
fn begin<T>(
    func: &'static str,
    kind: Kind,
    test: bool,
    ivars: *mut T,
    n: usize,
    cmp_: c_int,
) -> Result<(&'static State, Cmp, SymView<T>), usize> {
    let s = state(func);
    let c = cmp(func, cmp_);
    if n == 0 {
        return Err(match kind {
            Kind::All => usize::from(test),
            Kind::Any => usize::MAX,
            Kind::Some => 0,
        });
    }
    Ok((s, c, s.view(func, ivars.cast_const(), n)))
}

/// Runs a wait (or, with `test`, a test) of `kind` over `n` ivars at `ivars`; returns
/// the C result: `_all` 1/0 (tests) or 0, `_any` the index or `SIZE_MAX`, `_some` the
/// count (indices written).
///
/// # Safety
/// `status` is NULL or valid for `n` ints, `indices` (for `_some`) valid for `n`
/// `size_t`s; `ivars` is symmetric.
#[allow(clippy::too_many_arguments)]
unsafe fn multi<T: SymInt>(
    func: &'static str,
    kind: Kind,
    test: bool,
    ivars: *mut T,
    n: usize,
    indices: *mut usize,
    status: *const c_int,
    cmp_: c_int,
    values: Against<'_, T>,
) -> usize {
    let (s, c, buf) = match begin(func, kind, test, ivars, n, cmp_) {
        Ok(begun) => begun,
        Err(answer) => return answer,
    };
    // SAFETY: the caller's contract.
    let ex = unsafe { excluded(status, n) };
    let ex = ex.as_deref();
    let rt = s.rt;
    let r = match (kind, test, values) {
        (Kind::All, false, Against::One(v)) => rt.wait_until_all(&buf, ex, c, v).map(|()| 0),
        (Kind::All, false, Against::Each(v)) => {
            rt.wait_until_all_vector(&buf, ex, c, v).map(|()| 0)
        }
        (Kind::All, true, Against::One(v)) => rt.test_all(&buf, ex, c, v).map(usize::from),
        (Kind::All, true, Against::Each(v)) => rt.test_all_vector(&buf, ex, c, v).map(usize::from),
        (Kind::Any, false, Against::One(v)) => rt.wait_until_any(&buf, ex, c, v).map(any),
        (Kind::Any, false, Against::Each(v)) => rt.wait_until_any_vector(&buf, ex, c, v).map(any),
        (Kind::Any, true, Against::One(v)) => rt.test_any(&buf, ex, c, v).map(any),
        (Kind::Any, true, Against::Each(v)) => rt.test_any_vector(&buf, ex, c, v).map(any),
        (Kind::Some, false, Against::One(v)) => rt.wait_until_some(&buf, ex, c, v).map(|f| {
            // SAFETY: the caller's contract.
            unsafe { report(func, indices, n, &f) }
        }),
        (Kind::Some, false, Against::Each(v)) => {
            rt.wait_until_some_vector(&buf, ex, c, v).map(|f| {
                // SAFETY: the caller's contract.
                unsafe { report(func, indices, n, &f) }
            })
        }
        (Kind::Some, true, Against::One(v)) => rt.test_some(&buf, ex, c, v).map(|f| {
            // SAFETY: the caller's contract.
            unsafe { report(func, indices, n, &f) }
        }),
        (Kind::Some, true, Against::Each(v)) => rt.test_some_vector(&buf, ex, c, v).map(|f| {
            // SAFETY: the caller's contract.
            unsafe { report(func, indices, n, &f) }
        }),
    };
    r.or_die(func)
}

/// `_any`'s C result: the index, or `SIZE_MAX` when every ivar is excluded.
fn any(found: Option<usize>) -> usize {
    found.unwrap_or(usize::MAX)
}

/// The comparison values of a `_vector` form.
///
/// # Safety
/// `values` is valid for reads of `n` elements (or `n` is 0).
unsafe fn each<'a, T>(func: &str, values: *const T, n: usize) -> Against<'a, T> {
    if values.is_null() && n > 0 {
        die(func, "cmp_values is NULL");
    }
    // SAFETY: the caller's contract.
    Against::Each(unsafe { slice(values, n) })
}

/// Exports the point-to-point synchronization routines for each `(TYPENAME, Rust type)`.
macro_rules! waits {
    ($($name:ident : $t:ty),* $(,)?) => { pastey::paste! { $(
        #[doc = concat!("`shmem_", stringify!($name), "_wait_until` (§9.11.1): waits until this PE's `ivar` satisfies `cmp cmp_value`.")]
        #[no_mangle]
        pub extern "C" fn [<shmem_ $name _wait_until>](ivar: *mut $t, cmp_: c_int, cmp_value: $t) {
            const F: &str = concat!("shmem_", stringify!($name), "_wait_until");
            let s = state(F);
            let c = cmp(F, cmp_);
            let v = s.view(F, ivar.cast_const(), 1);
            s.rt.wait_until(v.at(0), c, cmp_value).or_die(F);
        }
        #[doc = concat!("`shmem_", stringify!($name), "_test` (§9.11.7): 1 if this PE's `ivar` satisfies `cmp cmp_value` now, else 0.")]
        #[no_mangle]
        pub extern "C" fn [<shmem_ $name _test>](ivar: *mut $t, cmp_: c_int, cmp_value: $t) -> c_int {
            const F: &str = concat!("shmem_", stringify!($name), "_test");
            let s = state(F);
            let c = cmp(F, cmp_);
            let v = s.view(F, ivar.cast_const(), 1);
            c_int::from(s.rt.test(v.at(0), c, cmp_value).or_die(F))
        }
        #[doc = concat!("`shmem_", stringify!($name), "_wait_until_all` (§9.11.2): waits until every included ivar satisfies the comparison (`status[i]` nonzero excludes `ivars[i]`; NULL includes all).")]
        ///
        /// # Safety
        /// `status` is NULL or holds `nelems` ints; `ivars` is symmetric.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _wait_until_all>](ivars: *mut $t, nelems: usize, status: *const c_int, cmp_: c_int, cmp_value: $t) {
            // SAFETY: the caller's contract.
            unsafe { multi(concat!("shmem_", stringify!($name), "_wait_until_all"), Kind::All, false, ivars, nelems, std::ptr::null_mut(), status, cmp_, Against::One(cmp_value)) };
        }
        #[doc = concat!("`shmem_", stringify!($name), "_wait_until_any` (§9.11.3): waits until an included ivar satisfies the comparison; its index, or `SIZE_MAX` if all are excluded.")]
        ///
        /// # Safety
        /// As for `_wait_until_all`.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _wait_until_any>](ivars: *mut $t, nelems: usize, status: *const c_int, cmp_: c_int, cmp_value: $t) -> usize {
            // SAFETY: the caller's contract.
            unsafe { multi(concat!("shmem_", stringify!($name), "_wait_until_any"), Kind::Any, false, ivars, nelems, std::ptr::null_mut(), status, cmp_, Against::One(cmp_value)) }
        }
        #[doc = concat!("`shmem_", stringify!($name), "_wait_until_some` (§9.11.4): waits until at least one included ivar satisfies the comparison; writes the indices of those that do and returns their count.")]
        ///
        /// # Safety
        /// As for `_wait_until_all`; `indices` holds `nelems` `size_t`s.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _wait_until_some>](ivars: *mut $t, nelems: usize, indices: *mut usize, status: *const c_int, cmp_: c_int, cmp_value: $t) -> usize {
            // SAFETY: the caller's contract.
            unsafe { multi(concat!("shmem_", stringify!($name), "_wait_until_some"), Kind::Some, false, ivars, nelems, indices, status, cmp_, Against::One(cmp_value)) }
        }
        #[doc = concat!("`shmem_", stringify!($name), "_wait_until_all_vector` (§9.11.2): `_wait_until_all` with one comparison value per ivar.")]
        ///
        /// # Safety
        /// As for `_wait_until_all`; `cmp_values` holds `nelems` values.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _wait_until_all_vector>](ivars: *mut $t, nelems: usize, status: *const c_int, cmp_: c_int, cmp_values: *const $t) {
            const F: &str = concat!("shmem_", stringify!($name), "_wait_until_all_vector");
            // SAFETY: the caller's contract.
            unsafe { multi(F, Kind::All, false, ivars, nelems, std::ptr::null_mut(), status, cmp_, each(F, cmp_values, nelems)) };
        }
        #[doc = concat!("`shmem_", stringify!($name), "_wait_until_any_vector` (§9.11.3): `_wait_until_any` with one comparison value per ivar.")]
        ///
        /// # Safety
        /// As for `_wait_until_all_vector`.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _wait_until_any_vector>](ivars: *mut $t, nelems: usize, status: *const c_int, cmp_: c_int, cmp_values: *const $t) -> usize {
            const F: &str = concat!("shmem_", stringify!($name), "_wait_until_any_vector");
            // SAFETY: the caller's contract.
            unsafe { multi(F, Kind::Any, false, ivars, nelems, std::ptr::null_mut(), status, cmp_, each(F, cmp_values, nelems)) }
        }
        #[doc = concat!("`shmem_", stringify!($name), "_wait_until_some_vector` (§9.11.4): `_wait_until_some` with one comparison value per ivar.")]
        ///
        /// # Safety
        /// As for `_wait_until_some`; `cmp_values` holds `nelems` values.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _wait_until_some_vector>](ivars: *mut $t, nelems: usize, indices: *mut usize, status: *const c_int, cmp_: c_int, cmp_values: *const $t) -> usize {
            const F: &str = concat!("shmem_", stringify!($name), "_wait_until_some_vector");
            // SAFETY: the caller's contract.
            unsafe { multi(F, Kind::Some, false, ivars, nelems, indices, status, cmp_, each(F, cmp_values, nelems)) }
        }
        #[doc = concat!("`shmem_", stringify!($name), "_test_all` (§9.11.8): 1 if every included ivar satisfies the comparison now, else 0.")]
        ///
        /// # Safety
        /// As for `_wait_until_all`.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _test_all>](ivars: *mut $t, nelems: usize, status: *const c_int, cmp_: c_int, cmp_value: $t) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { multi(concat!("shmem_", stringify!($name), "_test_all"), Kind::All, true, ivars, nelems, std::ptr::null_mut(), status, cmp_, Against::One(cmp_value)) as c_int }
        }
        #[doc = concat!("`shmem_", stringify!($name), "_test_any` (§9.11.9): the index of an included ivar that satisfies the comparison now, or `SIZE_MAX`.")]
        ///
        /// # Safety
        /// As for `_wait_until_all`.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _test_any>](ivars: *mut $t, nelems: usize, status: *const c_int, cmp_: c_int, cmp_value: $t) -> usize {
            // SAFETY: the caller's contract.
            unsafe { multi(concat!("shmem_", stringify!($name), "_test_any"), Kind::Any, true, ivars, nelems, std::ptr::null_mut(), status, cmp_, Against::One(cmp_value)) }
        }
        #[doc = concat!("`shmem_", stringify!($name), "_test_some` (§9.11.10): writes the indices of the included ivars that satisfy the comparison now; returns their count.")]
        ///
        /// # Safety
        /// As for `_wait_until_some`.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _test_some>](ivars: *mut $t, nelems: usize, indices: *mut usize, status: *const c_int, cmp_: c_int, cmp_value: $t) -> usize {
            // SAFETY: the caller's contract.
            unsafe { multi(concat!("shmem_", stringify!($name), "_test_some"), Kind::Some, true, ivars, nelems, indices, status, cmp_, Against::One(cmp_value)) }
        }
        #[doc = concat!("`shmem_", stringify!($name), "_test_all_vector` (§9.11.8): `_test_all` with one comparison value per ivar.")]
        ///
        /// # Safety
        /// As for `_wait_until_all_vector`.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _test_all_vector>](ivars: *mut $t, nelems: usize, status: *const c_int, cmp_: c_int, cmp_values: *const $t) -> c_int {
            const F: &str = concat!("shmem_", stringify!($name), "_test_all_vector");
            // SAFETY: the caller's contract.
            unsafe { multi(F, Kind::All, true, ivars, nelems, std::ptr::null_mut(), status, cmp_, each(F, cmp_values, nelems)) as c_int }
        }
        #[doc = concat!("`shmem_", stringify!($name), "_test_any_vector` (§9.11.9): `_test_any` with one comparison value per ivar.")]
        ///
        /// # Safety
        /// As for `_wait_until_all_vector`.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _test_any_vector>](ivars: *mut $t, nelems: usize, status: *const c_int, cmp_: c_int, cmp_values: *const $t) -> usize {
            const F: &str = concat!("shmem_", stringify!($name), "_test_any_vector");
            // SAFETY: the caller's contract.
            unsafe { multi(F, Kind::Any, true, ivars, nelems, std::ptr::null_mut(), status, cmp_, each(F, cmp_values, nelems)) }
        }
        #[doc = concat!("`shmem_", stringify!($name), "_test_some_vector` (§9.11.10): `_test_some` with one comparison value per ivar.")]
        ///
        /// # Safety
        /// As for `_wait_until_some_vector`.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _test_some_vector>](ivars: *mut $t, nelems: usize, indices: *mut usize, status: *const c_int, cmp_: c_int, cmp_values: *const $t) -> usize {
            const F: &str = concat!("shmem_", stringify!($name), "_test_some_vector");
            // SAFETY: the caller's contract.
            unsafe { multi(F, Kind::Some, true, ivars, nelems, indices, status, cmp_, each(F, cmp_values, nelems)) }
        }
    )* } };
}

// The point-to-point synchronization types of §9.11 that are 4 or 8 bytes (`short` and
// `ushort` are `small_waits!` below).
waits!(
    int: i32, long: i64, longlong: i64, uint: u32, ulong: u64, ulonglong: u64, int32: i32,
    int64: i64, uint32: u32, uint64: u64, size: u64, ptrdiff: i64,
);

/// A 2-byte ivar type (`short`, `unsigned short`), which the runtime's typed waits do not
/// cover: waited on here with atomic loads of this PE's copy, under the runtime's wait
/// policy ([`symmem_runtime::Runtime::wait_local`]).
trait Small: Copy + PartialOrd + std::fmt::Debug {
    /// Loads `*p` with Acquire ordering.
    ///
    /// # Safety
    /// `p` is valid, aligned, and only accessed atomically (or by other processes).
    unsafe fn load(p: *mut Self) -> Self;
}

impl Small for i16 {
    unsafe fn load(p: *mut Self) -> Self {
        // SAFETY: the caller's contract.
        unsafe { std::sync::atomic::AtomicI16::from_ptr(p) }
            .load(std::sync::atomic::Ordering::Acquire)
    }
}

impl Small for u16 {
    unsafe fn load(p: *mut Self) -> Self {
        // SAFETY: the caller's contract.
        unsafe { std::sync::atomic::AtomicU16::from_ptr(p) }
            .load(std::sync::atomic::Ordering::Acquire)
    }
}

/// [`multi`] for 2-byte ivars (with `n = 1` and `Kind::All` for the single waits).
///
/// # Safety
/// As for [`multi`].
#[allow(clippy::too_many_arguments)]
unsafe fn multi_small<T: Small>(
    func: &'static str,
    kind: Kind,
    test: bool,
    ivars: *mut T,
    n: usize,
    indices: *mut usize,
    status: *const c_int,
    cmp_: c_int,
    values: Against<'_, T>,
) -> usize {
    let (s, c, view) = match begin(func, kind, test, ivars, n, cmp_) {
        Ok(begun) => begun,
        Err(answer) => return answer,
    };
    let base = match s.rt.ptr(&view, s.rt.my_pe()).or_die(func) {
        Some(p) if !s.rt.is_gpu() => p.as_ptr(),
        _ => die(
            func,
            "2-byte waits need a host heap (this PE's heap is GPU memory)",
        ),
    };
    // SAFETY: the caller's contract.
    let ex = unsafe { excluded(status, n) };
    let included = |i: usize| ex.as_ref().is_none_or(|e| !e[i]);
    let value = |i: usize| match values {
        Against::One(v) => v,
        Against::Each(vs) => vs[i],
    };
    // SAFETY: `base` is this PE's mapping of the view's `n` elements, checked by `view`;
    // peers write them with stores and atomics, so they are read atomically.
    let holds = |i: usize| c.holds(unsafe { T::load(base.add(i)) }, value(i));
    let found = || {
        (0..n)
            .filter(|&i| included(i) && holds(i))
            .collect::<Vec<_>>()
    };
    let done = || match kind {
        Kind::All => (0..n).all(|i| !included(i) || holds(i)),
        Kind::Any | Kind::Some => {
            (0..n).all(|i| !included(i)) || (0..n).any(|i| included(i) && holds(i))
        }
    };
    if !test {
        s.rt.wait_local(func, || format!("{n} ivars at {ivars:p} {c:?}"), done)
            .or_die(func);
    }
    match kind {
        Kind::All => usize::from(done()),
        Kind::Any => found().first().copied().unwrap_or(usize::MAX),
        // SAFETY: the caller's contract.
        Kind::Some => unsafe { report(func, indices, n, &found()) },
    }
}

/// Exports the point-to-point synchronization routines for the 2-byte types.
macro_rules! small_waits {
    ($($name:ident : $t:ty),* $(,)?) => { pastey::paste! { $(
        #[doc = concat!("`shmem_", stringify!($name), "_wait_until` (§9.11.1).")]
        #[no_mangle]
        pub extern "C" fn [<shmem_ $name _wait_until>](ivar: *mut $t, cmp_: c_int, cmp_value: $t) {
            // SAFETY: one ivar, no status or indices.
            unsafe { multi_small(concat!("shmem_", stringify!($name), "_wait_until"), Kind::All, false, ivar, 1, std::ptr::null_mut(), std::ptr::null(), cmp_, Against::One(cmp_value)) };
        }
        #[doc = concat!("`shmem_", stringify!($name), "_test` (§9.11.7): 1 if `ivar` satisfies the comparison now.")]
        #[no_mangle]
        pub extern "C" fn [<shmem_ $name _test>](ivar: *mut $t, cmp_: c_int, cmp_value: $t) -> c_int {
            // SAFETY: one ivar, no status or indices.
            unsafe { multi_small(concat!("shmem_", stringify!($name), "_test"), Kind::All, true, ivar, 1, std::ptr::null_mut(), std::ptr::null(), cmp_, Against::One(cmp_value)) as c_int }
        }
        small_waits!(@multi $name, $t, wait_until_all, All, false, void);
        small_waits!(@multi $name, $t, wait_until_any, Any, false, usize);
        small_waits!(@some $name, $t, wait_until_some, false);
        small_waits!(@multi $name, $t, test_all, All, true, c_int);
        small_waits!(@multi $name, $t, test_any, Any, true, usize);
        small_waits!(@some $name, $t, test_some, true);
    )* } };
    (@multi $name:ident, $t:ty, $op:ident, $kind:ident, $test:expr, void) => { pastey::paste! {
        #[doc = concat!("`shmem_", stringify!($name), "_", stringify!($op), "` (§9.11).")]
        ///
        /// # Safety
        /// `status` is NULL or holds `nelems` ints; `ivars` is symmetric.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _ $op>](ivars: *mut $t, nelems: usize, status: *const c_int, cmp_: c_int, cmp_value: $t) {
            // SAFETY: the caller's contract.
            unsafe { multi_small(concat!("shmem_", stringify!($name), "_", stringify!($op)), Kind::$kind, $test, ivars, nelems, std::ptr::null_mut(), status, cmp_, Against::One(cmp_value)) };
        }
        #[doc = concat!("`shmem_", stringify!($name), "_", stringify!($op), "_vector` (§9.11).")]
        ///
        /// # Safety
        /// As for the scalar form; `cmp_values` holds `nelems` values.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _ $op _vector>](ivars: *mut $t, nelems: usize, status: *const c_int, cmp_: c_int, cmp_values: *const $t) {
            const F: &str = concat!("shmem_", stringify!($name), "_", stringify!($op), "_vector");
            // SAFETY: the caller's contract.
            unsafe { multi_small(F, Kind::$kind, $test, ivars, nelems, std::ptr::null_mut(), status, cmp_, each(F, cmp_values, nelems)) };
        }
    } };
    (@multi $name:ident, $t:ty, $op:ident, $kind:ident, $test:expr, $ret:ty) => { pastey::paste! {
        #[doc = concat!("`shmem_", stringify!($name), "_", stringify!($op), "` (§9.11).")]
        ///
        /// # Safety
        /// `status` is NULL or holds `nelems` ints; `ivars` is symmetric.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _ $op>](ivars: *mut $t, nelems: usize, status: *const c_int, cmp_: c_int, cmp_value: $t) -> $ret {
            // SAFETY: the caller's contract.
            unsafe { multi_small(concat!("shmem_", stringify!($name), "_", stringify!($op)), Kind::$kind, $test, ivars, nelems, std::ptr::null_mut(), status, cmp_, Against::One(cmp_value)) as $ret }
        }
        #[doc = concat!("`shmem_", stringify!($name), "_", stringify!($op), "_vector` (§9.11).")]
        ///
        /// # Safety
        /// As for the scalar form; `cmp_values` holds `nelems` values.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _ $op _vector>](ivars: *mut $t, nelems: usize, status: *const c_int, cmp_: c_int, cmp_values: *const $t) -> $ret {
            const F: &str = concat!("shmem_", stringify!($name), "_", stringify!($op), "_vector");
            // SAFETY: the caller's contract.
            unsafe { multi_small(F, Kind::$kind, $test, ivars, nelems, std::ptr::null_mut(), status, cmp_, each(F, cmp_values, nelems)) as $ret }
        }
    } };
    (@some $name:ident, $t:ty, $op:ident, $test:expr) => { pastey::paste! {
        #[doc = concat!("`shmem_", stringify!($name), "_", stringify!($op), "` (§9.11): writes the satisfying indices, returns their count.")]
        ///
        /// # Safety
        /// `status` is NULL or holds `nelems` ints, `indices` `nelems` `size_t`s.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _ $op>](ivars: *mut $t, nelems: usize, indices: *mut usize, status: *const c_int, cmp_: c_int, cmp_value: $t) -> usize {
            // SAFETY: the caller's contract.
            unsafe { multi_small(concat!("shmem_", stringify!($name), "_", stringify!($op)), Kind::Some, $test, ivars, nelems, indices, status, cmp_, Against::One(cmp_value)) }
        }
        #[doc = concat!("`shmem_", stringify!($name), "_", stringify!($op), "_vector` (§9.11).")]
        ///
        /// # Safety
        /// As for the scalar form; `cmp_values` holds `nelems` values.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _ $op _vector>](ivars: *mut $t, nelems: usize, indices: *mut usize, status: *const c_int, cmp_: c_int, cmp_values: *const $t) -> usize {
            const F: &str = concat!("shmem_", stringify!($name), "_", stringify!($op), "_vector");
            // SAFETY: the caller's contract.
            unsafe { multi_small(F, Kind::Some, $test, ivars, nelems, indices, status, cmp_, each(F, cmp_values, nelems)) }
        }
    } };
}

small_waits!(short: i16, ushort: u16);
