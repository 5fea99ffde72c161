//! WebAssembly binding of [`ratekeeper`], built with wasm-bindgen: the native half.
//!
//! The same functions as the napi addon (`bindings-node/src/lib.rs`), under the
//! same names, so that the one JS layer (`bindings-node/lib/api.cjs`, copied
//! into `pkg/` by `scripts/wasm.sh build`) drives either build: constructor
//! functions return a [`Handle`] holding a core [`AnyLimiter`], and the
//! operations take it. A decision's numbers are written to four `f64`s in
//! linear memory, read by the JS layer through [`scratch`]; the hot operations
//! return a status rather than a `Result` (see [`FAILED`]); what the two
//! builds share is in `shared/`, included from the napi crate. Bad arguments
//! throw a `RangeError` or `TypeError` carrying `.code` (see `errors.rs`);
//! nothing panics on host input.

// Cold functions are compiled for size where scripts/wasm.sh sets this cfg.
#![cfg_attr(ratekeeper_size, feature(optimize_attribute))]

mod errors;
#[path = "../../bindings-node/src/policy_config.rs"]
mod policy_config;
#[path = "../../bindings-node/src/shared/mod.rs"]
mod shared;

use std::cell::{Cell, RefCell, RefMut};
use std::thread::LocalKey;

use js_sys::{Array, Float64Array, Object, Reflect, Uint8Array, WebAssembly};
use ratekeeper::{AnyKeyed, AnyLimiter, HashSeed, Policy};
use wasm_bindgen::convert::TryFromJsValue;
use wasm_bindgen::prelude::*;

use errors::{failure_to_js, to_js};
use shared::{Failure, Field, JsValueIn, Kind, Now, Out};

// talc rather than std's dlmalloc: 1.4 KB smaller gzipped, decisions, new
// keys and new handles as fast, the memory grown as far (bindings-wasm/README.md).
// One thread (no `atomics`), as wasm-bindgen's instances are here.
#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
#[global_allocator]
static TALC: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();

/// One limiter: a core [`AnyLimiter`]. A `RefCell` so that `reconfigure` may
/// take the same handle twice.
#[wasm_bindgen]
pub struct Handle(RefCell<AnyLimiter>);

/// The most bytes of a key the JS layer writes into [`key_scratch`].
const KEY_SCRATCH: usize = 64;

/// The most bytes of a policy's request the JS layer writes into
/// [`field_scratch`].
const FIELD_SCRATCH: usize = 512;

thread_local! {
    static SCRATCH: [Cell<f64>; 4] = const { [const { Cell::new(0.0) }; 4] };
    // A short key, written by the JS layer for `keyedOpScratch`.
    static KEY: [Cell<u8>; KEY_SCRATCH] = const { [const { Cell::new(0) }; KEY_SCRATCH] };
    // A policy's request, written by the JS layer for `policyOpScratch`.
    static FIELDS: [Cell<u8>; FIELD_SCRATCH] = const { [const { Cell::new(0) }; FIELD_SCRATCH] };
    // A policy operation's status and details, read by the JS layer through
    // `policyDetails`; sized by `fitPolicy`, and counted each time it moves.
    // Taken out while in use, never borrowed: a trap there (out of memory)
    // ends the call without a borrow's end, and every later policy
    // operation, of any policy, trapped on that borrow.
    static DETAILS: Cell<Vec<f64>> = const { Cell::new(Vec::new()) };
    static DETAILS_MOVED: Cell<u32> = const { Cell::new(0) };
    // The error of the last operation that returned `FAILED`, made a JS
    // error only by `take_error` (see `settled`); `None` inside: the handle
    // was unusable (see `unusable`).
    static ERROR: Cell<Option<Option<ratekeeper::Error>>> = const { Cell::new(None) };
}

/// The error of a [`shared::Answer`]: unboxed here (the napi build boxes
/// it, see its `Failed`).
type Failed = ratekeeper::Error;

/// What `tryAcquire`, `peek` and `reserve` return when they fail: the error
/// waits in [`take_error`]. Returning a `Result` instead would make
/// wasm-bindgen build an array for every call, which cost more than the decision.
const FAILED: u32 = 2;

/// `1` (allowed / booked) or `0`, with the numbers in the scratch; or
/// [`FAILED`], keeping the error for [`take_error`].
fn status(answer: shared::Answer) -> u32 {
    match answer {
        Ok((yes, out)) => {
            write(&out);
            yes.into()
        }
        Err(error) => {
            ERROR.set(Some(Some(error)));
            FAILED
        }
    }
}

/// What `tryAcquire`, `peek` and `reserve` return for a limiter a trap left
/// borrowed (see [`take_error`]). They cannot trap themselves (they neither
/// allocate nor call JS, and their errors are values), which is why
/// traps.js leaves them unguarded: a guard's `try` kept V8 from inlining
/// the call into the module, a third of a decision's time.
#[cold]
fn unusable() -> u32 {
    ERROR.set(Some(None));
    FAILED
}

