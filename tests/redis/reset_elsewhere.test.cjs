'use strict';
// A booking made before its key was reset by another process (or another
// limiter object, which the client cannot see), or before the key expired
// and was made again, gives nothing back: the key, used again since, holds
// units taken anew, which a give-back freed (the key admitted more than its
// limit). The script tells the key's states apart by their birth
// (PROTOCOL.md, "Guarded refund"). As in Python
// (bindings-python/tests/redis/test_redis_reset_elsewhere.py).
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { ROOT, rk, rkRedis, ioredis, close, withClient, prefix, until } = require('./helpers.cjs');

const { RedisLimiter, RedisPolicy } = rkRedis;
const { giveBackLatest } = require(path.join(ROOT, 'bindings-node/lib/redis/reservation.cjs'));

// Two units at once, every algorithm the script runs, each over periods
// that the callers' clock, standing still, never leaves.
const LIMITS = {
  gcra: () => new rk.Gcra({ burst: 2, emissionIntervalMs: 1000 }),
  token_bucket: () => new rk.TokenBucket({ capacity: 2, refillTokens: 1, refillPeriodMs: 1000 }),
  token_bucket_bands: () =>
    rk.TokenBucket.fromBandwidths([
      { capacity: 2, refillTokens: 1, refillPeriodMs: 1000 },
      { capacity: 10, refillTokens: 10, refillPeriodMs: 60_000 },
    ]),
  fixed_window: () => new rk.FixedWindow({ limit: 2, windowMs: 3_600_000 }),
  sliding_window_counter: () => new rk.SlidingWindowCounter({ limit: 2, windowMs: 3_600_000 }),
  sliding_window_log: () => new rk.SlidingWindowLog({ limit: 2, windowMs: 3_600_000 }),
};

// The same over periods of 10 ms: a key of theirs expires about a second
// after its last call (the relative expiry of the callers' clock, from 1970).
const SHORT = {
  gcra: () => new rk.Gcra({ burst: 2, emissionIntervalMs: 10 }),
  token_bucket: () => new rk.TokenBucket({ capacity: 2, refillTokens: 1, refillPeriodMs: 10 }),
  fixed_window: () => new rk.FixedWindow({ limit: 2, windowMs: 10 }),
  sliding_window_counter: () => new rk.SlidingWindowCounter({ limit: 2, windowMs: 10 }),
  sliding_window_log: () => new rk.SlidingWindowLog({ limit: 2, windowMs: 10 }),
};

// The callers' clock, standing still: every call at the same instant, so
// that a key used again after a reset holds what it held before it.
const T = 2_000_000_000_000;

/** How many units `take()` is allowed one after another (at most 10). */
async function admitted(take) {
  let count = 0;
  while (count < 10 && (await take()).allowed) count += 1;
  return count;
}

/**
 * This process's limiter and another process's (a client and a limiter of
 * its own), made by `make` on the keys of `p`, on `clock`.
 */
function limiters(first, second, make, p, clock = () => T) {
  return [new RedisLimiter(first, make(), { prefix: p, clock }), new RedisLimiter(second, make(), { prefix: p, clock })];
}

/** `mine` books, `other` resets the key and takes its 2 units anew: the cancel must free none. */
async function cancelAfterResetElsewhereGivesNothingBack([mine, other]) {
  const booking = await mine.reserve('k', 1, 0);
  assert.equal(booking.ok, true);
  assert.equal(await other.reset('k'), true);
  assert.equal(await admitted(() => other.tryAcquire('k')), 2);
  // Given back, the booking freed one of the units taken since the reset.
  await booking.cancel();
  assert.equal((await other.tryAcquire('k')).allowed, false);
}

/**
 * `client`, whose `acquire` script calls run at once but resolve only once
 * `release()` is called (a reply that comes late); `acquires` and `refunds`
 * hold the promises of those sent.
 */
