//! The algorithm classes: each builds its core limiter into a
//! [`PyLimiter`] and reads back its own configuration. Everything they share
//! is in `limiter.rs`.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple, PyType};
use pyo3::PyClass;
use ratekeeper::{
    AnyLimiter, Bandwidth, Calendar, Error, FixedWindow, Gcra, LeakyBucket, Limiter, Nanos, Refill,
    SlidingWindowCounter, SlidingWindowLog,
};

use crate::convert::{self, seconds_object};
use crate::errors::to_py;
use crate::limiter::{Common, PyLimiter};
use crate::lock::Locked;

/// The core limiter of an algorithm class's instance, locked.
fn core<'a, T: PyClass<BaseType = PyLimiter>>(slf: &'a Bound<'_, T>) -> Locked<'a, AnyLimiter> {
    slf.as_super().get().lock(slf.py())
}

/// A bandwidth from the Python arguments of `Bandwidth` and `TokenBucket`.
fn bandwidth(
    capacity: u64,
    refill_tokens: u64,
    refill_period: Nanos,
    initial_tokens: Option<u64>,
    refill: Refill,
) -> Result<Bandwidth, Error> {
    let rule = Bandwidth::new(refill, capacity, refill_tokens, refill_period)?;
    match initial_tokens {
        Some(tokens) => rule.with_initial_tokens(tokens),
        None => Ok(rule),
    }
}

/// The bandwidths of a token bucket (empty for any other limiter).
fn bandwidths(any: &AnyLimiter) -> Vec<Bandwidth> {
    match any {
        AnyLimiter::TokenBucket(bucket) => bucket.bandwidths().to_vec(),
        AnyLimiter::TokenBucket2(bucket) => bucket.bandwidths().to_vec(),
        AnyLimiter::TokenBucket3(bucket) => bucket.bandwidths().to_vec(),
        AnyLimiter::TokenBucket4(bucket) => bucket.bandwidths().to_vec(),
        _ => Vec::new(),
    }
}

/// The spacing of a `Gcra`'s or a `LeakyBucket`'s units (zero for others).
fn interval(any: &AnyLimiter) -> Nanos {
    match any {
        AnyLimiter::Gcra(gcra) => gcra.emission_interval(),
        AnyLimiter::LeakyBucket(queue) => queue.interval(),
        _ => Nanos::ZERO,
    }
}

/// The keyword arguments that rebuild `band`: `capacity`, `refill_tokens`,
/// `refill_period` and the non-defaults.
fn bandwidth_kwargs<'py>(py: Python<'py>, band: &Bandwidth) -> PyResult<Bound<'py, PyDict>> {
    let kwargs = PyDict::new(py);
    kwargs.set_item("capacity", band.capacity())?;
    kwargs.set_item("refill_tokens", band.refill_tokens())?;
    kwargs.set_item("refill_period", seconds_object(py, band.refill_period())?)?;
    if band.initial_tokens() != band.capacity() {
        kwargs.set_item("initial_tokens", band.initial_tokens())?;
    }
    if band.refill() != Refill::Greedy {
        kwargs.set_item("refill", Refill::name(band.refill()))?;
    }
    Ok(kwargs)
}

/// A constructor call: `class.method(*args, **kwargs)`, or `class(...)`.
pub struct Call<'py> {
    pub class: Bound<'py, PyType>,
    pub method: Option<&'static str>,
    pub args: Bound<'py, PyTuple>,
    pub kwargs: Bound<'py, PyDict>,
}

impl<'py> Call<'py> {
    fn new(class: Bound<'py, PyType>, kwargs: Bound<'py, PyDict>) -> Self {
        let args = PyTuple::empty(class.py());
        Call {
            class,
            method: None,
            args,
            kwargs,
        }
    }

    /// The factory to call: the class or its method.
    pub fn factory(&self) -> PyResult<Bound<'py, PyAny>> {
        match self.method {
            Some(method) => self.class.getattr(method),
            None => Ok(self.class.clone().into_any()),
        }
    }

    /// The call as Python source: `TokenBucket(capacity=5, ...)`.
    pub fn describe(&self) -> PyResult<String> {
        let mut text = self.class.name()?.to_string();
        if let Some(method) = self.method {
            text = format!("{text}.{method}");
        }
        let mut arguments: Vec<String> = Vec::new();
        for arg in &self.args {
            arguments.push(arg.repr()?.to_string());
        }
        for (name, value) in &self.kwargs {
            arguments.push(format!("{name}={}", value.repr()?));
        }
        Ok(format!("{text}({})", arguments.join(", ")))
    }
}

