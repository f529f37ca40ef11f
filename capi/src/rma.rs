//! Remote memory access (OpenSHMEM 1.5 §9.6, §9.8.1): typed and sized put, get, p, g,
//! iput, iget, their `_nbi` forms and `put_signal`, over the standard RMA types.
//!
//! Every exported function is one line over a generic helper here; the macros at the end
//! list the types. `dest`/`source` on the symmetric side must lie in the symmetric heap;
//! anything else ends the job with an error naming the function, the address and the PE
//! (see the crate docs).

use std::ffi::c_int;

use symmem_runtime::{Pod, SignalOp};

use crate::{die, slice, slice_mut, state, OrDie};

/// Elements spanned by `n` elements at stride `stride` (≥ 1): `(n - 1) × stride + 1`.
fn span(func: &str, n: usize, stride: isize) -> (usize, usize) {
    let Ok(stride) = usize::try_from(stride) else {
        die(func, format!("stride {stride} is negative"));
    };
    if stride == 0 {
        die(func, "stride 0: strides must be at least 1");
    }
    match (n - 1).checked_mul(stride).and_then(|s| s.checked_add(1)) {
        Some(s) => (stride, s),
        None => die(func, format!("{n} elements at stride {stride} overflow")),
    }
}

/// `put` (blocking) or `put_nbi` of `n` elements from local `src` to `dest` on `pe`.
///
/// # Safety
/// `src` is valid for reads of `n` elements.
pub(crate) unsafe fn put<T: Pod>(
    func: &'static str,
    nbi: bool,
    dest: *mut T,
    src: *const T,
    n: usize,
    pe: c_int,
) {
    if n == 0 {
        return;
    }
    let s = state(func);
    let pe = s.pe(func, pe, dest as usize);
    let view = s.view(func, dest.cast_const(), n);
    // SAFETY: the caller's contract.
    let src = unsafe { slice(src, n) };
    if nbi {
        s.rt.put_nbi(view.at(0), src, pe).or_die(func)
    } else {
        s.rt.put(view.at(0), src, pe).or_die(func)
    }
}

/// `get` (blocking) or `get_nbi` of `n` elements from `src` on `pe` into local `dest`.
///
/// # Safety
/// `dest` is valid for writes of `n` elements.
pub(crate) unsafe fn get<T: Pod>(
    func: &'static str,
    nbi: bool,
    dest: *mut T,
    src: *const T,
    n: usize,
    pe: c_int,
) {
    if n == 0 {
        return;
    }
    let s = state(func);
    let pe = s.pe(func, pe, src as usize);
    let view = s.view(func, src, n);
    // SAFETY: the caller's contract.
    let dest = unsafe { slice_mut(dest, n) };
    if nbi {
        s.rt.get_nbi(view.at(0), dest, pe).or_die(func)
    } else {
        s.rt.get(view.at(0), dest, pe).or_die(func)
    }
}

/// `p`: one element to `dest` on `pe` (one atomic store for 4- and 8-byte types).
pub(crate) fn p<T: Pod>(func: &'static str, dest: *mut T, value: T, pe: c_int) {
    let s = state(func);
    let pe = s.pe(func, pe, dest as usize);
    let view = s.view(func, dest.cast_const(), 1);
    s.rt.p(view.at(0), value, pe).or_die(func)
}

/// `g`: one element of `src` on `pe`.
pub(crate) fn g<T: Pod>(func: &'static str, src: *const T, pe: c_int) -> T {
    let s = state(func);
    let pe = s.pe(func, pe, src as usize);
    let view = s.view(func, src, 1);
    s.rt.g(view.at(0), pe).or_die(func)
}

