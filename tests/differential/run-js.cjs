'use strict';
// Runs the differential scenarios (generate.cjs) through one JS build (the
// napi addon or the wasm build: the same API), recording every answer as it
// came: decisions and reservations with their float milliseconds, errors as
// their code, the argument their message names (backticked, first) and
// whether they are a TypeError, state as hex. bindings-python/tests/
// differential.py records the same operations in Python; compare.cjs diffs.
//
// Operations (each with an explicit `now`, ns as a decimal string):
//   try_acquire / peek {now, cost}          a decision, and its headers
//   reserve {now, cost, max_wait ('inf')}   a reservation; booked ones are numbered for cancel
//   cancel {reservation}                    reservation.cancel()
//   refund {cost, taken_at}                 refund(cost, takenAt)
//   headers {decision}                      headers() of the decision-th decision, again
//   batch {now, costs}                      a keyed store's tryAcquireBatch
//   reclaim {now}                           a keyed store's or policy's reclaim
//   add {limit}                             a policy's add(name, limiter, { by }), then its members
//   reconfigure {now, to}                   reconfigure(a limiter of alternatives[to])
//   roundtrip {how}                         toBytes(), then fromBytes or restore into a fresh limiter, which replaces it
//   restore_broken {how, at}                restore bytes cut short, changed, extended or of another configuration
// keyed ops carry `key`, policy ops `request`. After every operation a
// limiter's state (toBytes) and a keyed store's size are recorded; a
// policy's members (limits, names, size, keyedBy) once built and after add.

const { msOf } = require('./units.cjs');

/** Milliseconds for a scenario's ns, which the generator made exact. */
function ms(ns) {
  const value = msOf(BigInt(ns));
  if (value === null) throw new Error(`harness: ${ns} ns has no exact value in ms`);
  return value;
}

function bandwidth(b) {
  const o = { capacity: b.capacity, refillTokens: b.refill_tokens, refillPeriodMs: ms(b.refill_period) };
  if (b.initial_tokens !== undefined) o.initialTokens = b.initial_tokens;
  if (b.refill !== undefined) o.refill = b.refill;
  return o;
}

/** [Class, options] for the constructor of a spec, or null for a factory (from_bandwidths, per_period). */
function constructed(api, s) {
  switch (s.algorithm) {
    case 'token_bucket':
      return s.form === 'new' ? [api.TokenBucket, bandwidth(s.bandwidths[0])] : null;
    case 'gcra':
      return s.form === 'new' ? [api.Gcra, { burst: s.burst, emissionIntervalMs: ms(s.emission_interval) }] : null;
    case 'leaky_bucket':
      return [api.LeakyBucket, { capacity: s.capacity, intervalMs: ms(s.interval) }];
    case 'sliding_window_log':
      return [api.SlidingWindowLog, { limit: s.limit, windowMs: ms(s.window) }];
    case 'sliding_window_counter':
    case 'fixed_window': {
      const Class = s.algorithm === 'fixed_window' ? api.FixedWindow : api.SlidingWindowCounter;
      return [Class, s.calendar !== undefined ? { limit: s.limit, calendar: s.calendar } : { limit: s.limit, windowMs: ms(s.window) }];
    }
    default:
      throw new Error(`harness: unknown algorithm ${s.algorithm}`);
  }
}

function limiter(api, s) {
  const c = constructed(api, s);
  if (c !== null) return new c[0](c[1]);
  if (s.algorithm === 'token_bucket') return api.TokenBucket.fromBandwidths(s.bandwidths.map(bandwidth));
  return api.Gcra.perPeriod({ burst: s.burst, tokens: s.tokens, periodMs: ms(s.period) });
}

/** A limiter of spec `s` holding `bytes`: fromBytes where a constructor builds it, else built and restored. */
function fromBytes(api, s, bytes, how) {
  const c = constructed(api, s);
  if (c !== null && how === 'from_bytes') return c[0].fromBytes(bytes, c[1]);
  if (how === 'from_bytes' && s.algorithm === 'token_bucket') return api.TokenBucket.fromBytes(bytes, s.bandwidths.map(bandwidth));
  const fresh = limiter(api, s);
  fresh.restore(bytes);
  return fresh;
}

function subject(api, scenario) {
  const s = scenario.subject;
  if (scenario.kind === 'limiter') return limiter(api, s);
  if (scenario.kind === 'keyed') {
    const options = {};
    if (s.max_keys !== undefined) options.maxKeys = s.max_keys;
    if (s.eviction !== undefined) options.eviction = s.eviction;
    return new api.KeyedLimiter(limiter(api, s.keyed), options);
  }
  if (s.added) {
    // Every limiter built before the first is added, as Python does.
    const limiters = s.limits.map((l) => limiter(api, l.limiter));
    const policy = new api.Policy();
    s.limits.forEach((l, i) => add(api, policy, l, limiters[i]));
    return policy;
  }
  return new api.Policy({
    limits: s.limits.map((l) => {
      const limit = { name: l.name, by: l.by, limiter: limiter(api, l.limiter) };
      if (l.max_keys !== undefined) limit.maxKeys = l.max_keys;
      if (l.eviction !== undefined) limit.eviction = l.eviction;
      return limit;
    }),
  });
}

