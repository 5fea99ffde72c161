//! Which states a booking's give-back must find untouched: the events
//! counted per state ([`Touch`], [`Marks`]), keys told apart by [`mark`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// What touched a state since a booking, for the give-back of that booking
/// (`acquire`'s below, `_withdraw` in `ratekeeper/_wait.py`, a
/// reservation's `cancel()`). Each kind counts those after it too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Touch {
    /// Any event: a bucket gives a booking back only while none touched its
    /// states since (it gives back exactly only its latest).
    Any = 0,
    /// One that no `acquire_async` waiter made (a thread's `acquire`, a
    /// `reserve()`, a reset, a reconfigure, a restore): the waiters behind a
    /// cancelled one move up only while none touched their states since.
    Foreign = 1,
    /// A reset that found a key: it forgot the key's bookings, and the key,
    /// used again, may book their slots anew; a booking made before gives
    /// nothing back (given back, it would free a unit of those: two
    /// requests in a window of one).
    Reset = 2,
}

/// How many marks a keyed store or a policy keeps: its keys are told apart
/// by a hash into this many (see [`mark`]), and two keys that share one
/// (one pair in 256) count as one, which gives back less, never more.
const MARKS: usize = 256;

/// The mark of the key `key` of the limit at `place` (0 in a keyed store):
/// the top byte of the 32-bit FNV-1a of `place` (4 bytes, little-endian)
/// then `key`, mixed by MurmurHash3's finalizer (FNV's top byte alone
/// follows the last byte closely: `user778`, `user786` and `user794`
/// shared one). JS computes the same (`markOf` in lib/api/waiting.cjs),
/// so that both tell keys apart alike.
pub fn mark(place: usize, key: &[u8]) -> u8 {
    let mut hash: u32 = 0x811c_9dc5;
    for &byte in (place as u32).to_le_bytes().iter().chain(key) {
        hash = (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193);
    }
    hash ^= hash >> 16;
    hash = hash.wrapping_mul(0x85eb_ca6b);
    hash ^= hash >> 13;
    hash = hash.wrapping_mul(0xc2b2_ae35);
    hash ^= hash >> 16;
    (hash >> 24) as u8
}

/// Every mark: those of a request whose keys could not be listed (memory
/// for one ran out, see the core's `Policy::each_key`), taken as reaching
/// every key, so that a booking is given back less often, never more.
pub fn every_mark() -> Vec<u8> {
    (0..=u8::MAX).collect()
}

/// The latest event of each [`Touch`] that touched each state: the seq of
/// the latest that touched every state (a limiter's calls, whose marks are
/// none; a reconfigure, a restore), and of the latest that touched the keys
/// of each mark. A call on one key touches no other key's state (the core's
/// `Policy::each_key`), so a booking of one key may be given back whatever
/// happened to other keys since. Written and read with the core locked.
pub(super) struct Marks {
    every: [AtomicU64; 3],
    /// Three per mark (one per [`Touch`]), made at the first event on a key.
    keys: OnceLock<Box<[AtomicU64]>>,
}

impl Marks {
    pub(super) fn new() -> Self {
        Marks {
            every: Default::default(),
            keys: OnceLock::new(),
        }
    }

    /// Records event `seq`, of kind `touch` (and so of the kinds before
    /// it), on the states of `marks` (every state for none).
    pub(super) fn touch(&self, marks: &[u8], seq: u64, touch: Touch) {
        let kinds = 0..=touch as usize;
        if marks.is_empty() {
            for kind in kinds {
                self.every[kind].fetch_max(seq, Ordering::Relaxed);
            }
            return;
        }
        let keys = self
            .keys
            .get_or_init(|| (0..3 * MARKS).map(|_| AtomicU64::new(0)).collect());
        for &mark in marks {
            for kind in kinds.clone() {
                keys[3 * usize::from(mark) + kind].fetch_max(seq, Ordering::Relaxed);
            }
        }
    }

    /// The latest event of kind `touch` on the states of `marks`.
    pub(super) fn latest(&self, marks: &[u8], touch: Touch) -> u64 {
        let kind = touch as usize;
        let mut latest = self.every[kind].load(Ordering::Relaxed);
        if let Some(keys) = self.keys.get() {
            for &mark in marks {
                latest = latest.max(keys[3 * usize::from(mark) + kind].load(Ordering::Relaxed));
            }
        }
        latest
    }
}
