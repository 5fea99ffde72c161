//! What every limiter can do.

use crate::{Decision, Error, Nanos};

/// The operations every algorithm offers, with the same meaning everywhere.
///
/// Every method takes `now` from the caller. A `cost` above the limiter's
/// [`limit`](Limiter::limit) fails with [`Error::CostExceedsLimit`], since
/// such a request could never be allowed; nothing else fails.
pub trait Limiter {
    /// The most units the limiter admits at once (its capacity or limit).
    fn limit(&self) -> u64;

    /// Decides a request of `cost` at `now`, consuming it if allowed. A denied
    /// request consumes nothing.
    fn try_acquire(&mut self, now: Nanos, cost: u64) -> Result<Decision, Error>;

    /// The answer [`try_acquire`](Limiter::try_acquire) would give, without
    /// consuming anything.
    fn peek(&self, now: Nanos, cost: u64) -> Result<Decision, Error>;

    /// Books `cost` units for the earliest moment they are available, if that
    /// is at most `max_wait` after `now`.
    ///
    /// `Ok(Ok(wait))`: booked; the caller may proceed at `now + wait`. Later
    /// requests, reserved or not, are served after this one, so waiters are
    /// served first come first served at exactly the limiter's rate.
    /// `Ok(Err(decision))`: the wait would exceed `max_wait`; nothing was
    /// booked, and `decision.retry_after` is the wait that was needed.
    fn reserve(
        &mut self,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> Result<Result<Nanos, Decision>, Error>;

    /// Gives back `cost` units taken at `taken_at` and not used: a cancelled
    /// reservation (`taken_at` is its slot, `now + wait`), or permits
    /// acquired at `taken_at` and not needed (reserve 10, use 4, return 6).
    ///
    /// The limiter never holds more than a fresh one would, and units are
    /// only returned where they were taken (a window algorithm removes them
    /// from the window or instant of `taken_at`, or not at all), so a refund
    /// cannot create permits.
    fn refund(&mut self, taken_at: Nanos, cost: u64);
}

/// Fails with [`Error::CostExceedsLimit`] when `cost` is above `limit`.
#[inline]
pub(crate) fn check_cost(cost: u64, limit: u64) -> Result<(), Error> {
    if cost > limit {
        return Err(Error::CostExceedsLimit { cost, limit });
    }
    Ok(())
}
