//! What the two JS bindings (napi here, wasm-bindgen in `bindings-wasm`, which
//! includes this very file with `#[path]`) have in common: reading constructor
//! options, the operations on a limiter with JS numbers, the decision layout
//! the JS layer reads, header values, the JS spelling of argument names and
//! the error messages.
//!
//! Nothing here touches a JS engine: each binding reads JS values through
//! [`JsValueIn`] and turns a [`Failure`] into its own exception, so every
//! rule is written once.

use std::fmt::Write as _;

use ratekeeper::{
    count_from_f64, AnyLimiter, Bandwidth, Decision, Error, FixedWindow, Gcra, Headers,
    LeakyBucket, Limiter, Nanos, Refill, SlidingWindowCounter, SlidingWindowLog,
};

/// Where a decision (or a reservation) is written for the JS layer to read:
/// one `Float64Array` of four numbers per thread, so that no result object is
/// created on the native side.
///
/// Decision: `[remaining, limit, retryAfterMs, resetAfterMs]`, `allowed` being
/// the return value. Granted reservation: `[waitMs, atMs, 0, 0]`.
pub type Out = [f64; 4];

/// A failure: a core error (bad value), or an exception the JS engine raised
/// while a value was read (a throwing getter).
pub enum Failure<J> {
    /// To be thrown as a `RangeError` or `TypeError` carrying `.code`.
    Core(Error),
    /// Already a JS exception: rethrown as is.
    Js(J),
}

impl<J> From<Error> for Failure<J> {
    fn from(error: Error) -> Self {
        Failure::Core(error)
    }
}

/// What a JS value is, as far as the options need to know.
pub enum Kind {
    /// `undefined` or `null`: not given.
    Absent,
    /// A number (any, NaN included; the core judges its value).
    Number(f64),
    /// A string.
    String(String),
    /// An array (for `bandwidths`), with its length.
    Array(u32),
    /// Any other object.
    Object,
    /// Anything else (boolean, bigint, symbol, function).
    Other,
}

