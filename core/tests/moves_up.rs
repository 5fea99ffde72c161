//! Moving up, as the bindings' waiting acquires do when a waiter gives up
//! its place: the bookings after it are given back newest first, then its
//! own, and the waiters behind book again in order. Where
//! [`AnyLimiter::moves_up`] says so (a GCRA, a leaky bucket), each lands no
//! later than it was, nor is refused; where it does not (a token bucket, a
//! policy of several limits), one can land later, and the bindings move
//! nobody.

#![cfg(feature = "alloc")]

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use ratekeeper::{AnyLimiter, Bandwidth, Gcra, LeakyBucket, Limiter, Nanos, Policy, TokenBucket};

/// Books `costs` at `now` with no bound on the wait: each one's slot, or
/// `None` when one could not be booked (a leaky queue full).
fn book(limiter: &mut AnyLimiter, now: Nanos, costs: &[u64]) -> Option<Vec<Nanos>> {
    costs
        .iter()
        .map(|&cost| {
            limiter
                .reserve(now, cost, Nanos::MAX)
                .unwrap()
                .ok()
                .map(|wait| now + wait)
        })
        .collect()
}

/// The waiter `gone` of `slots` (booked with `costs`) gives up its place at
/// `now`: the slots the waiters behind it book again, or `None` for one
/// refused.
fn moved_up(
    limiter: &mut AnyLimiter,
    now: Nanos,
    costs: &[u64],
    slots: &[Nanos],
    gone: usize,
) -> Vec<Option<Nanos>> {
    for i in (gone..slots.len()).rev() {
        limiter.refund(slots[i], costs[i]);
    }
    costs[gone + 1..]
        .iter()
        .map(|&cost| {
            let booked = limiter.reserve(now, cost, Nanos::MAX).unwrap();
            booked.ok().map(|wait| now + wait)
        })
        .collect()
}

/// A GCRA or a leaky bucket, of small numbers.
fn mover() -> impl Strategy<Value = AnyLimiter> {
    prop_oneof![
        (1u64..=4, 1u64..=12).prop_map(|(burst, i)| Gcra::new(burst, Nanos(i)).unwrap().into()),
        (1u64..=4, 1u64..=12)
            .prop_map(|(capacity, i)| LeakyBucket::new(capacity, Nanos(i)).unwrap().into()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 3000,
        max_global_rejects: 1_000_000,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/moves_up.txt"))),
        ..ProptestConfig::default()
    })]

    /// Calls at `prefix` times, waiters booked at `at`, one of them gone
    /// before its slot: every waiter behind lands at its own slot or
    /// earlier, and none is refused.
    #[test]
    fn a_waiter_moved_up_lands_no_later_than_it_was(
        mut limiter in mover(),
        prefix in prop::collection::vec((0u64..20, 1u64..=3), 0..6),
        (at, later) in (0u64..25, 0u64..10),
        costs in prop::collection::vec(1u64..=2, 2..6),
        gone in any::<prop::sample::Index>(),
    ) {
        prop_assert!(limiter.moves_up());
        let mut now = Nanos(0);
        for (t, cost) in prefix {
            now = now.max(Nanos(t));
            let _ = limiter.try_acquire(now, cost.min(limiter.limit())).unwrap();
        }
        let now = now.max(Nanos(at));
        let costs: Vec<u64> = costs.into_iter().map(|c| c.min(limiter.limit())).collect();
        // A waiter refused at once never waits.
        let Some(slots) = book(&mut limiter, now, &costs) else {
            return Err(TestCaseError::reject("a queue full"));
        };
        let gone = gone.index(costs.len() - 1);
        // Waiting still: gone before its slot (a waiter due now waits not at all).
        prop_assume!(slots[gone] > now);
        let then = now + Nanos(later % (slots[gone] - now).0);
        let again = moved_up(&mut limiter, then, &costs, &slots, gone);
        for (was, is) in slots[gone + 1..].iter().zip(&again) {
            let is = is.unwrap_or_else(|| panic!("a waiter of {slots:?} refused, {gone} gone"));
            prop_assert!(is <= *was, "{slots:?}, {gone} gone at {then:?}: {again:?}");
        }
    }
}

/// A token bucket does not move up: a booking takes the refill up to its
/// slot, which its capacity clips, and gives back only its cost, so that a
/// waiter booked again can land a refill period later than it was (a bucket
/// of 3 emptied, refilled 3 a nanosecond: from 1 to 2 ns).
#[test]
fn a_token_bucket_would_move_a_waiter_later() {
    let mut limiter: AnyLimiter = TokenBucket::new(3, 3, Nanos(1)).unwrap().into();
    assert!(!limiter.moves_up());
    assert!(limiter.try_acquire(Nanos(0), 3).unwrap().allowed);
    let costs = [1, 1, 2, 2, 2];
    let slots = book(&mut limiter, Nanos(0), &costs).unwrap();
    assert_eq!(slots, [Nanos(1), Nanos(1), Nanos(2), Nanos(3), Nanos(4)]);
    let again = moved_up(&mut limiter, Nanos(0), &costs, &slots, 0);
    assert_eq!(
        again,
        [
            Some(Nanos(2)),
            Some(Nanos(2)),
            Some(Nanos(3)),
            Some(Nanos(4))
        ]
    );
}

/// Nor one of several bandwidths: the refill a smaller capacity clipped
/// until the slot is not given back either, and the waiter behind lands a
/// second later (scaled: 500 to 1,500 ns).
#[test]
fn a_bucket_of_two_bandwidths_would_move_a_waiter_later() {
    let bands = [
        Bandwidth::greedy(1, 1, Nanos(250)).unwrap(),
        Bandwidth::greedy(3, 1, Nanos(2_000)).unwrap(),
    ];
    let mut limiter: AnyLimiter = TokenBucket::from_bandwidths(bands).unwrap().into();
    assert!(!limiter.moves_up());
    assert!(limiter.try_acquire(Nanos(0), 1).unwrap().allowed);
    let costs = [1, 1, 1];
    let slots = book(&mut limiter, Nanos(0), &costs).unwrap();
    assert_eq!(slots, [Nanos(250), Nanos(500), Nanos(2_000)]);
    let again = moved_up(&mut limiter, Nanos(0), &costs, &slots, 0);
    assert_eq!(again, [Some(Nanos(1_500)), Some(Nanos(1_750))]);
}

/// A policy of several limits does not move up, buckets only or not: each
/// limit holds a booking until the slot of the slowest, which giving it back
/// does not undo. One limit moves up as its limiter does; none books nothing.
#[test]
fn a_policy_moves_up_with_one_limit_that_does() {
    let mut policy = Policy::new();
    assert!(!policy.moves_up());
    let gcra = Gcra::new(1, Nanos(100)).unwrap();
    policy.add("gcra", &["user"], gcra.into()).unwrap();
    assert!(policy.moves_up());
    let leaky = LeakyBucket::new(10, Nanos(25)).unwrap();
    policy.add("leaky", &[], leaky.into()).unwrap();
    assert!(!policy.moves_up());
    let bands = [
        Bandwidth::greedy(1, 1, Nanos(250)).unwrap(),
        Bandwidth::greedy(3, 1, Nanos(2_000)).unwrap(),
    ];
    let mut two = Policy::new();
    two.add(
        "bands",
        &[],
        TokenBucket::from_bandwidths(bands).unwrap().into(),
    )
    .unwrap();
    assert!(!two.moves_up());
}
