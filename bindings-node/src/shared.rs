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
    count_from_f64, u64_to_f64, Algorithm, AnyKeyed, AnyLimiter, Bandwidth, Calendar, Decision,
    Error, Eviction, FixedWindow, Gcra, Headers, LeakyBucket, Limiter, Nanos, Policy, Portable,
    Refill, SlidingWindowCounter, SlidingWindowLog,
};

/// Where a decision (or a reservation) is written for the JS layer to read:
/// one `Float64Array` of four numbers per thread, so that no result object is
/// created on the native side.
///
/// Decision: `[remaining, limit, retryAfterMs, resetAfterMs]`, `allowed` being
/// the return value. Granted reservation: `[waitMs, atMs, slotHigh, slotLow]`
/// (see [`booked`]).
pub type Out = [f64; 4];

/// A failure: a core error (bad value), a policy configuration of the wrong
/// shape, or an exception the JS engine raised while a value was read (a
/// throwing getter).
pub enum Failure<J> {
    /// To be thrown as a `RangeError` or `TypeError` carrying `.code`.
    Core(Error),
    /// To be thrown as a `TypeError` with code `invalid_config` and this
    /// message (see [`crate::policy_config`]).
    Config(String),
    /// A core error (its class and code) in other words: this message,
    /// which names the argument.
    Worded(Error, String),
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
    /// The names of an object's enumerable string-keyed properties.
    fn keys(&self) -> Result<Vec<String>, Failure<Self::Js>>;
}

#[cfg_attr(ratekeeper_size, optimize(size))]
fn invalid_type(name: &'static str, expected: &'static str) -> Error {
    Error::InvalidType { name, expected }
}

/// The JS spelling of a core (Rust) argument name, as error messages and
/// option keys use it.
#[cfg_attr(ratekeeper_size, optimize(size))]
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
        "max_keys" => "maxKeys",
        // `AnyLimiter::reconfigure(now, new)`: the JS method calls it `other`.
        "new" => "other",
        // Encoded state: `restore(bytes)`, `fromBytes(bytes, options)`.
        "state" => "bytes",
        // capacity, burst, tokens, limit, cost, bandwidths, refill, name, and
        // the binding's own options, clock, signal, decision read the same.
        other => other,
    }
}

/// The message of `error` with its argument in JS spelling, whether it is a
/// `TypeError` (else a `RangeError`), and its code.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn describe_error(error: &Error) -> (String, bool, &'static str) {
    let message = match error.argument() {
        Some(rust) => error.display_with(js_name(rust)).to_string(),
        None => error.to_string(),
    };
    describe_worded(error, message)
}

/// [`describe_error`] with `message` in place of the core's words.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn describe_worded(error: &Error, message: String) -> (String, bool, &'static str) {
    (
        message,
        matches!(error, Error::InvalidType { .. }),
        error.code(),
    )
}

/// The names of the arguments the JS layer checks itself, so that its errors
/// can hold `&'static str`s like the core's.
#[cfg_attr(ratekeeper_size, optimize(size))]
fn static_name(name: &str) -> &'static str {
    const NAMES: &[&str] = &[
        "cost",
        "now",
        "max_wait",
        "taken_at",
        "timeout",
        "name",
        "clock",
        "signal",
        "options",
        "other",
        "decision",
        "key",
        "create",
        "handle",
        "limiter",
        "request",
        "fields",
        "rates",
        "config",
        "state",
        "costs",
        "algorithm",
        "by",
        "eviction",
        "max_keys",
        "bandwidths",
        "skip",
    ];
    NAMES
        .iter()
        .find(|n| **n == name)
        .copied()
        .unwrap_or("value")
}

/// The `invalid_type` error for an argument the JS layer checked, given its
/// Rust name and what it should be.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn type_error(name: &str, expected: &str) -> Error {
    const EXPECTED: &[&str] = &[
        "a number",
        "a string",
        "a function",
        "an object",
        "an AbortSignal",
        "a limiter",
        "a limiter or a KeyedLimiter",
        "a decision",
        "a string, a number or a Uint8Array",
        "a function returning a limiter",
        "a Uint8Array",
        "an array of numbers",
        "an array of strings",
        "a KeyedLimiter or a Policy",
        "an object or a string",
        "an object of strings, numbers and Uint8Arrays",
        "an array of objects",
    ];
    let expected = EXPECTED
        .iter()
        .find(|e| **e == expected)
        .copied()
        .unwrap_or("of another type");
    invalid_type(static_name(name), expected)
}

