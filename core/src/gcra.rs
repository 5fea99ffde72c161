//! The generic cell rate algorithm: a token bucket kept as an arrival time.

use crate::divisor::Divisor;
use crate::limiter::check_cost;
use crate::nanos::saturating;
use crate::state::codec::{Codec, Fingerprint, Reader, Writer};
use crate::{Decision, Error, Limiter, Nanos};

/// The generic cell rate algorithm (GCRA, "leaky bucket as a meter"): one
/// unit every `emission_interval` (T), up to `burst` at once.
///
/// The limiter keeps a theoretical arrival time (TAT): the time at which it
/// would be full again. A request of `cost` at `t` (the latest time seen) is
/// allowed when `max(TAT, t) + cost * T - burst * T <= t`, and then moves the
/// TAT to `max(TAT, t) + cost * T`. A new limiter is full.
///
/// **Guarantee.** In any span of time of length `t`, at most
/// `burst + floor(t / T)` units are admitted (plus any refunded): a burst of
/// up to `burst` at once, then one unit every T. Every answer is the one
/// [`TokenBucket::new(burst, 1, T)`](crate::TokenBucket::new) gives, from a
/// smaller state: two integers, the TAT and the latest time seen. T is a
/// whole number of nanoseconds: [`Gcra::per_period`] refuses a rate such as
/// 7 per second rather than round it (a token bucket carries the remainder).
///
/// ```
/// use ratekeeper::{Gcra, Limiter, Nanos};
///
/// // 10 per second (one every 100 ms), at most 3 at once.
/// let mut gcra = Gcra::per_period(3, 10, Nanos::from_secs(1)).unwrap();
/// for _ in 0..3 {
///     assert!(gcra.try_acquire(Nanos::ZERO, 1).unwrap().allowed);
/// }
/// let denied = gcra.try_acquire(Nanos::from_millis(40), 1).unwrap();
/// assert_eq!(denied.retry_after, Nanos::from_millis(60));
/// assert!(gcra.try_acquire(Nanos::from_millis(100), 1).unwrap().allowed);
///
/// // 7 per second is not a whole number of nanoseconds apart.
/// let err = Gcra::per_period(7, 7, Nanos::from_secs(1)).unwrap_err();
/// assert_eq!(err.code(), "invalid_value");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gcra {
    burst: u64,
    /// The emission interval, with its reciprocal for the decision's
    /// `remaining`.
    interval: Divisor,
    /// `burst * interval`: how far the TAT may run ahead of now.
    tolerance: u64,
    /// The latest time seen. Kept beside the TAT so that a step back in time
    /// counts as zero elapsed, as the contract asks; with the TAT alone it
    /// would count as negative elapsed and see less capacity.
    latest: u64,
    /// `TAT - latest` (0 when the TAT is not ahead): the part of the
    /// tolerance in use. Relative, so that it fits in 64 bits even near
    /// [`Nanos::MAX`]; above `tolerance` only while reservations wait.
    used: u64,
}

/// The limiter as of a time `at`, computed without changing it.
#[derive(Clone, Copy)]
struct State {
    used: u64,
    at: u64,
    /// How far `now` lies before `at` (time went backwards).
    lag: u64,
}

impl Gcra {
    /// This configuration, never called: a full limiter.
    #[cfg(feature = "alloc")]
    pub(crate) fn fresh(&self) -> Self {
        Gcra {
            latest: 0,
            used: 0,
            ..self.clone()
        }
    }

    /// A full limiter admitting `burst` units at once and one more every
    /// `emission_interval`.
    ///
    /// Fails when a value is zero, or when `burst * emission_interval`
    /// exceeds [`Nanos::MAX`].
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn new(burst: u64, emission_interval: Nanos) -> Result<Self, Error> {
        Self::build(burst, emission_interval.0, "emission_interval")
    }

