'use strict';
// Random scenarios for the cross-binding differential test, from fixed seeds:
// a limiter (every algorithm, calendar windows included), a KeyedLimiter or a
// Policy, then a sequence of operations, each with an explicit `now`. Times go
// forward, stand still, jump far and sometimes go back; costs and counts
// include 0, the limit, past it and values near 2^53 (the most a JS number
// carries). Every instant and duration is a whole number of nanoseconds that
// JS milliseconds carry exactly (see units.cjs), and Python takes exactly as
// an int, a float or a Fraction of seconds, so that any difference between
// bindings is theirs, not a rounding of the harness.
//
// A scenario (JSON; nanoseconds as decimal strings, counts as numbers):
//   { id, kind: 'limiter' | 'keyed' | 'policy', subject, alternatives, ops }
// subject: a limiter spec { algorithm, ... }, { keyed: spec, max_keys?, eviction? }
// or { limits: [{ name, by, limiter: spec, max_keys?, eviction? }], added } (added:
// JS builds it empty and adds each limit, else from the configuration);
// alternatives: specs `reconfigure` switches to. Operations: see run-js.cjs.
//
//   node tests/differential/generate.cjs [seed] [count]   prints the scenarios

const { random } = require('../random.cjs');
const { msOf, scaled, U64_MAX, MS, SEC } = require('./units.cjs');

const MAX_SAFE = 2 ** 53 - 1;
const DAY = 86_400n * SEC;
// 2026-01-01T00:00:00Z: calendar scenarios mostly start around it.
const EPOCH_2026 = 1_767_225_600n * SEC;

/** Seeded random numbers (../random.cjs), and the draws the scenarios take. */
function rng(seed) {
  const r = random(seed);
  const { next } = r;
  return {
    ...r,
    big: (lo, hi) => {
      // Uniform enough over [lo, hi] (BigInts): 53 random bits at a time.
      const span = hi - lo + 1n;
      let x = 0n;
      for (let i = 0; i < 3; i++) x = (x << 53n) | BigInt(Math.floor(next() * 2 ** 53));
      return lo + (x % span);
    },
    chance: (p) => next() < p,
    /** One of `choices` ([weight, make]), by weight. */
    weighted: (choices) => {
      const total = choices.reduce((sum, [w]) => sum + w, 0);
      let x = next() * total;
      for (const [w, make] of choices) {
        if ((x -= w) < 0) return make();
      }
      return choices[choices.length - 1][1]();
    },
  };
}

/** An instant at or just below `ns` that JS milliseconds carry exactly (see units.cjs). */
function exact(ns) {
  if (ns < 0n) ns = 0n;
  if (ns > U64_MAX) ns = U64_MAX;
  // Beyond 2^53 ns a millisecond float lands on one ns in many: the one it lands on.
  for (let ms = Number(ns) / 1e6; ; ms = nextDown(ms)) {
    const landed = scaled(ms, MS);
    if (landed !== null && landed <= ns && msOf(landed) !== null) return landed;
  }
}

function nextDown(x) {
  if (x <= 0) return 0;
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  view.setBigUint64(0, view.getBigUint64(0) - 1n);
  return view.getFloat64(0);
}

/** A count: small mostly, sometimes 0, large or near 2^53. */
function count(r) {
  return r.weighted([
    [50, () => r.int(1, 5)],
    [20, () => r.int(6, 1000)],
    [8, () => r.int(1000, 2 ** 31)],
    [6, () => MAX_SAFE - r.int(0, 3)],
    [4, () => r.int(2 ** 40, MAX_SAFE)],
    [2, () => 0],
  ]);
}

/** A duration in ns (a string): whole ms mostly, then ns, µs, s, days, years, extremes, 0. */
function duration(r) {
  const ns = r.weighted([
    [30, () => BigInt(r.int(1, 10_000)) * MS],
    [12, () => BigInt(r.int(1, 3_600)) * SEC],
    [10, () => BigInt(r.int(1, 1_000))],
    [10, () => BigInt(r.int(1, 1_000_000)) * 1_000n],
    [5, () => BigInt(r.int(1, 400)) * DAY],
    [3, () => BigInt(r.int(1, 300)) * 365n * DAY],
    [2, () => U64_MAX - r.big(0n, 1n << 40n)],
    [2, () => 1n << BigInt(r.int(50, 63))],
    [1, () => 0n],
  ]);
  return String(exact(ns));
}