/// A JS value as each binding reads it.
pub trait JsValueIn: Sized {
    /// The binding's JS exception.
    type Js;
    /// What the value is.
    fn kind(&self) -> Result<Kind, Failure<Self::Js>>;
    /// Property `key` of an object.
    fn get(&self, key: &'static str) -> Result<Self, Failure<Self::Js>>;
    /// Element `index` of an array.
    fn at(&self, index: u32) -> Result<Self, Failure<Self::Js>>;
}

fn invalid_type(name: &'static str, expected: &'static str) -> Error {
    Error::InvalidType { name, expected }
}

/// The JS spelling of a core (Rust) argument name, as error messages and
/// option keys use it.
pub fn js_name(rust: &'static str) -> &'static str {
    match rust {
        "refill_tokens" => "refillTokens",
        "refill_period" => "refillPeriodMs",
        "initial_tokens" => "initialTokens",
        "emission_interval" => "emissionIntervalMs",
        "period" => "periodMs",
        "interval" => "intervalMs",
        "window" => "windowMs",
        "now" => "nowMs",
        "max_wait" => "maxWaitMs",
        "taken_at" => "takenAtMs",
        "timeout" => "timeoutMs",
        // `AnyLimiter::reconfigure(now, new)`: the JS method calls it `other`.
        "new" => "other",
        // capacity, burst, tokens, limit, cost, bandwidths, refill, name, and
        // the binding's own options, clock, signal, decision read the same.
        other => other,
    }
}

/// The message of `error` with its argument in JS spelling, whether it is a
/// `TypeError` (else a `RangeError`), and its code.
pub fn describe_error(error: &Error) -> (String, bool, &'static str) {
    let message = match error.argument() {
        Some(rust) => error.display_with(js_name(rust)).to_string(),
        None => error.to_string(),
    };
    (
        message,
        matches!(error, Error::InvalidType { .. }),
        error.code(),
    )
}

/// The names of the arguments the JS layer checks itself, so that its errors
/// can hold `&'static str`s like the core's.
fn static_name(name: &str) -> &'static str {
    const NAMES: &[&str] = &[
        "cost", "now", "max_wait", "taken_at", "timeout", "name", "clock", "signal", "options",
        "other", "decision", "key", "create", "handle",
    ];
    NAMES
        .iter()
        .find(|n| **n == name)
        .copied()
        .unwrap_or("value")
}

/// The `invalid_type` error for an argument the JS layer checked, given its
/// Rust name and what it should be.
pub fn type_error(name: &str, expected: &str) -> Error {
    const EXPECTED: &[&str] = &[
        "a number",
        "a string",
        "a function",
        "an object",
        "an AbortSignal",
        "a limiter",
        "a decision",
        "a string or a number",
        "a function returning a limiter",
    ];
    let expected = EXPECTED
        .iter()
        .find(|e| **e == expected)
        .copied()
        .unwrap_or("of another type");
    invalid_type(static_name(name), expected)
}

/// Checks a duration in milliseconds the JS layer uses itself (`timeoutMs`).
pub fn check_millis(value: f64, name: &str) -> Result<(), Error> {
    millis(value, static_name(name)).map(drop)
}

/// A count (cost, capacity...) from a JS number: a whole number from 0 to 2^53 - 1.
pub fn count(value: f64, name: &'static str) -> Result<u64, Error> {
    count_from_f64(value, name)
}

/// A duration or instant from a JS number of milliseconds, rounded to the nanosecond.
pub fn millis(value: f64, name: &'static str) -> Result<Nanos, Error> {
    Nanos::from_millis_f64(value, name)
}

/// A bound on a wait: `Infinity` means none.
fn max_wait(value: f64) -> Result<Nanos, Error> {
    if value == f64::INFINITY {
        Ok(Nanos::MAX)
    } else {
        millis(value, "max_wait")
    }
}

/// `nanos` as milliseconds for JS.
fn ms(nanos: Nanos) -> f64 {
    nanos.as_millis_f64()
}

fn decision_out(d: &Decision) -> Out {
    // Counts fit an f64 exactly: they never exceed the limit, which came from
    // a JS number of at most 2^53 - 1.
    [
        d.remaining as f64,
        d.limit as f64,
        ms(d.retry_after),
        ms(d.reset_after),
    ]
}

/// What `tryAcquire`, `peek` and `reserve` answer: yes or no, and the numbers
/// for the scratch.
pub type Answer = Result<(bool, Out), Error>;

/// `tryAcquire`: whether `cost` was admitted at `now_ms`, and the decision.
pub fn try_acquire(l: &mut AnyLimiter, cost: f64, now_ms: f64) -> Answer {
    let cost = count(cost, "cost")?;
    let d = l.try_acquire(millis(now_ms, "now")?, cost)?;
    Ok((d.allowed, decision_out(&d)))
}

/// `peek`: like [`try_acquire`], consuming nothing.
pub fn peek(l: &AnyLimiter, cost: f64, now_ms: f64) -> Answer {
    let cost = count(cost, "cost")?;
    let d = l.peek(millis(now_ms, "now")?, cost)?;
    Ok((d.allowed, decision_out(&d)))
}

/// `reserve`: booked, with `[waitMs, atMs]`; or not (the wait would exceed
/// `max_wait_ms`, nothing booked), with the decision.
pub fn reserve(l: &mut AnyLimiter, cost: f64, max_wait_ms: f64, now_ms: f64) -> Answer {
    let cost = count(cost, "cost")?;
    let max_wait = max_wait(max_wait_ms)?;
    let now = millis(now_ms, "now")?;
    Ok(match l.reserve(now, cost, max_wait)? {
        // The slot in nanoseconds, then once to milliseconds: refunding
        // `atMs` converts back to exactly this slot.
        Ok(wait) => (true, [ms(wait), ms(now.saturating_add(wait)), 0.0, 0.0]),
        Err(denied) => (false, decision_out(&denied)),
    })
}

/// `refund`: gives back `cost` units taken at `taken_at_ms`.
pub fn refund(l: &mut AnyLimiter, cost: f64, taken_at_ms: f64) -> Result<(), Error> {
    let cost = count(cost, "cost")?;
    l.refund(millis(taken_at_ms, "taken_at")?, cost);
    Ok(())
}

/// `reconfigure`: `other`'s configuration replaces `l`'s at `now_ms`.
pub fn reconfigure(l: &mut AnyLimiter, other: AnyLimiter, now_ms: f64) -> Result<(), Error> {
    l.reconfigure(millis(now_ms, "now")?, other)
}

/// The header values of a decision made by `l`, called `name`: `RateLimit-Policy`,
/// `RateLimit` and, when denied, `Retry-After`, joined by `\n` (which no value
/// contains: the core writes any control character of a name as `?`).
pub fn headers(l: &AnyLimiter, name: &str, allowed: bool, fields: Out) -> Result<String, Error> {
    let [remaining, limit, retry_after, reset_after] = fields;
    let decision = Decision {
        allowed,
        remaining: count(remaining, "decision")?,
        limit: count(limit, "decision")?,
        retry_after: millis(retry_after, "decision")?,
        reset_after: millis(reset_after, "decision")?,
    };
    let headers = Headers::new(name, l.window(), &decision);
    let mut text = format!("{}\n{}", headers.policy(), headers.rate_limit());
    if let Some(seconds) = headers.retry_after() {
        // Writing to a String cannot fail.
        let _ = write!(text, "\n{seconds}");
    }
    Ok(text)
}

/// One configuration value of a limiter, for its getters.
pub enum Field {
    /// A number (a count or milliseconds).
    Number(f64),
    /// A string (the algorithm, a refill mode).
    Str(&'static str),
    /// A token bucket's bandwidths, each as fields.
    Bandwidths(Vec<Vec<(&'static str, Field)>>),
}

fn refill_name(refill: Refill) -> &'static str {
    match refill {
        Refill::Greedy => "greedy",
        Refill::Interval => "interval",
    }
}

fn bandwidth_fields(b: &Bandwidth) -> Vec<(&'static str, Field)> {
    vec![
        ("capacity", Field::Number(b.capacity() as f64)),
        ("refillTokens", Field::Number(b.refill_tokens() as f64)),
        ("refillPeriodMs", Field::Number(ms(b.refill_period()))),
        ("initialTokens", Field::Number(b.initial_tokens() as f64)),
        ("refill", Field::Str(refill_name(b.refill()))),
    ]
}

/// The configuration of `l` under its JS getter names: `algorithm`, `limit`,
/// `windowMs`, then the algorithm's own (a bucket's `bandwidths`, a GCRA's
/// `burst` and `emissionIntervalMs`, a queue's `capacity` and `intervalMs`).
pub fn config(l: &AnyLimiter) -> Vec<(&'static str, Field)> {
    let mut fields = vec![
        ("algorithm", Field::Str(l.algorithm())),
        ("limit", Field::Number(l.limit() as f64)),
        ("windowMs", Field::Number(ms(l.window()))),
    ];
    let bands =
        |bands: &[Bandwidth]| Field::Bandwidths(bands.iter().map(bandwidth_fields).collect());
    match l {
        AnyLimiter::TokenBucket(b) => fields.push(("bandwidths", bands(&b.bandwidths()))),
        AnyLimiter::TokenBucket2(b) => fields.push(("bandwidths", bands(&b.bandwidths()))),
        AnyLimiter::TokenBucket3(b) => fields.push(("bandwidths", bands(&b.bandwidths()))),
        AnyLimiter::TokenBucket4(b) => fields.push(("bandwidths", bands(&b.bandwidths()))),
        AnyLimiter::Gcra(g) => {
            fields.push(("burst", Field::Number(g.burst() as f64)));
            fields.push((
                "emissionIntervalMs",
                Field::Number(ms(g.emission_interval())),
            ));
        }
        AnyLimiter::LeakyBucket(q) => {
            fields.push(("capacity", Field::Number(q.limit() as f64)));
            fields.push(("intervalMs", Field::Number(ms(q.interval()))));
        }
        // The window algorithms: `limit` and `windowMs` say it all.
        _ => {}
    }
    fields
}

/// Reads constructor options; the JS keys are the JS spellings of the core names.
struct Options<'a, V>(&'a V);

impl<V: JsValueIn> Options<'_, V> {
    fn value(&self, name: &'static str) -> Result<Kind, Failure<V::Js>> {
        self.0.get(js_name(name))?.kind()
    }

