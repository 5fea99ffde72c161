//! Per-key limiters: one configuration, a small state per key.

use core::borrow::Borrow;
use core::hash::{BuildHasher, Hash};

use alloc::borrow::ToOwned;
use alloc::vec::Vec;
use equivalent::Equivalent;

use crate::key_table::{KeyTable, MAX_LEN};
use crate::limiter::check_batch;
use crate::{Decision, Error, Limiter, Nanos};

/// A limiter that a [`KeyedLimiter`] can keep per key: its configuration
/// once, and for each key a [`State`](Keyed::State) that may be much smaller
/// than the limiter (a [`Gcra`](crate::Gcra) key is one `u64`).
///
/// Sealed: implemented by this crate's limiters and [`AnyLimiter`](crate::AnyLimiter),
/// and by no other type. A store relies on more than these methods say (a
/// key back to fresh is dropped, a GCRA key's clipped time is read as used
/// without end), and a method may be added to it in a minor release;
/// a limiter of your own can still be a [`Limiter`], kept per key in a map
/// of yours.
///
/// ```compile_fail,E0277
/// use ratekeeper::{Decision, Error, Gcra, Keyed, Limiter, Nanos};
///
/// #[derive(Clone)]
/// struct Mine(Gcra);
///
/// impl Limiter for Mine {
///     fn limit(&self) -> u64 { self.0.limit() }
///     fn try_acquire(&mut self, now: Nanos, cost: u64) -> Result<Decision, Error> {
///         self.0.try_acquire(now, cost)
///     }
///     fn peek(&self, now: Nanos, cost: u64) -> Result<Decision, Error> { self.0.peek(now, cost) }
///     fn reserve_after(&mut self, now: Nanos, cost: u64, wait: Nanos) -> Result<bool, Error> {
///         self.0.reserve_after(now, cost, wait)
///     }
///     fn refund(&mut self, taken_at: Nanos, cost: u64) { self.0.refund(taken_at, cost) }
/// }
///
/// // Refused: `Mine` is not one of the crate's limiters.
/// impl Keyed for Mine {
///     type State = Mine;
///     fn new_state(&self) -> Mine { self.clone() }
///     fn with_state<R>(&self, state: &mut Mine, _: Nanos, f: impl FnOnce(&mut Mine) -> R) -> R {
///         f(state)
///     }
///     fn read_state<R>(&self, state: &Mine, _: Nanos, f: impl FnOnce(&Mine) -> R) -> R {
///         f(state)
///     }
/// }
/// ```
pub trait Keyed: Limiter + Clone + sealed::Sealed {
    /// What a store keeps per key.
    type State;

    /// The state of a key never seen: a fresh limiter, whatever this one
    /// has seen.
    fn new_state(&self) -> Self::State;

    /// Runs `f` on the limiter that `state` stands for, the store having
    /// seen time up to `latest`, and keeps what `f` did to it.
    fn with_state<R>(
        &self,
        state: &mut Self::State,
        latest: Nanos,
        f: impl FnOnce(&mut Self) -> R,
    ) -> R;

    /// Runs `f` on the limiter that `state` stands for, changing nothing.
    fn read_state<R>(&self, state: &Self::State, latest: Nanos, f: impl FnOnce(&Self) -> R) -> R;

    /// Decides each of `costs` at `now` into `out` on the limiter that
    /// `state` stands for, exactly as as many
    /// [`with_state`](Keyed::with_state) calls of `try_acquire` would: each
    /// cost from the state kept after the one before. The limiter's own
    /// batch is that when the state is the whole limiter.
    ///
    /// Fails, deciding nothing, when `out` is shorter than `costs`.
    fn try_acquire_batch_state(
        &self,
        state: &mut Self::State,
        latest: Nanos,
        now: Nanos,
        costs: &[u64],
        out: &mut [Result<Decision, Error>],
    ) -> Result<(), Error> {
        self.with_state(state, latest, |l| l.try_acquire_batch(now, costs, out))
    }

    /// Gives `state` the room an event at `now` takes (the store's time,
    /// or later), so that the call that records it allocates nothing: a
    /// key's [`SlidingWindowLog`](crate::SlidingWindowLog), which grows with
    /// its events, grown now, and [`Error::OutOfMemory`] if that fails.
    /// Changes no answer. How a store makes sure that a call made of
    /// several steps (a policy's limits, a batch, a reservation that tries
    /// first) cannot fail for want of memory after a step changed a key.
    /// The other limiters hold no heap memory: nothing to do.
    fn ready_state(&self, state: &mut Self::State, now: Nanos) -> Result<(), Error> {
        let _ = (state, now);
        Ok(())
    }

    /// A copy of `state`, to try a call on: [`Error::OutOfMemory`] where
    /// memory for a log's ring runs out (the others copy no heap memory,
    /// but a multi-bandwidth bucket's box).
    fn clone_state(&self, state: &Self::State) -> Result<Self::State, Error>
    where
        Self::State: Clone,
    {
        Ok(state.clone())
    }
}

/// [`Keyed`]'s supertrait, which no type outside this crate can name, so
/// that none can implement `Keyed` (the sealed-trait pattern).
pub(crate) mod sealed {
    /// Implemented by the types that implement [`Keyed`](super::Keyed).
    pub trait Sealed {}
}

impl sealed::Sealed for crate::Gcra {}

impl Keyed for crate::Gcra {
    /// The theoretical arrival time: when the key is full again.
    type State = u64;

    fn new_state(&self) -> u64 {
        0
    }

    #[inline]
    fn with_state<R>(&self, tat: &mut u64, latest: Nanos, f: impl FnOnce(&mut Self) -> R) -> R {
        let mut limiter = self.with_tat(*tat, latest.0);
        let result = f(&mut limiter);
        // A full limiter's TAT is any time up to `latest`: the one kept
        // stays, where `limiter.tat()` would be `latest` itself. `latest`
        // may be ahead of the store's time (a call that failed, which
        // leaves the store's time as it was), and a TAT moved there would
        // hold the key to a use it never had, as seen from a caller whose
        // clock lags.
        *tat = if limiter.used() == 0 {
            (*tat).min(limiter.tat())
        } else {
            limiter.tat()
        };
        result
    }

    #[inline]
    fn read_state<R>(&self, tat: &u64, latest: Nanos, f: impl FnOnce(&Self) -> R) -> R {
        f(&self.with_tat(*tat, latest.0))
    }

