//! Keyed stores and policies when memory runs out: a request whose store
//! (or policy) cannot grow fails with `out_of_memory` and changes nothing,
//! and the store goes on answering; nothing aborts.
//!
//! This binary's allocator fails, on the thread that asks it to, every
//! allocation after a given number (see [`failing_after`]): the store's own
//! growth then meets a real allocation failure, as it would in a process
//! out of memory, without exhausting the machine's. A shrinking `realloc`
//! is let through: `Vec::shrink_to` has no fallible form, and std's
//! allocator on Linux (glibc's) and the wasm build's (talc) shrink in place.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ptr::null_mut;

use proptest::prelude::*;
use ratekeeper::{
    AnyKeyed, AnyLimiter, Decision, Error, Eviction, FixedWindow, Gcra, HashSeed, KeyedLimiter,
    Nanos, Policy, SlidingWindowLog, TokenBucket,
};

/// The system's allocator, failing where [`failing_after`] says.
struct Failing;

thread_local! {
    /// How many more allocations this thread may make; `usize::MAX`: any.
    static LEFT: Cell<usize> = const { Cell::new(usize::MAX) };
    /// How many allocations this thread asked for, made or failed.
    static ASKED: Cell<usize> = const { Cell::new(0) };
}

/// Whether this thread may allocate now (counting the allocation).
fn may_allocate() -> bool {
    let _ = ASKED.try_with(|asked| asked.set(asked.get() + 1));
    LEFT.try_with(|left| match left.get() {
        usize::MAX => true,
        0 => false,
        n => {
            left.set(n - 1);
            true
        }
    })
    .unwrap_or(true)
}

unsafe impl GlobalAlloc for Failing {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if may_allocate() {
            System.alloc(layout)
        } else {
            null_mut()
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if may_allocate() {
            System.alloc_zeroed(layout)
        } else {
            null_mut()
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size <= layout.size() || may_allocate() {
            System.realloc(ptr, layout, new_size)
        } else {
            null_mut()
        }
    }
}

#[global_allocator]
static ALLOCATOR: Failing = Failing;

/// `f()`, on this thread, with its first `allocations` allocations made and
/// every later one failing (`None`: none failing).
fn failing_after<R>(allocations: Option<usize>, f: impl FnOnce() -> R) -> R {
    let Some(allocations) = allocations else {
        return f();
    };
    LEFT.set(allocations);
    let answer = f();
    LEFT.set(usize::MAX);
    answer
}

/// `f()`, and how many allocations it asked for on this thread.
fn asked<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let before = ASKED.get();
    let answer = f();
    (answer, ASKED.get() - before)
}

fn out_of_memory(error: &Error) -> bool {
    error.code() == "out_of_memory"
}

/// Key `i` of a test: short ones kept inline, odd ones longer than 22
/// bytes, which a store of byte keys keeps on the heap.
fn key(i: u8) -> Vec<u8> {
    if i % 2 == 0 {
        vec![b'k', i]
    } else {
        vec![i; 40]
    }
}

const KEYS: u8 = 8;

