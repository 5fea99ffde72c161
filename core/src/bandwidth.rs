//! One bandwidth of a token bucket: its rule and its exact state.

use crate::{Error, Nanos};

/// When a bandwidth's refill arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refill {
    /// Continuously: after `t` ns, `refill_tokens * t / refill_period` tokens,
    /// the fraction carried to the next call.
    Greedy,
    /// All `refill_tokens` at once, at the end of each `refill_period`
    /// counted from the bucket's first call.
    Interval,
}

/// One rule of a token bucket: at most `capacity` tokens, `refill_tokens`
/// added every `refill_period`.
///
/// ```
/// use ratekeeper::{Bandwidth, Nanos};
///
/// let per_second = Bandwidth::greedy(10, 10, Nanos::from_secs(1)).unwrap();
/// let per_minute = Bandwidth::interval(100, 100, Nanos::from_secs(60)).unwrap();
/// assert_eq!(per_minute.capacity(), 100);
/// # let _ = per_second;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Bandwidth {
    capacity: u64,
    refill_tokens: u64,
    refill_period: u64,
    initial_tokens: u64,
    refill: Refill,
    /// The refill as the arithmetic uses it. Greedy: `refill_tokens` and
    /// `refill_period` divided by their gcd, the same rate with smaller
    /// numbers (1000 per second is 1 per millisecond), so that most waits
    /// need no division; the carry stays exact, being a multiple of the gcd.
    /// Interval: as given, since the period sets the boundaries.
    step_tokens: u64,
    step_period: u64,
}

impl Bandwidth {
    /// A bandwidth that refills continuously, starting full.
    ///
    /// Fails when a value is zero, or when refilling the whole capacity would
    /// take longer than [`Nanos::MAX`].
    pub fn greedy(capacity: u64, refill_tokens: u64, refill_period: Nanos) -> Result<Self, Error> {
        Self::build(capacity, refill_tokens, refill_period, Refill::Greedy)
    }

    /// A bandwidth that adds all of `refill_tokens` at the end of each
    /// period, starting full. Fails like [`Bandwidth::greedy`].
    pub fn interval(
        capacity: u64,
        refill_tokens: u64,
        refill_period: Nanos,
    ) -> Result<Self, Error> {
        Self::build(capacity, refill_tokens, refill_period, Refill::Interval)
    }

    /// The same bandwidth holding `initial_tokens` at the bucket's first call.
    ///
    /// Fails when `initial_tokens` exceeds the capacity.
    pub fn with_initial_tokens(mut self, initial_tokens: u64) -> Result<Self, Error> {
        if initial_tokens > self.capacity {
            return Err(Error::TooLarge {
                name: "initial_tokens",
                value: initial_tokens,
                max: self.capacity,
            });
        }
        self.initial_tokens = initial_tokens;
        Ok(self)
    }

    fn build(
        capacity: u64,
        refill_tokens: u64,
        refill_period: Nanos,
        refill: Refill,
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
        let divisor = match refill {
            Refill::Greedy => gcd(refill_tokens, refill_period.0),
            Refill::Interval => 1,
        };
        let bandwidth = Bandwidth {
            capacity,
            refill_tokens,
            refill_period: refill_period.0,
            initial_tokens: capacity,
            refill,
            step_tokens: refill_tokens / divisor,
            step_period: refill_period.0 / divisor,
        };
        // Every wait a bucket reports without reservations is at most the time
        // to refill it from empty, so checking that once keeps them in range.
        let fresh = Band::new(bandwidth);
        if fresh.empty().wait_for(capacity) > u64::MAX as u128 {
            return Err(Error::Overflow {
                name: "refill_period",
                reason: "refilling the whole capacity would take more than 2^64 ns",
            });
        }
        Ok(bandwidth)
    }

    /// The most tokens this bandwidth holds.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Tokens added every [`refill_period`](Self::refill_period).
    pub fn refill_tokens(&self) -> u64 {
        self.refill_tokens
    }

    /// The period over which [`refill_tokens`](Self::refill_tokens) are added.
    pub fn refill_period(&self) -> Nanos {
        Nanos(self.refill_period)
    }

    /// The tokens held at the bucket's first call.
    pub fn initial_tokens(&self) -> u64 {
        self.initial_tokens
    }

    /// When the refill arrives.
    pub fn refill(&self) -> Refill {
        self.refill
    }
}

/// A bandwidth and its state: `tokens - owed` tokens, where `owed` (tokens
/// booked by reservations beyond what was there) is non-zero only when
/// `tokens` is zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Band {
    pub(crate) rule: Bandwidth,
    pub(crate) tokens: u64,
    pub(crate) owed: u64,
    /// Greedy: the fraction of the next token, in units of 1/refill_period.
    /// Interval: the time since the last period boundary. Below refill_period.
    carry: u64,
}

impl Band {
    pub(crate) fn new(rule: Bandwidth) -> Band {
        Band {
            rule,
            tokens: rule.initial_tokens,
            owed: 0,
            carry: 0,
        }
    }

    fn empty(mut self) -> Band {
        self.tokens = 0;
        self
    }

    pub(crate) fn is_full(&self) -> bool {
        self.tokens == self.rule.capacity
    }

