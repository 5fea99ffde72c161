//! Several limits decided together, all or nothing.

use core::fmt;

use alloc::string::String;
use alloc::vec::Vec;

use crate::{AnyKeyed, AnyLimiter, Decision, Error, Nanos};

/// Any number of limits, of any algorithms, each keyed by some fields of the
/// request (or global), decided together: a request is allowed only if every
/// limit allows it, and a denial consumes nothing anywhere.
///
/// A request is a list of `(field, value)` pairs, such as
/// `[("user", b"42"), ("endpoint", b"/search")]`. Each limit names the
/// fields it is keyed by (none for a global limit); the values of those
/// fields, in that order, make its key, so `per-user-endpoint` keyed by
/// `["user", "endpoint"]` keeps one limiter per pair.
///
/// The combined [`Decision`] reports the tightest `remaining` (and that
/// limit's `limit`), the longest `retry_after` and the longest
/// `reset_after`; [`PolicyDecision::denied_by`] names the limit that denied
/// (the one with the longest wait), and [`Policy::decisions`] holds every
/// limit's own decision, for headers.
///
/// ```
/// use ratekeeper::{AnyLimiter, FixedWindow, Gcra, Nanos, Policy};
///
/// let mut policy = Policy::new();
/// policy.add("per-user", &["user"], Gcra::new(2, Nanos::from_secs(1)).unwrap().into()).unwrap();
/// policy.add("global", &[], FixedWindow::new(3, Nanos::from_secs(60)).unwrap().into()).unwrap();
///
/// let alice = [("user", &b"alice"[..])];
/// let bob = [("user", &b"bob"[..])];
/// assert!(policy.try_acquire(&alice, Nanos::ZERO, 2).unwrap().decision.allowed);
/// // Alice's own limit denies; the global window is untouched by the denial.
/// let denied = policy.try_acquire(&alice, Nanos::ZERO, 1).unwrap();
/// assert_eq!(denied.denied_by, Some(0));
/// assert!(policy.try_acquire(&bob, Nanos::ZERO, 1).unwrap().decision.allowed);
/// // Now the global window is full: 3 of 3.
/// let denied = policy.try_acquire(&bob, Nanos::ZERO, 1).unwrap();
/// assert_eq!(policy.name(denied.denied_by.unwrap()), "global");
/// ```
#[derive(Clone, Default)]
pub struct Policy {
    limits: Vec<Limit>,
    /// Each limit's decision for the latest request.
    decisions: Vec<Decision>,
    /// Each limit's key for the current request, end to end.
    keys: Vec<u8>,
    ends: Vec<usize>,
    /// Where each limit's store holds the current request's key, if it does
    /// (see `AnyKeyed::locate`): looked up once per request, from where
    /// the previous request's was.
    places: Vec<Option<usize>>,
    /// The seed given to [`Policy::seed_hashes`], for limits added later.
    seed: Option<(&'static crate::HashSeed, u64)>,
}

/// Every field but the seed of [`Policy::seed_hashes`]: a policy's `Debug`
/// (a log line) would write out what tells a client the keys that collide.
impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("limits", &self.limits)
            .field("decisions", &self.decisions)
            .field("keys", &self.keys)
            .field("ends", &self.ends)
            .field("places", &self.places)
            .finish_non_exhaustive()
    }
}

#[derive(Clone, Debug)]
struct Limit {
    name: String,
    by: Vec<String>,
    store: AnyKeyed,
}

/// The answer of a [`Policy`]; like a [`Decision`], warned about when
/// dropped, since a denial is an `Ok` too.
///
/// `#[non_exhaustive]`: an answer, never built outside this crate, which
/// may carry more in a minor release (a pattern on it needs `..`).
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// use ratekeeper::{Error, Nanos, Policy};
///
/// fn handle(policy: &mut Policy, now: Nanos) -> Result<(), Error> {
///     policy.try_acquire(&[("user", b"42")], now, 1)?;
///     Ok(())
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[must_use = "a denial is an `Ok` too: read `decision.allowed`"]
#[non_exhaustive]
pub struct PolicyDecision {
    /// The combined decision (see [`Policy`]).
    pub decision: Decision,
    /// The index of the limit that denied, `None` when allowed.
    pub denied_by: Option<usize>,
}

