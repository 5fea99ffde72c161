//! What a limiter guarantees, computed exactly: the most units it admits in
//! any window, its burst, its sustained rate and how long a locked-out
//! client waits.
//!
//! Time is integer nanoseconds, so a window `[t, t + w)` of length `w` holds
//! the `w` instants `t, t + 1, ..., t + w - 1`. Every figure is the worst
//! case over every start `t` and every reachable state (for the buckets, the
//! full bucket; for the window algorithms, an empty previous window), and it
//! is attained: `core/tests/guarantee.rs` drives the real limiters with a
//! greedy client from every start offset and finds exactly these numbers.
//! Where a figure is only a safe upper bound, [`Guarantee::is_exact`] (or
//! [`Guarantees::is_exact`]) says so.
//!
//! Against a strict sliding window of the same "N per W"
//! ([`Guarantee::strict`], [`Guarantee::excess`]): the log is one; a token
//! bucket or GCRA adds its burst to the rate; a fixed window admits up to
//! `2N` across a boundary; the counter up to `max(N, 2N - ceil(2N / W))` (W in ns);
//! a leaky bucket admits its whole queue at once (its units then leave one
//! interval apart).
//!
//! [`Guarantee::of`] answers for one limiter, [`Policy::guarantees`] for each
//! limit of a policy and for all of them together. Needs the `alloc` feature.
#![cfg(feature = "alloc")]

use alloc::string::String;
use alloc::vec::Vec;

use crate::{
    AnyLimiter, Bandwidth, Calendar, Decision, Limiter, Nanos, Policy, Refill, TokenBucket,
};

/// Nanoseconds per day.
const DAY: u64 = 86_400_000_000_000;

/// The Gregorian calendar repeats every 400 years: 4,800 months in 146,097
/// days, the long run of calendar months.
const GREGORIAN: (u128, u128) = (4_800, 146_097 * DAY as u128);

/// A sustained rate as an exact fraction: `units` every `per` ns, over the
/// algorithm's own period (a window's, a 2-window cycle's, a bucket's refill
/// in lowest terms; for calendar months, the Gregorian 400 years), so that
/// each further `per` of a long window adds exactly `units`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sustained {
    /// Units admitted every `per`, in the long run.
    pub units: u128,
    /// The period of `units`, in nanoseconds (at least 1).
    pub per: u128,
}

impl Sustained {
    /// Whether this rate is below `other`, compared exactly without a
    /// product that could overflow: whole parts first, then the reciprocals
    /// of the remainders, as a continued fraction does.
    fn lt(&self, other: &Sustained) -> bool {
        let (mut a, mut b, mut c, mut d) = (self.units, self.per, other.units, other.per);
        // a/b < c/d, flipped each round: the remainders' reciprocals compare
        // the other way.
        let mut flipped = false;
        loop {
            let (q1, q2) = (a / b, c / d);
            if q1 != q2 {
                return (q1 < q2) != flipped;
            }
            let (r1, r2) = (a % b, c % d);
            if r1 == 0 || r2 == 0 {
                return (r1 < r2) != flipped && r1 != r2;
            }
            // r1/b < r2/d exactly when d/r2 < b/r1.
            (a, b, c, d) = (b, r1, d, r2);
            flipped = !flipped;
        }
    }
}

/// How long a client that has just spent everything waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Lockout {
    /// Until one more unit is admitted.
    pub retry_after: Nanos,
    /// Until the limiter is fresh (full) again.
    pub reset_after: Nanos,
}

/// One bandwidth of a bucket, as the arithmetic here needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Band {
    capacity: u64,
    /// The refill, reduced by its gcd for a greedy band.
    tokens: u64,
    period: u64,
    interval: bool,
}

impl Band {
    fn of(rule: &Bandwidth) -> Band {
        let (tokens, period) = (rule.refill_tokens(), rule.refill_period().0);
        let interval = rule.refill() == Refill::Interval;
        let g = if interval {
            1
        } else {
            gcd(tokens as u128, period as u128) as u64
        };
        Band {
            capacity: rule.capacity(),
            tokens: tokens / g,
            period: period / g,
            interval,
        }
    }

