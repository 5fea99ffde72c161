//! The hot path written against Node-API directly: `tryAcquire`, `peek`,
//! `reserve`, `keyedOp` and the benchmark's `noop`.
//!
//! napi-rs 3 wraps every `#[napi]` function in a "native borrow scope" (a
//! heap allocation, a mutex-guarded registry and thread-local stacks, per
//! call), which on the machine of the benchmark cost about 150 ns: several
//! times the decision itself. These few functions take only numbers and one
//! string, so they read them with Node-API themselves and skip that machinery;
//! everything else stays `#[napi]`. They are added to the exports at load
//! ([`register`]), so `native.d.ts` (generated from `#[napi]` items) does not
//! list them; `lib/api.cjs` is their only caller.
//!
//! Each callback catches panics (none is expected: the core does not panic)
//! so that none unwinds into Node, and reports every failure as the same
//! exception the rest of the binding throws ([`crate::errors`]).

use std::ffi::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use napi::sys::{self, napi_callback_info, napi_env, napi_value, Status};
use napi::Env;
use ratekeeper::{AnyKeyed, AnyLimiter, Error};

use crate::errors::throw;
use crate::shared::{self, Answer};
use crate::{write, KEYED, LIMITERS};

/// Keys up to this many UTF-8 bytes are read into the stack.
const INLINE_KEY: usize = 128;

/// The first `N` arguments of a call (`undefined` for those not given).
///
/// # Safety
/// `env` and `info` are those of the running callback.
unsafe fn args<const N: usize>(env: napi_env, info: napi_callback_info) -> [napi_value; N] {
    let mut argc = N;
    let mut argv = [ptr::null_mut(); N];
    // Only fails for null arguments, which Node never passes.
    sys::napi_get_cb_info(
        env,
        info,
        &mut argc,
        argv.as_mut_ptr(),
        ptr::null_mut(),
        ptr::null_mut(),
    );
    argv
}

/// A number argument; anything else is the `TypeError` naming `name`.
///
/// # Safety
/// `value` belongs to the running callback's `env`.
unsafe fn number(env: napi_env, value: napi_value, name: &str) -> Result<f64, Error> {
    let mut out = 0.0;
    match sys::napi_get_value_double(env, value, &mut out) {
        Status::napi_ok => Ok(out),
        _ => Err(shared::type_error(name, "a number")),
    }
}

/// A handle argument (see [`crate::Table`]).
///
/// # Safety
/// As for [`number`].
unsafe fn handle(env: napi_env, value: napi_value) -> Result<usize, Error> {
    let mut out = 0u32;
    match sys::napi_get_value_uint32(env, value, &mut out) {
        Status::napi_ok => Ok(out as usize),
        _ => Err(bad_handle()),
    }
}

fn bad_handle() -> Error {
    shared::type_error("handle", "a limiter")
}

/// Calls `f` with the UTF-8 bytes of the string `value` (the key), from the
/// stack when it is short.
///
/// # Safety
/// As for [`number`].
unsafe fn with_key<R>(
    env: napi_env,
    value: napi_value,
    f: impl FnOnce(&[u8]) -> Result<R, Error>,
) -> Result<R, Error> {
    let not_a_string = || shared::type_error("key", "a string");
    let mut inline = [0u8; INLINE_KEY];
    let mut len = 0usize;
    let buf = inline.as_mut_ptr().cast::<c_char>();
    if sys::napi_get_value_string_utf8(env, value, buf, INLINE_KEY, &mut len) != Status::napi_ok {
        return Err(not_a_string());
    }
    // Node copies whole characters only, and leaves room for a NUL: a copy
    // shorter than the buffer by more than one 4-byte character is the whole
    // string; a longer one may have been cut, so measure and copy again.
    if len + 4 < INLINE_KEY {
        return f(&inline[..len]);
    }
    if sys::napi_get_value_string_utf8(env, value, ptr::null_mut(), 0, &mut len) != Status::napi_ok
    {
        return Err(not_a_string());
    }
    let mut heap = vec![0u8; len + 1];
    let buf = heap.as_mut_ptr().cast::<c_char>();
    if sys::napi_get_value_string_utf8(env, value, buf, len + 1, &mut len) != Status::napi_ok {
        return Err(not_a_string());
    }
    f(&heap[..len])
}

/// Runs `f` on the limiter `slot` of this thread.
fn on_limiter(slot: usize, f: impl FnOnce(&mut AnyLimiter) -> Answer) -> Answer {
    LIMITERS.with_borrow_mut(|t| match t.slots.get_mut(slot) {
        Some(Some(limiter)) => f(limiter),
        _ => Err(bad_handle()),
    })
}

/// Runs `f` on the keyed limiter `slot` of this thread.
fn on_keyed(slot: usize, f: impl FnOnce(&mut AnyKeyed) -> Answer) -> Answer {
    KEYED.with_borrow_mut(|t| match t.slots.get_mut(slot) {
        Some(Some(store)) => f(store),
        _ => Err(bad_handle()),
    })
}

