//! The one-sided operations, atomics, waits and barriers on arrays. Transfers move the
//! whole of the local array; atomics and waits act on the first element of their
//! symmetric operand (a one-element view: `counter[i:i+1]`). Waits and barriers run with
//! the GIL released and stop on Ctrl-C. `put`, `get`, `put_signal`, `signal_wait_until`,
//! `quiet`, `barrier_all` and `sync_all` take `stream=` (see `streams.rs`).

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyInt;
use symmem::{Cmp, Runtime, SignalOp};

use crate::blocking::blocking;
use crate::dtype::DType;
use crate::errors::to_py;
use crate::handle::runtime;
use crate::operands::{local, same_layout, symmetric, transfer_local, view, Operand};
use crate::streams::{order, transfer_order, Order};

/// Transfers from this size up release the GIL while they copy.
const RELEASE_GIL_BYTES: usize = 64 << 10;

/// Runs `f`, with the GIL released when `bytes` is large.
fn transfer(
    py: Python<'_>,
    bytes: usize,
    f: impl FnOnce() -> symmem::Result<()> + Send,
) -> PyResult<()> {
    if bytes >= RELEASE_GIL_BYTES {
        blocking(py, f)
    } else {
        f().map_err(to_py)
    }
}

/// The bytes of a local operand.
fn bytes_of(o: &Operand) -> &[u8] {
    // SAFETY: the operand holds its producer's memory (DLPack) for the call; it is
    // contiguous host memory of `nbytes()` bytes (checked by `local`).
    unsafe { std::slice::from_raw_parts(o.addr as *const u8, o.nbytes()) }
}

/// The bytes of a local operand, to write.
#[allow(clippy::mut_from_ref)] // the memory is the producer's, not the operand's
fn bytes_of_mut(o: &Operand) -> &mut [u8] {
    // SAFETY: as `bytes_of`; Python gives no exclusivity, as with any buffer a C
    // extension writes (numpy's own ufuncs with `out=` alike).
    unsafe { std::slice::from_raw_parts_mut(o.addr as *mut u8, o.nbytes()) }
}

/// The comparison named `cmp`: `eq`, `ne`, `gt`, `ge`, `lt`, `le` (or `==`, `!=`, `>`,
/// `>=`, `<`, `<=`).
fn parse_cmp(op: &str, cmp: &str) -> PyResult<Cmp> {
    Ok(match cmp {
        "eq" | "==" => Cmp::Eq,
        "ne" | "!=" => Cmp::Ne,
        "gt" | ">" => Cmp::Gt,
        "ge" | ">=" => Cmp::Ge,
        "lt" | "<" => Cmp::Lt,
        "le" | "<=" => Cmp::Le,
        other => {
            return Err(PyValueError::new_err(format!(
                "{op}: unknown comparison {other:?} (eq, ne, gt, ge, lt, le)"
            )))
        }
    })
}

/// The signal operation named `op`: `set` or `add`.
fn parse_signal_op(op: &str, name: &str) -> PyResult<SignalOp> {
    match name {
        "set" => Ok(SignalOp::Set),
        "add" => Ok(SignalOp::Add),
        other => Err(PyValueError::new_err(format!(
            "{op}: unknown signal operation {other:?} (set, add)"
        ))),
    }
}

/// The symmetric signal word of `op`: the first element of a uint64 symmetric operand.
fn signal_word(rt: &Runtime, op: &'static str, sig: &Bound<'_, PyAny>) -> PyResult<Operand> {
    let s = symmetric(rt, op, sig, "sig")?;
    if s.dtype != DType::U64 || s.numel() == 0 {
        return Err(PyTypeError::new_err(format!(
            "{op}: sig must hold uint64 signal words (at least one), got {} of shape {:?}",
            s.dtype.name(),
            s.shape
        )));
    }
    Ok(s)
}

/// A transfer between a symmetric and a local array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    Put,
    PutNbi,
    Get,
    GetNbi,
}

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::Put => "put",
            Way::PutNbi => "put_nbi",
            Way::Get => "get",
            Way::GetNbi => "get_nbi",
        }
    }
}

