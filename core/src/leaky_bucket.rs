//! The leaky bucket as a queue: traffic shaped to a fixed rate.

use crate::limiter::check_cost;
use crate::nanos::refundable;
use crate::state::codec::{Codec, Fingerprint, Reader, Writer};
use crate::{Decision, Error, Limiter, Nanos};

/// A leaky bucket used as a queue (traffic shaping): units leave one every
/// `interval`, first come first served, and at most `capacity` units wait.
///
/// A request is a line of `cost` units: it leaves (may be sent) at its slot
/// `s`, and the next request's slot is no earlier than `s + cost * interval`.
/// The queue holds the units whose time `[s + k * interval, s + (k + 1) *
/// interval)` has not ended, the one being sent included, and never more than
/// `capacity` of them.
///
/// [`reserve`](Limiter::reserve) is the shaping call: it queues the request
/// and returns its delay, `Ok(Ok(delay))`, when the queue has room for all of
/// it and the delay is at most `max_wait` (so the delay never exceeds
/// `(capacity - cost) * interval`, counted from the latest time the
/// limiter has seen: a caller whose `now` lags behind it waits that lag
/// more). [`try_acquire`](Limiter::try_acquire)
/// admits only a request that may leave at once, which is when the queue is
/// empty. In every [`Decision`], `remaining` is what may be taken at once,
/// as for every algorithm: the whole capacity while the queue is empty,
/// else nothing (a `RateLimit` header then never promises a request that
/// would be denied); `retry_after` is the delay (when the queue ahead will
/// be empty) and `reset_after` when the queue will be empty. The room left
/// in the queue for [`reserve`](Limiter::reserve) is `capacity` less
/// `reset_after / interval`, rounded up, for a `now` not behind the latest
/// time seen (a lagging caller's `reset_after` includes the lag).
///
/// **Guarantee.** Requests leave in the order they were admitted, spaced by
/// `interval` per unit and never closer: in any span of time of length `t`,
/// the requests that leave total at most `floor(t / interval)` units plus
/// the cost of the last one (for unit costs, `floor(t / interval) + 1`: no
/// burst). `LeakyBucket::new(10, 100 ms)` sends 10 per second, one every
/// 100 ms, holding up to 10 units (a second of traffic) in its queue.
///
/// ```
/// use ratekeeper::{LeakyBucket, Limiter, Nanos};
///
/// // One unit every 100 ms, at most 3 units queued.
/// let mut queue = LeakyBucket::new(3, Nanos::from_millis(100)).unwrap();
/// let mut reserve = || queue.reserve(Nanos::ZERO, 1, Nanos::from_secs(1)).unwrap();
/// assert_eq!(reserve(), Ok(Nanos::ZERO));
/// assert_eq!(reserve(), Ok(Nanos::from_millis(100)));
/// assert_eq!(reserve(), Ok(Nanos::from_millis(200)));
/// assert_eq!(reserve().unwrap_err().remaining, 0); // full: 3 units queued
///
/// // try_acquire admits only what may leave at once.
/// assert!(!queue.try_acquire(Nanos::from_millis(250), 1).unwrap().allowed);
/// assert!(queue.try_acquire(Nanos::from_millis(300), 1).unwrap().allowed);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeakyBucket {
    capacity: u64,
    interval: u64,
    /// The latest time seen, so that time going backwards admits nothing.
    latest: u64,
    /// How long after `latest` the queue is empty, which is when the next
    /// unit to join may leave. Relative, so that it fits in 64 bits even near
    /// [`Nanos::MAX`]; at most `capacity * interval` except after a reconfigure.
    backlog: u64,
    /// Units whose slot is before this instant are not refunded: where the
    /// queue ended at the latest reconfigure (0 until one; see there;
    /// [`Nanos::MAX`]: none, see `nanos::refundable`).
    counted_from: u64,
}

/// The queue as of a time `at`, computed without changing it.
#[derive(Clone, Copy)]
struct State {
    backlog: u64,
    at: u64,
    /// How far `now` lies before `at` (time went backwards).
    lag: u64,
}

