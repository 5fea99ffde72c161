//! Findings of an external review: each test is a minimal case.

#![cfg(feature = "alloc")]

use ratekeeper::{FixedWindow, Limiter, Nanos, SlidingWindowCounter};

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
