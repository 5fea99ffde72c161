//! Python arguments to core values, and the clocks.
//!
//! Each public extractor is a `from_py_with` function for one argument and
//! carries that argument's name, so the name reaches the error message.
//! Every failure is a core [`Error`] raised through [`crate::errors::to_py`].

use pyo3::exceptions::{PyTypeError, PyUnicodeEncodeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{
    PyBool, PyBytes, PyDict, PyFloat, PyInt, PyMemoryView, PyModule, PyString, PyType,
};
use ratekeeper::{Algorithm, Calendar, Decision, Error, Eviction, Nanos, Refill};
use smallvec::SmallVec;

use crate::decision::PyDecision;
use crate::errors::{to_py, to_py_with};
use crate::limiter::PyLimiter;

const NANOS_PER_SEC: u64 = 1_000_000_000;
const COUNT: &str = "an int";
const COUNT_NOT_BOOL: &str = "an int, not a bool";
const SECONDS: &str = "a number of seconds (an int, a float, a Decimal or a Fraction)";
const SECONDS_NOT_BOOL: &str = "a number of seconds, not a bool";
const TOO_LARGE: &str = "is too large (the limit is 2^64 nanoseconds, about 584 years)";
const NOT_TEXT: &str = "must be valid Unicode text (no lone surrogates)";
const TOO_MANY_DIGITS: &str = "has more digits than Python writes as text (an int key is its \
                               decimal digits; see sys.set_int_max_str_digits)";

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

/// `obj.__index__()` for an integer that is not an `int` (a NumPy integer,
/// say), as `operator.index` reads one; `None` for anything else.
///
/// By its class's `__index__`, as `operator.index`: one looked up on the
/// object took an instance's own attribute, which `acquire_async` (reading
/// keys with `operator.index`) then refused, after booking.
fn index_of<'py>(obj: &Bound<'py, PyAny>) -> Option<Bound<'py, PyInt>> {
    // SAFETY: `obj` is a live object, the GIL is held (a `Bound`), and
    // `PyNumber_Index` returns a new reference or NULL with an exception set.
    let index =
        unsafe { Bound::from_owned_ptr_or_err(obj.py(), pyo3::ffi::PyNumber_Index(obj.as_ptr())) };
    index.ok()?.cast_into::<PyInt>().ok()
}

