//! Conversions from host-language numbers (Python floats, JS numbers).
//!
//! Floats exist only here, at the boundary: each is checked and turned into an
//! integer once, so that every binding rejects the same inputs the same way.

use crate::{Error, Nanos};

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

/// The bits of an `f64`'s fraction field.
const FRACTION: u64 = (1 << 52) - 1;

/// `value` (in units) times `scale` (nanoseconds per unit), rounded to the
/// nearest nanosecond (halves up), exactly: the float's own value, scaled in
/// integers. (Multiplying as floats first would round twice: at epoch
/// seconds, 1.8e18 ns, by up to 128 ns.) Fails for NaN, infinite, negative
/// or too large values.
#[inline(always)]
fn scaled_nanos(value: f64, scale: u64, name: &'static str) -> Result<Nanos, Error> {
    let bits = value.to_bits();
    // The usual time or duration, a positive normal float below 2^52 units,
    // takes one comparison, which NaN, infinities, negatives, zeros,
    // subnormals and the large all fail: they are told apart off this path.
    let biased = bits >> 52;
    if biased.wrapping_sub(1) < 1074 {
        // value = m / 2^shift, m of 53 bits, shift from 1 to 1074; and
        // m * scale = high * 2^32 + low, in 64-bit products only (a 128-bit
        // multiplication is a library call on wasm32).
        let shift = (1075 - biased) as u32;
        let m = (bits & FRACTION) | 1 << 52;
        let (high, low) = ((m >> 32) * scale, (m & 0xffff_ffff) * scale);
        if shift >= 32 {
            // Rounded (halves up): the low 32 bits of `low` are below the
            // rounding bit, so they cannot move the result.
            let whole = high + (low >> 32);
            let rounded = match shift - 32 {
                0 => whole + ((low >> 31) & 1),
                s @ 1..=63 => (whole + (1 << (s - 1))) >> s,
                _ => 0,
            };
            return Ok(Nanos(rounded));
        }
        // high * 2^(32 - shift) + low / 2^shift, rounded, if it fits.
        if high.leading_zeros() >= 32 - shift {
            let part = (low + (1 << (shift - 1))) >> shift;
            if let Some(nanos) = (high << (32 - shift)).checked_add(part) {
                return Ok(Nanos(nanos));
            }
        }
    }
    scaled_nanos_checked(value, scale, name)
}

/// [`scaled_nanos`] off its usual path: a bad `value`, zeros and
/// subnormals, and values of 2^52 units or more, which are whole numbers.
#[cold]
#[inline(never)]
fn scaled_nanos_checked(value: f64, scale: u64, name: &'static str) -> Result<Nanos, Error> {
    check_finite_non_negative(value, name)?;
    let too_large = Error::InvalidValue {
        name,
        reason: "is too large (the limit is 2^64 nanoseconds, about 584 years)",
    };
    // `value` is finite and not negative (or -0.0): m * 2^exponent.
    let bits = value.to_bits() & !(1 << 63);
    let biased = (bits >> 52) as i32;
    let (m, exponent) = match biased {
        0 => (bits & FRACTION, -1074),
        _ => ((bits & FRACTION) | 1 << 52, biased - 1075),
    };
    let exact = u128::from(m) * u128::from(scale);
    if exponent < 0 {
        // exact * 2^exponent, rounded; exact < 2^83, so from 2^-84 on, 0.
        let shift = exponent.unsigned_abs();
        let rounded = match shift {
            1..=84 => (exact + (1 << (shift - 1))) >> shift,
            _ => 0,
        };
        return u64::try_from(rounded).map(Nanos).map_err(|_| too_large);
    }
    // Whole: exact * 2^exponent, if that fits in 64 bits.
    let bits_needed = 128 - exact.leading_zeros() + exponent as u32;
    if exact != 0 && bits_needed > 64 {
        return Err(too_large);
    }
    u64::try_from(exact << exponent)
        .map(Nanos)
        .map_err(|_| too_large)
}

