//! The unit of time: integer nanoseconds.

/// A point in time or a duration, in integer nanoseconds.
///
/// Limiters only compare and subtract these values, so any monotonic origin
/// works (boot time, process start, the Unix epoch). A
/// [`Duration`](core::time::Duration) converts to and from it with
/// [`From`].
///
/// ```
/// use core::time::Duration;
/// use ratekeeper::Nanos;
///
/// let start = Nanos::from_secs(5);
/// let later = start + Nanos::from_millis(250);
/// assert_eq!(later - start, Nanos(250_000_000));
/// assert_eq!(Duration::from(later - start), Duration::from_millis(250));
/// assert_eq!(start.checked_sub(later), None);
/// assert_eq!(start.saturating_sub(later), Nanos::ZERO);
/// ```
///
/// Like `Duration`'s, its arithmetic returns a new value and leaves the
/// original as it was; a result left unused is warned about:
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// use ratekeeper::Nanos;
///
/// let deadline = Nanos::from_secs(5);
/// deadline.saturating_add(Nanos::from_millis(250)); // `deadline` is still 5 s
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Nanos(pub u64);

impl Nanos {
    /// Zero nanoseconds.
    pub const ZERO: Nanos = Nanos(0);
    /// The largest representable time (about 584 years).
    pub const MAX: Nanos = Nanos(u64::MAX);

    /// Whole seconds, saturating at [`Nanos::MAX`].
    #[must_use]
    pub const fn from_secs(secs: u64) -> Nanos {
        Nanos(secs.saturating_mul(1_000_000_000))
    }

    /// Whole milliseconds, saturating at [`Nanos::MAX`].
    #[must_use]
    pub const fn from_millis(millis: u64) -> Nanos {
        Nanos(millis.saturating_mul(1_000_000))
    }

    /// Whole microseconds, saturating at [`Nanos::MAX`].
    #[must_use]
    pub const fn from_micros(micros: u64) -> Nanos {
        Nanos(micros.saturating_mul(1_000))
    }

    /// The number of nanoseconds.
    #[must_use]
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// `self - earlier`, or zero when `earlier` is later.
    #[must_use = "this returns the result of the operation, without modifying the original"]
    pub const fn saturating_sub(self, earlier: Nanos) -> Nanos {
        Nanos(self.0.saturating_sub(earlier.0))
    }

    /// `self + other`, saturating at [`Nanos::MAX`].
    #[must_use = "this returns the result of the operation, without modifying the original"]
    pub const fn saturating_add(self, other: Nanos) -> Nanos {
        Nanos(self.0.saturating_add(other.0))
    }

    /// `self + other`, or `None` past [`Nanos::MAX`].
    #[must_use = "this returns the result of the operation, without modifying the original"]
    pub const fn checked_add(self, other: Nanos) -> Option<Nanos> {
        match self.0.checked_add(other.0) {
            Some(sum) => Some(Nanos(sum)),
            None => None,
        }
    }

    /// `self - earlier`, or `None` when `earlier` is later.
    #[must_use = "this returns the result of the operation, without modifying the original"]
    pub const fn checked_sub(self, earlier: Nanos) -> Option<Nanos> {
        match self.0.checked_sub(earlier.0) {
            Some(difference) => Some(Nanos(difference)),
            None => None,
        }
    }
}

/// `self + other`; panics past [`Nanos::MAX`], as `Duration`'s `+` does (in
/// release builds too): the limiters never use it, and a host whose times
/// may come near it takes [`Nanos::checked_add`] or [`Nanos::saturating_add`].
///
/// ```
/// use ratekeeper::{Gcra, Limiter, Nanos};
///
/// let mut gcra = Gcra::new(1, Nanos::from_millis(100))?;
/// let mut now = Nanos::from_secs(5);
/// assert!(gcra.try_acquire(now, 1)?.allowed);
/// let denied = gcra.try_acquire(now, 1)?;
/// now += denied.retry_after;
/// assert!(gcra.try_acquire(now, 1)?.allowed);
/// assert_eq!(now - Nanos::from_secs(5), Nanos::from_millis(100));
/// # Ok::<(), ratekeeper::Error>(())
/// ```
impl core::ops::Add for Nanos {
    type Output = Nanos;

    fn add(self, other: Nanos) -> Nanos {
        self.checked_add(other).expect("overflow when adding Nanos")
    }
}

/// `self - earlier`; panics when `earlier` is later, as `Duration`'s `-`
/// does: [`Nanos::checked_sub`] and [`Nanos::saturating_sub`] do not.
impl core::ops::Sub for Nanos {
    type Output = Nanos;

    fn sub(self, earlier: Nanos) -> Nanos {
        self.checked_sub(earlier)
            .expect("overflow when subtracting Nanos")
    }
}

/// `*self = *self + other`: see [`Add`](core::ops::Add).
impl core::ops::AddAssign for Nanos {
    fn add_assign(&mut self, other: Nanos) {
        *self = *self + other;
    }
}

/// `*self = *self - earlier`: see [`Sub`](core::ops::Sub).
impl core::ops::SubAssign for Nanos {
    fn sub_assign(&mut self, earlier: Nanos) {
        *self = *self - earlier;
    }
}