/// A count (`cost`, `capacity`...): a Python `int` (not `bool`), or an
/// integer with `__index__`, from 0 to 2^64 - 1.
fn count(obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<u64> {
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
fn flag(obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<bool> {
    obj.extract::<bool>()
        .map_err(|_| to_py(obj.py(), invalid_type(name, "a bool")))
}

/// A duration or time in seconds: an `int` (exact), a `float` (rounded to the
/// nearest nanosecond by the core), or any other number with an exact
/// `as_integer_ratio()` (`Decimal`, `Fraction`: exact, rounded to the nearest
/// nanosecond, halves up, as for floats).
fn seconds(obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<Nanos> {
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
fn positive_seconds(obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<Nanos> {
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

/// A longest wait: seconds, with `math.inf` or `None` meaning no bound (as
/// a `timeout` of `None` does, and a JS `maxWaitMs` of `null`).
fn longest_wait(obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<Nanos> {
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
    /// A window's (or a given `Decision`'s) `limit`.
    limit -> u64 = count;
    /// A given `Decision`'s `remaining`.
    remaining -> u64 = count;
    /// A given `Decision`'s `allowed`.
    allowed -> bool = flag;
    /// A given `Decision`'s `retry_after`, in seconds.
    retry_after -> Nanos = seconds;
    /// A given `Decision`'s `reset_after`, in seconds.
    reset_after -> Nanos = seconds;
    /// A `Gcra`'s `burst`.
    burst -> u64 = count;
    /// `Gcra.per_period`'s `tokens`.
    tokens -> u64 = count;
    /// The `cost` of a request.
    cost -> u64 = count;
    /// A token bucket's `refill_period`, in seconds.
    refill_period -> Nanos = positive_seconds;
    /// A window algorithm's `window`, in seconds.
    window -> Nanos = positive_seconds;
    /// A span of `window` seconds that may be empty (`max_in_window`'s, a
    /// given `Decision`'s).
    span -> Nanos = |obj, _| seconds(obj, "window");
    /// A leaky bucket's `interval`, in seconds.
    interval -> Nanos = positive_seconds;
    /// A `Gcra`'s `emission_interval`, in seconds.
    emission_interval -> Nanos = positive_seconds;
    /// `Gcra.per_period`'s `period`, in seconds.
    period -> Nanos = positive_seconds;
    /// `reserve`'s `max_wait`, in seconds (`None` or `math.inf`: no bound).
    max_wait -> Nanos = longest_wait;
    /// `initial_tokens` (`None` means a full bucket).
    initial_tokens -> Option<u64> = |obj, name| optional(obj, |obj| count(obj, name));
    /// `now`, in seconds (`None` means the limiter's clock).
    now -> Option<Nanos> = |obj, name| optional(obj, |obj| seconds(obj, name));
    /// The `now` of a call answering a Decision, and, for a float or an int,
    /// the float a caller adds its waits to (`now + retry_after` is a float
    /// sum); a `Fraction` or `Decimal` is exact, and so are its waits.
    moment -> Option<Now> = |obj: &Bound<'_, PyAny>, _| optional(obj, |obj| {
        let at = seconds(obj, "now")?;
        let secs = if let Ok(float) = obj.cast::<PyFloat>() {
            float.value()
        } else if obj.is_instance_of::<PyInt>() {
            // Whole seconds (not a bool: `seconds` refused it) below 2^64
            // ns: below 2^35, so exact as a float.
            (at.0 / NANOS_PER_SEC) as f64
        } else {
            f64::NAN
        };
        Ok(Now { at, secs })
    });
    /// `refund`'s `taken_at`, in seconds (`None` means the limiter's clock).
    taken_at -> Option<Nanos> = |obj, name| optional(obj, |obj| seconds(obj, name));
    /// `acquire`'s `timeout`, in seconds (`None` or `math.inf`: no bound).
    timeout -> Nanos = longest_wait;
}

/// One of the strings `choices` names, as its value; anything else is
/// `expected` (a type error) or `reason` (a value error).
fn one_of<T: Copy>(
    obj: &Bound<'_, PyAny>,
    name: &'static str,
    choices: &[(&str, T)],
    (expected, reason): (&'static str, &'static str),
) -> PyResult<T> {
    let checked = match obj.cast::<PyString>() {
        Err(_) => Err(invalid_type(name, expected)),
        Ok(text) => {
            let text = self::text(text, name)?;
            let found = choices.iter().find(|(choice, _)| *choice == text);
            found
                .map(|&(_, value)| value)
                .ok_or(invalid_value(name, reason))
        }
    };
    checked.map_err(|err| to_py(obj.py(), err))
}

/// A given `Decision`'s `limits`: an iterable of `(name, window, Decision)`
/// tuples, as (name, window, numbers); `None` (not given) stays `None`.
pub fn limits(obj: &Bound<'_, PyAny>) -> PyResult<Option<Vec<(String, Nanos, Decision)>>> {
    let wrong_type = || {
        let expected = "an iterable of (name, window, Decision) tuples";
        to_py(obj.py(), invalid_type("limits", expected))
    };
    optional(obj, |obj| {
        let mut limits = Vec::new();
        for item in obj.try_iter().map_err(|_| wrong_type())? {
            let item = item?;
            let (name, window, decision) = item
                .extract::<(Bound<'_, PyAny>, Bound<'_, PyAny>, Bound<'_, PyAny>)>()
                .map_err(|_| wrong_type())?;
            let name = name.cast::<PyString>().map_err(|_| wrong_type())?;
            let decision = decision.cast::<PyDecision>().map_err(|_| wrong_type())?;
            let name = limit_name(obj.py(), text(name, "limits")?)?.to_owned();
            limits.push((name, span(&window)?, decision.get().decision()));
        }
        Ok(limits)
    })
}

/// The `refill` argument: `"greedy"` or `"interval"`.
pub fn refill(obj: &Bound<'_, PyAny>) -> PyResult<Refill> {
    let choices = Refill::ALL.map(|r| (r.name(), r));
    let errors = (
        "a str, 'greedy' or 'interval'",
        "must be 'greedy' or 'interval'",
    );
    one_of(obj, "refill", &choices, errors)
}

/// A limiter's `name`, as used in its RateLimit headers: a `str` of text
/// that is a limit's name ([`limit_name`]) (`Some` always; the `Option` is
/// for the argument's default, `None`: "default").
pub fn name(obj: &Bound<'_, PyAny>) -> PyResult<Option<Py<PyString>>> {
    match obj.cast::<PyString>() {
        Ok(text) => {
            // Refused here, not when the headers, `repr` or pickling spell it.
            limit_name(obj.py(), self::text(text, "name")?)?;
            Ok(Some(text.clone().unbind()))
        }
        Err(_) => Err(to_py(obj.py(), invalid_type("name", "a str"))),
    }
}

/// `name`, if it is a limit's name as the core's one rule has it
/// ([`Headers::check_name`](ratekeeper::Headers::check_name): printable
/// ASCII, not empty), the rule a policy's limits follow too.
pub fn limit_name<'a>(py: Python<'_>, name: &'a str) -> PyResult<&'a str> {
    ratekeeper::Headers::check_name(name).map_err(|err| to_py(py, err))?;
    Ok(name)
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

static TIME_MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The `time` module, imported once.
pub fn time_module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    TIME_MODULE
        .get_or_try_init(py, || PyModule::import(py, "time").map(Bound::unbind))
        .map(|module| module.bind(py))
}

/// A `now` given to a call: the instant, and the float the caller passed
/// (NaN if it has none), to which it will add the decision's waits.
#[derive(Clone, Copy)]
pub struct Now {
    pub at: Nanos,
    pub secs: f64,
}

/// `now` or, when it is `None`, a reading of `clock` (when given) or of the
/// default clock, `time.monotonic()`'s.
///
/// Inlined, with the call of a given clock kept apart: a decision on the
/// default clock then reads it with no call but the clock's own.
#[inline(always)]
pub fn now_or_clock(
    py: Python<'_>,
    now: Option<Nanos>,
    clock: Option<&Py<PyAny>>,
) -> PyResult<Nanos> {
    match (now, clock) {
        (Some(now), _) => Ok(now),
        (None, Some(clock)) => called(py, clock),
        (None, None) => monotonic(py),
    }
}

/// A reading of the clock given to a limiter.
#[inline(never)]
fn called(py: Python<'_>, clock: &Py<PyAny>) -> PyResult<Nanos> {
    seconds(&clock.bind(py).call0()?, "clock")
}

/// `time.monotonic()` in nanoseconds, read as CPython reads it on Linux:
/// `clock_gettime(CLOCK_MONOTONIC)`, without the Python call and its float.
#[cfg(target_os = "linux")]
#[inline(always)]
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

/// Encoded state for `restore` and `from_bytes`: `bytes` (or any buffer
/// of bytes: `bytearray`, `memoryview`).
pub fn data(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(bytes) = obj.cast::<PyBytes>() {
        return Ok(bytes.as_bytes().to_vec());
    }
    if obj.is_instance_of::<PyString>() {
        return Err(to_py(obj.py(), invalid_type("data", "bytes, not a str")));
    }
    // A buffer's bytes, as CPython copies them. Not read as a sequence of
    // ints: pyo3 sized that copy by `len(obj)` before reading an item, and
    // a `__len__` that lied aborted the interpreter (an allocation of 2^63
    // bytes that failed).
    let view =
        PyMemoryView::from(obj).map_err(|_| to_py(obj.py(), invalid_type("data", "bytes")))?;
    let bytes = view.call_method0(intern!(obj.py(), "tobytes"))?;
    Ok(bytes.cast::<PyBytes>()?.as_bytes().to_vec())
}

/// The items of the iterable `obj`, each extracted as a `T`, read one at a
/// time. pyo3's `Vec<T>` sized its copy by `len(obj)` before reading an
/// item: a `__len__` that lied panicked (a capacity overflow) or aborted
/// the interpreter (an allocation that failed).
pub fn items<'py, T>(obj: &Bound<'py, PyAny>) -> PyResult<Vec<T>>
where
    T: pyo3::conversion::FromPyObjectOwned<'py>,
{
    let mut items = Vec::new();
    for item in obj.try_iter()? {
        items.push(item?.extract::<T>().map_err(Into::into)?);
    }
    Ok(items)
}

/// A key of a keyed limiter or a value of a policy's request, as bytes:
/// a `str` is its UTF-8, an `int` its decimal digits (so `42` and `"42"`
/// are the same key), `bytes` themselves.
///
/// A `str` or `bytes` key is borrowed where CPython keeps its bytes (for an
/// ASCII `str`, its very characters), for as long as the argument lives:
/// copying it onto the stack (a variable-length copy, then fixed-width
/// loads of what it wrote, which wait for its stores) was a tenth of a
/// keyed `try_acquire`. Digits are owned: short ones on the stack.
#[derive(Clone)]
pub enum Key<'a> {
    Borrowed(&'a [u8]),
    Inline(u8, [u8; INLINE_KEY]),
    Heap(Box<[u8]>),
}

/// The longest key a [`Key`] owns on the stack.
const INLINE_KEY: usize = 46;

impl<'a> Key<'a> {
    fn new(bytes: &[u8]) -> Key<'static> {
        if bytes.len() <= INLINE_KEY {
            let mut inline = [0; INLINE_KEY];
            inline[..bytes.len()].copy_from_slice(bytes);
            Key::Inline(bytes.len() as u8, inline)
        } else {
            Key::Heap(bytes.into())
        }
    }

    /// `obj` as a key; the error names the argument `name`.
    fn from_py(obj: &'a Bound<'_, PyAny>, name: &'static str) -> PyResult<Key<'a>> {
        Key::from_py_raising(obj, name, |err| to_py(obj.py(), err))
    }

    /// [`Key::from_py`], raising its own errors (about `name`) as `raise`
    /// makes them: a request's field names its value's errors itself.
    fn from_py_raising(
        obj: &'a Bound<'_, PyAny>,
        name: &'static str,
        raise: impl Fn(Error) -> PyErr,
    ) -> PyResult<Key<'a>> {
        if let Ok(text) = obj.cast::<PyString>() {
            return Ok(Key::Borrowed(utf8_raising(text, name, &raise)?));
        }
        if let Ok(bytes) = obj.cast::<PyBytes>() {
            return Ok(Key::Borrowed(bytes.as_bytes()));
        }
        let int = if obj.is_instance_of::<PyInt>() {
            (!obj.is_instance_of::<PyBool>()).then(|| obj.clone())
        } else {
            index_of(obj).map(Bound::into_any)
        };
        if let Some(int) = int {
            return Ok(match int.extract::<i64>() {
                Ok(int) => Key::new(itoa::Buffer::new().format(int).as_bytes()),
                // Beyond 64 bits: int's own decimal digits (not those of a
                // subclass's __str__).
                Err(_) => {
                    let digits = obj
                        .py()
                        .get_type::<PyInt>()
                        .call_method1(intern!(obj.py(), "__str__"), (&int,))
                        .map_err(|err| match err.is_instance_of::<PyValueError>(obj.py()) {
                            // More digits than Python writes: no key to read.
                            true => raise(invalid_value(name, TOO_MANY_DIGITS)),
                            false => err,
                        })?;
                    Key::new(utf8_raising(
                        &digits.cast_into::<PyString>()?,
                        name,
                        &raise,
                    )?)
                }
            });
        }
        Err(raise(invalid_type(name, "a str, bytes or int")))
    }
}

/// The UTF-8 bytes CPython keeps with `text`, or `None` with its exception
/// pending (a lone surrogate has no UTF-8; or a `MemoryError`).
#[inline(always)]
fn utf8_pending<'a>(text: &'a Bound<'_, PyString>) -> Option<&'a [u8]> {
    let mut size: pyo3::ffi::Py_ssize_t = 0;
    // SAFETY: `text` is a str, and the GIL is held (a `Bound`).
    let data = unsafe { pyo3::ffi::PyUnicode_AsUTF8AndSize(text.as_ptr(), &mut size) };
    if data.is_null() {
        return None;
    }
    // SAFETY: CPython returned `size` bytes at `data`, owned by `text` and
    // unchanged while it lives (a str is immutable).
    Some(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), size as usize) })
}

/// [`utf8_pending`], with the exception cleared when there are no bytes
/// (raised again, in our words, by [`utf8_raising`]).
#[inline(always)]
fn utf8_of<'a>(text: &'a Bound<'_, PyString>) -> Option<&'a [u8]> {
    let bytes = utf8_pending(text);
    if bytes.is_none() {
        drop(PyErr::take(text.py()));
    }
    bytes
}

/// The UTF-8 bytes of `text`, which CPython keeps with the string (for an
/// ASCII string, its very characters). A `str` that is not text (one with a
/// lone surrogate, such as `"\udc80"`) has no UTF-8: `invalid_value` naming
/// the argument `name`, where `str.encode` raises `UnicodeEncodeError`.
fn utf8<'a>(text: &'a Bound<'_, PyString>, name: &'static str) -> PyResult<&'a [u8]> {
    utf8_raising(text, name, |err| to_py(text.py(), err))
}

