//! Python arguments to core values, and the clocks.
//!
//! Each public extractor is a `from_py_with` function for one argument and
//! carries that argument's name, so the name reaches the error message.
//! Every failure is a core [`Error`] raised through [`crate::errors::to_py`].
//!
//! Here the arguments themselves; their numbers in [`numbers`], keys and
//! requests in [`keys`], the clocks in [`clocks`].

mod clocks;
mod keys;
mod numbers;

pub use self::clocks::*;
pub use self::keys::*;
pub use self::numbers::*;

use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyFloat, PyInt, PyMemoryView, PyString};
use ratekeeper::{Algorithm, Calendar, Decision, Error, Eviction, Nanos, Refill};

use crate::decision::PyDecision;
use crate::errors::{to_py, to_py_with};
use crate::limiter::PyLimiter;

const NANOS_PER_SEC: u64 = 1_000_000_000;
const TOO_LARGE: &str = "is too large (the limit is 2^64 nanoseconds, about 584 years)";

fn invalid_type(name: &'static str, expected: &'static str) -> Error {
    Error::InvalidType { name, expected }
}

fn invalid_value(name: &'static str, reason: &'static str) -> Error {
    Error::InvalidValue { name, reason }
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

/// The one of `all` whose name (`named`) is the string given; anything else
/// is `expected` (a type error) or `reason` (a value error).
fn one_of<T: Copy>(
    obj: &Bound<'_, PyAny>,
    name: &'static str,
    (all, named): (&[T], fn(T) -> &'static str),
    (expected, reason): (&'static str, &'static str),
) -> PyResult<T> {
    let checked = match obj.cast::<PyString>() {
        Err(_) => Err(invalid_type(name, expected)),
        Ok(text) => {
            let text = self::text(text, name)?;
            let found = all.iter().find(|&&value| named(value) == text);
            found.copied().ok_or(invalid_value(name, reason))
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
    let errors = (
        "a str, 'greedy' or 'interval'",
        "must be 'greedy' or 'interval'",
    );
    one_of(obj, "refill", (Refill::ALL, Refill::name), errors)
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
    let errors = (
        "None, 'nearest_fresh' or 'refuse'",
        "must be 'nearest_fresh' or 'refuse'",
    );
    one_of(obj, "eviction", (Eviction::ALL, Eviction::name), errors).map(Some)
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
    let errors = (
        "a str such as 'token_bucket'",
        "must be 'token_bucket', 'gcra', 'leaky_bucket', 'sliding_window_log', \
         'sliding_window_counter' or 'fixed_window'",
    );
    one_of(obj, "algorithm", (Algorithm::ALL, Algorithm::name), errors)
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
