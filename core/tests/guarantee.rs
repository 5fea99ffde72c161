//! The guarantees of `ratekeeper::guarantee` against brute force: the real
//! limiters driven by a greedy client, from the worst state and from every
//! start offset relative to the limiter's boundaries, on every nanosecond of
//! the window. The computed most-in-window must equal the worst case found:
//! safe (never exceeded) and attained.

mod strategies;

use proptest::prelude::*;
use ratekeeper::guarantee::Guarantee;
use ratekeeper::{
    AnyLimiter, Bandwidth, Calendar, FixedWindow, Gcra, LeakyBucket, Limiter, Nanos, Policy,
    SlidingWindowCounter, SlidingWindowLog, TokenBucket,
};
use strategies::band;

/// Far enough from zero that every offset below lies inside one window.
const BASE: u64 = 10_000;

/// Units a greedy client gets in `[from, from + window)`: at every ns, as
/// many single units as the limiter admits.
fn greedy(limiter: &mut AnyLimiter, from: u64, window: u64) -> u128 {
    let mut admitted = 0;
    for t in from..from + window {
        while limiter.try_acquire(Nanos(t), 1).unwrap().allowed {
            admitted += 1;
        }
    }
    admitted
}

/// The worst case of a bucket: a fresh bucket first called at `BASE`, the
/// window starting `offset` ns later (the phase of interval refill), for
/// every offset below `phases`.
fn worst_bucket(limiter: &AnyLimiter, phases: u64, window: u64) -> u128 {
    (0..phases.max(1))
        .map(|offset| {
            let mut l = limiter.clone();
            let _ = l.try_acquire(Nanos(BASE), 0).unwrap();
            greedy(&mut l, BASE + offset, window)
        })
        .max()
        .unwrap()
}

/// The worst case of a window algorithm: a fresh limiter (an empty previous
/// window), the window starting at every offset into an aligned window.
fn worst_window(limiter: &AnyLimiter, period: u64, window: u64) -> u128 {
    (0..period)
        .map(|offset| greedy(&mut limiter.clone(), BASE * period + offset, window))
        .max()
        .unwrap()
}