/// [`utf8`], raising its own error as `raise` makes it.
fn utf8_raising<'a>(
    text: &'a Bound<'_, PyString>,
    name: &'static str,
    raise: impl Fn(Error) -> PyErr,
) -> PyResult<&'a [u8]> {
    if let Some(bytes) = utf8_pending(text) {
        return Ok(bytes);
    }
    let py = text.py();
    let err = PyErr::fetch(py);
    if err.is_instance_of::<PyUnicodeEncodeError>(py) {
        return Err(raise(invalid_value(name, NOT_TEXT)));
    }
    Err(err) // anything else (MemoryError) as it is
}

/// The str argument `name`: [`text`], or `invalid_type` for anything else.
pub fn string<'a>(obj: &'a Bound<'_, PyAny>, name: &'static str) -> PyResult<&'a str> {
    match obj.cast::<PyString>() {
        Ok(s) => text(s, name),
        Err(_) => Err(to_py(obj.py(), invalid_type(name, "a str"))),
    }
}

/// A `str` argument `name` as Rust text, borrowed from the string. A lone
/// surrogate raises `RateLimitError` (`invalid_value`) naming `name`, never
/// a bare `UnicodeEncodeError`. Read `str` arguments through here (or
/// [`utf8`]) rather than with `to_cow`.
pub fn text<'a>(text: &'a Bound<'_, PyString>, name: &'static str) -> PyResult<&'a str> {
    let bytes = utf8(text, name)?;
    // CPython's UTF-8 of a str is always valid; checked rather than trusted.
    std::str::from_utf8(bytes).map_err(|_| to_py(text.py(), invalid_value(name, NOT_TEXT)))
}

