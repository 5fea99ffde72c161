//! One bandwidth of a token bucket: its rule and its exact state.

use core::num::NonZeroU64;

use crate::divisor::Divisor;
use crate::state::codec::{corrupt, Fingerprint, Reader, Writer};
use crate::{Error, Nanos};

/// When a bandwidth's refill arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Refill {
    /// Continuously: after `t` ns, `refill_tokens * t / refill_period` tokens,
    /// the fraction carried to the next call.
    Greedy,
    /// All `refill_tokens` at once, at the end of each `refill_period`
    /// counted from the bucket's first call.
    Interval,
}

impl Refill {
    /// Every refill mode (a slice: a mode added in a minor release changes
    /// its length, not its type).
    pub const ALL: &'static [Refill] = &[Refill::Greedy, Refill::Interval];

    /// Its name in configurations and the bindings: `"greedy"` or `"interval"`.
    pub const fn name(self) -> &'static str {
        match self {
            Refill::Greedy => "greedy",
            Refill::Interval => "interval",
        }
    }

    /// The mode called `name` (see [`Refill::name`]).
    ///
    /// ```
    /// use ratekeeper::Refill;
    ///
    /// assert_eq!(Refill::from_name("interval"), Some(Refill::Interval));
    /// assert!(Refill::ALL.iter().all(|&r| Refill::from_name(r.name()) == Some(r)));
    /// assert_eq!(Refill::from_name("Greedy"), None);
    /// ```
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn from_name(name: &str) -> Option<Refill> {
        Refill::ALL.iter().copied().find(|r| r.name() == name)
    }
}

/// [`Refill::name`]: `greedy` or `interval`.
impl core::fmt::Display for Refill {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.pad(self.name())
    }
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
    /// Non-zero as a type, so that where the cost checked against it is a
    /// constant 1 (the usual cost), the check folds away.
    capacity: NonZeroU64,
    refill_tokens: u64,
    refill_period: u64,
    initial_tokens: u64,
    refill: Refill,
    /// The refill as the arithmetic uses it. Greedy: `refill_tokens` and
    /// `refill_period` divided by their gcd, the same rate with smaller
    /// numbers (1000 per second is 1 per millisecond), so that most waits
    /// need no division; the carry stays exact, being a multiple of the gcd.
    /// Interval: as given, since the period sets the boundaries.
    /// With their reciprocals, for the steps gained in [`Band::advanced`]
    /// and the waits of [`wait_wide`]: without a reservation's debt, a
    /// decision's only divisions.
    step_tokens: Divisor,
    step_period: Divisor,
    /// `Some(refill)` when a step is one token (`step_tokens` is 1): the
    /// refill of a quick band (see [`Band::is_quick`]). One byte tells a
    /// decision both, where checking each took two loads and two branches.
    quick: Option<Refill>,
}

impl Bandwidth {
    /// A bandwidth that refills continuously, starting full.
    ///
    /// Fails when a value is zero, or when refilling the whole capacity would
    /// take longer than [`Nanos::MAX`].
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn greedy(capacity: u64, refill_tokens: u64, refill_period: Nanos) -> Result<Self, Error> {
        Self::new(Refill::Greedy, capacity, refill_tokens, refill_period)
    }

    /// A bandwidth that adds all of `refill_tokens` at the end of each
    /// period, starting full. Fails like [`Bandwidth::greedy`].
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn interval(
        capacity: u64,
        refill_tokens: u64,
        refill_period: Nanos,
    ) -> Result<Self, Error> {
        Self::new(Refill::Interval, capacity, refill_tokens, refill_period)
    }

    /// [`Bandwidth::greedy`] or [`Bandwidth::interval`], as `refill` says: for
    /// callers that read the mode from configuration. Fails like them.
    ///
    /// ```
    /// use ratekeeper::{Bandwidth, Nanos, Refill};
    ///
    /// let refill = Refill::from_name("interval").unwrap();
    /// let rule = Bandwidth::new(refill, 100, 100, Nanos::from_secs(60)).unwrap();
    /// assert_eq!(rule, Bandwidth::interval(100, 100, Nanos::from_secs(60)).unwrap());
    /// assert_eq!(rule.refill(), Refill::Interval);
    /// ```
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn new(
        refill: Refill,
        capacity: u64,
        refill_tokens: u64,
        refill_period: Nanos,
    ) -> Result<Self, Error> {
        Self::build(capacity, refill_tokens, refill_period, refill)
    }