fn longest_period(bands: &[Bandwidth]) -> u64 {
    bands.iter().map(|b| b.refill_period().0).max().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn token_bucket_one_bandwidth(rule in band(6, 7), window in 0u64..60) {
        let limiter = AnyLimiter::token_bucket(&[rule]).unwrap();
        let g = Guarantee::of(&limiter);
        let worst = worst_bucket(&limiter, rule.refill_period().0, window);
        prop_assert_eq!(g.max_in_window(Nanos(window)), worst, "{:?}", rule);
        prop_assert_eq!(g.burst(), rule.capacity() as u128);
        // So it says: one bandwidth is exact, of either refill.
        prop_assert!(g.is_exact());
    }

    #[test]
    fn token_bucket_greedy_bandwidths_combine_exactly(
        rules in prop::collection::vec(band(6, 7), 2..=3),
        window in 0u64..60,
    ) {
        let rules: Vec<Bandwidth> = rules
            .iter()
            .map(|r| Bandwidth::greedy(r.capacity(), r.refill_tokens(), r.refill_period()).unwrap())
            .collect();
        let limiter = AnyLimiter::token_bucket(&rules).unwrap();
        let g = Guarantee::of(&limiter);
        let worst = worst_bucket(&limiter, 1, window);
        prop_assert_eq!(g.max_in_window(Nanos(window)), worst, "{:?}", rules);
    }

    #[test]
    fn token_bucket_mixed_bandwidths_are_bounded(
        rules in prop::collection::vec(band(6, 7), 2..=3),
        window in 0u64..60,
    ) {
        let limiter = AnyLimiter::token_bucket(&rules).unwrap();
        let g = Guarantee::of(&limiter);
        let worst = worst_bucket(&limiter, longest_period(&rules), window);
        if g.is_exact() {
            prop_assert_eq!(g.max_in_window(Nanos(window)), worst, "{:?}", rules);
        } else {
            prop_assert!(worst <= g.max_in_window(Nanos(window)), "{:?}", rules);
        }
    }

    #[test]
    fn gcra(burst in 1u64..=8, interval in 1u64..=10, window in 0u64..60) {
        let limiter = AnyLimiter::from(Gcra::new(burst, Nanos(interval)).unwrap());
        let g = Guarantee::of(&limiter);
        prop_assert_eq!(g.max_in_window(Nanos(window)), worst_bucket(&limiter, 1, window));
    }

    #[test]
    fn leaky_bucket(capacity in 1u64..=6, interval in 1u64..=8, window in 0u64..50) {
        let limiter = AnyLimiter::from(LeakyBucket::new(capacity, Nanos(interval)).unwrap());
        let g = Guarantee::of(&limiter);
        // The best client takes single units while another admission can
        // follow in the window, and the whole queue at its last chance.
        let mut l = limiter.clone();
        let (mut admitted, end) = (0u128, BASE + window);
        for t in BASE..end {
            if l.peek(Nanos(t), 1).unwrap().allowed {
                let cost = if t + interval < end { 1 } else { capacity };
                prop_assert!(l.try_acquire(Nanos(t), cost).unwrap().allowed);
                admitted += cost as u128;
            }
        }
        prop_assert_eq!(g.max_in_window(Nanos(window)), admitted);
    }

    #[test]
    fn sliding_window_log(limit in 1u64..=6, period in 1u64..=15, window in 0u64..60) {
        let limiter = AnyLimiter::from(SlidingWindowLog::new(limit, Nanos(period)).unwrap());
        let g = Guarantee::of(&limiter);
        prop_assert_eq!(g.max_in_window(Nanos(window)), worst_bucket(&limiter, 1, window));
        prop_assert_eq!(g.excess(), 0);
    }

    #[test]
    fn sliding_window_counter(limit in 1u64..=8, period in 1u64..=12, window in 0u64..60) {
        let limiter = AnyLimiter::from(SlidingWindowCounter::new(limit, Nanos(period)).unwrap());
        let g = Guarantee::of(&limiter);
        prop_assert_eq!(g.max_in_window(Nanos(window)), worst_window(&limiter, period, window));
    }

    #[test]
    fn fixed_window(limit in 1u64..=6, period in 1u64..=12, window in 0u64..60) {
        let limiter = AnyLimiter::from(FixedWindow::new(limit, Nanos(period)).unwrap());
        let g = Guarantee::of(&limiter);
        prop_assert_eq!(g.max_in_window(Nanos(window)), worst_window(&limiter, period, window));
        // A window of 1 ns cannot straddle a boundary.
        let excess = if period >= 2 { limit as u128 } else { 0 };
        prop_assert_eq!(g.excess(), excess);
    }

    /// A policy of greedy buckets and GCRAs is exactly the tightest of them;
    /// any other mix is at most that.
    #[test]
    fn policy_combines(
        rules in prop::collection::vec(band(6, 7), 1..=2),
        gcra in prop::option::of((1u64..=5, 1u64..=8)),
        window_limit in prop::option::of((1u64..=5, 1u64..=10, 0u8..3)),
        window in 0u64..50,
    ) {
        let mut policy = Policy::new();
        for (i, rule) in rules.iter().enumerate() {
            let bucket = AnyLimiter::token_bucket(&[*rule]).unwrap();
            policy.add(&format!("bucket-{i}"), &[], bucket).unwrap();
        }
        if let Some((burst, interval)) = gcra {
            policy.add("gcra", &[], Gcra::new(burst, Nanos(interval)).unwrap().into()).unwrap();
        }
        let mut phases = longest_period(&rules);
        if let Some((limit, period, kind)) = window_limit {
            let l: AnyLimiter = match kind {
                0 => FixedWindow::new(limit, Nanos(period)).unwrap().into(),
                1 => SlidingWindowCounter::new(limit, Nanos(period)).unwrap().into(),
                _ => SlidingWindowLog::new(limit, Nanos(period)).unwrap().into(),
            };
            policy.add("window", &[], l).unwrap();
            phases = phases.max(period);
        }
        let g = policy.guarantees();
        let worst = (0..phases)
            .map(|offset| {
                // One unit, long before, sets every interval refill's phase
                // (a keyed store keeps no fresh key, so a cost of 0 would
                // not); by the window every limit is full again.
                let mut p = policy.clone();
                let _ = p.try_acquire(&[], Nanos(BASE * 12 - 27_720), 1).unwrap();
                let mut admitted = 0u128;
                for t in BASE * 12 + offset..BASE * 12 + offset + window {
                    while p.try_acquire(&[], Nanos(t), 1).unwrap().decision.allowed {
                        admitted += 1;
                    }
                }
                admitted
            })
            .max()
            .unwrap();
        let bound = g.max_in_window(Nanos(window));
        if g.is_exact() {
            prop_assert_eq!(bound, worst);
        } else {
            prop_assert!(worst <= bound);
        }
    }

    /// Every figure answers for any configuration and window, without a
    /// panic, and the sustained rate is the long-run slope.
    #[test]
    fn any_configuration_answers(
        a in 1u64.., b in 1u64.., c in 1u64.., kind in 0u8..7, window in any::<u64>(),
    ) {
        let limiter: Option<AnyLimiter> = match kind {
            0 => TokenBucket::new(a, b, Nanos(c)).ok().map(Into::into),
            1 => Bandwidth::interval(a, b, Nanos(c)).ok().map(|r| AnyLimiter::token_bucket(&[r]).unwrap()),
            2 => Gcra::new(a, Nanos(c)).ok().map(Into::into),
            3 => LeakyBucket::new(a, Nanos(c)).ok().map(Into::into),
            4 => SlidingWindowLog::new(a % (1 << 20) + 1, Nanos(c)).ok().map(Into::into),
            5 => SlidingWindowCounter::new(a, Nanos(c)).ok().map(Into::into),
            _ => FixedWindow::new(a, Nanos(c)).ok().map(Into::into),
        };
        if let Some(limiter) = limiter {
            let g = Guarantee::of(&limiter);
            let _ = (g.max_in_window(Nanos(window)), g.burst(), g.lockout(), g.excess());
            let rate = g.sustained();
            prop_assert!(rate.per >= 1);
            if let Ok(per) = u64::try_from(rate.per) {
                // Past the first windows, each further period adds exactly
                // the sustained units.
                let periods = |n: u64| per.checked_mul(n);
                if let (Some(w1), Some(w2)) = (periods(200), periods(201)) {
                    let step = g.max_in_window(Nanos(w2)) - g.max_in_window(Nanos(w1));
                    prop_assert_eq!(step, rate.units);
                }
            }
        }
    }
}

