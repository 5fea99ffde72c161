//! The fixed-window counter.

use crate::aligned::{self, Booking, Windows};
use crate::limiter::check_cost;
use crate::nanos::{refundable, since};
use crate::state::codec::{Codec, Fingerprint, Reader, Writer};
use crate::{Calendar, Decision, Error, Limiter, Nanos};

/// A counter per aligned window of time: at most `limit` units in each.
///
/// Windows are `[k * window, (k + 1) * window)` for `k = 0, 1, ...`, aligned
/// to the caller's time zero (`now == 0`); or, built
/// [`with_calendar`](FixedWindow::with_calendar), the days, ISO weeks or
/// months of the UTC calendar, `now` being nanoseconds since the Unix epoch
/// (see [`Calendar`]). A request of `cost` at `now` is allowed when the units
/// admitted in the window holding `now`, plus `cost`, are at most `limit`;
/// every unit leaves at once when its window ends.
///
/// **Guarantee.** In every aligned window (every calendar day, week or
/// month) at most `limit` units are admitted. A span of length `window` that
/// straddles a window boundary can hold up to `2 * limit`: `limit` at the
/// very end of one window and `limit` at the start of the next (the boundary
/// burst). Where that burst matters, use a sliding window.
///
/// [`reserve`](Limiter::reserve) books the earliest window with room after
/// every earlier booking, at that window's start; until a booked slot, no
/// request is admitted (first come, first served) and `remaining` is 0. The
/// limiter keeps the count of one window only: the one holding the latest
/// call or booking.
///
/// ```
/// use ratekeeper::{FixedWindow, Limiter, Nanos};
///
/// // 3 per second: windows [0 s, 1 s), [1 s, 2 s), ...
/// let mut limiter = FixedWindow::new(3, Nanos::from_secs(1)).unwrap();
/// assert!(limiter.try_acquire(Nanos::from_millis(900), 3).unwrap().allowed);
/// let denied = limiter.try_acquire(Nanos::from_millis(950), 1).unwrap();
/// assert_eq!(denied.retry_after, Nanos::from_millis(50)); // the next window
/// // The boundary burst: 3 more at 1 s, 6 within 100 ms.
/// assert!(limiter.try_acquire(Nanos::from_secs(1), 3).unwrap().allowed);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixedWindow {
    limit: u64,
    windows: Windows,
    /// The latest time seen, so that time going backwards admits nothing.
    latest: u64,
    /// The slot of the latest booking: no request is served before it.
    floor: u64,
    /// The window holding `max(latest, floor)`, and the units in it.
    index: u64,
    used: u64,
    /// Units counted before this instant are not refunded (0 until a
    /// reconfigure, which folds the count into the new window: see there;
    /// [`Nanos::MAX`]: none, see `nanos::refundable`).
    counted_from: u64,
}

/// The limiter as of some time, computed without changing it.
struct View {
    latest: u64,
    index: u64,
    used: u64,
}

