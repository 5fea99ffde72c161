'use strict';
// The JS API itself: defaults, result shape, the clock, and every bad argument.
// Runs unchanged against the napi addon and the wasm build (see impl.cjs).

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');

const { TokenBucket, SlidingWindowLog } = require('./impl.cjs');
const { assertLimiterError } = require('./helpers.cjs');

const DECISION_KEYS = ['allowed', 'limit', 'remaining', 'resetAfterMs', 'retryAfterMs'];

const bucketOptions = () => ({ capacity: 3, refillTokens: 1, refillPeriodMs: 1000 });
const logOptions = () => ({ limit: 3, windowMs: 1000 });

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
  it('are the two limiter classes', () => {
    assert.equal(typeof TokenBucket, 'function');
    assert.equal(typeof SlidingWindowLog, 'function');
    assert.ok(new TokenBucket(bucketOptions()) instanceof TokenBucket);
    assert.ok(new SlidingWindowLog(logOptions()) instanceof SlidingWindowLog);
  });
});

describe('TokenBucket', () => {
  it('a fresh bucket is full and allows with every argument defaulted', () => {
    const bucket = new TokenBucket(bucketOptions());
    const d = bucket.tryAcquire();
    assertDecision(d);
    assert.deepStrictEqual(
      { allowed: d.allowed, remaining: d.remaining, limit: d.limit, retryAfterMs: d.retryAfterMs },
      { allowed: true, remaining: 2, limit: 3, retryAfterMs: 0 },
    );
  });

  it('answers in milliseconds, exact to the nanosecond', () => {
    const bucket = new TokenBucket({ capacity: 2, refillTokens: 1, refillPeriodMs: 1000 });
    assert.deepStrictEqual(bucket.tryAcquire(2, 0), {
      allowed: true, remaining: 0, limit: 2, retryAfterMs: 0, resetAfterMs: 2000,
    });
    const denied = bucket.tryAcquire(1, 250.000001);
    assert.equal(denied.allowed, false);
    assert.equal(denied.remaining, 0);
    assert.equal(Math.round(denied.retryAfterMs * 1e6), 749_999_999);
    assert.equal(Math.round(denied.resetAfterMs * 1e6), 1_749_999_999);
    assert.equal(bucket.tryAcquire(1, 1000).allowed, true);
  });

  it('cost defaults to 1 when undefined or null', () => {
    const bucket = new TokenBucket(bucketOptions());
    assert.equal(bucket.tryAcquire(undefined, 0).remaining, 2);
    assert.equal(bucket.tryAcquire(null, 0).remaining, 1);
  });

  it('cost 0 is always allowed and takes nothing', () => {
    const bucket = new TokenBucket({ ...bucketOptions(), initialTokens: 0 });
    const d = bucket.tryAcquire(0, 0);
    assert.equal(d.allowed, true);
    assert.equal(d.remaining, 0);
    assert.equal(bucket.tryAcquire(1, 0).allowed, false);
  });

  it('initialTokens sets the starting level', () => {
    const bucket = new TokenBucket({ ...bucketOptions(), initialTokens: 1 });
    assert.equal(bucket.tryAcquire(1, 0).remaining, 0);
    const denied = bucket.tryAcquire(1, 0);
    assert.equal(denied.allowed, false);
    assert.equal(denied.retryAfterMs, 1000);
  });

  it('accepts fractional milliseconds for refillPeriodMs and nowMs', () => {
    const bucket = new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 0.5 });
    assert.equal(bucket.tryAcquire(1, 10).allowed, true);
    assert.equal(Math.round(bucket.tryAcquire(1, 10.25).retryAfterMs * 1e6), 250_000);
    assert.equal(bucket.tryAcquire(1, 10.5).allowed, true);
  });
});

describe('SlidingWindowLog', () => {
  it('a fresh log allows with every argument defaulted', () => {
    const log = new SlidingWindowLog(logOptions());
    const d = log.tryAcquire();
    assertDecision(d);
    assert.equal(d.allowed, true);
    assert.equal(d.remaining, 2);
    assert.equal(d.limit, 3);
    assert.equal(d.retryAfterMs, 0);
  });

  it('admits at most limit units per window', () => {
    const log = new SlidingWindowLog({ limit: 2, windowMs: 1000 });
    assert.equal(log.tryAcquire(1, 0).allowed, true);
    assert.equal(log.tryAcquire(1, 400).allowed, true);
    const denied = log.tryAcquire(1, 500);
    assert.deepStrictEqual(
      { allowed: denied.allowed, remaining: denied.remaining, retryAfterMs: denied.retryAfterMs },
      { allowed: false, remaining: 0, retryAfterMs: 500 },
    );
    assert.equal(log.tryAcquire(1, 1000).allowed, true);
    assert.equal(log.tryAcquire(0, 1000).allowed, true);
    assert.equal(log.tryAcquire(null, 1000).allowed, false);
  });
});