    /// Each cost through [`Keyed::with_state`], as calls one by one: the
    /// TAT kept between two costs is the one word the store keeps, which
    /// at the end of the clock is clipped to [`Nanos::MAX`] and read back
    /// as used without end. The limiter's own batch would carry its
    /// unclipped state from one cost to the next, and so answer for a state
    /// the store does not keep (units left that the next call refuses).
    fn try_acquire_batch_state(
        &self,
        tat: &mut u64,
        latest: Nanos,
        now: Nanos,
        costs: &[u64],
        out: &mut [Result<Decision, Error>],
    ) -> Result<(), Error> {
        check_batch(costs, out)?;
        for (&cost, slot) in costs.iter().zip(out) {
            *slot = self.with_state(tat, latest, |l| l.try_acquire(now, cost));
        }
        Ok(())
    }
}

/// `Keyed` for limiters whose per-key state is the whole limiter, each new
/// key's made by `$fresh`: never a log's whole ring, which each key grows as
/// it needs ([`AnyLimiter::fresh`](crate::AnyLimiter::fresh) allocates it).
macro_rules! keyed_by_clone {
    ($($ty:ty => $fresh:ident $(, ready: $ready:ident, clone: $clone:ident)?;)*) => {$(
        impl sealed::Sealed for $ty {}

        impl Keyed for $ty {
            /// The whole limiter.
            type State = $ty;

            fn new_state(&self) -> $ty {
                self.$fresh()
            }

            #[inline]
            fn with_state<R>(&self, state: &mut $ty, _: Nanos, f: impl FnOnce(&mut $ty) -> R) -> R {
                f(state)
            }

            #[inline]
            fn read_state<R>(&self, state: &$ty, _: Nanos, f: impl FnOnce(&$ty) -> R) -> R {
                f(state)
            }

            $(
                fn ready_state(&self, state: &mut $ty, now: Nanos) -> Result<(), Error> {
                    state.$ready(now)
                }

                fn clone_state(&self, state: &$ty) -> Result<$ty, Error> {
                    state.$clone()
                }
            )?
        }
    )*};
}

keyed_by_clone!(
    crate::LeakyBucket => fresh;
    crate::SlidingWindowCounter => fresh;
    crate::FixedWindow => fresh;
    crate::SlidingWindowLog => fresh, ready: ready, clone: try_clone;
    crate::AnyLimiter => configuration, ready: ready, clone: try_clone;
);

/// What a [`KeyedLimiter`] at its `max_keys` bound does when a new key
/// arrives and no key is back to fresh.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize, serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Eviction {
    /// Forget the keys nearest to fresh (the smallest `reset_after`),
    /// `max_keys / 16` of them (at least one, and at least as many as
    /// bring a store bounded while it held more keys down to its bound)
    /// at a time. A forgotten key starts fresh when it returns, so it may
    /// be admitted early by what its state still held: the least of any
    /// key's, but with reservations booked ahead that may be more than one
    /// limit's worth (a key that booked ten limits' worth and was forgotten
    /// may book ten more).
    #[default]
    NearestFresh,
    /// Keep every key and fail the request with [`Error::StoreFull`].
    Refuse,
}

impl Eviction {
    /// Every eviction rule, in declaration order (a slice: a rule added in
    /// a minor release changes its length, not its type).
    pub const ALL: &'static [Eviction] = &[Eviction::NearestFresh, Eviction::Refuse];

    /// The eviction's name as configuration spells it: `nearest_fresh` or
    /// `refuse`.
    pub const fn name(self) -> &'static str {
        match self {
            Eviction::NearestFresh => "nearest_fresh",
            Eviction::Refuse => "refuse",
        }
    }

    /// The eviction named `name`, spelled exactly as [`Eviction::name`]
    /// spells it.
    pub fn from_name(name: &str) -> Option<Eviction> {
        Eviction::ALL.iter().copied().find(|e| e.name() == name)
    }
}

/// [`Eviction::name`]: `nearest_fresh` or `refuse`.
impl core::fmt::Display for Eviction {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.pad(self.name())
    }
}

/// The hasher of a [`KeyedLimiter`] built by [`KeyedLimiter::new`]:
/// foldhash's fast hasher (what `hashbrown` uses by default), each store
/// seeded apart from address-space layout randomization ("minimally
/// DoS-resistant", in foldhash's words; see [`KeyedLimiter::new`]).
///
/// A type of this crate, not `hashbrown`'s or `foldhash`'s, so that a new
/// version of either, or another default hasher, is no breaking change
/// here. Its `Debug` shows no seed (`DefaultHashBuilder { .. }`), as
/// `std`'s `RandomState` shows none: a seed written to a log would tell a
/// client the keys that collide.
#[derive(Clone, Default)]
pub struct DefaultHashBuilder(foldhash::fast::RandomState);

impl core::fmt::Debug for DefaultHashBuilder {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DefaultHashBuilder").finish_non_exhaustive()
    }
}

impl BuildHasher for DefaultHashBuilder {
    type Hasher = DefaultHasher;

    #[inline(always)]
    fn build_hasher(&self) -> DefaultHasher {
        DefaultHasher(self.0.build_hasher())
    }
}

/// The hasher a [`DefaultHashBuilder`] builds. Its `Debug` shows no seed.
#[derive(Clone)]
pub struct DefaultHasher(foldhash::fast::FoldHasher<'static>);

impl core::fmt::Debug for DefaultHasher {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DefaultHasher").finish_non_exhaustive()
    }
}

/// `Hasher` methods that pass each write on as it is.
macro_rules! pass_on {
    ($($write:ident($ty:ty)),* $(,)?) => {$(
        #[inline(always)]
        fn $write(&mut self, value: $ty) {
            self.0.$write(value);
        }
    )*};
}

/// Each write passed on as it is: foldhash hashes a whole number in fewer
/// steps than its bytes (the signed ones go through these by default).
impl core::hash::Hasher for DefaultHasher {
    pass_on!(
        write(&[u8]),
        write_u8(u8),
        write_u16(u16),
        write_u32(u32),
        write_u64(u64),
        write_u128(u128),
        write_usize(usize),
    );

    #[inline(always)]
    fn finish(&self) -> u64 {
        self.0.finish()
    }
}

