//! Keyed stores' hash seeds from the operating system, as the Node addon
//! makes them (see `bindings-node/src/hash_seed.rs` for why): hashes of std's
//! `RandomState`, whose SipHash keys come from the system's generator, in
//! place of the core's default seeds from where the process was loaded.

use std::hash::{BuildHasher, RandomState};
use std::sync::OnceLock;

use ratekeeper::HashSeed;

/// The seed's part every store shares (made once) and a store's own bits.
pub fn host_seed() -> (&'static HashSeed, u64) {
    static SHARED: OnceLock<HashSeed> = OnceLock::new();
    let random = || RandomState::new().hash_one("ratekeeper");
    (SHARED.get_or_init(|| HashSeed::new(random())), random())
}
