//! The standard traits a user relies on, asserted at compile time: every
//! limiter, store and policy can move to and be shared between threads (a
//! server keeps them behind a `Mutex` or in an `Arc`), the value types can be
//! compared, hashed and copied, and `Error` is an error for `?` and `Box<dyn
//! Error>`. A missing one fails to build this test, under each feature set.

use core::fmt::Debug;
use core::hash::Hash;

use ratekeeper::{
    Bandwidth, Calendar, Decision, Error, FixedWindow, Gcra, Headers, LeakyBucket, Nanos, Rate,
    Refill, SlidingWindowCounter, TokenBucket,
};

fn send_sync<T: Send + Sync>() {}

/// A small value: copied, compared, hashed (a map key, a set member).
fn value<T: Copy + Debug + Eq + Hash + Send + Sync>() {}

fn error<T: std::error::Error + Send + Sync + 'static>() {}

#[test]
fn limiters_are_send_and_sync() {
    send_sync::<TokenBucket>();
    send_sync::<TokenBucket<3>>();
    send_sync::<Gcra>();
    send_sync::<LeakyBucket>();
    send_sync::<SlidingWindowCounter>();
    send_sync::<FixedWindow>();
    send_sync::<Headers<'static>>();
}

#[test]
fn values_are_copy_eq_and_hash() {
    value::<Nanos>();
    value::<Decision>();
    value::<Error>();
    value::<Rate>();
    value::<Calendar>();
    value::<Bandwidth>();
    value::<Refill>();
}

#[test]
fn error_is_a_std_error() {
    error::<Error>();
    let boxed: Box<dyn std::error::Error + Send + Sync> = Error::StateTruncated.into();
    assert_eq!(boxed.to_string(), "`state` ends before its last field");
}

#[cfg(feature = "alloc")]
#[test]
fn stores_and_policies_are_send_and_sync() {
    use ratekeeper::{AnyKeyed, AnyLimiter, HashSeed, KeyedLimiter, Policy, SlidingWindowLog};

    send_sync::<SlidingWindowLog>();
    send_sync::<AnyLimiter>();
    send_sync::<KeyedLimiter<String, Gcra>>();
    send_sync::<KeyedLimiter<Vec<u8>, TokenBucket<2>>>();
    send_sync::<KeyedLimiter<u64, SlidingWindowLog>>();
    send_sync::<AnyKeyed>();
    send_sync::<HashSeed>();
    send_sync::<Policy>();
    send_sync::<ratekeeper::guarantee::Guarantee>();
    send_sync::<ratekeeper::guarantee::Guarantees>();
}

#[cfg(feature = "alloc")]
#[test]
fn alloc_values_are_copy_eq_and_hash() {
    use ratekeeper::guarantee::{Lockout, Sustained};
    use ratekeeper::{Algorithm, Eviction, PolicyDecision};

    value::<Eviction>();
    value::<Algorithm>();
    value::<PolicyDecision>();
    value::<Sustained>();
    value::<Lockout>();
}

/// hashbrown's items in a keyed store's signatures are named through this
/// crate: a user needs no dependency on the same hashbrown.
#[cfg(feature = "alloc")]
#[test]
fn a_keyed_stores_hasher_and_lookup_bound_are_named_here() {
    use ratekeeper::{DefaultHashBuilder, Equivalent, KeyedLimiter, Nanos};

    fn held<Q: ?Sized + core::hash::Hash + Equivalent<String>>(
        store: &KeyedLimiter<String, Gcra, DefaultHashBuilder>,
        key: &Q,
    ) -> bool {
        store.peek(key, Nanos::ZERO, 1).unwrap().allowed
    }
    let mut store: KeyedLimiter<String, Gcra, DefaultHashBuilder> =
        KeyedLimiter::new(Gcra::new(1, Nanos(10)).unwrap());
    assert!(held(&store, "a"));
    assert!(store.try_acquire("a", Nanos::ZERO, 1).unwrap().allowed);
    assert!(!held(&store, "a"));
}