    /// The band `elapsed` ns later.
    #[inline]
    pub(crate) fn advanced(mut self, elapsed: u64) -> Band {
        let period = self.rule.step_period as u128;
        let gained = match self.rule.refill {
            Refill::Greedy => {
                if self.is_full() {
                    return self;
                }
                // Cannot overflow: carry < 2^64 and the product is at most (2^64 - 1)^2.
                let scaled = self.carry as u128 + self.rule.step_tokens as u128 * elapsed as u128;
                // The common cases need no 128-bit division: less than a
                // token gained, or enough to fill the band.
                if scaled < period {
                    self.carry = scaled as u64;
                    return self;
                }
                if self.owed == 0 && scaled >= (self.rule.capacity - self.tokens) as u128 * period {
                    (self.tokens, self.carry) = (self.rule.capacity, 0);
                    return self;
                }
                self.carry = (scaled % period) as u64;
                scaled / period
            }
            Refill::Interval => {
                let since_boundary = self.carry as u128 + elapsed as u128;
                self.carry = (since_boundary % period) as u64;
                (since_boundary / period).saturating_mul(self.rule.step_tokens as u128)
            }
        };
        self.add(gained);
        self
    }

    /// Adds tokens, paying what is owed first, never above capacity.
    pub(crate) fn add(&mut self, tokens: u128) {
        let paid = tokens.min(self.owed as u128) as u64;
        self.owed -= paid;
        let rest = tokens - paid as u128;
        let room = self.rule.capacity - self.tokens;
        if rest >= room as u128 {
            self.tokens = self.rule.capacity;
            if self.rule.refill == Refill::Greedy {
                // A full bucket accrues nothing, so no fraction is in progress.
                self.carry = 0;
            }
        } else {
            self.tokens += rest as u64;
        }
    }

    /// Takes `cost` tokens that are there (see [`Band::holds`]).
    #[inline]
    pub(crate) fn taken(mut self, cost: u64) -> Band {
        self.tokens -= cost.min(self.tokens);
        self
    }

    /// Books `cost` tokens for the slot `wait` ns from now, when the band
    /// holds them: the band as of now, such that `wait` ns later it is
    /// exactly what it would be had the cost been taken at the slot. Taking
    /// it now as plain debt would be wrong when the cap would clip refill
    /// before the slot (a slot rounded up to a whole nanosecond, say): that
    /// clipped refill would fund a second booking at the same instant.
    /// `None` when the numbers do not fit in 128 bits.
    pub(crate) fn booked(self, wait: u64, cost: u64) -> Option<Band> {
        let at_slot = self.advanced(wait);
        let level_at_slot = at_slot.tokens as i128 - at_slot.owed as i128 - cost as i128;
        let (refill, period) = (self.rule.step_tokens as i128, self.rule.step_period as i128);
        let mut band = self;
        match self.rule.refill {
            Refill::Greedy => {
                // Level in units of 1/period token, refill over `wait` taken back out.
                let scaled = level_at_slot
                    .checked_mul(period)?
                    .checked_add(at_slot.carry as i128)?
                    .checked_sub(refill.checked_mul(wait as i128)?)?;
                let whole = scaled.div_euclid(period);
                band.carry = scaled.rem_euclid(period) as u64;
                band.set_level(whole)?;
            }
            Refill::Interval => {
                let boundaries = (self.carry as i128 + wait as i128) / period;
                band.set_level(level_at_slot.checked_sub(boundaries.checked_mul(refill)?)?)?;
            }
        }
        Some(band)
    }

    fn set_level(&mut self, level: i128) -> Option<()> {
        (self.tokens, self.owed) = if level >= 0 {
            (u64::try_from(level).ok()?, 0)
        } else {
            (0, u64::try_from(-level).ok()?)
        };
        Some(())
    }

    /// Whether `tokens - owed >= cost`.
    #[inline]
    pub(crate) fn holds(&self, cost: u64) -> bool {
        self.owed == 0 && self.tokens >= cost
    }

    /// The wait, in ns, until `tokens - owed >= target` (computed in 128 bits;
    /// `u128::MAX` when even that overflows).
    #[inline]
    pub(crate) fn wait_for(&self, target: u64) -> u128 {
        let missing = (target as u128 + self.owed as u128).saturating_sub(self.tokens as u128);
        if missing == 0 {
            return 0;
        }
        let (refill, period) = (self.rule.step_tokens as u128, self.rule.step_period as u128);
        match self.rule.refill {
            Refill::Greedy => match missing.checked_mul(period) {
                Some(scaled) if refill == 1 => scaled - self.carry as u128,
                Some(scaled) => (scaled - self.carry as u128).div_ceil(refill),
                None => u128::MAX,
            },
            Refill::Interval => match missing.div_ceil(refill).checked_mul(period) {
                Some(at_boundary) => at_boundary - self.carry as u128,
                None => u128::MAX,
            },
        }
    }

    /// This band following a new rule: whole tokens and debt carry over
    /// (tokens capped at the new capacity); a partial token, or the time into
    /// the current interval, restarts.
    pub(crate) fn reconfigured(self, rule: Bandwidth) -> Band {
        Band {
            rule,
            tokens: self.tokens.min(rule.capacity),
            owed: self.owed,
            carry: 0,
        }
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}
