//! Property tests of peek, reserve, refund and reconfigure, and of buckets with
//! several greedy and interval bandwidths, against naive models.

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use ratekeeper::{
    AnyLimiter, Bandwidth, FixedWindow, Limiter, Nanos, Refill, SlidingWindowCounter,
    SlidingWindowLog, TokenBucket,
};

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
    /// The refill from `from` to `to`, scaled: every boundary passed
    /// (interval), or the rate times the time (greedy).
    fn gained(&self, from: i128, to: i128) -> i128 {
        if self.interval {
            ((to - self.anchor) / self.period - (from - self.anchor) / self.period)
                * self.refill
                * self.period
        } else {
            self.refill * (to - from)
        }
    }

    fn advance(&mut self, from: i128, to: i128) {
        self.scaled = (self.scaled + self.gained(from, to)).min(self.capacity * self.period);
    }

    /// Whole tokens, rounded down (a debt of 1.5 is 2 owed).
    fn whole(&self) -> i128 {
        self.scaled.div_euclid(self.period)
    }
}

#[derive(Clone)]
struct RefBucket {
    bands: Vec<RefBand>,
    time: Option<i128>,
}

impl RefBucket {
    /// Moves the bucket to `now`, or stays at its own time if that is
    /// later; a bucket never called starts there. Returns that time.
    fn at(&mut self, now: u64) -> i128 {
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
        effective
    }