function holdingAcquires(client) {
  let release;
  const released = new Promise((resolve) => {
    release = resolve;
  });
  const held = { acquires: [], refunds: [], release };
  held.client = new Proxy(client, {
    get(target, name) {
      const value = Reflect.get(target, name, target);
      if ((name === 'call' || name === 'sendCommand') && typeof value === 'function') {
        return (...args) => {
          const words = (Array.isArray(args[0]) ? args[0] : args.flat()).map(String);
          let reply = value.apply(target, args);
          if (words.includes('acquire')) {
            reply = reply.then(async (r) => (await released, r));
            held.acquires.push(reply.catch(() => undefined));
          }
          if (words.includes('refund')) held.refunds.push(Promise.resolve(reply).catch(() => undefined));
          return reply;
        };
      }
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return held;
}

for (const library of ['ioredis', 'node-redis']) {
  for (const [algorithm, make] of Object.entries(LIMITS)) {
    test(`${library}, ${algorithm}: a cancel() after another process reset the key gives nothing back`, () =>
      withClient(library, (first) =>
        withClient(library, (second) => cancelAfterResetElsewhereGivesNothingBack(limiters(first, second, make, prefix(`cancel-${algorithm}`))))));

    test(`${library}, ${algorithm}: a guarded give-back after another process reset the key gives nothing back`, () =>
      withClient(library, (first) =>
        withClient(library, async (second) => {
          // What an aborted acquire gives back (the booking's marks, guarded):
          // the key, used again by one unit at the same instant, ends its line
          // where the booking left it, and the marks alone matched.
          const [mine, other] = limiters(first, second, make, prefix(`guarded-${algorithm}`));
          const booking = await mine.reserve('k', 1, 0);
          assert.equal(booking.ok, true);
          assert.equal(await other.reset('k'), true);
          assert.equal((await other.tryAcquire('k')).allowed, true);
          await giveBackLatest(booking);
          assert.equal(await admitted(() => other.tryAcquire('k')), 1);
        })));
  }
}

test('a policy cancel() after another process reset it gives nothing back to any limit', () =>
  withClient('ioredis', (first) =>
    withClient('node-redis', async (second) => {
      const config = () => ({
        limits: [
          { name: 'rate', by: ['user'], limiter: LIMITS.gcra() },
          { name: 'bucket', by: ['user'], limiter: LIMITS.token_bucket() },
          { name: 'hourly', by: ['user'], limiter: LIMITS.fixed_window() },
          { name: 'counter', by: ['user'], limiter: LIMITS.sliding_window_counter() },
          { name: 'log', by: ['user'], limiter: LIMITS.sliding_window_log() },
        ],
      });
      const p = prefix('policy');
      const mine = new RedisPolicy(first, config(), { prefix: p, clock: () => T });
      const other = new RedisPolicy(second, config(), { prefix: p, clock: () => T });
      const request = { user: 'u' };
      const booking = await mine.reserve(request, 1, 0);
      assert.equal(booking.ok, true);
      assert.equal(await other.reset(request), 5);
      assert.equal(await admitted(() => other.tryAcquire(request)), 2);
      await booking.cancel();
      const left = (await other.peek(request, 0)).limits.map((l) => [l.name, l.remaining]);
      assert.deepEqual(left, [['rate', 0], ['bucket', 0], ['hourly', 0], ['counter', 0], ['log', 0]]);
    })));

/** A limit per user and one for all: a reset of one user's keys leaves the global key. */
const oneKeyOfTwo = () => ({
  limits: [
    { name: 'user', by: ['user'], limiter: LIMITS.gcra() },
    { name: 'all', limiter: new rk.FixedWindow({ limit: 10, windowMs: 3_600_000 }) },
  ],
});

/**
 * `mine` books for a user (the global key born before, by another user's
 * call), `other` (`mine` itself, for its own reset) resets the user's key and
 * takes its 2 units anew: each key's birth goes back with its own limit's, so
 * the cancel gives back to the global key alone.
 */
async function cancelAfterResetOfOneKeyGivesBackToTheOthers(mine, other) {
  assert.equal((await mine.tryAcquire({ user: 'first' })).allowed, true);
  const booking = await mine.reserve({ user: 'u' }, 1, 0);
  assert.equal(booking.ok, true);
  assert.equal(await other.reset({ user: 'u' }), 1);
  assert.equal(await admitted(() => other.tryAcquire({ user: 'u' })), 2);
  await booking.cancel();
  const left = (await other.peek({ user: 'u' }, 0)).limits.map((l) => [l.name, l.remaining]);
  assert.deepEqual(left, [['user', 0], ['all', 7]]);
}

test('a policy cancel() after another process reset one of its keys gives back to the others', () =>
  withClient('ioredis', (first) =>
    withClient('node-redis', async (second) => {
      const p = prefix('policy-one-key');
      const mine = new RedisPolicy(first, oneKeyOfTwo(), { prefix: p, clock: () => T });
      const other = new RedisPolicy(second, oneKeyOfTwo(), { prefix: p, clock: () => T });
      await cancelAfterResetOfOneKeyGivesBackToTheOthers(mine, other);
    })));

test('a policy cancel() after its own reset of one of its keys gives back to the others', () =>
  withClient('ioredis', async (client) => {
    // Its own reset is told as another's is, per key, by the births. (The
    // store once counted its own resets, and gave nothing back to any limit:
    // less than it could, though never more.)
    const policy = new RedisPolicy(client, oneKeyOfTwo(), { prefix: prefix('policy-own-reset'), clock: () => T });
    await cancelAfterResetOfOneKeyGivesBackToTheOthers(policy, policy);
  }));

for (const [algorithm, make] of Object.entries(SHORT)) {
  test(`${algorithm}: a cancel() after the key expired and was made again gives nothing back`, () =>
    withClient('ioredis', async (client) => {
      // From 1970 on the callers' clock (a monotonic one): a key expires a
      // second after its last call, its state forgotten, whatever that clock
      // says meanwhile (here: nothing, it stands still).
      const now = 1_000_000;
      const limiter = new RedisLimiter(client, make(), { prefix: prefix(`expired-${algorithm}`), clock: () => now });
      const booking = await limiter.reserve('k', 1, 0);
      assert.equal(booking.ok, true);
      const [key] = limiter._keys('k');
      await until(async () => Number(await client.exists(key)) === 0, 10_000, () => 'the key never expired');
      assert.equal(await admitted(() => limiter.tryAcquire('k')), 2);
      await booking.cancel();
      assert.equal((await limiter.tryAcquire('k')).allowed, false);
    }));
}

for (const [algorithm, make] of Object.entries(LIMITS)) {
  test(`${algorithm}: a late reply's units after another process reset the key give nothing back`, () =>
    withClient('ioredis', (first) =>
      withClient('ioredis', async (second) => {
        // The units an acquire took for a caller answered without them (its
        // reply late, onError answered) go back with the acquire reply's
        // marks: after a reset elsewhere and the key used again by one unit
        // at the same instant (a bucket's line ends where the call left it),
        // they freed a unit taken anew.
        const p = prefix(`late-${algorithm}`);
        const held = holdingAcquires(first);
        const mine = new RedisLimiter(held.client, make(), { prefix: p, clock: () => T, onError: 'open', commandTimeoutMs: 50 });
        const other = new RedisLimiter(second, make(), { prefix: p, clock: () => T });
        // The script loaded by a limiter with no commandTimeoutMs to meet (at
        // 50 ms, a stall of the machine failed this call).
        assert.equal((await other.peek('k', 0)).fromStore, true);
        // Redis takes the unit; its reply is late, and onError answers.
        assert.equal((await mine.tryAcquire('k')).fromStore, false);
        // Redis ran it before the reset (sent on another connection, it could
        // come after it, had Redis stalled past the timeout).
        await until(async () => (await other.peek('k', 0)).remaining === 1);
        assert.equal(await other.reset('k'), true);
        assert.equal((await other.tryAcquire('k')).allowed, true);
        held.release();
        await Promise.all(held.acquires);
        // The give-back, if any, is sent as the reply comes, before the next turn.
        await new Promise(setImmediate);
        await Promise.all(held.refunds);
        assert.equal(await admitted(() => other.tryAcquire('k')), 1);
      })));
}

// PROTOCOL.md's commands for the clients' ACL user, but TIME: a deployment
// that forbids it in scripts decides on the callers' clock (README, "Time").
const WITHOUT_TIME = [
  '+evalsha', '+script|load', '+eval', '+get', '+set', '+pexpire', '+pexpireat', '+unlink',
  '+zadd', '+zcount', '+zrangebyscore', '+zrevrangebyscore', '+zremrangebyscore',
];

/**
 * Runs `body(clients, p)` with two ioredis clients of an ACL user without
 * TIME, allowed the keys of prefix `p` (made from `name`).
 */
function withoutTime(name, body) {
  return withClient('ioredis', async (admin) => {
    const p = prefix(name);
    const user = `rk-${name}-${process.pid}`;
    await admin.call('ACL', 'SETUSER', user, 'reset', 'on', '>secret', `~${p}*`, ...WITHOUT_TIME);
    const clients = [];
    try {
      // No ready check: it runs INFO, which the user may not.
      for (let i = 0; i < 2; i++) clients.push(await ioredis({ username: user, password: 'secret', enableReadyCheck: false }));
      await body(clients, p);
    } finally {
      for (const client of clients) await close(client);
      await admin.call('ACL', 'DELUSER', user);
    }
  });
}

for (const [algorithm, make] of Object.entries(LIMITS)) {
  test(`${algorithm}: on the callers' clock, a user without TIME books, gives back, and tells a reset elsewhere`, () =>
    // The key's birth is the server's TIME where the script may call it,
    // else the nonce of the call that wrote the key first: a key used again
    // at another instant since a reset still gives nothing back.
    withoutTime(`no-time-${algorithm}`, async (clients, p) => {
      let now = T;
      const [mine, other] = limiters(clients[0], clients[1], make, p, () => now);
      let booking = await mine.reserve('a', 1, 0);
      assert.equal(booking.ok, true);
      await booking.cancel();
      assert.equal(await admitted(() => mine.tryAcquire('a')), 2);
      booking = await mine.reserve('b', 1, 0);
      assert.equal(booking.ok, true);
      assert.equal(await other.reset('b'), true);
      now = T + 1;
      assert.equal(await admitted(() => other.tryAcquire('b')), 2);
      await booking.cancel();
      assert.equal((await other.tryAcquire('b')).allowed, false);
    }));

  test(`${algorithm}: on the callers' clock held still, a user without TIME tells a reset by another limiter`, () =>
    // Without TIME a key's birth is its first call's nonce (PROTOCOL.md,
    // "ACL"): the key reset by another limiter object and used again at the
    // very same instant has another birth, and the cancel gives nothing back
    // (with the callers' instant as the birth, it freed a unit taken since).
    withoutTime(`no-time-still-${algorithm}`, (clients, p) => cancelAfterResetElsewhereGivesNothingBack(limiters(clients[0], clients[1], make, p))));
}