/** A duration given as whole ms or s, as rate-like configurations are. */
function roundDuration(r) {
  return String(
    r.weighted([
      [3, () => BigInt(r.pick([1, 10, 100, 250, 1000, 60_000, 3_600_000])) * MS],
      [1, () => BigInt(r.int(1, 100)) * SEC],
    ]),
  );
}

const ALGORITHMS = [
  'token_bucket',
  'gcra',
  'leaky_bucket',
  'sliding_window_log',
  'sliding_window_counter',
  'fixed_window',
];

/** A limiter spec of `algorithm`, with `shape` (a number of bandwidths, calendar or not) when reconfiguring. */
function limiterSpec(r, algorithm, shape) {
  // Mostly sane configurations, so that scenarios get past construction;
  // sometimes anything, for the errors.
  const wild = r.chance(0.12);
  const n = () => (wild ? count(r) : r.weighted([[4, () => r.int(1, 10)], [1, () => r.int(11, 1000)], [1, () => count(r)]]));
  const d = () => (wild ? duration(r) : r.chance(0.7) ? roundDuration(r) : duration(r));
  switch (algorithm) {
    case 'token_bucket': {
      const bands = shape?.bands ?? r.weighted([[6, () => 1], [2, () => 2], [1, () => 3], [1, () => 4]]);
      const bandwidths = [];
      for (let i = 0; i < bands; i++) {
        const b = { capacity: n(), refill_tokens: n(), refill_period: d() };
        if (r.chance(0.3)) b.initial_tokens = r.chance(0.5) ? 0 : r.int(0, Math.min(b.capacity, 20));
        if (r.chance(0.35)) b.refill = r.chance(0.7) ? 'interval' : 'greedy';
        bandwidths.push(b);
      }
      // One bandwidth: the constructor, or from_bandwidths.
      const form = bands === 1 && r.chance(0.7) ? 'new' : 'bandwidths';
      return { algorithm, form, bandwidths };
    }
    case 'gcra':
      return r.chance(0.7)
        ? { algorithm, form: 'new', burst: n(), emission_interval: d() }
        : { algorithm, form: 'per_period', burst: n(), tokens: n(), period: d() };
    case 'leaky_bucket':
      return { algorithm, capacity: n(), interval: d() };
    case 'sliding_window_log':
      // At most 2^20 (room for 2 * limit entries is allocated at once): keep most small.
      return { algorithm, limit: wild ? count(r) : r.int(1, 12), window: d() };
    case 'sliding_window_counter':
    case 'fixed_window': {
      const calendar = shape?.calendar ?? r.chance(0.25);
      return calendar
        ? { algorithm, limit: n(), calendar: r.pick(['day', 'week', 'month']) }
        : { algorithm, limit: n(), window: d() };
    }
    default:
      throw new Error(`unknown algorithm ${algorithm}`);
  }
}

/** The limits a spec's costs are measured against (each bandwidth's capacity, or the limit). */
function limitsOf(spec) {
  if (spec.keyed) return limitsOf(spec.keyed);
  if (spec.limits) return spec.limits.flatMap((l) => limitsOf(l.limiter));
  if (spec.bandwidths) return spec.bandwidths.map((b) => b.capacity);
  return [spec.burst ?? spec.capacity ?? spec.limit];
}

function cost(r, limits) {
  const limit = r.pick(limits);
  return r.weighted([
    [10, () => 0],
    [30, () => 1],
    [20, () => r.int(1, Math.max(1, Math.min(limit, 10)))],
    [8, () => Math.min(limit, MAX_SAFE)],
    [6, () => Math.min(limit + 1, MAX_SAFE)],
    [4, () => Math.max(0, Math.min(limit - 1, MAX_SAFE))],
    [4, () => MAX_SAFE],
    [3, () => r.int(0, MAX_SAFE)],
  ]);
}

