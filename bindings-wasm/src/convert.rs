//! JS values to core arguments, and core decisions to JS objects.
//!
//! Numbers are checked by the core (`count_from_f64`, `Nanos::from_millis_f64`); this
//! module only rejects values that are not numbers at all (`invalid_type`). `undefined`
//! and `null` both mean "not given", as they do for the napi addon's optional arguments.

use js_sys::{Object, Reflect};
use ratekeeper::{count_from_f64, Decision, Error, Nanos};
use wasm_bindgen::prelude::*;

use crate::errors::{js_name, to_js};

#[wasm_bindgen]
extern "C" {
    // The global `performance`, looked up at each call (browsers, workers, Node >= 16).
    // `catch` turns a missing global into a thrown error instead of an exception
    // unwinding through wasm; `JsValue` lets a replaced clock's non-number be a TypeError.
    #[wasm_bindgen(catch, js_namespace = performance, js_name = now)]
    fn performance_now() -> Result<JsValue, JsValue>;
}

fn is_absent(value: &JsValue) -> bool {
    value.is_undefined() || value.is_null()
}

fn number(value: &JsValue, name: &'static str) -> Result<f64, JsValue> {
    value.as_f64().ok_or_else(|| {
        to_js(Error::InvalidType {
            name,
            expected: "a number",
        })
    })
}

/// A count (cost, capacity, ...) from a JS number.
pub(crate) fn count(value: &JsValue, name: &'static str) -> Result<u64, JsValue> {
    count_from_f64(number(value, name)?, name).map_err(to_js)
}

/// A duration or instant from a JS number of milliseconds.
pub(crate) fn millis(value: &JsValue, name: &'static str) -> Result<Nanos, JsValue> {
    Nanos::from_millis_f64(number(value, name)?, name).map_err(to_js)
}

/// The `cost` argument, 1 when not given.
pub(crate) fn cost(value: &JsValue) -> Result<u64, JsValue> {
    if is_absent(value) {
        Ok(1)
    } else {
        count(value, "cost")
    }
}

/// The `nowMs` argument, `performance.now()` when not given.
pub(crate) fn now(value: &JsValue) -> Result<Nanos, JsValue> {
    if is_absent(value) {
        millis(&performance_now()?, "now")
    } else {
        millis(value, "now")
    }
}

/// A constructor's options object.
pub(crate) struct Options(Object);

impl Options {
    /// Accepts any non-null object; anything else is a `TypeError`.
    pub(crate) fn new(value: JsValue) -> Result<Self, JsValue> {
        if value.is_object() {
            Ok(Options(value.unchecked_into()))
        } else {
            Err(to_js(Error::InvalidType {
                name: "options",
                expected: "an object",
            }))
        }
    }

    /// The field for the core argument `name` (read under its JS spelling).
    fn field(&self, name: &'static str) -> Result<JsValue, JsValue> {
        Reflect::get(&self.0, &JsValue::from_str(js_name(name)))
    }

    /// A required count field.
    pub(crate) fn count(&self, name: &'static str) -> Result<u64, JsValue> {
        count(&self.field(name)?, name)
    }

    /// An optional count field.
    pub(crate) fn optional_count(&self, name: &'static str) -> Result<Option<u64>, JsValue> {
        let value = self.field(name)?;
        if is_absent(&value) {
            Ok(None)
        } else {
            count(&value, name).map(Some)
        }
    }

    /// A required milliseconds field.
    pub(crate) fn millis(&self, name: &'static str) -> Result<Nanos, JsValue> {
        millis(&self.field(name)?, name)
    }
}

/// `{ allowed, remaining, limit, retryAfterMs, resetAfterMs }` as a plain object.
pub(crate) fn decision(d: Decision) -> Result<JsValue, JsValue> {
    let object = Object::new();
    // Counts were admitted by `count_from_f64`, so they are at most 2^53 - 1: exact as f64.
    let fields: [(&str, JsValue); 5] = [
        ("allowed", d.allowed.into()),
        ("remaining", (d.remaining as f64).into()),
        ("limit", (d.limit as f64).into()),
        ("retryAfterMs", d.retry_after.as_millis_f64().into()),
        ("resetAfterMs", d.reset_after.as_millis_f64().into()),
    ];
    for (key, value) in fields {
        Reflect::set(&object, &JsValue::from_str(key), &value)?;
    }
    Ok(object.into())
}