/// The error of the last operation that returned 2, to be thrown by the JS layer.
#[wasm_bindgen(js_name = takeError)]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn take_error() -> JsValue {
    match ERROR.take() {
        None => JsValue::UNDEFINED,
        Some(Some(error)) => to_js(error),
        // The error every call on a limiter that trapped ends in (the
        // trap's own, as its other operations still trap on the borrow).
        Some(None) => WebAssembly::RuntimeError::new("unreachable").into(),
    }
}

/// `result` with its error made a JS error, which the caller does once it
/// holds no handle borrowed: making one sets its `code`, which runs any
/// setter a script put on `Object.prototype`, and one that calls back into
/// the same handle found it borrowed, a panic (`unreachable` in JS).
#[cfg_attr(ratekeeper_size, optimize(size))]
fn settled<T>(result: Result<T, ratekeeper::Error>) -> Result<T, JsValue> {
    result.map_err(to_js)
}

/// A `Float64Array` over the four numbers each operation writes. It is
/// detached (length 0) once the memory grows: ask again then.
#[wasm_bindgen]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn scratch() -> Float64Array {
    let address = SCRATCH.with(|cells| cells.as_ptr() as u32);
    let memory: WebAssembly::Memory = wasm_bindgen::memory().unchecked_into();
    Float64Array::new_with_byte_offset_and_length(&memory.buffer(), address, 4)
}

/// A `Uint8Array` over the bytes where the JS layer writes a short key
/// before [`keyed_op_scratch`]. Detached once the memory grows, like
/// [`scratch`].
#[wasm_bindgen(js_name = keyScratch)]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn key_scratch() -> Uint8Array {
    bytes_of(KEY.with(|cells| cells.as_ptr() as u32), KEY_SCRATCH)
}

/// A `Uint8Array` over the bytes where the JS layer writes a policy's
/// request before [`policy_op_scratch`], as [`key_scratch`] is.
#[wasm_bindgen(js_name = fieldScratch)]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn field_scratch() -> Uint8Array {
    bytes_of(FIELDS.with(|cells| cells.as_ptr() as u32), FIELD_SCRATCH)
}

/// A `Uint8Array` over `len` bytes of the module's memory at `address`.
#[cfg_attr(ratekeeper_size, optimize(size))]
fn bytes_of(address: u32, len: usize) -> Uint8Array {
    let memory: WebAssembly::Memory = wasm_bindgen::memory().unchecked_into();
    Uint8Array::new_with_byte_offset_and_length(&memory.buffer(), address, len as u32)
}

fn write(out: &Out) {
    SCRATCH.with(|cells| {
        for (cell, value) in cells.iter().zip(out) {
            cell.set(*value);
        }
    });
}

/// A JS value, for [`shared`].
struct In(JsValue);

impl JsValueIn for In {
    type Js = JsValue;

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn kind(&self) -> Result<Kind, Failure<JsValue>> {
        let value = &self.0;
        Ok(if value.is_undefined() || value.is_null() {
            Kind::Absent
        } else if let Some(number) = value.as_f64() {
            Kind::Number(number)
        } else if let Some(string) = value.as_string() {
            Kind::String(string)
        } else if let Some(len) = array_length(value) {
            Kind::Array(len)
        } else if value.is_object() {
            Kind::Object
        } else if let Some(n) = value
            .is_bigint()
            .then(|| u64::try_from_js_value_ref(value))
            .flatten()
        {
            Kind::Whole(n)
        } else {
            Kind::Other
        })
    }

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn get(&self, key: &'static str) -> Result<Self, Failure<JsValue>> {
        Reflect::get(&self.0, &JsValue::from_str(key))
            .map(In)
            .map_err(Failure::Js)
    }

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn at(&self, index: u32) -> Result<Self, Failure<JsValue>> {
        Reflect::get_u32(&self.0, index)
            .map(In)
            .map_err(Failure::Js)
    }

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn keys(&self) -> Result<Vec<String>, Failure<JsValue>> {
        let object: &Object = self.0.unchecked_ref();
        Ok(Object::keys(object)
            .iter()
            .filter_map(|key| key.as_string())
            .collect())
    }
}

#[wasm_bindgen]
extern "C" {
    /// `Array.isArray(value)`, which throws for a revoked Proxy.
    #[wasm_bindgen(catch, js_namespace = Array, js_name = isArray)]
    fn is_array(value: &JsValue) -> Result<bool, JsValue>;
}

