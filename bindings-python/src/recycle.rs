//! Answering a limiter's decisions without allocating one object per call.
//!
//! Most callers read a Decision and drop it before the next call
//! (`if limiter.try_acquire(): ...`). Allocating the object and freeing it
//! again was about a fifth of such a call, so each limiter keeps the last
//! Decision it answered and, when nothing else refers to it any more (its
//! reference count is 1: this slot's), writes the new numbers into it and
//! answers it again. A Decision that anyone still holds is never changed:
//! a new one is made and kept instead. CPython reuses its own result tuples
//! the same way (`zip`, `enumerate`, `dict.items()` iteration).
//!
//! The slot is only touched with the GIL held, and no Python code runs
//! while it is borrowed, so no other thread can see it half-written. On a
//! free-threaded CPython (no GIL to rely on) nothing is kept and every call
//! makes a new Decision.

#[cfg(not(Py_GIL_DISABLED))]
use std::cell::UnsafeCell;

use pyo3::prelude::*;
use pyo3::types::PyString;
use ratekeeper::{Decision, Nanos};

use crate::decision::{Issuer, PyDecision};

/// The last Decision a limiter answered, to answer again when it is free.
#[derive(Default)]
pub struct Recycler {
    #[cfg(not(Py_GIL_DISABLED))]
    last: UnsafeCell<Option<Py<PyDecision>>>,
}

// SAFETY: `last` is read and written only by `answer`, with the GIL held and
// without running Python code while it is borrowed (which might let another
// thread take the GIL): the GIL serialises every access.
#[cfg(not(Py_GIL_DISABLED))]
unsafe impl Sync for Recycler {}

impl Recycler {
    /// `decision`, as a Decision whose headers name `name` and `window`:
    /// the last one answered, rewritten, when nothing else refers to it.
    ///
    /// Inlined, so that the decision's fields go from registers straight
    /// into the object: passed through memory, they were written 8 bytes at
    /// a time and copied 16 at a time, and each such load waits for the two
    /// stores under it (see [`crate::decision::settled`]).
    #[inline(always)]
    pub fn answer<'py>(
        &self,
        py: Python<'py>,
        decision: Decision,
        name: &Py<PyString>,
        window: Nanos,
    ) -> PyResult<Bound<'py, PyDecision>> {
        #[cfg(not(Py_GIL_DISABLED))]
        {
            // SAFETY: see `impl Sync`; the borrow ends before any Python code.
            if let Some(last) = unsafe { &*self.last.get() } {
                // SAFETY: `last` is a live object (the slot holds it).
                if unsafe { pyo3::ffi::Py_REFCNT(last.as_ptr()) } == 1 {
                    // Only this slot refers to it: no one can be reading it.
                    // SAFETY: the slot's Decisions are all named `name` (each
                    // limiter has its own slot), and nothing else refers to it.
                    unsafe { last.get().rewrite(decision, window) };
                    return Ok(last.bind(py).clone());
                }
            }
        }
        self.fresh(py, &decision, name, window)
    }

    /// [`Recycler::answer`] in a new Decision, kept as the last one.
    #[inline(never)]
    fn fresh<'py>(
        &self,
        py: Python<'py>,
        decision: &Decision,
        name: &Py<PyString>,
        window: Nanos,
    ) -> PyResult<Bound<'py, PyDecision>> {
        let issuer = Issuer::Named(name.clone_ref(py));
        let fresh = Bound::new(py, PyDecision::with_window(*decision, window, issuer))?;
        #[cfg(not(Py_GIL_DISABLED))]
        {
            // SAFETY: see `impl Sync`. Allocating `fresh` above may have run
            // Python code (a garbage collection), so the slot is borrowed
            // anew, and the Decision it held is dropped after the borrow.
            let previous = unsafe { (*self.last.get()).replace(fresh.clone().unbind()) };
            drop(previous);
        }
        Ok(fresh)
    }
}