/// Checks a duration in milliseconds the JS layer uses itself (`timeoutMs`).
#[cfg_attr(ratekeeper_size, optimize(size))]
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

/// The numbers of a decision made at `now`.
fn decision_out(d: &Decision, now: Now) -> Out {
    // Counts fit an f64 exactly: they never exceed the limit, which came from
    // a JS number of at most 2^53 - 1.
    [
        u64_to_f64(d.remaining),
        u64_to_f64(d.limit),
        retry_ms(d.retry_after, now),
        ms(d.reset_after),
    ]
}

/// A decision's `retry_after` as milliseconds to add to `nowMs`, given one:
/// the sum then reaches the instant the core named, even on a clock counting
/// from the epoch ([`Nanos::as_millis_f64_after`]).
#[inline]
fn retry_ms(retry: Nanos, now: Now) -> f64 {
    match now {
        // An allowed call's wait: zero, without a division.
        _ if retry == Nanos::ZERO => 0.0,
        Now::Millis(now_ms) => retry.as_millis_f64_after(now_ms),
        Now::Read(_) => ms(retry),
    }
}

/// [`decision_out`] for a policy's combined decision, whose counts are
/// 2^64 - 1 when it has no limits: `Infinity` then, no bound, rather than a
/// number no limit has.
fn policy_decision_out(d: &Decision, now: Now) -> Out {
    let [remaining, limit, retry_after, reset_after] = decision_out(d, now);
    let bound = |n: u64, out: f64| if n == u64::MAX { f64::INFINITY } else { out };
    [
        bound(d.remaining, remaining),
        bound(d.limit, limit),
        retry_after,
        reset_after,
    ]
}

/// What `tryAcquire`, `peek` and `reserve` answer: yes or no, and the numbers
/// for the scratch; the error as each build keeps it (`Failed`: boxed in
/// the napi build, see there).
pub type Answer = Result<(bool, Out), crate::Failed>;

/// The time of a decision: `nowMs` from JS, or a reading of the native
/// clock (the napi build's default clock, see `bindings-node/src/clock.rs`).
#[derive(Clone, Copy)]
pub enum Now {
    /// Milliseconds, as JS gave them.
    Millis(f64),
    /// Nanoseconds, as the native clock read them.
    #[allow(dead_code)] // the wasm crate, which includes this file, has no native clock
    Read(Nanos),
}

impl Now {
    #[inline]
    fn nanos(self) -> Result<Nanos, Error> {
        match self {
            Now::Millis(ms) => millis(ms, "now"),
            Now::Read(nanos) => Ok(nanos),
        }
    }
}

/// `tryAcquire`: whether `cost` was admitted at `now`, and the decision.
pub fn try_acquire(l: &mut AnyLimiter, cost: f64, now: Now) -> Answer {
    let cost = count(cost, "cost")?;
    let d = l.try_acquire(now.nanos()?, cost)?;
    Ok((d.allowed, decision_out(&d, now)))
}

/// `peek`: like [`try_acquire`], consuming nothing.
pub fn peek(l: &AnyLimiter, cost: f64, now: Now) -> Answer {
    let cost = count(cost, "cost")?;
    let d = l.peek(now.nanos()?, cost)?;
    Ok((d.allowed, decision_out(&d, now)))
}

/// The arguments of a `reserve`: cost, bound on the wait, now.
fn reserve_args(cost: f64, max_wait_ms: f64, now: Now) -> Result<(u64, Nanos, Nanos), Error> {
    Ok((count(cost, "cost")?, max_wait(max_wait_ms)?, now.nanos()?))
}

/// A granted reservation for the scratch: `[waitMs, atMs, slotHigh,
/// slotLow]`. `atMs` is the slot as a float, which on a clock counting from
/// the epoch (1.7e12 ms) is a quarter of a microsecond apart from the next
/// one: refunding there would miss the booking. The slot's exact nanoseconds
/// are its high and low 32 bits, which `Reservation.cancel()` hands back
/// ([`taken_at`]).
fn booked(now: Nanos, wait: Nanos) -> Out {
    let slot = now.saturating_add(wait);
    let high = u64_to_f64(slot.0 >> 32);
    let low = u64_to_f64(slot.0 & 0xffff_ffff);
    [ms(wait), ms(slot), high, low]
}

