'use strict';
// The JS API itself: every class, its getters, the decision and reservation
// shapes, defaults, the clock, reserve / refund / reconfigure, and every bad
// argument. Runs unchanged against the napi addon and the wasm build (impl.cjs).

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { Worker } = require('node:worker_threads');

const FakeTimers = require('@sinonjs/fake-timers');

const api = require('./impl.cjs');
const { assertLimiterError } = require('./helpers.cjs');

const { Limiter, TokenBucket, Gcra, LeakyBucket, SlidingWindowLog, SlidingWindowCounter, FixedWindow, RateLimited } = api;

const DECISION_KEYS = ['allowed', 'limit', 'remaining', 'resetAfterMs', 'retryAfterMs'];
const RESERVATION_KEYS = ['atMs', 'cost', 'decision', 'ok', 'waitMs'];

const bucketOptions = () => ({ capacity: 3, refillTokens: 1, refillPeriodMs: 1000 });
const windowOptions = () => ({ limit: 3, windowMs: 1000 });

// Every class, built to admit 3 units at once at 0 ms: [name, factory, algorithm,
// windowMs, own getters, resetAfterMs once 3 units are taken at 0 ms].
const CLASSES = [
  ['TokenBucket', (o) => new TokenBucket({ ...bucketOptions(), ...o }), 'token_bucket', 3000,
    { capacity: 3, refillTokens: 1, refillPeriodMs: 1000, initialTokens: 3, refill: 'greedy' }, 3000],
  ['TokenBucket.fromBandwidths', (o) => TokenBucket.fromBandwidths([bucketOptions(), { capacity: 10, refillTokens: 10, refillPeriodMs: 60_000, refill: 'interval' }], o),
    'token_bucket', 3000, { capacity: 3, refillTokens: 1, refillPeriodMs: 1000, initialTokens: 3, refill: 'greedy' }, 60_000],
  ['Gcra', (o) => new Gcra({ burst: 3, emissionIntervalMs: 1000, ...o }), 'gcra', 3000, { burst: 3, emissionIntervalMs: 1000 }, 3000],
  ['Gcra.perPeriod', (o) => Gcra.perPeriod({ burst: 3, tokens: 2, periodMs: 2000, ...o }), 'gcra', 3000, { burst: 3, emissionIntervalMs: 1000 }, 3000],
  ['LeakyBucket', (o) => new LeakyBucket({ capacity: 3, intervalMs: 1000, ...o }), 'leaky_bucket', 3000, { capacity: 3, intervalMs: 1000 }, null],
  ['SlidingWindowLog', (o) => new SlidingWindowLog({ ...windowOptions(), ...o }), 'sliding_window_log', 1000, {}, 1000],
  ['SlidingWindowCounter', (o) => new SlidingWindowCounter({ ...windowOptions(), ...o }), 'sliding_window_counter', 1000, {}, null],
  ['FixedWindow', (o) => new FixedWindow({ ...windowOptions(), ...o }), 'fixed_window', 1000, {}, 1000],
];

function assertDecision(d) {
  assert.equal(Object.getPrototypeOf(d), Object.prototype, 'a decision is a plain object');
  assert.deepStrictEqual(Object.keys(d).sort(), DECISION_KEYS);
  assert.equal(typeof d.allowed, 'boolean');
  for (const key of ['remaining', 'limit', 'retryAfterMs', 'resetAfterMs']) {
    assert.equal(typeof d[key], 'number', key);
    assert.ok(Number.isFinite(d[key]) && d[key] >= 0, `${key} = ${d[key]}`);
  }
  assert.ok(Number.isSafeInteger(d.remaining) && Number.isSafeInteger(d.limit));
}

/** Replaces `performance.now` for the duration of `fn`. */
function withClock(now, fn) {
  const own = Object.getOwnPropertyDescriptor(performance, 'now');
  performance.now = now;
  try {
    return fn();
  } finally {
    if (own) Object.defineProperty(performance, 'now', own);
    else delete performance.now;
  }
}

describe('exports', () => {
  it('are the six limiter classes, their base, RateLimited and the server helpers', () => {
    for (const C of [TokenBucket, Gcra, LeakyBucket, SlidingWindowLog, SlidingWindowCounter, FixedWindow]) {
      assert.equal(typeof C, 'function');
      assert.ok(C.prototype instanceof Limiter, `${C.name} extends Limiter`);
    }
    assert.equal(typeof api.middleware, 'function');
    assert.equal(typeof api.fastifyHook, 'function');
    assert.ok(new RateLimited('x', 5) instanceof Error);
  });

  it('Limiter itself cannot be built', () => {
    assert.throws(() => new Limiter(), TypeError);
    assert.throws(() => new Limiter({ capacity: 1 }), TypeError);
  });

  it('RateLimited carries code and retryAfterMs', () => {
    const e = new RateLimited('slow down', 250);
    assert.deepStrictEqual([e.name, e.code, e.retryAfterMs, e.message], ['RateLimited', 'rate_limited', 250, 'slow down']);
  });
});

