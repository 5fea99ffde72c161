//! The exact sliding-window log.

use alloc::vec;
use alloc::vec::Vec;

use crate::limiter::check_cost;
use crate::nanos::{booking_slot, since};
use crate::state::codec::{corrupt, Codec, Fingerprint, Reader, Writer};
use crate::{Decision, Error, Limiter, Nanos};

/// The largest `limit` a [`SlidingWindowLog`] accepts. The log keeps up to
/// `2 * limit` 16-byte entries, one per instant with events (the current
/// window's and its reservations'); larger limits belong to a token bucket.
pub const MAX_LOG_LIMIT: u64 = 1 << 20;

// A full log's state (its latest time, its length, two numbers per entry of
// its room) is the longest state, which `MAX_STATE_LEN` bounds.
const _: () = assert!(crate::state::MAX_NUMBERS >= 2 + 2 * 2 * MAX_LOG_LIMIT as usize);

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
/// The history lives in a ring of up to `2 * limit` entries, one per
/// instant with events. [`SlidingWindowLog::new`] allocates it whole (so
/// do `reconfigure` and restoring state; a clone keeps its size), so that a
/// decision never allocates; the logs a [`KeyedLimiter`](crate::KeyedLimiter)
/// keeps per key start empty and grow as their events arrive (doubling),
/// so that a key costs memory in proportion to its events, not to the
/// limit. [`reserve`](Limiter::reserve) books an event at the future
/// instant it fits while the ring has room: `2 * limit` instants, the
/// window's and the bookings' (one window ahead with bookings of one unit,
/// each at an instant of its own; further with bookings of several units,
/// or several at one instant). Until a booked slot, no request is admitted
/// (first come, first served) and `remaining` is 0.
///
/// ```
/// use ratekeeper::{Limiter, Nanos, SlidingWindowLog};
///
/// let mut log = SlidingWindowLog::new(1, Nanos::from_secs(1)).unwrap();
/// assert!(log.try_acquire(Nanos::ZERO, 1).unwrap().allowed);
/// let denied = log.try_acquire(Nanos(999_999_999), 1).unwrap();
/// assert_eq!(denied.retry_after, Nanos(1));
/// assert!(log.try_acquire(Nanos::from_secs(1), 1).unwrap().allowed);
///
/// // The ring holds 2 * 3 instants: bookings of 3 units each take one,
/// // so they reach five windows ahead before `reserve` refuses.
/// let mut log = SlidingWindowLog::new(3, Nanos::from_secs(1)).unwrap();
/// for window in 0..6 {
///     let booked = log.reserve(Nanos::ZERO, 3, Nanos::MAX).unwrap();
///     assert_eq!(booked, Ok(Nanos::from_secs(window)));
/// }
/// assert!(log.reserve(Nanos::ZERO, 3, Nanos::MAX).unwrap().is_err());
/// ```
#[derive(Clone, Debug)]
pub struct SlidingWindowLog {
    limit: u64,
    window: u64,
    /// Admitted and booked events, oldest first from `head`, wrapping; events
    /// of one instant share an entry. At most [`SlidingWindowLog::room`]
    /// entries, grown as needed (see [`SlidingWindowLog::grow`]).
    ring: Vec<Entry>,
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
    /// This configuration, never called: an empty log, whose ring is
    /// allocated as it fills (what a keyed store keeps for a new key).
    pub(crate) fn fresh(&self) -> Self {
        Self::empty(self.limit, self.window)
    }