describe('the default clock is performance.now()', () => {
  const PERIOD = 100_000;
  for (const [name, make] of [
    ['TokenBucket', () => new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: PERIOD })],
    ['SlidingWindowLog', () => new SlidingWindowLog({ limit: 1, windowMs: PERIOD })],
  ]) {
    it(`${name}: an explicit performance.now() reading, then the default`, () => {
      const limiter = make();
      assert.equal(limiter.tryAcquire(1, performance.now()).allowed, true);
      const d = limiter.tryAcquire();
      assert.equal(d.allowed, false);
      // Measured from a later reading of the same clock: a little under PERIOD.
      assert.ok(d.retryAfterMs <= PERIOD && d.retryAfterMs > PERIOD - 10_000, `retryAfterMs ${d.retryAfterMs}`);
    });

    it(`${name}: the default, then an explicit performance.now() reading`, () => {
      const limiter = make();
      assert.equal(limiter.tryAcquire().allowed, true);
      const d = limiter.tryAcquire(1, performance.now());
      assert.equal(d.allowed, false);
      assert.ok(d.retryAfterMs <= PERIOD && d.retryAfterMs > PERIOD - 10_000, `retryAfterMs ${d.retryAfterMs}`);
    });

    it(`${name}: reads globalThis.performance.now at each call`, () => {
      const limiter = make();
      withClock(() => 5_000, () => assert.equal(limiter.tryAcquire().allowed, true));
      const d = withClock(() => 5_000 + PERIOD / 4, () => limiter.tryAcquire());
      assert.equal(d.allowed, false);
      assert.equal(d.retryAfterMs, (PERIOD * 3) / 4);
      assert.equal(limiter.tryAcquire(1, 5_000 + PERIOD).allowed, true);
    });
  }

  it('a clock that returns a non-number is a TypeError naming nowMs', () => {
    const bucket = new TokenBucket(bucketOptions());
    withClock(() => 'soon', () => assertLimiterError(() => bucket.tryAcquire(), 'invalid_type', 'nowMs'));
    assert.equal(bucket.tryAcquire(1, 0).remaining, 2);
  });
});

// [label, value, code] for a count that must be at least 1.
const BAD_POSITIVE_COUNT = [
  ['0', 0, 'zero_value'],
  ['negative', -1, 'invalid_value'],
  ['NaN', NaN, 'invalid_value'],
  ['Infinity', Infinity, 'invalid_value'],
  ['-Infinity', -Infinity, 'invalid_value'],
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

const BAD_OPTIONS = [
  ['missing', undefined],
  ['null', null],
  ['a number', 5],
  ['a string', 'capacity=5'],
];

describe('TokenBucket constructor rejects bad options', () => {
  const cases = [
    ...BAD_POSITIVE_COUNT.map(([label, v, code]) => ['capacity', label, v, code]),
    ...BAD_POSITIVE_COUNT.map(([label, v, code]) => ['refillTokens', label, v, code]),
    ...BAD_DURATION.map(([label, v, code]) => ['refillPeriodMs', label, v, code]),
    ['initialTokens', 'above capacity', 4, 'too_large'],
    ['initialTokens', 'negative', -1, 'invalid_value'],
    ['initialTokens', 'NaN', NaN, 'invalid_value'],
    ['initialTokens', 'fractional', 0.5, 'invalid_value'],
    ['initialTokens', 'a string', '1', 'invalid_type'],
  ];
  for (const [key, label, value, code] of cases) {
    it(`${key} ${label} -> ${code}`, () => {
      const options = { ...bucketOptions(), [key]: value };
      if (value === undefined) delete options[key];
      assertLimiterError(() => new TokenBucket(options), code, key);
    });
  }

  it('a refill time beyond 2^64 ns -> overflow naming refillPeriodMs', () => {
    const options = { capacity: 2 ** 53 - 1, refillTokens: 1, refillPeriodMs: 1e6 };
    assertLimiterError(() => new TokenBucket(options), 'overflow', 'refillPeriodMs');
  });

  for (const [label, value] of BAD_OPTIONS) {
    it(`options ${label} -> invalid_type`, () => {
      assertLimiterError(() => new TokenBucket(value), 'invalid_type', 'options');
    });
  }

  it('accepts the largest values that fit', () => {
    const bucket = new TokenBucket({ capacity: 2 ** 53 - 1, refillTokens: 2 ** 53 - 1, refillPeriodMs: 1 });
    const d = bucket.tryAcquire(2 ** 53 - 1, 0);
    assert.equal(d.allowed, true);
    assert.equal(d.limit, 2 ** 53 - 1);
  });
});

describe('SlidingWindowLog constructor rejects bad options', () => {
  const cases = [
    ...BAD_POSITIVE_COUNT.map(([label, v, code]) => ['limit', label, v, code]),
    ['limit', 'above the log maximum (2^20)', 2 ** 20 + 1, 'too_large'],
    ...BAD_DURATION.map(([label, v, code]) => ['windowMs', label, v, code]),
  ];
  for (const [key, label, value, code] of cases) {
    it(`${key} ${label} -> ${code}`, () => {
      const options = { ...logOptions(), [key]: value };
      if (value === undefined) delete options[key];
      assertLimiterError(() => new SlidingWindowLog(options), code, key);
    });
  }

  for (const [label, value] of BAD_OPTIONS) {
    it(`options ${label} -> invalid_type`, () => {
      assertLimiterError(() => new SlidingWindowLog(value), 'invalid_type', 'options');
    });
  }
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

// [name, factory, resetAfterMs once all 3 units are taken at 0]
for (const [name, make, fullReset] of [
  ['TokenBucket', () => new TokenBucket(bucketOptions()), 3000],
  ['SlidingWindowLog', () => new SlidingWindowLog(logOptions()), 1000],
]) {
  describe(`${name}.tryAcquire rejects bad arguments and keeps working`, () => {
    for (const [label, cost, nowMs, code, argument] of BAD_CALLS) {
      it(`${label} -> ${code}`, () => {
        const limiter = make();
        assert.equal(limiter.tryAcquire(1, 0).remaining, 2);
        assertLimiterError(() => limiter.tryAcquire(cost, nowMs), code, argument);
        // The failed call changed nothing.
        assert.deepStrictEqual(limiter.tryAcquire(2, 0), {
          allowed: true, remaining: 0, limit: 3, retryAfterMs: 0, resetAfterMs: fullReset,
        });
      });
    }
  });
}
