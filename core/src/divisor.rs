//! Division by a divisor fixed when a limiter is built, as a multiplication.

/// A nonzero 64-bit divisor with its reciprocal, so that [`Divisor::divide`]
/// takes two multiplications instead of a division instruction. On the
/// 2.5 GHz Xeon of our benchmarks, a 64-bit `div` made a GCRA with more than
/// 2^32 ns (4.3 s) of tolerance, such as 100 per minute, take 20 ns per
/// allowed decision; with this, 10 to 12 ns.
///
/// The reciprocal is `c = ceil(2^128 / d)`, and `floor(n / d)` is
/// `floor(c * n / 2^128)` for every 64-bit `n`: the error `c * d - 2^128`
/// is below `d`, at most 2^64, which is what Lemire, Kaser and Kurz's
/// Theorem 1 ("Faster remainder by direct computation", 2019) asks for
/// 64-bit numerators and 128 fractional bits. `c - 1` is kept, which fits
/// in 128 bits for every `d` (`c` is 2^128 for `d = 1`), and `c * n` is
/// computed as `(c - 1) * n + n`, so that no divisor needs a branch of its
/// own.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Divisor {
    d: u64,
    /// The high and low halves of `c - 1`.
    c_hi: u64,
    c_lo: u64,
}

/// Shown as the divisor alone, as the field it replaces was.
impl core::fmt::Debug for Divisor {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(&self.d, f)
    }
}

impl Divisor {
    /// The divisor `d`, which must not be zero.
    pub(crate) fn new(d: u64) -> Divisor {
        debug_assert!(d != 0, "a divisor is not zero");
        // ceil(2^128 / d) - 1 = floor((2^128 - 1) / d), whether or not d
        // divides 2^128.
        let c_minus_1 = u128::MAX / d as u128;
        Divisor {
            d,
            c_hi: (c_minus_1 >> 64) as u64,
            c_lo: c_minus_1 as u64,
        }
    }

    /// The divisor.
    #[inline(always)]
    pub(crate) fn get(&self) -> u64 {
        self.d
    }

    /// `n / d`, rounded down.
    #[inline(always)]
    pub(crate) fn divide(&self, n: u64) -> u64 {
        // wasm has no 64 x 64 -> 128-bit multiplication: its engines would
        // run the two below as a dozen 32-bit ones, in more bytes to
        // download, where `i64.div_u` is one instruction.
        #[cfg(target_arch = "wasm32")]
        {
            n / self.d
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            // c * n = c_hi * n * 2^64 + (c_lo * n + n). The low sum is at
            // most (2^64 - 1) * 2^64, and its low 64 bits cannot carry into
            // the bits kept; c_hi * n plus its high half is below 2^128.
            let high = self.c_hi as u128 * n as u128;
            let low = (self.c_lo as u128 * n as u128 + n as u128) >> 64;
            ((high + low) >> 64) as u64
        }
    }

    /// `n / d`, rounded up.
    #[inline(always)]
    pub(crate) fn divide_up(&self, n: u64) -> u64 {
        let q = self.divide(n);
        // q * d <= n: no overflow.
        q + (q * self.d != n) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(d: u64, n: u64) {
        let divisor = Divisor::new(d);
        assert_eq!(divisor.divide(n), n / d, "{n} / {d}");
        assert_eq!(divisor.divide_up(n), n.div_ceil(d), "{n} / {d} rounded up");
    }

    #[test]
    fn extremes() {
        let edges = [
            1,
            2,
            3,
            7,
            10,
            1 << 32,
            (1 << 32) - 1,
            (1 << 32) + 1,
            1 << 63,
            (1 << 63) - 1,
            (1 << 63) + 1,
            u64::MAX - 1,
            u64::MAX,
        ];
        for d in edges {
            for n in edges.iter().chain(&[0]) {
                for n in [n.saturating_sub(1), *n, n.saturating_add(1)] {
                    check(d, n);
                    check(d, n.wrapping_mul(d)); // exact multiples, and near them
                    check(d, n.wrapping_mul(d).wrapping_sub(1));
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        #[test]
        fn divides_as_the_instruction(d in 1..=u64::MAX, n: u64) {
            check(d, n);
        }

        #[test]
        fn divides_near_multiples(d in 1..=u64::MAX, q: u64, r in -2i64..=2) {
            check(d, d.wrapping_mul(q).wrapping_add(r as u64));
        }

        #[test]
        fn divides_by_small_and_power_of_two_divisors(
            d in prop_oneof![1..=1_000_000u64, (0..64u32).prop_map(|k| 1u64 << k)],
            n: u64,
        ) {
            check(d, n);
        }
    }
}
