'use strict';
// Seeded scenarios for the differential test of the two Redis clients
// (README.md beside this file): a RedisLimiter or a RedisPolicy, then
// operations, each at an explicit time. Everything is in the wire's units:
// durations and instants are whole microseconds (JSON numbers, exact), and
// each instant is one that JS milliseconds carry exactly (`Math.round((t /
// 1000) * 1000) === t`), so that both clients send the same `now`.
//
// A scenario: { id, kind: 'limiter' | 'policy', subject, ops, interleaved, monotone }
//   limiter subject: { limiter: spec }              (spec.name: the limiter's own name)
//   policy subject:  { form: 'limiters', limits: [{ name, by, limiter: spec }] }
//                  | { form: 'rates', limits: [{ name, rate, algorithm?, burst?, by }] }
//                  | { form: 'text', rates, algorithm?, by }
//   spec: { algorithm: 'gcra', burst, interval } | { algorithm: 'token_bucket', bands: [{ capacity, refill_tokens, period }] }
//       | { algorithm: 'fixed_window' | 'sliding_window_counter' | 'sliding_window_log', limit, window }
//       and, for the errors, configurations Redis refuses (leaky_bucket, calendar,
//       interval refill, initial_tokens, a duration of a fraction of a µs: sub_ns).
// Operations (t: the instant; ns: a `now` of t µs and ns nanoseconds; clock:
// called without `now`, the store's clock reading t):
//   { op: 'try_acquire' | 'peek', target, cost, t, clock? }
//   { op: 'batch', target, costs, t }
//   { op: 'reserve', target, cost, max_wait (µs or null), t, cancel }
//   { op: 'refund', target, cost, taken_at (µs or null), t }
//   { op: 'acquire', target, cost, timeout (µs or null), t }
//   { op: 'state' }                                  (the keys, values and expiries in Redis)
// target: a key (limiter) or a request (policy). An interleaved scenario's
// operations each say which client makes them (side: 'python' | 'node').
//
//   node tests/redis/clients/generate.cjs [seed] [count]   prints the scenarios

const { random } = require('../../random.cjs');

const MAX_SAFE = Number.MAX_SAFE_INTEGER;
const SECOND = 1_000_000;
const DAY = 86_400 * SECOND;

/** Seeded draws: ../../random.cjs plus weighted choices. */
function rng(seed) {
  const r = random(seed);
  return {
    ...r,
    chance: (p) => r.next() < p,
    weighted: (choices) => {
      const total = choices.reduce((sum, [w]) => sum + w, 0);
      let x = r.next() * total;
      for (const [w, make] of choices) {
        if ((x -= w) < 0) return make();
      }
      return choices[choices.length - 1][1]();
    },
  };
}

/** `t`, or the nearest instant below it that JS milliseconds carry exactly. */
function carried(t) {
  while (Math.round((t / 1000) * 1000) !== t) t -= 1;
  return t;
}

/** A duration in µs: a few µs (every remainder shows), ms, seconds, sometimes days. */
function duration(r) {
  return r.weighted([
    [6, () => r.int(1, 50) * r.pick([1, 1, 997, 100_003])],
    [2, () => r.pick([1000, 250_000, SECOND, 60 * SECOND, 3600 * SECOND])],
    [1, () => r.int(1, 30) * DAY],
  ]);
}

/** A count: small mostly. */
function count(r) {
  return r.weighted([
    [8, () => r.int(1, 6)],
    [2, () => r.int(7, 40)],
    [1, () => r.int(41, 5000)],
  ]);
}

/** A valid spec of `algorithm`. */
function validSpec(r, algorithm) {
  switch (algorithm) {
    case 'gcra':
      return { algorithm, burst: count(r), interval: duration(r) };
    case 'token_bucket':
      return {
        algorithm,
        bands: Array.from({ length: r.weighted([[5, () => 1], [2, () => 2], [1, () => 3], [1, () => 4]]) }, () => ({
          capacity: count(r),
          refill_tokens: r.weighted([[4, () => r.int(1, 4)], [1, () => r.int(5, 12345)]]),
          period: duration(r),
        })),
      };
    case 'sliding_window_log':
      return { algorithm, limit: r.weighted([[8, () => r.int(1, 6)], [2, () => r.int(7, 40)]]), window: duration(r) };
    default:
      return { algorithm, limit: count(r), window: duration(r) };
  }
}

