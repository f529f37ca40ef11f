//! torch tensors as operands without `torch.Tensor.__dlpack__`, which is Python code
//! costing several microseconds a call: a tensor is exported by the C function it calls
//! (`torch._C._to_dlpack`: the same capsule, refused where it cannot describe the tensor)
//! and read from that capsule as any other (`dlpack::from_capsule`). torch is
//! never imported here: its classes are looked up once it is in `sys.modules` (no torch
//! tensor exists before).
//!
//! What `__dlpack__` checks in Python before that call: a conjugate view is complex, which
//! symmem refuses as a type (the fallback below then gives `__dlpack__`'s own error); a
//! non-strided layout makes `_to_dlpack` fail (fallback); a tensor that requires grad is
//! read or written (its memory is as alive and valid as any other's); the current CUDA
//! device is not consulted (the operand's device is checked against this PE's GPU instead).
//! A negated view (torch's lazy negation, which a capsule cannot carry, so `__dlpack__` too
//! would hand out the un-negated elements) is refused, whichever path reads it.

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyDict, PyTuple, PyType};

use crate::dlpack::{self, Imported};

/// What of torch the fast path uses, found once torch is imported.
struct Torch {
    /// `torch.Tensor`.
    tensor: Py<PyType>,
    /// `torch._C._to_dlpack`: a tensor as an unversioned capsule.
    to_dlpack: PyObject,
    /// `torch._C._disabled_torch_function_impl`: a subclass's `__torch_function__` that
    /// leaves torch's functions as they are (`torch.nn.Parameter`'s).
    disabled_torch_function: PyObject,
}

static TORCH: GILOnceCell<Option<Torch>> = GILOnceCell::new();

/// torch's classes and functions, once `torch` is imported (far enough to define
/// `torch.Tensor`); `None` before, or for a torch without `_C._to_dlpack` (all its tensors
/// then go through `__dlpack__`).
fn torch(py: Python<'_>) -> Option<&'static Torch> {
    if let Some(t) = TORCH.get(py) {
        return t.as_ref();
    }
    // SAFETY: a borrowed reference to `sys.modules`, which lives as long as the
    // interpreter; the GIL is held.
    let modules = unsafe { Bound::from_borrowed_ptr(py, ffi::PyImport_GetModuleDict()) };
    let module = modules
        .downcast::<PyDict>()
        .ok()?
        .get_item("torch")
        .ok()??;
    let tensor = module
        .getattr("Tensor")
        .ok()?
        .downcast_into::<PyType>()
        .ok()?;
    let found = (|| {
        let c = module.getattr("_C").ok()?;
        Some(Torch {
            tensor: tensor.unbind(),
            to_dlpack: c.getattr("_to_dlpack").ok()?.unbind(),
            disabled_torch_function: c.getattr("_disabled_torch_function_impl").ok()?.unbind(),
        })
    })();
    // Another thread may have set it meanwhile (getattr can run Python code, which can
    // switch threads): both hold the same objects.
    let _ = TORCH.set(py, found);
    TORCH.get(py)?.as_ref()
}

/// `obj`'s memory when it is a torch tensor that `_to_dlpack` exports as symmem can take
/// it; `None` when `obj` is no torch tensor, or one for `__dlpack__` to export (a subclass
/// that changes how tensors export, or an export this path cannot read: its errors are
/// `__dlpack__`'s). A negated view is refused here; `op` and `what` name the operation
/// and the argument in that error.
pub fn import(obj: &Bound<'_, PyAny>, op: &str, what: &str) -> PyResult<Option<Imported>> {
    let py = obj.py();
    let Some(torch) = torch(py) else {
        return Ok(None);
    };
    let ty = obj.get_type();
    let tensor = torch.tensor.bind(py);
    let exact = ty.is(tensor);
    // SAFETY: both are live type objects; a plain walk of `ty`'s MRO.
    if !exact && unsafe { ffi::PyType_IsSubtype(ty.as_type_ptr(), tensor.as_type_ptr()) } == 0 {
        return Ok(None);
    }
    match obj.call_method0(intern!(py, "is_neg")).and_then(|n| n.is_truthy()) {
        Ok(false) => {}
        Ok(true) => {
            return Err(PyValueError::new_err(format!(
                "{op}: {what} is a negated view (torch's negative bit is set, which DLPack cannot carry); pass .resolve_neg() of it"
            )))
        }
        Err(_) => return Ok(None),
    }
    if !exact && !exports_as_tensor(&ty, tensor, torch)? {
        return Ok(None);
    }
    let Ok(capsule) = torch.to_dlpack.bind(py).call1((obj,)) else {
        return Ok(None);
    };
    match dlpack::from_capsule(&capsule, op, what) {
        Ok(t) if t.dtype.is_some() => Ok(Some(t)),
        _ => Ok(None),
    }
}

/// Whether the subclass `ty` of `torch.Tensor` exports as a tensor does: none of its
/// classes above `torch.Tensor` defines `__dlpack__` or `__torch_dispatch__`, or a
/// `__torch_function__` other than torch's disabled one (which `torch.nn.Parameter` sets).
/// A subclass that keeps `torch.Tensor`'s `__torch_function__` has `_to_dlpack` and
/// `is_neg` pass through it as `__dlpack__` would.
fn exports_as_tensor(
    ty: &Bound<'_, PyType>,
    tensor: &Bound<'_, PyType>,
    torch: &Torch,
) -> PyResult<bool> {
    let py = ty.py();
    let mro = ty.getattr(intern!(py, "__mro__"))?;
    for class in mro.downcast::<PyTuple>()?.iter() {
        if class.is(tensor) {
            break;
        }
        let namespace = class.getattr(intern!(py, "__dict__"))?;
        if namespace.contains(intern!(py, "__dlpack__"))?
            || namespace.contains(intern!(py, "__torch_dispatch__"))?
        {
            return Ok(false);
        }
        let tf = intern!(py, "__torch_function__");
        if namespace.contains(tf)?
            && !namespace
                .get_item(tf)?
                .is(torch.disabled_torch_function.bind(py))
        {
            return Ok(false);
        }
    }
    Ok(true)
}