/// The length of `value` if it is an array, read without letting a JS
/// exception unwind through this module: an import that throws (a revoked
/// Proxy, a Proxy of an array whose `length` trap throws) leaves the frames
/// it skips on the shadow stack, and some thousand such calls left the
/// module trapping on every call. Such a value is no array, as Node-API's
/// `IsArray` finds no Proxy one.
#[cfg_attr(ratekeeper_size, optimize(size))]
fn array_length(value: &JsValue) -> Option<u32> {
    if !is_array(value).unwrap_or(false) {
        return None;
    }
    let len = Reflect::get(value, &JsValue::from_str("length"))
        .ok()?
        .as_f64()?;
    // An array's length is a whole number below 2^32; a Proxy's trap may answer anything.
    (len >= 0.0 && len <= f64::from(u32::MAX) && len.fract() == 0.0).then_some(len as u32)
}

/// Defines one constructor function per algorithm: options in, handle out.
macro_rules! constructors {
    ($($(#[$doc:meta])* $name:ident / $js:ident => $build:path;)*) => {$(
        $(#[$doc])*
        #[wasm_bindgen(js_name = $js)]
        #[cfg_attr(ratekeeper_size, optimize(size))]
        pub fn $name(options: JsValue) -> Result<Handle, JsValue> {
            let limiter = $build(&In(options)).map_err(failure_to_js)?;
            Ok(Handle(RefCell::new(limiter)))
        }
    )*};
}

constructors! {
    /// `new TokenBucket(options)`.
    token_bucket / tokenBucket => shared::token_bucket;
    /// `TokenBucket.fromBandwidths(bandwidths)`.
    token_bucket_from_bandwidths / tokenBucketFromBandwidths => shared::token_bucket_from_bandwidths;
    /// `new Gcra(options)`.
    gcra / gcra => shared::gcra;
    /// `Gcra.perPeriod(options)`.
    gcra_per_period / gcraPerPeriod => shared::gcra_per_period;
    /// `new LeakyBucket(options)`.
    leaky_bucket / leakyBucket => shared::leaky_bucket;
    /// `new SlidingWindowLog(options)`.
    sliding_window_log / slidingWindowLog => shared::sliding_window_log;
    /// `new SlidingWindowCounter(options)`.
    sliding_window_counter / slidingWindowCounter => shared::sliding_window_counter;
    /// `new FixedWindow(options)`.
    fixed_window / fixedWindow => shared::fixed_window;
}

/// Decides `cost` at `nowMs`, consuming it if allowed (see [`status`]).
#[wasm_bindgen(js_name = tryAcquire)]
pub fn try_acquire(handle: &Handle, cost: f64, now_ms: f64) -> u32 {
    let Ok(mut limiter) = handle.0.try_borrow_mut() else {
        return unusable();
    };
    status(shared::try_acquire(&mut limiter, cost, Now::Millis(now_ms)))
}

/// The answer `tryAcquire` would give, consuming nothing.
#[wasm_bindgen]
pub fn peek(handle: &Handle, cost: f64, now_ms: f64) -> u32 {
    let Ok(limiter) = handle.0.try_borrow() else {
        return unusable();
    };
    status(shared::peek(&limiter, cost, Now::Millis(now_ms)))
}

/// Books `cost` if the wait is at most `maxWaitMs` (`Infinity`: no bound).
#[wasm_bindgen]
pub fn reserve(handle: &Handle, cost: f64, max_wait_ms: f64, now_ms: f64) -> u32 {
    let Ok(mut limiter) = handle.0.try_borrow_mut() else {
        return unusable();
    };
    status(shared::reserve(
        &mut limiter,
        cost,
        max_wait_ms,
        Now::Millis(now_ms),
    ))
}

/// Gives back `cost` units taken at `taken`: `[takenAtMs, slotHigh, slotLow]`
/// (see `shared::taken_at`).
#[wasm_bindgen]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn refund(handle: &Handle, cost: f64, taken: Vec<f64>) -> Result<(), JsValue> {
    let refunded = shared::refund(&mut handle.0.borrow_mut(), cost, &taken);
    settled(refunded)
}

/// Replaces the configuration of `handle` with that of `other`.
#[wasm_bindgen]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn reconfigure(handle: &Handle, other: &Handle, now_ms: f64) -> Result<(), JsValue> {
    // Its configuration alone (see `shared::configuration`), taken before
    // `handle` is borrowed: they may be the same limiter.
    let new = shared::configuration(&other.0.borrow());
    let reconfigured = shared::reconfigure(&mut handle.0.borrow_mut(), new, now_ms);
    settled(reconfigured)
}

/// The header values of a decision, joined by `\n`.
#[wasm_bindgen]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn headers(
    handle: &Handle,
    name: &str,
    allowed: bool,
    remaining: f64,
    limit: f64,
    retry_after_ms: f64,
    reset_after_ms: f64,
) -> Result<String, JsValue> {
    let fields = [remaining, limit, retry_after_ms, reset_after_ms];
    let headers = shared::headers(&handle.0.borrow(), name, allowed, fields);
    settled(headers)
}