/// One limiter per key, sharing one configuration, in a hash table.
///
/// The states lie in the order their keys first arrived (removing keys
/// keeps the others in that order), found through a small table of positions
/// (4 bytes and a control byte per slot): calls that go round many keys
/// read memory in order, and a lookup in a random order misses the CPU's
/// caches on the state itself (and on its position too, past about a
/// million keys).
///
/// A key's state exists only while it differs from a fresh limiter's: a key
/// is inserted by the first request that changes it, and keys back to fresh
/// (a full bucket cannot be told from a new one) are reclaimed lazily: when
/// the store has doubled since the last sweep, a new key triggers one pass
/// that drops every fresh key. Nothing is lost, and there are no timers or
/// threads; but for a token bucket with interval refill, whose periods
/// count from its first call: a full key dropped and seen again counts its
/// periods from its next call, so its next refill may come later than it
/// would have (never sooner). A store whose new keys start short of fresh (a token bucket
/// whose `initial_tokens` are below its capacity) drops no key, since a
/// full key is not a new one: bound such a store with `max_keys`. With
/// [`with_max_keys`](Self::with_max_keys) the store never holds
/// more than `max_keys` keys (and never more than 2^32 - 1: a store without a
/// bound treats that as its bound); see [`Eviction`] for what happens there.
/// A full store sweeps again only once a key it holds may be fresh (or
/// after a refund), so that refusing new keys costs no pass over the keys.
///
/// **Time** is kept per store: a call at a `now` earlier than the latest
/// time the store has seen (for any key) is decided as of that latest time,
/// and its waits are measured from `now`, as a single limiter does when time
/// goes backwards. So a key dropped as fresh and seen again cannot be
/// admitted in the past.
///
/// **The end of the clock.** A [`Gcra`](crate::Gcra) key is one word, its
/// theoretical arrival time: one that would reach 2^64 - 1 ns (a request
/// within `burst` intervals of the end of the clock, or a booking past it)
/// is kept as 2^64 - 1 ns, read as used without end. From then on the key
/// admits no cost but 0, and answers `remaining` 0 and a `reset_after` of
/// [`Nanos::MAX`]: stricter than its own limiter, which keeps the time
/// past 2^64 - 1 ns, never looser. A batch decides each of its costs from
/// the state kept after the one before, as calls one by one do.
///
/// **Memory.** What a store allocates as it grows, it allocates fallibly:
/// its table (each key's position, and its entry: key and state), the
/// bytes of a key longer than 22 in a store of byte keys
/// ([`AnyKeyed`](crate::AnyKeyed)), a key's
/// [`SlidingWindowLog`](crate::SlidingWindowLog) ring, which doubles with
/// its events, and the 8 bytes a key that an eviction sorts. Where memory
/// runs out, the call fails with [`Error::OutOfMemory`] and changes
/// nothing: the key's bytes and a log's ring are made before anything
/// changes, and the table grows after making room (a sweep, which drops
/// only keys back to fresh and so changes no answer; an eviction, which
/// leaves room, so that nothing fails after it). The store goes on
/// answering for the keys it holds, and takes new ones once memory is
/// given back: an attacker's flood of new keys into a store without a
/// bound (or a large one) fails its own requests, not the process. What
/// stays infallible, and aborts as any allocation in Rust does: a key of
/// your type (`String`'s clone), and a token bucket of several bandwidths
/// kept per key in an [`AnyKeyed`](crate::AnyKeyed), whose state
/// [`AnyLimiter`](crate::AnyLimiter) boxes: a fixed few hundred bytes per
/// key, where the table grows by doubling (to tens of megabytes at a
/// million keys), so that an allocator running out refuses the table's
/// growth first. A sweep that gives memory back shrinks the entries' buffer
/// with `Vec::shrink_to`, which has no fallible form: a shrinking
/// `realloc`, done in place by std's allocator on Linux (glibc's) and the
/// wasm build's (talc).
///
/// ```
/// use ratekeeper::{Gcra, KeyedLimiter, Nanos};
///
/// // Per user: 2 at once, then one per second.
/// let mut per_user = KeyedLimiter::new(Gcra::new(2, Nanos::from_secs(1)).unwrap());
/// assert!(per_user.try_acquire("alice", Nanos::ZERO, 2).unwrap().allowed);
/// assert!(!per_user.try_acquire("alice", Nanos::ZERO, 1).unwrap().allowed);
/// assert!(per_user.try_acquire("bob", Nanos::ZERO, 1).unwrap().allowed);
/// assert_eq!(per_user.len(), 2);
/// ```
#[derive(Clone, Debug)]
pub struct KeyedLimiter<K, L: Keyed, S = DefaultHashBuilder> {
    prototype: L,
    states: KeyTable<K, L::State, S>,
    latest: u64,
    max_keys: Option<usize>,
    eviction: Eviction,
    /// The length at which a new key triggers the next sweep.
    sweep_at: usize,
    /// Whether a key back to fresh may be dropped: whether a new key comes
    /// back to fresh, rather than starting short of it.
    drops_fresh: bool,
    /// No key held is fresh before this time: the earliest a sweep, a new
    /// key or a refusing `peek` found (a refund forgets it: 0). Until then,
    /// sweeping a full store would drop nothing.
    next_fresh: NextFresh,
    /// Where the last `try_acquire` found its key: looked at first by the
    /// next one ([`Self::locate_recent`]), so that a hot key called again
    /// and again is found by one compare of keys, without hashing it and
    /// probing the table. Only a hint: a key is taken to be there only if
    /// it is the key held there, so whatever moved since (a sweep, an
    /// eviction, a rehash) costs a lookup, never a wrong answer. Any other
    /// key costs that one compare more.
    recent: usize,
}

/// [`KeyedLimiter::next_fresh`]. Written through `&mut self`, but for what a
/// `peek` (which takes `&self`) found in its pass over the keys: kept
/// atomically where the target has 64-bit atomics, so that the store stays
/// `Sync`; forgotten elsewhere (32-bit microcontrollers, which have no
/// `AtomicU64`), where the next call that needs it makes the pass again.
/// Forgetting it is safe: the value is only ever too early, never too late.
#[derive(Debug, Default)]
struct NextFresh(
    #[cfg(target_has_atomic = "64")] core::sync::atomic::AtomicU64,
    #[cfg(not(target_has_atomic = "64"))] u64,
);

impl NextFresh {
    fn get(&self) -> u64 {
        #[cfg(target_has_atomic = "64")]
        return self.0.load(core::sync::atomic::Ordering::Relaxed);
        #[cfg(not(target_has_atomic = "64"))]
        return self.0;
    }

