//! Every algorithm's answers stay exact after any mix of operations: plain
//! and lagging acquires, peeks, reservations (at their own slot, and later,
//! as a policy books), refunds, reconfigures and state round trips. After
//! every step, on copies: `remaining` can be taken at once and one more
//! cannot; `retry_after` is exact (allowed then, not 1 ns earlier);
//! `reset_after` is exact; `peek` is `try_acquire` without its effect; a
//! lagging `now` is answered as the latest time plus the lag; no acquire
//! jumps a booking. At the end, brute force over every span: the units
//! admitted stay within the algorithm's bound (plus the units refunded, for
//! a bucket, which keeps no history).

mod strategies;

use proptest::prelude::*;
use ratekeeper::guarantee::Guarantee;
use ratekeeper::{
    AnyLimiter, Bandwidth, FixedWindow, Gcra, LeakyBucket, Limiter, Nanos, Portable,
    SlidingWindowCounter, SlidingWindowLog,
};
use strategies::{band, calendar_limiter, extreme, extreme_limiter};

/// One step; times move by `scale` ns per unit of their step (which may be
/// negative: time going backwards).
#[derive(Clone, Debug)]
enum Op {
    Acquire(i64, u64),
    Peek(i64, u64),
    /// Step, cost, most wait.
    Reserve(i64, u64, u64),
    /// Booked with `reserve_after` this much later than its own slot.
    ReserveLater(i64, u64, u64),
    /// Gives back units of one admitted request, at the time it was counted
    /// (`true`) or at the caller's `now`.
    Refund(usize, u64, bool),
    Reconfigure(i64),
    RoundTrip,
}

fn op(refunds: bool) -> impl Strategy<Value = Op> {
    let step = prop_oneof![6 => 0i64..=6, 2 => Just(0i64), 1 => -6i64..0];
    prop_oneof![
        5 => (step.clone(), 0u64..=3).prop_map(|(d, c)| Op::Acquire(d, c)),
        1 => (step.clone(), 0u64..=3).prop_map(|(d, c)| Op::Peek(d, c)),
        3 => (step.clone(), 0u64..=3, 0u64..=60).prop_map(|(d, c, w)| Op::Reserve(d, c, w)),
        2 => (step.clone(), 1u64..=3, 0u64..=30).prop_map(|(d, c, w)| Op::ReserveLater(d, c, w)),
        if refunds { 2 } else { 0 } => (any::<usize>(), 1u64..=3, any::<bool>()).prop_map(|(i, u, e)| Op::Refund(i, u, e)),
        1 => step.prop_map(Op::Reconfigure),
        1 => Just(Op::RoundTrip),
    ]
}

fn ops(refunds: bool) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(refunds), 1..60)
}

fn small() -> impl Strategy<Value = (u64, u64)> {
    (1u64..=4, 1u64..=12)
}

fn limiter() -> impl Strategy<Value = AnyLimiter> {
    prop_oneof![
        prop::collection::vec(band(4, 3), 1..=3)
            .prop_map(|b| AnyLimiter::token_bucket(&b).unwrap()),
        small().prop_map(|(n, p)| Gcra::new(n, Nanos(p)).unwrap().into()),
        small().prop_map(|(n, p)| LeakyBucket::new(n, Nanos(p)).unwrap().into()),
        small().prop_map(|(n, p)| SlidingWindowLog::new(n, Nanos(p)).unwrap().into()),
        small().prop_map(|(n, p)| SlidingWindowCounter::new(n, Nanos(p)).unwrap().into()),
        small().prop_map(|(n, p)| FixedWindow::new(n, Nanos(p)).unwrap().into()),
    ]
}

/// Units admitted, counted at `at` (the latest time, or the slot); `caller`
/// is the time the caller gave (a refund may name either).
#[derive(Clone, Debug)]
struct Grant {
    at: u64,
    caller: u64,
    cost: u64,
}

