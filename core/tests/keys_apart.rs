//! Keys apart: a call for one request changes the state of the keys
//! [`Policy::each_key`] names for it, and no other. The bindings rely on it
//! when a waiter gives its booking back: a booking, reset or refund of
//! another request since counts against it only when the two share a key
//! (a key of a `KeyedLimiter` is a policy of one limit keyed by one field).
//! So each request here leaves another's answers, in every limit, exactly
//! as they were when their keys are apart.

#![cfg(feature = "alloc")]

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use ratekeeper::{
    AnyLimiter, Bandwidth, FixedWindow, Gcra, LeakyBucket, Nanos, Policy, SlidingWindowCounter,
    SlidingWindowLog,
};

/// Any algorithm, with small numbers so that calls change states often.
fn limiter() -> impl Strategy<Value = AnyLimiter> {
    (0u8..7, 1u64..=3, 1u64..=12).prop_map(|(kind, n, period)| {
        let p = Nanos(period);
        match kind {
            0 => SlidingWindowLog::new(n, p).unwrap().into(),
            1 => FixedWindow::new(n, p).unwrap().into(),
            2 => SlidingWindowCounter::new(n, p).unwrap().into(),
            3 => Gcra::new(n, p).unwrap().into(),
            4 => LeakyBucket::new(n, p).unwrap().into(),
            5 => AnyLimiter::token_bucket(&[Bandwidth::greedy(n, 1, p).unwrap()]).unwrap(),
            _ => AnyLimiter::token_bucket(&[
                Bandwidth::interval(n, 1, p).unwrap(),
                Bandwidth::greedy(n + 1, 1, Nanos(period * 3)).unwrap(),
            ])
            .unwrap(),
        }
    })
}

/// The fields a limit may be keyed by: none (global), `u`, `v`, or both in
/// either order.
const KEYINGS: [&[&str]; 5] = [&[], &["u"], &["v"], &["u", "v"], &["v", "u"]];

/// A request's values of `u` and `v`, from a small alphabet so that
/// requests share keys often; `None`: the field is left out (a reset's
/// request only).
type Values = (Option<u8>, Option<u8>);

fn request(values: &Values) -> Vec<(&'static str, Vec<u8>)> {
    let mut fields = Vec::new();
    if let Some(u) = values.0 {
        fields.push(("u", vec![b'a' + u]));
    }
    if let Some(v) = values.1 {
        fields.push(("v", vec![b'a' + v]));
    }
    fields
}

fn as_fields<'a>(request: &'a [(&'static str, Vec<u8>)]) -> Vec<(&'static str, &'a [u8])> {
    request.iter().map(|(f, v)| (*f, v.as_slice())).collect()
}

/// What another request does: `(kind, values, dt, cost)`; kind 0 a
/// `try_acquire`, 1 a `reserve` without bound, 2 a refund of the latest
/// slot booked (or of `now`), 3 a reset (whose request may lack fields).
fn call() -> impl Strategy<Value = (u8, Values, u64, u64)> {
    (
        0u8..4,
        (prop::option::of(0u8..3), prop::option::of(0u8..3)),
        0u64..=3,
        0u64..=2,
    )
}

/// The keys `request` reaches in `policy`: every limit's for a call that
/// consumes, books or refunds; only the limits keyed by fields for a reset.
fn keys(policy: &Policy, request: &[(&str, &[u8])], reset: bool) -> Vec<(usize, Vec<u8>)> {
    let mut keys = Vec::new();
    let listed = policy.each_key(request, policy.len(), |i, key| {
        if !reset || policy.keyed_by(i).next().is_some() {
            keys.push((i, key.to_vec()));
        }
    });
    listed.unwrap();
    keys
}

/// Every limit's own answer to `request` at `now`, for each cost up to 3.
fn answers(
    policy: &mut Policy,
    request: &[(&str, &[u8])],
    now: Nanos,
) -> Vec<ratekeeper::Decision> {
    let mut all = Vec::new();
    for cost in 0..=3 {
        // A cost above a limit is refused as an error, the same each time.
        if policy.peek(request, now, cost).is_ok() {
            all.extend_from_slice(policy.decisions());
        }
    }
    all
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 500,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/keys_apart.txt",
        ))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_call_leaves_every_key_it_does_not_reach_as_it_was(
        limits in prop::collection::vec((limiter(), 0usize..5), 1..=3),
        mine in (0u8..3, 0u8..3),
        before in prop::collection::vec((0u64..=3, 0u64..=2, any::<bool>()), 0..6),
        calls in prop::collection::vec(call(), 1..30),
    ) {
        let mut policy = Policy::new();
        for (i, (limiter, keying)) in limits.into_iter().enumerate() {
            policy.add(&format!("l{i}"), KEYINGS[keying], limiter).unwrap();
        }
        let mine = request(&(Some(mine.0), Some(mine.1)));
        let mine = as_fields(&mine);
        let my_keys = keys(&policy, &mine, false);
        // The request's own state: some units taken, some booked ahead.
        let mut now = 0u64;
        for (dt, cost, book) in before {
            now += dt;
            if book {
                let _ = policy.reserve(&mine, Nanos(now), cost, Nanos::MAX);
            } else {
                let _ = policy.try_acquire(&mine, Nanos(now), cost);
            }
        }
        // Asked after every call below, whose times are all before it.
        let then = Nanos(now + 4 * 30);
        let expected = answers(&mut policy, &mine, then);
        let mut latest = None;
        for (kind, values, dt, cost) in calls {
            now += dt;
            let reset = kind == 3;
            let other = request(&if reset { values } else { (Some(values.0.unwrap_or(0)), Some(values.1.unwrap_or(0))) });
            let other = as_fields(&other);
            let reached = keys(&policy, &other, reset);
            // Apart: no key in common (a reset of a request reaching no
            // keyed limit is refused, and changes nothing).
            if reached.iter().any(|key| my_keys.contains(key)) {
                continue;
            }
            let at = Nanos(now);
            match kind {
                // A cost above a limit fails, changing nothing.
                0 => { let _ = policy.try_acquire(&other, at, cost); }
                1 => {
                    if let Ok(Ok(wait)) = policy.reserve(&other, at, cost, Nanos::MAX) {
                        latest = Some(at + wait);
                    }
                }
                2 => policy.refund(&other, latest.unwrap_or(at), cost).unwrap(),
                _ => { let _ = policy.reset(&other); }
            }
        }
        prop_assert_eq!(answers(&mut policy, &mine, then), expected);
    }
}
