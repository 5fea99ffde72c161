//! One type for every algorithm, chosen at run time.

use alloc::boxed::Box;

use crate::nanos::saturating;
use crate::state::codec::{Codec, Fingerprint, Reader, Writer};
use crate::{
    Algorithm, Bandwidth, Calendar, Decision, Error, FixedWindow, Gcra, LeakyBucket, Limiter,
    Nanos, Refill, SlidingWindowCounter, TokenBucket,
};

/// The most bandwidths [`AnyLimiter::token_bucket`] accepts; a
/// [`Policy`](crate::Policy) combines any number of limits.
pub const MAX_BANDWIDTHS: usize = 4;

/// Any one of the crate's limiters, chosen at run time: what configuration
/// files, policies and the language bindings hold.
///
/// Every call goes to the limiter inside, so the answers are exactly its own.
///
/// ```
/// use ratekeeper::{AnyLimiter, Gcra, Limiter, Nanos};
///
/// let mut limiter = AnyLimiter::from(Gcra::new(2, Nanos::from_secs(1)).unwrap());
/// assert_eq!(limiter.algorithm(), "gcra");
/// assert_eq!(limiter.window(), Nanos::from_secs(2));
/// assert!(limiter.try_acquire(Nanos::ZERO, 2).unwrap().allowed);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AnyLimiter {
    /// A token bucket with one bandwidth.
    TokenBucket(TokenBucket<1>),
    /// A token bucket with two bandwidths (boxed, like the next two, so
    /// that the common limiters stay small).
    TokenBucket2(Box<TokenBucket<2>>),
    /// A token bucket with three bandwidths.
    TokenBucket3(Box<TokenBucket<3>>),
    /// A token bucket with four bandwidths.
    TokenBucket4(Box<TokenBucket<4>>),
    /// The generic cell rate algorithm.
    Gcra(Gcra),
    /// The leaky bucket as a queue.
    LeakyBucket(LeakyBucket),
    /// The sliding-window log.
    #[cfg(feature = "alloc")]
    SlidingWindowLog(crate::SlidingWindowLog),
    /// The sliding-window counter.
    SlidingWindowCounter(SlidingWindowCounter),
    /// The fixed window.
    FixedWindow(FixedWindow),
}

/// Calls `$body` with `$l` bound to the limiter inside `$any`.
macro_rules! each {
    ($any:expr, $l:ident => $body:expr) => {
        match $any {
            AnyLimiter::TokenBucket($l) => $body,
            AnyLimiter::TokenBucket2($l) => $body,
            AnyLimiter::TokenBucket3($l) => $body,
            AnyLimiter::TokenBucket4($l) => $body,
            AnyLimiter::Gcra($l) => $body,
            AnyLimiter::LeakyBucket($l) => $body,
            #[cfg(feature = "alloc")]
            AnyLimiter::SlidingWindowLog($l) => $body,
            AnyLimiter::SlidingWindowCounter($l) => $body,
            AnyLimiter::FixedWindow($l) => $body,
        }
    };
}

impl AnyLimiter {
    /// A token bucket enforcing every one of `bandwidths` (1 to
    /// [`MAX_BANDWIDTHS`]).
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn token_bucket(bandwidths: &[Bandwidth]) -> Result<AnyLimiter, Error> {
        Ok(match *bandwidths {
            [] => return Err(Error::ZeroValue { name: "bandwidths" }),
            [a] => TokenBucket::from_bandwidths([a])?.into(),
            [a, b] => TokenBucket::from_bandwidths([a, b])?.into(),
            [a, b, c] => TokenBucket::from_bandwidths([a, b, c])?.into(),
            [a, b, c, d] => TokenBucket::from_bandwidths([a, b, c, d])?.into(),
            _ => {
                return Err(Error::TooLarge {
                    name: "bandwidths",
                    value: bandwidths.len() as u64,
                    max: MAX_BANDWIDTHS as u64,
                })
            }
        })
    }

