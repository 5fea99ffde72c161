//! The lazy-refill token bucket.

use crate::{Decision, Error, Nanos};

/// A token bucket that refills lazily, with exact integer arithmetic.
///
/// The bucket holds at most `capacity` tokens and gains `refill_tokens` every
/// `refill_period`, continuously: after `t` ns it has gained
/// `refill_tokens * t / refill_period` tokens, and the fraction of a token is
/// carried to the next call, so no rate drifts (3 tokens per microsecond admit
/// exactly 3,000 per millisecond). A request of `cost` is allowed when the
/// bucket holds at least `cost` tokens, and then takes them.
///
/// **Guarantee.** In any span of time of length `t`, the bucket admits at most
/// `capacity + floor(refill_tokens * t / refill_period)` units: a burst of up
/// to `capacity` at once, then the sustained rate.
///
/// A new bucket holds `initial_tokens` (by default `capacity`) at the time of
/// its first call.
///
/// ```
/// use ratekeeper::{Nanos, TokenBucket};
///
/// // Burst of 2, then 1 per 500 ms.
/// let mut bucket = TokenBucket::new(2, 1, Nanos::from_millis(500)).unwrap();
/// assert!(bucket.try_acquire(Nanos::ZERO, 2).unwrap().allowed);
/// let denied = bucket.try_acquire(Nanos::from_millis(100), 1).unwrap();
/// assert_eq!(denied.retry_after, Nanos::from_millis(400));
/// assert!(bucket.try_acquire(Nanos::from_millis(500), 1).unwrap().allowed);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenBucket {
    capacity: u64,
    refill_tokens: u64,
    refill_period: u64,
    tokens: u64,
    /// The fraction of the next token, in units of `1 / refill_period` token;
    /// always below `refill_period`.
    carry: u64,
    /// The time `tokens` and `carry` refer to; `None` until the first call.
    updated: Option<Nanos>,
}

/// The bucket's contents as of some time, computed without changing it.
struct Level {
    tokens: u64,
    carry: u64,
    at: Nanos,
    /// How far `now` lies before the bucket's own time (time went backwards).
    lag: u64,
}

impl TokenBucket {
    /// A full bucket of `capacity` tokens gaining `refill_tokens` every
    /// `refill_period`.
    ///
    /// Fails when a value is zero, or when refilling the whole capacity would
    /// take longer than [`Nanos::MAX`].
    pub fn new(capacity: u64, refill_tokens: u64, refill_period: Nanos) -> Result<Self, Error> {
        Self::with_initial_tokens(capacity, refill_tokens, refill_period, capacity)
    }

    /// Like [`TokenBucket::new`], holding `initial_tokens` at its first call.
    ///
    /// Fails also when `initial_tokens` exceeds `capacity`.
    pub fn with_initial_tokens(
        capacity: u64,
        refill_tokens: u64,
        refill_period: Nanos,
        initial_tokens: u64,
    ) -> Result<Self, Error> {
        for (name, value) in [
            ("capacity", capacity),
            ("refill_tokens", refill_tokens),
            ("refill_period", refill_period.0),
        ] {
            if value == 0 {
                return Err(Error::ZeroValue { name });
            }
        }
        if initial_tokens > capacity {
            return Err(Error::TooLarge {
                name: "initial_tokens",
                value: initial_tokens,
                max: capacity,
            });
        }
        // Every wait this bucket reports is at most the time to refill it from
        // empty, so checking that once here keeps all later answers in range.
        if (capacity as u128 * refill_period.0 as u128).div_ceil(refill_tokens as u128)
            > u64::MAX as u128
        {
            return Err(Error::Overflow {
                name: "refill_period",
                reason: "refilling the whole capacity would take more than 2^64 ns",
            });
        }
        Ok(TokenBucket {
            capacity,
            refill_tokens,
            refill_period: refill_period.0,
            tokens: initial_tokens,
            carry: 0,
            updated: None,
        })
    }