/// Appends to `keys` the key that `request` has in a limit keyed by `by`:
/// each field's value, its length first. `Ok(false)` when a field is
/// missing; [`Error::OutOfMemory`] when `keys` cannot grow.
fn push_key(keys: &mut Vec<u8>, request: &[(&str, &[u8])], by: &[String]) -> Result<bool, Error> {
    for field in by {
        let Some((_, value)) = request.iter().find(|(name, _)| name == field) else {
            return Ok(false);
        };
        room_for(keys, keys.len() + 8 + value.len())?;
        keys.extend_from_slice(&(value.len() as u64).to_le_bytes());
        keys.extend_from_slice(value);
    }
    Ok(true)
}

/// The length of the key that `request` has in a limit keyed by `by`
/// (see [`push_key`]), or as much of it as `request` gives.
fn key_len(request: &[(&str, &[u8])], by: &[String]) -> usize {
    let value = |field: &String| request.iter().find(|(name, _)| name == field);
    by.iter().map_while(value).map(|(_, v)| 8 + v.len()).sum()
}

/// An empty buffer with room for the longest key `request` has in
/// `limits`, so that [`push_key`] builds each of them in it allocating
/// nothing: a call that goes over the keys one by one fails, where memory
/// runs out, before it acted on any.
fn key_buffer(request: &[(&str, &[u8])], limits: &[Limit]) -> Result<Vec<u8>, Error> {
    let longest = limits.iter().map(|limit| key_len(request, &limit.by));
    let mut key = Vec::new();
    room_for(&mut key, longest.max().unwrap_or(0))?;
    Ok(key)
}

/// Makes room in `v` for `len` items in all: [`Error::OutOfMemory`] when
/// it cannot grow. A compare where it has the room (as it has but after a
/// limit was added, or for a longer request's key).
#[inline]
fn room_for<T>(v: &mut Vec<T>, len: usize) -> Result<(), Error> {
    if len <= v.capacity() {
        return Ok(());
    }
    v.try_reserve(len - v.len()).map_err(|_| Error::OutOfMemory)
}

