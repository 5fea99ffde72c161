//! The machinery every deciding class shares (`Limiter`, `KeyedLimiter`,
//! `Policy`), written once.
//!
//! [`Core`] is what the core offers each class (a limiter, a keyed store, a
//! policy), with the request's target (nothing, a key, a request's fields)
//! as a parameter. [`Subject`] is what a Python class adds: how to answer
//! and how to name a denial. The generic functions do each operation:
//! deciding ([`decide`], here), booking and giving back ([`reservations`],
//! [`waiting`], which check the events counted in [`marks`]); and
//! [`limiter_methods!`] ([`methods`]) writes the Python methods once for
//! all classes.

mod marks;
mod methods;
mod reservations;
mod waiting;

pub use self::marks::{every_mark, mark};
use self::marks::{Marks, Touch};
pub(crate) use self::methods::{limiter_methods, named_subject};
pub use self::reservations::{refund, reserve};
pub use self::waiting::{book_reservation, rebook, wait_helper};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use pyo3::prelude::*;
use pyo3::pyclass::boolean_struct::True;
use pyo3::{PyClass, PyTraverseError, PyVisit};
use ratekeeper::{Error, Nanos};

use crate::convert::{self, Now};
use crate::decision::PyDecision;
use crate::errors::{to_py, to_py_with};
use crate::lock::{CoreLock, Locked};
use crate::recycle::Recycler;

/// A deciding core: a limiter, a keyed store or a policy, asked about a
/// `Target` (nothing, a key, a request's fields).
pub trait Core: Send + 'static {
    /// What a request names besides its cost.
    type Target: ?Sized;
    /// The target kept by a reservation, to give its booking back.
    type Owned: Send + Sync + 'static;
    /// A decision, with whatever the class reports beside it.
    type Answer;

    fn try_acquire(
        &mut self,
        target: &Self::Target,
        now: Nanos,
        cost: u64,
    ) -> Result<Self::Answer, Error>;
    fn peek(&mut self, target: &Self::Target, now: Nanos, cost: u64)
        -> Result<Self::Answer, Error>;
    fn reserve(
        &mut self,
        target: &Self::Target,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> Result<Result<Nanos, Self::Answer>, Error>;
    fn refund(&mut self, target: &Self::Target, taken_at: Nanos, cost: u64) -> Result<(), Error>;
    /// What a booking made now reaches, for [`Core::refund_booking`]: a
    /// policy's number of limits (a limit added later never held it).
    fn extent(&self) -> usize {
        0
    }
    /// `refund` of a booking made when [`Core::extent`] was `extent`.
    fn refund_booking(
        &mut self,
        target: &Self::Target,
        taken_at: Nanos,
        cost: u64,
        extent: usize,
    ) -> Result<(), Error> {
        let _ = extent;
        self.refund(target, taken_at, cost)
    }
    /// Whether a booking may be given back wherever it stands in the queue
    /// (a window algorithm keeps each where it was counted). A bucket keeps
    /// no record of single bookings: one given back from the middle of the
    /// queue frees the slot at its end, which the next caller then shares
    /// with the last waiter. The default, `false`, is the safe answer.
    fn gives_back_anywhere(&self) -> bool {
        false
    }
    /// Whether the `acquire_async` waiters behind a cancelled booking move
    /// up into its slot (see `ratekeeper/_wait.py`): those of a GCRA or a
    /// leaky bucket, which land no later than they were (the core's
    /// `moves_up`). Else a booking is given back where it was counted (see
    /// [`Core::gives_back_anywhere`]), or only while it is the latest (a
    /// token bucket's, a policy's of several limits).
    fn moves_up(&self) -> bool;
    /// The marks (see [`Marks`]) of the states that a booking of `target`,
    /// made when [`Core::extent`] was `extent`, holds: none for a limiter,
    /// whose one state every call touches; a keyed store's key, a policy's
    /// key in each of its limits then (a call touches no other key's state).
    fn marks(&self, target: &Self::Target, extent: usize) -> Vec<u8> {
        let _ = (target, extent);
        Vec::new()
    }
    /// Words for `error`, about `target`, that the core's error cannot hold
    /// (the names of a policy's missing field and limit), if any.
    fn explain(&self, _error: &Error, _target: &Self::Target) -> Option<String> {
        None
    }
    fn to_owned(target: &Self::Target) -> Self::Owned;
    fn borrow(owned: &Self::Owned) -> &Self::Target;
}

