//! The one mapping from binding failures to JS exceptions.
//!
//! Every core error becomes a `RangeError`, except `invalid_type`, which
//! becomes a `TypeError`. Either way the error object carries `.code` (the
//! core's code) and a message naming the argument in JS spelling (see
//! [`crate::shared::describe_error`]).

use napi::{Env, Status};
use ratekeeper::Error;

use crate::shared::{describe_error, describe_worded, Failure};

/// Throws `error` into JS and returns the napi error that tells napi-rs an
/// exception is already pending.
pub fn throw(env: &Env, error: Error) -> napi::Error {
    let (message, is_type_error, code) = describe_error(&error);
    throw_as(env, message, is_type_error, code)
}

/// Throws a `TypeError` (else a `RangeError`) with `message` and `.code`.
fn throw_as(env: &Env, message: String, is_type_error: bool, code: &str) -> napi::Error {
    let thrown = if is_type_error {
        env.throw_type_error(&message, Some(code))
    } else {
        env.throw_range_error(&message, Some(code))
    };
    match thrown {
        Ok(()) => napi::Error::new(Status::PendingException, message),
        Err(failed) => failed,
    }
}

/// `?`-friendly [`throw`] for core results and option reading.
pub trait OrThrow<T> {
    /// The value, or the error thrown into JS.
    fn or_throw(self, env: &Env) -> napi::Result<T>;
}

impl<T> OrThrow<T> for Result<T, Error> {
    fn or_throw(self, env: &Env) -> napi::Result<T> {
        self.map_err(|error| throw(env, error))
    }
}

impl<T> OrThrow<T> for Result<T, Failure<napi::Error>> {
    fn or_throw(self, env: &Env) -> napi::Result<T> {
        self.map_err(|failure| match failure {
            Failure::Core(error) => throw(env, error),
            // The message names the field; the shape is wrong: a TypeError.
            Failure::Config(message) => throw_as(env, message, true, "invalid_config"),
            Failure::Worded(error, message) => {
                let (message, is_type_error, code) = describe_worded(&error, message);
                throw_as(env, message, is_type_error, code)
            }
            // A JS exception (a throwing getter) is already pending.
            Failure::Js(error) => error,
        })
    }
}
