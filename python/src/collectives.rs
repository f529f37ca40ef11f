//! The collectives on symmetric arrays over a team (`team=`, TEAM_WORLD by default):
//! broadcast, fcollect, alltoall, reduce and reducescatter. Each PE of the team calls them
//! with the same arguments in the same order; the runtime checks that they match (and
//! names what differs). They run with the GIL released; Ctrl-C stops their waits. With a
//! stream (GPU PEs: `stream=`, default torch's current stream; see `streams.rs`) each is
//! queued there as the runtime's `Team::*_on_stream` and returns at once.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use symmem::collectives::{
    And, BitwiseReducible, Max, Min, Or, Prod, ReduceOp, Reducible, Sum, Xor,
};
use symmem::{Runtime, Team};

use crate::blocking::blocking;
use crate::dtype::DType;
use crate::errors::to_py;
use crate::handle::runtime;
use crate::operands::{symmetric, view, Operand};
use crate::streams::{order, Order};
use crate::team::PyTeam;

/// Runs `f` over `team`, or TEAM_WORLD when there is none.
pub(crate) fn over<R>(
    rt: &Runtime,
    team: Option<PyRef<'_, PyTeam>>,
    f: impl FnOnce(&Team<'_>) -> PyResult<R>,
) -> PyResult<R> {
    match team {
        Some(t) => f(t.lock()?.team()),
        None => f(&rt.team_world()),
    }
}

/// Both symmetric operands of a collective, of one type.
fn pair(
    rt: &Runtime,
    op: &'static str,
    dst: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
) -> PyResult<(Operand, Operand)> {
    let d = symmetric(rt, op, dst, "dst")?;
    let s = symmetric(rt, op, src, "src")?;
    if d.dtype != s.dtype {
        return Err(PyTypeError::new_err(format!(
            "{op}: dst is {} but src is {}",
            d.dtype.name(),
            s.dtype.name()
        )));
    }
    Ok((d, s))
}

/// Fails unless `o` holds exactly `want` elements (`what`: the argument and the rule).
fn expect_len(op: &str, o: &Operand, want: usize, what: &str) -> PyResult<()> {
    if o.numel() != want {
        return Err(PyValueError::new_err(format!(
            "{op}: {what} must hold {want} elements, has {} (shape {:?})",
            o.numel(),
            o.shape
        )));
    }
    Ok(())
}

/// Copies all of `src` on team PE `root` into `dst` on every PE of the team
/// (`shmem_broadcast`); `dst` and `src` hold the same number of elements.
#[pyfunction]
#[pyo3(signature = (dst, src, root, team=None, stream=None))]
pub fn broadcast(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    root: usize,
    team: Option<PyRef<'_, PyTeam>>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    const OP: &str = "broadcast";
    let rt = runtime()?;
    let (d, s) = pair(&rt, OP, dst, src)?;
    let how = order(py, &rt, OP, stream)?;
    expect_len(OP, &d, s.numel(), "dst (as many as src)")?;
    let (dv, sv) = (
        view::<u8>(&rt, OP, &d, "dst", d.nbytes())?,
        view::<u8>(&rt, OP, &s, "src", s.nbytes())?,
    );
    over(&rt, team, |t| match &how {
        Order::Queued(st) => t
            .broadcast_on_stream(&dv, &sv, sv.len(), root, st)
            .map_err(to_py),
        Order::Now => blocking(py, || t.broadcast(&dv, &sv, sv.len(), root)),
    })
}

/// Concatenates every team PE's `src`, in team order, into `dst` on every PE of the team
/// (`shmem_fcollect`); `dst` holds the team's `n_pes` times the elements of `src`.
#[pyfunction]
#[pyo3(signature = (dst, src, team=None, stream=None))]
pub fn fcollect(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    team: Option<PyRef<'_, PyTeam>>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    const OP: &str = "fcollect";
    let rt = runtime()?;
    let (d, s) = pair(&rt, OP, dst, src)?;
    let how = order(py, &rt, OP, stream)?;
    over(&rt, team, |t| {
        expect_len(OP, &d, s.numel() * t.n_pes(), "dst (n_pes × src)")?;
        let (dv, sv) = (
            view::<u8>(&rt, OP, &d, "dst", d.nbytes())?,
            view::<u8>(&rt, OP, &s, "src", s.nbytes())?,
        );
        match &how {
            Order::Queued(st) => t.fcollect_on_stream(&dv, &sv, sv.len(), st).map_err(to_py),
            Order::Now => blocking(py, || t.fcollect(&dv, &sv, sv.len())),
        }
    })
}

/// Block `j` of every team PE's `src` goes to team PE `j`, where the blocks land in team
/// order in `dst` (`shmem_alltoall`); `src` and `dst` hold `n_pes` equal blocks.
#[pyfunction]
#[pyo3(signature = (dst, src, team=None, stream=None))]
pub fn alltoall(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    team: Option<PyRef<'_, PyTeam>>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    const OP: &str = "alltoall";
    let rt = runtime()?;
    let (d, s) = pair(&rt, OP, dst, src)?;
    let how = order(py, &rt, OP, stream)?;
    expect_len(OP, &d, s.numel(), "dst (as many as src)")?;
    over(&rt, team, |t| {
        let n = t.n_pes();
        if s.numel() % n != 0 {
            return Err(PyValueError::new_err(format!(
                "{OP}: src must hold the team's n_pes = {n} equal blocks, has {} elements",
                s.numel()
            )));
        }
        let block = s.nbytes() / n;
        let (dv, sv) = (
            view::<u8>(&rt, OP, &d, "dst", d.nbytes())?,
            view::<u8>(&rt, OP, &s, "src", s.nbytes())?,
        );
        match &how {
            Order::Queued(st) => t.alltoall_on_stream(&dv, &sv, block, st).map_err(to_py),
            Order::Now => blocking(py, || t.alltoall(&dv, &sv, block)),
        }
    })
}

/// Combines every team PE's `src` element by element with `op` (`sum`, `prod`, `min`,
/// `max`, and for integers `and`, `or`, `xor`; on integers, float16, bfloat16, float32 and
/// float64, the 16-bit floats rounded at every step) into `dst` on every PE of the team
/// (`shmem_<op>_reduce`); `dst` and `src` hold the same number of elements (they may be
/// the same array).
#[pyfunction]
#[pyo3(signature = (dst, src, op="sum", team=None, stream=None))]
pub fn reduce(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    op: &str,
    team: Option<PyRef<'_, PyTeam>>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    const OP: &str = "reduce";
    let rt = runtime()?;
    let (d, s) = pair(&rt, OP, dst, src)?;
    let how = order(py, &rt, OP, stream)?;
    expect_len(OP, &d, s.numel(), "dst (as many as src)")?;
    over(&rt, team, |t| {
        let r = Reduction {
            py,
            rt: &rt,
            team: t,
            name: OP,
            d: &d,
            s: &s,
            nelems: s.numel(),
            scatter: false,
            how: &how,
        };
        r.dispatch(op)
    })
}

/// Block `j` of every team PE's `src`, combined with `op` as [`reduce`], lands in `dst`
/// on team PE `j` (`reducescatter`); `src` holds `n_pes` blocks of `dst`'s size.
#[pyfunction]
#[pyo3(signature = (dst, src, op="sum", team=None, stream=None))]
pub fn reducescatter(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    op: &str,
    team: Option<PyRef<'_, PyTeam>>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    const OP: &str = "reducescatter";
    let rt = runtime()?;
    let (d, s) = pair(&rt, OP, dst, src)?;
    let how = order(py, &rt, OP, stream)?;
    over(&rt, team, |t| {
        expect_len(OP, &s, d.numel() * t.n_pes(), "src (n_pes × dst)")?;
        let r = Reduction {
            py,
            rt: &rt,
            team: t,
            name: OP,
            d: &d,
            s: &s,
            nelems: d.numel(),
            scatter: true,
            how: &how,
        };
        r.dispatch(op)
    })
}

/// One reduction's arguments, for the typed steps below.
struct Reduction<'a, 'py> {
    py: Python<'py>,
    rt: &'a Runtime,
    team: &'a Team<'a>,
    name: &'static str,
    d: &'a Operand,
    s: &'a Operand,
    nelems: usize,
    scatter: bool,
    /// At once or queued on a stream.
    how: &'a Order,
}

impl Reduction<'_, '_> {
    /// Runs it with `op`, dispatched on the element type: bitwise operations exist for
    /// the integer types only; fp8 types move as bytes but do not reduce.
    fn dispatch(&self, op: &str) -> PyResult<()> {
        match self.d.dtype {
            DType::I32 => self.bitwise::<i32>(op),
            DType::I64 => self.bitwise::<i64>(op),
            DType::U32 => self.bitwise::<u32>(op),
            DType::U64 => self.bitwise::<u64>(op),
            DType::F32 => self.arithmetic::<f32>(op),
            DType::F64 => self.arithmetic::<f64>(op),
            DType::Bf16 => self.arithmetic::<symmem::bf16>(op),
            DType::F16 => self.arithmetic::<symmem::f16>(op),
            other if other.is_fp8() => Err(PyTypeError::new_err(format!(
                "{}: {} arrays move as bytes (put, get, put_signal, broadcast, fcollect, alltoall) but do not reduce; convert to bfloat16 or float32 first",
                self.name,
                other.name()
            ))),
            other => Err(PyTypeError::new_err(format!(
                "{}: reduces int32, int64, uint32, uint64, float16, bfloat16, float32 or float64 arrays, got {}",
                self.name,
                other.name()
            ))),
        }
    }

    /// Runs it with `o` on elements of type `T`.
    fn run<T: Reducible, O: ReduceOp<T> + Send>(&self, o: O) -> PyResult<()> {
        let dv = view::<T>(self.rt, self.name, self.d, "dst", self.d.numel())?;
        let sv = view::<T>(self.rt, self.name, self.s, "src", self.s.numel())?;
        let (team, n) = (self.team, self.nelems);
        match (self.how, self.scatter) {
            (Order::Queued(st), true) => team
                .reducescatter_on_stream(&dv, &sv, n, o, st)
                .map_err(to_py),
            (Order::Queued(st), false) => team.reduce_on_stream(&dv, &sv, n, o, st).map_err(to_py),
            (Order::Now, true) => blocking(self.py, move || team.reducescatter(&dv, &sv, n, o)),
            (Order::Now, false) => blocking(self.py, move || team.reduce(&dv, &sv, n, o)),
        }
    }

    /// `op` among the arithmetic reductions; the bitwise ones are refused.
    fn arithmetic<T: Reducible>(&self, op: &str) -> PyResult<()> {
        match op {
            "sum" => self.run::<T, _>(Sum),
            "prod" => self.run::<T, _>(Prod),
            "min" => self.run::<T, _>(Min),
            "max" => self.run::<T, _>(Max),
            "and" | "or" | "xor" => Err(PyTypeError::new_err(format!(
                "{}: {op} is bitwise: it takes integer arrays",
                self.name
            ))),
            other => Err(PyValueError::new_err(format!(
                "{}: unknown reduction {other:?} (sum, prod, min, max, and, or, xor)",
                self.name
            ))),
        }
    }

    /// `op` among every reduction, on an integer type.
    fn bitwise<T: BitwiseReducible>(&self, op: &str) -> PyResult<()> {
        match op {
            "and" => self.run::<T, _>(And),
            "or" => self.run::<T, _>(Or),
            "xor" => self.run::<T, _>(Xor),
            other => self.arithmetic::<T>(other),
        }
    }
}