    /// The algorithm's name, as configuration files spell it
    /// ([`Algorithm::name`]): `token_bucket`, `gcra`, `leaky_bucket`,
    /// `sliding_window_log`, `sliding_window_counter` or `fixed_window`.
    pub fn algorithm(&self) -> &'static str {
        let algorithm = match self {
            AnyLimiter::TokenBucket(_)
            | AnyLimiter::TokenBucket2(_)
            | AnyLimiter::TokenBucket3(_)
            | AnyLimiter::TokenBucket4(_) => Algorithm::TokenBucket,
            AnyLimiter::Gcra(_) => Algorithm::Gcra,
            AnyLimiter::LeakyBucket(_) => Algorithm::LeakyBucket,
            #[cfg(feature = "alloc")]
            AnyLimiter::SlidingWindowLog(_) => Algorithm::SlidingWindowLog,
            AnyLimiter::SlidingWindowCounter(_) => Algorithm::SlidingWindowCounter,
            AnyLimiter::FixedWindow(_) => Algorithm::FixedWindow,
        };
        algorithm.name()
    }

    /// The bytes the limiter holds on the heap beside itself: a
    /// [`SlidingWindowLog`](crate::SlidingWindowLog)'s ring; none for the others.
    pub fn heap_bytes(&self) -> usize {
        match self {
            #[cfg(feature = "alloc")]
            AnyLimiter::SlidingWindowLog(l) => l.heap_bytes(),
            _ => 0,
        }
    }

    /// Whether [`refund`](Limiter::refund) gives a booking back wherever it
    /// stands among later ones: the window algorithms, which keep each
    /// booking where it was counted. A token bucket, GCRA or leaky bucket
    /// keeps its bookings as one level or one queue's end: a booking given
    /// back from the middle frees the slot of the latest one, so a caller
    /// giving up its place (an aborted waiting acquire) gives back only
    /// while its booking is the latest, or moves those behind it up.
    pub fn refunds_any_booking(&self) -> bool {
        !matches!(
            self,
            AnyLimiter::TokenBucket(_)
                | AnyLimiter::TokenBucket2(_)
                | AnyLimiter::TokenBucket3(_)
                | AnyLimiter::TokenBucket4(_)
                | AnyLimiter::Gcra(_)
                | AnyLimiter::LeakyBucket(_)
        )
    }

    /// Whether the waiters behind a cancelled booking can move up into its
    /// slot: the bookings made after the latest one, given back newest
    /// first with it and booked again in order, each land no later than it
    /// was (tests/moves_up.rs). True of a GCRA and a leaky bucket, whose
    /// latest booking given back leaves them as they were. Not of a token
    /// bucket: a booking takes the refill up to its slot, which the
    /// capacity may clip, and gives back only its cost, so that a waiter
    /// booked again can land a refill period later (or, of several
    /// bandwidths, a second later: from 0.5 s to 1.5 s); it gives back
    /// exactly only while its booking is the latest. Nor of the window
    /// algorithms, which give any booking back where it was counted (see
    /// [`refunds_any_booking`](AnyLimiter::refunds_any_booking)), so that
    /// nobody needs to move.
    pub fn moves_up(&self) -> bool {
        matches!(self, AnyLimiter::Gcra(_) | AnyLimiter::LeakyBucket(_))
    }

    /// The span over which [`limit`](Limiter::limit) units are granted, as
    /// the `w` of a `RateLimit-Policy` header: a window algorithm's window
    /// (a calendar's nominal length: a day, 7 days, 30 days for a month);
    /// for a bucket, the time it takes to refill from empty (the bandwidth
    /// with the smallest capacity, for several); for a queue, the time it
    /// takes to drain when full.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn window(&self) -> Nanos {
        fn refill_time(bands: &[Bandwidth]) -> Nanos {
            let band = bands.iter().min_by_key(|b| b.capacity()).expect("a band");
            let (capacity, tokens) = (band.capacity() as u128, band.refill_tokens() as u128);
            let period = band.refill_period().0 as u128;
            saturating(match band.refill() {
                Refill::Greedy => (capacity * period).div_ceil(tokens),
                // Whole refills arrive at period ends only.
                Refill::Interval => capacity.div_ceil(tokens) * period,
            })
        }
        match self {
            AnyLimiter::TokenBucket(l) => refill_time(&l.bandwidths()),
            AnyLimiter::TokenBucket2(l) => refill_time(&l.bandwidths()),
            AnyLimiter::TokenBucket3(l) => refill_time(&l.bandwidths()),
            AnyLimiter::TokenBucket4(l) => refill_time(&l.bandwidths()),
            AnyLimiter::Gcra(l) => Nanos(l.burst() * l.emission_interval().0),
            AnyLimiter::LeakyBucket(l) => Nanos(l.limit() * l.interval().0),
            #[cfg(feature = "alloc")]
            AnyLimiter::SlidingWindowLog(l) => l.window(),
            AnyLimiter::SlidingWindowCounter(l) => l.window(),
            AnyLimiter::FixedWindow(l) => l.window(),
        }
    }

    /// This configuration, never called (a full bucket, an empty window or
    /// queue), whatever this limiter has seen. A log's ring is allocated
    /// whole, as [`SlidingWindowLog::new`](crate::SlidingWindowLog::new)
    /// allocates it, so that no decision allocates.
    ///
    /// A keyed store's new key takes none: its log grows as it needs.
    ///
    /// ```
    /// use ratekeeper::{AnyLimiter, Keyed, Nanos, SlidingWindowLog};
    ///
    /// let log = AnyLimiter::from(SlidingWindowLog::new(100, Nanos::from_secs(1)).unwrap());
    /// assert_eq!(log.fresh().heap_bytes(), log.heap_bytes());
    /// assert_eq!(log.new_state().heap_bytes(), 0);
    /// ```
    ///
    /// It makes a new limiter and leaves this one as it was: it resets
    /// nothing, and a result left unused is warned about.
    ///
    /// ```compile_fail
    /// #![deny(unused_must_use)]
    /// use ratekeeper::{AnyLimiter, Gcra, Limiter, Nanos};
    ///
    /// let mut limiter = AnyLimiter::from(Gcra::new(1, Nanos::from_secs(1)).unwrap());
    /// assert!(limiter.try_acquire(Nanos::ZERO, 1).unwrap().allowed);
    /// limiter.fresh(); // `limiter` is still empty
    /// ```
    #[must_use = "`fresh` returns a new limiter and resets nothing"]
    pub fn fresh(&self) -> AnyLimiter {
        #[cfg_attr(not(feature = "alloc"), allow(unused_mut))]
        let mut fresh = self.configuration();
        #[cfg(feature = "alloc")]
        if let AnyLimiter::SlidingWindowLog(log) = &mut fresh {
            log.allocate();
        }
        fresh
    }

    /// A log's [`SlidingWindowLog::ready`](crate::SlidingWindowLog): the
    /// other limiters hold no heap memory (see [`Keyed::ready_state`](crate::Keyed::ready_state)).
    #[cfg(feature = "alloc")]
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub(crate) fn ready(&mut self, now: Nanos) -> Result<(), Error> {
        match self {
            AnyLimiter::SlidingWindowLog(log) => log.ready(now),
            _ => Ok(()),
        }
    }

    /// A copy, [`Error::OutOfMemory`] where a log's ring finds no memory
    /// (see [`Keyed::clone_state`](crate::Keyed::clone_state)).
    #[cfg(feature = "alloc")]
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub(crate) fn try_clone(&self) -> Result<AnyLimiter, Error> {
        match self {
            AnyLimiter::SlidingWindowLog(log) => Ok(AnyLimiter::SlidingWindowLog(log.try_clone()?)),
            other => Ok(other.clone()),
        }
    }

    /// [`AnyLimiter::fresh`] without a log's ring: a keyed store's
    /// prototype, which never decides (each key's log grows its own).
    pub(crate) fn configuration(&self) -> AnyLimiter {
        match self {
            AnyLimiter::TokenBucket(l) => AnyLimiter::TokenBucket(l.fresh()),
            AnyLimiter::TokenBucket2(l) => AnyLimiter::TokenBucket2(Box::new(l.fresh())),
            AnyLimiter::TokenBucket3(l) => AnyLimiter::TokenBucket3(Box::new(l.fresh())),
            AnyLimiter::TokenBucket4(l) => AnyLimiter::TokenBucket4(Box::new(l.fresh())),
            AnyLimiter::Gcra(l) => AnyLimiter::Gcra(l.fresh()),
            AnyLimiter::LeakyBucket(l) => AnyLimiter::LeakyBucket(l.fresh()),
            #[cfg(feature = "alloc")]
            AnyLimiter::SlidingWindowLog(l) => AnyLimiter::SlidingWindowLog(l.fresh()),
            AnyLimiter::SlidingWindowCounter(l) => AnyLimiter::SlidingWindowCounter(l.fresh()),
            AnyLimiter::FixedWindow(l) => AnyLimiter::FixedWindow(l.fresh()),
        }
    }

    /// The calendar of a window algorithm's windows (UTC days, ISO weeks,
    /// months), if they follow one: such a limiter wants time from the Unix
    /// epoch, where the others take any clock.
    pub fn calendar(&self) -> Option<Calendar> {
        match self {
            AnyLimiter::SlidingWindowCounter(l) => l.calendar(),
            AnyLimiter::FixedWindow(l) => l.calendar(),
            _ => None,
        }
    }

    /// Replaces the configuration of a live limiter with that of `new`, by
    /// the rule of the algorithm's own `reconfigure`.
    ///
    /// Fails with [`Error::InvalidValue`] when `new` is another algorithm,
    /// or a token bucket with another number of bandwidths, since there is
    /// no rule to carry state across those.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn reconfigure(&mut self, now: Nanos, new: AnyLimiter) -> Result<(), Error> {
        match (self, new) {
            (AnyLimiter::TokenBucket(l), AnyLimiter::TokenBucket(n)) => l.reconfigure(now, n),
            (AnyLimiter::TokenBucket2(l), AnyLimiter::TokenBucket2(n)) => l.reconfigure(now, *n),
            (AnyLimiter::TokenBucket3(l), AnyLimiter::TokenBucket3(n)) => l.reconfigure(now, *n),
            (AnyLimiter::TokenBucket4(l), AnyLimiter::TokenBucket4(n)) => l.reconfigure(now, *n),
            (AnyLimiter::Gcra(l), AnyLimiter::Gcra(n)) => l.reconfigure(now, n),
            (AnyLimiter::LeakyBucket(l), AnyLimiter::LeakyBucket(n)) => l.reconfigure(now, n),
            #[cfg(feature = "alloc")]
            (AnyLimiter::SlidingWindowLog(l), AnyLimiter::SlidingWindowLog(n)) => {
                l.reconfigure(now, n)
            }
            (AnyLimiter::SlidingWindowCounter(l), AnyLimiter::SlidingWindowCounter(n)) => {
                l.reconfigure(now, n)
            }
            (AnyLimiter::FixedWindow(l), AnyLimiter::FixedWindow(n)) => l.reconfigure(now, n),
            _ => {
                return Err(Error::InvalidValue {
                    name: "new",
                    reason: "must be the same algorithm (and, for a token bucket, \
                             the same number of bandwidths) as the limiter it replaces",
                })
            }
        }
        Ok(())
    }
}

