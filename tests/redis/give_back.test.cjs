'use strict';
// What an aborted acquire gives back on Redis: on a bucket (GCRA, token
// bucket), its booking only while it is the key's latest (another process
// may have booked behind it meanwhile, whose slot a give-back from the
// middle handed out a second time: two units at once from a burst of one),
// else nothing (its slot goes unused); on a window, its booking where it
// was counted. Each test ends with a third booking, on the aborted caller's
// client (after its give-back), compared with the second's slot.
const test = require('node:test');
const assert = require('node:assert/strict');
const { rk, rkRedis, CLIENTS, withClient, prefix, until } = require('./helpers.cjs');

const { RedisLimiter, RedisPolicy } = rkRedis;

// A burst of one unit a second: an emptied key books its next unit a second
// on, the one after two seconds on.
const BUCKETS = {
  gcra: () => new rk.Gcra({ burst: 1, emissionIntervalMs: 1000 }),
  token_bucket: () => new rk.TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 1000 }),
};

// The same on the server's clock, a unit a minute: its tests tell a
// booking's slot by the time between calls (`booked` waits until the key's
// line ends past one and a half units from now), which a stall of the
// machine of half a second broke at a unit a second.
const UNIT = 60_000;
const SERVER_BUCKETS = {
  gcra: () => new rk.Gcra({ burst: 1, emissionIntervalMs: UNIT }),
  token_bucket: () => new rk.TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: UNIT }),
};

/**
 * `client`, its script calls watched: `refunds` gathers the replies of the
 * refunds it sends, and `onReserve(reply)`, when set, runs once a booking's
 * reply has come, before the caller sees it (the caller's abort then comes
 * while the round trip is under way).
 */