impl FixedWindow {
    /// A limiter admitting at most `limit` units in each aligned `window`.
    ///
    /// Fails when a value is zero.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn new(limit: u64, window: Nanos) -> Result<Self, Error> {
        if limit == 0 {
            return Err(Error::ZeroValue { name: "limit" });
        }
        if window == Nanos::ZERO {
            return Err(Error::ZeroValue { name: "window" });
        }
        Ok(FixedWindow::with_windows(limit, Windows::Every(window.0)))
    }

    /// A limiter admitting at most `limit` units in each `calendar` period
    /// in UTC: day, ISO week (from Monday) or month (from the 1st). `now`
    /// must then be nanoseconds since the Unix epoch.
    ///
    /// Fails when `limit` is zero.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn with_calendar(limit: u64, calendar: Calendar) -> Result<Self, Error> {
        if limit == 0 {
            return Err(Error::ZeroValue { name: "limit" });
        }
        Ok(FixedWindow::with_windows(
            limit,
            Windows::Calendar(calendar),
        ))
    }

    fn with_windows(limit: u64, windows: Windows) -> Self {
        FixedWindow {
            limit,
            windows,
            latest: 0,
            floor: 0,
            index: 0,
            used: 0,
            counted_from: 0,
        }
    }

    /// This configuration, never called.
    #[cfg(feature = "alloc")]
    pub(crate) fn fresh(&self) -> Self {
        Self::with_windows(self.limit, self.windows)
    }

    /// The length of a window; for a calendar, its nominal length: 1 day,
    /// 7 days, or 30 days for a month (whose windows are 28 to 31 days).
    pub fn window(&self) -> Nanos {
        Nanos(self.windows.nominal())
    }

    /// The calendar the windows follow, if any.
    pub fn calendar(&self) -> Option<Calendar> {
        self.windows.calendar()
    }

    /// Replaces the limit and windows of a live limiter with those of `new`,
    /// plain or calendar windows alike, in either direction.
    ///
    /// The latest time and the booking queue carry over. The units of the
    /// window holding the latest call or booking count in the new window
    /// holding that instant, and the room left there is the smaller of what
    /// each configuration leaves: `min(limit - used, new limit - used)`.
    /// Units of earlier windows are forgotten, as at any window boundary.
    /// Units taken before the reconfigure (up to the latest call or
    /// booking) are no longer refunded: the count carried over does not
    /// hold them one by one.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn reconfigure(&mut self, now: Nanos, new: FixedWindow) {
        let view = self.view(now);
        let room = (self.limit - view.used).min(new.limit.saturating_sub(view.used));
        // The count carried over is no longer the units of one window: the
        // new window may start before the old one (whose earlier units were
        // forgotten), and a count above the new limit is cut to it. So
        // units counted until now (and booked until the latest slot) are
        // no longer refunded: a refund could only give back what the
        // count does not hold.
        let counted_from = view.latest.max(self.floor).saturating_add(1);
        *self = FixedWindow {
            latest: view.latest,
            floor: self.floor,
            index: new.windows.index(view.latest.max(self.floor)),
            used: new.limit - room,
            counted_from,
            ..new
        };
    }

    /// Where window `k` ends, in 128 bits since it may exceed 64.
    fn end(&self, k: u64) -> u128 {
        self.windows.end(k as u128)
    }

    fn view(&self, now: Nanos) -> View {
        let latest = self.latest.max(now.0);
        let index = self.windows.index(latest.max(self.floor));
        let used = if index == self.index { self.used } else { 0 };
        View {
            latest,
            index,
            used,
        }
    }

    fn commit(&mut self, view: &View) {
        self.latest = view.latest;
        self.index = view.index;
        self.used = view.used;
    }

    /// The decision, the view it was made on, and the earliest instant at
    /// which `cost` fits (not before any booked slot).
    fn decide(&self, now: Nanos, cost: u64) -> Result<(Decision, View, u128), Error> {
        check_cost(cost, self.limit)?;
        let mut view = self.view(now);
        let open = view.latest >= self.floor;
        // A pending booking holds the limiter until its slot.
        let pending = if open { 0 } else { self.floor as u128 };
        let fits_here = cost <= self.limit - view.used;
        let fits_at = if fits_here {
            view.latest.max(self.floor) as u128
        } else {
            self.end(view.index)
        };
        let allowed = cost == 0 || (open && fits_here);
        if allowed {
            view.used += cost;
        }
        let ends = if view.used > 0 {
            self.end(view.index)
        } else {
            0
        };
        let decision = Decision {
            allowed,
            remaining: if open { self.limit - view.used } else { 0 },
            limit: self.limit,
            retry_after: if allowed {
                Nanos::ZERO
            } else {
                since(now, fits_at)
            },
            reset_after: since(now, ends.max(pending)),
        };
        Ok((decision, view, fits_at))
    }
}

impl Booking for FixedWindow {
    fn seen(&mut self, now: Nanos) -> u64 {
        let view = self.view(now);
        self.commit(&view);
        view.latest
    }

    fn book(&mut self, latest: u64, slot: u64, cost: u64) {
        self.floor = slot;
        let mut booked = self.view(Nanos(latest));
        booked.used += cost;
        self.commit(&booked);
    }
}

impl Limiter for FixedWindow {
    fn limit(&self) -> u64 {
        self.limit
    }

    fn try_acquire(&mut self, now: Nanos, cost: u64) -> Result<Decision, Error> {
        let (decision, view, _) = self.decide(now, cost)?;
        self.commit(&view);
        Ok(decision)
    }

    fn peek(&self, now: Nanos, cost: u64) -> Result<Decision, Error> {
        self.decide(now, cost).map(|(decision, _, _)| decision)
    }