for (const [name, make, algorithm, windowMs, own, fullReset] of CLASSES) {
  describe(name, () => {
    it('a fresh limiter admits its limit at once, with every argument defaulted', () => {
      const limiter = make();
      assert.ok(limiter instanceof Limiter);
      const d = limiter.tryAcquire();
      assertDecision(d);
      assert.deepStrictEqual([d.allowed, d.limit, d.retryAfterMs], [true, 3, 0]);
      if (algorithm !== 'leaky_bucket') assert.equal(d.remaining, 2);
    });

    it('has its getters', () => {
      const limiter = make({ name: 'api' });
      assert.deepStrictEqual(
        { limit: limiter.limit, windowMs: limiter.windowMs, algorithm: limiter.algorithm, name: limiter.name },
        { limit: 3, windowMs, algorithm, name: 'api' },
      );
      for (const [key, value] of Object.entries(own)) assert.equal(limiter[key], value, key);
      assert.equal(make().name, 'default');
    });

    it('answers at explicit times; peek consumes nothing', () => {
      const limiter = make();
      const peeked = limiter.peek(3, 0);
      assertDecision(peeked);
      assert.equal(peeked.allowed, true);
      assert.deepStrictEqual(limiter.peek(3, 0), peeked);
      if (algorithm === 'leaky_bucket') return; // a queue admits at once only what may leave at once
      const taken = limiter.tryAcquire(3, 0);
      assert.deepStrictEqual(taken, { allowed: true, remaining: 0, limit: 3, retryAfterMs: 0, resetAfterMs: fullReset ?? taken.resetAfterMs });
      const denied = limiter.tryAcquire(1, 0);
      assert.equal(denied.allowed, false);
      assert.ok(denied.retryAfterMs > 0);
      assert.deepStrictEqual(limiter.peek(1, 0), denied);
      assert.equal(limiter.tryAcquire(1, denied.retryAfterMs).allowed, true, 'asking again retryAfterMs later succeeds');
    });

    it('cost defaults to 1 for undefined and null; cost 0 reads the state', () => {
      const limiter = make();
      assert.equal(limiter.peek(undefined, 0).remaining, limiter.peek(1, 0).remaining);
      assert.equal(limiter.peek(null, 0).remaining, limiter.peek(1, 0).remaining);
      assert.equal(limiter.tryAcquire(0, 0).allowed, true);
      assert.equal(limiter.peek(3, 0).allowed, true, 'cost 0 took nothing');
    });

    it('reserve books a slot; refund gives it back', () => {
      const limiter = make();
      // A queue holds 3 units in all: book one, so that the next one waits.
      const units = algorithm === 'leaky_bucket' ? 1 : 3;
      const first = limiter.reserve(units, Infinity, 0);
      assert.deepStrictEqual(Object.keys(first).sort(), RESERVATION_KEYS);
      assert.deepStrictEqual(first, { ok: true, waitMs: 0, atMs: 0, cost: units, decision: null });
      const second = limiter.reserve(1, undefined, 0);
      assert.equal(second.ok, true);
      assert.ok(second.waitMs > 0, 'the second booking waits');
      assert.equal(second.atMs, second.waitMs);
      const refused = limiter.reserve(1, second.waitMs / 2, 0);
      assert.equal(refused.ok, false);
      assertDecision(refused.decision);
      assert.equal(refused.waitMs, refused.decision.retryAfterMs);
      assert.equal(refused.atMs, refused.waitMs);
      // Cancelling the second booking makes its slot free again.
      limiter.refund(1, second.atMs);
      assert.deepStrictEqual(limiter.reserve(1, Infinity, 0), second);
    });

    it("a reservation's cancel() gives its booking back once; a refused one's does nothing", () => {
      const units = algorithm === 'leaky_bucket' ? 1 : 3;
      // `calls` cancels the booking that many times; the state after one is the reference.
      const run = (calls) => {
        const limiter = make();
        limiter.reserve(units, Infinity, 0);
        const booked = limiter.reserve(1, Infinity, 0);
        const refused = limiter.reserve(1, booked.waitMs / 2, 0);
        assert.equal(refused.ok, false);
        refused.cancel();
        for (let i = 0; i < calls; i++) booked.cancel();
        return [limiter, booked];
      };
      const [never, booked] = run(0);
      assert.equal(typeof booked.cancel, 'function');
      assert.ok(!Object.keys(booked).includes('cancel'), 'not enumerable: a reservation compares as its fields');
      assert.equal(never.reserve(1, booked.waitMs / 2, 0).ok, false, "cancelling a refusal gave nothing");
      const [once] = run(1);
      assert.deepStrictEqual(once.reserve(1, Infinity, 0), booked, 'the slot is free again');
      const [twice] = run(2);
      assert.deepStrictEqual(twice.toBytes(), run(1)[0].toBytes(), 'a second cancel() gives nothing more');
    });

    it('reconfigure takes another limiter of the same class', () => {
      const limiter = make({ name: 'kept' });
      limiter.tryAcquire(1, 0);
      limiter.reconfigure(make(), 0);
      assert.equal(limiter.limit, 3);
      assert.equal(limiter.name, 'kept', 'the name stays');
    });

    it('reconfigure takes only the configuration of the other limiter, not its state', () => {
      const used = make();
      while (used.tryAcquire(1, 0).allowed);
      const reconfigured = (other, called) => {
        const limiter = make();
        if (called) limiter.tryAcquire(1, 0);
        limiter.reconfigure(other === 'itself' ? limiter : other, 0);
        return limiter.toBytes();
      };
      for (const called of [false, true]) {
        const expected = reconfigured(make(), called);
        assert.deepStrictEqual(reconfigured(used, called), expected, `a used limiter (called before: ${called})`);
        assert.deepStrictEqual(reconfigured('itself', called), expected, `itself (called before: ${called})`);
      }
    });

    it('a clock option replaces performance.now()', () => {
      let t = 5_000;
      const limiter = make({ clock: () => t });
      assert.equal(limiter.tryAcquire(3).allowed, true);
      const before = limiter.peek(1);
      t += 10_000;
      const after = limiter.peek(1);
      assert.ok(after.retryAfterMs <= before.retryAfterMs);
      assert.equal(after.allowed, true, 'ten seconds later the limiter has room again');
    });

    it('works in a worker thread', async () => {
      const worker = new Worker(
        `const api = require(${JSON.stringify(path.join(__dirname, 'impl.cjs'))});
         const { parentPort } = require('node:worker_threads');
         const limiter = new api.FixedWindow({ limit: 2, windowMs: 1000 });
         parentPort.postMessage([1, 2, 3].map(() => limiter.tryAcquire(1, 0).allowed));`,
        { eval: true, env: process.env },
      );
      const [answer] = await Promise.all([
        new Promise((resolve, reject) => worker.once('message', resolve).once('error', reject)),
        // The main thread keeps deciding meanwhile, with its own scratch.
        Promise.resolve().then(() => assert.equal(make().tryAcquire(3, 0).allowed, true)),
      ]);
      assert.deepStrictEqual(answer, [true, true, false]);
      await worker.terminate();
    });
  });
}

describe('TokenBucket', () => {
  it('answers in milliseconds, exact to the nanosecond', () => {
    const bucket = new TokenBucket({ capacity: 2, refillTokens: 1, refillPeriodMs: 1000 });
    assert.deepStrictEqual(bucket.tryAcquire(2, 0), {
      allowed: true, remaining: 0, limit: 2, retryAfterMs: 0, resetAfterMs: 2000,
    });
    const denied = bucket.tryAcquire(1, 250.000001);
    assert.equal(denied.allowed, false);
    assert.equal(Math.round(denied.retryAfterMs * 1e6), 749_999_999);
    assert.equal(Math.round(denied.resetAfterMs * 1e6), 1_749_999_999);
    assert.equal(bucket.tryAcquire(1, 1000).allowed, true);
  });

  it('initialTokens and interval refill', () => {
    const bucket = new TokenBucket({ capacity: 4, refillTokens: 2, refillPeriodMs: 100, initialTokens: 1, refill: 'interval' });
    assert.deepStrictEqual([bucket.initialTokens, bucket.refill], [1, 'interval']);
    assert.equal(bucket.tryAcquire(1, 0).remaining, 0);
    const denied = bucket.tryAcquire(1, 50);
    assert.equal(denied.retryAfterMs, 50, 'the whole refill comes at the end of the period');
    assert.equal(bucket.tryAcquire(2, 100).allowed, true);
  });

  it('fromBandwidths enforces every bandwidth and reports them', () => {
    const bucket = TokenBucket.fromBandwidths(
      [{ capacity: 2, refillTokens: 2, refillPeriodMs: 1000 }, { capacity: 3, refillTokens: 3, refillPeriodMs: 60_000 }],
      { name: 'both' },
    );
    assert.equal(bucket.limit, 2);
    assert.equal(bucket.name, 'both');
    assert.deepStrictEqual(bucket.bandwidths.map((b) => b.capacity), [2, 3]);
    bucket.bandwidths[0].capacity = 99;
    assert.equal(bucket.bandwidths[0].capacity, 2, 'bandwidths is a copy');
    assert.equal(bucket.tryAcquire(2, 0).allowed, true);
    assert.equal(bucket.tryAcquire(1, 1000).allowed, true);
    assert.equal(bucket.tryAcquire(1, 2000).retryAfterMs, 18_000, 'the per-minute band decides');
  });

  it('accepts the largest values that fit', () => {
    const bucket = new TokenBucket({ capacity: 2 ** 53 - 1, refillTokens: 2 ** 53 - 1, refillPeriodMs: 1 });
    assert.equal(bucket.tryAcquire(2 ** 53 - 1, 0).allowed, true);
  });

  it('reconfigure keeps whole tokens, capped at the new capacity', () => {
    const bucket = new TokenBucket({ capacity: 10, refillTokens: 1, refillPeriodMs: 1000 });
    bucket.tryAcquire(4, 0);
    assert.equal(bucket.capacity, 10, 'read before: the getters then answer for the new configuration');
    bucket.reconfigure(new TokenBucket({ capacity: 5, refillTokens: 1, refillPeriodMs: 100 }), 0);
    assert.deepStrictEqual([bucket.capacity, bucket.refillPeriodMs, bucket.windowMs], [5, 100, 500]);
    assert.equal(bucket.peek(0, 0).remaining, 5);
  });
});