/// When units being given back were taken, from `[takenAtMs, slotHigh,
/// slotLow]`: exactly the slot `slotHigh * 2^32 + slotLow` of a reservation
/// ([`booked`]), or, when `slotHigh` is NaN, `takenAtMs`.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn taken_at(taken: &[f64]) -> Result<Nanos, Error> {
    let &[taken_at_ms, high, low] = taken else {
        return Err(Error::InvalidValue {
            name: "taken_at",
            reason: "must be [takenAtMs, slotHigh, slotLow]",
        });
    };
    if high.is_nan() {
        return millis(taken_at_ms, "taken_at");
    }
    let high = count_from_f64(high, "taken_at")?;
    let low = count_from_f64(low, "taken_at")?;
    match (u32::try_from(high), u32::try_from(low)) {
        (Ok(high), Ok(low)) => Ok(Nanos((u64::from(high) << 32) | u64::from(low))),
        _ => Err(Error::InvalidValue {
            name: "taken_at",
            reason: "is not a slot this limiter booked",
        }),
    }
}

/// `reserve`: booked, with `[waitMs, atMs]`; or not (the wait would exceed
/// `max_wait_ms`, nothing booked), with the decision.
pub fn reserve(l: &mut AnyLimiter, cost: f64, max_wait_ms: f64, now: Now) -> Answer {
    let (cost, max_wait, at) = reserve_args(cost, max_wait_ms, now)?;
    Ok(match l.reserve(at, cost, max_wait)? {
        Ok(wait) => (true, booked(at, wait)),
        Err(denied) => (false, decision_out(&denied, now)),
    })
}

/// `refund`: gives back `cost` units taken at `taken_at_ms`, or exactly at a
/// reservation's slot (see [`taken_at`]).
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn refund(l: &mut AnyLimiter, cost: f64, taken: &[f64]) -> Result<(), Error> {
    let cost = count(cost, "cost")?;
    l.refund(taken_at(taken)?, cost);
    Ok(())
}

/// `reconfigure`: `other`'s configuration replaces `l`'s at `now_ms`.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn reconfigure(l: &mut AnyLimiter, other: AnyLimiter, now_ms: f64) -> Result<(), Error> {
    l.reconfigure(millis(now_ms, "now")?, other)
}

