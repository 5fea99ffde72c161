//! Declarative configuration: limits and policies described as data.

use alloc::string::String;
use alloc::vec::Vec;

use crate::rate::{parse_rates, Rate};
use crate::{
    AnyKeyed, AnyLimiter, Bandwidth, Calendar, Error, Eviction, FixedWindow, Gcra, LeakyBucket,
    Nanos, Policy, SlidingWindowCounter, SlidingWindowLog, MAX_BANDWIDTHS,
};

/// An algorithm, as configuration spells it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize, serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Algorithm {
    /// [`TokenBucket`](crate::TokenBucket): a burst, then the rate.
    #[default]
    TokenBucket,
    /// [`Gcra`].
    Gcra,
    /// [`LeakyBucket`].
    LeakyBucket,
    /// [`SlidingWindowLog`].
    SlidingWindowLog,
    /// [`SlidingWindowCounter`].
    SlidingWindowCounter,
    /// [`FixedWindow`].
    FixedWindow,
}

/// One limit of a policy, as data.
///
/// With the `serde` feature it deserializes from, for instance,
/// `{"name": "api-per-second", "algorithm": "token_bucket", "rate": "10/second", "burst": 20, "by": ["user"]}`,
/// and serializes back to that (the optional fields left unset are left out;
/// `name`, `algorithm` and `rate` are always written).
///
/// - `rate`: a rate string ([`Rate`]): the refill of a bucket (several,
///   separated by `;`, make a token bucket of several bandwidths, each as
///   large as its own count), the emission interval of a GCRA or a leaky
///   bucket (`period / count`, a whole number of nanoseconds), or the limit
///   and window of a window algorithm.
/// - `burst`: a token bucket's capacity (its first bandwidth's, with
///   several), a GCRA's burst, a leaky bucket's queue; by default the rate's
///   count.
/// - `calendar`: for the window algorithms, calendar windows in UTC
///   (`day`, `week` from Monday, `month` from the 1st); the rate's count is
///   the limit, and its period must be the calendar's nominal one (`/day`,
///   `/7 days`, `/month`): `10/second` with `day` would read as 10 a day.
/// - `by`: the request fields the limit is keyed by; none for a global limit.
/// - `max_keys` and `eviction`: a bound on the keys held (see
///   [`KeyedLimiter::with_max_keys`](crate::KeyedLimiter::with_max_keys));
///   `eviction: refuse` without `max_keys` is refused (a store without a
///   bound never refuses a key); `nearest_fresh`, what such a store does
///   anyway, is accepted.
///
/// In code, start from [`LimitConfig::new`] and set the optional fields.
/// The struct is `#[non_exhaustive]`: a field may come in a minor release
/// (the core has options no field sets yet, such as a bucket's interval
/// refill), so it is not built with a struct literal.
///
/// ```
/// use ratekeeper::{Algorithm, LimitConfig, Nanos};
///
/// let mut limit = LimitConfig::new("per-user", "2/second");
/// limit.algorithm = Algorithm::Gcra;
/// limit.burst = Some(5);
/// limit.by = vec!["user".into()];
/// let mut store = limit.store().unwrap();
/// assert!(store.try_acquire(b"alice", Nanos::ZERO, 5).unwrap().allowed);
/// assert!(!store.try_acquire(b"alice", Nanos::ZERO, 1).unwrap().allowed);
/// ```
///
/// A struct literal is refused outside this crate, even one that takes
/// the rest from `Default`:
///
/// ```compile_fail
/// use ratekeeper::LimitConfig;
///
/// let limit = LimitConfig { name: "a".into(), rate: "1/second".into(), ..LimitConfig::default() };
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize, serde::Serialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
#[non_exhaustive]
pub struct LimitConfig {
    /// The limit's name, unique in its policy.
    pub name: String,
    /// The algorithm; a token bucket by default.
    #[cfg_attr(feature = "serde", serde(default))]
    pub algorithm: Algorithm,
    /// The rate string.
    pub rate: String,
    /// The burst, capacity or queue length of a bucket (token bucket,
    /// GCRA, leaky bucket; default: the rate's count); refused beside a
    /// window algorithm, whose limit is the rate's count.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub burst: Option<u64>,
    /// Calendar windows instead of the rate's period.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub calendar: Option<Calendar>,
    /// The request fields the limit is keyed by.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Vec::is_empty")
    )]
    pub by: Vec<String>,
    /// The most keys held.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub max_keys: Option<u64>,
    /// What happens at `max_keys`.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub eviction: Option<Eviction>,
}

