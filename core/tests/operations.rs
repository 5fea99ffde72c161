//! Property tests of peek, reserve, refund and reconfigure, and of buckets with
//! several greedy and interval bandwidths, against naive models.

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use ratekeeper::{Bandwidth, Limiter, Nanos, Refill, SlidingWindowLog, TokenBucket};

/// One bandwidth as an exact level scaled by its period, advanced from scratch.
#[derive(Clone)]
struct RefBand {
    capacity: i128,
    refill: i128,
    period: i128,
    interval: bool,
    /// level * period; negative while reservations are owed.
    scaled: i128,
    anchor: i128,
}

impl RefBand {
    fn advance(&mut self, from: i128, to: i128) {
        let gained = if self.interval {
            ((to - self.anchor) / self.period - (from - self.anchor) / self.period)
                * self.refill
                * self.period
        } else {
            self.refill * (to - from)
        };
        self.scaled = (self.scaled + gained).min(self.capacity * self.period);
    }
}

#[derive(Clone)]
struct RefBucket {
    bands: Vec<RefBand>,
    time: Option<i128>,
}

impl RefBucket {
    /// Allowed and remaining for `cost` at `now`, consuming if allowed.
    fn acquire(&mut self, now: u64, cost: u64) -> (bool, u64) {
        let now = now as i128;
        let time = *self.time.get_or_insert_with(|| {
            self.bands.iter_mut().for_each(|b| b.anchor = now);
            now
        });
        let effective = now.max(time);
        self.bands
            .iter_mut()
            .for_each(|b| b.advance(time, effective));
        self.time = Some(effective);
        let cost = cost as i128;
        let allowed = cost == 0 || self.bands.iter().all(|b| b.scaled >= cost * b.period);
        if allowed {
            self.bands
                .iter_mut()
                .for_each(|b| b.scaled -= cost * b.period);
        }
        let remaining = self
            .bands
            .iter()
            .map(|b| (b.scaled.max(0) / b.period) as u64)
            .min()
            .unwrap();
        (allowed, remaining)
    }
}

fn band() -> impl Strategy<Value = (u64, u64, u64, bool, u64)> {
    (1u64..=8, 1u64..=5, 1u64..=2_000, any::<bool>())
        .prop_flat_map(|(c, r, p, interval)| (Just(c), Just(r), Just(p), Just(interval), 0..=c))
}

fn rule((c, r, p, interval, initial): (u64, u64, u64, bool, u64)) -> Bandwidth {
    let rule = if interval {
        Bandwidth::interval(c, r, Nanos(p))
    } else {
        Bandwidth::greedy(c, r, Nanos(p))
    };
    rule.unwrap().with_initial_tokens(initial).unwrap()
}

fn reference(bands: &[(u64, u64, u64, bool, u64)]) -> RefBucket {
    RefBucket {
        bands: bands
            .iter()
            .map(|&(c, r, p, interval, initial)| RefBand {
                capacity: c as i128,
                refill: r as i128,
                period: p as i128,
                interval,
                scaled: initial as i128 * p as i128,
                anchor: 0,
            })
            .collect(),
        time: None,
    }
}

/// Times that mostly move forward, sometimes stand still, sometimes go back.
fn trace(max_step: i64, len: usize) -> impl Strategy<Value = Vec<(u64, u64)>> {
    let step = prop_oneof![6 => 0..=max_step, 2 => Just(0i64), 1 => -max_step..0];
    prop::collection::vec((step, 0u64..=4), 1..len).prop_map(|steps| {
        let mut t = 50_000i64;
        steps
            .into_iter()
            .map(|(d, cost)| {
                t = (t + d).max(0);
                (t as u64, cost)
            })
            .collect()
    })
}

/// What a test does at each step.
#[derive(Clone, Debug)]
enum Op {
    Acquire,
    Peek,
    Reserve(u64),
    /// Refund part of an earlier grant, chosen by index.
    Refund(usize, u64),
}

fn ops(len: usize) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        4 => Just(Op::Acquire),
        1 => Just(Op::Peek),
        3 => (0u64..5_000).prop_map(Op::Reserve),
        1 => (any::<usize>(), 1u64..=4).prop_map(|(i, c)| Op::Refund(i, c)),
    ];
    prop::collection::vec(op, len)
}

