//! Node.js binding of `ratekeeper`, built with napi-rs: the native half.
//!
//! The public classes (`TokenBucket`, `Gcra`, ...) are written once, in
//! `lib/api.cjs`, for this addon and for the wasm build alike. Each holds a
//! handle: the index of its core [`AnyLimiter`] in this thread's
//! tables, made by one of the constructor functions below and given
//! back by [`free`] once the JS object is collected. Every operation is a
//! plain function taking the handle, not a class method: napi-rs checks the
//! class of `this` on each method call, and looks every `External` up in a
//! global registry, each of which cost more than the decision itself. The
//! decisions themselves skip napi-rs altogether ([`fast`]).
//!
//! A decision is not returned as an object (building one through Node-API
//! costs several times the call): the operation writes its numbers, and the
//! hot ones their status, into a `Float64Array` over memory this addon owns
//! ([`memory`]), and the JS layer builds the object (see [`shared::Out`]). The default clock of the hot operations is read here
//! ([`clock`]). What is shared with the wasm build is in [`shared`];
//! errors are mapped in [`errors`].

mod clock;
mod errors;
mod fast;
mod hash_seed;
mod memory;
mod policy_config;
mod shared;

use std::cell::RefCell;
use std::thread::LocalKey;

use napi::bindgen_prelude::{Either, Function, JsObjectValue, Object, Uint8Array, Unknown};
use napi::{Env, JsValue, ValueType};
use napi_derive::napi;
use ratekeeper::{AnyKeyed, AnyLimiter, Policy};

use errors::{throw, OrThrow};
pub(crate) use memory::with_scratch;
// Public, as every `#[napi]` item is here (the test build registers none).
pub use memory::{policy_details, scratch};
use shared::{Failure, Field, JsValueIn, Kind, Out, Part};

/// The limiters (keyed stores, policies) of one JS thread, by handle. A freed
/// slot is reused; no JS runs while the table is borrowed, so a borrow never fails.
pub struct Table<T> {
    pub(crate) slots: Vec<Option<T>>,
    free: Vec<u32>,
    /// The heap bytes each slot's entry was last reported to V8 with (see
    /// [`Table::insert_sized`], [`Table::on`]), given back when it is freed.
    bytes: Vec<i64>,
}

impl<T> Default for Table<T> {
    fn default() -> Self {
        Table {
            slots: Vec::new(),
            free: Vec::new(),
            bytes: Vec::new(),
        }
    }
}

/// What holds native memory that V8 is told of (see [`Table::insert_sized`]).
pub trait HeapBytes {
    /// The bytes held on the heap beside the value itself.
    fn heap_bytes(&self) -> usize;
    /// The keys held: a decision moves the heap bytes only as it moves
    /// this, so that the hot path measures them only then ([`Table::on`]).
    fn keys(&self) -> usize {
        0
    }
}

impl HeapBytes for AnyLimiter {
    fn heap_bytes(&self) -> usize {
        AnyLimiter::heap_bytes(self)
    }
}

impl HeapBytes for AnyKeyed {
    fn heap_bytes(&self) -> usize {
        AnyKeyed::heap_bytes(self)
    }
    fn keys(&self) -> usize {
        self.len()
    }
}

impl HeapBytes for Policy {
    fn heap_bytes(&self) -> usize {
        Policy::heap_bytes(self)
    }
    fn keys(&self) -> usize {
        self.keys_held()
    }
}

impl<T: HeapBytes> Table<T> {
    /// Runs `f` on the entry `slot`, if there is one, and answers with the
    /// change of its heap bytes since they were last reported, which V8 is
    /// to be told of ([`report`]): a keyed store grows and shrinks with its
    /// keys, a log's ring is made anew by a reconfigure. A decision
    /// (`hot`) is measured only when it changed the keys held: measuring
    /// each cost a twentieth of a keyed decision.
    pub(crate) fn on<R>(
        &mut self,
        slot: usize,
        hot: bool,
        f: impl FnOnce(&mut T) -> R,
    ) -> Option<(R, i64)> {
        let entry = self.slots.get_mut(slot)?.as_mut()?;
        let keys = hot.then(|| entry.keys());
        let answer = f(entry);
        if keys.is_some_and(|keys| keys == entry.keys()) {
            return Some((answer, 0));
        }
        let bytes = i64::try_from(entry.heap_bytes()).unwrap_or(i64::MAX);
        Some((
            answer,
            bytes - std::mem::replace(&mut self.bytes[slot], bytes),
        ))
    }
}

