//! Calendar windows (UTC days, ISO weeks, months) of `FixedWindow` and
//! `SlidingWindowCounter`: boundaries against a simple model over random
//! instants, days and weeks against plain windows, and the guarantees over
//! months of 28 to 31 days.

use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use ratekeeper::{
    AnyLimiter, Calendar, Decision, FixedWindow, Limiter, Nanos, SlidingWindowCounter,
};

const S: u64 = 1_000_000_000;
const DAY: u64 = 86_400 * S;

/// The first day of every month from January 1970 to past 2554, in days
/// since the epoch, counted with the Gregorian leap-year rule.
fn month_starts() -> &'static [i128] {
    static STARTS: OnceLock<Vec<i128>> = OnceLock::new();
    STARTS.get_or_init(|| {
        let leap = |y: i128| y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
        let mut starts = vec![0];
        for year in 1970..2556 {
            for month in 1..=12 {
                let len = match month {
                    2 if leap(year) => 29,
                    2 => 28,
                    4 | 6 | 9 | 11 => 30,
                    _ => 31,
                };
                starts.push(starts.last().unwrap() + len);
            }
        }
        starts
    })
}

/// The window `[start, end)` holding `t`, in ns since the epoch (week 0
/// starts before it).
fn model(calendar: Calendar, t: u64) -> (i128, i128) {
    let day = (t / DAY) as i128;
    let (first, next) = match calendar {
        Calendar::Day => (day, day + 1),
        // 1970-01-01 was a Thursday, 3 days after a Monday.
        Calendar::Week => (day - (day + 3) % 7, day - (day + 3) % 7 + 7),
        Calendar::Month => {
            let starts = month_starts();
            let k = starts.partition_point(|&s| s <= day) - 1;
            (starts[k], starts[k + 1])
        }
        // Calendar is non_exhaustive: a new one fails here, in every test
        // that goes through Calendar::ALL, until this model knows it.
        other => unimplemented!("no model of {other:?}"),
    };
    (first * DAY as i128, next * DAY as i128)
}

/// The start of month `k` (0 = January 1970), in ns.
fn month(k: usize) -> u64 {
    (month_starts()[k] * DAY as i128) as u64
}

/// Where the window holding `t` ends, as the limiter reports it: a fresh
/// limit-1 window is fresh again exactly there.
fn reported_end(calendar: Calendar, t: u64) -> u128 {
    let mut limiter = FixedWindow::with_calendar(1, calendar).unwrap();
    let d = limiter.try_acquire(Nanos(t), 1).unwrap();
    t as u128 + d.reset_after.0 as u128
}

fn calendars() -> impl Strategy<Value = Calendar> {
    prop::sample::select(Calendar::ALL.to_vec())
}

/// Times that mostly move forward by up to `max_step` (and by a few ns, to
/// land near boundaries), sometimes stand still, sometimes go back.
fn times(start: u64, max_step: u64, len: usize) -> impl Strategy<Value = Vec<u64>> {
    let step = prop_oneof![
        4 => 0..=max_step as i128,
        2 => 0..=1_000i128,
        2 => Just(0i128),
        1 => -(max_step as i128)..0,
    ];
    prop::collection::vec(step, 1..len).prop_map(move |steps| {
        let mut t = start as i128;
        steps
            .into_iter()
            .map(|d| {
                t = (t + d).clamp(0, u64::MAX as i128);
                t as u64
            })
            .collect()
    })
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Acquire,
    Peek,
    Reserve(u64),
    Refund,
}

fn ops(max_wait: u64, refunds: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => Just(Op::Acquire),
        1 => Just(Op::Peek),
        2 => (0..=max_wait).prop_map(Op::Reserve),
        refunds => Just(Op::Refund),
    ]
}

