//! Python arguments to core values, and the clocks.
//!
//! Each public extractor is a `from_py_with` function for one argument and
//! carries that argument's name, so the name reaches the error message.
//! Every failure is a core [`Error`] raised through [`crate::errors::to_py`].

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyFloat, PyInt, PyModule, PyString};
use ratekeeper::{Error, Nanos, Refill};

use crate::errors::to_py;

const NANOS_PER_SEC: u64 = 1_000_000_000;
const COUNT: &str = "an int";
const COUNT_NOT_BOOL: &str = "an int, not a bool";
const SECONDS: &str = "a number of seconds (an int, a float, a Decimal or a Fraction)";
const SECONDS_NOT_BOOL: &str = "a number of seconds, not a bool";
const TOO_LARGE: &str = "is too large (the limit is 2^64 nanoseconds, about 584 years)";

fn invalid_type(name: &'static str, expected: &'static str) -> Error {
    Error::InvalidType { name, expected }
}

fn invalid_value(name: &'static str, reason: &'static str) -> Error {
    Error::InvalidValue { name, reason }
}

/// An `int` as a `u64`; a negative or too large one is `invalid_value`.
fn int_to_u64(
    obj: &Bound<'_, PyAny>,
    name: &'static str,
    too_large: &'static str,
) -> Result<u64, Error> {
    obj.extract::<u64>().map_err(|_| {
        let negative = obj.lt(0).unwrap_or(false);
        invalid_value(
            name,
            if negative {
                "must not be negative"
            } else {
                too_large
            },
        )
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

/// A duration or time in seconds: an `int` (exact), a `float` (rounded to the
/// nearest nanosecond by the core), or any other number with an exact
/// `as_integer_ratio()` (`Decimal`, `Fraction`: exact, rounded to the nearest
/// nanosecond, halves up, as for floats).
fn seconds(obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<Nanos> {
    let checked = if obj.is_instance_of::<PyBool>() {
        Err(invalid_type(name, SECONDS_NOT_BOOL))
    } else if let Ok(float) = obj.cast::<PyFloat>() {
        Nanos::from_secs_f64(float.value(), name)
    } else if obj.is_instance_of::<PyInt>() {
        int_to_u64(obj, name, TOO_LARGE).and_then(|secs| {
            let nanos = secs.checked_mul(NANOS_PER_SEC).map(Nanos);
            nanos.ok_or(invalid_value(name, TOO_LARGE))
        })
    } else {
        return exact_seconds(obj, name);
    };
    checked.map_err(|err| to_py(obj.py(), err))
}

/// Seconds from `obj.as_integer_ratio()`, in exact integer arithmetic.
fn exact_seconds(obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<Nanos> {
    let py = obj.py();
    let method = intern!(py, "as_integer_ratio");
    if !obj.hasattr(method)? {
        return Err(to_py(py, invalid_type(name, SECONDS)));
    }
    let fail = |reason| to_py(py, invalid_value(name, reason));
    // Decimal('NaN') and Decimal('Infinity') refuse to give a ratio.
    let ratio = obj
        .call_method0(method)
        .map_err(|_| fail("must be a finite number"))?;
    let (numerator, denominator) = ratio
        .extract::<(Bound<'_, PyInt>, Bound<'_, PyInt>)>()
        .map_err(|_| to_py(py, invalid_type(name, SECONDS)))?;
    if numerator.lt(0)? {
        return Err(fail("must not be negative"));
    }
    // round(n / d * 1e9) with halves up: floor((2 * n * 1e9 + d) / (2 * d)).
    let twice = numerator.mul(2 * NANOS_PER_SEC)?.add(&denominator)?;
    let nanos = twice.floor_div(denominator.mul(2)?)?;
    nanos
        .extract::<u64>()
        .map(Nanos)
        .map_err(|_| fail(TOO_LARGE))
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

/// A longest wait: seconds, with `math.inf` meaning no bound.
fn longest_wait(obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<Nanos> {
    match obj.cast::<PyFloat>() {
        Ok(float) if float.value() == f64::INFINITY => Ok(Nanos::MAX),
        _ => seconds(obj, name),
    }
}

/// Defines one extractor per argument: the function's name is the argument's.
macro_rules! arguments {
    ($($(#[$doc:meta])* $name:ident -> $ty:ty = $convert:expr;)*) => {$(
        $(#[$doc])*
        pub fn $name(obj: &Bound<'_, PyAny>) -> PyResult<$ty> {
            $convert(obj, stringify!($name))
        }
    )*};
}

arguments! {
    /// A bucket's or queue's `capacity`.
    capacity -> u64 = count;
    /// A token bucket's `refill_tokens`.
    refill_tokens -> u64 = count;
    /// A window's `limit`.
    limit -> u64 = count;
    /// A `Gcra`'s `burst`.
    burst -> u64 = count;
    /// `Gcra.per_period`'s `tokens`.
    tokens -> u64 = count;
    /// The `cost` of a request.
    cost -> u64 = count;
    /// A token bucket's `refill_period`, in seconds.
    refill_period -> Nanos = seconds;
    /// A window's length, in seconds.
    window -> Nanos = seconds;
    /// A leaky bucket's `interval`, in seconds.
    interval -> Nanos = seconds;
    /// A `Gcra`'s `emission_interval`, in seconds.
    emission_interval -> Nanos = seconds;
    /// `Gcra.per_period`'s `period`, in seconds.
    period -> Nanos = seconds;
    /// `reserve`'s `max_wait`, in seconds (`math.inf`: no bound).
    max_wait -> Nanos = longest_wait;
    /// `initial_tokens` (`None` means a full bucket).
    initial_tokens -> Option<u64> = |obj, name| optional(obj, |obj| count(obj, name));
    /// `now`, in seconds (`None` means the limiter's clock).
    now -> Option<Nanos> = |obj, name| optional(obj, |obj| seconds(obj, name));
    /// `refund`'s `taken_at`, in seconds (`None` means the limiter's clock).
    taken_at -> Option<Nanos> = |obj, name| optional(obj, |obj| seconds(obj, name));
    /// `acquire`'s `timeout`, in seconds (`None` or `math.inf`: no bound).
    timeout -> Nanos = |obj: &Bound<'_, PyAny>, name| {
        optional(obj, |obj| longest_wait(obj, name)).map(|t| t.unwrap_or(Nanos::MAX))
    };
}

/// The `refill` argument: `"greedy"` or `"interval"`.
pub fn refill(obj: &Bound<'_, PyAny>) -> PyResult<Refill> {
    let name = "refill";
    let checked = match obj.cast::<PyString>() {
        Err(_) => Err(invalid_type(name, "a str, 'greedy' or 'interval'")),
        Ok(text) => match &*text.to_cow()? {
            "greedy" => Ok(Refill::Greedy),
            "interval" => Ok(Refill::Interval),
            _ => Err(invalid_value(name, "must be 'greedy' or 'interval'")),
        },
    };
    checked.map_err(|err| to_py(obj.py(), err))
}

/// A limiter's `name`, as used in its RateLimit headers: a `str` (`Some`
/// always; the `Option` is for the argument's default, `None`: "default").
pub fn name(obj: &Bound<'_, PyAny>) -> PyResult<Option<Py<PyString>>> {
    match obj.cast::<PyString>() {
        Ok(text) => Ok(Some(text.clone().unbind())),
        Err(_) => Err(to_py(obj.py(), invalid_type("name", "a str"))),
    }
}

/// A limiter's `clock`: `None` (`time.monotonic`) or a callable returning seconds.
pub fn clock(obj: &Bound<'_, PyAny>) -> PyResult<Option<Py<PyAny>>> {
    optional(obj, |obj| {
        if obj.is_callable() {
            Ok(obj.clone().unbind())
        } else {
            let expected = "None or a callable returning seconds";
            Err(to_py(obj.py(), invalid_type("clock", expected)))
        }
    })
}

/// Python's `repr` of a float number of seconds (`1e-09`, not Rust's `1e-9`).
pub fn float_repr(py: Python<'_>, value: f64) -> PyResult<String> {
    Ok(PyFloat::new(py, value).repr()?.to_string())
}

static TIME_MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The `time` module, imported once.
pub fn time_module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    TIME_MODULE
        .get_or_try_init(py, || PyModule::import(py, "time").map(Bound::unbind))
        .map(|module| module.bind(py))
}

/// `now` or, when it is `None`, a reading of `clock` (when given) or of the
/// default clock, `time.monotonic()`'s.
pub fn now_or_clock(
    py: Python<'_>,
    now: Option<Nanos>,
    clock: Option<&Py<PyAny>>,
) -> PyResult<Nanos> {
    match (now, clock) {
        (Some(now), _) => Ok(now),
        (None, Some(clock)) => seconds(&clock.bind(py).call0()?, "clock"),
        (None, None) => monotonic(py),
    }
}

/// `time.monotonic()` in nanoseconds, read as CPython reads it on Linux:
/// `clock_gettime(CLOCK_MONOTONIC)`, without the Python call and its float.
#[cfg(target_os = "linux")]
fn monotonic(_py: Python<'_>) -> PyResult<Nanos> {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec; CLOCK_MONOTONIC always
    // exists on Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    let (secs, nanos) = (now.tv_sec as u64, now.tv_nsec as u64);
    Ok(Nanos(
        secs.saturating_mul(NANOS_PER_SEC).saturating_add(nanos),
    ))
}

/// `time.monotonic()` in nanoseconds (`time.monotonic_ns`, looked up once).
#[cfg(not(target_os = "linux"))]
fn monotonic(py: Python<'_>) -> PyResult<Nanos> {
    static MONOTONIC_NS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let clock = MONOTONIC_NS.get_or_try_init(py, || {
        time_module(py)?.getattr("monotonic_ns").map(Bound::unbind)
    })?;
    clock.bind(py).call0()?.extract::<u64>().map(Nanos)
}
