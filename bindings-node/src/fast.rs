//! The hot path written against Node-API directly: `tryAcquire`, `peek`,
//! `reserve`, `keyedOp`, `keyedOpScratch`, `policyOpScratch` and the
//! benchmark's `noop`.
//!
//! napi-rs 3 wraps every `#[napi]` function in a "native borrow scope" (a
//! heap allocation, a mutex-guarded registry and thread-local stacks, per
//! call), which on the machine of the benchmark cost about 150 ns: several
//! times the decision itself. These few functions skip it, and go further:
//! their numbers arrive in the scratch (`index.js` writes them there, see
//! [`crate::slot`]) and their status leaves there, because reading each
//! argument or making the return value is one more Node-API call. A short
//! ASCII key is written there too (`keyedOpScratch`); another key is passed
//! as an argument (`keyedOp`: a string, or the bytes of one that is not UTF-8). So is a policy's request of short ASCII
//! fields (`policyOpScratch`); another goes to napi-rs's `policyOp`. They are added to the exports at load
//! ([`register`]), so `native.d.ts` (generated from `#[napi]` items) does not
//! list them; `index.js` is their only caller.
//!
//! Each callback catches panics (none is expected: the core does not panic)
//! so that none unwinds into Node, and reports every failure as the same
//! exception the rest of the binding throws ([`crate::errors`]).

use std::cell::Cell;
use std::ffi::{c_char, CStr};
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use napi::sys::{self, napi_callback_info, napi_env, napi_value, Status};
use napi::Env;
use ratekeeper::{AnyKeyed, AnyLimiter, Error, Policy};

use crate::clock;
use crate::errors::throw;
use crate::shared::{self, Answer, Now};
use crate::{slot, with_scratch, write_into, HeapBytes, Tls, KEYED, LIMITERS, POLICIES};

/// Keys up to this many UTF-8 bytes are read into the stack.
const INLINE_KEY: usize = 128;

/// The first argument of a call (`undefined` when none was given).
///
/// # Safety
/// `env` and `info` are those of the running callback.
unsafe fn first_arg(env: napi_env, info: napi_callback_info) -> napi_value {
    let mut argc = 1;
    let mut arg = ptr::null_mut();
    // Only fails for null arguments, which Node never passes.
    sys::napi_get_cb_info(
        env,
        info,
        &mut argc,
        &mut arg,
        ptr::null_mut(),
        ptr::null_mut(),
    );
    arg
}

/// The numbers of a hot operation, besides its handle: those every one
/// reads. A bound on a wait and a keyed operation's kind are read where
/// they are used ([`Args::max_wait`], [`Args::op`]), so that a `tryAcquire`
/// does not load them.
struct Args {
    cost: f64,
    now: Now,
}

/// The slot `at` of the scratch `s` (NaN when the scratch is too short),
/// loaded in one 8-byte load, as JS stored it: a wider load spanning two of
/// its stores waits for both to reach the cache, a stall that cost about a
/// tenth of the call.
#[inline(always)]
fn slot_value(s: &[f64], at: usize) -> f64 {
    // SAFETY: `x` is a valid, aligned reference.
    s.get(at)
        .map_or(f64::NAN, |x| unsafe { ptr::read_volatile(x) })
}

impl Args {
    /// maxWaitMs, from the scratch `s`.
    fn max_wait(s: &[f64]) -> f64 {
        slot_value(s, slot::ARGS + 2)
    }

    /// op, from the scratch `s`.
    fn op(s: &[f64]) -> u32 {
        slot_value(s, slot::ARGS + 4) as u32
    }
}

/// The arguments of a hot operation in the scratch `s` (see [`crate::slot`]):
/// handle, cost, nowMs (read here when the JS layer asked, see [`clock`]);
/// `None` before `index.js` handed the scratch over.
///
/// The handle is taken: its slot is left NaN, so that a call whose
/// arguments JS could not write (its view of the scratch detached, as
/// `ArrayBuffer.prototype.transfer` does) is refused as no limiter's, as in
/// [`crate::memory`]'s copying mode, rather than made again on the last
/// call's limiter with the last call's cost.
#[inline(always)]
fn inputs(s: &mut [f64]) -> Option<(usize, Args)> {
    if s.len() <= slot::CLOCK {
        return None;
    }
    let [handle, cost, now, read_clock] =
        [slot::ARGS, slot::ARGS + 1, slot::ARGS + 3, slot::CLOCK].map(|at| slot_value(s, at));
    s[slot::ARGS] = f64::NAN;
    // A handle is a table index that `index.js` got from this addon; the
    // cast saturates, so anything else (negative, fractional, NaN) differs.
    let index = handle as u32;
    if f64::from(index) != handle {
        return None;
    }
    // NaN (never expected: index.js ties the clock at load) fails as a bad `now`.
    let now = if read_clock == 1.0 {
        clock::now().map_or(Now::Millis(f64::NAN), Now::Read)
    } else {
        Now::Millis(now)
    };
    Some((index as usize, Args { cost, now }))
}