const ALGORITHMS = ['gcra', 'token_bucket', 'fixed_window', 'sliding_window_counter', 'sliding_window_log'];

/** A spec Redis refuses (or, at the bounds, just accepts): for the errors. */
function invalidSpec(r) {
  return r.pick([
    () => ({ algorithm: 'leaky_bucket', capacity: count(r), interval: duration(r) }),
    () => ({ algorithm: r.pick(['fixed_window', 'sliding_window_counter']), limit: count(r), calendar: r.pick(['day', 'week', 'month']) }),
    () => ({ algorithm: 'token_bucket', bands: [{ capacity: 5, refill_tokens: 1, period: SECOND, refill: 'interval' }] }),
    () => ({ algorithm: 'token_bucket', bands: [{ capacity: 5, refill_tokens: 1, period: SECOND, initial_tokens: r.int(0, 4) }] }),
    () => ({ ...validSpec(r, r.pick(ALGORITHMS)), sub_ns: r.pick([1, 500, 999]) }),
    // Products at and past 2^51 (burst * interval), and windows past 2^50.
    () => ({ algorithm: 'gcra', burst: 2 ** 11, interval: 2 ** 40 + r.pick([0, 1]) }),
    () => ({ algorithm: 'token_bucket', bands: [{ capacity: 2 ** 21, refill_tokens: r.pick([1, 2, 3]), period: 2 ** 30 * 3 }] }),
    () => ({ algorithm: 'sliding_window_counter', limit: 2 ** 21 + r.pick([0, 1]), window: 2 ** 30 }),
    () => ({ algorithm: r.pick(['fixed_window', 'sliding_window_log']), limit: r.pick([3, 2 ** 20, 2 ** 20 + 1]), window: 2 ** 50 + r.pick([0, 1]) }),
    () => ({ algorithm: 'fixed_window', limit: r.pick([2 ** 51, 2 ** 51 + 1, MAX_SAFE]), window: SECOND }),
  ])();
}

/** A spec; `plain`: always one Redis runs. */
function spec(r, plain) {
  return !plain && r.chance(0.05) ? invalidSpec(r) : validSpec(r, r.pick(ALGORITHMS));
}

/** The most one request may take: a cost above it is refused. */
function limitOf(s) {
  if (s.bands) return Math.min(...s.bands.map((b) => b.capacity));
  return s.burst ?? s.capacity ?? s.limit;
}

/** The durations that matter to a spec, for steps of time. */
function periodsOf(s) {
  if (s.bands) return s.bands.map((b) => b.period);
  if (s.calendar) return [DAY];
  return [s.interval ?? s.window];
}

const UNITS = [
  ['second', SECOND],
  ['minute', 60 * SECOND],
  ['hour', 3600 * SECOND],
  ['day', DAY],
];

/** A rate string (`7/second`, `3 per 2 minutes`) and its amount and period. */
function rate(r) {
  const amount = r.weighted([[4, () => r.int(1, 10)], [1, () => r.pick([60, 100, 1000, 7])]]);
  const [unit, us] = r.pick(UNITS);
  if (r.chance(0.3)) {
    const n = r.int(2, 5);
    return { text: `${amount} per ${n} ${unit}s`, amount, period: n * us };
  }
  return { text: `${amount}/${unit}`, amount, period: us };
}

const NAMES = ['l0', 'l1', 'l2', 'l3', 'per-second', 'ü', 'a:2:x', 'x'];
const BY = [['key'], ['key'], [], ['key', 'route'], ['route']];

/**
 * A subject: the limiter or policy, its limit, its periods and fields.
 * `plain`: configured limiters Redis runs (an interleaved scenario's, which
 * the core, in its own units, runs too).
 */
