//! The machinery every deciding class shares (`Limiter`, `KeyedLimiter`,
//! `Policy`), written once.
//!
//! [`Core`] is what the core offers each class (a limiter, a keyed store, a
//! policy), with the request's target (nothing, a key, a request's fields)
//! as a parameter. [`Subject`] is what a Python class adds: how to answer
//! and how to name a denial. The generic functions here do each operation,
//! and [`limiter_methods!`] writes the Python methods once for all classes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use pyo3::prelude::*;
use pyo3::pyclass::boolean_struct::True;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyModule, PyString, PyTuple};
use pyo3::{PyClass, PyTraverseError, PyVisit};
use ratekeeper::{Error, Nanos};

use crate::convert::{self, Now};
use crate::decision::{PyDecision, PyReservation, Refund};
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

/// What touched a state since a booking, for the give-back of that booking
/// (`acquire`'s below, `_withdraw` in `ratekeeper/_wait.py`, a
/// reservation's `cancel()`). Each kind counts those after it too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Touch {
    /// Any event: a bucket gives a booking back only while none touched its
    /// states since (it gives back exactly only its latest).
    Any = 0,
    /// One that no `acquire_async` waiter made (a thread's `acquire`, a
    /// `reserve()`, a reset, a reconfigure, a restore): the waiters behind a
    /// cancelled one move up only while none touched their states since.
    Foreign = 1,
    /// A reset that found a key: it forgot the key's bookings, and the key,
    /// used again, may book their slots anew; a booking made before gives
    /// nothing back (given back, it would free a unit of those: two
    /// requests in a window of one).
    Reset = 2,
}

/// How many marks a keyed store or a policy keeps: its keys are told apart
/// by a hash into this many (see [`mark`]), and two keys that share one
/// (one pair in 256) count as one, which gives back less, never more.
const MARKS: usize = 256;

/// The mark of the key `key` of the limit at `place` (0 in a keyed store):
/// the top byte of the 32-bit FNV-1a of `place` (4 bytes, little-endian)
/// then `key`, mixed by MurmurHash3's finalizer (FNV's top byte alone
/// follows the last byte closely: `user778`, `user786` and `user794`
/// shared one). JS computes the same (`markOf` in lib/api/waiting.cjs),
/// so that both tell keys apart alike.
pub fn mark(place: usize, key: &[u8]) -> u8 {
    let mut hash: u32 = 0x811c_9dc5;
    for &byte in (place as u32).to_le_bytes().iter().chain(key) {
        hash = (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193);
    }
    hash ^= hash >> 16;
    hash = hash.wrapping_mul(0x85eb_ca6b);
    hash ^= hash >> 13;
    hash = hash.wrapping_mul(0xc2b2_ae35);
    hash ^= hash >> 16;
    (hash >> 24) as u8
}

/// The latest event of each [`Touch`] that touched each state: the seq of
/// the latest that touched every state (a limiter's calls, whose marks are
/// none; a reconfigure, a restore), and of the latest that touched the keys
/// of each mark. A call on one key touches no other key's state (the core's
/// `Policy::each_key`), so a booking of one key may be given back whatever
/// happened to other keys since. Written and read with the core locked.
struct Marks {
    every: [AtomicU64; 3],
    /// Three per mark (one per [`Touch`]), made at the first event on a key.
    keys: OnceLock<Box<[AtomicU64]>>,
}

impl Marks {
    fn new() -> Self {
        Marks {
            every: Default::default(),
            keys: OnceLock::new(),
        }
    }

    /// Records event `seq`, of kind `touch` (and so of the kinds before
    /// it), on the states of `marks` (every state for none).
    fn touch(&self, marks: &[u8], seq: u64, touch: Touch) {
        let kinds = 0..=touch as usize;
        if marks.is_empty() {
            for kind in kinds {
                self.every[kind].fetch_max(seq, Ordering::Relaxed);
            }
            return;
        }
        let keys = self
            .keys
            .get_or_init(|| (0..3 * MARKS).map(|_| AtomicU64::new(0)).collect());
        for &mark in marks {
            for kind in kinds.clone() {
                keys[3 * usize::from(mark) + kind].fetch_max(seq, Ordering::Relaxed);
            }
        }
    }

