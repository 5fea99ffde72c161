//! The constructors' options: `new TokenBucket({ ... })` and the others,
//! read through [`JsValueIn`].

use ratekeeper::{
    AnyLimiter, Bandwidth, Calendar, Error, FixedWindow, Gcra, LeakyBucket, Nanos, Refill,
    SlidingWindowCounter, SlidingWindowLog,
};

use super::{count, invalid_type, js_name, millis, Failure, JsValueIn, Kind};

/// Reads constructor options; the JS keys are the JS spellings of the core names.
struct Options<'a, V>(&'a V);

impl<V: JsValueIn> Options<'_, V> {
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn value(&self, name: &'static str) -> Result<Kind, Failure<V::Js>> {
        self.0.get(js_name(name))?.kind()
    }

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn optional_number(&self, name: &'static str) -> Result<Option<f64>, Failure<V::Js>> {
        match self.value(name)? {
            Kind::Absent => Ok(None),
            Kind::Number(n) => Ok(Some(n)),
            _ => Err(invalid_type(name, "a number").into()),
        }
    }

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn number(&self, name: &'static str) -> Result<f64, Failure<V::Js>> {
        self.optional_number(name)?
            .ok_or_else(|| invalid_type(name, "a number").into())
    }

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn count(&self, name: &'static str) -> Result<u64, Failure<V::Js>> {
        Ok(count(self.number(name)?, name)?)
    }

    /// A duration that must be positive (a period, an interval, a window):
    /// a positive number of ms that rounds to 0 ns is refused as what it
    /// became, zero, but in words that say why. (Without the number: float
    /// formatting would add 7 KB to the gzipped wasm.)
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn millis(&self, name: &'static str) -> Result<Nanos, Failure<V::Js>> {
        let ms = self.number(name)?;
        let nanos = millis(ms, name)?;
        if nanos == Nanos::ZERO && ms > 0.0 {
            let words = format!(
                "`{}` must be at least 1 ns (0.000001 ms); a positive value below 0.0000005 ms rounds to 0",
                js_name(name)
            );
            return Err(Failure::Worded(Error::ZeroValue { name }, words));
        }
        Ok(nanos)
    }

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn optional_count(&self, name: &'static str) -> Result<Option<u64>, Failure<V::Js>> {
        match self.optional_number(name)? {
            None => Ok(None),
            Some(n) => Ok(Some(count(n, name)?)),
        }
    }

    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn refill(&self) -> Result<Refill, Failure<V::Js>> {
        match self.value("refill")? {
            Kind::Absent => Ok(Refill::Greedy),
            Kind::String(s) => Refill::from_name(&s).ok_or_else(|| {
                Error::InvalidValue {
                    name: "refill",
                    reason: "must be \"greedy\" or \"interval\"",
                }
                .into()
            }),
            _ => Err(invalid_type("refill", "a string").into()),
        }
    }
}

/// The options object of a constructor: anything but an object is a `TypeError`.
#[cfg_attr(ratekeeper_size, optimize(size))]
fn options<V: JsValueIn>(value: &V) -> Result<Options<'_, V>, Failure<V::Js>> {
    match value.kind()? {
        Kind::Object | Kind::Array(_) => Ok(Options(value)),
        _ => Err(invalid_type("options", "an object").into()),
    }
}

/// One bandwidth: the options of `new TokenBucket`, or an element of `bandwidths`.
#[cfg_attr(ratekeeper_size, optimize(size))]
fn bandwidth<V: JsValueIn>(value: &V, in_list: bool) -> Result<Bandwidth, Failure<V::Js>> {
    let o = match value.kind()? {
        Kind::Object | Kind::Array(_) => Options(value),
        _ if in_list => return Err(invalid_type("bandwidths", "an array of objects").into()),
        _ => return Err(invalid_type("options", "an object").into()),
    };
    let (capacity, refill_tokens) = (o.count("capacity")?, o.count("refill_tokens")?);
    let period = o.millis("refill_period")?;
    let initial = o.optional_count("initial_tokens")?;
    let rule = Bandwidth::new(o.refill()?, capacity, refill_tokens, period)?;
    Ok(match initial {
        Some(initial) => rule.with_initial_tokens(initial)?,
        None => rule,
    })
}

/// `new TokenBucket({ capacity, refillTokens, refillPeriodMs, initialTokens?, refill? })`.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn token_bucket<V: JsValueIn>(options: &V) -> Result<AnyLimiter, Failure<V::Js>> {
    Ok(AnyLimiter::token_bucket(&[bandwidth(options, false)?])?)
}

