//! Property tests of `SlidingWindowCounter` against a plain list of events
//! and against the exact `SlidingWindowLog`.
#![cfg(feature = "alloc")]

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use ratekeeper::{Decision, Limiter, Nanos, SlidingWindowCounter, SlidingWindowLog};

/// Every admitted event at the time it was judged at, every booking at its
/// slot, forever; both window sums are recounted for every estimate.
#[derive(Clone)]
struct Model {
    limit: u64,
    window: u64,
    events: Vec<(u64, u64)>,
    latest: u64,
    /// The latest booked slot.
    floor: u64,
}

impl Model {
    fn new(limit: u64, window: u64) -> Self {
        Model {
            limit,
            window,
            events: vec![],
            latest: 0,
            floor: 0,
        }
    }

    fn sum(&self, k: u64) -> u64 {
        self.events
            .iter()
            .filter(|(t, _)| t / self.window == k)
            .map(|(_, c)| c)
            .sum()
    }

    fn at(&self) -> u64 {
        self.latest.max(self.floor)
    }

    /// prev * (window - e) / window + current + cost <= limit, as fractions
    /// over `window`.
    fn admits(&self, t: u64, cost: u64) -> bool {
        let (k, e, w) = (
            t / self.window,
            (t % self.window) as u128,
            self.window as u128,
        );
        let prev = if k == 0 { 0 } else { self.sum(k - 1) } as u128;
        prev * (w - e) + (self.sum(k) + cost) as u128 * w <= self.limit as u128 * w
    }

    /// The first instant from `at()` on at which `cost` is admitted (the
    /// estimate falls with time, so a binary search finds it).
    fn first(&self, cost: u64) -> u64 {
        let (mut lo, mut hi) = (self.at(), (self.at() / self.window + 2) * self.window);
        assert!(self.admits(hi, cost));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.admits(mid, cost) {
                hi = mid
            } else {
                lo = mid + 1
            }
        }
        lo
    }

    fn acquire(&mut self, now: u64, cost: u64) -> (Decision, u64) {
        self.latest = self.latest.max(now);
        let (at, open, fit) = (self.at(), self.latest >= self.floor, self.first(cost));
        let allowed = cost == 0 || (open && fit == at);
        if allowed && cost > 0 {
            self.events.push((at, cost));
        }
        let remaining = (0..=self.limit)
            .rev()
            .find(|&c| self.admits(at, c))
            .unwrap_or(0);
        let mut fresh = self.first(self.limit);
        if fresh == at {
            fresh = 0;
        }
        if !open {
            fresh = fresh.max(self.floor);
        }
        let d = Decision {
            allowed,
            remaining: if open { remaining } else { 0 },
            limit: self.limit,
            retry_after: Nanos(if allowed { 0 } else { fit - now }),
            reset_after: Nanos(fresh.saturating_sub(now)),
        };
        (d, fit)
    }

    fn reserve(&mut self, now: u64, cost: u64, max_wait: u64) -> Result<Nanos, Decision> {
        let mut tried = self.clone();
        let (d, fit) = tried.acquire(now, cost);
        if d.allowed {
            *self = tried;
            return Ok(Nanos(0));
        }
        self.latest = self.latest.max(now);
        if fit - now > max_wait {
            return Err(d);
        }
        self.events.push((fit, cost));
        self.floor = fit;
        Ok(Nanos(fit - now))
    }

    /// Removes up to `cost` units from the window of `taken_at`, if that is
    /// the window holding `at()` or the one before.
    fn refund(&mut self, taken_at: u64, mut cost: u64) {
        let (k, window) = (taken_at / self.window, self.window);
        if k != self.at() / window && k + 1 != self.at() / window {
            return;
        }
        for event in self.events.iter_mut().rev().filter(|e| e.0 / window == k) {
            let given = cost.min(event.1);
            event.1 -= given;
            cost -= given;
        }
    }
}

/// (time, cost) pairs.
type Events = Vec<(u64, u64)>;

#[derive(Clone, Copy, Debug)]
enum Op {
    Acquire,
    Peek,
    Reserve(u64),
    /// Refund at the time of a past event (chosen by the index) or at now.
    Refund(usize),
}

fn op(max_wait: u64, refunds: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => Just(Op::Acquire),
        1 => Just(Op::Peek),
        2 => (0..=max_wait).prop_map(Op::Reserve),
        refunds => any::<usize>().prop_map(Op::Refund),
    ]
}

