//! The sliding-window counter: two window counts, weighted.

use crate::aligned::{self, Booking, Windows};
use crate::limiter::check_cost;
use crate::nanos::{refundable, since};
use crate::state::codec::{Codec, Fingerprint, Reader, Writer};
use crate::{Calendar, Decision, Error, Limiter, Nanos};

/// An O(1) estimate of a sliding window, from the counts of the current and
/// the previous aligned window.
///
/// Windows are `[k * window, (k + 1) * window)`, aligned to the caller's time
/// zero. At `e` ns into a window, the previous window's count weighs
/// `(window - e) / window`, as if its units had been spread evenly:
/// `estimate = prev * (window - e) / window + current`, compared exactly as
/// `prev * (window - e) + (current + cost) * window <= limit * window`. The
/// estimate falls continuously, across window boundaries too.
///
/// **Guarantee.** At most `limit` units in every aligned window, and at most
/// `max(limit, 2 * limit - ceil(2 * limit / window))` in any span of length
/// `window` (`window` in ns: that is `2 * limit - 1` once `window >= 2 * limit`).
/// The bound is reached: `limit` units in the last ns of a window, then
/// `limit - ceil(2 * limit / window)` two ns before the next window ends.
/// Against the exact sliding log (`SlidingWindowLog`), which counts the units
/// of `(now - window, now]`: at `e` ns into a window whose previous window
/// holds `prev` units, an admission leaves at most
/// `limit + floor(prev * e / window)` units in the log's window, and a request
/// is denied only if it would not fit there with
/// `ceil(prev * (window - e) / window)` more units (the counter then assumes
/// units of the previous window that have in fact already left).
///
/// **Calendar windows.** Built [`with_calendar`](Self::with_calendar), the
/// windows are the days, ISO weeks or months of the UTC calendar, `now` being
/// ns since the Unix epoch (see [`Calendar`]). In a window of `len` ns ending
/// at `end`, the previous window's count weighs the part of the *current*
/// window not yet elapsed, `(end - now) / len`, whatever the previous
/// window's length: `prev * (end - now) + (current + cost) * len <= limit * len`.
/// The estimate still falls continuously, across boundaries too. Days and
/// weeks all have one length, so everything above holds for them as stated,
/// `window` being that length. Months have 28 to 31 days; everything above
/// holds for them with `window` read as `len`, the length of the month
/// holding `now` (for a span, of the last month it meets), and:
/// - a span of at most 28 days meets at most two months, so it holds at most
///   `max(limit, 2 * limit - ceil(2 * limit / len))` units (`2 * limit - 1`
///   for any `limit` up to 10^15);
/// - a longer span can meet three months (31 days from the last ns of
///   January cover all of February and 3 days of March): a span of `d` ns
///   around a whole month of `mid` ns holds at most
///   `2 * limit + floor(limit * (d - 2 - mid) / len)`, about `2.1 * limit`
///   for 31 days around a February;
/// - after a shorter month (March after February), the log's window of
///   `len` reaches up to 3 days into the month before the previous one, and
///   the units admitted there add to the log's count bound above.
///
/// [`reserve`](Limiter::reserve) books the earliest instant at which the
/// estimate admits the cost, after every earlier booking; until a booked
/// slot, no request is admitted (first come, first served) and `remaining`
/// is 0. A booking counts as an acquire at its slot, so the guarantee covers
/// bookings too.
///
/// ```
/// use ratekeeper::{Limiter, Nanos, SlidingWindowCounter};
///
/// let mut limiter = SlidingWindowCounter::new(10, Nanos::from_secs(1)).unwrap();
/// assert!(limiter.try_acquire(Nanos::ZERO, 10).unwrap().allowed);
/// // At 1.25 s the first second weighs 75%: 7.5 units, so 2 more fit, not 3.
/// let denied = limiter.try_acquire(Nanos::from_millis(1_250), 3).unwrap();
/// assert_eq!((denied.allowed, denied.remaining), (false, 2));
/// // 3 fit once its weight is 70%, at 1.3 s.
/// assert_eq!(denied.retry_after, Nanos::from_millis(50));
/// ```
///
/// A calendar month, weighed by the part of the current month not elapsed:
///
/// ```
/// use ratekeeper::{Calendar, Limiter, Nanos, SlidingWindowCounter};
///
/// const DAY: u64 = 86_400;
/// let march_1_2024 = 1_709_251_200; // Unix seconds
/// let mut limiter = SlidingWindowCounter::with_calendar(310, Calendar::Month).unwrap();
/// // 310 units on the last day of February.
/// assert!(limiter.try_acquire(Nanos::from_secs(march_1_2024 - DAY), 310).unwrap().allowed);
/// // 10 days into March (31 days), February weighs 21/31: 210 units, 100 left.
/// let d = limiter.peek(Nanos::from_secs(march_1_2024 + 10 * DAY), 0).unwrap();
/// assert_eq!(d.remaining, 100);
/// // Fresh when March ends, February's units having faded out.
/// assert_eq!(d.reset_after, Nanos::from_secs(21 * DAY));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlidingWindowCounter {
    limit: u64,
    windows: Windows,
    /// The latest time seen, so that time going backwards admits nothing.
    latest: u64,
    /// The slot of the latest booking: no request is served before it.
    floor: u64,
    /// The window holding `max(latest, floor)` (it never decreases), the
    /// units in it, and the units in the window before it.
    index: u64,
    cur: u64,
    prev: u64,
    /// Units counted before this instant are not refunded (0 until a
    /// reconfigure, which folds the counts into the new window: see there;
    /// [`Nanos::MAX`]: none, see `nanos::refundable`).
    counted_from: u64,
}

