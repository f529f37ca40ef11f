//! symmem's errors as Python exceptions: the runtime's message unchanged, and Ctrl-C in a
//! wait as the `KeyboardInterrupt` Python raised.

use std::cell::RefCell;

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyRuntimeWarning, PyTimeoutError, PyValueError};
use pyo3::prelude::*;

create_exception!(
    symmem._native,
    SymmemError,
    PyRuntimeError,
    "An error of the symmem runtime; the message names the PE, the operation and what was wrong."
);

create_exception!(
    symmem._native,
    UnfreedArrayWarning,
    PyRuntimeWarning,
    "A symmetric array was garbage-collected without free(): it is freed at the next collective allocation, free or finalize at which every PE has dropped it. A RuntimeWarning, so Python shows it by default."
);

thread_local! {
    /// The exception Python raised while a wait on this thread checked for signals.
    static PENDING: RefCell<Option<PyErr>> = const { RefCell::new(None) };
}

/// The interrupt check of waits (`symmem::with_interrupt_check`): runs Python's signal
/// handlers, and keeps what they raised (`KeyboardInterrupt`) for [`to_py`].
pub fn python_signalled() -> bool {
    Python::with_gil(|py| match py.check_signals() {
        Ok(()) => false,
        Err(e) => {
            PENDING.with(|p| *p.borrow_mut() = Some(e));
            true
        }
    })
}

/// The Python exception for a runtime error: `ValueError` for bad arguments,
/// `TimeoutError` for an expired wait, the pending `KeyboardInterrupt` for an interrupted
/// one, else [`SymmemError`].
pub fn to_py(e: symmem::Error) -> PyErr {
    let text = e.to_string();
    as_py(e, text)
}

/// [`to_py`], with the message starting with `op` where the runtime's does not (errors of
/// steps that do not know the Python call, such as init's bootstrap).
pub fn to_py_in(op: &str, e: symmem::Error) -> PyErr {
    let text = e.to_string();
    let text = if text.starts_with(op) {
        text
    } else {
        format!("{op}: {text}")
    };
    as_py(e, text)
}

/// The Python exception for `e`, with the message `text` (see [`to_py`]).
fn as_py(e: symmem::Error, text: String) -> PyErr {
    match e {
        symmem::Error::Interrupted { .. } => PENDING
            .with(|p| p.borrow_mut().take())
            .unwrap_or_else(|| SymmemError::new_err(text)),
        symmem::Error::InvalidArgument { .. }
        | symmem::Error::Transport(symmem::TransportError::InvalidArgument { .. })
        | symmem::Error::OutOfBounds { .. }
        | symmem::Error::InvalidPe { .. } => PyValueError::new_err(text),
        symmem::Error::Timeout { .. } => PyTimeoutError::new_err(text),
        _ => SymmemError::new_err(text),
    }
}