function subject(r, kind, plain) {
  if (kind === 'limiter') {
    const s = spec(r, plain);
    if (r.chance(0.5)) s.name = r.pick(['api', 'ü-limit', 'a:2:x']);
    return { subject: { limiter: s }, limit: limitOf(s), periods: periodsOf(s), fields: ['key'] };
  }
  const n = r.int(1, 4);
  const form = plain ? 'limiters' : r.weighted([[6, () => 'limiters'], [2, () => 'rates'], [1, () => 'text']]);
  const names = [...NAMES].sort(() => r.next() - 0.5).slice(0, n);
  if (!plain && r.chance(0.03)) names[n - 1] = names[0]; // a duplicate name, for the error
  if (form === 'limiters') {
    // keyed: the limiter given as a KeyedLimiter, as Policy takes it.
    const limits = names.map((name) => ({ name, by: r.pick(BY), limiter: spec(r, plain), ...(r.chance(0.15) ? { keyed: true } : {}) }));
    return {
      subject: { form, limits },
      limit: Math.min(...limits.map((l) => limitOf(l.limiter))),
      periods: limits.flatMap((l) => periodsOf(l.limiter)),
      fields: [...new Set(limits.flatMap((l) => l.by))],
    };
  }
  if (form === 'rates') {
    const limits = names.map((name) => {
      const algorithm = r.pick([undefined, ...ALGORITHMS]);
      const rates = algorithm === undefined || algorithm === 'token_bucket' ? r.int(1, 2) : 1;
      const parts = Array.from({ length: rates }, () => rate(r));
      const item = { name, rate: parts.map((p) => p.text).join(';'), by: r.pick(BY) };
      if (algorithm !== undefined) item.algorithm = algorithm;
      if ((algorithm === undefined || algorithm === 'token_bucket' || algorithm === 'gcra') && r.chance(0.4)) item.burst = r.int(1, 12);
      return { item, limit: item.burst ?? parts[0].amount, periods: parts.map((p) => p.period) };
    });
    return {
      subject: { form, limits: limits.map((l) => l.item) },
      limit: Math.min(...limits.map((l) => (l.item.algorithm === undefined || l.item.algorithm === 'token_bucket' ? Math.min(l.limit, ...rateAmounts(l.item.rate, l.item.burst)) : l.limit))),
      periods: limits.flatMap((l) => l.periods),
      fields: [...new Set(limits.flatMap((l) => l.item.by))],
    };
  }
  const parts = Array.from({ length: n }, () => rate(r));
  const by = r.pick([['key'], ['key', 'route'], []]);
  const algorithm = r.pick([undefined, ...ALGORITHMS]);
  const s = { form, rates: parts.map((p) => p.text).join(';'), by };
  if (algorithm !== undefined) s.algorithm = algorithm;
  return { subject: s, limit: Math.min(...parts.map((p) => p.amount)), periods: parts.map((p) => p.period), fields: by };
}

/** A token bucket of rates: each band's capacity (the first's is the burst). */
function rateAmounts(text, burst) {
  return text.split(';').map((t, i) => (i === 0 && burst !== undefined ? burst : Number(t.match(/^\d+/)[0])));
}

function cost(r, limit) {
  return r.weighted([
    [10, () => 0],
    [30, () => 1],
    [20, () => r.int(1, Math.max(1, Math.min(limit, 10)))],
    [8, () => limit],
    [5, () => limit + 1],
    [3, () => Math.max(0, limit - 1)],
    [1, () => MAX_SAFE],
  ]);
}

/** A key (limiter) or a request (policy), now and then lacking a field. */
function target(r, kind, fields) {
  if (kind === 'limiter') return r.pick(['a', 'a', 'b', 7, 'ü', '']);
  const request = { key: r.pick(['a', 'a', 'b', 7, 'ü']), route: r.pick(['/x', '/y']) };
  if (fields.length > 0 && r.chance(0.03)) delete request[r.pick(fields)];
  return request;
}

/** The next instant: still, µs, a fraction or multiple of a period, far; back only when allowed. */
function step(r, t, periods, back) {
  const period = r.pick(periods);
  const next = r.weighted([
    [12, () => t],
    [8, () => t + r.int(1, 5)],
    [8, () => t + r.int(1, 60)],
    [10, () => t + Math.max(1, Math.floor(period * r.pick([0.25, 0.5, 0.999, 1, 1.5]) + r.int(-2, 2)))],
    [4, () => t + r.int(1, 6 * SECOND)],
    [1, () => t + r.int(1, 400) * DAY],
    [back ? 3 : 0, () => t - r.int(1, 50)],
    [back ? 1 : 0, () => t - r.int(1, 2 * SECOND)],
  ]);
  return carried(Math.min(Math.max(next, 0), 2 ** 52));
}

/**
 * One scenario. `interleaved`: the operations alternate between the clients
 * (most often in turn), time never goes back, and the scenario is compared
 * with the in-process core, which the script follows only there (time that
 * goes back after Redis dropped a fresh key, PROTOCOL.md).
 */
