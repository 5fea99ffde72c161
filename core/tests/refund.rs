//! A refund never creates permits, across reconfigures too: a copy of a
//! limiter that took a request and gave it back is never looser than a copy
//! that never took it. After a reconfigure, the windowed counters fold their
//! counts into the new window, which no longer holds exactly the units of
//! one window, and a queue's end moves by the longer interval, so units
//! counted (or queued) before it are not given back.

#![cfg(feature = "alloc")]

mod strategies;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use ratekeeper::{
    AnyLimiter, Bandwidth, FixedWindow, Gcra, LeakyBucket, Limiter, Nanos, SlidingWindowCounter,
    SlidingWindowLog,
};
use strategies::band;

/// Refund after a reconfigure that widens the window: units taken in an
/// old window the limiter had already forgotten are "given back" from the
/// new window's count, which holds other units: the refund creates permits.
#[test]
fn fixed_window_refund_after_widening_reconfigure_creates_no_permits() {
    let mut l = FixedWindow::new(10, Nanos(100)).unwrap();
    assert!(l.try_acquire(Nanos(50), 10).unwrap().allowed); // window [0, 100)
    assert!(l.try_acquire(Nanos(150), 10).unwrap().allowed); // window [100, 200)

    // Wider windows: [0, 1000) now holds the 10 units of 150.
    l.reconfigure(Nanos(150), FixedWindow::new(10, Nanos(1_000)).unwrap());
    assert!(!l.peek(Nanos(150), 1).unwrap().allowed);
    // The 10 units of 50 were not needed after all.
    l.refund(Nanos(50), 10);
    // Nothing that counts was given back: still full.
    let d = l.try_acquire(Nanos(150), 10).unwrap();
    assert!(
        !d.allowed,
        "20 units admitted at 150 (10 refunded ones of 50 aside): 20 in [100, 200) and in [0, 1000)"
    );
}

#[test]
fn sliding_window_counter_refund_after_widening_reconfigure_creates_no_permits() {
    let mut l = SlidingWindowCounter::new(10, Nanos(100)).unwrap();
    assert!(l.try_acquire(Nanos(50), 10).unwrap().allowed); // window 0

    // Two windows later, window 0 is forgotten.
    assert!(l.try_acquire(Nanos(250), 10).unwrap().allowed);
    l.reconfigure(
        Nanos(250),
        SlidingWindowCounter::new(10, Nanos(1_000)).unwrap(),
    );
    assert!(!l.peek(Nanos(250), 1).unwrap().allowed);
    l.refund(Nanos(50), 10);
    let d = l.try_acquire(Nanos(250), 10).unwrap();
    assert!(
        !d.allowed,
        "20 units admitted at 250 (10 refunded ones of 50 aside)"
    );
}

/// The same, through a count cut to a smaller new limit: 3 units folded
/// into a limit of 2 count as 2, and refunding one leaves 1, though 2
/// unrefunded units stand in the window.
#[test]
fn fixed_window_refund_after_a_lower_limit_creates_no_permits() {
    let mut l = FixedWindow::new(4, Nanos(100)).unwrap();
    assert!(l.try_acquire(Nanos(10), 2).unwrap().allowed);
    assert!(l.try_acquire(Nanos(20), 1).unwrap().allowed); // A
    l.reconfigure(Nanos(20), FixedWindow::new(2, Nanos(100)).unwrap());
    l.refund(Nanos(20), 1); // A was not needed
    let d = l.try_acquire(Nanos(30), 1).unwrap();
    assert!(
        !d.allowed,
        "3 unrefunded units in [0, 100) under a limit of 2"
    );
}

#[test]
fn sliding_window_counter_refund_after_a_lower_limit_creates_no_permits() {
    let mut l = SlidingWindowCounter::new(4, Nanos(100)).unwrap();
    assert!(l.try_acquire(Nanos(10), 2).unwrap().allowed);
    assert!(l.try_acquire(Nanos(20), 1).unwrap().allowed); // A
    l.reconfigure(Nanos(20), SlidingWindowCounter::new(2, Nanos(100)).unwrap());
    l.refund(Nanos(20), 1); // A, taken at the very instant of the reconfigure
    let d = l.try_acquire(Nanos(30), 1).unwrap();
    assert!(
        !d.allowed,
        "3 unrefunded units in [0, 100) under a limit of 2"
    );
}

