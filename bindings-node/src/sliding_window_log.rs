//! `SlidingWindowLog`: a shell around [`ratekeeper::SlidingWindowLog`].

use ratekeeper::Limiter;
use std::cell::RefCell;

use napi::Env;
use napi_derive::napi;

use crate::convert::{self, JsNumber, JsObject};
use crate::errors::OrThrow;
use crate::Decision;

/// Options of `new SlidingWindowLog(options)`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct SlidingWindowLogOptions {
    /// The most units admitted in any window; a whole number from 1 to 2^20 (1,048,576).
    pub limit: f64,
    /// The window's length in milliseconds (fractions allowed, rounded to the nanosecond); greater than zero.
    pub window_ms: f64,
}

impl SlidingWindowLogOptions {
    fn read(env: &Env, options: JsObject) -> napi::Result<Self> {
        let object = convert::object(env, options, "options")?;
        Ok(SlidingWindowLogOptions {
            limit: convert::property(env, &object, "limit")?,
            window_ms: convert::property(env, &object, "window")?,
        })
    }
}

/// A sliding-window log: admits at most `limit` units in any window of
/// `windowMs` milliseconds, remembering when each admitted unit arrived.
///
/// Bad arguments throw a `RangeError` (a `TypeError` for a wrong type) whose
/// `code` is the core's error code and whose message names the argument; the
/// log is unchanged by a failed call.
///
/// @example
/// const log = new SlidingWindowLog({ limit: 100, windowMs: 60_000 })
/// const { allowed, retryAfterMs } = log.tryAcquire()
#[napi]
pub struct SlidingWindowLog {
    // See `TokenBucket::inner` for why this is a RefCell behind `&self`.
    inner: RefCell<ratekeeper::SlidingWindowLog>,
}

#[napi]
impl SlidingWindowLog {
    /// An empty log.
    ///
    /// @throws {RangeError} `zero_value`, `too_large` (`limit` above 2^20),
    /// `overflow` or `invalid_value` (negative, NaN, infinite, fractional `limit`).
    /// @throws {TypeError} `invalid_type`: `options` is not an object, or an option is not a number.
    #[napi(constructor)]
    pub fn new(
        env: Env,
        #[napi(ts_arg_type = "SlidingWindowLogOptions")] options: JsObject,
    ) -> napi::Result<Self> {
        let options = SlidingWindowLogOptions::read(&env, options)?;
        let limit = convert::count(&env, options.limit, "limit")?;
        let window = convert::millis(&env, options.window_ms, "window")?;
        Ok(SlidingWindowLog {
            inner: RefCell::new(ratekeeper::SlidingWindowLog::new(limit, window).or_throw(&env)?),
        })
    }

    /// Asks for `cost` units (default 1) at `nowMs`.
    ///
    /// `nowMs` is milliseconds on the `performance.now()` clock; when omitted
    /// (`undefined` or `null`) the binding calls `globalThis.performance.now()`,
    /// so explicit and default readings can be mixed. Time that goes backwards
    /// counts as no time elapsed. `cost` 0 is always allowed and takes nothing.
    ///
    /// @throws {RangeError} `cost_exceeds_limit` when `cost` is above `limit`
    /// (it could never be allowed); `invalid_value` for a negative, NaN, infinite or
    /// fractional `cost` or a bad `nowMs`.
    /// @throws {TypeError} `invalid_type` when `cost` or `nowMs` is not a number.
    #[napi(ts_args_type = "cost?: number, nowMs?: number")]
    pub fn try_acquire(
        &self,
        env: Env,
        cost: JsNumber,
        now_ms: JsNumber,
    ) -> napi::Result<Decision> {
        let cost = convert::optional_number(&env, cost, "cost")?;
        let cost = cost.map_or(Ok(1), |cost| convert::count(&env, cost, "cost"))?;
        let now = convert::now(&env, now_ms)?;
        let decision = self.inner.borrow_mut().try_acquire(now, cost);
        decision.map(Decision::from).or_throw(&env)
    }
}
