'use strict';
// Differential tests: random traces (caller time) through the in-process
// napi core and through a real Redis, every decision compared.
//
// Units: the core counts nanoseconds and the wire microseconds, and the
// script computes in wire units exactly what the core computes in its own.
// So the in-process limiter is built with durations of `u / 1e6` ms (`u` ns)
// and called at `t / 1e6` ms, the Redis one with `u / 1000` ms (`u` µs) at
// `t / 1000` ms: the same integers on both sides, every answer compared in
// those units. Times start near 2^51 µs (year 2041): keys expire no earlier
// than the trace's time (PEXPIREAT ... GT), so none expires during the test.
const test = require('node:test');
const assert = require('node:assert/strict');
const { rk, rkRedis, CLIENTS, close, prefix, random } = require('./helpers.cjs');

const CORE = 1e6; // core ms per unit: 1 unit = 1 ns
const WIRE = 1e3; // wire ms per unit: 1 unit = 1 µs

function scale(rng) {
  return rng.pick([1, 1, 997, 100_003]);
}

// Each maker: (rng) => (unitMs) => in-process limiter with durations in that unit.
const ALGORITHMS = {
  gcra(rng) {
    const burst = rng.int(1, 5);
    const interval = rng.int(1, 50) * scale(rng);
    return (unit) => new rk.Gcra({ burst, emissionIntervalMs: interval / unit });
  },
  token_bucket(rng) {
    const bands = Array.from({ length: rng.int(1, 4) }, () => ({
      capacity: rng.int(1, 6),
      refillTokens: rng.int(1, 4),
      period: rng.int(1, 40) * scale(rng),
    }));
    return (unit) =>
      rk.TokenBucket.fromBandwidths(bands.map((b) => ({ capacity: b.capacity, refillTokens: b.refillTokens, refillPeriodMs: b.period / unit })));
  },
  fixed_window(rng) {
    const limit = rng.int(1, 6);
    const window = rng.int(1, 40) * scale(rng);
    return (unit) => new rk.FixedWindow({ limit, windowMs: window / unit });
  },
  sliding_window_counter(rng) {
    const limit = rng.int(1, 6);
    const window = rng.int(1, 40) * scale(rng);
    return (unit) => new rk.SlidingWindowCounter({ limit, windowMs: window / unit });
  },
  sliding_window_log(rng) {
    const limit = rng.int(1, 6);
    const window = rng.int(1, 40) * scale(rng);
    return (unit) => new rk.SlidingWindowLog({ limit, windowMs: window / unit });
  },
};

/**
 * A booking compared: the same slot (or the same refusal) in both. Returns
 * false when the trace must stop: a limit refused to book within the wait (a
 * log's ring is full), where the core gives back the limits already booked at
 * the slot (missing units a window took at `now`) and Redis writes nothing.
 */
function sameBooking(got, expected, maxWait, context) {
  assert.deepEqual([got.ok, Math.round(got.waitMs * WIRE)], [expected.ok, Math.round(expected.waitMs * CORE)], context);
  assert.equal(got.decision === null, expected.decision === null, context);
  if (expected.decision !== null) assert.deepEqual(numbers(got.decision, WIRE), numbers(expected.decision, CORE), context);
  assert.equal(got.fromStore, true);
  return expected.ok || Math.round(expected.waitMs * CORE) > maxWait;
}

function numbers(d, unit) {
  return [d.allowed, d.remaining, d.limit, Math.round(d.retryAfterMs * unit), Math.round(d.resetAfterMs * unit)];
}

function policyNumbers(d, unit) {
  return { combined: numbers(d, unit), deniedBy: d.deniedBy, limits: d.limits.map((l) => [l.name, ...numbers(l, unit)]) };
}