/// Tells V8 that native memory grew by `delta` bytes (shrank, below zero).
pub(crate) fn report(env: &Env, delta: i64) {
    if delta != 0 {
        // Only a hint to the collector: a failure changes no answer.
        let _ = env.adjust_external_memory(delta);
    }
}

impl<T> Table<T> {
    /// Inserts `limiter`, which holds `bytes` on the heap, counted as native
    /// memory V8 should know of: else it collects the JS object of a limiter
    /// holding a large ring (a log of 2^20 units: 32 MiB) no sooner than any
    /// small object, and memory grows without bound while garbage waits.
    fn insert_sized(&mut self, limiter: T, bytes: usize) -> u32 {
        let handle = match self.free.pop() {
            Some(handle) => {
                self.slots[handle as usize] = Some(limiter);
                handle
            }
            None => {
                self.slots.push(Some(limiter));
                self.bytes.push(0);
                (self.slots.len() - 1) as u32
            }
        };
        self.bytes[handle as usize] = i64::try_from(bytes).unwrap_or(i64::MAX);
        handle
    }
}

/// The error of a [`shared::Answer`], boxed: unboxed, its small fields
/// shared the first word with the answer's `bool`, and each move of an
/// answer out of a thread-local's closure copied those 7 bytes as two
/// overlapping 4-byte moves, twice; the second read spanned two stores and
/// waited for both (a failed store forwarding, where `perf` put a sixth of
/// a `tryAcquire`'s samples).
/// The wasm build, without thread-locals, keeps it unboxed.
pub(crate) type Failed = Box<ratekeeper::Error>;

thread_local! {
    // Each JS thread (main or worker) has its own addon instance, limiters and scratch.
    pub(crate) static LIMITERS: RefCell<Table<AnyLimiter>> = RefCell::new(Table::default());
    pub(crate) static KEYED: RefCell<Table<AnyKeyed>> = RefCell::new(Table::default());
    pub(crate) static POLICIES: RefCell<Table<Policy>> = RefCell::new(Table::default());
}

/// The scratch's slots beyond the answer's four ([`Out`]): the status of a
/// hot operation ([`fast`]), then its arguments. `index.js` spells the same
/// layout.
pub(crate) mod slot {
    /// 1 (allowed, booked) or 0.
    pub const STATUS: usize = 4;
    /// The arguments: handle, cost, maxWaitMs, nowMs, op. The addon
    /// leaves the handle NaN once read (see [`crate::fast`]'s `inputs`).
    pub const ARGS: usize = 5;
    /// 1 when the addon reads the clock itself instead of nowMs ([`crate::clock`]).
    pub const CLOCK: usize = ARGS + 5;
    /// How often the details grew (see [`crate::memory::policy_details`]),
    /// written by the addon only: a copy of the JS layer whose view of the
    /// details is older fetches the newest when this changes, and one whose
    /// view of the scratch was detached reads `undefined` here.
    pub const GENERATION: usize = CLOCK + 1;
    /// The length in bytes of a key written into [`KEY`] (`keyedOpScratch`),
    /// which the addon sets to NaN once read: a key JS wrote into a view
    /// detached meanwhile (a replaced `charCodeAt` can) is then refused, not
    /// read as the previous one.
    pub const KEY_LEN: usize = GENERATION + 1;
    /// The first of the slots holding a short ASCII key's bytes, which the
    /// JS layer writes through a `Uint8Array` on the same memory.
    pub const KEY: usize = KEY_LEN + 1;
    /// The most bytes a key in the scratch has.
    pub const KEY_BYTES: usize = 64;
    /// The length in bytes of a policy's request written into [`FIELDS`]
    /// (`policyOpScratch`), set to NaN once read, as [`KEY_LEN`].
    pub const FIELDS_LEN: usize = KEY + KEY_BYTES / 8;
    /// The first of the slots holding a policy's request, as bytes (see
    /// [`crate::shared::with_request_bytes`]).
    pub const FIELDS: usize = FIELDS_LEN + 1;
    /// The most bytes a request in the scratch has.
    pub const FIELD_BYTES: usize = 512;
    /// Every slot.
    pub const LEN: usize = FIELDS + FIELD_BYTES / 8;
}

