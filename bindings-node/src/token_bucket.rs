//! `TokenBucket`: a shell around [`ratekeeper::TokenBucket`].

use ratekeeper::Limiter;
use std::cell::RefCell;

use napi::Env;
use napi_derive::napi;

use crate::convert::{self, JsNumber, JsObject};
use crate::errors::OrThrow;
use crate::Decision;

/// Options of `new TokenBucket(options)`. Counts are whole numbers from 0 to 2^53 - 1.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct TokenBucketOptions {
    /// The most tokens the bucket holds; greater than zero.
    pub capacity: f64,
    /// Tokens added every `refillPeriodMs`; greater than zero.
    pub refill_tokens: f64,
    /// Milliseconds between refills (fractions allowed, rounded to the nanosecond); greater than zero.
    pub refill_period_ms: f64,
    /// Tokens at the start, at most `capacity`. Default: `capacity` (a full bucket).
    pub initial_tokens: Option<f64>,
}

impl TokenBucketOptions {
    fn read(env: &Env, options: JsObject) -> napi::Result<Self> {
        let object = convert::object(env, options, "options")?;
        Ok(TokenBucketOptions {
            capacity: convert::property(env, &object, "capacity")?,
            refill_tokens: convert::property(env, &object, "refill_tokens")?,
            refill_period_ms: convert::property(env, &object, "refill_period")?,
            initial_tokens: convert::optional_property(env, &object, "initial_tokens")?,
        })
    }
}

/// A token bucket: holds up to `capacity` tokens and gains `refillTokens`
/// every `refillPeriodMs`; a request of cost `n` is admitted when `n` tokens
/// are there, and takes them.
///
/// Bad arguments throw a `RangeError` (a `TypeError` for a wrong type) whose
/// `code` is the core's error code (`zero_value`, `too_large`, `overflow`,
/// `cost_exceeds_limit`, `invalid_value`, `invalid_type`) and whose message
/// names the argument; the bucket is unchanged by a failed call.
///
/// @example
/// const bucket = new TokenBucket({ capacity: 5, refillTokens: 1, refillPeriodMs: 1000 })
/// const { allowed, retryAfterMs } = bucket.tryAcquire()
#[napi]
pub struct TokenBucket {
    // A RefCell behind `&self` (not `&mut self`): the default clock calls into
    // JS, which could re-enter this object. The cell is only borrowed around
    // the core call, which runs no JS, so the borrow cannot fail.
    inner: RefCell<ratekeeper::TokenBucket>,
}

#[napi]
impl TokenBucket {
    /// A bucket that starts with `initialTokens` tokens (default: full).
    ///
    /// @throws {RangeError} `zero_value`, `too_large` (`initialTokens` above `capacity`),
    /// `overflow` or `invalid_value` (negative, NaN, infinite, fractional count).
    /// @throws {TypeError} `invalid_type`: `options` is not an object, or an option is not a number.
    #[napi(constructor)]
    pub fn new(
        env: Env,
        #[napi(ts_arg_type = "TokenBucketOptions")] options: JsObject,
    ) -> napi::Result<Self> {
        let options = TokenBucketOptions::read(&env, options)?;
        let capacity = convert::count(&env, options.capacity, "capacity")?;
        let refill_tokens = convert::count(&env, options.refill_tokens, "refill_tokens")?;
        let refill_period = convert::millis(&env, options.refill_period_ms, "refill_period")?;
        let bucket = match options.initial_tokens {
            None => ratekeeper::TokenBucket::new(capacity, refill_tokens, refill_period),
            Some(initial) => {
                let initial = convert::count(&env, initial, "initial_tokens")?;
                ratekeeper::TokenBucket::with_initial_tokens(
                    capacity,
                    refill_tokens,
                    refill_period,
                    initial,
                )
            }
        };
        Ok(TokenBucket {
            inner: RefCell::new(bucket.or_throw(&env)?),
        })
    }

    /// Asks for `cost` tokens (default 1) at `nowMs`.
    ///
    /// `nowMs` is milliseconds on the `performance.now()` clock; when omitted
    /// (`undefined` or `null`) the binding calls `globalThis.performance.now()`,
    /// so explicit and default readings can be mixed. Time that goes backwards
    /// counts as no time elapsed. `cost` 0 is always allowed and takes nothing.
    ///
    /// @throws {RangeError} `cost_exceeds_limit` when `cost` is above the capacity
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