#[cfg_attr(ratekeeper_size, optimize(size))]
fn fields_to_js(fields: Vec<(&'static str, Field)>) -> Result<Object, JsValue> {
    let object = Object::new();
    for (key, field) in fields {
        let value: JsValue = match field {
            Field::Number(n) => n.into(),
            Field::Str(s) => s.into(),
            Field::Bandwidths(bands) => {
                let array = Array::new();
                for band in bands {
                    array.push(&fields_to_js(band)?.into());
                }
                array.into()
            }
        };
        Reflect::set(&object, &JsValue::from_str(key), &value)?;
    }
    Ok(object)
}

/// The configuration behind the getters.
#[wasm_bindgen]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn config(handle: &Handle) -> Result<Object, JsValue> {
    // Borrowed only to read: fields_to_js sets fields (see `settled`).
    let fields = shared::config(&handle.0.borrow());
    fields_to_js(fields)
}

/// Throws the `invalid_type` error for an argument the JS layer checked.
#[wasm_bindgen(js_name = typeError)]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn type_error(name: &str, expected: &str) -> Result<(), JsValue> {
    Err(to_js(shared::type_error(name, expected)))
}

/// Throws the `RangeError` for a limiter's `name` the headers cannot carry:
/// the rule the core holds a policy's limit names to (the JS layer keeps a
/// limiter's name itself).
#[wasm_bindgen(js_name = checkName)]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn check_name(name: &str) -> Result<(), JsValue> {
    ratekeeper::Headers::check_name(name).map_err(to_js)
}

/// Throws the `RangeError` for a bad duration the JS layer uses itself (`timeoutMs`).
#[wasm_bindgen(js_name = checkMillis)]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn check_millis(value: f64, name: &str) -> Result<(), JsValue> {
    shared::check_millis(value, name).map_err(to_js)
}

/// `limiter.toBytes()`.
#[wasm_bindgen(js_name = toBytes)]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn to_bytes(handle: &Handle) -> Vec<u8> {
    shared::to_bytes(&handle.0.borrow())
}

/// `limiter.restore(bytes)`, given the first [`ratekeeper::MAX_STATE_LEN`]
/// `+ 1` bytes alone, which answer as the whole does: wasm-bindgen copied
/// the whole into the module's memory, which never shrinks, and input of 2
/// GiB or more (past a 32-bit allocation) trapped in the copy, where the
/// napi build answers `state_corrupt`.
#[wasm_bindgen]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn restore(handle: &Handle, bytes: &Uint8Array) -> Result<(), JsValue> {
    let read = bytes.length().min(ratekeeper::MAX_STATE_LEN as u32 + 1);
    let bytes = bytes.subarray(0, read).to_vec();
    let restored = shared::restore(&mut handle.0.borrow_mut(), &bytes);
    settled(restored)
}

/// A keyed limiter: a core [`AnyKeyed`], and whether its hashes are seeded
/// (see [`seeded`]).
#[wasm_bindgen]
pub struct KeyedHandle(RefCell<AnyKeyed>, Cell<bool>);

#[wasm_bindgen]
extern "C" {
    /// `crypto.getRandomValues(words)`, which the host may lack or refuse
    /// (see [`entropy`]).
    #[wasm_bindgen(catch, js_namespace = crypto, js_name = getRandomValues)]
    fn get_random_values(words: &mut [u32]) -> Result<JsValue, JsValue>;
    /// `Math.random()`, likewise.
    #[wasm_bindgen(catch, js_namespace = Math, js_name = random)]
    fn math_random() -> Result<f64, JsValue>;
}

/// 64 random bits from the host, if it gives them now: from the Web Crypto
/// API's generator, else from `Math.random()` (V8's xorshift128+, seeded by
/// the system). wasm has no address-space layout randomization, so
/// foldhash's own seeds are the same in every instance, and keys could be
/// crafted to collide in a store (see `AnyKeyed::seed_hashes`).
#[cfg_attr(ratekeeper_size, optimize(size))]
fn entropy() -> Option<u64> {
    let mut words = [0u32; 2];
    if get_random_values(&mut words).is_ok() {
        return Some(u64::from(words[0]) << 32 | u64::from(words[1]));
    }
    let bits = |x: f64| (x * (1u64 << 53) as f64) as u64;
    Some(bits(math_random().ok()?) ^ (bits(math_random().ok()?) << 11))
}

thread_local! {
    // The stores' shared hash seed, made from the first entropy the host gives.
    static HASH_SEED: Cell<Option<&'static HashSeed>> = const { Cell::new(None) };
}