    fn value_mut(&mut self) -> &mut u64 {
        #[cfg(target_has_atomic = "64")]
        return self.0.get_mut();
        #[cfg(not(target_has_atomic = "64"))]
        return &mut self.0;
    }

    fn set(&mut self, at: u64) {
        *self.value_mut() = at;
    }

    /// Lowers it to `at`, if that is sooner.
    fn lower(&mut self, at: u64) {
        let value = self.value_mut();
        *value = (*value).min(at);
    }

    /// Raises it to `at`, what a pass through `&self` found, where the
    /// target can keep it (see above).
    fn remember(&self, at: u64) {
        #[cfg(target_has_atomic = "64")]
        self.0.store(at, core::sync::atomic::Ordering::Relaxed);
        #[cfg(not(target_has_atomic = "64"))]
        let _ = at;
    }
}

impl Clone for NextFresh {
    fn clone(&self) -> Self {
        let mut next = NextFresh::default();
        next.set(self.get());
        next
    }
}

/// The fewest keys a store holds before it sweeps.
const FIRST_SWEEP: usize = 64;

impl<K: Hash + Eq, L: Keyed> KeyedLimiter<K, L> {
    /// A store in which every key starts as a fresh `prototype` (whatever
    /// `prototype` itself has seen).
    ///
    /// Keys are hashed with a [`DefaultHashBuilder`] (foldhash, hashbrown's
    /// default), seeded from address-space layout randomization:
    /// "minimally DoS-resistant" in foldhash's words, and predictable where
    /// there is no such randomization (WebAssembly). Where clients choose
    /// keys at will, pick a hasher with [`KeyedLimiter::with_hasher`], or
    /// seed one from the host's randomness ([`KeyedLimiter::set_hasher`]; `AnyKeyed` and
    /// `Policy` have `seed_hashes`).
    #[must_use]
    pub fn new(prototype: L) -> Self {
        Self::with_hasher(prototype, DefaultHashBuilder::default())
    }
}

impl<K: Hash + Eq, L: Keyed, S: BuildHasher> KeyedLimiter<K, L, S> {
    /// A store hashing keys with `hasher` (for instance
    /// `std::hash::RandomState`, keyed per process, where keys come from
    /// untrusted clients and the `std` hasher's resistance matters).
    #[cfg_attr(ratekeeper_size, optimize(size))]
    #[must_use]
    pub fn with_hasher(prototype: L, hasher: S) -> Self {
        // A new key's state, long after: back to fresh, unless it starts
        // short of it (a bucket never called is as of its first call).
        let drops_fresh = prototype.read_state(&prototype.new_state(), Nanos::MAX, |l| {
            is_fresh(l, Nanos::MAX)
        });
        KeyedLimiter {
            drops_fresh,
            prototype,
            states: KeyTable::with_hasher(hasher),
            latest: 0,
            max_keys: None,
            eviction: Eviction::default(),
            sweep_at: FIRST_SWEEP,
            next_fresh: NextFresh::default(),
            recent: 0,
        }
    }

