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
    match e {
        symmem::Error::Interrupted { .. } => PENDING
            .with(|p| p.borrow_mut().take())
            .unwrap_or_else(|| SymmemError::new_err(e.to_string())),
        symmem::Error::InvalidArgument { .. }
        | symmem::Error::OutOfBounds { .. }
        | symmem::Error::InvalidPe { .. } => PyValueError::new_err(e.to_string()),
        symmem::Error::Timeout { .. } => PyTimeoutError::new_err(e.to_string()),
        e => SymmemError::new_err(e.to_string()),
    }
}