/// `iput`: element `i × dst` of `dest` on `pe` receives `src[i × sst]`, `i < n`.
///
/// # Safety
/// `src` is valid for reads of `(n - 1) × sst + 1` elements.
pub(crate) unsafe fn iput<T: Pod>(
    func: &'static str,
    dest: *mut T,
    src: *const T,
    dst: isize,
    sst: isize,
    n: usize,
    pe: c_int,
) {
    if n == 0 {
        return;
    }
    let s = state(func);
    let pe = s.pe(func, pe, dest as usize);
    let (dst, dspan) = span(func, n, dst);
    let (sst, sspan) = span(func, n, sst);
    let view = s.view(func, dest.cast_const(), dspan);
    // SAFETY: the caller's contract.
    let src = unsafe { slice(src, sspan) };
    s.rt.iput(view.at(0), dst, src, sst, n, pe).or_die(func)
}

/// `iget`: `dest[i × dst]` receives element `i × sst` of `src` on `pe`, `i < n`.
///
/// # Safety
/// `dest` is valid for writes of `(n - 1) × dst + 1` elements.
pub(crate) unsafe fn iget<T: Pod>(
    func: &'static str,
    dest: *mut T,
    src: *const T,
    dst: isize,
    sst: isize,
    n: usize,
    pe: c_int,
) {
    if n == 0 {
        return;
    }
    let s = state(func);
    let pe = s.pe(func, pe, src as usize);
    let (dst, dspan) = span(func, n, dst);
    let (sst, sspan) = span(func, n, sst);
    let view = s.view(func, src, sspan);
    // SAFETY: the caller's contract.
    let dest = unsafe { slice_mut(dest, dspan) };
    s.rt.iget(dest, dst, view.at(0), sst, n, pe).or_die(func)
}

/// The C `sig_op` as a [`SignalOp`] (`SHMEM_SIGNAL_SET` 0, `SHMEM_SIGNAL_ADD` 1).
pub(crate) fn signal_op(func: &str, op: c_int) -> SignalOp {
    match op {
        0 => SignalOp::Set,
        1 => SignalOp::Add,
        _ => die(
            func,
            format!("sig_op {op} is neither SHMEM_SIGNAL_SET (0) nor SHMEM_SIGNAL_ADD (1)"),
        ),
    }
}

/// `put_signal` (blocking or nbi): `n` elements to `dest` on `pe`, then the signal
/// update at `sig` on `pe`, which `pe` never sees before the data.
///
/// # Safety
/// `src` is valid for reads of `n` elements.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn put_signal<T: Pod>(
    func: &'static str,
    nbi: bool,
    dest: *mut T,
    src: *const T,
    n: usize,
    sig: *mut u64,
    signal: u64,
    op: c_int,
    pe: c_int,
) {
    let s = state(func);
    let op = signal_op(func, op);
    let pe = s.pe(func, pe, dest as usize);
    let sig = s.view(func, sig.cast_const(), 1);
    if n == 0 {
        return s.rt.signal_op(sig.at(0), signal, op, pe).or_die(func);
    }
    let view = s.view(func, dest.cast_const(), n);
    // SAFETY: the caller's contract.
    let src = unsafe { slice(src, n) };
    if nbi {
        s.rt.put_signal_nbi(view.at(0), src, sig.at(0), signal, op, pe)
            .or_die(func)
    } else {
        s.rt.put_signal(view.at(0), src, sig.at(0), signal, op, pe)
            .or_die(func)
    }
}

/// `long double` and `put128`'s element: 16 bytes, moved as two words.
pub(crate) type Bytes16 = [u64; 2];

