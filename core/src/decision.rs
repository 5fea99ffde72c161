//! The answer every limiter gives.

use crate::Nanos;

/// The outcome of one request against a limiter.
///
/// A denial is a value, not an error: `allowed` is `false` and `retry_after`
/// says exactly when the same request would succeed if nothing else consumed
/// in the meantime (and 1 ns earlier it would not).
///
/// So an `Ok` is not a permission, and dropping the decision is a bug: a
/// decision left unused is warned about (`#[must_use]`), as here, where
/// `?` only passes on errors and every denied request would proceed.
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// use ratekeeper::{Error, Limiter, Nanos, TokenBucket};
///
/// fn handle(bucket: &mut TokenBucket, now: Nanos) -> Result<(), Error> {
///     bucket.try_acquire(now, 1)?;
///     Ok(())
/// }
/// ```
#[must_use = "a denial is an `Ok` too: read `allowed`"]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Decision {
    /// Whether the request was admitted (and its cost consumed).
    pub allowed: bool,
    /// Units still available now, after this request's cost if it was admitted.
    pub remaining: u64,
    /// The most units the limiter can ever hold: its capacity or limit.
    pub limit: u64,
    /// Zero when allowed; otherwise the wait after `now` until the same cost
    /// would be allowed.
    pub retry_after: Nanos,
    /// The wait after `now` until the limiter is back to its fresh state
    /// (a full bucket, an empty window).
    pub reset_after: Nanos,
}