impl Nanos {
    /// Seconds as a float, rounded to the nearest nanosecond.
    ///
    /// Fails with [`Error::InvalidValue`] naming `name` for NaN, infinite,
    /// negative or too large values.
    pub fn from_secs_f64(secs: f64, name: &'static str) -> Result<Nanos, Error> {
        scaled_nanos(secs, 1_000_000_000, name)
    }

    /// Milliseconds as a float, rounded to the nearest nanosecond.
    ///
    /// Fails like [`Nanos::from_secs_f64`].
    #[inline]
    pub fn from_millis_f64(millis: f64, name: &'static str) -> Result<Nanos, Error> {
        scaled_nanos(millis, 1_000_000, name)
    }

    /// This duration in seconds, as a float.
    #[inline]
    #[must_use]
    pub fn as_secs_f64(self) -> f64 {
        u64_to_f64(self.0) / 1e9
    }

    /// This duration in milliseconds, as a float.
    #[inline]
    #[must_use]
    pub fn as_millis_f64(self) -> f64 {
        u64_to_f64(self.0) / 1e6
    }

    /// This wait after `now` (seconds, as the host gave it), as seconds to
    /// add to `now`: the smallest near [`Nanos::as_secs_f64`] whose float
    /// sum with `now` reaches `now` plus this wait, read as
    /// [`Nanos::from_secs_f64`] reads it. On a clock counting from the Unix
    /// epoch (1.7e9 s) two sums are a quarter of a microsecond apart, so the
    /// plain float could fall short of the instant the core named, and a
    /// request made then be denied again.
    #[must_use]
    pub fn as_secs_f64_after(self, now: f64) -> f64 {
        reaching(now, self, 1_000_000_000)
    }

    /// [`Nanos::as_secs_f64_after`] in milliseconds (1.7e12 on the epoch).
    #[must_use]
    pub fn as_millis_f64_after(self, now: f64) -> f64 {
        reaching(now, self, 1_000_000)
    }
}

/// `wait` after `now` (in units of `scale` ns), as the smallest float `w`
/// near it for which `now + w`, rounded as floats add, scales to at least
/// `now` plus `wait`. Each step takes the sum to the next float up, and `w`
/// is then exact (the sum being within twice `now`): a step or two at most.
fn reaching(now: f64, wait: Nanos, scale: u64) -> f64 {
    let mut w = u64_to_f64(wait.0) / scale as f64;
    if wait.0 == 0 {
        return w;
    }
    let Ok(at) = scaled_nanos(now, scale, "now") else {
        return w;
    };
    let target = at.saturating_add(wait);
    for _ in 0..8 {
        match scaled_nanos(now + w, scale, "now") {
            Ok(sum) if sum < target => {}
            _ => break,
        }
        w = f64::from_bits((now + w).to_bits() + 1) - now;
    }
    w
}

/// `n` as the nearest `f64`, as `n as f64` is: through the signed
/// conversion (one x86-64 instruction) for every `n` below 2^63, where the
/// two agree. The rest goes out of line: written inline, LLVM merged both
/// into the unsigned conversion's five dependent instructions, whose
/// latency a decision's answer waited for. (wasm has one instruction for
/// either.)
#[inline(always)]
pub fn u64_to_f64(n: u64) -> f64 {
    if cfg!(target_arch = "wasm32") {
        return n as f64;
    }
    match i64::try_from(n) {
        Ok(signed) => signed as f64,
        Err(_) => u64_to_f64_high(n),
    }
}

/// [`u64_to_f64`] from 2^63 up.
#[cold]
#[inline(never)]
fn u64_to_f64_high(n: u64) -> f64 {
    n as f64
}