fn bad_handle() -> Error {
    shared::type_error("handle", "a limiter")
}

/// Calls `f` with the UTF-8 bytes of the string `value` (the key), from the
/// stack when it is short; or with the bytes of the `Uint8Array` `value`
/// (a key of bytes that are not UTF-8: the JS layer's copy of them), asked
/// only once `value` is no string.
///
/// # Safety
/// `value` belongs to the running callback's `env`.
unsafe fn with_key<R, E: From<Error>>(
    env: napi_env,
    value: napi_value,
    f: impl FnOnce(&[u8]) -> Result<R, E>,
) -> Result<R, E> {
    let not_a_string = || shared::type_error("key", "a string");
    let mut inline = [0u8; INLINE_KEY];
    let mut len = 0usize;
    let buf = inline.as_mut_ptr().cast::<c_char>();
    match sys::napi_get_value_string_utf8(env, value, buf, INLINE_KEY, &mut len) {
        Status::napi_ok => {}
        Status::napi_string_expected => {
            return match uint8_array(env, value) {
                Some(bytes) => f(bytes),
                None => Err(not_a_string().into()),
            }
        }
        _ => return Err(not_a_string().into()),
    }
    // Node copies whole characters only, and leaves room for a NUL: a copy
    // shorter than the buffer by more than one 4-byte character is the whole
    // string; a longer one may have been cut, so measure and copy again.
    if len + 4 < INLINE_KEY {
        return f(&inline[..len]);
    }
    if sys::napi_get_value_string_utf8(env, value, ptr::null_mut(), 0, &mut len) != Status::napi_ok
    {
        return Err(not_a_string().into());
    }
    let mut heap = vec![0u8; len + 1];
    let buf = heap.as_mut_ptr().cast::<c_char>();
    if sys::napi_get_value_string_utf8(env, value, buf, len + 1, &mut len) != Status::napi_ok {
        return Err(not_a_string().into());
    }
    f(&heap[..len])
}

/// The bytes of `value` when it is a `Uint8Array`, borrowed for the running
/// callback (which runs no JS that could detach or resize its buffer).
///
/// # Safety
/// `value` belongs to the running callback's `env`.
unsafe fn uint8_array<'a>(env: napi_env, value: napi_value) -> Option<&'a [u8]> {
    let mut kind = 0;
    let mut len = 0usize;
    let mut data = ptr::null_mut();
    // Fails, without an exception pending, for anything but a typed array.
    let status = sys::napi_get_typedarray_info(
        env,
        value,
        &mut kind,
        &mut len,
        &mut data,
        ptr::null_mut(),
        ptr::null_mut(),
    );
    if status != Status::napi_ok || kind != sys::TypedarrayType::uint8_array {
        return None;
    }
    if len == 0 || data.is_null() {
        return Some(&[]);
    }
    // SAFETY: Node gives the view's own bytes (`data` is past its byte
    // offset), `len` of them for a Uint8Array, alive while `value` is.
    Some(std::slice::from_raw_parts(data.cast::<u8>(), len))
}

/// Runs `f` on the limiter `slot` of this thread.
fn on_limiter(slot: usize, f: impl FnOnce(&mut AnyLimiter) -> Answer) -> Answer {
    LIMITERS.with_borrow_mut(|t| match t.slots.get_mut(slot) {
        Some(Some(limiter)) => f(limiter),
        _ => Err(bad_handle().into()),
    })
}

thread_local! {
    // How the heap of keyed stores and policies changed in the running
    // callback, told to V8 once the scratch is no longer borrowed ([`flush`]).
    static UNREPORTED: Cell<i64> = const { Cell::new(0) };
}

/// Runs `f` on the entry `slot` of `table`, noting how its heap changed.
fn on_sized<T: HeapBytes>(
    table: &'static Tls<T>,
    slot: usize,
    missing: impl FnOnce() -> Error,
    f: impl FnOnce(&mut T) -> Answer,
) -> Answer {
    match table.with_borrow_mut(|t| t.on(slot, true, f)) {
        Some((answer, delta)) => {
            UNREPORTED.set(UNREPORTED.get() + delta);
            answer
        }
        None => Err(missing().into()),
    }
}

