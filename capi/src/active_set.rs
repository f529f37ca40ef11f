//! The deprecated active-set collectives of OpenSHMEM 1.5 (§9.9, "deprecated"):
//! `shmem_barrier`, `shmem_sync` (active-set form), `shmem_broadcast32/64`,
//! `shmem_collect32/64`, `shmem_fcollect32/64`, `shmem_alltoall32/64`,
//! `shmem_alltoalls32/64` and `shmem_TYPENAME_OP_to_all`.
//!
//! An active set is the world PEs `PE_start + i·2^logPE_stride`, `i < PE_size`; only
//! they call. Teams cannot serve (a split is collective over its parent), so these run
//! on one-sided operations and the caller's `pSync` (symmetric, every word
//! `SHMEM_SYNC_VALUE` (0) on entry, and left so on return):
//!
//! - *barrier* (`pSync[0]`, `pSync[1]`): every member but the first adds 1 to the first
//!   member's `pSync[0]` and waits for its own `pSync[1]`; the first waits until
//!   `pSync[0]` is `PE_size - 1`, clears it, and sets every other member's `pSync[1]`,
//!   which each clears before returning. A member cannot add for the next barrier before
//!   it was released from this one, so one `pSync` serves consecutive barriers;
//! - *collect*'s offsets (`pSync[2]`) pass along the members in order, each adding its
//!   count;
//! - data moves with puts from each member, between an entry and an exit barrier;
//!   reductions read every member's `source` between two barriers and combine in member
//!   order (so `dest` may be `source`).

use std::ffi::{c_int, c_void};

use symmem_runtime::{Cmp, Error, Pod, Result};

use crate::{state, OrDie, State};

/// The members of an active set and this PE's place in it.
struct ActiveSet {
    start: usize,
    stride: usize,
    size: usize,
    /// This PE's index in the set.
    me: usize,
}

impl ActiveSet {
    /// The set of `(start, log_stride, size)`, which must contain this PE.
    fn new(s: &State, func: &'static str, start: c_int, log: c_int, size: c_int) -> Result<Self> {
        let bad = |why: String| Error::InvalidArgument {
            op: func,
            reason: format!(
                "active set (PE_start {start}, logPE_stride {log}, PE_size {size}) on PE {}: {why}",
                s.rt.my_pe()
            ),
        };
        let (Ok(st), Ok(lg), Ok(sz)) = (
            usize::try_from(start),
            u32::try_from(log),
            usize::try_from(size),
        ) else {
            return Err(bad("negative argument".into()));
        };
        let stride = 1usize
            .checked_shl(lg)
            .filter(|_| lg < 31)
            .ok_or_else(|| bad("stride too large".into()))?;
        if sz == 0 || st + (sz - 1) * stride >= s.rt.n_pes() {
            return Err(bad(format!(
                "not within the {} PEs of the job",
                s.rt.n_pes()
            )));
        }
        let me = s.rt.my_pe();
        let index = (me >= st && (me - st).is_multiple_of(stride))
            .then(|| (me - st) / stride)
            .filter(|&i| i < sz)
            .ok_or_else(|| bad("this PE is not a member".into()))?;
        Ok(ActiveSet {
            start: st,
            stride,
            size: sz,
            me: index,
        })
    }

    /// The world PE of member `i`.
    fn pe(&self, i: usize) -> usize {
        self.start + i * self.stride
    }
}

/// The barrier (with `quiet` first for `shmem_barrier`) over `set` on `psync`.
fn barrier(
    s: &State,
    func: &'static str,
    set: &ActiveSet,
    psync: *mut i64,
    quiet: bool,
) -> Result<()> {
    if quiet {
        s.rt.quiet()?;
    }
    if set.size == 1 {
        return Ok(());
    }
    let sync = s.try_view(func, psync.cast_const(), 2)?;
    let me = s.rt.my_pe();
    if set.me == 0 {
        s.rt.wait_until(sync.at(0), Cmp::Eq, set.size as i64 - 1)?;
        s.rt.atomic_set(sync.at(0), 0, me)?;
        for i in 1..set.size {
            s.rt.atomic_set(sync.at(1), 1, set.pe(i))?;
        }
    } else {
        s.rt.atomic_add(sync.at(0), 1, set.pe(0))?;
        s.rt.wait_until(sync.at(1), Cmp::Ne, 0)?;
        s.rt.atomic_set(sync.at(1), 0, me)?;
    }
    Ok(())
}

