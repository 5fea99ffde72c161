//! Rate strings, as the Python `limits` library writes them.

use core::fmt;
use core::str::FromStr;

use crate::{Error, Nanos};

const SECOND: u64 = 1_000_000_000;

/// The units of rate strings and their lengths in seconds, as `limits`
/// defines them: a month is 30 days and a year 12 such months.
const UNITS: [(&str, u64); 6] = [
    ("second", 1),
    ("minute", 60),
    ("hour", 3_600),
    ("day", 86_400),
    ("month", 30 * 86_400),
    ("year", 12 * 30 * 86_400),
];

/// The units `Display` writes, longest first: never `month` or `year`, whose
/// fixed lengths could be mistaken for calendar ones.
const DISPLAY_UNITS: [(&str, u64); 4] = [
    ("day", 86_400),
    ("hour", 3_600),
    ("minute", 60),
    ("second", 1),
];

/// The separators of a list of rates.
const SEPARATORS: [char; 3] = [';', ',', '|'];

/// `amount` units per `period`: what a rate string such as `"10/second"` or
/// `"100 per 2 hours"` says.
///
/// [`parse`](Rate::parse) (and [`FromStr`]) read one rate in the grammar of
/// the Python `limits` library, and [`parse_rates`] a list of them:
/// `count`, then `/` or `per`, then an optional multiple `n`, then a unit:
/// `second`, `minute`, `hour`, `day`, `month` or `year`, singular or plural.
/// Letters are read in any case, and whitespace (what Python's `\s` matches)
/// may surround every part. As in `limits`, a `month` is 30 days and a
/// `year` 12 such months, 360 days: fixed lengths, not calendar months, which
/// are [`Calendar::Month`](crate::Calendar::Month) windows.
///
/// **Guarantee.** A string that `limits` reads as one rate is read here as
/// the same amount and period, unless `limits` reads what is surely a
/// mistake: a count of 0 ([`Error::ZeroValue`]), a multiple of 0 (which
/// `limits` reads as 1; [`Error::ZeroValue`] here), a count or period beyond
/// 64 bits ([`Error::Overflow`]), a list given to `parse` (whose first rate
/// `limits.parse` returns) and a `:` before a list separator (which a typo
/// in `limits`' pattern lets through). Every other string fails with
/// [`Error::InvalidSyntax`], naming the byte offset and what was expected
/// there; no input panics. [`Display`](fmt::Display) writes the canonical
/// form, which parses back to the same rate: the count, then the period in
/// the largest of `day`, `hour`, `minute` and `second` that divides it (never
/// `month` or `year`: `"1/month"` displays as `"1/30 days"`, which cannot be
/// mistaken for a calendar month). `limits` has no unit below the second, so
/// a period that is not a whole number of seconds (only from [`Rate::new`])
/// displays in nanoseconds, `"3/1500000000 nanoseconds"`, which does not
/// parse.
///
/// ```
/// use ratekeeper::{Error, FixedWindow, Nanos, Rate};
///
/// let rate: Rate = " 100 per 2 HOURS ".parse().unwrap();
/// assert_eq!(rate, Rate::new(100, Nanos::from_secs(7_200)).unwrap());
/// assert_eq!(rate.to_string(), "100/2 hours");
/// assert_eq!(Rate::parse("10/month").unwrap().to_string(), "10/30 days");
///
/// let error = Rate::parse("10 per fortnight").unwrap_err();
/// assert_eq!(error, Error::InvalidSyntax {
///     name: "rate",
///     at: 7,
///     expected: "a unit (second, minute, hour, day, month, year)",
/// });
///
/// // A rate as the limit and window of a window algorithm.
/// let limiter = FixedWindow::new(rate.amount(), rate.period()).unwrap();
/// assert_eq!(limiter.window(), Nanos::from_secs(7_200));
/// ```
///
/// Its fields are private, so that every rate has passed [`Rate::new`]'s
/// checks (neither its amount nor its period is zero), and read through
/// [`amount`](Rate::amount) and [`period`](Rate::period):
///
/// ```compile_fail
/// use ratekeeper::{Nanos, Rate};
///
/// let zero = Rate { amount: 3, period: Nanos(0) };
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rate {
    pub(crate) amount: u64,
    pub(crate) period: Nanos,
}

