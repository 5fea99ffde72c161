//! What `acquire` and `acquire_async` (written in Python, `ratekeeper/_wait.py`)
//! call: a booking as a Reservation, the give-back and rebooking of
//! withdrawn waiters, and the helpers themselves.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyModule, PyString, PyTuple};
use ratekeeper::Nanos;

use crate::convert;
use crate::decision::PyReservation;

use super::reservations::{count_booking, reservation};
use super::{explained, Answer, Core, Explained, Shared, Subject, Target, Touch};

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
