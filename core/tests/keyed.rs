//! Keyed stores and policies against the simplest model: one independent,
//! never-reclaimed limiter per key.

use std::collections::HashMap;

use proptest::prelude::*;
use ratekeeper::{
    AnyKeyed, AnyLimiter, Bandwidth, Eviction, FixedWindow, Gcra, HashSeed, KeyedLimiter,
    LeakyBucket, Limiter, Nanos, Policy, SlidingWindowCounter, SlidingWindowLog, TokenBucket,
};

/// One request: key, time step, cost, and whether to sweep first.
type Op = (u8, u64, u64, bool);

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        (0u8..6, 0u64..400, 0u64..4, prop::bool::weighted(0.1)),
        1..300,
    )
}

/// The shared part of the hash seeds, made once as a host makes it.
fn shared() -> &'static HashSeed {
    static SHARED: std::sync::OnceLock<HashSeed> = std::sync::OnceLock::new();
    SHARED.get_or_init(|| HashSeed::new(0x2545_f491_4f6c_dd1d))
}

/// Runs `ops` five at a time from `start` (time saturating at the end of
/// the clock) as one batch per chunk on one store and as single calls on
/// another: every answer and the key count must be equal.
fn batch_is_one_by_one(prototype: AnyLimiter, start: u64, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut batched = AnyKeyed::new(prototype.clone());
    let mut single = AnyKeyed::new(prototype);
    let mut now = start;
    for chunk in ops.chunks(5) {
        now = now.saturating_add(chunk[0].1);
        if chunk[0].3 {
            let later = Nanos(now.saturating_add(1_000));
            batched
                .try_acquire_batch(&[chunk[0].0 + 100], later, &[], &mut [])
                .unwrap();
        }
        let costs: Vec<u64> = chunk.iter().map(|op| op.2).collect();
        let mut out = vec![
            Ok(ratekeeper::Decision {
                allowed: false,
                remaining: 0,
                limit: 0,
                retry_after: Nanos::ZERO,
                reset_after: Nanos::ZERO
            });
            costs.len()
        ];
        batched
            .try_acquire_batch(&[chunk[0].0], Nanos(now), &costs, &mut out)
            .unwrap();
        for (cost, got) in costs.iter().zip(&out) {
            prop_assert_eq!(got, &single.try_acquire(&[chunk[0].0], Nanos(now), *cost));
        }
        prop_assert_eq!(batched.len(), single.len());
    }
    Ok(())
}

/// Runs `ops` three at a time on two bounded stores: each chunk's costs as
/// one batch of its first key, at a time that sometimes lags the store's,
/// checked first (as a binding that fails a whole batch checks it), then
/// its second op as a later call on another key. One store decides the batch
/// through the core's batch (the napi and Python bindings), the other cost
/// by cost once `prepare_batch` made the key ready (the wasm build): every
/// answer and the key count must be equal.
fn prepared_batch_is_the_cores(
    prototype: AnyLimiter,
    max_keys: usize,
    eviction: Eviction,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let mut cores = AnyKeyed::new(prototype)
        .with_max_keys(max_keys, eviction)
        .unwrap();
    let mut by_calls = cores.clone();
    let mut now = 0u64;
    for chunk in ops.chunks(3) {
        now += chunk[0].1;
        let at = Nanos(if chunk[0].3 {
            now.saturating_sub(300)
        } else {
            now
        });
        let key = [chunk[0].0];
        let costs: Vec<u64> = chunk.iter().map(|op| op.2).collect();
        let batched = cores.check_batch(&key, at, &costs).and_then(|()| {
            let mut out = vec![Err(ratekeeper::Error::StateTruncated); costs.len()];
            cores.try_acquire_batch(&key, at, &costs, &mut out)?;
            out.into_iter().collect::<Result<Vec<_>, _>>()
        });
        let called = by_calls
            .check_batch(&key, at, &costs)
            .and_then(|()| by_calls.prepare_batch(&key, at, &costs))
            .and_then(|()| {
                costs
                    .iter()
                    .map(|&c| by_calls.try_acquire(&key, at, c))
                    .collect()
            });
        prop_assert_eq!(batched, called);
        if let Some(&(other, step, cost, _)) = chunk.get(1) {
            now += step;
            let (other, at) = ([other + 10], Nanos(now));
            prop_assert_eq!(
                cores.try_acquire(&other, at, cost),
                by_calls.try_acquire(&other, at, cost)
            );
        }
        prop_assert_eq!(cores.len(), by_calls.len());
    }
    Ok(())
}

