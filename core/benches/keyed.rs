//! Keyed GCRA decisions and memory per key, side by side with governor's
//! keyed limiters in the same run, then a table with the ratios.
//!
//! ```text
//! cargo bench -p ratekeeper --features alloc --bench keyed
//! ```
//!
//! - **ns per keyed decision at 100k keys**: keys `0..100_000` (`u64`) drawn
//!   in a fixed pseudo-random order, a fake clock advancing 1 µs per call,
//!   one unit per decision against a quota of 10 at once then 1 per second
//!   (so keys are neither always fresh nor always empty). Both sides see the
//!   same keys at the same times. Each figure is the median of 7 rounds of
//!   1,000,000 decisions, after a warm-up round.
//! - **bytes per key at 1M keys**: heap bytes held (counted by this binary's
//!   allocator) after one decision for each of 1,000,000 keys, divided by
//!   the number of keys; "without keys" subtracts the keys' own bytes
//!   (`size_of::<u64>()` per key), as the target (48 bytes per GCRA key,
//!   key bytes excluded) counts.
//!
//! Below them, the store the language bindings hold (`AnyKeyed`: byte keys,
//! here each key's eight bytes) with GCRA and with a token bucket of the
//! same quota; then a `Policy` of two limits (that token bucket per key,
//! and a site-wide one that never binds), beside its two stores asked in
//! turn, which is what the policy's all-or-nothing costs. "allowed" is the share of the median round's calls admitted:
//! the first rounds after the warm-up admit more, as the keys' bursts run
//! out, so it differs when a different round is the median.
//!
//! governor's keyed limiters are its default (`dashmap`, sharded for
//! threads) and its `hashmap` (a `Mutex<HashMap>`), both with the fake clock.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use governor::clock::Clock;
use governor::nanos::Nanos as GovernorNanos;
use governor::{Quota, RateLimiter};
use ratekeeper::{AnyKeyed, AnyLimiter, Gcra, KeyedLimiter, Nanos, Policy, TokenBucket};

/// Counts live heap bytes.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const KEYS: u64 = 100_000;
const MEMORY_KEYS: u64 = 1_000_000;
const CALLS: usize = 1_000_000;
const ROUNDS: usize = 7;
const STEP: u64 = 1_000;
const BURST: u32 = 10;
const PERIOD: u64 = 1_000_000_000;

/// A clock shared by the loop and governor: a plain cell.
#[derive(Clone, Default)]
struct StepClock(Rc<Cell<u64>>);

impl Clock for StepClock {
    type Instant = GovernorNanos;
    fn now(&self) -> GovernorNanos {
        GovernorNanos::from(self.0.get())
    }
}

/// The keys in a fixed pseudo-random order (xorshift).
fn key_sequence(n: usize, keys: u64) -> Vec<u64> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % keys
        })
        .collect()
}

/// The median over rounds of ns per call of `decide(key)`, the clock
/// advancing by `STEP` before each call.
fn time(keys: &[u64], clock: &StepClock, mut decide: impl FnMut(u64) -> bool) -> (f64, f64) {
    let mut run = || {
        let mut allowed = 0usize;
        let start = Instant::now();
        for &key in keys {
            clock.0.set(clock.0.get() + STEP);
            allowed += decide(black_box(key)) as usize;
        }
        (start.elapsed(), allowed)
    };
    run();
    let mut rounds: Vec<(Duration, usize)> = (0..ROUNDS).map(|_| run()).collect();
    rounds.sort();
    let (median, allowed) = rounds[ROUNDS / 2];
    (
        median.as_nanos() as f64 / keys.len() as f64,
        allowed as f64 / keys.len() as f64,
    )
}

fn quota() -> Quota {
    Quota::with_period(Duration::from_nanos(PERIOD))
        .unwrap()
        .allow_burst(NonZeroU32::new(BURST).unwrap())
}

fn ours() -> KeyedLimiter<u64, Gcra> {
    KeyedLimiter::new(Gcra::new(BURST as u64, Nanos(PERIOD)).unwrap())
}

/// Heap bytes per key after building `make()` and deciding once per key,
/// and the same without the keys' own bytes.
fn bytes_per_key<T>(make: impl FnOnce() -> T, decide: impl Fn(&T, u64)) -> (f64, f64) {
    let before = LIVE.load(Ordering::Relaxed);
    let subject = make();
    for key in 0..MEMORY_KEYS {
        decide(&subject, key);
    }
    let bytes = LIVE.load(Ordering::Relaxed) - before;
    drop(subject);
    let per_key = bytes as f64 / MEMORY_KEYS as f64;
    (per_key, per_key - std::mem::size_of::<u64>() as f64)
}