/// A leaky bucket's refund of the last unit queued before a reconfigure to
/// a longer interval matched the queue's end (its slot plus the new
/// interval is where the stretched queue ends) and took the stretch off the
/// unit ahead of it: the next unit left 10 ns after that one.
#[test]
fn leaky_bucket_refund_after_reconfigure_keeps_the_spacing() {
    let mut l = LeakyBucket::new(3, Nanos(10)).unwrap();
    assert_eq!(l.reserve(Nanos(0), 1, Nanos(100)).unwrap(), Ok(Nanos(0)));
    assert_eq!(l.reserve(Nanos(0), 1, Nanos(100)).unwrap(), Ok(Nanos(10))); // A

    // Interval 30 from now on: the unit after the one of 0 leaves at 30 at
    // the earliest.
    l.reconfigure(Nanos(0), LeakyBucket::new(3, Nanos(30)).unwrap());
    l.refund(Nanos(10), 1); // A was not needed
    let next = l.reserve(Nanos(0), 1, Nanos(100)).unwrap().unwrap();
    assert!(next >= Nanos(30), "the next unit leaves at {next:?}");

    // A unit queued after the reconfigure is refunded as before.
    assert_eq!(next, Nanos(40));
    l.refund(next, 1);
    assert_eq!(l.reserve(Nanos(0), 1, Nanos(100)).unwrap(), Ok(Nanos(40)));
}

/// At the end of time a reconfigure's bound on refunds, the instant after
/// the latest one (or a queue's end), saturated at 2^64 - 1 ns: units taken
/// there before the reconfigure were given back again, from a count cut to
/// the new limit or from the stretch of a queue.
#[test]
fn refunds_after_a_reconfigure_at_the_end_of_time_create_no_permits() {
    let end = Nanos::MAX;
    let mut fixed = FixedWindow::new(4, Nanos(100)).unwrap();
    assert!(fixed.try_acquire(end, 3).unwrap().allowed);
    fixed.reconfigure(end, FixedWindow::new(2, Nanos(100)).unwrap());
    fixed.refund(end, 1);
    assert!(!fixed.try_acquire(end, 1).unwrap().allowed);

    let mut counter = SlidingWindowCounter::new(4, Nanos(100)).unwrap();
    assert!(counter.try_acquire(end, 3).unwrap().allowed);
    counter.reconfigure(end, SlidingWindowCounter::new(2, Nanos(100)).unwrap());
    counter.refund(end, 1);
    assert!(!counter.try_acquire(end, 1).unwrap().allowed);

    // Units at 2^64 - 11 and 2^64 - 1 ns; from a reconfigure to 30 ns,
    // the next leaves 30 ns after the second, past the end of time.
    let mut queue = LeakyBucket::new(3, Nanos(10)).unwrap();
    let at = Nanos(u64::MAX - 10);
    assert_eq!(queue.reserve(at, 1, Nanos(100)).unwrap(), Ok(Nanos(0)));
    assert_eq!(queue.reserve(at, 1, Nanos(100)).unwrap(), Ok(Nanos(10)));
    queue.reconfigure(at, LeakyBucket::new(3, Nanos(30)).unwrap());
    queue.refund(end, 1);
    // It was booked 10 ns after the unit before.
    assert_eq!(queue.reserve(at, 1, Nanos(100)).unwrap(), Ok(Nanos(40)));
}

/// The field a reconfigure sets goes through the state's bytes (and only
/// then: a queue never reconfigured keeps the bytes it had).
#[test]
fn the_refund_bound_of_a_reconfigure_round_trips() {
    use ratekeeper::Portable;
    let mut l = LeakyBucket::new(3, Nanos(10)).unwrap();
    l.reserve(Nanos(0), 2, Nanos(100)).unwrap().unwrap();
    let plain = l.to_bytes();
    l.reconfigure(Nanos(0), LeakyBucket::new(3, Nanos(30)).unwrap());
    let mut back = LeakyBucket::new(3, Nanos(30)).unwrap();
    back.restore(&l.to_bytes()).unwrap();
    assert_eq!(back, l);
    assert_eq!(l.to_bytes().len(), plain.len() + 1);
    // Written as version 2 (a version-1 reader refuses it as another
    // version, not as corrupt); every other state stays version 1.
    assert_eq!((plain[2], l.to_bytes()[2]), (1, 2));

    let mut w = FixedWindow::new(4, Nanos(100)).unwrap();
    let _ = w.try_acquire(Nanos(10), 2).unwrap();
    w.reconfigure(Nanos(20), FixedWindow::new(2, Nanos(100)).unwrap());
    let mut back = FixedWindow::new(2, Nanos(100)).unwrap();
    back.restore(&w.to_bytes()).unwrap();
    assert_eq!(back, w);
}