/// The body of every callback: runs `decide`, writes its numbers to the
/// scratch and returns its status (1: yes, 0: no), or throws.
///
/// # Safety
/// `env` is that of the running callback.
unsafe fn answer(env: napi_env, decide: impl FnOnce() -> Answer) -> napi_value {
    let status = match catch_unwind(AssertUnwindSafe(decide)) {
        Ok(Ok((yes, out))) => {
            write(&out);
            u32::from(yes)
        }
        Ok(Err(error)) => {
            // The exception is pending once `throw` returns; its napi error is not needed.
            let _ = throw(&Env::from_raw(env), error);
            return ptr::null_mut();
        }
        Err(_) => {
            let message = c"ratekeeper: internal error (a panic in the native addon)";
            sys::napi_throw_error(env, ptr::null(), message.as_ptr());
            return ptr::null_mut();
        }
    };
    let mut result = ptr::null_mut();
    sys::napi_create_uint32(env, status, &mut result);
    result
}

/// A call `(handle, cost, nowMs)` answered by `op` on the limiter.
///
/// # Safety
/// `env` and `info` are those of the running callback.
unsafe fn on_cost_now(
    env: napi_env,
    info: napi_callback_info,
    op: impl FnOnce(&mut AnyLimiter, f64, f64) -> Answer,
) -> napi_value {
    let [h, cost, now] = args::<3>(env, info);
    answer(env, || {
        let h = handle(env, h)?;
        let (cost, now) = (number(env, cost, "cost")?, number(env, now, "now")?);
        on_limiter(h, |l| op(l, cost, now))
    })
}

/// `tryAcquire(handle, cost, nowMs)`.
unsafe extern "C" fn try_acquire(env: napi_env, info: napi_callback_info) -> napi_value {
    on_cost_now(env, info, shared::try_acquire)
}

/// `peek(handle, cost, nowMs)`.
unsafe extern "C" fn peek(env: napi_env, info: napi_callback_info) -> napi_value {
    on_cost_now(env, info, |l, cost, now| shared::peek(l, cost, now))
}

/// `reserve(handle, cost, maxWaitMs, nowMs)`.
unsafe extern "C" fn reserve(env: napi_env, info: napi_callback_info) -> napi_value {
    let [h, cost, max_wait, now] = args::<4>(env, info);
    answer(env, || {
        let h = handle(env, h)?;
        let cost = number(env, cost, "cost")?;
        let max_wait = number(env, max_wait, "max_wait")?;
        let now = number(env, now, "now")?;
        on_limiter(h, |l| shared::reserve(l, cost, max_wait, now))
    })
}

/// `keyedOp(handle, key, cost, maxWaitMs, nowMs, op)` (see [`shared::keyed_op`]).
unsafe extern "C" fn keyed_op(env: napi_env, info: napi_callback_info) -> napi_value {
    let [h, key, cost, max_wait, now, op] = args::<6>(env, info);
    answer(env, || {
        let h = handle(env, h)?;
        let cost = number(env, cost, "cost")?;
        let max_wait = number(env, max_wait, "max_wait")?;
        let now = number(env, now, "now")?;
        let op = number(env, op, "op")? as u32;
        with_key(env, key, |key| {
            on_keyed(h, |s| shared::keyed_op(s, key, cost, max_wait, now, op))
        })
    })
}

/// `noop(handle, cost, nowMs)`: reads what `tryAcquire` reads, decides
/// nothing; the floor of bench/bench.cjs.
unsafe extern "C" fn noop(env: napi_env, info: napi_callback_info) -> napi_value {
    let [h, cost, now] = args::<3>(env, info);
    answer(env, || {
        let _ = (
            handle(env, h)?,
            number(env, cost, "cost")?,
            number(env, now, "now")?,
        );
        Ok((true, [0.0; 4]))
    })
}

type Callback = unsafe extern "C" fn(napi_env, napi_callback_info) -> napi_value;

const FUNCTIONS: [(&str, Callback); 5] = [
    ("tryAcquire", try_acquire),
    ("peek", peek),
    ("reserve", reserve),
    ("keyedOp", keyed_op),
    ("noop", noop),
];

/// Adds the functions above to the addon's exports.
pub fn register(env: &Env, exports: napi_value) -> napi::Result<()> {
    for (name, callback) in FUNCTIONS {
        let mut function = ptr::null_mut();
        // SAFETY: `env` is live during module registration, `name` is valid
        // UTF-8 of the given length, and `exports` is the exports object.
        let status = unsafe {
            let created = sys::napi_create_function(
                env.raw(),
                name.as_ptr().cast(),
                name.len() as isize,
                Some(callback),
                ptr::null_mut(),
                &mut function,
            );
            if created == Status::napi_ok {
                let name = std::ffi::CString::new(name).expect("no NUL in a name");
                sys::napi_set_named_property(env.raw(), exports, name.as_ptr(), function)
            } else {
                created
            }
        };
        if status != Status::napi_ok {
            return Err(napi::Error::new(
                napi::Status::GenericFailure,
                format!("could not export {name}"),
            ));
        }
    }
    Ok(())
}