impl AsRef<[u8]> for Key<'_> {
    #[inline]
    fn as_ref(&self) -> &[u8] {
        match self {
            Key::Borrowed(bytes) => bytes,
            Key::Inline(len, bytes) => &bytes[..*len as usize],
            Key::Heap(bytes) => bytes,
        }
    }
}

/// A keyed limiter's `key`.
pub fn key<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<Key<'a>> {
    Key::from_py(obj, "key")
}

/// The target argument of a deciding method (a key, a request), converted
/// in the method's body: `hold` reads `obj`, keeping in `slot` what the
/// target needs that `obj` does not hold. A conversion returned from a
/// function (as `from_py_with` calls one) crossed memory as a whole, and
/// the copy's wide loads waited for the narrow stores that wrote it (a
/// failed store forwarding): an eighth of a keyed decision.
pub trait Held<'a>: Sized {
    type Target: ?Sized;
    /// Where a conversion keeps what `obj` does not hold.
    type Slot: Default;
    fn hold(obj: &'a Bound<'_, PyAny>, slot: &'a mut Self::Slot) -> PyResult<&'a Self::Target>;
}

/// What a key's conversion keeps: an `int`'s digits, or a [`Key`].
#[derive(Default)]
pub struct KeySlot<'a> {
    digits: itoa::Buffer,
    key: Option<Key<'a>>,
}