/// The per-step claims (see the top), on copies of `l` at `now`; `latest`
/// is the latest time it has seen.
fn check_answers(l: &AnyLimiter, now: u64, latest: u64, trace: &str) -> Result<(), TestCaseError> {
    let limit = l.limit();
    let probe = l.peek(Nanos(now), 0).unwrap();
    let r = probe.remaining;
    if r > 0 {
        let d = l.clone().try_acquire(Nanos(now), r).unwrap();
        prop_assert!(
            d.allowed,
            "remaining {} at {}, yet denied: {:?}\n{}",
            r,
            now,
            d,
            trace
        );
    }
    if r < limit {
        let d = l.clone().try_acquire(Nanos(now), r + 1).unwrap();
        prop_assert!(
            !d.allowed,
            "remaining {} at {}, yet {} allowed\n{}",
            r,
            now,
            r + 1,
            trace
        );
    }
    let reset = probe.reset_after.0;
    if let Some(at) = now.checked_add(reset).filter(|_| reset != u64::MAX) {
        prop_assert_eq!(
            l.peek(Nanos(at), 0).unwrap().reset_after,
            Nanos::ZERO,
            "not fresh at {}\n{}",
            at,
            trace
        );
        if reset > 0 && at > latest {
            let before = l.peek(Nanos(at - 1), 0).unwrap();
            prop_assert!(
                before.reset_after > Nanos::ZERO,
                "fresh at {}, before reset_after\n{}",
                at - 1,
                trace
            );
        }
    }
    // Nothing is booked, at once or later, whatever is owed or booked, and
    // booking it does what acquiring it does: moves the clock, no more.
    let mut acquired = l.clone();
    let _ = acquired.try_acquire(Nanos(now), 0).unwrap();
    for wait in [0, 1] {
        let mut booked = l.clone();
        prop_assert!(
            booked.reserve_after(Nanos(now), 0, Nanos(wait)).unwrap(),
            "nothing not booked {} after {}\n{}",
            wait,
            now,
            trace
        );
        prop_assert_eq!(
            &booked,
            &acquired,
            "nothing booked {} after {}\n{}",
            wait,
            now,
            trace
        );
    }
    for cost in 1..=limit.min(3) {
        let d = l.peek(Nanos(now), cost).unwrap();
        prop_assert_eq!(
            d,
            l.clone().try_acquire(Nanos(now), cost).unwrap(),
            "peek of {} at {}\n{}",
            cost,
            now,
            trace
        );
        let retry = d.retry_after.0;
        if let Some(at) = now
            .checked_add(retry)
            .filter(|_| !d.allowed && retry != u64::MAX)
        {
            let then = l.clone().try_acquire(Nanos(at), cost).unwrap();
            prop_assert!(
                then.allowed,
                "{} denied at {} + retry_after {}: {:?}\n{}",
                cost,
                now,
                retry,
                then,
                trace
            );
            if retry > 0 {
                let early = l.clone().try_acquire(Nanos(at - 1), cost).unwrap();
                prop_assert!(
                    !early.allowed,
                    "{} allowed at {}, 1 ns before retry_after\n{}",
                    cost,
                    at - 1,
                    trace
                );
            }
        }
        if now < latest {
            let at_latest = l.peek(Nanos(latest), cost).unwrap();
            prop_assert_eq!(
                (d.allowed, d.remaining),
                (at_latest.allowed, at_latest.remaining),
                "lagging\n{}",
                trace
            );
            if !d.allowed {
                prop_assert_eq!(
                    retry,
                    at_latest.retry_after.0.saturating_add(latest - now),
                    "lagging retry\n{}",
                    trace
                );
            }
        }
    }
    Ok(())
}

/// The most units in any span `[s, s + w)` starting at an event.
fn most_in(events: &[(u64, u64)], w: u64) -> u128 {
    events
        .iter()
        .map(|&(s, _)| {
            let within = events.iter().filter(|&&(t, _)| t >= s && t - s < w);
            within.map(|&(_, c)| c as u128).sum::<u128>()
        })
        .max()
        .unwrap_or(0)
}

