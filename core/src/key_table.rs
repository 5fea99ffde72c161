//! The table a keyed store keeps its keys in: keys and states side by side
//! in a `Vec`, in the order they arrived, found through a hash table of
//! their positions.
//!
//! Why not a `HashMap<K, V>`: there, each key's slot lies at a place its hash
//! picks, so a store of 100k keys is 100k random places in several MB of
//! memory, and calls that go round the keys (every client now and then) miss
//! the CPU's caches on every lookup. Here, the hash table holds only a
//! 4-byte position per key (with hashbrown's control byte, about 650 KB at
//! 100k keys, which stays in a CPU's near caches), and the states lie in the
//! order their keys first arrived, so that keys seen together are found
//! together, and a round of the keys reads memory in order. In a random
//! order a lookup misses the caches on the state, as before, and on the
//! position too once the positions outgrow the caches (about a million
//! keys). It is also smaller: no empty slot the size of a key and a state,
//! only an empty position.

use core::fmt;
use core::hash::{BuildHasher, Hash};

use alloc::vec::Vec;
use equivalent::Equivalent;
use hashbrown::HashTable;

use crate::Error;

/// The most keys a table holds: positions are 32-bit.
pub(crate) const MAX_LEN: usize = u32::MAX as usize;

/// How the positions' table finds an entry's hash when it grows. A trait
/// object, so that hashbrown's resizing, which takes it, is compiled once,
/// not once per keyed store's key and state types; it runs only on growth.
type Rehash<'a> = &'a dyn Fn(&u32) -> u64;

/// Keys and their values, in arrival order, found by hash (see the module).
/// Removing keys keeps the others in their order: those after a removed
/// one move down.
///
/// A panic in a key's `Hash` or in a `retain` predicate leaves the table
/// whole: positions are renumbered on the way out.
#[derive(Clone)]
pub(crate) struct KeyTable<K, V, S> {
    /// Each entry's position in `entries`, hashed by the entry's key.
    positions: HashTable<u32>,
    entries: Vec<(K, V)>,
    hasher: S,
}

/// The entries, without the hasher: a keyed store's `Debug` (a log line)
/// would write out its seeds, which tell a client the keys that collide.
impl<K: fmt::Debug, V: fmt::Debug, S> fmt::Debug for KeyTable<K, V, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyTable")
            .field("positions", &self.positions)
            .field("entries", &self.entries)
            .finish_non_exhaustive()
    }
}

impl<K: Hash + Eq, V, S: BuildHasher> KeyTable<K, V, S> {
    /// An empty table hashing keys with `hasher`.
    pub(crate) fn with_hasher(hasher: S) -> Self {
        KeyTable {
            positions: HashTable::new(),
            entries: Vec::new(),
            hasher,
        }
    }

    /// Hashes keys with `hasher` from now on, the keys held included. The
    /// positions are built aside and swapped in, so that a panic in a key's
    /// `Hash` leaves the table as it was; where memory for a second table
    /// runs out, they are rebuilt in place instead (no allocation: the
    /// table holds them already), and a panic in a key's `Hash` then
    /// empties the table: the keys not yet indexed could not be found.
    pub(crate) fn set_hasher(&mut self, hasher: S) {
        let aside = empty_positions(self.entries.len());
        let in_place = aside.is_none();
        let mut positions = aside.unwrap_or_else(|| {
            let mut held = core::mem::take(&mut self.positions);
            held.clear();
            held
        });
        let mut emptied = Emptied {
            entries: &mut self.entries,
            armed: in_place,
        };
        index_all(&mut positions, emptied.entries, &hasher);
        emptied.armed = false;
        self.positions = positions;
        self.hasher = hasher;
    }

    /// Makes room for one more key, so that [`insert_new`](Self::insert_new)
    /// allocates nothing: fails, leaving the table as it was (its room
    /// aside), when memory runs out. Two compares where there is room
    /// (the growth itself is out of line).
    #[inline]
    pub(crate) fn reserve_one(&mut self) -> Result<(), Error> {
        let room = |len: usize, capacity: usize| len < capacity;
        if room(self.entries.len(), self.entries.capacity())
            && room(self.positions.len(), self.positions.capacity())
        {
            return Ok(());
        }
        self.grow_one()
    }

    /// [`Self::reserve_one`] where the entries or the positions are full.
    #[cold]
    #[inline(never)]
    fn grow_one(&mut self) -> Result<(), Error> {
        let KeyTable {
            positions,
            entries,
            hasher,
        } = self;
        entries.try_reserve(1).map_err(|_| Error::OutOfMemory)?;
        reserve_position(positions, entries, hasher)
    }

    /// The hasher, for tests of what hashes keys.
    #[cfg(test)]
    pub(crate) fn hasher(&self) -> &S {
        &self.hasher
    }