/// The header values of a decision made by `l`, called `name`: `RateLimit-Policy`,
/// `RateLimit` and, when denied, `Retry-After`, joined by `\n` (which no value
/// contains: the core writes any control character of a name as `?`).
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn headers(l: &AnyLimiter, name: &str, allowed: bool, fields: Out) -> Result<String, Error> {
    let decision = decision_in(allowed, fields, DECISION)?;
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
    /// A string (the algorithm, a refill mode, what waiters do).
    Str(&'static str),
    /// A token bucket's bandwidths, each as fields.
    Bandwidths(Vec<Vec<(&'static str, Field)>>),
}

#[cfg_attr(ratekeeper_size, optimize(size))]
fn bandwidth_fields(b: &Bandwidth) -> Vec<(&'static str, Field)> {
    vec![
        ("capacity", Field::Number(b.capacity() as f64)),
        ("refillTokens", Field::Number(b.refill_tokens() as f64)),
        ("refillPeriodMs", Field::Number(ms(b.refill_period()))),
        ("initialTokens", Field::Number(b.initial_tokens() as f64)),
        ("refill", Field::Str(Refill::name(b.refill()))),
    ]
}

/// What the JS layer's waiting acquires (lib/api/waiting.cjs) and pacedFetch
/// do with the bookings around an aborted waiter's, as the core says:
/// `up`, those behind move up into its slot, each landing no later than it
/// was (`moves_up`: a GCRA or a leaky bucket, alone, per key or as a
/// policy's one limit); `latest`, it is given back only while it is the
/// latest booking of its keys, else its slot goes unused, and nobody moves (a token
/// bucket, whose capacity clips the refill a booking took; a policy of
/// several limits with a bucket among them, each holding a booking until
/// the slowest limit's slot); `any`, it is given back where it was counted,
/// wherever it stands (`refunds_any_booking`: the window algorithms).
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn waiters(moves_up: bool, refunds_any_booking: bool) -> &'static str {
    if moves_up {
        "up"
    } else if refunds_any_booking {
        "any"
    } else {
        "latest"
    }
}

/// The configuration of `l` under its JS getter names: `algorithm`, `limit`,
/// `windowMs`, then the algorithm's own (a bucket's `bandwidths`, a GCRA's
/// `burst` and `emissionIntervalMs`, a queue's `capacity` and `intervalMs`),
/// and `waiters` for the JS layer's waiters (no getter shows it; see
/// [`waiters`]).
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn config(l: &AnyLimiter) -> Vec<(&'static str, Field)> {
    let mut fields = vec![
        ("algorithm", Field::Str(l.algorithm())),
        ("limit", Field::Number(l.limit() as f64)),
        ("windowMs", Field::Number(ms(l.window()))),
        (
            "waiters",
            Field::Str(waiters(l.moves_up(), l.refunds_any_booking())),
        ),
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
        // The window algorithms: `limit` and `windowMs`, and a calendar's name.
        _ => {
            if let Some(calendar) = l.calendar() {
                fields.push(("calendar", Field::Str(calendar.name())));
            }
        }
    }
    fields
}

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

// ---- Keyed limiters -------------------------------------------------------

/// A key from JS: a string is its UTF-8 bytes; a number arrives as its decimal
/// string (the JS layer converts it), so `42` and `"42"` are the same key.
pub type Key<'a> = &'a [u8];

/// `new KeyedLimiter(limiter, { maxKeys?, eviction? })`, or a policy's limit
/// (see [`policy_add`]): every key starts as a copy of `prototype`'s
/// configuration, fresh. `None`: not given.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn keyed(
    prototype: AnyLimiter,
    max_keys: Option<f64>,
    eviction: Option<&str>,
) -> Result<AnyKeyed, Error> {
    let eviction = match eviction.map(Eviction::from_name) {
        None => None,
        Some(Some(eviction)) => Some(eviction),
        Some(None) => {
            return Err(Error::InvalidValue {
                name: "eviction",
                reason: "must be \"nearest_fresh\" or \"refuse\"",
            })
        }
    };
    let max_keys = max_keys.map(|max| count(max, "max_keys")).transpose()?;
    AnyKeyed::new(prototype).bounded(max_keys, eviction)
}

/// `keyed.peek` ([`PEEK`]), `keyed.tryAcquire` ([`TRY_ACQUIRE`]) or
/// `keyed.reserve` ([`RESERVE`], answered as [`reserve`]; the only one to
/// read `max_wait_ms`) of `cost` for `key` at `now`.
pub fn keyed_op(
    s: &mut AnyKeyed,
    key: Key,
    cost: f64,
    max_wait_ms: f64,
    now: Now,
    op: u32,
) -> Answer {
    if op == RESERVE {
        let (cost, max_wait, at) = reserve_args(cost, max_wait_ms, now)?;
        return Ok(match s.reserve(key, at, cost, max_wait)? {
            Ok(wait) => (true, booked(at, wait)),
            Err(denied) => (false, decision_out(&denied, now)),
        });
    }
    let cost = count(cost, "cost")?;
    let at = now.nanos()?;
    let d = if op == TRY_ACQUIRE {
        s.try_acquire(key, at, cost)?
    } else {
        debug_assert_eq!(op, PEEK);
        s.peek(key, at, cost)?
    };
    Ok((d.allowed, decision_out(&d, now)))
}

/// `keyed.refund(key, cost, takenAtMs)`.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn keyed_refund(s: &mut AnyKeyed, key: Key, cost: f64, taken: &[f64]) -> Result<(), Error> {
    let cost = count(cost, "cost")?;
    s.refund(key, taken_at(taken)?, cost);
    Ok(())
}

/// `keyed.reclaim(nowMs)`.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn keyed_reclaim(s: &mut AnyKeyed, now_ms: f64) -> Result<(), Error> {
    s.reclaim(millis(now_ms, "now")?);
    Ok(())
}

