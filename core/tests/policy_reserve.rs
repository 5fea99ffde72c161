//! A policy's reservations against each limit's guarantee, counted at the
//! instants requests really proceed: every limit books a reservation at the
//! policy's one slot, so no limit admits more than its bound even when its
//! own slot came earlier.

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use ratekeeper::guarantee::Guarantee;
use ratekeeper::{
    AnyLimiter, Bandwidth, FixedWindow, Gcra, LeakyBucket, Limiter, Nanos, Policy,
    SlidingWindowCounter, SlidingWindowLog,
};

/// Any algorithm, with small numbers so that limits' slots differ often.
fn limit() -> impl Strategy<Value = AnyLimiter> {
    (0u8..6, 1u64..=4, 1u64..=12, any::<bool>()).prop_map(|(kind, n, period, interval)| {
        let p = Nanos(period);
        match kind {
            0 => SlidingWindowLog::new(n, p).unwrap().into(),
            1 => FixedWindow::new(n, p).unwrap().into(),
            2 => SlidingWindowCounter::new(n, p).unwrap().into(),
            3 => Gcra::new(n, p).unwrap().into(),
            4 => LeakyBucket::new(n, p).unwrap().into(),
            _ => {
                let band = if interval {
                    Bandwidth::interval(n, 1, p)
                } else {
                    Bandwidth::greedy(n, 1, p)
                };
                AnyLimiter::token_bucket(&[band.unwrap()]).unwrap()
            }
        }
    })
}

/// A step: time moves on by `dt`, then a reservation of `cost` waiting at
/// most `max_wait` (`None`: a `try_acquire`).
fn step() -> impl Strategy<Value = (u64, u64, Option<u64>)> {
    (0u64..=4, 1u64..=2, prop::option::of(0u64..=40))
}

/// Every answer `l` gives from `from` on, for every cost: how two limiters
/// are compared whose states may be spelled differently.
fn answers(l: &AnyLimiter, from: u64) -> Vec<ratekeeper::Decision> {
    (from..from + 80)
        .flat_map(|t| (0..=l.limit().min(4)).map(move |cost| l.peek(Nanos(t), cost).unwrap()))
        .collect()
}

/// The most units proceeding in any `[t, t + w)` of `events`, sorted by
/// instant.
fn most_in(events: &[(u64, u64)], w: u64) -> u128 {
    events
        .iter()
        .map(|&(start, _)| {
            events
                .iter()
                .filter(|&&(at, _)| at >= start && at - start < w)
                .map(|&(_, cost)| cost as u128)
                .sum::<u128>()
        })
        .max()
        .unwrap_or(0)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 400,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/policy_reserve.txt",
        ))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_limit_keeps_its_bound_where_requests_proceed(
        limits in prop::collection::vec(limit(), 2..=3),
        steps in prop::collection::vec(step(), 1..40),
    ) {
        let mut policy = Policy::new();
        for (i, l) in limits.iter().enumerate() {
            policy.add(&format!("l{i}"), &[], l.clone()).unwrap();
        }
        let smallest = limits.iter().map(|l| l.limit()).min().unwrap();
        let (mut now, mut events) = (1_000u64, Vec::new());
        for (dt, cost, max_wait) in steps {
            now += dt;
            let cost = cost.min(smallest);
            match max_wait {
                Some(max_wait) => {
                    if let Ok(wait) = policy.reserve(&[], Nanos(now), cost, Nanos(max_wait)).unwrap() {
                        prop_assert!(wait.0 <= max_wait);
                        events.push((now + wait.0, cost));
                    }
                }
                None => {
                    if policy.try_acquire(&[], Nanos(now), cost).unwrap().decision.allowed {
                        events.push((now, cost));
                    }
                }
            }
        }
        events.sort();
        for (i, l) in limits.iter().enumerate() {
            let g = Guarantee::of(l);
            for w in 1..=60 {
                let most = most_in(&events, w);
                prop_assert!(
                    most <= g.max_in_window(Nanos(w)),
                    "limit {} ({:?}) admits {} in {} ns where its bound is {}; events {:?}",
                    i, l, most, w, g.max_in_window(Nanos(w)), events
                );
            }
        }
    }

    /// A cancelled reservation gives back its booking in every limit: a
    /// policy of logs, whose refunds are exact, answers afterwards as if it
    /// had never been made. (Before, each log had booked its own slot, and
    /// a refund at the policy's slot missed every earlier one.)
    #[test]
    fn a_refund_at_the_slot_undoes_the_booking_everywhere(
        limits in prop::collection::vec((1u64..=4, 1u64..=12), 2..=3)
            .prop_map(|v| v.into_iter()
                .map(|(n, w)| AnyLimiter::from(SlidingWindowLog::new(n, Nanos(w)).unwrap()))
                .collect::<Vec<_>>()),
        before in prop::collection::vec(step(), 0..10),
        max_wait in 0u64..=40,
    ) {
        let mut policy = Policy::new();
        for (i, l) in limits.iter().enumerate() {
            policy.add(&format!("l{i}"), &[], l.clone()).unwrap();
        }
        let smallest = limits.iter().map(|l| l.limit()).min().unwrap();
        let mut now = 1_000u64;
        for (dt, cost, wait) in before {
            now += dt;
            let cost = cost.min(smallest);
            match wait {
                Some(w) => drop(policy.reserve(&[], Nanos(now), cost, Nanos(w)).unwrap()),
                None => drop(policy.try_acquire(&[], Nanos(now), cost).unwrap()),
            }
        }
        let mut untouched = policy.clone();
        if let Ok(wait) = policy.reserve(&[], Nanos(now), 1, Nanos(max_wait)).unwrap() {
            policy.refund(&[], Nanos(now + wait.0), 1).unwrap();
            // Both at the same time seen, then asked the same questions.
            let _ = untouched.peek(&[], Nanos(now), 0).unwrap();
            for t in now..now + 60 {
                for cost in 1..=smallest {
                    prop_assert_eq!(
                        policy.peek(&[], Nanos(t), cost).unwrap().decision.allowed,
                        untouched.peek(&[], Nanos(t), cost).unwrap().decision.allowed,
                        "at {} for {}", t, cost
                    );
                }
            }
        }
    }
    /// `reserve_after` the wait `reserve` gives books exactly what `reserve`
    /// books, and 1 ns sooner books nothing, for every algorithm.
    #[test]
    fn reserve_after_the_own_slot_books_as_reserve_does(
        l in limit(),
        before in prop::collection::vec(step(), 0..20),
        cost in 1u64..=2,
    ) {
        let mut l = l;
        let mut now = 1_000u64;
        for (dt, c, wait) in before {
            now += dt;
            let c = c.min(l.limit());
            match wait {
                Some(w) => drop(l.reserve(Nanos(now), c, Nanos(w)).unwrap()),
                None => drop(l.try_acquire(Nanos(now), c).unwrap()),
            }
        }
        let cost = cost.min(l.limit());
        let mut by_reserve = l.clone();
        if let Ok(wait) = by_reserve.reserve(Nanos(now), cost, Nanos(1_000)).unwrap() {
            let mut by_slot = l.clone();
            prop_assert!(by_slot.reserve_after(Nanos(now), cost, wait).unwrap());
            prop_assert_eq!(answers(&by_slot, now), answers(&by_reserve, now));
            if wait > Nanos::ZERO {
                let mut early = l.clone();
                prop_assert!(!early.reserve_after(Nanos(now), cost, Nanos(wait.0 - 1)).unwrap());
                prop_assert_eq!(answers(&early, now), answers(&l, now));
            }
        }
    }
}

