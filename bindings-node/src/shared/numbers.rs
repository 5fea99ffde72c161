//! JS numbers to core values and back: counts, milliseconds, a decision's
//! numbers for the scratch ([`Out`]), a reservation's slot.

use ratekeeper::{count_from_f64, u64_to_f64, Decision, Error, Nanos};

use super::{static_name, Now, Out};

/// Checks a duration in milliseconds the JS layer uses itself (`timeoutMs`).
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn check_millis(value: f64, name: &str) -> Result<(), Error> {
    millis(value, static_name(name)).map(drop)
}

/// A count (cost, capacity...) from a JS number: a whole number from 0 to 2^53 - 1.
pub fn count(value: f64, name: &'static str) -> Result<u64, Error> {
    count_from_f64(value, name)
}

/// A duration or instant from a JS number of milliseconds, rounded to the nanosecond.
pub fn millis(value: f64, name: &'static str) -> Result<Nanos, Error> {
    Nanos::from_millis_f64(value, name)
}

/// A bound on a wait: `Infinity` means none.
pub(super) fn max_wait(value: f64) -> Result<Nanos, Error> {
    if value == f64::INFINITY {
        Ok(Nanos::MAX)
    } else {
        millis(value, "max_wait")
    }
}

/// `nanos` as milliseconds for JS.
pub(super) fn ms(nanos: Nanos) -> f64 {
    nanos.as_millis_f64()
}

/// The numbers of a decision made at `now`.
pub(super) fn decision_out(d: &Decision, now: Now) -> Out {
    // Counts fit an f64 exactly: they never exceed the limit, which came from
    // a JS number of at most 2^53 - 1.
    [
        u64_to_f64(d.remaining),
        u64_to_f64(d.limit),
        retry_ms(d.retry_after, now),
        ms(d.reset_after),
    ]
}

/// A decision's `retry_after` as milliseconds to add to `nowMs`, given one:
/// the sum then reaches the instant the core named, even on a clock counting
/// from the epoch ([`Nanos::as_millis_f64_after`]).
#[inline]
fn retry_ms(retry: Nanos, now: Now) -> f64 {
    match now {
        // An allowed call's wait: zero, without a division.
        _ if retry == Nanos::ZERO => 0.0,
        Now::Millis(now_ms) => retry.as_millis_f64_after(now_ms),
        Now::Read(_) => ms(retry),
    }
}

/// [`decision_out`] for a policy's combined decision, whose counts are
/// 2^64 - 1 when it has no limits: `Infinity` then, no bound, rather than a
/// number no limit has.
pub(super) fn policy_decision_out(d: &Decision, now: Now) -> Out {
    let [remaining, limit, retry_after, reset_after] = decision_out(d, now);
    let bound = |n: u64, out: f64| if n == u64::MAX { f64::INFINITY } else { out };
    [
        bound(d.remaining, remaining),
        bound(d.limit, limit),
        retry_after,
        reset_after,
    ]
}

/// A granted reservation for the scratch: `[waitMs, atMs, slotHigh,
/// slotLow]`. `atMs` is the slot as a float, which on a clock counting from
/// the epoch (1.7e12 ms) is a quarter of a microsecond apart from the next
/// one: refunding there would miss the booking. The slot's exact nanoseconds
/// are its high and low 32 bits, which `Reservation.cancel()` hands back
/// ([`taken_at`]).
pub(super) fn booked(now: Nanos, wait: Nanos) -> Out {
    let slot = now.saturating_add(wait);
    let high = u64_to_f64(slot.0 >> 32);
    let low = u64_to_f64(slot.0 & 0xffff_ffff);
    [ms(wait), ms(slot), high, low]
}

/// When units being given back were taken, from `[takenAtMs, slotHigh,
/// slotLow]`: exactly the slot `slotHigh * 2^32 + slotLow` of a reservation
/// ([`booked`]), or, when `slotHigh` is NaN, `takenAtMs`.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn taken_at(taken: &[f64]) -> Result<Nanos, Error> {
    let &[taken_at_ms, high, low] = taken else {
        return Err(Error::InvalidValue {
            name: "taken_at",
            reason: "must be [takenAtMs, slotHigh, slotLow]",
        });
    };
    if high.is_nan() {
        return millis(taken_at_ms, "taken_at");
    }
    let high = count_from_f64(high, "taken_at")?;
    let low = count_from_f64(low, "taken_at")?;
    match (u32::try_from(high), u32::try_from(low)) {
        (Ok(high), Ok(low)) => Ok(Nanos((u64::from(high) << 32) | u64::from(low))),
        _ => Err(Error::InvalidValue {
            name: "taken_at",
            reason: "is not a slot this limiter booked",
        }),
    }
}

/// How errors name the numbers of a decision given to `headers`.
pub(super) const DECISION: [&str; 4] = [
    "decision.remaining",
    "decision.limit",
    "decision.retryAfterMs",
    "decision.resetAfterMs",
];

/// [`DECISION`] for one limit's decision within a policy's.
pub(super) const LIMIT_DECISION: [&str; 4] = [
    "decision.limits[].remaining",
    "decision.limits[].limit",
    "decision.limits[].retryAfterMs",
    "decision.limits[].resetAfterMs",
];

/// A decision from JS numbers, each named in errors by `names`.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub(super) fn decision_in(
    allowed: bool,
    fields: Out,
    names: [&'static str; 4],
) -> Result<Decision, Error> {
    let [remaining, limit, retry_after, reset_after] = fields;
    Ok(Decision {
        allowed,
        remaining: count(remaining, names[0])?,
        limit: count(limit, names[1])?,
        retry_after: wait_in(retry_after, names[2])?,
        reset_after: wait_in(reset_after, names[3])?,
    })
}

/// The last float of milliseconds within 2^64 - 1 ns: 18446744073709.55
/// is the float 18446744073709.55078125, read as 18446744073709550781 ns
/// (the next float is read as 18446744073709554688).
const END_MS: f64 = 18_446_744_073_709.55;

/// A decision's wait read back from its milliseconds: as [`millis`] reads
/// them, but for the float just past 2^64 ns, which is 2^64 - 1 ns. A
/// `retryAfterMs` reaches its instant from `nowMs` ([`retry_ms`]), and no
/// float of milliseconds lands on the end of the clock, 2^64 - 1 ns: a
/// wait until then is the float after [`END_MS`], and `headers` must take
/// every decision the library made. Any later float is refused as too
/// large.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub(super) fn wait_in(value: f64, name: &'static str) -> Result<Nanos, Error> {
    millis(value, name).or_else(|error| {
        if value.to_bits() == END_MS.to_bits() + 1 {
            Ok(Nanos::MAX)
        } else {
            Err(error)
        }
    })
}
