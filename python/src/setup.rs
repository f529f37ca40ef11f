//! Joining and leaving the job: `init` (the launcher's job, or a unique id a framework
//! broadcast, with an optional heap size), the unique ids themselves, and `finalize`.

use std::str::FromStr;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyString, PyWeakrefMethods, PyWeakrefReference};
use symmem::config::SYMMETRIC_SIZE;
use symmem::{Config, UniqueId};

use crate::errors::{to_py, to_py_in, SymmemError};
use crate::handle;

/// A job identity for `init(unique_id=...)`: made by one process with
/// `get_unique_id()`, passed to every PE (`str(uid)` is its text, which `init` and
/// `UniqueId(text)` take back). A secret: whoever holds its text can join the job and
/// reach every PE's heap, so `repr` leaves the secret out.
#[pyclass(module = "symmem._native", name = "UniqueId", frozen, weakref)]
pub struct PyUniqueId {
    id: UniqueId,
}

#[pymethods]
impl PyUniqueId {
    /// The id whose text (`str(uid)`) is `text`.
    #[new]
    fn new(text: &str) -> PyResult<Self> {
        UniqueId::from_str(text)
            .map(|id| PyUniqueId { id })
            .map_err(|e| PyValueError::new_err(format!("UniqueId: {e}")))
    }

    fn __str__(&self) -> String {
        self.id.to_string()
    }

    fn __repr__(&self) -> String {
        format!("<symmem {:?}>", self.id)
    }

    /// Pickles as its text (`torch.distributed.broadcast_object_list` carries it so).
    fn __reduce__(slf: &Bound<'_, Self>) -> PyResult<(Py<PyAny>, (String,))> {
        Ok((
            slf.get_type().into_any().unbind(),
            (slf.get().id.to_string(),),
        ))
    }
}

/// The ids `get_unique_id` made in this process that are still alive (weak references):
/// `init` given one's text finds it here, with the listening socket it hosts the
/// rendezvous on (binding the id's address afresh would fail while that socket is open).
static ISSUED: Mutex<Vec<Py<PyWeakrefReference>>> = Mutex::new(Vec::new());

/// The id `get_unique_id` made here whose text is `text`, if it is still alive.
fn issued(py: Python<'_>, text: &str) -> Option<UniqueId> {
    let mut issued = ISSUED.lock().expect("never poisoned");
    issued.retain(|r| r.bind(py).upgrade().is_some());
    issued.iter().find_map(|r| {
        let alive = r.bind(py).upgrade()?;
        let id = &alive.downcast::<PyUniqueId>().ok()?.get().id;
        (id.to_string() == text).then(|| id.clone())
    })
}