/// The constructor call that rebuilds `any`'s configuration, fresh (less the
/// name and clock): for `repr`, pickling and keyed stores.
pub fn constructor<'py>(py: Python<'py>, any: &AnyLimiter) -> PyResult<Call<'py>> {
    let secs = |nanos: Nanos| seconds_object(py, nanos);
    let kwargs = PyDict::new(py);
    let class = match any {
        AnyLimiter::Gcra(_) => {
            kwargs.set_item("burst", any.limit())?;
            kwargs.set_item("emission_interval", secs(interval(any))?)?;
            py.get_type::<PyGcra>()
        }
        AnyLimiter::LeakyBucket(_) => {
            kwargs.set_item("capacity", any.limit())?;
            kwargs.set_item("interval", secs(interval(any))?)?;
            py.get_type::<PyLeakyBucket>()
        }
        AnyLimiter::SlidingWindowLog(_)
        | AnyLimiter::SlidingWindowCounter(_)
        | AnyLimiter::FixedWindow(_) => {
            kwargs.set_item("limit", any.limit())?;
            let class = match any.algorithm() {
                "sliding_window_log" => py.get_type::<PySlidingWindowLog>(),
                "sliding_window_counter" => py.get_type::<PySlidingWindowCounter>(),
                _ => py.get_type::<PyFixedWindow>(),
            };
            if let Some(calendar) = any.calendar() {
                kwargs.set_item("calendar", calendar.name())?;
                let args = PyTuple::empty(py);
                let method = Some("with_calendar");
                return Ok(Call {
                    class,
                    method,
                    args,
                    kwargs,
                });
            }
            kwargs.set_item("window", secs(any.window())?)?;
            class
        }
        _ => {
            let class = py.get_type::<PyTokenBucket>();
            return Ok(match &bandwidths(any)[..] {
                [band] => Call::new(class, bandwidth_kwargs(py, band)?),
                bands => {
                    let bands = bands.iter().map(|band| PyBandwidth(*band));
                    let list = PyList::new(py, bands)?;
                    Call {
                        method: Some("from_bandwidths"),
                        args: PyTuple::new(py, [list])?,
                        ..Call::new(class, kwargs)
                    }
                }
            });
        }
    };
    Ok(Call::new(class, kwargs))
}

/// One rule of a token bucket: at most ``capacity`` tokens, ``refill_tokens``
/// added every ``refill_period`` seconds; for ``TokenBucket.from_bandwidths``.
///
/// ``refill="greedy"`` (the default) adds them continuously, exactly
/// (after ``t`` seconds, ``refill_tokens * t / refill_period`` tokens, the
/// fraction carried to the next call); ``refill="interval"`` adds all of them
/// at the end of each period, counted from the bucket's first call. The
/// bucket starts with ``initial_tokens`` (default: full).
#[pyclass(frozen, eq, hash, name = "Bandwidth", module = "ratekeeper")]
#[derive(PartialEq, Eq, Hash)]
pub struct PyBandwidth(Bandwidth);

