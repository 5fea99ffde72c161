//! Answering a limiter's decisions without allocating one object per call.
//!
//! Most callers read a Decision and drop it before the next call
//! (`if limiter.try_acquire(): ...`). Allocating the object and freeing it
//! again was about a fifth of such a call, so each limiter keeps the last
//! Decision it answered and, when nothing else refers to it any more (its
//! reference count is 1: this slot's), writes the new numbers into it and
//! answers it again. A Decision that anyone still holds is never changed:
//! a new one is made and kept instead; nor is one answered again whose
//! holder changed its class (`__class__` assigned). CPython reuses its own
//! result tuples the same way (`zip`, `enumerate`, `dict.items()` iteration).
//!
//! The slot is only touched with the GIL held, and no Python code runs
//! while it is borrowed, so no other thread can see it half-written. On a
//! free-threaded CPython (no GIL to rely on) nothing is kept and every call
//! makes a new Decision.

#[cfg(not(Py_GIL_DISABLED))]
use std::cell::UnsafeCell;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyType};
use pyo3::{PyTraverseError, PyVisit};
use ratekeeper::{Decision, Nanos};

use crate::decision::{Issuer, PyDecision};

/// The last Decision a limiter answered, to answer again when it is free.
#[derive(Default)]
pub struct Recycler {
    /// The decision, and the class it was made of (see [`Recycler::reuse`]).
    #[cfg(not(Py_GIL_DISABLED))]
    last: UnsafeCell<Option<(Py<PyDecision>, Py<PyType>)>>,
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
        let reused = self.reuse(py, |last| {
            // SAFETY: as `reuse` calls it; and the slot's Decisions are all
            // named `name` (each limiter has its own slot).
            unsafe { last.rewrite(decision, window) };
            true
        });
        match reused {
            Some(last) => Ok(last),
            None => self.fresh(py, &decision, name, window),
        }
    }

    /// A policy's `decision`, denied by the limit `denied_by`, of limits
    /// that decided `limits`: the last one answered, rewritten, when nothing
    /// else refers to it and the policy had as many limits then; `None`
    /// otherwise (the caller then makes a new one and [`keep`]s it).
    ///
    /// Runs no Python code, so the caller may hold the policy's lock.
    ///
    /// [`keep`]: Recycler::keep
    #[inline(always)]
    pub fn reuse_policy<'py>(
        &self,
        py: Python<'py>,
        decision: Decision,
        limits: &[Decision],
        denied_by: Option<usize>,
    ) -> Option<Bound<'py, PyDecision>> {
        // SAFETY (both): as `reuse` calls it; and the slot's decisions are
        // all this policy's (each policy has its own slot).
        self.reuse(py, |last| match &last.issuer {
            Issuer::Policy { limits: own, .. } if unsafe { own.rewrite(limits, denied_by) } => {
                unsafe { last.rewrite(decision, Nanos::ZERO) };
                true
            }
            _ => false,
        })
    }

    /// The last decision answered, once `rewrite` made it the new answer,
    /// if nothing else refers to it (else `rewrite` is not called); `None`
    /// when there is none, it is held, or `rewrite` declined.
    ///
    /// `rewrite` may write into the decision (`PyDecision::rewrite`): when
    /// it is called, nothing but the slot refers to the decision, and the
    /// GIL is held.
    #[inline(always)]
    fn reuse<'py>(
        &self,
        py: Python<'py>,
        rewrite: impl FnOnce(&PyDecision) -> bool,
    ) -> Option<Bound<'py, PyDecision>> {
        #[cfg(not(Py_GIL_DISABLED))]
        {
            // SAFETY: see `impl Sync`; the borrow ends before any Python code.
            let (last, class) = unsafe { &*self.last.get() }.as_ref()?;
            let at = last.as_ptr();
            // Still of the class it was made of: Python lets its holder
            // assign `__class__` (a subclass of the same layout, or
            // `PolicyDecision` for a `Decision`), and answered again it
            // would carry that class to the next caller (a `bool()` that
            // says allowed for a denial, a policy's answer without
            // `denied_by`). Such a one is left to its holder, and the
            // next answer made anew.
            // SAFETY (both): `last` is a live object (the slot holds it).
            if unsafe { ffi::Py_REFCNT(at) } == 1
                && unsafe { ffi::Py_TYPE(at) } == class.as_ptr().cast()
                && rewrite(last.get())
            {
                // Only this slot referred to it: no one could be reading it.
                return Some(last.bind(py).clone());
            }
        }
        #[cfg(Py_GIL_DISABLED)]
        let _ = (py, rewrite);
        None
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
        Ok(self.keep(fresh))
    }

    /// Visits the decision kept, for the garbage collector: a policy's
    /// decision refers to its policy, which keeps the decision here, a
    /// cycle only the collector can break (see [`Recycler::clear`]).
    pub fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        #[cfg(not(Py_GIL_DISABLED))]
        {
            // SAFETY: see `impl Sync`; the collector runs with the GIL held,
            // and no borrow of the slot allocates (so none is alive now).
            if let Some((last, _)) = unsafe { &*self.last.get() } {
                visit.call(last)?;
            }
        }
        #[cfg(Py_GIL_DISABLED)]
        let _ = visit;
        Ok(())
    }

    /// Drops the decision kept (the garbage collector breaking a cycle).
    pub fn clear(&self) {
        #[cfg(not(Py_GIL_DISABLED))]
        {
            // SAFETY: as in `traverse`; the decision is dropped after the
            // borrow, as dropping it may run Python code.
            let last = unsafe { (*self.last.get()).take() };
            drop(last);
        }
    }

    /// `fresh`, kept as the last decision answered.
    #[inline(never)]
    pub fn keep<'py>(&self, fresh: Bound<'py, PyDecision>) -> Bound<'py, PyDecision> {
        #[cfg(not(Py_GIL_DISABLED))]
        {
            // SAFETY: see `impl Sync`. Allocating `fresh` may have run
            // Python code (a garbage collection), so the slot is borrowed
            // anew, and the Decision it held is dropped after the borrow.
            let kept = (fresh.clone().unbind(), fresh.get_type().unbind());
            let previous = unsafe { (*self.last.get()).replace(kept) };
            drop(previous);
        }
        fresh
    }
}