/// A new unique id for `init(unique_id=...)` (NVSHMEM's `nvshmemx_get_uniqueid`). One
/// process makes it and keeps it until its own `init`: it hosts the rendezvous, so it must
/// be PE 0 of the job. Not collective; needs no `init`.
#[pyfunction]
pub fn get_unique_id(py: Python<'_>) -> PyResult<Bound<'_, PyUniqueId>> {
    let id =
        symmem::unique_id().map_err(|e| SymmemError::new_err(format!("get_unique_id: {e}")))?;
    let made = Bound::new(py, PyUniqueId { id })?;
    let weak = PyWeakrefReference::new(made.as_any())?;
    ISSUED.lock().expect("never poisoned").push(weak.unbind());
    Ok(made)
}

/// `heap_size` as bytes: a positive int, or a size string as `SYMMEM_SYMMETRIC_SIZE`
/// takes (`"512M"`, `"2G"`).
fn heap_bytes(heap_size: &Bound<'_, PyAny>) -> PyResult<String> {
    let bad = |why: String| PyValueError::new_err(format!("init: heap_size {why}"));
    if heap_size.is_instance_of::<PyInt>() && !heap_size.is_instance_of::<PyBool>() {
        return match heap_size.extract::<i128>() {
            Ok(n) if n > 0 && n <= usize::MAX as i128 => Ok(n.to_string()),
            Ok(n) if n <= 0 => Err(bad(format!("must be a positive number of bytes, got {n}"))),
            _ => Err(bad(format!(
                "{heap_size} is larger than this machine can address"
            ))),
        };
    }
    if let Ok(s) = heap_size.downcast::<PyString>() {
        let text: String = s.extract()?;
        let size = Config::from_lookup(|name| match name == SYMMETRIC_SIZE.name() {
            true => Some(text.clone()),
            false => std::env::var(name).ok(),
        });
        return match size {
            Ok(c) => Ok(c.symmetric_size.to_string()),
            Err(symmem::Error::Config { var, reason, .. }) if var == SYMMETRIC_SIZE.name() => {
                Err(bad(format!("{text:?} is not a size: {reason}")))
            }
            Err(e) => Err(to_py(e)),
        };
    }
    Err(PyTypeError::new_err(format!(
        "init: heap_size must be an int (bytes) or a size string such as \"512M\", not {}",
        heap_size.get_type().name()?
    )))
}

/// The configuration of this process's environment, with `heap_size` (bytes) instead of
/// `SYMMEM_SYMMETRIC_SIZE` when given.
fn config(heap_size: Option<&str>) -> symmem::Result<Config> {
    Config::from_lookup(|name| match heap_size {
        Some(bytes) if name == SYMMETRIC_SIZE.name() => Some(bytes.to_string()),
        _ => std::env::var(name).ok(),
    })
}

/// `unique_id` (a `UniqueId` or its text) as an id: the one `get_unique_id` made here,
/// if it is that one's text.
fn unique_id_of(unique_id: &Bound<'_, PyAny>) -> PyResult<UniqueId> {
    if let Ok(u) = unique_id.downcast::<PyUniqueId>() {
        return Ok(u.get().id.clone());
    }
    if let Ok(s) = unique_id.downcast::<PyString>() {
        let text: String = s.extract()?;
        if let Some(id) = issued(s.py(), &text) {
            return Ok(id);
        }
        return UniqueId::from_str(&text)
            .map_err(|e| PyValueError::new_err(format!("init: unique_id: {e}")));
    }
    Err(PyTypeError::new_err(format!(
        "init: unique_id must be a symmem.UniqueId or its text (str(uid)), not {}",
        unique_id.get_type().name()?
    )))
}

/// Joins the job (collective: every PE calls it). Without `unique_id`, the job the
/// launcher started (symrun / `python -m symmem.run`, torchrun, srun, mpirun, Kubernetes
/// variables, or one PE alone), as the Rust `symmem::init` does; with it, as PE `rank` of
/// `n_pes` through the rendezvous of `unique_id` (from `get_unique_id()` on PE 0).
/// `heap_size` (bytes, or `"512M"`) replaces `SYMMEM_SYMMETRIC_SIZE`; every PE must give
/// the same. A second call does nothing, or, given arguments, fails.
#[pyfunction]
#[pyo3(signature = (*, heap_size=None, unique_id=None, rank=None, n_pes=None))]
pub fn init(
    py: Python<'_>,
    heap_size: Option<&Bound<'_, PyAny>>,
    unique_id: Option<&Bound<'_, PyAny>>,
    rank: Option<&Bound<'_, PyAny>>,
    n_pes: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let heap = heap_size.map(heap_bytes).transpose()?;
    let joining = match (unique_id, rank, n_pes) {
        (Some(id), Some(rank), Some(n)) => {
            let n = count(n, "n_pes")?;
            let rank = count(rank, "rank")?;
            if n == 0 || rank >= n {
                return Err(PyValueError::new_err(format!(
                    "init: rank {rank} is out of range for n_pes {n} (0 to n_pes - 1)"
                )));
            }
            Some((unique_id_of(id)?, rank, n))
        }
        (None, None, None) => None,
        _ => {
            return Err(PyValueError::new_err(
                "init: unique_id, rank and n_pes go together (every PE passes the same unique_id and n_pes, and its own rank)",
            ))
        }
    };
    if handle::is_initialized() {
        if heap.is_some() || joining.is_some() {
            return Err(SymmemError::new_err(
                "init: symmem is already initialized; heap_size, unique_id and group apply to the first init (call finalize first)",
            ));
        }
        return Ok(());
    }
    let rt = py
        .allow_threads(|| {
            let config = config(heap.as_deref())?;
            let bootstrap: Box<dyn symmem::Bootstrap> = match &joining {
                Some((id, rank, n)) => Box::new(id.join(*rank, *n, config.bootstrap_timeout)?),
                None => symmem::bootstrap::from_env(config.bootstrap, config.bootstrap_timeout)?,
            };
            symmem::init_with_config(config, bootstrap)
        })
        .map_err(|e| to_py_in("init", e))?;
    handle::install(rt).map_err(to_py)
}

/// The non-negative int `obj`, argument `what` of `init`.
fn count(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<usize> {
    if !obj.is_instance_of::<PyInt>() || obj.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "init: {what} must be an int, not {}",
            obj.get_type().name()?
        )));
    }
    obj.extract::<usize>().map_err(|_| {
        PyValueError::new_err(format!(
            "init: {what} must be a non-negative int, got {obj}"
        ))
    })
}

