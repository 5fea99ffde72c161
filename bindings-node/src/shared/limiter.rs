//! The operations on one limiter with JS numbers, its header values, its
//! configuration for the getters, and its portable state.

use std::fmt::Write as _;

use ratekeeper::{AnyLimiter, Bandwidth, Error, Headers, Keyed, Limiter, Nanos, Portable, Refill};

use super::{
    booked, count, decision_in, decision_out, max_wait, millis, ms, taken_at, Answer, Now, Out,
    DECISION,
};

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
pub(super) fn reserve_args(
    cost: f64,
    max_wait_ms: f64,
    now: Now,
) -> Result<(u64, Nanos, Nanos), Error> {
    Ok((count(cost, "cost")?, max_wait(max_wait_ms)?, now.nanos()?))
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

/// `l`'s configuration, never called, without a log's ring: what
/// `keyedNew`, `policyAdd` and `reconfigure` take of a limiter handle (a
/// keyed store keeps the configuration alone, and a reconfigured log makes
/// its ring anew). A clone copied the ring for them to drop unread: 32 MiB
/// at a log's largest limit, which grew the wasm build's memory (never
/// given back) to twice the limiter's own size.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn configuration(l: &AnyLimiter) -> AnyLimiter {
    l.new_state()
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
