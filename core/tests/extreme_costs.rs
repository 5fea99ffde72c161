//! Every algorithm near the ends of `u64`, with costs of any size up to the
//! limit and times anywhere (exactness.rs steps with costs of at most a few
//! units from one start): no operation panics (overflow checks are on in
//! tests); `peek` answers as `try_acquire`; time that goes backwards is
//! answered as the latest time seen, its waits `lag` longer (`reset_after`
//! too, unless the limiter is fresh then); and the answers stay exact:
//! `remaining` can be taken and one more cannot, and asking again
//! `retry_after` later succeeds where 1 ns earlier does not.

use proptest::prelude::*;
use ratekeeper::{AnyLimiter, Limiter, Nanos};

mod strategies;

use strategies::{extreme, extreme_limiter};

/// A cost, as a choice among the few at either end of `0..=limit` and any
/// in between.
#[derive(Clone, Copy, Debug)]
enum Cost {
    Low(u64),
    High(u64),
    Any(u64),
}

impl Cost {
    fn of(self, limit: u64) -> u64 {
        match self {
            Cost::Low(c) => c.min(limit),
            Cost::High(c) => limit - c.min(limit),
            Cost::Any(c) => c % limit.saturating_add(1).max(1),
        }
    }
}

fn cost() -> impl Strategy<Value = Cost> {
    prop_oneof![
        (0u64..=3).prop_map(Cost::Low),
        (0u64..=3).prop_map(Cost::High),
        any::<u64>().prop_map(Cost::Any),
    ]
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Acquire(u64, Cost),
    Reserve(u64, Cost, u64),
    Refund(u64, Cost),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (extreme(), cost()).prop_map(|(t, c)| Op::Acquire(t, c)),
        2 => (extreme(), cost(), extreme()).prop_map(|(t, c, w)| Op::Reserve(t, c, w)),
        1 => (extreme(), cost()).prop_map(|(t, c)| Op::Refund(t, c)),
    ]
}

/// The claims of the top at `now`, on copies of `l`, whose latest time seen
/// is `latest`.
fn check(l: &AnyLimiter, now: u64, latest: u64, cost: u64) -> Result<(), TestCaseError> {
    let d = l.peek(Nanos(now), cost).unwrap();
    prop_assert_eq!(l.clone().try_acquire(Nanos(now), cost).unwrap(), d);
    if now < latest {
        // Zero elapsed: the answer at the latest time, waits plus the lag.
        let at_latest = l.peek(Nanos(latest), cost).unwrap();
        let lag = latest - now;
        prop_assert_eq!(d.allowed, at_latest.allowed);
        prop_assert_eq!(d.remaining, at_latest.remaining);
        if d.allowed {
            prop_assert_eq!(d.retry_after, Nanos::ZERO);
        } else {
            prop_assert_eq!(
                d.retry_after,
                at_latest.retry_after.saturating_add(Nanos(lag))
            );
        }
        // Fresh at the latest time is fresh now; otherwise fresh at the same
        // instant, `lag` further away.
        let reset = match at_latest.reset_after {
            Nanos::ZERO => Nanos::ZERO,
            reset => reset.saturating_add(Nanos(lag)),
        };
        prop_assert_eq!(d.reset_after, reset);
    }
    // What is left before this request: it can be taken at once, one more cannot.
    let r = l.peek(Nanos(now), 0).unwrap().remaining;
    if r > 0 {
        prop_assert!(l.clone().try_acquire(Nanos(now), r).unwrap().allowed);
    }
    if r < l.limit() {
        prop_assert!(!l.clone().try_acquire(Nanos(now), r + 1).unwrap().allowed);
    }
    let retry = d.retry_after.0;
    if !d.allowed && retry > 0 && retry != u64::MAX {
        if let Some(at) = now.checked_add(retry) {
            prop_assert!(
                l.peek(Nanos(at), cost).unwrap().allowed,
                "denied {} at {}, not allowed {} later",
                cost,
                now,
                retry
            );
            prop_assert!(
                !l.peek(Nanos(at - 1), cost).unwrap().allowed,
                "denied {} at {}, allowed already 1 ns before {} later",
                cost,
                now,
                retry
            );
        }
    }
    Ok(())
}

proptest! {
    // Many extreme configurations overflow and are drawn again: room for them.
    #![proptest_config(ProptestConfig { cases: 4_096, max_local_rejects: 1 << 24, ..ProptestConfig::default() })]

    #[test]
    fn extreme_costs_and_times_stay_exact(l in extreme_limiter(8, true), ops in prop::collection::vec(op(), 1..24)) {
        let mut l = l;
        let mut latest = 0u64;
        for op in ops {
            let limit = l.limit();
            match op {
                Op::Acquire(now, c) => {
                    let cost = c.of(limit);
                    check(&l, now, latest, cost)?;
                    let _ = l.try_acquire(Nanos(now), cost).unwrap();
                    latest = latest.max(now);
                }
                Op::Reserve(now, c, wait) => {
                    let cost = c.of(limit);
                    check(&l, now, latest, cost)?;
                    let _ = l.reserve(Nanos(now), cost, Nanos(wait)).unwrap();
                    latest = latest.max(now);
                }
                Op::Refund(at, c) => l.refund(Nanos(at), c.of(limit)),
            }
        }
    }
}
