//! The native part of the `ratekeeper` Python package (`ratekeeper._ratekeeper`).
//!
//! A thin shell over the core: each method converts its arguments
//! (`convert`), calls the core once, and maps errors (`errors`). Every
//! algorithm class extends one base class, `Limiter` (`limiter`), which holds
//! the core's `AnyLimiter` and carries every shared method; the classes
//! (`algorithms`) only build it and read their own configuration.

mod algorithms;
mod convert;
mod decision;
mod errors;
mod guarantee;
mod hash_seed;
mod keyed;
mod limiter;
mod lock;
mod pickle;
mod policy;
mod policy_config;
mod recycle;
mod shared;

use pyo3::prelude::*;

/// Native classes of `ratekeeper`; import them from `ratekeeper` itself.
#[pymodule]
fn _ratekeeper(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<limiter::PyLimiter>()?;
    m.add_class::<algorithms::PyTokenBucket>()?;
    m.add_class::<algorithms::PyBandwidth>()?;
    m.add_class::<algorithms::PyGcra>()?;
    m.add_class::<algorithms::PyLeakyBucket>()?;
    m.add_class::<algorithms::PySlidingWindowLog>()?;
    m.add_class::<algorithms::PySlidingWindowCounter>()?;
    m.add_class::<algorithms::PyFixedWindow>()?;
    m.add_class::<decision::PyDecision>()?;
    m.add_class::<decision::PyReservation>()?;
    m.add_class::<decision::PyPolicyDecision>()?;
    m.add_class::<keyed::PyKeyedLimiter>()?;
    m.add_class::<policy::PyPolicy>()?;
    m.add_class::<guarantee::PyGuarantee>()?;
    m.add_function(wrap_pyfunction!(guarantee::guarantee, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("REDIS_SCRIPT", ratekeeper::redis::REDIS_SCRIPT)?;
    Ok(())
}