/// The core of a class, locked per call, and the clock it reads.
pub struct Shared<C> {
    inner: CoreLock<C>,
    /// The clock given, or set later by [`Shared::default_clock`]; none:
    /// `time.monotonic`, read natively.
    clock: OnceLock<Py<PyAny>>,
    /// Bookings, reconfigures, restores and resets, counted: each one's
    /// number, its `seq`, is what [`Shared::marks`] remember.
    events: AtomicU64,
    /// The latest event that touched each state (see [`Marks`]).
    marks: Marks,
}

impl<C> Shared<C> {
    pub fn new(core: C, clock: Option<Py<PyAny>>) -> Self {
        let shared = Shared {
            inner: CoreLock::new(core),
            clock: OnceLock::new(),
            events: AtomicU64::new(0),
            marks: Marks::new(),
        };
        if let Some(clock) = clock {
            shared.default_clock(clock);
        }
        shared
    }

    /// Reads `clock` from now on, unless a clock was given already: how a
    /// policy that holds a calendar window comes to read `time.time`.
    pub fn default_clock(&self, clock: Py<PyAny>) {
        // Already set: that clock stays.
        let _ = self.clock.set(clock);
    }

    /// The core, locked (see [`CoreLock`]): no Python code may run until
    /// the guard drops.
    #[inline]
    pub fn lock(&self, py: Python<'_>) -> Locked<'_, C> {
        self.inner.lock(py)
    }

    /// `now`, or a reading of the clock.
    #[inline(always)]
    pub fn now(&self, py: Python<'_>, now: Option<Nanos>) -> PyResult<Nanos> {
        convert::now_or_clock(py, now, self.clock.get())
    }

    /// The clock given to the constructor, if any.
    pub fn clock(&self) -> Option<&Py<PyAny>> {
        self.clock.get()
    }

    /// Counts an event of kind `touch` on the states of `marks` (made with
    /// the core locked); returns its seq.
    fn event(&self, marks: &[u8], touch: Touch) -> u64 {
        let seq = self.events.fetch_add(1, Ordering::Relaxed) + 1;
        self.marks.touch(marks, seq, touch);
        seq
    }

    /// The events counted so far: the seq of the latest.
    fn events(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }

    /// Counts a reconfigure or a restore: every state changed.
    pub fn changed(&self) {
        self.event(&[], Touch::Foreign);
    }

    /// Counts a reset that found a key, whose marks are `marks` (made with
    /// the core locked). The store forgot that key's bookings, and the key,
    /// used again, may book the same slots anew: a booking of it made
    /// before, given back after, would free a unit of those (two requests
    /// in a window of one). The store cannot tell the two apart, so no
    /// booking of that key made before gives anything back: its slot goes
    /// unused. Those of other keys do.
    pub fn forgot(&self, marks: &[u8]) {
        self.event(marks, Touch::Reset);
    }

    /// The latest event of kind `touch` on the states of `marks`: one
    /// after a booking's seq touched them since.
    fn latest(&self, marks: &[u8], touch: Touch) -> u64 {
        self.marks.latest(marks, touch)
    }
}

/// A Python class deciding with a [`Core`].
pub trait Subject: PyClass<Frozen = True> + Sync {
    type Core: Core;

    fn shared(&self) -> &Shared<Self::Core>;

    /// What is left to answer once the core is unlocked (see
    /// [`Subject::settle`]).
    type Pending;