/// How a trace runs: its first time, ns per unit of step, another
/// configuration to reconfigure to and fro, and whether to check the bound.
#[derive(Clone, Debug)]
struct Setup {
    start: u64,
    scale: u64,
    other: Option<AnyLimiter>,
    bounds: bool,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            start: 1_000,
            scale: 1,
            other: None,
            bounds: true,
        }
    }
}

/// Records units admitted at `at`, counted at the later of it and `latest`
/// (a slot before the latest time books there); past 2^64 ns (`None`), the
/// bound is no longer checked.
fn record(
    grants: &mut Vec<Grant>,
    at: Option<u64>,
    latest: u64,
    caller: u64,
    cost: u64,
    bounds: &mut bool,
) {
    match at {
        Some(at) => grants.push(Grant {
            at: at.max(latest),
            caller,
            cost,
        }),
        None => *bounds = false,
    }
}

/// [`record`]s units booked at `slot`, which their caller names too.
fn booked_at(
    grants: &mut Vec<Grant>,
    slot: Option<u64>,
    latest: u64,
    cost: u64,
    bounds: &mut bool,
) {
    record(grants, slot, latest, slot.unwrap_or(u64::MAX), cost, bounds);
}

fn run(first: AnyLimiter, ops: Vec<Op>, setup: Setup) -> Result<(), TestCaseError> {
    let mut l = first.clone();
    let (mut now, mut latest) = (setup.start, 0u64);
    let mut bounds = setup.bounds;
    let mut to_other = false;
    let mut grants: Vec<Grant> = vec![];
    let mut refunded: u128 = 0;
    let mut trace = String::new();
    let scale = setup.scale as i128;
    let step = |now: &mut u64, d: i64| {
        *now = (*now as i128 + d as i128 * scale).clamp(0, u64::MAX as i128) as u64
    };
    for op in ops {
        trace.push_str(&format!("{op:?}\n"));
        match op {
            Op::Acquire(d, c) => {
                step(&mut now, d);
                let c = c.min(l.limit());
                let decision = l.try_acquire(Nanos(now), c).unwrap();
                latest = latest.max(now);
                trace.push_str(&format!("  at {now}: {decision:?}\n"));
                if decision.allowed && c > 0 {
                    record(&mut grants, Some(latest), latest, now, c, &mut bounds);
                }
            }
            Op::Peek(d, c) => {
                step(&mut now, d);
                let before = l.clone();
                let _ = l.peek(Nanos(now), c.min(l.limit())).unwrap();
                prop_assert_eq!(&before, &l);
            }
            Op::Reserve(d, c, most) => {
                step(&mut now, d);
                let c = c.min(l.limit());
                let most = most.saturating_mul(setup.scale);
                let booked = l.reserve(Nanos(now), c, Nanos(most)).unwrap();
                latest = latest.max(now);
                trace.push_str(&format!("  at {now}: {booked:?}\n"));
                let Ok(wait) = booked else { continue };
                prop_assert!(wait.0 <= most);
                if c == 0 {
                    continue;
                }
                let slot = now.checked_add(wait.0);
                // First come, first served: nothing goes before the slot.
                if let Some(slot) = slot.filter(|_| wait.0 < 200) {
                    for t in latest..slot {
                        for c2 in 1..=l.limit().min(3) {
                            let d = l.clone().try_acquire(Nanos(t), c2).unwrap();
                            prop_assert!(
                                !d.allowed,
                                "{} at {} went before a booking at {}\n{}",
                                c2,
                                t,
                                slot,
                                trace
                            );
                        }
                    }
                }
                booked_at(&mut grants, slot, latest, c, &mut bounds);
            }
            Op::ReserveLater(d, c, extra) => {
                step(&mut now, d);
                let c = c.min(l.limit());
                let own = l.peek(Nanos(now), c).unwrap().retry_after.0;
                let wait = own.saturating_add(extra.saturating_mul(setup.scale));
                let booked = l.reserve_after(Nanos(now), c, Nanos(wait)).unwrap();
                latest = latest.max(now);
                trace.push_str(&format!("  at {now}, {wait} later: {booked}\n"));
                if booked {
                    let slot = now.checked_add(wait);
                    booked_at(&mut grants, slot, latest, c, &mut bounds);
                }
            }
            Op::Refund(i, units, at_counted) => {
                if grants.is_empty() {
                    continue;
                }
                let count = grants.len();
                let g = &mut grants[i % count];
                let units = units.min(g.cost);
                if units == 0 {
                    continue;
                }
                let at = if at_counted { g.at } else { g.caller };
                trace.push_str(&format!("  refund {units} of {g:?} at {at}\n"));
                l.refund(Nanos(at), units);
                g.cost -= units;
                refunded += units as u128;
            }
            Op::Reconfigure(d) => {
                step(&mut now, d);
                let never_called = l == l.fresh();
                let target = match &setup.other {
                    Some(other) => {
                        // The bound is another one's now.
                        bounds = false;
                        to_other = !to_other;
                        if to_other {
                            other.fresh()
                        } else {
                            first.fresh()
                        }
                    }
                    None => l.fresh(),
                };
                l.reconfigure(Nanos(now), target).unwrap();
                // A bucket never called becomes the new one as built.
                if !(never_called && l.algorithm() == "token_bucket") {
                    latest = latest.max(now);
                }
            }
            Op::RoundTrip => {
                let mut restored = l.fresh();
                restored.restore(&l.to_bytes()).unwrap();
                prop_assert_eq!(&restored, &l);
                l = restored;
            }
        }
        check_answers(&l, now, latest, &trace)?;
    }
    if bounds {
        check_bounds(&first, &grants, refunded, &trace)?;
    }
    Ok(())
}

