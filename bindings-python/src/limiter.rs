//! `ratekeeper.Limiter`: the base class holding a core `AnyLimiter`, and
//! every method the algorithms share, written once.
//!
//! Each algorithm class (`algorithms.rs`) only builds its core limiter and
//! reads its own configuration; everything else lives here (and the
//! methods every deciding class shares, in `shared/`).

use std::sync::atomic::{AtomicU64, Ordering};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple, PyType};
use pyo3::PyClass;
use ratekeeper::{AnyLimiter, Decision, Error, Keyed, Limiter, Nanos, Portable};

use crate::algorithms;
use crate::convert;
use crate::decision::{named_headers, settled};
use crate::errors::to_py;
use crate::lock::Locked;
use crate::recycle::Recycler;
use crate::shared::{self, limiter_methods, Core, Shared};

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
///
/// State: ``to_bytes()`` writes the limiter's state, ``restore(data)`` and
/// ``<Class>.from_bytes(data, *constructor arguments)`` (a ``TokenBucket``'s
/// also ``from_bytes(data, bandwidths)``) read it back into a limiter
/// configured the same way, and limiters pickle (configuration and state; a
/// ``clock`` must then be picklable).
#[pyclass(frozen, subclass, name = "Limiter", module = "ratekeeper")]
pub struct PyLimiter {
    shared: Shared<AnyLimiter>,
    name: Py<PyString>,
    /// The core's `window()` in ns, kept so that a decision reads it
    /// without the core's 128-bit division; written under the core's lock.
    window: AtomicU64,
    recycler: Recycler,
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

impl Core for AnyLimiter {
    type Target = ();
    type Owned = ();
    type Answer = Decision;

    #[inline]
    fn try_acquire(&mut self, _: &(), now: Nanos, cost: u64) -> Result<Decision, Error> {
        settled(Limiter::try_acquire(self, now, cost))
    }

    fn peek(&mut self, _: &(), now: Nanos, cost: u64) -> Result<Decision, Error> {
        settled(Limiter::peek(self, now, cost))
    }

    fn reserve(
        &mut self,
        _: &(),
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> Result<Result<Nanos, Decision>, Error> {
        Limiter::reserve(self, now, cost, max_wait)
    }

    fn refund(&mut self, _: &(), taken_at: Nanos, cost: u64) -> Result<(), Error> {
        Limiter::refund(self, taken_at, cost);
        Ok(())
    }

    fn gives_back_anywhere(&self) -> bool {
        self.refunds_any_booking()
    }

    fn moves_up(&self) -> bool {
        AnyLimiter::moves_up(self)
    }

    fn to_owned(_: &()) {}

    fn borrow(owned: &()) -> &() {
        owned
    }
}

shared::named_subject!(PyLimiter, AnyLimiter);

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
        let built = built.map_err(|err| to_py(py, err))?;
        let base = PyLimiter {
            window: AtomicU64::new(built.window().0),
            shared: Shared::new(built, common.clock),
            name,
            recycler: Recycler::default(),
        };
        Ok(PyClassInitializer::from(base).add_subclass(class))
    }

    /// `made`, a limiter just built by `from_bytes`, holding the state `data`.
    pub fn holding<'py>(made: Bound<'py, PyAny>, data: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        let limiter = made.cast::<PyLimiter>()?.get();
        let restored = limiter.lock(made.py()).restore(data);
        restored.map_err(|err| to_py(made.py(), err))?;
        Ok(made)
    }

    /// The core limiter, locked (no Python code may run until the guard drops).
    pub fn lock(&self, py: Python<'_>) -> Locked<'_, AnyLimiter> {
        self.shared.lock(py)
    }

    /// A copy of the core limiter, for work that runs Python code, which
    /// may not run while the limiter is locked.
    pub fn snapshot(&self, py: Python<'_>) -> AnyLimiter {
        self.lock(py).clone()
    }

    /// The core limiter's configuration, fresh and without a log's ring:
    /// what a keyed store, a policy's limit, `reconfigure`, a guarantee and
    /// `repr` read. A clone ([`Self::snapshot`]) copied a log's ring, 32 MiB
    /// at its largest limit, only to drop it.
    pub fn configuration(&self, py: Python<'_>) -> AnyLimiter {
        self.lock(py).new_state()
    }

    /// The limiter's name.
    pub fn name_ref(&self) -> &Py<PyString> {
        &self.name
    }

    /// The clock given to the constructor, if any.
    pub fn clock(&self) -> Option<&Py<PyAny>> {
        self.shared.clock()
    }

    /// The RateLimit header values of `decision` under this limiter's name and window.
    pub fn headers_of<'py>(
        &self,
        py: Python<'py>,
        decision: &Decision,
    ) -> PyResult<Bound<'py, PyDict>> {
        named_headers(py, &self.name, self.window_nanos(), decision)
    }

    /// The window of the limiter's configuration.
    #[inline]
    pub fn window_nanos(&self) -> Nanos {
        Nanos(self.window.load(Ordering::Relaxed))
    }

    /// The keyword arguments every constructor takes: `name` (when not the
    /// default) and `clock` (when given).
    fn common_kwargs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let kwargs = PyDict::new(py);
        if self.name.bind(py).to_cow()? != "default" {
            kwargs.set_item(intern!(py, "name"), &self.name)?;
        }
        if let Some(clock) = self.clock() {
            kwargs.set_item(intern!(py, "clock"), clock)?;
        }
        Ok(kwargs)
    }
}