/// Moves all of the local array into the symmetric one on `pe` (puts: `dst` symmetric,
/// `src` local) or back (gets: `src` symmetric, `dst` local). `put` and `get` take
/// `stream` (see `streams.rs`); the `_nbi` forms move host arrays at once.
fn transfer_call(
    py: Python<'_>,
    way: Way,
    dst: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    pe: usize,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let (op, rt) = (way.name(), runtime()?);
    let put = matches!(way, Way::Put | Way::PutNbi);
    let streamed = matches!(way, Way::Put | Way::Get);
    let local_operand = |obj, what| {
        if streamed {
            transfer_local(&rt, op, obj, what)
        } else {
            local(op, obj, what)
        }
    };
    let (d, s) = if put {
        (symmetric(&rt, op, dst, "dst")?, local_operand(src, "src")?)
    } else {
        (local_operand(dst, "dst")?, symmetric(&rt, op, src, "src")?)
    };
    same_layout(op, (&d, "dst"), (&s, "src"))?;
    let (sym, what) = if put { (&d, "dst") } else { (&s, "src") };
    let (loc, loc_what) = if put { (&s, "src") } else { (&d, "dst") };
    let order = if streamed {
        transfer_order(py, &rt, op, stream, loc, loc_what)?
    } else {
        Order::Now
    };
    let v = view::<u8>(&rt, op, sym, what, sym.nbytes())?;
    let r = v.at(0);
    if let Order::Queued(stream) = order {
        let n = loc.nbytes();
        // SAFETY: `loc` is contiguous memory of this PE's GPU holding `n` bytes (checked
        // by `transfer_local`, and by the runtime with the driver). It stays allocated
        // until the stream has run the copy under torch's caching-allocator rule (memory
        // freed on a stream is reused only behind that stream's work; a tensor of another
        // stream needs `record_stream`), as for every kernel torch queues.
        let queued = unsafe {
            if put {
                rt.put_on_stream_from(r, loc.addr as *const u8, n, pe, &stream)
            } else {
                rt.get_on_stream_into(loc.addr as *mut u8, r, n, pe, &stream)
            }
        };
        return queued.map_err(to_py);
    }
    match way {
        Way::Put => {
            let b = bytes_of(&s);
            transfer(py, b.len(), || rt.put(r, b, pe))
        }
        Way::PutNbi => {
            let b = bytes_of(&s);
            transfer(py, b.len(), || rt.put_nbi(r, b, pe))
        }
        Way::Get => {
            let b = bytes_of_mut(&d);
            transfer(py, b.len(), || rt.get(r, b, pe))
        }
        Way::GetNbi => {
            let b = bytes_of_mut(&d);
            transfer(py, b.len(), || rt.get_nbi(r, b, pe))
        }
    }
}

/// Puts all of `src` (local) into `dst` (symmetric) on PE `pe` (`shmem_put`). With a host
/// array: returns when `src` may be reused. With a CUDA tensor (GPU PEs): queued on
/// `stream` (default: torch's current stream), returning at once
/// (`nvshmemx_putmem_on_stream`).
#[pyfunction]
#[pyo3(signature = (dst, src, pe, stream=None))]
pub fn put(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    pe: usize,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    transfer_call(py, Way::Put, dst, src, pe, stream)
}

/// As [`put`] from a host array, returning at once: `src` must stay unchanged until
/// `quiet()` (`shmem_put_nbi`).
#[pyfunction]
pub fn put_nbi(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    pe: usize,
) -> PyResult<()> {
    transfer_call(py, Way::PutNbi, dst, src, pe, None)
}

/// Gets all of `src` (symmetric) on PE `pe` into `dst` (local) (`shmem_get`). Into a
/// host array: complete on return. Into a CUDA tensor (GPU PEs): queued on `stream`
/// (default: torch's current stream), returning at once (`nvshmemx_getmem_on_stream`).
#[pyfunction]
#[pyo3(signature = (dst, src, pe, stream=None))]
pub fn get(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    pe: usize,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    transfer_call(py, Way::Get, dst, src, pe, stream)
}

