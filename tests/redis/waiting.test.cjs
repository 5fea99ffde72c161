'use strict';
// The waiting acquire of RedisLimiter and RedisPolicy on the caller's
// `clock`: it waits until its slot has come on that clock, as the in-process
// acquire waits on the limiter's, sleeping again what is left there after
// each sleep, with no other round trip. No real time: the acquire's sleeps
// run at once, moving the time the caller's clock is made of.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { rk, rkRedis, withClient, prefix } = require('./helpers.cjs');

const { RedisLimiter, RedisPolicy } = rkRedis;

/** The timers module the Redis classes sleep with: only its timers are made to run at once. */
const SLEEPER = path.join('lib', 'redis', 'timers.cjs');

/**
 * `fn(time)` while every timer an acquire sleeps on (lib/redis/timers.cjs)
 * runs at once, moving `time.now` (ms, from 50 s) by its delay and adding
 * it to `time.sleeps`; other timers (the client's, a round trip's bound)
 * run as usual. `time.onSleep()` runs after each sleep.
 */
async function onTime(fn) {
  const time = { now: 50_000, sleeps: [], onSleep: () => {} };
  const realSetTimeout = globalThis.setTimeout;
  globalThis.setTimeout = (callback, ms, ...rest) => {
    // Told by the stack: the sleeper sets its timers inside its own functions.
    if (!new Error().stack.includes(SLEEPER)) return realSetTimeout(callback, ms, ...rest);
    time.sleeps.push(ms);
    time.now += ms;
    time.onSleep();
    return realSetTimeout(callback, 0, ...rest);
  };
  try {
    return await fn(time);
  } finally {
    globalThis.setTimeout = realSetTimeout;
  }
}

/** A RedisLimiter or RedisPolicy (`how`) of one unit per `intervalMs` on `clock`, and the key or request of its calls. */
function made(client, how, intervalMs, clock) {
  const gcra = new rk.Gcra({ burst: 1, emissionIntervalMs: intervalMs });
  const options = { prefix: prefix(`waiting-${how}`), clock };
  if (how === 'limiter') return [new RedisLimiter(client, gcra, options), 'k'];
  return [new RedisPolicy(client, { limits: [{ name: 'one', limiter: gcra }] }, options), {}];
}

