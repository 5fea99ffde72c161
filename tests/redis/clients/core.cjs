'use strict';
// What the in-process core answers an interleaved scenario's operations, as
// the Redis clients' records read (run-node.cjs): the product's promise is
// that Python and Node processes sharing keys in Redis decide as one
// in-process limiter would.
//
// Units: the core counts nanoseconds, the wire microseconds, and the script
// computes in its units exactly what the core computes in its own; so the
// core's limiter is built with each µs of the scenario as a ns (durations of
// `us / 1e6` ms, called at `t / 1e6` ms), and its answers read back in
// those units (as tests/redis/differential.test.cjs does).

const { isDeepStrictEqual } = require('node:util');
const path = require('node:path');

const { limiterOf, limitOf, errorRecord } = require('./run-node.cjs');

const rk = require(path.join(__dirname, '../../../bindings-node/index.js'));

/** ms of the core -> the scenario's units. */
const units = (ms) => Math.round(ms * 1e6);
const coreMs = (us) => us / 1e6;
const MAX_SPAN = 2 ** 50;

/** The core of an interleaved scenario: a Policy (a limiter's, keyed by `key`). */
function coreOf(scenario) {
  const limits =
    scenario.kind === 'limiter'
      ? [{ name: 'default', by: ['key'], limiter: limiterOf(scenario.subject.limiter, 1e6) }]
      : scenario.subject.limits.map((l) => ({ name: l.name, by: l.by, limiter: limitOf(l, 1e6) }));
  return { policy: new rk.Policy({ limits }), kind: scenario.kind, limit: Math.min(...limits.map((l) => l.limiter.limit)) };
}

function decision(core, d) {
  const rec = { allowed: d.allowed, remaining: d.remaining, limit: d.limit, retry: units(d.retryAfterMs), reset: units(d.resetAfterMs) };
  if (core.kind === 'policy') {
    rec.denied_by = d.deniedBy;
    rec.limits = d.limits.map((l) => [l.name, l.allowed, l.remaining, l.limit, units(l.retryAfterMs), units(l.resetAfterMs)]);
  }
  return rec;
}

/** The in-process check of a request's fields, made before the cost's. */
function checkRequest(core, request) {
  for (const { name, by } of core.policy.limits) {
    for (const field of by) {
      if (!Object.hasOwn(request, field)) {
        const error = new RangeError(`request: lacks the field ${JSON.stringify(field)} that limit ${JSON.stringify(name)} is keyed by`);
        error.code = 'invalid_value';
        throw error;
      }
    }
  }
}

/** The in-process check a Redis client makes of a cost before anything (the policy's smallest limit). */
function checkCost(core, cost) {
  if (cost > core.limit) {
    const error = new RangeError(`cost: ${cost} is more than the limit ${core.limit}`);
    error.code = 'cost_exceeds_limit';
    throw error;
  }
}

/**
 * What the core answers `op`, as a record (`stop`: the trace ends after it).
 * The core's state moves as the Redis one should.
 */
function expectedOf(core, scenario, op) {
  const p = core.policy;
  const request = scenario.kind === 'limiter' ? { key: op.target } : op.target;
  const now = coreMs(op.t);
  try {
    // The request first, then the cost, as in-process calls check them.
    checkRequest(core, request);
    switch (op.op) {
      case 'try_acquire':
        checkCost(core, op.cost);
        return decision(core, p.tryAcquire(request, op.cost, now));
      case 'peek':
        checkCost(core, op.cost);
        return decision(core, p.peek(request, op.cost, now));
      case 'batch':
        checkRequest(core, request);
        for (const cost of op.costs) checkCost(core, cost);
        return { batch: op.costs.map((cost) => decision(core, p.tryAcquire(request, cost, now))) };
      case 'reserve': {
        checkCost(core, op.cost);
        const maxWait = op.max_wait ?? MAX_SPAN;
        const r = p.reserve(request, op.cost, coreMs(maxWait), now);
        const wait = units(r.waitMs);
        const rec = { ok: r.ok, wait, at: op.t + wait, cost: op.cost };
        if (!r.ok) rec.decision = decision(core, r.decision);
        if (op.cancel && r.ok && op.cost > 0) {
          // As the clients give a booking back: a refund at its slot.
          p.refund(request, op.cost, coreMs(op.t + wait));
          rec.cancelled = true;
        }
        return { ...rec, stop: !r.ok && wait <= maxWait };
      }
      case 'refund':
        p.refund(request, op.cost, coreMs(op.taken_at ?? op.t));
        return { refunded: true };
      case 'acquire': {
        checkCost(core, op.cost);
        const rec = {};
        if (op.timeout !== 0) {
          const peek = p.peek(request, op.cost, now);
          rec.peek = decision(core, peek);
          if (!(peek.allowed || (op.timeout !== null && units(peek.retryAfterMs) > op.timeout))) return { ...rec, skipped: true };
        }
        // acquire books once, within the timeout (0 where the units are there now).
        const r = p.reserve(request, op.cost, coreMs(op.timeout ?? 0), now);
        if (r.ok) return { ...rec, acquired: true };
        return { ...rec, error: 'rate_limited', retry: units(r.waitMs), stop: units(r.waitMs) <= (op.timeout ?? 0) };
      }
      default:
        throw new Error(`unknown operation ${op.op}`);
    }
  } catch (e) {
    const { error, type, argument } = errorRecord(e);
    return { error, type, argument };
  }
}

/** Only the fields the core answers: a Redis decision adds `from_store` (which must be true) and the headers. */
function picked(expected, got) {
  if (Array.isArray(expected)) return Array.isArray(got) ? expected.map((e, i) => picked(e, got[i])) : got;
  if (expected === null || typeof expected !== 'object' || got === null || typeof got !== 'object') return got;
  const out = {};
  for (const k of Object.keys(got)) {
    if (k in expected) out[k] = picked(expected[k], got[k]);
    else if (k === 'from_store' ? got[k] !== true : !['headers', 'message', 'js'].includes(k)) out[k] = got[k];
  }
  return out;
}

function gcd(a, b) {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

/**
 * Whether Redis may refuse a booking `wait` µs away that the core makes:
 * where a token bucket's debt would take `(owed + capacity) * period / gcd`
 * past 2^52 (PROTOCOL.md; the core books it in 128 bits). Owed is about
 * `refill_tokens * wait / period`: within a factor of 2 of the bound.
 */
function refusedByTheScript(scenario, wait) {
  const specs = scenario.kind === 'limiter' ? [scenario.subject.limiter] : scenario.subject.limits.map((l) => l.limiter);
  return specs.some((spec) =>
    (spec.bands ?? []).some((b) => {
      const g = gcd(b.refill_tokens, b.period);
      return ((b.refill_tokens / g) * wait + (b.capacity + 1) * (b.period / g)) * 2 > 2 ** 52;
    }),
  );
}

/**
 * Whether `got` is the script's documented refusal of a booking the core
 * made (above): the trace ends there, as the states part.
 */
function documentedRefusal(scenario, expected, got) {
  const { ok, wait } = expected;
  return ok === true && got.ok === false && got.wait === wait && refusedByTheScript(scenario, wait);
}

function compareWithCore(expected, got) {
  const { stop, ...want } = expected;
  const seen = picked(want, got);
  return isDeepStrictEqual(seen, want) ? [] : [`expected ${JSON.stringify(want)}, got ${JSON.stringify(seen)}`];
}

module.exports = { coreOf, expectedOf, compareWithCore, documentedRefusal };
