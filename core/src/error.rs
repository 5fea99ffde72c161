//! The one error type of the crate.

use core::fmt;

/// Why a limiter could not be built, or a request could never be decided.
///
/// A denial is not an error (see [`crate::Decision`]); errors are for bad
/// configuration and for requests that could never succeed. Every variant has
/// a stable [`code`](Error::code) that the language bindings expose as-is.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// A value that must be positive was zero.
    ZeroValue {
        /// The argument's name.
        name: &'static str,
    },
    /// A value was above its maximum.
    TooLarge {
        /// The argument's name.
        name: &'static str,
        /// The value given.
        value: u64,
        /// The largest value accepted.
        max: u64,
    },
    /// The configuration implies a duration or count beyond 64 bits.
    Overflow {
        /// The argument's name.
        name: &'static str,
        /// What overflowed.
        reason: &'static str,
    },
    /// A request asked for more than the limiter could ever hold.
    CostExceedsLimit {
        /// The cost asked for.
        cost: u64,
        /// The limiter's capacity or limit.
        limit: u64,
    },
    /// A host-language number that is not a valid value here (NaN, infinite,
    /// negative, fractional where a count is needed).
    InvalidValue {
        /// The argument's name.
        name: &'static str,
        /// What is wrong, completing "`name` ...".
        reason: &'static str,
    },
    /// A host-language value of the wrong type (raised by the bindings).
    InvalidType {
        /// The argument's name.
        name: &'static str,
        /// What was expected, completing "`name` must be ...".
        expected: &'static str,
    },
}

impl Error {
    /// A stable, machine-readable code, e.g. `"cost_exceeds_limit"`.
    pub const fn code(&self) -> &'static str {
        match self {
            Error::ZeroValue { .. } => "zero_value",
            Error::TooLarge { .. } => "too_large",
            Error::Overflow { .. } => "overflow",
            Error::CostExceedsLimit { .. } => "cost_exceeds_limit",
            Error::InvalidValue { .. } => "invalid_value",
            Error::InvalidType { .. } => "invalid_type",
        }
    }

    /// The name of the argument at fault, as spelled in Rust.
    pub const fn argument(&self) -> Option<&'static str> {
        match self {
            Error::ZeroValue { name }
            | Error::TooLarge { name, .. }
            | Error::Overflow { name, .. }
            | Error::InvalidValue { name, .. }
            | Error::InvalidType { name, .. } => Some(name),
            Error::CostExceedsLimit { .. } => Some("cost"),
        }
    }

    /// The same message with the argument spelled `argument`, so that each
    /// binding can name arguments in its own convention (`refillPeriodMs`).
    pub fn display_with<'a>(&'a self, argument: &'a str) -> impl fmt::Display + 'a {
        Renamed(self, argument)
    }

    fn write(&self, f: &mut fmt::Formatter<'_>, name: &str) -> fmt::Result {
        match self {
            Error::ZeroValue { .. } => write!(f, "`{name}` must be greater than zero"),
            Error::TooLarge { value, max, .. } => {
                write!(f, "`{name}` must be at most {max} (got {value})")
            }
            Error::Overflow { reason, .. } => write!(f, "`{name}` is too large: {reason}"),
            Error::CostExceedsLimit { cost, limit } => write!(
                f,
                "`{name}` {cost} exceeds the limit {limit}, so it could never be allowed"
            ),
            Error::InvalidValue { reason, .. } => write!(f, "`{name}` {reason}"),
            Error::InvalidType { expected, .. } => write!(f, "`{name}` must be {expected}"),
        }
    }
}

struct Renamed<'a>(&'a Error, &'a str);

impl fmt::Display for Renamed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.write(f, self.1)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, self.argument().unwrap_or("value"))
    }
}

impl core::error::Error for Error {}