    fn optional_number(&self, name: &'static str) -> Result<Option<f64>, Failure<V::Js>> {
        match self.value(name)? {
            Kind::Absent => Ok(None),
            Kind::Number(n) => Ok(Some(n)),
            _ => Err(invalid_type(name, "a number").into()),
        }
    }

    fn number(&self, name: &'static str) -> Result<f64, Failure<V::Js>> {
        self.optional_number(name)?
            .ok_or_else(|| invalid_type(name, "a number").into())
    }

    fn count(&self, name: &'static str) -> Result<u64, Failure<V::Js>> {
        Ok(count(self.number(name)?, name)?)
    }

    fn millis(&self, name: &'static str) -> Result<Nanos, Failure<V::Js>> {
        Ok(millis(self.number(name)?, name)?)
    }

    fn optional_count(&self, name: &'static str) -> Result<Option<u64>, Failure<V::Js>> {
        match self.optional_number(name)? {
            None => Ok(None),
            Some(n) => Ok(Some(count(n, name)?)),
        }
    }

    fn refill(&self) -> Result<Refill, Failure<V::Js>> {
        match self.value("refill")? {
            Kind::Absent => Ok(Refill::Greedy),
            Kind::String(s) if s == "greedy" => Ok(Refill::Greedy),
            Kind::String(s) if s == "interval" => Ok(Refill::Interval),
            Kind::String(_) => Err(Error::InvalidValue {
                name: "refill",
                reason: "must be \"greedy\" or \"interval\"",
            }
            .into()),
            _ => Err(invalid_type("refill", "a string").into()),
        }
    }
}

/// The options object of a constructor: anything but an object is a `TypeError`.
fn options<V: JsValueIn>(value: &V) -> Result<Options<'_, V>, Failure<V::Js>> {
    match value.kind()? {
        Kind::Object | Kind::Array(_) => Ok(Options(value)),
        _ => Err(invalid_type("options", "an object").into()),
    }
}