/// A policy, as data: `{"limits": [...]}`.
///
/// With the `serde` feature, from a configuration file (JSON here; TOML,
/// YAML and the rest through their serde crates):
///
/// ```
/// # #[cfg(feature = "serde")] {
/// use ratekeeper::{Nanos, PolicyConfig};
///
/// let config: PolicyConfig = serde_json::from_str(r#"{"limits": [
///     {"name": "per-user", "algorithm": "gcra", "rate": "2/second", "by": ["user"]},
///     {"name": "global", "rate": "100/minute"}
/// ]}"#).unwrap();
/// let mut policy = config.policy().unwrap();
///
/// let alice = [("user", &b"alice"[..])];
/// assert!(policy.try_acquire(&alice, Nanos::ZERO, 2).unwrap().decision.allowed);
/// let denied = policy.try_acquire(&alice, Nanos::ZERO, 1).unwrap();
/// assert_eq!(policy.name(denied.denied_by.unwrap()), "per-user");
///
/// // A field the configuration does not know is refused, not ignored.
/// let typo = r#"{"limits": [{"name": "a", "rate": "1/second", "brust": 5}]}"#;
/// assert!(serde_json::from_str::<PolicyConfig>(typo).is_err());
/// # }
/// ```
///
/// In code, [`PolicyConfig::new`]: the struct is `#[non_exhaustive]`, so
/// that an option of the whole policy may come in a minor release.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize, serde::Serialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
#[non_exhaustive]
pub struct PolicyConfig {
    /// The limits, decided all or nothing.
    pub limits: Vec<LimitConfig>,
}

impl LimitConfig {
    /// A limit called `name`, of `rate` (a rate string), every other field
    /// at its default: a token bucket whose burst is the rate's count, one
    /// limiter for every request (keyed by no field), no bound on keys.
    #[must_use]
    pub fn new(name: impl Into<String>, rate: impl Into<String>) -> LimitConfig {
        LimitConfig {
            name: name.into(),
            rate: rate.into(),
            ..LimitConfig::default()
        }
    }