limiter_methods!(
    #[pymethods] PyLimiter, "the limiter", [],
    reserve = "($self, /, cost=1, *, max_wait=None, now=None)",
    headers = "this limiter's" {
        /// Replace this limiter's limits with those of ``other``, keeping its state.
        ///
        /// ``other`` is a limiter of the same class (for a token bucket, with as
        /// many bandwidths), usually fresh; only its configuration is used, not
        /// its name, clock or state (a calendar limiter needs a limiter on
        /// ``time.time``: one on the default ``time.monotonic`` refuses it).
        /// Another algorithm raises ``RateLimitError`` (``invalid_value``).
        /// How the state carries over depends on the algorithm: a bucket
        /// keeps its whole tokens (capped at the new capacity), a window its
        /// counts.
        #[pyo3(signature = (other, *, now = None))]
        fn reconfigure(
            slf: &Bound<'_, Self>,
            other: &Bound<'_, PyAny>,
            #[pyo3(from_py_with = convert::now)] now: Option<Nanos>,
        ) -> PyResult<()> {
            let py = slf.py();
            // Another algorithm is the core's `invalid_value`, as in JS.
            let not_one = Error::InvalidType {
                name: "other",
                expected: "a ratekeeper limiter",
            };
            let other = other.cast::<PyLimiter>().map_err(|_| to_py(py, not_one))?;
            // Taken first: `other` may be `slf`, whose lock is taken next.
            let new = other.get().configuration(py);
            let this = slf.get();
            // A calendar's windows are UTC days: on `time.monotonic` they
            // would follow the machine's uptime.
            if new.calendar().is_some() && this.shared.clock().is_none() {
                let reason = "follows a calendar, which needs time.time, and this limiter reads \
                              time.monotonic: build it with clock=time.time";
                return Err(to_py(py, Error::InvalidValue { name: "other", reason }));
            }
            let now = this.shared.now(py, now)?;
            let mut core = this.lock(py);
            let result = core.reconfigure(now, new);
            this.shared.changed();
            this.window.store(core.window().0, Ordering::Relaxed);
            drop(core);
            result.map_err(|err| to_py(py, err))
        }

        /// The limiter's state as bytes: a versioned binary encoding that
        /// ``restore`` and ``from_bytes`` read back into a limiter configured
        /// the same way, here or in another process or language.
        fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
            let data = self.lock(py).to_bytes();
            Ok(PyBytes::new(py, &data))
        }

        /// Replace this limiter's state with the one ``data`` (from
        /// ``to_bytes``) holds.
        ///
        /// ``data`` must come from a limiter of the same class and
        /// configuration (its name and clock do not matter). Otherwise
        /// ``RateLimitError`` is raised, with ``code`` ``state_truncated``,
        /// ``state_corrupt``, ``state_version`` or ``state_mismatch``, and the
        /// limiter is unchanged.
        fn restore(
            &self,
            py: Python<'_>,
            #[pyo3(from_py_with = convert::data)] data: Vec<u8>,
        ) -> PyResult<()> {
            let mut core = self.lock(py);
            let restored = core.restore(&data);
            // Counted with the core locked, as every event: a give-back
            // that came between would not see it.
            self.shared.changed();
            drop(core);
            restored.map_err(|err| to_py(py, err))
        }

        /// A limiter made by ``cls(*args, **kwargs)``, holding the state
        /// ``data`` (from ``to_bytes``): ``Gcra.from_bytes(data, 10, 0.1)``.
        #[classmethod]
        #[pyo3(signature = (data, *args, **kwargs))]
        fn from_bytes<'py>(
            cls: &Bound<'py, PyType>,
            #[pyo3(from_py_with = convert::data)] data: Vec<u8>,
            args: &Bound<'py, PyTuple>,
            kwargs: Option<&Bound<'py, PyDict>>,
        ) -> PyResult<Bound<'py, PyAny>> {
            PyLimiter::holding(cls.call(args, kwargs)?, &data)
        }

        /// Pickling: the constructor call of the configuration, then the state.
        fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
            let py = slf.py();
            let this = slf.get();
            let any = this.snapshot(py);
            let (data, call) = (any.to_bytes(), algorithms::constructor(py, &any)?);
            let kwargs = call.kwargs;
            kwargs.update(this.common_kwargs(py)?.as_mapping())?;
            let rebuild = py.import(intern!(py, "ratekeeper._state"))?.getattr(intern!(py, "rebuild"))?;
            let arguments = (call.class, call.method, call.args, kwargs, PyBytes::new(py, &data));
            PyTuple::new(py, [rebuild, arguments.into_pyobject(py)?.into_any()])
        }

        /// The most units admitted at once: a capacity, burst or limit (for a
        /// token bucket of several bandwidths, the smallest capacity).
        #[getter]
        fn limit(&self, py: Python<'_>) -> u64 {
            self.lock(py).limit()
        }

        /// Seconds over which ``limit`` units are granted, the ``w`` of the
        /// RateLimit-Policy header: a window algorithm's window, the time a
        /// bucket takes to refill from empty, or a queue to drain when full.
        #[getter]
        fn window(&self) -> f64 {
            self.window_nanos().as_secs_f64()
        }

        /// The algorithm's name: ``"token_bucket"``, ``"gcra"``,
        /// ``"leaky_bucket"``, ``"sliding_window_log"``,
        /// ``"sliding_window_counter"`` or ``"fixed_window"``.
        #[getter]
        fn algorithm(&self, py: Python<'_>) -> &'static str {
            self.lock(py).algorithm()
        }

        /// The limiter's name, as its RateLimit headers spell it.
        #[getter]
        fn name(&self, py: Python<'_>) -> Py<PyString> {
            self.name.clone_ref(py)
        }

        fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
            let call = algorithms::constructor(py, &self.configuration(py))?;
            let name = self.name.bind(py);
            if name.to_cow()? != "default" {
                call.kwargs.set_item(intern!(py, "name"), name)?;
            }
            call.describe()
        }
    }
);
