//! The native part of the `ratekeeper` Python package (`ratekeeper._ratekeeper`).
//!
//! A thin shell over the core: each method converts its arguments
//! (`convert`), calls the core once, and maps errors (`errors`).

mod convert;
mod decision;
mod errors;
mod sliding_window_log;
mod token_bucket;

use pyo3::prelude::*;

/// Native classes of `ratekeeper`; import them from `ratekeeper` itself.
#[pymodule]
fn _ratekeeper(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<token_bucket::PyTokenBucket>()?;
    m.add_class::<sliding_window_log::PySlidingWindowLog>()?;
    m.add_class::<decision::PyDecision>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
