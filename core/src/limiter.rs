//! What every limiter can do.

use crate::{Decision, Error, Nanos};

/// The operations every algorithm offers, with the same meaning everywhere.
///
/// Every method takes `now` from the caller. A `cost` above the limiter's
/// [`limit`](Limiter::limit) fails with [`Error::CostExceedsLimit`], since
/// such a request could never be allowed; nothing else fails.
///
/// Not sealed: code generic over limiters (or holding a `dyn Limiter`) may
/// take a type of yours too, such as a wrapper that counts decisions around
/// one of this crate's limiters. A method added in a minor release comes
/// with a default body, built on these. The crate's keyed stores and
/// policies take only its own limiters (`Keyed`, with `alloc`, is sealed).
pub trait Limiter {
    /// The most units the limiter admits at once (its capacity or limit).
    fn limit(&self) -> u64;

    /// Decides a request of `cost` at `now`, consuming it if allowed. A denied
    /// request consumes nothing.
    fn try_acquire(&mut self, now: Nanos, cost: u64) -> Result<Decision, Error>;

    /// The answer [`try_acquire`](Limiter::try_acquire) would give, without
    /// consuming anything.
    ///
    /// One exception to "asking again `retry_after` later succeeds": a
    /// token bucket never called whose `initial_tokens` are below its
    /// capacity starts counting its refill at its first call that changes
    /// it, not at a `peek`, so a `peek` before that call promises a wait
    /// that the call does not honour (it sees the initial tokens again).
    fn peek(&self, now: Nanos, cost: u64) -> Result<Decision, Error>;

    /// Books `cost` units for the earliest moment they are available, if that
    /// is at most `max_wait` after `now`.
    ///
    /// `Ok(Ok(wait))`: booked; the caller may proceed at `now + wait`. Later
    /// requests, reserved or not, are served after this one, so waiters are
    /// served first come first served at exactly the limiter's rate.
    /// `Ok(Err(decision))`: the wait would exceed `max_wait`, or the slot is
    /// past a bound of the algorithm's own (see
    /// [`reserve_after`](Limiter::reserve_after)); nothing was booked, and
    /// `decision` is what [`try_acquire`](Limiter::try_acquire) answered,
    /// its `retry_after` the wait that was needed.
    ///
    /// A request allowed at once is taken as `try_acquire` takes it;
    /// otherwise it is booked `retry_after` later with `reserve_after`.
    ///
    /// ```
    /// use ratekeeper::{Gcra, Limiter, Nanos};
    ///
    /// let mut gcra = Gcra::new(1, Nanos::from_secs(1)).unwrap(); // 1 per second
    /// let now = Nanos::ZERO;
    /// assert_eq!(gcra.reserve(now, 1, Nanos::from_secs(5)).unwrap(), Ok(Nanos::ZERO));
    /// // The next second is booked for whoever reserves it first...
    /// let wait = gcra.reserve(now, 1, Nanos::from_secs(5)).unwrap().unwrap();
    /// assert_eq!(wait, Nanos::from_secs(1));
    /// let slot = now.saturating_add(wait); // sleep until then, then proceed
    /// // ...and a plain `try_acquire` does not jump ahead of that booking.
    /// assert!(!gcra.try_acquire(now, 1).unwrap().allowed);
    /// // Too long a wait books nothing, and says what it would have been.
    /// let refused = gcra.reserve(now, 1, Nanos::from_millis(500)).unwrap().unwrap_err();
    /// assert_eq!(refused.retry_after, Nanos::from_secs(2));
    /// // A waiter that gives up hands its slot back.
    /// gcra.refund(slot, 1);
    /// assert!(gcra.try_acquire(slot, 1).unwrap().allowed);
    /// ```
    fn reserve(
        &mut self,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> Result<Result<Nanos, Decision>, Error> {
        let decision = self.try_acquire(now, cost)?;
        if decision.allowed {
            return Ok(Ok(Nanos::ZERO));
        }
        let wait = decision.retry_after;
        if wait <= max_wait && self.reserve_after(now, cost, wait)? {
            return Ok(Ok(wait));
        }
        Ok(Err(decision))
    }

    /// Books `cost` units at exactly `now + wait`, behind every earlier
    /// booking, if the limiter admits them there; returns whether it booked
    /// (a refusal books nothing). A slot before the latest time the limiter
    /// has seen books at that time, as [`try_acquire`](Limiter::try_acquire)
    /// counts a request whose `now` went backwards.
    ///
    /// Any slot from the one [`reserve`](Limiter::reserve) would give on is
    /// admitted, save for a bound of the algorithm's own: a log's room for
    /// distinct instants, a queue's length, or numbers past 64 bits (a
    /// window algorithm's slot past 2^64 - 1 ns, a bucket's debt past
    /// 2^64 - 1 units; a token or leaky bucket books a slot past
    /// 2^64 - 1 ns, whose `now + wait` the caller cannot add up). An earlier
    /// slot is refused. This is how a `Policy` books every
    /// limit at the slot of the slowest one: each limit counts the request
    /// at the instant it really proceeds.
    fn reserve_after(&mut self, now: Nanos, cost: u64, wait: Nanos) -> Result<bool, Error>;

    /// Gives back `cost` units taken at `taken_at` and not used: a cancelled
    /// reservation (`taken_at` is its slot, `now + wait`), or permits
    /// acquired at `taken_at` and not needed (reserve 10, use 4, return 6).
    ///
    /// The limiter never holds more than a fresh one would, and units are
    /// only returned where they were taken (a window algorithm removes them
    /// from the window or instant of `taken_at`, or not at all), so a refund
    /// cannot create permits. A request whose `now` lagged behind the
    /// latest time seen was counted at that latest time, which its
    /// [`Decision`] does not say: a refund at its `now` may find nothing to
    /// give back (a fixed window, a leaky bucket), or take the units from
    /// the window before (a sliding window counter), never more.
    fn refund(&mut self, taken_at: Nanos, cost: u64);

    /// Decides each of `costs` at `now`, in order, into `out`: exactly what
    /// as many [`try_acquire`](Limiter::try_acquire) calls would answer, in
    /// one call (the server's half of client-side batching). A cost above
    /// the limit fails only its own entry; entries of `out` past
    /// `costs.len()` are left as they are.
    ///
    /// Fails, deciding nothing, when `out` is shorter than `costs`.
    fn try_acquire_batch(
        &mut self,
        now: Nanos,
        costs: &[u64],
        out: &mut [Result<Decision, Error>],
    ) -> Result<(), Error> {
        check_batch(costs, out)?;
        for (cost, slot) in costs.iter().zip(out.iter_mut()) {
            *slot = self.try_acquire(now, *cost);
        }
        Ok(())
    }
}

/// Fails with [`Error::TooLarge`] when a batch's `out` is shorter than its
/// `costs`.
#[inline]
pub(crate) fn check_batch<T>(costs: &[u64], out: &[T]) -> Result<(), Error> {
    if out.len() < costs.len() {
        return Err(Error::TooLarge {
            name: "costs",
            value: costs.len() as u64,
            max: out.len() as u64,
        });
    }
    Ok(())
}

/// Fails with [`Error::CostExceedsLimit`] when `cost` is above `limit`.
#[inline]
pub(crate) fn check_cost(cost: u64, limit: u64) -> Result<(), Error> {
    if cost > limit {
        return Err(Error::CostExceedsLimit { cost, limit });
    }
    Ok(())
}