impl Rate {
    /// `amount` units per `period`.
    ///
    /// Fails when a value is zero.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn new(amount: u64, period: Nanos) -> Result<Rate, Error> {
        if amount == 0 {
            return Err(Error::ZeroValue { name: "amount" });
        }
        if period == Nanos::ZERO {
            return Err(Error::ZeroValue { name: "period" });
        }
        Ok(Rate { amount, period })
    }

    /// How many units: at least 1.
    #[must_use]
    pub const fn amount(self) -> u64 {
        self.amount
    }

    /// Per how long: at least 1 ns.
    #[must_use]
    pub const fn period(self) -> Nanos {
        self.period
    }

    /// Reads exactly one rate, such as `"10/second"` or `"100 per minute"`
    /// (see the grammar above). A list is an error: use [`parse_rates`].
    ///
    /// Fails with [`Error::InvalidSyntax`] (`name` `"rate"`) for a string
    /// that is not a rate, [`Error::ZeroValue`] for a count or multiple of 0,
    /// and [`Error::Overflow`] for a count above 2^64 - 1 or a period of
    /// 2^64 ns or more.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn parse(s: &str) -> Result<Rate, Error> {
        parse_one(s, 0, s.len(), "the end of the rate")
    }
}

impl FromStr for Rate {
    type Err = Error;

    /// The same as [`Rate::parse`].
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn from_str(s: &str) -> Result<Rate, Error> {
        Rate::parse(s)
    }
}

impl fmt::Display for Rate {
    /// The canonical form: `"10/second"`, `"10/2 seconds"`, `"100/minute"`,
    /// `"5/30 days"`.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (amount, period) = (self.amount, self.period.0);
        let secs = period / SECOND;
        let unit = DISPLAY_UNITS
            .iter()
            .find(|&&(_, len)| secs % len == 0)
            .filter(|_| period % SECOND == 0 && period > 0);
        match unit {
            Some(&(name, len)) if secs == len => write!(f, "{amount}/{name}"),
            Some(&(name, len)) => write!(f, "{amount}/{} {name}s", secs / len),
            None => write!(f, "{amount}/{period} nanoseconds"),
        }
    }
}

/// Every rate of a list such as `"10/hour;100/day"`, in order, without
/// allocating.
///
/// Rates are separated by `;`, `,` or `|`, as in `limits`. Each item is read
/// as [`Rate::parse`] reads one rate, and yields its rate or its error; the
/// iterator ends after the first error. Byte offsets in errors count from
/// the start of `s`. An empty string, or an empty item (`"10/hour;"`), is an
/// [`Error::InvalidSyntax`] expecting a count.
///
/// ```
/// use ratekeeper::{parse_rates, Nanos, Rate};
///
/// let rates: Result<Vec<Rate>, _> = parse_rates("10/hour; 100 per day").collect();
/// assert_eq!(rates.unwrap(), [
///     Rate::new(10, Nanos::from_secs(3_600)).unwrap(),
///     Rate::new(100, Nanos::from_secs(86_400)).unwrap(),
/// ]);
/// let error = parse_rates("10/hour;;100/day").nth(1).unwrap().unwrap_err();
/// assert_eq!(error.to_string(), "`rate` does not parse: expected a count at byte 8");
/// ```
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn parse_rates(s: &str) -> impl Iterator<Item = Result<Rate, Error>> + '_ {
    let mut next = Some(0);
    core::iter::from_fn(move || {
        let start = next?;
        let end = sub(s, start..)
            .find(SEPARATORS)
            .map_or(s.len(), |i| start + i);
        let rate = parse_one(s, start, end, "`;`, `,`, `|` or the end");
        next = Some(end + 1).filter(|_| end < s.len() && rate.is_ok());
        Some(rate)
    })
}

