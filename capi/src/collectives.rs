//! Team collectives (OpenSHMEM 1.5 §9.9): broadcast, collect, fcollect, alltoall,
//! alltoalls (typed over the standard RMA types, and the `mem` forms), and the
//! reductions (`shmem_TYPENAME_{and,or,xor,max,min,sum,prod}_reduce`).
//!
//! All return 0, or nonzero after logging the error (an invalid team, a root outside the
//! team, a buffer outside the symmetric heap, a failed PE). Reductions on 4- and 8-byte
//! integers and on `float`/`double` run the runtime's reduce; on 1- and 2-byte integers
//! each PE reads every member's `source` between two team barriers and combines in team
//! order.

use std::ffi::c_int;
use std::ops::{BitAnd, BitOr, BitXor};

use symmem_runtime::collectives::{And, Max, Min, Or, Prod, ReduceOp, Reducible, Sum, Xor};
use symmem_runtime::{Error, Pod, Result, SymView};

use crate::rma::Bytes16;
use crate::teams::team_or_err;
use crate::{code, state, State};

/// A view of `len` elements at `addr`, as a `Result` (collectives return codes). A
/// collective of no elements still runs on every PE, so that a PE passing 0 where the
/// others pass more takes part in the same call (and `SYMMEM_CHECK_COLLECTIVES` reports
/// the mismatch) instead of pairing a bare barrier with their collective; C may pass any
/// pointer with 0 elements, NULL included, and an empty view at the heap's end stands in
/// for one outside the heap.
fn view<T>(s: &State, func: &'static str, addr: *const T, len: usize) -> Result<SymView<T>> {
    if len == 0 {
        if let Ok(v) = s.try_view(func, addr, 0) {
            return Ok(v);
        }
        let (base, heap_len) = s.rt.heap_local_range();
        return s.try_view(func, (base + heap_len) as *const T, 0);
    }
    s.try_view(func, addr, len)
}

/// `n × m` or an error naming the collective.
fn times(func: &'static str, n: usize, m: usize) -> Result<usize> {
    n.checked_mul(m).ok_or_else(|| Error::InvalidArgument {
        op: func,
        reason: format!("{n} elements × {m} PEs overflow"),
    })
}

/// `shmem_TYPENAME_broadcast`: root's `src` to `dest` on every team PE (root included).
fn broadcast<T: Pod>(
    func: &'static str,
    team: usize,
    dest: *mut T,
    src: *const T,
    n: usize,
    root: c_int,
) -> c_int {
    let s = state(func);
    code(
        func,
        (|| {
            let t = team_or_err(s, func, team)?;
            let root = usize::try_from(root).map_err(|_| Error::InvalidPe {
                op: func,
                pe: usize::MAX,
                n_pes: t.n_pes(),
                access: format!(" (PE_root {root} is negative)"),
            })?;
            t.broadcast(&*view(s, func, dest, n)?, &*view(s, func, src, n)?, n, root)
        })(),
    )
}

/// `shmem_TYPENAME_fcollect`: every team PE's `n` elements, concatenated in team order.
fn fcollect<T: Pod>(
    func: &'static str,
    team: usize,
    dest: *mut T,
    src: *const T,
    n: usize,
) -> c_int {
    let s = state(func);
    code(
        func,
        (|| {
            let t = team_or_err(s, func, team)?;
            let all = times(func, n, t.n_pes())?;
            t.fcollect(&*view(s, func, dest, all)?, &*view(s, func, src, n)?, n)
        })(),
    )
}

