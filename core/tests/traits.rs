//! The standard traits a user relies on, asserted at compile time: every
//! limiter, store and policy can move to and be shared between threads (a
//! server keeps them behind a `Mutex` or in an `Arc`), `Limiter` is a trait
//! object, the value types can be compared, hashed and copied, the enums
//! configuration names display those names, and `Error` is an error for `?`
//! and `Box<dyn Error>`. A missing one fails to build this test, under each
//! feature set.

use core::fmt::Debug;
use core::hash::Hash;

use ratekeeper::{
    Bandwidth, Calendar, Decision, Error, FixedWindow, Gcra, Headers, LeakyBucket, Limiter, Nanos,
    Rate, Refill, SlidingWindowCounter, TokenBucket,
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

/// `Limiter` stays usable as a trait object (a method generic over a type,
/// or one returning `Self`, would end that), and a boxed limiter can move
/// to another thread.
#[test]
fn limiter_is_a_trait_object() {
    fn decide(limiter: &mut dyn Limiter) -> bool {
        limiter.try_acquire(Nanos::ZERO, 1).unwrap().allowed
    }
    let mut limiters: Vec<Box<dyn Limiter + Send + Sync>> = vec![
        Box::new(Gcra::new(1, Nanos(10)).unwrap()),
        Box::new(TokenBucket::new(1, 1, Nanos(10)).unwrap()),
        Box::new(FixedWindow::new(1, Nanos(10)).unwrap()),
    ];
    let handle = std::thread::spawn(move || {
        limiters
            .iter_mut()
            .map(|l| (decide(l.as_mut()), decide(l.as_mut())))
            .collect::<Vec<_>>()
    });
    assert_eq!(handle.join().unwrap(), [(true, false); 3]);
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
    value::<Headers<'static>>();
}

/// The enums configuration names print as those names (`{}` pads them as
/// a string is padded), and read back through `from_name`.
#[test]
fn named_enums_display_their_names() {
    for &refill in Refill::ALL {
        assert_eq!(refill.to_string(), refill.name());
        assert_eq!(Refill::from_name(&refill.to_string()), Some(refill));
    }
    for &calendar in Calendar::ALL {
        assert_eq!(calendar.to_string(), calendar.name());
        assert_eq!(Calendar::from_name(&calendar.to_string()), Some(calendar));
    }
    assert_eq!(format!("[{:>8}]", Refill::Greedy), "[  greedy]");
    assert_eq!(format!("[{:<6}]", Calendar::Day), "[day   ]");
    // `name` is a `const fn` on every one of them.
    const GREEDY: &str = Refill::Greedy.name();
    assert_eq!(GREEDY, "greedy");
    // Their lists are slices, not arrays: a variant added in a minor
    // release (the enums are `#[non_exhaustive]`) changes a list's length,
    // where an array's type would have changed.
    let _: (&'static [Refill], &'static [Calendar]) = (Refill::ALL, Calendar::ALL);
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
    use ratekeeper::{
        AnyKeyed, AnyLimiter, BucketState, HashSeed, KeyedLimiter, LimitConfig, Policy,
        PolicyConfig, SlidingWindowLog,
    };

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
    // What a store keeps per key of a bucket, and the configuration types.
    send_sync::<BucketState<2>>();
    send_sync::<LimitConfig>();
    send_sync::<PolicyConfig>();
}

/// Configurations are compared and hashed as data (a set of those seen, a
/// cache of the policies built from them).
#[cfg(feature = "alloc")]
#[test]
fn configurations_are_eq_and_hash() {
    use ratekeeper::{LimitConfig, PolicyConfig};
    use std::collections::HashSet;

    fn data<T: Clone + Debug + Default + Eq + Hash + Send + Sync>() {}
    data::<LimitConfig>();
    data::<PolicyConfig>();
    let limit = |rate: &str| LimitConfig::new("a", rate);
    let seen: HashSet<PolicyConfig> = [limit("1/second"), limit("1/second"), limit("2/second")]
        .into_iter()
        .map(|l| PolicyConfig::new(vec![l]))
        .collect();
    assert_eq!(seen.len(), 2);
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

#[cfg(feature = "alloc")]
#[test]
fn alloc_named_enums_display_their_names() {
    use ratekeeper::{Algorithm, Eviction};

    for &algorithm in Algorithm::ALL {
        assert_eq!(algorithm.to_string(), algorithm.name());
        assert_eq!(
            Algorithm::from_name(&algorithm.to_string()),
            Some(algorithm)
        );
    }
    for &eviction in Eviction::ALL {
        assert_eq!(eviction.to_string(), eviction.name());
        assert_eq!(Eviction::from_name(&eviction.to_string()), Some(eviction));
    }
    assert_eq!(format!("{:-^8}", Algorithm::Gcra), "--gcra--");
    // Slices, as `Refill::ALL` is; and the fields of a limit, which may grow.
    let _: (&'static [Algorithm], &'static [Eviction]) = (Algorithm::ALL, Eviction::ALL);
    let _: &'static [&'static str] = ratekeeper::LimitConfig::FIELDS;
}

/// The items in a keyed store's signatures are named through this crate: a
/// user needs no dependency on hashbrown or foldhash (whose types are not in
/// the API) nor on `equivalent` (re-exported). The default hasher's `Debug`
/// shows no seed.
#[cfg(feature = "alloc")]
#[test]
fn a_keyed_stores_hasher_and_lookup_bound_are_named_here() {
    use core::hash::{BuildHasher, Hasher};
    use ratekeeper::{DefaultHashBuilder, DefaultHasher, Equivalent, KeyedLimiter, Nanos};

    let builder = DefaultHashBuilder::default();
    let hasher: DefaultHasher = builder.build_hasher();
    assert_eq!(format!("{builder:?}"), "DefaultHashBuilder { .. }");
    assert_eq!(format!("{hasher:?}"), "DefaultHasher { .. }");
    send_sync::<DefaultHashBuilder>();
    // Hashed as a `BuildHasher` must: the same value the same, however
    // hashed, and each integer width on its own.
    let mut one = builder.build_hasher();
    one.write_u64(7);
    assert_eq!(one.finish(), builder.hash_one(7_u64));
    assert_eq!(builder.hash_one("alice"), builder.clone().hash_one("alice"));
    assert_ne!(builder.hash_one(7_u64), builder.hash_one(8_u64));

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