/** The durations of a spec, for steps of time that matter to it. */
function periodsOf(spec) {
  if (spec.keyed) return periodsOf(spec.keyed);
  if (spec.limits) return spec.limits.flatMap((l) => periodsOf(l.limiter));
  if (spec.bandwidths) return spec.bandwidths.map((b) => BigInt(b.refill_period));
  const p = spec.emission_interval ?? spec.period ?? spec.interval ?? spec.window;
  if (p !== undefined) return [BigInt(p)];
  return [{ day: DAY, week: 7n * DAY, month: 30n * DAY }[spec.calendar]];
}

/** The next `now` after `t`. */
function step(r, t, periods) {
  const period = r.pick(periods) || 1n;
  const next = r.weighted([
    [18, () => t],
    [10, () => t + BigInt(r.int(1, 1000))],
    [20, () => t + (period * BigInt(r.int(1, 999))) / 1000n],
    [10, () => t + period * BigInt(r.int(1, 3))],
    [6, () => t + period - BigInt(r.int(0, 2))],
    [8, () => t + BigInt(r.int(1, 5000)) * MS],
    [4, () => t + BigInt(r.int(1, 3650)) * DAY],
    [6, () => t - BigInt(r.int(1, 1000)) * (r.chance(0.5) ? 1n : MS)],
    [2, () => t - BigInt(r.int(1, 30)) * DAY],
    [1, () => r.big(0n, U64_MAX)],
  ]);
  return exact(next);
}

function startTime(r, spec) {
  const calendar = JSON.stringify(spec).includes('"calendar"');
  return exact(
    r.weighted([
      [calendar ? 1 : 30, () => 0n],
      [calendar ? 1 : 20, () => BigInt(r.int(1, 1_000_000)) * MS],
      [calendar ? 20 : 5, () => EPOCH_2026 + BigInt(r.int(-40, 400)) * DAY + BigInt(r.int(0, 86_400_000)) * MS],
      [calendar ? 5 : 2, () => EPOCH_2026 + BigInt(r.int(0, 7)) * DAY - BigInt(r.int(0, 2))],
      [2, () => r.big(1n << 60n, U64_MAX)],
    ]),
  );
}

const KEYS = ['a', 'b', 'c', 'user:42', '', '42', 42, 7];
const FIELDS = ['user', 'route', 'method'];
const VALUES = ['alice', 'bob', '/a', '/b', 'GET', '', 42];

function subjectOf(r, kind, algorithm) {
  if (kind === 'limiter') return limiterSpec(r, algorithm);
  if (kind === 'keyed') {
    const s = { keyed: limiterSpec(r, algorithm) };
    if (r.chance(0.3)) {
      s.max_keys = r.int(1, 4);
      if (r.chance(0.5)) s.eviction = r.pick(['refuse', 'nearest_fresh']);
    } else if (r.chance(0.03)) s.eviction = 'refuse'; // without max_keys: an error
    return s;
  }
  const limits = [];
  const count = r.int(1, 4);
  for (let i = 0; i < count; i++) {
    limits.push(limitSpec(r, (taken) => (taken && i > 0 ? limits[0].name : `limit-${i}`), i === 0 ? algorithm : r.pick(ALGORITHMS)));
  }
  // JS builds half the policies as Python builds each: empty, then `add`.
  return { limits, added: r.chance(0.5) };
}

/** A policy's limit `{ name, by, limiter, max_keys?, eviction? }`: `name(taken)` names it, taken: a name in use, sometimes. */
function limitSpec(r, name, algorithm) {
  const by = FIELDS.filter(() => r.chance(0.35));
  const limit = { name: name(r.chance(0.05)), by, limiter: limiterSpec(r, algorithm) };
  if (by.length > 0 && r.chance(0.2)) {
    limit.max_keys = r.int(1, 3);
    if (r.chance(0.5)) limit.eviction = r.pick(['refuse', 'nearest_fresh']);
  }
  return limit;
}

function shapeOf(spec) {
  return { bands: spec.bandwidths?.length, calendar: spec.calendar !== undefined };
}