/// A trace through months: a start in some month from 1970 to 2550, then
/// steps of up to 5 days, each with an operation and a cost.
fn month_trace(
    len: usize,
    max_wait: u64,
    refunds: u32,
) -> impl Strategy<Value = Vec<(u64, Op, u64)>> {
    (0usize..580 * 12, 0..31 * DAY)
        .prop_flat_map(move |(k, offset)| {
            let start = month(k) + offset;
            (
                times(start, 5 * DAY, len),
                prop::collection::vec((ops(max_wait, refunds), 0u64..=10), len),
            )
        })
        .prop_map(|(times, ops)| {
            times
                .into_iter()
                .zip(ops)
                .map(|(t, (op, cost))| (t, op, cost))
                .collect()
        })
}

/// Runs `steps` on `limiter`, returning the units admitted (at the time
/// judged) or booked (at their slot), and calling `each` with every acquire
/// and its decision.
fn run<L: Limiter + Clone>(
    limiter: &mut L,
    steps: &[(u64, Op, u64)],
    mut each: impl FnMut(&L, &[(u64, u64)], u64, u64, &Decision),
) -> Vec<(u64, u64)> {
    let (mut taken, mut latest) = (vec![], 0);
    for &(now, op, cost) in steps {
        let cost = cost.min(limiter.limit());
        if !matches!(op, Op::Peek | Op::Refund) {
            latest = now.max(latest); // what the limiter judges at
        }
        match op {
            Op::Peek => {
                let _ = limiter.peek(Nanos(now), cost).unwrap();
            }
            Op::Acquire => {
                let before = limiter.clone();
                let d = limiter.try_acquire(Nanos(now), cost).unwrap();
                each(&before, &taken, now, cost, &d);
                if d.allowed && cost > 0 {
                    taken.push((latest, cost));
                }
            }
            Op::Reserve(max_wait) => {
                if let Ok(wait) = limiter.reserve(Nanos(now), cost, Nanos(max_wait)).unwrap() {
                    if cost > 0 {
                        taken.push((latest.max(now + wait.0), cost));
                    }
                }
            }
            Op::Refund => limiter.refund(Nanos(now), cost),
        }
    }
    taken
}

/// The same cost is allowed at `now + retry_after` and denied 1 ns earlier;
/// the limiter is fresh at `now + reset_after` and not 1 ns earlier.
fn assert_exact<L: Limiter + Clone>(before: &L, now: u64, cost: u64, d: &Decision) {
    let probe = |t: u64, c: u64| before.clone().try_acquire(Nanos(t), c).unwrap();
    if !d.allowed && now.checked_add(d.retry_after.0).is_some() {
        assert!(probe(now + d.retry_after.0, cost).allowed, "retry_after");
        assert!(
            d.retry_after.0 == 0 || !probe(now + d.retry_after.0 - 1, cost).allowed,
            "allowed early"
        );
    }
    let mut after = before.clone();
    let _ = after.try_acquire(Nanos(now), cost).unwrap();
    let fresh = |t: u64| after.peek(Nanos(t), 0).unwrap().remaining == after.limit();
    if let Some(at) = now.checked_add(d.reset_after.0) {
        assert!(fresh(at), "not fresh at now + reset_after");
        assert!(d.reset_after.0 == 0 || !fresh(at - 1), "fresh early");
    }
}

/// The units of `taken` at times in `[from, to)`.
fn units(taken: &[(u64, u64)], from: i128, to: i128) -> u128 {
    taken
        .iter()
        .filter(|(t, _)| (from..to).contains(&(*t as i128)))
        .map(|&(_, c)| c as u128)
        .sum()
}