    /// The greedy refill's regime, for a client draining the band every ns:
    /// `None` when no refill is ever clipped by the capacity, else the cycle
    /// `(length in ns, units per cycle)` of the clipped refill.
    ///
    /// Drained each ns, the band holds only its carry `c < period`, and the
    /// refill of one ns is clipped when `c + tokens >= capacity * period`.
    /// With `d = capacity * period - tokens` below `period`, each ns gains
    /// `capacity - 1` and the carry grows by `period - d` until it reaches
    /// `d`; that ns gains `capacity` and drops the carry.
    fn clipped(&self) -> Option<(u128, u128)> {
        let (cap, a, p) = (
            self.capacity as u128,
            self.tokens as u128,
            self.period as u128,
        );
        let full = cap * p;
        if a >= full {
            return Some((1, cap));
        }
        let d = full - a;
        if d >= p {
            return None;
        }
        let length = 1 + d.div_ceil(p - d);
        Some((length, length * (cap - 1) + 1))
    }

    fn max_in_window(&self, window: u64) -> u128 {
        if window == 0 {
            return 0;
        }
        let span = (window - 1) as u128;
        let cap = self.capacity as u128;
        if self.interval {
            // The full band at the last ns of a period: every period end in
            // the rest of the window refills at most the capacity.
            let refill = (self.tokens as u128).min(cap);
            return cap + refill * span.div_ceil(self.period as u128);
        }
        match self.clipped() {
            None => cap + self.tokens as u128 * span / self.period as u128,
            Some((length, units)) => cap + span / length * units + span % length * (cap - 1),
        }
    }

    /// Per refill period, or per cycle of the clipped refill.
    fn sustained(&self) -> Sustained {
        let (units, per) = if self.interval {
            (
                (self.tokens as u128).min(self.capacity as u128),
                self.period as u128,
            )
        } else {
            self.clipped()
                .map_or((self.tokens as u128, self.period as u128), |(l, u)| (u, l))
        };
        Sustained { units, per }
    }
}

/// The shape of a limiter: only what its guarantee depends on.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Shape {
    /// Token buckets (one band per bandwidth) and the GCRA (one greedy band).
    Bucket(Vec<Band>),
    /// A leaky bucket: `capacity` queued, one unit every `interval`.
    Queue { capacity: u64, interval: u64 },
    /// The exact sliding log.
    Log { limit: u64, window: u64 },
    /// The sliding window counter; `months` for calendar months.
    Counter {
        limit: u64,
        window: u64,
        months: bool,
    },
    /// The fixed window; `months` for calendar months.
    Fixed {
        limit: u64,
        window: u64,
        months: bool,
    },
}

/// The guarantee of one limiter: exact worst cases, computed from its
/// configuration (see the [module](self) for what "worst" means).
///
/// ```
/// use ratekeeper::guarantee::Guarantee;
/// use ratekeeper::{AnyLimiter, FixedWindow, Nanos, TokenBucket};
///
/// // A burst of 10, then 10 per second: 19 in any second, not 10.
/// let bucket = AnyLimiter::from(TokenBucket::new(10, 10, Nanos::from_secs(1)).unwrap());
/// let g = Guarantee::of(&bucket);
/// assert_eq!(g.max_in_window(Nanos::from_secs(1)), 19);
/// assert_eq!(g.burst(), 10);
/// assert_eq!((g.sustained().units, g.sustained().per), (1, 100_000_000));
/// assert_eq!(g.lockout().retry_after, Nanos::from_millis(100));
///
/// // A fixed window lets twice its limit through across a boundary.
/// let window = AnyLimiter::from(FixedWindow::new(100, Nanos::from_secs(60)).unwrap());
/// let g = Guarantee::of(&window);
/// assert_eq!(g.max_in_window(Nanos::from_secs(60)), 200);
/// assert_eq!(g.strict(), (100, Nanos::from_secs(60)));
/// assert_eq!(g.excess(), 100);
/// ```
#[derive(Clone, Debug)]
pub struct Guarantee {
    limiter: AnyLimiter,
    shape: Shape,
}

