//! Window alignment, shared by the window algorithms.

use crate::nanos::booking_slot;
use crate::state::codec::Fingerprint;
use crate::{Calendar, Nanos};

/// A window algorithm's counts as a booking moves them, so that both window
/// algorithms book at an instant alike.
pub(crate) trait Booking {
    /// Moves the counts to `now` and returns the latest time seen.
    fn seen(&mut self, now: Nanos) -> u64;

    /// Books `cost` at `slot`, which admits it: an acquire there. Until the
    /// slot no request is served, and the counts move to it.
    fn book(&mut self, latest: u64, slot: u64, cost: u64);
}

/// [`Limiter::reserve_after`](crate::Limiter::reserve_after) for a window
/// algorithm, `fits_at` being the earliest instant `cost` fits.
pub(crate) fn reserve_after(
    l: &mut impl Booking,
    now: Nanos,
    cost: u64,
    wait: Nanos,
    fits_at: u128,
) -> bool {
    let latest = l.seen(now);
    match booking_slot(now, wait, latest, fits_at, cost) {
        Some(slot) => {
            l.book(latest, slot, cost);
            true
        }
        None => cost == 0,
    }
}

/// How a window algorithm cuts time into windows. Boundaries live here alone,
/// so that every window algorithm agrees on them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Windows {
    /// `[k * len, (k + 1) * len)` from the caller's time zero.
    Every(u64),
    /// Calendar periods in UTC, `now` being ns since the Unix epoch.
    Calendar(Calendar),
}

impl Windows {
    /// The number of the window holding `t`.
    #[inline]
    pub(crate) fn index(self, t: u64) -> u64 {
        match self {
            Windows::Every(len) => t / len,
            Windows::Calendar(c) => c.index(t),
        }
    }

    /// Where window `k` ends and the next starts, for any `k` up to 2^64: in
    /// 128 bits, since it may be beyond 2^64 ns.
    #[inline]
    pub(crate) fn end(self, k: u128) -> u128 {
        match self {
            Windows::Every(len) => (k + 1) * len as u128,
            Windows::Calendar(c) => c.end(k),
        }
    }

    /// The length of window `k`, for any `k` up to 2^64. (Week 0 starts
    /// before the epoch, so `end - len` may be below zero.)
    #[inline]
    pub(crate) fn len(self, k: u128) -> u128 {
        match self {
            Windows::Every(len) => len as u128,
            Windows::Calendar(c) => c.len(k),
        }
    }

    /// What `window()` reports: the length of every window, or a calendar's
    /// nominal length (a month: 30 days).
    pub(crate) fn nominal(self) -> u64 {
        match self {
            Windows::Every(len) => len,
            Windows::Calendar(c) => c.nominal(),
        }
    }

    /// The calendar, if any.
    pub(crate) fn calendar(self) -> Option<Calendar> {
        match self {
            Windows::Every(_) => None,
            Windows::Calendar(c) => Some(c),
        }
    }
}

impl Windows {
    /// Feeds the windows' configuration to a state fingerprint.
    pub(crate) fn fingerprint(self, fingerprint: &mut Fingerprint) {
        match self {
            Windows::Every(len) => {
                fingerprint.word(0);
                fingerprint.word(len);
            }
            Windows::Calendar(calendar) => {
                fingerprint.word(1);
                fingerprint.word(calendar as u64);
            }
        }
    }
}