#[test]
fn calendar_days_and_weeks_are_fixed_lengths() {
    const DAY: u64 = 86_400_000_000_000;
    for (calendar, length) in [(Calendar::Day, DAY), (Calendar::Week, 7 * DAY)] {
        let fixed = Guarantee::of(&FixedWindow::with_calendar(5, calendar).unwrap().into());
        let plain = Guarantee::of(&FixedWindow::new(5, Nanos(length)).unwrap().into());
        let counter = Guarantee::of(
            &SlidingWindowCounter::with_calendar(5, calendar)
                .unwrap()
                .into(),
        );
        let plain_counter =
            Guarantee::of(&SlidingWindowCounter::new(5, Nanos(length)).unwrap().into());
        for w in [1, DAY, DAY + 1, 7 * DAY, 30 * DAY, 400 * DAY] {
            assert_eq!(fixed.max_in_window(Nanos(w)), plain.max_in_window(Nanos(w)));
            assert_eq!(
                counter.max_in_window(Nanos(w)),
                plain_counter.max_in_window(Nanos(w))
            );
        }
        assert!(fixed.is_exact() && counter.is_exact());
        assert_eq!(fixed.lockout(), plain.lockout());
        assert_eq!(fixed.lockout().retry_after, Nanos(length));
    }
    let month = Guarantee::of(
        &FixedWindow::with_calendar(5, Calendar::Month)
            .unwrap()
            .into(),
    );
    assert!(month.is_exact());
    // January's last ns, then all of February and into March.
    assert_eq!(month.max_in_window(Nanos(28 * DAY + 1)), 10);
    assert_eq!(month.max_in_window(Nanos(28 * DAY + 2)), 15);
    assert_eq!(month.lockout().retry_after, Nanos(31 * DAY));
    let counter = Guarantee::of(
        &SlidingWindowCounter::with_calendar(5, Calendar::Month)
            .unwrap()
            .into(),
    );
    assert!(!counter.is_exact());
}

/// A greedy client of a calendar-month fixed window, driven by the limiter's
/// own answers: at each instant it takes all it can, then asks again exactly
/// `retry_after` later (the start of the next month).
fn greedy_months(limit: u64, from: u64, window: u64) -> u128 {
    let mut limiter = FixedWindow::with_calendar(limit, Calendar::Month).unwrap();
    let (mut t, end, mut admitted) = (from, from + window - 1, 0u128);
    loop {
        let d = limiter.try_acquire(Nanos(t), limit).unwrap();
        if d.allowed {
            admitted += limit as u128;
            continue;
        }
        match t.checked_add(d.retry_after.0) {
            Some(next) if next <= end => t = next,
            _ => return admitted,
        }
    }
}