/// The shared hash seed and a store's own bits, if the host gives entropy now.
#[cfg_attr(ratekeeper_size, optimize(size))]
fn host_seed() -> Option<(&'static HashSeed, u64)> {
    let bits = entropy()?;
    let shared = HASH_SEED.with(|seed| {
        seed.get().unwrap_or_else(|| {
            // Once per instance: 48 bytes kept for its life, as foldhash's own global seed is.
            let made: &'static HashSeed = Box::leak(Box::new(HashSeed::new(
                bits.rotate_left(32) ^ 0x9e37_79b9_7f4a_7c15,
            )));
            seed.set(Some(made));
            made
        })
    });
    Some((shared, bits))
}

/// `store`, its hashes seeded from the host at its first operation (once,
/// unless `seeded` is reset; the keys held then are rehashed), not when it
/// is built: workerd refuses random values in a module's global scope,
/// where workers build their limiters. The entropy is taken before the
/// store is borrowed: a generator replaced by code that uses the store
/// finds it free.
fn seeded<'a, T>(
    store: &'a RefCell<T>,
    seeded: &Cell<bool>,
    seed: fn(&mut T, &'static HashSeed, u64),
) -> RefMut<'a, T> {
    if !seeded.get() {
        if let Some((shared, bits)) = host_seed() {
            seed(&mut store.borrow_mut(), shared, bits);
            seeded.set(true);
        }
    }
    store.borrow_mut()
}

/// `new KeyedLimiter(limiter, options)`: a store of copies of `prototype`'s configuration.
#[wasm_bindgen(js_name = keyedNew)]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn keyed_new(
    prototype: &Handle,
    max_keys: Option<f64>,
    eviction: Option<String>,
) -> Result<KeyedHandle, JsValue> {
    let prototype = shared::configuration(&prototype.0.borrow());
    let store = shared::keyed(prototype, max_keys, eviction.as_deref()).map_err(to_js)?;
    Ok(KeyedHandle(RefCell::new(store), Cell::new(false)))
}

/// The configuration of a keyed limiter's keys, as a new limiter handle
/// (see [`shared::keyed_prototype`] and [`unusable`]).
#[wasm_bindgen(js_name = keyedPrototype)]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn keyed_prototype(handle: &KeyedHandle, whole: bool) -> Handle {
    Handle(RefCell::new(shared::keyed_prototype(
        &handle.0.borrow(),
        whole,
    )))
}

/// `keyed.peek` (`op` 0), `keyed.tryAcquire` (1) or `keyed.reserve` (2)
/// (see `shared::keyed_op` and [`status`]).
#[wasm_bindgen(js_name = keyedOp)]
pub fn keyed_op(
    handle: &KeyedHandle,
    key: &str,
    cost: f64,
    max_wait_ms: f64,
    now_ms: f64,
    op: u32,
) -> u32 {
    keyed(handle, key.as_bytes(), cost, max_wait_ms, now_ms, op)
}

/// [`keyed_op`] for a key of bytes that are not UTF-8 (the JS layer's
/// `ByteKey`): no string is that key.
#[wasm_bindgen(js_name = keyedOpBytes)]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn keyed_op_bytes(
    handle: &KeyedHandle,
    key: &[u8],
    cost: f64,
    max_wait_ms: f64,
    now_ms: f64,
    op: u32,
) -> u32 {
    keyed(handle, key, cost, max_wait_ms, now_ms, op)
}

/// A key, or a field's name or value of a policy's request, as the JS layer
/// passes it outside the scratch: a string, or a `Uint8Array` (the bytes of
/// one that is not UTF-8); see [`part`].
enum Part {
    Text(String),
    Bytes(Vec<u8>),
}

impl shared::Part for Part {
    fn text(&self) -> Option<&str> {
        match self {
            Part::Text(text) => Some(text),
            Part::Bytes(_) => None,
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Part::Text(text) => text.as_bytes(),
            Part::Bytes(bytes) => bytes,
        }
    }
}

/// `value` as a [`Part`]; anything else (never passed so by the JS layer)
/// is refused, naming the argument `name`.
#[cfg_attr(ratekeeper_size, optimize(size))]
fn part(value: &JsValue, name: &'static str) -> Result<Part, ratekeeper::Error> {
    if let Some(text) = value.as_string() {
        return Ok(Part::Text(text));
    }
    match value.dyn_ref::<Uint8Array>() {
        Some(bytes) => Ok(Part::Bytes(bytes.to_vec())),
        None => Err(shared::type_error(name, "a string")),
    }
}

/// The keyed operation `op` on `key` (see [`keyed_op`]).
fn keyed(
    handle: &KeyedHandle,
    key: &[u8],
    cost: f64,
    max_wait_ms: f64,
    now_ms: f64,
    op: u32,
) -> u32 {
    let store = &mut seeded(&handle.0, &handle.1, AnyKeyed::seed_hashes);
    status(shared::keyed_op(
        store,
        key,
        cost,
        max_wait_ms,
        Now::Millis(now_ms),
        op,
    ))
}

