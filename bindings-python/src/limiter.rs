//! `ratekeeper.Limiter`: the base class holding a core `AnyLimiter`, and
//! every method the algorithms share, written once.
//!
//! Each algorithm class (`algorithms.rs`) only builds its core limiter and
//! reads its own configuration; everything else lives here.

use std::sync::{Mutex, MutexGuard, PoisonError};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyModule, PyString};
use pyo3::PyClass;
use ratekeeper::{AnyLimiter, Decision, Error, Headers, Limiter, Nanos};

use crate::algorithms;
use crate::convert::{self, time_module};
use crate::decision::{PyDecision, PyReservation};
use crate::errors::{rate_limited, to_py};

/// A rate limiter; the base class of every algorithm class.
///
/// Not built directly: make a ``TokenBucket``, ``Gcra``, ``LeakyBucket``,
/// ``SlidingWindowLog``, ``SlidingWindowCounter`` or ``FixedWindow``. Every
/// one answers the same methods with the same meaning.
///
/// Time: ``now`` arguments are seconds (int, float, or an exact Decimal or
/// Fraction) on the limiter's clock, which is ``time.monotonic()`` unless a
/// ``clock`` was given to the constructor; they default to a reading of it.
/// Costs are ints from 0 (always allowed, consumes nothing) to ``limit``.
///
/// Safe to share between threads: each call is atomic. Bad arguments raise
/// ``RateLimitError`` (a ``ValueError``) or ``RateLimitTypeError`` (also a
/// ``TypeError``), with a ``.code`` and a message naming the argument.
#[pyclass(frozen, subclass, name = "Limiter", module = "ratekeeper")]
pub struct PyLimiter {
    inner: Mutex<AnyLimiter>,
    name: Py<PyString>,
    clock: Option<Py<PyAny>>,
}

/// The arguments every constructor takes besides its algorithm's own.
pub struct Common {
    name: Option<Py<PyString>>,
    clock: Option<Py<PyAny>>,
}

impl Common {
    pub fn new(name: Option<Py<PyString>>, clock: Option<Py<PyAny>>) -> Self {
        Common { name, clock }
    }
}

impl PyLimiter {
    /// The initializer of an algorithm class `T` holding `built`.
    pub fn init<T>(
        py: Python<'_>,
        built: Result<AnyLimiter, Error>,
        common: Common,
        class: T,
    ) -> PyResult<PyClassInitializer<T>>
    where
        T: PyClass<BaseType = PyLimiter>,
    {
        let name = match common.name {
            Some(name) => name,
            None => intern!(py, "default").clone().unbind(),
        };
        let base = PyLimiter {
            inner: Mutex::new(built.map_err(|err| to_py(py, err))?),
            name,
            clock: common.clock,
        };
        Ok(PyClassInitializer::from(base).add_subclass(class))
    }

    /// The core limiter, locked.
    pub fn lock(&self) -> MutexGuard<'_, AnyLimiter> {
        // The core never panics while holding the lock, so its state is sound.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `now`, or a reading of the limiter's clock.
    fn now(&self, py: Python<'_>, now: Option<Nanos>) -> PyResult<Nanos> {
        convert::now_or_clock(py, now, self.clock.as_ref())
    }

    /// Gives back `cost` units taken at `taken_at`.
    pub fn refund_at(&self, taken_at: Nanos, cost: u64) {
        self.lock().refund(taken_at, cost);
    }

    /// The RateLimit header values of `decision` under this limiter's name and window.
    pub fn headers_of<'py>(
        &self,
        py: Python<'py>,
        decision: &Decision,
    ) -> PyResult<Bound<'py, PyDict>> {
        let window = self.lock().window();
        let name = self.name.bind(py).to_cow()?;
        let values = Headers::new(&name, window, decision);
        let dict = PyDict::new(py);
        dict.set_item(intern!(py, "RateLimit-Policy"), values.policy().to_string())?;
        dict.set_item(intern!(py, "RateLimit"), values.rate_limit().to_string())?;
        if let Some(seconds) = values.retry_after() {
            dict.set_item(intern!(py, "Retry-After"), seconds.to_string())?;
        }
        Ok(dict)
    }

    /// Books `cost` units at the limiter's time if the wait is at most
    /// `max_wait`; returns `(now, wait)`, or raises `RateLimited`.
    fn book(&self, py: Python<'_>, cost: u64, max_wait: Nanos) -> PyResult<(Nanos, Nanos)> {
        let now = self.now(py, None)?;
        let booked = self.lock().reserve(now, cost, max_wait);
        match booked.map_err(|err| to_py(py, err))? {
            Ok(wait) => Ok((now, wait)),
            Err(denied) => Err(rate_limited(py, &self.name.bind(py).to_cow()?, &denied)),
        }
    }
}