/// One of the six algorithms: 0 a token bucket of `bands`, else with a
/// limit of `n` and a period of `p` ns.
fn make(kind: u8, n: u64, p: u64, bands: &[Bandwidth]) -> AnyLimiter {
    match kind {
        0 => AnyLimiter::token_bucket(bands).unwrap(),
        1 => Gcra::new(n, Nanos(p)).unwrap().into(),
        2 => LeakyBucket::new(n, Nanos(p)).unwrap().into(),
        3 => SlidingWindowLog::new(n, Nanos(p)).unwrap().into(),
        4 => SlidingWindowCounter::new(n, Nanos(p)).unwrap().into(),
        _ => FixedWindow::new(n, Nanos(p)).unwrap().into(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2000,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/refund.txt"))),
        ..ProptestConfig::default()
    })]

    /// Two copies see the same calls, but one also takes a request `A`
    /// (acquired or reserved) and, after an optional reconfigure of both,
    /// refunds it at the time it was counted. Times start at 1 us, or 100
    /// ns before the end of time, where they stop (at 2^64 - 1 ns a
    /// reconfigure's bound on refunds, the instant after the latest one,
    /// saturated, and units taken before it were given back).
    #[test]
    fn a_refund_never_leaves_a_limiter_looser_than_never_taking(
        (kind, n, p) in (0u8..6, 1u64..=4, 1u64..=40),
        (n2, p2) in (1u64..=4, 1u64..=40),
        bands in prop::collection::vec(band(4, 3), 1..=2),
        bands2 in prop::collection::vec(band(4, 3), 1..=2),
        prefix in prop::collection::vec((0u64..30, 0u64..=3), 0..12),
        (gap, cost, reserve, max_wait) in (0u64..30, 1u64..=3, any::<bool>(), 0u64..80),
        reconfigure in prop::option::of(0u64..60),
        probes in prop::collection::vec((0u64..120, 0u64..=3), 1..10),
        end_of_time in any::<bool>(),
    ) {
        // A bucket keeps no history: a unit refunded after a reconfigure to
        // a larger burst may have refilled already (documented: the bound
        // plus the units refunded, never above a fresh limiter).
        prop_assume!(!(kind <= 1 && reconfigure.is_some()));
        // A booking moves a window's counted window to its slot, which a
        // reconfigure carries over instead of the earlier one: conservative
        // either way, but the copies no longer compare.
        prop_assume!(!(kind >= 4 && reserve && reconfigure.is_some()));
        let bands2 = if bands2.len() == bands.len() { bands2 } else { bands.clone() };
        let mut two = make(kind, n, p, &bands);
        let target = make(kind, n2, p2, &bands2);
        let mut now = if end_of_time { u64::MAX - 100 } else { 1_000 };
        for (step, c) in prefix {
            now = now.saturating_add(step);
            let _ = two.try_acquire(Nanos(now), c.min(two.limit())).unwrap();
        }
        let mut one = two.clone();
        now = now.saturating_add(gap);
        let cost = cost.min(one.limit());
        let taken_at = if reserve {
            match one.reserve(Nanos(now), cost, Nanos(max_wait)).unwrap() {
                // A queue books past 2^64 - 1 ns: no time to refund at.
                Ok(wait) => match now.checked_add(wait.0) {
                    Some(slot) => slot,
                    None => return Ok(()),
                },
                Err(_) => return Ok(()),
            }
        } else if one.try_acquire(Nanos(now), cost).unwrap().allowed {
            now
        } else {
            return Ok(());
        };
        if let Some(step) = reconfigure {
            now = now.saturating_add(step);
            one.reconfigure(Nanos(now), target.fresh()).unwrap();
            two.reconfigure(Nanos(now), target.fresh()).unwrap();
        }
        one.refund(Nanos(taken_at), cost);
        for (step, c) in probes {
            let t = Nanos(now.saturating_add(step));
            let c = c.min(one.limit());
            let (a, b) = (one.peek(t, c).unwrap(), two.peek(t, c).unwrap());
            prop_assert!(!a.allowed || b.allowed, "at {t:?}, cost {c}: {one:?} admits, {two:?} does not");
            let (a, b) = (one.peek(t, 0).unwrap(), two.peek(t, 0).unwrap());
            prop_assert!(a.remaining <= b.remaining, "at {t:?}: {one:?} has more left than {two:?}");
        }
    }
}