/// The limiter as of some time, computed without changing it.
struct View {
    latest: u64,
    /// `max(latest, floor)`: the instant the counts are judged at.
    at: u64,
    index: u64,
    cur: u64,
    prev: u64,
}

impl SlidingWindowCounter {
    /// A counter admitting about `limit` units in any `window` (see the
    /// guarantee above).
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
        Ok(SlidingWindowCounter::with_windows(
            limit,
            Windows::Every(window.0),
        ))
    }

    /// A counter over `calendar` periods in UTC: day, ISO week (from Monday)
    /// or month (from the 1st). `now` must then be nanoseconds since the
    /// Unix epoch. See the guarantee above for months of unequal lengths.
    ///
    /// Fails when `limit` is zero.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn with_calendar(limit: u64, calendar: Calendar) -> Result<Self, Error> {
        if limit == 0 {
            return Err(Error::ZeroValue { name: "limit" });
        }
        Ok(SlidingWindowCounter::with_windows(
            limit,
            Windows::Calendar(calendar),
        ))
    }

    fn with_windows(limit: u64, windows: Windows) -> Self {
        SlidingWindowCounter {
            limit,
            windows,
            latest: 0,
            floor: 0,
            index: 0,
            cur: 0,
            prev: 0,
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

    /// Replaces the limit and windows of a live counter with those of `new`,
    /// plain or calendar windows alike, in either direction.
    ///
    /// The latest time and the booking queue carry over. Both known counts
    /// (previous and current window, the previous one at full weight) count
    /// in the new window holding the latest call or booking, and the room
    /// left there is the smaller of what each configuration leaves: the old
    /// estimate's room and `new limit - prev - current`. Units of earlier
    /// windows are forgotten, as the old configuration had forgotten them.
    /// Units taken before the reconfigure (up to the latest call or
    /// booking) are no longer refunded: the counts carried over do not
    /// hold them one by one.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn reconfigure(&mut self, now: Nanos, new: SlidingWindowCounter) {
        let view = self.view(now);
        let known = view.prev.saturating_add(view.cur);
        let room = self.room(&view).min(new.limit.saturating_sub(known));
        // The count carried over is no longer the units of one window: the
        // new window may start before the old ones (whose earlier units were
        // forgotten), the previous count weighs in whole, and a count above
        // the new limit is cut to it. So units counted until now (and
        // booked until the latest slot) are no longer refunded: a refund
        // could only give back what the count does not hold.
        let counted_from = view.at.saturating_add(1);
        *self = SlidingWindowCounter {
            latest: view.latest,
            floor: self.floor,
            index: new.windows.index(view.at),
            cur: new.limit - room,
            prev: 0,
            counted_from,
            ..new
        };
    }

    fn view(&self, now: Nanos) -> View {
        let latest = self.latest.max(now.0);
        let at = latest.max(self.floor);
        let index = self.windows.index(at);
        let (cur, prev) = match index - self.index {
            0 => (self.cur, self.prev),
            1 => (0, self.cur),
            _ => (0, 0),
        };
        View {
            latest,
            at,
            index,
            cur,
            prev,
        }
    }

    /// `ceil(prev * (end - at) / len)`, `end` and `len` those of the window
    /// holding `at`: the previous window's weight, rounded up to whole units.
    fn weighted_prev(&self, view: &View) -> u64 {
        let k = view.index as u128;
        let left = self.windows.end(k) - view.at as u128;
        (view.prev as u128 * left).div_ceil(self.windows.len(k)) as u64
    }

    /// The largest cost the estimate admits at `view.at`.
    fn room(&self, view: &View) -> u64 {
        (self.limit - view.cur).saturating_sub(self.weighted_prev(view))
    }

    /// The first instant `t` of window `k` at which
    /// `prev * (end - t) <= room * len`, or 0 if that is before the epoch
    /// (only in week 0, which starts before it).
    fn first_in(&self, k: u128, prev: u64, room: u64) -> u128 {
        let (end, len) = (self.windows.end(k), self.windows.len(k));
        let left = if prev == 0 {
            len
        } else {
            (room as u128 * len / prev as u128).min(len)
        };
        end.saturating_sub(left)
    }

    /// The earliest instant, not before `view.at`, at which `cost` fits.
    /// The estimate only falls with time, so this is exact.
    fn earliest_fit(&self, view: &View, cost: u64) -> u128 {
        let k = view.index as u128;
        match (self.limit - view.cur).checked_sub(cost) {
            Some(room) => self.first_in(k, view.prev, room).max(view.at as u128),
            // Only in the next window, where `cur` becomes the previous count.
            None => self.first_in(k + 1, view.cur, self.limit - cost),
        }
    }

    fn decide(&self, now: Nanos, cost: u64) -> Result<(Decision, View, u128), Error> {
        check_cost(cost, self.limit)?;
        let mut view = self.view(now);
        let open = view.latest >= self.floor;
        // A pending booking holds the limiter until its slot.
        let pending = if open { 0 } else { self.floor as u128 };
        let fits_at = self.earliest_fit(&view, cost);
        let allowed = cost == 0 || (open && fits_at == view.at as u128);
        if allowed {
            view.cur += cost;
        }
        // Fresh once a window with units has been the previous one for a
        // whole window.
        let last = match (view.cur, view.prev) {
            (0, 0) => None,
            (0, _) => Some(view.index as u128),
            _ => Some(view.index as u128 + 1),
        };
        let fresh_at = last.map_or(0, |k| self.windows.end(k));
        let decision = Decision {
            allowed,
            remaining: if open { self.room(&view) } else { 0 },
            limit: self.limit,
            retry_after: if allowed {
                Nanos::ZERO
            } else {
                since(now, fits_at)
            },
            reset_after: since(now, fresh_at.max(pending)),
        };
        Ok((decision, view, fits_at))
    }

    fn commit(&mut self, view: &View) {
        self.latest = view.latest;
        self.index = view.index;
        self.cur = view.cur;
        self.prev = view.prev;
    }
}

