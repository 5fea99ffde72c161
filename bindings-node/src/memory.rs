//! The memory the addon shares with the JS layer: the scratch (see
//! [`crate::slot`]) and the array a policy's details are written into.
//!
//! Both are allocated and owned here, one set per JS thread, and JS gets
//! `Float64Array`s over them (external `ArrayBuffer`s): [`scratch`] and
//! [`policy_details`]. JS can get hold of those arrays (getters of
//! `%TypedArray%.prototype` it redefined see them) and detach their
//! buffer (a transfer); had the memory been JS's, the new owner would free
//! it once collected, under the addon's feet. This memory is never freed
//! while the thread's env lives, so a detach only costs JS its view, whose
//! operations are refused from then on (`index.js` fetches its views once,
//! so as to keep them constants of the hot path; and the hot path takes the
//! handle out of the scratch once read, see [`crate::fast`]). The hot path reads the memory
//! through a pointer kept in a thread-local ([`with_scratch`]): looking the
//! array up through Node-API at each call would cost a third of a decision.
//!
//! Where the runtime forbids external buffers (Electron, whose V8 sandbox
//! refuses them: `napi_no_external_buffers_allowed`), JS gets arrays of its
//! own instead, which the addon finds again through a reference at each call
//! and copies its memory from and back into: slower, but no pointer into
//! JS's memory outlives a call ([`Mode::Copied`]).
//!
//! Memory JS viewed through external buffers is never freed: a transfer
//! may move such a buffer to another thread (where the runtime detaches
//! rather than copies it), and Node finalizes it at this env's teardown
//! all the same, while that thread may still read it; about a kilobyte per
//! thread stays. In the copying mode, the memory is freed once the env is
//! torn down (a worker ending; see [`env_gone`]).

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::ptr;

use napi::bindgen_prelude::Unknown;
use napi::sys::{self, napi_env, napi_ref, napi_value, Status, TypedarrayType};
use napi::Env;
use napi_derive::napi;

use crate::slot;

thread_local! {
    // The hot path's two pointers: where the scratch and the newest details
    // are, while JS views this very memory (null otherwise: before the
    // first view, in `Mode::Copied`, after the env is gone).
    static SCRATCH_AT: Cell<*mut f64> = const { Cell::new(ptr::null_mut()) };
    static DETAILS_AT: Cell<(*mut f64, usize)> = const { Cell::new((ptr::null_mut(), 0)) };
    static OWNED: RefCell<Owned> = const { RefCell::new(Owned::new()) };
    // What keeps the memory: one for the env while it lives, one for each
    // view JS was given whose finalizer has not run. A `Cell` apart from
    // `OWNED`, since a finalizer may run whenever Node-API is called.
    static HOLDERS: Cell<usize> = const { Cell::new(0) };
}

/// Who sees the memory.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Nothing allocated yet.
    Unset,
    /// JS views the addon's memory itself.
    Direct,
    /// JS has arrays of its own (these references), which each call copies
    /// from and back into (null until made; either may be detached).
    Copied {
        scratch: napi_ref,
        details: napi_ref,
    },
    /// The env was torn down: nothing is shared any more.
    Gone,
}

/// This thread's memory.
struct Owned {
    mode: Mode,
    /// [`slot::LEN`] numbers (null before the first [`scratch`]).
    scratch: *mut f64,
    /// Every details block made, the newest last: an older one is kept, as
    /// JS may still view it, and the total is at most twice the newest.
    details: Vec<(*mut f64, usize)>,
    /// Bumped when the details grow, and kept in [`slot::GENERATION`]: a
    /// copy of the JS layer holding a view of older details fetches the
    /// newest when it sees the number change.
    generation: f64,
    /// Whether JS was given external buffers of this memory ([`Mode::Direct`]):
    /// then it is never freed (see [`release`]).
    shared: bool,
}

impl Owned {
    const fn new() -> Self {
        Owned {
            mode: Mode::Unset,
            scratch: ptr::null_mut(),
            details: Vec::new(),
            generation: 1.0,
            shared: false,
        }
    }
}