/// Tells V8 how the heap changed in this callback (see [`UNREPORTED`]).
fn flush(env: napi_env) {
    crate::report(&Env::from_raw(env), UNREPORTED.take());
}

/// Runs `f` on the keyed limiter `slot` of this thread.
fn on_keyed(slot: usize, f: impl FnOnce(&mut AnyKeyed) -> Answer) -> Answer {
    on_sized(&KEYED, slot, bad_handle, f)
}

/// The bytes `index.js` wrote into the slots `area` of the scratch `s`, as
/// many as it wrote into the slot `len`, which is left NaN (see
/// [`slot::KEY_LEN`]); `None` when that is not a whole number of bytes that
/// fit.
fn take_scratch_bytes(s: &mut [f64], len: usize, area: Range<usize>) -> Option<&[u8]> {
    let written = s
        .get_mut(len)
        .map_or(f64::NAN, |x| std::mem::replace(x, f64::NAN));
    let slots = s.get(area).unwrap_or(&[]);
    // SAFETY: `slots` is valid for reads of its size in bytes, any byte is a
    // valid `u8`, and nothing writes the scratch during this call.
    let bytes =
        unsafe { std::slice::from_raw_parts(slots.as_ptr().cast::<u8>(), size_of_val(slots)) };
    let len = written as usize;
    (len as f64 == written && len <= bytes.len()).then(|| &bytes[..len])
}

/// The key `index.js` wrote into the scratch `s` for `keyedOpScratch`.
fn take_scratch_key(s: &mut [f64]) -> Result<&[u8], Error> {
    take_scratch_bytes(s, slot::KEY_LEN, slot::KEY..slot::FIELDS_LEN)
        .ok_or_else(|| shared::type_error("key", "a string"))
}

/// Runs `f` on the policy `slot` of this thread.
fn on_policy(slot: usize, f: impl FnOnce(&mut Policy) -> Answer) -> Answer {
    on_sized(
        &POLICIES,
        slot,
        || shared::type_error("handle", "a policy"),
        f,
    )
}

/// The body of every callback: runs `decide` on the arguments in the
/// scratch (and the scratch itself, to read a key from), writes its answer
/// and status there, or throws.
///
/// # Safety
/// `env` is that of the running callback.
unsafe fn answer(
    env: napi_env,
    decide: impl FnOnce(usize, Args, &mut [f64]) -> Answer,
) -> napi_value {
    // The scratch is borrowed once for the whole call (each borrow of a
    // thread-local costs a lookup).
    let decided = catch_unwind(AssertUnwindSafe(|| {
        with_scratch(env, |s| -> Result<(), Box<Error>> {
            let (handle, args) = inputs(s).ok_or_else(bad_handle)?;
            let (yes, out) = decide(handle, args, s)?;
            write_into(s, &out);
            if let Some(status) = s.get_mut(slot::STATUS) {
                *status = if yes { 1.0 } else { 0.0 };
            }
            Ok(())
        })
    }));
    match decided {
        Ok(Ok(())) => {}
        Ok(Err(error)) => {
            // The exception is pending once `throw` returns; its napi error is not needed.
            let _ = throw(&Env::from_raw(env), *error);
        }
        Err(_) => internal_error(env),
    }
    // `undefined`: the answer is in the scratch.
    ptr::null_mut()
}

/// `tryAcquire()`: [handle, cost, -, nowMs] in the scratch.
unsafe extern "C" fn try_acquire(env: napi_env, _: napi_callback_info) -> napi_value {
    answer(env, |h, a, _| {
        on_limiter(h, |l| shared::try_acquire(l, a.cost, a.now))
    })
}

/// `peek()`: as [`try_acquire`].
unsafe extern "C" fn peek(env: napi_env, _: napi_callback_info) -> napi_value {
    answer(env, |h, a, _| {
        on_limiter(h, |l| shared::peek(l, a.cost, a.now))
    })
}

/// `reserve()`: [handle, cost, maxWaitMs, nowMs] in the scratch.
unsafe extern "C" fn reserve(env: napi_env, _: napi_callback_info) -> napi_value {
    answer(env, |h, a, s| {
        on_limiter(h, |l| shared::reserve(l, a.cost, Args::max_wait(s), a.now))
    })
}

/// `keyedOp(key)`: [handle, cost, maxWaitMs, nowMs, op] in the scratch (see
/// [`shared::keyed_op`]).
unsafe extern "C" fn keyed_op(env: napi_env, info: napi_callback_info) -> napi_value {
    let key = first_arg(env, info);
    let done = answer(env, |h, a, s| {
        let (max_wait, op) = (Args::max_wait(s), Args::op(s));
        with_key(env, key, |key| keyed(h, &a, (max_wait, op), key))
    });
    flush(env);
    done
}