describe('Gcra, LeakyBucket and the windows', () => {
  it('Gcra is the bucket of burst refilling one unit per interval', () => {
    const gcra = Gcra.perPeriod({ burst: 3, tokens: 10, periodMs: 1000 });
    for (let i = 0; i < 3; i++) assert.equal(gcra.tryAcquire(1, 0).allowed, true);
    assert.equal(gcra.tryAcquire(1, 40).retryAfterMs, 60);
    assert.equal(gcra.tryAcquire(1, 100).allowed, true);
  });

  it('LeakyBucket shapes: reserve delays, tryAcquire only what leaves at once, a full queue refuses', () => {
    const queue = new LeakyBucket({ capacity: 3, intervalMs: 100 });
    assert.deepStrictEqual([0, 1, 2].map(() => queue.reserve(1, Infinity, 0).waitMs), [0, 100, 200]);
    const full = queue.reserve(1, Infinity, 0);
    assert.equal(full.ok, false);
    assert.equal(full.decision.remaining, 0);
    assert.equal(queue.tryAcquire(1, 250).allowed, false);
    assert.equal(queue.tryAcquire(1, 300).allowed, true);
  });

  it('SlidingWindowLog admits at most limit units in any window', () => {
    const log = new SlidingWindowLog({ limit: 2, windowMs: 1000 });
    assert.equal(log.tryAcquire(1, 0).allowed, true);
    assert.equal(log.tryAcquire(1, 400).allowed, true);
    assert.deepStrictEqual(log.tryAcquire(1, 500), { allowed: false, remaining: 0, limit: 2, retryAfterMs: 500, resetAfterMs: 900 });
    assert.equal(log.tryAcquire(1, 1000).allowed, true);
  });

  it('SlidingWindowCounter weighs the previous window', () => {
    const counter = new SlidingWindowCounter({ limit: 10, windowMs: 1000 });
    assert.equal(counter.tryAcquire(10, 0).allowed, true);
    const denied = counter.tryAcquire(3, 1250);
    assert.deepStrictEqual([denied.allowed, denied.remaining, denied.retryAfterMs], [false, 2, 50]);
  });

  it('FixedWindow resets at the window boundary', () => {
    const fixed = new FixedWindow({ limit: 3, windowMs: 1000 });
    assert.equal(fixed.tryAcquire(3, 900).allowed, true);
    assert.equal(fixed.tryAcquire(1, 950).retryAfterMs, 50);
    assert.equal(fixed.tryAcquire(3, 1000).allowed, true);
  });
});

