//! Window alignment, shared by the window algorithms.

use crate::state::codec::Fingerprint;
use crate::Calendar;

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