#[pymethods]
impl PyBandwidth {
    #[new]
    #[pyo3(
        signature = (capacity, refill_tokens, refill_period, *, initial_tokens = None, refill = Refill::Greedy),
        text_signature = "(capacity, refill_tokens, refill_period, *, initial_tokens=None, refill='greedy')"
    )]
    fn new(
        py: Python<'_>,
        #[pyo3(from_py_with = convert::capacity)] capacity: u64,
        #[pyo3(from_py_with = convert::refill_tokens)] refill_tokens: u64,
        #[pyo3(from_py_with = convert::refill_period)] refill_period: Nanos,
        #[pyo3(from_py_with = convert::initial_tokens)] initial_tokens: Option<u64>,
        #[pyo3(from_py_with = convert::refill)] refill: Refill,
    ) -> PyResult<Self> {
        let band = bandwidth(
            capacity,
            refill_tokens,
            refill_period,
            initial_tokens,
            refill,
        );
        band.map(PyBandwidth).map_err(|err| to_py(py, err))
    }

    /// The most tokens this bandwidth holds.
    #[getter]
    fn capacity(&self) -> u64 {
        self.0.capacity()
    }

    /// Tokens added every ``refill_period``.
    #[getter]
    fn refill_tokens(&self) -> u64 {
        self.0.refill_tokens()
    }

    /// Seconds over which ``refill_tokens`` are added.
    #[getter]
    fn refill_period(&self) -> f64 {
        self.0.refill_period().as_secs_f64()
    }

    /// Tokens held at the bucket's first call.
    #[getter]
    fn initial_tokens(&self) -> u64 {
        self.0.initial_tokens()
    }

    /// ``"greedy"`` (continuous refill) or ``"interval"`` (all at each period's end).
    #[getter]
    fn refill(&self) -> &'static str {
        Refill::name(self.0.refill())
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let kwargs = bandwidth_kwargs(slf.py(), &slf.get().0)?;
        Call::new(slf.get_type(), kwargs).describe()
    }

    /// Pickling: the constructor call, as `functools.partial(Bandwidth, **kwargs)()`.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let kwargs = bandwidth_kwargs(py, &slf.get().0)?;
        let partial = py.import("functools")?.getattr("partial")?;
        let call = partial.call((slf.get_type(),), Some(&kwargs))?;
        PyTuple::new(py, [call, PyTuple::empty(py).into_any()])
    }
}

/// A token bucket: bursts of up to ``capacity``, refilled by ``refill_tokens``
/// every ``refill_period`` seconds, exactly.
///
/// ``capacity``, ``refill_tokens`` and ``initial_tokens`` are ints;
/// ``refill_period`` is seconds. The bucket starts with ``initial_tokens``
/// (default: full). ``refill="greedy"`` (default) refills continuously;
/// ``refill="interval"`` adds the whole refill at the end of each period. In
/// any span of ``t`` seconds it admits at most
/// ``capacity + refill_tokens * t // refill_period`` units (interval:
/// ``capacity + min(refill_tokens, capacity) * ceil((t - 1 ns) /
/// refill_period)``, up to twice the capacity across one period's end),
/// plus any refunded. ``TokenBucket.from_bandwidths`` enforces several at once.
///
/// ``name`` names the limit in the RateLimit headers; ``clock`` (default
/// ``time.monotonic``) is a callable returning seconds, read when ``now`` is
/// not given (for tests and simulations).
#[pyclass(frozen, extends = PyLimiter, name = "TokenBucket", module = "ratekeeper")]
pub struct PyTokenBucket;

impl PyTokenBucket {
    fn bands(slf: &Bound<'_, Self>) -> Vec<Bandwidth> {
        bandwidths(&core(slf))
    }

    /// The bucket's first (and usually only) bandwidth.
    fn first(slf: &Bound<'_, Self>) -> Bandwidth {
        Self::bands(slf)[0]
    }
}