impl Booking for SlidingWindowCounter {
    fn seen(&mut self, now: Nanos) -> u64 {
        let view = self.view(now);
        self.commit(&view);
        view.latest
    }

    fn book(&mut self, latest: u64, slot: u64, cost: u64) {
        self.floor = slot;
        let mut booked = self.view(Nanos(latest));
        booked.cur += cost;
        self.commit(&booked);
    }
}

impl Limiter for SlidingWindowCounter {
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

    /// Admitted from the earliest instant the estimate admits `cost` on,
    /// after every earlier booking; the units count in the window holding
    /// the slot.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn reserve_after(&mut self, now: Nanos, cost: u64, wait: Nanos) -> Result<bool, Error> {
        let (_, _, fits_at) = self.decide(now, cost)?;
        Ok(aligned::reserve_after(self, now, cost, wait, fits_at))
    }

    /// Gives back up to `cost` units to the window holding `taken_at`, if the
    /// counter still counts it: the window of the latest call or booking, or
    /// the one before. Units of other windows stay.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn refund(&mut self, taken_at: Nanos, cost: u64) {
        if !refundable(taken_at, self.counted_from) {
            return;
        }
        let count = match self.index.checked_sub(self.windows.index(taken_at.0)) {
            Some(0) => &mut self.cur,
            Some(1) => &mut self.prev,
            _ => return,
        };
        *count -= cost.min(*count);
    }
}

