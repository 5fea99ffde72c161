'use strict';
// limiter.headers(decision): the IETF RateLimit header values, computed by the
// core (Headers) from the decision, the limiter's name and its window.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');

const { TokenBucket, Gcra, LeakyBucket, SlidingWindowLog, SlidingWindowCounter, FixedWindow, Policy, KeyedLimiter } = require('./impl.cjs');
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

  it('quotes and escapes the name', () => {
    const fixed = new FixedWindow({ limit: 1, windowMs: 1_000, name: 'a "b"\\~' });
    assert.equal(fixed.headers(fixed.peek(0, 0)).RateLimit, '"a \\"b\\"\\\\~";r=1;t=0');
  });

  it('works on any decision-shaped object, and rejects anything else', () => {
    const fixed = new FixedWindow({ limit: 5, windowMs: 10_000 });
    const made = { allowed: false, remaining: 0, limit: 5, retryAfterMs: 1_000.5, resetAfterMs: 9_000 };
    assert.deepStrictEqual(fixed.headers(made), {
      'RateLimit-Policy': '"default";q=5;w=10',
      RateLimit: '"default";r=0;t=9',
      'Retry-After': '2',
    });
    // Each error names the field at fault.
    const bad = [
      [undefined, 'decision'], [null, 'decision'], [5, 'decision'], ['allowed', 'decision'],
      [{ ...made, remaining: '0' }, 'decision.remaining'], [{ ...made, allowed: 1 }, 'decision.allowed'],
      [{ limit: 5 }, 'decision.allowed'], [{ ...made, resetAfterMs: null }, 'decision.resetAfterMs'],
    ];
    for (const [decision, field] of bad) {
      assertLimiterError(() => fixed.headers(decision), 'invalid_type', field, JSON.stringify(decision));
    }
    assertLimiterError(() => fixed.headers({ ...made, remaining: -1 }), 'invalid_value', 'decision.remaining');
    assertLimiterError(() => fixed.headers({ ...made, limit: 1.5 }), 'invalid_value', 'decision.limit');
    assertLimiterError(() => fixed.headers({ ...made, retryAfterMs: NaN }), 'invalid_value', 'decision.retryAfterMs');
    assertLimiterError(() => fixed.headers({ ...made, resetAfterMs: -1 }), 'invalid_value', 'decision.resetAfterMs');
  });

  it('its own decision at the end of the clock, whose retryAfterMs passes 2^64 ns to reach it', () => {
    // The waits are 2^64 - 1 ns, the end of the clock; no float of
    // milliseconds added to nowMs lands on it, so retryAfterMs is the one
    // float past it (18446744073709.555), which headers refused as too
    // large. Read back as 2^64 - 1 ns, the headers are Python's, from the
    // exact nanoseconds.
    const counter = () => new SlidingWindowCounter({ limit: 4, windowMs: 18446743657483.53125 });
    const expected = (name) => ({
      'RateLimit-Policy': `"${name}";q=4;w=18446743658`,
      RateLimit: `"${name}";r=1;t=18446744074`,
      'Retry-After': '18446744074',
    });
    const limiter = counter();
    limiter.reserve(3, 559.831, 0.000683);
    const d = limiter.tryAcquire(2, 0.000683);
    assert.equal(d.retryAfterMs > 2 ** 64 / 1e6, true, `${d.retryAfterMs}`);
    assert.deepStrictEqual(limiter.headers(d), expected('default'));
    const keyed = new KeyedLimiter(counter());
    keyed.reserve('k', 3, 559.831, 0.000683);
    assert.deepStrictEqual(keyed.headers(keyed.tryAcquire('k', 2, 0.000683)), expected('default'));
    const policy = new Policy();
    policy.add('w', counter());
    policy.reserve({}, 3, 559.831, 0.000683);
    assert.deepStrictEqual(policy.headers(policy.tryAcquire({}, 2, 0.000683)), expected('w'));
    // One float further is no decision's: still too large.
    const next = (ms) => {
      const view = new DataView(new ArrayBuffer(8));
      view.setFloat64(0, ms);
      view.setBigUint64(0, view.getBigUint64(0) + 1n);
      return view.getFloat64(0);
    };
    for (const field of ['retryAfterMs', 'resetAfterMs']) {
      const beyond = { ...d, [field]: next(d.retryAfterMs) };
      assertLimiterError(() => limiter.headers(beyond), 'invalid_value', `decision.${field}`);
    }
  });

  it("a policy's decision: each limit's field named, and one decision per limit", () => {
    const policy = Policy.fromRates('1/second;5/minute');
    const made = policy.tryAcquire({}, 1, 0);
    const limit = (i, change) => ({ ...made, limits: made.limits.map((d, j) => (i === j ? { ...d, ...change } : d)) });
    assertLimiterError(() => policy.headers({ ...made, limits: made.limits.slice(1) }), 'invalid_type', 'decision.limits');
    assertLimiterError(() => policy.headers({ ...made, limits: undefined }), 'invalid_type', 'decision.limits');
    assertLimiterError(() => policy.headers(limit(1, { limit: null })), 'invalid_type', 'decision.limits[1].limit');
    assertLimiterError(() => policy.headers(limit(0, { allowed: 'yes' })), 'invalid_type', 'decision.limits[0].allowed');
    assertLimiterError(() => policy.headers(limit(1, { remaining: -1 })), 'invalid_value', 'decision.limits[].remaining');
    assertLimiterError(() => policy.headers({ ...made, retryAfterMs: -1 }), 'invalid_value', 'decision.retryAfterMs');
  });

  it("a limiter refuses a policy's decision, as a policy refuses a limiter's", () => {
    // It made headers up: the policy's tightest limit under the limiter's
    // name and window ('"default";q=1;w=3').
    const policy = Policy.fromRates('1/second;5/minute');
    const made = policy.tryAcquire({}, 1, 0);
    const fixed = new FixedWindow({ limit: 5, windowMs: 3_000 });
    for (const limiter of [fixed, new KeyedLimiter(fixed)]) {
      const error = assertLimiterError(() => limiter.headers(made), 'invalid_type', 'decision');
      assert.equal(error.message, "`decision` must be a limiter's decision, not a policy's (policy.headers takes that)");
      assert.throws(() => limiter.headers({ ...made, limits: [] }), { code: 'invalid_type' });
    }
    assertLimiterError(() => policy.headers(fixed.peek(1, 0)), 'invalid_type', 'decision.limits');
    // A limiter's decision with a `limits` of undefined is still one.
    const own = fixed.peek(1, 0);
    assert.deepStrictEqual(fixed.headers({ ...own, limits: undefined }), fixed.headers(own));
  });
});