#[pymethods]
impl PyTokenBucket {
    #[new]
    #[pyo3(
        signature = (capacity, refill_tokens, refill_period, *, initial_tokens = None, refill = Refill::Greedy, name = None, clock = None),
        text_signature = "(capacity, refill_tokens, refill_period, *, initial_tokens=None, refill='greedy', name='default', clock=None)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        #[pyo3(from_py_with = convert::capacity)] capacity: u64,
        #[pyo3(from_py_with = convert::refill_tokens)] refill_tokens: u64,
        #[pyo3(from_py_with = convert::refill_period)] refill_period: Nanos,
        #[pyo3(from_py_with = convert::initial_tokens)] initial_tokens: Option<u64>,
        #[pyo3(from_py_with = convert::refill)] refill: Refill,
        #[pyo3(from_py_with = convert::name)] name: Option<Py<PyString>>,
        #[pyo3(from_py_with = convert::clock)] clock: Option<Py<PyAny>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let band = bandwidth(
            capacity,
            refill_tokens,
            refill_period,
            initial_tokens,
            refill,
        );
        let built = band.and_then(|band| AnyLimiter::token_bucket(&[band]));
        PyLimiter::init(py, built, Common::new(name, clock), PyTokenBucket)
    }

    /// A token bucket enforcing every one of ``bandwidths`` (1 to 4 ``Bandwidth``).
    ///
    /// A request is allowed only if every bandwidth holds its cost, and then
    /// takes it from all of them; a denial takes from none. For example 10
    /// per second and 100 per minute:
    /// ``TokenBucket.from_bandwidths([Bandwidth(10, 10, 1), Bandwidth(100, 100, 60)])``.
    #[staticmethod]
    #[pyo3(
        signature = (bandwidths, *, name = None, clock = None),
        text_signature = "(bandwidths, *, name='default', clock=None)"
    )]
    fn from_bandwidths(
        py: Python<'_>,
        bandwidths: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = convert::name)] name: Option<Py<PyString>>,
        #[pyo3(from_py_with = convert::clock)] clock: Option<Py<PyAny>>,
    ) -> PyResult<Py<Self>> {
        let wrong_type = || {
            let expected = "an iterable of Bandwidth";
            to_py(
                py,
                Error::InvalidType {
                    name: "bandwidths",
                    expected,
                },
            )
        };
        let mut rules = Vec::new();
        for item in bandwidths.try_iter().map_err(|_| wrong_type())? {
            let item = item?;
            let band = item.cast::<PyBandwidth>().map_err(|_| wrong_type())?;
            rules.push(band.get().0);
        }
        let built = AnyLimiter::token_bucket(&rules);
        Py::new(
            py,
            PyLimiter::init(py, built, Common::new(name, clock), PyTokenBucket)?,
        )
    }

    /// A bucket holding the state ``data`` (from ``to_bytes``), made by
    /// ``TokenBucket(*args, **kwargs)``, or by ``from_bandwidths`` when the
    /// one argument after ``data`` is an iterable (of ``Bandwidth``) or is
    /// given as ``bandwidths=``, with ``name`` and ``clock`` as keywords:
    /// ``TokenBucket.from_bytes(data, bucket.bandwidths)`` rebuilds any
    /// bucket, of one bandwidth or several.
    #[classmethod]
    #[pyo3(signature = (data, *args, **kwargs))]
    fn from_bytes<'py>(
        cls: &Bound<'py, PyType>,
        #[pyo3(from_py_with = convert::data)] data: Vec<u8>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // The constructor's first argument is an int, never iterable: the
        // state alone does not say the configuration (only its fingerprint),
        // so a bucket of several bandwidths needs them given, as in JS.
        // More arguments after an iterable go to `from_bandwidths` too, whose
        // error says what it takes (the constructor's named a missing
        // `refill_period`).
        let bandwidths = match args.get_item(0) {
            Ok(first) => first.try_iter().is_ok(),
            Err(_) => match kwargs {
                Some(kwargs) => kwargs.contains(pyo3::intern!(cls.py(), "bandwidths"))?,
                None => false,
            },
        };
        let made = if bandwidths {
            cls.getattr(pyo3::intern!(cls.py(), "from_bandwidths"))?
                .call(args, kwargs)?
        } else {
            cls.call(args, kwargs)?
        };
        PyLimiter::holding(made, &data)
    }

    /// Every bandwidth the bucket enforces, as a tuple of ``Bandwidth``.
    #[getter]
    fn bandwidths<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(slf.py(), Self::bands(slf).into_iter().map(PyBandwidth))
    }

    /// The most tokens the bucket holds (of its first bandwidth).
    #[getter]
    fn capacity(slf: &Bound<'_, Self>) -> u64 {
        Self::first(slf).capacity()
    }

    /// Tokens added every ``refill_period`` (of its first bandwidth).
    #[getter]
    fn refill_tokens(slf: &Bound<'_, Self>) -> u64 {
        Self::first(slf).refill_tokens()
    }

    /// Seconds over which ``refill_tokens`` are added (of its first bandwidth).
    #[getter]
    fn refill_period(slf: &Bound<'_, Self>) -> f64 {
        Self::first(slf).refill_period().as_secs_f64()
    }

    /// Tokens held at the first call (of its first bandwidth).
    #[getter]
    fn initial_tokens(slf: &Bound<'_, Self>) -> u64 {
        Self::first(slf).initial_tokens()
    }

    /// ``"greedy"`` or ``"interval"`` (of its first bandwidth).
    #[getter]
    fn refill(slf: &Bound<'_, Self>) -> &'static str {
        Refill::name(Self::first(slf).refill())
    }
}

