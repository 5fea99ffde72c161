//! The values of the IETF RateLimit header fields for a decision.

use core::fmt;

use crate::{Decision, Error, Nanos};

/// The header values a server sends with a [`Decision`], following
/// draft-ietf-httpapi-ratelimit-headers (the `RateLimit-Policy` and
/// `RateLimit` fields) and RFC 9110 (`Retry-After`).
///
/// Seconds are whole and rounded up, so a client that waits what a header
/// says is never early. Counts above 999,999,999,999,999, the largest
/// integer a structured field may carry (RFC 9651, section 3.3.1), are sent
/// as that: a quota or a remainder stated smaller, never larger, and a field
/// that a strict parser still reads. Each value implements
/// [`fmt::Display`]; nothing is allocated.
///
/// ```
/// use ratekeeper::{Headers, Limiter, Nanos, TokenBucket};
///
/// let mut bucket = TokenBucket::new(10, 10, Nanos::from_secs(60)).unwrap();
/// let decision = bucket.try_acquire(Nanos::ZERO, 10).unwrap();
/// let headers = Headers::new("per-minute", Nanos::from_secs(60), &decision);
/// assert_eq!(headers.policy().to_string(), r#""per-minute";q=10;w=60"#);
/// assert_eq!(headers.rate_limit().to_string(), r#""per-minute";r=0;t=60"#);
/// assert!(headers.retry_after().is_none()); // allowed
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Headers<'a> {
    name: &'a str,
    window: Nanos,
    decision: &'a Decision,
}

impl<'a> Headers<'a> {
    /// The headers of `decision`, made by a limit called `name` that grants
    /// `decision.limit` units per `window` (see
    /// `AnyLimiter::window`, with the `alloc` feature).
    #[cfg_attr(ratekeeper_size, optimize(size))]
    #[must_use]
    pub fn new(name: &'a str, window: Nanos, decision: &'a Decision) -> Headers<'a> {
        Headers {
            name,
            window,
            decision,
        }
    }

    /// The `RateLimit-Policy` value: `"name";q=<limit>;w=<window seconds>`.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn policy(&self) -> impl fmt::Display + 'a {
        Item(
            self.name,
            ("q", self.decision.limit.min(MAX_SF_INTEGER)),
            ("w", ceil_secs(self.window)),
        )
    }

    /// The `RateLimit` value: `"name";r=<remaining>;t=<reset seconds>`.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn rate_limit(&self) -> impl fmt::Display + 'a {
        let reset = ceil_secs(self.decision.reset_after);
        let remaining = self.decision.remaining.min(MAX_SF_INTEGER);
        Item(self.name, ("r", remaining), ("t", reset))
    }

    /// The `Retry-After` value in seconds, for a denied request only.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn retry_after(&self) -> Option<u64> {
        (!self.decision.allowed).then(|| ceil_secs(self.decision.retry_after))
    }

    /// Checks `name` as the name of a limit: the one rule for the names of
    /// limiters and of a `Policy`'s limits alike, which the
    /// bindings apply wherever a name is given.
    ///
    /// The headers carry a name as a structured-field string (RFC 9651,
    /// section 3.3.3), which holds printable ASCII only, space to `~`: a
    /// name with anything else (a control, a line break, `é`) would go out
    /// with `?` in its place, naming no limit, and an empty one names none
    /// at all. Fails with [`Error::InvalidValue`] naming `name`.
    ///
    /// ```
    /// use ratekeeper::Headers;
    ///
    /// assert!(Headers::check_name(r#"per-user "a\b" ~"#).is_ok());
    /// assert!(Headers::check_name("").is_err());
    /// assert!(Headers::check_name("café").is_err());
    /// assert!(Headers::check_name("a\r\nb").is_err());
    /// ```
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn check_name(name: &str) -> Result<(), Error> {
        let reason = if name.is_empty() {
            "must not be empty"
        } else if name.bytes().any(|b| !(b' '..=b'~').contains(&b)) {
            "must be printable ASCII (space to ~), as the RateLimit headers carry it"
        } else {
            return Ok(());
        };
        Err(Error::InvalidValue {
            name: "name",
            reason,
        })
    }
}