impl Guarantee {
    /// The guarantee of `limiter`'s configuration (its state is ignored).
    #[must_use]
    pub fn of(limiter: &AnyLimiter) -> Guarantee {
        let bands = |rules: &[Bandwidth]| Shape::Bucket(rules.iter().map(Band::of).collect());
        let months = |c: Option<Calendar>| c == Some(Calendar::Month);
        let shape = match limiter {
            AnyLimiter::TokenBucket(l) => bands(&l.bandwidths()),
            AnyLimiter::TokenBucket2(l) => bands(&l.bandwidths()),
            AnyLimiter::TokenBucket3(l) => bands(&l.bandwidths()),
            AnyLimiter::TokenBucket4(l) => bands(&l.bandwidths()),
            AnyLimiter::Gcra(l) => Shape::Bucket(alloc::vec![Band {
                capacity: l.burst(),
                tokens: 1,
                period: l.emission_interval().0,
                interval: false,
            }]),
            AnyLimiter::LeakyBucket(l) => Shape::Queue {
                capacity: l.limit(),
                interval: l.interval().0,
            },
            AnyLimiter::SlidingWindowLog(l) => Shape::Log {
                limit: l.limit(),
                window: l.window().0,
            },
            AnyLimiter::SlidingWindowCounter(l) => Shape::Counter {
                limit: l.limit(),
                window: l.window().0,
                months: months(l.calendar()),
            },
            AnyLimiter::FixedWindow(l) => Shape::Fixed {
                limit: l.limit(),
                window: l.window().0,
                months: months(l.calendar()),
            },
        };
        Guarantee {
            limiter: limiter.clone(),
            shape,
        }
    }

