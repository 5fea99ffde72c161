//! Numbers from Python: counts (`int` or `__index__`), flags, seconds of
//! any exact type to nanoseconds; and nanoseconds back to exact seconds.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyFloat, PyInt, PyType};
use ratekeeper::{Error, Nanos};

use super::{invalid_type, invalid_value, NANOS_PER_SEC, TOO_LARGE};
use crate::errors::{to_py, to_py_with};

const COUNT: &str = "an int";
const COUNT_NOT_BOOL: &str = "an int, not a bool";
const SECONDS: &str = "a number of seconds (an int, a float, a Decimal or a Fraction)";
const SECONDS_NOT_BOOL: &str = "a number of seconds, not a bool";

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

/// `obj.__index__()` for an integer that is not an `int` (a NumPy integer,
/// say), as `operator.index` reads one; `None` for anything else.
///
/// By its class's `__index__`, as `operator.index`: one looked up on the
/// object took an instance's own attribute, which `acquire_async` (reading
/// keys with `operator.index`) then refused, after booking.
pub(super) fn index_of<'py>(obj: &Bound<'py, PyAny>) -> Option<Bound<'py, PyInt>> {
    // SAFETY: `obj` is a live object, the GIL is held (a `Bound`), and
    // `PyNumber_Index` returns a new reference or NULL with an exception set.
    let index =
        unsafe { Bound::from_owned_ptr_or_err(obj.py(), pyo3::ffi::PyNumber_Index(obj.as_ptr())) };
    index.ok()?.cast_into::<PyInt>().ok()
}

