//! The arrays an operation takes, checked: a symmetric operand must lie in this PE's
//! symmetric heap (a symmetric array, or a numpy/torch view of one), a local operand in
//! host memory (or, for the transfers that take streams, on a GPU PE's GPU); both contiguous and of a type symmem knows. Errors name the operation,
//! the argument and what is wrong with it.

use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use symmem::{Runtime, SymView};

use crate::array::{heap_device, SymArray};
use crate::dlpack::{self, DlDevice, Imported, DEVICE_CPU};
use crate::dtype::DType;
use crate::errors::to_py;
use crate::torch_tensor;

/// A checked operand: where its elements are, their type and shape.
pub struct Operand {
    /// Address of the first element.
    pub addr: usize,
    /// Where the memory is.
    pub device: DlDevice,
    /// Element type.
    pub dtype: DType,
    /// Extent of each dimension.
    pub shape: Vec<i64>,
    /// Another library's array, held (so its memory stays alive) for the call; none for
    /// a symmetric array, which the caller's reference keeps alive.
    _held: Option<Imported>,
}

impl Operand {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().map(|&d| d.max(0) as usize).product()
    }

    /// Bytes of the elements.
    pub fn nbytes(&self) -> usize {
        self.numel() * self.dtype.size()
    }
}

/// `obj` as an operand of `op`, contiguous and of a known type. A symmetric array is read
/// directly (a DLPack export per call would cost a microsecond), a torch tensor through
/// the C export its `__dlpack__` calls (`torch_tensor`: that Python method costs several
/// microseconds), anything else through its `__dlpack__`.
fn operand(op: &str, obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Operand> {
    if let Ok(a) = obj.downcast::<SymArray>() {
        let a = a.borrow();
        let (addr, device, dtype, shape) = a
            .parts()
            .map_err(|why| PyBufferError::new_err(format!("{op}: {what} {why}")))?;
        return Ok(Operand {
            addr,
            device,
            dtype,
            shape,
            _held: None,
        });
    }
    let t = match torch_tensor::import(obj, op, what)? {
        Some(t) => t,
        None => dlpack::import(obj, op, what)?,
    };
    let Some(dtype) = t.dtype else {
        return Err(PyTypeError::new_err(format!(
            "{op}: {what} has a {} that symmem does not support (supported: {})",
            t.dtype_name(),
            DType::NAMES.join(", ")
        )));
    };
    if !t.contiguous {
        return Err(PyValueError::new_err(format!(
            "{op}: {what} (shape {:?}) is not contiguous; pass a contiguous array (torch: .contiguous(), numpy: numpy.ascontiguousarray)",
            t.shape
        )));
    }
    Ok(Operand {
        addr: t.addr,
        device: t.device,
        dtype,
        shape: t.shape.clone(),
        _held: Some(t),
    })
}

/// `obj` as the symmetric operand `what` of `op`: inside this PE's symmetric heap, on the
/// heap's device.
pub fn symmetric(
    rt: &Runtime,
    op: &'static str,
    obj: &Bound<'_, PyAny>,
    what: &str,
) -> PyResult<Operand> {
    on_heap_device(rt, op, obj, what, |heap| {
        format!("symmetric heap is on {heap}; it must be a symmetric array or a view of one")
    })
}

/// `obj` as the array argument `what` of a kernel launch (`op`), passed by address: on the
/// device where this PE's kernels run (its GPU, or the CPU), contiguous.
pub fn kernel_array(
    rt: &Runtime,
    op: &'static str,
    obj: &Bound<'_, PyAny>,
    what: &str,
) -> PyResult<Operand> {
    on_heap_device(rt, op, obj, what, |heap| format!("kernels run on {heap}"))
}

/// `obj` as an operand on the device of this PE's heap; otherwise an error ending with
/// what `place` says of that device.
fn on_heap_device(
    rt: &Runtime,
    op: &'static str,
    obj: &Bound<'_, PyAny>,
    what: &str,
    place: impl FnOnce(String) -> String,
) -> PyResult<Operand> {
    let o = operand(op, obj, what)?;
    let heap = heap_device(rt);
    if o.device != heap {
        return Err(PyValueError::new_err(format!(
            "{op}: {what} is on {}, but PE {}'s {}",
            o.device.describe(),
            rt.my_pe(),
            place(heap.describe())
        )));
    }
    Ok(o)
}

/// The symmetric elements of `o` as a view of `T`s for the runtime's operations (which
/// then check bounds and the target PE); `what` names the argument in the error.
pub fn view<T>(
    rt: &Runtime,
    op: &'static str,
    o: &Operand,
    what: &str,
    len: usize,
) -> PyResult<SymView<T>> {
    rt.view_at::<T>(op, o.addr as *const T, len).map_err(|e| {
        let e = to_py(e);
        PyValueError::new_err(format!(
            "{what} is not symmetric (not a symmetric array or a view of one): {e}"
        ))
    })
}

/// `obj` as the local (host memory) operand `what` of `op`.
pub fn local(op: &'static str, obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Operand> {
    let o = operand(op, obj, what)?;
    if o.device.device_type != DEVICE_CPU {
        return Err(PyValueError::new_err(format!(
            "{op}: {what} is on {}; host operations read and write host memory (a CPU array)",
            o.device.describe()
        )));
    }
    Ok(o)
}

/// `obj` as the local operand `what` of a transfer that takes streams (`op`): host memory,
/// or on a GPU PE device memory of its GPU (a CUDA tensor), which the call queues on a
/// stream (see `streams.rs`).
pub fn transfer_local(
    rt: &Runtime,
    op: &'static str,
    obj: &Bound<'_, PyAny>,
    what: &str,
) -> PyResult<Operand> {
    let o = operand(op, obj, what)?;
    if o.device.device_type == DEVICE_CPU {
        return Ok(o);
    }
    let heap = heap_device(rt);
    if heap.device_type == DEVICE_CPU {
        return Err(PyValueError::new_err(format!(
            "{op}: {what} is on {}, but PE {} is a CPU PE: its transfers read and write host memory (a CPU array)",
            o.device.describe(),
            rt.my_pe()
        )));
    }
    if o.device != heap {
        return Err(PyValueError::new_err(format!(
            "{op}: {what} is on {}, but PE {}'s GPU is {}: a transfer takes host memory or memory of this PE's GPU",
            o.device.describe(),
            rt.my_pe(),
            heap.describe()
        )));
    }
    Ok(o)
}

/// Fails unless `a` and `b` have the same type and number of elements.
pub fn same_layout(op: &str, a: (&Operand, &str), b: (&Operand, &str)) -> PyResult<()> {
    if a.0.dtype != b.0.dtype {
        return Err(PyTypeError::new_err(format!(
            "{op}: {} is {} but {} is {}",
            a.1,
            a.0.dtype.name(),
            b.1,
            b.0.dtype.name()
        )));
    }
    if a.0.numel() != b.0.numel() {
        return Err(PyValueError::new_err(format!(
            "{op}: {} has {} elements (shape {:?}) but {} has {} (shape {:?})",
            a.1,
            a.0.numel(),
            a.0.shape,
            b.1,
            b.0.numel(),
            b.0.shape
        )));
    }
    Ok(())
}