    /// The latest event of kind `touch` on the states of `marks`.
    fn latest(&self, marks: &[u8], touch: Touch) -> u64 {
        let kind = touch as usize;
        let mut latest = self.every[kind].load(Ordering::Relaxed);
        if let Some(keys) = self.keys.get() {
            for &mark in marks {
                latest = latest.max(keys[3 * usize::from(mark) + kind].load(Ordering::Relaxed));
            }
        }
        latest
    }
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

/// How a reservation of `target`, the event `seq` of its owner (the
/// subject that booked it, `PyReservation::owner`) or booked when it had
/// counted `seq` events, gives its booking back to that owner.
fn refund_of<S: Subject>(target: &Target<S>, seq: u64) -> Refund {
    let owned = S::Core::to_owned(target);
    Box::new(move |owner, slot, cost, extent, latest_only| {
        // The owner is always an `S`: see `reserve` and `book_reservation`.
        if let Ok(subject) = owner.cast::<S>() {
            let shared = subject.get().shared();
            let mut core = shared.lock(owner.py());
            let target = S::Core::borrow(&owned);
            let marks = core.marks(target, extent);
            // A bucket's booking is given back by an interrupted `acquire`
            // only while it is the latest of its states (no event touched
            // them since its own, `seq`): from the middle of the queue it
            // would free the slot of the last waiter, still asleep, for the
            // next caller. Else it goes unused.
            let behind = latest_only && shared.latest(&marks, Touch::Any) > seq;
            let kept = behind && !core.gives_back_anywhere();
            // A reset of its key since: the store forgot this booking (see
            // Shared::forgot).
            if !kept && shared.latest(&marks, Touch::Reset) <= seq {
                // A refund only fails for a request that could not be booked.
                let _ = core.refund_booking(target, slot, cost, extent);
            }
        }
    })
}

/// A reservation of `target` that `slf` booked (`booked`) at `now`, when
/// its core's [`Core::extent`] was `extent`: its event `seq`, or the count
/// of events then (see [`count_booking`]).
fn reservation<S: Subject>(
    slf: &Bound<'_, S>,
    target: &Target<S>,
    cost: u64,
    now: Nanos,
    booked: Result<Nanos, Py<PyDecision>>,
    extent: usize,
    seq: u64,
) -> PyReservation {
    let owner = slf.clone().into_any().unbind();
    let refund = refund_of::<S>(target, seq);
    PyReservation::new(owner, refund, cost, now, booked, extent).with_seq(seq)
}

/// Counts `booked`, a booking of `target` in `core` made when its extent
/// was `extent`, as an event of `shared` when it booked a slot to come (one
/// that waiters booked before it must not move up into), an `acquire_async`
/// waiter's when `mine`; returns its seq, or else the count of events.
fn count_booking<C: Core, D>(
    shared: &Shared<C>,
    core: &C,
    target: &C::Target,
    extent: usize,
    booked: &Result<Result<Nanos, D>, Error>,
    mine: bool,
) -> u64 {
    match booked {
        Ok(Ok(wait)) if *wait > Nanos::ZERO => {
            let touch = if mine { Touch::Any } else { Touch::Foreign };
            shared.event(&core.marks(target, extent), touch)
        }
        _ => shared.events(),
    }
}

/// `reserve`: books `cost` for `target` within `max_wait`, as a Reservation.
pub fn reserve<S: Subject>(
    slf: &Bound<'_, S>,
    target: &Target<S>,
    cost: u64,
    max_wait: Nanos,
    now: Option<Now>,
) -> PyResult<PyReservation> {
    let (shared, py) = (slf.get().shared(), slf.py());
    let at = shared.now(py, now.map(|now| now.at))?;
    let (booked, extent, seq) = {
        let mut core = shared.lock(py);
        let extent = core.extent();
        let booked = core.reserve(target, at, cost, max_wait);
        let seq = count_booking(shared, &*core, target, extent, &booked, false);
        let booked = match booked {
            Ok(booked) => Ok(booked.map_err(|denied| S::settle(slf, &core, denied))),
            Err(err) => Err(explained(&*core, err, target)),
        };
        (booked, extent, seq)
    };
    let booked = match booked.map_err(|err| err.raise(py))? {
        Ok(wait) => Ok(wait),
        Err(denied) => Err(answered(denied.answer(slf)?, now)?.unbind()),
    };
    Ok(reservation(slf, target, cost, at, booked, extent, seq))
}

/// `refund`: gives back `cost` taken at `taken_at` (default now).
pub fn refund<S: Subject>(
    slf: &Bound<'_, S>,
    target: &Target<S>,
    cost: u64,
    taken_at: Option<Nanos>,
) -> PyResult<()> {
    let (shared, py) = (slf.get().shared(), slf.py());
    let taken_at = shared.now(py, taken_at)?;
    let refunded = {
        let mut core = shared.lock(py);
        core.refund(target, taken_at, cost)
            .map_err(|err| explained(&*core, err, target))
    };
    refunded.map_err(|err| err.raise(py))
}

/// A booking `book` made: when, the wait, its seq (see [`count_booking`])
/// and its core's [`Core::extent`] then.
struct Booking {
    now: Nanos,
    wait: Nanos,
    seq: u64,
    extent: usize,
}

/// Books `cost` for `target` now if the wait is at most `timeout` (for an
/// `acquire_async` waiter when `mine`); returns the booking, or raises
/// `RateLimited`.
fn book<S: Subject>(
    slf: &Bound<'_, S>,
    target: &Target<S>,
    cost: u64,
    timeout: Option<&Bound<'_, PyAny>>,
    mine: bool,
) -> PyResult<Booking> {
    let (this, py) = (slf.get(), slf.py());
    let max_wait = timeout.map_or(Ok(Nanos::MAX), convert::timeout)?;
    let now = this.shared().now(py, None)?;
    let (booked, seq, extent) = {
        let mut core = this.shared().lock(py);
        book_locked::<S>(this.shared(), &mut core, target, now, cost, max_wait, mine)
    };
    let wait = booked_wait(this, py, booked)?;
    Ok(Booking {
        now,
        wait,
        seq,
        extent,
    })
}

/// A booking's outcome, made with the core locked: the wait, a refusal's
/// answer, or the core's error in words.
type Booked<S> = Result<Result<Nanos, Answer<S>>, Explained>;

/// Books `cost` for `target` at `now` within `max_wait` in `core` (locked),
/// counting the booking (see [`count_booking`]; an `acquire_async`
/// waiter's when `mine`): its outcome, its seq and the core's
/// [`Core::extent`].
fn book_locked<S: Subject>(
    shared: &Shared<S::Core>,
    core: &mut S::Core,
    target: &Target<S>,
    now: Nanos,
    cost: u64,
    max_wait: Nanos,
    mine: bool,
) -> (Booked<S>, u64, usize) {
    let extent = core.extent();
    let booked = core.reserve(target, now, cost, max_wait);
    let seq = count_booking(shared, &*core, target, extent, &booked, mine);
    (
        booked.map_err(|err| explained(&*core, err, target)),
        seq,
        extent,
    )
}

/// The wait `booked` gives, once the core is unlocked; else `RateLimited`
/// for a refusal, or the core's error.
fn booked_wait<S: Subject>(this: &S, py: Python<'_>, booked: Booked<S>) -> PyResult<Nanos> {
    match booked.map_err(|err| err.raise(py))? {
        Ok(wait) => Ok(wait),
        Err(denied) => Err(this.rate_limited(py, &denied)),
    }
}

/// `_book`: `book`, as a Reservation, or `None` when there is no wait (for
/// `acquire` and `acquire_async`, which sleep in Python: see `_wait.py`);
/// an `acquire_async` waiter's booking when `mine` (see [`count_booking`]).
pub fn book_reservation<S: Subject>(
    slf: &Bound<'_, S>,
    target: &Target<S>,
    cost: u64,
    timeout: Option<&Bound<'_, PyAny>>,
    mine: bool,
) -> PyResult<Option<PyReservation>> {
    let booking = book(slf, target, cost, timeout, mine)?;
    if booking.wait == Nanos::ZERO {
        return Ok(None);
    }
    let (now, wait, extent) = (booking.now, booking.wait, booking.extent);
    let reservation = reservation(slf, target, cost, now, Ok(wait), extent, booking.seq);
    Ok(Some(reservation))
}

/// `_rebook`: gives back `cancels` (each booking and what it was booked
/// for, newest first: the last is the cancelled waiter's, the others those
/// of the waiters behind it), then books each of `requests` with no bound
/// on its wait, in order, as one step: no other call on the subject comes
/// between (the GIL, or the mutex, is held throughout, and no Python code
/// runs). Nothing at all when an event touched the states of one of
/// `cancels` after the event `since` (the cancelled waiter's booking):
/// any event, when `latest_only` (a bucket gives back exactly only its
/// latest); else one no waiter made (see [`Touch`]), a reset among them;
/// nor when one behind the cancelled waiter was booked before a limit was
/// added to a policy (see [`Core::extent`]). Each request's answer is its
/// Reservation, or the exception its booking raised, as a value.
pub fn rebook<'py, S: Subject>(
    slf: &Bound<'py, S>,
    since: u64,
    latest_only: bool,
    cancels: &[(&Bound<'py, PyReservation>, &Target<S>)],
    requests: &[(&Target<S>, u64)],
) -> PyResult<Option<Vec<Bound<'py, PyAny>>>> {
    let (this, py) = (slf.get(), slf.py());
    // The clock is read only to book `requests` again: giving bookings
    // back reads none (each is refunded at its own slot). So a clock that
    // raises (the caller's `clock=`) as a waiter is withdrawn keeps nothing
    // from being given back that needs no booking again: a token bucket's
    // latest booking, or a GCRA's with nobody left behind it, as the JS
    // `acquire` gives them back on an abort (waiting.cjs, `withdraw`). With
    // waiters to book again, it raises before anything is given back, and
    // nobody moves.
    let now = if requests.is_empty() {
        Nanos::ZERO // never read: nothing is booked
    } else {
        this.shared().now(py, None)?
    };
    let owner = slf.as_any();
    let touch = if latest_only {
        Touch::Any
    } else {
        Touch::Foreign
    };
    let booked: Vec<_> = {
        let mut core = this.shared().lock(py);
        // Of its keys only: a call on another key changed none of their
        // states. A reset of one is such an event too: nothing it forgot
        // is given back.
        let touched = cancels.iter().any(|(reservation, target)| {
            let marks = core.marks(target, reservation.get().extent());
            this.shared().latest(&marks, touch) > since
        });
        if touched {
            return Ok(None);
        }
        // Booked again, a waiter booked before a limit was added would be
        // booked in that limit too, whose fields its request may lack (it
        // failed, though its slot was its own): nobody moves then, as after
        // a reconfigure, and nothing is given back (as the JS acquire does).
        let behind = cancels.split_last().map_or(&[][..], |(_, behind)| behind);
        if behind
            .iter()
            .any(|(reservation, _)| reservation.get().extent() < core.extent())
        {
            return Ok(None);
        }
        for (reservation, target) in cancels {
            if let Some((slot, cost, extent)) = reservation.get().take_for(owner) {
                // A refund only fails for a request that could not be booked.
                let _ = core.refund_booking(target, slot, cost, extent);
            }
        }
        requests
            .iter()
            .map(|(target, cost)| {
                let shared = this.shared();
                book_locked::<S>(shared, &mut core, target, now, *cost, Nanos::MAX, true)
            })
            .collect()
    };
    let mut answers = Vec::with_capacity(requests.len());
    for ((target, cost), (booked, seq, extent)) in requests.iter().zip(booked) {
        answers.push(match booked_wait(this, py, booked) {
            Ok(wait) => {
                let booking = reservation(slf, target, *cost, now, Ok(wait), extent, seq);
                Bound::new(py, booking)?.into_any()
            }
            Err(error) => error.into_value(py).into_bound(py).into_any(),
        });
    }
    Ok(Some(answers))
}

static WAIT_MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// `helper(subject, args, timeout)` from the pure-Python waiting helpers
/// (`ratekeeper/_wait.py`), once `timeout` is known to be good. `args` are
/// what the subject's `acquire` takes before `timeout`.
pub fn wait_helper<'py>(
    slf: &Bound<'py, PyAny>,
    helper: &Bound<'py, PyString>,
    args: Bound<'py, PyTuple>,
    timeout: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = slf.py();
    timeout.map(convert::timeout).transpose()?;
    let module = WAIT_MODULE.get_or_try_init(py, || {
        PyModule::import(py, "ratekeeper._wait").map(Bound::unbind)
    })?;
    module.bind(py).getattr(helper)?.call1((slf, args, timeout))
}