/// `keyed.tryAcquireBatch(key, costs, nowMs)`: five numbers per cost,
/// `[allowed (1 or 0), remaining, limit, retryAfterMs, resetAfterMs]`. A
/// failed call changes nothing: a cost that would fail its own entry (above
/// the limit) fails the whole call before anything is decided.
#[cfg_attr(ratekeeper_size, optimize(size))]
#[allow(dead_code)] // the wasm crate decides a batch through its keyed operation
pub fn keyed_try_acquire_batch(
    s: &mut AnyKeyed,
    key: Key,
    costs: &[f64],
    now_ms: f64,
) -> Result<Vec<f64>, Error> {
    let (now, costs) = check_keyed_batch(s, key, costs, now_ms)?;
    let mut out = vec![Err(Error::StateTruncated); costs.len()];
    s.try_acquire_batch(key, now, &costs, &mut out)?;
    let mut flat = Vec::with_capacity(5 * out.len());
    for d in out {
        let d = d?;
        flat.push(if d.allowed { 1.0 } else { 0.0 });
        flat.extend_from_slice(&decision_out(&d, Now::Millis(now_ms)));
    }
    Ok(flat)
}

/// The checks of [`keyed_try_acquire_batch`], made before anything is
/// decided: `nowMs` and each cost read, then [`AnyKeyed::check_batch`].
/// Answers the time and the costs.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn check_keyed_batch(
    s: &AnyKeyed,
    key: Key,
    costs: &[f64],
    now_ms: f64,
) -> Result<(Nanos, Vec<u64>), Error> {
    let now = millis(now_ms, "now")?;
    let costs = costs
        .iter()
        .map(|&c| count(c, "cost"))
        .collect::<Result<Vec<u64>, Error>>()?;
    s.check_batch(key, now, &costs)?;
    Ok((now, costs))
}

// ---- Policies -------------------------------------------------------------

/// `Policy.fromRates(rates, { algorithm, by })`.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn policy_from_rates<J>(
    rates: &str,
    algorithm: &str,
    by: &[String],
) -> Result<Policy, Failure<J>> {
    let Some(algorithm) = Algorithm::from_name(algorithm) else {
        return Err(Error::InvalidValue {
            name: "algorithm",
            reason: "must be \"token_bucket\", \"gcra\", \"leaky_bucket\", \"sliding_window_log\", \"sliding_window_counter\" or \"fixed_window\"",
        }
        .into());
    };
    let by: Vec<&str> = by.iter().map(String::as_str).collect();
    Ok(counted_in_js(Policy::from_rates(rates, algorithm, &by)?)?)
}

/// `Number.MAX_SAFE_INTEGER`: the largest count a JS number holds exactly.
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// `policy`, if JS numbers carry its counts exactly: every limit at most
/// 2^53 - 1, as the limiters' own options are. A rate string or a
/// configuration could name more, whose decisions (and so their headers)
/// JS could not hold. Refused as a limiter's count past 2^53 - 1 is, with
/// the code of a number past what the binding holds exactly (Python's for
/// its own bound, 2^64 - 1), `invalid_value`.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn counted_in_js(policy: Policy) -> Result<Policy, Error> {
    for i in 0..policy.len() {
        let limit = policy.limiter(i).limit();
        if limit > MAX_SAFE_INTEGER {
            return Err(Error::InvalidValue {
                name: "limit",
                reason: "must be a safe integer (at most 2^53 - 1)",
            });
        }
    }
    Ok(policy)
}

/// `{ name, by, limiter }` or `policy.add(name, limiter, { by })`: a limit
/// of copies of `limiter`'s configuration, to a policy that reads the
/// default monotonic clock (`monotonic`, see [`Policy::add_store_on`]) or
/// not. `true`: it reads `Date.now()` from now on.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn policy_add<J>(
    p: &mut Policy,
    name: &str,
    by: &[String],
    limiter: AnyLimiter,
    (max_keys, eviction): (Option<f64>, Option<&str>),
    monotonic: bool,
) -> Result<bool, Failure<J>> {
    let by: Vec<&str> = by.iter().map(String::as_str).collect();
    let store = keyed(limiter, max_keys, eviction)?;
    p.add_store_on(name, &by, store, monotonic)
        .map_err(|error| match error.argument() {
            // The core's words, in this binding's clocks (as Python's name its own).
            Some("limiter") => {
                let message = "`limiter` follows a calendar, which needs Date.now, and the policy \
                               has decided on performance.now: give it clock: Date.now";
                Failure::Worded(error, message.into())
            }
            _ => error.into(),
        })
}