/// A count (`cost`, `capacity`...): a Python `int` (not `bool`), or an
/// integer with `__index__`, from 0 to 2^64 - 1.
pub(super) fn count(obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<u64> {
    let too_large = "must be at most 2^64 - 1";
    // An `int` itself first: its type is one pointer to compare, where the
    // subclass checks below are calls into CPython.
    let checked = if obj.is_exact_instance_of::<PyInt>() {
        int_to_u64(obj, name, too_large)
    } else if obj.is_instance_of::<PyBool>() {
        Err(invalid_type(name, COUNT_NOT_BOOL))
    } else if obj.is_instance_of::<PyInt>() {
        int_to_u64(obj, name, too_large)
    } else if let Some(index) = index_of(obj) {
        int_to_u64(&index, name, too_large)
    } else {
        Err(invalid_type(name, COUNT))
    };
    checked.map_err(|err| to_py(obj.py(), err))
}

/// A `bool` (or NumPy's), not any value with a truth: an int there is
/// more likely a count in the wrong place.
pub(super) fn flag(obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<bool> {
    obj.extract::<bool>()
        .map_err(|_| to_py(obj.py(), invalid_type(name, "a bool")))
}

/// A duration or time in seconds: an `int` (exact), a `float` (rounded to the
/// nearest nanosecond by the core), or any other number with an exact
/// `as_integer_ratio()` (`Decimal`, `Fraction`: exact, rounded to the nearest
/// nanosecond, halves up, as for floats).
pub(super) fn seconds(obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<Nanos> {
    // A `float` or an `int` itself first, as in `count`.
    let checked = if let Ok(float) = obj.cast_exact::<PyFloat>() {
        Nanos::from_secs_f64(float.value(), name)
    } else if obj.is_exact_instance_of::<PyInt>() {
        whole_seconds(obj, name)
    } else if obj.is_instance_of::<PyBool>() {
        Err(invalid_type(name, SECONDS_NOT_BOOL))
    } else if let Ok(float) = obj.cast::<PyFloat>() {
        Nanos::from_secs_f64(float.value(), name)
    } else if obj.is_instance_of::<PyInt>() {
        whole_seconds(obj, name)
    } else if let Some(index) = index_of(obj) {
        whole_seconds(&index, name)
    } else {
        return exact_seconds(obj, name);
    };
    checked.map_err(|err| to_py(obj.py(), err))
}

/// A duration that must be positive (a period, an interval, a window):
/// [`seconds`], refusing here a positive value that rounds to 0 ns, which
/// the core could only call zero. Zero itself is left to the core's check.
pub(super) fn positive_seconds(obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<Nanos> {
    let nanos = seconds(obj, name)?;
    // Positive or not only picks the words: a number that cannot say (one
    // without comparisons) gets the core's, for a zero.
    if nanos != Nanos::ZERO || !obj.gt(0).unwrap_or(false) {
        return Ok(nanos);
    }
    // `zero_value`, the code a zero gets, since that is what it became; in
    // the core's words for one that cannot be written (its str() raised).
    let zero = Error::ZeroValue { name };
    Err(match obj.str() {
        Ok(text) => {
            let words = format!("`{name}` must be at least 1 ns; {text} s rounds to 0");
            to_py_with(obj.py(), zero, words)
        }
        Err(_) => to_py(obj.py(), zero),
    })
}

/// Whole seconds, `int` (or `__index__`) as they are, in nanoseconds.
fn whole_seconds(int: &Bound<'_, PyAny>, name: &'static str) -> Result<Nanos, Error> {
    int_to_u64(int, name, TOO_LARGE).and_then(|secs| {
        let nanos = secs.checked_mul(NANOS_PER_SEC).map(Nanos);
        nanos.ok_or(invalid_value(name, TOO_LARGE))
    })
}

/// Seconds from `obj.as_integer_ratio()`, in exact integer arithmetic.
fn exact_seconds(obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<Nanos> {
    let py = obj.py();
    let method = intern!(py, "as_integer_ratio");
    if !obj.hasattr(method)? {
        return Err(to_py(py, invalid_type(name, SECONDS)));
    }
    let fail = |reason| to_py(py, invalid_value(name, reason));
    // A Decimal's size, known before its ratio: that of 1e-999999999 has a
    // denominator of a billion digits, which took Python minutes to make.
    // Beyond 10^±30 s, it is far out of range, or 0 ns once rounded (a
    // zero, whatever its exponent, is left to its ratio: 0/1).
    let sized = obj.is_instance(decimal_type(py)?)?
        && !obj.call_method0(intern!(py, "is_zero"))?.is_truthy()?;
    let adjusted = match sized {
        true => obj
            .call_method0(intern!(py, "adjusted"))?
            .extract::<i64>()
            .ok(),
        false => None,
    };
    if let Some(adjusted) = adjusted.filter(|a| a.abs() > 30) {
        if obj.lt(0)? {
            return Err(fail("must not be negative"));
        }
        return if adjusted > 0 {
            Err(fail(TOO_LARGE))
        } else {
            Ok(Nanos::ZERO)
        };
    }
    // Decimal('NaN') and Decimal('Infinity') refuse to give a ratio.
    let ratio = obj
        .call_method0(method)
        .map_err(|_| fail("must be a finite number"))?;
    let (numerator, denominator) = ratio
        .extract::<(Bound<'_, PyInt>, Bound<'_, PyInt>)>()
        .map_err(|_| to_py(py, invalid_type(name, SECONDS)))?;
    // Fraction's and Decimal's denominators are positive; another number's
    // sign is both terms', and a zero denominator is no number (the
    // division below raised ZeroDivisionError).
    let (numerator, denominator) = match denominator.lt(0)? {
        true => (numerator.neg()?, denominator.neg()?),
        false => (numerator.into_any(), denominator.into_any()),
    };
    if denominator.eq(0)? {
        return Err(fail("must be a finite number"));
    }
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

/// A longest wait: seconds, with `math.inf` or `None` meaning no bound (as
/// a `timeout` of `None` does, and a JS `maxWaitMs` of `null`).
pub(super) fn longest_wait(obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<Nanos> {
    if obj.is_none() {
        return Ok(Nanos::MAX);
    }
    match obj.cast::<PyFloat>() {
        Ok(float) if float.value() == f64::INFINITY => Ok(Nanos::MAX),
        Ok(_) => seconds(obj, name),
        // Another infinity (Decimal('Infinity')) is no bound too.
        Err(_) if is_infinite_decimal(obj)? => Ok(Nanos::MAX),
        Err(_) => seconds(obj, name),
    }
}

/// Python's `repr` of a float number of seconds (`1e-09`, not Rust's `1e-9`).
pub fn float_repr(py: Python<'_>, value: f64) -> PyResult<String> {
    Ok(PyFloat::new(py, value).repr()?.to_string())
}

static DECIMAL: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `decimal.Decimal`, imported once (by the first call given an object
/// that is no int nor float).
fn decimal_type(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    DECIMAL
        .get_or_try_init(py, || {
            let decimal = PyModule::import(py, "decimal")?;
            decimal.getattr("Decimal").map(Bound::unbind)
        })
        .map(|decimal| decimal.bind(py))
}

/// Whether `obj` is a `Decimal` standing for +infinity.
fn is_infinite_decimal(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    let py = obj.py();
    Ok(obj.is_instance(decimal_type(py)?)?
        && obj.call_method0(intern!(py, "is_infinite"))?.is_truthy()?
        && obj.gt(0)?)
}

/// Seconds as the exact Python number for `nanos`: the `float` that rounds
/// back to it (as `repr` shows it), or else a `Fraction`.
pub fn seconds_object(py: Python<'_>, nanos: Nanos) -> PyResult<Bound<'_, PyAny>> {
    let float = nanos.as_secs_f64();
    if Nanos::from_secs_f64(float, "seconds") == Ok(nanos) {
        return Ok(PyFloat::new(py, float).into_any());
    }
    fraction(py, nanos)
}

/// `nanos` as an exact `Fraction` of seconds.
fn fraction(py: Python<'_>, nanos: Nanos) -> PyResult<Bound<'_, PyAny>> {
    static FRACTION: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let fraction = FRACTION.import(py, "fractions", "Fraction")?;
    fraction.call1((nanos.0, NANOS_PER_SEC))
}

/// Whether the seconds `obj` are more than `nanos`, what [`seconds`] read
/// them as to the nearest nanosecond. A float is the whole nanoseconds
/// whose float it is (`2e-9` is 2 ns); an exact number is compared exactly,
/// with a `Fraction` (through the float of its value, the third of a ns in
/// 10^9 s and a third was lost). `false` for a number that cannot be compared.
pub fn exceeds(obj: &Bound<'_, PyAny>, nanos: Nanos) -> PyResult<bool> {
    if let Ok(float) = obj.cast::<PyFloat>() {
        return Ok(nanos.as_secs_f64() < float.value());
    }
    if obj.is_instance_of::<PyInt>() {
        return Ok(false); // whole seconds
    }
    Ok(obj.gt(fraction(obj.py(), nanos)?).unwrap_or(false))
}
