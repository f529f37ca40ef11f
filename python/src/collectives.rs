//! The collectives over every PE (TEAM_WORLD) on symmetric arrays: broadcast, fcollect,
//! alltoall, reduce and reducescatter. Each PE calls them with the same arguments in the
//! same order; the runtime checks that they match (and names what differs). They run
//! with the GIL released; Ctrl-C stops their waits.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use symmem::collectives::{
    And, BitwiseReducible, Max, Min, Or, Prod, ReduceOp, Reducible, Sum, Xor,
};
use symmem::Runtime;

use crate::dtype::DType;
use crate::handle::runtime;
use crate::operands::{symmetric, view, Operand};
use crate::ops::blocking;

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

/// Copies all of `src` on PE `root` into `dst` on every PE (`shmem_broadcast`); `dst`
/// and `src` hold the same number of elements.
#[pyfunction]
pub fn broadcast(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    root: usize,
) -> PyResult<()> {
    const OP: &str = "broadcast";
    let rt = runtime()?;
    let (d, s) = pair(&rt, OP, dst, src)?;
    expect_len(OP, &d, s.numel(), "dst (as many as src)")?;
    let (dv, sv) = (
        view::<u8>(&rt, OP, &d, "dst", d.nbytes())?,
        view::<u8>(&rt, OP, &s, "src", s.nbytes())?,
    );
    blocking(py, || rt.team_world().broadcast(&dv, &sv, sv.len(), root))
}

/// Concatenates every PE's `src`, in PE order, into `dst` on every PE
/// (`shmem_fcollect`); `dst` holds `n_pes()` times the elements of `src`.
#[pyfunction]
pub fn fcollect(py: Python<'_>, dst: &Bound<'_, PyAny>, src: &Bound<'_, PyAny>) -> PyResult<()> {
    const OP: &str = "fcollect";
    let rt = runtime()?;
    let (d, s) = pair(&rt, OP, dst, src)?;
    expect_len(OP, &d, s.numel() * rt.n_pes(), "dst (n_pes() × src)")?;
    let (dv, sv) = (
        view::<u8>(&rt, OP, &d, "dst", d.nbytes())?,
        view::<u8>(&rt, OP, &s, "src", s.nbytes())?,
    );
    blocking(py, || rt.team_world().fcollect(&dv, &sv, sv.len()))
}

/// Block `j` of every PE's `src` goes to PE `j`, where the blocks land in PE order in
/// `dst` (`shmem_alltoall`); `src` and `dst` hold `n_pes()` equal blocks.
#[pyfunction]
pub fn alltoall(py: Python<'_>, dst: &Bound<'_, PyAny>, src: &Bound<'_, PyAny>) -> PyResult<()> {
    const OP: &str = "alltoall";
    let rt = runtime()?;
    let n = rt.n_pes();
    let (d, s) = pair(&rt, OP, dst, src)?;
    if s.numel() % n != 0 {
        return Err(PyValueError::new_err(format!(
            "{OP}: src must hold n_pes() = {n} equal blocks, has {} elements",
            s.numel()
        )));
    }
    expect_len(OP, &d, s.numel(), "dst (as many as src)")?;
    let block = s.nbytes() / n;
    let (dv, sv) = (
        view::<u8>(&rt, OP, &d, "dst", d.nbytes())?,
        view::<u8>(&rt, OP, &s, "src", s.nbytes())?,
    );
    blocking(py, || rt.team_world().alltoall(&dv, &sv, block))
}

/// Combines every PE's `src` element by element with `op` (`sum`, `prod`, `min`, `max`,
/// and for integers `and`, `or`, `xor`) into `dst` on every PE (`shmem_<op>_reduce`);
/// `dst` and `src` hold the same number of elements (they may be the same array).
#[pyfunction]
#[pyo3(signature = (dst, src, op="sum"))]
pub fn reduce(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    op: &str,
) -> PyResult<()> {
    const OP: &str = "reduce";
    let rt = runtime()?;
    let (d, s) = pair(&rt, OP, dst, src)?;
    expect_len(OP, &d, s.numel(), "dst (as many as src)")?;
    reduction(py, &rt, OP, &d, &s, s.numel(), op, false)
}

/// Block `j` of every PE's `src`, combined with `op` as [`reduce`], lands in `dst` on PE
/// `j` (`reducescatter`); `src` holds `n_pes()` blocks of `dst`'s size.
#[pyfunction]
#[pyo3(signature = (dst, src, op="sum"))]
pub fn reducescatter(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    op: &str,
) -> PyResult<()> {
    const OP: &str = "reducescatter";
    let rt = runtime()?;
    let (d, s) = pair(&rt, OP, dst, src)?;
    expect_len(OP, &s, d.numel() * rt.n_pes(), "src (n_pes() × dst)")?;
    reduction(py, &rt, OP, &d, &s, d.numel(), op, true)
}

/// A reduce (`scatter == false`) or reduce-scatter of `nelems` per block, dispatched on
/// the element type: bitwise operations exist for the integer types only.
#[allow(clippy::too_many_arguments)] // the collective's operands and its two choices
fn reduction(
    py: Python<'_>,
    rt: &Runtime,
    name: &'static str,
    d: &Operand,
    s: &Operand,
    nelems: usize,
    op: &str,
    scatter: bool,
) -> PyResult<()> {
    let r = Reduction {
        py,
        rt,
        name,
        d,
        s,
        nelems,
        scatter,
    };
    match d.dtype {
        DType::I32 => r.bitwise::<i32>(op),
        DType::I64 => r.bitwise::<i64>(op),
        DType::U32 => r.bitwise::<u32>(op),
        DType::U64 => r.bitwise::<u64>(op),
        DType::F32 => r.arithmetic::<f32>(op),
        DType::F64 => r.arithmetic::<f64>(op),
        other => Err(PyTypeError::new_err(format!(
            "{name}: reduces int32, int64, uint32, uint64, float32 or float64 arrays, got {}",
            other.name()
        ))),
    }
}

/// One reduction's arguments, for the typed steps below.
struct Reduction<'a, 'py> {
    py: Python<'py>,
    rt: &'a Runtime,
    name: &'static str,
    d: &'a Operand,
    s: &'a Operand,
    nelems: usize,
    scatter: bool,
}

impl Reduction<'_, '_> {
    /// Runs it with `o` on elements of type `T`.
    fn run<T: Reducible, O: ReduceOp<T> + Send>(&self, o: O) -> PyResult<()> {
        let dv = view::<T>(self.rt, self.name, self.d, "dst", self.d.numel())?;
        let sv = view::<T>(self.rt, self.name, self.s, "src", self.s.numel())?;
        let (team, n) = (self.rt.team_world(), self.nelems);
        if self.scatter {
            blocking(self.py, move || team.reducescatter(&dv, &sv, n, o))
        } else {
            blocking(self.py, move || team.reduce(&dv, &sv, n, o))
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
