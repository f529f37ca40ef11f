//! Typed symmetric slices: a range of a symmetric allocation as a kernel argument, with
//! operations that check every range against it.
//!
//! The host builds a [`SymSlice`] from a `SymBuf<T>` (`Runtime::sym_slice`, or
//! `sym_slice_range` for part of one) and passes it to a kernel by value: `#[repr(C)]`,
//! a pointer and a length, 16 bytes. In the kernel, [`put`](SymSlice::put),
//! [`get`](SymSlice::get), their `_nbi` and `put_signal` forms (generic over the
//! [`Scope`] that runs them: `dst.put_nbi::<Warp>(…)`), [`p`](SymSlice::p),
//! [`g`](SymSlice::g), the atomics and the local element accesses check that the elements
//! they touch lie inside the slice, and are safe to call. A range outside it panics before
//! any memory is touched, naming the operation, the PE, the range and the slice's length:
//! on the CPU executor the launch fails with that message and the kernel's file and line;
//! on a GPU the panic record keeps the operation's name and the file and line (formatting
//! the numbers would pull `core::fmt` into every kernel).
//!
//! The check is one comparison and a branch that is never taken (a few PTX instructions,
//! see the kernels chapter for the measurement). A hot loop that has checked its ranges
//! once uses the `_unchecked` forms, which are `unsafe` and check nothing.
//!
//! Like every device operation, a slice operation assumes the allocation is alive for the
//! launch: that is what the `unsafe` of `Runtime::launch` promises for every argument.
//! Other PEs may write the same memory at the same time; as with shared memory, an element
//! read then may be stale, never invalid (`T: Pod` for local reads).

use core::marker::PhantomData;

use bytemuck::Pod;

use super::scope::Scope;
use super::{atomic_add, atomic_fetch_add, g, my_pe, p, signal_op, DeviceInt};
use crate::op_kinds::{Cmp, SignalOp};

/// `len` elements of `T` at a symmetric address of this PE: a kernel argument built by
/// the host from a `SymBuf<T>`. A copyable handle: every copy names the same memory.
#[repr(C)]
pub struct SymSlice<T> {
    ptr: *mut T,
    len: usize,
    _elem: PhantomData<T>,
}

impl<T> Clone for SymSlice<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SymSlice<T> {}

impl<T> core::fmt::Debug for SymSlice<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SymSlice")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .finish()
    }
}

/// Whether elements `at..at + n` lie in `0..len`.
#[inline(always)]
const fn fits(at: usize, n: usize, len: usize) -> bool {
    n <= len && at <= len - n
}

/// Panics unless elements `$at..$at + $n` of `$slice` exist, naming the operation `$op`
/// (a literal), the scope, the PE and the range.
macro_rules! check {
    ($slice:expr, $op:literal, $scope:expr, $pe:expr, $at:expr, $n:expr) => {
        if !fits($at, $n, $slice.len) {
            #[cfg(not(target_arch = "nvptx64"))]
            out_of_bounds($op, $scope, $pe, $at, $n, $slice.len);
            #[cfg(target_arch = "nvptx64")]
            panic!(concat!(
                "SymSlice::",
                $op,
                ": elements out of bounds of the symmetric slice"
            ));
        }
    };
}

/// The failed check's panic, with every number (CPU executor).
#[cfg(not(target_arch = "nvptx64"))]
#[cold]
#[inline(never)]
#[track_caller]
fn out_of_bounds(op: &str, scope: &str, pe: u32, at: usize, n: usize, len: usize) -> ! {
    let site = core::panic::Location::caller();
    panic!(
        "SymSlice::{op} ({scope}) on PE {pe}: elements {at}..{} are out of bounds of a symmetric slice of {len} elements (at {}:{})",
        at as u128 + n as u128,
        site.file(),
        site.line()
    )
}

/// A failed [`SymSlice::sub`]'s panic (host code and the CPU executor).
#[cfg(not(target_arch = "nvptx64"))]
#[cold]
#[inline(never)]
#[track_caller]
fn bad_sub(start: usize, len: usize, have: usize) -> ! {
    let site = core::panic::Location::caller();
    panic!(
        "SymSlice::sub: elements {start}..{} are out of bounds of a symmetric slice of {have} elements (at {}:{})",
        start as u128 + len as u128,
        site.file(),
        site.line()
    )
}