/// The month index of `t` in the model, and its bounds.
fn month_of(t: u64) -> (usize, i128, i128) {
    let (start, end) = model(Calendar::Month, t);
    let k = month_starts().partition_point(|&s| s * (DAY as i128) < end) - 1;
    (k, start, end)
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/calendar.txt"))),
        ..ProptestConfig::default()
    })]

    /// Over random u64 instants, the window the limiter uses is the model's:
    /// it ends where the model's does, starts where the model's starts, and
    /// the instant before its start belongs to the window before.
    #[test]
    fn boundaries_match_a_simple_model(calendar in calendars(), t in any::<u64>()) {
        let (start, end) = model(calendar, t);
        prop_assert_eq!(reported_end(calendar, t) as i128, end);
        if start >= 0 {
            prop_assert_eq!(reported_end(calendar, start as u64) as i128, end);
            if start > 0 {
                prop_assert_eq!(reported_end(calendar, start as u64 - 1) as i128, start);
            }
        }
    }

    /// The same a few ns around every kind of boundary, month ends of every
    /// length included.
    #[test]
    fn boundaries_match_near_every_edge(
        calendar in calendars(),
        k in 1usize..7_000,
        delta in -2i64..=2,
    ) {
        let edge = match calendar {
            Calendar::Day => k as u64 * 30 * DAY,
            Calendar::Week => (k as u64 * 4 * 7 - 3) * DAY,
            Calendar::Month => month(k),
            other => unimplemented!("no edge of {other:?}"),
        };
        let t = edge.checked_add_signed(delta).unwrap();
        prop_assert_eq!(reported_end(calendar, t) as i128, model(calendar, t).1);
    }

    /// The previous window's count weighs the part of the current window not
    /// yet elapsed: `remaining = limit - ceil(prev * (end - t) / len)`.
    #[test]
    fn the_previous_window_weighs_what_is_left_of_the_current_one(
        calendar in calendars(),
        t in 40 * DAY..u64::MAX,
        into_previous in any::<prop::sample::Index>(),
        (limit, prev) in (1u64..=1_000_000).prop_flat_map(|l| (Just(l), 1..=l)),
    ) {
        let (start, end) = model(calendar, t);
        let (prev_start, _) = model(calendar, start as u64 - 1);
        let at = prev_start as u64 + into_previous.index((start - prev_start) as usize) as u64;
        let mut limiter = SlidingWindowCounter::with_calendar(limit, calendar).unwrap();
        prop_assert!(limiter.try_acquire(Nanos(at), prev).unwrap().allowed);
        let d = limiter.peek(Nanos(t), 0).unwrap();
        let (len, left) = ((end - start) as u128, (end - t as i128) as u128);
        let weighed = (prev as u128 * left).div_ceil(len) as u64;
        prop_assert_eq!(d.remaining, limit - weighed);
        prop_assert_eq!(d.reset_after.0 as i128, (end - t as i128).min(u64::MAX as i128));
    }

    /// Calendar days are plain windows of 86,400 s from the epoch, and ISO
    /// weeks plain windows of 7 days from Monday 1969-12-29: every answer of
    /// both algorithms is the plain window's, 3 days later for weeks.
    #[test]
    fn days_and_weeks_are_plain_windows_with_an_origin(
        week in any::<bool>(),
        limit in 1u64..=10,
        start in prop_oneof![0..8 * DAY, 0..1u64 << 62], // week 0 starts before the epoch
        times in prop::collection::vec((prop_oneof![0..3 * DAY, 0..1_000u64], ops(20 * DAY, 1), 0u64..=10), 1..60),
    ) {
        let (calendar, len, shift) = if week {
            (Calendar::Week, 7 * DAY, 3 * DAY)
        } else {
            (Calendar::Day, DAY, 0)
        };
        let mut fixed = (FixedWindow::with_calendar(limit, calendar).unwrap(), FixedWindow::new(limit, Nanos(len)).unwrap());
        let mut counter = (
            SlidingWindowCounter::with_calendar(limit, calendar).unwrap(),
            SlidingWindowCounter::new(limit, Nanos(len)).unwrap(),
        );
        let mut now = start;
        for (step, op, cost) in times {
            now += step;
            let cost = cost.min(limit);
            let (a, b) = (Nanos(now), Nanos(now + shift));
            match op {
                Op::Acquire => {
                    prop_assert_eq!(fixed.0.try_acquire(a, cost), fixed.1.try_acquire(b, cost));
                    prop_assert_eq!(counter.0.try_acquire(a, cost), counter.1.try_acquire(b, cost));
                }
                Op::Peek => {
                    prop_assert_eq!(fixed.0.peek(a, cost), fixed.1.peek(b, cost));
                    prop_assert_eq!(counter.0.peek(a, cost), counter.1.peek(b, cost));
                }
                Op::Reserve(w) => {
                    prop_assert_eq!(fixed.0.reserve(a, cost, Nanos(w)), fixed.1.reserve(b, cost, Nanos(w)));
                    prop_assert_eq!(counter.0.reserve(a, cost, Nanos(w)), counter.1.reserve(b, cost, Nanos(w)));
                }
                Op::Refund => {
                    fixed.0.refund(a, cost);
                    fixed.1.refund(b, cost);
                    counter.0.refund(a, cost);
                    counter.1.refund(b, cost);
                }
            }
        }
    }

    /// Over months: every retry_after and reset_after is exact to the ns,
    /// at most `limit` per month, and at most `2 * limit` in any span of up
    /// to 28 days (which meets two months at most).
    #[test]
    fn fixed_months_hold_limit_each_and_answer_exactly(
        limit in 1u64..=10,
        steps in month_trace(60, 40 * DAY, 0),
        d in 1..=28 * DAY,
    ) {
        let mut limiter = FixedWindow::with_calendar(limit, Calendar::Month).unwrap();
        let taken = run(&mut limiter, &steps, |before, _, now, cost, d| assert_exact(before, now, cost, d));
        for &(a, _) in &taken {
            let (_, start, end) = month_of(a);
            prop_assert!(units(&taken, start, end) <= limit as u128);
            prop_assert!(units(&taken, a as i128, a as i128 + d as i128) <= 2 * limit as u128);
        }
    }

    /// Over months: retry_after and reset_after are exact to the ns; at most
    /// `limit` per month; a span of `d` ns meeting two months holds at most
    /// `limit + floor(limit * min(d - 2, len - 1) / len)` (`len` the later
    /// month's length), and one meeting three months (a whole middle month
    /// of `mid` ns) at most `2 * limit + floor(limit * (d - 2 - mid) / len)`.
    #[test]
    fn counter_months_stay_within_the_documented_bounds(
        limit in 1u64..=10,
        steps in month_trace(80, 40 * DAY, 0),
        d in prop_oneof![1..=28 * DAY, 28 * DAY..=31 * DAY, 1..=3 * DAY],
    ) {
        let mut limiter = SlidingWindowCounter::with_calendar(limit, Calendar::Month).unwrap();
        let taken = run(&mut limiter, &steps, |before, _, now, cost, d| assert_exact(before, now, cost, d));
        let (limit, d) = (limit as u128, d as i128);
        for &(a, _) in &taken {
            let (first, start, end) = month_of(a);
            prop_assert!(units(&taken, start, end) <= limit);
            let (last, last_start, last_end) = month_of((a as i128 + d - 1) as u64);
            let len = (last_end - last_start) as u128;
            let in_span = units(&taken, a as i128, a as i128 + d);
            let bound = match last - first {
                0 => limit,
                1 => limit + limit * ((d - 2) as u128).min(len - 1) / len,
                2 => {
                    let mid = (last_start - end) as u128;
                    2 * limit + limit * (d as u128 - 2 - mid) / len
                }
                _ => unreachable!("31 days meet three months at most"),
            };
            prop_assert!(in_span <= bound, "{} units from {}, {} ns, bound {}", in_span, a, d, bound);
            if d <= 28 * DAY as i128 {
                prop_assert!(in_span <= 2 * limit - (2 * limit).div_ceil(len));
            }
        }
    }

    /// Against the exact log of the current month's length `len`, at `e` ns
    /// into the month with `prev` units in the month before: an admission
    /// leaves at most `limit + floor(prev * e / len)` units in the log's
    /// window, plus those it holds of the month before the previous one (only
    /// after a shorter month); a denial would not fit there with
    /// `ceil(prev * (len - e) / len)` more.
    #[test]
    fn counter_months_stay_within_their_error_against_the_exact_log(
        limit in 1u64..=10,
        steps in month_trace(80, 0, 0),
    ) {
        let mut limiter = SlidingWindowCounter::with_calendar(limit, Calendar::Month).unwrap();
        let mut latest = 0;
        let steps: Vec<_> = steps.into_iter().map(|(t, _, c)| (t, Op::Acquire, c)).collect();
        run(&mut limiter, &steps, |_, taken, now, cost, d| {
            latest = now.max(latest);
            let now = latest as i128;
            let (k, start, end) = month_of(latest);
            let len = end - start;
            let prev_start = month_starts()[k.max(1) - 1] * DAY as i128;
            let prev = if k == 0 { 0 } else { units(taken, prev_start, start) };
            let count = units(taken, now - len + 1, now + 1) + cost as u128;
            let e = (now - start) as u128;
            let len = len as u128;
            if d.allowed {
                let older = units(taken, now - len as i128 + 1, prev_start);
                assert!(count <= limit as u128 + prev * e / len + older, "admitted {count} at {now}");
            } else {
                assert!(count + (prev * (len - e)).div_ceil(len) > limit as u128, "denied {count} at {now}");
            }
        });
    }

    /// Reconfiguring between plain and calendar windows, either way, never
    /// leaves more room than either configuration.
    #[test]
    fn reconfigure_between_plain_and_calendar_never_grants_more(
        (limit, new_limit) in (1u64..=10, 1u64..=10),
        to_calendar in any::<bool>(),
        calendar in calendars(),
        window in 1..=40 * DAY,
        steps in month_trace(40, 40 * DAY, 1),
        later in 0..40 * DAY,
    ) {
        let plain = |l| (FixedWindow::new(l, Nanos(window)).unwrap(), SlidingWindowCounter::new(l, Nanos(window)).unwrap());
        let cal = |l| (FixedWindow::with_calendar(l, calendar).unwrap(), SlidingWindowCounter::with_calendar(l, calendar).unwrap());
        let (mut fixed, mut counter) = if to_calendar { plain(limit) } else { cal(limit) };
        let (new_fixed, new_counter) = if to_calendar { cal(new_limit) } else { plain(new_limit) };
        run(&mut fixed, &steps, |_, _, _, _, _| {});
        run(&mut counter, &steps, |_, _, _, _, _| {});
        let now = Nanos(steps.iter().map(|s| s.0).max().unwrap() + later);
        let old = fixed.peek(now, 0).unwrap().remaining;
        fixed.reconfigure(now, new_fixed);
        let room = fixed.peek(now, 0).unwrap().remaining;
        prop_assert!(room <= old && room <= new_limit.saturating_sub(limit - old), "{} after {}", room, old);
        prop_assert_eq!(fixed.calendar().is_some(), to_calendar);
        let old = counter.peek(now, 0).unwrap().remaining;
        counter.reconfigure(now, new_counter);
        let room = counter.peek(now, 0).unwrap().remaining;
        prop_assert!(room <= old && room <= new_limit, "{} after {}", room, old);
        prop_assert_eq!(counter.calendar().is_some(), to_calendar);
    }

    /// No input, however extreme, panics, with calendars too.
    #[test]
    fn extreme_inputs_never_panic(
        limit in prop_oneof![Just(1u64), Just(u64::MAX), any::<u64>()],
        calendar in calendars(),
        calls in prop::collection::vec((0u8..6, prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>()],
                                        prop_oneof![Just(0u64), Just(1u64), Just(u64::MAX), any::<u64>()]), 1..20),
    ) {
        let Ok(mut fixed) = FixedWindow::with_calendar(limit, calendar) else { return Ok(()) };
        let mut counter = SlidingWindowCounter::with_calendar(limit, calendar).unwrap();
        for (kind, now, cost) in calls {
            let (now, c) = (Nanos(now), cost);
            match kind {
                0 => { let _ = (fixed.try_acquire(now, c), counter.try_acquire(now, c)); }
                1 => { let _ = (fixed.peek(now, c), counter.peek(now, c)); }
                2 => { let _ = (fixed.reserve(now, c, Nanos(c)), counter.reserve(now, c, Nanos(c))); }
                3 => { fixed.refund(now, c); counter.refund(now, c); }
                4 => {
                    fixed.reconfigure(now, FixedWindow::new(c.max(1), Nanos(now.0.max(1))).unwrap());
                    counter.reconfigure(now, SlidingWindowCounter::new(c.max(1), Nanos(now.0.max(1))).unwrap());
                }
                _ => {
                    fixed.reconfigure(now, FixedWindow::with_calendar(c.max(1), calendar).unwrap());
                    counter.reconfigure(now, SlidingWindowCounter::with_calendar(c.max(1), calendar).unwrap());
                }
            }
        }
    }
}