    /// The same bandwidth holding `initial_tokens` at the bucket's first call.
    ///
    /// Fails when `initial_tokens` exceeds the capacity.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn with_initial_tokens(mut self, initial_tokens: u64) -> Result<Self, Error> {
        if initial_tokens > self.capacity() {
            return Err(Error::TooLarge {
                name: "initial_tokens",
                value: initial_tokens,
                max: self.capacity(),
            });
        }
        self.initial_tokens = initial_tokens;
        Ok(self)
    }

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn build(
        capacity: u64,
        refill_tokens: u64,
        refill_period: Nanos,
        refill: Refill,
    ) -> Result<Self, Error> {
        let Some(nonzero_capacity) = NonZeroU64::new(capacity) else {
            return Err(Error::ZeroValue { name: "capacity" });
        };
        for (name, value) in [
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
            capacity: nonzero_capacity,
            refill_tokens,
            refill_period: refill_period.0,
            initial_tokens: capacity,
            refill,
            step_tokens: Divisor::new(refill_tokens / divisor),
            step_period: Divisor::new(refill_period.0 / divisor),
            quick: (refill_tokens / divisor == 1).then_some(refill),
        };
        // Every wait a bucket reports without reservations is at most the time
        // to refill it from empty, so checking that once keeps them in range
        // (and lets `Band::wait_for` compute them in 64 bits).
        if wait_wide(&bandwidth, capacity as u128, 0) > u64::MAX as u128 {
            return Err(Error::Overflow {
                name: "refill_period",
                reason: "refilling the whole capacity would take more than 2^64 ns",
            });
        }
        Ok(bandwidth)
    }

    /// The most tokens this bandwidth holds.
    #[inline]
    pub fn capacity(&self) -> u64 {
        self.capacity.get()
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

    /// The step a band's carry counts in (see `step_period`), for tests.
    #[cfg(test)]
    pub(crate) fn step(&self) -> u64 {
        self.step_period.get()
    }
}

/// The state of one bandwidth, whose rule the bucket keeps apart so that a
/// decision copies 24 bytes per band, not the rule too: `tokens - owed`
/// tokens, where `owed` (tokens booked by reservations beyond what was
/// there) is non-zero only when `tokens` is zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Band {
    pub(crate) tokens: u64,
    pub(crate) owed: u64,
    /// Greedy: the fraction of the next token, in units of 1/step_period;
    /// zero when full. Interval: the time since the last period boundary.
    /// Below step_period.
    carry: u64,
}

impl Band {
    /// Takes the tokens and carry of `new`, this band after a quick
    /// computation: all that one changes (it never touches the debt).
    #[inline(always)]
    pub(crate) fn set_quick(&mut self, new: &Band) {
        (self.tokens, self.carry) = (new.tokens, new.carry);
    }

    pub(crate) fn new(rule: &Bandwidth) -> Band {
        Band {
            tokens: rule.initial_tokens,
            owed: 0,
            carry: 0,
        }
    }

    #[inline]
    pub(crate) fn is_full(&self, rule: &Bandwidth) -> bool {
        self.tokens == rule.capacity()
    }

    /// The band `elapsed` ns later: the whole steps gained (tokens, or
    /// periods), the remainder carried. [`Band::advanced_quick`] is a
    /// shortcut of this for the usual case.
    pub(crate) fn advanced(mut self, rule: &Bandwidth, elapsed: u64) -> Band {
        if rule.refill == Refill::Greedy && self.is_full(rule) {
            return self;
        }
        let period = rule.step_period.get() as u128;
        // The carry plus the refill since the last call: in units of
        // 1/step_period token (greedy), or in ns (interval).
        let scaled = self.carry as u128
            + match rule.refill {
                // Cannot overflow: the product is at most (2^64 - 1)^2.
                Refill::Greedy => rule.step_tokens.get() as u128 * elapsed as u128,
                Refill::Interval => elapsed as u128,
            };
        // No step gained, or enough to fill the band: no division needed.
        if scaled < period {
            self.carry = scaled as u64;
            return self;
        }
        let room = (rule.capacity() - self.tokens) as u128;
        if rule.refill == Refill::Greedy && self.owed == 0 && scaled >= room * period {
            (self.tokens, self.carry) = (rule.capacity(), 0);
            return self;
        }
        let steps = match u64::try_from(scaled) {
            // Within 64 bits, by the reciprocal: no division instruction.
            Ok(scaled) => rule.step_period.divide(scaled) as u128,
            Err(_) => scaled / period,
        };
        self.carry = (scaled - steps * period) as u64;
        let gained = match rule.refill {
            Refill::Greedy => steps,
            Refill::Interval => steps.saturating_mul(rule.step_tokens.get() as u128),
        };
        self.add(rule, gained);
        self
    }