    /// The algorithm's name, as [`AnyLimiter::algorithm`] spells it.
    pub fn algorithm(&self) -> &'static str {
        self.limiter.algorithm()
    }

    /// Whether every figure is exact (worst case attained). `false` for a
    /// sliding window counter over calendar months, bounded by the limit of
    /// each month it meets, and for a bucket mixing interval refill with other
    /// bandwidths, bounded by its tightest bandwidth.
    pub fn is_exact(&self) -> bool {
        match &self.shape {
            Shape::Counter { months, .. } => !months,
            // Several bandwidths combine exactly when all refill greedily.
            Shape::Bucket(bands) => bands.len() == 1 || bands.iter().all(|b| !b.interval),
            _ => true,
        }
    }

    /// The most units admitted in any window `[t, t + window)`.
    pub fn max_in_window(&self, window: Nanos) -> u128 {
        let w = window.0;
        if w == 0 {
            return 0;
        }
        let span = (w - 1) as u128;
        match self.shape {
            Shape::Bucket(ref bands) => bands
                .iter()
                .map(|band| band.max_in_window(w))
                .min()
                .unwrap_or(0),
            // Units join only while the queue has room: `capacity` at once,
            // then one per interval as the queue drains.
            Shape::Queue { capacity, interval } => capacity as u128 + span / interval as u128,
            Shape::Log { limit, window } => limit as u128 * (w as u128).div_ceil(window as u128),
            // Every aligned window the span meets admits its whole limit.
            Shape::Fixed {
                limit,
                months: true,
                ..
            }
            | Shape::Counter {
                limit,
                months: true,
                ..
            } => limit as u128 * months_met(w),
            Shape::Fixed { limit, window, .. } => {
                limit as u128 * (1 + span.div_ceil(window as u128))
            }
            Shape::Counter { limit, window, .. } => counter_max(limit, window, w),
        }
    }

    /// The most units admitted at one instant.
    pub fn burst(&self) -> u128 {
        self.max_in_window(Nanos(1))
    }

    /// The long-run rate: the most units admitted per period, on average over
    /// ever longer windows.
    pub fn sustained(&self) -> Sustained {
        match self.shape {
            Shape::Bucket(ref bands) => {
                let mut rates = bands.iter().map(Band::sustained);
                let first = rates.next().unwrap_or(Sustained { units: 0, per: 1 });
                rates.fold(first, |a, b| if b.lt(&a) { b } else { a })
            }
            // Over the algorithm's own period, which a longer window adds to
            // its count exactly, rather than in lowest terms.
            Shape::Queue { interval, .. } => Sustained {
                units: 1,
                per: interval as u128,
            },
            // Calendar months: per month on average, not per nominal 30 days.
            Shape::Fixed {
                limit,
                months: true,
                ..
            } => Sustained {
                units: limit as u128 * GREGORIAN.0,
                per: GREGORIAN.1,
            },
            // Counted with the longest month, which lets through the most
            // (the same counts as any month's below 2.4e15 units a month).
            Shape::Counter {
                limit,
                months: true,
                ..
            } => {
                let (a, b) = counter_cycle(limit, 31 * DAY);
                Sustained {
                    units: (a as u128 + b as u128) * (GREGORIAN.0 / 2),
                    per: GREGORIAN.1,
                }
            }
            Shape::Log { limit, window } | Shape::Fixed { limit, window, .. } => Sustained {
                units: limit as u128,
                per: window as u128,
            },
            Shape::Counter { limit, window, .. } => match counter_cycle(limit, window) {
                (a, b) if a == b => Sustained {
                    units: a as u128,
                    per: window as u128,
                },
                (a, b) => Sustained {
                    units: a as u128 + b as u128,
                    per: 2 * window as u128,
                },
            },
        }
    }

    /// The waits of a client that has just spent everything, as the limiter
    /// itself answers them: for a bucket, every bandwidth empty; for a queue,
    /// the queue full; for a window, the whole limit taken as its window opens
    /// (for calendar months, the longest month followed by another as long).
    pub fn lockout(&self) -> Lockout {
        let answer =
            |limiter: &AnyLimiter, at: Nanos| -> Option<Decision> { limiter.peek(at, 1).ok() };
        let decision = match &self.limiter {
            AnyLimiter::TokenBucket(l) => empty(l.bandwidths()),
            AnyLimiter::TokenBucket2(l) => empty(l.bandwidths()),
            AnyLimiter::TokenBucket3(l) => empty(l.bandwidths()),
            AnyLimiter::TokenBucket4(l) => empty(l.bandwidths()),
            other => {
                let mut spent = other.clone();
                // A window that opens at `at`: the epoch; for weeks the first
                // Monday (1970-01-05); for months 1970-07-01, a 31-day month
                // followed by another, since a counter's wait reaches into the
                // next window and grows with both lengths (from January, with
                // February next, it fell short by up to 3 days).
                let calendar = match other {
                    AnyLimiter::FixedWindow(l) => l.calendar(),
                    AnyLimiter::SlidingWindowCounter(l) => l.calendar(),
                    _ => None,
                };
                let at = Nanos(match calendar {
                    Some(Calendar::Week) => 4 * DAY,
                    Some(Calendar::Month) => 181 * DAY,
                    _ => 0,
                });
                let limit = spent.limit();
                match spent.try_acquire(at, limit) {
                    Ok(_) => answer(&spent, at),
                    Err(_) => None,
                }
            }
        };
        let decision = decision.unwrap_or(Decision {
            allowed: false,
            remaining: 0,
            limit: 0,
            retry_after: Nanos::MAX,
            reset_after: Nanos::MAX,
        });
        Lockout {
            retry_after: decision.retry_after,
            reset_after: decision.reset_after,
        }
    }

    /// The strict sliding window this limiter is compared with: `N` units per
    /// `W`, for the same nominal rate (a bucket's first refill, a GCRA's or
    /// queue's burst over the time it takes to earn it, a window's limit).
    pub fn strict(&self) -> (u64, Nanos) {
        match &self.limiter {
            AnyLimiter::Gcra(l) => (l.burst(), Nanos(l.burst() * l.emission_interval().0)),
            AnyLimiter::LeakyBucket(l) => (l.limit(), Nanos(l.limit() * l.interval().0)),
            other => match self.shape {
                Shape::Bucket(_) => {
                    let rule = first_band(other);
                    (rule.refill_tokens(), rule.refill_period())
                }
                _ => (other.limit(), other.window()),
            },
        }
    }

    /// How many more units than the strict sliding window of
    /// [`strict`](Self::strict) this limiter admits in a window of that
    /// length: 0 for the log, the limit for a fixed window, the burst plus
    /// the rate for a bucket.
    pub fn excess(&self) -> u128 {
        let (n, w) = self.strict();
        self.max_in_window(w).saturating_sub(n as u128)
    }
}

/// The first bandwidth of a token bucket.
fn first_band(limiter: &AnyLimiter) -> Bandwidth {
    match limiter {
        AnyLimiter::TokenBucket(l) => l.bandwidths()[0],
        AnyLimiter::TokenBucket2(l) => l.bandwidths()[0],
        AnyLimiter::TokenBucket3(l) => l.bandwidths()[0],
        AnyLimiter::TokenBucket4(l) => l.bandwidths()[0],
        _ => unreachable!("only buckets have bandwidths"),
    }
}

