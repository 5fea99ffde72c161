//! `ratekeeper.TokenBucket`.

use std::sync::{Mutex, MutexGuard, PoisonError};

use pyo3::prelude::*;
use ratekeeper::{Limiter, Nanos, TokenBucket};

use crate::convert;
use crate::decision::PyDecision;
use crate::errors::to_py;

/// A token bucket: bursts of up to ``capacity``, refilled by ``refill_tokens``
/// every ``refill_period`` seconds, continuously and exactly.
///
/// ``capacity``, ``refill_tokens`` and ``initial_tokens`` are ints;
/// ``refill_period`` is seconds (int or float, rounded to the nanosecond).
/// The bucket starts with ``initial_tokens`` (default: full). In any span of
/// ``t`` seconds it admits at most
/// ``capacity + refill_tokens * t // refill_period`` units.
///
/// Safe to share between threads. Bad arguments raise ``RateLimitError``
/// (a ``ValueError``) or ``RateLimitTypeError`` (also a ``TypeError``).
#[pyclass(frozen, name = "TokenBucket", module = "ratekeeper")]
pub struct PyTokenBucket {
    inner: Mutex<TokenBucket>,
}

impl PyTokenBucket {
    fn lock(&self) -> MutexGuard<'_, TokenBucket> {
        // The core never panics while holding the lock, so its state is sound.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[pymethods]
impl PyTokenBucket {
    #[new]
    #[pyo3(signature = (capacity, refill_tokens, refill_period, *, initial_tokens = None))]
    fn new(
        py: Python<'_>,
        #[pyo3(from_py_with = convert::capacity)] capacity: u64,
        #[pyo3(from_py_with = convert::refill_tokens)] refill_tokens: u64,
        #[pyo3(from_py_with = convert::refill_period)] refill_period: Nanos,
        #[pyo3(from_py_with = convert::initial_tokens)] initial_tokens: Option<u64>,
    ) -> PyResult<Self> {
        let bucket = match initial_tokens {
            None => TokenBucket::new(capacity, refill_tokens, refill_period),
            Some(initial) => {
                TokenBucket::with_initial_tokens(capacity, refill_tokens, refill_period, initial)
            }
        };
        let inner = Mutex::new(bucket.map_err(|err| to_py(py, err))?);
        Ok(Self { inner })
    }

    /// Take ``cost`` tokens if the bucket holds them, and say what happened.
    ///
    /// ``cost`` is an int (0 is allowed and takes nothing); ``now`` is seconds
    /// on the ``time.monotonic()`` clock, which is read when ``now`` is None.
    /// A denial returns a Decision with ``allowed=False``; a ``cost`` above
    /// ``capacity`` raises ``RateLimitError`` (code ``cost_exceeds_limit``).
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

    /// The most tokens the bucket holds.
    #[getter]
    fn capacity(&self) -> u64 {
        self.lock().capacity()
    }

    /// Tokens added every ``refill_period``.
    #[getter]
    fn refill_tokens(&self) -> u64 {
        self.lock().refill_tokens()
    }

    /// Seconds over which ``refill_tokens`` are added.
    #[getter]
    fn refill_period(&self) -> f64 {
        self.lock().refill_period().as_secs_f64()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let (capacity, refill_tokens) = (self.capacity(), self.refill_tokens());
        let refill_period = convert::float_repr(py, self.refill_period())?;
        Ok(format!(
            "TokenBucket(capacity={capacity}, refill_tokens={refill_tokens}, refill_period={refill_period})"
        ))
    }
}