function watched(client) {
  const w = { refunds: [], onReserve: null };
  w.client = new Proxy(client, {
    get(target, name) {
      const value = Reflect.get(target, name, target);
      if ((name === 'call' || name === 'sendCommand') && typeof value === 'function') {
        return async (...args) => {
          const words = (Array.isArray(args[0]) ? args[0] : args.flat()).map(String);
          const sent = value.apply(target, args);
          if (words.includes('refund')) w.refunds.push(Promise.resolve(sent).catch(() => undefined));
          const reply = await sent;
          if (words.includes('reserve') && w.onReserve !== null) {
            const hook = w.onReserve;
            w.onReserve = null;
            await hook(reply);
          }
          return reply;
        };
      }
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return w;
}

/** Aborts `pending` (an acquire on `signal`'s `controller`) and waits for its rejection and its give-back. */
async function abortAndGiveBack(w, controller, pending) {
  controller.abort(new Error('stop'));
  await assert.rejects(pending, { message: 'stop' });
  await until(() => w.refunds.length > 0);
  await Promise.all(w.refunds);
}

/** Waits until `target`'s key holds a booking past `ms` from now. */
function booked(limiter, target, ms) {
  return until(async () => (await limiter.peek(target, 0)).resetAfterMs > ms);
}

for (const library of ['ioredis', 'node-redis']) {
  for (const [algorithm, make] of Object.entries(SERVER_BUCKETS)) {
    test(`${library}, ${algorithm}: an aborted acquire gives nothing back once another process booked behind it`, () =>
      withClient(library, (first) =>
        withClient(library, async (second) => {
          const p = prefix(`behind-${algorithm}`);
          const w = watched(first);
          const mine = new RedisLimiter(w.client, make(), { prefix: p });
          // Another process: a client and a limiter of its own on the same key.
          const other = new RedisLimiter(second, make(), { prefix: p });
          assert.equal((await mine.tryAcquire('k')).allowed, true);
          const controller = new AbortController();
          const pending = mine.acquire('k', 1, { signal: controller.signal });
          await booked(other, 'k', 1.5 * UNIT); // sleeping until its slot, a minute on
          const behind = await other.reserve('k', 1, 10 * UNIT);
          assert.equal(behind.ok, true);
          await abortAndGiveBack(w, controller, pending);
          const after = await mine.reserve('k', 1, 10 * UNIT);
          // Given back from the middle, the aborted booking moved the key's
          // end back by a unit: `after` got `behind`'s slot.
          assert.ok(Math.abs(after.atMs - behind.atMs - UNIT) < 0.01, `${after.atMs - behind.atMs} ms apart`);
        })));

    test(`${library}, ${algorithm}: an acquire aborted during its booking's round trip gives nothing back once another booked behind it`, () =>
      withClient(library, (first) =>
        withClient(library, async (second) => {
          const p = prefix(`in-flight-${algorithm}`);
          const w = watched(first);
          const mine = new RedisLimiter(w.client, make(), { prefix: p });
          const other = new RedisLimiter(second, make(), { prefix: p });
          assert.equal((await mine.tryAcquire('k')).allowed, true);
          const controller = new AbortController();
          let behind;
          // Booked, its reply on its way: another books behind it, and the caller leaves.
          w.onReserve = async () => {
            behind = await other.reserve('k', 1, 10 * UNIT);
            controller.abort(new Error('stop'));
          };
          await abortAndGiveBack(w, controller, mine.acquire('k', 1, { signal: controller.signal }));
          const after = await mine.reserve('k', 1, 10 * UNIT);
          assert.ok(Math.abs(after.atMs - behind.atMs - UNIT) < 0.01, `${after.atMs - behind.atMs} ms apart`);
        })));

    test(`${library}, ${algorithm}: an aborted acquire that is the latest booking gives it back`, () =>
      withClient(library, async (client) => {
        const w = watched(client);
        const limiter = new RedisLimiter(w.client, make(), { prefix: prefix(`latest-${algorithm}`) });
        assert.equal((await limiter.tryAcquire('k')).allowed, true);
        const controller = new AbortController();
        const pending = limiter.acquire('k', 1, { signal: controller.signal });
        await booked(limiter, 'k', 1.5 * UNIT);
        await abortAndGiveBack(w, controller, pending);
        // Nobody booked behind it: the next booking takes its slot, less than a minute on.
        const after = await limiter.reserve('k', 1, 10 * UNIT);
        assert.ok(after.ok && after.waitMs > 0 && after.waitMs <= UNIT, `a wait of ${after.waitMs} ms`);
      }));
  }
}

test('acquires aborted newest first each give their booking back', () =>
  withClient('ioredis', async (client) => {
    // The newest aborted first, the one before it is the latest again (the
    // key as it left it: on the callers' clock, standing still).
    const w = watched(client);
    const T = 2_000_000_000_000;
    for (const make of Object.values(BUCKETS)) {
      const limiter = new RedisLimiter(w.client, make(), { prefix: prefix('newest-first'), clock: () => T });
      assert.equal((await limiter.tryAcquire('k')).allowed, true);
      const a = new AbortController();
      const b = new AbortController();
      const first = limiter.acquire('k', 1, { signal: a.signal });
      await booked(limiter, 'k', 1500);
      const second = limiter.acquire('k', 1, { signal: b.signal });
      await booked(limiter, 'k', 2500);
      await abortAndGiveBack(w, b, second);
      w.refunds.length = 0;
      await abortAndGiveBack(w, a, first);
      const after = await limiter.reserve('k', 1, 100_000);
      assert.equal(after.waitMs, 1000);
    }
  }));

test('an aborted acquire on a window gives its booking back where it was counted', () =>
  withClient('ioredis', (first) =>
    withClient('node-redis', async (second) => {
      // A window counts bookings per window, not in a line: one given back
      // from the middle frees a unit of its window and takes nobody's slot.
      const p = prefix('window');
      const w = watched(first);
      const make = () => new rk.FixedWindow({ limit: 2, windowMs: 3_600_000 });
      const mine = new RedisLimiter(w.client, make(), { prefix: p });
      const other = new RedisLimiter(second, make(), { prefix: p });
      assert.equal((await mine.tryAcquire('k', 2)).allowed, true); // full: bookings go to the next window
      const controller = new AbortController();
      const pending = mine.acquire('k', 1, { signal: controller.signal });
      await booked(other, 'k', 3_600_000); // the next window's unit
      const behind = await other.reserve('k', 1, 7_200_000);
      await abortAndGiveBack(w, controller, pending);
      // The next window holds `behind` and, the aborted one given back, `after`.
      const after = await mine.reserve('k', 1, 7_200_000);
      assert.equal(after.ok, true);
      assert.equal(after.atMs, behind.atMs);
    })));

test('a policy gives back per limit key: nothing to a bucket booked behind, its unit to a window', () =>
  withClient('ioredis', (first) =>
    withClient('node-redis', async (second) => {
      const T = 2_000_000_000_000; // the callers' clock, standing still: every booking in one window
      const config = () => ({
        limits: [
          { name: 'rate', by: ['user'], limiter: new rk.Gcra({ burst: 1, emissionIntervalMs: 1000 }) },
          { name: 'hourly', by: ['user'], limiter: new rk.FixedWindow({ limit: 100, windowMs: 3_600_000 }) },
        ],
      });
      const p = prefix('policy');
      const w = watched(first);
      const mine = new RedisPolicy(w.client, config(), { prefix: p, clock: () => T });
      const other = new RedisPolicy(second, config(), { prefix: p, clock: () => T });
      const request = { user: 'u' };
      assert.equal((await mine.tryAcquire(request)).allowed, true);
      const controller = new AbortController();
      let behind;
      w.onReserve = async () => {
        behind = await other.reserve(request, 1, 100_000);
        controller.abort(new Error('stop'));
      };
      await abortAndGiveBack(w, controller, mine.acquire(request, 1, { signal: controller.signal }));
      const after = await mine.reserve(request, 1, 100_000);
      assert.equal(after.atMs - behind.atMs, 1000);
      // The window counts the first unit, `behind` and `after`: not the aborted one.
      const hourly = (await other.peek(request, 0, after.atMs)).limits.find((l) => l.name === 'hourly');
      assert.equal(hourly.remaining, 97);
    })));

test('an explicit cancel() gives back as it is', () =>
  withClient('ioredis', async (client) => {
    // reservation.cancel() of one's own is documented to give back as it
    // is ("cancel the latest first"), on Redis as in-process: unchanged.
    const limiter = new RedisLimiter(client, BUCKETS.gcra(), { prefix: prefix('explicit') });
    const T = 2_000_000_000_000;
    await limiter.tryAcquire('k', 1, T);
    const a = await limiter.reserve('k', 1, 100_000, T);
    const b = await limiter.reserve('k', 1, 100_000, T);
    assert.deepEqual([a.waitMs, b.waitMs], [1000, 2000]);
    await a.cancel();
    assert.equal((await limiter.reserve('k', 1, 100_000, T)).waitMs, 2000);
  }));

assert.ok(Object.keys(CLIENTS).includes('node-redis'));