/// `keyedOpScratch()`: [`keyed_op`] for the ASCII key `index.js` wrote into
/// the scratch ([`slot::KEY`]), since reading a string argument through
/// Node-API costs more than a keyed decision.
unsafe extern "C" fn keyed_op_scratch(env: napi_env, _: napi_callback_info) -> napi_value {
    let done = answer(env, |h, a, s| {
        let (max_wait, op) = (Args::max_wait(s), Args::op(s));
        keyed(h, &a, (max_wait, op), take_scratch_key(s)?)
    });
    flush(env);
    done
}

/// The keyed operation `op` on `key` of the keyed limiter `h`.
fn keyed(h: usize, a: &Args, (max_wait, op): (f64, u32), key: &[u8]) -> Answer {
    on_keyed(h, |store| {
        shared::keyed_op(store, key, a.cost, max_wait, a.now, op)
    })
}

/// `policyOpScratch()`: a policy's `peek`, `tryAcquire` or `reserve` (op
/// 0, 1, 2) of [handle, cost, maxWaitMs, nowMs, op] in the scratch, for
/// the request `index.js` wrote into it as bytes (see
/// [`shared::with_request_bytes`]); the answer as `policyOp` leaves it.
unsafe extern "C" fn policy_op_scratch(env: napi_env, _: napi_callback_info) -> napi_value {
    let decided = catch_unwind(AssertUnwindSafe(|| {
        with_scratch(env, |s| -> Answer {
            let (h, a) = inputs(s).ok_or_else(|| shared::type_error("handle", "a policy"))?;
            let now_ms = match a.now {
                Now::Millis(ms) => ms,
                Now::Read(nanos) => nanos.0 as f64 / 1e6,
            };
            let args = (a.cost, Args::max_wait(s), now_ms, Args::op(s));
            let bytes = take_scratch_bytes(s, slot::FIELDS_LEN, slot::FIELDS..slot::LEN)
                .ok_or_else(|| shared::type_error("request", "an object"))?;
            shared::with_request_bytes(bytes, |request| {
                on_policy(h, |p| crate::policy_decide(env, p, request, args))
            })
        })
    }));
    match decided {
        // Thrown, if it failed: the error is pending once this returns.
        Ok(answer) => drop(crate::policy_status(&Env::from_raw(env), answer)),
        Err(_) => internal_error(env),
    }
    flush(env);
    ptr::null_mut()
}

/// Throws the error of a panic caught in a callback (none is expected).
///
/// # Safety
/// `env` is that of the running callback.
unsafe fn internal_error(env: napi_env) {
    let message = c"ratekeeper: internal error (a panic in the native addon)";
    sys::napi_throw_error(env, ptr::null(), message.as_ptr());
}

/// `noop()`: what `tryAcquire` does but decide; the floor of
/// bench/bench.cjs, which also calls it alone, again and again: its handle
/// is put back (see [`inputs`]).
unsafe extern "C" fn noop(env: napi_env, _: napi_callback_info) -> napi_value {
    answer(env, |handle, _, s| {
        s[slot::ARGS] = handle as f64;
        Ok((true, [0.0; 4]))
    })
}

type Callback = unsafe extern "C" fn(napi_env, napi_callback_info) -> napi_value;

const FUNCTIONS: [(&CStr, Callback); 7] = [
    (c"tryAcquire", try_acquire),
    (c"peek", peek),
    (c"reserve", reserve),
    (c"keyedOp", keyed_op),
    (c"keyedOpScratch", keyed_op_scratch),
    (c"policyOpScratch", policy_op_scratch),
    (c"noop", noop),
];

/// Adds the functions above to the addon's exports.
pub fn register(env: &Env, exports: napi_value) -> napi::Result<()> {
    for (name, callback) in FUNCTIONS {
        let mut function = ptr::null_mut();
        // SAFETY: `env` is live during module registration, `name` is a
        // NUL-terminated string of the given length, and `exports` is the
        // exports object.
        let status = unsafe {
            let created = sys::napi_create_function(
                env.raw(),
                name.as_ptr(),
                name.count_bytes() as isize,
                Some(callback),
                ptr::null_mut(),
                &mut function,
            );
            if created == Status::napi_ok {
                sys::napi_set_named_property(env.raw(), exports, name.as_ptr(), function)
            } else {
                created
            }
        };
        if status != Status::napi_ok {
            return Err(napi::Error::new(
                napi::Status::GenericFailure,
                format!("could not export {}", name.to_string_lossy()),
            ));
        }
    }
    Ok(())
}
