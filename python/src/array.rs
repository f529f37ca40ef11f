//! `SymmetricArray`: one collective allocation of the symmetric heap, with a shape and an
//! element type, that numpy, torch and cupy see without a copy through DLPack.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use symmem::{Runtime, SymBuf};

use crate::dlpack::{self, DlDevice, DEVICE_CPU, DEVICE_CUDA};
use crate::dtype::DType;
use crate::errors::{to_py, UnfreedArrayWarning};
use crate::handle;

/// Alignment of every symmetric array: what `cudaMalloc` gives, enough for any vector load.
const ALIGN: usize = 256;

/// Where this PE's symmetric heap is, as DLPack names devices.
pub fn heap_device(rt: &Runtime) -> DlDevice {
    match rt.gpu_ordinal() {
        Some(g) => DlDevice {
            device_type: DEVICE_CUDA,
            device_id: g as i32,
        },
        None => DlDevice {
            device_type: DEVICE_CPU,
            device_id: 0,
        },
    }
}

/// A symmetric array: the same allocation on every PE. Pass it (or a numpy/torch view of
/// it) as the symmetric operand of `put`, `get`, the atomics and the waits; turn it into a
/// numpy or torch array with `numpy.from_dlpack(a)` / `torch.from_dlpack(a)` (no copy: CPU
/// memory on a CPU PE, the PE's GPU on a GPU PE). Free it with `free()` on every PE, or
/// use it as a context manager; one dropped without either is reported
/// (`UnfreedArrayWarning`) and freed at the next collective point at which every PE has
/// dropped it. After `finalize` it refuses every use.
#[pyclass(module = "symmem._native", name = "SymmetricArray")]
pub struct SymArray {
    buf: Option<SymBuf<u8>>,
    dtype: DType,
    shape: Vec<i64>,
    addr: usize,
    device: DlDevice,
    /// DLPack views of this array that consumers hold, and peer views of it on this PE.
    live: Arc<AtomicUsize>,
    /// The runtime generation it was allocated in (see `handle::alive`).
    generation: u64,
}

/// One view of a symmetric array counted while it lives: a peer view holds one, so that
/// `free` is refused while it exists, as for a numpy or torch view.
pub struct ViewCount(Arc<AtomicUsize>);

impl Drop for ViewCount {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl SymArray {
    /// Allocates `shape` elements of `dtype` on every PE (collective), zeroed (then a
    /// barrier, so no PE writes into a peer's copy before it is zeroed) when `zero`.
    pub fn allocate(shape: Vec<i64>, dtype: DType, zero: bool) -> PyResult<SymArray> {
        if let Some(bad) = shape.iter().find(|&&d| d < 0) {
            return Err(PyValueError::new_err(format!(
                "shape {shape:?} has a negative extent {bad}"
            )));
        }
        let numel = shape
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d as usize));
        let nbytes = numel
            .and_then(|n| n.checked_mul(dtype.size()))
            .ok_or_else(|| PyValueError::new_err(format!("shape {shape:?} is too large")))?;
        let rt = handle::runtime()?;
        // A collective point: arrays every PE dropped are freed first.
        handle::reclaim(&rt).map_err(to_py)?;
        // An empty array still gets a distinct (1-byte) allocation: a symmetric address.
        let buf = rt
            .alloc_aligned::<u8>(nbytes.max(1), ALIGN)
            .map_err(to_py)?;
        if zero {
            rt.put(buf.at(0), &vec![0u8; nbytes], rt.my_pe())
                .map_err(to_py)?;
            rt.barrier_all().map_err(to_py)?;
        }
        let addr = rt
            .ptr(&buf, rt.my_pe())
            .map_err(to_py)?
            .expect("a PE's own heap is always mapped")
            .as_ptr() as usize;
        Ok(SymArray {
            buf: Some(buf),
            dtype,
            shape,
            addr,
            device: heap_device(&rt),
            live: Arc::new(AtomicUsize::new(0)),
            generation: handle::generation(),
        })
    }

    fn numel(&self) -> usize {
        self.shape.iter().map(|&d| d as usize).product()
    }

    /// Address, device, type and shape of this PE's copy; else why it has none: "was
    /// freed", or its runtime was finalized.
    pub fn parts(&self) -> Result<(usize, DlDevice, DType, Vec<i64>), String> {
        self.usable()?;
        Ok((self.addr, self.device, self.dtype, self.shape.clone()))
    }

    /// Whether its memory may be used; else why not ("was freed (what it was)").
    fn usable(&self) -> Result<(), String> {
        match &self.buf {
            None => Err(format!("was freed ({})", self.describe())),
            Some(_) if !handle::alive(self.generation) => Err(format!(
                "is gone: symmem was finalized, and its memory with it ({})",
                self.describe()
            )),
            Some(_) => Ok(()),
        }
    }

    /// A count of one more view of this array, held by a peer view of it.
    pub fn count_view(&self) -> ViewCount {
        self.live.fetch_add(1, Ordering::AcqRel);
        ViewCount(self.live.clone())
    }

    /// What the array is, for messages.
    pub fn describe(&self) -> String {
        let id = self.buf.as_ref().map(SymBuf::id);
        let state = match id {
            None => "freed".to_string(),
            Some(id) if handle::alive(self.generation) => format!("allocation #{id}"),
            Some(id) => format!("allocation #{id} of a finalized runtime"),
        };
        format!(
            "symmetric array of shape {:?} and dtype {} ({state})",
            self.shape,
            self.dtype.name()
        )
    }
}

