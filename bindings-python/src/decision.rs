//! The answers: `ratekeeper.Decision` (one request) and
//! `ratekeeper.Reservation` (one booking).

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::prelude::*;
use pyo3::types::PyDict;
use ratekeeper::{Decision, Nanos};

use crate::convert::float_repr;
use crate::limiter::PyLimiter;

/// The outcome of one request against a limiter.
///
/// ``bool(decision)`` is ``decision.allowed``. A denial is a value, not an
/// exception: ``retry_after`` says how long to wait before the same request
/// would be allowed. ``headers()`` gives the HTTP RateLimit header values.
/// Two decisions are equal when their five numbers are.
#[pyclass(frozen, eq, hash, name = "Decision", module = "ratekeeper")]
pub struct PyDecision {
    pub decision: Decision,
    /// The limiter that decided, for `headers()`.
    limiter: Py<PyLimiter>,
}

impl PyDecision {
    pub fn new(decision: Decision, limiter: Py<PyLimiter>) -> Self {
        PyDecision { decision, limiter }
    }
}

impl PartialEq for PyDecision {
    fn eq(&self, other: &Self) -> bool {
        self.decision == other.decision
    }
}

impl Eq for PyDecision {}

impl Hash for PyDecision {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.decision.hash(state);
    }
}

#[pymethods]
impl PyDecision {
    /// Whether the request was admitted (and its cost consumed).
    #[getter]
    fn allowed(&self) -> bool {
        self.decision.allowed
    }

    /// Units still available now, after this request's cost if it was admitted.
    #[getter]
    fn remaining(&self) -> u64 {
        self.decision.remaining
    }

    /// The most units the limiter can ever hold: its capacity or limit.
    #[getter]
    fn limit(&self) -> u64 {
        self.decision.limit
    }

    /// Seconds to wait until the same request would be allowed (0.0 when allowed).
    #[getter]
    fn retry_after(&self) -> f64 {
        self.decision.retry_after.as_secs_f64()
    }

    /// Seconds until the limiter is back to its fresh state (full, or empty window).
    #[getter]
    fn reset_after(&self) -> f64 {
        self.decision.reset_after.as_secs_f64()
    }

    /// The HTTP RateLimit header values of this decision, as a dict.
    ///
    /// The HTTP RateLimit header values of this decision, as a dict.
    ///
    /// The same as ``limiter.headers(decision)`` for the limiter that
    /// decided: ``RateLimit-Policy`` and ``RateLimit`` always, and
    /// ``Retry-After`` when denied.
    fn headers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.limiter.get().headers_of(py, &self.decision)
    }

    fn __bool__(&self) -> bool {
        self.decision.allowed
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Decision(allowed={}, remaining={}, limit={}, retry_after={}, reset_after={})",
            if self.decision.allowed {
                "True"
            } else {
                "False"
            },
            self.decision.remaining,
            self.decision.limit,
            float_repr(py, self.retry_after())?,
            float_repr(py, self.reset_after())?,
        ))
    }
}

/// A booking made by ``limiter.reserve()``: proceed after ``wait`` seconds.
///
/// ``bool(reservation)`` is ``reservation.ok``. When ``ok``, ``cost`` units
/// are booked for the slot ``at`` (``now + wait`` on the limiter's clock);
/// requests made later, reserved or not, are served after it, so waiters are
/// served first come, first served. When not ``ok`` (the wait would have
/// exceeded ``max_wait``, or the queue is full), nothing was booked:
/// ``decision`` tells why, and ``wait`` and ``at`` say when the request would
/// have been served (``decision.retry_after``). ``cancel()`` gives an unused
/// booking back.
#[pyclass(frozen, name = "Reservation", module = "ratekeeper")]
pub struct PyReservation {
    limiter: Py<PyLimiter>,
    cost: u64,
    now: Nanos,
    booked: Result<Nanos, Py<PyDecision>>,
    cancelled: AtomicBool,
}

impl PyReservation {
    /// A booking `booked` at `now`: `Ok(wait)`, or the refusal.
    pub fn new(
        limiter: Py<PyLimiter>,
        cost: u64,
        now: Nanos,
        booked: Result<Nanos, Py<PyDecision>>,
    ) -> Self {
        let cancelled = AtomicBool::new(false);
        PyReservation {
            limiter,
            cost,
            now,
            booked,
            cancelled,
        }
    }

    /// The wait until the slot: booked, or needed (a refusal's `retry_after`).
    fn wait_nanos(&self) -> Nanos {
        match &self.booked {
            Ok(wait) => *wait,
            Err(denied) => denied.get().decision.retry_after,
        }
    }

    /// The booked slot, if any.
    fn slot(&self) -> Option<Nanos> {
        let wait = *self.booked.as_ref().ok()?;
        Some(self.now.saturating_add(wait))
    }
}

#[pymethods]
impl PyReservation {
    /// Whether the units were booked.
    #[getter]
    fn ok(&self) -> bool {
        self.booked.is_ok()
    }

    /// Seconds from the reservation until the booked slot (when not ``ok``:
    /// the wait that was needed, ``decision.retry_after``; nothing is booked).
    #[getter]
    fn wait(&self) -> f64 {
        self.wait_nanos().as_secs_f64()
    }

    /// The slot, in seconds on the limiter's clock: ``now + wait``. When
    /// ``ok``, the booking's ``taken_at`` for ``refund`` (``cancel()`` does that).
    #[getter]
    fn at(&self) -> f64 {
        self.now.saturating_add(self.wait_nanos()).as_secs_f64()
    }

    /// The units the reservation asked for.
    #[getter]
    fn cost(&self) -> u64 {
        self.cost
    }

    /// Why nothing was booked (a denied Decision), or ``None`` when ``ok``.
    #[getter]
    fn decision(&self, py: Python<'_>) -> Option<Py<PyDecision>> {
        self.booked
            .as_ref()
            .err()
            .map(|denied| denied.clone_ref(py))
    }

    /// Gives the booking back, exactly at its slot: the next requests may
    /// use it. Call it when the booked work will not happen; once is enough
    /// (later calls, and calls on a reservation that is not ``ok``, do nothing).
    fn cancel(&self) {
        if let Some(slot) = self.slot() {
            if !self.cancelled.swap(true, Ordering::AcqRel) {
                self.limiter.get().refund_at(slot, self.cost);
            }
        }
    }

    fn __bool__(&self) -> bool {
        self.ok()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(match &self.booked {
            Ok(_) => format!(
                "Reservation(ok=True, wait={}, at={}, cost={})",
                float_repr(py, self.wait())?,
                float_repr(py, self.at())?,
                self.cost
            ),
            Err(denied) => format!(
                "Reservation(ok=False, cost={}, decision={})",
                self.cost,
                denied.bind(py).repr()?
            ),
        })
    }
}