impl<T> SymSlice<T> {
    /// The slice of `len` elements at symmetric address `ptr`. The host's
    /// `Runtime::sym_slice` is the safe way to get one.
    ///
    /// # Safety
    /// `ptr..ptr + len` is a range of a symmetric allocation of this PE (a symmetric
    /// address, as `Runtime::ptr(&buf, my_pe)` gives), alive while the slice is used.
    #[inline(always)]
    pub const unsafe fn from_raw_parts(ptr: *mut T, len: usize) -> Self {
        SymSlice {
            ptr,
            len,
            _elem: PhantomData,
        }
    }

    /// Elements.
    #[inline(always)]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no elements.
    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first element's symmetric address, for the raw-pointer operations.
    #[inline(always)]
    pub const fn as_ptr(&self) -> *mut T {
        self.ptr
    }

    /// The `len` elements from `start`. Panics if they do not fit, naming the range.
    #[inline(always)]
    #[track_caller]
    pub fn sub(self, start: usize, len: usize) -> SymSlice<T> {
        if !fits(start, len, self.len) {
            #[cfg(not(target_arch = "nvptx64"))]
            bad_sub(start, len, self.len);
            #[cfg(target_arch = "nvptx64")]
            panic!("SymSlice::sub: elements out of bounds of the symmetric slice");
        }
        SymSlice {
            // SAFETY: `start + len <= self.len`: inside or one past the range.
            ptr: unsafe { self.ptr.add(start) },
            len,
            _elem: PhantomData,
        }
    }
}

impl<T: Copy> SymSlice<T> {
    /// Copies `src` (this PE's) into elements `at..at + src.len()` of this slice on `pe`,
    /// by every thread of scope `S` ([`put`](super::put) and its group forms). Panics
    /// if the range does not fit.
    #[inline(always)]
    #[track_caller]
    pub fn put<S: Scope>(self, at: usize, src: SymSlice<T>, pe: u32) {
        check!(self, "put", S::NAME, pe, at, src.len);
        // SAFETY: the range was checked; `src` is a live range of this PE (launch contract).
        unsafe { self.put_unchecked::<S>(at, src, pe) }
    }

    /// Non-blocking [`put`](Self::put) (complete after `S::quiet()`).
    #[inline(always)]
    #[track_caller]
    pub fn put_nbi<S: Scope>(self, at: usize, src: SymSlice<T>, pe: u32) {
        check!(self, "put_nbi", S::NAME, pe, at, src.len);
        // SAFETY: as in `put`.
        unsafe { self.put_nbi_unchecked::<S>(at, src, pe) }
    }

    /// Copies elements `at..at + dest.len()` of this slice on `pe` into `dest` (this
    /// PE's), by every thread of scope `S` ([`get`](super::get) and its group forms).
    /// Panics if the range does not fit.
    #[inline(always)]
    #[track_caller]
    pub fn get<S: Scope>(self, at: usize, dest: SymSlice<T>, pe: u32) {
        check!(self, "get", S::NAME, pe, at, dest.len);
        // SAFETY: as in `put`.
        unsafe { self.get_unchecked::<S>(at, dest, pe) }
    }

    /// Non-blocking [`get`](Self::get) (arrived after `S::quiet()`).
    #[inline(always)]
    #[track_caller]
    pub fn get_nbi<S: Scope>(self, at: usize, dest: SymSlice<T>, pe: u32) {
        check!(self, "get_nbi", S::NAME, pe, at, dest.len);
        // SAFETY: as in `put`.
        unsafe { self.get_nbi_unchecked::<S>(at, dest, pe) }
    }

    /// [`put`](Self::put), then updates signal word `sig_at` of `sig` on `pe`
    /// ([`put_signal`](super::put_signal) and its group forms): `pe` never sees the signal
    /// before the data. Panics if either range does not fit.
    #[inline(always)]
    #[track_caller]
    #[allow(clippy::too_many_arguments)] // put_signal's arguments, with the two offsets
    pub fn put_signal<S: Scope>(
        self,
        at: usize,
        src: SymSlice<T>,
        sig: SymSlice<u64>,
        sig_at: usize,
        signal: u64,
        op: SignalOp,
        pe: u32,
    ) {
        check!(self, "put_signal", S::NAME, pe, at, src.len);
        check!(sig, "put_signal (signal)", S::NAME, pe, sig_at, 1);
        // SAFETY: both ranges were checked.
        unsafe { self.put_signal_unchecked::<S>(at, src, sig, sig_at, signal, op, pe) }
    }

