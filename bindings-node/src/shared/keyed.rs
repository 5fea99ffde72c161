//! Keyed limiters: construction, decisions per key, batches.

use ratekeeper::{AnyKeyed, AnyLimiter, Error, Eviction, Nanos};

use super::{
    booked, count, decision_out, millis, reserve_args, taken_at, Answer, Now, PEEK, RESERVE,
    TRY_ACQUIRE,
};

/// A key from JS: a string is its UTF-8 bytes; a number arrives as its decimal
/// string (the JS layer converts it), so `42` and `"42"` are the same key.
pub type Key<'a> = &'a [u8];

/// `new KeyedLimiter(limiter, { maxKeys?, eviction? })`, or a policy's limit
/// (see [`super::policy_add`]): every key starts as a copy of `prototype`'s
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

/// `keyedPrototype`: the configuration of `s`'s keys, as a limiter.
/// `whole` for one that decides (`keyed.limiter`): a log's ring then
/// allocated whole, as its constructor allocates it, so that no decision
/// allocates (the wasm build's decisions on one limiter run unguarded by
/// traps.js: a ring grown by a decision that ran out of memory trapped
/// there). Not for the configuration a keyed limiter keeps for its headers
/// and getters, which never decides: a log's ring is then left out.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn keyed_prototype(s: &AnyKeyed, whole: bool) -> AnyLimiter {
    let prototype = s.prototype();
    if whole {
        prototype.fresh()
    } else {
        prototype
    }
}

/// `keyed.peek` ([`PEEK`]), `keyed.tryAcquire` ([`TRY_ACQUIRE`]) or
/// `keyed.reserve` ([`RESERVE`], answered as [`super::reserve`]; the only one to
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