/// The entropy of the limit at `place` of a policy seeded with `entropy`.
fn own_entropy(entropy: u64, place: usize) -> u64 {
    // Odd, so that each place gives another seed.
    entropy ^ (place as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

impl Policy {
    /// A policy with no limits, which allows everything.
    #[must_use]
    pub fn new() -> Policy {
        Policy::default()
    }

    /// Adds a limit called `name`, keyed by the request fields `by` (none
    /// for one limiter shared by every request), each key starting as a
    /// fresh `limiter`.
    ///
    /// Fails with [`Error::InvalidValue`] when `name` is not a limit's name
    /// ([`Headers::check_name`](crate::Headers::check_name): printable
    /// ASCII, not empty) or is already taken, or when `by` names a field
    /// twice.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn add(&mut self, name: &str, by: &[&str], limiter: AnyLimiter) -> Result<(), Error> {
        self.add_store(name, by, AnyKeyed::new(limiter))
    }

    /// Adds a limit whose keyed store is given, for a bound on its keys. In
    /// a policy seeded already ([`Policy::seed_hashes`]), the store is
    /// seeded as the limits before it were.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn add_store(&mut self, name: &str, by: &[&str], mut store: AnyKeyed) -> Result<(), Error> {
        // A limit is told by its name (a denial's, the headers'): one the
        // headers cannot carry names nothing.
        crate::Headers::check_name(name)?;
        if self.limits.iter().any(|l| l.name == name) {
            return Err(Error::InvalidValue {
                name: "name",
                reason: "is already the name of a limit in this policy",
            });
        }
        // Keyed by one field twice is keyed by it once: a typo for another.
        if by.iter().enumerate().any(|(i, f)| by[..i].contains(f)) {
            return Err(Error::InvalidValue {
                name: "by",
                reason: "names a field twice",
            });
        }
        if let Some((shared, entropy)) = self.seed {
            store.seed_hashes(shared, own_entropy(entropy, self.limits.len()));
        }
        self.limits.push(Limit {
            name: name.into(),
            by: by.iter().map(|&f| f.into()).collect(),
            store,
        });
        Ok(())
    }

    /// [`Policy::add_store`] for a binding's policy that reads the host's
    /// monotonic clock by default (`monotonic`: no clock was given to it,
    /// and no limit has moved it to an epoch clock yet). A limit that
    /// follows a calendar needs an epoch clock (its windows are UTC days,
    /// weeks and months), so such a policy reads one from now on, and
    /// `Ok(true)` says so; unless its limits already hold state read on the
    /// monotonic clock, which that jump would wipe out: then
    /// [`Error::InvalidValue`] naming `limiter`, and nothing is added (each
    /// binding words it in its own clocks' names).
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn add_store_on(
        &mut self,
        name: &str,
        by: &[&str],
        store: AnyKeyed,
        monotonic: bool,
    ) -> Result<bool, Error> {
        let calendar = monotonic && store.prototype().calendar().is_some();
        if calendar && self.keys_held() > 0 {
            return Err(Error::InvalidValue {
                name: "limiter",
                reason: "follows a calendar, which needs an epoch clock, and the policy has \
                         decided on a monotonic clock: give it an epoch clock",
            });
        }
        self.add_store(name, by, store)?;
        Ok(calendar)
    }

    /// The number of limits.
    pub fn len(&self) -> usize {
        self.limits.len()
    }

    /// Whether the policy has no limits.
    pub fn is_empty(&self) -> bool {
        self.limits.is_empty()
    }

    /// The bytes its limits' stores hold on the heap (see
    /// [`AnyKeyed::heap_bytes`]).
    pub fn heap_bytes(&self) -> usize {
        self.limits.iter().map(|l| l.store.heap_bytes()).sum()
    }

    /// The number of keys its limits hold, all together: none when every
    /// limit is as fresh as when it was added.
    pub fn keys_held(&self) -> usize {
        self.limits.iter().map(|limit| limit.store.len()).sum()
    }

    /// The name of limit `index`. Panics when out of range.
    pub fn name(&self, index: usize) -> &str {
        &self.limits[index].name
    }

    /// The fields limit `index` is keyed by. Panics when out of range.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn keyed_by(&self, index: usize) -> impl Iterator<Item = &str> {
        self.limits[index].by.iter().map(String::as_str)
    }

    /// The first field that `request` lacks and a limit is keyed by, with
    /// that limit's name: what a request refused as `invalid_value` naming
    /// `request` is missing (the error holds no names).
    ///
    /// ```
    /// use ratekeeper::{Gcra, Nanos, Policy};
    ///
    /// let mut policy = Policy::new();
    /// policy.add("per-ip", &["ip"], Gcra::new(1, Nanos(1)).unwrap().into()).unwrap();
    /// let request = [("user", &b"alice"[..])];
    /// assert!(policy.try_acquire(&request, Nanos::ZERO, 1).is_err());
    /// assert_eq!(policy.missing_field(&request), Some(("per-ip", "ip")));
    /// ```
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn missing_field(&self, request: &[(&str, &[u8])]) -> Option<(&str, &str)> {
        self.limits.iter().find_map(|limit| {
            let missing = limit
                .by
                .iter()
                .find(|field| !request.iter().any(|(name, _)| name == field));
            missing.map(|field| (limit.name.as_str(), field.as_str()))
        })
    }

    /// Whether every limit's refund gives a booking back wherever it stands
    /// among later ones ([`AnyLimiter::refunds_any_booking`]): a policy with
    /// a bucket among its limits gives back exactly only its latest.
    pub fn refunds_any_booking(&self) -> bool {
        self.limits
            .iter()
            .all(|limit| limit.store.refunds_any_booking())
    }

    /// Whether the waiters behind a cancelled booking can move up into its
    /// slot ([`AnyLimiter::moves_up`]), in one queue for all requests (a
    /// global limit is shared): a policy of one limit that can. Not one of
    /// several limits, even buckets only: each limit holds a booking until
    /// the slot of the slowest, and that hold is not given back, so that a
    /// waiter booked again may land later than it was, or be refused (a
    /// leaky queue still full). A policy of several limits, with a bucket
    /// among them, gives a cancelled booking back only while it is the
    /// latest; one of windows only gives any booking back where it was
    /// counted ([`refunds_any_booking`](Policy::refunds_any_booking)).
    pub fn moves_up(&self) -> bool {
        match self.limits.as_slice() {
            [limit] => limit.store.moves_up(),
            _ => false,
        }
    }

    /// The configuration of limit `index`. Panics when out of range.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn limiter(&self, index: usize) -> AnyLimiter {
        self.limits[index].store.prototype()
    }

    /// Each limit's own decision for the latest request, in the order the
    /// limits were added. After a call that failed, they are not its answer:
    /// when a limit refused the cost, those of the limits before it; when a
    /// field was missing, the previous request's; when a full store refused
    /// the key, the decisions that call reached.
    pub fn decisions(&self) -> &[Decision] {
        &self.decisions
    }

    /// Decides a request of `cost` at `now`: allowed and consumed in every
    /// limit, or denied and consumed in none.
    ///
    /// Fails, consuming nothing, when `request` lacks a field a limit is
    /// keyed by, when `cost` exceeds a limit (it could never pass), or when
    /// memory runs out ([`Error::OutOfMemory`]): before any limit consumes,
    /// each holds the request's key with room for its event (see
    /// [`KeyedLimiter`](crate::KeyedLimiter), "Memory"), so that none
    /// fails after another consumed. Such a failure may have swept keys
    /// back to fresh, and, where a later limit then ran out, a store at its
    /// bound under [`Eviction::NearestFresh`](crate::Eviction::NearestFresh)
    /// may have evicted keys for the request's (forgotten, as any new key
    /// there would have them; nothing is consumed).
    ///
    /// A denial writes nothing, not even the time: after time went
    /// backwards, a limit is judged as of the latest time a request was
    /// *admitted* (or booked), where a lone limiter, whose denials also move
    /// its clock, is judged as of the latest call. A policy can thus be
    /// stricter than its limits alone, never looser. The Redis script does
    /// the same.
    pub fn try_acquire(
        &mut self,
        request: &[(&str, &[u8])],
        now: Nanos,
        cost: u64,
    ) -> Result<PolicyDecision, Error> {
        self.peek_all(request, now, cost)?;
        if self.decisions.iter().all(|d| d.allowed) {
            self.make_room(now, cost)?;
            for (i, limit) in self.limits.iter_mut().enumerate() {
                let key = key_of(&self.keys, &self.ends, i);
                // Every limit allowed this cost a moment ago with nothing
                // changed since, and has room for its key, so every one
                // allows it now.
                self.decisions[i] = limit.store.try_acquire_at(self.places[i], key, now, cost)?;
            }
        }
        Ok(self.combined())
    }

    /// The answer [`try_acquire`](Self::try_acquire) would give, consuming
    /// nothing: [`Error::StoreFull`] too, where a full store under
    /// [`Eviction::Refuse`](crate::Eviction::Refuse) would refuse the
    /// request's new key.
    pub fn peek(
        &mut self,
        request: &[(&str, &[u8])],
        now: Nanos,
        cost: u64,
    ) -> Result<PolicyDecision, Error> {
        self.peek_all(request, now, cost)?;
        if self.decisions.iter().all(|d| d.allowed) {
            self.refuses(now, cost)?;
        }
        Ok(self.combined())
    }

    /// Books `cost` in every limit for the first moment all of them admit
    /// it, if that is at most `max_wait` after `now`.
    ///
    /// `Ok(Ok(wait))`: booked everywhere; proceed at `now + wait`, the
    /// longest of the limits' waits. `Ok(Err(decision))`: nothing booked.
    ///
    /// Every limit books the request at that one slot, where it really
    /// proceeds ([`Limiter::reserve_after`](crate::Limiter::reserve_after)), not
    /// at its own earlier slot: so each limit's bound holds for requests
    /// counted at the instants they proceed, and [`refund`](Self::refund) at
    /// `now + wait` gives back its units in every limit. A limit with a bound of its own on bookings (a
    /// log's room for distinct instants, a queue's length) may refuse where
    /// it would have booked its own slot; then nothing is booked anywhere
    /// and the answer is `Ok(Err(decision))`.
    ///
    /// **A booking holds every limit until its slot.** Each limit serves
    /// nobody ahead of a booking (first come, first served): a window limit
    /// admits nobody before the slot, a bucket or GCRA nobody who would
    /// leave the booking too little there (with a burst of `b`, it admits
    /// again from `b - 1` intervals before the slot, what it may hold ahead
    /// of it). So a request waiting on its slowest limit holds the others
    /// too, shared ones included: a user waiting an hour on a per-user
    /// hourly limit holds a global limit, for every user, for that hour
    /// (as a GCRA's tolerance allows). Bound `max_wait` where a
    /// policy's limits are shared across keys. A refund gives back the units
    /// but not the hold, except in a log: a bucket, GCRA, window counter or
    /// queue does not keep what it held before the booking, so it still
    /// serves nobody before the cancelled slot. (Booking each limit at its
    /// own earlier slot instead, as this did before, counted a request
    /// where it did not proceed: many waiters whose slots fall together
    /// all passed a shared limit at once.)
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn reserve(
        &mut self,
        request: &[(&str, &[u8])],
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> Result<Result<Nanos, PolicyDecision>, Error> {
        let peeked = self.peek(request, now, cost)?;
        let wait = peeked.decision.retry_after;
        if wait > max_wait {
            return Ok(Err(peeked));
        }
        // Every limit is asked before any books: one with a bound of its own
        // may refuse, and a booking may already have evicted other keys
        // from a bounded store, which could not be undone.
        for (i, limit) in self.limits.iter().enumerate() {
            let key = key_of(&self.keys, &self.ends, i);
            if !limit.store.would_book(key, now, cost, wait)? {
                return Ok(Err(peeked));
            }
        }
        self.make_room(now, cost)?;
        for (i, limit) in self.limits.iter_mut().enumerate() {
            let key = key_of(&self.keys, &self.ends, i);
            // Each limit books exactly as it answered a moment ago, and has
            // room for its key.
            let booked = limit.store.reserve_after(key, now, cost, wait)?;
            debug_assert!(booked, "a limit booked what it would not");
        }
        Ok(Ok(wait))
    }

    /// Gives back `cost` units taken at `taken_at` in every limit, as
    /// [`Limiter::refund`](crate::Limiter::refund) does.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn refund(
        &mut self,
        request: &[(&str, &[u8])],
        taken_at: Nanos,
        cost: u64,
    ) -> Result<(), Error> {
        self.refund_limits(request, taken_at, cost, self.limits.len())
    }

    /// [`Policy::refund`] in the first `limits` limits only: those the
    /// policy had when the units were taken (see [`Policy::len`]). A limit
    /// added since never held them, and giving them back there would admit
    /// more than it allows; nor does the request need its fields.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn refund_limits(
        &mut self,
        request: &[(&str, &[u8])],
        taken_at: Nanos,
        cost: u64,
        limits: usize,
    ) -> Result<(), Error> {
        let limits = limits.min(self.limits.len());
        self.build_keys_of(request, limits)?;
        for (i, limit) in self.limits[..limits].iter_mut().enumerate() {
            limit
                .store
                .refund(key_of(&self.keys, &self.ends, i), taken_at, cost);
        }
        Ok(())
    }

    /// Puts `request`'s key back to fresh, as a key never seen, in every
    /// limit keyed by fields that `request` all gives
    /// ([`KeyedLimiter::reset`](crate::KeyedLimiter::reset): its units and
    /// bookings forgotten, and a booking made before is not to be refunded).
    /// Returns how many of those limits held the key.
    ///
    /// A global limit (keyed by no field) is never reset: it counts every
    /// request, and no part of it is this request's. Nor is a limit keyed by
    /// a field that `request` lacks. So `[("user", b"alice")]` resets the
    /// limits by user and keeps those by IP (a login limit cleared once its
    /// user signed in, while the IP that tried many users stays limited),
    /// and the request given to [`try_acquire`](Self::try_acquire) resets
    /// every keyed limit it was counted in.
    ///
    /// Fails with [`Error::InvalidValue`], resetting nothing, when no limit
    /// is keyed by fields that `request` all gives: such a call could only
    /// be a mistake (a field misspelt, say).
    ///
    /// Fails with [`Error::OutOfMemory`], resetting nothing, when memory
    /// for the request's keys runs out.
    ///
    /// ```
    /// use ratekeeper::{Gcra, Nanos, Policy};
    ///
    /// let mut logins = Policy::new();
    /// logins.add("per-user", &["user"], Gcra::new(1, Nanos::from_secs(60))?.into())?;
    /// logins.add("per-ip", &["ip"], Gcra::new(1, Nanos::from_secs(60))?.into())?;
    /// let attempt = [("user", &b"alice"[..]), ("ip", &b"192.0.2.1"[..])];
    /// assert!(logins.try_acquire(&attempt, Nanos(0), 1)?.decision.allowed);
    /// // Alice signed in: her limit is cleared, her IP's is kept.
    /// assert_eq!(logins.reset(&[("user", b"alice")])?, 1);
    /// let denied = logins.try_acquire(&attempt, Nanos(0), 1)?;
    /// assert_eq!(denied.denied_by, Some(1));
    /// assert!(logins.reset(&[("usr", b"alice")]).is_err());
    /// # Ok::<(), ratekeeper::Error>(())
    /// ```
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn reset(&mut self, request: &[(&str, &[u8])]) -> Result<usize, Error> {
        // Room for the longest key first, so that memory that runs out (a
        // later limit's key longer than the earlier ones') fails the call
        // before it reset anything.
        let mut key = key_buffer(request, &self.limits)?;
        let mut reached = false;
        let mut held = 0;
        for limit in self.limits.iter_mut().filter(|limit| !limit.by.is_empty()) {
            key.clear();
            if push_key(&mut key, request, &limit.by)? {
                reached = true;
                held += usize::from(limit.store.reset(&key));
            }
        }
        if !reached {
            return Err(Error::InvalidValue {
                name: "request",
                reason: "lacks a field of each limit keyed by fields, so it resets none",
            });
        }
        Ok(held)
    }

    /// Calls `f` with the place of each of the first `limits` limits whose
    /// fields `request` all gives, and the key `request` has there (empty
    /// in a global limit): the keys a booking of `request` holds, and, in
    /// the limits keyed by fields, those [`reset`](Self::reset) puts back to
    /// fresh. A call for `request` changes the state of those keys only
    /// (but by evicting keys from a bounded store), so a binding can tell
    /// by them which earlier bookings a later call may have touched: the
    /// bindings give a cancelled waiter's booking back unless a call on one
    /// of its keys came since (property-tested in `tests/keys_apart.rs`).
    ///
    /// Fails with [`Error::OutOfMemory`], calling `f` for no key, where
    /// memory for the longest key runs out: a caller must then take every
    /// key as reached (a key left unseen would be taken as one no call
    /// touched, and a booking of it given back, admitting more).
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn each_key(
        &self,
        request: &[(&str, &[u8])],
        limits: usize,
        mut f: impl FnMut(usize, &[u8]),
    ) -> Result<(), Error> {
        let limits = &self.limits[..limits.min(self.limits.len())];
        // Room for the longest key first, so that nothing fails once `f`
        // has seen a key.
        let mut key = key_buffer(request, limits)?;
        for (i, limit) in limits.iter().enumerate() {
            key.clear();
            if push_key(&mut key, request, &limit.by)? {
                f(i, &key);
            }
        }
        Ok(())
    }

    /// Seeds the hashing of every limit's keys (see
    /// [`AnyKeyed::seed_hashes`]): each limit's store from `shared`, and
    /// from `entropy` and its place; limits added later too.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn seed_hashes(&mut self, shared: &'static crate::HashSeed, entropy: u64) {
        for (i, limit) in self.limits.iter_mut().enumerate() {
            limit.store.seed_hashes(shared, own_entropy(entropy, i));
        }
        self.seed = Some((shared, entropy));
    }

    /// Drops the keys of every limit that are back to fresh at `now`.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn reclaim(&mut self, now: Nanos) {
        for limit in &mut self.limits {
            limit.store.reclaim(now);
        }
    }

    /// Fails with [`Error::StoreFull`] where a store bounded with
    /// `Eviction::Refuse` would refuse the request's new key, changing
    /// nothing (no sweep): the check of `peek`, and of `make_room` first.
    fn refuses(&self, now: Nanos, cost: u64) -> Result<(), Error> {
        for (limit, &at) in self.limits.iter().zip(&self.places) {
            if cost > 0 || !limit.store.drops_fresh() {
                limit.store.refuses_at(at, now)?;
            }
        }
        Ok(())
    }

    /// Fails, changing no key's state, when a store bounded with
    /// `Eviction::Refuse` has no room for the key of a request about to
    /// consume, or when memory runs out for a key or its events: found out
    /// before any limit consumes. A cost of 0 consumes nothing and needs no
    /// room, but in a store that keeps its keys even when fresh (its new
    /// keys start short), where any request holds one.
    ///
    /// Once it succeeds, every limit holds the request's key, with room
    /// for its event, so that no limit fails for want of memory after
    /// another consumed: a key not held is inserted fresh (it answers as
    /// a key not held does), and taken back out if a later limit fails.
    /// A refusal leaves every store as it was (no sweep). What running out
    /// of memory may leave: sweeps (which drop only fresh keys, no
    /// answer changes), and keys that a store at its bound under
    /// `Eviction::NearestFresh` evicted for the request's key before a
    /// later limit ran out of memory (an eviction forgets keys, as any
    /// new key there makes it; it consumes nothing).
    fn make_room(&mut self, now: Nanos, cost: u64) -> Result<(), Error> {
        // Refused before any store sweeps: a sweep moves its store's time
        // (a caller whose clock lags is then judged as of `now`), and a
        // refused request leaves every store as it was, as a keyed store's
        // own refusal does. Then no store refuses.
        self.refuses(now, cost)?;
        // Making room removes keys only, and only from a store that does
        // not hold the request's key: every place stays right.
        for (limit, &at) in self.limits.iter_mut().zip(&self.places) {
            if cost > 0 || !limit.store.drops_fresh() {
                limit.store.make_room_at(at, now)?;
            }
        }
        let changes = |store: &AnyKeyed| cost > 0 || !store.drops_fresh();
        let mut prepared = 0;
        let mut failed = Ok(());
        let mut inserted = false;
        for (i, limit) in self.limits.iter_mut().enumerate() {
            if changes(&limit.store) {
                failed = match self.places[i] {
                    Some(at) => limit.store.ready_at(at, now),
                    None => {
                        inserted = true;
                        let key = key_of(&self.keys, &self.ends, i);
                        limit.store.insert_fresh(key, now)
                    }
                };
                if failed.is_err() {
                    break;
                }
            }
            prepared += 1;
        }
        // Each key inserted is the last of its store, no other key of which
        // moved since (each limit has a store of its own): its place, or
        // taken back out when a later limit failed.
        if inserted {
            for (i, limit) in self.limits[..prepared].iter_mut().enumerate() {
                if self.places[i].is_none() && changes(&limit.store) {
                    match failed {
                        Ok(()) => self.places[i] = Some(limit.store.len() - 1),
                        Err(_) => limit.store.remove_last(),
                    }
                }
            }
        }
        failed
    }

    /// Each limit's decision on its own. When some limit denies, those that
    /// would allow report their state as it stays (nothing is consumed):
    /// their decision for a cost of 0.
    fn peek_all(&mut self, request: &[(&str, &[u8])], now: Nanos, cost: u64) -> Result<(), Error> {
        self.build_keys(request)?;
        let limits = self.limits.len();
        room_for(&mut self.decisions, limits)?;
        room_for(&mut self.places, limits)?;
        self.decisions.resize(limits, UNDECIDED);
        // The previous request's places are where to look first.
        self.places.resize(limits, None);
        for (i, limit) in self.limits.iter().enumerate() {
            let at = limit
                .store
                .locate(key_of(&self.keys, &self.ends, i), self.places[i]);
            self.places[i] = at;
            if let Err(error) = limit.store.peek_at(at, now, cost, &mut self.decisions[i]) {
                // `decisions()` lists the limits decided, as it says.
                self.decisions.truncate(i);
                return Err(error);
            }
        }
        if self.decisions.iter().any(|d| !d.allowed) {
            for (i, limit) in self.limits.iter().enumerate() {
                if self.decisions[i].allowed {
                    limit
                        .store
                        .peek_at(self.places[i], now, 0, &mut self.decisions[i])?;
                }
            }
        }
        Ok(())
    }

    /// Each limit's key: its fields' values, each preceded by its length so
    /// that no two requests share a key by accident of concatenation.
    fn build_keys(&mut self, request: &[(&str, &[u8])]) -> Result<(), Error> {
        self.build_keys_of(request, self.limits.len())
    }

    /// [`Policy::build_keys`] for the first `limits` limits.
    fn build_keys_of(&mut self, request: &[(&str, &[u8])], limits: usize) -> Result<(), Error> {
        self.keys.clear();
        self.ends.clear();
        room_for(&mut self.ends, limits)?;
        for limit in &self.limits[..limits] {
            if !push_key(&mut self.keys, request, &limit.by)? {
                return Err(Error::InvalidValue {
                    name: "request",
                    reason: "lacks a field that a limit of the policy is keyed by",
                });
            }
            self.ends.push(self.keys.len());
        }
        Ok(())
    }

    fn combined(&self) -> PolicyDecision {
        let allowed = self.decisions.iter().all(|d| d.allowed);
        let tightest = self.decisions.iter().min_by_key(|d| d.remaining);
        let denied_by = (0..self.decisions.len())
            .filter(|&i| !self.decisions[i].allowed)
            .max_by_key(|&i| (self.decisions[i].retry_after, usize::MAX - i));
        let longest = |f: fn(&Decision) -> Nanos| self.decisions.iter().map(f).max();
        PolicyDecision {
            decision: Decision {
                allowed,
                remaining: tightest.map_or(u64::MAX, |d| d.remaining),
                limit: tightest.map_or(u64::MAX, |d| d.limit),
                retry_after: longest(|d| d.retry_after).unwrap_or(Nanos::ZERO),
                reset_after: longest(|d| d.reset_after).unwrap_or(Nanos::ZERO),
            },
            denied_by,
        }
    }
}