/// `shmem_TYPENAME_collect`: like fcollect, `n` may differ between PEs.
fn collect<T: Pod>(
    func: &'static str,
    team: usize,
    dest: *mut T,
    src: *const T,
    n: usize,
) -> c_int {
    let s = state(func);
    code(
        func,
        (|| {
            let t = team_or_err(s, func, team)?;
            // The total is only known after the exchange: `dest` may reach to the heap's
            // end, and the runtime checks that the sum of the sizes fits. A `dest` outside
            // the heap (NULL, where every PE passes 0) holds nothing.
            let (base, len) = s.rt.heap_local_range();
            let at = s.translate(dest as usize);
            let room = if s.rt.heap_offset_of(at).is_some() {
                (base + len).saturating_sub(at) / std::mem::size_of::<T>()
            } else {
                0
            };
            t.collect(&*view(s, func, dest, room)?, &*view(s, func, src, n)?, n)
        })(),
    )
}

/// `shmem_TYPENAME_alltoall`: block `j` of `src` on team PE `i` to block `i` of `dest`
/// on team PE `j`.
fn alltoall<T: Pod>(
    func: &'static str,
    team: usize,
    dest: *mut T,
    src: *const T,
    n: usize,
) -> c_int {
    let s = state(func);
    code(
        func,
        (|| {
            let t = team_or_err(s, func, team)?;
            let all = times(func, n, t.n_pes())?;
            t.alltoall(&*view(s, func, dest, all)?, &*view(s, func, src, all)?, n)
        })(),
    )
}

/// `shmem_TYPENAME_alltoalls`: as alltoall with strides: element `k` of block `j` is
/// `src[(j·n + k)·sst]` on the sender and `dest[(i·n + k)·dst]` on the receiver. Runs as
/// a team barrier, strided puts to every member, and a team barrier (which quiets).
fn alltoalls<T: Pod>(
    func: &'static str,
    team: usize,
    dest: *mut T,
    src: *const T,
    dst: isize,
    sst: isize,
    n: usize,
) -> c_int {
    let s = state(func);
    code(
        func,
        (|| {
            let t = team_or_err(s, func, team)?;
            let stride = |name: &str, v: isize| {
                usize::try_from(v)
                    .ok()
                    .filter(|&v| v >= 1)
                    .ok_or_else(|| Error::InvalidArgument {
                        op: func,
                        reason: format!("{name} {v} must be at least 1"),
                    })
            };
            let (dst, sst) = (stride("dst", dst)?, stride("sst", sst)?);
            if n == 0 {
                // The two barriers of every other call: PEs that pass more elements (a
                // mismatch nothing here can see) still leave with this one.
                t.barrier()?;
                return t.barrier();
            }
            let npes = t.n_pes();
            let span = |stride: usize| {
                times(func, n, npes)?
                    .checked_sub(1)
                    .and_then(|k| k.checked_mul(stride))
                    .and_then(|k| k.checked_add(1))
                    .ok_or_else(|| Error::InvalidArgument {
                        op: func,
                        reason: format!("{n} elements × {npes} PEs at stride {stride} overflow"),
                    })
            };
            let dview = view(s, func, dest.cast_const(), span(dst)?)?;
            let sview = view(s, func, src, span(sst)?)?;
            let me = s.rt.my_pe();
            let mut local = vec![T::zeroed(); span(sst)?];
            s.rt.get(sview.at(0), &mut local, me)?;
            t.barrier()?;
            let mine = t.my_pe();
            for j in 0..npes {
                let to = t.world_pe(j)?;
                s.rt.iput(
                    dview.at(mine * n * dst),
                    dst,
                    &local[j * n * sst..],
                    sst,
                    n,
                    to,
                )?;
            }
            t.barrier()
        })(),
    )
}

