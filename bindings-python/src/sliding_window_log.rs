//! `ratekeeper.SlidingWindowLog`.

use std::sync::{Mutex, MutexGuard, PoisonError};

use pyo3::prelude::*;
use ratekeeper::{Limiter, Nanos, SlidingWindowLog};

use crate::convert;
use crate::decision::PyDecision;
use crate::errors::to_py;

/// A sliding-window log: at most ``limit`` units in any window of ``window``
/// seconds, counted exactly.
///
/// ``limit`` is an int; ``window`` is seconds (int or float, rounded to the
/// nanosecond). Memory for ``limit`` entries is taken once, here.
///
/// Safe to share between threads. Bad arguments raise ``RateLimitError``
/// (a ``ValueError``) or ``RateLimitTypeError`` (also a ``TypeError``).
#[pyclass(frozen, name = "SlidingWindowLog", module = "ratekeeper")]
pub struct PySlidingWindowLog {
    inner: Mutex<SlidingWindowLog>,
}

impl PySlidingWindowLog {
    fn lock(&self) -> MutexGuard<'_, SlidingWindowLog> {
        // The core never panics while holding the lock, so its state is sound.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[pymethods]
impl PySlidingWindowLog {
    #[new]
    fn new(
        py: Python<'_>,
        #[pyo3(from_py_with = convert::limit)] limit: u64,
        #[pyo3(from_py_with = convert::window)] window: Nanos,
    ) -> PyResult<Self> {
        let log = SlidingWindowLog::new(limit, window).map_err(|err| to_py(py, err))?;
        Ok(Self {
            inner: Mutex::new(log),
        })
    }

    /// Record ``cost`` units if the window has room for them, and say what happened.
    ///
    /// ``cost`` is an int (0 is allowed and records nothing); ``now`` is
    /// seconds on the ``time.monotonic()`` clock, which is read when ``now``
    /// is None. A denial returns a Decision with ``allowed=False``; a ``cost``
    /// above ``limit`` raises ``RateLimitError`` (code ``cost_exceeds_limit``).
    #[pyo3(signature = (cost = 1, now = None))]
    fn try_acquire(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = convert::cost)] cost: u64,
        #[pyo3(from_py_with = convert::now)] now: Option<Nanos>,
    ) -> PyResult<PyDecision> {
        let now = convert::now_or_monotonic(py, now)?;
        let decision = self.lock().try_acquire(now, cost);
        decision.map(PyDecision).map_err(|err| to_py(py, err))
    }

    /// The most units admitted in any window.
    #[getter]
    fn limit(&self) -> u64 {
        self.lock().limit()
    }

    /// The window's length in seconds.
    #[getter]
    fn window(&self) -> f64 {
        self.lock().window().as_secs_f64()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let limit = self.limit();
        let window = convert::float_repr(py, self.window())?;
        Ok(format!("SlidingWindowLog(limit={limit}, window={window})"))
    }
}