    /// `answer`, settled while `core` is still locked: answered already
    /// where that runs no Python code (a policy's last decision, written
    /// again from the core's own numbers), else what [`Subject::answer`]
    /// answers once the core is unlocked.
    fn settle<'py>(
        slf: &Bound<'py, Self>,
        core: &Self::Core,
        answer: <Self::Core as Core>::Answer,
    ) -> Settled<'py, Self::Pending>;

    /// The Python answer: a `Decision` (a `PolicyDecision` for a policy).
    fn answer<'py>(
        slf: &Bound<'py, Self>,
        pending: Self::Pending,
    ) -> PyResult<Bound<'py, PyDecision>>;

    /// `RateLimited` for a request `denied` that may not wait long enough.
    fn rate_limited(&self, py: Python<'_>, denied: &<Self::Core as Core>::Answer) -> PyErr;

    /// The decision kept to be answered again.
    fn recycler(&self) -> &Recycler;

    /// `__traverse__`: the clock given and the decision kept, which may
    /// refer back to this object (a bound method of an object holding the
    /// limiter; a policy's decision, which refers to its policy), a cycle
    /// only the garbage collector can break, and only if it sees it.
    fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Some(clock) = self.shared().clock() {
            visit.call(clock)?;
        }
        self.recycler().traverse(visit)
    }
}

type Target<S> = <<S as Subject>::Core as Core>::Target;
type Answer<S> = <<S as Subject>::Core as Core>::Answer;

/// An answer settled with the core locked (see [`Subject::settle`]).
pub enum Settled<'py, P> {
    /// Answered.
    Ready(Bound<'py, PyDecision>),
    /// To answer once the core is unlocked.
    Pending(P),
}

impl<'py, P> Settled<'py, P> {
    /// The answer, made now if it was pending.
    #[inline(always)]
    fn answer<S: Subject<Pending = P>>(
        self,
        slf: &Bound<'py, S>,
    ) -> PyResult<Bound<'py, PyDecision>> {
        match self {
            Settled::Ready(decision) => Ok(decision),
            Settled::Pending(pending) => S::answer(slf, pending),
        }
    }
}

/// `decision(core, target, now)` at `now` or the clock's reading, answered.
#[inline]
pub fn decide<'py, S: Subject>(
    slf: &Bound<'py, S>,
    now: Option<Now>,
    target: &Target<S>,
    decision: impl FnOnce(&mut S::Core, &Target<S>, Nanos) -> Result<Answer<S>, Error>,
) -> PyResult<Bound<'py, PyDecision>> {
    let (shared, py) = (slf.get().shared(), slf.py());
    let at = shared.now(py, now.map(|now| now.at))?;
    let decided = {
        let mut core = shared.lock(py);
        match decision(&mut core, target, at) {
            Ok(answer) => Ok(S::settle(slf, &core, answer)),
            Err(err) => Err(explained(&*core, err, target)),
        }
    };
    match decided {
        Ok(settled) => answered(settled.answer(slf)?, now),
        Err(err) => Err(err.raise(py)),
    }
}

/// A core error, with the words its core found for it (see [`Core::explain`]).
struct Explained(Error, Option<String>);

/// `error` of `core` about `target`, explained while the core is still locked.
#[cold]
fn explained<C: Core>(core: &C, error: Error, target: &C::Target) -> Explained {
    Explained(error, core.explain(&error, target))
}

impl Explained {
    fn raise(self, py: Python<'_>) -> PyErr {
        match self.1 {
            Some(words) => to_py_with(py, self.0, words),
            None => to_py(py, self.0),
        }
    }
}

/// `decision`, its waits counted from the float `now` the caller gave, if
/// any (see [`PyDecision::count_from`]).
#[inline]
pub fn answered(
    decision: Bound<'_, PyDecision>,
    now: Option<Now>,
) -> PyResult<Bound<'_, PyDecision>> {
    if let Some(now) = now {
        // SAFETY: `decision` was just answered and not yet returned: no
        // Python code has seen it.
        unsafe { decision.get().count_from(now.secs) };
    }
    Ok(decision)
}
