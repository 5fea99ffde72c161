//! Python arguments to core values, and the default clock.
//!
//! Each public function is a `from_py_with` extractor for one argument, so
//! the argument's name reaches the error message. Every failure is a core
//! [`Error`] raised through [`crate::errors::to_py`].

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyFloat, PyInt, PyModule};
use ratekeeper::{Error, Nanos};

use crate::errors::to_py;

const NANOS_PER_SEC: u64 = 1_000_000_000;
const COUNT: &str = "an int";
const COUNT_NOT_BOOL: &str = "an int, not a bool";
const SECONDS: &str = "an int or a float (seconds)";
const SECONDS_NOT_BOOL: &str = "an int or a float (seconds), not a bool";

fn invalid_type(name: &'static str, expected: &'static str) -> Error {
    Error::InvalidType { name, expected }
}

/// An `int` as a `u64`; a negative or too large one is `invalid_value`.
fn int_to_u64(
    obj: &Bound<'_, PyAny>,
    name: &'static str,
    too_large: &'static str,
) -> Result<u64, Error> {
    obj.extract::<u64>().map_err(|_| {
        let negative = obj.lt(0).unwrap_or(false);
        let reason = if negative {
            "must not be negative"
        } else {
            too_large
        };
        Error::InvalidValue { name, reason }
    })
}

/// A count (`cost`, `capacity`...): a Python `int` (not `bool`) from 0 to 2^64 - 1.
fn count(obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<u64> {
    let checked = if obj.is_instance_of::<PyBool>() {
        Err(invalid_type(name, COUNT_NOT_BOOL))
    } else if obj.is_instance_of::<PyInt>() {
        int_to_u64(obj, name, "must be at most 2^64 - 1")
    } else {
        Err(invalid_type(name, COUNT))
    };
    checked.map_err(|err| to_py(obj.py(), err))
}

/// A duration or time in seconds: an `int` (exact) or a `float` (rounded to
/// the nearest nanosecond by the core).
fn seconds(obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<Nanos> {
    const TOO_LARGE: &str = "is too large (the limit is 2^64 nanoseconds, about 584 years)";
    let checked = if obj.is_instance_of::<PyBool>() {
        Err(invalid_type(name, SECONDS_NOT_BOOL))
    } else if let Ok(float) = obj.cast::<PyFloat>() {
        Nanos::from_secs_f64(float.value(), name)
    } else if obj.is_instance_of::<PyInt>() {
        int_to_u64(obj, name, TOO_LARGE).and_then(|secs| {
            let nanos = secs.checked_mul(NANOS_PER_SEC).map(Nanos);
            nanos.ok_or(Error::InvalidValue {
                name,
                reason: TOO_LARGE,
            })
        })
    } else {
        Err(invalid_type(name, SECONDS))
    };
    checked.map_err(|err| to_py(obj.py(), err))
}

/// `None` stays `None` (the argument's default); anything else is converted.
fn optional<T>(
    obj: &Bound<'_, PyAny>,
    convert: impl FnOnce(&Bound<'_, PyAny>) -> PyResult<T>,
) -> PyResult<Option<T>> {
    if obj.is_none() {
        Ok(None)
    } else {
        convert(obj).map(Some)
    }
}

/// The `capacity` argument.
pub fn capacity(obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    count(obj, "capacity")
}

/// The `refill_tokens` argument.
pub fn refill_tokens(obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    count(obj, "refill_tokens")
}

/// The `initial_tokens` argument (`None` means a full bucket).
pub fn initial_tokens(obj: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
    optional(obj, |obj| count(obj, "initial_tokens"))
}

/// The `limit` argument.
pub fn limit(obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    count(obj, "limit")
}

/// The `cost` argument.
pub fn cost(obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    count(obj, "cost")
}

/// The `refill_period` argument, in seconds.
pub fn refill_period(obj: &Bound<'_, PyAny>) -> PyResult<Nanos> {
    seconds(obj, "refill_period")
}

/// The `window` argument, in seconds.
pub fn window(obj: &Bound<'_, PyAny>) -> PyResult<Nanos> {
    seconds(obj, "window")
}

/// The `now` argument, in seconds (`None` means [`monotonic`]).
pub fn now(obj: &Bound<'_, PyAny>) -> PyResult<Option<Nanos>> {
    optional(obj, |obj| seconds(obj, "now"))
}

/// Python's `repr` of a float number of seconds (`1e-09`, not Rust's `1e-9`).
pub fn float_repr(py: Python<'_>, value: f64) -> PyResult<String> {
    Ok(PyFloat::new(py, value).repr()?.to_string())
}

static TIME_MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// `now` or, when it is `None`, `time.monotonic()`.
///
/// `time.monotonic` is looked up on every call, so that tests which replace
/// it (`monkeypatch`, `time-machine`) move this clock too.
pub fn now_or_monotonic(py: Python<'_>, now: Option<Nanos>) -> PyResult<Nanos> {
    if let Some(now) = now {
        return Ok(now);
    }
    let time =
        TIME_MODULE.get_or_try_init(py, || PyModule::import(py, "time").map(Bound::unbind))?;
    let reading = time.bind(py).getattr(intern!(py, "monotonic"))?.call0()?;
    seconds(&reading, "now")
}
