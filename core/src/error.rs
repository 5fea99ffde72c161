//! The one error type of the crate.

use core::fmt;

/// Why a limiter could not be built, or a request could never be decided.
///
/// A denial is not an error (see [`crate::Decision`]); errors are for bad
/// configuration and for requests that could never succeed. Every variant has
/// a stable [`code`](Error::code) that the language bindings expose as-is.
///
/// It is `Copy`, `Send`, `Sync` and `'static`, so it goes into any error of
/// yours, or a `Box<dyn Error + Send + Sync>`, through `?`.
///
/// ```
/// use ratekeeper::{Error, Nanos, TokenBucket};
///
/// let error = TokenBucket::new(0, 1, Nanos::from_secs(1)).unwrap_err();
/// assert_eq!(error, Error::ZeroValue { name: "capacity" });
/// assert_eq!(error.code(), "zero_value");
/// assert_eq!(error.argument(), Some("capacity"));
/// assert_eq!(error.to_string(), "`capacity` must be greater than zero");
/// // The argument as another API spells it.
/// assert_eq!(
///     error.display_with("capacityTokens").to_string(),
///     "`capacityTokens` must be greater than zero",
/// );
/// // More errors may come in a minor release: a `match` needs a `_` arm.
/// let fix = match error {
///     Error::ZeroValue { name } | Error::TooLarge { name, .. } => name,
///     _ => "the configuration",
/// };
/// assert_eq!(fix, "capacity");
///
/// fn build() -> Result<TokenBucket, Box<dyn std::error::Error + Send + Sync>> {
///     Ok(TokenBucket::new(10, 1, Nanos::from_secs(1))?)
/// }
/// assert!(build().is_ok());
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// A value that must be positive was zero.
    ZeroValue {
        /// The argument's name.
        name: &'static str,
    },
    /// A value was above a maximum the core sets (`initial_tokens` above
    /// `capacity`, more than 4 bandwidths, a log's limit above 2^20).
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
    /// negative, fractional where a count is needed, or past what the
    /// binding holds exactly: 2^53 - 1 in JS, 2^64 - 1 in Python), or another
    /// value the argument cannot take. [`Error::TooLarge`] is for bounds the
    /// core sets.
    InvalidValue {
        /// The argument's name.
        name: &'static str,
        /// What is wrong, completing "`name` ...".
        reason: &'static str,
    },
    /// A string that does not parse, such as a rate (`"10/second"`).
    InvalidSyntax {
        /// The argument's name.
        name: &'static str,
        /// The byte offset in the string where parsing failed.
        at: usize,
        /// What was expected there, completing "expected ...".
        expected: &'static str,
    },
    /// Encoded state that ends before its last field.
    StateTruncated,
    /// Encoded state that is not well formed (bad magic, a field out of
    /// range, trailing bytes).
    StateCorrupt {
        /// What is wrong.
        reason: &'static str,
    },
    /// Encoded state written by a format version this build cannot read.
    StateVersion {
        /// The version found.
        found: u8,
        /// The version this build writes and reads.
        supported: u8,
    },
    /// Encoded state of another algorithm or another configuration.
    StateMismatch {
        /// What differs: the algorithm or the configuration.
        reason: &'static str,
    },
    /// A keyed store at its `max_keys` bound, with nothing it may reclaim or
    /// evict under its eviction rule.
    StoreFull {
        /// The bound.
        max_keys: u64,
    },
    /// Memory ran out while a keyed store or a policy (`alloc` feature)
    /// grew for a request: its table of keys, a new key's own bytes, a
    /// key's log of events. The request was refused and changed nothing
    /// (`KeyedLimiter`'s docs say what a store allocates, under "Memory"):
    /// the store goes on answering for the keys it holds, and takes new
    /// ones once memory is given back, where an allocation that fails
    /// would otherwise abort the process (or trap, in WebAssembly).
    OutOfMemory,
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
            Error::InvalidSyntax { .. } => "invalid_syntax",
            Error::StateTruncated => "state_truncated",
            Error::StateCorrupt { .. } => "state_corrupt",
            Error::StateVersion { .. } => "state_version",
            Error::StateMismatch { .. } => "state_mismatch",
            Error::StoreFull { .. } => "store_full",
            Error::OutOfMemory => "out_of_memory",
        }
    }

    /// The name of the argument at fault, as spelled in Rust.
    pub const fn argument(&self) -> Option<&'static str> {
        match self {
            Error::ZeroValue { name }
            | Error::TooLarge { name, .. }
            | Error::Overflow { name, .. }
            | Error::InvalidValue { name, .. }
            | Error::InvalidType { name, .. }
            | Error::InvalidSyntax { name, .. } => Some(name),
            Error::CostExceedsLimit { .. } => Some("cost"),
            Error::StateTruncated
            | Error::StateCorrupt { .. }
            | Error::StateVersion { .. }
            | Error::StateMismatch { .. } => Some("state"),
            Error::StoreFull { .. } | Error::OutOfMemory => None,
        }
    }

    /// This error, naming the argument `name` instead (where it names one).
    #[cfg(feature = "alloc")]
    #[inline(never)] // cold, and called from several places
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub(crate) fn renamed(self, name: &'static str) -> Error {
        match self {
            Error::ZeroValue { .. } => Error::ZeroValue { name },
            Error::TooLarge { value, max, .. } => Error::TooLarge { name, value, max },
            Error::Overflow { reason, .. } => Error::Overflow { name, reason },
            Error::InvalidValue { reason, .. } => Error::InvalidValue { name, reason },
            Error::InvalidType { expected, .. } => Error::InvalidType { name, expected },
            Error::InvalidSyntax { at, expected, .. } => {
                Error::InvalidSyntax { name, at, expected }
            }
            other => other,
        }
    }

    /// The same message with the argument spelled `argument`, so that each
    /// binding can name arguments in its own convention (`refillPeriodMs`).
    pub fn display_with<'a>(&'a self, argument: &'a str) -> impl fmt::Display + 'a {
        Renamed(self, argument)
    }

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn write(&self, f: &mut fmt::Formatter<'_>, name: &str) -> fmt::Result {
        match self {
            // A list, not a number: "greater than zero" read oddly for `[]`.
            Error::ZeroValue { name: "bandwidths" } => {
                write!(f, "`{name}` must hold at least one bandwidth")
            }
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
            Error::InvalidSyntax { at, expected, .. } => {
                write!(
                    f,
                    "`{name}` does not parse: expected {expected} at byte {at}"
                )
            }
            Error::StateTruncated => write!(f, "`{name}` ends before its last field"),
            Error::StateCorrupt { reason } => write!(f, "`{name}` is corrupt: {reason}"),
            Error::StateVersion { found, supported } => write!(
                f,
                "`{name}` has format version {found}; this build reads version {supported}"
            ),
            Error::StateMismatch { reason } => write!(f, "`{name}` belongs to {reason}"),
            Error::StoreFull { max_keys } => write!(
                f,
                "the store holds its maximum of {max_keys} {}, and its eviction is 'refuse': \
                 a new key waits until a key held is back to fresh",
                if *max_keys == 1 { "key" } else { "keys" }
            ),
            Error::OutOfMemory => write!(
                f,
                "out of memory: the store could not grow for this request, which changed nothing"
            ),
        }
    }
}

struct Renamed<'a>(&'a Error, &'a str);

impl fmt::Display for Renamed<'_> {
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.write(f, self.1)
    }
}

impl fmt::Display for Error {
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, self.argument().unwrap_or("value"))
    }
}

impl core::error::Error for Error {}
