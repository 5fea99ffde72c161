//! One keyed store type for every algorithm, chosen at run time.

use alloc::boxed::Box;

use foldhash::fast::SeedableRandomState;
use foldhash::SharedSeed;

use crate::byte_key::{ByteKey, Query};
use crate::{AnyLimiter, Decision, Error, Gcra, KeyedLimiter, Limiter, Nanos, TokenBucket};

/// A [`KeyedLimiter`] of any algorithm, keyed by bytes: what policies and
/// the language bindings hold. A GCRA store keeps one `u64` per key, a
/// one-bandwidth token bucket its 40-byte [`BucketState`](crate::BucketState); the other
/// algorithms keep their whole limiter per key. Keys of up to 22 bytes are
/// kept inline, without an allocation. Keys are hashed as by
/// [`KeyedLimiter::new`], unless the host seeds them
/// ([`AnyKeyed::seed_hashes`]).
///
/// ```
/// use ratekeeper::{AnyKeyed, FixedWindow, Nanos};
///
/// let mut per_ip = AnyKeyed::new(FixedWindow::new(2, Nanos::from_secs(1)).unwrap().into());
/// assert!(per_ip.try_acquire(b"10.0.0.1", Nanos::ZERO, 2).unwrap().allowed);
/// assert!(!per_ip.try_acquire(b"10.0.0.1", Nanos::ZERO, 1).unwrap().allowed);
/// assert!(per_ip.try_acquire(b"10.0.0.2", Nanos::ZERO, 1).unwrap().allowed);
/// ```
#[derive(Clone, Debug)]
pub struct AnyKeyed(Store);

#[derive(Clone, Debug)]
enum Store {
    Gcra(KeyedLimiter<ByteKey, Gcra, Hasher>),
    /// One bandwidth, the common bucket: its bands' state alone per key.
    TokenBucket(KeyedLimiter<ByteKey, TokenBucket, Hasher>),
    /// Boxed: an `AnyLimiter` prototype is large, and one indirection per
    /// store costs nothing per key.
    Any(Box<KeyedLimiter<ByteKey, AnyLimiter, Hasher>>),
}

/// hashbrown's default hasher (foldhash's), in the form that takes a seed.
type Hasher = SeedableRandomState;

/// The part of a keyed store's hash seed that stores share: made once, from
/// the host's randomness, and kept for the life of the program (`&'static`,
/// as foldhash takes it), with a part of each store's own given to
/// [`AnyKeyed::seed_hashes`].
///
/// Its `Debug` shows no seed (`HashSeed { .. }`), as `std`'s `RandomState`
/// shows none: a seed written to a log would tell a client the keys that
/// collide.
#[derive(Clone)]
pub struct HashSeed(SharedSeed);

impl core::fmt::Debug for HashSeed {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("HashSeed").finish_non_exhaustive()
    }
}

impl HashSeed {
    /// The shared seed that `entropy`, random bits from the host, makes.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    #[must_use]
    pub fn new(entropy: u64) -> HashSeed {
        HashSeed(SharedSeed::from_u64(entropy))
    }
}

/// The key a store keeps for a new `query` (see [`ByteKey::new`]).
fn own(query: &Query<'_>) -> Result<ByteKey, Error> {
    ByteKey::new(query.0)
}

/// Calls `$body` with `$s` bound to the store inside `$any`.
macro_rules! each {
    ($any:expr, $s:ident => $body:expr) => {
        match $any {
            Store::Gcra($s) => $body,
            Store::TokenBucket($s) => $body,
            Store::Any($s) => $body,
        }
    };
}

impl AnyKeyed {
    /// [`AnyLimiter::refunds_any_booking`] of its keys' limiter, without
    /// the copy [`AnyKeyed::prototype`] makes.
    pub fn refunds_any_booking(&self) -> bool {
        match &self.0 {
            Store::Gcra(_) | Store::TokenBucket(_) => false,
            Store::Any(s) => s.prototype().refunds_any_booking(),
        }
    }

    /// [`AnyLimiter::moves_up`] of its keys' limiter, without the copy
    /// [`AnyKeyed::prototype`] makes: the waiters of one key move up.
    pub fn moves_up(&self) -> bool {
        match &self.0 {
            Store::Gcra(_) => true,
            Store::TokenBucket(_) => false,
            Store::Any(s) => s.prototype().moves_up(),
        }
    }