    /// Adds tokens, paying what is owed first, never above capacity.
    pub(crate) fn add(&mut self, rule: &Bandwidth, tokens: u128) {
        let paid = tokens.min(self.owed as u128) as u64;
        self.owed -= paid;
        let rest = tokens - paid as u128;
        let room = rule.capacity() - self.tokens;
        if rest >= room as u128 {
            self.tokens = rule.capacity();
            if rule.refill == Refill::Greedy {
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
    /// `None` when the band does not hold `cost` at the slot, or when the
    /// numbers do not fit in 128 bits.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub(crate) fn booked(self, rule: &Bandwidth, wait: u64, cost: u64) -> Option<Band> {
        let at_slot = self.advanced(rule, wait);
        if !at_slot.holds(cost) {
            return None;
        }
        let level_at_slot = at_slot.tokens as i128 - at_slot.owed as i128 - cost as i128;
        let (refill, period) = (
            rule.step_tokens.get() as i128,
            rule.step_period.get() as i128,
        );
        let mut band = self;
        match rule.refill {
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

    /// The wait, in ns, until `tokens - owed >= target`, saturating at
    /// `u64::MAX`: the definition that [`Band::wait_for_quick`] shortcuts.
    pub(crate) fn wait_for(&self, rule: &Bandwidth, target: u64) -> u64 {
        let missing = (target as u128 + self.owed as u128).saturating_sub(self.tokens as u128);
        if missing == 0 {
            return 0;
        }
        wait_wide(rule, missing, self.carry).min(u64::MAX as u128) as u64
    }

    /// This band following a new rule: whole tokens and debt carry over
    /// (tokens capped at the new capacity); a partial token, or the time into
    /// the current interval, restarts.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub(crate) fn reconfigured(self, rule: &Bandwidth) -> Band {
        Band {
            tokens: self.tokens.min(rule.capacity()),
            owed: self.owed,
            carry: 0,
        }
    }

    // The quick arithmetic: shortcuts of `advanced` and `wait_for` for the
    // usual case, which a decision tries first (see `token_bucket::Quick`).

    /// Whether the band owes nothing and gains one token per step of
    /// `step_period`, the usual case, in which [`Band::advanced_quick`] and
    /// [`Band::wait_for_quick`] apply: then no wait needs a division or more
    /// than 64 bits.
    #[inline(always)]
    pub(crate) fn is_quick(&self, rule: &Bandwidth) -> bool {
        self.owed == 0 && rule.quick.is_some()
    }

    /// [`Band::advanced`] for a quick band (see [`Band::is_quick`]), in the
    /// cases a bucket meets on almost every call, which need no division
    /// instruction and no 128-bit state: a full band, less than a token (or
    /// a period) gained, one token or more (greedy; several by the step
    /// period's reciprocal, except on wasm), or enough to fill the band.
    /// `None` otherwise. The band stays quick.
    #[inline(always)]
    pub(crate) fn advanced_quick(mut self, rule: &Bandwidth, elapsed: u64) -> Option<Band> {
        debug_assert!(self.is_quick(rule));
        let period = rule.step_period.get();
        if rule.quick? == Refill::Greedy {
            // The time the band takes to fill: at most the time to refill
            // from empty, within 64 bits (checked when the rule was built);
            // zero when full, a full band carrying nothing. One comparison
            // covers a full band and one that fills.
            let to_fill = (rule.capacity() - self.tokens) * period - self.carry;
            if elapsed >= to_fill {
                (self.tokens, self.carry) = (rule.capacity(), 0);
                return Some(self);
            }
            // The carry plus the refill since the last call, in units of
            // 1/step_period token: below `(capacity - tokens) * period`,
            // so within 64 bits.
            let scaled = self.carry + elapsed;
            // A token gained or not, written as a select (a conditional
            // move) rather than as a branch: on a steady stream of calls the
            // outcome alternates, a token on one call and none on the next.
            let gained = scaled >= period;
            let carry = if gained { scaled - period } else { scaled };
            if carry >= period {
                // Two tokens or more, short of filling (so fewer than the
                // room): what a bucket called less often than its rate
                // meets, such as each key of a keyed limiter. By the
                // reciprocal, kept apart from the select above so that a
                // steady stream's chain of calls stays short. Left to the
                // exact path on wasm, where these inlined copies cost 0.9 KB
                // of gzipped download.
                if cfg!(target_arch = "wasm32") {
                    return None;
                }
                let steps = rule.step_period.divide(scaled);
                (self.tokens, self.carry) = (self.tokens + steps, scaled - steps * period);
                return Some(self);
            }
            (self.tokens, self.carry) = (self.tokens + gained as u64, carry);
            return Some(self);
        }
        // Interval: the time into the period, in ns. A sum past 2^64
        // crosses a boundary, as one past the period does.
        let (scaled, past_64_bits) = self.carry.overflowing_add(elapsed);
        if past_64_bits || scaled >= period {
            return None;
        }
        self.carry = scaled;
        Some(self)
    }

    /// [`Band::wait_for`] for a quick band (see [`Band::is_quick`]): for
    /// either refill, the missing tokens' steps less the carry. It fits in
    /// 64 bits, being at most the time to refill from empty (checked when
    /// the rule was built).
    #[inline(always)]
    pub(crate) fn wait_for_quick(&self, rule: &Bandwidth, target: u64) -> u64 {
        debug_assert!(self.is_quick(rule));
        if self.tokens >= target {
            0
        } else {
            (target - self.tokens) * rule.step_period.get() - self.carry
        }
    }
}

/// The wait, in ns, for `missing` more tokens (not zero) into a band of
/// `rule` with this `carry`, computed in 128 bits; `u128::MAX` when even
/// that overflows.
fn wait_wide(rule: &Bandwidth, missing: u128, carry: u64) -> u128 {
    let (refill, period) = (
        rule.step_tokens.get() as u128,
        rule.step_period.get() as u128,
    );
    match rule.refill {
        Refill::Greedy => match missing.checked_mul(period) {
            Some(scaled) => match u64::try_from(scaled - carry as u128) {
                // Within 64 bits, by the reciprocal: no division instruction.
                Ok(scaled) => rule.step_tokens.divide_up(scaled) as u128,
                Err(_) => (scaled - carry as u128).div_ceil(refill),
            },
            None => u128::MAX,
        },
        Refill::Interval => {
            let periods = match u64::try_from(missing) {
                Ok(missing) => rule.step_tokens.divide_up(missing) as u128,
                Err(_) => missing.div_ceil(refill),
            };
            match periods.checked_mul(period) {
                Some(at_boundary) => at_boundary - carry as u128,
                None => u128::MAX,
            }
        }
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Bandwidth {
    /// Feeds the rule to a state fingerprint.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub(crate) fn fingerprint(&self, fingerprint: &mut Fingerprint) {
        for word in [
            self.capacity(),
            self.refill_tokens,
            self.refill_period,
            self.initial_tokens,
            self.refill as u64,
        ] {
            fingerprint.word(word);
        }
    }
}

impl Band {
    /// Writes the band's state: tokens, owed, carry.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub(crate) fn write(&self, w: &mut Writer<'_>) {
        for field in [self.tokens, self.owed, self.carry] {
            w.varint(field);
        }
    }

    /// Reads a band of `rule` (see [`Band::checked`]).
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub(crate) fn read(rule: &Bandwidth, r: &mut Reader<'_>) -> Result<Band, Error> {
        let tokens = r.at_most(rule.capacity())?;
        let owed = r.varint()?;
        let carry = r.at_most(rule.step_period.get() - 1)?;
        Band::checked(rule, tokens, owed, carry)
    }

    /// A band of `rule` holding this state, checking what the arithmetic
    /// relies on: tokens within capacity, debt only in an empty band, a
    /// carry below the step (and none in a full greedy band).
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub(crate) fn checked(
        rule: &Bandwidth,
        tokens: u64,
        owed: u64,
        carry: u64,
    ) -> Result<Band, Error> {
        let full_with_carry =
            rule.refill == Refill::Greedy && tokens == rule.capacity() && carry != 0;
        if tokens > rule.capacity()
            || carry >= rule.step_period.get()
            || (owed != 0 && tokens != 0)
            || full_with_carry
        {
            return Err(corrupt("a bandwidth's state is inconsistent"));
        }
        Ok(Band {
            tokens,
            owed,
            carry,
        })
    }
}