    /// Takes `cost` tokens at time `now` if the bucket holds that many.
    ///
    /// A denied request takes nothing. Fails only when `cost` exceeds the
    /// capacity, since such a request could never be allowed.
    pub fn try_acquire(&mut self, now: Nanos, cost: u64) -> Result<Decision, Error> {
        if cost > self.capacity {
            return Err(Error::CostExceedsLimit {
                cost,
                limit: self.capacity,
            });
        }
        let level = self.level_at(now);
        let allowed = level.tokens >= cost;
        let tokens = if allowed {
            level.tokens - cost
        } else {
            level.tokens
        };
        self.tokens = tokens;
        self.carry = level.carry;
        self.updated = Some(level.at);
        let retry_after = if allowed {
            Nanos::ZERO
        } else {
            self.wait_for(cost - tokens, level.lag)
        };
        Ok(Decision {
            allowed,
            remaining: tokens,
            limit: self.capacity,
            retry_after,
            reset_after: self.wait_for(self.capacity - tokens, level.lag),
        })
    }

    /// The most tokens the bucket holds.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Tokens gained every [`refill_period`](Self::refill_period).
    pub fn refill_tokens(&self) -> u64 {
        self.refill_tokens
    }

    /// The period over which [`refill_tokens`](Self::refill_tokens) are gained.
    pub fn refill_period(&self) -> Nanos {
        Nanos(self.refill_period)
    }

    fn level_at(&self, now: Nanos) -> Level {
        let Some(updated) = self.updated else {
            return Level {
                tokens: self.tokens,
                carry: self.carry,
                at: now,
                lag: 0,
            };
        };
        if now <= updated {
            return Level {
                tokens: self.tokens,
                carry: self.carry,
                at: updated,
                lag: updated.0 - now.0,
            };
        }
        let (mut tokens, mut carry) = (self.tokens, self.carry);
        if tokens < self.capacity {
            // Cannot overflow: carry < 2^64 and the product is at most (2^64 - 1)^2.
            let gained = carry as u128 + self.refill_tokens as u128 * (now.0 - updated.0) as u128;
            let whole = gained / self.refill_period as u128;
            let room = self.capacity - tokens;
            if whole >= room as u128 {
                (tokens, carry) = (self.capacity, 0);
            } else {
                tokens += whole as u64;
                carry = (gained % self.refill_period as u128) as u64;
            }
        }
        Level {
            tokens,
            carry,
            at: now,
            lag: 0,
        }
    }

    /// The wait until `missing` more tokens have accrued, given the current
    /// carry, plus `lag` for a `now` that lies before the bucket's own time.
    fn wait_for(&self, missing: u64, lag: u64) -> Nanos {
        if missing == 0 {
            return Nanos::ZERO;
        }
        let needed = missing as u128 * self.refill_period as u128 - self.carry as u128;
        // At most the full refill time, which the constructor checked fits.
        let wait = needed.div_ceil(self.refill_tokens as u128) as u64;
        Nanos(wait.saturating_add(lag))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_per_microsecond_admit_exactly_three_thousand_per_millisecond() {
        let mut bucket = TokenBucket::with_initial_tokens(3, 3, Nanos::from_micros(1), 0).unwrap();
        let mut admitted = 0;
        // Probe every 7 ns so that refills land at awkward offsets, then once
        // exactly at the end of the millisecond.
        for t in (0..1_000_000).step_by(7).chain([1_000_000]) {
            while bucket.try_acquire(Nanos(t), 1).unwrap().allowed {
                admitted += 1;
            }
        }
        assert_eq!(admitted, 3_000);
    }

    #[test]
    fn refill_overflow_is_a_configuration_error() {
        let err = TokenBucket::new(u64::MAX, 1, Nanos(2)).unwrap_err();
        assert_eq!(err.code(), "overflow");
        assert!(TokenBucket::new(u64::MAX, 1, Nanos(1)).is_ok());
    }
}