/// The answer, for one unit, of the same bucket with every bandwidth empty.
fn empty<const N: usize>(rules: [Bandwidth; N]) -> Option<Decision> {
    let rules = rules.map(|r| r.with_initial_tokens(0).unwrap_or(r));
    TokenBucket::from_bandwidths(rules)
        .ok()?
        .peek(Nanos::ZERO, 1)
        .ok()
}

/// The most calendar months (UTC) that a window of `w` ns meets, over
/// every start from the epoch to [`Nanos::MAX`]: the month holding its first
/// instant, and `k` more when `k` consecutive month starts lie within
/// `w - 2` ns (the window then starts 1 ns before the first of them).
fn months_met(w: u64) -> u128 {
    if w < 2 {
        return w as u128;
    }
    let starts: Vec<u128> = (0u128..)
        .map(|k| Calendar::Month.end(k))
        .take_while(|&start| start <= u64::MAX as u128)
        .collect();
    let (mut most, mut last) = (0, 0);
    for first in 0..starts.len() {
        last = last.max(first);
        while last + 1 < starts.len() && starts[last + 1] - starts[first] <= (w - 2) as u128 {
            last += 1;
        }
        most = most.max(last - first + 1);
    }
    1 + most as u128
}

/// The sliding window counter's most units in a window of `w` ns.
///
/// The worst window starts at the last ns of an aligned window after an
/// empty one (the whole limit at once), then meets whole windows and a
/// partial one. A window after one holding `c` units admits at most
/// `limit - ceil(c / window)` (by its last ns), and
/// `limit - ceil(c * (window - e) / window)` by `e` ns into it; taking the most in each window is best,
/// since one unit fewer earns at most one more in the next.
fn counter_max(limit: u64, window: u64, w: u64) -> u128 {
    if w == 0 {
        return 0;
    }
    let rest = w - 1;
    let (full, part) = (rest / window, rest % window);
    let (total, last) = counter_chain(limit, window, full);
    let tail = if part == 0 {
        0
    } else {
        // `part` ns into the next window: offsets 0..part - 1.
        let weight = (window - (part - 1)) as u128;
        limit as u128 - (last as u128 * weight).div_ceil(window as u128)
    };
    limit as u128 + total + tail
}

/// The next window's most units after one holding `c`.
fn counter_next(limit: u64, window: u64, c: u64) -> u64 {
    limit - c.div_ceil(window)
}

/// The units of `n` whole windows after one holding `limit`, each taking
/// the most it can, and the count of the last (`limit` when `n` is 0).
/// The counts settle within a few dozen windows into a fixed point or a
/// 2-cycle, which is then summed in closed form.
fn counter_chain(limit: u64, window: u64, n: u64) -> (u128, u64) {
    let (mut total, mut before, mut prev, mut left) = (0u128, None, limit, n);
    while left > 0 {
        let next = counter_next(limit, window, prev);
        if Some(next) == before {
            // From here the counts alternate next, prev, next, ...
            let pairs = (left / 2) as u128;
            total += pairs * (next as u128 + prev as u128);
            let last = if left % 2 == 1 {
                total += next as u128;
                next
            } else {
                prev
            };
            return (total, last);
        }
        total += next as u128;
        (before, prev, left) = (Some(prev), next, left - 1);
    }
    (total, prev)
}

/// The two counts the counter's windows alternate between in the long run
/// (equal at a fixed point).
fn counter_cycle(limit: u64, window: u64) -> (u64, u64) {
    let (mut before, mut prev) = (None, limit);
    loop {
        let next = counter_next(limit, window, prev);
        if Some(next) == before {
            return (prev, next);
        }
        (before, prev) = (Some(prev), next);
    }
}

/// The combined guarantee of several limits decided all or nothing, such as
/// a [`Policy`]'s, for one client that every limit counts.
#[derive(Clone, Debug)]
pub struct Guarantees {
    limits: Vec<(String, Guarantee)>,
}