/// A count (a cost, a capacity) given as a float, as JS numbers are.
///
/// It must be a whole number from 0 to 2^53 - 1; anything else fails with
/// [`Error::InvalidValue`] naming `name`.
#[inline]
pub fn count_from_f64(value: f64, name: &'static str) -> Result<u64, Error> {
    // At most 2^53 - 1: the signed conversions are exact, and each is one
    // x86-64 instruction where an unsigned one takes several. NaN fails the
    // range check, as do the other bad values, told apart off this path.
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

    /// 2^64 as an `f64`: the first value that does not fit in a `u64`.
    const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;
    /// 2^52 as an `f64`: every `f64` at or above it is a whole number.
    const TWO_POW_52: f64 = 4_503_599_627_370_496.0;

    #[test]
    fn seconds_round_to_the_nearest_nanosecond() {
        assert_eq!(Nanos::from_secs_f64(0.8, "now"), Ok(Nanos(800_000_000)));
        assert_eq!(Nanos::from_secs_f64(1e-9, "now"), Ok(Nanos(1)));
        assert_eq!(Nanos::from_secs_f64(0.4e-9, "now"), Ok(Nanos(0)));
        assert_eq!(Nanos::from_millis_f64(1.5e-6, "now"), Ok(Nanos(2)));
        assert_eq!(Nanos::from_secs_f64(-0.0, "now"), Ok(Nanos(0)));
    }

    proptest! {
        /// A wait added to the time it was counted from, as a host adds
        /// floats, reaches the instant it names: not a nanosecond early,
        /// and at most a float step of the sum late.
        #[test]
        fn a_wait_added_to_its_time_reaches_its_instant(
            now in prop_oneof![0.0..1e7f64, 1.6e12..1.8e12f64, 1.6e9..1.8e9f64],
            wait in 1..10_000_000_000u64,
        ) {
            for (scale, after) in [
                (1_000_000u64, Nanos::as_millis_f64_after as fn(Nanos, f64) -> f64),
                (1_000_000_000, Nanos::as_secs_f64_after),
            ] {
                // Epoch milliseconds read as seconds: past 2^64 ns.
                let Ok(at) = scaled_nanos(now, scale, "now") else { continue };
                let w = after(Nanos(wait), now);
                let sum = scaled_nanos(now + w, scale, "now").unwrap();
                prop_assert!(sum.0 >= at.0 + wait, "{} + {} short of {}", now, w, at.0 + wait);
                let before = f64::from_bits((now + w).to_bits() - 1);
                let plain = u64_to_f64(wait) / scale as f64;
                prop_assert!(w == plain || scaled_nanos(before, scale, "now").unwrap().0 < at.0 + wait);
            }
        }
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
    fn a_float_is_scaled_exactly_then_rounded_once() {
        // The nearest nanosecond to the float's own value (Python's
        // `Fraction(value) * scale`, rounded halves up), where the float
        // product would round first: epoch seconds, epoch milliseconds.
        let cases = [
            (1_795_420_534.626_150_6, 1e9, 1_795_420_534_626_150_608),
            (1.7e12 + 0.123_456, 1e6, 1_700_000_000_000_123_535),
            (2.5e-9, 1e9, 3),
            (5e-10, 1e9, 1),
            (4_503.599_627_370_497, 1e6, 4_503_599_627),
            (9.2e12, 1e6, 9_200_000_000_000_000_000),
            (1.8446e13, 1e6, 18_446_000_000_000_000_000),
        ];
        for (value, scale, nanos) in cases {
            let got = if scale == 1e9 {
                Nanos::from_secs_f64(value, "now")
            } else {
                Nanos::from_millis_f64(value, "now")
            };
            assert_eq!(got, Ok(Nanos(nanos)), "{value} x {scale}");
        }
        assert_eq!(
            Nanos::from_millis_f64(1.8447e13, "now").unwrap_err().code(),
            "invalid_value"
        );
    }

    /// The conversions as plainly written: every check first, then the
    /// float's exact value (its integer mantissa and power of two) times
    /// `scale`, divided out and rounded halves up.
    fn reference_nanos(value: f64, scale: u64, name: &'static str) -> Result<Nanos, Error> {
        check_finite_non_negative(value, name)?;
        let too_large = Error::InvalidValue {
            name,
            reason: "is too large (the limit is 2^64 nanoseconds, about 584 years)",
        };
        let bits = value.to_bits() & !(1 << 63);
        let exponent = (bits >> 52) as i32;
        let fraction = bits & ((1 << 52) - 1);
        let (mantissa, power) = if exponent == 0 {
            (fraction, -1074)
        } else {
            (fraction + (1 << 52), exponent - 1075)
        };
        let product = u128::from(mantissa) * u128::from(scale);
        let nanos = if power >= 0 {
            let mut n = product;
            for _ in 0..power {
                n = n.checked_mul(2).ok_or(too_large)?;
            }
            n
        } else if -power >= 128 {
            0
        } else {
            let divisor = 1u128 << -power;
            let (whole, rest) = (product / divisor, product % divisor);
            whole + u128::from(rest >= divisor - rest)
        };
        u64::try_from(nanos).map(Nanos).map_err(|_| too_large)
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
        // A static slice, not a Vec: these tests also run without `alloc`.
        const EDGES: [f64; 7] = [
            TWO_POW_52,
            TWO_POW_52 - 0.5,
            TWO_POW_64,
            MAX_SAFE_INTEGER,
            MAX_SAFE_INTEGER + 1.0,
            -0.0,
            f64::MIN_POSITIVE,
        ];
        prop_oneof![
            any::<u64>().prop_map(f64::from_bits),
            (0u64..1 << 54).prop_map(|n| n as f64),
            (0u64..1 << 54).prop_map(|n| n as f64 + 0.5),
            prop::sample::select(&EDGES[..]).prop_flat_map(|x| (-4i64..=4)
                .prop_map(move |steps| { f64::from_bits(x.to_bits().wrapping_add_signed(steps)) })),
            (-1e-9f64..1e22),
        ]
    }

    proptest! {
        #[test]
        fn quick_paths_answer_as_the_plain_checks(value in any_f64()) {
            for scale in [1_000_000_000, 1_000_000] {
                let quick = if scale == 1_000_000_000 {
                    Nanos::from_secs_f64(value, "now")
                } else {
                    Nanos::from_millis_f64(value, "now")
                };
                prop_assert_eq!(quick, reference_nanos(value, scale, "now"));
            }
            let n = value.to_bits();
            prop_assert_eq!(u64_to_f64(n).to_bits(), (n as f64).to_bits());
            // Unscaled, so that halves reach the rounding as they are.
            prop_assert_eq!(scaled_nanos(value, 1, "now"), reference_nanos(value, 1, "now"));
            prop_assert_eq!(count_from_f64(value, "cost"), reference_count(value, "cost"));
        }
    }

    /// Every exponent, each with fractions that put a half (and just under
    /// and over one) at each bit, against the reference: the random floats
    /// of `quick_paths_answer_as_the_plain_checks` land on a given exponent
    /// about once in ten thousand, and the quick path rounds a shift of
    /// exactly 32 (2^20 to 2^21 units: 12 to 24 days in seconds) by a
    /// branch of its own.
    #[test]
    fn every_exponent_rounds_as_the_reference() {
        for biased in 0..2048u64 {
            for bit in 0..52 {
                let half = 1u64 << bit;
                for fraction in [half, half - 1, half + 1, FRACTION ^ half, FRACTION] {
                    let value = f64::from_bits(biased << 52 | fraction);
                    for scale in [1, 1_000_000, 1_000_000_000] {
                        assert_eq!(
                            scaled_nanos(value, scale, "now"),
                            reference_nanos(value, scale, "now"),
                            "{value:e} x {scale}"
                        );
                    }
                }
            }
        }
        // 1,500,000 s and 3 x 2^-32 s (0.698 ns), rounded up to 1 ns.
        let value = f64::from_bits(1_500_000f64.to_bits() + 3);
        assert_eq!(
            Nanos::from_secs_f64(value, "now"),
            Ok(Nanos(1_500_000_000_000_001))
        );
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