/// A limit's decision before it is asked (overwritten by every request).
const UNDECIDED: Decision = Decision {
    allowed: false,
    remaining: 0,
    limit: 0,
    retry_after: Nanos::ZERO,
    reset_after: Nanos::ZERO,
};

/// Limit `i`'s key in `keys`, given where each key ends.
fn key_of<'a>(keys: &'a [u8], ends: &[usize], i: usize) -> &'a [u8] {
    let start = if i == 0 { 0 } else { ends[i - 1] };
    &keys[start..ends[i]]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Gcra, HashSeed};
    use alloc::boxed::Box;

    #[test]
    fn limits_added_after_seeding_are_seeded_as_those_before() {
        let shared: &'static HashSeed = Box::leak(Box::new(HashSeed::new(7)));
        let gcra = || AnyLimiter::from(Gcra::new(1, Nanos(1)).unwrap());
        let policy = |seed_after: usize| {
            let mut policy = Policy::new();
            for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
                if i == seed_after {
                    policy.seed_hashes(shared, 42);
                }
                policy.add(name, &["user"], gcra()).unwrap();
            }
            policy
        };
        let (first, last, never) = (policy(0), policy(1), policy(3));
        let hashes = |p: &Policy| -> Vec<u64> {
            p.limits.iter().map(|l| l.store.hash_of(b"alice")).collect()
        };
        assert_eq!(hashes(&first), hashes(&last));
        // Each place its own seed; none of them the unseeded stores'.
        let seeded = hashes(&first);
        assert!(seeded[0] != seeded[1] && seeded[1] != seeded[2] && seeded[0] != seeded[2]);
        assert!(hashes(&never).iter().all(|h| !seeded.contains(h)));
    }

    #[test]
    fn a_calendar_limit_moves_a_monotonic_policy_to_an_epoch_clock_while_it_holds_nothing() {
        use crate::{Calendar, FixedWindow};
        let daily = || AnyKeyed::new(FixedWindow::with_calendar(5, Calendar::Day).unwrap().into());
        let minute = || AnyKeyed::new(FixedWindow::new(1, Nanos::from_secs(60)).unwrap().into());
        let user: &[(&str, &[u8])] = &[("user", b"a")];
        let allowed = |policy: &mut Policy, at: u64| {
            let decided = policy.try_acquire(user, Nanos::from_secs(at), 1);
            decided.unwrap().decision.allowed
        };
        let mut fresh = Policy::new();
        assert_eq!(fresh.add_store_on("m", &[], minute(), true), Ok(false));
        assert_eq!(fresh.add_store_on("daily", &[], daily(), true), Ok(true));
        // A clock of its own (or an epoch clock already): nothing to move.
        assert_eq!(fresh.add_store_on("other", &[], daily(), false), Ok(false));
        assert!(allowed(&mut fresh, 0));

        let mut busy = Policy::new();
        busy.add_store_on("m", &["user"], minute(), true).unwrap();
        assert!(allowed(&mut busy, 0));
        let refused = busy.add_store_on("daily", &[], daily(), true).unwrap_err();
        assert_eq!(refused.argument(), Some("limiter"));
        assert_eq!(busy.len(), 1);
        // Its keys dropped back to fresh, it holds nothing the jump could lose.
        busy.reclaim(Nanos::from_secs(60));
        assert_eq!(busy.add_store_on("daily", &[], daily(), true), Ok(true));
        // A clock of its own: the limit joins whatever the policy holds.
        assert!(allowed(&mut busy, 60));
        assert_eq!(busy.add_store_on("other", &[], daily(), false), Ok(false));
    }

    #[test]
    fn a_refund_of_the_first_limits_leaves_the_later_ones_and_their_fields() {
        let one = || AnyLimiter::from(crate::FixedWindow::new(1, Nanos(1_000)).unwrap());
        let allowed = |policy: &mut Policy, request: &[(&str, &[u8])], at: u64| {
            policy
                .try_acquire(request, Nanos(at), 1)
                .unwrap()
                .decision
                .allowed
        };
        let mut policy = Policy::new();
        policy.add("global", &[], one()).unwrap();
        assert!(allowed(&mut policy, &[], 0));
        policy.add("per-user", &["user"], one()).unwrap();
        let user: &[(&str, &[u8])] = &[("user", b"a")];
        // "global" alone: the request needs no "user" field.
        policy.refund_limits(&[], Nanos(0), 1, 1).unwrap();
        assert!(allowed(&mut policy, user, 1));
        policy.refund_limits(user, Nanos(1), 1, 1).unwrap();
        // "per-user" kept the unit it took; "global" got its own back.
        assert!(!allowed(&mut policy, user, 2));
        assert!(policy.decisions()[0].allowed && !policy.decisions()[1].allowed);
        // Beyond the policy's limits: all of them.
        policy.refund_limits(user, Nanos(2), 1, 9).unwrap();
        assert!(allowed(&mut policy, user, 3));
    }
}