/// A key, or a field's name or value of a policy's request, as a build
/// receives it from the JS layer outside the scratch: a string, or (a key
/// or a value) the bytes of one that is not UTF-8.
pub trait Part {
    /// The string, when it is one (a field's name always is).
    fn text(&self) -> Option<&str>;
    /// Its bytes: a string's UTF-8, or the bytes themselves.
    fn bytes(&self) -> &[u8];
}

impl Part for String {
    fn text(&self) -> Option<&str> {
        Some(self)
    }

    fn bytes(&self) -> &[u8] {
        self.as_bytes()
    }
}

/// A request from JS: field names and values, alternating. A name of
/// bytes (never passed by the JS layer) is refused.
pub fn request<P: Part>(fields: &[P]) -> Result<Vec<(&str, &[u8])>, Error> {
    fields
        .chunks_exact(2)
        .map(|pair| match pair[0].text() {
            Some(name) => Ok((name, pair[1].bytes())),
            None => Err(type_error(
                "request",
                "an object of strings, numbers and Uint8Arrays",
            )),
        })
        .collect()
}

/// The most fields of a request in bytes ([`with_request_bytes`]) read
/// without an allocation.
const INLINE_FIELDS: usize = 8;

/// Calls `f` with the request whose fields the JS layer wrote as `bytes`
/// (`fieldsInto` in lib/api.cjs): names and values alternating, each its
/// length in one byte, then its ASCII characters. Reading strings through
/// the engine's API (napi's, wasm-bindgen's) took most of a policy's call.
pub fn with_request_bytes<R, E: From<Error>>(
    bytes: &[u8],
    f: impl FnOnce(&[(&str, &[u8])]) -> Result<R, E>,
) -> Result<R, E> {
    let malformed = || Error::InvalidValue {
        name: "request",
        reason: "was written malformed into the scratch",
    };
    // The next string of `rest`, which then starts after it.
    fn next<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
        let (&len, tail) = rest.split_first()?;
        let (text, tail) = tail.split_at_checked(len.into())?;
        *rest = tail;
        Some(text)
    }
    let mut rest = bytes;
    let mut inline: [(&str, &[u8]); INLINE_FIELDS] = [("", &[]); INLINE_FIELDS];
    let mut spilled = Vec::new();
    let mut count = 0;
    while !rest.is_empty() {
        let name = next(&mut rest).ok_or_else(malformed)?;
        let name = std::str::from_utf8(name).map_err(|_| malformed())?;
        let field = (name, next(&mut rest).ok_or_else(malformed)?);
        match inline.get_mut(count) {
            Some(slot) => *slot = field,
            None => {
                if spilled.is_empty() {
                    spilled.extend_from_slice(&inline);
                }
                spilled.push(field);
            }
        }
        count += 1;
    }
    f(if count <= INLINE_FIELDS {
        &inline[..count]
    } else {
        &spilled
    })
}

/// Writes where a policy's answer goes beyond the scratch, `details`:
/// `[status (1 or 0), deniedBy (index, or -1), then five numbers per limit:
/// allowed (1 or 0), remaining, limit, retryAfterMs, resetAfterMs]` (the
/// limits only when `denied`).
fn write_details(details: &mut [f64], yes: bool, denied: Option<(&Policy, Option<usize>, f64)>) {
    let [status, rest @ ..] = details else {
        return; // never so: see `policy_op`
    };
    *status = if yes { 1.0 } else { 0.0 };
    let Some((p, denied_by, now_ms)) = denied else {
        return;
    };
    let [by, limits @ ..] = rest else {
        return;
    };
    *by = denied_by.map_or(-1.0, |i| i as f64);
    for (dst, d) in limits.chunks_exact_mut(5).zip(p.decisions()) {
        dst[0] = if d.allowed { 1.0 } else { 0.0 };
        dst[1..].copy_from_slice(&decision_out(d, Now::Millis(now_ms)));
    }
}

