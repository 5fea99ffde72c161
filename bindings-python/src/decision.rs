//! `ratekeeper.Decision`: the answer to one `try_acquire`.

use pyo3::prelude::*;

use crate::convert::float_repr;

/// The outcome of one request against a limiter.
///
/// ``bool(decision)`` is ``decision.allowed``. A denial is a value, not an
/// exception: ``retry_after`` says how long to wait before the same request
/// would be allowed.
#[pyclass(frozen, eq, hash, name = "Decision", module = "ratekeeper")]
#[derive(PartialEq, Eq, Hash)]
pub struct PyDecision(pub ratekeeper::Decision);

#[pymethods]
impl PyDecision {
    /// Whether the request was admitted (and its cost consumed).
    #[getter]
    fn allowed(&self) -> bool {
        self.0.allowed
    }

    /// Units still available now, after this request's cost if it was admitted.
    #[getter]
    fn remaining(&self) -> u64 {
        self.0.remaining
    }

    /// The most units the limiter can ever hold: its capacity or limit.
    #[getter]
    fn limit(&self) -> u64 {
        self.0.limit
    }

    /// Seconds to wait until the same request would be allowed (0.0 when allowed).
    #[getter]
    fn retry_after(&self) -> f64 {
        self.0.retry_after.as_secs_f64()
    }

    /// Seconds until the limiter is back to its fresh state (full, or empty window).
    #[getter]
    fn reset_after(&self) -> f64 {
        self.0.reset_after.as_secs_f64()
    }

    fn __bool__(&self) -> bool {
        self.0.allowed
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Decision(allowed={}, remaining={}, limit={}, retry_after={}, reset_after={})",
            if self.0.allowed { "True" } else { "False" },
            self.0.remaining,
            self.0.limit,
            float_repr(py, self.retry_after())?,
            float_repr(py, self.reset_after())?,
        ))
    }
}