    /// A store in which every key starts as a fresh `prototype`: its
    /// configuration, never called, whatever `prototype` has seen.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    #[must_use]
    pub fn new(prototype: AnyLimiter) -> AnyKeyed {
        AnyKeyed(match prototype.configuration() {
            AnyLimiter::Gcra(gcra) => {
                Store::Gcra(KeyedLimiter::with_hasher(gcra, Hasher::random()))
            }
            AnyLimiter::TokenBucket(bucket) => {
                Store::TokenBucket(KeyedLimiter::with_hasher(bucket, Hasher::random()))
            }
            other => Store::Any(Box::new(KeyedLimiter::with_hasher(other, Hasher::random()))),
        })
    }

    /// Seeds the hashing of keys from the host's randomness: `shared` (made
    /// once) and `entropy` (this store's), rehashing the keys held;
    /// decisions are unchanged. Where the process has address-space layout
    /// randomization, the default seeds come from it; elsewhere
    /// (WebAssembly) they are predictable, and a client could send keys
    /// crafted to collide in the table, each lookup then a scan of them.
    /// The WebAssembly binding seeds each store so, from the Web Crypto
    /// API, at its first operation; the Python and Node bindings from the
    /// operating system's generator, when they build it.
    ///
    /// ```
    /// use ratekeeper::{AnyKeyed, Gcra, HashSeed, Nanos};
    ///
    /// let shared: &'static HashSeed = Box::leak(Box::new(HashSeed::new(0x5eed_0000_2545_f491)));
    /// let mut store = AnyKeyed::new(Gcra::new(1, Nanos::from_secs(1)).unwrap().into());
    /// assert!(store.try_acquire(b"alice", Nanos::ZERO, 1).unwrap().allowed);
    /// store.seed_hashes(shared, 0x1234_abcd_0042);
    /// assert!(!store.try_acquire(b"alice", Nanos::ZERO, 1).unwrap().allowed);
    /// ```
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn seed_hashes(&mut self, shared: &'static HashSeed, entropy: u64) {
        each!(&mut self.0, s => s.set_hasher(Hasher::with_seed(entropy, &shared.0)))
    }

    /// The same store, holding at most `max_keys` keys; see
    /// [`KeyedLimiter::with_max_keys`].
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn with_max_keys(self, max_keys: usize, eviction: crate::Eviction) -> Result<Self, Error> {
        Ok(AnyKeyed(match self.0 {
            Store::Gcra(s) => Store::Gcra(s.with_max_keys(max_keys, eviction)?),
            Store::TokenBucket(s) => Store::TokenBucket(s.with_max_keys(max_keys, eviction)?),
            Store::Any(s) => Store::Any(Box::new(s.with_max_keys(max_keys, eviction)?)),
        }))
    }

    /// The same store, bounded as a configuration or a binding's options
    /// ask: at most `max_keys` keys, with `eviction` at the bound (by
    /// default [`Eviction::NearestFresh`](crate::Eviction::NearestFresh)),
    /// or no bound when `max_keys` is `None` (above 2^32 - 1, that is the
    /// bound).
    ///
    /// Fails naming `eviction` when it is [`Eviction::Refuse`](crate::Eviction::Refuse)
    /// without `max_keys`: a store without a bound never refuses a key, so
    /// the choice would go unheard. (`NearestFresh` without a bound is the
    /// default, as an unbounded store's `eviction` reads back.)
    ///
    /// ```
    /// use ratekeeper::{AnyKeyed, Eviction, FixedWindow, Nanos};
    ///
    /// let store = || AnyKeyed::new(FixedWindow::new(2, Nanos::from_secs(1)).unwrap().into());
    /// assert!(store().bounded(Some(100), Some(Eviction::Refuse)).is_ok());
    /// assert!(store().bounded(None, Some(Eviction::NearestFresh)).is_ok());
    /// let err = store().bounded(None, Some(Eviction::Refuse)).unwrap_err();
    /// assert_eq!(err.argument(), Some("eviction"));
    /// ```
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn bounded(
        self,
        max_keys: Option<u64>,
        eviction: Option<crate::Eviction>,
    ) -> Result<Self, Error> {
        match (max_keys, eviction) {
            (None, Some(crate::Eviction::Refuse)) => Err(Error::InvalidValue {
                name: "eviction",
                reason: "is \"refuse\", which needs a bound on the keys: a store without one \
                         never refuses a key",
            }),
            (None, _) => Ok(self),
            (Some(max), eviction) => self.with_max_keys(
                usize::try_from(max).unwrap_or(usize::MAX),
                eviction.unwrap_or_default(),
            ),
        }
    }