impl Limiter for AnyLimiter {
    fn limit(&self) -> u64 {
        each!(self, l => l.limit())
    }

    // Not `#[inline]`: that compiled a copy of this nine-way match into each
    // crate calling it (6.5 KB of the wasm), and callers got no faster.
    fn try_acquire(&mut self, now: Nanos, cost: u64) -> Result<Decision, Error> {
        each!(self, l => l.try_acquire(now, cost))
    }

    fn peek(&self, now: Nanos, cost: u64) -> Result<Decision, Error> {
        each!(self, l => l.peek(now, cost))
    }

    // `reserve` is the trait's own: `try_acquire`, then `reserve_after`,
    // each through the match above, as every limiter inside does it (none
    // has its own `reserve`). Matched here, it compiled a copy of each
    // limiter's decision into one more nine-way match (6.5 KB of the wasm).

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn reserve_after(&mut self, now: Nanos, cost: u64, wait: Nanos) -> Result<bool, Error> {
        each!(self, l => l.reserve_after(now, cost, wait))
    }

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn refund(&mut self, taken_at: Nanos, cost: u64) {
        each!(self, l => l.refund(taken_at, cost))
    }
}

macro_rules! from {
    ($($variant:ident($ty:ty)),* $(,)?) => {$(
        impl From<$ty> for AnyLimiter {
            fn from(limiter: $ty) -> AnyLimiter {
                AnyLimiter::$variant(limiter.into())
            }
        }
    )*};
}

