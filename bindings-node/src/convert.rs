//! JS values to core values, and core decisions to JS objects.
//!
//! Arguments arrive as `Option<Either<T, Unknown>>` so that a wrong JS type
//! reaches this module (and becomes a `TypeError` with code `invalid_type`)
//! instead of failing inside napi-rs with its own message. Numbers become
//! core values only through the core's checked conversions.

use napi::bindgen_prelude::{Either, Function, JsObjectValue, Object, Unknown};
use napi::Env;
use ratekeeper::{count_from_f64, Error, Nanos};

use crate::errors::{js_argument, throw, OrThrow};
use crate::Decision;

/// An argument that should be a number; `None` is `undefined` or `null`.
pub type JsNumber<'a> = Option<Either<f64, Unknown<'a>>>;

/// An argument that should be an object; `None` is `undefined` or `null`.
pub type JsObject<'a> = Option<Either<Object<'a>, Unknown<'a>>>;

/// A number, or `None` for `undefined` and `null`.
pub fn optional_number(
    env: &Env,
    value: JsNumber,
    name: &'static str,
) -> napi::Result<Option<f64>> {
    match value {
        None => Ok(None),
        Some(Either::A(number)) => Ok(Some(number)),
        Some(Either::B(_)) => Err(wrong_type(env, name, "a number")),
    }
}

/// The options object of a constructor.
pub fn object<'a>(env: &Env, value: JsObject<'a>, name: &'static str) -> napi::Result<Object<'a>> {
    match value {
        Some(Either::A(object)) => Ok(object),
        _ => Err(wrong_type(env, name, "an object")),
    }
}

/// The optional number property of `object` for the core argument `name`
/// (read under its JS spelling, e.g. `refillPeriodMs` for `refill_period`).
pub fn optional_property(
    env: &Env,
    object: &Object,
    name: &'static str,
) -> napi::Result<Option<f64>> {
    let value: JsNumber = object.get_named_property_unchecked(js_argument(name))?;
    optional_number(env, value, name)
}

/// Like [`optional_property`], for a property that must be present.
pub fn property(env: &Env, object: &Object, name: &'static str) -> napi::Result<f64> {
    optional_property(env, object, name)?.ok_or_else(|| wrong_type(env, name, "a number"))
}

/// A count (cost, capacity...): a whole number from 0 to 2^53 - 1.
pub fn count(env: &Env, value: f64, name: &'static str) -> napi::Result<u64> {
    count_from_f64(value, name).or_throw(env)
}

/// A duration or instant in milliseconds, rounded to the nearest nanosecond.
pub fn millis(env: &Env, value: f64, name: &'static str) -> napi::Result<Nanos> {
    Nanos::from_millis_f64(value, name).or_throw(env)
}

/// `nowMs` if given, else `performance.now()`, looked up on `globalThis` at
/// each call so that both readings share one clock (and fake timers that
/// replace `performance.now` are honoured).
pub fn now(env: &Env, now_ms: JsNumber) -> napi::Result<Nanos> {
    let ms = match optional_number(env, now_ms, "now")? {
        Some(ms) => ms,
        None => {
            let performance: Object = env.get_global()?.get_named_property("performance")?;
            let clock: Function<(), JsNumber> = performance.get_named_property("now")?;
            let reading = clock.apply(performance, ())?;
            optional_number(env, reading, "now")?
                .ok_or_else(|| wrong_type(env, "now", "a number"))?
        }
    };
    millis(env, ms, "now")
}

fn wrong_type(env: &Env, name: &'static str, expected: &'static str) -> napi::Error {
    throw(env, Error::InvalidType { name, expected })
}

impl From<ratekeeper::Decision> for Decision {
    fn from(decision: ratekeeper::Decision) -> Self {
        // Counts fit in an f64 exactly: they never exceed the limit, which
        // came from a JS number no larger than 2^53 - 1.
        Decision {
            allowed: decision.allowed,
            remaining: decision.remaining as f64,
            limit: decision.limit as f64,
            retry_after_ms: decision.retry_after.as_millis_f64(),
            reset_after_ms: decision.reset_after.as_millis_f64(),
        }
    }
}