impl Guarantees {
    /// The limits, by name, with their own guarantees.
    pub fn limits(&self) -> &[(String, Guarantee)] {
        &self.limits
    }

    /// Whether the combined figures are exact: with one limit, when its own
    /// are; with several, when every limit is a bucket (token bucket or
    /// GCRA) with greedy refill, whose combination is the tightest of each.
    /// Otherwise they are safe upper bounds.
    pub fn is_exact(&self) -> bool {
        match &self.limits[..] {
            [(_, one)] => one.is_exact(),
            many => many.iter().all(|(_, g)| match &g.shape {
                Shape::Bucket(bands) => bands.iter().all(|b| !b.interval),
                _ => false,
            }),
        }
    }

    /// The most units admitted in any window: the tightest limit's, since
    /// a request must pass every limit. `u128::MAX` with no limits.
    pub fn max_in_window(&self, window: Nanos) -> u128 {
        self.limits
            .iter()
            .map(|(_, g)| g.max_in_window(window))
            .min()
            .unwrap_or(u128::MAX)
    }

    /// The most units admitted at one instant.
    pub fn burst(&self) -> u128 {
        self.max_in_window(Nanos(1))
    }

    /// The slowest limit's sustained rate; `None` with no limits.
    pub fn sustained(&self) -> Option<Sustained> {
        let mut rates = self.limits.iter().map(|(_, g)| g.sustained());
        let first = rates.next()?;
        Some(rates.fold(first, |a, b| if b.lt(&a) { b } else { a }))
    }

    /// The longest waits of a client every limit has locked out.
    pub fn lockout(&self) -> Lockout {
        let mut out = Lockout {
            retry_after: Nanos::ZERO,
            reset_after: Nanos::ZERO,
        };
        for (_, g) in &self.limits {
            let l = g.lockout();
            out.retry_after = out.retry_after.max(l.retry_after);
            out.reset_after = out.reset_after.max(l.reset_after);
        }
        out
    }
}

impl Policy {
    /// The guarantee of each limit and of all of them together.
    ///
    /// ```
    /// use ratekeeper::{Algorithm, Nanos, Policy};
    ///
    /// let policy = Policy::from_rates("10/second;100/minute", Algorithm::SlidingWindowLog, &[]).unwrap();
    /// let all = policy.guarantees();
    /// assert_eq!(all.limits().len(), 2);
    /// assert_eq!(all.burst(), 10);
    /// // A request must pass both: 100 in any minute, not 600.
    /// assert_eq!(all.max_in_window(Nanos::from_secs(60)), 100);
    /// assert_eq!(all.lockout().reset_after, Nanos::from_secs(60));
    /// ```
    #[must_use]
    pub fn guarantees(&self) -> Guarantees {
        let limits = (0..self.len())
            .map(|i| (String::from(self.name(i)), Guarantee::of(&self.limiter(i))))
            .collect();
        Guarantees { limits }
    }
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::Sustained;
    use proptest::prelude::*;

    fn rate(units: u128, per: u128) -> Sustained {
        Sustained { units, per }
    }

    proptest! {
        #[test]
        fn rates_compare_as_fractions(a: u64, b in 1u64.., c: u64, d in 1u64..) {
            let exact = (a as u128) * (d as u128) < (c as u128) * (b as u128);
            prop_assert_eq!(rate(a as u128, b as u128).lt(&rate(c as u128, d as u128)), exact);
        }
    }

    #[test]
    fn rates_beyond_products_of_128_bits() {
        let big = u128::MAX / 3;
        assert!(rate(big, u128::MAX).lt(&rate(big + 1, u128::MAX)));
        assert!(!rate(big + 1, u128::MAX).lt(&rate(big, u128::MAX)));
        assert!(!rate(big, big + 1).lt(&rate(big, big + 1)));
        // big / (big + 1) < (big + 1) / (big + 2), both just below 1.
        assert!(rate(big, big + 1).lt(&rate(big + 1, big + 2)));
        assert!(!rate(big + 1, big + 2).lt(&rate(big, big + 1)));
        // Equal rates in other terms, told equal after a round of
        // reciprocals (1/2 and 2/4: 2/1 against 4/2).
        assert!(!rate(1, 2).lt(&rate(2, 4)));
        assert!(!rate(2, 4).lt(&rate(1, 2)));
    }
}