/// The most numbers the details of a policy made here need at first
/// (status, deniedBy, five per limit of four limits).
const FIRST_DETAILS: usize = 2 + 5 * 4;

/// A block of `len` zeroed numbers, owned by [`OWNED`] until [`release`]
/// frees it.
fn allocate(len: usize) -> *mut f64 {
    Box::into_raw(vec![0.0f64; len].into_boxed_slice()).cast::<f64>()
}

/// Frees the block `at` of `len` numbers made by [`allocate`].
///
/// # Safety
/// `at` and `len` are those of a block from [`allocate`] not yet freed,
/// which nothing reads or writes any more.
unsafe fn free_block(at: *mut f64, len: usize) {
    drop(Box::from_raw(ptr::slice_from_raw_parts_mut(at, len)));
}

/// One holder of the memory less; the last frees it.
fn release() {
    // `try_with`: a finalizer that ran while the thread ends finds nothing
    // (and leaks, which is safe).
    let last = HOLDERS
        .try_with(|holders| {
            let left = holders.get().saturating_sub(1);
            holders.set(left);
            left == 0
        })
        .unwrap_or(false);
    if !last {
        return;
    }
    let _ = OWNED.try_with(|owned| {
        let mut owned = owned.borrow_mut();
        if owned.mode != Mode::Gone {
            return; // a view finalized while the env lives: the env holds on
        }
        if owned.shared {
            // Never freed: where a transfer moves an external buffer to
            // another thread (runtimes that detach rather than copy it),
            // Node still finalizes it at this env's teardown, while that
            // thread may read it. A leak of about a kilobyte per thread.
            return;
        }
        // SAFETY: the env is gone (no call of the addon runs any more) and
        // no view of these blocks is left: nothing reads them.
        unsafe {
            if !owned.scratch.is_null() {
                free_block(owned.scratch, slot::LEN);
            }
            for (at, len) in owned.details.drain(..) {
                free_block(at, len);
            }
        }
        owned.scratch = ptr::null_mut();
    });
}

/// The env cleanup hook: from now on no call reaches this memory, which is
/// freed once JS's views are finalized too (Node finalizes those left at
/// teardown as well).
unsafe extern "C" fn env_gone(_: *mut c_void) {
    SCRATCH_AT.set(ptr::null_mut());
    DETAILS_AT.set((ptr::null_mut(), 0));
    OWNED.with_borrow_mut(|owned| owned.mode = Mode::Gone);
    release();
}

/// The finalizer of a view JS was given (its `ArrayBuffer` collected,
/// wherever a transfer moved it).
unsafe extern "C" fn view_gone(_: napi_env, _: *mut c_void, _: *mut c_void) {
    release();
}

fn failed(what: &str, status: i32) -> napi::Error {
    napi::Error::new(
        napi::Status::GenericFailure,
        format!("ratekeeper: could not {what} (Node-API status {status})"),
    )
}