/// `ns` as a duration, saturating at [`Nanos::MAX`]: the waits limiters
/// report are computed in 128 bits and clamped once, here.
pub(crate) fn saturating(ns: u128) -> Nanos {
    Nanos(ns.min(u64::MAX as u128) as u64)
}

/// `at - now` as a duration, zero if `at` is not later, saturating at
/// [`Nanos::MAX`].
pub(crate) fn since(now: Nanos, at: u128) -> Nanos {
    saturating(at.saturating_sub(now.0 as u128))
}

/// Where [`Limiter::reserve_after`](crate::Limiter::reserve_after) books
/// `cost` asked for `wait` after `now`: not before `latest`, the latest time
/// seen; `None` when that comes before `fits_at`, the earliest instant the
/// cost fits, lies past 2^64 - 1 ns, or when there is nothing to book.
pub(crate) fn booking_slot(
    now: Nanos,
    wait: Nanos,
    latest: u64,
    fits_at: u128,
    cost: u64,
) -> Option<u64> {
    let slot = now.0.checked_add(wait.0)?.max(latest);
    (cost > 0 && slot as u128 >= fits_at).then_some(slot)
}

/// Whether units taken at `taken_at` may be refunded under the bound a
/// reconfigure set, `counted_from` (0 until one): units taken from it on.
/// The bound is the instant after the latest one counted (or a queue's
/// end), which saturates at [`Nanos::MAX`]; so that bound stands for any
/// later one, and nothing is refunded under it (units taken at that last
/// instant after the reconfigure included, which errs on the strict side):
/// otherwise units taken there before the reconfigure came back too.
pub(crate) fn refundable(taken_at: Nanos, counted_from: u64) -> bool {
    taken_at.0 >= counted_from && counted_from != u64::MAX
}

impl From<u64> for Nanos {
    fn from(ns: u64) -> Nanos {
        Nanos(ns)
    }
}

impl From<Nanos> for u64 {
    fn from(ns: Nanos) -> u64 {
        ns.0
    }
}

/// A [`Duration`](core::time::Duration) in nanoseconds, saturating at
/// [`Nanos::MAX`] (some 584 years): how a host turns its monotonic clock into
/// the `now` every call takes.
///
/// ```
/// use std::time::{Duration, Instant};
/// use ratekeeper::{Gcra, Limiter, Nanos};
///
/// let start = Instant::now(); // the host's clock; the limiter reads none
/// let mut gcra = Gcra::new(10, Nanos::from_millis(100)).unwrap();
/// let now = Nanos::from(start.elapsed());
/// assert!(gcra.try_acquire(now, 1).unwrap().allowed);
/// assert_eq!(Nanos::from(Duration::from_millis(100)), Nanos::from_millis(100));
/// assert_eq!(Duration::from(Nanos::from_millis(100)), Duration::from_millis(100));
/// assert_eq!(Nanos::from(Duration::MAX), Nanos::MAX);
/// ```
impl From<core::time::Duration> for Nanos {
    fn from(duration: core::time::Duration) -> Nanos {
        saturating(duration.as_nanos())
    }
}

/// The same span as a [`Duration`](core::time::Duration) (a `retry_after`
/// to sleep for, say); every `Nanos` fits.
impl From<Nanos> for core::time::Duration {
    fn from(ns: Nanos) -> core::time::Duration {
        core::time::Duration::from_nanos(ns.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_arithmetic_stops_at_either_end() {
        assert_eq!(Nanos(2).checked_add(Nanos(3)), Some(Nanos(5)));
        assert_eq!(Nanos::MAX.checked_add(Nanos(1)), None);
        assert_eq!(Nanos(5).checked_sub(Nanos(3)), Some(Nanos(2)));
        assert_eq!(Nanos(3).checked_sub(Nanos(5)), None);
        let mut t = Nanos(7);
        t += Nanos(3);
        t -= Nanos(10);
        assert_eq!(t, Nanos::ZERO);
        assert_eq!(Nanos::MAX - Nanos::MAX + Nanos::MAX, Nanos::MAX);
    }

    #[test]
    fn units_saturate_at_the_end_of_time() {
        assert_eq!(
            Nanos::from_secs(u64::MAX / 1_000_000_000),
            Nanos(18_446_744_073_000_000_000)
        );
        for big in [u64::MAX / 1_000 + 1, u64::MAX] {
            assert_eq!(Nanos::from_secs(big), Nanos::MAX);
            assert_eq!(Nanos::from_millis(big), Nanos::MAX);
            assert_eq!(Nanos::from_micros(big), Nanos::MAX);
        }
    }

    #[test]
    #[should_panic(expected = "overflow when adding Nanos")]
    fn adding_past_the_end_of_time_panics() {
        let _ = Nanos::MAX + Nanos(1);
    }

    #[test]
    #[should_panic(expected = "overflow when subtracting Nanos")]
    fn subtracting_a_later_time_panics() {
        let _ = Nanos(1) - Nanos(2);
    }
}