for (const how of ['limiter', 'policy']) {
  // One unit per `intervalMs` on a clock counting tenths of a second: each
  // sleep what was left there, 50 ms once it read 50.2 s; 40 ms again while
  // it read 50.0 s, up to 50.12 s (50.1 s there).
  for (const [intervalMs, slept] of [
    [250, [250, 50]],
    [40, [40, 40, 40]],
  ]) {
    test(`a ${how}'s acquire on a clock coarser than its timers waits for its slot on that clock (${intervalMs} ms)`, () =>
      withClient('ioredis', (client) =>
        onTime(async (time) => {
          // A timer's wait ends short of the slot on a clock counting
          // tenths, 50 ms short or not moved at all: one sleep was trusted,
          // and the acquire resolved before its slot there, where a peek at
          // that instant still refused.
          const coarse = () => Math.floor(time.now / 100) * 100;
          const [store, target] = made(client, how, intervalMs, coarse);
          assert.equal((await store.tryAcquire(target)).allowed, true);
          await store.acquire(target);
          assert.ok(coarse() >= 50_000 + intervalMs, `let go at ${coarse()} on its clock, before its slot`);
          assert.equal((await store.peek(target, 0)).allowed, true, 'its slot has not come on its clock');
          assert.deepEqual(time.sleeps, slept);
        }),
      ));
  }

  test(`a ${how}'s acquire on a clock at half its timers' speed sleeps what is left until its slot`, () =>
    withClient('ioredis', (client) =>
      onTime(async (time) => {
        // Each sleep covers half of what was left on that clock: the
        // acquire sleeps again for the rest, until the slot has come there
        // (to the wire's µs).
        const slow = () => 50_000 + (time.now - 50_000) / 2;
        const [store, target] = made(client, how, 250, slow);
        assert.equal((await store.tryAcquire(target)).allowed, true);
        await store.acquire(target);
        assert.ok(slow() >= 50_250 - 0.0005, `let go at ${slow()} on its clock, before its slot`);
        assert.equal((await store.peek(target, 0)).allowed, true, 'its slot has not come on its clock');
        assert.deepEqual(time.sleeps.slice(0, 3), [250, 125, 62.5]);
      }),
    ));

  test(`a ${how}'s acquire rejects with the error of a clock that throws while it waits, its booking given back`, () =>
    withClient('ioredis', (client) =>
      onTime(async (time) => {
        // Read again after the sleep, for what is left: its throw rejects
        // the acquire, and the booking is given back as an aborted one's
        // (the clock was never read again, and the acquire resolved). It
        // throws once: the give-back reads it too, for its refund.
        let failing = false;
        const clock = () => {
          if (failing) {
            failing = false;
            throw new Error('the clock failed');
          }
          return time.now;
        };
        const [store, target] = made(client, how, 250, clock);
        assert.equal((await store.tryAcquire(target)).allowed, true);
        time.onSleep = () => {
          failing = true;
        };
        await assert.rejects(store.acquire(target), { message: 'the clock failed' });
        time.onSleep = () => {};
        assert.deepEqual(time.sleeps, [250]);
        // Kept, the booking would hold the key until 50.5 s. (The give-back
        // goes once the acquire rejected: it is looked for until it landed.)
        let allowed = false;
        for (let i = 0; i < 100 && !allowed; i++) allowed = (await store.peek(target)).allowed;
        assert.equal(allowed, true, 'the booking was not given back');
      }),
    ));
}

test('an acquire on a clock standing still waits until its signal aborts, its booking given back', () =>
  withClient('ioredis', (client) =>
    onTime(async (time) => {
      // A clock that never moves never reaches the slot: the acquire sleeps
      // again and again (`timeoutMs` bounds the wait booked, not this),
      // until its signal aborts, which gives its booking back, as
      // in-process. It resolved after its first sleep, before its slot on
      // that clock.
      const [limiter] = made(client, 'limiter', 1, () => 100_000);
      assert.equal((await limiter.tryAcquire('k')).allowed, true);
      const controller = new AbortController();
      time.onSleep = () => {
        if (time.sleeps.length === 5) controller.abort();
      };
      await assert.rejects(limiter.acquire('k', 1, { signal: controller.signal, timeoutMs: 1000 }), { name: 'AbortError' });
      assert.deepEqual(time.sleeps, [1, 1, 1, 1, 1]);
      // Kept, the booking would put the next unit 2 ms away. (The give-back
      // goes once the acquire rejected: it is looked for until it landed.)
      let retryAfterMs;
      for (let i = 0; i < 100 && retryAfterMs !== 1; i++) retryAfterMs = (await limiter.peek('k')).retryAfterMs;
      assert.equal(retryAfterMs, 1, 'the booking was not given back');
    }),
  ));

test("an acquire on the server's clock sleeps once", () =>
  withClient('ioredis', (client) =>
    onTime(async (time) => {
      // The slot is on the server's clock (TIME, read by the script), which
      // only another round trip would read again: one sleep, of the wait
      // booked (see Store's sleepUntil). Passes before the caller's clock
      // was read again too: it pins the choice.
      const limiter = new RedisLimiter(client, new rk.Gcra({ burst: 1, emissionIntervalMs: 60_000 }), { prefix: prefix('waiting-server') });
      assert.equal((await limiter.tryAcquire('k')).allowed, true);
      await limiter.acquire('k');
      assert.equal(time.sleeps.length, 1);
      assert.ok(time.sleeps[0] > 59_000 && time.sleeps[0] <= 60_000, `slept ${time.sleeps[0]} ms`);
    }),
  ));