    /// A log admitting at most `limit` units in any `window`.
    ///
    /// Fails when a value is zero or `limit` exceeds [`MAX_LOG_LIMIT`].
    #[cfg_attr(ratekeeper_size, optimize(size))]
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
        let mut log = Self::empty(limit, window.0);
        log.allocate();
        Ok(log)
    }

    fn empty(limit: u64, window: u64) -> Self {
        SlidingWindowLog {
            limit,
            window,
            ring: Vec::new(),
            head: 0,
            len: 0,
            used: 0,
            latest: Nanos::ZERO,
        }
    }

    /// The most entries the ring holds. Every entry costs at least 1:
    /// `limit` entries hold a window, `limit` more a window of bookings.
    fn room(&self) -> usize {
        2 * self.limit as usize
    }

    /// Allocates the whole ring of an empty log, unless it is whole already
    /// (a log restored in place), so that no decision allocates.
    pub(crate) fn allocate(&mut self) {
        debug_assert_eq!(self.len, 0);
        if self.ring.len() < self.room() {
            self.ring = vec![Entry::default(); self.room()];
        }
        self.head = 0;
    }

    /// Doubles the ring (at least 4 entries, at most `room`), its entries
    /// oldest first from the start. Cold: a log built by `new` never grows.
    /// Fails with [`Error::OutOfMemory`], changing nothing, when memory runs
    /// out: a keyed store's logs grow on its decisions, which answer that
    /// rather than abort.
    #[cold]
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn grow(&mut self) -> Result<(), Error> {
        let size = (self.ring.len() * 2).max(4).min(self.room());
        let mut ring = Vec::new();
        ring.try_reserve_exact(size)
            .map_err(|_| Error::OutOfMemory)?;
        ring.extend((0..self.len).map(|i| self.entry(i)));
        ring.resize(size, Entry::default());
        (self.ring, self.head) = (ring, 0);
        Ok(())
    }

    /// Grows the ring, if an event recorded at `at` (`None`: any instant
    /// from `view`'s on) after `view` would find it full and it is short of
    /// its room (a keyed store's log, which grows with its events), before
    /// anything changes: so that a decision that runs out of memory fails
    /// whole.
    fn make_room(&mut self, view: &View, at: Option<u64>) -> Result<(), Error> {
        let full = self.len - view.expired == self.ring.len();
        // An event at the newest entry's instant joins that entry.
        if full && self.ring.len() < self.room() && (at.is_none() || self.newest(view) != at) {
            self.grow()?;
        }
        Ok(())
    }

    /// A copy, [`Error::OutOfMemory`] where its ring finds no memory (see
    /// [`Keyed::clone_state`](crate::Keyed::clone_state)).
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub(crate) fn try_clone(&self) -> Result<Self, Error> {
        let mut ring = Vec::new();
        ring.try_reserve_exact(self.ring.len())
            .map_err(|_| Error::OutOfMemory)?;
        ring.extend_from_slice(&self.ring);
        Ok(SlidingWindowLog { ring, ..*self })
    }

    /// Gives the ring room for an event at `now` or later now (see
    /// [`Keyed::ready_state`](crate::Keyed::ready_state)), changing no answer.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub(crate) fn ready(&mut self, now: Nanos) -> Result<(), Error> {
        let view = self.view_at(self.latest.max(now));
        self.make_room(&view, None)
    }

    /// The bytes its entries hold on the heap (the ring, allocated whole
    /// when the log is built): for hosts whose collector must be told of
    /// native memory (a JS engine's), else it never feels it.
    pub fn heap_bytes(&self) -> usize {
        self.ring.capacity() * core::mem::size_of::<Entry>()
    }

    /// The length of the window.
    pub fn window(&self) -> Nanos {
        Nanos(self.window)
    }

    /// Replaces the limit and window of a live log with those of `new`.
    ///
    /// The events still in the old window carry over and are judged by the
    /// new window and limit; only the configuration of `new` is used, not
    /// its events. If the new ring is too small to keep every entry apart,
    /// the oldest are merged into the oldest entry kept: they then count a
    /// little longer than they would have, never shorter. Entries keep
    /// their whole cost, above the new limit too, so that a refund gives
    /// back from what was really taken.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn reconfigure(&mut self, now: Nanos, new: SlidingWindowLog) {
        let view = self.view_at(self.latest.max(now));
        self.apply(&view);
        let mut new = new.fresh();
        new.allocate();
        new.latest = self.latest;
        let skip = self.len.saturating_sub(new.room());
        let merged: u64 = (0..skip).map(|i| self.entry(i).cost).sum();
        for i in skip..self.len {
            let entry = self.entry(i);
            let extra = if i == skip { merged } else { 0 };
            new.push(entry.at, entry.cost + extra);
        }
        *self = new;
    }

    fn entry(&self, i: usize) -> Entry {
        self.ring[(self.head + i) % self.ring.len()]
    }

    /// The time at which `entry` leaves the window, in 128 bits since
    /// `at + window` may exceed 64.
    fn leaves_at(&self, entry: Entry) -> u128 {
        entry.at as u128 + self.window as u128
    }

    /// The log as of `latest`, without changing it.
    fn view_at(&self, latest: Nanos) -> View {
        let mut view = View {
            expired: 0,
            used: self.used,
            latest,
        };
        while view.expired < self.len
            && self.leaves_at(self.entry(view.expired)) <= latest.0 as u128
        {
            view.used -= self.entry(view.expired).cost;
            view.expired += 1;
        }
        view
    }

    /// Makes `view` the log's state: drops the expired entries.
    fn apply(&mut self, view: &View) {
        if view.expired > 0 {
            self.head = (self.head + view.expired) % self.ring.len();
        }
        self.len -= view.expired;
        self.used = view.used;
        self.latest = view.latest;
    }

    /// The newest recorded instant, if any entry is left in `view`.
    fn newest(&self, view: &View) -> Option<u64> {
        (self.len > view.expired).then(|| self.entry(self.len - 1).at)
    }

    /// The earliest time, not before `view.latest` nor before the newest
    /// entry (bookings are served in order), at which `cost` more units fit.
    fn earliest_fit(&self, view: &View, cost: u64) -> u128 {
        let floor = view.latest.0.max(self.newest(view).unwrap_or(0)) as u128;
        let (mut in_window, mut at, mut i) = (view.used, floor, view.expired);
        // Entries leave oldest first; walk them out until `cost` fits. This
        // ends because `cost <= limit` and the log empties eventually.
        // Saturating: restored state may hold up to 2^64 - 1 units.
        while in_window.saturating_add(cost) > self.limit {
            let entry = self.entry(i);
            in_window -= entry.cost;
            at = at.max(self.leaves_at(entry));
            i += 1;
        }
        at
    }

    /// Records `cost` at `at`, the newest instant so far. Returns `false`
    /// (recording nothing) when the ring has no room for a new instant: the
    /// caller grew it first where it could ([`Self::make_room`]), so that
    /// this allocates nothing.
    fn push(&mut self, at: u64, cost: u64) -> bool {
        if cost == 0 {
            return true;
        }
        // Past 2^64 - 1 units held (only restored state comes near): none.
        let Some(used) = self.used.checked_add(cost) else {
            return false;
        };
        if self.len > 0 {
            let newest = (self.head + self.len - 1) % self.ring.len();
            if self.ring[newest].at == at {
                // At most `used`, which fits.
                self.ring[newest].cost += cost;
                self.used = used;
                return true;
            }
        }
        if self.len == self.ring.len() {
            debug_assert_eq!(self.len, self.room(), "a ring not grown first");
            return false;
        }
        let slot = (self.head + self.len) % self.ring.len();
        self.ring[slot] = Entry { at, cost };
        self.len += 1;
        self.used = used;
        true
    }

    fn decide(&self, now: Nanos, cost: u64) -> Result<(Decision, View, u128), Error> {
        check_cost(cost, self.limit)?;
        let view = self.view_at(self.latest.max(now));
        let fits_at = self.earliest_fit(&view, cost);
        let latest = view.latest.0 as u128;
        let allowed = cost == 0 || fits_at == latest;
        let consumed = if allowed { cost } else { 0 };
        let newest_leaves = match self.newest(&view) {
            _ if consumed > 0 => Some(latest + self.window as u128),
            Some(at) => Some(at as u128 + self.window as u128),
            None => None,
        };
        // Until a booking's slot nothing is admitted (bookings are served in
        // order), whatever room the window has: none may be taken at once.
        let booked_ahead = self.newest(&view).is_some_and(|at| at > view.latest.0);
        let decision = Decision {
            allowed,
            remaining: if booked_ahead {
                0
            } else {
                self.limit
                    .saturating_sub(view.used.saturating_add(consumed))
            },
            limit: self.limit,
            retry_after: if allowed {
                Nanos::ZERO
            } else {
                since(now, fits_at)
            },
            reset_after: newest_leaves.map_or(Nanos::ZERO, |t| since(now, t)),
        };
        Ok((decision, view, fits_at))
    }
}

