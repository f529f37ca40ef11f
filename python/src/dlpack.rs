//! DLPack, the zero-copy exchange format of numpy, torch and cupy (`__dlpack__`): the C
//! structures of its ABI, exporting a symmetric array as a `"dltensor_versioned"` capsule
//! (DLPack 1.0, writable: numpy makes arrays from unversioned capsules read-only) or, for
//! consumers that ask for no version, a `"dltensor"` one, and reading any exporter's
//! unversioned capsule to find its memory.

use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::dtype::DType;

/// `kDLCPU`: host memory.
pub const DEVICE_CPU: i32 = 1;
/// `kDLCUDA`: memory of a CUDA device.
pub const DEVICE_CUDA: i32 = 2;

const CAPSULE: &CStr = c"dltensor";
const USED_CAPSULE: &CStr = c"used_dltensor";
const VERSIONED_CAPSULE: &CStr = c"dltensor_versioned";

/// The DLPack version of versioned exports.
pub const VERSION: (u32, u32) = (1, 0);

/// `DLDevice`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DlDevice {
    /// `DLDeviceType`: [`DEVICE_CPU`], [`DEVICE_CUDA`], …
    pub device_type: i32,
    /// The device's ordinal (0 for the CPU).
    pub device_id: i32,
}

impl DlDevice {
    /// As torch writes a device: `cpu`, `cuda:0`, or the DLPack type number.
    pub fn describe(self) -> String {
        match self.device_type {
            DEVICE_CPU => "cpu".into(),
            DEVICE_CUDA => format!("cuda:{}", self.device_id),
            t => format!("DLPack device type {t} ({})", self.device_id),
        }
    }
}

/// `DLDataType`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DlDataType {
    /// `DLDataTypeCode`: 0 int, 1 uint, 2 float, 4 bfloat, 6 bool.
    pub code: u8,
    /// Bits per lane.
    pub bits: u8,
    /// Lanes (1 for scalars).
    pub lanes: u16,
}

/// How DLPack names each element type.
impl DType {
    /// The DLPack type.
    pub fn dlpack(self) -> DlDataType {
        let code = match self {
            DType::I8 | DType::I16 | DType::I32 | DType::I64 => 0,
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => 1,
            DType::F16 | DType::F32 | DType::F64 => 2,
            DType::Bf16 => 4,
            DType::Bool => 6,
            // DLPack 1.1's codes (dlpack.h: kDLFloat8_e4m3fn …), as torch exports them.
            DType::F8E4M3Fn => 10,
            DType::F8E4M3Fnuz => 11,
            DType::F8E5M2 => 12,
            DType::F8E5M2Fnuz => 13,
        };
        DlDataType {
            code,
            bits: (self.size() * 8) as u8,
            lanes: 1,
        }
    }

    /// The type of a DLPack tensor, if symmem knows it (one lane).
    pub fn from_dlpack(t: DlDataType) -> Option<DType> {
        Self::ALL.into_iter().find(|d| d.dlpack() == t)
    }
}

/// `DLTensor`.
#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

/// `DLManagedTensor`.
#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

/// `DLManagedTensorVersioned` (DLPack 1.0).
#[repr(C)]
struct DlManagedTensorVersioned {
    version: [u32; 2],
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensorVersioned)>,
    /// `DLPACK_FLAG_BITMASK_*`: 0 = writable, not a copy.
    flags: u64,
    dl_tensor: DlTensor,
}

/// What an exported capsule owns: the managed tensor `M` (first, so a pointer to one is a
/// pointer to the other), its shape, a reference that keeps the exporting array alive
/// until the consumer lets go, and the counters of live views it is counted in.
#[repr(C)]
struct Export<M> {
    managed: M,
    shape: Box<[i64]>,
    owner: Py<PyAny>,
    live: Vec<Arc<AtomicUsize>>,
}

/// The deleter of an exported tensor (either kind): called by the consumer when it is
/// done with it, or by the capsule's destructor when nobody consumed it.
unsafe extern "C" fn delete_export<M>(managed: *mut M) {
    // SAFETY: `managed` is the first field of a boxed `Export<M>` made by `export`, and
    // the DLPack contract calls the deleter once.
    let export = unsafe { Box::from_raw(managed.cast::<Export<M>>()) };
    for counter in &export.live {
        counter.fetch_sub(1, Ordering::AcqRel);
    }
    // The reference to the array is released with the interpreter attached: consumers may
    // call the deleter from threads that are not. While the interpreter tears itself down
    // (a view held by a module global), it cannot be attached to any more: the reference
    // is left to the exiting process.
    let Export { owner, .. } = *export;
    // SAFETY: a plain query of the interpreter's state.
    if unsafe { ffi::Py_IsInitialized() } == 0 {
        std::mem::forget(owner);
        return;
    }
    Python::with_gil(|_| drop(owner));
}

