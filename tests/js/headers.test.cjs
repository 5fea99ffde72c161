'use strict';
// limiter.headers(decision): the IETF RateLimit header values, computed by the
// core (Headers) from the decision, the limiter's name and its window.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');

const { TokenBucket, Gcra, LeakyBucket, SlidingWindowLog, SlidingWindowCounter, FixedWindow } = require('./impl.cjs');
const { assertLimiterError } = require('./helpers.cjs');

describe('headers', () => {
  it('an allowed decision: policy and remaining, no Retry-After', () => {
    const bucket = new TokenBucket({ capacity: 10, refillTokens: 10, refillPeriodMs: 60_000, name: 'per-minute' });
    const d = bucket.tryAcquire(10, 0);
    assert.deepStrictEqual(bucket.headers(d), {
      'RateLimit-Policy': '"per-minute";q=10;w=60',
      RateLimit: '"per-minute";r=0;t=60',
    });
  });

  it('a denied decision adds Retry-After, in whole seconds rounded up', () => {
    const log = new SlidingWindowLog({ limit: 2, windowMs: 1_500 });
    log.tryAcquire(2, 0);
    const d = log.tryAcquire(1, 499.999999);
    assert.equal(d.allowed, false);
    assert.deepStrictEqual(log.headers(d), {
      'RateLimit-Policy': '"default";q=2;w=2',
      RateLimit: '"default";r=0;t=2',
      'Retry-After': '2',
    });
  });

  it('w is each algorithm\'s window: the window, or the time to refill or drain', () => {
    const cases = [
      [new TokenBucket({ capacity: 5, refillTokens: 1, refillPeriodMs: 1_000 }), 5],
      [TokenBucket.fromBandwidths([{ capacity: 100, refillTokens: 100, refillPeriodMs: 60_000 }, { capacity: 10, refillTokens: 1, refillPeriodMs: 1_000 }]), 10],
      [new Gcra({ burst: 3, emissionIntervalMs: 2_000 }), 6],
      [new LeakyBucket({ capacity: 4, intervalMs: 250 }), 1],
      [new SlidingWindowLog({ limit: 1, windowMs: 30_000 }), 30],
      [new SlidingWindowCounter({ limit: 1, windowMs: 30_001 }), 31],
      [new FixedWindow({ limit: 1, windowMs: 3_600_000 }), 3600],
    ];
    for (const [limiter, w] of cases) {
      const policy = limiter.headers(limiter.peek(0, 0))['RateLimit-Policy'];
      assert.equal(policy, `"default";q=${limiter.limit};w=${w}`, limiter.algorithm);
      assert.equal(limiter.windowMs / 1000 <= w && w < limiter.windowMs / 1000 + 1, true);
    }
  });

  it('quotes and escapes the name; other characters become ?', () => {
    const fixed = new FixedWindow({ limit: 1, windowMs: 1_000, name: 'a "b"\\é\n' });
    assert.equal(fixed.headers(fixed.peek(0, 0)).RateLimit, '"a \\"b\\"\\\\??";r=1;t=0');
  });

  it('works on any decision-shaped object, and rejects anything else', () => {
    const fixed = new FixedWindow({ limit: 5, windowMs: 10_000 });
    const made = { allowed: false, remaining: 0, limit: 5, retryAfterMs: 1_000.5, resetAfterMs: 9_000 };
    assert.deepStrictEqual(fixed.headers(made), {
      'RateLimit-Policy': '"default";q=5;w=10',
      RateLimit: '"default";r=0;t=9',
      'Retry-After': '2',
    });
    for (const bad of [undefined, null, 5, 'allowed', { ...made, remaining: '0' }, { ...made, allowed: 1 }, { limit: 5 }]) {
      assertLimiterError(() => fixed.headers(bad), 'invalid_type', 'decision', JSON.stringify(bad));
    }
    assertLimiterError(() => fixed.headers({ ...made, remaining: -1 }), 'invalid_value', 'decision');
    assertLimiterError(() => fixed.headers({ ...made, retryAfterMs: NaN }), 'invalid_value', 'decision');
  });
});
