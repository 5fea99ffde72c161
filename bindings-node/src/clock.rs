//! The default clock of `tryAcquire` and `peek`, read natively.
//!
//! The JS default clock is `performance.now()`. Calling it from JS costs
//! about as much as a whole decision, so when a call leaves `nowMs` out and
//! that clock is still the runtime's own (no fake timers, no mock: see
//! `runtimeClock` in `lib/api.cjs`), the JS layer asks the addon to read the
//! clock itself ([`crate::slot::CLOCK`]). That is the monotonic clock
//! `performance.now()` counts on: libuv's `uv_hrtime` reads `CLOCK_MONOTONIC`
//! on Linux, as [`monotonic`] does; elsewhere `Instant` reads the same clock
//! as libuv (`mach_absolute_time` on macOS, `QueryPerformanceCounter` on
//! Windows). [`tie`] measures once where `performance.now()`'s zero lies on
//! it, so a native reading agrees with `performance.now()` to within a
//! fraction of a microsecond; time read a little backwards grants nothing.
//!
//! A reading is whole nanoseconds, handed to the core as they are: neither
//! `Instant`'s subtraction nor a round trip through a float of milliseconds,
//! which together cost a tenth of a decision's call.

use std::cell::Cell;

use ratekeeper::Nanos;

thread_local! {
    // Each JS thread has its own `performance.now()` origin: what to add to
    // a reading of [`monotonic`] to get `performance.now()` in ns.
    static OFFSET: Cell<Option<i64>> = const { Cell::new(None) };
}

/// Readings of `performance.now()` taken to place its zero; the one taken in
/// the shortest gap between two readings of the native clock is kept.
const TRIES: usize = 8;

/// The monotonic clock in nanoseconds, from an arbitrary origin.
#[cfg(target_os = "linux")]
fn monotonic() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec; CLOCK_MONOTONIC always
    // exists on Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    // Both fields are non-negative for CLOCK_MONOTONIC.
    (now.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(now.tv_nsec as u64)
}

/// The monotonic clock in nanoseconds, from the first reading in the process.
#[cfg(not(target_os = "linux"))]
fn monotonic() -> u64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    let elapsed = ORIGIN.get_or_init(Instant::now).elapsed();
    u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
}

/// Ties the native clock to `now` (`performance.now()`, read by the JS
/// layer): after this, [`now`] reads what `now()` would return. Answers
/// whether it did: not when every reading was unusable (one the JS layer
/// would refuse as a time: NaN, infinite, negative, 2^64 ns or more; or so
/// far from the native clock that the offset overflows), as a replaced
/// `performance.now` may return; the JS layer then reads that clock itself,
/// and refuses its readings as it refuses any clock's.
pub fn tie(mut now: impl FnMut() -> napi::Result<f64>) -> napi::Result<bool> {
    let mut best: Option<(u64, i64)> = None;
    for _ in 0..TRIES {
        let before = monotonic();
        let js = now()?;
        let after = monotonic();
        let gap = after.saturating_sub(before);
        let midpoint = before + gap / 2;
        // A reading the JS layer refuses as `nowMs` is no tie either: a
        // finite one, -1 or 1e16 (`as` saturated it to i64::MAX), tied the
        // clock, and tryAcquire() decided where the wasm build refuses.
        let offset = match Nanos::from_millis_f64(js, "now") {
            Ok(reading) => i64::try_from(i128::from(reading.0) - i128::from(midpoint)).ok(),
            Err(_) => None,
        };
        match (offset, best) {
            (Some(offset), None) => best = Some((gap, offset)),
            (Some(offset), Some((shortest, _))) if gap < shortest => best = Some((gap, offset)),
            _ => {}
        }
    }
    OFFSET.set(best.map(|(_, offset)| offset));
    Ok(best.is_some())
}

/// The time on `performance.now()`'s scale; `None` before [`tie`].
#[inline]
pub fn now() -> Option<Nanos> {
    let offset = OFFSET.get()?;
    monotonic().checked_add_signed(offset).map(Nanos)
}