/// The log as of some time: the oldest `expired` entries have left.
struct View {
    expired: usize,
    used: u64,
    latest: Nanos,
}

impl Limiter for SlidingWindowLog {
    fn limit(&self) -> u64 {
        self.limit
    }

    fn try_acquire(&mut self, now: Nanos, cost: u64) -> Result<Decision, Error> {
        let (decision, view, _) = self.decide(now, cost)?;
        if decision.allowed && cost > 0 {
            self.make_room(&view, Some(view.latest.0))?;
        }
        self.apply(&view);
        if decision.allowed {
            // An allowed request leaves at most `limit - 1` entries besides
            // its own, all in the window, so the ring always has room.
            self.push(view.latest.0, cost);
        }
        Ok(decision)
    }

    fn peek(&self, now: Nanos, cost: u64) -> Result<Decision, Error> {
        self.decide(now, cost).map(|(decision, _, _)| decision)
    }

    /// Admitted from the earliest instant `cost` fits on, not before the
    /// newest entry; recorded at the slot, which takes a new entry of the
    /// ring unless it is the newest entry's instant.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn reserve_after(&mut self, now: Nanos, cost: u64, wait: Nanos) -> Result<bool, Error> {
        let (_, view, fits_at) = self.decide(now, cost)?;
        let slot = booking_slot(now, wait, view.latest.0, fits_at, cost);
        if cost > 0 {
            if let Some(slot) = slot {
                self.make_room(&view, Some(slot))?;
            }
        }
        self.apply(&view);
        Ok(cost == 0 || slot.is_some_and(|slot| self.push(slot, cost)))
    }

    /// Removes up to `cost` units recorded at exactly `taken_at` (the `now`
    /// of the acquire, or the slot a reservation was given). Units recorded at
    /// other instants stay: moving them would let a later window count less
    /// than what really happened in it.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn refund(&mut self, taken_at: Nanos, cost: u64) {
        let Some(i) = (0..self.len)
            .rev()
            .find(|&i| self.entry(i).at == taken_at.0)
        else {
            return;
        };
        let slot = (self.head + i) % self.ring.len();
        let given = cost.min(self.ring[slot].cost);
        self.ring[slot].cost -= given;
        self.used -= given;
        if self.ring[slot].cost == 0 {
            // Close the gap so that every entry keeps a cost of at least 1.
            for j in i..self.len - 1 {
                let (to, from) = (
                    (self.head + j) % self.ring.len(),
                    (self.head + j + 1) % self.ring.len(),
                );
                self.ring[to] = self.ring[from];
            }
            self.len -= 1;
        }
    }
}

