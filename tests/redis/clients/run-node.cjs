'use strict';
// The Node client's side of the Redis clients' differential test: builds a
// scenario's RedisLimiter or RedisPolicy (generate.cjs) on a key prefix of
// its own, makes each operation, and records what it answered as the Python
// side (bindings-python/tests/redis/clients_runner.py) records it: decisions
// in whole µs, errors by code, TypeError or not and the argument named (each
// client's spelling mapped to one), the state left in Redis.

const path = require('node:path');

const ROOT = path.resolve(__dirname, '../../..');
const rk = require(path.join(ROOT, 'bindings-node/index.js'));
const rkRedis = require(path.join(ROOT, 'bindings-node/lib/redis.cjs'));

/** An in-process limiter of `spec`, its durations (µs) in ms of `perMs` units each (Redis: 1000; the core's ns-as-µs: 1e6). */
function limiterOf(spec, perMs = 1000) {
  // A fraction of a µs (sub_ns), for the errors: on the first duration.
  let extra = spec.sub_ns === undefined ? 0 : spec.sub_ns / 1000;
  const ms = (us) => {
    const value = (us + extra) / perMs;
    extra = 0;
    return value;
  };
  const common = spec.name === undefined ? {} : { name: spec.name };
  switch (spec.algorithm) {
    case 'gcra':
      return new rk.Gcra({ burst: spec.burst, emissionIntervalMs: ms(spec.interval), ...common });
    case 'token_bucket':
      return rk.TokenBucket.fromBandwidths(
        spec.bands.map((b) => ({
          capacity: b.capacity,
          refillTokens: b.refill_tokens,
          refillPeriodMs: ms(b.period),
          ...(b.refill === undefined ? {} : { refill: b.refill }),
          ...(b.initial_tokens === undefined ? {} : { initialTokens: b.initial_tokens }),
        })),
        common,
      );
    case 'leaky_bucket':
      return new rk.LeakyBucket({ capacity: spec.capacity, intervalMs: ms(spec.interval), ...common });
    case 'fixed_window':
    case 'sliding_window_counter':
    case 'sliding_window_log': {
      const Class = { fixed_window: rk.FixedWindow, sliding_window_counter: rk.SlidingWindowCounter, sliding_window_log: rk.SlidingWindowLog }[spec.algorithm];
      const window = spec.calendar === undefined ? { windowMs: ms(spec.window) } : { calendar: spec.calendar };
      return new Class({ limit: spec.limit, ...window, ...common });
    }
    default:
      throw new Error(`unknown algorithm ${spec.algorithm}`);
  }
}

/** A policy's limit: its limiter, or (`keyed`) a KeyedLimiter of it. */
function limitOf(l, perMs) {
  const limiter = limiterOf(l.limiter, perMs);
  return l.keyed ? new rk.KeyedLimiter(limiter) : limiter;
}

/** A duration in ms as whole µs, as both records count. */
const us = (ms) => Math.round(ms * 1000);

// Node's spellings of the arguments an error names -> the records' (Python's).
const ARGUMENTS = {
  emissionIntervalMs: 'emission_interval',
  refillPeriodMs: 'refill_period',
  refillTokens: 'refill_tokens',
  initialTokens: 'initial_tokens',
  windowMs: 'window',
  intervalMs: 'interval',
  periodMs: 'period',
  nowMs: 'now',
  maxWaitMs: 'max_wait',
  takenAtMs: 'taken_at',
  timeoutMs: 'timeout',
};