    /// Hashes keys with `hasher` from now on, rehashing the keys held (one
    /// pass): for a host whose randomness comes after the store was built.
    /// Decisions are unchanged. The keys' positions are built in a second
    /// table, or, where memory for one runs out, rebuilt in the table they
    /// are in.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn set_hasher(&mut self, hasher: S) {
        self.states.set_hasher(hasher);
    }

    /// The hasher, for tests of what hashes keys.
    #[cfg(test)]
    pub(crate) fn hasher(&self) -> &S {
        self.states.hasher()
    }

    /// The same store, holding at most `max_keys` keys (at least 1; above
    /// 2^32 - 1, that is the bound).
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn with_max_keys(mut self, max_keys: usize, eviction: Eviction) -> Result<Self, Error> {
        if max_keys == 0 {
            return Err(Error::ZeroValue { name: "max_keys" });
        }
        self.max_keys = Some(max_keys);
        self.eviction = eviction;
        Ok(self)
    }

    /// The configuration every key follows.
    pub fn prototype(&self) -> &L {
        &self.prototype
    }

    /// The number of keys held (those not known to be fresh).
    pub fn len(&self) -> usize {
        self.states.len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }

    /// Bytes of heap the map holds (its table), excluding whatever the keys
    /// and states own themselves.
    pub fn allocation_size(&self) -> usize {
        self.states.allocation_size()
    }

    /// Decides a request of `cost` for `key` at `now`, like
    /// [`Limiter::try_acquire`] on that key's limiter.
    ///
    /// Fails with the limiter's errors, [`Error::StoreFull`] under
    /// [`Eviction::Refuse`], or [`Error::OutOfMemory`] where the store
    /// cannot grow for a new key (see [`KeyedLimiter`], "Memory"),
    /// changing nothing.
    pub fn try_acquire<Q>(&mut self, key: &Q, now: Nanos, cost: u64) -> Result<Decision, Error>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Equivalent<K> + ToOwned<Owned = K>,
    {
        let at = self.locate_recent(key);
        self.try_acquire_at(at, key, owned, now, cost)
    }

    /// [`Self::try_acquire`] of `key`, held at `at` (see [`Self::locate`]),
    /// making the key to keep with `own`.
    #[inline]
    pub(crate) fn try_acquire_at<Q>(
        &mut self,
        at: Option<usize>,
        key: &Q,
        own: impl FnOnce(&Q) -> Result<K, Error>,
        now: Nanos,
        cost: u64,
    ) -> Result<Decision, Error>
    where
        Q: ?Sized,
    {
        self.apply(at, key, own, now, |l, now| l.try_acquire(now, cost))
            .map(|(d, lag)| after(d, lag))
    }

    /// Decides each of `costs` for `key` at `now`, in order, into `out`:
    /// exactly as many `try_acquire` calls would, with one lookup. This is
    /// the server's half of client-side batching of a hot key.
    ///
    /// Fails, deciding nothing, when `out` is shorter than `costs`, or
    /// with [`Error::OutOfMemory`] where the store cannot grow for a new
    /// key (`out` may then hold the answers the key would have had, which
    /// count for nothing: the key was not inserted); a cost above the limit fails
    /// only its own entry. No costs, or none within
    /// the limit, no call: the key is not inserted, and the store's time
    /// does not move to `now`.
    pub fn try_acquire_batch<Q>(
        &mut self,
        key: &Q,
        now: Nanos,
        costs: &[u64],
        out: &mut [Result<Decision, Error>],
    ) -> Result<(), Error>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Equivalent<K> + ToOwned<Owned = K>,
    {
        self.try_acquire_batch_with(key, owned, now, costs, out)
    }

    /// [`Self::try_acquire_batch`], making the key to keep with `own`.
    pub(crate) fn try_acquire_batch_with<Q>(
        &mut self,
        key: &Q,
        own: impl FnOnce(&Q) -> Result<K, Error>,
        now: Nanos,
        costs: &[u64],
        out: &mut [Result<Decision, Error>],
    ) -> Result<(), Error>
    where
        Q: ?Sized + Hash + Equivalent<K>,
    {
        if costs.is_empty() {
            return Ok(());
        }
        let limit = self.prototype.limit();
        if costs.iter().all(|&cost| cost > limit) {
            // Every entry fails, as its `try_acquire` would, and like those
            // calls the batch changes nothing: the store's time stays (a
            // caller whose clock lags is judged at the time before, not at
            // this `now`), and no key goes in. A fresh limiter fills `out`
            // (or refuses one too short) as the key's own would.
            let mut fresh = self.prototype.new_state();
            let latest = Nanos(self.latest);
            return self
                .prototype
                .try_acquire_batch_state(&mut fresh, latest, now, costs, out);
        }
        let ((), lag) = self.apply_state(
            self.states.position(key),
            key,
            own,
            now,
            |prototype, state, now| {
                // Every cost is at one instant, so room for one event is
                // room for all: none then fails for want of memory after
                // those before it were decided.
                prototype.ready_state(state, now)?;
                prototype.try_acquire_batch_state(state, now, now, costs, out)
            },
        )?;
        for slot in out[..costs.len()].iter_mut().flatten() {
            *slot = after(*slot, lag);
        }
        Ok(())
    }

    /// The answer `try_acquire` would give, without consuming anything or
    /// inserting the key: [`Error::StoreFull`] too, for a new key that a
    /// full store under [`Eviction::Refuse`] would refuse.
    pub fn peek<Q>(&self, key: &Q, now: Nanos, cost: u64) -> Result<Decision, Error>
    where
        Q: ?Sized + Hash + Equivalent<K>,
    {
        if self.eviction == Eviction::Refuse && !self.states.contains_key(key) {
            // As `apply` would: decide on a new key's state, which goes in
            // unless it is left fresh.
            let (at, lag) = self.effective(now);
            let mut state = self.prototype.new_state();
            let decision = self
                .prototype
                .with_state(&mut state, at, |l| l.try_acquire(at, cost))?;
            if !self.prototype.read_state(&state, at, |l| is_fresh(l, at)) {
                self.refuses_new_key(at)?;
            }
            return Ok(after(decision, lag));
        }
        self.peek_decision(key, now, cost)
    }

    /// [`Self::peek`] without the refusal of a new key: what a policy asks
    /// each limit ([`Self::peek_at`]), then [`Self::refuses_at`] once all
    /// admit.
    pub(crate) fn peek_decision<Q>(&self, key: &Q, now: Nanos, cost: u64) -> Result<Decision, Error>
    where
        Q: ?Sized + Hash + Equivalent<K>,
    {
        self.peek_at(self.states.position(key), now, cost)
    }

    /// Where `key` is held, if it is, trying `hint` (an earlier answer)
    /// first: a place that [`peek_at`](Self::peek_at),
    /// [`make_room_at`](Self::make_room_at), [`refuses_at`](Self::refuses_at)
    /// and [`try_acquire_at`](Self::try_acquire_at) take instead of the key,
    /// so that a policy looks each limit's key up once per request, and not
    /// at all when it is the previous request's (an unkeyed limit's always
    /// is). It stays the key's until the store changes; none of those four
    /// moves a key that is held (making room only removes, and only for a
    /// key not held).
    #[inline]
    pub(crate) fn locate<Q>(&self, key: &Q, hint: Option<usize>) -> Option<usize>
    where
        Q: ?Sized + Hash + Equivalent<K>,
    {
        self.states.position_near(key, hint)
    }

    /// [`Self::locate`], trying first where the last key this found was
    /// (see [`KeyedLimiter::recent`]), and remembering where it found this
    /// one: for [`Self::try_acquire`], whose keys, unlike a policy's, have
    /// no earlier answer of their own to give as a hint.
    #[inline]
    pub(crate) fn locate_recent<Q>(&mut self, key: &Q) -> Option<usize>
    where
        Q: ?Sized + Hash + Equivalent<K>,
    {
        let at = self.states.position_near(key, Some(self.recent));
        if let Some(at) = at {
            self.recent = at;
        }
        at
    }

    /// [`Self::peek_decision`] of the key at `at` (see [`Self::locate`]).
    #[inline]
    pub(crate) fn peek_at(
        &self,
        at: Option<usize>,
        now: Nanos,
        cost: u64,
    ) -> Result<Decision, Error> {
        let (now, lag) = self.effective(now);
        let decision = match at.map(|at| self.states.value_at(at)) {
            Some(state) => self.prototype.read_state(state, now, |l| l.peek(now, cost)),
            None => {
                let fresh = self.prototype.new_state();
                self.prototype
                    .read_state(&fresh, now, |l| l.peek(now, cost))
            }
        };
        decision.map(|d| after(d, lag))
    }

    /// Fails as inserting the key at `at` (see [`Self::locate`]) at `now`
    /// would under [`Eviction::Refuse`] (with [`Error::StoreFull`]),
    /// changing nothing: [`Self::make_room_at`] without its sweep.
    pub(crate) fn refuses_at(&self, at: Option<usize>, now: Nanos) -> Result<(), Error> {
        if self.eviction != Eviction::Refuse || at.is_some() {
            return Ok(());
        }
        self.refuses_new_key(self.effective(now).0)
    }

    /// The most keys the store holds: `max_keys`, and never more than
    /// 2^32 - 1.
    fn bound(&self) -> usize {
        self.max_keys.unwrap_or(MAX_LEN).min(MAX_LEN)
    }

    /// Fails as inserting a new key at `now` (the effective time) would
    /// under [`Eviction::Refuse`]: the store full, and no key a sweep would
    /// drop.
    fn refuses_new_key(&self, now: Nanos) -> Result<(), Error> {
        let max_keys = self.bound();
        if self.states.len() < max_keys {
            return Ok(());
        }
        if self.drops_fresh && now.0 >= self.next_fresh.get() {
            // What a sweep would find, kept: the next call needs no pass.
            // A key fresh already ends the pass: the sweep that inserting
            // makes drops it (and so passes over the keys once more).
            let mut soonest = u64::MAX;
            for state in self.states.values() {
                let reset = self
                    .prototype
                    .read_state(state, now, |l| reset_after(l, now));
                if reset == 0 {
                    return Ok(());
                }
                soonest = soonest.min(reset);
            }
            self.next_fresh.remember(now.0.saturating_add(soonest));
        }
        Err(Error::StoreFull {
            max_keys: max_keys as u64,
        })
    }

    /// Books `cost` for `key` like [`Limiter::reserve`].
    pub fn reserve<Q>(
        &mut self,
        key: &Q,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> Result<Result<Nanos, Decision>, Error>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Equivalent<K> + ToOwned<Owned = K>,
    {
        self.reserve_with(key, owned, now, cost, max_wait)
    }

    /// [`Self::reserve`], making the key to keep with `own`.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub(crate) fn reserve_with<Q>(
        &mut self,
        key: &Q,
        own: impl FnOnce(&Q) -> Result<K, Error>,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> Result<Result<Nanos, Decision>, Error>
    where
        Q: ?Sized + Hash + Equivalent<K>,
    {
        let (_, lag) = self.effective(now);
        let max_wait = max_wait.saturating_sub(Nanos(lag));
        let at = self.states.position(key);
        let (booked, lag) = self.apply_state(at, key, own, now, |prototype, state, now| {
            // A reservation first tries at once, and a denial there moves
            // the key's time: its booking must then find room.
            prototype.ready_state(state, now)?;
            prototype.with_state(state, now, |l| l.reserve(now, cost, max_wait))
        })?;
        Ok(match booked {
            Ok(Nanos::ZERO) => Ok(Nanos::ZERO),
            Ok(wait) => Ok(wait.saturating_add(Nanos(lag))),
            Err(decision) => Err(after(decision, lag)),
        })
    }

    /// Books `cost` for `key` `wait` after `now` like [`Limiter::reserve_after`].
    pub fn reserve_after<Q>(
        &mut self,
        key: &Q,
        now: Nanos,
        cost: u64,
        wait: Nanos,
    ) -> Result<bool, Error>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Equivalent<K> + ToOwned<Owned = K>,
    {
        self.reserve_after_with(key, owned, now, cost, wait)
    }

    /// [`Self::reserve_after`], making the key to keep with `own`.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub(crate) fn reserve_after_with<Q>(
        &mut self,
        key: &Q,
        own: impl FnOnce(&Q) -> Result<K, Error>,
        now: Nanos,
        cost: u64,
        wait: Nanos,
    ) -> Result<bool, Error>
    where
        Q: ?Sized + Hash + Equivalent<K>,
    {
        let wait = self.wait_from_latest(now, wait);
        let (booked, _) = self.apply(self.states.position(key), key, own, now, |l, now| {
            l.reserve_after(now, cost, wait)
        })?;
        Ok(booked)
    }

    /// A wait after `now`, counted from the effective time, at which the
    /// limiter is called: `lag` after `now`.
    fn wait_from_latest(&self, now: Nanos, wait: Nanos) -> Nanos {
        let (_, lag) = self.effective(now);
        Nanos(wait.0.saturating_sub(lag))
    }

    /// Whether [`Self::reserve_after`] would book, changing nothing: how a
    /// policy asks every limit before any books, since a booking may evict
    /// other keys from a bounded store, which could not be undone.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub(crate) fn would_book<Q>(
        &self,
        key: &Q,
        now: Nanos,
        cost: u64,
        wait: Nanos,
    ) -> Result<bool, Error>
    where
        Q: ?Sized + Hash + Equivalent<K>,
        L::State: Clone,
    {
        // As `reserve_after_with` and `apply` call the limiter.
        let wait = self.wait_from_latest(now, wait);
        let (now, _) = self.effective(now);
        let mut state = match self.states.get(key) {
            Some(state) => self.prototype.clone_state(state)?,
            None => self.prototype.new_state(),
        };
        self.prototype
            .with_state(&mut state, now, |l| l.reserve_after(now, cost, wait))
    }

    /// Gives back `cost` units of `key` taken at `taken_at`, like
    /// [`Limiter::refund`]. A key not held is fresh: nothing to give back.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn refund<Q>(&mut self, key: &Q, taken_at: Nanos, cost: u64)
    where
        Q: ?Sized + Hash + Equivalent<K>,
    {
        let latest = Nanos(self.latest);
        if let Some(state) = self.states.get_mut(key) {
            self.prototype
                .with_state(state, latest, |l| l.refund(taken_at, cost));
            // The key may be fresh sooner than the last sweep found.
            self.next_fresh.set(0);
        }
    }

    /// Puts `key` back to fresh, as a key never seen: its units, and the
    /// bookings made on it, are forgotten (a caller already booked still
    /// goes at its slot). Do not refund a booking made before the reset:
    /// the key, used again, may have booked the same slots anew, and the
    /// refund would free a unit of those (the bindings' reservations give
    /// nothing back once a reset found their key). What `reset_after` waits
    /// for, at once: a login limit cleared once its user signed in, say.
    /// Returns whether the store held `key` (a key not held is fresh
    /// already). The key's slot is freed at once, in a few steps (the
    /// store's last key takes its place).
    ///
    /// ```
    /// use ratekeeper::{Gcra, KeyedLimiter, Nanos};
    ///
    /// let mut logins = KeyedLimiter::new(Gcra::new(3, Nanos::from_secs(60))?);
    /// for _ in 0..3 {
    ///     assert!(logins.try_acquire("alice", Nanos(0), 1)?.allowed);
    /// }
    /// assert!(!logins.try_acquire("alice", Nanos(0), 1)?.allowed);
    /// assert!(logins.reset("alice"));
    /// assert_eq!(logins.try_acquire("alice", Nanos(0), 1)?.remaining, 2);
    /// # Ok::<(), ratekeeper::Error>(())
    /// ```
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn reset<Q>(&mut self, key: &Q) -> bool
    where
        Q: ?Sized + Hash + Equivalent<K>,
    {
        let Some(at) = self.states.position(key) else {
            return false;
        };
        // Removed, not made fresh in place: a store whose keys start short
        // of fresh (a bucket with fewer initial tokens than its capacity)
        // drops no fresh key, so such a key was held for ever, and kept a
        // bounded store full.
        self.states.remove_at(at);
        true
    }

    /// Drops every key that is back to fresh at `now`, and gives memory back
    /// when that leaves the store at a quarter of its room or less. Calls do
    /// this on their own as the map grows; call it to shrink an idle store.
    pub fn reclaim(&mut self, now: Nanos) {
        let (now, _) = self.effective(now);
        // Kept as a call's time is: a key dropped as fresh at `now` must not
        // then be judged fresh at an earlier time, where it was not.
        self.latest = now.0;
        let mut next_fresh = u64::MAX;
        if self.drops_fresh {
            let prototype = &self.prototype;
            self.states.retain(|_, state| {
                let reset = prototype.with_state(state, now, |l| reset_after(l, now));
                if reset != 0 {
                    next_fresh = next_fresh.min(now.0.saturating_add(reset));
                }
                reset != 0
            });
        }
        self.next_fresh.set(next_fresh);
        self.sweep_at = (self.states.len() * 2).max(FIRST_SWEEP);
    }

    /// `now`, or the latest time seen if later, and how far `now` lags it.
    fn effective(&self, now: Nanos) -> (Nanos, u64) {
        let at = self.latest.max(now.0);
        (Nanos(at), at - now.0)
    }

    /// Runs `f` on the limiter of `key`, held at `at` (see [`Self::locate`]),
    /// at the effective time, inserting the key when `f` leaves it changed
    /// from fresh. Returns `f`'s answer and the lag.
    #[inline(always)]
    fn apply<Q, R>(
        &mut self,
        at: Option<usize>,
        key: &Q,
        own: impl FnOnce(&Q) -> Result<K, Error>,
        now: Nanos,
        f: impl FnOnce(&mut L, Nanos) -> Result<R, Error>,
    ) -> Result<(R, u64), Error>
    where
        Q: ?Sized,
    {
        self.apply_state(at, key, own, now, |prototype, state, now| {
            prototype.with_state(state, now, |l| f(l, now))
        })
    }

    /// [`Self::apply`], `f` given the prototype and the key's state rather
    /// than the limiter they stand for (a batch goes through the state
    /// between its costs).
    #[inline(always)]
    fn apply_state<Q, R>(
        &mut self,
        at: Option<usize>,
        key: &Q,
        own: impl FnOnce(&Q) -> Result<K, Error>,
        now: Nanos,
        f: impl FnOnce(&L, &mut L::State, Nanos) -> Result<R, Error>,
    ) -> Result<(R, u64), Error>
    where
        Q: ?Sized,
    {
        let (now, lag) = self.effective(now);
        // `f` is called from one place only, so that it is inlined here: a
        // call would take the limiter through memory, and reading back wider
        // what it stored a field at a time stalls the CPU (a store-forwarding
        // stall), which cost a keyed token bucket a fifth of its time.
        let mut new = None;
        let state = match at {
            Some(at) => self.states.value_at_mut(at),
            None => new.insert(self.prototype.new_state()),
        };
        let answer = f(&self.prototype, state, now)?;
        if let Some(state) = new {
            self.keep_new(key, own, now, state)?;
        }
        // Only once the call succeeded: a failed one (a cost above the
        // limit, a full store) changes nothing, the store's time included.
        // (Making room moved it already, as a sweep must.)
        self.latest = now.0;
        Ok((answer, lag))
    }

    /// The end of [`Self::apply`] for a key not held, whose state after the
    /// call is `state`: kept, unless it is fresh. Out of line, so that it is
    /// compiled once per store, not once per operation (`apply`'s `f`).
    #[inline(never)]
    fn keep_new<Q>(
        &mut self,
        key: &Q,
        own: impl FnOnce(&Q) -> Result<K, Error>,
        now: Nanos,
        state: L::State,
    ) -> Result<(), Error>
    where
        Q: ?Sized,
    {
        // Whether the new key is fresh is asked of its state as saved, not
        // of the limiter `f` had: an address passed to a call keeps that
        // limiter in memory, where it stalls the CPU as above.
        let reset = self
            .prototype
            .read_state(&state, now, |l| reset_after(l, now));
        if reset != 0 {
            self.insert(key, own, now, state)?;
            self.next_fresh.lower(now.0.saturating_add(reset));
        }
        Ok(())
    }

    /// Inserts `key`, not held, with `state`, making room first: fails,
    /// inserting nothing, with [`Error::StoreFull`] or
    /// [`Error::OutOfMemory`]. Under [`Eviction::Refuse`], a full store
    /// refuses first, as making room would but without its sweep: it makes
    /// no key it refuses (a flood of long new keys allocates and frees no
    /// bytes for each), and leaves the store's time where it was (a sweep
    /// moves it, see [`Self::reclaim`]). The key is then made before
    /// anything changes (a sweep, an eviction), and the table grows, if it
    /// must, once making room is done: a sweep gives memory back only down
    /// to room for one more key, and an eviction leaves room, so that a
    /// growth that fails comes after no change but a sweep's (which drops
    /// only fresh keys: no answer changes). Inlined into the new-key path,
    /// as the insertion was before it could fail (out of line, with the
    /// table's insertion, a new key took some 40 instructions more:
    /// callgrind); once per type where the build is for size (wasm).
    #[cfg_attr(not(ratekeeper_size), inline(always))]
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn insert<Q>(
        &mut self,
        key: &Q,
        own: impl FnOnce(&Q) -> Result<K, Error>,
        now: Nanos,
        state: L::State,
    ) -> Result<usize, Error>
    where
        Q: ?Sized,
    {
        // Refused as making room would refuse, without its sweep: a failed
        // call leaves the store's time (for a caller whose clock lags), and
        // one refused, or whose key memory cannot hold, would have swept.
        // Making room then refuses nothing: a full store here holds a key
        // that its sweep drops.
        if self.eviction == Eviction::Refuse {
            self.refuses_new_key(now)?;
        }
        let key = own(key)?;
        self.make_room(now)?;
        self.states.reserve_one()?;
        // Not held: `get_mut` found nothing, and making room only removes.
        self.states.insert_new(key, state);
        Ok(self.states.len() - 1)
    }

    /// Inserts `key`, not held, as a fresh key (which answers as a key not
    /// held does), with room for an event ([`Keyed::ready_state`]), so that
    /// the call about to change it cannot then fail for want of memory, or
    /// for a full store. How a policy makes sure, before any of its limits
    /// consumes, that none fails after another did (with [`Self::ready_at`]
    /// for the keys held); [`Self::remove_last`] takes the key back out if a
    /// later limit fails.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub(crate) fn insert_fresh<Q>(
        &mut self,
        key: &Q,
        own: impl FnOnce(&Q) -> Result<K, Error>,
        now: Nanos,
    ) -> Result<(), Error>
    where
        Q: ?Sized,
    {
        let (now, _) = self.effective(now);
        let mut state = self.prototype.new_state();
        self.prototype.ready_state(&mut state, now)?;
        self.insert(key, own, now, state)?;
        // A key held is fresh now (the call about to change it goes through
        // it as held, not as a new key, which would lower this).
        self.next_fresh.lower(now.0);
        Ok(())
    }

    /// Gives the state of the key held at `at` (see [`Self::locate`]) room
    /// for an event at `now` ([`Keyed::ready_state`]), as
    /// [`Self::insert_fresh`] does a new key's.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub(crate) fn ready_at(&mut self, at: usize, now: Nanos) -> Result<(), Error> {
        let (now, _) = self.effective(now);
        let state = self.states.value_at_mut(at);
        self.prototype.ready_state(state, now)
    }

    /// Removes the key inserted last, by [`Self::insert_fresh`], which has not
    /// changed since: the store then holds what it held before.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub(crate) fn remove_last(&mut self) {
        self.states.remove_at(self.states.len() - 1);
    }

    /// Whether a key back to fresh is dropped (see [`KeyedLimiter`]): then a
    /// request that changes nothing never holds a key.
    pub(crate) fn drops_fresh(&self) -> bool {
        self.drops_fresh
    }

    /// Fails as inserting the key at `at` (see [`Self::locate`]) now would
    /// under [`Eviction::Refuse`] (with [`Error::StoreFull`]), after making
    /// what room it can: how a policy makes sure that no limit refuses a
    /// request after others consumed it. A store that never refuses has
    /// nothing to check.
    pub(crate) fn make_room_at(&mut self, at: Option<usize>, now: Nanos) -> Result<(), Error> {
        if self.eviction != Eviction::Refuse || at.is_some() {
            return Ok(());
        }
        let (now, _) = self.effective(now);
        self.make_room(now)
    }

    /// Before a new key goes in: sweep fresh keys when due, then apply the
    /// eviction rule if the store is still at its bound.
    fn make_room(&mut self, now: Nanos) -> Result<(), Error> {
        let max_keys = self.bound();
        let full = |s: &Self| s.states.len() >= max_keys;
        if self.states.len() >= self.sweep_at || (full(self) && now.0 >= self.next_fresh.get()) {
            self.reclaim(now);
        }
        if !full(self) {
            return Ok(());
        }
        match self.eviction {
            Eviction::Refuse => Err(Error::StoreFull {
                max_keys: max_keys as u64,
            }),
            Eviction::NearestFresh => {
                // Down to the bound too, for a store bounded once it held
                // more keys (`with_max_keys` on a store in use).
                let over = self.states.len() + 1 - max_keys;
                self.evict_nearest_fresh(now, (max_keys / 16).max(over))
            }
        }
    }

    /// Drops the `count` keys with the smallest `reset_after` at `now`.
    /// Fails with [`Error::OutOfMemory`], dropping none, when there is no
    /// memory for their times (8 bytes a key, given back at once).
    fn evict_nearest_fresh(&mut self, now: Nanos, count: usize) -> Result<(), Error> {
        let prototype = &self.prototype;
        let reset =
            |state: &mut L::State| prototype.with_state(state, now, |l| reset_after(l, now));
        let mut resets: Vec<u64> = Vec::new();
        resets
            .try_reserve_exact(self.states.len())
            .map_err(|_| Error::OutOfMemory)?;
        resets.extend(self.states.values_mut().map(reset));
        let count = count.min(resets.len());
        if count == 0 {
            return Ok(());
        }
        let threshold = nth_smallest(&mut resets, count - 1);
        let mut evicted = 0;
        self.states.retain(|_, state| {
            let evict = evicted < count && reset(state) <= threshold;
            evicted += evict as usize;
            !evict
        });
        Ok(())
    }
}