#[test]
fn window_is_the_nominal_length_and_calendar_says_which() {
    for (calendar, days) in [
        (Calendar::Day, 1),
        (Calendar::Week, 7),
        (Calendar::Month, 30),
    ] {
        let fixed = FixedWindow::with_calendar(5, calendar).unwrap();
        let counter = SlidingWindowCounter::with_calendar(5, calendar).unwrap();
        assert_eq!(fixed.window(), Nanos(days * DAY));
        assert_eq!(counter.window(), Nanos(days * DAY));
        assert_eq!(
            (fixed.calendar(), counter.calendar()),
            (Some(calendar), Some(calendar))
        );
        assert_eq!(Calendar::from_name(calendar.name()), Some(calendar));
    }
    assert_eq!(Calendar::from_name("MONTH"), Some(Calendar::Month));
    assert_eq!(Calendar::from_name("year"), None);
    let monthly = SlidingWindowCounter::with_calendar(5, Calendar::Month).unwrap();
    assert_eq!(AnyLimiter::from(monthly).window(), Nanos(30 * DAY)); // RateLimit-Policy's w
    let plain = FixedWindow::new(5, Nanos(30 * DAY)).unwrap();
    assert_eq!((plain.window(), plain.calendar()), (Nanos(30 * DAY), None));
    // A month and a plain 30-day window report one window length but differ.
    assert_ne!(
        plain,
        FixedWindow::with_calendar(5, Calendar::Month).unwrap()
    );
    assert_eq!(
        FixedWindow::with_calendar(0, Calendar::Day)
            .unwrap_err()
            .code(),
        "zero_value"
    );
    assert_eq!(
        SlidingWindowCounter::with_calendar(0, Calendar::Day)
            .unwrap_err()
            .argument(),
        Some("limit")
    );
}