// Time going backwards (by up to 50 units) only in single-key keyed traces,
// the core's store built afresh whenever the key is gone from Redis: the
// script deletes a state back to fresh, forgetting the latest time it saw,
// where the core's store keeps it (one latest time for all its keys, even
// through reclaim), and time that went back counts from that latest time.
// These traces compare with a one-limit core Policy, which the script follows:
// the core's KeyedLimiter of a Gcra reports `remaining` otherwise after time
// went back (see the report on issue 8).
function nextTime(rng, t, backwards) {
  return t + rng.pick([0, 0, 1, rng.int(1, 5), rng.int(1, 60), rng.int(1, 6_000_000), ...(backwards ? [-rng.int(1, 50)] : [])]);
}

/** A one-limit Policy keyed by `key`, called as a KeyedLimiter. */
function policyAsKeyed(limiter) {
  const policy = new rk.Policy({ limits: [{ name: 'default', by: ['key'], limiter }] });
  return {
    limit: limiter.limit,
    tryAcquire: (key, cost, now) => policy.tryAcquire({ key }, cost, now),
    tryAcquireBatch: (key, costs, now) => costs.map((cost) => policy.tryAcquire({ key }, cost, now)),
    peek: (key, cost, now) => policy.peek({ key }, cost, now),
    reserve: (key, cost, maxWait, now) => policy.reserve({ key }, cost, maxWait, now),
  };
}

/** A keyed trace: KeyedLimiter against RedisLimiter. Returns the decisions compared. */
async function keyedTrace(client, seed, algorithm, backwards) {
  const rng = random(seed);
  const make = ALGORITHMS[algorithm](rng);
  const fresh = () => (backwards ? policyAsKeyed(make(CORE)) : new rk.KeyedLimiter(make(CORE)));
  let core = fresh();
  const keyPrefix = prefix(`diff-${algorithm}-${seed}`);
  const remote = new rkRedis.RedisLimiter(client, make(WIRE), { prefix: keyPrefix });
  const limit = core.limit;
  let t = 2 ** 51 - 2 ** 40 + rng.int(0, 1e6);
  let compared = 0;
  const seen = [t]; // instants of earlier calls, for refunds
  for (let step = 0; step < 80; step++) {
    if (backwards && (await client.keys(`${keyPrefix}{1:a}:*`)).length === 0) core = fresh();
    t = nextTime(rng, t, backwards);
    seen.push(t);
    const key = backwards ? 'a' : rng.pick(['a', 'b', 7]);
    const op = rng.next();
    const costs = Array.from({ length: op < 0.15 ? rng.int(2, 5) : 1 }, () => rng.int(0, limit));
    let expected;
    let got;
    if (op >= 0.9 && !backwards) {
      // Units given back, taken now or at an earlier call: compared by the decisions that follow.
      const takenAt = rng.pick(seen.slice(-4));
      core.refund(key, costs[0], takenAt / CORE);
      await remote.refund(key, costs[0], takenAt / WIRE);
      continue;
    }
    if (op < 0.15) {
      expected = core.tryAcquireBatch(key, costs, t / CORE);
      got = await remote.tryAcquireBatch(key, costs, t / WIRE);
    } else if (op < 0.3) {
      expected = [core.peek(key, costs[0], t / CORE)];
      got = [await remote.peek(key, costs[0], t / WIRE)];
    } else if (op < 0.45) {
      const maxWait = rng.pick([0, rng.int(0, 100), rng.int(0, 1e7)]);
      const booked = core.reserve(key, costs[0], maxWait / CORE, t / CORE);
      const remoteBooked = await remote.reserve(key, costs[0], maxWait / WIRE, t / WIRE);
      compared += 1;
      if (!sameBooking(remoteBooked, booked, maxWait, `${algorithm} seed ${seed}, step ${step}, t ${t}, reserve ${costs[0]} within ${maxWait}`)) break;
      continue;
    } else {
      expected = [core.tryAcquire(key, costs[0], t / CORE)];
      got = [await remote.tryAcquire(key, costs[0], t / WIRE)];
    }
    assert.equal(got.length, expected.length);
    for (let i = 0; i < got.length; i++) {
      assert.deepEqual(numbers(got[i], WIRE), numbers(expected[i], CORE), `${algorithm} seed ${seed}, step ${step}, t ${t}, costs ${costs}`);
      assert.equal(got[i].fromStore, true);
      compared += 1;
    }
  }
  return compared;
}

