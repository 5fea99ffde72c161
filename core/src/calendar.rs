//! Calendar periods in UTC: the day, the ISO week and the month.

/// Nanoseconds per day. Unix time has no leap seconds, so every UTC day is
/// exactly this long in nanoseconds since the epoch.
const DAY: u128 = 86_400_000_000_000;

/// Calendar periods in UTC, as the windows of a [`FixedWindow`](crate::FixedWindow)
/// or a [`SlidingWindowCounter`](crate::SlidingWindowCounter).
///
/// With a calendar, `now` must be nanoseconds since the Unix epoch
/// (1970-01-01 00:00 UTC), as Unix time counts them: without leap seconds,
/// so that every day is 86,400 s. Boundaries are computed with integer
/// civil-date arithmetic, exact for every `u64` instant (up to the year 2554).
///
/// **Guarantee.** The window holding an instant starts at the latest
/// 00:00 UTC (`Day`), Monday 00:00 UTC (`Week`) or first of a month 00:00 UTC
/// (`Month`) at or before it, and ends where the next one starts; an instant
/// exactly on a boundary belongs to the window it starts.
///
/// ```
/// use ratekeeper::{Calendar, FixedWindow, Limiter, Nanos};
///
/// // 2024-02-29 23:59:59 UTC, the last second of February in a leap year.
/// let feb_29 = Nanos::from_secs(1_709_251_199);
/// let mut monthly = FixedWindow::with_calendar(1_000, Calendar::Month).unwrap();
/// assert!(monthly.try_acquire(feb_29, 1_000).unwrap().allowed);
/// let denied = monthly.try_acquire(feb_29, 1).unwrap();
/// // March starts one second later, with a fresh count.
/// assert_eq!(denied.retry_after, Nanos::from_secs(1));
/// assert_eq!(monthly.calendar(), Some(Calendar::Month));
/// // A month's nominal length is limits' 30 days; see `FixedWindow::window`.
/// assert_eq!(monthly.window(), Nanos::from_secs(30 * 86_400));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize, serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Calendar {
    /// From 00:00 UTC to the next 00:00 UTC: 86,400 s.
    Day,
    /// An ISO week: from Monday 00:00 UTC to the next Monday, 7 days.
    Week,
    /// From the first of a month 00:00 UTC to the first of the next: 28 to
    /// 31 days. (The fixed 30-day month of rate strings is another thing:
    /// see [`Rate`](crate::Rate).)
    Month,
}

impl Calendar {
    /// Every calendar, in declaration order. A slice, not an array: a
    /// calendar added in a minor release changes its length, not its type.
    pub const ALL: &'static [Calendar] = &[Calendar::Day, Calendar::Week, Calendar::Month];

    /// The calendar's name as configuration files spell it: `day`, `week` or
    /// `month`.
    pub const fn name(self) -> &'static str {
        match self {
            Calendar::Day => "day",
            Calendar::Week => "week",
            Calendar::Month => "month",
        }
    }

    /// The calendar named `name` (`day`, `week` or `month`, in any case).
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn from_name(name: &str) -> Option<Calendar> {
        Calendar::ALL
            .iter()
            .copied()
            .find(|c| c.name().eq_ignore_ascii_case(name))
    }

    /// The nominal length: 1 day, 7 days, or 30 days for a month (what
    /// `limits` calls a month; real months are 28 to 31 days).
    pub(crate) const fn nominal(self) -> u64 {
        let days = match self {
            Calendar::Day => 1,
            Calendar::Week => 7,
            Calendar::Month => 30,
        };
        days * DAY as u64
    }

    /// The number of the window holding `t` (ns since the epoch), counted
    /// from the window holding the epoch.
    pub(crate) fn index(self, t: u64) -> u64 {
        let days = t / DAY as u64;
        match self {
            Calendar::Day => days,
            // 1970-01-01 was a Thursday: week 0 started on Monday 1969-12-29.
            Calendar::Week => (days + 3) / 7,
            Calendar::Month => {
                let (year, month) = civil_from_days(days);
                (year - 1970) * 12 + (month - 1)
            }
        }
    }

    /// The first day of window `k`, in days since the epoch; week 0 starts
    /// 3 days before it, hence the signed result.
    fn first_day(self, k: u128) -> i128 {
        match self {
            Calendar::Day => k as i128,
            Calendar::Week => 7 * k as i128 - 3,
            Calendar::Month => days_from_civil(1970 + k / 12, (k % 12) as u32 + 1) as i128,
        }
    }

    /// Where window `k` ends (the next one starts), in ns since the epoch.
    /// Exact for every `k` up to 2^64.
    pub(crate) fn end(self, k: u128) -> u128 {
        // Never negative: window 0 ends after the epoch.
        self.first_day(k + 1) as u128 * DAY
    }

    /// The length of window `k` in ns.
    pub(crate) fn len(self, k: u128) -> u128 {
        (self.first_day(k + 1) - self.first_day(k)) as u128 * DAY
    }
}