/// Allocates the scratch on first use, choosing the mode, and registers
/// [`env_gone`].
fn ensure(env: napi_env) -> napi::Result<()> {
    let mode = OWNED.with_borrow(|owned| owned.mode);
    match mode {
        Mode::Unset => {}
        Mode::Gone => return Err(failed("share memory after the env was torn down", 0)),
        _ => return Ok(()),
    }
    let scratch = allocate(slot::LEN);
    let details = allocate(FIRST_DETAILS);
    // SAFETY: `scratch` was just allocated with `slot::LEN` numbers.
    unsafe { scratch.add(slot::GENERATION).write(1.0) };
    // SAFETY: `env` is that of the running call.
    let status = unsafe { sys::napi_add_env_cleanup_hook(env, Some(env_gone), ptr::null_mut()) };
    if status != Status::napi_ok {
        // Never freed then (a leak of a few hundred bytes), but still safe.
        HOLDERS.set(HOLDERS.get() + 1);
    }
    HOLDERS.set(HOLDERS.get() + 1);
    // One external buffer tried, to learn whether the runtime allows them;
    // RATEKEEPER_NO_EXTERNAL_BUFFERS makes as if it did not, so that the
    // test suite runs the copying path too (tests/js/native-memory.test.cjs).
    let mut probe = ptr::null_mut();
    let external = if std::env::var_os("RATEKEEPER_NO_EXTERNAL_BUFFERS").is_some() {
        Status::napi_no_external_buffers_allowed
    } else {
        // SAFETY: `scratch` stays valid while a view of it may be read (see
        // `release`); `view_gone` releases the hold taken for it.
        unsafe {
            sys::napi_create_external_arraybuffer(
                env,
                scratch.cast(),
                slot::LEN * 8,
                Some(view_gone),
                ptr::null_mut(),
                &mut probe,
            )
        }
    };
    let mode = if external == Status::napi_ok {
        HOLDERS.set(HOLDERS.get() + 1);
        SCRATCH_AT.set(scratch);
        DETAILS_AT.set((details, FIRST_DETAILS));
        Mode::Direct
    } else {
        Mode::Copied {
            scratch: ptr::null_mut(),
            details: ptr::null_mut(),
        }
    };
    OWNED.with_borrow_mut(|owned| {
        owned.mode = mode;
        owned.shared = mode == Mode::Direct;
        owned.scratch = scratch;
        owned.details.push((details, FIRST_DETAILS));
    });
    Ok(())
}

/// A `Float64Array` over the `len` numbers at `at`: in [`Mode::Direct`],
/// on an external buffer of that very memory; in [`Mode::Copied`], the
/// array `held` refers to, if still attached and as long, else a new
/// array holding a copy of the memory, `held` then made to refer to it.
fn view(
    env: napi_env,
    at: *mut f64,
    len: usize,
    held: Option<&mut napi_ref>,
) -> napi::Result<napi_value> {
    let mut buffer = ptr::null_mut();
    let status = match held {
        None => {
            // SAFETY: `at` holds `len` numbers and stays valid while a view
            // of it may be read (see `release`), which `view_gone` ends.
            let status = unsafe {
                sys::napi_create_external_arraybuffer(
                    env,
                    at.cast(),
                    len * 8,
                    Some(view_gone),
                    ptr::null_mut(),
                    &mut buffer,
                )
            };
            if status == Status::napi_ok {
                HOLDERS.set(HOLDERS.get() + 1);
            }
            status
        }
        Some(held) => {
            // SAFETY: `held` was made on this env.
            if let Some((array, _, found)) = unsafe { array_of(env, *held) } {
                if found == len {
                    return Ok(array);
                }
            }
            let mut data = ptr::null_mut();
            // SAFETY: `env` is that of the running call; out pointers valid.
            let status =
                unsafe { sys::napi_create_arraybuffer(env, len * 8, &mut data, &mut buffer) };
            if status == Status::napi_ok {
                // SAFETY: `data` is the new buffer's `len * 8` bytes, `at`
                // holds `len` numbers; the two are distinct.
                unsafe { ptr::copy_nonoverlapping(at, data.cast::<f64>(), len) };
            }
            status
        }
    };
    if status != Status::napi_ok {
        return Err(failed("make an ArrayBuffer", status));
    }
    let mut array = ptr::null_mut();
    // SAFETY: `buffer` is an ArrayBuffer of `len * 8` bytes.
    let status = unsafe {
        sys::napi_create_typedarray(
            env,
            TypedarrayType::float64_array,
            len,
            buffer,
            0,
            &mut array,
        )
    };
    if status != Status::napi_ok {
        return Err(failed("make a Float64Array", status));
    }
    Ok(array)
}

/// Replaces the reference `held` with one to `array` (this env's).
fn hold(env: napi_env, held: &mut napi_ref, array: napi_value) -> napi::Result<()> {
    let mut reference = ptr::null_mut();
    // SAFETY: `env` and `array` are the running call's.
    let status = unsafe { sys::napi_create_reference(env, array, 1, &mut reference) };
    if status != Status::napi_ok {
        return Err(failed("keep a reference", status));
    }
    if !held.is_null() {
        // SAFETY: made on this env, which is alive.
        unsafe { sys::napi_delete_reference(env, *held) };
    }
    *held = reference;
    Ok(())
}