/// Exports put, put_nbi, get, get_nbi, put_signal, put_signal_nbi on `$t` under the
/// given names.
macro_rules! contiguous {
    ($t:ty; $put:ident, $put_nbi:ident, $get:ident, $get_nbi:ident, $ps:ident, $ps_nbi:ident) => {
        #[doc = concat!("`", stringify!($put), "` (§9.6.1): `nelems` elements from `source` to `dest` on `pe`.")]
        ///
        /// # Safety
        /// `source` is valid for reads of `nelems` elements; `dest` is symmetric.
        #[no_mangle]
        pub unsafe extern "C" fn $put(dest: *mut $t, source: *const $t, nelems: usize, pe: c_int) {
            // SAFETY: the caller's contract.
            unsafe { put(stringify!($put), false, dest, source, nelems, pe) }
        }
        #[doc = concat!("`", stringify!($put_nbi), "` (§9.6.5): a put complete at `shmem_quiet`.")]
        ///
        /// # Safety
        /// `source` is valid for reads of `nelems` elements; `dest` is symmetric.
        #[no_mangle]
        pub unsafe extern "C" fn $put_nbi(dest: *mut $t, source: *const $t, nelems: usize, pe: c_int) {
            // SAFETY: the caller's contract.
            unsafe { put(stringify!($put_nbi), true, dest, source, nelems, pe) }
        }
        #[doc = concat!("`", stringify!($get), "` (§9.6.4): `nelems` elements of `source` on `pe` into `dest`.")]
        ///
        /// # Safety
        /// `dest` is valid for writes of `nelems` elements; `source` is symmetric.
        #[no_mangle]
        pub unsafe extern "C" fn $get(dest: *mut $t, source: *const $t, nelems: usize, pe: c_int) {
            // SAFETY: the caller's contract.
            unsafe { get(stringify!($get), false, dest, source, nelems, pe) }
        }
        #[doc = concat!("`", stringify!($get_nbi), "` (§9.6.6): a get complete at `shmem_quiet`.")]
        ///
        /// # Safety
        /// `dest` is valid for writes of `nelems` elements; `source` is symmetric.
        #[no_mangle]
        pub unsafe extern "C" fn $get_nbi(dest: *mut $t, source: *const $t, nelems: usize, pe: c_int) {
            // SAFETY: the caller's contract.
            unsafe { get(stringify!($get_nbi), true, dest, source, nelems, pe) }
        }
        #[doc = concat!("`", stringify!($ps), "` (§9.8.1): a put, then the update of the signal at `sig_addr` on `pe` by `sig_op`.")]
        ///
        /// # Safety
        /// `source` is valid for reads of `nelems` elements; `dest` and `sig_addr` are symmetric.
        #[no_mangle]
        pub unsafe extern "C" fn $ps(dest: *mut $t, source: *const $t, nelems: usize, sig_addr: *mut u64, signal: u64, sig_op: c_int, pe: c_int) {
            // SAFETY: the caller's contract.
            unsafe { put_signal(stringify!($ps), false, dest, source, nelems, sig_addr, signal, sig_op, pe) }
        }
        #[doc = concat!("`", stringify!($ps_nbi), "` (§9.8.2): a put with signal, complete at `shmem_quiet`.")]
        ///
        /// # Safety
        /// `source` is valid for reads of `nelems` elements; `dest` and `sig_addr` are symmetric.
        #[no_mangle]
        pub unsafe extern "C" fn $ps_nbi(dest: *mut $t, source: *const $t, nelems: usize, sig_addr: *mut u64, signal: u64, sig_op: c_int, pe: c_int) {
            // SAFETY: the caller's contract.
            unsafe { put_signal(stringify!($ps_nbi), true, dest, source, nelems, sig_addr, signal, sig_op, pe) }
        }
    };
}

/// Exports iput and iget on `$t` under the given names.
macro_rules! strided {
    ($t:ty; $iput:ident, $iget:ident) => {
        #[doc = concat!("`", stringify!($iput), "` (§9.6.3): strided put (strides in elements, ≥ 1).")]
        ///
        /// # Safety
        /// `source` is valid for reads of `(nelems - 1) × sst + 1` elements.
        #[no_mangle]
        pub unsafe extern "C" fn $iput(dest: *mut $t, source: *const $t, dst: isize, sst: isize, nelems: usize, pe: c_int) {
            // SAFETY: the caller's contract.
            unsafe { iput(stringify!($iput), dest, source, dst, sst, nelems, pe) }
        }
        #[doc = concat!("`", stringify!($iget), "` (§9.6.4): strided get (strides in elements, ≥ 1).")]
        ///
        /// # Safety
        /// `dest` is valid for writes of `(nelems - 1) × dst + 1` elements.
        #[no_mangle]
        pub unsafe extern "C" fn $iget(dest: *mut $t, source: *const $t, dst: isize, sst: isize, nelems: usize, pe: c_int) {
            // SAFETY: the caller's contract.
            unsafe { iget(stringify!($iget), dest, source, dst, sst, nelems, pe) }
        }
    };
}