fn main() {
    let keys = key_sequence(CALLS, KEYS);
    let mut rows: Vec<(&str, (f64, f64))> = Vec::new();

    let clock = StepClock::default();
    let governor_dashmap = RateLimiter::dashmap_with_clock(quota(), clock.clone());
    rows.push((
        "governor keyed (dashmap)",
        time(&keys, &clock, |k| governor_dashmap.check_key(&k).is_ok()),
    ));

    let clock = StepClock::default();
    let governor_hashmap = RateLimiter::hashmap_with_clock(quota(), clock.clone());
    rows.push((
        "governor keyed (hashmap)",
        time(&keys, &clock, |k| governor_hashmap.check_key(&k).is_ok()),
    ));

    let clock = StepClock::default();
    let mut store = ours();
    rows.push((
        "ratekeeper KeyedLimiter<u64, Gcra>",
        time(&keys, &clock, |k| {
            store
                .try_acquire(&k, Nanos(clock.0.get()), 1)
                .unwrap()
                .allowed
        }),
    ));

    // The store the language bindings hold: keys as bytes (here the key's
    // eight little-endian bytes, made in the loop so that reading the key
    // costs no memory access of its own), the algorithm chosen at run time.
    let any_keyed: [(&str, AnyLimiter); 2] = [
        (
            "ratekeeper AnyKeyed, Gcra",
            Gcra::new(BURST as u64, Nanos(PERIOD)).unwrap().into(),
        ),
        (
            "ratekeeper AnyKeyed, TokenBucket",
            TokenBucket::new(BURST as u64, 1, Nanos(PERIOD))
                .unwrap()
                .into(),
        ),
    ];
    for (name, prototype) in any_keyed {
        let clock = StepClock::default();
        let mut store = AnyKeyed::new(prototype);
        rows.push((
            name,
            time(&keys, &clock, |k| {
                store
                    .try_acquire(&k.to_le_bytes(), Nanos(clock.0.get()), 1)
                    .unwrap()
                    .allowed
            }),
        ));
    }

    // A policy of two limits, one per key and one for all keys (a site-wide
    // quota that never binds here), decided all or nothing; beside it, the
    // same two stores asked one after the other, which is not all or
    // nothing: the policy's own cost is the difference.
    let per_key = || -> AnyLimiter {
        TokenBucket::new(BURST as u64, 1, Nanos(PERIOD))
            .unwrap()
            .into()
    };
    let site_wide = || -> AnyLimiter { TokenBucket::new(1 << 40, 1, Nanos(1)).unwrap().into() };
    let clock = StepClock::default();
    let mut policy = Policy::new();
    policy.add("per key", &["key"], per_key()).unwrap();
    policy.add("site-wide", &[], site_wide()).unwrap();
    rows.push((
        "ratekeeper Policy, per key + global",
        time(&keys, &clock, |k| {
            let key = k.to_le_bytes();
            let request = [("key", &key[..])];
            let decided = policy.try_acquire(&request, Nanos(clock.0.get()), 1);
            decided.unwrap().decision.allowed
        }),
    ));
    let clock = StepClock::default();
    let (mut each, mut all) = (AnyKeyed::new(per_key()), AnyKeyed::new(site_wide()));
    rows.push((
        "the same two AnyKeyed, in turn",
        time(&keys, &clock, |k| {
            let now = Nanos(clock.0.get());
            let own = each.try_acquire(&k.to_le_bytes(), now, 1).unwrap();
            own.allowed & all.try_acquire(b"", now, 1).unwrap().allowed
        }),
    ));

    let base = rows[0].1 .0;
    println!("\nns per keyed decision, {KEYS} keys, {CALLS} calls per round, median of {ROUNDS}");
    println!(
        "{:<36} {:>8} {:>9} {:>12}",
        "subject", "ns", "allowed", "vs dashmap"
    );
    for (name, (ns, allowed)) in &rows {
        println!(
            "{name:<36} {ns:>8.1} {:>8.1}% {:>11.2}x",
            allowed * 100.0,
            ns / base
        );
    }

    let ours_memory = bytes_per_key(
        || std::cell::RefCell::new(ours()),
        |s, k| {
            let _ = s.borrow_mut().try_acquire(&k, Nanos(0), 1).unwrap();
        },
    );
    let governor_memory = bytes_per_key(
        || RateLimiter::dashmap_with_clock(quota(), StepClock::default()),
        |g, k| {
            let _ = g.check_key(&k);
        },
    );
    println!("\nheap bytes per key at {MEMORY_KEYS} keys");
    println!("{:<36} {:>10} {:>14}", "subject", "per key", "without keys");
    println!(
        "{:<36} {:>10.1} {:>14.1}",
        "ratekeeper KeyedLimiter<u64, Gcra>", ours_memory.0, ours_memory.1
    );
    println!(
        "{:<36} {:>10.1} {:>14.1}",
        "governor keyed (dashmap)", governor_memory.0, governor_memory.1
    );
}