/// Exports the typed data-movement collectives for each `(TYPENAME, Rust type)`.
macro_rules! movers {
    ($($name:ident : $t:ty),* $(,)?) => { pastey::paste! { $(
        movers!(@one $t; [<shmem_ $name _broadcast>], [<shmem_ $name _collect>],
            [<shmem_ $name _fcollect>], [<shmem_ $name _alltoall>], [<shmem_ $name _alltoalls>]);
    )* } };
    (@one $t:ty; $b:ident, $c:ident, $f:ident, $a:ident, $s:ident) => {
        #[doc = concat!("`", stringify!($b), "` (§9.9.6): `PE_root`'s `source` to `dest` on every PE of `team`. 0 or nonzero.")]
        #[no_mangle]
        pub extern "C" fn $b(team: usize, dest: *mut $t, source: *const $t, nelems: usize, pe_root: c_int) -> c_int {
            broadcast(stringify!($b), team, dest, source, nelems, pe_root)
        }
        #[doc = concat!("`", stringify!($c), "` (§9.9.7): every PE's `nelems` (which may differ) concatenated in team order. 0 or nonzero.")]
        #[no_mangle]
        pub extern "C" fn $c(team: usize, dest: *mut $t, source: *const $t, nelems: usize) -> c_int {
            collect(stringify!($c), team, dest, source, nelems)
        }
        #[doc = concat!("`", stringify!($f), "` (§9.9.7): every PE's `nelems` concatenated in team order. 0 or nonzero.")]
        #[no_mangle]
        pub extern "C" fn $f(team: usize, dest: *mut $t, source: *const $t, nelems: usize) -> c_int {
            fcollect(stringify!($f), team, dest, source, nelems)
        }
        #[doc = concat!("`", stringify!($a), "` (§9.9.8): block `j` of `source` to PE `j`'s `dest`, block `my_pe`. 0 or nonzero.")]
        #[no_mangle]
        pub extern "C" fn $a(team: usize, dest: *mut $t, source: *const $t, nelems: usize) -> c_int {
            alltoall(stringify!($a), team, dest, source, nelems)
        }
        #[doc = concat!("`", stringify!($s), "` (§9.9.9): alltoall with element strides `dst` and `sst` (≥ 1). 0 or nonzero.")]
        #[no_mangle]
        pub extern "C" fn $s(team: usize, dest: *mut $t, source: *const $t, dst: isize, sst: isize, nelems: usize) -> c_int {
            alltoalls(stringify!($s), team, dest, source, dst, sst, nelems)
        }
    };
}

movers!(
    float: f32, double: f64, longdouble: Bytes16, char: i8, schar: i8, short: i16,
    int: i32, long: i64, longlong: i64, uchar: u8, ushort: u16, uint: u32, ulong: u64,
    ulonglong: u64, int8: i8, int16: i16, int32: i32, int64: i64, uint8: u8,
    uint16: u16, uint32: u32, uint64: u64, size: usize, ptrdiff: isize,
);
movers!(@one u8; shmem_broadcastmem, shmem_collectmem, shmem_fcollectmem, shmem_alltoallmem,
    shmem_alltoallsmem);

/// A reduction the runtime runs (4- and 8-byte integers, `float`, `double`).
fn native<T: Reducible, O: ReduceOp<T>>(
    func: &'static str,
    team: usize,
    dest: *mut T,
    src: *const T,
    n: usize,
    op: O,
) -> c_int {
    let s = state(func);
    code(
        func,
        (|| {
            let t = team_or_err(s, func, team)?;
            t.reduce(&*view(s, func, dest, n)?, &*view(s, func, src, n)?, n, op)
        })(),
    )
}

/// A reduction of another element type: every member's `src` combined with `f` in team
/// order, between two team barriers (so `dest` may be `src`).
fn generic<T: Pod>(
    func: &'static str,
    team: usize,
    dest: *mut T,
    src: *const T,
    n: usize,
    f: fn(T, T) -> T,
) -> c_int {
    let s = state(func);
    code(
        func,
        (|| {
            let t = team_or_err(s, func, team)?;
            if n == 0 {
                // The two barriers of every other call, as in `alltoalls`.
                t.barrier()?;
                return t.barrier();
            }
            let (dv, sv) = (view(s, func, dest, n)?, view(s, func, src, n)?);
            t.barrier()?;
            let mut acc = vec![T::zeroed(); n];
            let mut block = vec![T::zeroed(); n];
            for j in 0..t.n_pes() {
                s.rt.get(sv.at(0), &mut block, t.world_pe(j)?)?;
                if j == 0 {
                    acc.copy_from_slice(&block);
                } else {
                    for (a, b) in acc.iter_mut().zip(&block) {
                        *a = f(*a, *b);
                    }
                }
            }
            t.barrier()?;
            s.rt.put(dv.at(0), &acc, s.rt.my_pe())
        })(),
    )
}