/// The typed RMA routines for each `(TYPENAME, Rust type)` of the standard RMA types.
macro_rules! typed {
    ($($name:ident : $t:ty),* $(,)?) => { pastey::paste! { $(
        contiguous!($t; [<shmem_ $name _put>], [<shmem_ $name _put_nbi>], [<shmem_ $name _get>],
            [<shmem_ $name _get_nbi>], [<shmem_ $name _put_signal>], [<shmem_ $name _put_signal_nbi>]);
        strided!($t; [<shmem_ $name _iput>], [<shmem_ $name _iget>]);
    )* } };
}

/// The sized RMA routines (`shmem_put8` … `shmem_put128`).
macro_rules! sized {
    ($($bits:literal : $t:ty),* $(,)?) => { pastey::paste! { $(
        contiguous!($t; [<shmem_put $bits>], [<shmem_put $bits _nbi>], [<shmem_get $bits>],
            [<shmem_get $bits _nbi>], [<shmem_put $bits _signal>], [<shmem_put $bits _signal_nbi>]);
        strided!($t; [<shmem_iput $bits>], [<shmem_iget $bits>]);
    )* } };
}

/// Exports `p` and `g` for each `(TYPENAME, Rust type)`.
macro_rules! single {
    ($($name:ident : $t:ty),* $(,)?) => { pastey::paste! { $(
        #[doc = concat!("`shmem_", stringify!($name), "_p` (§9.6.2): stores `value` at `dest` on `pe`.")]
        #[no_mangle]
        pub extern "C" fn [<shmem_ $name _p>](dest: *mut $t, value: $t, pe: c_int) {
            p(concat!("shmem_", stringify!($name), "_p"), dest, value, pe)
        }
        #[doc = concat!("`shmem_", stringify!($name), "_g` (§9.6.5): the value at `source` on `pe`.")]
        #[no_mangle]
        pub extern "C" fn [<shmem_ $name _g>](source: *const $t, pe: c_int) -> $t {
            g(concat!("shmem_", stringify!($name), "_g"), source, pe)
        }
    )* } };
}

typed!(
    float: f32, double: f64, longdouble: Bytes16, char: i8, schar: i8, short: i16,
    int: i32, long: i64, longlong: i64, uchar: u8, ushort: u16, uint: u32, ulong: u64,
    ulonglong: u64, int8: i8, int16: i16, int32: i32, int64: i64, uint8: u8,
    uint16: u16, uint32: u32, uint64: u64, size: usize, ptrdiff: isize,
);
sized!(8: u8, 16: u16, 32: u32, 64: u64, 128: Bytes16);
contiguous!(u8; shmem_putmem, shmem_putmem_nbi, shmem_getmem, shmem_getmem_nbi,
    shmem_putmem_signal, shmem_putmem_signal_nbi);
// `long double` by value has no Rust type: shmem_longdouble_p/g are inline in shmem.h.
single!(
    float: f32, double: f64, char: i8, schar: i8, short: i16, int: i32, long: i64,
    longlong: i64, uchar: u8, ushort: u16, uint: u32, ulong: u64, ulonglong: u64,
    int8: i8, int16: i16, int32: i32, int64: i64, uint8: u8, uint16: u16, uint32: u32,
    uint64: u64, size: usize, ptrdiff: isize,
);