/// As [`get`] into a host array, returning at once: `dst` holds the data after `quiet()`
/// (`shmem_get_nbi`).
#[pyfunction]
pub fn get_nbi(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    pe: usize,
) -> PyResult<()> {
    transfer_call(py, Way::GetNbi, dst, src, pe, None)
}

/// Puts all of `src` into `dst` on PE `pe`, then updates the signal word `sig` there
/// (`set` or `add` `signal`); the peer never sees the signal before the data
/// (`shmem_put_signal`). A CUDA tensor `src` (GPU PEs) is queued on `stream` (default:
/// torch's current stream) with its signal, returning at once
/// (`nvshmemx_putmem_signal_on_stream`).
#[pyfunction]
#[pyo3(signature = (dst, src, sig, signal, pe, op="set", nbi=false, stream=None))]
#[allow(clippy::too_many_arguments)] // shmem_put_signal's arguments, and the options
pub fn put_signal(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    sig: &Bound<'_, PyAny>,
    signal: u64,
    pe: usize,
    op: &str,
    nbi: bool,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let name = if nbi { "put_signal_nbi" } else { "put_signal" };
    let rt = runtime()?;
    let sop = parse_signal_op(name, op)?;
    let d = symmetric(&rt, name, dst, "dst")?;
    let s = transfer_local(&rt, name, src, "src")?;
    same_layout(name, (&d, "dst"), (&s, "src"))?;
    let w = signal_word(&rt, name, sig)?;
    let order = transfer_order(py, &rt, name, stream, &s, "src")?;
    let v = view::<u8>(&rt, name, &d, "dst", d.nbytes())?;
    let sv = view::<u64>(&rt, name, &w, "sig", 1)?;
    if let Order::Queued(stream) = order {
        let (p, n) = (s.addr as *const u8, s.nbytes());
        // SAFETY: as for the queued put in `transfer_call`.
        let queued = unsafe {
            rt.put_signal_on_stream_from(v.at(0), p, n, sv.at(0), signal, sop, pe, &stream)
        };
        return queued.map_err(to_py);
    }
    let bytes = bytes_of(&s);
    transfer(py, bytes.len(), || {
        if nbi {
            rt.put_signal_nbi(v.at(0), bytes, sv.at(0), signal, sop, pe)
        } else {
            rt.put_signal(v.at(0), bytes, sv.at(0), signal, sop, pe)
        }
    })
}

/// Updates the signal word `sig` on PE `pe`: `set` or `add` `signal` (`shmem_signal_op`).
#[pyfunction]
#[pyo3(signature = (sig, signal, pe, op="set"))]
pub fn signal_op(sig: &Bound<'_, PyAny>, signal: u64, pe: usize, op: &str) -> PyResult<()> {
    let rt = runtime()?;
    let sop = parse_signal_op("signal_op", op)?;
    let w = signal_word(&rt, "signal_op", sig)?;
    let sv = view::<u64>(&rt, "signal_op", &w, "sig", 1)?;
    rt.signal_op(sv.at(0), signal, sop, pe).map_err(to_py)
}

/// This PE's signal word `sig` now (`shmem_signal_fetch`).
#[pyfunction]
pub fn signal_fetch(sig: &Bound<'_, PyAny>) -> PyResult<u64> {
    let rt = runtime()?;
    let w = signal_word(&rt, "signal_fetch", sig)?;
    let sv = view::<u64>(&rt, "signal_fetch", &w, "sig", 1)?;
    rt.signal_fetch(sv.at(0)).map_err(to_py)
}