    /// Non-blocking [`put_signal`](Self::put_signal).
    #[inline(always)]
    #[track_caller]
    #[allow(clippy::too_many_arguments)] // as put_signal
    pub fn put_signal_nbi<S: Scope>(
        self,
        at: usize,
        src: SymSlice<T>,
        sig: SymSlice<u64>,
        sig_at: usize,
        signal: u64,
        op: SignalOp,
        pe: u32,
    ) {
        check!(self, "put_signal_nbi", S::NAME, pe, at, src.len);
        check!(sig, "put_signal_nbi (signal)", S::NAME, pe, sig_at, 1);
        // SAFETY: both ranges were checked.
        unsafe { self.put_signal_nbi_unchecked::<S>(at, src, sig, sig_at, signal, op, pe) }
    }

    /// Stores `value` in element `i` of this slice on `pe` ([`p`](super::p)). Panics if
    /// `i` is out of bounds.
    #[inline(always)]
    #[track_caller]
    pub fn p(self, i: usize, value: T, pe: u32) {
        check!(self, "p", "thread", pe, i, 1);
        // SAFETY: the element was checked.
        unsafe { self.p_unchecked(i, value, pe) }
    }

    /// Loads element `i` of this slice on `pe` ([`g`](super::g)). Panics if `i` is out of
    /// bounds.
    #[inline(always)]
    #[track_caller]
    pub fn g(self, i: usize, pe: u32) -> T {
        check!(self, "g", "thread", pe, i, 1);
        // SAFETY: the element was checked.
        unsafe { self.g_unchecked(i, pe) }
    }

    /// [`put`](Self::put) without the bounds check.
    ///
    /// # Safety
    /// `at + src.len() <= self.len()`.
    #[inline(always)]
    pub unsafe fn put_unchecked<S: Scope>(self, at: usize, src: SymSlice<T>, pe: u32) {
        // SAFETY: caller contract: the range lies in the slice, a symmetric range.
        unsafe { S::put(self.ptr.add(at), src.ptr, src.len, pe) }
    }

    /// [`put_nbi`](Self::put_nbi) without the bounds check.
    ///
    /// # Safety
    /// As [`put_unchecked`](Self::put_unchecked).
    #[inline(always)]
    pub unsafe fn put_nbi_unchecked<S: Scope>(self, at: usize, src: SymSlice<T>, pe: u32) {
        // SAFETY: caller contract.
        unsafe { S::put_nbi(self.ptr.add(at), src.ptr, src.len, pe) }
    }

    /// [`get`](Self::get) without the bounds check.
    ///
    /// # Safety
    /// `at + dest.len() <= self.len()`.
    #[inline(always)]
    pub unsafe fn get_unchecked<S: Scope>(self, at: usize, dest: SymSlice<T>, pe: u32) {
        // SAFETY: caller contract.
        unsafe { S::get(dest.ptr, self.ptr.add(at), dest.len, pe) }
    }

    /// [`get_nbi`](Self::get_nbi) without the bounds check.
    ///
    /// # Safety
    /// As [`get_unchecked`](Self::get_unchecked).
    #[inline(always)]
    pub unsafe fn get_nbi_unchecked<S: Scope>(self, at: usize, dest: SymSlice<T>, pe: u32) {
        // SAFETY: caller contract.
        unsafe { S::get_nbi(dest.ptr, self.ptr.add(at), dest.len, pe) }
    }

    /// [`put_signal`](Self::put_signal) without the bounds checks.
    ///
    /// # Safety
    /// `at + src.len() <= self.len()` and `sig_at < sig.len()`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)] // as put_signal
    pub unsafe fn put_signal_unchecked<S: Scope>(
        self,
        at: usize,
        src: SymSlice<T>,
        sig: SymSlice<u64>,
        sig_at: usize,
        signal: u64,
        op: SignalOp,
        pe: u32,
    ) {
        // SAFETY: caller contract.
        unsafe {
            S::put_signal(
                self.ptr.add(at),
                src.ptr,
                src.len,
                sig.ptr.add(sig_at),
                signal,
                op,
                pe,
            )
        }
    }