describe('the default clock is performance.now()', () => {
  const PERIOD = 100_000;
  const make = () => new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: PERIOD });

  it('an explicit performance.now() reading, then the default, and back', () => {
    const limiter = make();
    assert.equal(limiter.tryAcquire(1, performance.now()).allowed, true);
    const d = limiter.tryAcquire();
    assert.equal(d.allowed, false);
    assert.ok(d.retryAfterMs <= PERIOD && d.retryAfterMs > PERIOD - 10_000, `retryAfterMs ${d.retryAfterMs}`);
    const e = limiter.tryAcquire(1, performance.now());
    assert.ok(e.retryAfterMs <= d.retryAfterMs);
  });

  it('reads a replaced performance.now at each call', () => {
    const limiter = make();
    withClock(() => 5_000, () => assert.equal(limiter.tryAcquire().allowed, true));
    const d = withClock(() => 5_000 + PERIOD / 4, () => limiter.tryAcquire());
    assert.equal(d.retryAfterMs, (PERIOD * 3) / 4);
    assert.equal(limiter.tryAcquire(1, 5_000 + PERIOD).allowed, true);
  });

  it('refund and reserve default to the clock too', () => {
    let t = 0;
    const limiter = new FixedWindow({ limit: 1, windowMs: 1000, clock: () => t });
    assert.equal(limiter.tryAcquire().allowed, true);
    limiter.refund(1);
    assert.equal(limiter.tryAcquire().allowed, true, 'the refund went to the window it was taken in');
    t = 500;
    assert.deepStrictEqual(limiter.reserve(), { ok: true, waitMs: 500, atMs: 1000, cost: 1, decision: null });
  });

  it('a clock that returns a non-number is a TypeError, and one that returns NaN or less than 0 a RangeError, naming the clock', () => {
    const bucket = new TokenBucket(bucketOptions());
    withClock(() => 'soon', () => assertLimiterError(() => bucket.tryAcquire(), 'invalid_type', 'clock'));
    const odd = new TokenBucket({ ...bucketOptions(), clock: () => 1n });
    assertLimiterError(() => odd.peek(), 'invalid_type', 'clock');
    for (const wrong of [NaN, -1, Infinity]) {
      const broken = new TokenBucket({ ...bucketOptions(), clock: () => wrong });
      const error = assertLimiterError(() => broken.tryAcquire(), 'invalid_value', 'clock');
      assert.match(error.message, new RegExp(`not ${wrong}$`));
    }
    assert.equal(bucket.tryAcquire(1, 0).remaining, 2);
  });

  // The napi build ties its native reading to the runtime's performance.now
  // once, as it loads: a performance.now replaced on its prototype before
  // then stays the runtime's own clock to the JS layer, and its unusable
  // readings were taken for an offset (-Infinity: 2^63 ns off, decided on).
  it('a performance.now replaced before the package loads, returning no usable reading, is refused as any clock', () => {
    const { spawnSync } = require('node:child_process');
    // Each with the error the JS layer gives reading that clock itself:
    // finite ones too, negative or past 2^64 ns (1e16 saturated into the
    // offset, -1 gave one: the napi build decided where the wasm one refuses).
    const tooLarge = /^`nowMs` is too large/;
    const refused = (wrong) => new RegExp(`^\`clock\` must return .* not ${Number(wrong)}$`);
    for (const [wrong, message] of [['-Infinity', refused], ['NaN', refused], ['-1e16', refused], ['-1', refused], ['1e16', () => tooLarge], ['1e300', () => tooLarge]]) {
      const script = `
        Object.getPrototypeOf(performance).now = () => ${wrong};
        const api = require(${JSON.stringify(path.join(__dirname, 'impl.cjs'))});
        const bucket = new api.TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 1000 });
        try {
          console.log(JSON.stringify(bucket.tryAcquire()));
        } catch (error) {
          console.log(JSON.stringify({ name: error.name, code: error.code, message: error.message }));
        }`;
      const run = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', env: process.env });
      assert.equal(run.status, 0, run.stderr);
      const answer = JSON.parse(run.stdout);
      assert.deepStrictEqual({ name: answer.name, code: answer.code }, { name: 'RangeError', code: 'invalid_value' }, run.stdout);
      assert.match(answer.message, message(wrong));
    }
  });

  // A reading 2^63 ns or more ahead of the native clock is a time, yet no
  // offset from it: the napi build leaves such a clock to the JS layer, as
  // the wasm build leaves every clock (wrapped, the offset read -8.4e18 ns
  // and each decision refused the NaN an overflowing reading became).
  it('a performance.now replaced before the package loads, reading too far ahead of the native clock to tie, is read by the JS layer', () => {
    const { spawnSync } = require('node:child_process');
    const script = `
      Object.getPrototypeOf(performance).now = () => 1e13;
      const api = require(${JSON.stringify(path.join(__dirname, 'impl.cjs'))});
      const window = new api.FixedWindow({ limit: 1, windowMs: 1000 });
      const d = window.tryAcquire();
      console.log(JSON.stringify([d.allowed, d.resetAfterMs, window.tryAcquire().allowed]));`;
    const run = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', env: process.env });
    assert.equal(run.status, 0, run.stderr);
    // 1e13 ms is a whole second: its window ends 1000 ms later.
    assert.deepStrictEqual(JSON.parse(run.stdout), [true, 1000, false]);
  });

  // A window of a billion ms aligned at 0: resetAfterMs tells the instant a
  // call read (the napi build reads the default clock natively).
  it('reads the instant performance.now() would, to the microsecond', () => {
    const W = 1e9;
    const fixed = new FixedWindow({ limit: 1e9, windowMs: W });
    const keyed = new api.KeyedLimiter(fixed);
    // A policy's limit of the same window: one global, one by user.
    const rate = '1000000000/1000000 seconds';
    const policy = api.Policy.fromRates(rate, { algorithm: 'fixed_window' });
    const byUser = api.Policy.fromRates(rate, { algorithm: 'fixed_window', by: ['user'] });
    const reads = [
      () => fixed.tryAcquire(),
      () => fixed.peek(),
      () => keyed.tryAcquire('k'),
      () => keyed.peek('k'),
      () => policy.tryAcquire(),
      () => policy.peek(),
      () => byUser.tryAcquire({ user: 'k' }),
      // A request the scratch cannot carry (over 255 characters) goes as strings.
      () => byUser.peek({ user: 'k'.repeat(300) }),
    ];
    for (const read of reads) {
      for (let i = 0; i < 20; i++) {
        const before = performance.now();
        const at = W - read().resetAfterMs;
        const after = performance.now();
        assert.ok(at >= before - 1e-3 && at <= after + 1e-3, `read ${at} outside [${before}, ${after}]`);
      }
    }
  });

  it("reads a worker thread's own performance.now()", async () => {
    const worker = new Worker(
      `const api = require(${JSON.stringify(path.join(__dirname, 'impl.cjs'))});
       const { parentPort } = require('node:worker_threads');
       const fixed = new api.FixedWindow({ limit: 1e9, windowMs: 1e9 });
       const before = performance.now();
       const at = 1e9 - fixed.tryAcquire().resetAfterMs;
       parentPort.postMessage([before, at, performance.now()]);`,
      { eval: true, env: process.env },
    );
    const [before, at, after] = await new Promise((resolve, reject) => worker.once('message', resolve).once('error', reject));
    await worker.terminate();
    assert.ok(at >= before - 1e-3 && at <= after + 1e-3, `read ${at} outside [${before}, ${after}]`);
  });

  // @sinonjs/fake-timers is what Jest's fake timers are: it replaces
  // globalThis.performance whole, Date and setTimeout.
  it('follows fake timers (@sinonjs/fake-timers), and the runtime clock again once they are gone', () => {
    const limiter = make();
    const keyed = new api.KeyedLimiter(make());
    const policy = api.Policy.fromRates('1/100 seconds');
    const clock = FakeTimers.install({ now: 0 });
    try {
      clock.tick(5_000);
      assert.equal(limiter.tryAcquire().allowed, true);
      assert.equal(keyed.tryAcquire('k').allowed, true);
      assert.equal(policy.tryAcquire().allowed, true);
      clock.tick(PERIOD / 2);
      assert.equal(limiter.peek().retryAfterMs, PERIOD / 2);
      assert.equal(keyed.tryAcquire('k').retryAfterMs, PERIOD / 2);
      assert.equal(policy.tryAcquire().retryAfterMs, PERIOD / 2);
      assert.equal(limiter.reserve(1, 0).decision.retryAfterMs, PERIOD / 2);
    } finally {
      clock.uninstall();
    }
    const fixed = new FixedWindow({ limit: 1e9, windowMs: 1e9 });
    const before = performance.now();
    const at = 1e9 - fixed.tryAcquire().resetAfterMs;
    assert.ok(at >= before - 1e-3 && at <= performance.now() + 1e-3, `read ${at}, not the runtime clock`);
  });

  it('a performance object replaced whole is read once Date or setTimeout is replaced too, as fake timers do', () => {
    for (const name of ['Date', 'setTimeout']) {
      const limiter = make();
      const own = Object.getOwnPropertyDescriptor(globalThis, 'performance');
      const real = globalThis[name];
      globalThis.performance = { now: () => 5_000 };
      globalThis[name] = function fake() {};
      try {
        assert.equal(limiter.tryAcquire().allowed, true, name);
        performance.now = () => 5_000 + PERIOD / 2;
        assert.equal(limiter.peek().retryAfterMs, PERIOD / 2, name);
      } finally {
        globalThis[name] = real;
        Object.defineProperty(globalThis, 'performance', own);
      }
    }
  });
});

// [label, value, code] for a count that must be at least 1.
const BAD_POSITIVE_COUNT = [
  ['0', 0, 'zero_value'],
  ['negative', -1, 'invalid_value'],
  ['NaN', NaN, 'invalid_value'],
  ['Infinity', Infinity, 'invalid_value'],
  ['fractional', 1.5, 'invalid_value'],
  ['above 2^53 - 1', 2 ** 53, 'invalid_value'],
  ['a string', '5', 'invalid_type'],
  ['a bigint', 5n, 'invalid_type'],
  ['a boolean', true, 'invalid_type'],
  ['an object', {}, 'invalid_type'],
  ['missing', undefined, 'invalid_type'],
];

// A duration in milliseconds: fractions are fine, but it must be positive.
const BAD_DURATION = [
  ['0', 0, 'zero_value'],
  ['below half a nanosecond', 4e-7, 'zero_value'],
  ['negative', -1, 'invalid_value'],
  ['NaN', NaN, 'invalid_value'],
  ['Infinity', Infinity, 'invalid_value'],
  ['beyond 2^64 ns', 2e13, 'invalid_value'],
  ['a string', '1000', 'invalid_type'],
  ['null', null, 'invalid_type'],
  ['missing', undefined, 'invalid_type'],
];

// A calendar: a string naming one, as `refill` is (a number is of the wrong type, not a bad name).
const BAD_CALENDAR = [
  ['unknown', 'fortnight', 'invalid_value'],
  ['a number', 5, 'invalid_type'],
  ['a boolean', true, 'invalid_type'],
  ['an object', {}, 'invalid_type'],
];

const BAD_OPTIONS = [
  ['missing', undefined],
  ['null', null],
  ['a number', 5],
  ['a string', 'capacity=5'],
];

