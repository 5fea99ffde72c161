//! Policies: construction from rates or limiters, decisions with each
//! limit's details, refunds and headers.

use std::fmt::Write as _;

use ratekeeper::{Algorithm, AnyLimiter, Decision, Error, Headers, Limiter, Nanos, Policy};

use super::{
    booked, count, decision_in, decision_out, invalid_type, keyed, millis, policy_decision_out,
    request, reserve_args, taken_at, wait_in, waiters, Answer, Failure, Now, Part, DECISION,
    LIMIT_DECISION, PEEK, RESERVE, TRY_ACQUIRE,
};

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
/// per limit, as [`policy_op`] wrote them, after five numbers for the
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
        retry_after: wait_in(c[3], DECISION[2])?,
        reset_after: Nanos::ZERO,
    };
    if let Some(seconds) = Headers::new("", Nanos::ZERO, &d).retry_after() {
        let _ = write!(text, "\n{seconds}");
    }
    Ok(text)
}