/// Waits until this PE's signal word `sig` compares `cmp` to `value`; returns the value
/// seen (`shmem_signal_wait_until`). Releases the GIL; Ctrl-C stops it. Queued on a
/// stream (GPU PEs: `stream`, default torch's current stream), the stream waits instead
/// and the call returns None at once (`nvshmemx_signal_wait_until_on_stream`).
#[pyfunction]
#[pyo3(signature = (sig, cmp, value, stream=None))]
pub fn signal_wait_until(
    py: Python<'_>,
    sig: &Bound<'_, PyAny>,
    cmp: &str,
    value: u64,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<u64>> {
    const OP: &str = "signal_wait_until";
    let rt = runtime()?;
    let c = parse_cmp(OP, cmp)?;
    let w = signal_word(&rt, OP, sig)?;
    let sv = view::<u64>(&rt, OP, &w, "sig", 1)?;
    match order(py, &rt, OP, stream)? {
        Order::Queued(s) => rt
            .signal_wait_until_on_stream(sv.at(0), c, value, &s)
            .map(|()| None)
            .map_err(to_py),
        Order::Now => blocking(py, || rt.signal_wait_until(sv.at(0), c, value)).map(Some),
    }
}

/// Runs `$body` with `$T` the Rust type of the integer dtype `$dtype`, or fails naming
/// `$op` and the types an integer operation takes.
macro_rules! with_int {
    ($op:expr, $dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            DType::I32 => {
                type $T = i32;
                $body
            }
            DType::I64 => {
                type $T = i64;
                $body
            }
            DType::U32 => {
                type $T = u32;
                $body
            }
            DType::U64 => {
                type $T = u64;
                $body
            }
            other => Err(PyTypeError::new_err(format!(
                "{}: needs an int32, int64, uint32 or uint64 array, got {}",
                $op,
                other.name()
            ))),
        }
    };
}

/// `obj`, argument `what` of `op`, as a `T`: the type `dtype` of its `ivar`.
fn int_value<'py, T: FromPyObject<'py>>(
    op: &str,
    what: &str,
    obj: &Bound<'py, PyAny>,
    dtype: DType,
) -> PyResult<T> {
    obj.extract().map_err(|_| {
        if obj.is_instance_of::<PyInt>() {
            PyValueError::new_err(format!(
                "{op}: {what} {obj} does not fit ivar's type {}",
                dtype.name()
            ))
        } else {
            let ty = obj.get_type().name().map_or("?".into(), |n| n.to_string());
            PyTypeError::new_err(format!(
                "{op}: {what} must be an int (ivar holds {}), not {ty}",
                dtype.name()
            ))
        }
    })
}

/// The integer word `ivar` (first element of a symmetric operand) of `op`.
fn int_word(rt: &Runtime, op: &'static str, ivar: &Bound<'_, PyAny>) -> PyResult<Operand> {
    let w = symmetric(rt, op, ivar, "ivar")?;
    if w.numel() == 0 {
        return Err(PyValueError::new_err(format!(
            "{op}: ivar is empty; pass the element to act on (a one-element view such as a[i:i+1])"
        )));
    }
    Ok(w)
}

/// Waits until this PE's `ivar` compares `cmp` to `value`; returns the value seen
/// (`shmem_wait_until`). Releases the GIL; Ctrl-C stops it.
#[pyfunction]
pub fn wait_until(
    py: Python<'_>,
    ivar: &Bound<'_, PyAny>,
    cmp: &str,
    value: &Bound<'_, PyAny>,
) -> PyResult<PyObject> {
    let rt = runtime()?;
    let c = parse_cmp("wait_until", cmp)?;
    let w = int_word(&rt, "wait_until", ivar)?;
    with_int!("wait_until", w.dtype, T => {
        let v = view::<T>(&rt, "wait_until", &w, "ivar", 1)?;
        let value: T = int_value("wait_until", "value", value, w.dtype)?;
        let seen = blocking(py, || rt.wait_until(v.at(0), c, value))?;
        Ok(seen.into_pyobject(py)?.into_any().unbind())
    })
}

/// Whether this PE's `ivar` compares `cmp` to `value` now (`shmem_test`).
#[pyfunction]
pub fn test(ivar: &Bound<'_, PyAny>, cmp: &str, value: &Bound<'_, PyAny>) -> PyResult<bool> {
    let rt = runtime()?;
    let c = parse_cmp("test", cmp)?;
    let w = int_word(&rt, "test", ivar)?;
    with_int!("test", w.dtype, T => {
        let v = view::<T>(&rt, "test", &w, "ivar", 1)?;
        let value: T = int_value("test", "value", value, w.dtype)?;
        rt.test(v.at(0), c, value).map_err(to_py)
    })
}