/// `s[range]`, where the range is known to lie on character boundaries
/// (ASCII separators and digits, whole characters skipped), without the
/// panic that indexing compiles in: it and its message's formatting were
/// 1.5 KB of the wasm, 0.5 KB gzipped.
fn sub<R: core::slice::SliceIndex<str, Output = str>>(s: &str, range: R) -> &str {
    s.get(range).unwrap_or_default()
}

/// Python's `\s`: Unicode white space and the four ASCII separators
/// U+001C to U+001F.
fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// The value of a run of ASCII digits, if it fits in 64 bits.
#[cfg_attr(ratekeeper_size, optimize(size))]
fn number(digits: &str) -> Option<u64> {
    digits.bytes().try_fold(0u64, |n, d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// Reads the rate in `s[start..end]`, nothing else; `after` is what may
/// follow it.
#[cfg_attr(ratekeeper_size, optimize(size))]
fn parse_one(s: &str, start: usize, end: usize, after: &'static str) -> Result<Rate, Error> {
    let item = sub(s, ..end);
    let syntax = |at, expected| Error::InvalidSyntax {
        name: "rate",
        at,
        expected,
    };
    let spaces = |at: usize| {
        at + sub(item, at..)
            .chars()
            .take_while(|&c| is_space(c))
            .map(char::len_utf8)
            .sum::<usize>()
    };
    let run = |at: usize, of: fn(&u8) -> bool| at + sub(item, at..).bytes().take_while(of).count();

    let count_at = spaces(start);
    let count_end = run(count_at, u8::is_ascii_digit);
    if count_end == count_at {
        return Err(syntax(count_at, "a count"));
    }
    let mut at = spaces(count_end);
    let rest = &item.as_bytes()[at..];
    if rest.first() == Some(&b'/') {
        at += 1;
    } else if rest
        .get(..3)
        .is_some_and(|p| p.eq_ignore_ascii_case(b"per"))
    {
        at += 3;
    } else {
        return Err(syntax(at, "`/` or `per`"));
    }
    let multiple_at = spaces(at);
    let multiple_end = run(multiple_at, u8::is_ascii_digit);
    let unit_at = spaces(multiple_end);
    let unit_end = run(unit_at, u8::is_ascii_alphabetic);
    let word = sub(item, unit_at..unit_end);
    let singular = match word
        .len()
        .checked_sub(1)
        .and_then(|last| word.split_at_checked(last))
    {
        Some((stem, s)) if s.eq_ignore_ascii_case("s") => stem,
        _ => word,
    };
    let Some(&(_, unit_secs)) = UNITS
        .iter()
        .find(|(name, _)| word.eq_ignore_ascii_case(name) || singular.eq_ignore_ascii_case(name))
    else {
        return Err(syntax(
            unit_at,
            "a unit (second, minute, hour, day, month, year)",
        ));
    };
    let tail = spaces(unit_end);
    if tail != end {
        return Err(syntax(tail, after));
    }

    let too_large = |reason| Error::Overflow {
        name: "rate",
        reason,
    };
    let amount = number(sub(item, count_at..count_end))
        .ok_or(too_large("its count does not fit in 64 bits"))?;
    let multiple = match sub(item, multiple_at..multiple_end) {
        "" => 1,
        digits => number(digits).ok_or(too_large("its multiple does not fit in 64 bits"))?,
    };
    if amount == 0 || multiple == 0 {
        return Err(Error::ZeroValue { name: "rate" });
    }
    let period = multiple
        .checked_mul(unit_secs * SECOND)
        .ok_or(too_large("its period is 2^64 ns (about 584 years) or more"))?;
    Ok(Rate {
        amount,
        period: Nanos(period),
    })
}