impl Codec for SlidingWindowCounter {
    fn tag(&self) -> u8 {
        5
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
        for field in [self.latest, self.floor, self.index, self.cur, self.prev] {
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
        // Windows only move forward from the one holding the counts.
        let current = self.windows.index(self.latest.max(self.floor));
        self.index = r.at_most(current)?;
        self.cur = r.at_most(self.limit)?;
        self.prev = r.at_most(self.limit)?;
        self.counted_from =
            r.refund_bound_at_most(self.latest.max(self.floor).saturating_add(1))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter(limit: u64, window: u64) -> SlidingWindowCounter {
        SlidingWindowCounter::new(limit, Nanos(window)).unwrap()
    }

    fn acquire(limiter: &mut SlidingWindowCounter, now: u64, cost: u64) -> Decision {
        limiter.try_acquire(Nanos(now), cost).unwrap()
    }

    #[test]
    fn the_previous_window_fades_continuously() {
        let mut limiter = counter(4, 100);
        assert!(acquire(&mut limiter, 0, 4).allowed);
        // At 100 the estimate is still 4; it falls by 1 every 25 ns.
        for (now, remaining) in [
            (99, 0),
            (100, 0),
            (124, 0),
            (125, 1),
            (150, 2),
            (199, 3),
            (200, 4),
        ] {
            assert_eq!(
                limiter.peek(Nanos(now), 0).unwrap().remaining,
                remaining,
                "at {now}"
            );
        }
        let d = acquire(&mut limiter, 110, 3);
        assert_eq!(
            (d.allowed, d.retry_after, d.reset_after),
            (false, Nanos(65), Nanos(90))
        );
    }

    #[test]
    fn the_span_bound_is_reached() {
        // limit 3, window 3: 2 * 3 - ceil(6 / 3) = 4 units within 3 ns.
        let mut limiter = counter(3, 3);
        assert!(acquire(&mut limiter, 2, 3).allowed);
        assert!(acquire(&mut limiter, 4, 1).allowed);
        assert!(!acquire(&mut limiter, 4, 1).allowed);
    }

    #[test]
    fn retry_crosses_into_the_next_window() {
        let mut limiter = counter(4, 100);
        assert!(acquire(&mut limiter, 50, 4).allowed);
        // Nothing fits before 100; at 100 + e the estimate is 4 * (100 - e) / 100.
        let d = acquire(&mut limiter, 60, 3);
        assert_eq!((d.retry_after, d.reset_after), (Nanos(115), Nanos(140)));
        assert!(!acquire(&mut limiter, 174, 3).allowed);
        assert!(acquire(&mut limiter, 175, 3).allowed);
    }

    #[test]
    fn bookings_are_acquires_at_their_slot() {
        let mut limiter = counter(2, 100);
        let mut book = |cost| limiter.reserve(Nanos(0), cost, Nanos(1_000)).unwrap();
        assert_eq!(book(2), Ok(Nanos(0)));
        assert_eq!(book(1), Ok(Nanos(150))); // 2 * (100 - e) / 100 <= 1
        assert_eq!(book(1), Ok(Nanos(200)));
        assert_eq!(book(2), Ok(Nanos(400))); // at 300 the estimate is still 1
        let d = acquire(&mut limiter, 250, 0);
        assert_eq!(
            (d.allowed, d.remaining, d.reset_after),
            (true, 0, Nanos(350))
        );
        let denied = limiter
            .reserve(Nanos(0), 1, Nanos(549))
            .unwrap()
            .unwrap_err();
        assert_eq!(denied.retry_after, Nanos(550));
    }

    #[test]
    fn refunds_reach_the_current_and_previous_window_only() {
        let mut limiter = counter(4, 100);
        assert!(acquire(&mut limiter, 10, 2).allowed);
        assert!(acquire(&mut limiter, 120, 2).allowed);
        limiter.refund(Nanos(250), 4); // nothing there
        limiter.refund(Nanos(50), 1);
        assert_eq!(limiter.peek(Nanos(150), 0).unwrap().remaining, 1); // 4 - 2 - ceil(0.5)
        limiter.refund(Nanos(110), 9);
        assert_eq!(limiter.peek(Nanos(150), 0).unwrap().remaining, 3);
        assert!(acquire(&mut limiter, 300, 0).allowed);
        limiter.refund(Nanos(150), 1); // two windows back: gone
        assert_eq!(limiter.peek(Nanos(300), 0).unwrap().remaining, 4);
    }

    #[test]
    fn extremes_do_not_overflow() {
        let mut limiter = counter(u64::MAX, u64::MAX);
        assert!(acquire(&mut limiter, u64::MAX - 1, u64::MAX).allowed);
        let d = acquire(&mut limiter, u64::MAX, 1);
        assert_eq!((d.allowed, d.remaining), (false, 0));
        assert_eq!(d.retry_after, Nanos(1)); // at 2^64: unreachable, so not booked
        assert!(limiter.reserve(Nanos::MAX, 1, Nanos::MAX).unwrap().is_err());
        let mut tiny = counter(1, 1);
        assert!(acquire(&mut tiny, u64::MAX, 1).allowed);
        assert_eq!(acquire(&mut tiny, u64::MAX, 1).retry_after, Nanos(2));
    }

    #[test]
    fn reconfigure_leaves_the_smaller_room() {
        let mut limiter = counter(10, 100);
        assert!(acquire(&mut limiter, 50, 4).allowed);
        assert!(acquire(&mut limiter, 150, 2).allowed);
        // Old room at 150: 10 - 2 - ceil(4 * 0.5) = 6; new: 20 - 6 = 14.
        let mut raised = limiter.clone();
        raised.reconfigure(Nanos(150), counter(20, 1_000));
        assert_eq!(raised.peek(Nanos(150), 0).unwrap().remaining, 6);
        assert_eq!(raised.peek(Nanos(999), 0).unwrap().remaining, 6);
        limiter.reconfigure(Nanos(150), counter(8, 100));
        assert_eq!(limiter.peek(Nanos(150), 0).unwrap().remaining, 2);
    }
}
