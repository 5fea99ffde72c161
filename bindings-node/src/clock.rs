//! The default clock of `tryAcquire` and `peek`, read natively.
//!
//! The JS default clock is `performance.now()`. Calling it from JS costs
//! about as much as a whole decision, so when a call leaves `nowMs` out and
//! `performance.now` is still the runtime's own (fake timers replace it, and
//! are then honoured), the JS layer asks the addon to read the clock itself
//! ([`crate::slot::CLOCK`]). That is the monotonic clock `performance.now()`
//! counts on: `Instant`, like libuv's `uv_hrtime`, reads `CLOCK_MONOTONIC`
//! on Linux, `mach_absolute_time` on macOS and `QueryPerformanceCounter` on
//! Windows. [`tie`] measures once where `performance.now()`'s zero
//! lies on it, so a native reading agrees with `performance.now()` to within
//! a fraction of a microsecond; time read a little backwards grants nothing.

use std::cell::Cell;
use std::time::{Duration, Instant};

thread_local! {
    // Each JS thread has its own `performance.now()` origin.
    static CLOCK: Cell<Option<(Instant, f64)>> = const { Cell::new(None) };
}

/// Readings of `performance.now()` taken to place its zero; the one taken in
/// the shortest gap between two readings of the native clock is kept.
const TRIES: usize = 8;

/// Ties the native clock to `now` (`performance.now()`, read by the JS
/// layer): after this, [`now_ms`] reads what `now()` would return.
pub fn tie(mut now: impl FnMut() -> napi::Result<f64>) -> napi::Result<()> {
    let origin = Instant::now();
    let mut best = (Duration::MAX, 0.0);
    for _ in 0..TRIES {
        let before = origin.elapsed();
        let js = now()?;
        let after = origin.elapsed();
        if after - before < best.0 {
            let midpoint_ms = (before + after).as_secs_f64() * 500.0;
            best = (after - before, js - midpoint_ms);
        }
    }
    CLOCK.set(Some((origin, best.1)));
    Ok(())
}

/// The time on `performance.now()`'s scale, in milliseconds; `None` before
/// [`tie`].
pub fn now_ms() -> Option<f64> {
    CLOCK
        .get()
        .map(|(origin, offset)| offset + origin.elapsed().as_secs_f64() * 1e3)
}
