//! Keyed stores' hash seeds, from the operating system's randomness.
//!
//! Left alone, the core seeds a store's hashing from where the process was
//! loaded in memory (foldhash's default, "minimally DoS-resistant"). A
//! server keyed by what its clients send (an API key, an address) wants
//! seeds nobody can guess: std's `RandomState` keys SipHash from the
//! operating system's generator (once per thread, then a step per state),
//! and a hash under such keys is such a seed.

use std::hash::{BuildHasher, RandomState};
use std::sync::OnceLock;

use ratekeeper::HashSeed;

/// The part of the seed every store shares (made once) and 64 bits of a
/// store's own, for `AnyKeyed::seed_hashes` and `Policy::seed_hashes`.
pub fn host_seed() -> (&'static HashSeed, u64) {
    static SHARED: OnceLock<HashSeed> = OnceLock::new();
    let bits = || RandomState::new().hash_one("ratekeeper");
    (SHARED.get_or_init(|| HashSeed::new(bits())), bits())
}