/// Every month start from 1970 to 2554, found by asking a limiter when its
/// next window opens.
fn month_starts() -> Vec<u64> {
    let mut probe = FixedWindow::with_calendar(1, Calendar::Month).unwrap();
    let (mut t, mut starts) = (0u64, Vec::new());
    loop {
        let _ = probe.try_acquire(Nanos(t), 1).unwrap();
        match t.checked_add(probe.peek(Nanos(t), 1).unwrap().retry_after.0) {
            Some(next) => {
                starts.push(next);
                t = next;
            }
            None => return starts,
        }
    }
}

#[test]
fn calendar_months_against_every_month_start() {
    const DAY: u64 = 86_400_000_000_000;
    let g = Guarantee::of(
        &FixedWindow::with_calendar(3, Calendar::Month)
            .unwrap()
            .into(),
    );
    // The window starts 1 ns before a month (the worst offset) or at it, at
    // every month start, so that 2100, 2200, 2300 and 2500, which are not
    // leap years, are met.
    let starts = month_starts();
    assert!(starts.len() > 7_000);
    for days in [
        0, 1, 27, 28, 29, 30, 31, 59, 60, 61, 62, 89, 90, 365, 366, 1_460, 1_461, 1_462,
    ] {
        for w in [days * DAY, days * DAY + 1, days * DAY + 2] {
            if w == 0 {
                continue;
            }
            let worst = starts
                .iter()
                .flat_map(|&b| [b - 1, b])
                .filter(|&s| s.checked_add(w).is_some())
                .map(|s| greedy_months(3, s, w))
                .max()
                .unwrap();
            assert_eq!(g.max_in_window(Nanos(w)), worst, "window of {w} ns");
        }
    }
}

#[test]
fn lockout_waits_are_the_limiters_own() {
    let g = |l: AnyLimiter| Guarantee::of(&l).lockout();
    let s = Nanos::from_secs;
    let tb = g(TokenBucket::new(10, 10, s(1)).unwrap().into());
    assert_eq!(
        (tb.retry_after, tb.reset_after),
        (Nanos::from_millis(100), s(1))
    );
    let both = g(AnyLimiter::token_bucket(&[
        Bandwidth::greedy(10, 10, s(1)).unwrap(),
        Bandwidth::greedy(100, 100, s(60)).unwrap(),
    ])
    .unwrap());
    assert_eq!(
        (both.retry_after, both.reset_after),
        (Nanos::from_millis(600), s(60))
    );
    let fixed = g(FixedWindow::new(10, s(60)).unwrap().into());
    assert_eq!((fixed.retry_after, fixed.reset_after), (s(60), s(60)));
    let counter = g(SlidingWindowCounter::new(10, s(1)).unwrap().into());
    // The next window admits one unit once the first weighs 90%.
    assert_eq!(counter.retry_after, Nanos::from_millis(1_100));
    assert_eq!(counter.reset_after, s(2));
    let queue = g(LeakyBucket::new(4, s(1)).unwrap().into());
    assert_eq!((queue.retry_after, queue.reset_after), (s(4), s(4)));
    // A policy's client waits for the longest of its limits, each wait:
    // the window's retry, the counter's reset.
    let mut policy = Policy::new();
    policy
        .add(
            "counter",
            &[],
            SlidingWindowCounter::new(10, s(1)).unwrap().into(),
        )
        .unwrap();
    policy
        .add(
            "fixed",
            &[],
            FixedWindow::new(10, Nanos::from_millis(1_500))
                .unwrap()
                .into(),
        )
        .unwrap();
    let all = policy.guarantees().lockout();
    assert_eq!(
        (all.retry_after, all.reset_after),
        (Nanos::from_millis(1_500), s(2))
    );
}