impl LeakyBucket {
    /// This configuration, never called: an empty queue.
    #[cfg(feature = "alloc")]
    pub(crate) fn fresh(&self) -> Self {
        LeakyBucket {
            latest: 0,
            backlog: 0,
            counted_from: 0,
            ..self.clone()
        }
    }

    /// An empty queue sending one unit every `interval` and holding at most
    /// `capacity` units.
    ///
    /// Fails when a value is zero, or when `capacity * interval` exceeds
    /// [`Nanos::MAX`].
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn new(capacity: u64, interval: Nanos) -> Result<Self, Error> {
        if capacity == 0 {
            return Err(Error::ZeroValue { name: "capacity" });
        }
        if interval == Nanos::ZERO {
            return Err(Error::ZeroValue { name: "interval" });
        }
        if capacity.checked_mul(interval.0).is_none() {
            return Err(Error::Overflow {
                name: "interval",
                reason: "sending the whole capacity would take more than 2^64 - 1 ns",
            });
        }
        Ok(LeakyBucket {
            capacity,
            interval: interval.0,
            latest: 0,
            backlog: 0,
            counted_from: 0,
        })
    }

    /// The time each unit takes to leave.
    pub fn interval(&self) -> Nanos {
        Nanos(self.interval)
    }

    /// Replaces the capacity and interval of a live queue with those of `new`.
    ///
    /// Queued units keep their slots, and the next unit to join leaves at
    /// least the longer of the two intervals after the last queued unit's
    /// slot. The queue may then hold more than the new capacity; it admits
    /// nothing until it has room. Units queued before the reconfigure are no
    /// longer refunded: the queue's end no longer tells where they end.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn reconfigure(&mut self, now: Nanos, new: LeakyBucket) {
        let state = self.at(now);
        let stretch = new.interval.saturating_sub(self.interval);
        let backlog = match state.backlog {
            0 => 0,
            queued => queued.saturating_add(stretch),
        };
        *self = LeakyBucket {
            latest: state.at,
            backlog,
            // A refund of the last units queued before (checked by where
            // they end, at the new interval) would take the stretch off the
            // unit ahead of them.
            counted_from: state.at.saturating_add(state.backlog),
            ..new
        };
    }

    fn at(&self, now: Nanos) -> State {
        match now.0.checked_sub(self.latest) {
            Some(elapsed) => State {
                backlog: self.backlog.saturating_sub(elapsed),
                at: now.0,
                lag: 0,
            },
            None => State {
                backlog: self.backlog,
                at: self.latest,
                lag: self.latest - now.0,
            },
        }
    }

    fn commit(&mut self, state: State) {
        self.latest = state.at;
        self.backlog = state.backlog;
    }

    fn decide(&self, now: Nanos, cost: u64) -> Result<(Decision, State), Error> {
        check_cost(cost, self.capacity)?;
        let mut state = self.at(now);
        let allowed = cost == 0 || state.backlog == 0;
        if allowed {
            // cost <= capacity, so this fits.
            state.backlog += cost * self.interval;
        }
        let after = |wait: u64| Nanos(state.lag.saturating_add(wait));
        let decision = Decision {
            allowed,
            remaining: if state.backlog == 0 { self.capacity } else { 0 },
            limit: self.capacity,
            retry_after: if allowed {
                Nanos::ZERO
            } else {
                after(state.backlog)
            },
            reset_after: match state.backlog {
                0 => Nanos::ZERO,
                backlog => after(backlog),
            },
        };
        Ok((decision, state))
    }
}

impl Limiter for LeakyBucket {
    fn limit(&self) -> u64 {
        self.capacity
    }

    fn try_acquire(&mut self, now: Nanos, cost: u64) -> Result<Decision, Error> {
        let (decision, state) = self.decide(now, cost)?;
        self.commit(state);
        Ok(decision)
    }