#[pymethods]
impl SymArray {
    /// The extent of each dimension.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.shape)
    }

    /// The element type's numpy name (`"float32"`, `"bfloat16"`, …).
    #[getter]
    fn dtype(&self) -> &'static str {
        self.dtype.name()
    }

    /// Number of elements.
    #[getter]
    fn size(&self) -> usize {
        self.numel()
    }

    /// Number of dimensions.
    #[getter]
    fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Bytes of the elements.
    #[getter]
    fn nbytes(&self) -> usize {
        self.numel() * self.dtype.size()
    }

    /// This PE's copy's address (a device address on a GPU PE); refused once freed or
    /// finalized.
    #[getter]
    fn address(&self) -> PyResult<usize> {
        self.usable()
            .map(|()| self.addr)
            .map_err(|why| PyBufferError::new_err(format!("address: the array {why}")))
    }

    /// Whether `free()` has run.
    #[getter]
    fn freed(&self) -> bool {
        self.buf.is_none()
    }

    /// `(device type, device id)` as DLPack numbers it: `(1, 0)` on a CPU PE, `(2, gpu)`
    /// on a GPU PE.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (self.device.device_type, self.device.device_id)
    }

    /// A DLPack capsule of this PE's copy: what `numpy.from_dlpack`, `torch.from_dlpack`
    /// and `cupy.from_dlpack` call. The array stays alive while a view of it does.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        slf: &Bound<'_, Self>,
        stream: Option<PyObject>,
        max_version: Option<PyObject>,
        dl_device: Option<PyObject>,
        copy: Option<bool>,
    ) -> PyResult<PyObject> {
        // The array's memory is ready when every call that wrote it has returned: no
        // stream to order against (`stream`); a copy to another device is not offered.
        let _ = (stream, dl_device);
        let me = slf.borrow();
        me.usable()
            .map_err(|why| PyBufferError::new_err(format!("__dlpack__: the array {why}")))?;
        let versioned = dlpack::in_place_request(slf.py(), max_version, copy, "a symmetric array")?;
        dlpack::export(
            slf.py(),
            slf.clone().into_any().unbind(),
            me.addr,
            me.device,
            me.dtype,
            &me.shape,
            vec![me.live.clone(), handle::LIVE_VIEWS.clone()],
            versioned,
        )
    }

    /// Frees the array on every PE (collective: call it on each, in the same order as the
    /// other collective calls). Refused on every PE while numpy/torch views or peer views
    /// of it are alive on some PE, since they would point at memory the next allocation
    /// reuses: the PEs vote first. Arrays every PE dropped without `free()` are freed
    /// first. For wrappers (`symmem.torch.free`): `held` counts views that
    /// DLPack does not see, `own` views that `release`, called once every PE agreed and
    /// before the memory goes, drops.
    #[pyo3(signature = (*, held=0, own=0, release=None))]
    fn free(
        &mut self,
        py: Python<'_>,
        held: usize,
        own: usize,
        release: Option<PyObject>,
    ) -> PyResult<()> {
        if self.buf.is_none() {
            return Err(PyValueError::new_err(format!(
                "free: {} was already freed",
                self.describe()
            )));
        }
        self.usable()
            .map_err(|why| PyBufferError::new_err(format!("free: the array {why}")))?;
        let buf = self.buf.take().expect("checked above");
        let views = self.live.load(Ordering::Acquire).saturating_sub(own) + held;
        // Every PE votes, so that all refuse or none does (one refusing alone would leave
        // the others waiting in the free for it).
        let voted = handle::runtime().and_then(|rt| {
            let all = handle::vote(&rt, views as u64).map_err(to_py)?;
            Ok((rt, all))
        });
        let (rt, holders) = match voted {
            Ok(v) => v,
            Err(e) => {
                self.buf = Some(buf);
                return Err(e);
            }
        };
        let refusals: Vec<String> = holders
            .iter()
            .enumerate()
            .filter(|(_, &v)| v > 0)
            .map(|(pe, v)| format!("PE {pe} holds {v}"))
            .collect();
        if !refusals.is_empty() {
            let msg = format!(
                "free: view(s) of symmetric array allocation #{} (numpy/torch arrays or peer views made from it) are still alive ({}); delete them, then free it again on every PE",
                buf.id(),
                refusals.join(", ")
            );
            self.buf = Some(buf);
            return Err(PyBufferError::new_err(msg));
        }
        if let Some(release) = release {
            // Every PE frees now, whatever this returns.
            if let Err(e) = release.call0(py) {
                e.print(py);
            }
        }
        rt.free(buf).map_err(to_py)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&mut self, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        if self.buf.is_some() {
            self.free(_exc.py(), 0, 0, None)?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("<{}>", self.describe())
    }
}

impl Drop for SymArray {
    fn drop(&mut self) {
        // Never freed on one PE alone: a free is collective. Kept for `handle::reclaim`,
        // which frees it at the next collective point where every PE has dropped it; said
        // loudly, since until then its memory stays allocated. The memory of a finalized
        // runtime went with it.
        let Some(buf) = self.buf.take() else {
            return;
        };
        if !handle::alive(self.generation) {
            return;
        }
        let msg = format!(
            "symmetric array allocation #{} (shape {:?}, {}) was garbage-collected without free(); it is freed at the next collective allocation, free or finalize at which every PE has dropped it (call free() on every PE to free it at a known point)",
            buf.id(),
            self.shape,
            self.dtype.name()
        );
        handle::dropped(self.generation, buf);
        Python::with_gil(|py| {
            // A drop while an exception propagates (a temporary array in a failing call):
            // the warning machinery needs no exception set, and the exception must survive.
            let propagating = PyErr::take(py);
            let warned = PyErr::warn(
                py,
                &py.get_type::<UnfreedArrayWarning>(),
                &std::ffi::CString::new(msg).expect("no NUL in the message"),
                1,
            );
            if let Err(e) = warned {
                e.write_unraisable(py, None);
            }
            if let Some(e) = propagating {
                e.restore(py);
            }
        });
    }
}