    /// The number of keys.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is no key.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes of heap held: the positions' table and the entries' buffer.
    pub(crate) fn allocation_size(&self) -> usize {
        self.positions.allocation_size() + self.entries.capacity() * size_of::<(K, V)>()
    }

    /// Where `key`'s entry is, if it is held: a place that stays `key`'s
    /// until the table changes (an insertion or a removal).
    #[inline]
    pub(crate) fn position<Q: ?Sized + Hash + Equivalent<K>>(&self, key: &Q) -> Option<usize> {
        self.find(self.hasher.hash_one(key), key)
    }

    /// [`position`](Self::position), trying `hint` (where the key may be,
    /// an earlier answer) first: a compare of the keys, where a lookup
    /// hashes the key and probes the table. Keys are unique, so a match
    /// there is the key's place, however much the table changed since.
    #[inline]
    pub(crate) fn position_near<Q: ?Sized + Hash + Equivalent<K>>(
        &self,
        key: &Q,
        hint: Option<usize>,
    ) -> Option<usize> {
        if let Some((held, _)) = hint.and_then(|at| self.entries.get(at)) {
            if key.equivalent(held) {
                return hint;
            }
        }
        self.position(key)
    }

    /// The value of the entry at `at`, a [`position`](Self::position).
    #[inline]
    pub(crate) fn value_at(&self, at: usize) -> &V {
        &self.entries[at].1
    }

    /// The value of the entry at `at`, a [`position`](Self::position), to change.
    #[inline]
    pub(crate) fn value_at_mut(&mut self, at: usize) -> &mut V {
        &mut self.entries[at].1
    }

    /// Where `key`, of hash `hash`, has its entry, if it is held.
    #[inline]
    fn find<Q: ?Sized + Equivalent<K>>(&self, hash: u64, key: &Q) -> Option<usize> {
        let entries = &self.entries;
        let found = self
            .positions
            .find(hash, |&at| key.equivalent(&entries[at as usize].0));
        found.map(|&at| at as usize)
    }

    /// `key`'s value.
    #[inline]
    pub(crate) fn get<Q: ?Sized + Hash + Equivalent<K>>(&self, key: &Q) -> Option<&V> {
        self.position(key).map(|at| &self.entries[at].1)
    }

    /// `key`'s value, to change.
    #[inline]
    pub(crate) fn get_mut<Q: ?Sized + Hash + Equivalent<K>>(&mut self, key: &Q) -> Option<&mut V> {
        self.position(key).map(|at| &mut self.entries[at].1)
    }

    /// Whether `key` is held.
    pub(crate) fn contains_key<Q: ?Sized + Hash + Equivalent<K>>(&self, key: &Q) -> bool {
        self.position(key).is_some()
    }

    /// Adds `key`, which the table does not hold, at the end. The caller
    /// keeps the table under [`MAX_LEN`] keys, and made room for it
    /// ([`reserve_one`](Self::reserve_one)): growing here could not fail
    /// but by aborting.
    // Inlined, as `push`: making room first left LLVM calling them out of
    // line from a store's new-key path, a dozen instructions more a key.
    #[inline(always)]
    pub(crate) fn insert_new(&mut self, key: K, value: V) {
        debug_assert!(self.position(&key).is_none());
        self.push(self.hasher.hash_one(&key), key, value);
    }

    /// Adds `key`, of hash `hash` and not held, at the end.
    #[inline(always)]
    fn push(&mut self, hash: u64, key: K, value: V) {
        debug_assert!(self.entries.len() < MAX_LEN);
        debug_assert!(self.entries.len() < self.entries.capacity(), "no room made");
        let at = self.entries.len() as u32;
        insert_position(&mut self.positions, &self.entries, &self.hasher, hash, at);
        self.entries.push((key, value));
    }

    /// Keeps the entries for which `keep` is true, in their order.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&K, &mut V) -> bool) {
        let before = self.entries.len();
        // Every entry after the first removed one moves: the guard renumbers
        // them all once `retain_mut` is done, or if `keep` panics in it.
        let guard = Renumber {
            table: self,
            before,
        };
        guard
            .table
            .entries
            .retain_mut(|(key, value)| keep(key, value));
    }

    /// Removes the entry at `at`, a [`position`](Self::position), in a few
    /// steps: the last entry takes its place (the one entry moved out of
    /// arrival order), so that removing one key costs no pass over the keys.
    /// Both keys are hashed before anything changes, so that a panic in a
    /// key's `Hash` leaves the table whole.
    pub(crate) fn remove_at(&mut self, at: usize) {
        let last = self.entries.len() - 1;
        let hash = self.hasher.hash_one(&self.entries[at].0);
        let moved = self.hasher.hash_one(&self.entries[last].0);
        move_position(&mut self.positions, (hash, at as u32), (moved, last as u32));
        self.entries.swap_remove(at);
    }

    /// Every value, in arrival order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &V> {
        self.entries.iter().map(|(_, value)| value)
    }

    /// Every value, to change, in arrival order.
    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.entries.iter_mut().map(|(_, value)| value)
    }
}