/// Leaves the job (collective: every PE calls it). Refused on every PE while some PE
/// holds numpy/torch views of symmetric arrays, which would point at unmapped memory
/// afterwards, or has another thread inside a call: the PEs vote first. Arrays every PE
/// dropped without `free()` are freed first. `force` (what the exit handler passes:
/// nothing reads the views after it) neither votes nor refuses.
#[pyfunction]
#[pyo3(signature = (force=false))]
pub fn finalize(py: Python<'_>, force: bool) -> PyResult<()> {
    if !force {
        if let Ok(rt) = handle::runtime() {
            let views = handle::LIVE_VIEWS.load(Ordering::Acquire) as u64;
            let mine = views.min(BUSY - 1) | if handle::busy_elsewhere(&rt) { BUSY } else { 0 };
            let all = py
                .allow_threads(|| handle::vote(&rt, mine))
                .map_err(to_py)?;
            let refusals: Vec<String> = all
                .iter()
                .enumerate()
                .filter(|(_, &b)| b != 0)
                .map(|(pe, &b)| refusal(pe, b))
                .collect();
            if !refusals.is_empty() {
                return Err(SymmemError::new_err(format!(
                    "finalize: refused on every PE: {}; remove what holds it, then call finalize again on every PE",
                    refusals.join("; ")
                )));
            }
        }
    }
    match handle::take()? {
        Some(rt) => py.allow_threads(|| rt.finalize()).map_err(to_py),
        None => Ok(()),
    }
}

/// The ballot bit of finalize's vote that says another thread is inside a call (below
/// it: the PE's live views).
const BUSY: u64 = 1 << 32;

/// Why PE `pe` refused finalize, from its ballot `b`.
fn refusal(pe: usize, b: u64) -> String {
    let views = b & (BUSY - 1);
    let mut why = Vec::new();
    if views > 0 {
        why.push(format!(
            "PE {pe} holds {views} DLPack view(s) of symmetric arrays (numpy/torch arrays made from them, or peer views)"
        ));
    }
    if b & BUSY != 0 {
        why.push(format!("PE {pe} has another thread inside a symmem call"));
    }
    why.join("; ")
}

/// Whether `init` has run and `finalize` has not.
#[pyfunction]
pub fn is_initialized() -> bool {
    handle::is_initialized()
}

/// The CUDA ordinal of this PE's GPU (what torch calls the device index), or `None` on a
/// CPU PE.
#[pyfunction]
pub fn gpu_ordinal() -> PyResult<Option<usize>> {
    Ok(handle::runtime()?.gpu_ordinal())
}