/// Implements [`Subject`] for a class `$class` with a `shared: Shared<$core>`,
/// a `name`, a `recycler` and a `window_nanos()`, answering plain Decisions
/// named after it.
macro_rules! named_subject {
    ($class:ty, $core:ty) => {
        impl $crate::shared::Subject for $class {
            type Core = $core;

            fn shared(&self) -> &$crate::shared::Shared<$core> {
                &self.shared
            }

            type Pending = ::ratekeeper::Decision;

            #[inline(always)]
            fn settle<'py>(
                _: &Bound<'py, Self>,
                _: &$core,
                answer: ::ratekeeper::Decision,
            ) -> $crate::shared::Settled<'py, ::ratekeeper::Decision> {
                $crate::shared::Settled::Pending(answer)
            }

            #[inline]
            fn answer<'py>(
                slf: &Bound<'py, Self>,
                answer: ::ratekeeper::Decision,
            ) -> PyResult<Bound<'py, $crate::decision::PyDecision>> {
                let this = slf.get();
                this.recycler
                    .answer(slf.py(), answer, &this.name, this.window_nanos())
            }

            fn recycler(&self) -> &$crate::recycle::Recycler {
                &self.recycler
            }

            fn rate_limited(&self, py: Python<'_>, denied: &::ratekeeper::Decision) -> PyErr {
                match self.name.bind(py).to_cow() {
                    Ok(name) => $crate::errors::rate_limited(py, &name, denied),
                    Err(err) => err,
                }
            }
        }
    };
}