/// Times that mostly move forward, sometimes stand still, sometimes go back,
/// each with an operation and a cost.
fn trace(
    max_step: u64,
    len: usize,
    ops: impl Strategy<Value = Op>,
) -> impl Strategy<Value = Vec<(u64, Op, u64)>> {
    let step = prop_oneof![6 => 0..=max_step as i64, 2 => Just(0i64), 1 => -(max_step as i64)..0];
    prop::collection::vec((step, ops, 0u64..=4), 1..len).prop_map(|steps| {
        let mut t = 1_000_000i64;
        steps
            .into_iter()
            .map(|(d, op, cost)| {
                t = (t + d).max(0);
                (t as u64, op, cost)
            })
            .collect()
    })
}

/// The most units any span of `window` can hold.
fn bound(limit: u64, window: u64) -> u64 {
    limit.max(2 * limit - (2 * limit).div_ceil(window))
}

/// The same cost is allowed at `now + retry_after` and denied 1 ns earlier;
/// the limiter is fresh at `now + reset_after` and not 1 ns earlier.
fn assert_exact(limiter: &SlidingWindowCounter, now: u64, cost: u64, d: &Decision) {
    let probe = |t: u64, c: u64| limiter.clone().try_acquire(Nanos(t), c).unwrap();
    if !d.allowed {
        assert!(
            probe(now + d.retry_after.0, cost).allowed,
            "not allowed at now + retry_after"
        );
        assert!(
            d.retry_after.0 == 0 || !probe(now + d.retry_after.0 - 1, cost).allowed,
            "allowed early"
        );
    }
    let fresh = |t: u64| probe(t, 0).remaining == limiter.limit();
    assert!(
        fresh(now + d.reset_after.0),
        "not fresh at now + reset_after"
    );
    assert!(
        d.reset_after.0 == 0 || !fresh(now + d.reset_after.0 - 1),
        "fresh early"
    );
}