/// The `Float64Array` `held` refers to, its memory and length; `None` when
/// there is none or its buffer was detached.
///
/// # Safety
/// `held` is null or a reference made on `env`, the running call's.
unsafe fn array_of(env: napi_env, held: napi_ref) -> Option<(napi_value, *mut f64, usize)> {
    if held.is_null() {
        return None;
    }
    let mut array = ptr::null_mut();
    let (mut len, mut data) = (0usize, ptr::null_mut());
    let found = sys::napi_get_reference_value(env, held, &mut array) == Status::napi_ok
        && !array.is_null()
        && sys::napi_get_typedarray_info(
            env,
            array,
            ptr::null_mut(),
            &mut len,
            &mut data,
            ptr::null_mut(),
            ptr::null_mut(),
        ) == Status::napi_ok;
    // A detached buffer has no memory and a length of 0.
    (found && !data.is_null() && len > 0).then_some((array, data.cast::<f64>(), len))
}

/// The scratch, as a `Float64Array` of [`slot::LEN`] numbers: every copy
/// of the JS layer on a thread gets the same memory (JS runs one operation
/// at a time, each writing its arguments and reading its answer around one
/// call). In [`Mode::Copied`], a call after JS's array was detached makes a
/// new one.
#[napi(catch_unwind, ts_return_type = "Float64Array")]
pub fn scratch(env: &Env) -> napi::Result<Unknown<'_>> {
    let raw = env.raw();
    ensure(raw)?;
    let (mode, at) = OWNED.with_borrow(|owned| (owned.mode, owned.scratch));
    let array = match mode {
        Mode::Copied { mut scratch, .. } => {
            let array = view(raw, at, slot::LEN, Some(&mut scratch))?;
            hold(raw, &mut scratch, array)?;
            OWNED.with_borrow_mut(|owned| {
                if let Mode::Copied { scratch: held, .. } = &mut owned.mode {
                    *held = scratch;
                }
            });
            array
        }
        _ => view(raw, at, slot::LEN, None)?,
    };
    // SAFETY: `array` is a value of this env, made during this call.
    Ok(unsafe { Unknown::from_raw_unchecked(raw, array) })
}

/// The array policy operations answer into (status, deniedBy, five numbers
/// per limit), at least `at_least` numbers long: a returned array would
/// cost a Node-API call per number. Growing it makes a new block (twice as
/// large at least) and bumps [`slot::GENERATION`], so that every copy of
/// the JS layer fetches the new one before its next operation.
#[napi(catch_unwind, ts_return_type = "Float64Array")]
pub fn policy_details(env: &Env, at_least: u32) -> napi::Result<Unknown<'_>> {
    let raw = env.raw();
    ensure(raw)?;
    let at_least = at_least as usize;
    let (mode, (at, len)) = OWNED.with_borrow_mut(|owned| {
        let &(newest, len) = owned.details.last().expect("made by `ensure`");
        if len >= at_least {
            return (owned.mode, (newest, len));
        }
        let len = at_least.max(2 * len);
        let grown = allocate(len);
        owned.details.push((grown, len));
        owned.generation += 1.0;
        // SAFETY: the scratch holds `slot::LEN` numbers; no `&mut` to it
        // is alive (no operation runs during this call).
        unsafe { owned.scratch.add(slot::GENERATION).write(owned.generation) };
        if owned.mode == Mode::Direct {
            DETAILS_AT.set((grown, len));
        }
        (owned.mode, (grown, len))
    });
    let array = match mode {
        Mode::Copied {
            scratch,
            mut details,
        } => {
            // The JS scratch learns the generation now, not at its next copy.
            // SAFETY: `scratch` was made on this env.
            if let Some((_, data, n)) = unsafe { array_of(raw, scratch) } {
                if n > slot::GENERATION {
                    let generation = OWNED.with_borrow(|owned| owned.generation);
                    // SAFETY: `data` is the attached array's memory, `n` long.
                    unsafe { data.add(slot::GENERATION).write(generation) };
                }
            }
            let array = view(raw, at, len, Some(&mut details))?;
            hold(raw, &mut details, array)?;
            OWNED.with_borrow_mut(|owned| {
                if let Mode::Copied { details: held, .. } = &mut owned.mode {
                    *held = details;
                }
            });
            array
        }
        _ => view(raw, at, len, None)?,
    };
    // SAFETY: `array` is a value of this env, made during this call.
    Ok(unsafe { Unknown::from_raw_unchecked(raw, array) })
}