/// Two logs are equal when they hold the same configuration, latest time
/// and entries, wherever the entries sit in their rings.
impl PartialEq for SlidingWindowLog {
    fn eq(&self, other: &Self) -> bool {
        (self.limit, self.window, self.latest, self.used, self.len)
            == (
                other.limit,
                other.window,
                other.latest,
                other.used,
                other.len,
            )
            && (0..self.len).all(|i| self.entry(i) == other.entry(i))
    }
}

impl Eq for SlidingWindowLog {}

impl Codec for SlidingWindowLog {
    fn tag(&self) -> u8 {
        4
    }

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn config(&self, fingerprint: &mut Fingerprint) {
        fingerprint.word(self.limit);
        fingerprint.word(self.window);
    }

    /// The latest time, the number of entries, then each entry oldest
    /// first: its time after the previous entry's (the first: absolute)
    /// and its cost.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn write_state(&self, w: &mut Writer<'_>) {
        w.varint(self.latest.0);
        w.varint(self.len as u64);
        let mut previous = 0;
        for i in 0..self.len {
            let entry = self.entry(i);
            w.varint(entry.at - previous);
            w.varint(entry.cost);
            previous = entry.at;
        }
    }

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn read_state(&mut self, r: &mut Reader<'_>) -> Result<(), Error> {
        (self.len, self.used) = (0, 0);
        self.allocate();
        let (latest, len, used) = read_fields(self.room(), r, &mut self.ring)?;
        (self.latest, self.head, self.len, self.used) = (latest, 0, len, used);
        Ok(())
    }

    /// Reads the entries into no ring: a copy of the log would copy its
    /// ring, 32 MiB at the largest limit.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn check_state(&self, r: &mut Reader<'_>) -> Result<(), Error> {
        read_fields(self.room(), r, &mut []).map(drop)
    }
}