/// Runs `steps`, returning the units admitted (at the time judged) or booked
/// (at their slot), and the refunds (at `taken_at`). Checks on the way that
/// no acquire is admitted before a booked slot, and calls `judge` with each
/// acquire's time, cost, and whether it was admitted, before recording it.
fn run(
    limiter: &mut SlidingWindowCounter,
    steps: &[(u64, Op, u64)],
    mut judge: impl FnMut(&[(u64, u64)], u64, u64, bool),
) -> (Events, Events) {
    let (mut taken, mut refunds, mut latest, mut floor) = (vec![], vec![], 0, 0);
    for &(now, op, cost) in steps {
        let cost = cost.min(limiter.limit());
        match op {
            Op::Peek => {
                let _ = limiter.peek(Nanos(now), cost).unwrap();
            }
            Op::Acquire => {
                latest = latest.max(now);
                let allowed = limiter.try_acquire(Nanos(now), cost).unwrap().allowed;
                if latest >= floor {
                    judge(&taken, latest, cost, allowed);
                }
                if allowed && cost > 0 {
                    assert!(latest >= floor, "an acquire jumped ahead of a booking");
                    taken.push((latest, cost));
                }
            }
            Op::Reserve(max_wait) => {
                latest = latest.max(now);
                if let Ok(wait) = limiter.reserve(Nanos(now), cost, Nanos(max_wait)).unwrap() {
                    // Admitted at once, it is judged at the latest time, as an acquire.
                    let slot = latest.max(now + wait.0);
                    taken.push((slot, cost));
                    floor = floor.max(slot);
                }
            }
            Op::Refund(i) => {
                let at = if taken.is_empty() {
                    now
                } else {
                    taken[i % taken.len()].0
                };
                limiter.refund(Nanos(at), cost);
                refunds.push((at, cost));
            }
        }
    }
    (taken, refunds)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/sliding_window_counter.txt"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn decides_like_the_list_of_events(
        limit in 1u64..=10,
        window in 1u64..=3_000,
        steps in trace(2_000, 80, op(8_000, 1)),
    ) {
        let mut limiter = SlidingWindowCounter::new(limit, Nanos(window)).unwrap();
        let mut model = Model::new(limit, window);
        for (now, op, cost) in steps {
            let cost = cost.min(limit);
            match op {
                Op::Peek => prop_assert_eq!(limiter.peek(Nanos(now), cost).unwrap(), model.clone().acquire(now, cost).0),
                Op::Acquire => {
                    let d = limiter.try_acquire(Nanos(now), cost).unwrap();
                    prop_assert_eq!(d, model.acquire(now, cost).0);
                    assert_exact(&limiter, now, cost, &d);
                }
                Op::Reserve(max_wait) => {
                    // max_wait is exact: the needed wait books, 1 ns less does not.
                    let wait = limiter.peek(Nanos(now), cost).unwrap().retry_after;
                    let mut exact = limiter.clone();
                    prop_assert_eq!(exact.reserve(Nanos(now), cost, wait).unwrap(), Ok(wait));
                    if wait > Nanos::ZERO {
                        let short = Nanos(wait.0 - 1);
                        prop_assert!(limiter.clone().reserve(Nanos(now), cost, short).unwrap().is_err());
                    }
                    prop_assert_eq!(
                        limiter.reserve(Nanos(now), cost, Nanos(max_wait)).unwrap(),
                        model.reserve(now, cost, max_wait)
                    );
                }
                Op::Refund(i) => {
                    let at = model.events.get(i % (model.events.len() + 1)).map_or(now, |e| e.0);
                    limiter.refund(Nanos(at), cost);
                    model.refund(at, cost);
                }
            }
        }
    }

    /// At most `limit` per aligned window and `bound(limit, window)` in any
    /// span of `window`, plus what was refunded in the windows concerned.
    #[test]
    fn never_more_than_the_bound_in_any_span(
        limit in 1u64..=10,
        window in 1u64..=2_000,
        steps in trace(700, 150, op(3_000, 1)),
    ) {
        let mut limiter = SlidingWindowCounter::new(limit, Nanos(window)).unwrap();
        let (taken, refunds) = run(&mut limiter, &steps, |_, _, _, _| {});
        let refunded = |k: u64| -> u64 { refunds.iter().filter(|(t, _)| t / window == k).map(|(_, c)| c).sum() };
        for &(a, _) in &taken {
            let k = a / window;
            let in_window: u64 = taken.iter().filter(|(t, _)| t / window == k).map(|(_, c)| c).sum();
            prop_assert!(in_window <= limit + refunded(k), "{} in window {}", in_window, k);
            let in_span: u64 = taken.iter().filter(|(t, _)| *t >= a && *t - a < window).map(|(_, c)| c).sum();
            let most = bound(limit, window) + refunded(k) + refunded(k + 1);
            prop_assert!(in_span <= most, "{} from {}, bound {}", in_span, a, most);
        }
    }

    /// Without refunds, the exact log with limit `bound(limit, window)`
    /// admits everything the counter admitted; and at each acquire, against
    /// the exact log of the same limit (its count of `(now - window, now]`,
    /// `prev` the previous window's units, `e` the offset into the window):
    /// admitted => count + cost <= limit + floor(prev * e / window);
    /// denied   => count + cost + ceil(prev * (window - e) / window) > limit.
    #[test]
    fn stays_within_its_error_against_the_exact_log(
        limit in 1u64..=10,
        window in 1u64..=2_000,
        steps in trace(700, 150, op(3_000, 0)),
    ) {
        let mut limiter = SlidingWindowCounter::new(limit, Nanos(window)).unwrap();
        let w = window as u128;
        let (taken, _) = run(&mut limiter, &steps, |taken, now, cost, allowed| {
            let mut log = SlidingWindowLog::new(2 * limit, Nanos(window)).unwrap();
            for &(t, c) in taken {
                assert!(log.try_acquire(Nanos(t), c).unwrap().allowed);
            }
            let count = 2 * limit - log.peek(Nanos(now), 0).unwrap().remaining;
            let (k, e) = (now / window, (now % window) as u128);
            let prev = taken.iter().filter(|(t, _)| k > 0 && t / window == k - 1).map(|(_, c)| c).sum::<u64>() as u128;
            let count = (count + cost) as u128;
            if allowed {
                assert!(count <= limit as u128 + prev * e / w, "admitted {count} at {now}");
            } else {
                assert!(count + (prev * (w - e)).div_ceil(w) > limit as u128, "denied {count} at {now}");
            }
        });
        let mut log = SlidingWindowLog::new(bound(limit, window), Nanos(window)).unwrap();
        for (t, c) in taken {
            prop_assert!(log.try_acquire(Nanos(t), c).unwrap().allowed, "{} at {}", c, t);
        }
    }

    /// A step back in time never grants more than standing still would.
    #[test]
    fn time_going_backwards_grants_nothing(
        limit in 1u64..=10,
        window in 1u64..=3_000,
        steps in trace(2_000, 40, op(5_000, 1)),
        back in 1u64..2_000_000,
        cost in 0u64..=10,
    ) {
        let mut limiter = SlidingWindowCounter::new(limit, Nanos(window)).unwrap();
        run(&mut limiter, &steps, |_, _, _, _| {});
        let latest = steps.iter().map(|s| s.0).max().unwrap();
        let _ = limiter.try_acquire(Nanos(latest), 0).unwrap(); // peeks saw it, the limiter did not
        let cost = cost.min(limit);
        let back = limiter.clone().try_acquire(Nanos(latest.saturating_sub(back)), cost).unwrap();
        let still = limiter.clone().try_acquire(Nanos(latest), cost).unwrap();
        prop_assert_eq!((back.allowed, back.remaining), (still.allowed, still.remaining));
    }

    /// The room left after a reconfigure is at most what either configuration leaves.
    #[test]
    fn reconfigure_never_grants_more_than_either(
        (limit, new_limit) in (1u64..=10, 1u64..=10),
        (window, new_window) in (1u64..=3_000, 1u64..=3_000),
        steps in trace(2_000, 40, op(5_000, 1)),
        later in 0u64..3_000,
    ) {
        let mut limiter = SlidingWindowCounter::new(limit, Nanos(window)).unwrap();
        run(&mut limiter, &steps, |_, _, _, _| {});
        let now = steps.iter().map(|s| s.0).max().unwrap() + later;
        let old = limiter.peek(Nanos(now), 0).unwrap().remaining;
        limiter.reconfigure(Nanos(now), SlidingWindowCounter::new(new_limit, Nanos(new_window)).unwrap());
        let room = limiter.peek(Nanos(now), 0).unwrap().remaining;
        prop_assert!(room <= old && room <= new_limit, "{} after {}", room, old);
    }

    /// No input, however extreme, panics.
    #[test]
    fn extreme_inputs_never_panic(
        limit in prop_oneof![Just(1u64), Just(u64::MAX), any::<u64>()],
        window in prop_oneof![Just(1u64), Just(u64::MAX), any::<u64>()],
        calls in prop::collection::vec((0u8..5, prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>()],
                                        prop_oneof![Just(0u64), Just(1u64), Just(u64::MAX), any::<u64>()]), 1..20),
    ) {
        let Ok(mut limiter) = SlidingWindowCounter::new(limit, Nanos(window)) else { return Ok(()) };
        for (kind, now, cost) in calls {
            match kind {
                0 => { let _ = limiter.try_acquire(Nanos(now), cost); }
                1 => { let _ = limiter.peek(Nanos(now), cost); }
                2 => { let _ = limiter.reserve(Nanos(now), cost, Nanos(cost)); }
                3 => limiter.refund(Nanos(now), cost),
                _ => limiter.reconfigure(Nanos(now), SlidingWindowCounter::new(cost.max(1), Nanos(now.max(1))).unwrap()),
            }
        }
    }
}