/// Runs `f` on the scratch; on an empty slice before [`scratch`] was
/// called, or in [`Mode::Copied`] while JS's array is detached.
///
/// `env` is the running call's.
#[inline(always)]
pub(crate) fn with_scratch<R>(env: napi_env, f: impl FnOnce(&mut [f64]) -> R) -> R {
    let at = SCRATCH_AT.get();
    if at.is_null() {
        return with_copied_scratch(env, f);
    }
    // SAFETY: `at` is this thread's scratch, `slot::LEN` numbers, never
    // freed while the env lives (see `release`); JS, which alone could
    // write it through its views, does not run during this call.
    f(unsafe { std::slice::from_raw_parts_mut(at, slot::LEN) })
}

/// [`with_scratch`] in [`Mode::Copied`] (or with no scratch): JS's array
/// is copied into the addon's scratch, `f` runs there, and the result is
/// copied back.
#[cold]
#[inline(never)]
fn with_copied_scratch<R>(env: napi_env, f: impl FnOnce(&mut [f64]) -> R) -> R {
    let (mode, at, generation) = OWNED.with_borrow(|o| (o.mode, o.scratch, o.generation));
    let Mode::Copied { scratch: held, .. } = mode else {
        return f(&mut []);
    };
    // SAFETY: `held` is null or was made on this env.
    match unsafe { array_of(env, held) } {
        Some((_, data, len)) if len >= slot::LEN => {
            // SAFETY: `data` is the attached JS array's memory, at least
            // `slot::LEN` numbers; `at` is the addon's; the two are distinct,
            // and nothing else touches either during this call.
            unsafe {
                ptr::copy_nonoverlapping(data, at, slot::LEN);
                at.add(slot::GENERATION).write(generation);
                let answer = f(std::slice::from_raw_parts_mut(at, slot::LEN));
                // Looked up again rather than trusted: no JS runs during `f`,
                // but this path is not the hot one.
                if let Some((_, data, len)) = array_of(env, held) {
                    ptr::copy_nonoverlapping(at, data, slot::LEN.min(len));
                }
                answer
            }
        }
        _ => f(&mut []),
    }
}

/// Runs `f` on the newest details (on an empty slice before there are any).
///
/// `env` is the running call's.
pub(crate) fn with_details<R>(env: napi_env, f: impl FnOnce(&mut [f64]) -> R) -> R {
    let (at, len) = DETAILS_AT.get();
    if !at.is_null() {
        // SAFETY: as in `with_scratch`: this thread's newest block, `len`
        // numbers, never freed while the env lives, and a distinct
        // allocation from the scratch the caller may hold.
        return f(unsafe { std::slice::from_raw_parts_mut(at, len) });
    }
    let (mode, newest) = OWNED.with_borrow(|o| (o.mode, o.details.last().copied()));
    let (Mode::Copied { details: held, .. }, Some((at, len))) = (mode, newest) else {
        return f(&mut []);
    };
    // SAFETY: as in `with_scratch`; nothing else touches `at` meanwhile.
    let answer = f(unsafe { std::slice::from_raw_parts_mut(at, len) });
    // Into JS's array, if still attached; else the JS layer, finding its
    // view detached, fetches a new one: a copy of this block.
    // SAFETY: `held` is null or was made on this env; `data` is the
    // attached array's memory, `n` numbers, distinct from the addon's block.
    if let Some((_, data, n)) = unsafe { array_of(env, held) } {
        unsafe { ptr::copy_nonoverlapping(at, data, len.min(n)) };
    }
    answer
}