/// An atomic of the integer word `ivar` on PE `pe`, taking the operands in `args`: what
/// each Python `atomic_*` function runs.
fn amo(
    py: Python<'_>,
    op: &'static str,
    ivar: &Bound<'_, PyAny>,
    args: &[&Bound<'_, PyAny>],
    pe: usize,
) -> PyResult<PyObject> {
    let rt = runtime()?;
    let w = int_word(&rt, op, ivar)?;
    with_int!(op, w.dtype, T => {
        let v = view::<T>(&rt, op, &w, "ivar", 1)?;
        let r = v.at(0);
        // compare_swap's operands are (cond, value); the others' is (value).
        let what = |i: usize| if args.len() == 2 && i == 0 { "cond" } else { "value" };
        let arg = |i: usize| -> PyResult<T> { int_value(op, what(i), args[i], w.dtype) };
        let none = || Ok(py.None());
        let val = |x: T| -> PyResult<PyObject> { Ok(x.into_pyobject(py)?.into_any().unbind()) };
        match op {
            "atomic_fetch" => val(rt.atomic_fetch(r, pe).map_err(to_py)?),
            "atomic_set" => rt.atomic_set(r, arg(0)?, pe).map_err(to_py).and_then(|()| none()),
            "atomic_swap" => val(rt.atomic_swap(r, arg(0)?, pe).map_err(to_py)?),
            "atomic_compare_swap" => val(rt.atomic_compare_swap(r, arg(0)?, arg(1)?, pe).map_err(to_py)?),
            "atomic_fetch_add" => val(rt.atomic_fetch_add(r, arg(0)?, pe).map_err(to_py)?),
            "atomic_add" => rt.atomic_add(r, arg(0)?, pe).map_err(to_py).and_then(|()| none()),
            "atomic_fetch_inc" => val(rt.atomic_fetch_inc(r, pe).map_err(to_py)?),
            "atomic_inc" => rt.atomic_inc(r, pe).map_err(to_py).and_then(|()| none()),
            "atomic_fetch_and" => val(rt.atomic_fetch_and(r, arg(0)?, pe).map_err(to_py)?),
            "atomic_and" => rt.atomic_and(r, arg(0)?, pe).map_err(to_py).and_then(|()| none()),
            "atomic_fetch_or" => val(rt.atomic_fetch_or(r, arg(0)?, pe).map_err(to_py)?),
            "atomic_or" => rt.atomic_or(r, arg(0)?, pe).map_err(to_py).and_then(|()| none()),
            "atomic_fetch_xor" => val(rt.atomic_fetch_xor(r, arg(0)?, pe).map_err(to_py)?),
            "atomic_xor" => rt.atomic_xor(r, arg(0)?, pe).map_err(to_py).and_then(|()| none()),
            other => unreachable!("no atomic named {other}"),
        }
    })
}

/// Defines the Python function of an atomic with no operand (`$name(ivar, pe)`).
macro_rules! amo0 {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[pyfunction]
        pub fn $name(py: Python<'_>, ivar: &Bound<'_, PyAny>, pe: usize) -> PyResult<PyObject> {
            amo(py, stringify!($name), ivar, &[], pe)
        }
    };
}

/// Defines the Python function of an atomic with one operand (`$name(ivar, value, pe)`).
macro_rules! amo1 {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[pyfunction]
        pub fn $name(
            py: Python<'_>,
            ivar: &Bound<'_, PyAny>,
            value: &Bound<'_, PyAny>,
            pe: usize,
        ) -> PyResult<PyObject> {
            amo(py, stringify!($name), ivar, &[value], pe)
        }
    };
}

