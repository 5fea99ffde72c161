'use strict';
// Faults: the server stopped in the middle of a run (scripts/redis.sh server
// stop), then started again. Each limiter's onError policy decides meanwhile
// (fromStore false), no call rejects, nothing is left unhandled, and decisions
// come from the store again once it is back. Run this file alone
// (--test-concurrency=1): it stops the server every other file uses.
const test = require('node:test');
const assert = require('node:assert/strict');
const { rk, rkRedis, ioredis, nodeRedis, close, prefix, redisSh, sleep, until } = require('./helpers.cjs');

const { RedisLimiter, RedisPolicy } = rkRedis;
const HOUR = 3_600_000;

const unhandled = [];
process.on('unhandledRejection', (reason) => unhandled.push(reason));

/** Calls `decide()` until it answers from the store (the client reconnected), at most `ms`. */
async function untilStore(decide, ms = 15_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const d = await decide();
    if (d.fromStore) return d;
    assert.ok(Date.now() < deadline, 'decisions did not come from the store again after the restart');
    await sleep(50);
  }
}

const VARIANTS = {
  'ioredis (no offline queue)': () => ioredis(),
  'ioredis (default options)': () => ioredis({ enableOfflineQueue: true, maxRetriesPerRequest: 20 }),
  'node-redis (no offline queue)': () => nodeRedis(),
  'node-redis 4 (no offline queue)': () => nodeRedis({}, 'redis4'),
};

for (const [name, connect] of Object.entries(VARIANTS)) {
  test(`${name}: the fault policy decides while the server is down; decisions resume after a restart`, async () => {
    const client = await connect();
    const faults = prefix('faults');
    const options = (onError) => ({ prefix: faults, onError, commandTimeoutMs: 300 });
    const window = () => new rk.FixedWindow({ limit: 3, windowMs: HOUR });
    const closed = new RedisLimiter(client, window(), options('closed'));
    // What the store must answer while it is up goes through twins without a
    // commandTimeoutMs, on the same keys: a stall of the machine past 300 ms
    // had onError answer it (fromStore false). The limiters above answer the
    // outage, and show that their decisions come from the store again.
    const closedUp = new RedisLimiter(client, window(), { prefix: faults });
    const open = new RedisLimiter(client, window(), options('open'));
    const fallback = new rk.KeyedLimiter(new rk.FixedWindow({ limit: 2, windowMs: HOUR }));
    const keyed = new RedisLimiter(client, window(), options(fallback));
    const policy = new RedisPolicy(client, '3/hour', { ...options(new rk.Policy('2/hour')), algorithm: 'fixed_window' });
    // Outside the try, so that a failure stops the load too (else its loop
    // keeps the file from ever ending).
    let running = true;
    try {
      assert.equal((await closedUp.tryAcquire('k')).fromStore, true);
      assert.equal((await new RedisPolicy(client, '3/hour', { prefix: faults, algorithm: 'fixed_window' }).tryAcquire()).fromStore, true);

      // A steady load of hot-key callers (batched) across the outage.
      const seen = { store: 0, fallback: 0 };
      const load = (async () => {
        while (running) {
          const ds = await Promise.all(Array.from({ length: 16 }, () => open.tryAcquire('load', 0)));
          for (const d of ds) seen[d.fromStore ? 'store' : 'fallback'] += 1;
          await sleep(5);
        }
      })();

      // The load has been answered by the store before the outage.
      await until(() => seen.store > 0);
      redisSh('server', 'stop');
      const down = await closed.tryAcquire('k');
      assert.deepEqual(
        { allowed: down.allowed, remaining: down.remaining, fromStore: down.fromStore },
        { allowed: false, remaining: 0, fromStore: false },
      );
      assert.ok(down.retryAfterMs > 0);
      assert.equal(down.resetAfterMs, down.retryAfterMs, 'the RateLimit header says no sooner than Retry-After');
      // A refund has nothing to give back to, and rejects nothing.
      assert.equal(await closed.refund('k', 1), undefined);
      const up = await open.tryAcquire('k');
      assert.deepEqual({ allowed: up.allowed, remaining: up.remaining, fromStore: up.fromStore }, { allowed: true, remaining: 3, fromStore: false });
      // The in-process fallback decides by its own limits, per key.
      const local = [];
      for (let i = 0; i < 3; i++) local.push(await keyed.tryAcquire('k'));
      assert.deepEqual(local.map((d) => [d.allowed, d.fromStore]), [[true, false], [true, false], [false, false]]);
      // An acquire aborted after the fallback admitted it gives the unit back there.
      const aborted = new AbortController();
      const pending = keyed.acquire('a', 1, { signal: aborted.signal });
      aborted.abort(new Error('stop'));
      await assert.rejects(pending, { message: 'stop' });
      assert.equal(fallback.peek('a', 0).remaining, 2);
      const peeked = await keyed.peek('other');
      assert.equal(peeked.fromStore, false);
      const p = [];
      for (let i = 0; i < 3; i++) p.push(await policy.tryAcquire());
      // Denied by the fallback's 2/hour, named by the policy's own limit (as in Python).
      assert.deepEqual(p.map((d) => [d.allowed, d.fromStore, d.deniedBy]), [[true, false, null], [true, false, null], [false, false, '3/hour']]);
      // Waiting acquire through the outage: closed retries, open proceeds.
      await open.acquire('k', 1, { timeoutMs: 100 });
      await assert.rejects(closed.acquire('k', 1, { timeoutMs: 100 }), {
        name: 'TimeoutError',
        message: /would exceed timeoutMs \(100 ms\) \(Redis did not answer: the onError limiter decided\)$/,
      });
      // Concurrent batched callers all get the fallback.
      const burst = await Promise.all(Array.from({ length: 64 }, () => closed.tryAcquire('hot')));
      assert.ok(burst.every((d) => !d.allowed && !d.fromStore));

      redisSh('server', 'start');
      // (Cost 0: with an offline queue, ioredis sends the calls that timed out
      // during the outage once it reconnects, and they count until their
      // late replies give them back.)
      await untilStore(() => closed.tryAcquire('after', 0));
      await untilStore(() => closed.tryAcquire('fresh', 0));
      const back = await closedUp.tryAcquire('fresh');
      assert.deepEqual([back.allowed, back.fromStore, back.remaining], [true, true, 2]);
      assert.equal((await untilStore(() => policy.tryAcquire(undefined, 0))).fromStore, true);
      assert.equal((await untilStore(() => keyed.tryAcquire('k2'))).fromStore, true);
      // ... and again after it.
      const answered = seen.store;
      await until(() => seen.store > answered);
      running = false;
      await load;
      assert.ok(seen.store > 0 && seen.fallback > 0, JSON.stringify(seen));
      await sleep(50);
      assert.deepEqual(unhandled, []);
    } finally {
      running = false;
      redisSh('server', 'start');
      await close(client);
    }
  });
}