/// Ties the addon's reading of the default clock to `now` (the JS layer
/// passes the runtime's `performance.now`); see [`clock`]. `false`: its
/// readings were unusable, and the addon is not to read the clock.
#[napi(catch_unwind)]
pub fn use_clock(now: Function<(), f64>) -> napi::Result<bool> {
    clock::tie(|| now.call(()))
}

/// Writes an answer's numbers into the scratch `s`, one 8-byte store each:
/// a copy of the whole loads them back in 16-byte halves from their own
/// 8-byte stores and waits for those (a stall seen in the hot path).
pub(crate) fn write_into(s: &mut [f64], out: &Out) {
    for (dst, x) in s.iter_mut().zip(out) {
        // SAFETY: `dst` is a valid, aligned, exclusive reference.
        unsafe { std::ptr::write_volatile(dst, *x) };
    }
}

fn write(env: &Env, out: &Out) {
    with_scratch(env.raw(), |s| write_into(s, out));
}

/// A JS value read through Node-API, for [`shared`].
struct In<'env>(Unknown<'env>);

impl JsValueIn for In<'_> {
    type Js = napi::Error;

    fn kind(&self) -> Result<Kind, Failure<napi::Error>> {
        let value = &self.0;
        // SAFETY (casts): each follows `get_type` reporting that very type.
        Ok(match value.get_type().map_err(Failure::Js)? {
            ValueType::Undefined | ValueType::Null => Kind::Absent,
            ValueType::Number => Kind::Number(unsafe { value.cast::<f64>() }.map_err(Failure::Js)?),
            ValueType::String => {
                Kind::String(unsafe { value.cast::<String>() }.map_err(Failure::Js)?)
            }
            ValueType::Object if value.is_array().map_err(Failure::Js)? => {
                let array = unsafe { value.cast::<Object>() }.map_err(Failure::Js)?;
                Kind::Array(array.get_array_length_unchecked().map_err(Failure::Js)?)
            }
            ValueType::Object => Kind::Object,
            // A BigInt (`napi_bigint`, which napi-rs names, and reads, only
            // with napi6): read by its decimal digits, which need no more.
            ValueType::Unknown => {
                let digits = value.coerce_to_string().map_err(Failure::Js)?;
                let digits = digits.into_utf8().map_err(Failure::Js)?;
                match digits.as_str().map_err(Failure::Js)?.parse() {
                    Ok(n) => Kind::Whole(n),
                    Err(_) => Kind::Other,
                }
            }
            _ => Kind::Other,
        })
    }

    fn get(&self, key: &'static str) -> Result<Self, Failure<napi::Error>> {
        // SAFETY: only called once `kind` said Object or Array.
        let object = unsafe { self.0.cast::<Object>() }.map_err(Failure::Js)?;
        object
            .get_named_property_unchecked(key)
            .map(In)
            .map_err(Failure::Js)
    }

    fn at(&self, index: u32) -> Result<Self, Failure<napi::Error>> {
        // SAFETY: only called once `kind` said Array.
        let object = unsafe { self.0.cast::<Object>() }.map_err(Failure::Js)?;
        object.get_element(index).map(In).map_err(Failure::Js)
    }

    fn keys(&self) -> Result<Vec<String>, Failure<napi::Error>> {
        // SAFETY: only called once `kind` said Object.
        let object = unsafe { self.0.cast::<Object>() }.map_err(Failure::Js)?;
        Object::keys(&object).map_err(Failure::Js)
    }
}

type Built = Result<AnyLimiter, Failure<napi::Error>>;

fn handle(env: &Env, built: Built) -> napi::Result<u32> {
    Ok(keep(env, built.or_throw(env)?))
}

/// `limiter`'s new handle, its heap told to V8 (see [`Table::insert_sized`]).
fn keep(env: &Env, limiter: AnyLimiter) -> u32 {
    keep_in(env, &LIMITERS, limiter)
}

/// [`keep`] in `table`.
fn keep_in<T: HeapBytes>(env: &Env, table: &'static Tls<T>, value: T) -> u32 {
    let bytes = value.heap_bytes();
    report(env, i64::try_from(bytes).unwrap_or(i64::MAX));
    table.with_borrow_mut(|t| t.insert_sized(value, bytes))
}

pub(crate) type Tls<T> = LocalKey<RefCell<Table<T>>>;