    /// A full limiter admitting `burst` units at once and `tokens` every
    /// `period`, one every `period / tokens`.
    ///
    /// Fails like [`Gcra::new`], and with [`Error::InvalidValue`] when
    /// `period` is not a whole number of nanoseconds per token.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn per_period(burst: u64, tokens: u64, period: Nanos) -> Result<Self, Error> {
        if burst == 0 {
            return Err(Error::ZeroValue { name: "burst" });
        }
        if tokens == 0 {
            return Err(Error::ZeroValue { name: "tokens" });
        }
        if period.0 != 0 && period.0 % tokens != 0 {
            return Err(Error::InvalidValue {
                name: "period",
                reason: "is not a whole number of nanoseconds per token; \
                         use TokenBucket, which carries the remainder",
            });
        }
        Self::build(burst, period.0 / tokens, "period")
    }

    fn build(burst: u64, interval: u64, name: &'static str) -> Result<Self, Error> {
        if burst == 0 {
            return Err(Error::ZeroValue { name: "burst" });
        }
        if interval == 0 {
            return Err(Error::ZeroValue { name });
        }
        let tolerance = burst.checked_mul(interval).ok_or(Error::Overflow {
            name,
            reason: "burst * emission interval would be more than 2^64 - 1 ns",
        })?;
        Ok(Gcra {
            burst,
            interval: Divisor::new(interval),
            tolerance,
            latest: 0,
            used: 0,
        })
    }

    /// The most units admitted at once.
    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// The time between two units at the sustained rate.
    pub fn emission_interval(&self) -> Nanos {
        Nanos(self.interval.get())
    }

    /// Replaces the burst and interval of a live limiter with those of `new`.
    ///
    /// The units available at `now` carry over, rounded down to a whole unit
    /// and capped at the new burst; units owed to reservations stay owed. The
    /// used part of the tolerance is thus rescaled to the new interval. This
    /// is what [`TokenBucket::reconfigure`](crate::TokenBucket::reconfigure)
    /// does with `TokenBucket::new(burst, 1, T)`, but for a limiter never
    /// called: it counts as full at `now` (the bucket becomes `new`).
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn reconfigure(&mut self, now: Nanos, new: Gcra) {
        let state = self.at(now);
        let available =
            (self.tolerance as i128 - state.used as i128).div_euclid(self.interval.get() as i128);
        let missing = (new.burst as i128 - available.min(new.burst as i128)) as u128;
        let used = saturating(missing.saturating_mul(new.interval.get() as u128)).0;
        *self = Gcra {
            latest: state.at,
            used,
            ..new
        };
    }

    /// The theoretical arrival time: the whole per-key state a keyed store
    /// keeps. One past 2^64 - 1 ns is kept as [`Nanos::MAX`], which
    /// [`Gcra::with_tat`] reads as a limiter used without end.
    #[cfg(feature = "alloc")]
    pub(crate) fn tat(&self) -> u64 {
        self.latest.saturating_add(self.used)
    }

    /// The part of the tolerance in use: 0 for a full limiter.
    #[cfg(feature = "alloc")]
    #[inline]
    pub(crate) fn used(&self) -> u64 {
        self.used
    }

    /// This configuration with theoretical arrival time `tat`, having seen
    /// time up to `latest`. A TAT of [`Nanos::MAX`] may stand for a later
    /// one, clipped by [`Gcra::tat`]: read as used without end, so that
    /// clipping makes a key stricter (it admits nothing more), never looser.
    #[cfg(feature = "alloc")]
    #[inline]
    pub(crate) fn with_tat(&self, tat: u64, latest: u64) -> Gcra {
        Gcra {
            burst: self.burst,
            interval: self.interval,
            tolerance: self.tolerance,
            latest,
            used: if tat == u64::MAX {
                u64::MAX
            } else {
                tat.saturating_sub(latest)
            },
        }
    }

    #[inline]
    fn at(&self, now: Nanos) -> State {
        match now.0.checked_sub(self.latest) {
            Some(elapsed) => State {
                used: self.used.saturating_sub(elapsed),
                at: now.0,
                lag: 0,
            },
            None => State {
                used: self.used,
                at: self.latest,
                lag: self.latest - now.0,
            },
        }
    }

    /// Stores `state`, unless it is the limiter's state already (a denial
    /// at a time already seen), so that such a call writes nothing.
    #[inline]
    fn commit(&mut self, state: State) {
        if state.at != self.latest || state.used != self.used {
            self.latest = state.at;
            self.used = state.used;
        }
    }

    #[inline]
    fn decide(&self, now: Nanos, cost: u64) -> Result<(Decision, State), Error> {
        check_cost(cost, self.burst)?;
        let state = self.at(now);
        // Decided apart when time went backwards, so that the usual case,
        // whose lag is zero, adds none to its waits.
        Ok(if state.lag == 0 {
            self.decide_at(State { lag: 0, ..state }, cost)
        } else {
            self.decide_at(state, cost)
        })
    }

    /// The decision for `cost` (checked against the burst) from `state`,
    /// and the state after it.
    #[inline(always)]
    fn decide_at(&self, mut state: State, cost: u64) -> (Decision, State) {
        // cost <= burst, so this is at most the tolerance.
        let need = cost * self.interval.get();
        // The most of the tolerance that may be in use for `cost` to fit.
        let slack = self.tolerance - need;
        // Every wait fits in 64 bits before the lag is added.
        let after = |wait: u64| Nanos(wait.saturating_add(state.lag));
        // Written as two whole answers, so that a denial, which changes
        // nothing, computes only its own fields.
        let decision = if cost == 0 || state.used <= slack {
            state.used += need;
            Decision {
                allowed: true,
                remaining: self.remaining(state.used),
                limit: self.burst,
                retry_after: Nanos::ZERO,
                reset_after: if state.used == 0 {
                    Nanos::ZERO
                } else {
                    after(state.used)
                },
            }
        } else {
            Decision {
                allowed: false,
                // Less than `cost` units are left: none for a cost of 1,
                // without computing it.
                remaining: if cost == 1 {
                    0
                } else {
                    self.remaining(state.used)
                },
                limit: self.burst,
                retry_after: after(state.used - slack),
                // More than the slack: not zero.
                reset_after: after(state.used),
            }
        };
        (decision, state)
    }

    /// The whole units left when `used` of the tolerance is in use.
    #[inline(always)]
    fn remaining(&self, used: u64) -> u64 {
        match self.tolerance.saturating_sub(used) {
            // Less than one unit left (every denial of cost 1): no division.
            room if room < self.interval.get() => 0,
            room => self.interval.divide(room),
        }
    }
}