/// `limit` in the last ns of a window, then `limit - ceil(2 * limit / window)`
/// two ns before the next one ends: `bound` units in a span of `window`,
/// which fill the exact log of limit `bound`.
#[test]
fn the_span_bound_is_reached() {
    for (limit, window) in [(3, 3), (10, 1_000), (10, 7), (1_000, 1_000_000_000)] {
        let mut limiter = SlidingWindowCounter::new(limit, Nanos(window)).unwrap();
        let mut log = SlidingWindowLog::new(bound(limit, window), Nanos(window)).unwrap();
        let second = limit - (2 * limit).div_ceil(window);
        for (t, cost) in [(window - 1, limit), (2 * window - 2, second)] {
            assert!(limiter.try_acquire(Nanos(t), cost).unwrap().allowed);
            assert!(!limiter.peek(Nanos(t), 1).unwrap().allowed);
            assert!(log.try_acquire(Nanos(t), cost).unwrap().allowed);
        }
        assert_eq!(log.peek(Nanos(2 * window - 2), 0).unwrap().remaining, 0);
    }
}

/// Draining greedily at every window start admits `limit` every other
/// window (the previous window weighs fully at the start), exactly, over a
/// million windows.
#[test]
fn no_drift_over_a_million_windows() {
    for (limit, window) in [(7, 1_000_000_000u64), (3, 1_000)] {
        let mut limiter = SlidingWindowCounter::new(limit, Nanos(window)).unwrap();
        let mut admitted = 0u64;
        for k in 0..1_000_000u64 {
            let available = limiter.try_acquire(Nanos(k * window), 0).unwrap().remaining;
            assert!(
                limiter
                    .try_acquire(Nanos(k * window), available)
                    .unwrap()
                    .allowed
            );
            admitted += available;
        }
        assert_eq!(admitted, limit * 500_000);
    }
}