#[test]
fn a_store_that_cannot_grow_refuses_the_new_key_and_changes_nothing() {
    let gcra: AnyLimiter = Gcra::new(2, Nanos(1_000)).unwrap().into();
    for long in [false, true] {
        let key = |i: u32| -> Vec<u8> {
            let mut k = i.to_le_bytes().to_vec();
            if long {
                k.resize(40, b'x');
            }
            k
        };
        let mut store = AnyKeyed::new(gcra.clone());
        // Its first key allocates the table; then keys until one needs the
        // table (or the key's bytes) to grow, hundreds of keys in.
        let mut held = 0u32;
        let mut failed = 0;
        while held < 1_000 {
            let now = Nanos(u64::from(held));
            let new = key(held);
            match failing_after(Some(0), || store.try_acquire(&new, now, 1)) {
                Ok(d) => {
                    assert!(d.allowed);
                    held += 1;
                }
                Err(error) => {
                    assert!(out_of_memory(&error), "{error}");
                    assert_eq!(error.argument(), None);
                    assert_eq!(store.len(), held as usize);
                    // Every key is as it was: each took one of its 2 units.
                    for i in 0..held {
                        let d = store.peek(&key(i), now, 1).unwrap();
                        assert_eq!((d.allowed, d.remaining), (true, 0), "key {i}");
                    }
                    // The new key is not held: both of its units are there.
                    assert_eq!(store.peek(&key(held), now, 2).unwrap().remaining, 0);
                    // Once memory is there, it is taken.
                    assert!(store.try_acquire(&key(held), now, 1).unwrap().allowed);
                    held += 1;
                    failed += 1;
                    // Past a growth, into the next one.
                    let to = held * 2;
                    while held < to {
                        assert!(store.try_acquire(&key(held), now, 1).unwrap().allowed);
                        held += 1;
                    }
                }
            }
        }
        // Where the table grows (or at each key, for long ones), but past
        // each failure the keys double: 7 times to 1,000 keys.
        assert!(failed >= 5, "{failed} failures");
    }
}

#[test]
fn a_keyed_log_that_cannot_grow_refuses_the_event_and_changes_nothing() {
    let log: AnyLimiter = SlidingWindowLog::new(100, Nanos(1_000_000)).unwrap().into();
    let mut store = AnyKeyed::new(log);
    assert!(store.try_acquire(b"k", Nanos(0), 1).unwrap().allowed);
    // Each event at its own instant: the key's ring (4 entries at first)
    // grows as they come; an event that needs it to is refused.
    let mut refused = 0;
    for t in 1..40u64 {
        let before = store.peek(b"k", Nanos(t), 0).unwrap();
        match failing_after(Some(0), || store.try_acquire(b"k", Nanos(t), 1)) {
            Ok(d) => assert!(d.allowed),
            Err(error) => {
                assert!(out_of_memory(&error), "{error}");
                assert_eq!(store.peek(b"k", Nanos(t), 0).unwrap(), before);
                refused += 1;
                assert!(store.try_acquire(b"k", Nanos(t), 1).unwrap().allowed);
            }
        }
    }
    // 4 to 8, 8 to 16, 16 to 32, 32 to 64.
    assert_eq!(refused, 4);
    assert_eq!(store.peek(b"k", Nanos(40), 0).unwrap().remaining, 60);
}

#[test]
fn a_generic_store_refuses_a_new_key_it_has_no_room_for() {
    let mut store = KeyedLimiter::new(Gcra::new(1, Nanos(10)).unwrap());
    let refused = failing_after(Some(0), || store.try_acquire(&7u64, Nanos(0), 1)).unwrap_err();
    assert!(out_of_memory(&refused));
    assert!(store.is_empty());
    assert!(store.try_acquire(&7u64, Nanos(0), 1).unwrap().allowed);
    assert!(!store.try_acquire(&7u64, Nanos(0), 1).unwrap().allowed);
}

#[test]
fn reseeding_a_store_without_memory_for_a_second_table_keeps_every_key() {
    let shared: &'static HashSeed = Box::leak(Box::new(HashSeed::new(99)));
    let mut store = AnyKeyed::new(Gcra::new(1, Nanos(1_000)).unwrap().into());
    for i in 0..1_000u32 {
        assert!(
            store
                .try_acquire(&i.to_le_bytes(), Nanos(0), 1)
                .unwrap()
                .allowed
        );
    }
    failing_after(Some(0), || store.seed_hashes(shared, 7));
    assert_eq!(store.len(), 1_000);
    for i in 0..1_000u32 {
        assert!(
            !store
                .try_acquire(&i.to_le_bytes(), Nanos(0), 1)
                .unwrap()
                .allowed,
            "{i}"
        );
    }
    assert!(store.try_acquire(b"new", Nanos(0), 1).unwrap().allowed);
}

/// What a store is asked in the property test below.
#[derive(Clone, Debug)]
enum Call {
    Acquire,
    Peek,
    Reserve(u64),
    Batch(Vec<u64>),
    Reset,
    Reclaim,
    Seed(u64),
}

fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        6 => Just(Call::Acquire),
        1 => Just(Call::Peek),
        2 => (0u64..2_000).prop_map(Call::Reserve),
        2 => prop::collection::vec(0u64..4, 0..4).prop_map(Call::Batch),
        1 => Just(Call::Reset),
        1 => Just(Call::Reclaim),
        1 => any::<u64>().prop_map(Call::Seed),
    ]
}

/// One step: a key, a time step (time only goes forward), a cost, the
/// call, and after how many allocations they fail (`None`: never).
type Step = (u8, u64, u64, Call, Option<usize>);

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        (
            0..KEYS,
            0u64..300,
            0u64..4,
            call(),
            prop::option::weighted(0.3, 0usize..4),
        ),
        1..200,
    )
}

fn prototype() -> impl Strategy<Value = AnyLimiter> {
    prop_oneof![
        Just(Gcra::new(3, Nanos(100)).unwrap().into()),
        Just(TokenBucket::new(3, 1, Nanos(100)).unwrap().into()),
        Just(SlidingWindowLog::new(12, Nanos(1_000)).unwrap().into()),
        Just(FixedWindow::new(3, Nanos(500)).unwrap().into()),
    ]
}

fn bound() -> impl Strategy<Value = Option<(u64, Eviction)>> {
    prop_oneof![
        Just(None),
        (1u64..6).prop_map(|n| Some((n, Eviction::NearestFresh))),
        (1u64..6).prop_map(|n| Some((n, Eviction::Refuse))),
    ]
}

/// An answer of a store, whatever the call.
#[derive(Debug, PartialEq)]
enum Answer {
    Decision(Result<Decision, Error>),
    Booked(Result<Result<Nanos, Decision>, Error>),
    Batch(Result<Vec<Result<Decision, Error>>, Error>),
    Done,
}

/// The shared part of the seeds of `Call::Seed`, made before any call
/// (it allocates).
fn shared() -> &'static HashSeed {
    static SHARED: std::sync::OnceLock<&'static HashSeed> = std::sync::OnceLock::new();
    SHARED.get_or_init(|| Box::leak(Box::new(HashSeed::new(5))))
}

/// Makes `call` on `store`. Allocates nothing itself (a batch's `out` is
/// given), so that only the store's own allocations may fail.
fn run(
    store: &mut AnyKeyed,
    k: &[u8],
    now: Nanos,
    cost: u64,
    call: &Call,
    mut out: Vec<Result<Decision, Error>>,
) -> Answer {
    match call {
        Call::Acquire => Answer::Decision(store.try_acquire(k, now, cost)),
        Call::Peek => Answer::Decision(store.peek(k, now, cost)),
        Call::Reserve(max_wait) => Answer::Booked(store.reserve(k, now, cost, Nanos(*max_wait))),
        Call::Batch(costs) => Answer::Batch(
            store
                .try_acquire_batch(k, now, costs, &mut out)
                .map(|()| out),
        ),
        Call::Reset => {
            // Whether it held the key is not compared: a call that failed
            // may have swept fresh keys, which answer as keys not held.
            store.reset(k);
            Answer::Done
        }
        Call::Reclaim => {
            store.reclaim(now);
            Answer::Done
        }
        Call::Seed(entropy) => {
            store.seed_hashes(shared(), *entropy);
            Answer::Done
        }
    }
}