/// Units at a time: (ns, units).
type Units = (u64, u64);

/// Drives `limiter`, which has seen time up to `seen`, through a trace of
/// operations. Returns every grant as (time it takes effect, units), with
/// refunded units taken out, and every refund as (the limiter's time then,
/// units).
fn drive<L: Limiter + Clone + PartialEq + std::fmt::Debug>(
    limiter: &mut L,
    seen: u64,
    trace: &[(u64, u64)],
    ops: &[Op],
) -> (Vec<Units>, Vec<Units>) {
    let (mut grants, mut refunds): (Vec<Units>, Vec<Units>) = (vec![], vec![]);
    // A grant takes effect at the limiter's time, never before what it saw.
    let mut latest = seen;
    for (&(now, cost), op) in trace.iter().zip(ops) {
        let cost = cost.min(limiter.limit());
        // Only calls that may change the limiter move its clock.
        if matches!(op, Op::Acquire | Op::Reserve(_)) {
            latest = latest.max(now);
        }
        match op {
            Op::Acquire | Op::Peek => {
                let peeked = limiter.peek(Nanos(now), cost).unwrap();
                let before = limiter.clone();
                if let Op::Peek = op {
                    assert_eq!(limiter, &before, "peek changed the limiter");
                    continue;
                }
                let d = limiter.try_acquire(Nanos(now), cost).unwrap();
                assert_eq!(d, peeked, "peek and try_acquire disagree");
                if d.allowed && cost > 0 {
                    grants.push((latest, cost));
                }
            }
            Op::Reserve(max_wait) => {
                let peeked = limiter.peek(Nanos(now), cost).unwrap();
                let before = limiter.clone();
                match limiter.reserve(Nanos(now), cost, Nanos(*max_wait)).unwrap() {
                    Ok(wait) => {
                        assert!(wait.0 <= *max_wait);
                        assert_eq!(
                            wait, peeked.retry_after,
                            "a booking waits exactly the retry_after"
                        );
                        if cost > 0 {
                            grants.push(((now + wait.0).max(latest), cost));
                        }
                    }
                    Err(denied) => {
                        assert!(!denied.allowed);
                        assert_eq!(denied.retry_after, peeked.retry_after);
                        // Nothing booked: the limiter only moved its clock to `now`.
                        assert_eq!(
                            limiter.peek(Nanos(now), cost).unwrap(),
                            before.peek(Nanos(now), cost).unwrap()
                        );
                    }
                }
            }
            Op::Refund(i, units) => {
                if grants.is_empty() {
                    continue;
                }
                let g = i % grants.len();
                let units = (*units).min(grants[g].1);
                limiter.refund(Nanos(grants[g].0), units);
                grants[g].1 -= units;
                refunds.push((latest, units));
            }
        }
    }
    (grants, refunds)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 384,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/operations.txt"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn two_bandwidths_decide_like_the_naive_model(
        a in band(), b in band(), trace in trace(3_000, 80),
    ) {
        let mut bucket = TokenBucket::from_bandwidths([rule(a), rule(b)]).unwrap();
        let mut model = reference(&[a, b]);
        for &(now, cost) in &trace {
            let cost = cost.min(bucket.limit());
            let d = bucket.try_acquire(Nanos(now), cost).unwrap();
            prop_assert_eq!((d.allowed, d.remaining), model.acquire(now, cost));
            if !d.allowed {
                let at = now + d.retry_after.0;
                prop_assert!(bucket.clone().try_acquire(Nanos(at), cost).unwrap().allowed);
                prop_assert!(!bucket.clone().try_acquire(Nanos(at - 1), cost).unwrap().allowed);
            }
            let full = |t: u64| bucket.peek(Nanos(t), 0).unwrap().reset_after == Nanos::ZERO;
            prop_assert!(full(now + d.reset_after.0));
            prop_assert!(d.reset_after.0 == 0 || !full(now + d.reset_after.0 - 1));
        }
    }

    /// Acquires and bookings never exceed a bandwidth's bound
    /// `capacity + refill * (number of refills in [x, y])` over any span, plus
    /// the units refunded by then: a bucket has no history, so a returned
    /// token can be spent again, but nothing comes out of nothing.
    #[test]
    fn bucket_operations_never_create_permits(
        a in band(), trace in trace(2_000, 120), ops in ops(120),
    ) {
        let (c, r, p, interval, _) = a;
        let mut bucket = TokenBucket::from_bandwidths([rule((c, r, p, interval, c))]).unwrap();
        // Interval boundaries count from the first call: make that trace[0].
        let anchor = trace[0].0;
        let _ = bucket.try_acquire(Nanos(anchor), 0).unwrap();
        let (mut grants, refunds) = drive(&mut bucket, anchor, &trace, &ops);
        grants.sort();
        for (i, &(x, _)) in grants.iter().enumerate() {
            let mut sum = 0u128;
            for &(y, units) in &grants[i..] {
                sum += units as u128;
                let refilled = if interval {
                    ((y - anchor) / p - (x - anchor) / p) as u128 * r as u128
                } else {
                    r as u128 * (y - x) as u128 / p as u128
                };
                let refunded: u64 = refunds.iter().filter(|(t, _)| *t <= y).map(|(_, u)| u).sum();
                let bound = c as u128 + refilled + refunded as u128;
                prop_assert!(sum <= bound, "{} in [{}, {}], bound {}", sum, x, y, bound);
            }
        }
    }

    /// Acquires and bookings, less refunds, never put more than `limit` in any window.
    #[test]
    fn log_operations_never_create_permits(
        limit in 1u64..=6, window in 1u64..=3_000, trace in trace(800, 120), ops in ops(120),
    ) {
        let mut log = SlidingWindowLog::new(limit, Nanos(window)).unwrap();
        let (grants, _) = drive(&mut log, 0, &trace, &ops);
        for &(a, _) in &grants {
            let in_window: u64 = grants.iter().filter(|(t, _)| *t >= a && *t - a < window).map(|(_, u)| u).sum();
            prop_assert!(in_window <= limit, "{} units in [{}, {})", in_window, a, a + window);
        }
    }

    /// Reconfiguring carries state over by the documented rules: the bucket
    /// keeps its whole tokens, capped to the new capacity; the log keeps the
    /// events still in its old window and judges them by the new one.
    #[test]
    fn reconfiguring_carries_state_over_conservatively(
        a in band(), b in band(), trace in trace(2_000, 40), limits in (1u64..=6, 1u64..=6), windows in (1u64..=3_000, 1u64..=3_000),
    ) {
        let mut bucket = TokenBucket::from_bandwidths([rule(a)]).unwrap();
        let mut log = SlidingWindowLog::new(limits.0, Nanos(windows.0)).unwrap();
        let (mut latest, mut events) = (0, vec![]);
        for &(now, cost) in &trace {
            latest = latest.max(now);
            let _ = bucket.try_acquire(Nanos(now), cost.min(bucket.limit())).unwrap();
            if log.try_acquire(Nanos(now), cost.min(log.limit())).unwrap().allowed {
                events.push((latest, cost.min(limits.0)));
            }
        }
        let before = bucket.peek(Nanos(latest), 0).unwrap().remaining;
        bucket.reconfigure(Nanos(latest), TokenBucket::from_bandwidths([rule(b)]).unwrap());
        prop_assert_eq!(bucket.bandwidths()[0], rule(b));
        prop_assert_eq!(bucket.peek(Nanos(latest), 0).unwrap().remaining, before.min(b.0));

        let used: u64 = events
            .iter()
            .filter(|(t, _)| t + windows.0 > latest && t + windows.1 > latest)
            .map(|(_, c)| c)
            .sum();
        log.reconfigure(Nanos(latest), SlidingWindowLog::new(limits.1, Nanos(windows.1)).unwrap());
        prop_assert_eq!((log.limit(), log.window()), (limits.1, Nanos(windows.1)));
        prop_assert_eq!(log.peek(Nanos(latest), 0).unwrap().remaining, limits.1.saturating_sub(used));
    }
}

#[test]
fn interval_and_greedy_refill_are_both_available() {
    assert_eq!(
        Bandwidth::interval(1, 1, Nanos(1)).unwrap().refill(),
        Refill::Interval
    );
    assert_eq!(
        Bandwidth::greedy(1, 1, Nanos(1)).unwrap().refill(),
        Refill::Greedy
    );
}