/** The argument an error names: the first one quoted in backticks, else what the message starts with. */
function argumentOf(message) {
  // An in-process Policy's configuration error: Python's says `config`.
  if (message.startsWith('policy configuration:')) return 'config';
  const quoted = /`([^`]+)`/.exec(message);
  const named = quoted ?? /^([A-Za-z_][\w.]*)(?::| must| has| is)/.exec(message);
  if (named === null) return null;
  // request.route, as Python's request['route'] is read.
  return ARGUMENTS[named[1]] ?? named[1];
}

function errorRecord(e) {
  if (e instanceof DOMException && e.name === 'TimeoutError') {
    // acquire's wait past timeoutMs, where Python raises RateLimited (README).
    return { error: 'rate_limited', retry: us(e.retryAfterMs), js: 'TimeoutError' };
  }
  if (e instanceof rk.RateLimited) return { error: 'rate_limited', retry: us(e.retryAfterMs) };
  if (e === null || typeof e !== 'object' || typeof e.code !== 'string') throw e;
  return { error: e.code, type: e instanceof TypeError, argument: argumentOf(String(e.message)), message: String(e.message) };
}

function decisionRecord(d, headers) {
  const rec = { allowed: d.allowed, remaining: d.remaining, limit: d.limit, retry: us(d.retryAfterMs), reset: us(d.resetAfterMs), from_store: d.fromStore };
  if (d.limits !== undefined) {
    rec.denied_by = d.deniedBy;
    rec.limits = d.limits.map((l) => [l.name, l.allowed, l.remaining, l.limit, us(l.retryAfterMs), us(l.resetAfterMs)]);
  }
  rec.headers = headers(d);
  return rec;
}

/**
 * The scenario's subject on `prefix`, with `clock` (µs, or null for none)
 * for the calls made without `now`: `{ store, limit }`, or `{ error }`.
 */
function openSubject(client, scenario, prefix, clock) {
  const options = { prefix, clock: () => clock.t / 1000 };
  const s = scenario.subject;
  try {
    if (scenario.kind === 'limiter') return { store: new rkRedis.RedisLimiter(client, limiterOf(s.limiter), options) };
    if (s.form === 'limiters') {
      return { store: new rkRedis.RedisPolicy(client, { limits: s.limits.map((l) => ({ name: l.name, by: l.by, limiter: limitOf(l, 1000) })) }, options) };
    }
    if (s.form === 'rates') return { store: new rkRedis.RedisPolicy(client, { limits: s.limits }, options) };
    return { store: new rkRedis.RedisPolicy(client, s.rates, { ...options, by: s.by, ...(s.algorithm === undefined ? {} : { algorithm: s.algorithm }) }) };
  } catch (e) {
    return { error: errorRecord(e) };
  }
}

/** What one operation answered (or raised). */
async function runOp(store, op, clock) {
  const headers = (d) => store.headers(d);
  const ms = (t) => (t === null ? undefined : t / 1000);
  // The operation's `now`: t µs, and ns nanoseconds.
  const nowMs = op.ns === undefined ? ms(op.t) : (op.t * 1000 + op.ns) / 1e6;
  try {
    clock.t = op.t;
    switch (op.op) {
      case 'try_acquire':
        return decisionRecord(op.clock ? await store.tryAcquire(op.target, op.cost) : await store.tryAcquire(op.target, op.cost, nowMs), headers);
      case 'peek':
        return decisionRecord(op.clock ? await store.peek(op.target, op.cost) : await store.peek(op.target, op.cost, nowMs), headers);
      case 'batch':
        return { batch: (await store.tryAcquireBatch(op.target, op.costs, nowMs)).map((d) => decisionRecord(d, headers)) };
      case 'reserve': {
        const r = await store.reserve(op.target, op.cost, ms(op.max_wait), nowMs);
        const rec = { ok: r.ok, wait: us(r.waitMs), at: us(r.atMs), cost: r.cost, from_store: r.fromStore };
        if (!r.ok) rec.decision = decisionRecord(r.decision, headers);
        // As Python's cancel() (a booking of nothing has nothing to give).
        if (op.cancel && r.ok && r.cost > 0) {
          await r.cancel();
          rec.cancelled = true;
        }
        return rec;
      }
      case 'refund':
        await store.refund(op.target, op.cost, ms(op.taken_at));
        return { refunded: true };
      case 'acquire': {
        const rec = {};
        if (op.timeout !== 0) {
          // Deterministic only where no real wait is slept: the units are
          // there now, or the wait needed is past the timeout.
          let peek;
          try {
            peek = await store.peek(op.target, op.cost, nowMs);
          } catch {
            // The same error comes from acquire.
          }
          if (peek !== undefined) {
            rec.peek = decisionRecord(peek, headers);
            if (!(peek.allowed || (op.timeout !== null && us(peek.retryAfterMs) > op.timeout))) return { ...rec, skipped: true };
          }
        }
        try {
          await store.acquire(op.target, op.cost, op.timeout === null ? undefined : { timeoutMs: op.timeout / 1000 });
        } catch (e) {
          return { ...rec, ...errorRecord(e) };
        }
        return { ...rec, acquired: true };
      }
      default:
        throw new Error(`unknown operation ${op.op}`);
    }
  } catch (e) {
    return errorRecord(e);
  }
}

/** The keys under `prefix` (named with `<prefix>` in its place), their values and expiries. */
async function dumpState(client, prefix) {
  const call = (...args) => (typeof client.call === 'function' ? client.call(...args) : client.sendCommand(args.map(String)));
  const keys = (await call('KEYS', `${prefix}*`)).map(String).sort();
  const [seconds] = await call('TIME');
  const out = {};
  for (const key of keys) {
    const type = String(await call('TYPE', key));
    let value;
    if (type === 'string') value = withoutBirth(String(await call('GET', key)), Number(seconds));
    else if (type === 'zset') {
      // Members and scores (whole numbers: instants, -2 - used).
      // (ioredis answers pairs, node-redis a flat list.)
      const flat = (await call('ZRANGE', key, 0, -1, 'WITHSCORES')).flat().map(String);
      value = [];
      for (let i = 0; i < flat.length; i += 2) value.push([withoutBirth(flat[i], Number(seconds)), Number(flat[i + 1])]);
    }
    else value = null;
    const at = Number(await call('PEXPIRETIME', key));
    if (at === -2) continue; // expired since KEYS
    out[key.split(prefix).join('<prefix>')] = { type, value, expiry: expiryOf(at, Number(seconds)) };
  }
  return out;
}

/**
 * A string key's value, or a sorted set's member, with the key's birth (the
 * server's TIME when the key was written first, PROTOCOL.md: a string's
 * last number, negative, a log's `birth:<b>`) as `<birth>`, which differs by run and
 * by side, where a scenario's instants (from 2041, or 1970) are never
 * within a day of the server's clock.
 */
function withoutBirth(text, serverSeconds) {
  return text.replace(/(^birth:|^.* -)(\d+)$/, (whole, before, digits) =>
    Math.abs(Number(digits) / 1e6 - serverSeconds) < 86400 ? `${before}<birth>` : whole,
  );
}

/**
 * An expiry as the records compare it: an absolute one (an instant of the
 * scenario's, from 2041: more than a year past the server's clock) exactly;
 * one counted from the server's clock ('relative') only as such.
 */
function expiryOf(atMs, serverSeconds) {
  if (atMs === -1) return 'none';
  return atMs > (serverSeconds + 365 * 86400) * 1000 ? `at:${atMs}` : 'relative';
}

/** Runs a whole scenario on `prefix`: the records of its construction and of each operation. */
async function runScenario(client, scenario, prefix) {
  const clock = { t: 0 };
  const opened = openSubject(client, scenario, prefix, clock);
  if (opened.error !== undefined) return { error: opened.error, ops: [] };
  const ops = [];
  for (const op of scenario.ops) {
    ops.push(op.op === 'state' ? { state: await dumpState(client, prefix) } : await runOp(opened.store, op, clock));
  }
  return { error: null, ops };
}

module.exports = { limiterOf, limitOf, openSubject, runOp, runScenario, dumpState, errorRecord, decisionRecord };