/// Defines an algorithm class built from a count and a duration, as
/// `$core::new($count, $duration)`, plus the class's own `$extra` methods.
macro_rules! algorithm_class {
    (
        $(#[$doc:meta])*
        $class:ident, $name:literal, $core:ident($count:ident, $duration:ident),
        $text_signature:literal $(, calendar = $calendar_signature:literal)? { $($extra:tt)* }
    ) => {
        $(#[$doc])*
        ///
        /// ``name`` and ``clock``: as for ``TokenBucket``.
        #[pyclass(frozen, extends = PyLimiter, name = $name, module = "ratekeeper")]
        pub struct $class;

        #[pymethods]
        impl $class {
            #[new]
            #[pyo3(
                signature = ($count, $duration, *, name = None, clock = None),
                text_signature = $text_signature
            )]
            fn new(
                py: Python<'_>,
                #[pyo3(from_py_with = convert::$count)] $count: u64,
                #[pyo3(from_py_with = convert::$duration)] $duration: Nanos,
                #[pyo3(from_py_with = convert::name)] name: Option<Py<PyString>>,
                #[pyo3(from_py_with = convert::clock)] clock: Option<Py<PyAny>>,
            ) -> PyResult<PyClassInitializer<Self>> {
                let built = $core::new($count, $duration).map(AnyLimiter::from);
                PyLimiter::init(py, built, Common::new(name, clock), $class)
            }

            $(
            /// Windows of the UTC calendar: at most ``limit`` units each
            /// ``calendar`` day (from 00:00 UTC), ISO week (from Monday) or month
            /// (from the 1st). ``now`` is then seconds since the Unix epoch, and
            /// the clock defaults to ``time.time``; ``window`` is the nominal
            /// length (1, 7 or 30 days).
            #[staticmethod]
            #[pyo3(
                signature = (limit, calendar, *, name = None, clock = None),
                text_signature = $calendar_signature
            )]
            fn with_calendar(
                py: Python<'_>,
                #[pyo3(from_py_with = convert::limit)] limit: u64,
                #[pyo3(from_py_with = convert::calendar)] calendar: Calendar,
                #[pyo3(from_py_with = convert::name)] name: Option<Py<PyString>>,
                #[pyo3(from_py_with = convert::clock)] clock: Option<Py<PyAny>>,
            ) -> PyResult<Py<Self>> {
                let built = $core::with_calendar(limit, calendar).map(AnyLimiter::from);
                let clock = Some(clock.map_or_else(|| convert::wall_clock(py), Ok)?);
                Py::new(py, PyLimiter::init(py, built, Common::new(name, clock), $class)?)
            }

            /// The calendar of the windows (``"day"``, ``"week"`` or ``"month"``),
            /// or ``None`` for windows of ``window`` seconds.
            #[getter]
            fn calendar(slf: &Bound<'_, Self>) -> Option<&'static str> {
                core(slf).calendar().map(Calendar::name)
            }
            )?

            $($extra)*
        }
    };
}