impl<'a> Held<'a> for Key<'a> {
    type Target = [u8];
    type Slot = KeySlot<'a>;

    /// A `str` or `bytes` itself, the usual keys, borrowed, and an `int`
    /// itself written once, in place, without a [`Key`].
    #[inline(always)]
    fn hold(obj: &'a Bound<'_, PyAny>, slot: &'a mut KeySlot<'a>) -> PyResult<&'a [u8]> {
        if let Some(bytes) = usual_key(obj, &mut slot.digits) {
            return Ok(bytes);
        }
        let held: &'a Key<'a> = slot.key.insert(key(obj)?);
        Ok(held.as_ref())
    }
}

/// The bytes of a usual key, without a [`Key`]: a `str` or `bytes` itself,
/// borrowed, or an `int` of 64 bits written into `digits`; `None` for any
/// other (a subclass, a big int, a `str` that is not text), which
/// [`Key::from_py`] reads or refuses.
#[inline(always)]
fn usual_key<'a>(obj: &'a Bound<'_, PyAny>, digits: &'a mut itoa::Buffer) -> Option<&'a [u8]> {
    if let Ok(text) = obj.cast_exact::<PyString>() {
        utf8_of(text)
    } else if obj.is_exact_instance_of::<PyInt>() {
        let int = obj.extract::<i64>().ok()?;
        Some(digits.format(int).as_bytes())
    } else if let Ok(bytes) = obj.cast_exact::<PyBytes>() {
        Some(bytes.as_bytes())
    } else {
        None
    }
}

