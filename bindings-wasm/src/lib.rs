//! WebAssembly binding of [`ratekeeper`], built with wasm-bindgen.
//!
//! The JS surface is the napi addon's, in JS spelling: `new TokenBucket({ capacity,
//! refillTokens, refillPeriodMs, initialTokens })`, `new SlidingWindowLog({ limit,
//! windowMs })` and `limiter.tryAcquire(cost = 1, nowMs = performance.now())`, which
//! returns `{ allowed, remaining, limit, retryAfterMs, resetAfterMs }`.
//! Each class is a newtype around the core type: it converts the arguments, calls the
//! core once and converts the result. Bad arguments throw a `RangeError` or `TypeError`
//! carrying `.code` (see `errors.rs`); nothing panics on host input.

mod convert;
mod errors;
mod sliding_window_log;
mod token_bucket;

pub use sliding_window_log::WasmSlidingWindowLog;
pub use token_bucket::WasmTokenBucket;