/// Runs `body` on the active set, logging and ending the job on error (the routines are
/// `void`).
fn run(
    func: &'static str,
    start: c_int,
    log: c_int,
    size: c_int,
    body: impl FnOnce(&'static State, &ActiveSet) -> Result<()>,
) {
    let s = state(func);
    ActiveSet::new(s, func, start, log, size)
        .and_then(|set| body(s, &set))
        .or_die(func)
}

/// `shmem_barrier` (deprecated): quiet, then wait for the active set.
///
/// # Safety
/// `psync` is a symmetric `long[SHMEM_BARRIER_SYNC_SIZE]` of zeros.
#[no_mangle]
pub unsafe extern "C" fn shmem_barrier(start: c_int, log: c_int, size: c_int, psync: *mut i64) {
    run("shmem_barrier", start, log, size, |s, set| {
        barrier(s, "shmem_barrier", set, psync, true)
    })
}

/// `shmem_sync` (deprecated active-set form): wait for the active set (no quiet).
///
/// # Safety
/// `psync` is a symmetric `long[SHMEM_BARRIER_SYNC_SIZE]` of zeros.
#[no_mangle]
pub unsafe extern "C" fn shmem_sync(start: c_int, log: c_int, size: c_int, psync: *mut i64) {
    run("shmem_sync", start, log, size, |s, set| {
        barrier(s, "shmem_sync", set, psync, false)
    })
}

/// Broadcast of `n` elements from member `root` to the others' `dest` (not the root's).
#[allow(clippy::too_many_arguments)]
fn broadcast<T: Pod>(
    func: &'static str,
    dest: *mut T,
    src: *const T,
    n: usize,
    root: c_int,
    start: c_int,
    log: c_int,
    size: c_int,
    psync: *mut i64,
) {
    run(func, start, log, size, |s, set| {
        let root = usize::try_from(root)
            .ok()
            .filter(|&r| r < set.size)
            .ok_or_else(|| Error::InvalidArgument {
                op: func,
                reason: format!(
                    "PE_root {root} is not an index of the active set of {}",
                    set.size
                ),
            })?;
        barrier(s, func, set, psync, true)?;
        if set.me == root && n > 0 {
            let from = s.try_view(func, src, n)?;
            let mut data = vec![T::zeroed(); n];
            s.rt.get(from.at(0), &mut data, s.rt.my_pe())?;
            let to = s.try_view(func, dest.cast_const(), n)?;
            for i in (0..set.size).filter(|&i| i != root) {
                s.rt.put(to.at(0), &data, set.pe(i))?;
            }
        }
        barrier(s, func, set, psync, true)
    })
}

/// Collect (`fixed`: every member `n` elements, else each its own `n`, offsets passed
/// along the members in `pSync[2]`).
#[allow(clippy::too_many_arguments)]
fn collect<T: Pod>(
    func: &'static str,
    fixed: bool,
    dest: *mut T,
    src: *const T,
    n: usize,
    start: c_int,
    log: c_int,
    size: c_int,
    psync: *mut i64,
) {
    run(func, start, log, size, |s, set| {
        barrier(s, func, set, psync, true)?;
        let offset = if fixed {
            set.me * n
        } else {
            let chain = s.try_view(func, psync.cast_const(), 3)?;
            let off = if set.me == 0 {
                0
            } else {
                let v = s.rt.wait_until(chain.at(2), Cmp::Ne, 0)?;
                s.rt.atomic_set(chain.at(2), 0, s.rt.my_pe())?;
                (v - 1) as usize
            };
            if set.me + 1 < set.size {
                s.rt.atomic_set(chain.at(2), (off + n) as i64 + 1, set.pe(set.me + 1))?;
            }
            off
        };
        if n > 0 {
            let from = s.try_view(func, src, n)?;
            let mut data = vec![T::zeroed(); n];
            s.rt.get(from.at(0), &mut data, s.rt.my_pe())?;
            let to = s.try_view(func, dest.cast_const(), offset + n)?;
            for i in 0..set.size {
                s.rt.put(to.at(offset), &data, set.pe(i))?;
            }
        }
        barrier(s, func, set, psync, true)
    })
}

/// Alltoall with element strides (1 and 1 for plain alltoall).
#[allow(clippy::too_many_arguments)]
fn alltoalls<T: Pod>(
    func: &'static str,
    dest: *mut T,
    src: *const T,
    dst: isize,
    sst: isize,
    n: usize,
    start: c_int,
    log: c_int,
    size: c_int,
    psync: *mut i64,
) {
    run(func, start, log, size, |s, set| {
        let stride = |v: isize| {
            usize::try_from(v)
                .ok()
                .filter(|&v| v >= 1)
                .ok_or_else(|| Error::InvalidArgument {
                    op: func,
                    reason: format!("stride {v} must be at least 1"),
                })
        };
        let (dst, sst) = (stride(dst)?, stride(sst)?);
        barrier(s, func, set, psync, true)?;
        if n > 0 {
            let span = |st: usize| (set.size * n - 1) * st + 1;
            let from = s.try_view(func, src, span(sst))?;
            let mut data = vec![T::zeroed(); span(sst)];
            s.rt.get(from.at(0), &mut data, s.rt.my_pe())?;
            let to = s.try_view(func, dest.cast_const(), span(dst))?;
            for j in 0..set.size {
                s.rt.iput(
                    to.at(set.me * n * dst),
                    dst,
                    &data[j * n * sst..],
                    sst,
                    n,
                    set.pe(j),
                )?;
            }
        }
        barrier(s, func, set, psync, true)
    })
}

/// `_to_all` reduction with `f`, combining in member order.
#[allow(clippy::too_many_arguments)]
fn to_all<T: Pod>(
    func: &'static str,
    dest: *mut T,
    src: *const T,
    n: usize,
    start: c_int,
    log: c_int,
    size: c_int,
    psync: *mut i64,
    f: fn(T, T) -> T,
) {
    run(func, start, log, size, |s, set| {
        barrier(s, func, set, psync, true)?;
        if n > 0 {
            let from = s.try_view(func, src, n)?;
            let mut acc = vec![T::zeroed(); n];
            let mut block = vec![T::zeroed(); n];
            for i in 0..set.size {
                s.rt.get(from.at(0), &mut block, set.pe(i))?;
                if i == 0 {
                    acc.copy_from_slice(&block);
                } else {
                    for (a, b) in acc.iter_mut().zip(&block) {
                        *a = f(*a, *b);
                    }
                }
            }
            barrier(s, func, set, psync, true)?;
            let to = s.try_view(func, dest.cast_const(), n)?;
            s.rt.put(to.at(0), &acc, s.rt.my_pe())?;
        } else {
            barrier(s, func, set, psync, true)?;
        }
        Ok(())
    })
}

/// Exports the sized active-set movers for `$bits` over `$t`.
macro_rules! sized {
    ($($bits:literal : $t:ty),*) => { pastey::paste! { $(
        #[doc = concat!("`shmem_broadcast", stringify!($bits), "` (deprecated): member `pe_root`'s `source` to the other members' `dest`.")]
        ///
        /// # Safety
        /// `dest`, `source` and `psync` are symmetric; `psync` holds zeros.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn [<shmem_broadcast $bits>](dest: *mut c_void, source: *const c_void, nelems: usize, pe_root: c_int, pe_start: c_int, log_pe_stride: c_int, pe_size: c_int, psync: *mut i64) {
            broadcast::<$t>(concat!("shmem_broadcast", stringify!($bits)), dest.cast(), source.cast(), nelems, pe_root, pe_start, log_pe_stride, pe_size, psync)
        }
        #[doc = concat!("`shmem_collect", stringify!($bits), "` (deprecated): every member's `nelems` (which may differ), in member order.")]
        ///
        /// # Safety
        /// As for the broadcast.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_collect $bits>](dest: *mut c_void, source: *const c_void, nelems: usize, pe_start: c_int, log_pe_stride: c_int, pe_size: c_int, psync: *mut i64) {
            collect::<$t>(concat!("shmem_collect", stringify!($bits)), false, dest.cast(), source.cast(), nelems, pe_start, log_pe_stride, pe_size, psync)
        }
        #[doc = concat!("`shmem_fcollect", stringify!($bits), "` (deprecated): every member's `nelems`, in member order.")]
        ///
        /// # Safety
        /// As for the broadcast.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_fcollect $bits>](dest: *mut c_void, source: *const c_void, nelems: usize, pe_start: c_int, log_pe_stride: c_int, pe_size: c_int, psync: *mut i64) {
            collect::<$t>(concat!("shmem_fcollect", stringify!($bits)), true, dest.cast(), source.cast(), nelems, pe_start, log_pe_stride, pe_size, psync)
        }
        #[doc = concat!("`shmem_alltoall", stringify!($bits), "` (deprecated): block `j` of `source` to member `j`'s `dest`.")]
        ///
        /// # Safety
        /// As for the broadcast.
        #[no_mangle]
        pub unsafe extern "C" fn [<shmem_alltoall $bits>](dest: *mut c_void, source: *const c_void, nelems: usize, pe_start: c_int, log_pe_stride: c_int, pe_size: c_int, psync: *mut i64) {
            alltoalls::<$t>(concat!("shmem_alltoall", stringify!($bits)), dest.cast(), source.cast(), 1, 1, nelems, pe_start, log_pe_stride, pe_size, psync)
        }
        #[doc = concat!("`shmem_alltoalls", stringify!($bits), "` (deprecated): alltoall with element strides.")]
        ///
        /// # Safety
        /// As for the broadcast.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn [<shmem_alltoalls $bits>](dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize, pe_start: c_int, log_pe_stride: c_int, pe_size: c_int, psync: *mut i64) {
            alltoalls::<$t>(concat!("shmem_alltoalls", stringify!($bits)), dest.cast(), source.cast(), dst, sst, nelems, pe_start, log_pe_stride, pe_size, psync)
        }
    )* } };
}
sized!(32: u32, 64: u64);

