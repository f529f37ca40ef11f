//! Atomic memory operations (OpenSHMEM 1.5 §9.7): the standard AMOs on the standard AMO
//! types, the extended AMOs (fetch, set, swap) also on `float` and `double` (as their
//! bits), the bitwise AMOs on the bitwise AMO types, and the `_nbi` fetching forms
//! (complete on return here, so `fetch` is written before they return).

use std::ffi::c_int;

use symmem_runtime::SymView;

use crate::{state, OrDie, State};

/// The state, the target PE and a one-element view of `dest` for an AMO named `func`.
fn target<T>(func: &'static str, dest: *const T, pe: c_int) -> (&'static State, SymView<T>, usize) {
    let s = state(func);
    let pe = s.pe(func, pe, dest as usize);
    (s, s.view(func, dest, 1), pe)
}

/// Writes an `_nbi` AMO's result to `fetch`.
///
/// # Safety
/// `fetch` is valid for a write of one `T`.
unsafe fn deliver<T>(func: &str, fetch: *mut T, v: T) {
    if fetch.is_null() {
        crate::die(func, "fetch is NULL");
    }
    // SAFETY: the caller's contract; checked non-null.
    unsafe { fetch.write(v) }
}

/// The AMOs every standard AMO type has, on `$t` (a `SymInt`).
macro_rules! standard {
    ($($name:ident : $t:ty),* $(,)?) => { pastey::paste! { $(
        extended!($name: $t);
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_compare_swap` (§9.7.3): stores `value` at `dest` on `pe` if it equals `cond`; returns the old value.")]
        #[no_mangle]
        pub extern "C" fn [<shmem_ $name _atomic_compare_swap>](dest: *mut $t, cond: $t, value: $t, pe: c_int) -> $t {
            const F: &str = concat!("shmem_", stringify!($name), "_atomic_compare_swap");
            let (s, v, pe) = target(F, dest.cast_const(), pe);
            s.rt.atomic_compare_swap(v.at(0), cond, value, pe).or_die(F)
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_compare_swap_nbi` (§9.7.3): `_atomic_compare_swap`, the old value to `fetch`.")]
        ///
        /// # Safety
        /// `fetch` is valid for a write of one element.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _atomic_compare_swap_nbi>](fetch: *mut $t, dest: *mut $t, cond: $t, value: $t, pe: c_int) {
            const F: &str = concat!("shmem_", stringify!($name), "_atomic_compare_swap_nbi");
            let (s, v, pe) = target(F, dest.cast_const(), pe);
            let old = s.rt.atomic_compare_swap(v.at(0), cond, value, pe).or_die(F);
            // SAFETY: the caller's contract.
            unsafe { deliver(F, fetch, old) }
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_fetch_inc` (§9.7.5): adds 1 to `dest` on `pe`; returns the old value.")]
        #[no_mangle]
        pub extern "C" fn [<shmem_ $name _atomic_fetch_inc>](dest: *mut $t, pe: c_int) -> $t {
            const F: &str = concat!("shmem_", stringify!($name), "_atomic_fetch_inc");
            let (s, v, pe) = target(F, dest.cast_const(), pe);
            s.rt.atomic_fetch_inc(v.at(0), pe).or_die(F)
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_fetch_inc_nbi` (§9.7.5): `_atomic_fetch_inc`, the old value to `fetch`.")]
        ///
        /// # Safety
        /// `fetch` is valid for a write of one element.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _atomic_fetch_inc_nbi>](fetch: *mut $t, dest: *mut $t, pe: c_int) {
            const F: &str = concat!("shmem_", stringify!($name), "_atomic_fetch_inc_nbi");
            let (s, v, pe) = target(F, dest.cast_const(), pe);
            let old = s.rt.atomic_fetch_inc(v.at(0), pe).or_die(F);
            // SAFETY: the caller's contract.
            unsafe { deliver(F, fetch, old) }
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_inc` (§9.7.6): adds 1 to `dest` on `pe`.")]
        #[no_mangle]
        pub extern "C" fn [<shmem_ $name _atomic_inc>](dest: *mut $t, pe: c_int) {
            const F: &str = concat!("shmem_", stringify!($name), "_atomic_inc");
            let (s, v, pe) = target(F, dest.cast_const(), pe);
            s.rt.atomic_inc(v.at(0), pe).or_die(F)
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_fetch_add` (§9.7.7): adds `value` to `dest` on `pe`; returns the old value.")]
        #[no_mangle]
        pub extern "C" fn [<shmem_ $name _atomic_fetch_add>](dest: *mut $t, value: $t, pe: c_int) -> $t {
            const F: &str = concat!("shmem_", stringify!($name), "_atomic_fetch_add");
            let (s, v, pe) = target(F, dest.cast_const(), pe);
            s.rt.atomic_fetch_add(v.at(0), value, pe).or_die(F)
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_fetch_add_nbi` (§9.7.7): `_atomic_fetch_add`, the old value to `fetch`.")]
        ///
        /// # Safety
        /// `fetch` is valid for a write of one element.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _atomic_fetch_add_nbi>](fetch: *mut $t, dest: *mut $t, value: $t, pe: c_int) {
            const F: &str = concat!("shmem_", stringify!($name), "_atomic_fetch_add_nbi");
            let (s, v, pe) = target(F, dest.cast_const(), pe);
            let old = s.rt.atomic_fetch_add(v.at(0), value, pe).or_die(F);
            // SAFETY: the caller's contract.
            unsafe { deliver(F, fetch, old) }
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_add` (§9.7.8): adds `value` to `dest` on `pe`.")]
        #[no_mangle]
        pub extern "C" fn [<shmem_ $name _atomic_add>](dest: *mut $t, value: $t, pe: c_int) {
            const F: &str = concat!("shmem_", stringify!($name), "_atomic_add");
            let (s, v, pe) = target(F, dest.cast_const(), pe);
            s.rt.atomic_add(v.at(0), value, pe).or_die(F)
        }
    )* } };
}

/// The extended AMOs (fetch, set, swap) on an integer `$t` (a `SymInt`).
macro_rules! extended {
    ($name:ident : $t:ty) => { pastey::paste! {
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_fetch` (§9.7.1): atomically loads `source` on `pe`.")]
        #[no_mangle]
        pub extern "C" fn [<shmem_ $name _atomic_fetch>](source: *const $t, pe: c_int) -> $t {
            const F: &str = concat!("shmem_", stringify!($name), "_atomic_fetch");
            let (s, v, pe) = target(F, source, pe);
            s.rt.atomic_fetch(v.at(0), pe).or_die(F)
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_fetch_nbi` (§9.7.1): `_atomic_fetch` into `fetch`.")]
        ///
        /// # Safety
        /// `fetch` is valid for a write of one element.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _atomic_fetch_nbi>](fetch: *mut $t, source: *const $t, pe: c_int) {
            const F: &str = concat!("shmem_", stringify!($name), "_atomic_fetch_nbi");
            let (s, v, pe) = target(F, source, pe);
            let old = s.rt.atomic_fetch(v.at(0), pe).or_die(F);
            // SAFETY: the caller's contract.
            unsafe { deliver(F, fetch, old) }
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_set` (§9.7.2): atomically stores `value` at `dest` on `pe`.")]
        #[no_mangle]
        pub extern "C" fn [<shmem_ $name _atomic_set>](dest: *mut $t, value: $t, pe: c_int) {
            const F: &str = concat!("shmem_", stringify!($name), "_atomic_set");
            let (s, v, pe) = target(F, dest.cast_const(), pe);
            s.rt.atomic_set(v.at(0), value, pe).or_die(F)
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_swap` (§9.7.4): stores `value` at `dest` on `pe`; returns the old value.")]
        #[no_mangle]
        pub extern "C" fn [<shmem_ $name _atomic_swap>](dest: *mut $t, value: $t, pe: c_int) -> $t {
            const F: &str = concat!("shmem_", stringify!($name), "_atomic_swap");
            let (s, v, pe) = target(F, dest.cast_const(), pe);
            s.rt.atomic_swap(v.at(0), value, pe).or_die(F)
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_swap_nbi` (§9.7.4): `_atomic_swap`, the old value to `fetch`.")]
        ///
        /// # Safety
        /// `fetch` is valid for a write of one element.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _atomic_swap_nbi>](fetch: *mut $t, dest: *mut $t, value: $t, pe: c_int) {
            const F: &str = concat!("shmem_", stringify!($name), "_atomic_swap_nbi");
            let (s, v, pe) = target(F, dest.cast_const(), pe);
            let old = s.rt.atomic_swap(v.at(0), value, pe).or_die(F);
            // SAFETY: the caller's contract.
            unsafe { deliver(F, fetch, old) }
        }
    } };
}

/// The extended AMOs on a floating type `$t`, as atomics on its bits `$w`.
macro_rules! extended_float {
    ($($name:ident : $t:ty as $w:ty),* $(,)?) => { pastey::paste! { $(
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_fetch` (§9.7.1): atomically loads `source` on `pe`.")]
        #[no_mangle]
        pub extern "C" fn [<shmem_ $name _atomic_fetch>](source: *const $t, pe: c_int) -> $t {
            const F: &str = concat!("shmem_", stringify!($name), "_atomic_fetch");
            let (s, v, pe) = target(F, source.cast::<$w>(), pe);
            <$t>::from_bits(s.rt.atomic_fetch(v.at(0), pe).or_die(F))
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_fetch_nbi` (§9.7.1): `_atomic_fetch` into `fetch`.")]
        ///
        /// # Safety
        /// `fetch` is valid for a write of one element.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _atomic_fetch_nbi>](fetch: *mut $t, source: *const $t, pe: c_int) {
            const F: &str = concat!("shmem_", stringify!($name), "_atomic_fetch_nbi");
            let v = [<shmem_ $name _atomic_fetch>](source, pe);
            // SAFETY: the caller's contract.
            unsafe { deliver(F, fetch, v) }
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_set` (§9.7.2): atomically stores `value` at `dest` on `pe`.")]
        #[no_mangle]
        pub extern "C" fn [<shmem_ $name _atomic_set>](dest: *mut $t, value: $t, pe: c_int) {
            const F: &str = concat!("shmem_", stringify!($name), "_atomic_set");
            let (s, v, pe) = target(F, dest.cast_const().cast::<$w>(), pe);
            s.rt.atomic_set(v.at(0), value.to_bits(), pe).or_die(F)
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_swap` (§9.7.4): stores `value` at `dest` on `pe`; returns the old value.")]
        #[no_mangle]
        pub extern "C" fn [<shmem_ $name _atomic_swap>](dest: *mut $t, value: $t, pe: c_int) -> $t {
            const F: &str = concat!("shmem_", stringify!($name), "_atomic_swap");
            let (s, v, pe) = target(F, dest.cast_const().cast::<$w>(), pe);
            <$t>::from_bits(s.rt.atomic_swap(v.at(0), value.to_bits(), pe).or_die(F))
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_swap_nbi` (§9.7.4): `_atomic_swap`, the old value to `fetch`.")]
        ///
        /// # Safety
        /// `fetch` is valid for a write of one element.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _atomic_swap_nbi>](fetch: *mut $t, dest: *mut $t, value: $t, pe: c_int) {
            const F: &str = concat!("shmem_", stringify!($name), "_atomic_swap_nbi");
            let v = [<shmem_ $name _atomic_swap>](dest, value, pe);
            // SAFETY: the caller's contract.
            unsafe { deliver(F, fetch, v) }
        }
    )* } };
}

/// The bitwise AMOs on `$t` (a `SymInt`).
macro_rules! bitwise {
    ($($name:ident : $t:ty),* $(,)?) => { pastey::paste! { $(
        bitwise_op!($name: $t, and, atomic_fetch_and, atomic_and);
        bitwise_op!($name: $t, or, atomic_fetch_or, atomic_or);
        bitwise_op!($name: $t, xor, atomic_fetch_xor, atomic_xor);
    )* } };
}

/// One bitwise AMO (`fetch_<op>`, `fetch_<op>_nbi`, `<op>`) on `$t`.
macro_rules! bitwise_op {
    ($name:ident : $t:ty, $op:ident, $fetch:ident, $plain:ident) => { pastey::paste! {
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_fetch_", stringify!($op), "` (§9.7.9–11): combines `value` into `dest` on `pe`; returns the old value.")]
        #[no_mangle]
        pub extern "C" fn [<shmem_ $name _atomic_fetch_ $op>](dest: *mut $t, value: $t, pe: c_int) -> $t {
            const F: &str = concat!("shmem_", stringify!($name), "_atomic_fetch_", stringify!($op));
            let (s, v, pe) = target(F, dest.cast_const(), pe);
            s.rt.$fetch(v.at(0), value, pe).or_die(F)
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_fetch_", stringify!($op), "_nbi`: the old value to `fetch`.")]
        ///
        /// # Safety
        /// `fetch` is valid for a write of one element.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_ $name _atomic_fetch_ $op _nbi>](fetch: *mut $t, dest: *mut $t, value: $t, pe: c_int) {
            const F: &str = concat!("shmem_", stringify!($name), "_atomic_fetch_", stringify!($op), "_nbi");
            let (s, v, pe) = target(F, dest.cast_const(), pe);
            let old = s.rt.$fetch(v.at(0), value, pe).or_die(F);
            // SAFETY: the caller's contract.
            unsafe { deliver(F, fetch, old) }
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_", stringify!($op), "` (§9.7.9–11): combines `value` into `dest` on `pe`.")]
        #[no_mangle]
        pub extern "C" fn [<shmem_ $name _atomic_ $op>](dest: *mut $t, value: $t, pe: c_int) {
            const F: &str = concat!("shmem_", stringify!($name), "_atomic_", stringify!($op));
            let (s, v, pe) = target(F, dest.cast_const(), pe);
            s.rt.$plain(v.at(0), value, pe).or_die(F)
        }
    } };
}

// Table 10 of OpenSHMEM 1.5 (standard AMO types), as their 4- and 8-byte integers.
standard!(
    int: i32, long: i64, longlong: i64, uint: u32, ulong: u64, ulonglong: u64, int32: i32,
    int64: i64, uint32: u32, uint64: u64, size: u64, ptrdiff: i64,
);
// Table 11 (extended AMO types): the standard ones plus float and double.
extended_float!(float: f32 as u32, double: f64 as u64);
// Table 12 (bitwise AMO types).
bitwise!(uint: u32, ulong: u64, ulonglong: u64, int32: i32, int64: i64, uint32: u32, uint64: u64);