impl Limiter for Gcra {
    fn limit(&self) -> u64 {
        self.burst
    }

    #[inline]
    fn try_acquire(&mut self, now: Nanos, cost: u64) -> Result<Decision, Error> {
        let (decision, state) = self.decide(now, cost)?;
        self.commit(state);
        Ok(decision)
    }

    #[inline]
    fn peek(&self, now: Nanos, cost: u64) -> Result<Decision, Error> {
        self.decide(now, cost).map(|(decision, _)| decision)
    }

    /// Admitted when the tolerance still used at the slot leaves room for
    /// `cost`; the TAT then moves to `max(TAT, slot) + cost * T`, so bookings
    /// are served in order. Refused also when that would put the TAT more
    /// than 2^64 - 1 ns past the latest time seen (the one case where a
    /// token bucket, whose debt is counted in units, books).
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn reserve_after(&mut self, now: Nanos, cost: u64, wait: Nanos) -> Result<bool, Error> {
        check_cost(cost, self.burst)?;
        let state = self.at(now);
        self.commit(state);
        if cost == 0 {
            return Ok(true);
        }
        // From the limiter's time, which is `lag` after `now`.
        let wait = wait.0.saturating_sub(state.lag);
        let slack = self.tolerance - cost * self.interval.get();
        if state.used.saturating_sub(wait) > slack {
            return Ok(false);
        }
        let Some(used) = state.used.max(wait).checked_add(cost * self.interval.get()) else {
            return Ok(false);
        };
        self.commit(State { used, ..state });
        Ok(true)
    }

