//! The clocks: `time.monotonic` read natively, a limiter's own `clock`,
//! `time.time` for calendar windows; and a call's [`Now`].

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use ratekeeper::Nanos;

use super::{seconds, NANOS_PER_SEC};

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

/// The default clock of calendar windows: `time.time`, seconds since the
/// Unix epoch (calendar windows follow the UTC calendar).
pub fn wall_clock(py: Python<'_>) -> PyResult<Py<PyAny>> {
    Ok(time_module(py)?.getattr(intern!(py, "time"))?.unbind())
}