fn prototypes() -> Vec<AnyLimiter> {
    vec![
        Gcra::new(3, Nanos(100)).unwrap().into(),
        TokenBucket::new(3, 2, Nanos(150)).unwrap().into(),
        FixedWindow::new(3, Nanos(250)).unwrap().into(),
        SlidingWindowLog::new(3, Nanos(250)).unwrap().into(),
        // Starts short, so a store keeps even its new keys: one that an
        // empty batch inserted would show in the key count.
        TokenBucket::with_initial_tokens(3, 1, Nanos(100), 0)
            .unwrap()
            .into(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Every answer of a store (GCRA's one-word states included) is the one
    /// its key's own limiter gives; sweeps, and seeding the hashes (which
    /// rehashes the keys held), lose nothing.
    #[test]
    fn a_store_answers_like_one_limiter_per_key(ops in ops()) {
        for prototype in prototypes() {
            let mut store = AnyKeyed::new(prototype.clone());
            let mut model: HashMap<u8, AnyLimiter> = HashMap::new();
            let mut now = 0;
            for &(key, step, cost, sweep) in &ops {
                now += step;
                if sweep {
                    store.reclaim(Nanos(now));
                    store.seed_hashes(shared(), now.wrapping_mul(0x2545_f491_4f6c_dd1d));
                }
                let own = model.entry(key).or_insert_with(|| prototype.clone());
                prop_assert_eq!(store.peek(&[key], Nanos(now), cost), own.peek(Nanos(now), cost));
                prop_assert_eq!(store.try_acquire(&[key], Nanos(now), cost), own.try_acquire(Nanos(now), cost));
            }
        }
    }

    /// A batch decides exactly like the same requests one by one, and an
    /// empty one, like no request, changes nothing: it does not move the
    /// store's time (to which later calls are held), nor insert its key.
    #[test]
    fn a_batch_is_its_requests_in_order(ops in ops()) {
        for prototype in prototypes() {
            batch_is_one_by_one(prototype, 0, &ops)?;
        }
    }

    /// The same at the end of the clock, where a GCRA key's arrival time
    /// passes 2^64 - 1 ns and the store keeps it as used without end: a
    /// batch decides each cost from the state kept after the one before,
    /// as calls one by one do, not from the limiter's unclipped state.
    #[test]
    fn a_batch_is_its_requests_in_order_at_the_end_of_time(
        ops in ops(),
        before_end in 0u64..2_000,
    ) {
        let mut prototypes = prototypes();
        prototypes.push(Gcra::new(2, Nanos(1 << 62)).unwrap().into());
        for prototype in prototypes {
            batch_is_one_by_one(prototype, u64::MAX - before_end, &ops)?;
        }
    }

    /// A batch decided cost by cost once `prepare_batch` made its key
    /// ready answers as the core's batch, in a bounded store under either
    /// eviction: the key goes in where the core's would, and making it
    /// ready leaves the store's time where the core's batch leaves it.
    #[test]
    fn a_prepared_batch_decided_cost_by_cost_is_the_cores(ops in ops()) {
        let mut prototypes = prototypes();
        prototypes.push(LeakyBucket::new(3, Nanos(100)).unwrap().into());
        prototypes.push(SlidingWindowCounter::new(3, Nanos(250)).unwrap().into());
        for prototype in prototypes {
            for (max_keys, eviction) in [(1, Eviction::Refuse), (2, Eviction::Refuse), (2, Eviction::NearestFresh)] {
                prepared_batch_is_the_cores(prototype.clone(), max_keys, eviction, &ops)?;
            }
        }
    }

    /// A policy admits a request only when every limit would admit it
    /// alone, and then consumes it from each: against independent limiters.
    #[test]
    fn a_policy_is_all_or_nothing(ops in ops()) {
        let limits = prototypes();
        let mut policy = Policy::new();
        policy.add("per-user", &["user"], limits[0].clone()).unwrap();
        policy.add("global", &[], limits[2].clone()).unwrap();
        policy.add("per-user-log", &["user"], limits[3].clone()).unwrap();
        let mut per_user: HashMap<u8, (AnyLimiter, AnyLimiter)> = HashMap::new();
        let mut global = limits[2].clone();
        let mut now = 0;
        for &(user, step, cost, seed) in &ops {
            now += step;
            let t = Nanos(now);
            if seed {
                // Sweeping moves keys, so the places the policy looks first
                // (the previous request's) may hold other keys now.
                policy.reclaim(t);
                policy.seed_hashes(shared(), now.wrapping_mul(0x2545_f491_4f6c_dd1d));
            }
            let (gcra, log) = per_user.entry(user).or_insert_with(|| (limits[0].clone(), limits[3].clone()));
            let mut models = [gcra, &mut global, log];
            let allowed = models.iter().all(|m| m.peek(t, cost).unwrap().allowed);
            // Allowed: each consumes. Denied: each stays as it is, and one
            // that would have allowed reports its state as a cost of 0.
            let each: Vec<_> = models.iter_mut().map(|m| {
                let alone = m.peek(t, cost).unwrap();
                if allowed { m.try_acquire(t, cost).unwrap() }
                else if alone.allowed { m.peek(t, 0).unwrap() }
                else { alone }
            }).collect();
            let got = policy.try_acquire(&[("user", &[user])], t, cost).unwrap();
            prop_assert_eq!(policy.decisions(), &each[..]);
            prop_assert_eq!(got.decision.allowed, allowed);
            prop_assert_eq!(got.decision.remaining, each.iter().map(|d| d.remaining).min().unwrap());
            prop_assert_eq!(got.decision.retry_after, each.iter().map(|d| d.retry_after).max().unwrap());
            prop_assert_eq!(got.decision.reset_after, each.iter().map(|d| d.reset_after).max().unwrap());
            match got.denied_by {
                Some(i) => prop_assert!(!allowed && !each[i].allowed
                    && each[i].retry_after == got.decision.retry_after),
                None => prop_assert!(allowed),
            }
        }
    }
}

#[test]
fn a_fresh_copy_is_the_configuration_never_called() {
    let mut all = prototypes();
    all.push(LeakyBucket::new(3, Nanos(100)).unwrap().into());
    all.push(SlidingWindowCounter::new(3, Nanos(250)).unwrap().into());
    all.push(AnyLimiter::token_bucket(&[Bandwidth::greedy(3, 1, Nanos(10)).unwrap(); 2]).unwrap());
    for new in all {
        let mut used = new.clone();
        let _ = used.try_acquire(Nanos(1_000), 2).unwrap();
        assert_ne!(used, new);
        assert_eq!(used.fresh(), new);
    }
}

#[test]
fn fresh_keys_are_not_kept() {
    let mut store = KeyedLimiter::new(Gcra::new(2, Nanos(10)).unwrap());
    // Cost 0 changes nothing: no key.
    let _ = store.try_acquire(&7u64, Nanos(0), 0).unwrap();
    assert_eq!(store.len(), 0);
    for key in 0..1_000u64 {
        let _ = store.try_acquire(&key, Nanos(key), 1).unwrap();
    }
    // Each key is fresh 10 ns after its call: sweeps keep the map small.
    assert!(store.len() < 200, "{} keys held", store.len());
    store.reclaim(Nanos(2_000));
    assert!(store.is_empty());
}

/// A new key sweeps the store only once the store has doubled since the
/// last sweep, as `KeyedLimiter` says: fresh keys are held until then. A
/// sweep on every new key past the first 64 would make each insertion a
/// pass over every key, and `fresh_keys_are_not_kept` bounds the keys held
/// from above only.
#[test]
fn a_store_sweeps_once_it_has_doubled_since_the_last_sweep() {
    let mut store = KeyedLimiter::new(Gcra::new(1, Nanos(10)).unwrap());
    for key in 0..100u64 {
        assert!(store.try_acquire(&key, Nanos(0), 1).unwrap().allowed);
    }
    // Keeps all 100 (none fresh at 0): the next sweep is at 200 keys.
    store.reclaim(Nanos(0));
    assert_eq!(store.len(), 100);
    // From 10 on, those 100 are fresh, yet held until the store doubles.
    for key in 100..200u64 {
        assert!(store.try_acquire(&key, Nanos(10), 1).unwrap().allowed);
        assert_eq!(store.len() as u64, key + 1);
    }
    // The key that finds 200 held sweeps them out first.
    assert!(store.try_acquire(&200u64, Nanos(10), 1).unwrap().allowed);
    assert_eq!(store.len(), 101);
}

#[test]
fn a_reset_key_is_a_key_never_seen_and_holds_no_slot() {
    // A bucket whose keys start short, and a log: reset to their fresh
    // state, not to a full one, and their bookings forgotten.
    let short = TokenBucket::with_initial_tokens(4, 1, Nanos(100), 1).unwrap();
    for prototype in [
        AnyLimiter::from(Gcra::new(3, Nanos(100)).unwrap()),
        AnyLimiter::from(short),
        AnyLimiter::from(SlidingWindowLog::new(3, Nanos(100)).unwrap()),
    ] {
        let mut store = AnyKeyed::new(prototype.clone());
        assert!(!store.reset(b"alice"), "a key never seen is not held");
        assert!(store
            .reserve(b"alice", Nanos(0), 1, Nanos(1_000))
            .unwrap()
            .is_ok());
        while store.try_acquire(b"alice", Nanos(0), 1).unwrap().allowed {}
        let _ = store.try_acquire(b"bob", Nanos(0), 1).unwrap();
        assert!(store.reset(b"alice"));
        let mut fresh = prototype.clone();
        assert_eq!(store.peek(b"alice", Nanos(0), 1), fresh.peek(Nanos(0), 1));
        assert_eq!(
            store.try_acquire(b"alice", Nanos(0), 1),
            fresh.try_acquire(Nanos(0), 1)
        );
        // The other key kept what it used.
        assert!(store.peek(b"bob", Nanos(0), 0).unwrap().reset_after > Nanos::ZERO);
    }
    // A key reset holds no slot, and the keys after it are still found.
    let mut store = KeyedLimiter::new(Gcra::new(3, Nanos(100)).unwrap());
    for key in ["alice", "bob", "carol"] {
        let _ = store.try_acquire(key, Nanos(0), 1).unwrap();
    }
    assert!(store.reset("alice"));
    assert_eq!(store.len(), 2);
    assert!(!store.reset("alice"));
    for key in ["bob", "carol"] {
        assert_eq!(store.peek(key, Nanos(0), 0).unwrap().remaining, 2, "{key}");
    }
}

#[test]
fn a_reset_key_of_a_bucket_that_starts_short_frees_its_slot() {
    // No sweep drops such a key (a new one starts short of fresh): a reset
    // one held its slot for ever, and a full refusing store refused every
    // new key, where a key never seen holds none.
    let short = TokenBucket::with_initial_tokens(4, 1, Nanos(100), 1).unwrap();
    let mut store = KeyedLimiter::new(short.clone())
        .with_max_keys(1, Eviction::Refuse)
        .unwrap();
    assert!(store.try_acquire("alice", Nanos(0), 1).unwrap().allowed);
    assert_eq!(
        store.try_acquire("bob", Nanos(0), 1).unwrap_err().code(),
        "store_full"
    );
    assert!(store.reset("alice"));
    assert!(store.is_empty());
    assert!(store.try_acquire("bob", Nanos(0), 1).unwrap().allowed);
    assert!(!store.reset("alice"), "no longer held");
    // Bob took the one token a key starts with, as alice had.
    let mut fresh = short;
    assert!(fresh.try_acquire(Nanos(0), 1).unwrap().allowed);
    assert_eq!(store.peek("bob", Nanos(0), 1), fresh.peek(Nanos(0), 1));
}

#[test]
fn max_keys_bounds_the_store_under_either_rule() {
    let gcra = Gcra::new(1, Nanos(1_000_000)).unwrap();
    let mut evicting = KeyedLimiter::new(gcra.clone())
        .with_max_keys(64, Eviction::NearestFresh)
        .unwrap();
    for key in 0..1_000u64 {
        assert!(evicting.try_acquire(&key, Nanos(key), 1).unwrap().allowed);
        assert!(evicting.len() <= 64);
    }
    // The most recent key is nearest to full, so it is kept and denied.
    assert!(
        !evicting
            .try_acquire(&999u64, Nanos(999), 1)
            .unwrap()
            .allowed
    );

    let mut refusing = KeyedLimiter::new(gcra)
        .with_max_keys(2, Eviction::Refuse)
        .unwrap();
    let _ = refusing.try_acquire(&1u64, Nanos(0), 1).unwrap();
    let _ = refusing.try_acquire(&2u64, Nanos(0), 1).unwrap();
    let err = refusing.try_acquire(&3u64, Nanos(0), 1).unwrap_err();
    assert_eq!(err.code(), "store_full");
    // Known keys are still decided.
    assert!(!refusing.try_acquire(&1u64, Nanos(0), 1).unwrap().allowed);
}

#[test]
fn a_store_bounded_once_it_holds_keys_comes_down_to_its_bound() {
    // Bounded after it took 100 keys, the store evicted one key per new
    // key, max_keys / 16 at least one, and held 100 keys for good.
    let gcra = Gcra::new(1, Nanos(1_000_000)).unwrap();
    let mut store = KeyedLimiter::new(gcra);
    for key in 0..100u64 {
        assert!(store.try_acquire(&key, Nanos(key), 1).unwrap().allowed);
    }
    let mut store = store.with_max_keys(10, Eviction::NearestFresh).unwrap();
    assert!(store.try_acquire(&100u64, Nanos(100), 1).unwrap().allowed);
    assert_eq!(store.len(), 10);
    // The newest keys are nearest to full: kept, and still held to their use.
    for key in 91..=100u64 {
        assert!(
            !store.peek(&key, Nanos(100), 1).unwrap().allowed,
            "key {key}"
        );
    }
}

#[test]
fn a_full_refusing_store_admits_a_new_key_once_one_is_fresh_or_refunded() {
    // Refusing skips the sweep until a key may be fresh: the answers must
    // be those of a store that swept on every refused key.
    let gcra = Gcra::new(1, Nanos(1_000)).unwrap();
    let mut refusing = KeyedLimiter::new(gcra)
        .with_max_keys(2, Eviction::Refuse)
        .unwrap();
    let _ = refusing.try_acquire(&1u64, Nanos(0), 1).unwrap();
    let _ = refusing.try_acquire(&2u64, Nanos(500), 1).unwrap();
    for now in [500, 600, 999] {
        // peek answers as try_acquire then does.
        let peeked = refusing.peek(&3u64, Nanos(now), 1).unwrap_err();
        assert_eq!(peeked.code(), "store_full");
        let err = refusing.try_acquire(&3u64, Nanos(now), 1).unwrap_err();
        assert_eq!(err.code(), "store_full");
    }
    assert!(refusing.peek(&3u64, Nanos(999), 0).unwrap().allowed); // inserts nothing
    assert!(refusing.peek(&3u64, Nanos(1_000), 1).unwrap().allowed);
    // Key 1 is fresh at 1,000: its place goes to key 3.
    assert!(
        refusing
            .try_acquire(&3u64, Nanos(1_000), 1)
            .unwrap()
            .allowed
    );
    assert_eq!(
        refusing
            .try_acquire(&4u64, Nanos(1_000), 1)
            .unwrap_err()
            .code(),
        "store_full"
    );
    // A refund makes key 2 fresh before the time the last sweep found.
    refusing.refund(&2u64, Nanos(500), 1);
    assert!(refusing.peek(&4u64, Nanos(1_001), 1).unwrap().allowed);
    assert!(
        refusing
            .try_acquire(&4u64, Nanos(1_001), 1)
            .unwrap()
            .allowed
    );
    assert_eq!(refusing.len(), 2);
}

#[test]
fn a_full_refusing_store_refuses_a_new_key_until_one_is_fresh_to_the_ns() {
    // A refund forgets when the sweep found the next key fresh, so the next
    // peek of a new key looks at every key: key 1 is fresh at 1,000, not at
    // 999, and the store is full until then, for peek and try_acquire alike.
    let gcra = Gcra::new(2, Nanos(1_000)).unwrap();
    let mut refusing = KeyedLimiter::new(gcra)
        .with_max_keys(2, Eviction::Refuse)
        .unwrap();
    let _ = refusing.try_acquire(&1u64, Nanos(0), 1).unwrap();
    let _ = refusing.try_acquire(&2u64, Nanos(500), 2).unwrap();
    refusing.refund(&2u64, Nanos(500), 1);
    let peeked = refusing.peek(&3u64, Nanos(999), 1).unwrap_err();
    assert_eq!(peeked.code(), "store_full");
    // A sweep keeps both keys, and when the sooner is fresh: at 1,000 (key
    // 2 at 1,500).
    refusing.reclaim(Nanos(999));
    let err = refusing.try_acquire(&3u64, Nanos(999), 1).unwrap_err();
    assert_eq!(err.code(), "store_full");
    assert!(refusing.peek(&3u64, Nanos(1_000), 1).unwrap().allowed);
    assert!(
        refusing
            .try_acquire(&3u64, Nanos(1_000), 1)
            .unwrap()
            .allowed
    );
}

#[test]
fn a_store_refunds_and_moves_up_as_its_limiter_does() {
    let mut limiters = prototypes();
    limiters.push(LeakyBucket::new(3, Nanos(120)).unwrap().into());
    limiters.push(SlidingWindowCounter::new(3, Nanos(250)).unwrap().into());
    for limiter in limiters {
        let store = AnyKeyed::new(limiter.clone());
        assert_eq!(
            (store.refunds_any_booking(), store.moves_up()),
            (limiter.refunds_any_booking(), limiter.moves_up()),
            "{}",
            limiter.algorithm()
        );
    }
}

#[test]
fn a_key_inserted_after_a_sweep_counts_for_when_a_full_store_may_sweep() {
    // A sweep of an empty store found no key to be fresh, ever: a key
    // inserted after it must still be found fresh once it is.
    for max_keys in [1, 100] {
        let gcra = Gcra::new(1, Nanos(1_000)).unwrap();
        let mut store = KeyedLimiter::new(gcra)
            .with_max_keys(max_keys, Eviction::Refuse)
            .unwrap();
        store.reclaim(Nanos(0));
        for key in 0..max_keys as u64 {
            let _ = store.try_acquire(&key, Nanos(0), 1).unwrap();
        }
        let new = max_keys as u64;
        assert_eq!(
            store.peek(&new, Nanos(500), 1).unwrap_err().code(),
            "store_full"
        );
        assert!(
            store.peek(&new, Nanos(1_000), 1).unwrap().allowed,
            "{max_keys}"
        );
        assert!(
            store.try_acquire(&new, Nanos(1_000), 1).unwrap().allowed,
            "{max_keys}"
        );
    }
}

#[test]
fn a_store_built_from_a_used_limiter_starts_every_key_fresh() {
    // The bindings build stores from fresh copies; a Rust caller may not.
    let mut window = FixedWindow::new(2, Nanos(1_000)).unwrap();
    let _ = window.try_acquire(Nanos(0), 2).unwrap();
    let mut gcra = Gcra::new(2, Nanos(1_000)).unwrap();
    let _ = gcra.try_acquire(Nanos(0), 2).unwrap();
    let mut log = SlidingWindowLog::new(2, Nanos(1_000)).unwrap();
    let _ = log.try_acquire(Nanos(0), 2).unwrap();
    let mut bucket = TokenBucket::new(2, 1, Nanos(1_000)).unwrap();
    let _ = bucket.try_acquire(Nanos(0), 2).unwrap();
    fn check<L: ratekeeper::Keyed>(used: L) {
        let mut store = KeyedLimiter::new(used);
        let peeked = store.peek("k", Nanos(10), 2).unwrap();
        assert!(peeked.allowed && peeked.remaining == 0, "{peeked:?}");
        assert_eq!(store.try_acquire("k", Nanos(10), 2).unwrap(), peeked);
    }
    check(window);
    check(gcra);
    check(log);
    check(bucket);
}

#[test]
fn a_sweep_that_empties_most_of_a_store_gives_memory_back() {
    let mut store = KeyedLimiter::new(Gcra::new(1, Nanos(10)).unwrap());
    for key in 0..10_000u64 {
        let _ = store.try_acquire(&key, Nanos(0), 1).unwrap();
    }
    let full = store.allocation_size();
    store.reclaim(Nanos(5));
    assert_eq!((store.len(), store.allocation_size()), (10_000, full));
    store.reclaim(Nanos(10));
    assert!(store.is_empty());
    assert!(
        store.allocation_size() < full / 100,
        "{} of {full} bytes kept",
        store.allocation_size()
    );
    // And it grows again.
    for key in 0..1_000u64 {
        assert!(store.try_acquire(&key, Nanos(20), 1).unwrap().allowed);
    }
    assert_eq!(store.len(), 1_000);
}

#[test]
fn a_failed_call_does_not_move_the_stores_time() {
    // A cost above the limit at t = 1000 moved the store's time there, and
    // a caller whose clock lags was then judged at 1000, where the key is
    // fresh again, rather than at 50, where it is not.
    let mut store = KeyedLimiter::new(Gcra::new(1, Nanos(100)).unwrap());
    assert!(store.try_acquire(&1u8, Nanos(0), 1).unwrap().allowed);
    let refused = store.try_acquire(&2u8, Nanos(1_000), 5).unwrap_err();
    assert_eq!(refused.code(), "cost_exceeds_limit");
    let lagging = store.try_acquire(&1u8, Nanos(50), 1).unwrap();
    assert!(!lagging.allowed);
    assert_eq!(lagging.retry_after, Nanos(50));
}

#[test]
fn a_new_key_refused_by_a_full_store_does_not_move_its_time() {
    // A full store refused a new key after a sweep that dropped nothing,
    // due where a key may have been fresh: in a store never swept, after a
    // refund, after a key made ready for a batch decided cost by cost (as
    // the wasm build decides one; the core's batch, which the other
    // bindings call, knew when the key would be fresh). The sweep moved
    // the store's time to 150, and a caller whose clock lags was judged
    // there (2 units left at 150, 1 at 50).
    let gcra: AnyLimiter = Gcra::new(3, Nanos(100)).unwrap().into();
    let store = |swept: bool| {
        let mut store = AnyKeyed::new(gcra.clone())
            .with_max_keys(1, Eviction::Refuse)
            .unwrap();
        if swept {
            store.reclaim(Nanos(0));
        }
        store
    };
    let (now, costs) = (Nanos(0), [0, 2]);
    let batch = |s: &mut AnyKeyed| {
        let mut out = [Err(ratekeeper::Error::StateTruncated); 2];
        s.try_acquire_batch(b"k", now, &costs, &mut out).unwrap();
    };
    let (mut swept, mut unswept) = (store(true), store(false));
    batch(&mut swept);
    batch(&mut unswept);
    let mut refunded = swept.clone();
    assert!(refunded.try_acquire(b"k", now, 1).unwrap().allowed);
    refunded.refund(b"k", now, 1);
    let mut by_calls = store(true);
    by_calls.check_batch(b"k", now, &costs).unwrap();
    by_calls.prepare_batch(b"k", now, &costs).unwrap();
    for cost in costs {
        assert!(by_calls.try_acquire(b"k", now, cost).unwrap().allowed);
    }
    for (name, store) in [
        ("swept", &mut swept),
        ("unswept", &mut unswept),
        ("refunded", &mut refunded),
        ("by calls", &mut by_calls),
    ] {
        let refused = store.try_acquire(b"new", Nanos(150), 1).unwrap_err();
        assert_eq!(refused.code(), "store_full", "{name}");
        let lagging = store.try_acquire(b"k", Nanos(50), 0).unwrap();
        assert_eq!(lagging.remaining, 1, "{name}");
    }
}

#[test]
fn a_failed_call_leaves_a_keyed_gcras_state_as_it_was() {
    // A GCRA key is its TAT alone: a cost above the burst at t = 1000 moved
    // the TAT of a full key there, though the store's time stayed at 0,
    // and a caller whose clock lags found the key used until 1000 (850 ns
    // of a 100 ns burst at 150), and a full store found no key fresh.
    let gcra = Gcra::new(1, Nanos(100)).unwrap();
    let mut store = KeyedLimiter::new(gcra.clone())
        .with_max_keys(1, Eviction::Refuse)
        .unwrap();
    assert!(store.try_acquire(&1u8, Nanos(0), 1).unwrap().allowed); // full again at 100
    let refused = store.try_acquire(&1u8, Nanos(1_000), 5).unwrap_err();
    assert_eq!(refused.code(), "cost_exceeds_limit");
    assert!(store.peek(&1u8, Nanos(150), 1).unwrap().allowed);
    assert!(store.peek(&2u8, Nanos(150), 1).unwrap().allowed);
    assert!(store.try_acquire(&2u8, Nanos(150), 1).unwrap().allowed);
    // A refund of a held key down to full is full at the store's time.
    let mut store = KeyedLimiter::new(gcra);
    assert!(store.try_acquire(&1u8, Nanos(0), 1).unwrap().allowed);
    store.refund(&1u8, Nanos(0), 1);
    assert!(store.try_acquire(&1u8, Nanos(0), 1).unwrap().allowed);
}

#[test]
fn a_batch_whose_every_cost_fails_is_no_call() {
    // Every cost above the limit: each entry fails as its try_acquire
    // would, and like those calls the batch leaves the store as it was.
    // It moved the store's time to 1000, where key 1 is full again, and a
    // caller whose clock lags was then admitted at 50, where it is not;
    // a store that keeps its new keys (they start short) held the key.
    let undecided = || {
        Ok(ratekeeper::Decision {
            allowed: false,
            remaining: 0,
            limit: 0,
            retry_after: Nanos::ZERO,
            reset_after: Nanos::ZERO,
        })
    };
    let mut store = KeyedLimiter::new(Gcra::new(1, Nanos(100)).unwrap());
    assert!(store.try_acquire(&1u8, Nanos(0), 1).unwrap().allowed);
    let mut out = [undecided(), undecided()];
    store
        .try_acquire_batch(&2u8, Nanos(1_000), &[5, 2], &mut out)
        .unwrap();
    for entry in &out {
        assert_eq!(entry.unwrap_err().code(), "cost_exceeds_limit");
    }
    let lagging = store.try_acquire(&1u8, Nanos(50), 1).unwrap();
    assert_eq!((lagging.allowed, lagging.retry_after), (false, Nanos(50)));
    let short = TokenBucket::with_initial_tokens(3, 1, Nanos(100), 0).unwrap();
    let mut store = AnyKeyed::new(short.into());
    let mut out = [undecided()];
    store
        .try_acquire_batch(b"k", Nanos(0), &[4], &mut out)
        .unwrap();
    assert_eq!(store.len(), 0);
    // Too short an answer fails as before, deciding nothing.
    let err = store.try_acquire_batch(b"k", Nanos(0), &[4, 4], &mut out);
    assert_eq!(err.unwrap_err().code(), "too_large");
}

#[test]
fn a_batch_at_the_end_of_the_clock_is_its_costs_one_by_one() {
    // 2 at once, then one every 43 years, 834 ns before 2^64 ns: the first unit
    // moves the key's arrival time past 2^64 - 1 ns, which the store keeps
    // as used without end. The batch decided the second cost from the
    // limiter's unclipped state (1 left, a retry after one interval) where
    // calls one by one, and the store's own state afterwards, say none
    // left and a retry at the end of time.
    let gcra = Gcra::per_period(2, 5, Nanos(6_843_312_000_000_000_000)).unwrap();
    let now = Nanos(18_446_744_073_709_550_781);
    let undecided = Err(ratekeeper::Error::StoreFull { max_keys: 0 });
    let mut batched = KeyedLimiter::new(gcra.clone());
    let mut out = [undecided; 2];
    batched
        .try_acquire_batch(&1u8, now, &[1, 2], &mut out)
        .unwrap();
    let mut single = KeyedLimiter::new(gcra);
    for (cost, got) in [1, 2].into_iter().zip(out) {
        assert_eq!(got, single.try_acquire(&1u8, now, cost));
    }
    let second = out[1].unwrap();
    assert_eq!(
        (second.allowed, second.remaining, second.retry_after),
        (false, 0, Nanos::MAX)
    );
    assert_eq!(batched.peek(&1u8, now, 2), Ok(second));
}

#[test]
fn time_is_kept_per_store() {
    // A window full at t = 250 must not reopen for a key dropped as fresh
    // and then seen at an earlier time.
    let mut store = KeyedLimiter::new(FixedWindow::new(1, Nanos(100)).unwrap());
    assert!(store.try_acquire(&1u8, Nanos(250), 1).unwrap().allowed);
    let late = store.try_acquire(&1u8, Nanos(120), 1).unwrap();
    assert!(!late.allowed);
    assert_eq!(late.retry_after, Nanos(180)); // until 300, measured from 120
    assert_eq!(late.reset_after, Nanos(180)); // fresh at 300 too
}

#[test]
fn nearest_fresh_evicts_the_keys_nearest_to_fresh() {
    // 32 keys, each holding its own share of 100 units, 1 to 32, in an
    // order unlike their arrival (fresh share x 1 us later): a new key
    // evicts max_keys / 16 = 2 keys, those of the least use.
    let used = |key: u64| (7 * key) % 32 + 1;
    let mut store = KeyedLimiter::new(Gcra::new(100, Nanos(1_000)).unwrap())
        .with_max_keys(32, Eviction::NearestFresh)
        .unwrap();
    for key in 0..32u64 {
        assert!(
            store
                .try_acquire(&key, Nanos(0), used(key))
                .unwrap()
                .allowed
        );
    }
    assert!(store.try_acquire(&100u64, Nanos(0), 1).unwrap().allowed);
    assert_eq!(store.len(), 31);
    for key in 0..32u64 {
        let remaining = store.peek(&key, Nanos(0), 0).unwrap().remaining;
        let expected = if used(key) <= 2 { 100 } else { 100 - used(key) };
        assert_eq!(remaining, expected, "key {key}");
    }
    // The heaviest user (key 9, 32 units) is still held to what it used.
    assert_eq!(used(9), 32);
    assert!(!store.try_acquire(&9u64, Nanos(0), 69).unwrap().allowed);
}

#[test]
fn a_sweep_keeps_the_time_too() {
    // Dropped as fresh at 1 s, the key must not be judged fresh at 0.5 s,
    // where a single limiter that saw 1 s would not be: at most 1 + 1 units
    // in [0, 1.5 s].
    let s = 1_000_000_000;
    let mut store = KeyedLimiter::new(Gcra::new(1, Nanos(s)).unwrap());
    assert!(store.try_acquire(&1u8, Nanos(0), 1).unwrap().allowed);
    store.reclaim(Nanos(s));
    assert_eq!(store.len(), 0);
    let admitted =
        [s / 2, 3 * s / 2].map(|t| store.try_acquire(&1u8, Nanos(t), 1).unwrap().allowed);
    assert_eq!(admitted, [true, false]);
}

#[test]
fn keys_of_a_bucket_that_starts_short_are_kept_when_full() {
    // A new key starts empty: one that refilled is not a new one, and a
    // sweep must not put it back to empty.
    let bucket = TokenBucket::with_initial_tokens(5, 1, Nanos(1_000), 0).unwrap();
    let mut store = AnyKeyed::new(bucket.into());
    let _ = store.try_acquire(b"a", Nanos(0), 0).unwrap();
    let before = store.peek(b"a", Nanos(100_000), 1).unwrap();
    assert_eq!((before.allowed, before.remaining), (true, 4));
    store.reclaim(Nanos(100_000));
    assert_eq!(store.peek(b"a", Nanos(100_000), 1).unwrap(), before);
    // A new key still starts empty.
    assert!(!store.peek(b"b", Nanos(100_000), 1).unwrap().allowed);
    // A prototype that was used is no such bucket: its keys come back to
    // fresh and are dropped.
    for used in [
        AnyLimiter::from(TokenBucket::new(5, 1, Nanos(1_000)).unwrap()),
        Gcra::new(5, Nanos(1_000)).unwrap().into(),
    ] {
        let mut used = used;
        let _ = used.try_acquire(Nanos(0), 5).unwrap();
        let mut store = AnyKeyed::new(used.clone());
        for k in 0..100u8 {
            let _ = store.try_acquire(&[k], Nanos(10), 1).unwrap();
        }
        store.reclaim(Nanos(1_000_000));
        assert_eq!(store.len(), 0);
        // Every key starts fresh, peeked or taken, not as the used prototype.
        let mut store = AnyKeyed::new(used);
        assert_eq!(store.peek(b"new", Nanos(10), 5).unwrap().remaining, 0);
        assert!(store.peek(b"new", Nanos(10), 5).unwrap().allowed);
        assert!(store.try_acquire(b"new", Nanos(10), 5).unwrap().allowed);
    }
}

#[test]
fn a_request_of_cost_zero_fails_before_a_store_that_keeps_every_key_is_full() {
    // Such a store holds a key for any request, of cost 0 too: its bound is
    // checked before an earlier limit writes the key.
    let short = || TokenBucket::with_initial_tokens(3, 1, Nanos(1_000), 0).unwrap();
    let mut policy = Policy::new();
    policy.add("unbounded", &["user"], short().into()).unwrap();
    let bounded = AnyKeyed::new(short().into())
        .with_max_keys(1, Eviction::Refuse)
        .unwrap();
    policy.add_store("bounded", &["user"], bounded).unwrap();
    let _ = policy.try_acquire(&[("user", b"x")], Nanos(0), 0).unwrap();
    let held = policy.keys_held();
    // A peek answers as the request then does.
    let peeked = policy.peek(&[("user", b"y")], Nanos(0), 0).unwrap_err();
    assert_eq!(peeked.code(), "store_full");
    let full = policy
        .try_acquire(&[("user", b"y")], Nanos(0), 0)
        .unwrap_err();
    assert_eq!((full.code(), policy.keys_held()), ("store_full", held));
}

#[test]
fn a_new_key_refused_by_a_policys_full_store_does_not_move_its_time() {
    // As a keyed store's own refusal (see
    // a_new_key_refused_by_a_full_store_does_not_move_its_time): a policy
    // made room in a full store under Refuse by a sweep that dropped
    // nothing (due in a store never swept), which moved the store's time to
    // 150 before refusing, and a caller whose clock lags found 2 units
    // where 1 is left at 50.
    let mut policy = Policy::new();
    let bounded = AnyKeyed::new(Gcra::new(3, Nanos(100)).unwrap().into())
        .with_max_keys(1, Eviction::Refuse)
        .unwrap();
    policy.add_store("bounded", &["user"], bounded).unwrap();
    assert!(
        policy
            .try_acquire(&[("user", b"k")], Nanos(0), 2)
            .unwrap()
            .decision
            .allowed
    );
    let refused = policy
        .try_acquire(&[("user", b"new")], Nanos(150), 1)
        .unwrap_err();
    assert_eq!(refused.code(), "store_full");
    let lagging = policy.try_acquire(&[("user", b"k")], Nanos(50), 0).unwrap();
    assert_eq!(lagging.decision.remaining, 1);

    // Nor does an earlier limit's sweep, where a later one refuses: the
    // store by ip dropped its fresh key "a" and moved to 250, then the one
    // by user refused, and "a" at 50 had all 3 units where 1 is left.
    let store = |interval| {
        AnyKeyed::new(Gcra::new(3, Nanos(interval)).unwrap().into())
            .with_max_keys(1, Eviction::Refuse)
            .unwrap()
    };
    let mut policy = Policy::new();
    policy.add_store("by-ip", &["ip"], store(100)).unwrap();
    policy
        .add_store("by-user", &["user"], store(1_000))
        .unwrap();
    let request = |ip: &'static [u8], user: &'static [u8]| [("ip", ip), ("user", user)];
    assert!(
        policy
            .try_acquire(&request(b"a", b"k"), Nanos(0), 2)
            .unwrap()
            .decision
            .allowed
    );
    let refused = policy
        .try_acquire(&request(b"b", b"new"), Nanos(250), 1)
        .unwrap_err();
    assert_eq!(refused.code(), "store_full");
    let lagging = policy.try_acquire(&request(b"a", b"k"), Nanos(50), 0);
    assert!(lagging.unwrap().decision.allowed);
    assert_eq!(policy.decisions()[0].remaining, 1);
}

#[test]
fn a_keyed_gcra_past_the_end_of_time_admits_no_more() {
    // The TAT passes 2^64 - 1 ns: kept clipped, it must read as stricter
    // than the truth, never looser (a single limiter denies both).
    let mut store = AnyKeyed::new(Gcra::new(1, Nanos(1_000_000_000)).unwrap().into());
    let t = u64::MAX - 10;
    let admitted = [0, 5, 10].map(|i| store.try_acquire(b"k", Nanos(t + i), 1).unwrap().allowed);
    assert_eq!(admitted, [true, false, false]);
    let denied = store.peek(b"k", Nanos(u64::MAX), 1).unwrap();
    assert_eq!((denied.allowed, denied.remaining), (false, 0));
}

/// A policy looks for each limit's key first where the previous request's
/// was; a sweep may have moved another key there since.
#[test]
fn a_policy_finds_a_key_where_another_was() {
    let mut policy = Policy::new();
    let gcra = Gcra::new(2, Nanos(100)).unwrap();
    policy.add("per-user", &["user"], gcra.into()).unwrap();
    fn acquire(policy: &mut Policy, user: &[u8], now: u64, cost: u64) -> bool {
        let got = policy.try_acquire(&[("user", user)], Nanos(now), cost);
        got.unwrap().decision.allowed
    }
    assert!(acquire(&mut policy, b"alice", 0, 1)); // first: fresh again at 100
    assert!(acquire(&mut policy, b"bob", 0, 2)); // second: fresh again at 200
    assert!(acquire(&mut policy, b"alice", 50, 0)); // the place looked at first
    policy.reclaim(Nanos(150)); // alice goes; bob takes her place
                                // carol is new: a full burst, not bob's state (1.5 units).
    assert!(acquire(&mut policy, b"carol", 150, 2));
    assert!(!acquire(&mut policy, b"bob", 150, 2));
    assert!(acquire(&mut policy, b"bob", 200, 2));
}

/// A store looks for a key first where its last `try_acquire` found one; a
/// sweep, an eviction or a rehash may have put another key there since.
#[test]
fn a_store_finds_a_key_where_another_was() {
    fn acquire(store: &mut AnyKeyed, key: &[u8], now: u64, cost: u64) -> bool {
        store.try_acquire(key, Nanos(now), cost).unwrap().allowed
    }
    let gcra = || AnyLimiter::from(Gcra::new(2, Nanos(100)).unwrap());
    let mut store = AnyKeyed::new(gcra());
    assert!(acquire(&mut store, b"alice", 0, 1)); // first: fresh again at 100
    assert!(acquire(&mut store, b"bob", 0, 2)); // second: fresh again at 200
    assert!(acquire(&mut store, b"alice", 50, 0)); // the place looked at first

    // Alice goes, and bob takes her place: alice and carol are new, each
    // with a full burst, not bob's state (1.5 units).
    store.reclaim(Nanos(150));
    assert!(acquire(&mut store, b"alice", 150, 2));
    assert!(acquire(&mut store, b"carol", 150, 2));
    assert!(!acquire(&mut store, b"bob", 150, 2));
    store.seed_hashes(shared(), 42); // rehashed: found all the same
    assert!(!acquire(&mut store, b"bob", 150, 2));
    assert!(acquire(&mut store, b"bob", 200, 2));

    // Evicted: the one key's place goes to another.
    let mut store = AnyKeyed::new(gcra())
        .with_max_keys(1, Eviction::NearestFresh)
        .unwrap();
    assert!(acquire(&mut store, b"x", 0, 1));
    assert!(acquire(&mut store, b"x", 0, 0)); // found where it is
    assert!(acquire(&mut store, b"y", 0, 1)); // x is forgotten; y takes its place
    assert!(acquire(&mut store, b"x", 0, 2)); // fresh, not y's state (one unit left)
    assert_eq!(store.len(), 1);
}

#[test]
fn a_policy_lists_the_decisions_made_before_an_error() {
    let mut policy = Policy::new();
    let wide = Gcra::new(5, Nanos(100)).unwrap();
    policy.add("wide", &[], wide.into()).unwrap();
    policy
        .add("narrow", &[], Gcra::new(2, Nanos(100)).unwrap().into())
        .unwrap();
    assert!(
        policy
            .try_acquire(&[], Nanos(0), 1)
            .unwrap()
            .decision
            .allowed
    );
    assert_eq!(policy.decisions().len(), 2);
    // A cost above the narrow limit fails there, deciding the wide one only.
    let error = policy.try_acquire(&[], Nanos(0), 3).unwrap_err();
    assert_eq!(error.code(), "cost_exceeds_limit");
    assert_eq!(policy.decisions().len(), 1);
    assert_eq!(policy.decisions()[0].remaining, 4 - 3);
}

#[test]
fn a_policy_resets_the_limits_keyed_by_fields_the_request_gives() {
    let one_a_minute = || -> AnyLimiter { Gcra::new(1, Nanos::from_secs(60)).unwrap().into() };
    let mut policy = Policy::new();
    policy.add("per-user", &["user"], one_a_minute()).unwrap();
    policy.add("per-ip", &["ip"], one_a_minute()).unwrap();
    policy
        .add("per-user-ip", &["user", "ip"], one_a_minute())
        .unwrap();
    policy
        .add(
            "global",
            &[],
            FixedWindow::new(10, Nanos::from_secs(60)).unwrap().into(),
        )
        .unwrap();
    let attempt: &[(&str, &[u8])] = &[
        ("user", b"alice"),
        ("ip", b"192.0.2.1"),
        ("path", b"/login"),
    ];
    let admits = |policy: &mut Policy| policy.peek(attempt, Nanos(0), 1).unwrap().decision.allowed;
    let denied_by = |policy: &mut Policy| policy.peek(attempt, Nanos(0), 1).unwrap().denied_by;
    let acquired = |policy: &mut Policy| {
        let decided = policy.try_acquire(attempt, Nanos(0), 1).unwrap();
        decided.decision.allowed
    };
    assert!(acquired(&mut policy));

    // The user's limit only: those by IP too need the IP.
    assert_eq!(policy.reset(&[("user", b"alice")]), Ok(1));
    assert_eq!(denied_by(&mut policy), Some(1));
    assert_eq!(policy.decisions()[0].remaining, 1);
    // Held no more.
    assert_eq!(policy.reset(&[("user", b"alice")]), Ok(0));
    // The whole request: every keyed limit it was counted in; the global
    // window keeps its count.
    assert_eq!(policy.reset(attempt), Ok(2));
    assert!(admits(&mut policy));
    assert_eq!(policy.decisions()[3].remaining, 8, "1 counted, 1 asked");

    // A request that resets no limit fails: no field, or a misspelt one.
    assert!(acquired(&mut policy));
    for nothing in [
        &[][..],
        &[("usr", &b"alice"[..])][..],
        &[("path", &b"/login"[..])][..],
    ] {
        let error = policy.reset(nothing).unwrap_err();
        assert_eq!(
            (error.code(), error.argument()),
            ("invalid_value", Some("request"))
        );
    }
    assert!(!admits(&mut policy));
    // Another user's reset leaves alice's keys.
    assert_eq!(
        policy.reset(&[("user", b"bob"), ("ip", b"192.0.2.2")]),
        Ok(0)
    );
    assert_eq!(denied_by(&mut policy), Some(0));
}

#[test]
fn a_policy_denial_consumes_nothing_anywhere() {
    let mut policy = Policy::new();
    policy
        .add("a", &["user"], Gcra::new(1, Nanos(100)).unwrap().into())
        .unwrap();
    policy
        .add(
            "b",
            &["user", "route"],
            Gcra::new(5, Nanos(100)).unwrap().into(),
        )
        .unwrap();
    let req = [("user", &b"u"[..]), ("route", &b"/x"[..])];
    assert!(
        policy
            .try_acquire(&req, Nanos(0), 1)
            .unwrap()
            .decision
            .allowed
    );
    let denied = policy.try_acquire(&req, Nanos(0), 1).unwrap();
    assert_eq!(
        (denied.decision.allowed, denied.denied_by),
        (false, Some(0))
    );
    // Limit b still holds 4: the denial took nothing from it.
    assert_eq!(policy.decisions()[1].remaining, 4);
    assert_eq!(
        policy
            .try_acquire(&[("user", b"u")], Nanos(0), 1)
            .unwrap_err()
            .code(),
        "invalid_value"
    );
    assert_eq!(
        policy
            .add("a", &[], Gcra::new(1, Nanos(1)).unwrap().into())
            .unwrap_err()
            .code(),
        "invalid_value"
    );
}

#[test]
fn a_policy_refused_by_a_full_store_consumes_nothing_anywhere() {
    let mut policy = Policy::new();
    let global = FixedWindow::new(100, Nanos(1_000)).unwrap();
    policy.add("global", &[], global.into()).unwrap();
    let per_user = AnyKeyed::new(Gcra::new(1, Nanos(100)).unwrap().into())
        .with_max_keys(1, Eviction::Refuse)
        .unwrap();
    policy.add_store("per-user", &["user"], per_user).unwrap();
    let user = |u: &'static [u8]| [("user", u)];
    assert!(
        policy
            .try_acquire(&user(b"a"), Nanos(0), 1)
            .unwrap()
            .decision
            .allowed
    );
    for _ in 0..3 {
        let refused = policy.try_acquire(&user(b"b"), Nanos(0), 1).unwrap_err();
        assert_eq!(refused.code(), "store_full");
    }
    // Only the first request took from the global limit.
    let global = policy.peek(&user(b"a"), Nanos(0), 0).unwrap();
    assert_eq!(policy.decisions()[0].remaining, 99, "{global:?}");
    // A cost of 0 needs no room: allowed, as peek and the store alone answer.
    let free = policy.try_acquire(&user(b"b"), Nanos(0), 0).unwrap();
    assert!(free.decision.allowed);
    let booked = policy.reserve(&user(b"b"), Nanos(0), 0, Nanos(0)).unwrap();
    assert_eq!(booked, Ok(Nanos(0)));
    let full = policy
        .reserve(&user(b"b"), Nanos(0), 1, Nanos(0))
        .unwrap_err();
    assert_eq!(full.code(), "store_full");
}

#[test]
fn a_policy_reservation_refused_by_one_limit_evicts_nobody_from_another() {
    // The per-user store holds one key and evicts to make room; the queue
    // holds one unit. y's reservation passes the store, then the queue
    // refuses it: x must keep its state, not be evicted to make room for y.
    let s = 1_000_000_000;
    let mut policy = Policy::new();
    let per_user = AnyKeyed::new(Gcra::new(1, Nanos(10 * s)).unwrap().into())
        .with_max_keys(1, Eviction::NearestFresh)
        .unwrap();
    policy.add_store("per-user", &["user"], per_user).unwrap();
    let queue = ratekeeper::LeakyBucket::new(1, Nanos(s)).unwrap();
    policy.add("queue", &[], queue.into()).unwrap();
    let user = |u: &'static [u8]| [("user", u)];
    assert!(
        policy
            .try_acquire(&user(b"x"), Nanos(0), 1)
            .unwrap()
            .decision
            .allowed
    );
    let refused = policy
        .reserve(&user(b"y"), Nanos(s / 2), 1, Nanos(100 * s))
        .unwrap();
    assert!(refused.is_err(), "{refused:?}");
    let x = policy.peek(&user(b"x"), Nanos(s), 1).unwrap();
    assert!(!x.decision.allowed);
    assert_eq!(x.decision.retry_after, Nanos(9 * s));
}

#[test]
fn policy_reservations_wait_for_the_slowest_limit() {
    let mut policy = Policy::new();
    policy
        .add("fast", &[], Gcra::new(1, Nanos(100)).unwrap().into())
        .unwrap();
    policy
        .add("slow", &[], Gcra::new(1, Nanos(300)).unwrap().into())
        .unwrap();
    assert_eq!(
        policy.reserve(&[], Nanos(0), 1, Nanos(1_000)).unwrap(),
        Ok(Nanos(0))
    );
    assert_eq!(
        policy.reserve(&[], Nanos(0), 1, Nanos(1_000)).unwrap(),
        Ok(Nanos(300))
    );
    let denied = policy
        .reserve(&[], Nanos(0), 1, Nanos(500))
        .unwrap()
        .unwrap_err();
    assert_eq!(denied.decision.retry_after, Nanos(600));
    assert_eq!(policy.name(denied.denied_by.unwrap()), "slow");
    let _ = Limiter::limit(&policy.limiter(0));
}

/// How a policy answers, at a few times and costs from `now` on: what a
/// refused reservation must leave unchanged.
fn answers(policy: &Policy, now: u64) -> Vec<(bool, u64, Nanos, Nanos)> {
    // Peeking needs room for the request's keys, not a change of state.
    let mut policy = policy.clone();
    let mut seen = vec![];
    for later in [0, 1, 50, 99, 100, 101, 250, 400] {
        for cost in 0..=3 {
            let d = policy.peek(&[], Nanos(now + later), cost).unwrap();
            seen.push((
                d.decision.allowed,
                d.decision.remaining,
                d.decision.retry_after,
                d.decision.reset_after,
            ));
        }
    }
    seen
}

proptest! {
    /// A reservation the policy refuses books nothing anywhere, even when
    /// a limit refuses after others have booked (a log whose ring is full),
    /// and even when time went backwards.
    #[test]
    fn a_refused_policy_reservation_books_nothing(
        steps in prop::collection::vec((-50i64..80, 0u64..=3, 0u64..1_000), 1..60),
        first in 0usize..6, mask in 1u8..64,
    ) {
        let mut policy = Policy::new();
        // Generous limits, which take at once what a tight one books later.
        let mut limits = prototypes();
        limits.push(FixedWindow::new(50, Nanos(300)).unwrap().into());
        limits.push(SlidingWindowLog::new(50, Nanos(300)).unwrap().into());
        limits.rotate_left(first);
        for (i, limiter) in limits.into_iter().enumerate() {
            if mask & (1 << i) != 0 {
                policy.add(&i.to_string(), &[], limiter).unwrap();
            }
        }
        let (mut t, mut latest) = (1_000i64, 0);
        for (step, cost, max_wait) in steps {
            t = (t + step).max(0);
            let now = t as u64;
            latest = latest.max(now);
            let before = policy.clone();
            if policy.reserve(&[], Nanos(now), cost, Nanos(max_wait)).unwrap().is_err() {
                prop_assert_eq!(answers(&policy, latest), answers(&before, latest));
            }
        }
    }
}

/// One call on a store, for the model below: key, time step (negative:
/// time going backwards), cost, and what to do.
#[derive(Clone, Debug)]
enum Call {
    Acquire,
    Peek,
    Reserve(u64),
    /// Books this long after `now` (`reserve_after`).
    ReserveAfter(u64),
    /// Gives back units at one of the recent times the trace used.
    Refund(usize),
    Reclaim,
    /// Puts the key back to fresh.
    Reset,
}

fn calls() -> impl Strategy<Value = Vec<(u8, i64, u64, Call)>> {
    let call = prop_oneof![
        4 => Just(Call::Acquire),
        1 => Just(Call::Peek),
        3 => (0u64..600).prop_map(Call::Reserve),
        2 => (0u64..600).prop_map(Call::ReserveAfter),
        2 => (0usize..4).prop_map(Call::Refund),
        1 => Just(Call::Reclaim),
        1 => Just(Call::Reset),
    ];
    let step = prop_oneof![5 => 0i64..400, 2 => Just(0i64), 2 => -400i64..0];
    prop::collection::vec((0u8..4, step, 0u64..4, call), 1..200)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// With time going backwards, reservations, refunds and sweeps too, a
    /// store answers as one limiter per key that has seen every time the
    /// store has (its latest call's or sweep's, for any key) and handles a
    /// lagging `now` on its own: the store adds nothing to what the limiter
    /// alone promises, and a key dropped as fresh comes back as it left.
    #[test]
    fn a_store_answers_like_one_limiter_per_key_that_saw_the_stores_time(calls in calls()) {
        let mut prototypes = prototypes();
        prototypes.push(LeakyBucket::new(3, Nanos(120)).unwrap().into());
        prototypes.push(SlidingWindowCounter::new(3, Nanos(250)).unwrap().into());
        for prototype in prototypes {
            let mut store = AnyKeyed::new(prototype.clone());
            let mut model: HashMap<u8, AnyLimiter> = HashMap::new();
            let (mut t, mut store_latest) = (10_000i64, 0u64);
            let mut recent = vec![10_000u64];
            for (key, step, cost, call) in &calls {
                t = (t + step).max(0);
                let now = t as u64;
                recent.push(now);
                let own = model.entry(*key).or_insert_with(|| prototype.clone());
                // The store's time reaches the key's limiter in a call to it
                // (on a copy, kept if the call changes the key: a peek, or a
                // call that fails, does not start a bucket that starts short).
                let mut seen = own.clone();
                if now < store_latest {
                    let _ = seen.try_acquire(Nanos(store_latest), 0).unwrap();
                }
                let k = [*key];
                match call {
                    Call::Acquire => {
                        let got = store.try_acquire(&k, Nanos(now), *cost);
                        prop_assert_eq!(got, seen.try_acquire(Nanos(now), *cost), "acquire {} at {}", cost, now);
                        if got.is_ok() {
                            (*own, store_latest) = (seen, store_latest.max(now));
                        }
                    }
                    Call::Peek => {
                        prop_assert_eq!(store.peek(&k, Nanos(now), *cost), seen.peek(Nanos(now), *cost), "peek {} at {}", cost, now);
                    }
                    Call::Reserve(max_wait) => {
                        let got = store.reserve(&k, Nanos(now), *cost, Nanos(*max_wait));
                        prop_assert_eq!(got, seen.reserve(Nanos(now), *cost, Nanos(*max_wait)), "reserve {} at {} within {}", cost, now, max_wait);
                        if got.is_ok() {
                            (*own, store_latest) = (seen, store_latest.max(now));
                        }
                    }
                    Call::ReserveAfter(wait) => {
                        let got = store.reserve_after(&k, Nanos(now), *cost, Nanos(*wait));
                        prop_assert_eq!(got, seen.reserve_after(Nanos(now), *cost, Nanos(*wait)), "reserve {} at {} + {}", cost, now, wait);
                        if got.is_ok() {
                            (*own, store_latest) = (seen, store_latest.max(now));
                        }
                    }
                    Call::Refund(back) => {
                        let taken_at = recent[recent.len().saturating_sub(1 + back)];
                        store.refund(&k, Nanos(taken_at), *cost);
                        own.refund(Nanos(taken_at), *cost);
                    }
                    Call::Reclaim => {
                        store.reclaim(Nanos(now));
                        store_latest = store_latest.max(now);
                    }
                    // As a key never seen: a fresh limiter, which the store's
                    // time reaches at the key's next call.
                    Call::Reset => {
                        store.reset(&k);
                        *own = prototype.clone();
                    }
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// With time going backwards too, a policy admits a request only when
    /// every limit would admit it alone, then consumes it from each, and a
    /// denial writes nothing, not even the time: against one limiter per
    /// key and limit that has seen the latest time its limit admitted at.
    #[test]
    fn a_policy_is_all_or_nothing_when_time_goes_backwards(calls in calls()) {
        let limits: Vec<(&str, &[&str], AnyLimiter)> = vec![
            ("per-user", &["user"], Gcra::new(3, Nanos(100)).unwrap().into()),
            ("global", &[], FixedWindow::new(5, Nanos(250)).unwrap().into()),
            ("per-user-log", &["user"], SlidingWindowLog::new(3, Nanos(250)).unwrap().into()),
            ("per-user-counter", &["user"], SlidingWindowCounter::new(4, Nanos(300)).unwrap().into()),
            ("per-user-bucket", &["user"], TokenBucket::new(3, 2, Nanos(150)).unwrap().into()),
        ];
        let mut policy = Policy::new();
        for (name, by, limiter) in &limits {
            policy.add(name, by, limiter.clone()).unwrap();
        }
        // Each limit's latest time, and its limiter per key (the global
        // limit's under one key).
        let mut latest = vec![0u64; limits.len()];
        let mut models: Vec<HashMap<u8, AnyLimiter>> = vec![HashMap::new(); limits.len()];
        // The users admitted at a cost since their latest reset.
        let mut counted = std::collections::HashSet::new();
        let mut t = 10_000i64;
        for (user, step, cost, call) in &calls {
            t = (t + step).max(0);
            let now = Nanos(t as u64);
            let request: &[(&str, &[u8])] = &[("user", &[*user])];
            // The user's key in every limit by user back to fresh, as a
            // user never seen; the global limit kept.
            if let Call::Reset = call {
                let held = policy.reset(request).unwrap();
                let keyed: Vec<usize> = (0..limits.len()).filter(|&i| !limits[i].1.is_empty()).collect();
                // A store holds a key only once it consumed something
                // there; then each limit by user may (a fresh key may be
                // dropped already).
                let most = if counted.remove(user) { keyed.len() } else { 0 };
                prop_assert!(held <= most, "{} held, at most {}", held, most);
                for i in keyed {
                    models[i].remove(user);
                }
                continue;
            }
            // A peek, or else a request (whatever else `call` would do to a store).
            let peek = matches!(call, Call::Peek);
            let mut seen: Vec<AnyLimiter> = limits.iter().enumerate().map(|(i, (_, by, limiter))| {
                let key = if by.is_empty() { 0 } else { *user };
                let mut own = models[i].entry(key).or_insert_with(|| limiter.clone()).clone();
                if now.0 < latest[i] {
                    let _ = own.try_acquire(Nanos(latest[i]), 0).unwrap();
                }
                own
            }).collect();
            let allowed = seen.iter().all(|m| m.peek(now, *cost).unwrap().allowed);
            let each: Vec<_> = seen.iter_mut().map(|m| {
                let alone = m.peek(now, *cost).unwrap();
                if allowed && !peek { m.try_acquire(now, *cost).unwrap() }
                else if !allowed && alone.allowed { m.peek(now, 0).unwrap() }
                else { alone }
            }).collect();
            let got = if peek {
                policy.peek(request, now, *cost).unwrap()
            } else {
                policy.try_acquire(request, now, *cost).unwrap()
            };
            prop_assert_eq!(policy.decisions(), &each[..], "{} at {}", cost, now.0);
            prop_assert_eq!(got.decision.allowed, allowed);
            if allowed && !peek {
                if *cost > 0 {
                    counted.insert(*user);
                }
                for (i, (_, by, _)) in limits.iter().enumerate() {
                    let key = if by.is_empty() { 0 } else { *user };
                    models[i].insert(key, seen[i].clone());
                    latest[i] = latest[i].max(now.0);
                }
            }
        }
    }
}