// [class label, build(options), valid options, { option: bad cases }]
const CONSTRUCTORS = [
  ['TokenBucket', (o) => new TokenBucket(o), bucketOptions, {
    capacity: BAD_POSITIVE_COUNT, refillTokens: BAD_POSITIVE_COUNT, refillPeriodMs: BAD_DURATION,
    initialTokens: [['above capacity', 4, 'too_large'], ['negative', -1, 'invalid_value'], ['fractional', 0.5, 'invalid_value'], ['a string', '1', 'invalid_type']],
    refill: [['unknown', 'lazy', 'invalid_value'], ['a number', 1, 'invalid_type']],
  }],
  ['Gcra', (o) => new Gcra(o), () => ({ burst: 3, emissionIntervalMs: 100 }), { burst: BAD_POSITIVE_COUNT, emissionIntervalMs: BAD_DURATION }],
  ['Gcra.perPeriod', (o) => Gcra.perPeriod(o), () => ({ burst: 3, tokens: 10, periodMs: 1000 }), {
    burst: BAD_POSITIVE_COUNT, tokens: BAD_POSITIVE_COUNT,
    periodMs: [...BAD_DURATION, ['not a whole number of ns per token', 1000 / 3 + 1e-6, 'invalid_value']],
  }],
  ['LeakyBucket', (o) => new LeakyBucket(o), () => ({ capacity: 3, intervalMs: 100 }), { capacity: BAD_POSITIVE_COUNT, intervalMs: BAD_DURATION }],
  ['SlidingWindowLog', (o) => new SlidingWindowLog(o), windowOptions, {
    limit: [...BAD_POSITIVE_COUNT, ['above 2^20', 2 ** 20 + 1, 'too_large']], windowMs: BAD_DURATION,
  }],
  ['SlidingWindowCounter', (o) => new SlidingWindowCounter(o), windowOptions, { limit: BAD_POSITIVE_COUNT, windowMs: BAD_DURATION, calendar: BAD_CALENDAR }],
  ['FixedWindow', (o) => new FixedWindow(o), windowOptions, { limit: BAD_POSITIVE_COUNT, windowMs: BAD_DURATION, calendar: BAD_CALENDAR }],
];

for (const [label, build, valid, bad] of CONSTRUCTORS) {
  describe(`${label} rejects bad options`, () => {
    for (const [key, cases] of Object.entries(bad)) {
      for (const [what, value, code] of cases) {
        it(`${key} ${what} -> ${code}`, () => {
          const options = { ...valid(), [key]: value };
          if (value === undefined) delete options[key];
          assertLimiterError(() => build(options), code, key);
        });
      }
    }
    for (const [what, value] of BAD_OPTIONS) {
      it(`options ${what} -> invalid_type`, () => assertLimiterError(() => build(value), 'invalid_type', 'options'));
    }
    it('name must be a string, clock a function', () => {
      assertLimiterError(() => build({ ...valid(), name: 5 }), 'invalid_type', 'name');
      assertLimiterError(() => build({ ...valid(), clock: 5 }), 'invalid_type', 'clock');
    });
    it('a clock answering no number is named with what it answered', () => {
      for (const [answer, kind] of [[undefined, 'undefined'], [null, 'null'], [{}, 'object'], ['5', 'string'], [5n, 'bigint']]) {
        const error = assertLimiterError(() => build({ ...valid(), clock: () => answer }).tryAcquire(), 'invalid_type', 'clock');
        assert.match(error.message, new RegExp(`must return a number of milliseconds, not ${kind}$`));
      }
    });
  });
}

describe('a positive duration below half a nanosecond', () => {
  it('is refused as the zero it rounds to, in words that say so', () => {
    const cases = [
      [() => new TokenBucket({ ...bucketOptions(), refillPeriodMs: 1e-7 }), 'refillPeriodMs'],
      [() => new Gcra({ burst: 1, emissionIntervalMs: 4e-7 }), 'emissionIntervalMs'],
      [() => Gcra.perPeriod({ burst: 1, tokens: 1, periodMs: 1e-7 }), 'periodMs'],
      [() => new LeakyBucket({ capacity: 1, intervalMs: 1e-7 }), 'intervalMs'],
      [() => new SlidingWindowLog({ limit: 1, windowMs: 1e-7 }), 'windowMs'],
      [() => new FixedWindow({ limit: 1, windowMs: 1e-7 }), 'windowMs'],
    ];
    for (const [make, name] of cases) {
      const error = assertLimiterError(make, 'zero_value', name);
      assert.match(error.message, /must be at least 1 ns \(0\.000001 ms\); a positive value below 0\.0000005 ms rounds to 0$/, name);
    }
    // Zero itself keeps the core's words; half a nanosecond rounds to one.
    assert.match(assertLimiterError(() => new Gcra({ burst: 1, emissionIntervalMs: 0 }), 'zero_value', 'emissionIntervalMs').message, /greater than zero$/);
    assert.match(assertLimiterError(() => TokenBucket.fromBandwidths([]), 'zero_value', 'bandwidths').message, /^`bandwidths` must hold at least one bandwidth$/);
    assert.equal(new TokenBucket({ ...bucketOptions(), refillPeriodMs: 6e-7 }).refillPeriodMs, 1e-6);
  });
});

describe('overflowing configurations name the argument', () => {
  it('TokenBucket: a refill time beyond 2^64 ns', () => {
    assertLimiterError(() => new TokenBucket({ capacity: 2 ** 53 - 1, refillTokens: 1, refillPeriodMs: 1e6 }), 'overflow', 'refillPeriodMs');
  });
  it('Gcra: burst * emission interval beyond 2^64 ns', () => {
    assertLimiterError(() => new Gcra({ burst: 2 ** 53 - 1, emissionIntervalMs: 1e3 }), 'overflow', 'emissionIntervalMs');
  });
  it('LeakyBucket: capacity * interval beyond 2^64 ns', () => {
    assertLimiterError(() => new LeakyBucket({ capacity: 2 ** 53 - 1, intervalMs: 1e3 }), 'overflow', 'intervalMs');
  });
});

describe('TokenBucket.fromBandwidths rejects bad bandwidths', () => {
  const band = bucketOptions;
  const cases = [
    ['not an array', () => TokenBucket.fromBandwidths(band()), 'invalid_type', 'bandwidths'],
    ['missing', () => TokenBucket.fromBandwidths(), 'invalid_type', 'bandwidths'],
    ['empty', () => TokenBucket.fromBandwidths([]), 'zero_value', 'bandwidths'],
    ['five of them', () => TokenBucket.fromBandwidths([band(), band(), band(), band(), band()]), 'too_large', 'bandwidths'],
    ['an element not an object', () => TokenBucket.fromBandwidths([band(), 7]), 'invalid_type', 'bandwidths'],
    ['a bad element', () => TokenBucket.fromBandwidths([band(), { ...band(), refillPeriodMs: 0 }]), 'zero_value', 'refillPeriodMs'],
    ['options not an object', () => TokenBucket.fromBandwidths([band()], 5), 'invalid_type', 'options'],
  ];
  for (const [what, call, code, argument] of cases) {
    it(`${what} -> ${code}`, () => assertLimiterError(call, code, argument));
  }
  it('the too_large message counts every bandwidth given', () => {
    const error = assertLimiterError(() => TokenBucket.fromBandwidths(Array.from({ length: 9 }, band)), 'too_large', 'bandwidths');
    assert.match(error.message, /got 9/);
  });
});