/// One bandwidth: the options of `new TokenBucket`, or an element of `bandwidths`.
fn bandwidth<V: JsValueIn>(value: &V, in_list: bool) -> Result<Bandwidth, Failure<V::Js>> {
    let o = match value.kind()? {
        Kind::Object | Kind::Array(_) => Options(value),
        _ if in_list => return Err(invalid_type("bandwidths", "an array of objects").into()),
        _ => return Err(invalid_type("options", "an object").into()),
    };
    let (capacity, refill_tokens) = (o.count("capacity")?, o.count("refill_tokens")?);
    let period = o.millis("refill_period")?;
    let initial = o.optional_count("initial_tokens")?;
    let rule = match o.refill()? {
        Refill::Greedy => Bandwidth::greedy(capacity, refill_tokens, period)?,
        Refill::Interval => Bandwidth::interval(capacity, refill_tokens, period)?,
    };
    Ok(match initial {
        Some(initial) => rule.with_initial_tokens(initial)?,
        None => rule,
    })
}

/// `new TokenBucket({ capacity, refillTokens, refillPeriodMs, initialTokens?, refill? })`.
pub fn token_bucket<V: JsValueIn>(options: &V) -> Result<AnyLimiter, Failure<V::Js>> {
    Ok(AnyLimiter::token_bucket(&[bandwidth(options, false)?])?)
}

/// `TokenBucket.fromBandwidths([{ capacity, refillTokens, refillPeriodMs, ... }, ...])`.
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
pub fn gcra<V: JsValueIn>(options: &V) -> Result<AnyLimiter, Failure<V::Js>> {
    let o = self::options(options)?;
    Ok(Gcra::new(o.count("burst")?, o.millis("emission_interval")?)?.into())
}

/// `Gcra.perPeriod({ burst, tokens, periodMs })`.
pub fn gcra_per_period<V: JsValueIn>(options: &V) -> Result<AnyLimiter, Failure<V::Js>> {
    let o = self::options(options)?;
    let (burst, tokens) = (o.count("burst")?, o.count("tokens")?);
    Ok(Gcra::per_period(burst, tokens, o.millis("period")?)?.into())
}

/// `new LeakyBucket({ capacity, intervalMs })`.
pub fn leaky_bucket<V: JsValueIn>(options: &V) -> Result<AnyLimiter, Failure<V::Js>> {
    let o = self::options(options)?;
    Ok(LeakyBucket::new(o.count("capacity")?, o.millis("interval")?)?.into())
}

/// `new SlidingWindowLog({ limit, windowMs })`.
pub fn sliding_window_log<V: JsValueIn>(options: &V) -> Result<AnyLimiter, Failure<V::Js>> {
    let o = self::options(options)?;
    Ok(SlidingWindowLog::new(o.count("limit")?, o.millis("window")?)?.into())
}

/// `new SlidingWindowCounter({ limit, windowMs })`.
pub fn sliding_window_counter<V: JsValueIn>(options: &V) -> Result<AnyLimiter, Failure<V::Js>> {
    let o = self::options(options)?;
    Ok(SlidingWindowCounter::new(o.count("limit")?, o.millis("window")?)?.into())
}

/// `new FixedWindow({ limit, windowMs })`.
pub fn fixed_window<V: JsValueIn>(options: &V) -> Result<AnyLimiter, Failure<V::Js>> {
    let o = self::options(options)?;
    Ok(FixedWindow::new(o.count("limit")?, o.millis("window")?)?.into())
}