/// A core decision as a Python `Decision` of `limiter`.
fn answer(
    limiter: &Bound<'_, PyLimiter>,
    decided: Result<Decision, Error>,
) -> PyResult<PyDecision> {
    match decided {
        Ok(decision) => Ok(PyDecision::new(decision, limiter.clone().unbind())),
        Err(err) => Err(to_py(limiter.py(), err)),
    }
}

/// `decision(core limiter, now)` at `now` or the limiter's clock, as a `Decision`.
#[inline]
fn decide(
    limiter: &Bound<'_, PyLimiter>,
    now: Option<Nanos>,
    decision: impl FnOnce(&mut AnyLimiter, Nanos) -> Result<Decision, Error>,
) -> PyResult<PyDecision> {
    let this = limiter.get();
    let now = this.now(limiter.py(), now)?;
    let decided = decision(&mut this.lock(), now);
    answer(limiter, decided)
}

static WAIT_MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// `helper(limiter, cost, timeout)`, from the pure-Python waiting helpers
/// (`ratekeeper/_wait.py`), once `timeout` is known to be good.
fn call_wait_helper<'py>(
    limiter: &Bound<'py, PyLimiter>,
    helper: &Bound<'py, PyString>,
    cost: u64,
    timeout: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = limiter.py();
    timeout.map(convert::timeout).transpose()?;
    let module = WAIT_MODULE.get_or_try_init(py, || {
        PyModule::import(py, "ratekeeper._wait").map(Bound::unbind)
    })?;
    module
        .bind(py)
        .getattr(helper)?
        .call1((limiter, cost, timeout))
}

#[pymethods]
impl PyLimiter {
    /// Take ``cost`` units if the limiter has them, and say what happened.
    ///
    /// Returns a Decision: ``allowed`` (then the cost is consumed),
    /// ``remaining``, ``limit``, ``retry_after`` and ``reset_after``. A
    /// denial consumes nothing and is not an exception. A ``cost`` above
    /// ``limit`` raises ``RateLimitError`` (code ``cost_exceeds_limit``),
    /// since it could never be allowed.
    #[pyo3(signature = (cost = 1, now = None))]
    fn try_acquire(
        slf: &Bound<'_, Self>,
        #[pyo3(from_py_with = convert::cost)] cost: u64,
        #[pyo3(from_py_with = convert::now)] now: Option<Nanos>,
    ) -> PyResult<PyDecision> {
        decide(slf, now, |limiter, now| limiter.try_acquire(now, cost))
    }

    /// The Decision ``try_acquire`` would give, consuming nothing.
    #[pyo3(signature = (cost = 1, now = None))]
    fn peek(
        slf: &Bound<'_, Self>,
        #[pyo3(from_py_with = convert::cost)] cost: u64,
        #[pyo3(from_py_with = convert::now)] now: Option<Nanos>,
    ) -> PyResult<PyDecision> {
        decide(slf, now, |limiter, now| limiter.peek(now, cost))
    }