/// [`keyed_op`] for the key of `len` bytes that the JS layer wrote into
/// [`key_scratch`]. A string argument costs wasm-bindgen an allocation and a
/// free per call, which took longer than the decision.
#[wasm_bindgen(js_name = keyedOpScratch)]
pub fn keyed_op_scratch(
    handle: &KeyedHandle,
    len: usize,
    cost: f64,
    max_wait_ms: f64,
    now_ms: f64,
    op: u32,
) -> u32 {
    let mut key = [0; KEY_SCRATCH];
    let Some(key) = written(&KEY, len, &mut key) else {
        // Never written so by the JS layer; cut short, keys would merge.
        return status(Err(shared::type_error("key", "a string")));
    };
    keyed(handle, key, cost, max_wait_ms, now_ms, op)
}

/// The `len` bytes the JS layer wrote into `cells`, copied into `into`;
/// `None` when that is more than they hold.
fn written<'a, const N: usize>(
    cells: &'static LocalKey<[Cell<u8>; N]>,
    len: usize,
    into: &'a mut [u8; N],
) -> Option<&'a [u8]> {
    let bytes = into.get_mut(..len)?;
    cells.with(|cells| {
        for (byte, cell) in bytes.iter_mut().zip(cells) {
            *byte = cell.get();
        }
    });
    Some(bytes)
}

/// `keyed.refund(key, cost, takenAtMs)`, or a keyed reservation's `cancel()` (see [`refund`]).
#[wasm_bindgen(js_name = keyedRefund)]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn keyed_refund(
    handle: &KeyedHandle,
    key: JsValue,
    cost: f64,
    taken: Vec<f64>,
) -> Result<(), JsValue> {
    let key = settled(part(&key, "key"))?;
    let mut store = seeded(&handle.0, &handle.1, AnyKeyed::seed_hashes);
    let refunded = shared::keyed_refund(&mut store, shared::Part::bytes(&key), cost, &taken);
    drop(store);
    settled(refunded)
}

/// `keyed.tryAcquireBatch(key, costs, nowMs)`.
#[wasm_bindgen(js_name = keyedTryAcquireBatch)]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn keyed_try_acquire_batch(
    handle: &KeyedHandle,
    key: JsValue,
    costs: Vec<f64>,
    now_ms: f64,
) -> Result<Vec<f64>, JsValue> {
    let key = settled(part(&key, "key"))?;
    let key = shared::Part::bytes(&key);
    let mut store = seeded(&handle.0, &handle.1, AnyKeyed::seed_hashes);
    let checked = shared::check_keyed_batch(&store, key, &costs, now_ms)
        .and_then(|(now, units)| store.prepare_batch(key, now, &units));
    drop(store);
    settled(checked)?;
    // Each cost through the keyed operation, which is in the build anyway:
    // the core's batch compiled another copy of each store's decision (2.2
    // KB gzipped). It answers as many `tryAcquire` calls would, and after
    // the checks and the key made ready (held, with room for its event)
    // none fails: none runs out of memory after a cost moved the store's
    // time.
    let mut flat = Vec::with_capacity(5 * costs.len());
    for &cost in &costs {
        let status = keyed(handle, key, cost, 0.0, now_ms, shared::TRY_ACQUIRE);
        if status == FAILED {
            return Err(take_error());
        }
        flat.push(f64::from(status));
        SCRATCH.with(|cells| flat.extend(cells.iter().map(Cell::get)));
    }
    Ok(flat)
}

/// `keyed.size`.
#[wasm_bindgen(js_name = keyedLen)]
pub fn keyed_len(handle: &KeyedHandle) -> u32 {
    handle.0.borrow().len().min(u32::MAX as usize) as u32
}

/// `keyed.reset(key)`: whether the store held the key.
#[wasm_bindgen(js_name = keyedReset)]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn keyed_reset(handle: &KeyedHandle, key: JsValue) -> Result<bool, JsValue> {
    let key = settled(part(&key, "key"))?;
    let held = seeded(&handle.0, &handle.1, AnyKeyed::seed_hashes).reset(shared::Part::bytes(&key));
    Ok(held)
}

/// `keyed.reclaim(nowMs)`.
#[wasm_bindgen(js_name = keyedReclaim)]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn keyed_reclaim(handle: &KeyedHandle, now_ms: f64) -> Result<(), JsValue> {
    let reclaimed = shared::keyed_reclaim(&mut handle.0.borrow_mut(), now_ms);
    settled(reclaimed)
}

/// A policy: a core [`Policy`], and whether its stores' hashes are seeded
/// (see [`seeded`]).
#[wasm_bindgen]
pub struct PolicyHandle(RefCell<Policy>, Cell<bool>);

