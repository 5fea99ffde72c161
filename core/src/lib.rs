//! Exact, host-timed rate limiting.
//!
//! `ratekeeper` is a set of small state machines that decide whether a request
//! may proceed. They never read a clock, allocate during a decision, spawn a
//! thread or use a float in their state: every call receives `now` from its
//! caller as integer [`Nanos`], and every answer is exact integer arithmetic.
//!
//! Every algorithm implements [`Limiter`]: `try_acquire`, `peek`, `reserve`
//! (book a future slot, first come first served) and `refund`; each also has
//! `reconfigure`.
//!
//! | type | guarantee |
//! |---|---|
//! | [`TokenBucket`] | per [`Bandwidth`], at most `capacity + refill_tokens * t / refill_period` units in any span of length `t` (interval refill: `capacity + min(refill_tokens, capacity) * ceil((t - 1 ns) / refill_period)`); several bandwidths at once, all or nothing |
//! | [`Gcra`] | the same answers as a one-bandwidth token bucket refilling 1 unit per interval, from 16 bytes of state |
//! | [`LeakyBucket`] | a queue: units leave exactly `interval` apart, first come first served |
//! | `SlidingWindowLog` | at most `limit` units in any window of length `window` (needs the `alloc` feature) |
//! | [`SlidingWindowCounter`] | at most `limit` per aligned window and `max(limit, 2 * limit - ceil(2 * limit / window))` in any window (`window` in ns), from O(1) state |
//! | [`FixedWindow`] | at most `limit` per aligned window, so up to `2 * limit` across a boundary |
//! | [`Rate`], [`Calendar`] | rate strings as `limits` reads them (`"10/second"`, `"100 per minute"`, lists with [`parse_rates`]); UTC days, ISO weeks and months as the windows of the two window algorithms |
//!
//! ```
//! use ratekeeper::{Limiter, Nanos, TokenBucket};
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
//! Beyond one decision: [`Limiter::reserve`] books a future slot for a
//! caller that would rather wait than be denied, and
//! [`refund`](Limiter::refund) gives back what was not used; [`Portable`]
//! writes a limiter's state to bytes and restores it (another process, a
//! file, a cache); with `alloc`, `KeyedLimiter` and `AnyKeyed` keep one
//! limiter per key (user, IP address) and `Policy` decides several keyed
//! limits at once, from code, rate strings or (`serde`) a configuration
//! file. Each has its example on its page.
//!
//! # Time
//! `now` is any monotonic reading in nanoseconds; only differences matter.
//! Time that goes backwards counts as zero elapsed: the limiter keeps the
//! latest time it has seen, grants nothing for the step back, and measures
//! `retry_after` and `reset_after` from the `now` it was given.
//!
//! # Features
//! None by default: `no_std` without allocation, every algorithm but the
//! log, rate strings and calendar windows.
//! - `alloc`: `SlidingWindowLog` (its ring of history is allocated once,
//!   when it is built), `AnyLimiter`, `KeyedLimiter` and `AnyKeyed` (keyed
//!   stores, on `hashbrown`), `Policy` (several limits, all or nothing),
//!   `Vec`-returning `to_bytes`, and `guarantee` (`Guarantee::of`: the
//!   exact most-in-window, burst, sustained rate and lockout waits).
//! - `serde` (implies `alloc`): `Deserialize` and `Serialize` for
//!   `PolicyConfig` and `LimitConfig`, policies from JSON or TOML.
#![no_std]
#![cfg_attr(docsrs, feature(doc_cfg))]
// The wasm build (scripts/wasm.sh, nightly rustc) compiles cold operations
// (configuration, state codec, reconfigure, reserve, refund...) for size.
#![cfg_attr(ratekeeper_size, feature(optimize_attribute))]
#![deny(missing_docs)]
#![forbid(unsafe_code)]

#[cfg(feature = "alloc")]
extern crate alloc;

mod aligned;
#[cfg(feature = "alloc")]
mod any;
#[cfg(feature = "alloc")]
mod any_keyed;
mod bandwidth;
#[cfg(feature = "alloc")]
mod byte_key;
mod calendar;
#[cfg(feature = "alloc")]
mod config;
mod decision;
mod divisor;
mod error;
mod fixed_window;
mod gcra;
pub mod guarantee;
mod headers;
mod host;
#[cfg(feature = "alloc")]
mod key_table;
#[cfg(feature = "alloc")]
mod keyed;
mod leaky_bucket;
mod limiter;
mod nanos;
#[cfg(feature = "alloc")]
mod policy;
mod rate;
pub mod redis;
mod sliding_window_counter;
#[cfg(feature = "alloc")]
mod sliding_window_log;
mod state;
mod token_bucket;

#[cfg(feature = "alloc")]
pub use any::{AnyLimiter, MAX_BANDWIDTHS};
#[cfg(feature = "alloc")]
pub use any_keyed::{AnyKeyed, HashSeed};
pub use bandwidth::{Bandwidth, Refill};
pub use calendar::Calendar;
#[cfg(feature = "alloc")]
pub use config::{Algorithm, LimitConfig, PolicyConfig};
pub use decision::Decision;
/// The bound on a [`KeyedLimiter`] lookup's key, from the `equivalent`
/// crate (1.x, the trait `indexmap` takes): any `Q: Eq` where `K:
/// Borrow<Q>`, or a type of yours that implements it. Re-exported, so that
/// naming it takes no dependency of yours.
#[cfg(feature = "alloc")]
pub use equivalent::Equivalent;
pub use error::Error;
pub use fixed_window::FixedWindow;
pub use gcra::Gcra;
pub use headers::Headers;
// For the language bindings, which take numbers as doubles.
#[doc(hidden)]
pub use host::{count_from_f64, u64_to_f64};
#[cfg(feature = "alloc")]
pub use keyed::{DefaultHashBuilder, DefaultHasher, Eviction, Keyed, KeyedLimiter};
pub use leaky_bucket::LeakyBucket;
pub use limiter::Limiter;
pub use nanos::Nanos;
#[cfg(feature = "alloc")]
pub use policy::{Policy, PolicyDecision};
pub use rate::{parse_rates, Rate};
pub use sliding_window_counter::SlidingWindowCounter;
#[cfg(feature = "alloc")]
pub use sliding_window_log::{SlidingWindowLog, MAX_LOG_LIMIT};
pub use state::{Portable, MAX_STATE_LEN, STATE_VERSION};
#[cfg(feature = "alloc")]
pub use token_bucket::BucketState;
pub use token_bucket::TokenBucket;

// The crate's README (what crates.io shows) is tested as the docs are.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