    fn peek(&self, now: Nanos, cost: u64) -> Result<Decision, Error> {
        self.decide(now, cost).map(|(decision, _)| decision)
    }

    /// Admitted when the slot is not before the queue empties and the queue
    /// has room for all of `cost`: so
    /// [`reserve`](Limiter::reserve), which queues the request behind the
    /// queue, refuses a full queue whatever `max_wait`. Time between the
    /// queue's end and the slot counts as queued from then on: the queue
    /// cannot hold a gap, so it admits less behind such a booking, never
    /// more.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn reserve_after(&mut self, now: Nanos, cost: u64, wait: Nanos) -> Result<bool, Error> {
        check_cost(cost, self.capacity)?;
        let mut state = self.at(now);
        self.commit(state);
        if cost == 0 {
            return Ok(true);
        }
        let wait = wait.0.saturating_sub(state.lag);
        let room = self
            .capacity
            .saturating_sub(state.backlog.div_ceil(self.interval));
        if wait < state.backlog || room < cost {
            return Ok(false);
        }
        // cost <= capacity, so the product fits.
        match wait.checked_add(cost * self.interval) {
            Some(backlog) => {
                state.backlog = backlog;
                self.commit(state);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Takes the units `[taken_at, taken_at + cost * interval)` out of the
    /// queue when they are its last ones (the latest request, or its last
    /// `cost` units); otherwise does nothing, since the requests queued after
    /// them were promised their slots. The clock does not move to `taken_at`.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn refund(&mut self, taken_at: Nanos, cost: u64) {
        let end = taken_at.0 as u128 + cost as u128 * self.interval as u128;
        let counted = refundable(taken_at, self.counted_from);
        if cost > 0 && counted && end == self.latest as u128 + self.backlog as u128 {
            self.backlog = taken_at.0.saturating_sub(self.latest);
        }
    }
}

impl Codec for LeakyBucket {
    fn tag(&self) -> u8 {
        3
    }

