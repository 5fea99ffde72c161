//! `TokenBucket`: a newtype over [`ratekeeper::TokenBucket`].

use ratekeeper::Limiter;
use wasm_bindgen::prelude::*;

use crate::convert::{self, Options};
use crate::errors::to_js;

/// A token bucket: holds up to `capacity` tokens, refilled by `refillTokens` every
/// `refillPeriodMs` milliseconds; starts full unless `initialTokens` is given.
#[wasm_bindgen(js_name = TokenBucket)]
pub struct WasmTokenBucket {
    inner: ratekeeper::TokenBucket,
}

#[wasm_bindgen(js_class = TokenBucket)]
impl WasmTokenBucket {
    /// `new TokenBucket({ capacity, refillTokens, refillPeriodMs, initialTokens? })`.
    #[wasm_bindgen(constructor)]
    pub fn new(options: JsValue) -> Result<WasmTokenBucket, JsValue> {
        let options = Options::new(options)?;
        let capacity = options.count("capacity")?;
        let refill_tokens = options.count("refill_tokens")?;
        let refill_period = options.millis("refill_period")?;
        let inner = match options.optional_count("initial_tokens")? {
            None => ratekeeper::TokenBucket::new(capacity, refill_tokens, refill_period),
            Some(initial) => ratekeeper::TokenBucket::with_initial_tokens(
                capacity,
                refill_tokens,
                refill_period,
                initial,
            ),
        };
        inner.map(|inner| WasmTokenBucket { inner }).map_err(to_js)
    }

    /// `tryAcquire(cost = 1, nowMs = performance.now())`: takes `cost` tokens if there
    /// are enough and returns the decision.
    #[wasm_bindgen(js_name = tryAcquire)]
    pub fn try_acquire(&mut self, cost: JsValue, now_ms: JsValue) -> Result<JsValue, JsValue> {
        let cost = convert::cost(&cost)?;
        let now = convert::now(&now_ms)?;
        let decision = self.inner.try_acquire(now, cost).map_err(to_js)?;
        convert::decision(decision)
    }
}