    /// The fields of a limit as configuration spells them, in this
    /// struct's order: what the bindings' readers accept. A slice, as the
    /// struct may gain fields in a minor release.
    pub const FIELDS: &'static [&'static str] = &[
        "name",
        "algorithm",
        "rate",
        "burst",
        "calendar",
        "by",
        "max_keys",
        "eviction",
    ];

    /// The limiter this configuration describes (each key's fresh state).
    ///
    /// An error names the field at fault (`burst`, `rate`), not the
    /// argument of the limiter's constructor it went to (`capacity`,
    /// `refill_period`), which a configuration does not have.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn limiter(&self) -> Result<AnyLimiter, Error> {
        self.build().map_err(|error| {
            let field = match error.argument() {
                Some("capacity" | "burst") => "burst",
                // Too long to refill: the burst, when one is given.
                _ if matches!(error, Error::Overflow { .. }) && self.burst.is_some() => "burst",
                Some(
                    "refill_tokens" | "refill_period" | "tokens" | "period" | "interval"
                    | "emission_interval" | "limit" | "window",
                ) => "rate",
                _ => return error,
            };
            error.renamed(field)
        })
    }

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn build(&self) -> Result<AnyLimiter, Error> {
        let rates = parse_rates(&self.rate).collect::<Result<Vec<Rate>, Error>>()?;
        let single = || match rates[..] {
            [rate] => Ok(rate),
            _ => Err(Error::InvalidValue {
                name: "rate",
                reason: "holds several rates; only a token bucket takes several \
                         (or write one limit per rate)",
            }),
        };
        let burst = |rate: Rate| self.burst.unwrap_or(rate.amount);
        if self.calendar.is_some() && !self.algorithm.is_window() {
            return Err(Error::InvalidValue {
                name: "calendar",
                reason: "applies to the window algorithms only",
            });
        }
        if let Some(calendar) = self.calendar {
            if rates.iter().any(|rate| rate.period.0 != calendar.nominal()) {
                return Err(Error::InvalidValue {
                    name: "rate",
                    reason: "must be per the calendar's period (`N/day`, `N/7 days` \
                             or `N/month`): its count is each calendar window's limit",
                });
            }
        }
        // Ignored, a burst would read as a bound the limit does not keep.
        let window = matches!(
            self.algorithm,
            Algorithm::SlidingWindowLog | Algorithm::SlidingWindowCounter | Algorithm::FixedWindow
        );
        if self.burst.is_some() && window {
            return Err(Error::InvalidValue {
                name: "burst",
                reason:
                    "applies to the bucket algorithms only (a window's limit is its rate's count)",
            });
        }
        Ok(match self.algorithm {
            Algorithm::TokenBucket => {
                if rates.len() > MAX_BANDWIDTHS {
                    return Err(Error::TooLarge {
                        name: "rate",
                        value: rates.len() as u64,
                        max: MAX_BANDWIDTHS as u64,
                    });
                }
                let mut bands = Vec::with_capacity(rates.len());
                for (i, rate) in rates.iter().enumerate() {
                    let capacity = if i == 0 { burst(*rate) } else { rate.amount };
                    bands.push(Bandwidth::greedy(capacity, rate.amount, rate.period)?);
                }
                AnyLimiter::token_bucket(&bands)?
            }
            Algorithm::Gcra => {
                let rate = single()?;
                Gcra::per_period(burst(rate), rate.amount, rate.period)?.into()
            }
            Algorithm::LeakyBucket => {
                let rate = single()?;
                LeakyBucket::new(burst(rate), whole_interval(rate)?)?.into()
            }
            Algorithm::SlidingWindowLog => {
                let rate = single()?;
                SlidingWindowLog::new(rate.amount, rate.period)?.into()
            }
            Algorithm::SlidingWindowCounter => {
                let rate = single()?;
                match self.calendar {
                    Some(c) => SlidingWindowCounter::with_calendar(rate.amount, c)?.into(),
                    None => SlidingWindowCounter::new(rate.amount, rate.period)?.into(),
                }
            }
            Algorithm::FixedWindow => {
                let rate = single()?;
                match self.calendar {
                    Some(c) => FixedWindow::with_calendar(rate.amount, c)?.into(),
                    None => FixedWindow::new(rate.amount, rate.period)?.into(),
                }
            }
        })
    }

    /// The keyed store this configuration describes.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn store(&self) -> Result<AnyKeyed, Error> {
        AnyKeyed::new(self.limiter()?).bounded(self.max_keys, self.eviction)
    }
}

impl PolicyConfig {
    /// A policy of `limits`.
    #[must_use]
    pub fn new(limits: Vec<LimitConfig>) -> PolicyConfig {
        PolicyConfig { limits }
    }

    /// The policy this configuration describes.
    pub fn policy(&self) -> Result<Policy, Error> {
        self.policy_or_fault().map_err(|(_, error)| error)
    }

    /// [`PolicyConfig::policy`], an error coming with the index in `limits`
    /// of the limit at fault, for a message that says which one it is.
    ///
    /// ```
    /// use ratekeeper::{Error, LimitConfig, PolicyConfig};
    ///
    /// let mut b = LimitConfig::new("b", "1/second");
    /// b.burst = Some(0);
    /// let config = PolicyConfig::new(vec![LimitConfig::new("a", "1/second"), b]);
    /// assert_eq!(config.policy_or_fault().unwrap_err(), (1, Error::ZeroValue { name: "burst" }));
    /// ```
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn policy_or_fault(&self) -> Result<Policy, (usize, Error)> {
        let mut policy = Policy::new();
        for (i, limit) in self.limits.iter().enumerate() {
            let by: Vec<&str> = limit.by.iter().map(String::as_str).collect();
            let store = limit.store().map_err(|error| (i, error))?;
            policy
                .add_store(&limit.name, &by, store)
                .map_err(|error| (i, error))?;
        }
        Ok(policy)
    }
}