/** `policy.add` of the limit spec `l`, of the limiter `built` (a KeyedLimiter around it for a bound). */
function add(api, policy, l, built) {
  let given = built;
  if (l.max_keys !== undefined || l.eviction !== undefined) {
    const options = {};
    if (l.max_keys !== undefined) options.maxKeys = l.max_keys;
    if (l.eviction !== undefined) options.eviction = l.eviction;
    given = new api.KeyedLimiter(built, options);
  }
  policy.add(l.name, given, { by: l.by });
}

/** What a policy says of its limits. */
function members(policy) {
  return { limits: policy.limits, names: policy.names, size: policy.size, keyedBy: policy.names.map((name) => policy.keyedBy(name)) };
}

function error(e) {
  if (e === null || typeof e !== 'object' || typeof e.code !== 'string') throw e;
  const named = /`([^`]*)`/.exec(e.message);
  return { error: e.code, type: e instanceof TypeError, argument: named === null ? null : named[1], message: e.message };
}

const hex = (bytes) => Buffer.from(bytes).toString('hex');

/** Runs one scenario through `api`: its records, one per operation (and one for building). */
function runScenario(api, scenario) {
  const records = [];
  let target;
  try {
    target = subject(api, scenario);
    records.push(scenario.kind === 'policy' ? { op: 'build', members: members(target) } : { op: 'build' });
  } catch (e) {
    records.push({ op: 'build', ...error(e) });
    return records;
  }
  const kind = scenario.kind;
  const args = (op) => (kind === 'keyed' ? [op.key] : kind === 'policy' ? [op.request] : []);
  const reservations = [];
  const decisions = [];
  for (const op of scenario.ops) {
    let record;
    try {
      record = perform(api, scenario, target, op, args(op), reservations, decisions, (t) => (target = t));
    } catch (e) {
      record = error(e);
      if (op.op === 'reserve') reservations.push(null);
    }
    record = { op: op.op, ...record };
    if (op.op === 'add') record.members = members(target);
    if (kind === 'limiter') record.state = hex(target.toBytes());
    if (kind === 'keyed') record.size = target.size;
    records.push(record);
  }
  return records;
}

function perform(api, scenario, target, op, key, reservations, decisions, replace) {
  switch (op.op) {
    case 'try_acquire':
    case 'peek': {
      const method = op.op === 'peek' ? 'peek' : 'tryAcquire';
      const d = target[method](...key, op.cost, ms(op.now));
      decisions.push(d);
      return { decision: d, headers: target.headers(d) };
    }
    case 'reserve': {
      const maxWait = op.max_wait === 'inf' ? Infinity : ms(op.max_wait);
      const r = target.reserve(...key, op.cost, maxWait, ms(op.now));
      reservations.push(r.ok ? r : null);
      return { reservation: { ok: r.ok, waitMs: r.waitMs, atMs: r.atMs, cost: r.cost, decision: r.decision } };
    }
    case 'cancel': {
      const r = reservations[op.reservation];
      if (r) r.cancel();
      return {};
    }
    case 'refund':
      target.refund(...key, op.cost, ms(op.taken_at));
      return {};
    case 'headers': {
      const d = decisions[op.decision];
      return d === undefined ? {} : { headers: target.headers(d) };
    }
    case 'batch':
      return { decisions: target.tryAcquireBatch(...key, op.costs, ms(op.now)) };
    case 'reclaim':
      target.reclaim(ms(op.now));
      return {};
    case 'add':
      add(api, target, op.limit, limiter(api, op.limit.limiter));
      return {};
    case 'reconfigure':
      target.reconfigure(limiter(api, scenario.alternatives[op.to]), ms(op.now));
      // The configuration `roundtrip` rebuilds from is the new one.
      scenario.current = scenario.alternatives[op.to];
      return {};
    case 'roundtrip': {
      const bytes = target.toBytes();
      replace(fromBytes(api, scenario.current ?? scenario.subject, bytes, op.how));
      return {};
    }
    case 'restore_broken': {
      const bytes = target.toBytes();
      let broken;
      if (op.how === 'truncate') broken = bytes.slice(0, op.at % bytes.length);
      else if (op.how === 'flip') {
        broken = bytes.slice();
        broken[op.at % bytes.length] ^= 1 << op.at % 8;
      } else if (op.how === 'extend') broken = Uint8Array.from([...bytes, op.at]);
      else broken = limiter(api, scenario.alternatives[0] ?? scenario.subject).toBytes();
      target.restore(broken);
      return {};
    }
    default:
      throw new Error(`harness: unknown op ${op.op}`);
  }
}

/** Every scenario's records: [[record, ...], ...]. */
function run(api, scenarios) {
  // `current` (the configuration after reconfigure) is the runner's own: work on copies.
  return scenarios.map((s) => runScenario(api, { ...s, current: undefined }));
}

module.exports = { run };