/// Runs `f` on the entry of `handle` in `table`, telling V8 how its heap changed.
fn with_in<T: HeapBytes, R>(
    table: &'static Tls<T>,
    env: &Env,
    handle: u32,
    f: impl FnOnce(&mut T) -> R,
) -> napi::Result<R> {
    match table.with_borrow_mut(|t| t.on(handle as usize, false, f)) {
        Some((answer, delta)) => {
            report(env, delta);
            Ok(answer)
        }
        // Only a caller of native.js itself can get here: the JS layer frees
        // a handle once no object holds it.
        None => Err(throw(env, shared::type_error("handle", "a limiter"))),
    }
}

/// Runs `f` on the limiter of `handle`.
fn with<T>(env: &Env, handle: u32, f: impl FnOnce(&mut AnyLimiter) -> T) -> napi::Result<T> {
    with_in(&LIMITERS, env, handle, f)
}

fn free_in<T>(env: &Env, table: &'static Tls<T>, handle: u32) {
    let bytes = table.with_borrow_mut(|t| {
        let slot @ Some(_) = t.slots.get_mut(handle as usize)? else {
            return None;
        };
        *slot = None;
        t.free.push(handle);
        Some(std::mem::take(&mut t.bytes[handle as usize]))
    });
    if let Some(bytes) = bytes {
        report(env, -bytes);
    }
}

/// The bytes of native memory V8 was told of (see [`report`]), this
/// addon's and others': for tests.
#[napi(catch_unwind)]
pub fn external_memory(env: Env) -> napi::Result<f64> {
    Ok(env.adjust_external_memory(0)? as f64)
}

/// Gives back the slot of `handle` (the JS layer calls it from a
/// `FinalizationRegistry` once the limiter object is collected).
#[napi(catch_unwind)]
pub fn free(env: Env, handle: u32) {
    free_in(&env, &LIMITERS, handle);
}

/// [`free`] for a keyed limiter.
#[napi(catch_unwind)]
pub fn free_keyed(env: Env, handle: u32) {
    free_in(&env, &KEYED, handle);
}

/// [`free`] for a policy.
#[napi(catch_unwind)]
pub fn free_policy(env: Env, handle: u32) {
    free_in(&env, &POLICIES, handle);
}

/// Defines one constructor function per algorithm: options in, handle out.
macro_rules! constructors {
    ($($doc:literal $name:ident => $build:path;)*) => {$(
        #[doc = $doc]
        #[napi(catch_unwind)]
        pub fn $name(env: Env, options: Unknown) -> napi::Result<u32> {
            handle(&env, $build(&In(options)))
        }
    )*};
}

constructors! {
    "`new TokenBucket(options)`." token_bucket => shared::token_bucket;
    "`TokenBucket.fromBandwidths(bandwidths)`." token_bucket_from_bandwidths => shared::token_bucket_from_bandwidths;
    "`new Gcra(options)`." gcra => shared::gcra;
    "`Gcra.perPeriod(options)`." gcra_per_period => shared::gcra_per_period;
    "`new LeakyBucket(options)`." leaky_bucket => shared::leaky_bucket;
    "`new SlidingWindowLog(options)`." sliding_window_log => shared::sliding_window_log;
    "`new SlidingWindowCounter(options)`." sliding_window_counter => shared::sliding_window_counter;
    "`new FixedWindow(options)`." fixed_window => shared::fixed_window;
}

/// Gives back `cost` units taken at `taken`: `[takenAtMs, slotHigh, slotLow]`
/// (see [`shared::taken_at`]).
#[napi(catch_unwind)]
pub fn refund(env: Env, handle: u32, cost: f64, taken: Vec<f64>) -> napi::Result<()> {
    with(&env, handle, |l| shared::refund(l, cost, &taken))?.or_throw(&env)
}

/// Replaces the configuration of `handle` with that of `other`.
#[napi(catch_unwind)]
pub fn reconfigure(env: Env, handle: u32, other: u32, now_ms: f64) -> napi::Result<()> {
    let new = with(&env, other, |l| shared::configuration(l))?;
    // A log's ring is made anew at the new limit: `with` tells V8.
    with(&env, handle, |l| shared::reconfigure(l, new, now_ms))?.or_throw(&env)
}

/// The header values of a decision, one per line (see [`shared::headers`]).
#[napi(catch_unwind)]
#[allow(clippy::too_many_arguments)]
pub fn headers(
    env: Env,
    handle: u32,
    name: String,
    allowed: bool,
    remaining: f64,
    limit: f64,
    retry_after_ms: f64,
    reset_after_ms: f64,
) -> napi::Result<String> {
    let fields = [remaining, limit, retry_after_ms, reset_after_ms];
    with(&env, handle, |l| shared::headers(l, &name, allowed, fields))?.or_throw(&env)
}