impl<'a> Held<'a> for Option<Request> {
    type Target = Request;
    type Slot = Request;

    /// Built in the call's slot: a request returned, wrapped in a `Result`
    /// and an `Option`, was copied whole at each step.
    #[inline(always)]
    fn hold(obj: &'a Bound<'_, PyAny>, slot: &'a mut Request) -> PyResult<&'a Request> {
        if obj.is_none() {
            return Ok(&NO_FIELDS);
        }
        slot.fill(obj)?;
        Ok(slot)
    }
}

/// A policy's request: its fields' names and values, end to end in one
/// buffer, so that a request of a few short fields allocates nothing and
/// is small to move.
#[derive(Clone, Default)]
pub struct Request {
    bytes: SmallVec<[u8; 96]>,
    /// Where each field's name ends, then its value, in `bytes`.
    ends: SmallVec<[(u32, u32); FIELDS]>,
}

/// The fields a request holds without allocating.
pub const FIELDS: usize = 4;

impl Request {
    /// Calls `f` with the fields as the core takes them. Pushed in place
    /// and lent, not returned: a returned list is moved (136 bytes, by
    /// `memcpy`) on every call.
    #[inline(always)]
    pub fn with_fields<R>(&self, f: impl FnOnce(&[(&str, &[u8])]) -> R) -> R {
        let mut fields = SmallVec::<[(&str, &[u8]); FIELDS]>::new();
        let mut start = 0;
        for &(name_end, value_end) in &self.ends {
            let (name_end, value_end) = (name_end as usize, value_end as usize);
            let name = &self.bytes[start..name_end];
            // SAFETY: `fill`, the only writer, leaves whole fields only (it
            // takes back what a failed read wrote), each name from a `&str`.
            let name = unsafe { std::str::from_utf8_unchecked(name) };
            start = value_end;
            fields.push((name, &self.bytes[name_end..value_end]));
        }
        f(&fields)
    }

    /// Reads the fields of the mapping `obj` into this request; on an
    /// error, leaves it as it was, so that every byte it holds belongs to a
    /// whole field (`with_fields` relies on it: names are UTF-8).
    fn fill(&mut self, obj: &Bound<'_, PyAny>) -> PyResult<()> {
        let (bytes, ends) = (self.bytes.len(), self.ends.len());
        let filled = self.fill_from(obj);
        if filled.is_err() {
            self.bytes.truncate(bytes);
            self.ends.truncate(ends);
        }
        filled
    }