    /// [`put_signal_nbi`](Self::put_signal_nbi) without the bounds checks.
    ///
    /// # Safety
    /// As [`put_signal_unchecked`](Self::put_signal_unchecked).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)] // as put_signal
    pub unsafe fn put_signal_nbi_unchecked<S: Scope>(
        self,
        at: usize,
        src: SymSlice<T>,
        sig: SymSlice<u64>,
        sig_at: usize,
        signal: u64,
        op: SignalOp,
        pe: u32,
    ) {
        // SAFETY: caller contract.
        unsafe {
            S::put_signal_nbi(
                self.ptr.add(at),
                src.ptr,
                src.len,
                sig.ptr.add(sig_at),
                signal,
                op,
                pe,
            )
        }
    }

    /// [`p`](Self::p) without the bounds check.
    ///
    /// # Safety
    /// `i < self.len()`.
    #[inline(always)]
    pub unsafe fn p_unchecked(self, i: usize, value: T, pe: u32) {
        // SAFETY: caller contract.
        unsafe { p(self.ptr.add(i), value, pe) }
    }

    /// [`g`](Self::g) without the bounds check.
    ///
    /// # Safety
    /// `i < self.len()`.
    #[inline(always)]
    pub unsafe fn g_unchecked(self, i: usize, pe: u32) -> T {
        // SAFETY: caller contract.
        unsafe { g(self.ptr.add(i), pe) }
    }
}

impl<T: Pod> SymSlice<T> {
    /// Element `i` of this PE's copy. Panics if `i` is out of bounds.
    #[inline(always)]
    #[track_caller]
    pub fn read(self, i: usize) -> T {
        check!(self, "read", "thread", my_pe(), i, 1);
        // SAFETY: a checked element of a live symmetric range; any bits are a `T` (Pod).
        unsafe { self.ptr.add(i).read() }
    }

    /// Stores `value` in element `i` of this PE's copy. Panics if `i` is out of bounds.
    #[inline(always)]
    #[track_caller]
    pub fn write(self, i: usize, value: T) {
        check!(self, "write", "thread", my_pe(), i, 1);
        // SAFETY: as in `read`.
        unsafe { self.ptr.add(i).write(value) }
    }
}

impl<T: DeviceInt> SymSlice<T> {
    /// Adds `value` to element `i` on `pe` atomically ([`atomic_add`](super::atomic_add)).
    /// Panics if `i` is out of bounds.
    #[inline(always)]
    #[track_caller]
    pub fn atomic_add(self, i: usize, value: T, pe: u32) {
        check!(self, "atomic_add", "thread", pe, i, 1);
        // SAFETY: a checked element of the slice.
        unsafe { atomic_add(self.ptr.add(i), value, pe) }
    }

    /// Adds `value` to element `i` on `pe` atomically and returns the old value
    /// ([`atomic_fetch_add`](super::atomic_fetch_add)). Panics if `i` is out of bounds.
    #[inline(always)]
    #[track_caller]
    pub fn atomic_fetch_add(self, i: usize, value: T, pe: u32) -> T {
        check!(self, "atomic_fetch_add", "thread", pe, i, 1);
        // SAFETY: a checked element of the slice.
        unsafe { atomic_fetch_add(self.ptr.add(i), value, pe) }
    }
}

impl SymSlice<u64> {
    /// Updates signal word `i` on `pe` ([`signal_op`](super::signal_op)). Panics if `i` is
    /// out of bounds.
    #[inline(always)]
    #[track_caller]
    pub fn signal_op(self, i: usize, signal: u64, op: SignalOp, pe: u32) {
        check!(self, "signal_op", "thread", pe, i, 1);
        // SAFETY: a checked element of the slice.
        unsafe { signal_op(self.ptr.add(i), signal, op, pe) }
    }

    /// Waits until signal word `i` of this PE's copy satisfies `cmp value`, polled by the
    /// first thread of scope `S`, which then syncs ([`Scope::signal_wait_until`]). Panics
    /// if `i` is out of bounds.
    #[inline(always)]
    #[track_caller]
    pub fn signal_wait_until<S: Scope>(self, i: usize, cmp: Cmp, value: u64) -> u64 {
        check!(self, "signal_wait_until", S::NAME, my_pe(), i, 1);
        // SAFETY: a checked element of the slice.
        unsafe { S::signal_wait_until(self.ptr.add(i), cmp, value) }
    }
}