    /// Book ``cost`` units for the earliest slot they fit, if that is at
    /// most ``max_wait`` seconds away; returns a Reservation.
    ///
    /// When ``reservation.ok``, the units are booked for ``reservation.at``
    /// (``now + reservation.wait``): proceed then. Bookings are served first
    /// come, first served at exactly the limiter's rate, and a later
    /// ``try_acquire`` never jumps ahead of one. Otherwise nothing was booked
    /// and ``reservation.decision`` says why. ``reservation.cancel()`` gives
    /// an unused booking back. ``acquire`` is this plus the wait.
    #[pyo3(
        signature = (cost = 1, *, max_wait = Nanos::MAX, now = None),
        text_signature = "($self, /, cost=1, *, max_wait=math.inf, now=None)"
    )]
    fn reserve(
        slf: &Bound<'_, Self>,
        #[pyo3(from_py_with = convert::cost)] cost: u64,
        #[pyo3(from_py_with = convert::max_wait)] max_wait: Nanos,
        #[pyo3(from_py_with = convert::now)] now: Option<Nanos>,
    ) -> PyResult<PyReservation> {
        let (this, py) = (slf.get(), slf.py());
        let now = this.now(py, now)?;
        let booked = this.lock().reserve(now, cost, max_wait);
        let booked = match booked.map_err(|err| to_py(py, err))? {
            Ok(wait) => Ok(wait),
            Err(denied) => Err(Py::new(py, answer(slf, Ok(denied))?)?),
        };
        Ok(PyReservation::new(slf.clone().unbind(), cost, now, booked))
    }

    /// Give back ``cost`` units taken at ``taken_at`` and not used.
    ///
    /// ``taken_at`` (default: now) is when they were taken: the ``now`` of
    /// the ``try_acquire``, or a reservation's ``at`` (``reservation.cancel()``
    /// does that exactly). The limiter never ends up holding more than a
    /// fresh one, and a window algorithm only takes units back from the
    /// window (or, for ``SlidingWindowLog``, the instant) of ``taken_at``.
    #[pyo3(signature = (cost, *, taken_at = None))]
    fn refund(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = convert::cost)] cost: u64,
        #[pyo3(from_py_with = convert::taken_at)] taken_at: Option<Nanos>,
    ) -> PyResult<()> {
        let taken_at = self.now(py, taken_at)?;
        self.refund_at(taken_at, cost);
        Ok(())
    }

    /// Replace this limiter's limits with those of ``other``, keeping its state.
    ///
    /// ``other`` is a limiter of the same class (for a token bucket, with as
    /// many bandwidths), usually fresh; only its configuration is used, not
    /// its name, clock or state. How the state carries over depends on the
    /// algorithm: a bucket keeps its whole tokens (capped at the new
    /// capacity), a window its counts.
    #[pyo3(signature = (other, *, now = None))]
    fn reconfigure(
        slf: &Bound<'_, Self>,
        other: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = convert::now)] now: Option<Nanos>,
    ) -> PyResult<()> {
        let py = slf.py();
        let wrong_class = Error::InvalidType {
            name: "other",
            expected: "a limiter of the same class",
        };
        if !other.get_type().is(slf.get_type()) {
            return Err(to_py(py, wrong_class));
        }
        let other = other.cast::<PyLimiter>()?;
        // Cloned first: `other` may be `slf`, whose lock is taken next.
        let new = other.get().lock().clone();
        let this = slf.get();
        let now = this.now(py, now)?;
        let result = this.lock().reconfigure(now, new);
        result.map_err(|err| to_py(py, err))
    }

    /// Wait until ``cost`` units are ours, then return; raise ``RateLimited`` if
    /// that would take longer than ``timeout`` seconds.
    ///
    /// Books the earliest slot (as ``reserve`` does, so waiters are served
    /// first come, first served) and sleeps until it with ``time.sleep``,
    /// releasing the GIL; no polling. ``timeout`` (default ``None``: no
    /// bound) is checked before booking: a longer wait raises
    /// ``RateLimited`` at once, with ``.retry_after``, booking nothing, and
    /// ``timeout=0`` never sleeps. If the sleep is interrupted (Ctrl-C, any
    /// exception), the booking is given back before the exception propagates.
    #[pyo3(
        signature = (cost = 1, timeout = Nanos::MAX),
        text_signature = "($self, /, cost=1, timeout=None)"
    )]
    fn acquire(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = convert::cost)] cost: u64,
        #[pyo3(from_py_with = convert::timeout)] timeout: Nanos,
    ) -> PyResult<()> {
        let (now, wait) = self.book(py, cost, timeout)?;
        if wait == Nanos::ZERO {
            return Ok(());
        }
        // Looked up on every call, so that a test may replace `time.sleep`.
        let sleep = time_module(py).and_then(|time| time.getattr(intern!(py, "sleep")));
        let slept = sleep.and_then(|sleep| sleep.call1((wait.as_secs_f64(),)));
        slept.map(drop).inspect_err(|_| {
            self.refund_at(now.saturating_add(wait), cost);
        })
    }

    /// ``await limiter.acquire_async(cost, timeout)``: ``acquire`` for asyncio.
    ///
    /// Books when first awaited and sleeps with ``asyncio.sleep``, so the
    /// event loop keeps running; waiters are served in booking order. A
    /// wait longer than ``timeout`` raises ``RateLimited`` at once, booking
    /// nothing. Cancelling the task (or any exception during the wait)
    /// gives the booking back. Arguments are checked when called.
    #[pyo3(signature = (cost = 1, timeout = None))]
    fn acquire_async<'py>(
        slf: &Bound<'py, Self>,
        #[pyo3(from_py_with = convert::cost)] cost: u64,
        timeout: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        call_wait_helper(slf, intern!(slf.py(), "acquire_async"), cost, timeout)
    }

    /// ``acquire`` as a context manager and decorator, for sync and async code.
    ///
    /// ``with limiter.acquiring(cost):`` and ``async with
    /// limiter.acquiring(cost):`` acquire before the block;
    /// ``@limiter.acquiring(cost)`` acquires before every call of the
    /// decorated function (``acquire_async`` for a coroutine function).
    /// ``timeout`` is ``acquire``'s: ``timeout=0`` never waits and raises
    /// ``RateLimited`` at once when the limiter says no. Leaving the block
    /// gives nothing back: the units were used.
    #[pyo3(signature = (cost = 1, timeout = None))]
    fn acquiring<'py>(
        slf: &Bound<'py, Self>,
        #[pyo3(from_py_with = convert::cost)] cost: u64,
        timeout: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        call_wait_helper(slf, intern!(slf.py(), "Acquiring"), cost, timeout)
    }

    /// Books like ``acquire`` and returns the Reservation, without sleeping
    /// (for ``acquire_async``).
    #[pyo3(
        signature = (cost, timeout = Nanos::MAX),
        text_signature = "($self, /, cost, timeout=None)"
    )]
    fn _book(
        slf: &Bound<'_, Self>,
        #[pyo3(from_py_with = convert::cost)] cost: u64,
        #[pyo3(from_py_with = convert::timeout)] timeout: Nanos,
    ) -> PyResult<PyReservation> {
        let (now, wait) = slf.get().book(slf.py(), cost, timeout)?;
        Ok(PyReservation::new(
            slf.clone().unbind(),
            cost,
            now,
            Ok(wait),
        ))
    }

    /// The HTTP RateLimit header values of ``decision``, as a dict.
    ///
    /// ``RateLimit-Policy`` (``"name";q=<limit>;w=<window>``) and
    /// ``RateLimit`` (``"name";r=<remaining>;t=<reset>``) always, and
    /// ``Retry-After`` (seconds) when the decision is a denial, following
    /// the IETF RateLimit header fields draft and RFC 9110. Seconds are
    /// whole and rounded up, so a client that waits what they say is never
    /// early. ``name`` is this limiter's name, ``w`` its ``window``.
    fn headers<'py>(
        &self,
        py: Python<'py>,
        decision: PyRef<'py, PyDecision>,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.headers_of(py, &decision.decision)
    }

    /// The floor of a method call, for the benchmark: takes ``try_acquire``'s
    /// arguments and does nothing.
    #[pyo3(signature = (cost = None, now = None))]
    fn _noop(&self, cost: Option<&Bound<'_, PyAny>>, now: Option<&Bound<'_, PyAny>>) {
        let _ = (cost, now);
    }

    /// The most units admitted at once: a capacity, burst or limit (for a
    /// token bucket of several bandwidths, the smallest capacity).
    #[getter]
    fn limit(&self) -> u64 {
        self.lock().limit()
    }

    /// Seconds over which ``limit`` units are granted, the ``w`` of the
    /// RateLimit-Policy header: a window algorithm's window, the time a
    /// bucket takes to refill from empty, or a queue to drain when full.
    #[getter]
    fn window(&self) -> f64 {
        self.lock().window().as_secs_f64()
    }

    /// The algorithm's name: ``"token_bucket"``, ``"gcra"``,
    /// ``"leaky_bucket"``, ``"sliding_window_log"``,
    /// ``"sliding_window_counter"`` or ``"fixed_window"``.
    #[getter]
    fn algorithm(&self) -> &'static str {
        self.lock().algorithm()
    }

    /// The limiter's name, as its RateLimit headers spell it.
    #[getter]
    fn name(&self, py: Python<'_>) -> Py<PyString> {
        self.name.clone_ref(py)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let mut text = algorithms::describe(py, &self.lock())?;
        let name = self.name.bind(py);
        if name.to_cow()? != "default" {
            text.insert_str(text.len() - 1, &format!(", name={}", name.repr()?));
        }
        Ok(text)
    }
}
