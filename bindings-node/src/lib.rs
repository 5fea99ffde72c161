//! Node.js binding of `ratekeeper`, built with napi-rs.
//!
//! Each class is a newtype shell around a core limiter: it converts the JS
//! arguments, calls the core once and converts the answer. Durations and
//! `nowMs` are milliseconds as `number`; errors are mapped in [`errors`].

mod convert;
mod errors;
mod sliding_window_log;
mod token_bucket;

use napi_derive::napi;

/// The outcome of one `tryAcquire` call: a plain object, created fresh for each call.
///
/// A denial is a value, not an exception: `allowed` is `false` and
/// `retryAfterMs` says when the same request would succeed.
#[napi(object, object_from_js = false)]
pub struct Decision {
    /// Whether the request was admitted (and its cost consumed).
    pub allowed: bool,
    /// Units still available now, after this request's cost if it was admitted.
    pub remaining: f64,
    /// The most units the limiter can ever hold: its capacity or limit.
    pub limit: f64,
    /// `0` when allowed; otherwise the milliseconds after `nowMs` until the same
    /// cost would be allowed (exact to the nanosecond).
    pub retry_after_ms: f64,
    /// Milliseconds after `nowMs` until the limiter is back to its fresh state
    /// (a full bucket, an empty window).
    pub reset_after_ms: f64,
}
