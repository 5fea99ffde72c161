//! The one mapping from core errors to JS errors.

use js_sys::{RangeError, Reflect, TypeError};
use ratekeeper::Error;
use wasm_bindgen::JsValue;

/// The JS spelling of a core (Rust) argument name.
pub(crate) fn js_name(rust: &'static str) -> &'static str {
    match rust {
        "refill_tokens" => "refillTokens",
        "refill_period" => "refillPeriodMs",
        "initial_tokens" => "initialTokens",
        "window" => "windowMs",
        "now" => "nowMs",
        // capacity, limit, cost (and the binding's own "options") read the same.
        other => other,
    }
}

/// Turns a core error into the JS error to throw: a `TypeError` for `invalid_type`,
/// a `RangeError` for every other code, with `.code` set to the core's code and a
/// message naming the argument in JS spelling.
pub(crate) fn to_js(err: Error) -> JsValue {
    let message = match err.argument() {
        Some(rust) => err.display_with(js_name(rust)).to_string(),
        None => err.to_string(),
    };
    let js: JsValue = match err {
        Error::InvalidType { .. } => TypeError::new(&message).into(),
        _ => RangeError::new(&message).into(),
    };
    let code = JsValue::from_str(err.code());
    // Setting a plain property on a fresh Error object cannot throw.
    let _ = Reflect::set(&js, &JsValue::from_str("code"), &code);
    js
}
