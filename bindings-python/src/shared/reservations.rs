//! `reserve` and `refund`, and how a Reservation gives its booking back.

use pyo3::prelude::*;
use ratekeeper::{Error, Nanos};

use crate::convert::Now;
use crate::decision::{PyDecision, PyReservation, Refund};

use super::{answered, explained, Core, Shared, Subject, Target, Touch};

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
pub(super) fn reservation<S: Subject>(
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
pub(super) fn count_booking<C: Core, D>(
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