/// What a keyed or policy operation does: see [`keyed_op`] and [`policy_op`].
pub const PEEK: u32 = 0;
/// `tryAcquire`.
pub const TRY_ACQUIRE: u32 = 1;
/// `reserve`.
pub const RESERVE: u32 = 2;

/// `policy.peek` ([`PEEK`]), `policy.tryAcquire` ([`TRY_ACQUIRE`]) or
/// `policy.reserve` ([`RESERVE`], the only one to read `max_wait_ms`) of
/// `cost` for `request` at `now_ms`: the combined decision, and the status
/// and each limit's decision written into `details` (see `write_details`;
/// an array the JS layer shares with the binding, since one returned cost
/// an allocation and a copy per call).
///
/// Fails, deciding nothing, when `details` has no room for every limit (the
/// JS layer makes room for each policy it builds).
pub fn policy_op(
    p: &mut Policy,
    request: &[(&str, &[u8])],
    cost: f64,
    max_wait_ms: f64,
    now_ms: f64,
    op: u32,
    details: &mut [f64],
) -> Answer {
    if details.len() < 2 + 5 * p.len() {
        // `Failed` is `Error` itself in the wasm build.
        #[allow(clippy::useless_conversion)]
        return Err(Error::InvalidValue {
            name: "details",
            reason: "has no room for every limit of this policy",
        }
        .into());
    }
    if op == RESERVE {
        return policy_reserve(p, request, cost, max_wait_ms, now_ms, details);
    }
    let cost = count(cost, "cost")?;
    let now = millis(now_ms, "now")?;
    let answer = if op == TRY_ACQUIRE {
        p.try_acquire(request, now, cost)?
    } else {
        debug_assert_eq!(op, PEEK);
        p.peek(request, now, cost)?
    };
    let d = answer.decision;
    write_details(details, d.allowed, Some((p, answer.denied_by, now_ms)));
    Ok((d.allowed, policy_decision_out(&d, Now::Millis(now_ms))))
}

/// `policy.reserve(request, cost, maxWaitMs, nowMs)`: booked in every limit
/// (`[waitMs, atMs]`), or in none, with the combined decision and details.
#[cfg_attr(ratekeeper_size, optimize(size))]
fn policy_reserve(
    p: &mut Policy,
    request: &[(&str, &[u8])],
    cost: f64,
    max_wait_ms: f64,
    now_ms: f64,
    details: &mut [f64],
) -> Answer {
    let (cost, max_wait, now) = reserve_args(cost, max_wait_ms, Now::Millis(now_ms))?;
    Ok(match p.reserve(request, now, cost, max_wait)? {
        Ok(wait) => {
            write_details(details, true, None);
            (true, booked(now, wait))
        }
        Err(denied) => {
            write_details(details, false, Some((p, denied.denied_by, now_ms)));
            (
                false,
                policy_decision_out(&denied.decision, Now::Millis(now_ms)),
            )
        }
    })
}

/// `policy.refund(request, cost, takenAtMs)`, or the giving back of a
/// booking, in the first `limits` limits only: those the policy had when
/// the units were taken (see [`Policy::refund_limits`]).
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn policy_refund<P: Part>(
    p: &mut Policy,
    fields: &[P],
    cost: f64,
    taken: &[f64],
    limits: usize,
) -> Result<(), Error> {
    let cost = count(cost, "cost")?;
    p.refund_limits(&request(fields)?, taken_at(taken)?, cost, limits)
}

/// `policy.reset(request)`: how many limits held the request's key (see
/// [`Policy::reset`]).
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn policy_reset<P: Part>(p: &mut Policy, fields: &[P]) -> Result<u32, Error> {
    let held = p.reset(&request(fields)?)?;
    Ok(held.min(u32::MAX as usize) as u32)
}

/// `policy.reclaim(nowMs)`.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn policy_reclaim(p: &mut Policy, now_ms: f64) -> Result<(), Error> {
    p.reclaim(millis(now_ms, "now")?);
    Ok(())
}

