//! The exact sliding-window log.

use alloc::boxed::Box;
use alloc::vec;

use crate::{Decision, Error, Nanos};

/// The largest `limit` a [`SlidingWindowLog`] accepts. The log keeps one
/// 16-byte entry per admitted event, allocated up front; larger limits belong
/// to a token bucket.
pub const MAX_LOG_LIMIT: u64 = 1 << 20;

/// An exact sliding window: a log of the admitted events of the last `window`.
///
/// A request of `cost` at time `now` is allowed when the costs of the events
/// admitted in `(now - window, now]`, plus `cost`, are at most `limit`. An
/// event at time `t` leaves the window exactly at `t + window`, so
/// "1 per second" admits calls exactly 1 s apart. Events at the same instant
/// all count (they are never collapsed into one).
///
/// **Guarantee.** In every half-open interval `[a, a + window)`, at most
/// `limit` units are admitted; there is no burst beyond `limit`.
///
/// The history lives in a ring of `limit` entries allocated when the log is
/// built; a decision never allocates.
///
/// ```
/// use ratekeeper::{Nanos, SlidingWindowLog};
///
/// let mut log = SlidingWindowLog::new(1, Nanos::from_secs(1)).unwrap();
/// assert!(log.try_acquire(Nanos::ZERO, 1).unwrap().allowed);
/// let denied = log.try_acquire(Nanos(999_999_999), 1).unwrap();
/// assert_eq!(denied.retry_after, Nanos(1));
/// assert!(log.try_acquire(Nanos::from_secs(1), 1).unwrap().allowed);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlidingWindowLog {
    limit: u64,
    window: u64,
    /// Admitted events, oldest first; events of one instant share an entry.
    ring: Box<[Entry]>,
    head: usize,
    len: usize,
    /// The sum of the costs in `ring`.
    used: u64,
    /// The latest time seen, so that time going backwards admits nothing.
    latest: Nanos,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Entry {
    at: u64,
    cost: u64,
}

impl SlidingWindowLog {
    /// A log admitting at most `limit` units in any `window`.
    ///
    /// Fails when a value is zero or `limit` exceeds [`MAX_LOG_LIMIT`].
    pub fn new(limit: u64, window: Nanos) -> Result<Self, Error> {
        if limit == 0 {
            return Err(Error::ZeroValue { name: "limit" });
        }
        if window == Nanos::ZERO {
            return Err(Error::ZeroValue { name: "window" });
        }
        if limit > MAX_LOG_LIMIT {
            return Err(Error::TooLarge {
                name: "limit",
                value: limit,
                max: MAX_LOG_LIMIT,
            });
        }
        // Every entry has a cost of at least 1, so `limit` entries always suffice.
        Ok(SlidingWindowLog {
            limit,
            window: window.0,
            ring: vec![Entry::default(); limit as usize].into_boxed_slice(),
            head: 0,
            len: 0,
            used: 0,
            latest: Nanos::ZERO,
        })
    }

    /// Admits `cost` units at time `now` if the window has room for them.
    ///
    /// A denied request records nothing. Fails only when `cost` exceeds the
    /// limit, since such a request could never be allowed.
    pub fn try_acquire(&mut self, now: Nanos, cost: u64) -> Result<Decision, Error> {
        if cost > self.limit {
            return Err(Error::CostExceedsLimit {
                cost,
                limit: self.limit,
            });
        }
        self.latest = self.latest.max(now);
        self.expire(self.latest);
        let allowed = self.used + cost <= self.limit;
        let retry_after = if allowed {
            self.push(self.latest.0, cost);
            Nanos::ZERO
        } else {
            self.wait_to_free(self.used + cost - self.limit, now)
        };
        let reset_after = match self.len {
            0 => Nanos::ZERO,
            len => self.leaves_after(self.entry(len - 1), now),
        };
        Ok(Decision {
            allowed,
            remaining: self.limit - self.used,
            limit: self.limit,
            retry_after,
            reset_after,
        })
    }

    /// The most units admitted in any window.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The length of the window.
    pub fn window(&self) -> Nanos {
        Nanos(self.window)
    }

    fn entry(&self, i: usize) -> Entry {
        self.ring[(self.head + i) % self.ring.len()]
    }

    /// The time after `now` at which `entry` leaves the window, computed in
    /// 128 bits since `at + window` may exceed 64.
    fn leaves_after(&self, entry: Entry, now: Nanos) -> Nanos {
        let leaves = entry.at as u128 + self.window as u128;
        Nanos(leaves.saturating_sub(now.0 as u128).min(u64::MAX as u128) as u64)
    }

    fn expire(&mut self, now: Nanos) {
        while self.len > 0 && self.leaves_after(self.entry(0), now) == Nanos::ZERO {
            self.used -= self.ring[self.head].cost;
            self.head = (self.head + 1) % self.ring.len();
            self.len -= 1;
        }
    }

    fn push(&mut self, at: u64, cost: u64) {
        if cost == 0 {
            return;
        }
        self.used += cost;
        if self.len > 0 {
            let newest = (self.head + self.len - 1) % self.ring.len();
            if self.ring[newest].at == at {
                self.ring[newest].cost += cost;
                return;
            }
        }
        let slot = (self.head + self.len) % self.ring.len();
        self.ring[slot] = Entry { at, cost };
        self.len += 1;
    }

    /// The wait until the oldest events holding at least `needed` units have
    /// left the window.
    fn wait_to_free(&self, needed: u64, now: Nanos) -> Nanos {
        let mut freed = 0;
        let enough = (0..self.len).map(|i| self.entry(i)).find(|entry| {
            freed += entry.cost;
            freed >= needed
        });
        // A denied request never needs more than the log holds, so `enough`
        // is always found; the fallback only avoids a panic path.
        enough.map_or(Nanos::MAX, |entry| self.leaves_after(entry, now))
    }
}
