//! `SlidingWindowLog`: a newtype over [`ratekeeper::SlidingWindowLog`].

use ratekeeper::Limiter;
use wasm_bindgen::prelude::*;

use crate::convert::{self, Options};
use crate::errors::to_js;

/// A sliding-window log: admits at most `limit` units of cost in any window of
/// `windowMs` milliseconds.
#[wasm_bindgen(js_name = SlidingWindowLog)]
pub struct WasmSlidingWindowLog {
    inner: ratekeeper::SlidingWindowLog,
}

#[wasm_bindgen(js_class = SlidingWindowLog)]
impl WasmSlidingWindowLog {
    /// `new SlidingWindowLog({ limit, windowMs })`.
    #[wasm_bindgen(constructor)]
    pub fn new(options: JsValue) -> Result<WasmSlidingWindowLog, JsValue> {
        let options = Options::new(options)?;
        let limit = options.count("limit")?;
        let window = options.millis("window")?;
        ratekeeper::SlidingWindowLog::new(limit, window)
            .map(|inner| WasmSlidingWindowLog { inner })
            .map_err(to_js)
    }

    /// `tryAcquire(cost = 1, nowMs = performance.now())`: records `cost` units if they
    /// fit in the window and returns the decision.
    #[wasm_bindgen(js_name = tryAcquire)]
    pub fn try_acquire(&mut self, cost: JsValue, now_ms: JsValue) -> Result<JsValue, JsValue> {
        let cost = convert::cost(&cost)?;
        let now = convert::now(&now_ms)?;
        let decision = self.inner.try_acquire(now, cost).map_err(to_js)?;
        convert::decision(decision)
    }
}