/// Calendar months are sustained per month on average (4,800 in the
/// Gregorian 400 years of 146,097 days), not per a nominal 30 days: a greedy
/// client over those 400 years takes exactly the sustained units.
#[test]
fn calendar_months_are_sustained_per_gregorian_month() {
    const DAY: u64 = 86_400_000_000_000;
    let cycle = 146_097 * DAY;
    let starts = month_starts();
    assert_eq!(starts[4_799], cycle);
    for limit in [1, 2, 7, 1_000] {
        let fixed = Guarantee::of(
            &FixedWindow::with_calendar(limit, Calendar::Month)
                .unwrap()
                .into(),
        );
        let rate = fixed.sustained();
        assert_eq!(
            (rate.units, rate.per),
            (4_800 * limit as u128, cycle as u128)
        );
        assert_eq!(greedy_months(limit, 0, cycle), rate.units);

        // The counter after its first month: at each month's last ns, all it
        // admits then (the least weight of the month before).
        let mut counter = SlidingWindowCounter::with_calendar(limit, Calendar::Month).unwrap();
        assert!(
            counter
                .try_acquire(Nanos(starts[0] - 1), limit)
                .unwrap()
                .allowed
        );
        let mut admitted = 0u128;
        for &end in &starts[1..=4_800] {
            let d = counter.peek(Nanos(end - 1), 1).unwrap();
            let room = if d.allowed { d.remaining + 1 } else { 0 };
            if room > 0 {
                assert!(counter.try_acquire(Nanos(end - 1), room).unwrap().allowed);
            }
            admitted += room as u128;
        }
        let g = Guarantee::of(
            &SlidingWindowCounter::with_calendar(limit, Calendar::Month)
                .unwrap()
                .into(),
        );
        assert_eq!(
            (g.sustained().units, g.sustained().per),
            (admitted, cycle as u128),
            "limit {limit}"
        );
    }
}

/// A client locked out by a calendar-month window waits, in the worst case,
/// as long as the limiter answers after the whole limit is taken as any
/// month opens: a counter's wait reaches into the next month, so January
/// (31 days, then February) is not the worst start, July (then August) is.
#[test]
fn calendar_month_lockouts_are_the_longest_of_every_month() {
    let starts = month_starts();
    for limit in [1, 7, 10, 1_000] {
        let limiters: [AnyLimiter; 2] = [
            FixedWindow::with_calendar(limit, Calendar::Month)
                .unwrap()
                .into(),
            SlidingWindowCounter::with_calendar(limit, Calendar::Month)
                .unwrap()
                .into(),
        ];
        for limiter in limiters {
            let (mut retry, mut reset) = (Nanos::ZERO, Nanos::ZERO);
            // The first 30 years: every pair of month lengths, leap Februaries too.
            for &start in [0].iter().chain(&starts[..360]) {
                let mut l = limiter.clone();
                assert!(l.try_acquire(Nanos(start), limit).unwrap().allowed);
                let d = l.peek(Nanos(start), 1).unwrap();
                (retry, reset) = (retry.max(d.retry_after), reset.max(d.reset_after));
            }
            let g = Guarantee::of(&limiter).lockout();
            assert_eq!(
                (g.retry_after, g.reset_after),
                (retry, reset),
                "{limiter:?}"
            );
        }
    }
}

#[test]
fn strict_windows_and_excess() {
    let s = Nanos::from_secs;
    let bucket = Guarantee::of(&TokenBucket::new(20, 10, s(1)).unwrap().into());
    assert_eq!(bucket.strict(), (10, s(1)));
    assert_eq!(bucket.max_in_window(s(1)), 29);
    assert_eq!(bucket.excess(), 19);
    let counter = Guarantee::of(&SlidingWindowCounter::new(10, s(1)).unwrap().into());
    // 2 * limit - 1 for any window of at least 2 * limit ns.
    assert_eq!(counter.max_in_window(s(1)), 19);
    let gcra = Guarantee::of(&Gcra::per_period(10, 10, s(1)).unwrap().into());
    assert_eq!((gcra.strict(), gcra.max_in_window(s(1))), ((10, s(1)), 19));
    let rate = counter.sustained();
    assert_eq!((rate.units, rate.per), (9, 1_000_000_000));
}

#[test]
fn counter_chains_settle_for_extreme_configurations() {
    for (limit, window) in [
        (u64::MAX, 1),
        (u64::MAX, 2),
        (u64::MAX, 3),
        (1 << 40, 7),
        (3, u64::MAX),
    ] {
        let g = Guarantee::of(
            &SlidingWindowCounter::new(limit, Nanos(window))
                .unwrap()
                .into(),
        );
        let _ = (g.max_in_window(Nanos::MAX), g.sustained());
    }
}