/// The `index`-th smallest of `values` (from 0; `index < values.len()`).
/// Not generic, and never inlined, so that the selection's code is in the
/// build once, not once per crate that instantiates a keyed store.
#[inline(never)]
fn nth_smallest(values: &mut [u64], index: usize) -> u64 {
    // Sorted in the wasm build, where `select_nth_unstable` and its
    // median-of-medians fallback were 3.6 KB of the download (the sort is
    // there anyway): O(n log n) rather than O(n), once per sweep.
    #[cfg(target_family = "wasm")]
    values.sort_unstable();
    #[cfg(not(target_family = "wasm"))]
    values.select_nth_unstable(index);
    values[index]
}

/// Whether `limiter` is back to a fresh limiter's state at `now`.
fn is_fresh<L: Limiter>(limiter: &L, now: Nanos) -> bool {
    reset_after(limiter, now) == 0
}

/// How long after `now` `limiter` is back to a fresh limiter's state, in ns.
fn reset_after<L: Limiter>(limiter: &L, now: Nanos) -> u64 {
    limiter.peek(now, 0).map_or(u64::MAX, |d| d.reset_after.0)
}

/// The key to keep for `key`, cloned: a key of the caller's type, whose
/// own allocation (a `String`'s) aborts where memory runs out, as any
/// `Clone` does (the stores of byte keys make theirs fallibly).
fn owned<Q: ?Sized + ToOwned>(key: &Q) -> Result<Q::Owned, Error> {
    Ok(key.to_owned())
}

/// `decision` as seen from a `now` that lags the store's time by `lag`.
fn after(mut decision: Decision, lag: u64) -> Decision {
    if lag > 0 {
        if !decision.allowed {
            decision.retry_after = decision.retry_after.saturating_add(Nanos(lag));
        }
        if decision.reset_after > Nanos::ZERO {
            decision.reset_after = decision.reset_after.saturating_add(Nanos(lag));
        }
    }
    decision
}