fn fields_to_js<'env>(
    env: &'env Env,
    fields: Vec<(&'static str, Field)>,
) -> napi::Result<Object<'env>> {
    let mut object = Object::new(env)?;
    for (key, field) in fields {
        match field {
            Field::Number(n) => object.set_named_property(key, n)?,
            Field::Str(s) => object.set_named_property(key, s)?,
            Field::Bandwidths(bands) => {
                let array = bands.into_iter().map(|band| fields_to_js(env, band));
                object.set_named_property(key, array.collect::<napi::Result<Vec<_>>>()?)?;
            }
        }
    }
    Ok(object)
}

/// The configuration behind the getters (see [`shared::config`]).
#[napi(catch_unwind, ts_return_type = "Record<string, any>")]
pub fn config<'env>(env: &'env Env, handle: u32) -> napi::Result<Object<'env>> {
    let fields = with(env, handle, |l| shared::config(l))?;
    fields_to_js(env, fields)
}

/// Throws the `invalid_type` error for an argument the JS layer checked
/// (`name` and `expected` as in [`shared::type_error`]).
#[napi(catch_unwind)]
pub fn type_error(env: Env, name: String, expected: String) -> napi::Result<()> {
    Err(throw(&env, shared::type_error(&name, &expected)))
}

/// Throws the `RangeError` for a limiter's `name` the headers cannot carry:
/// the rule the core holds a policy's limit names to (the JS layer keeps a
/// limiter's name itself).
#[napi(catch_unwind)]
pub fn check_name(env: Env, name: String) -> napi::Result<()> {
    ratekeeper::Headers::check_name(&name).or_throw(&env)
}

/// Throws the `RangeError` for a bad duration the JS layer uses itself (`timeoutMs`).
#[napi(catch_unwind)]
pub fn check_millis(env: Env, value: f64, name: String) -> napi::Result<()> {
    shared::check_millis(value, &name).or_throw(&env)
}

/// `limiter.toBytes()`.
#[napi(catch_unwind)]
pub fn to_bytes(env: Env, handle: u32) -> napi::Result<Uint8Array> {
    with(&env, handle, |l| Uint8Array::new(shared::to_bytes(l)))
}

/// `limiter.restore(bytes)`.
#[napi(catch_unwind)]
pub fn restore(env: Env, handle: u32, bytes: Uint8Array) -> napi::Result<()> {
    with(&env, handle, |l| shared::restore(l, &bytes))?.or_throw(&env)
}

/// `new KeyedLimiter(limiter, options)`: a store of copies of `prototype`'s configuration.
#[napi(catch_unwind)]
pub fn keyed_new(
    env: Env,
    prototype: u32,
    max_keys: Option<f64>,
    eviction: Option<String>,
) -> napi::Result<u32> {
    let prototype = with(&env, prototype, |l| shared::configuration(l))?;
    let mut store = shared::keyed(prototype, max_keys, eviction.as_deref()).or_throw(&env)?;
    let (shared, bits) = hash_seed::host_seed();
    store.seed_hashes(shared, bits);
    Ok(keep_in(&env, &KEYED, store))
}

/// The configuration of a keyed limiter's keys, as a new limiter handle
/// (see [`shared::keyed_prototype`]).
#[napi(catch_unwind)]
pub fn keyed_prototype(env: Env, handle: u32, whole: bool) -> napi::Result<u32> {
    let prototype = with_in(&KEYED, &env, handle, |s| shared::keyed_prototype(s, whole))?;
    Ok(keep(&env, prototype))
}

/// A key, or a field's name or value of a policy's request, as the JS layer
/// passes it: a string, or the bytes of one that is not UTF-8. (Spelt out
/// in each signature: napi-rs would name an alias in `native.d.ts`.)
impl shared::Part for Either<String, Uint8Array> {
    fn text(&self) -> Option<&str> {
        match self {
            Either::A(text) => Some(text),
            Either::B(_) => None,
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Either::A(text) => text.as_bytes(),
            Either::B(bytes) => bytes,
        }
    }
}