/// The largest integer of a structured field (RFC 9651, section 3.3.1).
/// Whole seconds of a `u64` of nanoseconds stay below it.
const MAX_SF_INTEGER: u64 = 999_999_999_999_999;

/// Whole seconds, rounded up.
pub(crate) fn ceil_secs(ns: Nanos) -> u64 {
    ns.0.div_ceil(1_000_000_000)
}

/// A structured-field item: a string and two integer parameters.
struct Item<'a>(&'a str, (&'static str, u64), (&'static str, u64));

impl fmt::Display for Item<'_> {
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Item(name, (k1, v1), (k2, v2)) = self;
        write!(f, "{};{k1}={v1};{k2}={v2}", Quoted(name))
    }
}

/// A structured-field string: quoted, with `"` and `\` escaped, and any
/// character the syntax does not allow (controls, non-ASCII) written as `?`
/// (for a name given to [`Headers::new`] unchecked: one that passes
/// [`Headers::check_name`] has none).
struct Quoted<'a>(&'a str);

impl fmt::Display for Quoted<'_> {
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"")?;
        for c in self.0.chars() {
            match c {
                '"' | '\\' => write!(f, "\\{c}")?,
                ' '..='~' => write!(f, "{c}")?,
                _ => f.write_str("?")?,
            }
        }
        f.write_str("\"")
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::string::ToString;

    use super::*;

    #[test]
    fn denied_requests_carry_retry_after_rounded_up() {
        let decision = Decision {
            allowed: false,
            remaining: 0,
            limit: 5,
            retry_after: Nanos(1_000_000_001),
            reset_after: Nanos(4_500_000_000),
        };
        let headers = Headers::new("a \"b\"\\é", Nanos::from_millis(1_500), &decision);
        assert_eq!(headers.retry_after(), Some(2));
        assert_eq!(headers.policy().to_string(), r#""a \"b\"\\?";q=5;w=2"#);
        assert_eq!(headers.rate_limit().to_string(), r#""a \"b\"\\?";r=0;t=5"#);
    }

    #[test]
    fn names_are_printable_ascii_and_not_empty() {
        let printable: std::string::String = (' '..='~').collect();
        assert_eq!(Headers::check_name(&printable), Ok(()));
        // And each goes out as itself, `"` and `\` escaped.
        let decision = Decision {
            allowed: true,
            remaining: 1,
            limit: 2,
            retry_after: Nanos::ZERO,
            reset_after: Nanos::ZERO,
        };
        let quoted = printable.replace('\\', "\\\\").replace('"', "\\\"");
        assert_eq!(
            Headers::new(&printable, Nanos::ZERO, &decision)
                .policy()
                .to_string(),
            std::format!("\"{quoted}\";q=2;w=0")
        );
        let empty = Error::InvalidValue {
            name: "name",
            reason: "must not be empty",
        };
        assert_eq!(Headers::check_name(""), Err(empty));
        for bad in ["caf\u{e9}", "a\r\nb", "\t", "\u{7f}", "\u{0}", "\u{1f600}"] {
            let error = Headers::check_name(bad).unwrap_err();
            assert_eq!(
                (error.code(), error.argument()),
                ("invalid_value", Some("name")),
                "{bad:?}"
            );
            assert_eq!(
                error.to_string(),
                "`name` must be printable ASCII (space to ~), as the RateLimit headers carry it"
            );
        }
    }

    #[test]
    fn counts_past_fifteen_digits_are_sent_as_the_largest_integer() {
        let decision = Decision {
            allowed: true,
            remaining: u64::MAX - 1,
            limit: u64::MAX,
            retry_after: Nanos::ZERO,
            reset_after: Nanos::MAX,
        };
        let headers = Headers::new("n", Nanos::MAX, &decision);
        assert_eq!(
            headers.policy().to_string(),
            r#""n";q=999999999999999;w=18446744074"#
        );
        assert_eq!(
            headers.rate_limit().to_string(),
            r#""n";r=999999999999999;t=18446744074"#
        );
    }
}
