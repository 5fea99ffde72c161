//! The lock around each class's core: the GIL, where there is one.
//!
//! A decision borrows its limiter for a few nanoseconds, with the GIL held
//! and without running Python code. A mutex there cost two atomic
//! instructions per call (lock and unlock): `TokenBucket.try_acquire()` took
//! 62 ns with it and 58 without, on the machine of our benchmarks. With the
//! GIL, no other thread can reach the core while one holds it, provided
//! that no Python code runs while the core is borrowed: Python code may
//! release the GIL (and may call the same limiter again). Every borrow in this crate keeps
//! to that rule: it makes no Python object (an allocation may run the
//! garbage collector, and so finalizers), calls no Python, and releases
//! nothing. A flag checks the rule: a borrow while another is alive panics
//! (pyo3 raises `PanicException`) instead of aliasing the core.
//!
//! A free-threaded CPython (`Py_GIL_DISABLED`) has no GIL to rely on: there
//! the lock is a mutex.

#[cfg(not(Py_GIL_DISABLED))]
use std::cell::{Cell, UnsafeCell};
use std::ops::{Deref, DerefMut};
#[cfg(Py_GIL_DISABLED)]
use std::sync::{Mutex, MutexGuard, PoisonError};

use pyo3::Python;

/// A core that one caller at a time may borrow, with the GIL held.
pub struct CoreLock<C> {
    #[cfg(not(Py_GIL_DISABLED))]
    borrowed: Cell<bool>,
    #[cfg(not(Py_GIL_DISABLED))]
    core: UnsafeCell<C>,
    #[cfg(Py_GIL_DISABLED)]
    core: Mutex<C>,
}

// SAFETY: `core` and `borrowed` are reached only through `lock`, which takes
// the GIL's token, and a borrow ends before any Python code runs (see the
// module's docs): the GIL serialises every access. `C: Send`, since threads
// take turns with it.
#[cfg(not(Py_GIL_DISABLED))]
unsafe impl<C: Send> Sync for CoreLock<C> {}

impl<C> CoreLock<C> {
    pub fn new(core: C) -> Self {
        CoreLock {
            #[cfg(not(Py_GIL_DISABLED))]
            borrowed: Cell::new(false),
            #[cfg(not(Py_GIL_DISABLED))]
            core: UnsafeCell::new(core),
            #[cfg(Py_GIL_DISABLED)]
            core: Mutex::new(core),
        }
    }

    /// The core, borrowed until the guard drops. The token proves the GIL
    /// is held; no Python code may run before the guard drops.
    #[inline]
    pub fn lock(&self, _py: Python<'_>) -> Locked<'_, C> {
        #[cfg(not(Py_GIL_DISABLED))]
        {
            if self.borrowed.replace(true) {
                in_use();
            }
            Locked { lock: self }
        }
        #[cfg(Py_GIL_DISABLED)]
        {
            // The core never panics while locked, so its state is sound.
            Locked(self.core.lock().unwrap_or_else(PoisonError::into_inner))
        }
    }
}

/// A borrow of Python code running inside another borrow: a bug here.
#[cfg(not(Py_GIL_DISABLED))]
#[cold]
#[inline(never)]
fn in_use() -> ! {
    panic!(
        "ratekeeper: a limiter was used while it was deciding (Python code ran inside a decision)"
    )
}

/// A borrowed core (see [`CoreLock::lock`]).
#[cfg(not(Py_GIL_DISABLED))]
pub struct Locked<'a, C> {
    lock: &'a CoreLock<C>,
}

/// A borrowed core (see [`CoreLock::lock`]).
#[cfg(Py_GIL_DISABLED)]
pub struct Locked<'a, C>(MutexGuard<'a, C>);

#[cfg(not(Py_GIL_DISABLED))]
impl<C> Drop for Locked<'_, C> {
    #[inline]
    fn drop(&mut self) {
        self.lock.borrowed.set(false);
    }
}

impl<C> Deref for Locked<'_, C> {
    type Target = C;

    #[inline]
    fn deref(&self) -> &C {
        #[cfg(not(Py_GIL_DISABLED))]
        // SAFETY: this guard is the one borrow alive (`borrowed`), and the
        // GIL keeps other threads out until it drops.
        unsafe {
            &*self.lock.core.get()
        }
        #[cfg(Py_GIL_DISABLED)]
        &self.0
    }
}

impl<C> DerefMut for Locked<'_, C> {
    #[inline]
    fn deref_mut(&mut self) -> &mut C {
        #[cfg(not(Py_GIL_DISABLED))]
        // SAFETY: as for `deref`; `&mut self` makes this the only reference
        // through the guard.
        unsafe {
            &mut *self.lock.core.get()
        }
        #[cfg(Py_GIL_DISABLED)]
        &mut self.0
    }
}