/// The documented three-month case: 31 days from January's last ns cover
/// all of February 2023 and 3 days of March, and hold `2 * limit + 2` units
/// for a limit of 31, exactly the documented bound.
#[test]
fn a_span_around_a_whole_february_can_exceed_twice_the_limit() {
    let mut limiter = SlidingWindowCounter::with_calendar(31, Calendar::Month).unwrap();
    let march = month((2023 - 1970) * 12 + 2);
    let feb = month((2023 - 1970) * 12 + 1);
    let start = feb - 1;
    let end = start + 31 * DAY; // exclusive
    let mut total = 0;
    for t in [start, march - 1, end - 1] {
        let room = limiter.peek(Nanos(t), 0).unwrap().remaining;
        assert!(limiter.try_acquire(Nanos(t), room).unwrap().allowed);
        total += room;
    }
    assert_eq!(total, 64);
    let mid = march - feb;
    let len = 31 * DAY; // March
    assert_eq!(
        total,
        2 * 31 + 31 * (31 * DAY - 2 - mid) / len,
        "the documented bound, reached"
    );
}

/// Reconfiguring a plain window into a calendar month keeps the units of the
/// window holding the latest call, counted in the month holding it.
#[test]
fn reconfigure_from_plain_to_calendar_keeps_the_current_units() {
    let now = Nanos(month(650) + 10 * DAY); // some day in 2024
    let mut limiter = FixedWindow::new(10, Nanos(DAY)).unwrap();
    assert!(limiter.try_acquire(now, 4).unwrap().allowed);
    limiter.reconfigure(
        now,
        FixedWindow::with_calendar(100, Calendar::Month).unwrap(),
    );
    let d = limiter.peek(now, 0).unwrap();
    assert_eq!(d.remaining, 6); // the smaller room: min(10 - 4, 100 - 4)
    assert_eq!(
        d.reset_after.0 as i128,
        model(Calendar::Month, now.0).1 - now.0 as i128
    );
    let next = Nanos(model(Calendar::Month, now.0).1 as u64);
    assert_eq!(limiter.peek(next, 0).unwrap().remaining, 100);
}