/// Drops every entry when dropped armed: what a panic in a key's `Hash`
/// leaves while [`KeyTable::set_hasher`] rebuilds the positions in place,
/// the table's own taken out (the keys not yet indexed could not be found).
struct Emptied<'a, K, V> {
    entries: &'a mut Vec<(K, V)>,
    armed: bool,
}

impl<K, V> Drop for Emptied<'_, K, V> {
    fn drop(&mut self) {
        if self.armed {
            self.entries.clear();
        }
    }
}

/// Renumbers a table's positions when dropped, if its length changed from
/// `before`: one pass, keeping the positions' capacity, unless the table is
/// down to a quarter of its entries' capacity: then both give memory back,
/// keeping room for the table to double, and for one key at least, so that
/// the key a store makes room for after a sweep or an eviction needs no
/// allocation (which could fail after that change).
struct Renumber<'a, K: Hash, V, S: BuildHasher> {
    table: &'a mut KeyTable<K, V, S>,
    before: usize,
}

impl<K: Hash, V, S: BuildHasher> Drop for Renumber<'_, K, V, S> {
    fn drop(&mut self) {
        let KeyTable {
            positions,
            entries,
            hasher,
        } = &mut *self.table;
        if entries.len() == self.before {
            return;
        }
        positions.clear();
        if entries.len() <= entries.capacity() / 4 {
            let room = (entries.len() * 2).max(1);
            entries.shrink_to(room);
            shrink_positions(positions, room);
        }
        index_all(positions, entries, hasher);
    }
}

/// Drops the position `at` (of hash `hash`), and moves the position `last`
/// (of hash `moved`) to `at`. Not generic, and never inlined, so that its
/// code is in the build once, not once per keyed store's state type.
#[inline(never)]
fn move_position(
    positions: &mut HashTable<u32>,
    (hash, at): (u64, u32),
    (moved, last): (u64, u32),
) {
    if let Ok(entry) = positions.find_entry(hash, |&p| p == at) {
        entry.remove();
    }
    if let Some(position) = positions.find_mut(moved, |&p| p == last) {
        *position = at;
    }
}

/// Adds the position of every entry to the empty `positions`, each key
/// hashed with `hasher`.
fn index_all<K: Hash, V, S: BuildHasher>(
    positions: &mut HashTable<u32>,
    entries: &[(K, V)],
    hasher: &S,
) {
    for (at, (key, _)) in entries.iter().enumerate() {
        insert_position(positions, entries, hasher, hasher.hash_one(key), at as u32);
    }
}

/// Shrinks the emptied `positions` to hold `room` positions, if memory for
/// the smaller table can be had (hashbrown's `shrink_to` aborts when it
/// cannot): else they keep their room. Not generic, and never inlined, so
/// that its code is in the build once.
///
/// The entries' buffer shrinks with `Vec::shrink_to`, which has no fallible
/// form: a shrinking `realloc`, which std's allocator on Linux (glibc's)
/// and the wasm build's (talc) do in place, giving back the tail.
#[inline(never)]
fn shrink_positions(positions: &mut HashTable<u32>, room: usize) {
    debug_assert!(positions.is_empty());
    if let Some(smaller) = empty_positions(room) {
        if smaller.capacity() < positions.capacity() {
            *positions = smaller;
        }
    }
}