/// `new Policy(config)`, the config as plain data (see [`policy_config`]).
#[wasm_bindgen(js_name = policyFromConfig)]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn policy_from_config(config: JsValue) -> Result<PolicyHandle, JsValue> {
    let policy = policy_config::policy_from_config(&In(config)).map_err(failure_to_js)?;
    Ok(PolicyHandle(RefCell::new(policy), Cell::new(false)))
}

/// An empty policy, for [`policy_add`].
#[wasm_bindgen(js_name = policyNew)]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn policy_new() -> PolicyHandle {
    PolicyHandle(RefCell::new(Policy::new()), Cell::new(false))
}

/// Adds a limit called `name`, keyed by `by`, each key a copy of `limiter`'s
/// configuration, at most `max_keys` keys held (`eviction` at the bound), to
/// a policy on the default monotonic clock (`monotonic`) or not: `true`
/// when it reads `Date.now()` from now on (see `shared::policy_add`).
#[wasm_bindgen(js_name = policyAdd)]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn policy_add(
    handle: &PolicyHandle,
    name: &str,
    by: Vec<String>,
    limiter: &Handle,
    max_keys: Option<f64>,
    eviction: Option<String>,
    monotonic: bool,
) -> Result<bool, JsValue> {
    let limiter = shared::configuration(&limiter.0.borrow());
    // A policy seeded already seeds the store added as its others (see
    // `Policy::add_store`); one not yet is seeded whole at its next operation.
    let mut policy = handle.0.borrow_mut();
    let bound = (max_keys, eviction.as_deref());
    let added = shared::policy_add(&mut policy, name, &by, limiter, bound, monotonic);
    drop(policy);
    added.map_err(failure_to_js)
}

/// `Policy.fromRates(rates, { algorithm, by })`.
#[wasm_bindgen(js_name = policyFromRates)]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn policy_from_rates(
    rates: &str,
    algorithm: &str,
    by: Vec<String>,
) -> Result<PolicyHandle, JsValue> {
    let policy = shared::policy_from_rates(rates, algorithm, &by).map_err(failure_to_js)?;
    Ok(PolicyHandle(RefCell::new(policy), Cell::new(false)))
}

/// Makes room in [`policy_details`] for the answer of a policy of `limits`
/// limits: the JS layer calls it for each policy it builds. The array may
/// then lie elsewhere: each policy operation says how often it moved.
#[wasm_bindgen(js_name = fitPolicy)]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn fit_policy(limits: usize) {
    let mut details = DETAILS.take();
    fit(&mut details, limits);
    DETAILS.set(details);
}

/// Makes room in `details` for the answer of a policy of `limits` limits,
/// counting the move.
#[cfg_attr(ratekeeper_size, optimize(size))]
fn fit(details: &mut Vec<f64>, limits: usize) {
    let len = 2 + 5 * limits;
    if details.len() < len {
        details.resize(len, 0.0);
        DETAILS_MOVED.set(DETAILS_MOVED.get().wrapping_add(1) & MOVES);
    }
}

/// The moves of [`policy_details`] a policy operation's answer counts (in
/// its bits above the status, see [`policy_answer`]): modulo 2^29.
const MOVES: u32 = (1 << 29) - 1;

/// A policy operation's answer: its status (as [`status`]'s) in the low
/// two bits, and how often [`policy_details`] has moved above them, so
/// that every copy of the JS layer over this module (a test runner may load
/// it twice) asks for the array again once another's policy moved it.
fn policy_answer(answer: shared::Answer) -> u32 {
    status(answer) | (DETAILS_MOVED.get() << 2)
}

/// A `Float64Array` over a policy operation's status and details
/// (`[status, ...]`, see `shared::policy_op`), as [`scratch`] is: a
/// returned array cost wasm-bindgen an allocation, a copy and a free per
/// decision. Detached once the memory grows, and moved by [`fit_policy`].
#[wasm_bindgen(js_name = policyDetails)]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn policy_details() -> Float64Array {
    let memory: WebAssembly::Memory = wasm_bindgen::memory().unchecked_into();
    let details = DETAILS.take();
    let (address, len) = (details.as_ptr() as u32, details.len() as u32);
    DETAILS.set(details);
    Float64Array::new_with_byte_offset_and_length(&memory.buffer(), address, len)
}

/// [`shared::policy_op`] on `p`, answering into [`policy_details`].
fn policy_decide(
    p: &mut Policy,
    request: &[(&str, &[u8])],
    (cost, max_wait_ms, now_ms, op): (f64, f64, f64, u32),
) -> shared::Answer {
    let mut details = DETAILS.take();
    // Short only after a trap took the array out (see `DETAILS`).
    fit(&mut details, p.len());
    let answer = shared::policy_op(p, request, cost, max_wait_ms, now_ms, op, &mut details);
    DETAILS.set(details);
    answer
}