/// The units admitted stay within `limiter`'s bound in every span (a
/// bucket's plus what was refunded), within each aligned window for the
/// window algorithms, and a queue's units leave `interval` apart.
fn check_bounds(
    limiter: &AnyLimiter,
    grants: &[Grant],
    refunded: u128,
    trace: &str,
) -> Result<(), TestCaseError> {
    let mut events: Vec<(u64, u64)> = grants
        .iter()
        .filter(|g| g.cost > 0)
        .map(|g| (g.at, g.cost))
        .collect();
    events.sort();
    if let AnyLimiter::LeakyBucket(queue) = limiter {
        if refunded == 0 {
            for pair in events.windows(2) {
                let ((t0, c0), (t1, _)) = (pair[0], pair[1]);
                prop_assert!(
                    t1 >= t0 + c0 * queue.interval().0,
                    "closer than the interval: {:?}\n{}",
                    pair,
                    trace
                );
            }
        }
        return Ok(());
    }
    let slack = if matches!(limiter.algorithm(), "token_bucket" | "gcra") {
        refunded
    } else {
        0
    };
    let guarantee = Guarantee::of(limiter);
    for w in 1..=80u64 {
        let (most, bound) = (most_in(&events, w), guarantee.max_in_window(Nanos(w)));
        prop_assert!(
            most <= bound + slack,
            "{} units in {} ns, bound {} (+{} refunded)\n{:?}\n{}",
            most,
            w,
            bound,
            slack,
            events,
            trace
        );
    }
    let aligned = match limiter {
        AnyLimiter::FixedWindow(f) => Some(f.window().0),
        AnyLimiter::SlidingWindowCounter(c) => Some(c.window().0),
        _ => None,
    };
    if let Some(window) = aligned {
        let mut per = std::collections::BTreeMap::<u64, u64>::new();
        for &(t, c) in &events {
            *per.entry(t / window).or_default() += c;
        }
        for (k, units) in per {
            prop_assert!(
                units <= limiter.limit(),
                "{} units in window {}\n{}",
                units,
                k,
                trace
            );
        }
    }
    Ok(())
}