    /// Admitted from the earliest window with room on, after every earlier
    /// booking; the units count in the window holding the slot.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn reserve_after(&mut self, now: Nanos, cost: u64, wait: Nanos) -> Result<bool, Error> {
        let (_, _, fits_at) = self.decide(now, cost)?;
        Ok(aligned::reserve_after(self, now, cost, wait, fits_at))
    }

    /// Gives back up to `cost` units to the window holding `taken_at`, if
    /// that is the window the limiter counts (the one holding the latest call
    /// or booking). Units of other windows stay: an earlier window is over,
    /// and while a booking is pending the current one is no longer counted.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn refund(&mut self, taken_at: Nanos, cost: u64) {
        if refundable(taken_at, self.counted_from) && self.windows.index(taken_at.0) == self.index {
            self.used -= cost.min(self.used);
        }
    }
}

impl Codec for FixedWindow {
    fn tag(&self) -> u8 {
        6
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
        fingerprint.word(self.limit);
        self.windows.fingerprint(fingerprint);
    }

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn write_state(&self, w: &mut Writer<'_>) {
        for field in [self.latest, self.floor, self.index, self.used] {
            w.varint(field);
        }
        // Only after a reconfigure: other states keep their bytes.
        if self.counted_from != 0 {
            w.varint(self.counted_from);
        }
    }

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn read_state(&mut self, r: &mut Reader<'_>) -> Result<(), Error> {
        self.latest = r.varint()?;
        self.floor = r.varint()?;
        // The window holding the units is never ahead of the one holding
        // the latest time or booking (a later one read its units as of a
        // window not yet reached).
        self.index = r.at_most(self.windows.index(self.latest.max(self.floor)))?;
        self.used = r.at_most(self.limit)?;
        self.counted_from =
            r.refund_bound_at_most(self.latest.max(self.floor).saturating_add(1))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acquire(limiter: &mut FixedWindow, now: u64, cost: u64) -> Decision {
        limiter.try_acquire(Nanos(now), cost).unwrap()
    }

    #[test]
    #[cfg(feature = "alloc")]
    fn a_state_whose_window_is_ahead_of_its_time_is_refused() {
        use crate::Portable;
        let mut limiter = FixedWindow::new(2, Nanos(100)).unwrap();
        let _ = acquire(&mut limiter, 150, 2);
        let mut bytes = limiter.to_bytes();
        let index_at = bytes.len() - 2; // latest 150 (2 bytes), floor 0, index 1, used 2
        assert_eq!(bytes[index_at], 1);
        bytes[index_at] = 2;
        let mut restored = FixedWindow::new(2, Nanos(100)).unwrap();
        assert_eq!(
            restored.restore(&bytes).unwrap_err().code(),
            "state_corrupt"
        );
        assert_eq!(restored, FixedWindow::new(2, Nanos(100)).unwrap());
        bytes[index_at] = 0; // an earlier window: its units no longer count
        restored.restore(&bytes).unwrap();
        assert!(acquire(&mut restored, 150, 2).allowed);
    }

    #[test]
    fn an_event_at_a_window_edge_belongs_to_the_next_window() {
        let mut limiter = FixedWindow::new(2, Nanos(100)).unwrap();
        assert!(acquire(&mut limiter, 99, 2).allowed);
        let denied = acquire(&mut limiter, 99, 1);
        assert_eq!(
            (denied.retry_after, denied.reset_after),
            (Nanos(1), Nanos(1))
        );
        let d = acquire(&mut limiter, 100, 2);
        assert!(d.allowed);
        assert_eq!((d.remaining, d.reset_after), (0, Nanos(100)));
    }

    #[test]
    fn bookings_spill_into_following_windows_in_order() {
        let mut limiter = FixedWindow::new(3, Nanos(100)).unwrap();
        let mut book = |cost| limiter.reserve(Nanos(10), cost, Nanos(1_000)).unwrap();
        assert_eq!(book(2), Ok(Nanos(0)));
        assert_eq!(book(2), Ok(Nanos(90))); // does not fit in [0, 100)
        assert_eq!(book(1), Ok(Nanos(90))); // fits beside it at 100
        assert_eq!(book(1), Ok(Nanos(190)));
        // Window [0, 100) has 1 unit left, but it may not jump the queue.
        let d = acquire(&mut limiter, 20, 1);
        assert_eq!(
            (d.allowed, d.remaining, d.retry_after),
            (false, 0, Nanos(180))
        );
        assert_eq!(d.reset_after, Nanos(280));
        let denied = limiter
            .reserve(Nanos(10), 3, Nanos(289))
            .unwrap()
            .unwrap_err();
        assert_eq!(denied.retry_after, Nanos(290));
    }

    #[test]
    fn refunds_return_units_only_to_the_counted_window() {
        let mut limiter = FixedWindow::new(3, Nanos(100)).unwrap();
        assert!(acquire(&mut limiter, 50, 3).allowed);
        limiter.refund(Nanos(150), 3); // nothing was taken in [100, 200)
        limiter.refund(Nanos(0), 1);
        assert_eq!(acquire(&mut limiter, 60, 0).remaining, 1);
        assert_eq!(
            limiter.reserve(Nanos(60), 3, Nanos(40)).unwrap(),
            Ok(Nanos(40))
        );
        limiter.refund(Nanos(60), 1); // [0, 100) is no longer counted
        limiter.refund(Nanos(100), 5); // the booking, cancelled: never below 0
        assert_eq!(limiter.peek(Nanos(100), 0).unwrap().remaining, 3);
        assert!(!acquire(&mut limiter, 99, 1).allowed); // the slot stays
    }

    #[test]
    fn time_going_backwards_is_judged_at_the_latest_time() {
        let mut limiter = FixedWindow::new(1, Nanos(100)).unwrap();
        assert!(acquire(&mut limiter, 250, 1).allowed);
        let d = acquire(&mut limiter, 120, 1);
        assert!(!d.allowed);
        assert_eq!((d.retry_after, d.reset_after), (Nanos(180), Nanos(180)));
    }

    #[test]
    fn the_last_window_never_ends_and_nothing_overflows() {
        // Window 1 starts at u64::MAX and would end at 2 * u64::MAX.
        let mut limiter = FixedWindow::new(u64::MAX, Nanos(u64::MAX)).unwrap();
        assert!(acquire(&mut limiter, u64::MAX - 1, u64::MAX).allowed);
        assert!(acquire(&mut limiter, u64::MAX, u64::MAX).allowed);
        let d = acquire(&mut limiter, u64::MAX, 1);
        assert_eq!(
            (d.allowed, d.retry_after, d.reset_after),
            (false, Nanos::MAX, Nanos::MAX)
        );
        assert!(limiter.reserve(Nanos::MAX, 1, Nanos::MAX).unwrap().is_err());
        let mut tiny = FixedWindow::new(1, Nanos(1)).unwrap();
        assert!(acquire(&mut tiny, u64::MAX, 1).allowed);
        assert_eq!(acquire(&mut tiny, u64::MAX, 1).retry_after, Nanos(1));
        assert!(tiny.reserve(Nanos::MAX, 1, Nanos::MAX).unwrap().is_err());
    }

    #[test]
    fn reconfigure_leaves_the_smaller_room() {
        let mut limiter = FixedWindow::new(10, Nanos(100)).unwrap();
        assert!(acquire(&mut limiter, 150, 4).allowed);
        let mut raised = limiter.clone();
        raised.reconfigure(Nanos(160), FixedWindow::new(20, Nanos(1_000)).unwrap());
        assert_eq!(raised.peek(Nanos(160), 0).unwrap().remaining, 6);
        assert_eq!(raised.peek(Nanos(1_000), 0).unwrap().remaining, 20);
        limiter.reconfigure(Nanos(160), FixedWindow::new(3, Nanos(100)).unwrap());
        assert_eq!(limiter.peek(Nanos(160), 0).unwrap().remaining, 0);
        assert_eq!(limiter.peek(Nanos(200), 0).unwrap().remaining, 3);
    }

    #[test]
    fn reconfigure_keeps_the_booking_queue() {
        let mut limiter = FixedWindow::new(2, Nanos(100)).unwrap();
        assert_eq!(
            limiter.reserve(Nanos(0), 2, Nanos(0)).unwrap(),
            Ok(Nanos(0))
        );
        assert_eq!(
            limiter.reserve(Nanos(0), 2, Nanos(100)).unwrap(),
            Ok(Nanos(100))
        );
        // The booked window was full, so the new window [0, 1_000) is too.
        limiter.reconfigure(Nanos(50), FixedWindow::new(5, Nanos(1_000)).unwrap());
        let d = limiter.peek(Nanos(60), 1).unwrap();
        assert_eq!((d.allowed, d.retry_after), (false, Nanos(940)));
        assert_eq!(limiter.peek(Nanos(100), 0).unwrap().remaining, 0);
        assert_eq!(limiter.peek(Nanos(1_000), 0).unwrap().remaining, 5);
    }
}