function scenario(r, id, interleaved) {
  const kind = r.chance(0.45) ? 'limiter' : 'policy';
  const { subject: s, limit, periods, fields } = subject(r, kind, interleaved);
  // Caller time from 2041 (2^51 µs): every key's expiry is then absolute
  // (PEXPIREAT ... GT wins), so the state read back is the same in each run.
  // Now and then from 1970 (a monotonic clock), where expiries are relative.
  const early = !interleaved && r.chance(0.1);
  let t = carried(early ? r.int(0, 10 * SECOND) : 2 ** 51 - 2 ** 40 + r.int(0, 2 ** 30));
  // Time goes back only from 2041: from 1970 a key kept a second once fresh
  // (PX) may be gone by the next call in one run and not in the other.
  const back = !interleaved && !early && r.chance(0.3);
  const ops = [];
  const seen = [t];
  const count = r.int(8, 40);
  for (let i = 0; i < count; i++) {
    const at = step(r, t, periods, back);
    const monotone = at >= Math.max(...seen);
    t = at;
    seen.push(t);
    const tg = target(r, kind, fields);
    const op = r.weighted([
      [30, () => ({ op: 'try_acquire', target: tg, cost: cost(r, limit), t, ...(r.chance(0.2) ? { clock: true } : {}) })],
      [14, () => ({ op: 'peek', target: tg, cost: cost(r, limit), t, ...(r.chance(0.2) ? { clock: true } : {}) })],
      [10, () => ({ op: 'batch', target: tg, costs: Array.from({ length: r.weighted([[1, () => 0], [8, () => r.int(2, 6)]]) }, () => cost(r, limit)), t })],
      [
        12,
        () => ({
          op: 'reserve',
          target: tg,
          cost: cost(r, limit),
          max_wait: r.pick([null, 0, r.int(0, 100), r.int(0, 10 * SECOND), Math.max(...periods)]),
          t,
          cancel: r.chance(0.4),
        }),
      ],
      [8, () => ({ op: 'refund', target: tg, cost: r.chance(0.9) ? cost(r, limit) : r.int(0, 2 ** 40), taken_at: r.chance(0.2) ? null : r.pick(seen.slice(-5)), t })],
      // acquire: with no timeout or one of more than 0 only where the time
      // moved on (a slot in the past would be slept for).
      [6, () => ({ op: 'acquire', target: tg, cost: cost(r, limit), timeout: monotone ? r.pick([0, 0, 20_000, null]) : 0, t })],
      [interleaved || early ? 0 : 2, () => ({ op: 'state' })],
    ]);
    if (interleaved) op.side = i % 5 === 4 ? r.pick(['python', 'node']) : i % 2 === 0 ? 'python' : 'node';
    // From 1970, where floats carry nanoseconds: now and then a `now` of a
    // fraction of a µs more (never near a half, which floats may put on
    // either side), which both clients must round alike.
    if (early && op.t !== undefined && !op.clock && r.chance(0.3)) op.ns = r.pick([r.int(1, 400), r.int(600, 999)]);
    ops.push(op);
  }
  // Probes at the end: what each target's state decides now, a period on,
  // much later (peeks, which write nothing), then the state itself.
  const last = Math.max(...seen);
  const targets = kind === 'limiter' ? ['a', 'b', 7] : [{ key: 'a', route: '/x' }, { key: 'b', route: '/y' }];
  for (const tg of targets) {
    for (const later of [0, Math.min(...periods), Math.max(...periods), 3 * Math.max(...periods) + 1]) {
      const op = { op: 'peek', target: tg, cost: r.pick([0, 1, limit]), t: carried(Math.min(last + later, 2 ** 52)) };
      if (interleaved) op.side = r.pick(['python', 'node']);
      ops.push(op);
    }
  }
  if (!interleaved && !early) ops.push({ op: 'state' });
  return { id, kind, subject: s, ops, interleaved, early };
}

/** `count` scenarios from `seed` (ids `seed:i`); `interleaved` ones for the test against the core. */
function generate(seed, count, interleaved = false) {
  const r = rng(seed);
  return Array.from({ length: count }, (_, i) => scenario(r, `${interleaved ? 'i' : 's'}${seed}:${i}`, interleaved));
}

module.exports = { generate, carried, ALGORITHMS };

if (require.main === module) {
  const [seed = 1, count = 5] = process.argv.slice(2).map(Number);
  console.log(JSON.stringify(generate(seed, count), null, 1));
}