// [label, cost, nowMs, code, argument]
const BAD_CALLS = [
  ['cost above the limit', 4, 0, 'cost_exceeds_limit', 'cost'],
  ['cost far above the limit', 2 ** 53 - 1, 0, 'cost_exceeds_limit', 'cost'],
  ['negative cost', -1, 0, 'invalid_value', 'cost'],
  ['NaN cost', NaN, 0, 'invalid_value', 'cost'],
  ['infinite cost', Infinity, 0, 'invalid_value', 'cost'],
  ['fractional cost', 0.5, 0, 'invalid_value', 'cost'],
  ['cost above 2^53 - 1', 2 ** 53, 0, 'invalid_value', 'cost'],
  ['string cost', '1', 0, 'invalid_type', 'cost'],
  ['bigint cost', 1n, 0, 'invalid_type', 'cost'],
  ['negative nowMs', 1, -1, 'invalid_value', 'nowMs'],
  ['NaN nowMs', 1, NaN, 'invalid_value', 'nowMs'],
  ['infinite nowMs', 1, Infinity, 'invalid_value', 'nowMs'],
  ['nowMs beyond 2^64 ns', 1, 2e13, 'invalid_value', 'nowMs'],
  ['string nowMs', 1, '0', 'invalid_type', 'nowMs'],
  ['Date nowMs', 1, new Date(0), 'invalid_type', 'nowMs'],
];

for (const [name, make, algorithm] of CLASSES) {
  describe(`${name}: bad arguments throw and change nothing`, () => {
    const fresh = () => {
      const limiter = make();
      limiter.reserve(1, Infinity, 0);
      return limiter;
    };
    const unchanged = (limiter) => {
      const reference = fresh();
      assert.deepStrictEqual(limiter.peek(2, 0), reference.peek(2, 0));
      assert.deepStrictEqual(limiter.reserve(2, Infinity, 0), reference.reserve(2, Infinity, 0));
    };
    for (const [label, cost, nowMs, code, argument] of BAD_CALLS) {
      for (const op of ['tryAcquire', 'peek']) {
        it(`${op}: ${label} -> ${code}`, () => {
          const limiter = fresh();
          assertLimiterError(() => limiter[op](cost, nowMs), code, argument);
          unchanged(limiter);
        });
      }
      it(`reserve: ${label} -> ${code}`, () => {
        const limiter = fresh();
        assertLimiterError(() => limiter.reserve(cost, Infinity, nowMs), code, argument);
        unchanged(limiter);
      });
    }
    for (const [label, maxWait, code] of [
      ['negative', -1, 'invalid_value'], ['NaN', NaN, 'invalid_value'], ['-Infinity', -Infinity, 'invalid_value'],
      ['a string', '10', 'invalid_type'],
    ]) {
      it(`reserve: maxWaitMs ${label} -> ${code}`, () => {
        const limiter = fresh();
        assertLimiterError(() => limiter.reserve(1, maxWait, 0), code, 'maxWaitMs');
        unchanged(limiter);
      });
    }
    for (const [label, cost, takenAt, code, argument] of [
      ['missing cost', undefined, 0, 'invalid_type', 'cost'],
      ['string cost', '1', 0, 'invalid_type', 'cost'],
      ['negative cost', -1, 0, 'invalid_value', 'cost'],
      ['string takenAtMs', 1, '0', 'invalid_type', 'takenAtMs'],
      ['negative takenAtMs', 1, -5, 'invalid_value', 'takenAtMs'],
    ]) {
      it(`refund: ${label} -> ${code}`, () => {
        const limiter = fresh();
        assertLimiterError(() => limiter.refund(cost, takenAt), code, argument);
        unchanged(limiter);
      });
    }
    it('refund above the limit is never an error, nor leaves more than a fresh limiter', () => {
      const limiter = fresh();
      limiter.refund(1000, 0);
      assert.ok(limiter.peek(0, 0).remaining <= 3);
      assertLimiterError(() => limiter.peek(4, 0), 'cost_exceeds_limit', 'cost');
    });
    it('reconfigure: other must be a limiter of the same kind', () => {
      const limiter = fresh();
      assertLimiterError(() => limiter.reconfigure({ limit: 3 }), 'invalid_type', 'other');
      assertLimiterError(() => limiter.reconfigure(undefined), 'invalid_type', 'other');
      const otherKind = algorithm === 'fixed_window' ? new Gcra({ burst: 3, emissionIntervalMs: 1 }) : new FixedWindow(windowOptions());
      assertLimiterError(() => limiter.reconfigure(otherKind, 0), 'invalid_value', 'other');
      assertLimiterError(() => limiter.reconfigure(make(), 'now'), 'invalid_type', 'nowMs');
      // Read by the binding: named as every other `nowMs`.
      for (const now of [NaN, -1, Infinity]) assertLimiterError(() => limiter.reconfigure(make(), now), 'invalid_value', 'nowMs');
      unchanged(limiter);
    });
  });
}

describe('reconfigure across bandwidth counts', () => {
  it('a bucket of one bandwidth cannot take two', () => {
    const one = new TokenBucket(bucketOptions());
    const two = TokenBucket.fromBandwidths([bucketOptions(), bucketOptions()]);
    assertLimiterError(() => one.reconfigure(two, 0), 'invalid_value', 'other');
  });
});

describe('cancel() on a clock counting from the epoch', () => {
  // atMs is a float: at 1.7e12 ms, a quarter of a microsecond from the next
  // one, so refund(cost, atMs) may miss a slot that is not a whole number of
  // them; cancel() gives back exactly the slot booked.
  const now = 1.7e12 + 0.123456;
  const third = 1000 / 3;
  const cases = [
    ['LeakyBucket', () => new LeakyBucket({ capacity: 10, intervalMs: third }), []],
    ['SlidingWindowLog', () => new SlidingWindowLog({ limit: 1, windowMs: third }), []],
    ['FixedWindow', () => new FixedWindow({ limit: 1, windowMs: third }), []],
    ['KeyedLimiter', () => new api.KeyedLimiter(new SlidingWindowLog({ limit: 1, windowMs: third })), ['k']],
    ['Policy', () => new api.Policy({ limits: [{ name: 'q', limiter: new LeakyBucket({ capacity: 10, intervalMs: third }) }] }), [{}]],
  ];
  for (const [name, make, target] of cases) {
    it(`${name}: the booking is given back`, () => {
      const limiter = make();
      limiter.tryAcquire(...target, 1, now);
      const free = limiter.peek(...target, 1, now).retryAfterMs;
      const r = limiter.reserve(...target, 1, Infinity, now);
      assert.equal(r.ok, true);
      assert.ok(limiter.peek(...target, 1, now).retryAfterMs > free, 'booked');
      r.cancel();
      assert.equal(limiter.peek(...target, 1, now).retryAfterMs, free);
    });
  }
});

describe('calendar', () => {
  it("names a window algorithm's calendar, else null", () => {
    assert.equal(new FixedWindow({ limit: 1, calendar: 'week' }).calendar, 'week');
    assert.equal(new SlidingWindowCounter({ limit: 1, calendar: 'month' }).calendar, 'month');
    assert.equal(FixedWindow.fromBytes(new FixedWindow({ limit: 1, calendar: 'day' }).toBytes(), { limit: 1, calendar: 'day' }).calendar, 'day');
    assert.equal(new FixedWindow({ limit: 1, windowMs: 86_400_000 }).calendar, null);
    assert.equal(new Gcra({ burst: 1, emissionIntervalMs: 1 }).calendar, null);
  });
});

