//! The one mapping from binding failures to JS errors.

use js_sys::{RangeError, Reflect, TypeError};
use ratekeeper::Error;
use wasm_bindgen::JsValue;

use crate::shared::{describe_error, describe_worded, Failure};

/// Turns a core error into the JS error to throw: a `TypeError` for `invalid_type`,
/// a `RangeError` for every other code, with `.code` set to the core's code and a
/// message naming the argument in JS spelling.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub(crate) fn to_js(error: Error) -> JsValue {
    let (message, is_type_error, code) = describe_error(&error);
    error_as(&message, is_type_error, code)
}

/// A `TypeError` (else a `RangeError`) with `message` and `.code`.
#[cfg_attr(ratekeeper_size, optimize(size))]
fn error_as(message: &str, is_type_error: bool, code: &str) -> JsValue {
    let js: JsValue = if is_type_error {
        TypeError::new(message).into()
    } else {
        RangeError::new(message).into()
    };
    // Setting a plain property on a fresh Error object cannot throw.
    let _ = Reflect::set(&js, &JsValue::from_str("code"), &JsValue::from_str(code));
    js
}

/// [`to_js`] for option reading, where a JS exception (a throwing getter)
/// passes through, and a policy configuration of the wrong shape becomes a
/// `TypeError` with code `invalid_config` (its message names the field).
#[cfg_attr(ratekeeper_size, optimize(size))]
pub(crate) fn failure_to_js(failure: Failure<JsValue>) -> JsValue {
    match failure {
        Failure::Core(error) => to_js(error),
        Failure::Config(message) => error_as(&message, true, "invalid_config"),
        Failure::Worded(error, message) => {
            let (message, is_type_error, code) = describe_worded(&error, message);
            error_as(&message, is_type_error, code)
        }
        Failure::Js(thrown) => thrown,
    }
}
