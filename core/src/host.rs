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

/// Rounds a value in `[0, 2^52)` to the nearest integer (halves up).
#[inline(always)]
fn round_below_2_pow_52(value: f64) -> u64 {
    // The signed conversions are exact here, and each is one x86-64
    // instruction where an unsigned one takes several (`perf annotate` found
    // those sequences among the hottest of the Node addon's decision).
    let whole = value as i64;
    let fraction = value - whole as f64;
    whole as u64 + u64::from(fraction >= 0.5)
}

/// `value` (in units) times `scale` (nanoseconds per unit), rounded to the
/// nearest nanosecond (halves up); fails for NaN, infinite, negative or too
/// large values.
#[inline(always)]
fn scaled_nanos(value: f64, scale: f64, name: &'static str) -> Result<Nanos, Error> {
    let nanos = value * scale;
    // The usual time or duration passes one pair of comparisons, which NaN,
    // infinities, negatives and the too large all fail: they are told apart
    // off this path.
    if (0.0..TWO_POW_52).contains(&nanos) {
        return Ok(Nanos(round_below_2_pow_52(nanos)));
    }
    scaled_nanos_checked(value, nanos, name)
}

/// [`scaled_nanos`] off its usual path: a bad `value`, or `nanos` at or
/// above 2^52, where every `f64` is already whole.
#[cold]
#[inline(never)]
fn scaled_nanos_checked(value: f64, nanos: f64, name: &'static str) -> Result<Nanos, Error> {
    check_finite_non_negative(value, name)?;
    if nanos >= TWO_POW_64 {
        return Err(Error::InvalidValue {
            name,
            reason: "is too large (the limit is 2^64 nanoseconds, about 584 years)",
        });
    }
    Ok(Nanos(nanos as u64))
}

impl Nanos {
    /// Seconds as a float, rounded to the nearest nanosecond.
    ///
    /// Fails with [`Error::InvalidValue`] naming `name` for NaN, infinite,
    /// negative or too large values.
    pub fn from_secs_f64(secs: f64, name: &'static str) -> Result<Nanos, Error> {
        scaled_nanos(secs, 1e9, name)
    }

    /// Milliseconds as a float, rounded to the nearest nanosecond.
    ///
    /// Fails like [`Nanos::from_secs_f64`].
    pub fn from_millis_f64(millis: f64, name: &'static str) -> Result<Nanos, Error> {
        scaled_nanos(millis, 1e6, name)
    }

    /// This duration in seconds, as a float.
    #[inline]
    pub fn as_secs_f64(self) -> f64 {
        u64_to_f64(self.0) / 1e9
    }

    /// This duration in milliseconds, as a float.
    #[inline]
    pub fn as_millis_f64(self) -> f64 {
        u64_to_f64(self.0) / 1e6
    }
}

/// `n` as the nearest `f64`, as `n as f64` is: through the signed
/// conversion (one x86-64 instruction) for every `n` below 2^63, where the
/// two agree.
#[inline(always)]
pub fn u64_to_f64(n: u64) -> f64 {
    match i64::try_from(n) {
        Ok(signed) => signed as f64,
        Err(_) => n as f64,
    }
}

/// A count (a cost, a capacity) given as a float, as JS numbers are.
///
/// It must be a whole number from 0 to 2^53 - 1; anything else fails with
/// [`Error::InvalidValue`] naming `name`.
#[inline]
pub fn count_from_f64(value: f64, name: &'static str) -> Result<u64, Error> {
    // At most 2^53 - 1: the signed conversions are exact (see
    // round_below_2_pow_52). NaN fails the range check, as do the other bad
    // values, told apart off this path.
    if (0.0..=MAX_SAFE_INTEGER).contains(&value) {
        let whole = value as i64;
        if whole as f64 == value {
            return Ok(whole as u64);
        }
    }
    count_from_f64_checked(value, name)
}

#[cold]
#[inline(never)]
fn count_from_f64_checked(value: f64, name: &'static str) -> Result<u64, Error> {
    check_finite_non_negative(value, name)?;
    if value > MAX_SAFE_INTEGER {
        return Err(Error::InvalidValue {
            name,
            reason: "must be a safe integer (at most 2^53 - 1)",
        });
    }
    Err(Error::InvalidValue {
        name,
        reason: "must be a whole number",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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

    /// The conversions as plainly written: every check first, then the
    /// unsigned arithmetic.
    fn reference_nanos(value: f64, scale: f64, name: &'static str) -> Result<Nanos, Error> {
        check_finite_non_negative(value, name)?;
        let nanos = value * scale;
        if nanos >= TWO_POW_64 {
            return Err(Error::InvalidValue {
                name,
                reason: "is too large (the limit is 2^64 nanoseconds, about 584 years)",
            });
        }
        let whole = nanos as u64;
        Ok(Nanos(whole + u64::from(nanos - whole as f64 >= 0.5)))
    }

    fn reference_count(value: f64, name: &'static str) -> Result<u64, Error> {
        check_finite_non_negative(value, name)?;
        if value > MAX_SAFE_INTEGER {
            return Err(Error::InvalidValue {
                name,
                reason: "must be a safe integer (at most 2^53 - 1)",
            });
        }
        if value as u64 as f64 != value {
            return Err(Error::InvalidValue {
                name,
                reason: "must be a whole number",
            });
        }
        Ok(value as u64)
    }

    /// Any f64: every bit pattern (NaNs, subnormals, both zeros), and values
    /// near the bounds where the quick paths end.
    fn any_f64() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<u64>().prop_map(f64::from_bits),
            (0u64..1 << 54).prop_map(|n| n as f64),
            (0u64..1 << 54).prop_map(|n| n as f64 + 0.5),
            prop::sample::select(alloc::vec![
                TWO_POW_52,
                TWO_POW_52 - 0.5,
                TWO_POW_64,
                MAX_SAFE_INTEGER,
                MAX_SAFE_INTEGER + 1.0,
                -0.0,
                f64::MIN_POSITIVE,
            ])
            .prop_flat_map(|x| (-4i64..=4)
                .prop_map(move |steps| { f64::from_bits(x.to_bits().wrapping_add_signed(steps)) })),
            (-1e-9f64..1e22),
        ]
    }

    proptest! {
        #[test]
        fn quick_paths_answer_as_the_plain_checks(value in any_f64()) {
            for scale in [1e9, 1e6] {
                let quick = if scale == 1e9 {
                    Nanos::from_secs_f64(value, "now")
                } else {
                    Nanos::from_millis_f64(value, "now")
                };
                prop_assert_eq!(quick, reference_nanos(value, scale, "now"));
            }
            let n = value.to_bits();
            prop_assert_eq!(u64_to_f64(n).to_bits(), (n as f64).to_bits());
            // Unscaled, so that halves reach the rounding as they are.
            prop_assert_eq!(scaled_nanos(value, 1.0, "now"), reference_nanos(value, 1.0, "now"));
            prop_assert_eq!(count_from_f64(value, "cost"), reference_count(value, "cost"));
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