describe('retryAfterMs on a clock counting from the epoch', () => {
  // At 1.7e12 ms two sums are a quarter of a microsecond apart: nowMs +
  // retryAfterMs must not round to just before the instant the core named.
  const third = 1000 / 3;
  const cases = [
    ['Gcra', () => new Gcra({ burst: 1, emissionIntervalMs: third }), []],
    ['TokenBucket', () => new TokenBucket({ capacity: 1, refillTokens: 3, refillPeriodMs: 1000 }), []],
    ['LeakyBucket', () => new LeakyBucket({ capacity: 1, intervalMs: third }), []],
    ['SlidingWindowCounter', () => new SlidingWindowCounter({ limit: 1, windowMs: third }), []],
    ['KeyedLimiter', () => new api.KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: third })), ['k']],
    ['Policy', () => new api.Policy({ limits: [{ name: 'g', limiter: new Gcra({ burst: 1, emissionIntervalMs: third }) }] }), [{}]],
  ];
  for (const [name, make, target] of cases) {
    it(`${name}: asking again retryAfterMs later is allowed`, () => {
      let late = 0;
      for (let i = 0; i < 200; i++) {
        const limiter = make();
        const t = 1.7e12 + i;
        limiter.tryAcquire(...target, 1, t);
        const denied = limiter.tryAcquire(...target, 1, t + 1);
        assert.equal(denied.allowed, false);
        if (!limiter.peek(...target, 1, t + 1 + denied.retryAfterMs).allowed) late++;
      }
      assert.equal(late, 0, 'denials whose retryAfterMs fell short');
    });
  }
});

describe('errors of arguments the JS layer checks', () => {
  it('name the argument and what it expects, for every check in lib/api/', () => {
    // Each badType(name, expected) goes through the backend, which keeps
    // both as static strings: one it does not know would read "value" or
    // "of another type".
    const fs = require('node:fs');
    const dir = path.join(__dirname, '../../bindings-node/lib/api');
    const source = fs.readdirSync(dir).map((file) => fs.readFileSync(path.join(dir, file), 'utf8')).join('\n');
    const checks = [...source.matchAll(/badType\('([a-z_]+)', '([^']+)'\)/g)].map((m) => [m[1], m[2]]);
    assert.ok(checks.length > 20, `found ${checks.length} checks`);
    const backend =
      process.env.RATEKEEPER_IMPL === 'wasm'
        ? require('../../bindings-wasm/pkg/nodejs/ratekeeper_wasm.js')
        : require('../../bindings-node/native.js');
    for (const [name, expected] of checks) {
      assert.throws(
        () => backend.typeError(name, expected),
        (error) => error instanceof TypeError && error.code === 'invalid_type' && error.message.endsWith(`must be ${expected}`) && !error.message.includes('`value`'),
        `${name}: ${expected}`,
      );
    }
  });

  it('a misspelt option is refused, naming it, where it would have been ignored', () => {
    const { KeyedLimiter, Policy, middleware } = api;
    const bucket = { capacity: 5, refillTokens: 1, refillPeriodMs: 1000 };
    const cases = [
      [() => new TokenBucket({ ...bucket, intialTokens: 0 }), 'intialTokens', 'TokenBucket'],
      [() => TokenBucket.fromBandwidths([{ ...bucket, refil: 'interval' }]), 'refil', 'bandwidth'],
      [() => TokenBucket.fromBandwidths([bucket], { nmae: 'x' }), 'nmae', 'fromBandwidths'],
      [() => new Gcra({ burst: 1, emissionIntervalMs: 1, clcok: Date.now }), 'clcok', 'Gcra'],
      [() => Gcra.perPeriod({ burst: 1, tokens: 1, period: 1000 }), 'period', 'Gcra.perPeriod'],
      [() => new LeakyBucket({ capacity: 1, intervalMs: 1, windowMs: 1 }), 'windowMs', 'LeakyBucket'],
      [() => new FixedWindow({ limit: 1, windowMs: 1, calender: 'day' }), 'calender', 'FixedWindow'],
      [() => new KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: 1 }), { maxkeys: 5 }), 'maxkeys', 'KeyedLimiter'],
      [() => Policy.fromRates('1/second', { bye: ['ip'] }), 'bye', 'Policy'],
      [() => middleware({ limiter: Policy.fromRates('1/second'), field: () => ({}) }), 'field', 'the server helpers'],
    ];
    for (const [make, option, what] of cases) {
      assert.throws(make, (error) => {
        assert.equal(error.name, 'TypeError');
        assert.equal(error.code, 'invalid_type');
        assert.match(error.message, new RegExp(`^\`${option}\` is not an option of ${what.replace('.', '\\.')}, which takes `));
        return true;
      }, option);
    }
    // An array for options: its indices would read as no option at all.
    assert.throws(() => new KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: 1 }), ['maxKeys']), { name: 'TypeError', code: 'invalid_type', message: '`options` must be an object' });
    assert.throws(() => Policy.fromRates('1/second', [['by', ['ip']]]), { name: 'TypeError', code: 'invalid_type', message: '`options` must be an object' });
    // A KeyedLimiter's options of another type: the binding's error naming
    // each (the addon's own conversion threw an uncoded Error, NumberExpected).
    for (const [option, value] of [['maxKeys', '5'], ['maxKeys', true], ['eviction', 5]]) {
      assertLimiterError(() => new KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: 1 }), { [option]: value }), 'invalid_type', option, `${option}: ${value}`);
    }
    assert.throws(() => TokenBucket.fromBandwidths([[5, 1, 1000]]), { name: 'TypeError', code: 'invalid_type', message: '`bandwidths` must be an array of objects' });
    // acquire's options: a promise that rejects, as for every other bad option there.
    return assert.rejects(new Gcra({ burst: 1, emissionIntervalMs: 1 }).acquire(1, { timeout: 10 }), {
      code: 'invalid_type',
      message: '`timeout` is not an option of acquire, which takes signal, timeoutMs',
    });
  });

  it('the abstract Limiter has a code too', () => {
    assert.throws(() => new Limiter(), { name: 'TypeError', code: 'invalid_type' });
    assert.throws(() => Limiter.fromBytes(new Uint8Array(1), {}), { name: 'TypeError', code: 'invalid_type' });
  });

  it('a detached or empty Uint8Array is state cut short, in either build', () => {
    const gcra = new Gcra({ burst: 1, emissionIntervalMs: 10 });
    const bytes = gcra.toBytes().slice();
    structuredClone(bytes.buffer, { transfer: [bytes.buffer] });
    assert.equal(bytes.byteLength, 0);
    for (const empty of [bytes, new Uint8Array(0)]) {
      assertLimiterError(() => gcra.restore(empty), 'state_truncated', 'bytes');
      assertLimiterError(() => Gcra.fromBytes(empty, { burst: 1, emissionIntervalMs: 10 }), 'state_truncated', 'bytes');
    }
  });
});