    /// Moves the TAT back by `cost * T`, never behind the latest time seen
    /// (a full limiter). `taken_at` is not needed, and the clock is not moved
    /// to it: it may be a reservation's slot, in the future.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn refund(&mut self, _taken_at: Nanos, cost: u64) {
        self.used = self
            .used
            .saturating_sub(cost.saturating_mul(self.interval.get()));
    }
}

impl Codec for Gcra {
    fn tag(&self) -> u8 {
        2
    }

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn config(&self, fingerprint: &mut Fingerprint) {
        fingerprint.word(self.burst);
        fingerprint.word(self.interval.get());
    }

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn write_state(&self, w: &mut Writer<'_>) {
        w.varint(self.latest);
        w.varint(self.used);
    }

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn read_state(&mut self, r: &mut Reader<'_>) -> Result<(), Error> {
        // Any used tolerance is possible: reservations may book far ahead.
        self.latest = r.varint()?;
        self.used = r.varint()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_validate_once() {
        let code = |r: Result<Gcra, Error>| r.map(|_| ()).map_err(|e| (e.code(), e.argument()));
        assert_eq!(
            code(Gcra::new(0, Nanos(1))),
            Err(("zero_value", Some("burst")))
        );
        assert_eq!(
            code(Gcra::new(1, Nanos(0))),
            Err(("zero_value", Some("emission_interval")))
        );
        assert_eq!(
            code(Gcra::new(u64::MAX, Nanos(2))),
            Err(("overflow", Some("emission_interval")))
        );
        assert_eq!(code(Gcra::new(u64::MAX, Nanos(1))), Ok(()));
        assert_eq!(
            code(Gcra::per_period(1, 0, Nanos(1))),
            Err(("zero_value", Some("tokens")))
        );
        assert_eq!(
            code(Gcra::per_period(1, 3, Nanos(0))),
            Err(("zero_value", Some("period")))
        );
        assert_eq!(
            code(Gcra::per_period(1, 3, Nanos(10))),
            Err(("invalid_value", Some("period")))
        );
        assert_eq!(
            code(Gcra::per_period(u64::MAX, 3, Nanos(6))),
            Err(("overflow", Some("period")))
        );
        assert_eq!(
            Gcra::per_period(2, 3, Nanos(9)).unwrap(),
            Gcra::new(2, Nanos(3)).unwrap()
        );
    }

    #[test]
    fn a_fresh_limiter_is_full_at_any_time() {
        for t in [0, 1, 1 << 40, u64::MAX] {
            let mut gcra = Gcra::new(3, Nanos(10)).unwrap();
            let d = gcra.try_acquire(Nanos(t), 3).unwrap();
            assert_eq!(
                (d.allowed, d.remaining, d.reset_after),
                (true, 0, Nanos(30))
            );
        }
    }

    #[test]
    fn boundary_instants_are_exact() {
        let mut gcra = Gcra::new(2, Nanos(100)).unwrap();
        assert!(gcra.try_acquire(Nanos(1_000), 2).unwrap().allowed);
        let d = gcra.try_acquire(Nanos(1_099), 1).unwrap();
        assert_eq!(
            (d.allowed, d.retry_after, d.reset_after),
            (false, Nanos(1), Nanos(101))
        );
        assert!(gcra.try_acquire(Nanos(1_100), 1).unwrap().allowed);
    }

    #[test]
    fn time_going_backwards_counts_as_zero_elapsed() {
        let mut gcra = Gcra::new(2, Nanos(100)).unwrap();
        assert!(gcra.try_acquire(Nanos(1_000), 1).unwrap().allowed);
        // At 500 the limiter still stands at 1_000 with one unit left.
        let d = gcra.try_acquire(Nanos(500), 1).unwrap();
        assert_eq!(
            (d.allowed, d.remaining, d.reset_after),
            (true, 0, Nanos(700))
        );
        let d = gcra.try_acquire(Nanos(500), 1).unwrap();
        assert_eq!((d.allowed, d.retry_after), (false, Nanos(600)));
    }

    #[test]
    fn reservations_queue_and_refunds_stop_at_full() {
        let mut gcra = Gcra::new(1, Nanos(1_000)).unwrap();
        let waits: [u64; 3] =
            core::array::from_fn(|_| gcra.reserve(Nanos(0), 1, Nanos(2_000)).unwrap().unwrap().0);
        assert_eq!(waits, [0, 1_000, 2_000]);
        let denied = gcra
            .reserve(Nanos(0), 1, Nanos(2_999))
            .unwrap()
            .unwrap_err();
        assert_eq!(denied.retry_after, Nanos(3_000));
        assert!(!gcra.try_acquire(Nanos(2_500), 1).unwrap().allowed);
        gcra.refund(Nanos(2_000), 1);
        assert!(gcra.try_acquire(Nanos(2_000), 1).unwrap().allowed);
        gcra.refund(Nanos(2_000), 100);
        assert_eq!(gcra.peek(Nanos(2_000), 0).unwrap().remaining, 1);
    }

    #[test]
    fn a_refund_of_more_than_2_pow_64_ns_fills_the_limiter() {
        // 2 * 2^63 ns of tolerance given back: wrapped, it gave back none.
        let mut gcra = Gcra::new(1, Nanos(1 << 63)).unwrap();
        assert!(gcra.try_acquire(Nanos(0), 1).unwrap().allowed);
        gcra.refund(Nanos(0), 2);
        assert_eq!(gcra.peek(Nanos(0), 0).unwrap().remaining, 1);
    }

    #[test]
    fn near_the_end_of_time_nothing_overflows() {
        let mut gcra = Gcra::new(u64::MAX, Nanos(1)).unwrap();
        assert!(gcra.try_acquire(Nanos::MAX, u64::MAX).unwrap().allowed);
        let d = gcra.try_acquire(Nanos::MAX, 1).unwrap();
        assert_eq!((d.allowed, d.retry_after), (false, Nanos(1)));
        assert!(gcra.reserve(Nanos::MAX, 1, Nanos::MAX).unwrap().is_err());
        assert_eq!(
            gcra.try_acquire(Nanos(0), 1).unwrap().retry_after,
            Nanos::MAX
        );
    }

    #[test]
    fn reconfigure_keeps_whole_available_units_and_debt() {
        let mut gcra = Gcra::new(4, Nanos(100)).unwrap();
        assert!(gcra.try_acquire(Nanos(0), 3).unwrap().allowed);
        // 1.5 units available at 50: one carries over, at the new interval.
        gcra.reconfigure(Nanos(50), Gcra::new(10, Nanos(1_000)).unwrap());
        let d = gcra.peek(Nanos(50), 0).unwrap();
        assert_eq!((d.remaining, d.reset_after), (1, Nanos(9_000)));
        gcra.reconfigure(Nanos(50), Gcra::new(1, Nanos(10)).unwrap());
        assert_eq!(gcra.peek(Nanos(50), 0).unwrap().reset_after, Nanos::ZERO);
        assert_eq!(gcra.reserve(Nanos(50), 1, Nanos(0)).unwrap(), Ok(Nanos(0)));
        assert_eq!(
            gcra.reserve(Nanos(50), 1, Nanos(10)).unwrap(),
            Ok(Nanos(10))
        );
        gcra.reconfigure(Nanos(50), Gcra::new(5, Nanos(7)).unwrap());
        // One unit is still owed, now at 7 ns a unit: two must come back.
        let d = gcra.peek(Nanos(50), 1).unwrap();
        assert_eq!((d.retry_after, d.reset_after), (Nanos(14), Nanos(42)));
    }
}