    /// [`Request::fill`], leaving what it wrote on an error.
    fn fill_from(&mut self, obj: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = obj.py();
        let wrong_type = || {
            let expected = "a mapping of str field names to str, bytes or int values, or None";
            to_py(py, invalid_type("request", expected))
        };
        // The items are taken first and converted after: a conversion may
        // run Python code (an int subclass's `__index__`), which must not
        // change a dict under its iterator. A dict is read in place
        // (`PyDict_Next`), without the list of tuples `items()` makes.
        let items: SmallVec<[_; FIELDS]> = match obj.cast::<PyDict>() {
            Ok(dict) => dict.iter().collect(),
            Err(_) => match obj.cast::<pyo3::types::PyMapping>() {
                // Another mapping's items() may hold anything: what is not
                // pairs is no request, in our words (not pyo3's bare error).
                Ok(mapping) => mapping
                    .items()?
                    .iter()
                    .map(|item| item.extract::<(Bound<'_, PyAny>, Bound<'_, PyAny>)>())
                    .collect::<Result<_, _>>()
                    .map_err(|_| wrong_type())?,
                Err(_) => return Err(wrong_type()),
            },
        };
        let too_long = || to_py(py, invalid_value("request", "is over 4 GiB"));
        let mut digits = itoa::Buffer::new();
        for (field, value) in &items {
            let field = field.cast::<PyString>().map_err(|_| wrong_type())?;
            let name = text(field, "request")?;
            // A usual value as the key of a keyed limiter is read (`Held`):
            // a `Key` returned crossed memory as a whole, loaded wider than
            // it was stored (a failed store forwarding).
            let other;
            let value = match usual_key(value, &mut digits) {
                Some(bytes) => bytes,
                None => {
                    other =
                        Key::from_py_raising(value, "request", |err| of_field(err, name, value))?;
                    other.as_ref()
                }
            };
            self.bytes.extend_from_slice(name.as_bytes());
            let name_end = u32::try_from(self.bytes.len()).map_err(|_| too_long())?;
            self.bytes.extend_from_slice(value);
            let value_end = u32::try_from(self.bytes.len()).map_err(|_| too_long())?;
            self.ends.push((name_end, value_end));
        }
        Ok(())
    }
}

/// The request of no fields.
static NO_FIELDS: Request = Request {
    bytes: SmallVec::new_const(),
    ends: SmallVec::new_const(),
};

/// A request given or not (`None`: no fields).
impl AsRef<Request> for Option<Request> {
    fn as_ref(&self) -> &Request {
        self.as_ref().unwrap_or(&NO_FIELDS)
    }
}

/// A policy's `request`: a mapping of field names (`str`) to values (`str`,
/// `bytes` or `int`), or `None` for no fields.
pub fn request(obj: &Bound<'_, PyAny>) -> PyResult<Option<Request>> {
    if obj.is_none() {
        return Ok(None);
    }
    let mut request = Request::default();
    request.fill(obj)?;
    Ok(Some(request))
}

/// `err`, about a value of the argument `request`, said of its field `field`
/// (`request['user']`, as the Redis policy says it), whose value is `value`:
/// which of a request's values was wrong, and (for a wrong type) what it was.
fn of_field(err: Error, field: &str, value: &Bound<'_, PyAny>) -> PyErr {
    // Python's repr of a str without quotes or backslashes in it; others as
    // Rust writes them, close enough for a message.
    let quoted = if field.contains(['\'', '\\']) {
        format!("{field:?}")
    } else {
        format!("'{field}'")
    };
    let mut words = err.display_with(&format!("request[{quoted}]")).to_string();
    if let (Error::InvalidType { .. }, Ok(kind)) = (&err, value.get_type().name()) {
        words = format!("{words}, not {kind}");
    }
    to_py_with(value.py(), err, words)
}

/// A keyed limiter's `max_keys`: `None` (no bound) or a positive int.
pub fn max_keys(obj: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
    optional(obj, |obj| {
        let keys = count(obj, "max_keys")?;
        usize::try_from(keys).map_err(|_| to_py(obj.py(), invalid_value("max_keys", TOO_LARGE)))
    })
}

/// A keyed limiter's `eviction`: `None` (not given), `"nearest_fresh"` or
/// `"refuse"`.
pub fn eviction(obj: &Bound<'_, PyAny>) -> PyResult<Option<Eviction>> {
    if obj.is_none() {
        return Ok(None);
    }
    let choices = Eviction::ALL.map(|e| (e.name(), e));
    let errors = (
        "None, 'nearest_fresh' or 'refuse'",
        "must be 'nearest_fresh' or 'refuse'",
    );
    one_of(obj, "eviction", &choices, errors).map(Some)
}

/// A ratekeeper limiter (`limiter`): an instance of `Limiter`.
pub fn limiter<'a, 'py>(obj: &'a Bound<'py, PyAny>) -> PyResult<&'a Bound<'py, PyLimiter>> {
    obj.cast::<PyLimiter>().map_err(|_| {
        let expected = "a ratekeeper limiter (TokenBucket, Gcra, LeakyBucket, ...)";
        to_py(obj.py(), invalid_type("limiter", expected))
    })
}

/// `try_acquire_batch`'s `costs`: an iterable of counts. An item of the
/// wrong type is said of `costs` (as JS's `tryAcquireBatch` says it), a
/// wrong value of `cost` (as each one's is, in every binding).
pub fn costs(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    let expected = "an iterable of int";
    let wrong_type = || to_py(obj.py(), invalid_type("costs", expected));
    let mut costs = Vec::new();
    for item in obj.try_iter().map_err(|_| wrong_type())? {
        let item = item?;
        costs.push(cost(&item).map_err(|err| {
            if !err.is_instance_of::<PyTypeError>(obj.py()) {
                return err;
            }
            let err = invalid_type("costs", expected);
            let kind = item
                .get_type()
                .name()
                .map_or(String::new(), |k| format!(" (an item is a {k})"));
            let words = format!("{}{kind}", err.display_with("costs"));
            to_py_with(obj.py(), err, words)
        })?);
    }
    Ok(costs)
}

/// A policy's fields (`by`): an iterable of `str`, not a `str` itself.
pub fn fields(obj: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    let wrong_type = || {
        to_py(
            obj.py(),
            invalid_type("by", "an iterable of str field names"),
        )
    };
    if obj.is_instance_of::<PyString>() {
        // A str is an iterable of str (its characters), so the type checker
        // lets it through: say what to write instead.
        let expected = "an iterable of str field names, not a str (one field: by=[name])";
        return Err(to_py(obj.py(), invalid_type("by", expected)));
    }
    let mut fields = Vec::new();
    for item in obj.try_iter().map_err(|_| wrong_type())? {
        let item = item?;
        let field = item.cast::<PyString>().map_err(|_| wrong_type())?;
        fields.push(text(field, "by")?.to_owned());
    }
    Ok(fields)
}

/// An `algorithm` name for rate strings, as configurations spell it.
pub fn algorithm(obj: &Bound<'_, PyAny>) -> PyResult<Algorithm> {
    let choices = Algorithm::ALL.map(|a| (a.name(), a));
    let errors = (
        "a str such as 'token_bucket'",
        "must be 'token_bucket', 'gcra', 'leaky_bucket', 'sliding_window_log', \
         'sliding_window_counter' or 'fixed_window'",
    );
    one_of(obj, "algorithm", &choices, errors)
}

/// A window algorithm's `calendar`: `"day"`, `"week"` or `"month"` (UTC, in
/// any case), by the core's own names. Another str is a bad value; anything
/// but a str, a bad type, as for `refill` and `algorithm`.
pub fn calendar(obj: &Bound<'_, PyAny>) -> PyResult<Calendar> {
    let expected = "a str, 'day', 'week' or 'month'";
    let name = obj
        .cast::<PyString>()
        .map_err(|_| to_py(obj.py(), invalid_type("calendar", expected)))?;
    let calendar = Calendar::from_name(text(name, "calendar")?);
    let reason = "must be 'day', 'week' or 'month'";
    calendar.ok_or_else(|| to_py(obj.py(), invalid_value("calendar", reason)))
}

/// The default clock of calendar windows: `time.time`, seconds since the
/// Unix epoch (calendar windows follow the UTC calendar).
pub fn wall_clock(py: Python<'_>) -> PyResult<Py<PyAny>> {
    Ok(time_module(py)?.getattr(intern!(py, "time"))?.unbind())
}
