//! Conversions from host-language numbers (Python floats, JS numbers).
//!
//! Floats exist only here, at the boundary: each is checked and turned into an
//! integer once, so that every binding rejects the same inputs the same way.

use crate::{Error, Nanos};

/// 2^64 as an `f64`: the first value that does not fit in a `u64`.
const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;
/// 2^52 as an `f64`: every `f64` at or above it is a whole number.
const TWO_POW_52: f64 = 4_503_599_627_370_496.0;
/// The largest integer a JS number holds exactly (`Number.MAX_SAFE_INTEGER`).
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

fn check_finite_non_negative(value: f64, name: &'static str) -> Result<(), Error> {
    let reason = if value.is_nan() {
        "must be a number, not NaN"
    } else if value.is_infinite() {
        "must be finite"
    } else if value < 0.0 {
        "must not be negative"
    } else {
        return Ok(());
    };
    Err(Error::InvalidValue { name, reason })
}

/// Rounds a non-negative finite value to the nearest integer (halves away from
/// zero), or fails when it does not fit in a `u64`.
fn round_to_u64(value: f64, name: &'static str) -> Result<u64, Error> {
    if value >= TWO_POW_64 {
        return Err(Error::InvalidValue {
            name,
            reason: "is too large (the limit is 2^64 nanoseconds, about 584 years)",
        });
    }
    // `f64::round` lives in std; every f64 at or above 2^52 is already whole.
    if value >= TWO_POW_52 {
        return Ok(value as u64);
    }
    // Below 2^52 the signed conversions are exact, and each is one x86-64
    // instruction where an unsigned one takes several (`perf annotate` found
    // those sequences among the hottest of the Node addon's decision).
    let whole = value as i64;
    let fraction = value - whole as f64;
    Ok(whole as u64 + u64::from(fraction >= 0.5))
}

impl Nanos {
    /// Seconds as a float, rounded to the nearest nanosecond.
    ///
    /// Fails with [`Error::InvalidValue`] naming `name` for NaN, infinite,
    /// negative or too large values.
    pub fn from_secs_f64(secs: f64, name: &'static str) -> Result<Nanos, Error> {
        check_finite_non_negative(secs, name)?;
        round_to_u64(secs * 1e9, name).map(Nanos)
    }

    /// Milliseconds as a float, rounded to the nearest nanosecond.
    ///
    /// Fails like [`Nanos::from_secs_f64`].
    pub fn from_millis_f64(millis: f64, name: &'static str) -> Result<Nanos, Error> {
        check_finite_non_negative(millis, name)?;
        round_to_u64(millis * 1e6, name).map(Nanos)
    }

    /// This duration in seconds, as a float.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// This duration in milliseconds, as a float.
    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
}

/// A count (a cost, a capacity) given as a float, as JS numbers are.
///
/// It must be a whole number from 0 to 2^53 - 1; anything else fails with
/// [`Error::InvalidValue`] naming `name`.
pub fn count_from_f64(value: f64, name: &'static str) -> Result<u64, Error> {
    check_finite_non_negative(value, name)?;
    if value > MAX_SAFE_INTEGER {
        return Err(Error::InvalidValue {
            name,
            reason: "must be a safe integer (at most 2^53 - 1)",
        });
    }
    // At most 2^53 - 1: the signed conversions are exact (see round_to_u64).
    let whole = value as i64;
    if whole as f64 != value {
        return Err(Error::InvalidValue {
            name,
            reason: "must be a whole number",
        });
    }
    Ok(whole as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_round_to_the_nearest_nanosecond() {
        assert_eq!(Nanos::from_secs_f64(0.8, "now"), Ok(Nanos(800_000_000)));
        assert_eq!(Nanos::from_secs_f64(1e-9, "now"), Ok(Nanos(1)));
        assert_eq!(Nanos::from_secs_f64(0.4e-9, "now"), Ok(Nanos(0)));
        assert_eq!(Nanos::from_millis_f64(1.5e-6, "now"), Ok(Nanos(2)));
        assert_eq!(Nanos::from_secs_f64(-0.0, "now"), Ok(Nanos(0)));
    }

    #[test]
    fn bad_floats_name_the_argument() {
        for bad in [f64::NAN, f64::INFINITY, -1.0, 1e20] {
            let err = Nanos::from_secs_f64(bad, "window").unwrap_err();
            assert_eq!(err.code(), "invalid_value");
            assert_eq!(err.argument(), Some("window"));
        }
    }

    #[test]
    fn rounding_is_the_unsigned_arithmetic() {
        // Each side of 2^52, where the conversions differ.
        for ms in [
            0.0,
            0.4e-6,
            0.5e-6,
            1.5e-6,
            4503.5996,
            4503.599627370497,
            9.2e12,
            1.8446e13,
        ] {
            let ns = ms * 1e6;
            let whole = ns as u64;
            let rounded = if ns - whole as f64 >= 0.5 {
                whole + 1
            } else {
                whole
            };
            assert_eq!(
                Nanos::from_millis_f64(ms, "now"),
                Ok(Nanos(rounded)),
                "{ms}"
            );
        }
    }

    #[test]
    fn counts_must_be_safe_whole_numbers() {
        assert_eq!(count_from_f64(3.0, "cost"), Ok(3));
        assert_eq!(count_from_f64(MAX_SAFE_INTEGER, "cost"), Ok((1 << 53) - 1));
        for bad in [0.5, -1.0, f64::NAN, f64::NEG_INFINITY, 1e16] {
            assert_eq!(
                count_from_f64(bad, "cost").unwrap_err().code(),
                "invalid_value"
            );
        }
    }
}