impl Policy {
    /// A global policy with one limit per rate of `rates` (such as
    /// `"10/second;100/day"`), each named by its rate, of `algorithm`.
    ///
    /// ```
    /// use ratekeeper::{Algorithm, Nanos, Policy};
    ///
    /// let mut policy = Policy::from_rates("2/second;3/minute", Algorithm::SlidingWindowLog, &[]).unwrap();
    /// assert_eq!(policy.name(1), "3/minute");
    /// assert!(policy.try_acquire(&[], Nanos::ZERO, 2).unwrap().decision.allowed);
    /// let later = Nanos::from_secs(1);
    /// assert!(policy.try_acquire(&[], later, 1).unwrap().decision.allowed);
    /// assert!(!policy.try_acquire(&[], later, 1).unwrap().decision.allowed);
    ///
    /// // A rate that does not parse, or one rate twice however spelled, is
    /// // refused naming `rates`.
    /// let typo = Policy::from_rates("10/sec", Algorithm::Gcra, &[]);
    /// assert!(typo.unwrap_err().to_string().starts_with("`rates` does not parse"));
    /// let twice = Policy::from_rates("10/second;10 per second", Algorithm::Gcra, &[]);
    /// assert_eq!(twice.unwrap_err().to_string(), "`rates` lists one rate twice (as written or spelled another way)");
    /// ```
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn from_rates(rates: &str, algorithm: Algorithm, by: &[&str]) -> Result<Policy, Error> {
        // The caller's argument is `rates`: an error about one of them names it.
        Self::rates_policy(rates, algorithm, by).map_err(|error| match error.argument() {
            Some("rate") => error.renamed("rates"),
            _ => error,
        })
    }

    /// [`PolicyConfig::from_rates`], its errors naming each rate `rate`.
    fn rates_policy(rates: &str, algorithm: Algorithm, by: &[&str]) -> Result<Policy, Error> {
        let mut policy = Policy::new();
        for rate in parse_rates(rates) {
            let rate = rate?;
            let config = LimitConfig {
                name: alloc::format!("{rate}"),
                algorithm,
                rate: alloc::format!("{rate}"),
                by: by.iter().map(|&f| f.into()).collect(),
                ..LimitConfig::default()
            };
            if (0..policy.len()).any(|i| policy.name(i) == config.name) {
                // Named by the rate: said as the caller wrote it, not as a
                // clash of names they never gave.
                return Err(Error::InvalidValue {
                    name: "rates",
                    reason: "lists one rate twice (as written or spelled another way)",
                });
            }
            policy.add(&config.name, by, config.limiter()?)?;
        }
        Ok(policy)
    }
}

impl Algorithm {
    /// Every algorithm, in declaration order (a slice: an algorithm added
    /// in a minor release changes its length, not its type).
    pub const ALL: &'static [Algorithm] = &[
        Algorithm::TokenBucket,
        Algorithm::Gcra,
        Algorithm::LeakyBucket,
        Algorithm::SlidingWindowLog,
        Algorithm::SlidingWindowCounter,
        Algorithm::FixedWindow,
    ];

    /// The algorithm's name as configuration spells it (`token_bucket`,
    /// `gcra`, `leaky_bucket`, `sliding_window_log`,
    /// `sliding_window_counter`, `fixed_window`), which is also what
    /// [`AnyLimiter::algorithm`] answers.
    pub const fn name(self) -> &'static str {
        match self {
            Algorithm::TokenBucket => "token_bucket",
            Algorithm::Gcra => "gcra",
            Algorithm::LeakyBucket => "leaky_bucket",
            Algorithm::SlidingWindowLog => "sliding_window_log",
            Algorithm::SlidingWindowCounter => "sliding_window_counter",
            Algorithm::FixedWindow => "fixed_window",
        }
    }

    /// The algorithm named `name`, spelled exactly as [`Algorithm::name`]
    /// spells it.
    ///
    /// ```
    /// use ratekeeper::Algorithm;
    ///
    /// assert_eq!(Algorithm::from_name("gcra"), Some(Algorithm::Gcra));
    /// assert_eq!(Algorithm::from_name("GCRA"), None);
    /// ```
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn from_name(name: &str) -> Option<Algorithm> {
        Algorithm::ALL.iter().copied().find(|a| a.name() == name)
    }

    fn is_window(self) -> bool {
        matches!(
            self,
            Algorithm::SlidingWindowCounter | Algorithm::FixedWindow
        )
    }
}

/// [`Algorithm::name`], as configuration spells it: `token_bucket`, `gcra`....
impl core::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.pad(self.name())
    }
}

/// `period / amount`, when it is a whole number of nanoseconds.
#[cfg_attr(ratekeeper_size, optimize(size))]
fn whole_interval(rate: Rate) -> Result<Nanos, Error> {
    if rate.period.0 % rate.amount != 0 {
        return Err(Error::InvalidValue {
            name: "rate",
            reason: "is not a whole number of nanoseconds per unit",
        });
    }
    Ok(Nanos(rate.period.0 / rate.amount))
}
