//! The one mapping from the core's [`Error`] to Python exceptions.
//!
//! The exception classes live in `ratekeeper/_errors.py`, because
//! `RateLimitTypeError` needs two bases (`RateLimitError` and `TypeError`),
//! which a class created from Rust cannot have.
//! [`rate_limited`] raises `RateLimited`, the waiting forms' "no".

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use pyo3::PyErrArguments;
use ratekeeper::{Decision, Error};

static RATE_LIMIT_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static RATE_LIMIT_TYPE_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static RATE_LIMIT_MEMORY_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static RATE_LIMITED: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// The Python spelling of a core argument name.
///
/// Python spells arguments as the core does (`capacity`, `refill_period`,
/// `max_wait`, `cost`, `now`...) but for `reconfigure`'s, which the core
/// calls `new` and Python `other`, and encoded state, which the core calls
/// `state` and `restore` / `from_bytes` call `data`.
fn python_argument(rust: &'static str) -> &'static str {
    match rust {
        "new" => "other",
        "state" => "data",
        same => same,
    }
}

/// Turns a core error into `RateLimitTypeError` (for `invalid_type`),
/// `RateLimitMemoryError` (for `out_of_memory`: also a `MemoryError`, what
/// Python raises for an allocation that fails) or `RateLimitError` (a
/// `ValueError`), with `.code` set to the core's code.
pub fn to_py(py: Python<'_>, err: Error) -> PyErr {
    let message = match err.argument() {
        Some(rust) => err.display_with(python_argument(rust)).to_string(),
        None => err.to_string(),
    };
    to_py_with(py, err, message)
}

/// [`to_py`] with `message` in place of the core's words, for an error whose
/// names the core does not hold (a policy's missing field).
pub fn to_py_with(py: Python<'_>, err: Error, message: String) -> PyErr {
    let (cell, name) = match err {
        Error::InvalidType { .. } => (&RATE_LIMIT_TYPE_ERROR, "RateLimitTypeError"),
        Error::OutOfMemory => (&RATE_LIMIT_MEMORY_ERROR, "RateLimitMemoryError"),
        _ => (&RATE_LIMIT_ERROR, "RateLimitError"),
    };
    raise(py, cell, name, (message, err.code()))
}

/// `RateLimitError` (or `RateLimitTypeError`, for a value of a type JSON
/// cannot hold) with code `invalid_config`: a policy configuration that does
/// not describe a policy; `message` names the field (serde's words).
pub fn invalid_config(py: Python<'_>, message: String, wrong_type: bool) -> PyErr {
    let (cell, name) = if wrong_type {
        (&RATE_LIMIT_TYPE_ERROR, "RateLimitTypeError")
    } else {
        (&RATE_LIMIT_ERROR, "RateLimitError")
    };
    raise(py, cell, name, (message, "invalid_config"))
}

/// `RateLimited` for a request `denied` by the limiter called `limiter`,
/// with `.retry_after` in seconds.
pub fn rate_limited(py: Python<'_>, limiter: &str, denied: &Decision) -> PyErr {
    let retry_after = denied.retry_after.as_secs_f64();
    let message = format!("rate limit {limiter:?} exceeded: retry after {retry_after} s");
    raise(py, &RATE_LIMITED, "RateLimited", (message, retry_after))
}

/// `TypeError`, as pickle raises it, for an object of `class` that does not
/// pickle, saying `why`. Raised by the class's `__reduce__`: without one,
/// protocols 0 and 1 write a pickle that only `loads` refuses.
pub fn cannot_pickle(class: &str, why: &str) -> PyErr {
    PyTypeError::new_err(format!("cannot pickle '{class}' object: {why}"))
}

fn raise<A>(py: Python<'_>, cell: &PyOnceLock<Py<PyType>>, name: &str, args: A) -> PyErr
where
    A: PyErrArguments + Send + Sync + 'static,
{
    match cell.import(py, "ratekeeper._errors", name) {
        Ok(class) => PyErr::from_type(class.clone(), args),
        // Only reachable when the package is broken; still raise, never panic.
        Err(import_error) => import_error,
    }
}