/// [`Calendar::name`]: `day`, `week` or `month`.
impl core::fmt::Display for Calendar {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.pad(self.name())
    }
}

/// Days since 1970-01-01 of the first of `month` (1 to 12) in `year`
/// (at least 1970): Howard Hinnant's `days_from_civil`, for the first of a
/// month and years from 1970 on, so that nothing is negative.
fn days_from_civil(year: u128, month: u32) -> u128 {
    // Years start in March, so that February's leap day comes last.
    let year = year - u128::from(month <= 2);
    let (era, year_of_era) = (year / 400, year % 400);
    let shifted = u128::from((month + 9) % 12); // March = 0
    let day_of_year = (153 * shifted + 2) / 5;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The year and month (1 to 12) of the day `days` after 1970-01-01: Howard
/// Hinnant's `civil_from_days`, for days from the epoch on.
fn civil_from_days(days: u64) -> (u64, u64) {
    let days = days + 719_468; // from 0000-03-01
    let (era, day_of_era) = (days / 146_097, days % 146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted = (5 * day_of_year + 2) / 153; // March = 0
    let month = if shifted < 10 {
        shifted + 3
    } else {
        shifted - 9
    };
    (era * 400 + year_of_era + u64::from(month <= 2), month)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn known_dates() {
        // 2000-03-01 (after a leap day in a century year divisible by 400).
        assert_eq!(days_from_civil(2000, 3), 11_017);
        assert_eq!(civil_from_days(11_017), (2000, 3));
        assert_eq!(civil_from_days(11_016), (2000, 2));
        // 2100 is not a leap year: February has 28 days.
        let feb_2100 = (2100 - 1970) * 12 + 1;
        assert_eq!(Calendar::Month.len(feb_2100), 28 * DAY);
        assert_eq!(Calendar::Month.len(feb_2100 - 1200), 29 * DAY); // 2000
        assert_eq!(Calendar::Month.len(0), 31 * DAY); // January 1970
    }

    #[test]
    fn the_epoch_is_in_week_zero_which_started_on_monday() {
        assert_eq!(Calendar::Week.index(0), 0);
        assert_eq!(Calendar::Week.end(0), 4 * DAY); // Monday 1970-01-05
        assert_eq!(Calendar::Week.index(4 * DAY as u64 - 1), 0);
        assert_eq!(Calendar::Week.index(4 * DAY as u64), 1);
        assert_eq!(Calendar::Week.len(0), 7 * DAY);
    }

    #[test]
    fn the_last_instant_is_in_2554() {
        // 2554-07-21 23:34:33.709551615 UTC.
        let k = Calendar::Month.index(u64::MAX);
        assert_eq!((1970 + k / 12, k % 12 + 1), (2554, 7));
        assert!(Calendar::Month.end(k as u128) > u64::MAX as u128);
        assert!(
            Calendar::Month.end(k as u128) - Calendar::Month.len(k as u128) <= u64::MAX as u128
        );
        assert_eq!(Calendar::Day.index(u64::MAX), u64::MAX / (86_400 * S));
        // Far beyond, nothing overflows.
        let far = 1u128 << 64;
        for calendar in [Calendar::Day, Calendar::Week, Calendar::Month] {
            assert_eq!(calendar.end(far) - calendar.end(far - 1), calendar.len(far));
            assert!(calendar.len(far) >= DAY);
        }
    }
}