/// Reads and checks the fields of a log's state of `room` entries at most,
/// answering its latest time, its length and the units it holds; each
/// entry goes to its place in `ring`, if `ring` has one (an empty one
/// checks only). The one reading of both passes of a restore, so that they
/// check the same.
#[cfg_attr(ratekeeper_size, optimize(size))]
fn read_fields(
    room: usize,
    r: &mut Reader<'_>,
    ring: &mut [Entry],
) -> Result<(Nanos, usize, u64), Error> {
    let latest = Nanos(r.varint()?);
    let len = r.at_most(room as u64)? as usize;
    let (mut at, mut used) = (0u64, 0u64);
    for i in 0..len {
        let step = r.varint()?;
        // Instants strictly increase (one entry per instant) and every
        // entry costs something, as `push` keeps them.
        if i > 0 && step == 0 {
            return Err(corrupt("two entries of the log share an instant"));
        }
        at = at
            .checked_add(step)
            .ok_or(corrupt("an instant exceeds 2^64 - 1 ns"))?;
        // Any cost: a log holds more than its limit after a reconfigure
        // to a smaller one, and every sum of entries is checked or
        // saturates, so a huge one only fills the window.
        let cost = r.varint()?;
        if cost == 0 {
            return Err(corrupt("an entry of the log costs nothing"));
        }
        used = used
            .checked_add(cost)
            .ok_or(corrupt("the log holds more than 2^64 - 1 units"))?;
        if let Some(slot) = ring.get_mut(i) {
            *slot = Entry { at, cost };
        }
    }
    Ok((latest, len, used))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Keyed, Portable};

    #[test]
    fn nothing_remains_until_a_booked_slot() {
        // The window had room, but a booking ahead holds every request
        // until its slot: `remaining` promised two that were denied.
        let mut log = SlidingWindowLog::new(3, Nanos(100)).unwrap();
        assert!(log.reserve_after(Nanos(0), 1, Nanos(500)).unwrap());
        let d = log.try_acquire(Nanos(10), 1).unwrap();
        assert_eq!(
            (d.allowed, d.remaining, d.retry_after),
            (false, 0, Nanos(490))
        );
        assert_eq!(log.peek(Nanos(10), 0).unwrap().remaining, 0);
        assert_eq!(log.peek(Nanos(500), 0).unwrap().remaining, 2);
    }

    #[test]
    fn a_reconfigure_to_a_smaller_ring_merges_the_oldest_entries_into_the_oldest_kept() {
        // Four instants into a ring of two: the units of 0 and 1 join those
        // of 2, and the newest entry is kept.
        let mut log = SlidingWindowLog::new(4, Nanos(1_000)).unwrap();
        for t in 0..4 {
            assert!(log.try_acquire(Nanos(t), 1).unwrap().allowed);
        }
        log.reconfigure(Nanos(3), SlidingWindowLog::new(1, Nanos(1_000)).unwrap());
        // Free once the newest has left, at 1_003.
        assert_eq!(log.peek(Nanos(3), 1).unwrap().retry_after, Nanos(1_000));
        // The units of 0 and 1 still count, until 1_002, when those of 2
        // and 3 are given back.
        log.refund(Nanos(3), 1);
        log.refund(Nanos(2), 1);
        let d = log.try_acquire(Nanos(3), 1).unwrap();
        assert_eq!((d.allowed, d.retry_after), (false, Nanos(999)));
    }

    #[test]
    fn a_keyed_stores_logs_grow_with_their_events_not_the_limit() {
        let room = 2 * MAX_LOG_LIMIT as usize;
        let mut built = SlidingWindowLog::new(MAX_LOG_LIMIT, Nanos(1_000)).unwrap();
        assert_eq!(built.ring.len(), room);
        // What a store keeps for a new key: nothing allocated yet.
        let mut key = built.new_state();
        assert_eq!(key.ring.capacity(), 0);
        for t in 0..5 {
            assert!(key.try_acquire(Nanos(t), 1).unwrap().allowed);
            let _ = built.try_acquire(Nanos(t), 1).unwrap();
        }
        assert_eq!(key.ring.len(), 8);
        assert_eq!(key, built);
        // A clone keeps its size; a reconfigured and a restored log hold the
        // whole ring.
        assert_eq!(built.clone().ring.len(), room);
        key.reconfigure(Nanos(5), built.clone());
        assert_eq!(key.ring.len(), room);
        let mut restored = built.new_state();
        restored.restore(&built.to_bytes()).unwrap();
        assert_eq!((restored.ring.len(), &restored), (room, &built));
    }

    #[test]
    fn a_growing_ring_books_no_more_instants_than_a_whole_one() {
        // Limit 3: six instants, each booking of 3 units a window after the
        // last, then refused, as the whole ring of the example above.
        let mut grown = SlidingWindowLog::new(3, Nanos(10)).unwrap().new_state();
        for window in 0..6 {
            let booked = grown.reserve(Nanos(0), 3, Nanos::MAX).unwrap();
            assert_eq!(booked, Ok(Nanos(10 * window)));
        }
        assert!(grown.reserve(Nanos(0), 3, Nanos::MAX).unwrap().is_err());
        assert_eq!(grown.ring.len(), grown.room());
    }

    #[test]
    fn a_growing_ring_keeps_its_entries_in_order() {
        // Entries that wrap round the ring when it grows, then expire,
        // refund and book as in a ring built whole.
        let mut whole = SlidingWindowLog::new(8, Nanos(10)).unwrap();
        let mut grown = whole.new_state();
        for t in [0, 1, 2, 3, 12, 13, 14, 15, 16, 17, 18, 30] {
            for log in [&mut whole, &mut grown] {
                let _ = log.try_acquire(Nanos(t), 1).unwrap();
                log.refund(Nanos(t - t % 7), 1);
                log.reserve(Nanos(t), 2, Nanos(5)).unwrap().ok();
            }
            assert_eq!(grown, whole, "at {t}");
            assert_eq!(
                grown.peek(Nanos(t), 3).unwrap(),
                whole.peek(Nanos(t), 3).unwrap()
            );
        }
    }
}
