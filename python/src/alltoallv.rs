//! `alltoallv`: the all-to-all of rows with per-PE counts (the runtime's
//! `Team::alltoallv`, torch's `all_to_all_vdev`) on symmetric arrays. With a stream (GPU
//! PEs: `stream=`, default torch's current stream) it is queued there as
//! `Team::alltoallv_on_stream`, whose kernel reads the splits on the device: the host
//! never waits for them. On CPU PEs (or `stream="host"`) it is the blocking host
//! collective.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::blocking::blocking;
use crate::collectives::over;
use crate::dtype::DType;
use crate::errors::to_py;
use crate::handle::runtime;
use crate::operands::{symmetric, view, Operand};
use crate::streams::{order, Order};
use crate::team::PyTeam;

/// `in_splits[j]` rows of `input` go to team PE `j` (this PE's rows for each PE in team
/// order from row 0); the rows every PE sends here land in `out` in team order, packed
/// from row 0, and `out_splits_offsets` (2 × n_pes int64) gets the rows from each PE
/// (first half) and the row of `out` where they start (second half). Rows are
/// everything after the first dimension; `input` and `out` have the same row shape and
/// dtype. All four are symmetric arrays (or views of them), the same shapes on every PE.
/// Queued on a stream, rows that do not fit `out` are dropped (the counts still include
/// them); the host form fails on every PE instead.
#[pyfunction]
#[pyo3(signature = (out, input, in_splits, out_splits_offsets, team=None, stream=None))]
pub fn alltoallv(
    py: Python<'_>,
    out: &Bound<'_, PyAny>,
    input: &Bound<'_, PyAny>,
    in_splits: &Bound<'_, PyAny>,
    out_splits_offsets: &Bound<'_, PyAny>,
    team: Option<PyRef<'_, PyTeam>>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    const OP: &str = "alltoallv";
    let rt = runtime()?;
    let o = symmetric(&rt, OP, out, "out")?;
    let i = symmetric(&rt, OP, input, "input")?;
    let s = symmetric(&rt, OP, in_splits, "in_splits")?;
    let so = symmetric(&rt, OP, out_splits_offsets, "out_splits_offsets")?;
    let row_bytes = row_bytes(OP, &o, &i)?;
    for (what, x) in [("in_splits", &s), ("out_splits_offsets", &so)] {
        if x.dtype != DType::I64 {
            return Err(PyTypeError::new_err(format!(
                "{OP}: {what} must be int64, got {}",
                x.dtype.name()
            )));
        }
    }
    let how = order(py, &rt, OP, stream)?;
    // An array of no rows may export no address (DLPack's null pointer): it moves
    // nothing, so an empty view at `in_splits` stands in for it.
    let rows = |x: &Operand, what| {
        let at = if x.nbytes() == 0 { &s } else { x };
        view::<u8>(&rt, OP, at, what, x.nbytes())
    };
    let (ov, iv) = (rows(&o, "out")?, rows(&i, "input")?);
    let (sv, sov) = (
        view::<i64>(&rt, OP, &s, "in_splits", s.numel())?,
        view::<i64>(&rt, OP, &so, "out_splits_offsets", so.numel())?,
    );
    over(&rt, team, |t| match &how {
        Order::Queued(st) => t
            .alltoallv_on_stream(&ov, &iv, &sv, &sov, row_bytes, st)
            .map_err(to_py),
        Order::Now => blocking(py, || t.alltoallv(&ov, &iv, &sv, &sov, row_bytes)),
    })
}

/// Bytes of one row (everything after the first dimension) of `input`, which `out`'s
/// rows must match in dtype and shape.
fn row_bytes(op: &str, out: &Operand, input: &Operand) -> PyResult<usize> {
    if out.shape.is_empty() || input.shape.is_empty() {
        return Err(PyValueError::new_err(format!(
            "{op}: out and input need a first dimension of rows"
        )));
    }
    if out.dtype != input.dtype || out.shape[1..] != input.shape[1..] {
        return Err(PyTypeError::new_err(format!(
            "{op}: out's rows ({}, {:?}) differ from input's ({}, {:?})",
            out.dtype.name(),
            &out.shape[1..],
            input.dtype.name(),
            &input.shape[1..]
        )));
    }
    let elems: usize = input.shape[1..]
        .iter()
        .map(|&d| d.max(0) as usize)
        .product();
    Ok(elems * input.dtype.size())
}