/// `TokenBucket.fromBandwidths([{ capacity, refillTokens, refillPeriodMs, ... }, ...])`.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn token_bucket_from_bandwidths<V: JsValueIn>(list: &V) -> Result<AnyLimiter, Failure<V::Js>> {
    let Kind::Array(len) = list.kind()? else {
        return Err(invalid_type("bandwidths", "an array").into());
    };
    // Never read more than the core accepts: it reports the length instead.
    let read = len.min(ratekeeper::MAX_BANDWIDTHS as u32 + 1);
    let mut bands = Vec::with_capacity(read as usize);
    for i in 0..read {
        bands.push(bandwidth(&list.at(i)?, true)?);
    }
    match AnyLimiter::token_bucket(&bands) {
        Err(Error::TooLarge { name, max, .. }) => Err(Error::TooLarge {
            name,
            value: len.into(),
            max,
        }
        .into()),
        other => Ok(other?),
    }
}

/// `new Gcra({ burst, emissionIntervalMs })`.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn gcra<V: JsValueIn>(options: &V) -> Result<AnyLimiter, Failure<V::Js>> {
    let o = self::options(options)?;
    Ok(Gcra::new(o.count("burst")?, o.millis("emission_interval")?)?.into())
}

/// `Gcra.perPeriod({ burst, tokens, periodMs })`.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn gcra_per_period<V: JsValueIn>(options: &V) -> Result<AnyLimiter, Failure<V::Js>> {
    let o = self::options(options)?;
    let (burst, tokens) = (o.count("burst")?, o.count("tokens")?);
    Ok(Gcra::per_period(burst, tokens, o.millis("period")?)?.into())
}

/// `new LeakyBucket({ capacity, intervalMs })`.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn leaky_bucket<V: JsValueIn>(options: &V) -> Result<AnyLimiter, Failure<V::Js>> {
    let o = self::options(options)?;
    Ok(LeakyBucket::new(o.count("capacity")?, o.millis("interval")?)?.into())
}

/// `new SlidingWindowLog({ limit, windowMs })`.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn sliding_window_log<V: JsValueIn>(options: &V) -> Result<AnyLimiter, Failure<V::Js>> {
    let o = self::options(options)?;
    Ok(SlidingWindowLog::new(o.count("limit")?, o.millis("window")?)?.into())
}

/// `new SlidingWindowCounter({ limit, windowMs })`.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn sliding_window_counter<V: JsValueIn>(options: &V) -> Result<AnyLimiter, Failure<V::Js>> {
    Ok(match window_options(options)? {
        (limit, Ok(window)) => SlidingWindowCounter::new(limit, window)?.into(),
        (limit, Err(calendar)) => SlidingWindowCounter::with_calendar(limit, calendar)?.into(),
    })
}

/// `new FixedWindow({ limit, windowMs })`.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn fixed_window<V: JsValueIn>(options: &V) -> Result<AnyLimiter, Failure<V::Js>> {
    Ok(match window_options(options)? {
        (limit, Ok(window)) => FixedWindow::new(limit, window)?.into(),
        (limit, Err(calendar)) => FixedWindow::with_calendar(limit, calendar)?.into(),
    })
}

/// A window algorithm's windows: a length, or calendar periods.
type Windows = Result<Nanos, Calendar>;

/// A window algorithm's options: `{ limit, windowMs }` or `{ limit, calendar: 'day' | 'week' | 'month' }`
/// (calendar periods in UTC, `nowMs` then being milliseconds since the Unix epoch).
#[cfg_attr(ratekeeper_size, optimize(size))]
fn window_options<V: JsValueIn>(options: &V) -> Result<(u64, Windows), Failure<V::Js>> {
    let o = self::options(options)?;
    let limit = o.count("limit")?;
    match o.value("calendar")? {
        Kind::Absent => Ok((limit, Ok(o.millis("window")?))),
        Kind::String(name) => match Calendar::from_name(&name) {
            // A window beside a calendar would be dropped without a word.
            Some(_) if !matches!(o.value("window")?, Kind::Absent) => Err(Error::InvalidValue {
                name: "window",
                reason:
                    "cannot be given with a calendar, whose windows are its days, weeks or months",
            }
            .into()),
            Some(calendar) => Ok((limit, Err(calendar))),
            None => Err(Error::InvalidValue {
                name: "calendar",
                reason: "must be \"day\", \"week\" or \"month\"",
            }
            .into()),
        },
        // A calendar of another type is a bad type, as `refill` of one is.
        _ => Err(invalid_type("calendar", "a string").into()),
    }
}
