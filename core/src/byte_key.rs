//! The keys of a store keyed by bytes, short ones kept inline.

use core::borrow::Borrow;
use core::hash::{Hash, Hasher};

use alloc::boxed::Box;
use alloc::vec::Vec;
use equivalent::Equivalent;

use crate::Error;

/// The most bytes a key keeps inline: the size of a `Vec<u8>`, less a
/// length byte and the tag.
const INLINE: usize = 22;

/// A key of an [`AnyKeyed`](crate::AnyKeyed) store. Keys of up to 22 bytes
/// (user ids, IPv4 addresses, most API keys) live in the store's entry,
/// beside the key's state: no allocation per key, and no second cache miss
/// per lookup, which at 100k keys halves the time of a keyed decision.
/// Longer keys go to the heap, allocated fallibly ([`ByteKey::new`]).
#[derive(Clone, Debug)]
pub(crate) enum ByteKey {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl ByteKey {
    fn as_bytes(&self) -> &[u8] {
        match self {
            ByteKey::Inline { len, bytes } => &bytes[..*len as usize],
            ByteKey::Heap(bytes) => bytes,
        }
    }

    /// The key to keep for `key`: [`Error::OutOfMemory`] when a key of
    /// more than 22 bytes finds no memory for its bytes (a store then
    /// refuses the request, as when its table cannot grow; `Box::new` has
    /// no fallible form, a `Vec` reserved exactly and boxed has).
    pub(crate) fn new(key: &[u8]) -> Result<ByteKey, Error> {
        if key.len() <= INLINE {
            let mut bytes = [0; INLINE];
            bytes[..key.len()].copy_from_slice(key);
            Ok(ByteKey::Inline {
                len: key.len() as u8,
                bytes,
            })
        } else {
            let mut bytes = Vec::new();
            bytes
                .try_reserve_exact(key.len())
                .map_err(|_| Error::OutOfMemory)?;
            bytes.extend_from_slice(key);
            // Its capacity is its length: boxed without a reallocation.
            Ok(ByteKey::Heap(bytes.into_boxed_slice()))
        }
    }
}

// Lookups pass `&[u8]`: equality and hashing must be the bytes', whichever
// way the key is kept.
impl Borrow<[u8]> for ByteKey {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl Hash for ByteKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl PartialEq for ByteKey {
    fn eq(&self, other: &ByteKey) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for ByteKey {}

/// A key as a lookup passes it: hashed as its bytes (as [`ByteKey`] is),
/// and compared with a key kept inline without a call. `[u8]`'s equality
/// calls `memcmp`, which was an eighth of a policy's decision: a call, and
/// vector loads sized for long keys, where keys are short. An empty key
/// (an unkeyed limit's, or `b""`) often points at no memory (address 1),
/// and glibc's AVX-512 `memcmp` loads from it, masked, even for no bytes:
/// the processor then took a microcode assist, 40% of a Python
/// `Policy.try_acquire()` of two unkeyed limits (AMD EPYC).
#[derive(Clone, Copy)]
pub(crate) struct Query<'a>(pub(crate) &'a [u8]);

impl Hash for Query<'_> {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl Equivalent<ByteKey> for Query<'_> {
    #[inline]
    fn equivalent(&self, key: &ByteKey) -> bool {
        match key {
            ByteKey::Inline { len, bytes } => {
                *len as usize == self.0.len() && same_short(self.0, bytes)
            }
            ByteKey::Heap(bytes) => **bytes == *self.0,
        }
    }
}

/// Whether `query` is the first `query.len()` bytes of `kept`, for a
/// length of at most [`INLINE`]: in a few overlapping word compares.
/// Inlined into each lookup, except in WebAssembly, which is downloaded:
/// there a copy per lookup was 0.6 KB of the gzipped file, for 2 to 3 ns
/// of a policy's decision.
#[cfg_attr(not(target_arch = "wasm32"), inline)]
#[cfg_attr(target_arch = "wasm32", inline(never))]
fn same_short(query: &[u8], kept: &[u8; INLINE]) -> bool {
    let n = query.len();
    let word = |s: &[u8], at: usize| u64::from_ne_bytes(s[at..at + 8].try_into().unwrap());
    let half = |s: &[u8], at: usize| u32::from_ne_bytes(s[at..at + 4].try_into().unwrap());
    match n {
        0 => true,
        1..=3 => query[0] == kept[0] && query[n / 2] == kept[n / 2] && query[n - 1] == kept[n - 1],
        4..=7 => half(query, 0) == half(kept, 0) && half(query, n - 4) == half(kept, n - 4),
        8..=16 => word(query, 0) == word(kept, 0) && word(query, n - 8) == word(kept, n - 8),
        17..=INLINE => {
            word(query, 0) == word(kept, 0)
                && word(query, 8) == word(kept, 8)
                && word(query, n - 8) == word(kept, n - 8)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::hash::BuildHasher;

    #[test]
    fn keys_are_their_bytes_however_kept() {
        assert_eq!(core::mem::size_of::<ByteKey>(), 24);
        for len in [0, 1, INLINE - 1, INLINE, INLINE + 1, 100] {
            let bytes: alloc::vec::Vec<u8> = (0..len as u8).collect();
            let key = ByteKey::new(&bytes[..]).unwrap();
            assert_eq!(matches!(key, ByteKey::Inline { .. }), len <= INLINE);
            assert_eq!(key.as_bytes(), &bytes[..]);
            let build = hashbrown::DefaultHashBuilder::default();
            assert_eq!(build.hash_one(&key), build.hash_one(&bytes[..]));
            assert_eq!(key, ByteKey::new(&bytes[..]).unwrap());
            assert_eq!(build.hash_one(Query(&bytes[..])), build.hash_one(&key));
            assert!(Query(&bytes[..]).equivalent(&key));
        }
    }

    /// Every length kept inline or not, against keys differing in any one
    /// byte, or in length alone.
    #[test]
    fn queries_match_their_own_bytes_only() {
        for len in 0..=INLINE + 2 {
            let bytes: alloc::vec::Vec<u8> = (1..=len as u8).collect();
            let key = ByteKey::new(&bytes).unwrap();
            assert!(Query(&bytes).equivalent(&key), "length {len}");
            for at in 0..len {
                let mut other = bytes.clone();
                other[at] ^= 0x80;
                assert!(!Query(&other).equivalent(&key), "length {len}, byte {at}");
            }
            assert!(!Query(&bytes[..len.saturating_sub(1)]).equivalent(&key) || len == 0);
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(!Query(&longer).equivalent(&key), "length {len} + 1");
        }
    }
}