    /// The configuration every key follows.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn prototype(&self) -> AnyLimiter {
        match &self.0 {
            Store::Gcra(s) => AnyLimiter::Gcra(s.prototype().clone()),
            Store::TokenBucket(s) => AnyLimiter::TokenBucket(s.prototype().clone()),
            Store::Any(s) => s.prototype().clone(),
        }
    }

    /// The most units a key admits at once.
    pub fn limit(&self) -> u64 {
        each!(&self.0, s => s.prototype().limit())
    }

    /// The number of keys held.
    pub fn len(&self) -> usize {
        each!(&self.0, s => s.len())
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes the store's table holds on the heap (see
    /// [`KeyedLimiter::allocation_size`]), for hosts whose collector must be
    /// told of native memory. Computed in a few steps, without visiting the
    /// keys: what keys of more than 22 bytes and the keys' logs hold beside
    /// it is not counted.
    pub fn heap_bytes(&self) -> usize {
        each!(&self.0, s => s.allocation_size())
    }

    /// See [`KeyedLimiter::try_acquire`].
    // Inlined into its caller, which then reads the decision from registers:
    // returned through memory, written a field at a time and read back wider,
    // it stalled the CPU for a tenth of a keyed call.
    #[inline]
    pub fn try_acquire(&mut self, key: &[u8], now: Nanos, cost: u64) -> Result<Decision, Error> {
        let key = &Query(key);
        each!(&mut self.0, s => {
            let at = s.locate_recent(key);
            s.try_acquire_at(at, key, own, now, cost)
        })
    }

    /// See [`KeyedLimiter::try_acquire_batch`].
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn try_acquire_batch(
        &mut self,
        key: &[u8],
        now: Nanos,
        costs: &[u64],
        out: &mut [Result<Decision, Error>],
    ) -> Result<(), Error> {
        each!(&mut self.0, s => s.try_acquire_batch_with(&Query(key), own, now, costs, out))
    }

    /// The error a binding's batch raises before deciding anything, if
    /// any: [`Error::CostExceedsLimit`] for the first of `costs` above the
    /// limit, else what `peek` of the largest raises for `key` at `now`
    /// ([`Error::StoreFull`] for a new key a full store refuses). The core's
    /// [`Self::try_acquire_batch`] fails only the entry of a cost above the
    /// limit; a binding that fails the whole call instead checks this
    /// first, so that a failed batch changes nothing and every binding
    /// names the same cost.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn check_batch(&self, key: &[u8], now: Nanos, costs: &[u64]) -> Result<(), Error> {
        let limit = self.limit();
        let over = costs.iter().copied().find(|&cost| cost > limit);
        match over.or_else(|| costs.iter().copied().max()) {
            Some(cost) => self.peek(key, now, cost).map(drop),
            None => Ok(()),
        }
    }

    /// Makes sure that `try_acquire` calls of each of `costs` for `key` at
    /// `now`, one after another, cannot fail for want of memory or for a
    /// full store: for a binding that decides a batch so (through its keyed
    /// operation, rather than [`Self::try_acquire_batch`]), so that the
    /// batch fails whole or not at all. Else a cost that needs memory may
    /// fail after others moved the store's time (a cost of 0, a denial),
    /// where a caller whose clock lags is then judged. A key held is given
    /// room for its event (a log's ring grown); a new key that a cost
    /// would insert is inserted fresh (it answers as a key not held does;
    /// a sweep drops it if it stays fresh). Fails with
    /// [`Error::OutOfMemory`] or [`Error::StoreFull`], changing no answer
    /// (a sweep may have dropped keys back to fresh). Call it after
    /// [`Self::check_batch`].
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn prepare_batch(&mut self, key: &[u8], now: Nanos, costs: &[u64]) -> Result<(), Error> {
        // As a policy makes room for its limits' keys: costs of 0 change no
        // key, but in a store that keeps its keys even when fresh (see
        // `KeyedLimiter::drops_fresh`), where any call inserts one. No
        // costs, no call.
        let none_changes = costs.iter().all(|&cost| cost == 0) && self.drops_fresh();
        if costs.is_empty() || none_changes {
            return Ok(());
        }
        match self.locate(key, None) {
            Some(at) => self.ready_at(at, now),
            None => self.insert_fresh(key, now),
        }
    }

    /// See [`KeyedLimiter::peek`].
    pub fn peek(&self, key: &[u8], now: Nanos, cost: u64) -> Result<Decision, Error> {
        each!(&self.0, s => s.peek(&Query(key), now, cost))
    }

    /// See [`KeyedLimiter::reserve`].
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn reserve(
        &mut self,
        key: &[u8],
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> Result<Result<Nanos, Decision>, Error> {
        each!(&mut self.0, s => s.reserve_with(&Query(key), own, now, cost, max_wait))
    }

    /// See [`KeyedLimiter::reserve_after`].
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn reserve_after(
        &mut self,
        key: &[u8],
        now: Nanos,
        cost: u64,
        wait: Nanos,
    ) -> Result<bool, Error> {
        each!(&mut self.0, s => s.reserve_after_with(&Query(key), own, now, cost, wait))
    }

    /// See [`KeyedLimiter::locate`].
    #[inline]
    pub(crate) fn locate(&self, key: &[u8], hint: Option<usize>) -> Option<usize> {
        each!(&self.0, s => s.locate(&Query(key), hint))
    }

    /// [`KeyedLimiter::peek_at`], into `out`. Not returned: a decision
    /// returned through memory is written a field at a time, and the
    /// caller's copy read it back 16 bytes at a time, each such load waiting
    /// for the stores it spans to reach the cache (a failed store
    /// forwarding): a sixth of a policy's decision.
    pub(crate) fn peek_at(
        &self,
        at: Option<usize>,
        now: Nanos,
        cost: u64,
        out: &mut Decision,
    ) -> Result<(), Error> {
        // Written in each arm, from registers: the arms' answers merged
        // into one value went through the stack, and back, as above.
        each!(&self.0, s => {
            let Decision { allowed, remaining, limit, retry_after, reset_after } =
                s.peek_at(at, now, cost)?;
            (out.allowed, out.remaining, out.limit) = (allowed, remaining, limit);
            (out.retry_after, out.reset_after) = (retry_after, reset_after);
        });
        Ok(())
    }

    /// See [`KeyedLimiter::try_acquire_at`].
    #[inline]
    pub(crate) fn try_acquire_at(
        &mut self,
        at: Option<usize>,
        key: &[u8],
        now: Nanos,
        cost: u64,
    ) -> Result<Decision, Error> {
        each!(&mut self.0, s => s.try_acquire_at(at, &Query(key), own, now, cost))
    }

    /// See [`KeyedLimiter::insert_fresh`]. Out of line: one copy of the
    /// three stores' serves every limit of every policy.
    #[inline(never)]
    pub(crate) fn insert_fresh(&mut self, key: &[u8], now: Nanos) -> Result<(), Error> {
        each!(&mut self.0, s => s.insert_fresh(&Query(key), own, now))
    }

    /// See [`KeyedLimiter::ready_at`]: nothing to do but for the store that
    /// may keep logs, whose keys' logs grow with their events.
    #[inline]
    pub(crate) fn ready_at(&mut self, at: usize, now: Nanos) -> Result<(), Error> {
        match &mut self.0 {
            Store::Any(s) => s.ready_at(at, now),
            Store::Gcra(_) | Store::TokenBucket(_) => Ok(()),
        }
    }

    /// See [`KeyedLimiter::remove_last`].
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub(crate) fn remove_last(&mut self) {
        each!(&mut self.0, s => s.remove_last())
    }

    /// See [`KeyedLimiter::refuses_at`].
    pub(crate) fn refuses_at(&self, at: Option<usize>, now: Nanos) -> Result<(), Error> {
        each!(&self.0, s => s.refuses_at(at, now))
    }

    /// See [`KeyedLimiter::would_book`].
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub(crate) fn would_book(
        &self,
        key: &[u8],
        now: Nanos,
        cost: u64,
        wait: Nanos,
    ) -> Result<bool, Error> {
        each!(&self.0, s => s.would_book(&Query(key), now, cost, wait))
    }

    /// See [`KeyedLimiter::drops_fresh`].
    pub(crate) fn drops_fresh(&self) -> bool {
        each!(&self.0, s => s.drops_fresh())
    }

    /// See [`KeyedLimiter::make_room_at`].
    pub(crate) fn make_room_at(&mut self, at: Option<usize>, now: Nanos) -> Result<(), Error> {
        each!(&mut self.0, s => s.make_room_at(at, now))
    }

    /// See [`KeyedLimiter::refund`].
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn refund(&mut self, key: &[u8], taken_at: Nanos, cost: u64) {
        each!(&mut self.0, s => s.refund(&Query(key), taken_at, cost))
    }

    /// See [`KeyedLimiter::reset`].
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn reset(&mut self, key: &[u8]) -> bool {
        each!(&mut self.0, s => s.reset(&Query(key)))
    }

    /// See [`KeyedLimiter::reclaim`].
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn reclaim(&mut self, now: Nanos) {
        each!(&mut self.0, s => s.reclaim(now))
    }
}