/// Every key answers alike in both stores, now and later.
fn same_answers(a: &AnyKeyed, b: &AnyKeyed, now: u64) -> Result<(), TestCaseError> {
    for i in 0..KEYS {
        for later in [0, 50, 1_000] {
            for cost in [0, 1, 3] {
                let at = Nanos(now + later);
                prop_assert_eq!(
                    a.peek(&key(i), at, cost),
                    b.peek(&key(i), at, cost),
                    "key {}",
                    i
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A store whose allocations fail at any point of any call answers as
    /// its twin, which never ran out of memory and never saw the calls
    /// that failed: a call that succeeds answers as the twin's, one that
    /// fails fails with `out_of_memory` and changes no answer.
    #[test]
    fn a_call_that_runs_out_of_memory_changes_nothing(
        prototype in prototype(),
        bound in bound(),
        steps in steps(),
    ) {
        let (max_keys, eviction) = bound.unzip();
        let mut store = AnyKeyed::new(prototype).bounded(max_keys, eviction).unwrap();
        let mut twin = store.clone();
        let mut now = 0u64;
        shared();
        for (i, dt, cost, call, fail) in &steps {
            now += dt;
            let k = key(*i);
            let out = || match call {
                Call::Batch(costs) => vec![Err(Error::StateTruncated); costs.len()],
                _ => Vec::new(),
            };
            let given = out();
            let answer = failing_after(*fail, || run(&mut store, &k, Nanos(now), *cost, call, given));
            let failed = match &answer {
                Answer::Decision(Err(e)) | Answer::Booked(Err(e)) | Answer::Batch(Err(e)) => {
                    out_of_memory(e)
                }
                _ => false,
            };
            if failed {
                prop_assert!(fail.is_some());
                same_answers(&store, &twin, now)?;
            } else {
                prop_assert_eq!(answer, run(&mut twin, &k, Nanos(now), *cost, call, out()));
            }
        }
        same_answers(&store, &twin, now)?;
    }
}

/// A policy of limits of every kind of key: short, long (on the heap), a
/// log's (which grows with its events), global, and bounded.
fn policy() -> Policy {
    let mut policy = user_then_log("per-user-and-id", &["user", "id"]);
    let global: AnyLimiter = TokenBucket::new(40, 1, Nanos(10)).unwrap().into();
    policy.add("global", &[], global).unwrap();
    let window: AnyLimiter = FixedWindow::new(3, Nanos(500)).unwrap().into();
    let bounded = AnyKeyed::new(window)
        .with_max_keys(3, Eviction::Refuse)
        .unwrap();
    policy.add_store("bounded", &["user"], bounded).unwrap();
    policy
}

/// A policy of a GCRA per user, then a log keyed by `by`, named `name`.
fn user_then_log(name: &str, by: &[&str]) -> Policy {
    let mut policy = Policy::new();
    policy
        .add(
            "per-user",
            &["user"],
            Gcra::new(3, Nanos(100)).unwrap().into(),
        )
        .unwrap();
    let log: AnyLimiter = SlidingWindowLog::new(12, Nanos(1_000)).unwrap().into();
    policy.add(name, by, log).unwrap();
    policy
}

/// The request of user `user`: its id is longer than a key kept inline.
fn request(user: u8) -> ([u8; 1], [u8; 30]) {
    ([user], [user; 30])
}

/// A policy's answer, whatever the call.
#[derive(Debug, PartialEq)]
enum Decided {
    Now(Result<ratekeeper::PolicyDecision, Error>),
    Booked(Result<Result<Nanos, ratekeeper::PolicyDecision>, Error>),
}

impl Decided {
    fn out_of_memory(&self) -> bool {
        match self {
            Decided::Now(Err(e)) | Decided::Booked(Err(e)) => out_of_memory(e),
            _ => false,
        }
    }
}

/// Decides `user`'s request; allocates nothing itself.
fn decide(policy: &mut Policy, user: u8, now: Nanos, cost: u64, reserve: Option<u64>) -> Decided {
    let (u, id) = request(user);
    let request = [("user", &u[..]), ("id", &id[..])];
    match reserve {
        None => Decided::Now(policy.try_acquire(&request, now, cost)),
        Some(max_wait) => Decided::Booked(policy.reserve(&request, now, cost, Nanos(max_wait))),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// As above, for a policy: a request that runs out of memory in any of
    /// its limits consumes nothing in any, and leaves no key it inserted.
    #[test]
    fn a_policy_request_that_runs_out_of_memory_consumes_nothing(
        steps in prop::collection::vec(
            (0u8..6, 0u64..200, 0u64..3, prop::option::of(0u64..2_000), prop::option::weighted(0.3, 0usize..6)),
            1..150,
        ),
    ) {
        let mut policy = policy();
        let mut twin = policy.clone();
        let mut now = 0u64;
        for (user, dt, cost, reserve, fail) in &steps {
            now += dt;
            let answer = failing_after(*fail, || decide(&mut policy, *user, Nanos(now), *cost, *reserve));
            if answer.out_of_memory() {
                prop_assert!(fail.is_some());
                for user in 0..6 {
                    for cost in [1, 3] {
                        let (u, id) = request(user);
                        let request = [("user", &u[..]), ("id", &id[..])];
                        let at = Nanos(now);
                        let ours = policy.peek(&request, at, cost).map(|d| (d, policy.decisions().to_vec()));
                        let theirs = twin.peek(&request, at, cost).map(|d| (d, twin.decisions().to_vec()));
                        prop_assert_eq!(ours, theirs);
                    }
                }
            } else {
                prop_assert_eq!(answer, decide(&mut twin, *user, Nanos(now), *cost, *reserve));
            }
        }
    }
}

/// A policy request whose later limit runs out of memory takes back out
/// the keys its earlier limits inserted fresh for it: the store holds what
/// it held (a fresh key answers as a key not held, so the property test
/// above, which compares answers, cannot see one left behind; a store that
/// keeps fresh keys, bounded with `Eviction::Refuse`, would count it).
#[test]
fn a_policy_request_that_runs_out_of_memory_leaves_no_key_it_inserted() {
    // A long key (its bytes on the heap) and a log (its ring grows): the
    // allocations a later limit makes once the first inserted its key.
    let mut policy = user_then_log("per-id", &["id"]);
    let (u, id) = request(1);
    let request = [("user", &u[..]), ("id", &id[..])];
    // Warm the policy's own buffers, then a new user.
    let _ = policy.peek(&request, Nanos(0), 1).unwrap();
    let mut in_the_second = 0;
    for allocations in 0..32 {
        let mut tried = policy.clone();
        let _ = tried.peek(&request, Nanos(0), 1).unwrap();
        let answer = failing_after(Some(allocations), || {
            tried.try_acquire(&request, Nanos(0), 1)
        });
        match answer {
            Err(error) => {
                assert!(out_of_memory(&error), "{error}");
                assert_eq!(tried.keys_held(), 0, "after {allocations} allocations");
                in_the_second += 1;
            }
            Ok(decision) => {
                assert!(decision.decision.allowed);
                assert_eq!(tried.keys_held(), 2);
                break;
            }
        }
    }
    // Failures past the first limit's insertion, not only before it.
    assert!(in_the_second >= 2, "{in_the_second} failures");
}

/// A policy's reset that runs out of memory (for a longer key than those
/// before it) resets nothing: the caller, told it failed, finds every key
/// as it was.
#[test]
fn a_policy_reset_that_runs_out_of_memory_resets_nothing() {
    let mut policy = Policy::new();
    let gcra: AnyLimiter = Gcra::new(1, Nanos(1_000)).unwrap().into();
    policy.add("per-user", &["user"], gcra.clone()).unwrap();
    policy.add("per-id", &["id"], gcra).unwrap();
    let (u, id) = request(1);
    let request = [("user", &u[..]), ("id", &id[..])];
    assert!(
        policy
            .try_acquire(&request, Nanos(0), 1)
            .unwrap()
            .decision
            .allowed
    );
    let mut failed = 0;
    for allocations in 0..8 {
        let mut tried = policy.clone();
        match failing_after(Some(allocations), || tried.reset(&request)) {
            Err(error) => {
                assert!(out_of_memory(&error), "{error}");
                assert_eq!(tried.keys_held(), 2, "after {allocations} allocations");
                let denied = tried.peek(&request, Nanos(0), 1).unwrap();
                assert_eq!(denied.denied_by, Some(0));
                assert!(!tried.decisions()[1].allowed);
                failed += 1;
            }
            Ok(held) => {
                assert_eq!(held, 2);
                break;
            }
        }
    }
    assert!(failed >= 1);
}

/// A store at its bound under `Eviction::Refuse` refuses a new key before
/// making it: a long key's bytes (or a key of the caller's type, cloned)
/// are not allocated and freed for each key refused, and the refusal is
/// `store_full`, memory or not.
#[test]
fn a_full_store_refuses_a_long_new_key_without_allocating() {
    let prototypes: [AnyLimiter; 3] = [
        Gcra::new(1, Nanos(1_000)).unwrap().into(),
        TokenBucket::new(3, 1, Nanos(100)).unwrap().into(),
        FixedWindow::new(3, Nanos(500)).unwrap().into(),
    ];
    for prototype in prototypes {
        let mut store = AnyKeyed::new(prototype)
            .with_max_keys(1, Eviction::Refuse)
            .unwrap();
        assert!(store.try_acquire(&key(1), Nanos(0), 1).unwrap().allowed);
        let long = key(3);
        let mut out = vec![Err(Error::StateTruncated); 2];
        for call in 0..3 {
            let (refused, allocations) = asked(|| {
                failing_after(Some(0), || match call {
                    0 => store.try_acquire(&long, Nanos(0), 1).map(drop),
                    1 => store.reserve(&long, Nanos(0), 1, Nanos::MAX).map(drop),
                    _ => store.try_acquire_batch(&long, Nanos(0), &[1, 1], &mut out),
                })
            });
            assert_eq!(refused.unwrap_err().code(), "store_full", "call {call}");
            assert_eq!(allocations, 0, "call {call}");
        }
        assert_eq!(store.len(), 1);
    }
    // A key of the caller's type: its clone (which aborts where memory
    // runs out) is not made either.
    let mut store = KeyedLimiter::new(Gcra::new(1, Nanos(1_000)).unwrap())
        .with_max_keys(1, Eviction::Refuse)
        .unwrap();
    assert!(store.try_acquire("held", Nanos(0), 1).unwrap().allowed);
    let (refused, allocations) =
        asked(|| failing_after(Some(0), || store.try_acquire("new", Nanos(0), 1)));
    assert_eq!(refused.unwrap_err().code(), "store_full");
    assert_eq!(allocations, 0);
}

/// A full store under `Eviction::Refuse` whose sweep is due, asked for a
/// long new key that memory cannot hold: the call fails before the sweep,
/// changing nothing. A sweep moves the store's time (a key dropped as
/// fresh must not be judged at an earlier time), so a caller whose clock
/// lags would be judged as of a call that failed.
#[test]
fn a_full_store_out_of_memory_for_a_new_key_sweeps_nothing() {
    let gcra: AnyLimiter = Gcra::new(1, Nanos(100)).unwrap().into();
    let store = || {
        let mut store = AnyKeyed::new(gcra.clone())
            .with_max_keys(1, Eviction::Refuse)
            .unwrap();
        assert!(store.try_acquire(&key(0), Nanos(0), 1).unwrap().allowed);
        store
    };
    let (mut tried, mut twin) = (store(), store());
    // At 150 the key held is fresh: a sweep would drop it.
    let long = key(1);
    let failed = failing_after(Some(0), || tried.try_acquire(&long, Nanos(150), 1));
    assert!(out_of_memory(&failed.unwrap_err()));
    assert_eq!(tried.len(), 1);
    // Taken at 0, it is denied at 50 (the store's time is 0).
    let lagging = |s: &mut AnyKeyed| s.try_acquire(&key(0), Nanos(50), 1).unwrap();
    assert_eq!(lagging(&mut tried), lagging(&mut twin));
    assert!(!lagging(&mut tried).allowed);
}

/// `Policy::each_key` lists every key of the request, or fails listing
/// none: a key left unseen is one a binding would take as untouched by the
/// call, and give a booking of it back (admitting more).
#[test]
fn a_policy_lists_every_key_or_fails_listing_none() {
    let policy = policy();
    let (u, id) = request(1);
    let request = [("user", &u[..]), ("id", &id[..])];
    let mut failed = 0;
    for allocations in 0..4 {
        // Counted, not kept: `f` allocates nothing itself.
        let mut seen = 0;
        let listed = failing_after(Some(allocations), || {
            policy.each_key(&request, policy.len(), |_, _| seen += 1)
        });
        match listed {
            Err(error) => {
                assert!(out_of_memory(&error), "{error}");
                assert_eq!(seen, 0, "after {allocations} allocations");
                failed += 1;
            }
            Ok(()) => {
                assert_eq!(seen, policy.len(), "after {allocations} allocations");
                break;
            }
        }
    }
    assert_eq!(failed, 1);
}

/// A batch decided cost by cost (as the wasm build decides one, through
/// its keyed operation) once `prepare_batch` made the key ready: where
/// memory runs out, it fails before any cost, changing nothing, the
/// store's time included; else no cost allocates, and the answers are the
/// core's batch's.
#[test]
fn a_batch_decided_cost_by_cost_after_prepare_batch_is_all_or_nothing() {
    // A log's key with events at 4 instants: its ring (4 entries) is full.
    let store = || {
        let log: AnyLimiter = SlidingWindowLog::new(8, Nanos(100)).unwrap().into();
        let mut store = AnyKeyed::new(log);
        for t in 0..4 {
            assert!(store.try_acquire(b"held", Nanos(t), 1).unwrap().allowed);
        }
        store
    };
    let now = Nanos(50);
    let by_calls = |s: &mut AnyKeyed, key: &[u8], costs: &[u64], out: &mut [Option<Decision>]| {
        s.check_batch(key, now, costs)?;
        s.prepare_batch(key, now, costs)?;
        for (&cost, slot) in costs.iter().zip(out) {
            *slot = Some(s.try_acquire(key, now, cost)?);
        }
        Ok::<(), Error>(())
    };
    // A caller whose clock lags, judged as of the store's time: its event
    // goes at that time, and counts until a window after it.
    let lagging = |s: &mut AnyKeyed| {
        let taken = s.try_acquire(b"held", Nanos(10), 1);
        (taken, s.peek(b"held", Nanos(120), 0))
    };
    // A denial, then an event at a fifth instant (the ring must grow); a
    // new key's cost of 0, then a cost that inserts it.
    for (name, costs) in [("held", &[5, 1][..]), ("new", &[0, 1][..])] {
        let key = name.as_bytes();
        let mut tried = store();
        let mut twin = store();
        let mut out = [None; 2];
        let failed = failing_after(Some(0), || by_calls(&mut tried, key, costs, &mut out));
        assert!(out_of_memory(&failed.unwrap_err()));
        assert_eq!(lagging(&mut tried), lagging(&mut twin), "{name}");

        let (mut tried, mut twin) = (store(), store());
        tried.prepare_batch(key, now, costs).unwrap();
        let (decided, allocations) = asked(|| {
            failing_after(Some(0), || {
                costs.iter().zip(&mut out).try_for_each(|(&cost, slot)| {
                    *slot = Some(tried.try_acquire(key, now, cost)?);
                    Ok::<(), Error>(())
                })
            })
        });
        decided.unwrap();
        assert_eq!(allocations, 0, "{name}");
        let mut batch = vec![Err(Error::StateTruncated); costs.len()];
        twin.try_acquire_batch(key, now, costs, &mut batch).unwrap();
        let batch: Vec<_> = batch.into_iter().map(|d| Some(d.unwrap())).collect();
        assert_eq!(&out[..], &batch[..], "{name}");
        assert_eq!(lagging(&mut tried), lagging(&mut twin), "{name}");
    }
    // A key goes in where a call would insert it: in a store whose new
    // keys start short of fresh (and so are kept), even for a cost of 0;
    // for no costs (no call), in none.
    let short: AnyLimiter = TokenBucket::with_initial_tokens(3, 1, Nanos(100), 1)
        .unwrap()
        .into();
    let mut store = AnyKeyed::new(short);
    store.prepare_batch(b"k", now, &[]).unwrap();
    assert!(store.is_empty());
    store.prepare_batch(b"k", now, &[0]).unwrap();
    assert_eq!(store.len(), 1);
}
