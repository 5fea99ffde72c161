//! `ratekeeper.guarantee`: what a limiter or a policy guarantees, as the
//! core's `guarantee` module computes it.

use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};
use ratekeeper::guarantee::Lockout;
use ratekeeper::guarantee::{Guarantee, Guarantees, Sustained};
use ratekeeper::{Error, Nanos};

use crate::convert;
use crate::errors::{cannot_pickle, to_py};
use crate::keyed::PyKeyedLimiter;
use crate::limiter::PyLimiter;
use crate::policy::PyPolicy;

/// One limiter's guarantee, or a policy's (all its limits together).
enum Inner {
    One(Guarantee),
    All(Guarantees),
}

/// What a limiter or policy guarantees, exactly and in the worst case: the
/// most units admitted in any window, the largest burst, the sustained
/// rate, and how long a client that has spent everything waits. Made by
/// ``ratekeeper.guarantee``; durations are seconds.
#[pyclass(frozen, name = "Guarantee", module = "ratekeeper")]
pub struct PyGuarantee {
    name: String,
    inner: Inner,
}

impl PyGuarantee {
    fn sustained_nanos(&self) -> Option<Sustained> {
        match &self.inner {
            Inner::One(g) => Some(g.sustained()),
            Inner::All(g) => g.sustained(),
        }
    }

    fn lockout(&self) -> Lockout {
        match &self.inner {
            Inner::One(g) => g.lockout(),
            Inner::All(g) => g.lockout(),
        }
    }

    fn one(&self) -> Option<&Guarantee> {
        match &self.inner {
            Inner::One(g) => Some(g),
            Inner::All(_) => None,
        }
    }
}

#[pymethods]
impl PyGuarantee {
    /// The most units admitted in any window of ``window`` seconds (a
    /// half-open span ``[t, t + window)``), a fraction of a nanosecond
    /// counting as a whole one (a span of 2.4 ns holds the instants 0, 1
    /// and 2).
    fn max_in_window(&self, window: &Bound<'_, PyAny>) -> PyResult<u128> {
        let mut nanos = convert::span(window)?;
        // Read to the nearest ns: round up what that rounded down.
        if convert::exceeds(window, nanos)? {
            nanos = Nanos(nanos.0.saturating_add(1));
        }
        let window = nanos;
        Ok(match &self.inner {
            Inner::One(g) => g.max_in_window(window),
            Inner::All(g) => g.max_in_window(window),
        })
    }

    /// The limit's name, or ``"policy"`` for a whole policy.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The algorithm's name, or ``"policy"`` for a whole policy.
    #[getter]
    fn algorithm(&self) -> &'static str {
        self.one().map_or("policy", Guarantee::algorithm)
    }

    /// Whether every figure is attained (else a safe upper bound).
    #[getter]
    fn exact(&self) -> bool {
        match &self.inner {
            Inner::One(g) => g.is_exact(),
            Inner::All(g) => g.is_exact(),
        }
    }

    /// The most units admitted at one instant.
    #[getter]
    fn burst(&self) -> u128 {
        match &self.inner {
            Inner::One(g) => g.burst(),
            Inner::All(g) => g.burst(),
        }
    }

    /// The sustained rate, exactly: ``(units, nanoseconds)``, ``units``
    /// every that many ns (``None`` for a policy with no limits).
    #[getter]
    fn sustained(&self) -> Option<(u128, u128)> {
        self.sustained_nanos().map(|s| (s.units, s.per))
    }

    /// The sustained rate in units per second.
    #[getter]
    fn per_second(&self) -> Option<f64> {
        self.sustained_nanos()
            .map(|s| s.units as f64 * 1e9 / s.per as f64)
    }

    /// Seconds a client that has spent everything waits for one more unit.
    #[getter]
    fn retry_after(&self) -> f64 {
        self.lockout().retry_after.as_secs_f64()
    }

    /// Seconds until that client's limiter is fresh (full) again.
    #[getter]
    fn reset_after(&self) -> f64 {
        self.lockout().reset_after.as_secs_f64()
    }

    /// The strict sliding window of the same nominal rate, ``(N, W)``: ``N``
    /// units per ``W`` seconds (``None`` for a whole policy).
    #[getter]
    fn strict(&self) -> Option<(u64, f64)> {
        self.one().map(|g| {
            let (n, w) = g.strict();
            (n, w.as_secs_f64())
        })
    }

    /// How many more units than that strict window this limiter admits in a
    /// window of ``W`` (``None`` for a whole policy).
    #[getter]
    fn excess(&self) -> Option<u128> {
        self.one().map(Guarantee::excess)
    }

    /// A policy's limits, each with its own guarantee (empty for a limiter).
    #[getter]
    fn limits<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let limits: Vec<PyGuarantee> = match &self.inner {
            Inner::One(_) => Vec::new(),
            Inner::All(g) => g
                .limits()
                .iter()
                .map(|(name, g)| PyGuarantee {
                    name: name.clone(),
                    inner: Inner::One(g.clone()),
                })
                .collect(),
        };
        PyTuple::new(py, limits)
    }

    /// As Python writes the values (the name by `repr`, as other reprs
    /// here: Rust's `{:?}` quoted it otherwise).
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Guarantee(name={}, algorithm='{}', burst={}, exact={})",
            PyString::new(py, &self.name).repr()?,
            self.algorithm(),
            self.burst(),
            if self.exact() { "True" } else { "False" }
        ))
    }

    /// Refuses: the core has no encoding of a guarantee, which is quick to
    /// compute again from the configuration.
    fn __reduce__(&self) -> PyResult<()> {
        let why = "compute it again with ratekeeper.guarantee() from the limiter or policy";
        Err(cannot_pickle("ratekeeper.Guarantee", why))
    }
}

/// The guarantee of ``subject``, a ``Limiter``, a ``KeyedLimiter`` (of
/// each key) or a ``Policy`` (its configuration; its state is ignored).
#[pyfunction]
pub fn guarantee(py: Python<'_>, subject: &Bound<'_, PyAny>) -> PyResult<PyGuarantee> {
    if let Ok(limiter) = subject.cast::<PyLimiter>() {
        let limiter = limiter.get();
        return Ok(PyGuarantee {
            name: limiter.name_ref().bind(py).to_cow()?.into_owned(),
            inner: Inner::One(Guarantee::of(&limiter.configuration(py))),
        });
    }
    if let Ok(keyed) = subject.cast::<PyKeyedLimiter>() {
        let (limiter, name) = keyed.get().prototype(py);
        return Ok(PyGuarantee {
            name,
            inner: Inner::One(Guarantee::of(&limiter)),
        });
    }
    if let Ok(policy) = subject.cast::<PyPolicy>() {
        return Ok(PyGuarantee {
            name: "policy".to_owned(),
            inner: Inner::All(policy.get().guarantees(py)),
        });
    }
    let err = Error::InvalidType {
        name: "subject",
        expected: "a Limiter, a KeyedLimiter or a Policy",
    };
    Err(to_py(py, err))
}