/// An empty table of positions with room for `room`, if memory for it can
/// be had. Not generic, and never inlined, so that its code is in the
/// build once.
#[inline(never)]
fn empty_positions(room: usize) -> Option<HashTable<u32>> {
    let mut positions = HashTable::new();
    // Empty: nothing to rehash. The hasher as every growth passes it, so
    // that hashbrown's resizing is compiled once.
    let nothing = |_: &u32| 0u64;
    let reserved = positions.try_reserve(room, &nothing as Rehash<'_>);
    reserved.ok().map(|()| positions)
}

/// Makes room in `positions` for one more, rehashing the others from
/// `entries` if it grows: fails, changing nothing, when memory runs out.
fn reserve_position<K: Hash, V, S: BuildHasher>(
    positions: &mut HashTable<u32>,
    entries: &[(K, V)],
    hasher: &S,
) -> Result<(), Error> {
    let rehash = |&at: &u32| hasher.hash_one(&entries[at as usize].0);
    positions
        .try_reserve(1, &rehash as Rehash<'_>)
        .map_err(|_| Error::OutOfMemory)
}

/// Adds the position `at`, of an entry whose key hashes to `hash`, to
/// `positions`, which may grow, rehashing the others from `entries`.
fn insert_position<K: Hash, V, S: BuildHasher>(
    positions: &mut HashTable<u32>,
    entries: &[(K, V)],
    hasher: &S,
    hash: u64,
    at: u32,
) {
    let rehash = |&at: &u32| hasher.hash_one(&entries[at as usize].0);
    positions.insert_unique(hash, at, &rehash as Rehash<'_>);
}

#[cfg(test)]
mod tests {
    use super::*;
    use hashbrown::{DefaultHashBuilder, HashMap};
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u8, u32),
        Retain(u8),
        Bump(u8),
        Remove(u8),
    }

    /// Sets `k`'s value, adding it if new, as a store does.
    fn insert<K: Hash + Eq, S: BuildHasher>(table: &mut KeyTable<K, u32, S>, k: K, v: u32) {
        match table.get_mut(&k) {
            Some(value) => *value = v,
            None => {
                table.reserve_one().unwrap();
                table.insert_new(k, v);
            }
        }
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (any::<u8>(), any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
            (1..8u8).prop_map(Op::Retain),
            any::<u8>().prop_map(Op::Bump),
            any::<u8>().prop_map(Op::Remove),
        ]
    }

    proptest! {
        /// The table holds exactly what a `HashMap` given the same calls holds.
        #[test]
        fn holds_what_a_hash_map_holds(ops in proptest::collection::vec(op(), 0..400)) {
            let mut table = KeyTable::with_hasher(DefaultHashBuilder::default());
            let mut model: HashMap<u8, u32> = HashMap::new();
            for op in ops {
                match op {
                    Op::Insert(k, v) => {
                        insert(&mut table, k, v);
                        model.insert(k, v);
                    }
                    Op::Retain(m) => {
                        table.retain(|k, _| k % m != 0);
                        model.retain(|k, _| k % m != 0);
                    }
                    Op::Bump(k) => {
                        if let Some(v) = table.get_mut(&k) {
                            *v = v.wrapping_add(1);
                        }
                        if let Some(v) = model.get_mut(&k) {
                            *v = v.wrapping_add(1);
                        }
                    }
                    Op::Remove(k) => {
                        if let Some(at) = table.position(&k) {
                            table.remove_at(at);
                        }
                        model.remove(&k);
                    }
                }
                prop_assert_eq!(table.len(), model.len());
                for k in 0..=u8::MAX {
                    prop_assert_eq!(table.get(&k), model.get(&k));
                    prop_assert_eq!(table.contains_key(&k), model.contains_key(&k));
                }
            }
            let mut values: Vec<u32> = table.values_mut().map(|v| *v).collect();
            let mut expected: Vec<u32> = model.values().copied().collect();
            values.sort_unstable();
            expected.sort_unstable();
            prop_assert_eq!(values, expected);
        }
    }

    #[test]
    fn a_panicking_retain_leaves_the_table_whole() {
        extern crate std;
        let mut table = KeyTable::with_hasher(DefaultHashBuilder::default());
        for k in 0..10u32 {
            insert(&mut table, k, k);
        }
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            table.retain(|&k, _| if k == 5 { panic!("keep") } else { k != 2 })
        }));
        assert!(unwound.is_err());
        // Key 2 is gone; every other key is found, once.
        assert_eq!(table.len(), 9);
        for k in 0..10u32 {
            assert_eq!(table.get(&k), (k != 2).then_some(&k));
        }
        insert(&mut table, 9, 90);
        assert_eq!((table.len(), table.get(&9)), (9, Some(&90)));
    }

    #[test]
    fn memory_goes_back_at_a_quarter_of_the_room_keeping_room_to_double() {
        for extra in [1, 0] {
            let mut table = KeyTable::with_hasher(DefaultHashBuilder::default());
            for k in 0..100u32 {
                insert(&mut table, k, k);
            }
            let room = table.entries.capacity();
            let kept = (room / 4 + extra) as u32;
            table.retain(|&k, _| k < kept);
            if extra == 1 {
                assert_eq!(table.entries.capacity(), room);
            } else {
                let now = table.entries.capacity();
                assert!(now < room && now >= 2 * table.len(), "{now} of {room}");
            }
        }
    }

    #[test]
    fn keys_lie_in_arrival_order() {
        let mut table = KeyTable::with_hasher(DefaultHashBuilder::default());
        for k in 0..100u32 {
            insert(&mut table, k, k * 2);
        }
        table.retain(|k, _| k % 3 != 0);
        let values: Vec<u32> = table.values_mut().map(|v| *v).collect();
        let expected: Vec<u32> = (0..100).filter(|k| k % 3 != 0).map(|k| k * 2).collect();
        assert_eq!(values, expected);
        assert!(table.allocation_size() >= 100 * size_of::<(u32, u32)>());
    }
}