amo0!(
    /// `ivar` on PE `pe`, read atomically (`shmem_atomic_fetch`).
    atomic_fetch
);
amo1!(
    /// Sets `ivar` on PE `pe` to `value` atomically (`shmem_atomic_set`).
    atomic_set
);
amo1!(
    /// Swaps `value` into `ivar` on PE `pe`; returns the old value (`shmem_atomic_swap`).
    atomic_swap
);
amo1!(
    /// Adds `value` to `ivar` on PE `pe`; returns the old value (`shmem_atomic_fetch_add`).
    atomic_fetch_add
);
amo1!(
    /// Adds `value` to `ivar` on PE `pe` (`shmem_atomic_add`).
    atomic_add
);
amo0!(
    /// Adds 1 to `ivar` on PE `pe`; returns the old value (`shmem_atomic_fetch_inc`).
    atomic_fetch_inc
);
amo0!(
    /// Adds 1 to `ivar` on PE `pe` (`shmem_atomic_inc`).
    atomic_inc
);
amo1!(
    /// ANDs `value` into `ivar` on PE `pe`; returns the old value.
    atomic_fetch_and
);
amo1!(
    /// ANDs `value` into `ivar` on PE `pe`.
    atomic_and
);
amo1!(
    /// ORs `value` into `ivar` on PE `pe`; returns the old value.
    atomic_fetch_or
);
amo1!(
    /// ORs `value` into `ivar` on PE `pe`.
    atomic_or
);
amo1!(
    /// XORs `value` into `ivar` on PE `pe`; returns the old value.
    atomic_fetch_xor
);
amo1!(
    /// XORs `value` into `ivar` on PE `pe`.
    atomic_xor
);

/// Stores `value` in `ivar` on PE `pe` if it equals `cond`; returns the old value
/// (`shmem_atomic_compare_swap`).
#[pyfunction]
pub fn atomic_compare_swap(
    py: Python<'_>,
    ivar: &Bound<'_, PyAny>,
    cond: &Bound<'_, PyAny>,
    value: &Bound<'_, PyAny>,
    pe: usize,
) -> PyResult<PyObject> {
    amo(py, "atomic_compare_swap", ivar, &[cond, value], pe)
}

/// Orders this PE's earlier puts, AMOs and signals to each PE before its later ones
/// (`shmem_fence`).
#[pyfunction]
pub fn fence() -> PyResult<()> {
    runtime()?.fence().map_err(to_py)
}

/// Completes every earlier operation of this PE (`shmem_quiet`). Queued on a stream
/// (GPU PEs: `stream`, default torch's current stream), it completes the stream's
/// earlier operations before its later ones, and returns at once
/// (`nvshmemx_quiet_on_stream`); `stream="host"` completes the host's own.
#[pyfunction]
#[pyo3(signature = (stream=None))]
pub fn quiet(py: Python<'_>, stream: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    let rt = runtime()?;
    match order(py, &rt, "quiet", stream)? {
        Order::Queued(s) => rt.quiet_on_stream(&s).map_err(to_py),
        Order::Now => blocking(py, || rt.quiet()),
    }
}

/// Quiet, then waits for every PE (`shmem_barrier_all`). Releases the GIL. Queued on a
/// stream (GPU PEs), the stream's later work waits instead and the call returns at once
/// (`nvshmemx_barrier_all_on_stream`).
#[pyfunction]
#[pyo3(signature = (stream=None))]
pub fn barrier_all(py: Python<'_>, stream: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    let rt = runtime()?;
    match order(py, &rt, "barrier_all", stream)? {
        Order::Queued(s) => rt.barrier_all_on_stream(&s).map_err(to_py),
        Order::Now => blocking(py, || rt.barrier_all()),
    }
}

/// Waits for every PE, without completing operations (`shmem_sync_all`). Releases the
/// GIL. Queued on a stream (GPU PEs), the stream waits instead and the call returns at
/// once (`nvshmemx_team_sync_on_stream` on TEAM_WORLD).
#[pyfunction]
#[pyo3(signature = (stream=None))]
pub fn sync_all(py: Python<'_>, stream: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    let rt = runtime()?;
    match order(py, &rt, "sync_all", stream)? {
        Order::Queued(s) => rt.team_world().sync_on_stream(&s).map_err(to_py),
        Order::Now => blocking(py, || rt.sync_all()),
    }
}