/// `user`'s request of one unit at `now`.
fn acquire(policy: &mut Policy, user: &str, now: u64) -> ratekeeper::PolicyDecision {
    let request = [("user", user.as_bytes())];
    policy.try_acquire(&request, Nanos(now), 1).unwrap()
}

/// The documented hold: a request waiting on its own slow limit holds a
/// shared limit until its slot, for every key, and is served there.
#[test]
fn a_booking_holds_a_shared_limit_until_its_slot() {
    let mut policy = Policy::new();
    let global = Gcra::new(10, Nanos(100)).unwrap();
    policy.add("global", &[], global.into()).unwrap();
    let hourly = FixedWindow::new(1, Nanos(3_600)).unwrap();
    policy.add("per-user", &["user"], hourly.into()).unwrap();
    assert!(acquire(&mut policy, "a", 0).decision.allowed);
    let a = [("user", "a".as_bytes())];
    let wait = policy.reserve(&a, Nanos(1), 1, Nanos::MAX).unwrap();
    assert_eq!(wait, Ok(Nanos(3_599)));
    let b = acquire(&mut policy, "b", 2);
    assert_eq!((b.decision.allowed, b.denied_by), (false, Some(0)));
    // The GCRA's TAT is a's slot plus one interval, 3_700; its tolerance
    // is 1_000: b fits from 2_800 on, although the global limit had room.
    assert_eq!(b.decision.retry_after, Nanos(2_798));
    assert!(!acquire(&mut policy, "b", 2_799).decision.allowed);
    assert!(acquire(&mut policy, "b", 2_800).decision.allowed);
}

/// Which bookings a policy gives back exactly, for the bindings' waiters:
/// anywhere when every limit is a window, else only the latest (see
/// tests/moves_up.rs for who moves up).
#[test]
fn a_policy_gives_back_anywhere_only_when_its_limits_all_do() {
    let mut policy = Policy::new();
    assert!(policy.refunds_any_booking());
    let gcra = Gcra::new(1, Nanos(100)).unwrap();
    policy.add("gcra", &[], gcra.into()).unwrap();
    let leaky = LeakyBucket::new(2, Nanos(100)).unwrap();
    policy.add("leaky", &["user"], leaky.into()).unwrap();
    assert!(!policy.refunds_any_booking());
    let window = FixedWindow::new(1, Nanos(3_600)).unwrap();
    policy.add("window", &[], window.into()).unwrap();
    assert!(!policy.refunds_any_booking());
    let mut windows = Policy::new();
    let log = SlidingWindowLog::new(1, Nanos(100)).unwrap();
    windows.add("log", &["user"], log.into()).unwrap();
    assert!(windows.refunds_any_booking() && !windows.moves_up());
}
