//! Exact, host-timed rate limiting.
//!
//! `ratekeeper` is a set of small state machines that decide whether a request
//! may proceed. They never read a clock, allocate during a decision, spawn a
//! thread or use a float in their state: every call receives `now` from its
//! caller as integer [`Nanos`], and every answer is exact integer arithmetic.
//!
//! | type | guarantee |
//! |---|---|
//! | [`TokenBucket`] | at most `capacity + refill_tokens * t / refill_period` units in any span of length `t` |
//! | [`SlidingWindowLog`] | at most `limit` units in any window of length `window` (needs the `alloc` feature) |
//!
//! ```
//! use ratekeeper::{Nanos, TokenBucket};
//!
//! // 5 tokens, refilled at 1 token per second.
//! let mut bucket = TokenBucket::new(5, 1, Nanos::from_secs(1)).unwrap();
//! for _ in 0..5 {
//!     assert!(bucket.try_acquire(Nanos::ZERO, 1).unwrap().allowed);
//! }
//! let denied = bucket.try_acquire(Nanos::ZERO, 1).unwrap();
//! assert!(!denied.allowed);
//! assert_eq!(denied.retry_after, Nanos::from_secs(1));
//! ```
//!
//! # Time
//! `now` is any monotonic reading in nanoseconds; only differences matter.
//! Time that goes backwards counts as zero elapsed: the limiter keeps the
//! latest time it has seen, grants nothing for the step back, and measures
//! `retry_after` and `reset_after` from the `now` it was given.
//!
//! # Features
//! - `alloc`: [`SlidingWindowLog`], whose ring of history is allocated once,
//!   when it is built.
#![no_std]
#![deny(missing_docs)]
#![forbid(unsafe_code)]

#[cfg(feature = "alloc")]
extern crate alloc;

mod decision;
mod error;
mod host;
mod nanos;
#[cfg(feature = "alloc")]
mod sliding_window_log;
mod token_bucket;

pub use decision::Decision;
pub use error::Error;
pub use host::count_from_f64;
pub use nanos::Nanos;
#[cfg(feature = "alloc")]
pub use sliding_window_log::{SlidingWindowLog, MAX_LOG_LIMIT};
pub use token_bucket::TokenBucket;