#[cfg(test)]
impl AnyKeyed {
    /// The hash of `key` in this store, for tests of what seeds it.
    pub(crate) fn hash_of(&self, key: &[u8]) -> u64 {
        use core::hash::BuildHasher;
        let key = ByteKey::new(key).unwrap();
        each!(&self.0, s => s.hasher().hash_one(&key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::hash::BuildHasher;

    #[test]
    fn a_batch_is_checked_for_its_first_cost_above_the_limit_then_its_largest() {
        let store = AnyKeyed::new(Gcra::new(3, Nanos(100)).unwrap().into());
        // The first cost above the limit, not one at the limit before it.
        let over = store.check_batch(b"k", Nanos(0), &[3, 5, 4]).unwrap_err();
        assert_eq!(over, Error::CostExceedsLimit { cost: 5, limit: 3 });
        assert_eq!(store.check_batch(b"k", Nanos(0), &[1, 3, 0]), Ok(()));
        assert_eq!(store.check_batch(b"k", Nanos(0), &[]), Ok(()));
        // A full store refuses the new key that the largest cost inserts; a
        // cost of 0 inserts none.
        let mut full = store.with_max_keys(1, crate::Eviction::Refuse).unwrap();
        assert!(full.try_acquire(b"a", Nanos(0), 1).unwrap().allowed);
        let refused = full.check_batch(b"b", Nanos(0), &[0, 1]).unwrap_err();
        assert_eq!(refused.code(), "store_full");
        assert_eq!(full.check_batch(b"b", Nanos(0), &[0, 0]), Ok(()));
    }

    #[test]
    fn seeding_hashes_with_both_parts_of_the_seed() {
        let shared: &'static HashSeed = Box::leak(Box::new(HashSeed::new(7)));
        let mut store = AnyKeyed::new(Gcra::new(1, Nanos(1)).unwrap().into());
        store.seed_hashes(shared, 42);
        let Store::Gcra(s) = &store.0 else {
            unreachable!()
        };
        let key = ByteKey::new(b"sixteen bytes!!!").unwrap();
        let expected = Hasher::with_seed(42, &shared.0).hash_one(&key);
        assert_eq!(s.hasher().hash_one(&key), expected);
        // Another shared part alone hashes otherwise: it is the store's, not foldhash's global one.
        let other: &'static HashSeed = Box::leak(Box::new(HashSeed::new(8)));
        assert_ne!(Hasher::with_seed(42, &other.0).hash_one(&key), expected);
    }

    #[test]
    fn debug_shows_no_hash_seed() {
        let shared: &'static HashSeed = Box::leak(Box::new(HashSeed::new(7)));
        assert_eq!(alloc::format!("{shared:?}"), "HashSeed { .. }");
        // foldhash's own Debug writes the seeds out, word by word.
        let seeds = alloc::format!("{:?}", shared.0);
        let word = seeds.split(['[', ',', ']']).nth(1).unwrap().trim();
        assert!(word.parse::<u64>().is_ok(), "{seeds}");

        let mut store = AnyKeyed::new(Gcra::new(1, Nanos(1)).unwrap().into());
        store.seed_hashes(shared, 42);
        assert!(store.try_acquire(b"alice", Nanos(0), 1).unwrap().allowed);
        let mut policy = crate::Policy::new();
        policy
            .add_store("per-user", &["user"], store.clone())
            .unwrap();
        // A policy keeps its own part of the seed too, for limits added later.
        let entropy = 0x5eed_0000_2545_f491_u64;
        policy.seed_hashes(shared, entropy);
        let entropy = alloc::format!("{entropy}");
        assert!(!alloc::format!("{policy:?}").contains(&entropy));
        for shown in [alloc::format!("{store:?}"), alloc::format!("{policy:?}")] {
            assert!(shown.contains("KeyedLimiter"), "{shown}");
            assert!(!shown.contains(word), "{shown}");
            assert!(!shown.contains("seed"), "{shown}");
        }
    }
}