    /// Allowed and remaining for `cost` at `now`, consuming if allowed.
    fn acquire(&mut self, now: u64, cost: u64) -> (bool, u64) {
        self.at(now);
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

    /// Books `cost` at `now + wait` (at the bucket's own time, if that is
    /// later), if every band holds it there, counting the refill until then
    /// and its cap: each band then holds, now, its level at the slot less
    /// the cost, less the refill between now and the slot. Whether booked.
    fn book(&mut self, now: u64, wait: u64, cost: u64) -> bool {
        let at = self.at(now);
        if cost == 0 {
            return true;
        }
        let slot = (now as i128 + wait as i128).max(at);
        let cost = cost as i128;
        let at_slot: Vec<i128> = self
            .bands
            .iter()
            .map(|b| {
                let mut b = b.clone();
                b.advance(at, slot);
                b.scaled
            })
            .collect();
        if self
            .bands
            .iter()
            .zip(&at_slot)
            .any(|(b, &s)| s < cost * b.period)
        {
            return false;
        }
        for (b, s) in self.bands.iter_mut().zip(at_slot) {
            b.scaled = s - cost * b.period - b.gained(at, slot);
        }
        true
    }

    /// Gives back `cost` tokens, never above capacity; a bucket never
    /// called has taken nothing, and takes nothing back.
    fn refund(&mut self, cost: u64) {
        if self.time.is_none() {
            return;
        }
        for b in &mut self.bands {
            b.scaled = (b.scaled + cost as i128 * b.period).min(b.capacity * b.period);
        }
    }

    /// Takes the bands of `new` at `now`: whole tokens and debt carry over,
    /// capped at the new capacity, a partial token is dropped and the
    /// periods count from then. A bucket never called becomes `new`.
    fn reconfigure(&mut self, now: u64, new: &RefBucket) {
        if self.time.is_none() {
            *self = new.clone();
            return;
        }
        let at = self.at(now);
        for (b, n) in self.bands.iter_mut().zip(&new.bands) {
            let whole = b.whole().min(n.capacity);
            *b = RefBand {
                scaled: whole * n.period,
                anchor: at,
                ..n.clone()
            };
        }
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

/// What a model-checked bucket is asked at each step.
#[derive(Clone, Debug)]
enum Call {
    Acquire,
    /// `reserve` with this most wait.
    Reserve(u64),
    /// `reserve_after` this much after the earliest slot (before it, when
    /// negative).
    ReserveLater(i64),
    Refund,
    /// To the other configuration, or back.
    Reconfigure,
}

fn calls(len: usize) -> impl Strategy<Value = Vec<Call>> {
    let call = prop_oneof![
        4 => Just(Call::Acquire),
        3 => (0u64..5_000).prop_map(Call::Reserve),
        2 => (-1_000i64..2_000).prop_map(Call::ReserveLater),
        1 => Just(Call::Refund),
        1 => Just(Call::Reconfigure),
    ];
    prop::collection::vec(call, len)
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

    /// Bookings (at their own slot, later or earlier), refunds and
    /// reconfigures between acquires, against the same model: a band books
    /// as its level at the slot says, and every answer is the model's.
    #[test]
    fn bucket_operations_decide_like_the_naive_model(
        first in prop::collection::vec(band(), 1..=2),
        second in prop::collection::vec(band(), 2),
        trace in trace(3_000, 80),
        calls in calls(80),
    ) {
        // Two bandwidths, or one twice.
        let first = if first.len() == 1 { vec![first[0], first[0]] } else { first };
        let build = |b: &[(u64, u64, u64, bool, u64)]| {
            let bucket = TokenBucket::from_bandwidths([rule(b[0]), rule(b[1])]).unwrap();
            (bucket, reference(b))
        };
        let (mut bucket, mut model) = build(&first);
        let mut to_second = false;
        for (&(now, cost), call) in trace.iter().zip(&calls) {
            let cost = cost.min(bucket.limit());
            match *call {
                Call::Acquire => {
                    let d = bucket.try_acquire(Nanos(now), cost).unwrap();
                    let expected = model.acquire(now, cost);
                    prop_assert_eq!((d.allowed, d.remaining), expected, "{} at {}", cost, now);
                }
                Call::Reserve(max_wait) => {
                    let d = bucket.peek(Nanos(now), cost).unwrap();
                    let booked = bucket.reserve(Nanos(now), cost, Nanos(max_wait)).unwrap();
                    prop_assert_eq!(model.acquire(now, cost).0, d.allowed);
                    if d.allowed {
                        prop_assert_eq!(booked, Ok(Nanos::ZERO));
                    } else if d.retry_after.0 <= max_wait {
                        prop_assert!(model.book(now, d.retry_after.0, cost), "not at its own slot");
                        prop_assert_eq!(booked, Ok(d.retry_after));
                    } else {
                        prop_assert!(booked.is_err());
                    }
                }
                Call::ReserveLater(extra) => {
                    let own = bucket.peek(Nanos(now), cost).unwrap().retry_after.0;
                    let wait = own.saturating_add_signed(extra);
                    let booked = bucket.reserve_after(Nanos(now), cost, Nanos(wait)).unwrap();
                    let expected = model.book(now, wait, cost);
                    prop_assert_eq!(booked, expected, "{} {} after {}", cost, wait, now);
                }
                Call::Refund => {
                    bucket.refund(Nanos(now), cost);
                    model.refund(cost);
                }
                Call::Reconfigure => {
                    to_second = !to_second;
                    let (new, new_model) = build(if to_second { &second } else { &first });
                    bucket.reconfigure(Nanos(now), new);
                    model.reconfigure(now, &new_model);
                }
            }
            let d = bucket.peek(Nanos(now), 0).unwrap();
            let expected = model.clone().acquire(now, 0);
            prop_assert_eq!((d.allowed, d.remaining), expected, "after {:?} at {}", call, now);
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

/// A window algorithm books no slot past 2^64 - 1 ns, which its caller
/// could not add up: `now + wait` overflows.
#[test]
fn a_window_algorithms_slot_past_the_end_of_time_is_refused() {
    let near_end = Nanos(u64::MAX - 10);
    let limiters: [AnyLimiter; 3] = [
        SlidingWindowLog::new(2, Nanos(100)).unwrap().into(),
        FixedWindow::new(2, Nanos(100)).unwrap().into(),
        SlidingWindowCounter::new(2, Nanos(100)).unwrap().into(),
    ];
    for mut limiter in limiters {
        assert!(!limiter.reserve_after(near_end, 1, Nanos(11)).unwrap());
        assert!(limiter.reserve_after(near_end, 1, Nanos(10)).unwrap());
    }
}