/// `keyed.refund(key, cost, takenAtMs)`, or a keyed reservation's `cancel()` (see [`refund`]).
#[napi(catch_unwind)]
pub fn keyed_refund(
    env: Env,
    handle: u32,
    key: Either<String, Uint8Array>,
    cost: f64,
    taken: Vec<f64>,
) -> napi::Result<()> {
    with_in(&KEYED, &env, handle, |s| {
        shared::keyed_refund(s, key.bytes(), cost, &taken)
    })?
    .or_throw(&env)
}

/// `keyed.tryAcquireBatch(key, costs, nowMs)` (see [`shared::keyed_try_acquire_batch`]).
#[napi(catch_unwind)]
pub fn keyed_try_acquire_batch(
    env: Env,
    handle: u32,
    key: Either<String, Uint8Array>,
    costs: Vec<f64>,
    now_ms: f64,
) -> napi::Result<Vec<f64>> {
    with_in(&KEYED, &env, handle, |s| {
        shared::keyed_try_acquire_batch(s, key.bytes(), &costs, now_ms)
    })?
    .or_throw(&env)
}

/// `keyed.size`.
#[napi(catch_unwind)]
pub fn keyed_len(env: Env, handle: u32) -> napi::Result<u32> {
    with_in(&KEYED, &env, handle, |s| {
        s.len().min(u32::MAX as usize) as u32
    })
}

/// `keyed.reset(key)`: whether the store held the key.
#[napi(catch_unwind)]
pub fn keyed_reset(env: Env, handle: u32, key: Either<String, Uint8Array>) -> napi::Result<bool> {
    with_in(&KEYED, &env, handle, |s| s.reset(key.bytes()))
}

/// `keyed.reclaim(nowMs)`.
#[napi(catch_unwind)]
pub fn keyed_reclaim(env: Env, handle: u32, now_ms: f64) -> napi::Result<()> {
    with_in(&KEYED, &env, handle, |s| shared::keyed_reclaim(s, now_ms))?.or_throw(&env)
}

/// A handle to the policy `built`, its keys' hashes seeded from the
/// operating system (limits added later too).
fn policy_handle(env: &Env, built: Result<Policy, Failure<napi::Error>>) -> napi::Result<u32> {
    let mut policy = built.or_throw(env)?;
    let (shared, bits) = hash_seed::host_seed();
    policy.seed_hashes(shared, bits);
    Ok(keep_in(env, &POLICIES, policy))
}

/// `new Policy(config)`, the config as plain data (see [`policy_config`]).
#[napi(catch_unwind)]
pub fn policy_from_config(env: Env, config: Unknown) -> napi::Result<u32> {
    policy_handle(&env, policy_config::policy_from_config(&In(config)))
}

/// An empty policy, for [`policy_add`].
#[napi(catch_unwind)]
pub fn policy_new(env: Env) -> napi::Result<u32> {
    policy_handle(&env, Ok(Policy::new()))
}

/// Adds a limit called `name`, keyed by `by`, each key a copy of `limiter`'s
/// configuration, at most `max_keys` keys held (`eviction` at the bound), to
/// a policy on the default monotonic clock (`monotonic`) or not: `true`
/// when it reads `Date.now()` from now on (see [`shared::policy_add`]).
#[napi(catch_unwind)]
#[allow(clippy::too_many_arguments)]
pub fn policy_add(
    env: Env,
    handle: u32,
    name: String,
    by: Vec<String>,
    limiter: u32,
    max_keys: Option<f64>,
    eviction: Option<String>,
    monotonic: bool,
) -> napi::Result<bool> {
    let limiter = with(&env, limiter, |l| shared::configuration(l))?;
    with_in(&POLICIES, &env, handle, |p| {
        let bound = (max_keys, eviction.as_deref());
        shared::policy_add(p, &name, &by, limiter, bound, monotonic)
    })?
    .or_throw(&env)
}

/// `Policy.fromRates(rates, { algorithm, by })`.
#[napi(catch_unwind)]
pub fn policy_from_rates(
    env: Env,
    rates: String,
    algorithm: String,
    by: Vec<String>,
) -> napi::Result<u32> {
    policy_handle(&env, shared::policy_from_rates(&rates, &algorithm, &by))
}

/// Reports a policy operation: the combined decision in the scratch (the
/// status and the details are in [`memory::policy_details`]'s already).
pub(crate) fn policy_status(env: &Env, answer: shared::Answer) -> napi::Result<()> {
    let (_, out) = answer.map_err(|error| *error).or_throw(env)?;
    write(env, &out);
    Ok(())
}