/// Exports `shmem_<name>_<op>_reduce` for runtime-reduced types.
macro_rules! native_reduce {
    ($op:ident = $Op:ident; $($name:ident : $t:ty),* $(,)?) => { pastey::paste! { $(
        #[doc = concat!("`shmem_", stringify!($name), "_", stringify!($op), "_reduce` (§9.9.10): `dest[i]` = the ", stringify!($op), " of `source[i]` over `team`. 0 or nonzero.")]
        #[no_mangle]
        pub extern "C" fn [<shmem_ $name _ $op _reduce>](team: usize, dest: *mut $t, source: *const $t, nreduce: usize) -> c_int {
            native(concat!("shmem_", stringify!($name), "_", stringify!($op), "_reduce"), team, dest, source, nreduce, $Op)
        }
    )* } };
}

/// Exports `shmem_<name>_<op>_reduce` for types combined here, `a.$method(b)`.
macro_rules! generic_reduce {
    ($op:ident = $method:ident; $($name:ident : $t:ty),* $(,)?) => { pastey::paste! { $(
        #[doc = concat!("`shmem_", stringify!($name), "_", stringify!($op), "_reduce` (§9.9.10): `dest[i]` = the ", stringify!($op), " of `source[i]` over `team`. 0 or nonzero.")]
        #[no_mangle]
        pub extern "C" fn [<shmem_ $name _ $op _reduce>](team: usize, dest: *mut $t, source: *const $t, nreduce: usize) -> c_int {
            generic(concat!("shmem_", stringify!($name), "_", stringify!($op), "_reduce"), team, dest, source, nreduce, |a: $t, b: $t| a.$method(b))
        }
    )* } };
}

// Table 13 of OpenSHMEM 1.5: AND, OR, XOR on the bitwise types.
native_reduce!(and = And; uint: u32, ulong: u64, ulonglong: u64, longlong: i64, int32: i32, int64: i64,
    uint32: u32, uint64: u64, size: u64);
native_reduce!(or = Or; uint: u32, ulong: u64, ulonglong: u64, longlong: i64, int32: i32, int64: i64,
    uint32: u32, uint64: u64, size: u64);
native_reduce!(xor = Xor; uint: u32, ulong: u64, ulonglong: u64, longlong: i64, int32: i32, int64: i64,
    uint32: u32, uint64: u64, size: u64);
generic_reduce!(and = bitand; uchar: u8, ushort: u16, int8: i8, int16: i16, uint8: u8, uint16: u16);
generic_reduce!(or = bitor; uchar: u8, ushort: u16, int8: i8, int16: i16, uint8: u8, uint16: u16);
generic_reduce!(xor = bitxor; uchar: u8, ushort: u16, int8: i8, int16: i16, uint8: u8, uint16: u16);

/// MAX, MIN, SUM, PROD over the integer and floating types.
macro_rules! arithmetic {
    ($($op:ident = $Op:ident / $method:ident),* $(,)?) => { $(
        native_reduce!($op = $Op; int: i32, long: i64, longlong: i64, ptrdiff: i64, uint: u32,
            ulong: u64, ulonglong: u64, int32: i32, int64: i64, uint32: u32, uint64: u64,
            size: u64, float: f32, double: f64);
        generic_reduce!($op = $method; char: i8, schar: i8, short: i16, uchar: u8, ushort: u16,
            int8: i8, int16: i16, uint8: u8, uint16: u16);
    )* };
}

arithmetic!(
    max = Max / max,
    min = Min / min,
    sum = Sum / wrapping_add,
    prod = Prod / wrapping_mul
);