    /// 2 once a reconfigure set a refund bound (written after the fields).
    fn version(&self) -> u8 {
        if self.counted_from != 0 {
            2
        } else {
            1
        }
    }

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn config(&self, fingerprint: &mut Fingerprint) {
        fingerprint.word(self.capacity);
        fingerprint.word(self.interval);
    }

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn write_state(&self, w: &mut Writer<'_>) {
        w.varint(self.latest);
        w.varint(self.backlog);
        // Only after a reconfigure: other states keep their bytes.
        if self.counted_from != 0 {
            w.varint(self.counted_from);
        }
    }

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn read_state(&mut self, r: &mut Reader<'_>) -> Result<(), Error> {
        self.latest = r.varint()?;
        self.backlog = r.varint()?;
        self.counted_from = r.refund_bound_at_most(self.latest.saturating_add(self.backlog))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructor_validates_once() {
        let err = |c, i| {
            LeakyBucket::new(c, Nanos(i))
                .map(|_| ())
                .map_err(|e: Error| (e.code(), e.argument()))
        };
        assert_eq!(err(0, 1), Err(("zero_value", Some("capacity"))));
        assert_eq!(err(1, 0), Err(("zero_value", Some("interval"))));
        assert_eq!(err(u64::MAX, 2), Err(("overflow", Some("interval"))));
        assert_eq!(err(u64::MAX, 1), Ok(()));
    }

    #[test]
    fn weighted_requests_leave_in_line_and_a_full_queue_refuses() {
        let mut queue = LeakyBucket::new(5, Nanos(10)).unwrap();
        // Admitted; nothing more may go at once while it leaves.
        let d = queue.try_acquire(Nanos(100), 2).unwrap();
        assert_eq!(
            (d.allowed, d.remaining, d.reset_after),
            (true, 0, Nanos(20))
        );
        assert_eq!(
            queue.reserve(Nanos(105), 3, Nanos(15)).unwrap(),
            Ok(Nanos(15))
        );
        // 4.5 units queued at 105: a unit being sent counts whole.
        let full = queue
            .reserve(Nanos(105), 1, Nanos::MAX)
            .unwrap()
            .unwrap_err();
        assert_eq!(
            (full.remaining, full.retry_after, full.reset_after),
            (0, Nanos(45), Nanos(45))
        );
        let d = queue.peek(Nanos(149), 1).unwrap();
        assert_eq!(
            (d.allowed, d.remaining, d.retry_after),
            (false, 0, Nanos(1))
        );
        assert_eq!(queue.peek(Nanos(150), 0).unwrap().remaining, 5);
        assert!(queue.try_acquire(Nanos(150), 5).unwrap().allowed);
    }

    #[test]
    fn time_going_backwards_counts_as_zero_elapsed() {
        let mut queue = LeakyBucket::new(3, Nanos(10)).unwrap();
        assert!(queue.try_acquire(Nanos(1_000), 1).unwrap().allowed);
        // At 995 the queue still stands at 1_000, one unit being sent.
        let d = queue.try_acquire(Nanos(995), 1).unwrap();
        assert_eq!(
            (d.allowed, d.remaining, d.retry_after),
            (false, 0, Nanos(15))
        );
        assert_eq!(
            queue.reserve(Nanos(995), 1, Nanos(15)).unwrap(),
            Ok(Nanos(15))
        );
        // Units leave at 1_000 and 1_010: the queue is empty from 1_020.
        let d = queue.try_acquire(Nanos(1_020), 1).unwrap();
        assert_eq!((d.allowed, d.reset_after), (true, Nanos(10)));
    }

    #[test]
    fn only_the_last_units_can_be_refunded() {
        let mut queue = LeakyBucket::new(4, Nanos(10)).unwrap();
        for slot in [0, 10, 20] {
            assert_eq!(
                queue.reserve(Nanos(0), 1, Nanos(100)).unwrap(),
                Ok(Nanos(slot))
            );
        }
        queue.refund(Nanos(10), 1); // not the last: ignored
        assert_eq!(queue.peek(Nanos(0), 0).unwrap().reset_after, Nanos(30));
        queue.refund(Nanos(20), 1);
        queue.refund(Nanos(10), 1);
        assert_eq!(
            queue.reserve(Nanos(0), 2, Nanos(100)).unwrap(),
            Ok(Nanos(10))
        );
        queue.refund(Nanos(20), 1); // the last unit of that request
        assert_eq!(queue.peek(Nanos(0), 0).unwrap().reset_after, Nanos(20));
    }

    #[test]
    fn near_the_end_of_time_nothing_overflows() {
        let mut queue = LeakyBucket::new(u64::MAX, Nanos(1)).unwrap();
        assert!(queue.try_acquire(Nanos::MAX, u64::MAX).unwrap().allowed);
        let d = queue.try_acquire(Nanos(0), 1).unwrap();
        assert_eq!((d.retry_after, d.remaining), (Nanos::MAX, 0));
        assert!(queue.reserve(Nanos(0), 1, Nanos::MAX).unwrap().is_err());
        queue.refund(Nanos::MAX, u64::MAX);
        assert_eq!(queue.peek(Nanos::MAX, 0).unwrap().remaining, u64::MAX);
    }

    #[test]
    fn reconfigure_keeps_queued_slots_and_waits_the_longer_interval() {
        let mut queue = LeakyBucket::new(4, Nanos(10)).unwrap();
        assert!(queue.try_acquire(Nanos(0), 3).unwrap().allowed);
        queue.reconfigure(Nanos(5), LeakyBucket::new(2, Nanos(100)).unwrap());
        // The last unit's slot is 20; the next leaves 100 after it.
        let d = queue.peek(Nanos(5), 1).unwrap();
        assert_eq!((d.retry_after, d.remaining), (Nanos(115), 0));
        queue.reconfigure(Nanos(5), LeakyBucket::new(200, Nanos(1)).unwrap());
        assert_eq!(
            queue.reserve(Nanos(5), 1, Nanos::MAX).unwrap(),
            Ok(Nanos(115))
        );
    }
}