algorithm_class!(
    /// The generic cell rate algorithm: one unit every ``emission_interval``
    /// seconds, up to ``burst`` at once.
    ///
    /// Every answer is the one ``TokenBucket(burst, 1, emission_interval)``
    /// gives, from 16 bytes of state. ``Gcra.per_period(burst, tokens, period)``
    /// states the rate as ``tokens`` per ``period``; a rate whose interval is not
    /// a whole number of nanoseconds (7 per second) is refused with
    /// ``invalid_value`` rather than rounded: use a ``TokenBucket`` for it.
    PyGcra, "Gcra", Gcra(burst, emission_interval),
    "(burst, emission_interval, *, name='default', clock=None)" {
        /// A Gcra admitting ``burst`` at once and ``tokens`` every ``period`` seconds.
        ///
        /// The interval is ``period / tokens``, which must be a whole number of
        /// nanoseconds (10 per second: yes; 7 per second: ``invalid_value``).
        #[staticmethod]
        #[pyo3(
            signature = (burst, tokens, period, *, name = None, clock = None),
            text_signature = "(burst, tokens, period, *, name='default', clock=None)"
        )]
        fn per_period(
            py: Python<'_>,
            #[pyo3(from_py_with = convert::burst)] burst: u64,
            #[pyo3(from_py_with = convert::tokens)] tokens: u64,
            #[pyo3(from_py_with = convert::period)] period: Nanos,
            #[pyo3(from_py_with = convert::name)] name: Option<Py<PyString>>,
            #[pyo3(from_py_with = convert::clock)] clock: Option<Py<PyAny>>,
        ) -> PyResult<Py<Self>> {
            let built = Gcra::per_period(burst, tokens, period).map(AnyLimiter::from);
            let init = PyLimiter::init(py, built, Common::new(name, clock), PyGcra)?;
            Py::new(py, init)
        }

        /// The most units admitted at once.
        #[getter]
        fn burst(slf: &Bound<'_, Self>) -> u64 {
            core(slf).limit()
        }

        /// Seconds between two units at the sustained rate.
        #[getter]
        fn emission_interval(slf: &Bound<'_, Self>) -> f64 {
            interval(&core(slf)).as_secs_f64()
        }
    }
);

algorithm_class!(
    /// A leaky bucket as a queue (traffic shaping): units leave exactly
    /// ``interval`` seconds apart, first come first served, at most ``capacity``
    /// queued.
    ///
    /// ``reserve`` (and ``acquire``, which waits for it) is the shaping call: it
    /// queues the request and says how long to delay it. ``try_acquire`` admits
    /// only a request that may leave at once (an empty queue). In a Decision,
    /// ``remaining`` is what may be taken at once: ``capacity`` while the queue
    /// is empty, else 0. No burst: in any span of
    /// ``t`` seconds, at most ``t // interval`` units plus the last request's
    /// cost leave.
    PyLeakyBucket, "LeakyBucket", LeakyBucket(capacity, interval),
    "(capacity, interval, *, name='default', clock=None)" {
        /// The most units the queue holds.
        #[getter]
        fn capacity(slf: &Bound<'_, Self>) -> u64 {
            core(slf).limit()
        }

        /// Seconds each unit takes to leave.
        #[getter]
        fn interval(slf: &Bound<'_, Self>) -> f64 {
            interval(&core(slf)).as_secs_f64()
        }
    }
);

algorithm_class!(
    /// A sliding-window log: at most ``limit`` units in any window of
    /// ``window`` seconds, counted exactly.
    ///
    /// An event at ``t`` leaves the window exactly at ``t + window``, so "1
    /// per second" admits calls exactly 1 s apart. Memory for up to
    /// ``2 * limit`` entries (at most 2^20 ``limit``) is taken once, here;
    /// the logs a ``KeyedLimiter`` keeps per key grow with their events.
    PySlidingWindowLog, "SlidingWindowLog", SlidingWindowLog(limit, window),
    "(limit, window, *, name='default', clock=None)" {}
);

algorithm_class!(
    /// A sliding-window counter: about ``limit`` units per ``window``
    /// seconds, from two counts (O(1) memory).
    ///
    /// The previous aligned window's count is weighted by its overlap with
    /// the sliding window, compared exactly in integers. At most ``limit``
    /// per aligned window and at most ``2 * limit - 1`` in any span of
    /// ``window`` (for windows of at least ``2 * limit`` ns).
    PySlidingWindowCounter, "SlidingWindowCounter", SlidingWindowCounter(limit, window),
    "(limit, window, *, name='default', clock=None)",
    calendar = "(limit, calendar, *, name='default', clock=None)" {}
);

algorithm_class!(
    /// A fixed window: at most ``limit`` units in each aligned window
    /// ``[k * window, (k + 1) * window)`` of the clock.
    ///
    /// Cheapest and simplest, with a boundary burst: up to ``2 * limit``
    /// units within ``window`` seconds across a boundary.
    PyFixedWindow, "FixedWindow", FixedWindow(limit, window),
    "(limit, window, *, name='default', clock=None)",
    calendar = "(limit, calendar, *, name='default', clock=None)" {}
);
