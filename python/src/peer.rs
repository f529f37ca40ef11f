//! Direct views of a same-node peer's copy of a symmetric array (its heap is mapped into
//! this process): what `get_buffer` of the torch-style rendezvous handle returns. A peer
//! view counts as a view of its array: `free` is refused while it lives.

use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::array::{SymArray, ViewCount};
use crate::dlpack::{self, DlDevice};
use crate::dtype::DType;
use crate::errors::to_py;
use crate::handle::{self, runtime};
use crate::operands::{symmetric, view};

/// `shape` elements of `dtype` in PE `pe`'s copy of a symmetric array, read and written
/// in place through DLPack (`numpy.from_dlpack`, `torch.from_dlpack`). Loads and stores
/// through it are plain memory accesses: order them with the symmem calls (a barrier, a
/// signal) as for any P2P access. While it lives, `free()` of its array is refused (a
/// numpy/torch view it was made from counts already); after `finalize` it refuses to
/// export.
#[pyclass(module = "symmem._native", name = "PeerArray")]
pub struct PeerArray {
    /// The symmetric array (or view) it was made from, kept alive.
    base: Py<PyAny>,
    pe: usize,
    addr: usize,
    device: DlDevice,
    dtype: DType,
    shape: Vec<i64>,
    /// The runtime generation it was made in (see `handle::alive`).
    generation: u64,
    /// Its count among the views of `base`, when `base` is a symmetric array.
    _counted: Option<ViewCount>,
}

/// A view of `shape` elements of `dtype` starting `offset` elements (of `dtype`) into PE
/// `pe`'s copy of the symmetric operand `array`; fails, naming the route, for a peer whose
/// heap is not mapped here (another node, or P2P turned off).
#[pyfunction]
pub fn peer_array(
    array: &Bound<'_, PyAny>,
    pe: usize,
    offset: usize,
    shape: Vec<i64>,
    dtype: &str,
) -> PyResult<PeerArray> {
    const OP: &str = "peer_array";
    let rt = runtime()?;
    let dtype = DType::parse(dtype)
        .ok_or_else(|| PyValueError::new_err(format!("{OP}: unsupported dtype {dtype:?}")))?;
    let o = symmetric(&rt, OP, array, "array")?;
    if shape.iter().any(|&d| d < 0) {
        return Err(PyValueError::new_err(format!(
            "{OP}: shape {shape:?} has a negative extent"
        )));
    }
    let bytes = shape.iter().map(|&d| d as usize).product::<usize>() * dtype.size();
    let start = offset.checked_mul(dtype.size());
    if start
        .and_then(|s| s.checked_add(bytes))
        .is_none_or(|end| end > o.nbytes())
    {
        return Err(PyValueError::new_err(format!(
            "{OP}: shape {shape:?} of {} at element offset {offset} does not fit in the {} bytes of the array",
            dtype.name(),
            o.nbytes()
        )));
    }
    let offset = start.expect("checked above");
    let v = view::<u8>(&rt, OP, &o, "array", o.nbytes().max(1))?;
    let Some(base) = rt.ptr(&v, pe).map_err(to_py)? else {
        let route = rt.route_to(pe).map_err(to_py)?;
        return Err(PyValueError::new_err(format!(
            "{OP}: PE {pe}'s heap is not mapped into PE {} (route: {route}); use put/get instead",
            rt.my_pe()
        )));
    };
    // A symmetric array, or the tensor of `symmem.torch` that owns one (whose `free`
    // counts only the views torch shares its storage with); other views of an array hold
    // a DLPack export of it, counted already.
    let owner = match array.downcast::<SymArray>() {
        Ok(a) => Some(a.clone()),
        Err(_) => array
            .getattr(pyo3::intern!(array.py(), "_symmem_array"))
            .ok()
            .and_then(|a| a.downcast_into::<SymArray>().ok()),
    };
    let counted = owner.map(|a| a.borrow().count_view());
    Ok(PeerArray {
        base: array.clone().unbind(),
        pe,
        addr: base.as_ptr() as usize + offset,
        device: o.device,
        dtype,
        shape,
        generation: handle::generation(),
        _counted: counted,
    })
}

#[pymethods]
impl PeerArray {
    /// The extent of each dimension.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.shape)
    }

    /// The element type's numpy name.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.dtype.name()
    }

    /// The PE whose copy this is.
    #[getter]
    fn pe(&self) -> usize {
        self.pe
    }

    /// The symmetric array it views.
    #[getter]
    fn base(&self, py: Python<'_>) -> Py<PyAny> {
        self.base.clone_ref(py)
    }

    fn __dlpack_device__(&self) -> (i32, i32) {
        (self.device.device_type, self.device.device_id)
    }

    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        slf: &Bound<'_, Self>,
        stream: Option<PyObject>,
        max_version: Option<PyObject>,
        dl_device: Option<PyObject>,
        copy: Option<bool>,
    ) -> PyResult<PyObject> {
        let _ = (stream, dl_device);
        if !handle::alive(slf.borrow().generation) {
            return Err(PyBufferError::new_err(
                "__dlpack__: symmem was finalized; the peer's heap is unmapped",
            ));
        }
        let versioned = dlpack::in_place_request(slf.py(), max_version, copy, "a peer's memory")?;
        let me = slf.borrow();
        // Counted with every view: finalize waits for these too (the mapping goes).
        dlpack::export(
            slf.py(),
            slf.clone().into_any().unbind(),
            me.addr,
            me.device,
            me.dtype,
            &me.shape,
            vec![handle::LIVE_VIEWS.clone()],
            versioned,
        )
    }

    fn __repr__(&self) -> String {
        format!(
            "<view of PE {}'s copy: shape {:?}, {}>",
            self.pe,
            self.shape,
            self.dtype.name()
        )
    }
}
