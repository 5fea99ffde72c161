//! The one mapping from core errors to JS exceptions.
//!
//! Every core error becomes a `RangeError`, except `invalid_type`, which
//! becomes a `TypeError`. Either way the error object carries `.code` (the
//! core's code) and a message naming the argument in JS spelling.

use napi::{Env, Status};
use ratekeeper::Error;

/// The JS spelling of a core argument name (`refill_period` -> `refillPeriodMs`).
pub fn js_argument(rust_name: &'static str) -> &'static str {
    match rust_name {
        "refill_tokens" => "refillTokens",
        "refill_period" => "refillPeriodMs",
        "initial_tokens" => "initialTokens",
        "window" => "windowMs",
        "now" => "nowMs",
        // capacity, limit, cost and the binding's own `options` read the same.
        other => other,
    }
}

/// Throws `error` into JS and returns the napi error that tells napi-rs an
/// exception is already pending.
pub fn throw(env: &Env, error: Error) -> napi::Error {
    let argument = error.argument().map_or("value", js_argument);
    let message = error.display_with(argument).to_string();
    let thrown = if matches!(error, Error::InvalidType { .. }) {
        env.throw_type_error(&message, Some(error.code()))
    } else {
        env.throw_range_error(&message, Some(error.code()))
    };
    match thrown {
        Ok(()) => napi::Error::new(Status::PendingException, message),
        Err(failed) => failed,
    }
}

/// `?`-friendly [`throw`] for core results.
pub trait OrThrow<T> {
    /// The value, or the error thrown into JS.
    fn or_throw(self, env: &Env) -> napi::Result<T>;
}

impl<T> OrThrow<T> for Result<T, Error> {
    fn or_throw(self, env: &Env) -> napi::Result<T> {
        self.map_err(|error| throw(env, error))
    }
}