/** A policy trace: Policy of limiters against RedisPolicy of the same. */
async function policyTrace(client, seed) {
  const rng = random(seed);
  const names = Object.keys(ALGORITHMS);
  const specs = Array.from({ length: rng.int(2, 4) }, (_, i) => ({
    name: `l${i}`,
    make: ALGORITHMS[rng.pick(names)](rng),
    by: rng.pick([['key'], [], ['key'], ['key', 'route']]),
  }));
  const core = new rk.Policy({ limits: specs.map((s) => ({ name: s.name, by: s.by, limiter: s.make(CORE) })) });
  const remote = new rkRedis.RedisPolicy(client, { limits: specs.map((s) => ({ name: s.name, by: s.by, limiter: s.make(WIRE) })) }, { prefix: prefix(`diff-policy-${seed}`) });
  const limit = Math.min(...specs.map((s) => s.make(CORE).limit));
  let t = 2 ** 51 - 2 ** 40 + rng.int(0, 1e6);
  let compared = 0;
  for (let step = 0; step < 60; step++) {
    t = nextTime(rng, t, false);
    const request = { key: rng.pick(['a', 'b']), route: rng.pick(['/x', '/y']) };
    const cost = rng.int(0, limit);
    const op = rng.next();
    if (op < 0.15) {
      const maxWait = rng.pick([0, rng.int(0, 100), rng.int(0, 1e7)]);
      const booked = core.reserve(request, cost, maxWait / CORE, t / CORE);
      const remoteBooked = await remote.reserve(request, cost, maxWait / WIRE, t / WIRE);
      compared += 1;
      if (!sameBooking(remoteBooked, booked, maxWait, `policy seed ${seed}, step ${step}, t ${t}, reserve ${cost} within ${maxWait}`)) break;
      continue;
    }
    const peek = op < 0.3;
    const expected = peek ? core.peek(request, cost, t / CORE) : core.tryAcquire(request, cost, t / CORE);
    const got = peek ? await remote.peek(request, cost, t / WIRE) : await remote.tryAcquire(request, cost, t / WIRE);
    assert.deepEqual(policyNumbers(got, WIRE), policyNumbers(expected, CORE), `policy seed ${seed}, step ${step}, t ${t}, cost ${cost}`);
    assert.equal(got.fromStore, true);
    compared += 1;
  }
  return compared;
}

for (const [library, connect] of Object.entries(CLIENTS)) {
  test(`${library}: every algorithm decides as the core (keyed, random traces)`, async () => {
    const client = await connect();
    try {
      const seeds = library === 'ioredis' ? 40 : 10;
      for (const algorithm of Object.keys(ALGORITHMS)) {
        let compared = 0;
        for (let seed = 0; seed < seeds; seed++) compared += await keyedTrace(client, seed, algorithm, false);
        for (let seed = 0; seed < seeds; seed++) compared += await keyedTrace(client, 500 + seed, algorithm, true);
        assert.ok(compared >= seeds * 80, `${algorithm}: ${compared} decisions compared`);
      }
    } finally {
      await close(client);
    }
  });

  test(`${library}: multi-limit policies decide as the core (all or nothing, random traces)`, async () => {
    const client = await connect();
    try {
      const seeds = library === 'ioredis' ? 60 : 15;
      let compared = 0;
      for (let seed = 0; seed < seeds; seed++) compared += await policyTrace(client, 1000 + seed);
      assert.ok(compared >= seeds * 30, `${compared} decisions compared`);
    } finally {
      await close(client);
    }
  });
}