/// [`shared::policy_op`] on `p`, answering into the newest details
/// ([`memory::policy_details`]); `env` is the running call's.
pub(crate) fn policy_decide(
    env: napi::sys::napi_env,
    p: &mut Policy,
    request: &[(&str, &[u8])],
    (cost, max_wait_ms, now_ms, op): (f64, f64, f64, u32),
) -> shared::Answer {
    memory::with_details(env, |details| {
        shared::policy_op(p, request, cost, max_wait_ms, now_ms, op, details)
    })
}

/// `policy.peek` (`op` 0), `policy.tryAcquire` (1) or `policy.reserve` (2):
/// `fields` alternates names and values (see [`shared::policy_op`]).
#[napi(catch_unwind)]
pub fn policy_op(
    env: Env,
    handle: u32,
    fields: Vec<Either<String, Uint8Array>>,
    cost: f64,
    max_wait_ms: f64,
    now_ms: f64,
    op: u32,
) -> napi::Result<()> {
    let request = shared::request(&fields).or_throw(&env)?;
    let answer = with_in(&POLICIES, &env, handle, |p| {
        policy_decide(env.raw(), p, &request, (cost, max_wait_ms, now_ms, op))
    })?;
    policy_status(&env, answer)
}

/// `policy.refund(request, cost, takenAtMs)`, or a policy reservation's
/// `cancel()` (see [`refund`]), in the first `limits` limits: those the
/// policy had when the units were taken.
#[napi(catch_unwind)]
pub fn policy_refund(
    env: Env,
    handle: u32,
    fields: Vec<Either<String, Uint8Array>>,
    cost: f64,
    taken: Vec<f64>,
    limits: u32,
) -> napi::Result<()> {
    with_in(&POLICIES, &env, handle, |p| {
        shared::policy_refund(p, &fields, cost, &taken, limits as usize)
    })?
    .or_throw(&env)
}

/// `policy.reset(request)`: how many limits held the request's key.
#[napi(catch_unwind)]
pub fn policy_reset(
    env: Env,
    handle: u32,
    fields: Vec<Either<String, Uint8Array>>,
) -> napi::Result<u32> {
    with_in(&POLICIES, &env, handle, |p| {
        shared::policy_reset(p, &fields)
    })?
    .or_throw(&env)
}

/// `policy.reclaim(nowMs)`.
#[napi(catch_unwind)]
pub fn policy_reclaim(env: Env, handle: u32, now_ms: f64) -> napi::Result<()> {
    with_in(&POLICIES, &env, handle, |p| {
        shared::policy_reclaim(p, now_ms)
    })?
    .or_throw(&env)
}

/// What its waiters do around an aborted one, then each limit's name and its fields (see [`shared::policy_limits`]).
#[napi(catch_unwind)]
pub fn policy_limits(env: Env, handle: u32) -> napi::Result<Vec<String>> {
    with_in(&POLICIES, &env, handle, |p| shared::policy_limits(p))
}

/// The headers of a policy decision (see [`shared::policy_headers`]).
#[napi(catch_unwind)]
pub fn policy_headers(env: Env, handle: u32, decision: Vec<f64>) -> napi::Result<String> {
    with_in(&POLICIES, &env, handle, |p| {
        shared::policy_headers(p, &decision)
    })?
    .or_throw(&env)
}

/// Adds the hand-written hot path ([`fast`]) to the exports.
#[napi(module_exports)]
pub fn exports(exports: Object, env: Env) -> napi::Result<()> {
    fast::register(&env, exports.raw())
}

/// A class whose `noop(cost, nowMs)` method does nothing: the floor of a
/// napi-rs class method, for the benchmark only.
#[napi]
pub struct NoopFloor {}

#[napi]
impl NoopFloor {
    /// A floor to measure.
    #[napi(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        NoopFloor {}
    }

    /// Does nothing with what `tryAcquire` takes.
    #[napi]
    pub fn noop(&self, _cost: f64, _now_ms: f64) -> bool {
        true
    }
}

/// The Redis script of protocol 1 (`core/redis/ratekeeper.lua`), which
/// `lib/redis.cjs` loads and calls by its SHA-1; the same bytes every binding
/// ships, so that every client shares one loaded script.
#[napi]
pub const REDIS_SCRIPT: &str = ratekeeper::redis::REDIS_SCRIPT;