/// What the policy's waiters do around an aborted one (`up`, `latest` or
/// `any`: see [`waiters`]), then for each limit: its name, its calendar's
/// name (empty for none), the number of fields it is keyed by (in decimal),
/// then those fields. (Fields joined by a separator could not be told apart
/// from fields containing it.)
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn policy_limits(p: &Policy) -> Vec<String> {
    let mut out = Vec::with_capacity(1 + 3 * p.len());
    out.push(waiters(p.moves_up(), p.refunds_any_booking()).to_owned());
    for i in 0..p.len() {
        out.push(p.name(i).to_owned());
        let limiter = p.limiter(i);
        out.push(limiter.calendar().map_or("", |c| c.name()).to_owned());
        out.push(p.keyed_by(i).count().to_string());
        out.extend(p.keyed_by(i).map(str::to_owned));
    }
    out
}

/// The headers of a policy decision, every limit listed: `RateLimit-Policy`
/// and `RateLimit` as comma-separated items, then `Retry-After` (the
/// combined retry) when denied; joined by `\n`. `decision` holds five numbers
/// per limit, as [`policy_details`] wrote them, after five numbers for the
/// combined decision: for every limit, or for the first ones only (a
/// decision made before `add` added the others), as Python's `headers`
/// lists the limits a decision has.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn policy_headers(p: &Policy, decision: &[f64]) -> Result<String, Error> {
    if !decision.len().is_multiple_of(5) || !(5..=5 * (p.len() + 1)).contains(&decision.len()) {
        return Err(invalid_type("decision", "a decision"));
    }
    let (c, limits) = decision.split_at(5);
    let mut policies = String::new();
    let mut rate_limits = String::new();
    for (i, f) in limits.chunks_exact(5).enumerate() {
        let d = decision_in(f[0] == 1.0, [f[1], f[2], f[3], f[4]], LIMIT_DECISION)?;
        let window = p.limiter(i).window();
        let headers = Headers::new(p.name(i), window, &d);
        let sep = if i == 0 { "" } else { ", " };
        let _ = write!(policies, "{sep}{}", headers.policy());
        let _ = write!(rate_limits, "{sep}{}", headers.rate_limit());
    }
    let mut text = format!("{policies}\n{rate_limits}");
    // Only the combined decision's answer and retry count here: its other
    // counts are Infinity for a policy without limits.
    let d = Decision {
        allowed: c[0] == 1.0,
        remaining: 0,
        limit: 0,
        retry_after: millis(c[3], DECISION[2])?,
        reset_after: Nanos::ZERO,
    };
    if let Some(seconds) = Headers::new("", Nanos::ZERO, &d).retry_after() {
        let _ = write!(text, "\n{seconds}");
    }
    Ok(text)
}

/// How errors name the numbers of a decision given to `headers`.
const DECISION: [&str; 4] = [
    "decision.remaining",
    "decision.limit",
    "decision.retryAfterMs",
    "decision.resetAfterMs",
];

/// [`DECISION`] for one limit's decision within a policy's.
const LIMIT_DECISION: [&str; 4] = [
    "decision.limits[].remaining",
    "decision.limits[].limit",
    "decision.limits[].retryAfterMs",
    "decision.limits[].resetAfterMs",
];

/// A decision from JS numbers, each named in errors by `names`.
#[cfg_attr(ratekeeper_size, optimize(size))]
fn decision_in(allowed: bool, fields: Out, names: [&'static str; 4]) -> Result<Decision, Error> {
    let [remaining, limit, retry_after, reset_after] = fields;
    Ok(Decision {
        allowed,
        remaining: count(remaining, names[0])?,
        limit: count(limit, names[1])?,
        retry_after: millis(retry_after, names[2])?,
        reset_after: millis(reset_after, names[3])?,
    })
}

// ---- Portable state -------------------------------------------------------

/// `limiter.toBytes()`: the limiter's state, versioned and tied to its configuration.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn to_bytes(l: &AnyLimiter) -> Vec<u8> {
    l.to_bytes()
}

/// `limiter.restore(bytes)`: a `RangeError` with a `state_*` code when the
/// bytes are not the state of a limiter of this very configuration; then
/// nothing changes.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn restore(l: &mut AnyLimiter, bytes: &[u8]) -> Result<(), Error> {
    l.restore(bytes)
}
