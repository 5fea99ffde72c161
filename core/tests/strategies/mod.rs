//! Strategies the property tests share (each test file is a crate of its
//! own, which includes this module).

use proptest::prelude::*;
use ratekeeper::{Bandwidth, Nanos};

/// A bandwidth of a small capacity (at most `capacity`), refill (at most
/// `tokens`) and period (at most 12 ns), greedy or interval: small numbers,
/// so that a few steps reach every case of its arithmetic.
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
