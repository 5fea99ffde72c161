//! The one mapping from the core's [`Error`] to Python exceptions.
//!
//! The exception classes live in `ratekeeper/_errors.py`, because
//! `RateLimitTypeError` needs two bases (`RateLimitError` and `TypeError`),
//! which a class created from Rust cannot have.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use ratekeeper::Error;

static RATE_LIMIT_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static RATE_LIMIT_TYPE_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// The Python spelling of a core argument name.
///
/// Python spells every argument as the core does (`capacity`, `refill_period`,
/// `initial_tokens`, `window`, `cost`, `now`...), so this is the identity; it is
/// the one place to change should the two ever differ.
fn python_argument(rust: &'static str) -> &'static str {
    rust
}

/// Turns a core error into `RateLimitTypeError` (for `invalid_type`) or
/// `RateLimitError` (a `ValueError`), with `.code` set to the core's code.
pub fn to_py(py: Python<'_>, err: Error) -> PyErr {
    let message = match err.argument() {
        Some(rust) => err.display_with(python_argument(rust)).to_string(),
        None => err.to_string(),
    };
    let (cell, name) = match err {
        Error::InvalidType { .. } => (&RATE_LIMIT_TYPE_ERROR, "RateLimitTypeError"),
        _ => (&RATE_LIMIT_ERROR, "RateLimitError"),
    };
    match cell.import(py, "ratekeeper._errors", name) {
        Ok(class) => PyErr::from_type(class.clone(), (message, err.code())),
        // Only reachable when the package is broken; still raise, never panic.
        Err(import_error) => import_error,
    }
}
