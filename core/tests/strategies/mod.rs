//! Strategies the property tests share (each test file is a crate of its
//! own, which includes this module).

use proptest::prelude::*;
use ratekeeper::{
    AnyLimiter, Bandwidth, Calendar, FixedWindow, Gcra, LeakyBucket, Nanos, SlidingWindowCounter,
    SlidingWindowLog,
};

/// A bandwidth of a small capacity (at most `capacity`), refill (at most
/// `tokens`) and period (at most 12 ns), greedy or interval: small numbers,
/// so that a few steps reach every case of its arithmetic.
#[allow(dead_code)] // each test file that includes this module uses what it needs
pub fn band(capacity: u64, tokens: u64) -> impl Strategy<Value = Bandwidth> {
    (1..=capacity, 1..=tokens, 1u64..=12, any::<bool>()).prop_map(
        |(cap, tokens, period, interval)| {
            if interval {
                Bandwidth::interval(cap, tokens, Nanos(period)).unwrap()
            } else {
                Bandwidth::greedy(cap, tokens, Nanos(period)).unwrap()
            }
        },
    )
}

/// Numbers at both ends of `u64`, around 2^63 and anywhere.
#[allow(dead_code)]
pub fn extreme() -> impl Strategy<Value = u64> {
    prop_oneof![
        1u64..=5,
        u64::MAX - 5..=u64::MAX,
        (1u64 << 63) - 3..=(1u64 << 63) + 3,
        any::<u64>()
    ]
}

/// Every algorithm, configured with `extreme()` numbers wherever the
/// constructor takes them: a token bucket of one or two bandwidths, greedy or
/// interval; a sliding log of at most `log_limit` (its memory grows with the
/// limit); and, with `calendars`, the calendar windows too.
#[allow(dead_code)]
pub fn extreme_limiter(log_limit: u64, calendars: bool) -> BoxedStrategy<AnyLimiter> {
    let band = (extreme(), extreme(), extreme(), any::<bool>()).prop_filter_map(
        "too large",
        |(c, r, p, interval)| {
            if interval {
                Bandwidth::interval(c, r, Nanos(p)).ok()
            } else {
                Bandwidth::greedy(c, r, Nanos(p)).ok()
            }
        },
    );
    let mut kinds = vec![
        prop::collection::vec(band, 1..=2)
            .prop_map(|b| AnyLimiter::token_bucket(&b).unwrap())
            .boxed(),
        (extreme(), extreme())
            .prop_filter_map("too large", |(n, p)| {
                Gcra::new(n, Nanos(p)).ok().map(Into::into)
            })
            .boxed(),
        (extreme(), extreme())
            .prop_filter_map("too large", |(n, p)| {
                LeakyBucket::new(n, Nanos(p)).ok().map(Into::into)
            })
            .boxed(),
        (1..=log_limit, extreme())
            .prop_filter_map("too large", |(n, p)| {
                SlidingWindowLog::new(n, Nanos(p)).ok().map(Into::into)
            })
            .boxed(),
        (extreme(), extreme())
            .prop_filter_map("too large", |(n, p)| {
                SlidingWindowCounter::new(n, Nanos(p)).ok().map(Into::into)
            })
            .boxed(),
        (extreme(), extreme())
            .prop_filter_map("too large", |(n, p)| {
                FixedWindow::new(n, Nanos(p)).ok().map(Into::into)
            })
            .boxed(),
    ];
    if calendars {
        kinds.push(calendar_limiter(extreme()).boxed());
    }
    prop::strategy::Union::new(kinds).boxed()
}

/// A calendar window (`FixedWindow` or `SlidingWindowCounter`, any
/// calendar) of a limit drawn from `limit`.
#[allow(dead_code)]
pub fn calendar_limiter(limit: impl Strategy<Value = u64>) -> impl Strategy<Value = AnyLimiter> {
    (
        limit,
        prop::sample::select(Calendar::ALL.to_vec()),
        any::<bool>(),
    )
        .prop_map(|(n, calendar, fixed)| {
            if fixed {
                FixedWindow::with_calendar(n, calendar).unwrap().into()
            } else {
                SlidingWindowCounter::with_calendar(n, calendar)
                    .unwrap()
                    .into()
            }
        })
}