/// `policy.peek` (`op` 0), `policy.tryAcquire` (1) or `policy.reserve` (2):
/// `fields` alternates names and values (see `shared::policy_op`). Answers
/// as [`policy_answer`] says, the numbers in the scratch and
/// [`policy_details`].
#[wasm_bindgen(js_name = policyOp)]
pub fn policy_op(
    handle: &PolicyHandle,
    fields: Vec<JsValue>,
    cost: f64,
    max_wait_ms: f64,
    now_ms: f64,
    op: u32,
) -> u32 {
    let request = match request_parts(&fields) {
        Ok(parts) => parts,
        Err(error) => return policy_answer(Err(error)),
    };
    let request = match shared::request(&request) {
        Ok(request) => request,
        Err(error) => return policy_answer(Err(error)),
    };
    let policy = &mut seeded(&handle.0, &handle.1, Policy::seed_hashes);
    policy_answer(policy_decide(
        policy,
        &request,
        (cost, max_wait_ms, now_ms, op),
    ))
}

/// A policy's request as the JS layer passes it (names and values
/// alternating), each a [`Part`].
#[cfg_attr(ratekeeper_size, optimize(size))]
fn request_parts(fields: &[JsValue]) -> Result<Vec<Part>, ratekeeper::Error> {
    fields.iter().map(|field| part(field, "request")).collect()
}

/// [`policy_op`] for the request of `len` bytes that the JS layer wrote
/// into [`field_scratch`] (see `shared::with_request_bytes`): strings
/// passed to wasm-bindgen cost an allocation and a copy each.
#[wasm_bindgen(js_name = policyOpScratch)]
pub fn policy_op_scratch(
    handle: &PolicyHandle,
    len: usize,
    cost: f64,
    max_wait_ms: f64,
    now_ms: f64,
    op: u32,
) -> u32 {
    let mut bytes = [0; FIELD_SCRATCH];
    let Some(bytes) = written(&FIELDS, len, &mut bytes) else {
        // Never written so by the JS layer.
        return policy_answer(Err(shared::type_error("request", "an object")));
    };
    let policy = &mut seeded(&handle.0, &handle.1, Policy::seed_hashes);
    policy_answer(shared::with_request_bytes(bytes, |request| {
        policy_decide(policy, request, (cost, max_wait_ms, now_ms, op))
    }))
}

/// `policy.refund(request, cost, takenAtMs)`, or a policy reservation's
/// `cancel()` (see [`refund`]), in the first `limits` limits: those the
/// policy had when the units were taken.
#[wasm_bindgen(js_name = policyRefund)]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn policy_refund(
    handle: &PolicyHandle,
    fields: Vec<JsValue>,
    cost: f64,
    taken: Vec<f64>,
    limits: usize,
) -> Result<(), JsValue> {
    let fields = settled(request_parts(&fields))?;
    let mut policy = seeded(&handle.0, &handle.1, Policy::seed_hashes);
    let refunded = shared::policy_refund(&mut policy, &fields, cost, &taken, limits);
    drop(policy);
    settled(refunded)
}

/// `policy.reset(request)`: how many limits held the request's key.
#[wasm_bindgen(js_name = policyReset)]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn policy_reset(handle: &PolicyHandle, fields: Vec<JsValue>) -> Result<u32, JsValue> {
    let fields = settled(request_parts(&fields))?;
    let mut policy = seeded(&handle.0, &handle.1, Policy::seed_hashes);
    let held = shared::policy_reset(&mut policy, &fields);
    drop(policy);
    settled(held)
}

/// `policy.reclaim(nowMs)`.
#[wasm_bindgen(js_name = policyReclaim)]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn policy_reclaim(handle: &PolicyHandle, now_ms: f64) -> Result<(), JsValue> {
    let reclaimed = shared::policy_reclaim(&mut handle.0.borrow_mut(), now_ms);
    settled(reclaimed)
}

/// What its waiters do around an aborted one, then each limit's name and its fields (see `shared::policy_limits`).
#[wasm_bindgen(js_name = policyLimits)]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn policy_limits(handle: &PolicyHandle) -> Vec<String> {
    shared::policy_limits(&handle.0.borrow())
}

/// The headers of a policy decision (see `shared::policy_headers`).
#[wasm_bindgen(js_name = policyHeaders)]
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn policy_headers(handle: &PolicyHandle, decision: Vec<f64>) -> Result<String, JsValue> {
    let headers = shared::policy_headers(&handle.0.borrow(), &decision);
    settled(headers)
}

/// Takes what `tryAcquire` takes and does nothing: the floor of a call.
#[wasm_bindgen]
pub fn noop(_handle: &Handle, _cost: f64, _now_ms: f64) -> bool {
    true
}