describe('two copies of the package on one thread', () => {
  // A test runner's fresh module registry (jest.resetModules), or
  // require.cache cleared, loads the package again on the same thread, where
  // the napi addon keeps one scratch array: each copy must still be answered
  // from its own numbers.
  function freshCopy() {
    const root = path.dirname(require.resolve('./impl.cjs'));
    const build = (process.env.RATEKEEPER_IMPL || 'napi') === 'wasm' ? 'bindings-wasm' : 'bindings-node';
    const dir = path.join(root, '..', '..', build) + path.sep;
    const cached = Object.keys(require.cache).filter((file) => file.startsWith(dir) || file === require.resolve('./impl.cjs'));
    const kept = cached.map((file) => [file, require.cache[file]]);
    for (const [file] of kept) delete require.cache[file];
    try {
      return require('./impl.cjs');
    } finally {
      for (const [file, module] of kept) require.cache[file] = module;
    }
  }

  it('each copy answers for its own limiters, keyed limiters and policies', () => {
    const other = freshCopy();
    assert.notEqual(other.TokenBucket, api.TokenBucket);
    const rates = (n) => Array.from({ length: n }, (_, i) => `${i + 1}/second`).join(';');
    const mine = new api.TokenBucket({ capacity: 5, refillTokens: 1, refillPeriodMs: 1000 });
    const theirs = new other.TokenBucket({ capacity: 50, refillTokens: 1, refillPeriodMs: 1000 });
    const store = new other.KeyedLimiter(new other.Gcra({ burst: 2, emissionIntervalMs: 10 }));
    const small = new api.Policy(rates(2));
    assert.equal(mine.peek(1, 0).remaining, 4); // this copy's arrays in use
    const large = new other.Policy(rates(9)); // grows the other copy's details array
    assert.deepStrictEqual(small.peek({}, 1, 0).limits.map((l) => l.remaining), [0, 1]);
    const seen = [];
    for (let round = 0; round < 2; round++) {
      seen.push([mine.tryAcquire(1, 0).remaining, theirs.tryAcquire(2, 0).remaining]);
      seen.push([store.tryAcquire('k', 1, 0).remaining, mine.peek(1, 0).limit, theirs.reserve(1, Infinity, 0).ok]);
      const [a, b] = [small.tryAcquire({}, 1, 0), large.tryAcquire({}, 1, 0)];
      seen.push([a.limits.map((l) => l.remaining), b.limits.length, b.limits[8].remaining, a.allowed, b.allowed]);
    }
    assert.deepStrictEqual(seen, [
      [4, 48], [1, 5, true], [[0, 1], 9, 8, true, true],
      [3, 45], [0, 5, true], [[0, 1], 9, 8, false, false],
    ]);
  });

  // The wasm build's JS layer can also be made twice over one module (its
  // file re-required while the module stays cached): a policy's details then
  // lie in memory that the other copy's larger policy may move.
  it('a copy reads its policies right after another copy moved their details', () => {
    const other =
      process.env.RATEKEEPER_IMPL === 'wasm'
        ? require('../../bindings-wasm/pkg/api.cjs').createApi(require('../../bindings-wasm/pkg/nodejs/ratekeeper_wasm.js'))
        : freshCopy();
    const small = new api.Policy({ limits: [{ name: 'one', rate: '1/second' }] });
    assert.equal(small.tryAcquire({}, 1, 0).allowed, true);
    const rates = Array.from({ length: 40 }, (_, i) => `${i + 1}/second`).join(';');
    const large = new other.Policy(rates);
    assert.equal(large.tryAcquire({}, 1, 0).limits.length, 40);
    const denied = small.tryAcquire({}, 1, 0);
    assert.deepStrictEqual([denied.allowed, denied.deniedBy, denied.limits[0].remaining], [false, 'one', 0]);
    const again = large.tryAcquire({}, 1, 0); // its '1/second' denies: nothing taken
    assert.deepStrictEqual([again.allowed, again.deniedBy, again.limits[39].remaining], [false, '1/second', 39]);
  });
});

describe('console.log shows what built the object', () => {
  const { inspect } = require('node:util');
  const { KeyedLimiter, Policy } = api;
  const shown = (x, options) => inspect(x, { breakLength: Infinity, ...options });

  it('each limiter as its class and the options it was built from, defaults left out', () => {
    const cases = [
      [new TokenBucket(bucketOptions()), 'TokenBucket { capacity: 3, refillTokens: 1, refillPeriodMs: 1000 }'],
      [new TokenBucket({ ...bucketOptions(), initialTokens: 0, refill: 'interval', name: 'api' }),
        "TokenBucket { capacity: 3, refillTokens: 1, refillPeriodMs: 1000, initialTokens: 0, refill: 'interval', name: 'api' }"],
      [TokenBucket.fromBandwidths([bucketOptions(), { capacity: 10, refillTokens: 10, refillPeriodMs: 60_000 }]),
        'TokenBucket { bandwidths: [ { capacity: 3, refillTokens: 1, refillPeriodMs: 1000 }, { capacity: 10, refillTokens: 10, refillPeriodMs: 60000 } ] }'],
      [new Gcra({ burst: 5, emissionIntervalMs: 200 }), 'Gcra { burst: 5, emissionIntervalMs: 200 }'],
      [new LeakyBucket({ capacity: 5, intervalMs: 100 }), 'LeakyBucket { capacity: 5, intervalMs: 100 }'],
      [new SlidingWindowLog(windowOptions()), 'SlidingWindowLog { limit: 3, windowMs: 1000 }'],
      [new SlidingWindowCounter(windowOptions()), 'SlidingWindowCounter { limit: 3, windowMs: 1000 }'],
      [new FixedWindow({ limit: 3, calendar: 'day' }), "FixedWindow { limit: 3, calendar: 'day' }"],
    ];
    for (const [limiter, text] of cases) assert.equal(shown(limiter), text);
  });

  it('a keyed limiter with its limiter, bound and keys held; a policy with its limits', () => {
    const keyed = new KeyedLimiter(new Gcra({ burst: 5, emissionIntervalMs: 200, name: 'x' }), { maxKeys: 100, eviction: 'refuse' });
    keyed.tryAcquire('a', 1, 0);
    keyed.tryAcquire('b', 1, 0);
    assert.equal(shown(keyed), "KeyedLimiter { limiter: Gcra { burst: 5, emissionIntervalMs: 200, name: 'x' }, maxKeys: 100, eviction: 'refuse', size: 2 }");
    assert.equal(shown(new KeyedLimiter(new FixedWindow(windowOptions()))), 'KeyedLimiter { limiter: FixedWindow { limit: 3, windowMs: 1000 }, size: 0 }');
    const policy = Policy.fromRates('10/second;100/day', { by: ['user'] });
    const limits = [{ name: '10/second', by: ['user'] }, { name: '100/day', by: ['user'] }];
    assert.equal(shown(policy, { depth: 3 }), `Policy ${shown({ limits }, { depth: 3 })}`);
  });

  it('as deep as inspect is asked to go', () => {
    const bucket = new TokenBucket(bucketOptions());
    assert.equal(shown({ a: { b: { c: bucket } } }), '{ a: { b: { c: [TokenBucket] } } }');
    assert.equal(shown(new KeyedLimiter(bucket), { depth: 0 }), 'KeyedLimiter { limiter: [TokenBucket], size: 0 }');
  });
});

describe('a construction that fails', () => {
  it("frees the native limiter it built when reading the options' name or clock throws", () => {
    // Read after the native limiter was built, outside the try that frees
    // it: each such construction left a limiter in the addon's table.
    if ((process.env.RATEKEEPER_IMPL || 'napi') !== 'napi') return; // the wasm build's are collected with their handles
    const native = require('../../bindings-node/native.js');
    const options = { burst: 1, emissionIntervalMs: 1 };
    for (const field of ['name', 'clock']) {
      // The table's free list starts with `slot`: the construction below takes it.
      const slot = native.gcra(options);
      native.free(slot);
      const throwing = Object.defineProperty({ ...options }, field, {
        enumerable: true,
        get() {
          throw new Error('getter');
        },
      });
      assert.throws(() => new Gcra(throwing), /getter/);
      const next = native.gcra(options);
      native.free(next);
      assert.equal(next, slot, `the limiter built before \`${field}\` threw was never freed`);
    }
  });
});