function scenario(seed, index) {
  const r = rng(seed * 1_000_003 + index);
  const kind = r.weighted([[55, () => 'limiter'], [25, () => 'keyed'], [20, () => 'policy']]);
  const algorithm = ALGORITHMS[index % ALGORITHMS.length];
  const subject = subjectOf(r, kind, algorithm);
  const base = kind === 'limiter' ? subject : null;
  const alternatives = [];
  if (base !== null) {
    // Another configuration of the same algorithm; mostly of the same shape,
    // sometimes not (another number of bandwidths, a calendar), for its error.
    for (let i = r.int(1, 3); i > 0; i--) alternatives.push(limiterSpec(r, algorithm, r.chance(0.85) ? shapeOf(base) : undefined));
  }
  const limits = limitsOf(subject);
  const periods = periodsOf(subject);
  let t = startTime(r, subject);
  const nows = [t];
  let reservations = 0;
  let decisions = 0;
  let added = 0;
  const ops = [];
  const opCount = r.int(5, 45);
  const target = () => {
    if (kind === 'keyed') return { key: r.pick(KEYS) };
    if (kind === 'policy') {
      const request = {};
      for (const f of FIELDS) if (!r.chance(0.04)) request[f] = r.pick(VALUES);
      return { request };
    }
    return {};
  };
  for (let i = 0; i < opCount; i++) {
    if (r.chance(0.75)) t = step(r, t, periods);
    nows.push(t);
    const now = String(t);
    const op = r.weighted([
      [30, () => ({ op: 'try_acquire', now, cost: cost(r, limits), ...target() })],
      [10, () => ({ op: 'peek', now, cost: cost(r, limits), ...target() })],
      [
        14,
        () => ({
          op: 'reserve',
          now,
          cost: cost(r, limits),
          max_wait: r.weighted([
            [3, () => 'inf'],
            [3, () => duration(r)],
            [2, () => String(r.pick(periods) || 0n)],
            [1, () => '0'],
          ]),
          ...target(),
        }),
      ],
      [reservations > 0 ? 6 : 0, () => ({ op: 'cancel', reservation: r.int(0, reservations - 1) })],
      [
        8,
        () => ({
          op: 'refund',
          cost: r.chance(0.8) ? r.int(0, Math.min(3, Math.max(...limits))) : cost(r, limits),
          taken_at: String(r.chance(0.3) ? t : r.pick(nows)),
          ...target(),
        }),
      ],
      [decisions > 0 ? 6 : 0, () => ({ op: 'headers', decision: r.int(0, decisions - 1) })],
      [kind === 'keyed' ? 5 : 0, () => ({ op: 'batch', now, costs: Array.from({ length: r.int(0, 5) }, () => cost(r, limits)), ...target() })],
      [kind === 'limiter' ? 0 : 2, () => ({ op: 'reclaim', now })],
      [kind === 'policy' ? 3 : 0, () => ({ op: 'add', limit: limitSpec(r, (taken) => (taken ? 'limit-0' : `added-${added}`), r.pick(ALGORITHMS)) })],
      [alternatives.length > 0 ? 5 : 0, () => ({ op: 'reconfigure', now, to: r.int(0, alternatives.length - 1) })],
      [kind === 'limiter' ? 6 : 0, () => ({ op: 'roundtrip', how: r.pick(['from_bytes', 'restore']) })],
      [kind === 'limiter' ? 3 : 0, () => ({ op: 'restore_broken', how: r.pick(['truncate', 'flip', 'extend', 'other']), at: r.int(0, 40) })],
    ]);
    if (op.op === 'reserve') reservations++;
    if (op.op === 'add') added++;
    if (op.op === 'try_acquire' || op.op === 'peek') decisions++;
    ops.push(op);
  }
  return { id: `${seed}/${index}`, kind, subject, alternatives, ops };
}

/** `count` scenarios from `seed`. */
function generate(seed, count) {
  return Array.from({ length: count }, (_, i) => scenario(seed, i));
}

module.exports = { generate };

if (require.main === module) {
  const seed = Number(process.argv[2] ?? 1);
  const count = Number(process.argv[3] ?? 100);
  process.stdout.write(JSON.stringify(generate(seed, count)));
}