/// Exports `shmem_<name>_<op>_to_all` combining with `a.$method(b)`.
macro_rules! to_all_fns {
    ($op:ident = $method:ident; $($name:ident : $t:ty),*) => { pastey::paste! { $(
        #[doc = concat!("`shmem_", stringify!($name), "_", stringify!($op), "_to_all` (deprecated): the ", stringify!($op), " of `source` over the active set.")]
        ///
        /// # Safety
        /// `dest`, `source` and `psync` are symmetric; `psync` holds zeros.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn [<shmem_ $name _ $op _to_all>](dest: *mut $t, source: *const $t, nreduce: c_int, pe_start: c_int, log_pe_stride: c_int, pe_size: c_int, _pwrk: *mut $t, psync: *mut i64) {
            const F: &str = concat!("shmem_", stringify!($name), "_", stringify!($op), "_to_all");
            let n = usize::try_from(nreduce).unwrap_or_else(|_| crate::die(F, format!("nreduce {nreduce} is negative")));
            to_all::<$t>(F, dest, source, n, pe_start, log_pe_stride, pe_size, psync, |a: $t, b: $t| a.$method(b))
        }
    )* } };
}

use std::ops::{BitAnd, BitOr, BitXor};
to_all_fns!(and = bitand; short: i16, int: i32, long: i64, longlong: i64);
to_all_fns!(or = bitor; short: i16, int: i32, long: i64, longlong: i64);
to_all_fns!(xor = bitxor; short: i16, int: i32, long: i64, longlong: i64);
to_all_fns!(max = max; short: i16, int: i32, long: i64, longlong: i64);
to_all_fns!(min = min; short: i16, int: i32, long: i64, longlong: i64);
to_all_fns!(sum = wrapping_add; short: i16, int: i32, long: i64, longlong: i64);
to_all_fns!(prod = wrapping_mul; short: i16, int: i32, long: i64, longlong: i64);
to_all_fns!(max = max_float; float: f32, double: f64);
to_all_fns!(min = min_float; float: f32, double: f64);
to_all_fns!(sum = add_float; float: f32, double: f64);
to_all_fns!(prod = mul_float; float: f32, double: f64);

/// The float combiners `to_all_fns!` calls as methods.
trait FloatOps {
    /// The larger (IEEE `>`; the first on ties and NaN).
    fn max_float(self, b: Self) -> Self;
    /// The smaller.
    fn min_float(self, b: Self) -> Self;
    /// The sum.
    fn add_float(self, b: Self) -> Self;
    /// The product.
    fn mul_float(self, b: Self) -> Self;
}

macro_rules! float_ops {
    ($($t:ty),*) => { $(
        impl FloatOps for $t {
            fn max_float(self, b: Self) -> Self { if b > self { b } else { self } }
            fn min_float(self, b: Self) -> Self { if b < self { b } else { self } }
            fn add_float(self, b: Self) -> Self { self + b }
            fn mul_float(self, b: Self) -> Self { self * b }
        }
    )* };
}
float_ops!(f32, f64);