fn same_kind_pair() -> impl Strategy<Value = (AnyLimiter, AnyLimiter)> {
    fn pair<F: Fn(u64, u64) -> AnyLimiter>(
        f: F,
    ) -> impl Strategy<Value = (AnyLimiter, AnyLimiter)> {
        (small(), small()).prop_map(move |((a, b), (c, d))| (f(a, b), f(c, d)))
    }
    prop_oneof![
        (1usize..=3)
            .prop_flat_map(|n| (
                prop::collection::vec(band(4, 3), n),
                prop::collection::vec(band(4, 3), n)
            ))
            .prop_map(|(a, b)| (
                AnyLimiter::token_bucket(&a).unwrap(),
                AnyLimiter::token_bucket(&b).unwrap()
            )),
        pair(|n, p| Gcra::new(n, Nanos(p)).unwrap().into()),
        pair(|n, p| LeakyBucket::new(n, Nanos(p)).unwrap().into()),
        pair(|n, p| SlidingWindowLog::new(n, Nanos(p)).unwrap().into()),
        pair(|n, p| SlidingWindowCounter::new(n, Nanos(p)).unwrap().into()),
        pair(|n, p| FixedWindow::new(n, Nanos(p)).unwrap().into()),
    ]
}

/// Unix seconds of month starts and other edges for calendar traces.
const EDGES: &[u64] = &[
    1_709_251_200, // 2024-03-01
    1_706_745_600, // 2024-02-01
    1_704_067_200, // 2024-01-01
    1_735_689_600, // 2025-01-01
    951_782_400,   // 2000-02-29
    4_107_542_400, // 2100-03-01
    0,
];

proptest! {
    #[test]
    fn every_answer_is_exact_without_refunds(l in limiter(), ops in ops(false)) {
        run(l, ops, Setup::default())?;
    }

    #[test]
    fn every_answer_is_exact_with_refunds(l in limiter(), ops in ops(true)) {
        run(l, ops, Setup::default())?;
    }

    #[test]
    fn every_answer_is_exact_across_reconfigures(pair in same_kind_pair(), ops in ops(true)) {
        let (first, other) = pair;
        run(first, ops, Setup { other: Some(other), ..Setup::default() })?;
    }

    #[test]
    fn every_answer_is_exact_at_extremes(l in extreme_limiter(4, false), start in extreme(), scale in extreme(), ops in ops(true)) {
        run(l, ops, Setup { start, scale, other: None, bounds: false })?;
    }

    #[test]
    fn every_answer_is_exact_across_calendar_edges(
        l in calendar_limiter(1u64..=4),
        edge in prop::sample::select(EDGES.to_vec()),
        before in 0u64..=3_600,
        scale in prop::sample::select(vec![1u64, 1_000_000_000, 3_600_000_000_000, 86_400_000_000_000]),
        ops in ops(true),
    ) {
        let start = (edge * 1_000_000_000).saturating_sub(before * scale);
        run(l, ops, Setup { start, scale, other: None, bounds: false })?;
    }

    #[test]
    fn every_answer_is_exact_for_buckets_starting_short(
        bands in prop::collection::vec((band(4, 3), 0u64..=4), 1..=3),
        ops in ops(true),
    ) {
        let bands: Vec<Bandwidth> = bands.into_iter().map(|(b, i)| b.with_initial_tokens(i.min(b.capacity())).unwrap()).collect();
        // Called once first: a bucket starting short refills from its first call.
        let mut all = vec![Op::Acquire(0, 0)];
        all.extend(ops.into_iter().filter(|o| !matches!(o, Op::Reconfigure(_))));
        run(AnyLimiter::token_bucket(&bands).unwrap(), all, Setup::default())?;
    }
}
