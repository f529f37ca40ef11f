//! Blocking calls from Python: a symmem call runs with the GIL released, so other Python
//! threads go on meanwhile, and its waits stop on Ctrl-C.

use pyo3::prelude::*;

use crate::errors::{python_signalled, to_py};

/// Runs `f` with the GIL released, stopping its waits on Ctrl-C.
pub(crate) fn blocking<R: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> symmem::Result<R> + Send,
) -> PyResult<R> {
    py.allow_threads(|| symmem::with_interrupt_check(python_signalled, f))
        .map_err(to_py)
}