pub(crate) use named_subject;

/// Writes the methods every deciding class shares, once: `try_acquire`,
/// `peek`, `reserve`, `refund`, `acquire_async`, `acquiring` and `_book`,
/// each taking the class's target (`key`, `request`, or none) before
/// `cost`; plus the class's own `$extra` methods. (`acquire` is written in
/// Python, on `_book`: see `ratekeeper/_wait.py`.)
///
/// The caller writes the `#[pymethods]` attribute: the names pyo3 generates
/// (for `*args`, say) then share the caller's hygiene with its arguments.
macro_rules! limiter_methods {
    // The entry: the methods written once for every class, then the pairs of
    // methods that share one template (`@decide`, `@wait`), then the impl.
    // A class answering with a Decision says so in these words; another
    // (a policy) gives its answer's class and `try_acquire`'s docstring.
    (
        $hash:tt $pymethods:tt $class:ty, $what:literal, $spec:tt,
        reserve = $reserve_signature:literal $(, reclaim = $reclaim:literal)?
        $(, headers = $headers:literal)? { $($extra:tt)* }
    ) => {
        limiter_methods!($hash $pymethods $class, $what, $spec, answer = "Decision",
            try_acquire = [concat!("Take ``cost`` units from ", $what, " if it has them, and say what happened."),
                "", "Returns a Decision: ``allowed`` (then the cost is consumed),",
                "``remaining``, ``limit``, ``retry_after`` and ``reset_after``. A",
                "denial consumes nothing and is not an exception. A ``cost`` above",
                "``limit`` raises ``RateLimitError`` (code ``cost_exceeds_limit``),",
                "since it could never be allowed."],
            reserve = $reserve_signature $(, reclaim = $reclaim)? $(, headers = $headers)? { $($extra)* });
    };
    (
        $hash:tt $pymethods:tt $class:ty, $what:literal, $spec:tt,
        answer = $answer:literal, try_acquire = [$($try_doc:expr),*],
        reserve = $reserve_signature:literal $(, reclaim = $reclaim:literal)?
        $(, headers = $headers:literal)? { $($extra:tt)* }
    ) => {
        limiter_methods!(@methods $hash $pymethods $class, $what, $spec, $spec,
            answer = $answer, try_acquire = [$($try_doc),*],
            reserve = $reserve_signature $(, reclaim = $reclaim)? $(, headers = $headers)? { $($extra)* });
    };
    (
        @methods $hash:tt $pymethods:tt $class:ty, $what:literal, $spec:tt,
        [$($target:ident $(= $default:ident)?: $tty:ty = $convert:path)?],
        answer = $answer:literal, try_acquire = [$($try_doc:expr),*],
        reserve = $reserve_signature:literal $(, reclaim = $reclaim:literal)?
        $(, headers = $headers:literal)? { $($extra:tt)* }
    ) => {
        limiter_methods!(@step $hash $pymethods $class, $spec, [
            /// For the garbage collector (see `Subject::traverse`).
            fn __traverse__(&self, visit: ::pyo3::PyVisit<'_>) -> Result<(), ::pyo3::PyTraverseError> {
                $crate::shared::Subject::traverse(self, &visit)
            }

            /// For the garbage collector: drops the decision kept (a
            /// policy's refers back to it).
            fn __clear__(&self) {
                $crate::shared::Subject::recycler(self).clear();
            }

            #[doc = concat!("Book ``cost`` units of ", $what, " for the earliest slot they fit, if")]
            /// that is at most ``max_wait`` seconds away (``None``, the default, or
            /// ``math.inf``: no bound); returns a Reservation.
            ///
            /// When ``reservation.ok``, the units are booked for ``reservation.at``
            /// (``now + reservation.wait``): proceed then. Bookings are served first
            /// come, first served, and a later ``try_acquire`` never jumps ahead of
            /// one. Otherwise nothing was booked and ``reservation.decision`` says
            #[doc = concat!("why (a denied ", $answer, "). ``reservation.cancel()`` gives an unused")]
            /// booking back. ``acquire`` is this plus the wait.
            #[pyo3(
                signature = ($($target $(= $default)?,)? cost = 1, *, max_wait = ::ratekeeper::Nanos::MAX, now = None),
                text_signature = $reserve_signature
            )]
            fn reserve(
                slf: &Bound<'_, Self>,
                $(#[pyo3(from_py_with = $convert)] $target: $tty,)?
                #[pyo3(from_py_with = $crate::convert::cost)] cost: u64,
                #[pyo3(from_py_with = $crate::convert::max_wait)] max_wait: ::ratekeeper::Nanos,
                #[pyo3(from_py_with = $crate::convert::moment)] now: Option<$crate::convert::Now>,
            ) -> PyResult<$crate::decision::PyReservation> {
                let target = limiter_methods!(@target $($target)?);
                $crate::shared::reserve(slf, target, cost, max_wait, now)
            }

            /// Give back ``cost`` units taken at ``taken_at`` and not used.
            ///
            /// ``taken_at`` (default: now) is when they were taken: the ``now`` of
            /// the ``try_acquire``. For a booking, call ``reservation.cancel()``,
            /// which is exact: ``at`` is a float, which on a clock counting from the
            /// epoch (``time.time``) is a quarter of a microsecond from the next
            /// one, so ``taken_at=at`` may miss the slot. Nothing ever ends up
            /// holding more than when fresh, and a window algorithm only takes
            /// units back from the window (or, for ``SlidingWindowLog``, the
            /// instant) of ``taken_at``.
            #[pyo3(signature = ($($target,)? cost, *, taken_at = None))]
            fn refund(
                slf: &Bound<'_, Self>,
                $(#[pyo3(from_py_with = $convert)] $target: $tty,)?
                #[pyo3(from_py_with = $crate::convert::cost)] cost: u64,
                #[pyo3(from_py_with = $crate::convert::taken_at)] taken_at: Option<::ratekeeper::Nanos>,
            ) -> PyResult<()> {
                let target = limiter_methods!(@target $($target)?);
                $crate::shared::refund(slf, target, cost, taken_at)
            }

            /// Books as ``reserve`` does, within ``timeout`` (else raises
            /// ``RateLimited``), and returns the Reservation, or ``None`` when
            /// there is no wait: for ``acquire`` and ``acquire_async``, which
            /// sleep in Python (see ``ratekeeper/_wait.py``).
            /// ``waiter``: for an ``acquire_async`` waiter, which the waiters'
            /// moving up counts as one of theirs.
            #[pyo3(signature = ($($target $(= $default)?,)? cost = 1, timeout = None, *, waiter = false))]
            fn _book(
                slf: &Bound<'_, Self>,
                $(#[pyo3(from_py_with = $convert)] $target: $tty,)?
                #[pyo3(from_py_with = $crate::convert::cost)] cost: u64,
                timeout: Option<&Bound<'_, PyAny>>,
                waiter: bool,
            ) -> PyResult<Option<$crate::decision::PyReservation>> {
                let target = limiter_methods!(@target $($target)?);
                $crate::shared::book_reservation(slf, target, cost, timeout, waiter)
            }

            /// Gives back ``cancels`` (pairs of a Reservation of this object and the
            /// arguments it was booked with), then books each of ``requests``
            /// (arguments) in order, as one step no other call comes between (for
            /// ``acquire_async``'s waiters moving up); does nothing and returns
            /// ``None`` once an event touched the states of one of ``cancels``
            /// after the event ``since`` (the cancelled waiter's
            /// ``Reservation._seq``): any, when ``latest_only``; else one no waiter
            /// made. Returns each request's Reservation, or the exception its
            /// booking raised.
            fn _rebook<'py>(
                slf: &Bound<'py, Self>,
                since: u64,
                latest_only: bool,
                cancels: &Bound<'py, PyAny>,
                requests: &Bound<'py, PyAny>,
            ) -> PyResult<Option<Vec<Bound<'py, PyAny>>>> {
                let cancels: Vec<(Bound<'py, $crate::decision::PyReservation>, Bound<'py, ::pyo3::types::PyTuple>)> =
                    $crate::convert::items(cancels)?;
                let requests: Vec<Bound<'py, ::pyo3::types::PyTuple>> = $crate::convert::items(requests)?;
                // Each request's target object and cost, then the targets read
                // from them (a key borrows its object's text).
                let split = |args: &Bound<'py, ::pyo3::types::PyTuple>| -> PyResult<(Bound<'py, PyAny>, u64)> {
                    let cost = args.get_item(args.len().saturating_sub(1))?;
                    Ok((args.get_item(0)?, $crate::convert::cost(&cost)?))
                };
                let args = cancels.iter().map(|(_, args)| args).chain(&requests)
                    .map(split).collect::<PyResult<Vec<_>>>()?;
                let mut targets = Vec::with_capacity(args.len());
                for (_obj, cost) in &args {
                    $(let $target = $convert(_obj)?;)?
                    targets.push((limiter_methods!(@value $($target)?), *cost));
                }
                let mut targets = targets.iter().map(|(value, cost)| (limiter_methods!(@of value $($target)?), *cost));
                let cancels: Vec<_> = cancels.iter().zip(targets.by_ref())
                    .map(|((reservation, _), (target, _))| (reservation, target))
                    .collect();
                let requests: Vec<_> = targets.collect();
                $crate::shared::rebook(slf, since, latest_only, &cancels, &requests)
            }

            /// Whether a booking given back may stand anywhere among later
            /// ones (a window algorithm's, see ``Core::gives_back_anywhere``):
            /// else only the latest is, and ``acquire_async`` moves waiters up.
            fn _gives_back_anywhere(slf: &Bound<'_, Self>) -> bool {
                let shared = <Self as $crate::shared::Subject>::shared(slf.get());
                $crate::shared::Core::gives_back_anywhere(&*shared.lock(slf.py()))
            }

            /// Whether ``acquire_async``'s waiters behind a cancelled one move
            /// up into its slot (see ``Core::moves_up``): a GCRA's or a leaky
            /// bucket's, or a policy's of one such limit.
            fn _moves_up(slf: &Bound<'_, Self>) -> bool {
                let shared = <Self as $crate::shared::Subject>::shared(slf.get());
                $crate::shared::Core::moves_up(&*shared.lock(slf.py()))
            }

            /// Seconds from the clock's reading to ``reservation``'s slot, 0 once
            /// it has come: ``acquire_async`` waits on this clock, not on its
            /// loop's, whose timers may fire early (uvloop's count in ms).
            fn _left(
                slf: &Bound<'_, Self>,
                reservation: &Bound<'_, $crate::decision::PyReservation>,
            ) -> PyResult<f64> {
                let shared = <Self as $crate::shared::Subject>::shared(slf.get());
                let now = shared.now(slf.py(), None)?;
                Ok(reservation.get().left(now).as_secs_f64())
            }

            /// The floor of a method call, for the benchmark: takes ``try_acquire``'s
            /// arguments and does nothing.
            #[pyo3(signature = ($($target = None,)? cost = None, now = None))]
            fn _noop(
                &self,
                $($target: Option<&Bound<'_, PyAny>>,)?
                cost: Option<&Bound<'_, PyAny>>,
                now: Option<&Bound<'_, PyAny>>,
            ) {
                let _ = ($($target,)? cost, now);
            }

            $(
            #[doc = $reclaim]
            #[pyo3(signature = (now = None))]
            fn reclaim(
                &self,
                py: Python<'_>,
                #[pyo3(from_py_with = $crate::convert::now)] now: Option<::ratekeeper::Nanos>,
            ) -> PyResult<()> {
                let now = $crate::shared::Subject::shared(self).now(py, now)?;
                $crate::shared::Subject::shared(self).lock(py).reclaim(now);
                Ok(())
            }
            )?

            $(
            /// The HTTP RateLimit header values of ``decision``, as a dict.
            ///
            /// ``RateLimit-Policy`` (``"name";q=<limit>;w=<window>``) and
            /// ``RateLimit`` (``"name";r=<remaining>;t=<reset>``) always, and
            /// ``Retry-After`` (seconds) when the decision is a denial, following
            /// the IETF RateLimit header fields draft and RFC 9110. Seconds are
            /// whole and rounded up, so a client that waits what they say is never
            #[doc = concat!("early. ``name`` is ", $headers, " name, ``w`` its ``window``.")]
            fn headers<'py>(
                &self,
                py: Python<'py>,
                decision: &Bound<'py, PyAny>,
            ) -> PyResult<Bound<'py, ::pyo3::types::PyDict>> {
                let decision = decision.cast::<$crate::decision::PyDecision>().map_err(|_| {
                    let wrong = ::ratekeeper::Error::InvalidType { name: "decision", expected: "a Decision" };
                    $crate::errors::to_py(py, wrong)
                })?;
                // A policy's decision has several limits' numbers: put under
                // this one's name and window, they made up headers, where
                // the policy refuses a limiter's decision. A RedisPolicy's is
                // a Decision made in Python: told, as in JS, by what it holds.
                let policys = decision.is_instance_of::<$crate::decision::PyPolicyDecision>()
                    || decision.hasattr(::pyo3::intern!(py, "denied_by"))?;
                if policys {
                    let wrong = ::ratekeeper::Error::InvalidType {
                        name: "decision",
                        expected: "a limiter's Decision, not a policy's (policy.headers takes that)",
                    };
                    return Err($crate::errors::to_py(py, wrong));
                }
                self.headers_of(py, &decision.get().decision())
            }
            )?

            $($extra)*
        ],
            decide(try_acquire, [$($try_doc),*])
            decide(peek, [concat!("The ", $answer, " ``try_acquire`` would give, consuming nothing.")])
            wait(acquire_async, "acquire_async", ["``acquire`` for asyncio: ``await acquire_async(...)``.",
                "", "Books when first awaited and sleeps with ``asyncio.sleep``, so the",
                "event loop keeps running; waiters are served in booking order. A",
                "wait longer than ``timeout`` raises ``RateLimited`` at once, booking",
                "nothing. Cancelling the task (or any exception during the wait)",
                "gives the booking back. Arguments' types and ranges are checked",
                "when called; a cost above the limit is found by the booking, when",
                "awaited (a policy's limits depend on the request)."])
            wait(acquiring, "Acquiring", ["``acquire`` as a context manager and decorator, for sync and async code.",
                "", "``with x.acquiring(...):`` and ``async with x.acquiring(...):``",
                "acquire before the block; ``@x.acquiring(...)`` acquires before",
                "every call of the decorated function (``acquire_async`` for a",
                "coroutine function). ``timeout`` is ``acquire``'s: ``timeout=0``",
                "never waits and raises ``RateLimited`` at once on a \"no\". Leaving",
                "the block gives nothing back: the units were used."])
        );
    };
    // One method of a pair deciding with `Core::$method`.
    (
        @step $hash:tt $pymethods:tt $class:ty,
        [$($target:ident $(= $default:ident)?: $tty:ty = $convert:path)?], [$($done:tt)*],
        decide($method:ident, [$($doc:expr),*]) $($rest:tt)*
    ) => {
        limiter_methods!(@step $hash $pymethods $class, [$($target $(= $default)?: $tty = $convert)?], [
            $($done)*
            $(#[doc = $doc])*
            #[pyo3(signature = ($($target $(= $default)?,)? cost = 1, now = None))]
            fn $method<'py>(
                slf: &Bound<'py, Self>,
                $($target: Option<&Bound<'py, PyAny>>,)?
                #[pyo3(from_py_with = $crate::convert::cost)] cost: u64,
                #[pyo3(from_py_with = $crate::convert::moment)] now: Option<$crate::convert::Now>,
            ) -> PyResult<Bound<'py, $crate::decision::PyDecision>> {
                // Converted here, not by `from_py_with` (see `Held`).
                $(
                    let none = ::pyo3::types::PyNone::get(slf.py());
                    let mut held = Default::default();
                    let obj = $target.unwrap_or(none.as_any());
                    let $target = <$tty as $crate::convert::Held>::hold(obj, &mut held)?;
                )?
                let target = limiter_methods!(@held $($target)?);
                $crate::shared::decide(slf, now, target, |core, target, now| $crate::shared::Core::$method(core, target, now, cost))
            }
        ], $($rest)*);
    };
    // One method of a pair handing over to the Python helper `$helper`.
    (
        @step $hash:tt $pymethods:tt $class:ty,
        [$($target:ident $(= $default:ident)?: $tty:ty = $convert:path)?], [$($done:tt)*],
        wait($method:ident, $helper:literal, [$($doc:expr),*]) $($rest:tt)*
    ) => {
        limiter_methods!(@step $hash $pymethods $class, [$($target $(= $default)?: $tty = $convert)?], [
            $($done)*
            $(#[doc = $doc])*
            #[pyo3(signature = ($($target $(= $default)?,)? cost = 1, timeout = None))]
            fn $method<'py>(
                slf: &Bound<'py, Self>,
                $($target: Option<&Bound<'py, PyAny>>,)?
                #[pyo3(from_py_with = $crate::convert::cost)] cost: u64,
                timeout: Option<&Bound<'py, PyAny>>,
            ) -> PyResult<Bound<'py, PyAny>> {
                $(
                    let $target = $target.cloned().unwrap_or_else(|| slf.py().None().into_bound(slf.py()));
                    $convert(&$target)?;
                )?
                let args = ::pyo3::types::PyTuple::new(slf.py(), [$($target.clone(),)? cost.into_pyobject(slf.py())?.into_any()])?;
                $crate::shared::wait_helper(slf.as_any(), ::pyo3::intern!(slf.py(), $helper), args, timeout)
            }
        ], $($rest)*);
    };
    // Every method written: the impl.
    (@step $hash:tt $pymethods:tt $class:ty, $spec:tt, [$($done:tt)*], ) => {
        $hash $pymethods
        impl $class {
            $($done)*
        }
    };
    (@target) => { &() };
    (@value) => { () };
    (@value $target:ident) => { $target };
    (@of $value:ident) => { { let _ = $value; &() } };
    (@of $value:ident $target:ident) => { ::core::convert::AsRef::as_ref($value) };
    (@held) => { &() };
    (@held $target:ident) => { $target };
    (@target $target:ident) => { ::core::convert::AsRef::as_ref(&$target) };
}

pub(crate) use limiter_methods;