from!(
    TokenBucket(TokenBucket<1>),
    TokenBucket2(TokenBucket<2>),
    TokenBucket3(TokenBucket<3>),
    TokenBucket4(TokenBucket<4>),
    Gcra(Gcra),
    LeakyBucket(LeakyBucket),
    SlidingWindowCounter(SlidingWindowCounter),
    FixedWindow(FixedWindow),
);

#[cfg(feature = "alloc")]
from!(SlidingWindowLog(crate::SlidingWindowLog));

impl Codec for AnyLimiter {
    fn tag(&self) -> u8 {
        each!(self, l => l.tag())
    }

    fn version(&self) -> u8 {
        each!(self, l => l.version())
    }

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn config(&self, fingerprint: &mut Fingerprint) {
        each!(self, l => l.config(fingerprint))
    }

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn write_state(&self, w: &mut Writer<'_>) {
        each!(self, l => l.write_state(w))
    }

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn read_state(&mut self, r: &mut Reader<'_>) -> Result<(), Error> {
        each!(self, l => l.read_state(r))
    }

    /// A log's own, which reads its entries into nothing (a copy of the
    /// enum would copy its ring), and a bucket's of several bandwidths,
    /// which reads into a copy of the bucket rather than of its box:
    /// checking allocates nothing. Any other limiter is read into a copy
    /// of the enum, a few numbers, through `read_state`'s dispatch (each
    /// algorithm's own `check_state` made the WebAssembly build 1.1 KB
    /// larger).
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn check_state(&self, r: &mut Reader<'_>) -> Result<(), Error> {
        match self {
            #[cfg(feature = "alloc")]
            AnyLimiter::SlidingWindowLog(l) => l.check_state(r),
            AnyLimiter::TokenBucket2(l) => l.check_state(r),
            AnyLimiter::TokenBucket3(l) => l.check_state(r),
            AnyLimiter::TokenBucket4(l) => l.check_state(r),
            _ => self.clone().read_state(r),
        }
    }
}