/// The destructor of an unversioned capsule: frees the tensor unless a consumer took it
/// (renaming the capsule).
unsafe extern "C" fn destroy_capsule(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with the capsule being destroyed, the interpreter attached.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, CAPSULE.as_ptr()) == 1 {
            let managed = ffi::PyCapsule_GetPointer(capsule, CAPSULE.as_ptr());
            delete_export::<DlManagedTensor>(managed.cast());
        }
    }
}

/// As [`destroy_capsule`], for a versioned capsule.
unsafe extern "C" fn destroy_versioned_capsule(capsule: *mut ffi::PyObject) {
    // SAFETY: as in `destroy_capsule`.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, VERSIONED_CAPSULE.as_ptr()) == 1 {
            let managed = ffi::PyCapsule_GetPointer(capsule, VERSIONED_CAPSULE.as_ptr());
            delete_export::<DlManagedTensorVersioned>(managed.cast());
        }
    }
}

/// Boxes `export` and wraps it in a capsule named `name` with `destructor`; on failure
/// the export is released.
///
/// # Safety
/// `destructor` must release exports of type `M` from capsules named `name`.
unsafe fn into_capsule<M>(
    py: Python<'_>,
    export: Export<M>,
    name: &'static CStr,
    destructor: unsafe extern "C" fn(*mut ffi::PyObject),
) -> PyResult<PyObject> {
    let raw = Box::into_raw(Box::new(export));
    // SAFETY: `raw` is a live boxed `Export<M>`; the capsule owns it until a consumer
    // renames the capsule and calls the deleter (caller contract on `destructor`).
    unsafe {
        let capsule = ffi::PyCapsule_New(raw.cast(), name.as_ptr(), Some(destructor));
        if capsule.is_null() {
            delete_export::<M>(raw.cast());
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, capsule).unbind())
    }
}
/// A capsule for `shape` elements of `dtype` at `data` on `device`, contiguous and
/// writable, keeping `owner` alive and counted in each of `live` until it is released:
/// versioned (DLPack 1.0) when the consumer can read it (`max_version` 1.0 or later),
/// else unversioned.
#[allow(clippy::too_many_arguments)] // a tensor's description, its owner and counters
pub fn export(
    py: Python<'_>,
    owner: Py<PyAny>,
    data: usize,
    device: DlDevice,
    dtype: DType,
    shape: &[i64],
    live: Vec<Arc<AtomicUsize>>,
    versioned: bool,
) -> PyResult<PyObject> {
    let mut shape: Box<[i64]> = shape.into();
    for counter in &live {
        counter.fetch_add(1, Ordering::AcqRel);
    }
    let dl_tensor = DlTensor {
        data: data as *mut c_void,
        device,
        ndim: shape.len() as i32,
        dtype: dtype.dlpack(),
        shape: shape.as_mut_ptr(),
        // Null strides: compact row-major.
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    if versioned {
        let export = Export {
            managed: DlManagedTensorVersioned {
                version: [VERSION.0, VERSION.1],
                manager_ctx: std::ptr::null_mut(),
                deleter: Some(delete_export::<DlManagedTensorVersioned>),
                flags: 0,
                dl_tensor,
            },
            shape,
            owner,
            live,
        };
        // SAFETY: the destructor releases versioned exports from versioned capsules.
        unsafe { into_capsule(py, export, VERSIONED_CAPSULE, destroy_versioned_capsule) }
    } else {
        let export = Export {
            managed: DlManagedTensor {
                dl_tensor,
                manager_ctx: std::ptr::null_mut(),
                deleter: Some(delete_export::<DlManagedTensor>),
            },
            shape,
            owner,
            live,
        };
        // SAFETY: the destructor releases unversioned exports from unversioned capsules.
        unsafe { into_capsule(py, export, CAPSULE, destroy_capsule) }
    }
}

/// What a `__dlpack__` call of a symmetric array (or a peer's copy, `what`) asks for:
/// whether the consumer reads versioned capsules (its `max_version` is 1.0 or later). A
/// copy is refused: symmetric memory is exported in place.
pub fn in_place_request(
    py: Python<'_>,
    max_version: Option<PyObject>,
    copy: Option<bool>,
    what: &str,
) -> PyResult<bool> {
    if copy == Some(true) {
        return Err(pyo3::exceptions::PyBufferError::new_err(format!(
            "__dlpack__: {what} is exported in place (copy=True is not supported)"
        )));
    }
    match max_version {
        Some(v) => Ok(v.extract::<(u32, u32)>(py)? >= VERSION),
        None => Ok(false),
    }
}

/// Another library's tensor, seen through its DLPack export: taken from its capsule, held
/// (so its memory stays alive) until this is dropped, then released with its deleter.
pub struct Imported {
    managed: *mut DlManagedTensor,
    /// Address of the first element.
    pub addr: usize,
    /// Where the memory is.
    pub device: DlDevice,
    /// Element type, when symmem knows it.
    pub dtype: Option<DType>,
    /// The raw DLPack type, for error messages.
    pub raw_dtype: DlDataType,
    /// Extent of each dimension.
    pub shape: Vec<i64>,
    /// Whether the elements are compact and in row-major order.
    pub contiguous: bool,
}

impl Imported {
    /// The type, as numpy names it, for messages.
    pub fn dtype_name(&self) -> String {
        match self.dtype {
            Some(d) => d.name().into(),
            None => format!(
                "DLPack type (code {}, {} bits, {} lanes)",
                self.raw_dtype.code, self.raw_dtype.bits, self.raw_dtype.lanes
            ),
        }
    }
}

impl Drop for Imported {
    fn drop(&mut self) {
        // SAFETY: this took the managed tensor from its capsule (renamed as used), so this
        // is its one owner, and the deleter runs once.
        unsafe {
            if let Some(deleter) = (*self.managed).deleter {
                deleter(self.managed);
            }
        }
    }
}

/// Takes `obj`'s memory through its `__dlpack__` (numpy, torch, cupy, symmem arrays).
/// `op` and `what` name the operation and the argument in errors.
pub fn import(obj: &Bound<'_, PyAny>, op: &str, what: &str) -> PyResult<Imported> {
    let py = obj.py();
    let method = match obj.getattr(pyo3::intern!(py, "__dlpack__")) {
        Ok(m) => m,
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyAttributeError>(py) => {
            return Err(PyTypeError::new_err(format!(
                "{op}: {what}: expected an array with __dlpack__ (numpy, torch, cupy or a symmem array), got {}",
                obj.get_type().name()?
            )))
        }
        Err(e) => return Err(e),
    };
    from_capsule(&method.call0()?, op, what)
}

/// Takes the memory of an unused unversioned capsule, as `__dlpack__()` or torch's
/// `_to_dlpack` returns it; `op` and `what` name the operation and the argument in errors.
pub fn from_capsule(capsule: &Bound<'_, PyAny>, op: &str, what: &str) -> PyResult<Imported> {
    let py = capsule.py();
    let cap = capsule.as_ptr();
    // SAFETY: `cap` is a live object (held by `capsule`); the capsule API checks its kind.
    let managed = unsafe {
        if ffi::PyCapsule_IsValid(cap, CAPSULE.as_ptr()) != 1 {
            return Err(PyValueError::new_err(format!(
                "{op}: {what}: __dlpack__ returned something other than an unused \"dltensor\" capsule"
            )));
        }
        let m = ffi::PyCapsule_GetPointer(cap, CAPSULE.as_ptr()).cast::<DlManagedTensor>();
        if m.is_null() || ffi::PyCapsule_SetName(cap, USED_CAPSULE.as_ptr()) != 0 {
            return Err(PyErr::fetch(py));
        }
        m
    };
    // SAFETY: the producer's managed tensor, now owned here; its fields follow DLPack.
    let t = unsafe { &(*managed).dl_tensor };
    let ndim = t.ndim.max(0) as usize;
    // SAFETY: DLPack gives `ndim` extents at `shape` (and strides, when not null).
    let shape = unsafe { slice_or_empty(t.shape, ndim) }.to_vec();
    let strides = (!t.strides.is_null()).then(|| {
        // SAFETY: as above.
        unsafe { slice_or_empty(t.strides, ndim) }.to_vec()
    });
    let contiguous = strides.is_none_or(|s| is_row_major(&shape, &s));
    let out = Imported {
        managed,
        addr: t.data as usize + t.byte_offset as usize,
        device: t.device,
        dtype: DType::from_dlpack(t.dtype),
        raw_dtype: t.dtype,
        shape,
        contiguous,
    };
    Ok(out)
}

/// `len` elements at `p`, or none when `len` is 0 (`p` may then be null).
///
/// # Safety
/// When `len > 0`, `p` points at `len` readable `i64`s that outlive the slice.
unsafe fn slice_or_empty<'a>(p: *const i64, len: usize) -> &'a [i64] {
    if len == 0 || p.is_null() {
        &[]
    } else {
        // SAFETY: caller contract.
        unsafe { std::slice::from_raw_parts(p, len) }
    }
}

/// Whether `strides` (in elements) are those of a compact row-major array of `shape`
/// (dimensions of extent 1 may have any stride).
fn is_row_major(shape: &[i64], strides: &[i64]) -> bool {
    let mut expect = 1i64;
    for (&n, &s) in shape.iter().zip(strides).rev() {
        if n != 1 && s != expect {
            return false;
        }
        expect *= n;
    }
    true
}
