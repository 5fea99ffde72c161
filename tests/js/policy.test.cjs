'use strict';
// Keyed limiters, policies and portable state, through the public API of the
// build under test (impl.cjs): behaviour, not shapes.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const vm = require('node:vm');

const api = require('./impl.cjs');
const { KeyedLimiter, Policy, Gcra, FixedWindow, SlidingWindowLog, LeakyBucket, TokenBucket, SlidingWindowCounter } = api;
const { assertLimiterError, assertLimiterRejects, fakeTime } = require('./helpers.cjs');

const SECOND = 1000;

/** A call of each KeyedLimiter method that takes a key, for `key`: each must refuse a bad key alike. */
function keyCalls(keyed, key) {
  return [
    () => keyed.tryAcquire(key, 1, 0),
    () => keyed.peek(key, 1, 0),
    () => keyed.reserve(key, 1, Infinity, 0),
    () => keyed.refund(key, 1, 0),
    () => keyed.tryAcquireBatch(key, [1], 0),
    () => keyed.reset(key),
  ];
}

/**
 * A limiter of one a 100 ms (a KeyedLimiter or a Policy, with `target`: a
 * key or a request, `other`: another, and what a reset of each answers),
 * used once, then two waiters. A reset of the target forgets their
 * bookings: aborting the first then moves nobody up, and the second goes
 * at its own slot. A reset of the other, which the store does not hold,
 * changes nothing: the second moves up into the first's slot.
 */
async function resetAndAbort(make) {
  for (const resetTarget of [true, false]) {
    const time = fakeTime().install();
    try {
      const [limiter, target, held, other, otherHeld] = make(time.now);
      limiter.tryAcquire(target);
      const controller = new AbortController();
      const first = limiter.acquire(target, 1, { signal: controller.signal }).catch((error) => error.name);
      const second = limiter.acquire(target, 1).then(() => time.now());
      assert.equal(limiter.reset(resetTarget ? target : other), resetTarget ? held : otherHeld);
      assert.equal(limiter.peek(target).allowed, resetTarget, 'the bookings are forgotten, or kept');
      controller.abort();
      assert.equal(await first, 'AbortError');
      await time.advance(200);
      assert.equal(await second, resetTarget ? 1_200 : 1_100, 'moved up only when the reset changed nothing');
    } finally {
      time.uninstall();
    }
  }
}

/**
 * A limiter of one a 100 ms (a KeyedLimiter or a Policy, with `target`: a
 * key or a request), used once, then booked for the next slot by a
 * reservation or a waiter. A reset forgets that booking, and the target,
 * used again, books the same slot anew: the first booking given back then
 * (cancelled, aborted) must give nothing back, or that slot would hold two
 * requests of a limit of one.
 */
async function resetThenGiveBack(make) {
  for (const how of ['cancel', 'abort']) {
    const time = fakeTime().install();
    try {
      const [limiter, target] = make(time.now);
      limiter.tryAcquire(target);
      const controller = new AbortController();
      const first = how === 'cancel' ? limiter.reserve(target) : limiter.acquire(target, 1, { signal: controller.signal }).catch((error) => error.name);
      assert.ok(limiter.reset(target));
      limiter.tryAcquire(target);
      assert.equal(limiter.reserve(target).atMs, 1_100, 'the slot booked before the reset, booked anew');
      if (how === 'cancel') {
        first.cancel();
      } else {
        controller.abort();
        assert.equal(await first, 'AbortError');
      }
      assert.equal(limiter.reserve(target).atMs, 1_200, `${how}: never that slot again`);
    } finally {
      time.uninstall();
    }
  }
}

/** A window and a GCRA of one a 100 ms on `clock`, or on the default clock. */
const oneA100Ms = (clock) => [new FixedWindow({ limit: 1, windowMs: 100, clock }), new Gcra({ burst: 1, emissionIntervalMs: 100, clock })];

describe('KeyedLimiter', () => {
  it('starts every key fresh, whatever the limiter it was given has seen', () => {
    for (const make of [() => new Gcra({ burst: 2, emissionIntervalMs: 10 }), () => new TokenBucket({ capacity: 2, refillTokens: 1, refillPeriodMs: 10 })]) {
      const used = make();
      used.tryAcquire(2, 0);
      const keyed = new KeyedLimiter(used);
      assert.equal(keyed.peek('new', 2, 1).allowed, true, 'peek of a new key');
      for (let k = 0; k < 100; k++) assert.equal(keyed.tryAcquire(`k${k}`, 1, 1).allowed, true);
      keyed.reclaim(1e9);
      assert.equal(keyed.size, 0, 'keys back to fresh are dropped');
      const policy = new Policy({ limits: [{ name: 'p', by: ['u'], limiter: used }] });
      assert.equal(policy.tryAcquire({ u: 'a' }, 2, 1).allowed, true);
    }
  });

  it('reset puts a key back to fresh, as a key never seen, and leaves the others', () => {
    const makers = [
      () => new Gcra({ burst: 3, emissionIntervalMs: 100 }),
      () => new TokenBucket({ capacity: 4, refillTokens: 1, refillPeriodMs: 100, initialTokens: 1 }),
      () => new SlidingWindowLog({ limit: 3, windowMs: 100 }),
      () => new FixedWindow({ limit: 3, windowMs: 100 }),
    ];
    for (const make of makers) {
      const keyed = new KeyedLimiter(make());
      assert.equal(keyed.reset('alice'), false, 'never seen: fresh already');
      while (keyed.tryAcquire('alice', 1, 5).allowed);
      keyed.tryAcquire('bob', 1, 5);
      assert.equal(keyed.reset(new TextEncoder().encode('alice')), true, 'bytes of its UTF-8: the same key');
      const fresh = make();
      assert.deepEqual(keyed.peek('alice', 1, 5), fresh.peek(1, 5));
      assert.deepEqual(keyed.tryAcquire('alice', 1, 5), fresh.tryAcquire(1, 5));
      assert.ok(keyed.peek('bob', 0, 5).resetAfterMs > 0, 'the other key kept what it used');
    }
    const keyed = new KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: 100 }));
    assertLimiterError(() => keyed.reset(1.5), 'invalid_value', 'key');
    assertLimiterError(() => keyed.reset({}), 'invalid_type', 'key');
  });

  it('reset forgets the bookings of the key: a waiter then aborted moves nobody up, unless the key was not held', () =>
    resetAndAbort((clock) => {
      const keyed = new KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: 100, clock }));
      return [keyed, 'k', true, 'other', false];
    }));

  it('a booking made before a reset gives nothing back: the key booked its slot anew', async () => {
    for (const i of [0, 1]) await resetThenGiveBack((clock) => [new KeyedLimiter(oneA100Ms(clock)[i]), 'k']);
  });

  it('a whole number beyond 2^53 is its digits, as Python spells the int', () => {
    const keyed = new KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: 100 }));
    assert.equal(keyed.tryAcquire(1e21, 1, 0).allowed, true);
    assert.equal(keyed.tryAcquire('1000000000000000000000', 1, 0).allowed, false, 'one key');
    assert.equal(keyed.tryAcquire('1e+21', 1, 0).allowed, true, "not String(1e21)'s spelling");
    const policy = new Policy({ limits: [{ name: 'u', by: ['user'], limiter: new Gcra({ burst: 1, emissionIntervalMs: 100 }) }] });
    assert.equal(policy.tryAcquire({ user: 2 ** 60 }, 1, 0).allowed, true);
    assert.equal(policy.tryAcquire({ user: String(2n ** 60n) }, 1, 0).allowed, false);
  });

  it('a number that is not whole is no key, as a Python float is not', () => {
    const keyed = new KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: 100 }));
    const policy = new Policy({ limits: [{ name: 'u', by: ['user'], limiter: new Gcra({ burst: 1, emissionIntervalMs: 100 }) }] });
    for (const bad of [1.5, NaN, Infinity, -Infinity]) {
      assertLimiterError(() => keyed.tryAcquire(bad, 1, 0), 'invalid_value', 'key', String(bad));
      assertLimiterError(() => keyed.peek(bad, 1, 0), 'invalid_value', 'key', String(bad));
      // Named by its field, as the Redis policy names it.
      assertLimiterError(() => policy.tryAcquire({ user: bad }, 1, 0), 'invalid_value', 'request.user', String(bad));
    }
    for (const [bad, kind] of [[null, 'null'], [true, 'boolean'], [{}, 'object']]) {
      const error = assertLimiterError(() => policy.tryAcquire({ user: bad }, 1, 0), 'invalid_type', 'request.user');
      assert.equal(error.message, `\`request.user\` must be a string, a number or a Uint8Array, not ${kind}`);
    }
    assert.equal(keyed.size, 0, 'nothing taken');
    assert.equal(keyed.tryAcquire(-0, 1, 0).allowed, true, '-0 is the key 0');
    assert.equal(keyed.tryAcquire('0', 1, 0).allowed, false);
  });

  it('keeps keys apart, and 42 and "42" are one key', () => {
    const keyed = new KeyedLimiter(new Gcra({ burst: 2, emissionIntervalMs: 100, name: 'per-user' }));
    assert.equal(keyed.tryAcquire('a', 2, 0).allowed, true);
    assert.equal(keyed.tryAcquire('a', 1, 0).allowed, false);
    assert.equal(keyed.tryAcquire('b', 2, 0).allowed, true);
    assert.equal(keyed.tryAcquire(42, 2, 0).allowed, true);
    const d = keyed.tryAcquire('42', 1, 0);
    assert.deepStrictEqual(d, { allowed: false, remaining: 0, limit: 2, retryAfterMs: 100, resetAfterMs: 200 });
    assert.equal(keyed.size, 3);
    assert.deepStrictEqual([keyed.limit, keyed.algorithm, keyed.name, keyed.windowMs], [2, 'gcra', 'per-user', 200]);
    assert.deepStrictEqual([keyed.maxKeys, keyed.eviction], [null, 'nearest_fresh']);
    assert.equal(keyed.headers(d)['RateLimit-Policy'], '"per-user";q=2;w=1');
    assert.equal(keyed.headers(d)['Retry-After'], '1');
  });

  it('keys of any length and any characters stay apart, whole', () => {
    // Both builds take ASCII keys of up to 64 bytes through memory they share
    // with the JS layer, and others as strings, which the addon reads into a
    // 128-byte buffer on the stack when short and onto the heap when not: keys that differ
    // only in their last character, on both sides of those edges, with
    // multi-byte characters across them.
    const keyed = new KeyedLimiter(new FixedWindow({ limit: 1, windowMs: SECOND }));
    const keys = [];
    for (const length of [0, 1, 22, 23, 62, 63, 64, 65, 120, 123, 124, 125, 126, 127, 128, 129, 1000]) {
      for (const tail of ['a', 'b', 'é', '€', '😀', '\ufffd']) keys.push('k'.repeat(length) + tail);
    }
    keys.push('😀'.repeat(31) + 'a', '😀'.repeat(31) + 'b', '€'.repeat(41) + 'a', '€'.repeat(41) + 'b');
    for (const key of keys) assert.equal(keyed.tryAcquire(key, 1, 0).allowed, true, `first call for a key of ${key.length}`);
    assert.equal(keyed.size, keys.length);
    for (const key of keys) assert.equal(keyed.tryAcquire(key, 1, 0).allowed, false, `second call for a key of ${key.length}`);
  });

  it('a key with a lone surrogate is refused by name in every method, as in Python, storing nothing', async () => {
    // Node-API and wasm-bindgen wrote it with U+FFFD in its place: '\ud800',
    // '\udfff' and '\ufffd' were one key, sharing one limit.
    const keyed = new KeyedLimiter(new FixedWindow({ limit: 1, windowMs: SECOND }));
    const keys = [];
    for (const length of [0, 1, 63, 64, 65, 127, 128, 1000]) {
      for (const lone of ['\ud800', '\udfff', '\ude00\ud83d', '\ud83d\ud83d\ude00']) keys.push('k'.repeat(length) + lone, lone + 'k'.repeat(length));
    }
    const message = '`key` must be valid Unicode text (no lone surrogates)';
    for (const key of keys) {
      for (const call of keyCalls(keyed, key)) {
        assert.equal(assertLimiterError(call, 'invalid_value', 'key', `a key of ${key.length}`).message, message);
      }
      assert.equal((await assertLimiterRejects(keyed.acquire(key), 'invalid_value', 'key')).message, message);
    }
    assert.equal(keyed.size, 0);
    // A pair is one character, and U+FFFD a key like any other.
    for (const key of ['\ud83d\ude00', '\ufffd', 'a\ud83d\ude00'.repeat(40)]) {
      assert.deepStrictEqual([keyed.tryAcquire(key, 1, 0).allowed, keyed.tryAcquire(key, 1, 0).allowed], [true, false], `a key of ${key.length}`);
    }
  });

  // The wasm memory grows, detaching the JS layer's views of it: keys must
  // still be read whole (a detached view sends them the string way).
  it('keys stay whole once the store has grown', () => {
    const keyed = new KeyedLimiter(new FixedWindow({ limit: 1, windowMs: SECOND }));
    assert.equal(keyed.tryAcquire('first', 1, 0).allowed, true);
    for (let i = 0; i < 200_000; i++) keyed.tryAcquire(`grown-${i}`, 1, 0);
    assert.equal(keyed.size, 200_001);
    assert.equal(keyed.tryAcquire('first', 1, 0).allowed, false);
    assert.equal(keyed.tryAcquire('second', 1, 0).allowed, true);
    assert.equal(keyed.peek('second', 1, 0).allowed, false);
    assert.equal(keyed.peek('third', 1, 0).allowed, true);
  });

  it('peek inserts no key; reclaim drops the keys back to fresh', () => {
    const keyed = new KeyedLimiter(new FixedWindow({ limit: 3, windowMs: SECOND }));
    assert.equal(keyed.peek('x', 1, 0).remaining, 2);
    assert.equal(keyed.size, 0);
    keyed.tryAcquire('x', 1, 0);
    keyed.tryAcquire('y', 1, 500);
    assert.equal(keyed.size, 2);
    keyed.reclaim(SECOND);
    assert.equal(keyed.size, 0, 'both windows are over: both keys are fresh again');
    assert.equal(keyed.tryAcquire('x', 3, SECOND).allowed, true);
  });

  it('maxKeys with eviction "refuse" throws store_full; nearest_fresh makes room', () => {
    const refuse = new KeyedLimiter(new SlidingWindowLog({ limit: 1, windowMs: SECOND }), { maxKeys: 2, eviction: 'refuse' });
    refuse.tryAcquire('a', 1, 0);
    refuse.tryAcquire('b', 1, 0);
    assert.throws(() => refuse.tryAcquire('c', 1, 0), {
      name: 'RangeError',
      code: 'store_full',
      message: "the store holds its maximum of 2 keys, and its eviction is 'refuse': a new key waits until a key held is back to fresh",
    });
    assert.deepStrictEqual([refuse.maxKeys, refuse.eviction], [2, 'refuse']);
    // A fresh limiter of the keys' configuration, of its class, name and clock.
    const clock = () => 5;
    const store = new KeyedLimiter(new TokenBucket({ capacity: 3, refillTokens: 1, refillPeriodMs: 10, name: 'b', clock }), { maxKeys: 9 });
    store.tryAcquire('a', 3);
    const fresh = store.limiter;
    assert.ok(fresh instanceof TokenBucket && fresh !== store.limiter);
    assert.deepStrictEqual([fresh.capacity, fresh.refillPeriodMs, fresh.name, fresh.peek(3).allowed], [3, 10, 'b', true]);
    fresh.tryAcquire(3);
    assert.equal(fresh.peek().retryAfterMs, 10, 'on the store\'s clock, which stands still');
    assert.equal(store.peek('b', 3).allowed, true, 'its own state');
    assert.ok(new KeyedLimiter(new FixedWindow({ limit: 1, calendar: 'day' })).limiter instanceof FixedWindow);
    const evict = new KeyedLimiter(new SlidingWindowLog({ limit: 1, windowMs: SECOND }), { maxKeys: 2 });
    evict.tryAcquire('a', 1, 0);
    evict.tryAcquire('b', 1, 0);
    assert.equal(evict.tryAcquire('c', 1, 0).allowed, true);
    assert.ok(evict.size <= 2);
    assertLimiterError(() => new KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: 1 }), { eviction: 'lru' }), 'invalid_value', 'eviction');
    // Not "not given": NaN (say, Number(process.env.MAX_KEYS) unset) and '' are refused.
    assertLimiterError(() => new KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: 1 }), { maxKeys: NaN }), 'invalid_value', 'maxKeys');
    assertLimiterError(() => new KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: 1 }), { eviction: '' }), 'invalid_value', 'eviction');
    // Without a bound no key is ever refused: that choice is refused. The
    // default may be named, so a store's getters copy it.
    const gcra = () => new Gcra({ burst: 1, emissionIntervalMs: 1 });
    assertLimiterError(() => new KeyedLimiter(gcra(), { eviction: 'refuse' }), 'invalid_value', 'eviction');
    assertLimiterError(
      () => new Policy({ limits: [{ name: 'a', rate: '1/second', by: ['ip'], eviction: 'refuse' }] }),
      'invalid_value',
      'eviction',
    );
    for (const eviction of ['nearest_fresh', 'refuse']) {
      assert.equal(new KeyedLimiter(gcra(), { maxKeys: 3, eviction }).tryAcquire('a', 1, 0).allowed, true);
    }
    const unbounded = new KeyedLimiter(gcra());
    const copy = new KeyedLimiter(unbounded.limiter, { maxKeys: unbounded.maxKeys, eviction: unbounded.eviction });
    assert.deepStrictEqual([copy.maxKeys, copy.eviction], [null, 'nearest_fresh']);
    assertLimiterError(() => new KeyedLimiter({}), 'invalid_type', 'limiter');
    assertLimiterError(() => new KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: 1 })).tryAcquire({}, 1, 0), 'invalid_type', 'key');
  });

  it('tryAcquireBatch decides each cost in turn at one instant', () => {
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 3, refillTokens: 1, refillPeriodMs: SECOND }));
    const got = keyed.tryAcquireBatch('k', [1, 1, 2, 1], 0);
    assert.deepStrictEqual(got.map((d) => [d.allowed, d.remaining]), [[true, 2], [true, 1], [false, 1], [true, 0]]);
    const other = keyed.tryAcquireBatch('other', [1], 0);
    assertLimiterError(() => keyed.tryAcquireBatch('other', [1, 4], 0), 'cost_exceeds_limit', 'cost');
    assert.equal(keyed.peek('other', 0, 0).remaining, other[0].remaining, 'a failed batch decides nothing');
    assertLimiterError(() => keyed.tryAcquireBatch('other', [1, '2'], 0), 'invalid_type', 'costs');
  });

  it('tryAcquireBatch at the end of the clock answers as tryAcquire one by one', () => {
    // 834 ns before 2^64 ns, one unit moves a GCRA key's arrival time past
    // the end of the clock, which the store keeps as used without end. The
    // napi build's batch (the core's) answered the second cost as from the
    // unclipped state, 1 left and a retry after one interval, where the
    // wasm build (tryAcquire per cost) said none left and a retry at the
    // end (found by tests/differential).
    const gcra = () => Gcra.perPeriod({ burst: 2, tokens: 5, periodMs: 6_843_312_000_000 });
    const now = 18446744073709.550781;
    const batch = new KeyedLimiter(gcra()).tryAcquireBatch('a', [1, 2, 0], now);
    const single = new KeyedLimiter(gcra());
    assert.deepStrictEqual(batch, [1, 2, 0].map((cost) => single.tryAcquire('a', cost, now)));
    assert.deepStrictEqual(batch.map((d) => [d.allowed, d.remaining]), [[true, 1], [false, 0], [true, 0]]);
  });

  it('tryAcquireBatch names its first cost above the limit, before a full store refuses', () => {
    // As Python does (found by tests/differential): a cost above the limit
    // fails the call before anything is decided, a new key's refusal included.
    const full = new KeyedLimiter(new TokenBucket({ capacity: 5, refillTokens: 1, refillPeriodMs: SECOND }), { maxKeys: 1, eviction: 'refuse' });
    assert.throws(() => full.tryAcquireBatch('a', [4, 6, 2 ** 53 - 1], 0), /`cost` 6 exceeds the limit 5/);
    full.tryAcquire('a', 1, 0);
    assertLimiterError(() => full.tryAcquireBatch('new', [0, 1, 7], 0), 'cost_exceeds_limit', 'cost');
    assert.throws(() => full.tryAcquireBatch('new', [0, 1], 0), { code: 'store_full' });
    assert.deepStrictEqual(full.tryAcquireBatch('new', [0, 0], 0), [full.peek('new', 0, 0), full.peek('new', 0, 0)]);
  });

  it('a new key refused by a full store leaves the store\'s time, after a batch too', () => {
    // The wasm build decides a batch cost by cost, with the key made ready
    // first (the core's prepare_batch), the napi build through the core's
    // batch: a refusal after the former swept and moved the store's time to
    // 150, and a caller whose clock lags found 2 units where napi found 1.
    const keyed = new KeyedLimiter(new Gcra({ burst: 3, emissionIntervalMs: 100 }), { maxKeys: 1, eviction: 'refuse' });
    keyed.reclaim(0);
    assert.deepStrictEqual(keyed.tryAcquireBatch('k', [0, 2], 0).map((d) => d.allowed), [true, true]);
    assert.throws(() => keyed.tryAcquire('new', 1, 150), { code: 'store_full' });
    assert.equal(keyed.tryAcquire('k', 0, 50).remaining, 1);
  });

  it('reserve books per key, refund gives it back, acquire waits on one timer', async () => {
    const keyed = new KeyedLimiter(new LeakyBucket({ capacity: 2, intervalMs: 100 }));
    const r = keyed.reserve('q', 1, Infinity, 0);
    assert.deepStrictEqual([r.ok, r.waitMs], [true, 0]);
    const r2 = keyed.reserve('q', 1, Infinity, 0);
    assert.deepStrictEqual([r2.ok, r2.waitMs, r2.atMs], [true, 100, 100]);
    keyed.refund('q', 1, r2.atMs);
    assert.equal(keyed.reserve('q', 1, 50, 0).ok, false, 'one more would wait 100 ms');

    const time = fakeTime({ start: 0 }).install();
    try {
      const clocked = new KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: 100, clock: time.now }));
      await clocked.acquire('u', 1);
      let done = false;
      const p = clocked.acquire('u', 1).then(() => (done = true));
      await time.advance(99);
      assert.equal(done, false);
      await time.advance(1);
      await p;
      assert.equal(done, true);
      await assertLimiterRejects(clocked.acquire('u', 5), 'cost_exceeds_limit', 'cost');
    } finally {
      time.uninstall();
    }
  });
});

describe('Policy', () => {
  it('reset puts the request back to fresh in the limits keyed by fields it all gives, never a global one', () => {
    const oneAMinute = () => new Gcra({ burst: 1, emissionIntervalMs: 60 * SECOND });
    const policy = new Policy();
    policy.add('per-user', oneAMinute(), { by: ['user'] });
    policy.add('per-ip', oneAMinute(), { by: ['ip'] });
    policy.add('per-user-ip', oneAMinute(), { by: ['user', 'ip'] });
    policy.add('global', new FixedWindow({ limit: 10, windowMs: 60 * SECOND }));
    const attempt = { user: 'alice', ip: '192.0.2.1', path: '/login' };
    assert.equal(policy.tryAcquire(attempt, 1, 0).allowed, true);

    assert.equal(policy.reset({ user: 'alice' }), 1, "the user's limit only: the others need the IP");
    let peeked = policy.peek(attempt, 1, 0);
    assert.equal(peeked.deniedBy, 'per-ip');
    assert.equal(peeked.limits[0].remaining, 1, 'per-user is fresh');
    assert.equal(policy.reset({ user: new TextEncoder().encode('alice') }), 0, 'held no more (bytes of its UTF-8: the same key)');
    assert.equal(policy.reset(attempt), 2, 'the whole request: every keyed limit it was counted in');
    peeked = policy.peek(attempt, 1, 0);
    assert.equal(peeked.allowed, true);
    assert.equal(peeked.limits[3].remaining, 8, 'the global window keeps its count (1 counted, 1 asked)');

    assert.equal(policy.tryAcquire(attempt, 1, 0).allowed, true);
    for (const nothing of [{}, undefined, { usr: 'alice' }, { path: '/login' }]) {
      assertLimiterError(() => policy.reset(nothing), 'invalid_value', 'request');
    }
    assertLimiterError(() => policy.reset({ user: 1.5 }), 'invalid_value', 'request.user');
    assertLimiterError(() => policy.reset('alice'), 'invalid_type', 'request');
    // An array, a Map or a Set is no request, as Python refuses a list:
    // their fields (entries) were read as none. Nor is one of another realm
    // (a `vm` context's, an iframe's), which `instanceof` did not see, nor
    // binary data (Python refuses bytes): a Uint8Array's bytes were read as
    // the fields "0", "1"..., an ArrayBuffer's or a DataView's as none.
    const other = (code) => vm.runInNewContext(code);
    const wrongs = [
      [], [['user', 'alice']], new Map([['user', 'alice']]), new Set(['alice']), new WeakMap(), new WeakSet(),
      other("new Map([['user', 'alice']])"), other("new Set(['alice'])"), other('[]'),
      new TextEncoder().encode('alice'), Buffer.from('alice'), new Int32Array(2), new Float64Array(1), new BigInt64Array(1),
      new ArrayBuffer(4), new SharedArrayBuffer(4), new DataView(new ArrayBuffer(4)),
      other('new Uint8Array([97])'), other('new ArrayBuffer(1)'), other('new DataView(new ArrayBuffer(1))'),
    ];
    for (const wrong of wrongs) {
      assertLimiterError(() => policy.reset(wrong), 'invalid_type', 'request');
      assertLimiterError(() => policy.tryAcquire(wrong, 1, 0), 'invalid_type', 'request');
      assertLimiterError(() => api.Policy.fromRates('10/second').tryAcquire(wrong, 1, 0), 'invalid_type', 'request');
    }
    // Nor a primitive boxed (Python refuses a str: a String object's
    // characters were read as the fields "0", "1"..., a Number's as none,
    // where the primitive is refused), nor a function's `arguments` (its
    // values were read as the fields "0", "1"...), of any realm.
    const args = function () {
      return arguments;
    };
    const strictArgs = function () {
      'use strict';
      return arguments;
    };
    class Text extends String {}
    const boxed = [
      new String('alice'), Object('alice'), new Text('alice'), new Number(1), new Boolean(true), Object(Symbol('alice')), Object(1n),
      args('alice'), args(), strictArgs('alice'), Object.setPrototypeOf(args('alice'), null),
      other("new String('alice')"), other('new Number(1)'), other("Object(Symbol('alice'))"), other("(function () { return arguments; })('alice')"),
    ];
    for (const wrong of boxed) {
      assertLimiterError(() => policy.reset(wrong), 'invalid_type', 'request');
      assertLimiterError(() => policy.tryAcquire(wrong, 1, 0), 'invalid_type', 'request');
      assertLimiterError(() => api.Policy.fromRates('10/second').tryAcquire(wrong, 1, 0), 'invalid_type', 'request');
      assertLimiterError(() => api.Policy.fromRates('10/second', { by: ['0'] }).tryAcquire(wrong, 1, 0), 'invalid_type', 'request');
    }
    // An object that only says it is one (its Symbol.toStringTag) is a request.
    for (const tag of ['String', 'Number', 'Arguments']) {
      assert.equal(api.Policy.fromRates('1/hour', { by: ['user'] }).tryAcquire({ user: 'alice', [Symbol.toStringTag]: tag }, 1, 0).allowed, true, tag);
      class Tagged {
        user = 'alice';
        get [Symbol.toStringTag]() {
          return tag;
        }
      }
      assert.equal(api.Policy.fromRates('1/hour', { by: ['user'] }).tryAcquire(new Tagged(), 1, 0).allowed, true, `a class instance tagged ${tag}`);
    }
    assert.equal(policy.peek(attempt, 1, 0).allowed, false, 'a failed reset resets nothing');
    assert.equal(policy.reset({ user: 'bob', ip: '192.0.2.2' }), 0, "another user's reset leaves alice's keys");
    assert.equal(policy.peek(attempt, 1, 0).deniedBy, 'per-user');
  });

  it('a request is told from a Map by what it is, not by the Symbol.toStringTag it reads as', () => {
    // Told by its tag alone, a Proxy whose get trap throws on a key its
    // target lacks (a "strict" object) threw its own error from the read of
    // Symbol.toStringTag, no limiter error, where it was a request; and a
    // Map whose tag is its own (a subclass's, or set on it) was read as a
    // request of no fields: admitted by a global limit, missing its field
    // for a keyed one.
    const strict = new Proxy(
      { user: 'alice' },
      {
        get(target, key) {
          if (!(key in target)) throw new Error(`no ${String(key)}`);
          return target[key];
        },
      },
    );
    const policy = Policy.fromRates('1/hour', { by: ['user'] });
    assert.equal(policy.tryAcquire(strict, 1, 0).allowed, true);
    assert.equal(policy.peek({ user: 'alice' }, 1, 0).allowed, false, "alice's unit was taken");
    assert.equal(policy.reset(strict), 1);

    class Tagged extends Map {
      get [Symbol.toStringTag]() {
        return 'Tagged';
      }
    }
    const retagged = new Map([['user', 'alice']]);
    Object.defineProperty(retagged, Symbol.toStringTag, { value: 'Object' });
    const proxied = new Proxy(new Map([['user', 'alice']]), {});
    for (const wrong of [new Tagged([['user', 'alice']]), retagged, proxied]) {
      assertLimiterError(() => policy.tryAcquire(wrong, 1, 0), 'invalid_type', 'request');
      assertLimiterError(() => api.Policy.fromRates('10/second').tryAcquire(wrong, 1, 0), 'invalid_type', 'request');
    }
  });

  it('reset forgets the bookings of the request: a waiter then aborted moves nobody up, unless no limit held it', () =>
    resetAndAbort((clock) => {
      const policy = new Policy({ limits: [{ name: 'u', by: ['user'], limiter: new Gcra({ burst: 1, emissionIntervalMs: 100 }) }] }, { clock });
      return [policy, { user: 'k' }, 1, { user: 'other' }, 0];
    }));

  it('a booking made before a reset gives nothing back: the request booked its slot anew', async () => {
    for (const i of [0, 1]) {
      await resetThenGiveBack((clock) => [new Policy({ limits: [{ name: 'u', by: ['user'], limiter: oneA100Ms()[i] }] }, { clock }), { user: 'k' }]);
    }
  });

  it("a reset, which resets no global limit, keeps another key's booking given back there", () => {
    // Counted as a reset of the global limit too, it kept every booking made
    // before it from being given back, whatever its key: bob's slot in the
    // global limit went unused, and the next request waited a slot more.
    const gcra = () => new Gcra({ burst: 1, emissionIntervalMs: 100 });
    const policy = new Policy({ limits: [{ name: 'all', limiter: gcra() }, { name: 'u', by: ['user'], limiter: gcra() }] });
    policy.tryAcquire({ user: 'alice' }, 1, 0);
    const bob = policy.reserve({ user: 'bob' }, 1, Infinity, 0);
    assert.equal(bob.waitMs, 100);
    assert.equal(policy.reset({ user: 'alice' }), 1);
    bob.cancel();
    assert.equal(policy.reserve({ user: 'carol' }, 1, Infinity, 0).waitMs, 100, "bob's slot was given back");
  });

  it('requests of any size and characters stay apart, whole', () => {
    // Both builds take a request of short ASCII fields through memory they
    // share with the JS layer (each string at most 255 characters, 512 bytes
    // in all), and others as strings: requests that differ in one character,
    // on both sides of those edges, with multi-byte characters, and more
    // fields than the addon reads without allocating (8).
    const by = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'];
    const policy = new Policy({ limits: [{ name: 'all', rate: '1/second', by }] });
    const requestOf = (j) => Object.fromEntries(by.map((field) => [field, field === 'j' ? j : field]));
    const values = [];
    for (const length of [0, 1, 254, 255, 256, 480, 490, 1000]) {
      for (const tail of ['a', 'b', 'é', '😀']) values.push('v'.repeat(length) + tail);
    }
    for (const value of values) assert.equal(policy.tryAcquire(requestOf(value), 1, 0).allowed, true, `first call, j of ${value.length}`);
    for (const value of values) assert.equal(policy.tryAcquire(requestOf(value), 1, 0).allowed, false, `second call, j of ${value.length}`);
    // A field name's characters count as its value's do.
    const named = new Policy({ limits: [{ name: 'n', rate: '1/second', by: ['é', 'x'.repeat(300)] }] });
    assert.equal(named.tryAcquire({ é: '1', ['x'.repeat(300)]: '2' }, 1, 0).allowed, true);
    assert.equal(named.tryAcquire({ é: '1', ['x'.repeat(300)]: '2' }, 1, 0).allowed, false);
    assert.equal(named.tryAcquire({ é: '1', ['x'.repeat(300)]: '3' }, 1, 0).allowed, true);
    // Short fields that fill the 512 bytes to one byte short of, at and one
    // past their end (a length byte and its characters each): 255 and 250
    // to 252 characters, differing in their last.
    const two = new Policy({ limits: [{ name: 'two', rate: '1/second', by: ['k', 'j'] }] });
    for (const length of [250, 251, 252]) {
      for (const tail of ['a', 'b']) {
        const request = { k: 'k'.repeat(255), j: 'v'.repeat(length - 1) + tail };
        assert.equal(two.tryAcquire(request, 1, 0).allowed, true, `first call, j of ${length}`);
        assert.equal(two.tryAcquire(request, 1, 0).allowed, false, `second call, j of ${length}`);
      }
    }
  });

  it('a request of exactly 8 fields, as many as the addon reads without allocating, is read whole', () => {
    // Both builds read a request written into their shared memory into 8
    // places, then into a list past that: 7, 8 and 9 fields on either side.
    for (const count of [7, 8, 9]) {
      const policy = new Policy({ limits: [{ name: 'per-user', algorithm: 'fixed_window', rate: '1/second', by: ['user'] }] });
      const request = { user: 'a' };
      for (let i = 1; i < count; i++) request[`f${i}`] = String(i);
      assert.equal(policy.tryAcquire(request, 1, 0).allowed, true, `${count} fields`);
      assert.equal(policy.tryAcquire(request, 1, 0).allowed, false, `${count} fields`);
      assert.equal(policy.tryAcquire({ ...request, user: 'b' }, 1, 0).allowed, true, `${count} fields`);
    }
  });

  it('a request without a field a limit is keyed by names the field and the limit, consuming nothing', () => {
    const policy = new Policy({
      limits: [
        { name: 'global', rate: '1/second' },
        { name: 'per-ip', rate: '1/second', by: ['ip'] },
        { name: 'per-user', rate: '1/second', by: ['user', 'ip'] },
      ],
    });
    // A field is an own enumerable property, as Object.keys reads them: a
    // hidden one is none, and named as missing (the core named no field).
    const hidden = Object.defineProperty({ user: 'a' }, 'ip', { value: '1', enumerable: false });
    for (const [request, field, limit] of [[{ user: 'a' }, 'ip', 'per-ip'], [null, 'ip', 'per-ip'], [{ ip: '1' }, 'user', 'per-user'], [hidden, 'ip', 'per-ip']]) {
      const error = assertLimiterError(() => policy.tryAcquire(request, 1, 0), 'invalid_value', 'request');
      assert.equal(error.message, `\`request\` lacks the field "${field}" that limit "${limit}" is keyed by`);
      assertLimiterError(() => policy.peek(request, 1, 0), 'invalid_value', 'request');
      assertLimiterError(() => policy.reserve(request, 1, 0, 0), 'invalid_value', 'request');
    }
    assert.equal(policy.tryAcquire({ ip: '1', user: 'a' }, 1, 0).allowed, true, 'the global limit kept its unit');
  });

  it('a limit of configured limiters takes a bound, or a KeyedLimiter with its own, and refuses other fields', () => {
    const gcra = () => new Gcra({ burst: 1, emissionIntervalMs: 1000 });
    const bounded = (limit) => {
      const policy = new Policy({ limits: [{ name: 'a', by: ['user'], ...limit }] });
      policy.tryAcquire({ user: 'u1' }, 1, 0);
      return policy;
    };
    for (const limit of [
      { limiter: gcra(), maxKeys: 1, eviction: 'refuse' },
      { limiter: new KeyedLimiter(gcra(), { maxKeys: 1, eviction: 'refuse' }) },
    ]) {
      assert.throws(() => bounded(limit).tryAcquire({ user: 'u2' }, 1, 0), (e) => e.code === 'store_full');
    }
    // A KeyedLimiter with no bound: none, and its default eviction is not "given".
    assert.equal(bounded({ limiter: new KeyedLimiter(gcra()) }).tryAcquire({ user: 'u2' }, 1, 0).allowed, true);
    assertLimiterError(() => bounded({ limiter: gcra(), eviction: 'refuse' }), 'invalid_value', 'eviction');
    assertLimiterError(
      () => bounded({ limiter: new KeyedLimiter(gcra(), { maxKeys: 1 }), maxKeys: 2 }),
      'invalid_value',
      'maxKeys',
    );
    // A misspelt field was dropped without a word: three users admitted past max_keys 1.
    assert.throws(
      () => bounded({ limiter: gcra(), max_keys: 1 }),
      (e) => e instanceof TypeError && e.code === 'invalid_config' && e.message.includes('limits[0]: unknown field `max_keys`'),
    );
  });

  it('a calendar limiter reads the epoch clock by default, and reconfigure into one needs it', () => {
    // On performance.now its days followed the process's start.
    const daily = new FixedWindow({ limit: 1, calendar: 'day' });
    const untilMidnight = 86_400_000 - (Date.now() % 86_400_000);
    assert.ok(Math.abs(daily.tryAcquire().resetAfterMs - untilMidnight) < 5_000);
    const plain = new FixedWindow({ limit: 1, windowMs: 1000 });
    assertLimiterError(() => plain.reconfigure(new FixedWindow({ limit: 1, calendar: 'day' })), 'invalid_value', 'other');
    const onEpoch = new FixedWindow({ limit: 1, windowMs: 1000, clock: () => Date.now() });
    onEpoch.reconfigure(new FixedWindow({ limit: 1, calendar: 'day' }));
    assert.equal(onEpoch.calendar, 'day');
  });

  it('a calendar with windowMs is refused, and so is a calendar option a class has not', () => {
    // The window was dropped without a word.
    for (const Window of [FixedWindow, SlidingWindowCounter]) {
      assertLimiterError(() => new Window({ limit: 3, windowMs: 1000, calendar: 'day' }), 'invalid_value', 'windowMs', Window.name);
      assert.equal(new Window({ limit: 3, windowMs: undefined, calendar: 'day' }).calendar, 'day');
    }
    // A log has no calendar: the option is not one of its own (it was
    // ignored once, and its default clock then read Date.now()).
    assert.throws(() => new SlidingWindowLog({ limit: 1, windowMs: 1000, calendar: 'day' }), {
      name: 'TypeError',
      code: 'invalid_type',
      message: '`calendar` is not an option of SlidingWindowLog, which takes limit, windowMs, name, clock',
    });
  });

  it('takes null for algorithm, by and clock as left out, as Python takes None; a limiter its clock likewise', () => {
    const policy = Policy.fromRates('1/second', { algorithm: null, by: null, clock: null });
    assert.deepEqual([policy.names, policy.keyedBy('1/second')], [['1/second'], []]);
    assert.equal(policy.tryAcquire().allowed, true, 'the default clock read');
    assert.equal(new Policy({ limits: [{ name: 'a', rate: '1/second' }] }, { algorithm: null, by: null }).size, 1, 'none beside a configuration');
    const bucket = new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 1000, clock: null });
    assert.equal(bucket.tryAcquire().allowed, true);
  });

  it("takes null for a limiter's name as left out: 'default', as every option's null is its default", () => {
    // It was a TypeError (`name` must be a string), the one option whose
    // null was refused, though it has a default ('default') as `cost` and
    // `refill` have (Python refuses name=None, as it refuses cost=None).
    const made = [
      new Gcra({ burst: 1, emissionIntervalMs: 1, name: null }),
      Gcra.perPeriod({ burst: 1, tokens: 1, periodMs: 1, name: null }),
      new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 1, name: null }),
      TokenBucket.fromBandwidths([{ capacity: 1, refillTokens: 1, refillPeriodMs: 1 }], { name: null }),
      new LeakyBucket({ capacity: 1, intervalMs: 1, name: null }),
      new SlidingWindowLog({ limit: 1, windowMs: 1, name: null }),
      new SlidingWindowCounter({ limit: 1, windowMs: 1, name: null }),
      new FixedWindow({ limit: 1, calendar: 'day', name: null }),
    ];
    for (const limiter of made) {
      assert.equal(limiter.name, 'default', limiter.constructor.name);
      assert.equal(limiter.headers(limiter.tryAcquire(1, 0))['RateLimit-Policy'].startsWith('"default";'), true, limiter.constructor.name);
    }
    const gcra = new Gcra({ burst: 1, emissionIntervalMs: 1 });
    assert.equal(Gcra.fromBytes(gcra.toBytes(), { burst: 1, emissionIntervalMs: 1, name: null }).name, 'default');
    // Another type keeps its error.
    assertLimiterError(() => new Gcra({ burst: 1, emissionIntervalMs: 1, name: 5 }), 'invalid_type', 'name');
  });

  it('takes null for a configured limit\'s `by` as none, as for its maxKeys and eviction and as Policy.add takes it', () => {
    // { limits: [{ name, limiter, by: null }] } was a TypeError (`by` must be an array of strings).
    const policy = new Policy({ limits: [{ name: 'all', limiter: new Gcra({ burst: 1, emissionIntervalMs: 1000 }), by: null, maxKeys: null, eviction: null }] });
    assert.deepEqual(policy.limits, [{ name: 'all', by: [] }]);
    assert.equal(policy.tryAcquire({ user: 'a' }, 1, 0).allowed, true);
    assert.equal(policy.tryAcquire({ user: 'b' }, 1, 0).allowed, false, 'one limiter every request shares');
    const keyed = new Policy({ limits: [{ name: 'k', limiter: new KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: 1000 })), by: null }] });
    assert.deepEqual(keyed.limits, [{ name: 'k', by: [] }]);
    // The declarative configuration keeps JSON's reading: `by: null` a wrong type there (see below).
  });

  it('refuses algorithm and by beside a configuration, JSON text in fromRates and rates in fromConfig, as Python does', () => {
    // Dropped silently, `by` left one global limit where one per user was asked.
    const config = { limits: [{ name: 'api', rate: '2/second' }] };
    // Each error names the option given, in Python's words (`algorithm` when both are).
    const byGiven = assertLimiterError(() => new Policy(config, { by: ['user'] }), 'invalid_value', 'by');
    assert.equal(byGiven.message, "`by` applies only to a rate string; a configuration names each limit's");
    assertLimiterError(() => new Policy(JSON.stringify(config), { algorithm: 'gcra' }), 'invalid_value', 'algorithm');
    assertLimiterError(() => new Policy(config, { algorithm: 'gcra', by: ['user'] }), 'invalid_value', 'algorithm');
    assertLimiterError(() => Policy.fromRates(JSON.stringify(config)), 'invalid_syntax', 'rates');
    // And the other way: fromConfig takes JSON text, as Python's from_config,
    // which refuses a rate string as JSON that does not parse.
    for (const text of ['2/second', ' 2/second', '5', '[]', '"2/second"']) {
      assert.throws(() => Policy.fromConfig(text), (e) => e instanceof TypeError && e.code === 'invalid_config', text);
      assert.throws(() => Policy.fromConfig(text, { by: ['user'] }), (e) => e instanceof TypeError && e.code === 'invalid_config', text);
    }
    assert.deepEqual(Policy.fromConfig(` ${JSON.stringify(config)}`).limits, [{ name: 'api', by: [] }]);
    assert.deepEqual(new Policy('2/second', { by: ['user'] }).limits, [{ name: '2/second', by: ['user'] }]);
    assert.deepEqual(new Policy(config, { clock: () => 0 }).limits, [{ name: 'api', by: [] }]);
  });

  const config = {
    limits: [
      { name: 'per-user', algorithm: 'gcra', rate: '10/second', burst: 2, by: ['user'] },
      { name: 'global', algorithm: 'sliding_window_log', rate: '4/second' },
    ],
  };

  it('is all or nothing across limits, and says which denied', () => {
    const policy = new Policy(config);
    const ok = policy.tryAcquire({ user: 'alice' }, 2, 0);
    assert.equal(ok.allowed, true);
    assert.equal(ok.deniedBy, null);
    assert.deepStrictEqual(ok.limits.map((l) => [l.name, l.remaining]), [['per-user', 0], ['global', 2]]);
    const denied = policy.tryAcquire({ user: 'alice' }, 1, 0);
    assert.equal(denied.allowed, false);
    assert.equal(denied.deniedBy, 'per-user');
    assert.equal(denied.limits[1].remaining, 2, 'global consumed nothing');
    assert.equal(policy.tryAcquire({ user: 'bob' }, 2, 0).allowed, true);
    const global = policy.tryAcquire({ user: 'carol' }, 1, 0);
    assert.equal(global.deniedBy, 'global');
    assert.equal(policy.peek({ user: 'carol' }, 1, 0).limits[0].remaining, 2, 'carol consumed nothing: her full burst');
    const headers = policy.headers(global);
    assert.equal(headers['RateLimit-Policy'], '"per-user";q=2;w=1, "global";q=4;w=1');
    assert.match(headers.RateLimit, /^"per-user";r=\d+;t=\d+, "global";r=0;t=1$/);
    assert.equal(headers['Retry-After'], '1');
    assert.deepStrictEqual(policy.limits, [{ name: 'per-user', by: ['user'] }, { name: 'global', by: [] }]);
  });

  it('reports every limit of policies of any size, built in any order', () => {
    // The addon answers into an array sized for the largest policy built so
    // far: a small policy, then a large one, then the small one again.
    const rates = (n) => Array.from({ length: n }, (_, i) => `${i + 1}/second`).join(';');
    const small = new Policy(rates(1));
    assert.equal(small.tryAcquire({}, 1, 0).limits.length, 1);
    for (const n of [5, 12, 40]) {
      const large = new Policy(rates(n));
      const d = large.tryAcquire({}, 1, 0);
      assert.equal(d.deniedBy, null);
      assert.deepStrictEqual(d.limits.map((l) => l.remaining), Array.from({ length: n }, (_, i) => i));
      const denied = large.tryAcquire({}, 1, 0);
      assert.equal(denied.deniedBy, '1/second');
      assert.deepStrictEqual(denied.limits.map((l) => l.allowed), Array.from({ length: n }, (_, i) => i > 0));
      assert.equal(denied.limits[n - 1].limit, n);
    }
    const again = small.peek({}, 1, 0);
    assert.deepStrictEqual([again.allowed, again.limits.length, again.limits[0].retryAfterMs], [false, 1, SECOND]);
  });

  it('takes JSON text, rate strings, and rejects bad configurations with their codes', () => {
    const fromJson = new Policy(JSON.stringify(config));
    assert.equal(fromJson.tryAcquire({ user: 1 }, 2, 0).allowed, true);
    const rates = Policy.fromRates('2/second;3/minute', { algorithm: 'fixed_window', by: ['ip'] });
    assert.deepStrictEqual(rates.limits.map((l) => l.name), ['2/second', '3/minute']);
    assert.equal(rates.tryAcquire({ ip: '1.2.3.4' }, 2, 0).allowed, true);
    assert.equal(rates.tryAcquire({ ip: '1.2.3.4' }, 1, SECOND).allowed, true);
    assert.equal(rates.tryAcquire({ ip: '1.2.3.4' }, 1, 2 * SECOND).deniedBy, '3/minute');
    assert.throws(() => new Policy({ limits: [{ name: 'x', rate: '1/second', colour: 'red' }] }), (e) => e instanceof TypeError && e.code === 'invalid_config' && /colour/.test(e.message));
    assertLimiterError(() => Policy.fromRates('ten per second'), 'invalid_syntax', 'rates');
    assertLimiterError(() => new Policy(config).tryAcquire({}, 1, 0), 'invalid_value', 'request');
    assertLimiterError(() => new Policy(42), 'invalid_type', 'config');
  });

  it('refuses what JSON cannot carry in a configuration object (NaN, infinities, functions, symbols), naming the place', () => {
    const limit = (extra) => ({ limits: [{ name: 'x', algorithm: 'gcra', rate: '10/second', ...extra }] });
    // JSON would write the numbers as null ("not given") and drop the rest:
    // a limit other than asked, of its defaults. In a field that takes a
    // string too, where "NaN" would have been a fine name.
    const cases = [
      [{ burst: NaN }, 'limits[0].burst: expected JSON data, found NaN'],
      [{ burst: new Number(NaN) }, 'limits[0].burst: expected JSON data, found NaN'],
      [{ burst: Infinity }, 'limits[0].burst: expected JSON data, found Infinity'],
      [{ max_keys: NaN }, 'limits[0].max_keys: expected JSON data, found NaN'],
      [{ name: NaN }, 'limits[0].name: expected JSON data, found NaN'],
      [{ by: ['user', -Infinity] }, 'limits[0].by[1]: expected JSON data, found -Infinity'],
      [{ rate: NaN }, 'limits[0].rate: expected JSON data, found NaN'],
      [{ burst: () => 20 }, 'limits[0].burst: expected JSON data, found a function'],
      [{ algorithm: Symbol('gcra') }, 'limits[0].algorithm: expected JSON data, found a symbol'],
    ];
    for (const [extra, message] of cases) {
      assert.throws(() => new Policy(limit(extra)), { name: 'TypeError', code: 'invalid_config', message: `policy configuration: ${message}` });
    }
    // undefined is "not given", as JSON has it.
    assert.equal(new Policy(limit({ burst: undefined })).tryAcquire({}, 10, 0).allowed, true);
    // A boxed number from another realm is checked as its value too.
    const boxedNaN = require('node:vm').runInNewContext('new Number(NaN)');
    assert.throws(() => new Policy(limit({ burst: boxedNaN })), { code: 'invalid_config', message: 'policy configuration: limits[0].burst: expected JSON data, found NaN' });
    // A BigInt that is a safe integer is that number, boxed or not.
    for (const burst of [5n, Object(5n)]) {
      const policy = new Policy(limit({ burst }));
      assert.equal(policy.tryAcquire({}, 5, 0).allowed, true);
      assert.equal(policy.tryAcquire({}, 1, 0).allowed, false, 'a burst of 5, not the default');
    }
    assert.throws(() => new Policy(limit({ burst: 2n ** 64n })), (e) => e instanceof TypeError && e.code === 'invalid_config');
  });

  it('reads JSON text as serde does in Rust and Python: a count written as a float and a repeated field refused, digits past 2^53 exact', () => {
    // JSON.parse took `2.0`, `2e0` and `-0` as numbers (-0 then a zero
    // burst: `zero_value`), and a repeated key (the last counted), where
    // Python's Policy(text) refuses each as `invalid_config`: one shared
    // file read two ways.
    const text = (fields) => `{"limits": [{"name": "a", "rate": "1/second", "by": ["user"], ${fields}}]}`;
    const refused = [
      [text('"burst": 2.0'), 'limits[0].burst: expected a whole number from 0 to 2^64 - 1, found the float 2.0'],
      [text('"burst": 2e0'), 'limits[0].burst: expected a whole number from 0 to 2^64 - 1, found the float 2e0'],
      [text('"burst": 20E-1'), 'limits[0].burst: expected a whole number from 0 to 2^64 - 1, found the float 20E-1'],
      [text('"burst": -0'), 'limits[0].burst: expected a whole number from 0 to 2^64 - 1, found the float -0'],
      [text('"max_keys": -0.0'), 'limits[0].max_keys: expected a whole number from 0 to 2^64 - 1, found the float -0.0'],
      [text('"max_keys": 1e2'), 'limits[0].max_keys: expected a whole number from 0 to 2^64 - 1, found the float 1e2'],
      // The first in the text, as serde says it.
      [text('"burst": 2.0, "burst": 3'), 'limits[0].burst: expected a whole number from 0 to 2^64 - 1, found the float 2.0'],
      [text('"burst": 1, "burst": 1'), 'limits[0]: duplicate field `burst`'],
      [text('"burst": 1, "\\u0062urst": 2'), 'limits[0]: duplicate field `burst`'],
      [text('"burst": 3, "max_keys": 3, "burst": 2.0'), 'limits[0]: duplicate field `burst`'],
      ['{"limits": [], "limits": [{"name": "a", "rate": "1/second"}]}', 'config: duplicate field `limits`'],
      // Before the core's error (a zero burst, a name taken twice), as in Python.
      [text('"burst": 0, "burst": 0'), 'limits[0]: duplicate field `burst`'],
      ['{"limits": [{"name": "a", "rate": "1/second"}, {"name": "a", "rate": "1/second", "burst": 1.0}]}', 'limits[1].burst: expected a whole number from 0 to 2^64 - 1, found the float 1.0'],
    ];
    for (const [config, message] of refused) {
      for (const make of [(c) => new Policy(c), (c) => Policy.fromConfig(c)]) {
        assert.throws(() => make(config), { name: 'TypeError', code: 'invalid_config', message: `policy configuration: ${message}` }, config);
      }
    }
    // A wrong shape is said first, as in Python: a field repeated that no
    // limit has is unknown, and a repeated key inside a value is that
    // value's wrong type.
    const shapes = [
      [text('"colour": 1, "colour": 1'), 'limits[0]: unknown field `colour`, expected `name`, `algorithm`, `rate`, `burst`, `calendar`, `by`, `max_keys` or `eviction`'],
      [text('"burst": {"x": 1, "x": 1}'), 'limits[0].burst: expected a number, found an object'],
      [text('"burst": 2.0, "eviction": 5'), 'limits[0].eviction: expected a string, found a number'],
    ];
    for (const [config, message] of shapes) {
      assert.throws(() => new Policy(config), { name: 'TypeError', code: 'invalid_config', message: `policy configuration: ${message}` }, config);
    }
    // Whole numbers are the digits written, to 2^64 - 1 (it was read as
    // 2^64, and refused); a burst past 2^53 - 1 is a limit JS numbers do not
    // carry, refused as before.
    for (const maxKeys of ['18446744073709551615', '18446744073709551614', '9007199254740993']) {
      const policy = new Policy(text(`"max_keys": ${maxKeys}`));
      assert.equal(policy.tryAcquire({ user: 'a' }, 1, 0).allowed, true, maxKeys);
    }
    assert.throws(() => new Policy(text('"max_keys": 18446744073709551616')), { code: 'invalid_config', message: 'policy configuration: limits[0].max_keys: expected a whole number from 0 to 2^64 - 1' });
    const fast = (burst) => `{"limits": [{"name": "a", "rate": "1000000000/second", "burst": ${burst}}]}`;
    assert.equal(new Policy(fast('9007199254740991')).tryAcquire({}, 1, 0).limit, 2 ** 53 - 1);
    assertLimiterError(() => new Policy(fast('9007199254740993')), 'invalid_value', 'limit');
    assertLimiterError(() => new Policy(fast('18446744073709551615')), 'invalid_value', 'limit');
    // An object's numbers are JS numbers, whatever JSON.stringify writes of them.
    assert.equal(new Policy({ limits: [{ name: 'a', rate: '1/second', by: ['user'], max_keys: 2 ** 64 - 2048 }] }).tryAcquire({ user: 'a' }, 1, 0).allowed, true);
    assert.equal(new Policy(text('"burst": 2')).tryAcquire({ user: 'a' }, 2, 0).allowed, true);
  });

  it('digits past 2^53 of a field or a `limits` given again are not read: the last written counts, as the shape serde finds first', () => {
    // The digits of an earlier `limits`, or of an earlier value of the
    // field, were put into the last one: an uncoded TypeError ("Cannot set
    // properties of undefined") where `limits` was last not an array, and a
    // duplicate field said where the last value is of the wrong shape, as
    // Python says it (and as JS did for a smaller number first).
    const big = '{"name": "a", "rate": "1/second", "by": ["u"], "max_keys": 18446744073709551615}';
    const shapes = [
      [`{"limits": [${big}], "limits": 5}`, 'limits: expected an array, found a number'],
      [`{"limits": [${big}], "limits": {}}`, 'limits: expected an array, found an object'],
      [`{"limits": [${big}], "limits": "x"}`, 'limits: expected an array, found the string "x"'],
      [`{"limits": [${big}], "limits": null}`, 'limits: expected an array, found null'],
    ];
    const limit = (fields) => `{"limits": [{"name": "a", "rate": "1/second", "by": ["u"], ${fields}}]}`;
    for (const first of ['1', '18446744073709551615']) {
      shapes.push(
        [limit(`"max_keys": ${first}, "max_keys": "x"`), 'limits[0].max_keys: expected a number, found the string "x"'],
        [limit(`"max_keys": ${first}, "max_keys": [1]`), 'limits[0].max_keys: expected a number, found an array'],
      );
    }
    for (const [config, message] of shapes) {
      assert.throws(() => new Policy(config), { name: 'TypeError', code: 'invalid_config', message: `policy configuration: ${message}` }, config);
    }
    // The last written counts: `null` is no bound, whatever came before.
    assert.throws(() => new Policy(limit('"max_keys": 18446744073709551615, "max_keys": null')), { code: 'invalid_config', message: 'policy configuration: limits[0]: duplicate field `max_keys`' });
  });

  it('a string with a lone surrogate anywhere in a configuration is refused by its field, as Python reads JSON text', () => {
    // JSON escapes one, and reads it back; Python's serde_json refuses it.
    // Named by the field of the limit it is in, else `config`; first in
    // the text, and before anything else (it reached the rate parser as
    // U+FFFD, or a repeated field hid it).
    const text = (name) => `\`${name}\` must be valid Unicode text (no lone surrogates)`;
    const limit = (fields) => `{"limits": [{"name": "a", "rate": "1/second", ${fields}}]}`;
    const cases = [
      [limit('"by": ["u", "\\ud800"]'), 'by'],
      ['{"limits": [{"name": "a\\udc00", "rate": "1/second"}]}', 'name'],
      ['{"limits": [{"name": "a", "rate": "1/second\\ud800"}]}', 'rate'],
      [limit('"algorithm": "gcra\\ud800"'), 'algorithm'],
      [limit('"calendar": "\\udfff"'), 'calendar'],
      [limit('"eviction": "refuse\\ud800"'), 'eviction'],
      [limit('"burst": "\\ud800"'), 'burst'],
      [limit('"by": [["\\ud800"]]'), 'by'],
      [limit('"by": {"\\ud800": 1}'), 'by'],
      [limit('"colour": "\\ud800"'), 'colour'],
      [limit('"x\\ud800": 1'), 'config'],
      ['{"x\\ud800": 1}', 'config'],
      ['{"limits": ["\\ud800"]}', 'config'],
      ['{"limits": [{"name": "\\ud800", "name": "a", "rate": "1/second"}]}', 'name'],
      [limit('"burst": 1, "burst": 1, "rate": "\\ud800"'), 'rate'],
      [limit('"burst": 2.0, "by": ["\\ud800"]'), 'by'],
      [limit('"rate": "\\ud800", "by": ["\\ud800"]'), 'rate'],
      // A lead surrogate before another escape, or a trail after an escape: lone too.
      [limit('"by": ["\\ud800\\u0041", "\\n\\udc00"]'), 'by'],
    ];
    for (const [config, name] of cases) {
      for (const given of [config, JSON.parse(config)]) {
        // An object repeats no key: JSON.parse kept the last name, which is text.
        if (typeof given === 'object' && config.includes('"name": "\\ud800", "name"')) continue;
        assert.equal(assertLimiterError(() => new Policy(given), 'invalid_value', name, config).message, text(name), config);
      }
    }
    // A pair is one character: read as any other.
    assert.deepStrictEqual(new Policy(limit('"by": ["\\ud83d\\ude00"]')).limits, [{ name: 'a', by: ['\ud83d\ude00'] }]);
  });

  it('JSON text that serde_json does not read (a number out of range, 128 containers deep) is not JSON, before a lone surrogate', () => {
    // As Python says it: serde_json refuses such text as it reads it, where
    // JSON.parse took it, and a lone surrogate escape (invalid_value) is
    // said only of text that is JSON otherwise. JS said the surrogate.
    const limit = (fields) => `{"limits": [{"name": "a", "rate": "1/second", ${fields}}]}`;
    const deep = (n, inner) => `${'['.repeat(n)}${inner}${']'.repeat(n)}`;
    const notJson = [
      [limit('"by": ["\\ud800"], "x": 1e400'), 'number out of range'],
      [limit('"x": -1e400, "by": ["\\ud800"]'), 'number out of range'],
      [limit('"burst": 1e400'), 'number out of range'],
      [`{"limits": [{"name": "a", "rate": "1/second", "by": ["u"]}], "x": ${'1'.repeat(400)}}`, 'number out of range'],
      // The configuration, its limits and a limit hold 125 more: 128.
      [limit(`"by": ${deep(125, '"\\ud800"')}`), 'recursion limit exceeded'],
      [limit(`"by": ["\\ud800"], "x": ${deep(125, '')}`), 'recursion limit exceeded'],
    ];
    for (const [config, reason] of notJson) {
      assert.throws(() => new Policy(config), { name: 'TypeError', code: 'invalid_config', message: `policy configuration: config is not JSON (${reason})` }, config.slice(0, 100));
    }
    // 127 deep, and the largest float, are JSON serde reads.
    assertLimiterError(() => new Policy(limit(`"by": ${deep(124, '"\\ud800"')}`)), 'invalid_value', 'by');
    assert.throws(() => new Policy(limit('"burst": 1.7976931348623157e308')), { code: 'invalid_config', message: /limits\[0\]\.burst: expected a whole number/ });
  });

  it('an object nested up to 127 deep is read, as its JSON text is: a lone surrogate in it is said', () => {
    // Refused past 64 deep as not JSON, such an object did not say the lone
    // surrogate in it, which Python says: it dumps a mapping to JSON text,
    // which serde_json reads up to 127 deep. The configuration, its limits
    // and a limit are 3 deep: 125 more is serde_json's 128.
    const limit = (fields) => ({ limits: [{ name: 'a', rate: '1/second', ...fields }] });
    const deep = (n, inner) => (n === 0 ? inner : [deep(n - 1, inner)]);
    for (const n of [62, 100, 124]) {
      assertLimiterError(() => new Policy(limit({ by: deep(n, '\ud800') })), 'invalid_value', 'by');
      assertLimiterError(() => new Policy(limit({ by: ['\ud800'], x: deep(n, 1) })), 'invalid_value', 'by');
      assert.throws(() => new Policy(limit({ by: deep(n, 'u') })), { name: 'TypeError', code: 'invalid_config' });
    }
    assert.throws(() => new Policy(limit({ by: deep(125, '\ud800') })), {
      name: 'TypeError',
      code: 'invalid_config',
      message: /^policy configuration: limits\[0\]\.by(\[0\]){124}: expected JSON data, found data nested more than 127 deep$/,
    });
  });

  it('a policy holding a calendar limit reads Date.now() by default', () => {
    const daily = { name: 'daily', algorithm: 'fixed_window', rate: '5/day', calendar: 'day' };
    const DAY = 86_400_000;
    const leftOfTheDay = (policy) => {
      for (;;) {
        const day = Math.floor(Date.now() / DAY);
        const reset = policy.tryAcquire({}).limits[0].resetAfterMs;
        const expected = (day + 1) * DAY - Date.now();
        if (Math.floor(Date.now() / DAY) === day) return Math.abs(reset - expected);
      }
    };
    assert.ok(leftOfTheDay(new Policy({ limits: [daily] })) < 60_000);
    // Any limit's calendar, not only the last one's.
    assert.ok(leftOfTheDay(new Policy({ limits: [daily, { name: 'per-second', rate: '100/second' }] })) < 60_000);
    assert.ok(leftOfTheDay(new Policy({ limits: [{ name: 'd', limiter: new FixedWindow({ limit: 5, calendar: 'day' }) }] })) < 60_000);
    // A clock given stays.
    const given = new Policy({ limits: [daily] }, { clock: () => 100 * DAY + 3_600_000 });
    assert.equal(given.tryAcquire({}).resetAfterMs, DAY - 3_600_000);
  });

  it('reads every field of a configuration, and names the place of a bad one', () => {
    const full = {
      limits: [
        { name: 'burst', algorithm: 'token_bucket', rate: '1/second;2/minute', burst: 3, by: ['user'], max_keys: 1, eviction: 'refuse' },
        { name: 'daily', algorithm: 'fixed_window', rate: '5/day', calendar: 'day' },
      ],
    };
    for (const config of [full, JSON.stringify(full), `  ${JSON.stringify(full)}`]) {
      const policy = new Policy(config);
      assert.deepStrictEqual(policy.limits, [{ name: 'burst', by: ['user'] }, { name: 'daily', by: [] }]);
      const first = policy.tryAcquire({ user: 'a' }, 2, 0);
      assert.deepStrictEqual([first.allowed, first.limits[0].remaining, first.limits[1].remaining], [true, 0, 3], 'burst 3 but 2 per minute');
      assert.equal(policy.tryAcquire({ user: 'a' }, 1, 0).deniedBy, 'burst');
      assert.throws(() => policy.tryAcquire({ user: 'b' }, 1, 0), (e) => e.code === 'store_full', 'max_keys 1, eviction refuse');
    }
    const bad = (limit) => ({ limits: [{ name: 'x', rate: '1/second', ...limit }] });
    const cases = [
      [{ limits: [], colour: 'red' }, 'config: unknown field `colour`, expected `limits`'],
      [{}, 'config: missing field `limits`'],
      [{ limits: {} }, 'limits: expected an array, found an object'],
      [{ limits: [7] }, 'limits[0]: expected an object, found a number'],
      [{ limits: [{ rate: '1/second' }] }, 'limits[0]: missing field `name`'],
      [{ limits: [{ name: 'x' }] }, 'limits[0]: missing field `rate`'],
      [bad({ name: 3 }), 'limits[0].name: expected a string, found a number'],
      [bad({ algorithm: 'bucket' }), 'limits[0].algorithm: unknown value "bucket", expected `token_bucket`, `gcra`, `leaky_bucket`, `sliding_window_log`, `sliding_window_counter` or `fixed_window`'],
      [{ limits: null }, 'limits: expected an array, found null'],
      [bad({ name: null }), 'limits[0].name: expected a string, found null'],
      [bad({ algorithm: null }), 'limits[0].algorithm: expected a string, found null'],
      [bad({ by: null }), 'limits[0].by: expected an array of strings, found null'],
      [{ limits: [['x', 'gcra', '1/second']] }, 'limits[0]: expected an object, found an array'],
      [bad({ burst: 1.5 }), 'limits[0].burst: expected a whole number from 0 to 2^64 - 1'],
      [bad({ burst: -1 }), 'limits[0].burst: expected a whole number from 0 to 2^64 - 1'],
      [bad({ max_keys: 2 ** 64 }), 'limits[0].max_keys: expected a whole number from 0 to 2^64 - 1'],
      [bad({ burst: '3' }), 'limits[0].burst: expected a number, found the string "3"'],
      [bad({ max_keys: true }), 'limits[0].max_keys: expected a number, found a boolean'],
      [bad({ calendar: 'year' }), 'limits[0].calendar: unknown value "year", expected `day`, `week` or `month`'],
      [bad({ eviction: 'oldest' }), 'limits[0].eviction: unknown value "oldest", expected `nearest_fresh` or `refuse`'],
      [bad({ by: 'user' }), 'limits[0].by: expected an array of strings, found the string "user"'],
      [bad({ by: ['user', 1] }), 'limits[0].by[1]: expected a string, found a number'],
      [{ limits: [{ name: 'a', rate: '1/second' }, { name: 'b', rate: '1/second', maxKeys: 9 }] }, 'limits[1]: unknown field `maxKeys`, expected `name`, `algorithm`, `rate`, `burst`, `calendar`, `by`, `max_keys` or `eviction`'],
    ];
    for (const [config, message] of cases) {
      for (const given of [config, JSON.stringify(config)]) {
        assert.throws(() => new Policy(given), (e) => e instanceof TypeError && e.code === 'invalid_config' && e.message === `policy configuration: ${message}`, message);
      }
    }
    assert.throws(() => new Policy('{"limits": ['), (e) => e instanceof TypeError && e.code === 'invalid_config' && /^policy configuration: config is not JSON \(/.test(e.message));
    // Text is a configuration's JSON when it opens with `{` past what the
    // rate grammar skips and a byte order mark, as in Python
    // (test_keyed_policy.py): a file saved with a BOM is refused as the JSON
    // it is, and U+0085 or U+001C (Python's whitespace, not JS's) lead to
    // the same error, not to a rate that does not parse.
    for (const lead of ['\ufeff', '\x85', '\x1c', ' \ufeff\n']) {
      const text = `${lead}{"limits": [{"name": "a", "rate": "1/second"}]}`;
      for (const make of [(t) => new Policy(t), (t) => Policy.fromConfig(t)]) {
        assert.throws(() => make(text), (e) => e instanceof TypeError && e.code === 'invalid_config' && /^policy configuration: config is not JSON \(/.test(e.message), JSON.stringify(lead));
      }
      assert.throws(() => Policy.fromRates(text), (e) => e instanceof RangeError && e.code === 'invalid_syntax', JSON.stringify(lead));
    }
    assert.throws(() => new Policy('\ufeff10/second'), (e) => e instanceof RangeError && e.code === 'invalid_syntax' && / at byte 0$/.test(e.message));
    // null is "none" for the optional fields, as serde reads them; whole
    // numbers go up to 2^64 - 1, as in Rust and Python.
    const none = new Policy(bad({ algorithm: 'gcra', burst: null, calendar: null, max_keys: null, eviction: null }));
    assert.equal(none.tryAcquire({}, 1, 0).limits[0].limit, 1);
    const large = new Policy(bad({ algorithm: 'gcra', burst: 2 ** 33, by: ['user'], max_keys: 2 ** 64 - 2048 }));
    assert.equal(large.tryAcquire({ user: 'a' }, 1, 0).limits[0].limit, 2 ** 33);
    // Only a configuration's own fields count, as in JSON text.
    const inherited = Object.create({ colour: 'red' });
    inherited.limits = [Object.assign(Object.create({ by: ['user'] }), { name: 'x', rate: '1/second' })];
    Object.prototype.burst = 0; // eslint-disable-line no-extend-native
    try {
      const own = new Policy(inherited);
      assert.deepStrictEqual(own.limits, [{ name: 'x', by: [] }]);
      assert.equal(own.tryAcquire({}, 1, 0).limits[0].limit, 1);
      assert.equal(new Policy(JSON.stringify(inherited)).tryAcquire({}, 1, 0).limits[0].limit, 1);
    } finally {
      delete Object.prototype.burst;
    }
    assertLimiterError(() => new Policy({ toJSON() {} }), 'invalid_type', 'config');
    // The right shape with a value the core refuses: the core's own error.
    assertLimiterError(() => new Policy(bad({ algorithm: 'gcra', burst: 0 })), 'zero_value', 'burst');
    assertLimiterError(() => new Policy(bad({ rate: 'often' })), 'invalid_syntax', 'rate');
    assertLimiterError(() => Policy.fromRates('1/second', { algorithm: 'bucket' }), 'invalid_value', 'algorithm');
    // Named with the limit it is in, and as the configuration spells it.
    const second = (fields) => ({ limits: [{ name: 'a', rate: '1/second' }, { name: 'b', rate: '1/second', ...fields }] });
    for (const [fields, code, field] of [[{ burst: 0 }, 'zero_value', 'burst'], [{ max_keys: 0 }, 'zero_value', 'max_keys'], [{ rate: 'often' }, 'invalid_syntax', 'rate'], [{ name: 'a' }, 'invalid_value', 'name']]) {
      const caught = assertLimiterError(() => new Policy(second(fields)), code, field);
      assert.match(caught.message, /^policy configuration: limits\[1\]: `/, caught.message);
    }
  });

  it('lists fields that contain commas, or are empty, as given', () => {
    const gcra = () => new Gcra({ burst: 1, emissionIntervalMs: SECOND });
    const policy = new Policy({ limits: [{ name: 'l', by: ['a,b', ''], limiter: gcra() }, { name: 'g', limiter: gcra() }] });
    assert.deepStrictEqual(policy.limits, [{ name: 'l', by: ['a,b', ''] }, { name: 'g', by: [] }]);
    assert.equal(policy.tryAcquire({ 'a,b': 'x', '': 'y' }, 1, 0).allowed, true);
    assertLimiterError(() => policy.tryAcquire({ 'a,b': {} }, 1, 0), 'invalid_type', 'request.a,b');
  });

  it('reserve books in every limit or none; acquire waits for the slot', async () => {
    const policy = Policy.fromRates('1/second', { algorithm: 'gcra' });
    assert.equal(policy.reserve({}, 1, 0, 0).ok, true);
    const denied = policy.reserve({}, 1, 10, 0);
    assert.equal(denied.ok, false);
    assert.equal(denied.decision.deniedBy, '1/second');
    const booked = policy.reserve({}, 1, Infinity, 0);
    assert.deepStrictEqual([booked.ok, booked.waitMs], [true, SECOND]);
    policy.refund({}, 1, booked.atMs);
    assert.equal(policy.reserve({}, 1, SECOND, 0).waitMs, SECOND, 'the refunded slot is free again');

    const time = fakeTime({ start: 0 }).install();
    try {
      const clocked = Policy.fromRates('1/second', { algorithm: 'gcra', clock: time.now });
      await clocked.acquire({}, 1);
      let done = false;
      const p = clocked.acquire({}, 1).then(() => (done = true));
      await time.advance(999);
      assert.equal(done, false);
      await time.advance(1);
      await p;
      await assert.rejects(clocked.acquire({}, 1, { timeoutMs: 10 }), (e) => e.name === 'TimeoutError');
    } finally {
      time.uninstall();
    }
  });

  it("aborting a waiter of a bucket policy never lets two units through at once: those behind move up, or the slot goes unused", async () => {
    // A bucket gives back exactly only its latest booking: a waiter given
    // back from the middle of the queue, with nobody moving up, let the next
    // acquire share a slot with a later waiter (two units at once, burst 1).
    for (const config of [
      '1/second',
      { limits: [{ name: 'g', rate: '1/second', algorithm: 'gcra' }] },
      { limits: [{ name: 'g', rate: '1/second', algorithm: 'gcra' }, { name: 'u', rate: '5/second', by: ['u'] }] },
      { limits: [{ name: 'g', rate: '1/second' }, { name: 'day', rate: '100/day', algorithm: 'fixed_window' }] },
    ]) {
      const time = fakeTime({ start: 0 }).install();
      try {
        const policy = new Policy(config, { clock: time.now });
        const at = {};
        const go = (name, signal) =>
          policy.acquire({ u: name }, 1, { signal }).then(
            () => (at[name] = time.now()),
            () => (at[name] = 'aborted'),
          );
        go('a');
        const controller = new AbortController();
        go('b', controller.signal);
        go('c');
        await time.advance(10);
        controller.abort();
        go('d');
        await time.advance(10 * SECOND);
        const slots = ['a', 'c', 'd'].map((name) => at[name]);
        assert.equal(at.b, 'aborted');
        assert.equal(new Set(slots).size, 3, `${JSON.stringify(config)}: a, c and d each at a slot of its own: ${slots}`);
        assert.ok(slots[0] < slots[1] && slots[1] < slots[2], `${JSON.stringify(config)}: in order: ${slots}`);
      } finally {
        time.uninstall();
      }
    }
  });


  /**
   * Waiters a, b (aborted by `controller`) and c on `policy`, each asking
   * for `request(name)`, in turn: `at` holds when each went, or its error's name.
   */
  const threeWaiters = (policy, time, request) => {
    const at = {};
    const controller = new AbortController();
    const go = (name, signal) =>
      policy.acquire(request(name), 1, { signal }).then(
        () => (at[name] = time.now()),
        (error) => (at[name] = error.name),
      );
    go('a');
    go('b', controller.signal);
    go('c');
    return { at, controller };
  };
  it('a policy of one limit moves its waiters up as that limiter does: a GCRA or a leaky bucket, not a token bucket', async () => {
    // A token bucket's waiters moved up could land later than they were
    // (see acquire.test.cjs): b's slot goes unused, c keeps its own.
    for (const [limiter, c] of [
      [new Gcra({ burst: 1, emissionIntervalMs: SECOND }), SECOND],
      [new LeakyBucket({ capacity: 10, intervalMs: SECOND }), SECOND],
      [new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: SECOND }), 2 * SECOND],
    ]) {
      const algorithm = limiter.algorithm;
      const time = fakeTime({ start: 0 }).install();
      try {
        const policy = new Policy({ limits: [{ name: 'one', by: ['user'], limiter }] }, { clock: time.now });
        const { at, controller } = threeWaiters(policy, time, () => ({ user: 'u' }));
        await time.advance(10);
        controller.abort();
        await time.advance(10 * SECOND);
        assert.deepStrictEqual(at, { a: 0, b: 'AbortError', c }, algorithm);
      } finally {
        time.uninstall();
      }
    }
  });

  it('a policy of several limits moves nobody: the waiters behind an aborted one keep their slots, never refused', async () => {
    // Each limit holds a booking until the slowest limit's slot, which
    // giving it back does not undo: booked again, c was refused by the leaky
    // queues (RateLimited, though it waited with no timeout). b's slot goes
    // unused; the latest booking, aborted, is given back to the next caller.
    for (const aborted of ['b', 'c']) {
      const time = fakeTime({ start: 0 }).install();
      try {
        const policy = new Policy('10/second;100/minute', { algorithm: 'leaky_bucket', clock: time.now });
        const at = {};
        const controller = new AbortController();
        const go = (name) =>
          policy.acquire({}, 1, { signal: name === aborted ? controller.signal : undefined }).then(
            () => (at[name] = time.now()),
            (error) => (at[name] = error.name),
          );
        go('a');
        go('b');
        go('c');
        await time.advance(10);
        controller.abort();
        const next = policy.reserve({});
        await time.advance(100 * SECOND);
        if (aborted === 'b') {
          assert.deepStrictEqual(at, { a: 0, b: 'AbortError', c: 1_200 }, 'c keeps its slot');
          assert.equal(next.ok, false, "the queues are full: b's slot is not given back");
        } else {
          assert.deepStrictEqual(at, { a: 0, b: 600, c: 'AbortError' });
          assert.equal(10 + next.waitMs, 1_200, "c's slot, given back");
        }
      } finally {
        time.uninstall();
      }
    }
  });

  it('aborting a waiter booked before an add moves nobody up: those behind keep their slots, as after a reconfigure', async () => {
    // Moving up books again in every limit, the one added since too, which
    // the waiters' request may lack the fields of: they were rejected
    // ("`request` lacks a field"), though their slots were theirs. (A GCRA:
    // a token bucket's waiters never move up.)
    const time = fakeTime({ start: 0 }).install();
    try {
      const policy = new Policy('1/second', { algorithm: 'gcra', clock: time.now });
      const { at, controller } = threeWaiters(policy, time, (name) => ({ user: name }));
      await time.advance(10);
      policy.add('per-ip', new FixedWindow({ limit: 10, windowMs: SECOND }), { by: ['ip'] });
      controller.abort();
      await time.advance(10 * SECOND);
      assert.deepStrictEqual(at, { a: 0, b: 'AbortError', c: 2 * SECOND }, 'c keeps its slot; b\'s goes unused');
    } finally {
      time.uninstall();
    }
  });

  it('aborting a waiter of a policy of buckets, with one behind booked after a window limit was added, moves nobody and gives nothing back', async () => {
    // b was booked on the mix the window made, in no queue, never booked
    // again: a's booking, given back from the middle of the global bucket's
    // queue, freed the slot at its end, and the next booking shared b's
    // (two units at once from a burst of one). a's slot goes unused.
    const time = fakeTime({ start: 0 }).install();
    try {
      const policy = new Policy(undefined, { clock: time.now });
      policy.add('global', new Gcra({ burst: 1, emissionIntervalMs: SECOND }));
      policy.tryAcquire({});
      const controller = new AbortController();
      const a = policy.acquire({}, 1, { signal: controller.signal });
      policy.add('hour', new FixedWindow({ limit: 1000, windowMs: 3600 * SECOND }));
      let went;
      const b = policy.acquire({}).then(() => (went = time.now()));
      await time.advance(10);
      controller.abort();
      await assert.rejects(a, (e) => e.name === 'AbortError');
      assert.equal(time.now() + policy.reserve({}).waitMs, 3 * SECOND, "the next booking is not b's slot");
      await time.advance(10 * SECOND);
      await b;
      assert.equal(went, 2 * SECOND, 'b keeps its slot');
    } finally {
      time.uninstall();
    }
  });

  it('reserve books every limit at the policy\'s slot, and cancel() gives it back in every one', () => {
    const log = (limit, windowMs) => new SlidingWindowLog({ limit, windowMs });
    const policy = new Policy({ limits: [{ name: 'fast', limiter: log(2, 100) }, { name: 'slow', limiter: log(1, SECOND) }] });
    assert.equal(policy.tryAcquire({}, 1, 0).allowed, true);
    const booked = policy.reserve({}, 1, Infinity, 0);
    assert.deepStrictEqual([booked.ok, booked.waitMs], [true, SECOND]);
    // 'fast' could have taken it at once, but counts it where it proceeds:
    // at 1 s it holds the booking, not an event long gone.
    const fast = (t) => policy.peek({}, 0, t).limits[0].remaining;
    assert.equal(fast(SECOND), 1);
    assert.equal(fast(SECOND + 99), 1);
    assert.equal(fast(SECOND + 100), 2);
    booked.cancel();
    assert.equal(fast(SECOND), 2, 'the booking is gone from every limit');
    assert.equal(policy.reserve({}, 1, Infinity, 0).waitMs, SECOND, 'the slot is free again');
  });

  it('keys each limit by its fields and reclaims them', () => {
    const policy = new Policy({ limits: [{ name: 'route', algorithm: 'fixed_window', rate: '1/second', by: ['user', 'route'] }] });
    assert.equal(policy.tryAcquire({ user: 'a', route: '/x' }, 1, 0).allowed, true);
    assert.equal(policy.tryAcquire({ user: 'a', route: '/y' }, 1, 0).allowed, true);
    assert.equal(policy.tryAcquire({ user: 'a', route: '/x' }, 1, 0).allowed, false);
    policy.reclaim(SECOND);
    assert.equal(policy.tryAcquire({ user: 'a', route: '/x' }, 1, SECOND).allowed, true);
  });

  it('refuses a limit a JS number cannot carry exactly, so that every decision has its headers', () => {
    // One code for a number past what a JS number holds exactly, as for a
    // limiter's options (and Python's for its own bound, 2^64 - 1): it was
    // `too_large` here and `invalid_value` there.
    const unsafe = '`limit` must be a safe integer (at most 2^53 - 1)';
    assert.equal(assertLimiterError(() => Policy.fromRates('9007199254740992/day'), 'invalid_value', 'limit').message, unsafe);
    assert.equal(assertLimiterError(() => new Policy('9007199254740993/second'), 'invalid_value', 'limit').message, unsafe);
    assert.equal(assertLimiterError(() => new Policy({ limits: [{ name: 'big', rate: '9007199254740993/day' }] }), 'invalid_value', 'limit').message, unsafe);
    assert.equal(assertLimiterError(() => new Policy({ limits: [{ name: 'big', rate: '9007199254740991/second', burst: 2 ** 53 }] }), 'invalid_value', 'limit').message, unsafe);
    const options = { capacity: 2 ** 53, refillTokens: 1, refillPeriodMs: 1000 };
    assert.equal(assertLimiterError(() => new TokenBucket(options), 'invalid_value', 'capacity').message, unsafe.replace('limit', 'capacity'));
    const most = Policy.fromRates('9007199254740991/day');
    const d = most.tryAcquire({}, 1, 0);
    assert.deepStrictEqual([d.remaining, d.limit], [9007199254740990, 9007199254740991]);
    // A structured field's integers have at most 15 digits (RFC 9651): sent as the largest.
    assert.equal(most.headers(d).RateLimit, '"9007199254740991/day";r=999999999999999;t=1');
    assert.equal(most.headers(d)['RateLimit-Policy'], '"9007199254740991/day";q=999999999999999;w=86400');
  });

  it('a policy without limits allows everything, with no bound and no headers', () => {
    const empty = new Policy({ limits: [] });
    const d = empty.tryAcquire({}, 1, 0);
    assert.deepStrictEqual([d.allowed, d.remaining, d.limit, d.limits], [true, Infinity, Infinity, []]);
    assert.deepStrictEqual(empty.headers(d), {});
  });

  it('an array with holes is refused by name, as any other element of the wrong type', () => {
    assertLimiterError(() => Policy.fromRates('1/second', { by: ['a', , 'b'] }), 'invalid_type', 'by');
    const gcra = new Gcra({ burst: 1, emissionIntervalMs: 10 });
    assertLimiterError(() => new Policy({ limits: [{ name: 'g', by: ['a', , 'b'], limiter: gcra }] }), 'invalid_type', 'by');
    assertLimiterError(() => new KeyedLimiter(gcra).tryAcquireBatch('k', [1, , 1]), 'invalid_type', 'costs');
  });

  it('a field name with a lone surrogate is refused by name, as in Python (UTF-8 would key the limit by another field)', () => {
    const gcra = new Gcra({ burst: 1, emissionIntervalMs: 10 });
    const config = { limits: [{ name: 'x', rate: '1/second', by: ['user\ud800'] }] };
    for (const make of [
      () => new Policy('1/second', { by: ['user\ud800'] }),
      () => new Policy(config),
      () => new Policy(JSON.stringify(config)),
      () => new Policy({ limits: [{ name: 'g', by: ['\udc00'], limiter: gcra }] }),
    ]) {
      assertLimiterError(make, 'invalid_value', 'by');
    }
    // A pair is one character: a field like any other.
    const policy = new Policy('1/second', { by: ['user\ud83d\ude00'] });
    assert.deepStrictEqual(
      [{ 'user\ud83d\ude00': 'a' }, { 'user\ud83d\ude00': 'a' }].map((request) => policy.tryAcquire(request, 1, 0).allowed),
      [true, false],
    );
  });

  it('a rate string or JSON text with a lone surrogate is refused by name, as Python reads every string of a policy', () => {
    // It reached the rate parser as U+FFFD: `invalid_syntax` "at byte 8",
    // where Python (bindings-python/tests/test_api.py) says `invalid_value`.
    const text = (name) => `\`${name}\` must be valid Unicode text (no lone surrogates)`;
    for (const [make, name] of [
      [() => Policy.fromRates('1/second\ud800'), 'rates'],
      [() => Policy.fromRates('\udc00', { by: ['user'] }), 'rates'],
      [() => new Policy('1/second\ud800'), 'config'],
      [() => new Policy('{"limits": []}\ud800'), 'config'],
      [() => Policy.fromConfig('\ud800'), 'config'],
      [() => Policy.fromConfig('{"limits": [{"name": "a", "rate": "1/second\udfff"}]}'), 'config'],
    ]) {
      assert.equal(assertLimiterError(make, 'invalid_value', name).message, text(name));
    }
    // A pair is one character: the parser's to judge.
    assertLimiterError(() => Policy.fromRates('1/second\ud83d\ude00'), 'invalid_syntax', 'rates');
  });

  it("a request's field name or value with a lone surrogate is refused by name in every method, as in Python, taking nothing", async () => {
    // Written with U+FFFD in its place: users '\ud800' and '\udc00' shared one limit.
    const policy = new Policy({ limits: [{ name: 'per-user', rate: '1/second', by: ['user'] }] });
    const text = (name) => `\`${name}\` must be valid Unicode text (no lone surrogates)`;
    const requests = [
      [{ user: '\ud800' }, 'request.user'],
      [{ user: 'a'.repeat(300) + '\udc00' }, 'request.user'],
      [{ user: 'a', 'x\ud800': 'b' }, 'request'],
      [{ '\udfff': 'b', user: 'a' }, 'request'],
    ];
    for (const [request, name] of requests) {
      for (const call of [
        () => policy.tryAcquire(request, 1, 0),
        () => policy.peek(request, 1, 0),
        () => policy.reserve(request, 1, Infinity, 0),
        () => policy.refund(request, 1, 0),
      ]) {
        assert.equal(assertLimiterError(call, 'invalid_value', name).message, text(name));
      }
      assert.equal((await assertLimiterRejects(policy.acquire(request), 'invalid_value', name)).message, text(name));
    }
    assert.equal(policy.tryAcquire({ user: '\ufffd' }, 1, 0).allowed, true, 'nothing taken from the user U+FFFD');
    assert.equal(policy.tryAcquire({ user: '\ud83d\ude00' }, 1, 0).allowed, true, 'a pair is a user of its own');
  });

  it("a limit's or a limiter's name with a lone surrogate is refused by name, as in Python (two names would be one)", () => {
    const gcra = new Gcra({ burst: 1, emissionIntervalMs: 10 });
    const config = { limits: [{ name: 'a\ud800', rate: '1/second' }] };
    for (const make of [
      () => new Policy(config),
      // JSON escapes a lone surrogate, and reads it back as one.
      () => new Policy(JSON.stringify(config)),
      () => Policy.fromConfig({ limits: [{ name: 'ok', rate: '1/second' }, { name: '\udc00', rate: '2/second' }] }),
      () => new Policy({ limits: [{ name: 'g\ud800', limiter: gcra }] }),
      () => new Gcra({ burst: 1, emissionIntervalMs: 10, name: '\ud800' }),
      () => Gcra.perPeriod({ burst: 1, tokens: 1, periodMs: 10, name: 'x\udfff' }),
      () => TokenBucket.fromBandwidths([{ capacity: 1, refillTokens: 1, refillPeriodMs: 10 }], { name: '\ud800' }),
      () => new FixedWindow({ limit: 1, windowMs: 10, name: '\ud800' }),
    ]) {
      assert.equal(assertLimiterError(make, 'invalid_value', 'name').message, '`name` must be valid Unicode text (no lone surrogates)');
    }
  });

  it("a limit's or a limiter's name is printable ASCII, as the RateLimit headers carry it, and not empty", () => {
    // Each was taken, then written as '""' or with '?' for each other
    // character ('caf?-api', naming no limit), where a policy refused only ''.
    const printable = '`name` must be printable ASCII (space to ~), as the RateLimit headers carry it';
    const bad = [
      ['', '`name` must not be empty'],
      ['caf\u00e9-api', printable],
      ['\ud83d\ude00', printable],
      ['a\r\nRetry-After: 0', printable],
      ['tab\there', printable],
      ['del\x7f', printable],
    ];
    const gcra = new Gcra({ burst: 1, emissionIntervalMs: 10 });
    for (const [name, message] of bad) {
      for (const make of [
        () => new Gcra({ burst: 1, emissionIntervalMs: 10, name }),
        () => Gcra.perPeriod({ burst: 1, tokens: 1, periodMs: 10, name }),
        () => new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 10, name }),
        () => TokenBucket.fromBandwidths([{ capacity: 1, refillTokens: 1, refillPeriodMs: 10 }], { name }),
        () => new FixedWindow({ limit: 1, windowMs: 10, name }),
        () => new FixedWindow({ limit: 1, calendar: 'day', name }),
        () => new SlidingWindowLog({ limit: 1, windowMs: 10, name }),
        () => new Policy({ limits: [{ name, limiter: gcra }] }),
        () => new Policy({ limits: [{ name, limiter: new KeyedLimiter(gcra) }] }),
      ]) {
        assert.equal(assertLimiterError(make, 'invalid_value', 'name', JSON.stringify(name)).message, message);
      }
      // A configuration's limit names where in it the name is.
      for (const make of [() => new Policy({ limits: [{ name, rate: '1/second' }] }), () => Policy.fromConfig(JSON.stringify({ limits: [{ name, rate: '1/second' }] }))]) {
        assert.equal(assertLimiterError(make, 'invalid_value', 'name', JSON.stringify(name)).message, `policy configuration: limits[0]: ${message}`);
      }
    }
    const named = new Gcra({ burst: 1, emissionIntervalMs: 10, name: ' say "hi" \\ ~' });
    assert.equal(named.headers(named.peek(0, 0)).RateLimit, '" say \\"hi\\" \\\\ ~";r=1;t=0');
  });
});

/**
 * Books `target` of `limiter` (a key, a request) for a slot to come, by a
 * reservation (`how` 'cancel') or a waiter ('abort'), calls `between`, then
 * gives the booking back (cancel(), abort()). Runs on fake time from 1000 ms;
 * returns what `after` (called then) returns.
 */
async function giveBackAfter(make, how, between, after) {
  const time = fakeTime().install();
  try {
    const [limiter, target] = make(time.now);
    const controller = new AbortController();
    const booked = how === 'cancel' ? limiter.reserve(target) : limiter.acquire(target, 1, { signal: controller.signal }).catch((error) => error.name);
    between(limiter);
    if (how === 'cancel') {
      booked.cancel();
    } else {
      controller.abort();
      assert.equal(await booked, 'AbortError');
    }
    return after(limiter);
  } finally {
    time.uninstall();
  }
}

describe('A booking given back, per key (as in Python)', () => {
  const makers = {
    fixedWindow: (clock) => new FixedWindow({ limit: 1, windowMs: 100, clock }),
    gcra: (clock) => new Gcra({ burst: 1, emissionIntervalMs: 100, clock }),
    tokenBucket: (clock) => new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 100, clock }),
  };
  /** A keyed limiter or a policy by user of one a 100 ms, alice and `others` each used once. */
  const store = (kind, algorithm, others) => (clock) => {
    const limiter =
      kind === 'keyed'
        ? new KeyedLimiter(makers[algorithm](clock))
        : new Policy({ limits: [{ name: 'per-user', by: ['user'], limiter: makers[algorithm]() }] }, { clock });
    const of = (user) => (kind === 'keyed' ? user : { user });
    for (const user of ['alice', ...others]) assert.equal(limiter.tryAcquire(of(user)).allowed, true);
    return [limiter, of('alice'), of];
  };

  it('a reset of another key leaves a booking to give back; one of a key sharing its mark does not', async () => {
    // Counted over the whole store, any reset kept every booking made
    // before it (its slot went unused: alice waited a window, or an
    // interval, longer). A key sharing alice's mark (one of 256, as in
    // Python: user82 of a keyed limiter, user359 of a policy's limit)
    // counts as hers, which gives back less, never more.
    for (const kind of ['keyed', 'policy']) {
      const twin = kind === 'keyed' ? 'user82' : 'user359';
      for (const algorithm of Object.keys(makers)) {
        for (const how of ['cancel', 'abort']) {
          for (const [reset, expected] of [['bob', 1_100], [twin, 1_200]]) {
            const make = store(kind, algorithm, ['bob', twin]);
            const of = (user) => (kind === 'keyed' ? user : { user });
            const at = await giveBackAfter(
              make,
              how,
              (limiter) => assert.equal(Number(limiter.reset(of(reset))), 1),
              (limiter) => limiter.reserve(of('alice')).atMs,
            );
            assert.equal(at, expected, `${kind} ${algorithm} ${how}: reset of ${reset}`);
          }
        }
      }
    }
  });

  it("a policy's reset forgets the bookings of the keys it reset only, in each limit", async () => {
    // A reset of another user leaves alice's booking to give back; a reset
    // of her IP (her key in the other limit) forgot it, and her own limit
    // keeps holding its unit.
    for (const how of ['cancel', 'abort']) {
      for (const [reset, expected] of [[{ user: 'bob' }, 1_100], [{ ip: 'x' }, 1_200]]) {
        const at = await giveBackAfter(
          (clock) => {
            const policy = new Policy(
              {
                limits: [
                  { name: 'per-user', by: ['user'], limiter: makers.fixedWindow() },
                  { name: 'per-ip', by: ['ip'], limiter: makers.fixedWindow() },
                ],
              },
              { clock },
            );
            policy.tryAcquire({ user: 'alice', ip: 'x' });
            policy.tryAcquire({ user: 'bob', ip: 'y' });
            return [policy, { user: 'alice', ip: 'x' }];
          },
          how,
          (policy) => assert.equal(policy.reset(reset), 1),
          (policy) => policy.reserve({ user: 'alice', ip: 'x' }).atMs,
        );
        assert.equal(at, expected, `${how}: reset of ${JSON.stringify(reset)}`);
      }
    }
  });

  it("a keyed token bucket gives back the latest booking of its key: another key's booking since changes nothing", async () => {
    // Counted over the whole store, bob's booking kept alice's slot unused.
    for (const key of ['bob', 'alice']) {
      const held = [];
      const at = await giveBackAfter(
        store('keyed', 'tokenBucket', ['bob']),
        'abort',
        (keyed) => held.push(keyed.reserve(key).atMs),
        (keyed) => keyed.reserve('alice').atMs,
      );
      assert.deepStrictEqual([held, at], key === 'bob' ? [[1_100], 1_100] : [[1_200], 1_300], `a booking of ${key} between`);
    }
  });

  it('a policy with a bucket gives back the latest booking of its keys: a booking apart changes nothing, one sharing a key does', async () => {
    // One of its IP shares her key there; with a global limit, every
    // request shares its key there.
    for (const [between, expected] of [['apart', 1_100], ['same ip', 1_200], ['global', 1_200]]) {
      const at = await giveBackAfter(
        (clock) => {
          const limits = [
            { name: 'per-user', by: ['user'], limiter: makers.tokenBucket() },
            { name: 'per-ip', by: ['ip'], limiter: new TokenBucket({ capacity: 5, refillTokens: 5, refillPeriodMs: 100 }) },
          ];
          if (between === 'global') limits.push({ name: 'global', limiter: new TokenBucket({ capacity: 100, refillTokens: 100, refillPeriodMs: 100 }) });
          const policy = new Policy({ limits }, { clock });
          policy.tryAcquire({ user: 'alice', ip: 'x' });
          policy.tryAcquire({ user: 'bob', ip: 'z' });
          return [policy, { user: 'alice', ip: 'x' }];
        },
        'abort',
        (policy) => assert.equal(policy.reserve({ user: 'bob', ip: between === 'same ip' ? 'x' : 'y' }).atMs, 1_100),
        (policy) => policy.reserve({ user: 'alice', ip: 'x' }).atMs,
      );
      assert.equal(at, expected, between);
    }
  });

  it("a keyed limiter's waiters move up whatever happened to other keys since, not after a call on their own", async () => {
    // A reserve() held, or a reset that found the key, since a's booking:
    // on another key, b moves up into a's slot (counted over the whole
    // store, it stayed). On its own key: b keeps its slot behind the
    // reserve(); after the reset, the key is fresh, and b goes at once.
    for (const move of ['gcra', 'leakyBucket']) {
      for (const [between, key, expected] of [
        ['reserve', 'other', 1_100],
        ['reset', 'other', 1_100],
        ['reserve', 'k', 1_300],
        ['reset', 'k', 1_000],
      ]) {
        const time = fakeTime().install();
        try {
          const limiter = move === 'gcra' ? makers.gcra(time.now) : new LeakyBucket({ capacity: 10, intervalMs: 100, clock: time.now });
          const keyed = new KeyedLimiter(limiter);
          keyed.tryAcquire('k');
          keyed.tryAcquire('other');
          const controller = new AbortController();
          const a = keyed.acquire('k', 1, { signal: controller.signal }).catch((error) => error.name);
          if (between === 'reserve') keyed.reserve(key);
          else assert.equal(keyed.reset(key), true);
          const b = keyed.acquire('k').then(() => time.now());
          controller.abort();
          assert.equal(await a, 'AbortError');
          await time.advance(1_000);
          assert.equal(await b, expected, `${move}: ${between} of ${key}`);
        } finally {
          time.uninstall();
        }
      }
    }
  });

  it('an acquire due at once behind a waiter books no slot to come: a bucket still gives back the booking before it', async () => {
    // Bob's acquire takes its unit at once, as a tryAcquire or a reserve()
    // due at once would, and waits only for alice's waiter ahead to go.
    // Counted as a booking of its keys, it kept alice's aborted booking
    // (the latest of hers still) from being given back where Python, whose
    // acquire_async due at once waits for nothing, gave it back: through a
    // global limit, or a key sharing her mark (user82).
    const keyed = (clock) => new KeyedLimiter(makers.tokenBucket(clock));
    const policy = (clock) =>
      new Policy(
        {
          limits: [
            { name: 'per-user', by: ['user'], limiter: makers.tokenBucket() },
            // Refilled slowly: booked for alice's slot, it holds its refill
            // until then unclipped, and has units for bob at once.
            { name: 'global', limiter: new TokenBucket({ capacity: 100, refillTokens: 1, refillPeriodMs: 100 }) },
          ],
        },
        { clock },
      );
    for (const [make, alice, other] of [
      [keyed, 'alice', 'bob'],
      [keyed, 'alice', 'user82'],
      [policy, { user: 'alice' }, { user: 'bob' }],
    ]) {
      const time = fakeTime().install();
      try {
        const limiter = make(time.now);
        assert.equal(limiter.tryAcquire(alice).allowed, true);
        const controller = new AbortController();
        const waiting = limiter.acquire(alice, 1, { signal: controller.signal }).catch((error) => error.name);
        const went = limiter.acquire(other).then(() => time.now());
        controller.abort();
        assert.equal(await waiting, 'AbortError');
        await time.advance(0);
        assert.equal(await went, 1_000, 'due at once');
        assert.equal(limiter.reserve(alice).atMs, 1_100, `given back: ${JSON.stringify(other)} after it`);
      } finally {
        time.uninstall();
      }
    }
  });

  it("a waiter moved up checks what came since its latest booking: an earlier reserve() on the key of one behind it changes nothing", async () => {
    // A policy of one GCRA by user: one queue for every request. Bob moves
    // up when alice's waiter ahead aborts, booked again after carol's
    // reserve(); carol's waiter comes behind that reserve(). Bob's abort then
    // gives his booking back, as in Python: counted from his first booking,
    // carol's reserve() kept his slot unused (his next booking a slot later).
    const time = fakeTime().install();
    try {
      const policy = new Policy({ limits: [{ name: 'per-user', by: ['user'], limiter: makers.gcra() }] }, { clock: time.now });
      for (const user of ['alice', 'bob', 'carol']) assert.equal(policy.tryAcquire({ user }).allowed, true);
      const [alice, bob] = [new AbortController(), new AbortController()];
      const first = policy.acquire({ user: 'alice' }, 1, { signal: alice.signal }).catch((error) => error.name);
      const moved = policy.acquire({ user: 'bob' }, 1, { signal: bob.signal }).catch((error) => error.name);
      assert.equal(policy.reserve({ user: 'carol' }).atMs, 1_100);
      alice.abort();
      assert.equal(await first, 'AbortError');
      const carol = policy.acquire({ user: 'carol' }).then(() => time.now());
      bob.abort();
      assert.equal(await moved, 'AbortError');
      assert.equal(policy.reserve({ user: 'bob' }).atMs, 1_100, "bob's slot given back");
      await time.advance(200);
      assert.equal(await carol, 1_200, 'carol behind her reserve()');
    } finally {
      time.uninstall();
    }
  });
});

describe('Policy grown in code: new Policy() and add, as in Python', () => {
  const window = (limit, windowMs = 1e9) => new FixedWindow({ limit, windowMs });
  const perUserAndGlobal = (userLimit, globalLimit, options) => {
    const policy = new Policy(undefined, options);
    policy.add('per-user', window(userLimit), { by: ['user'] });
    policy.add('global', window(globalLimit));
    return policy;
  };

  it('starts empty, admitting everything, and lists what add adds: limits, names, keyedBy, size', () => {
    for (const empty of [new Policy(), new Policy(null), new Policy(undefined, { clock: () => 0 })]) {
      assert.deepStrictEqual([empty.size, empty.names, empty.limits], [0, [], []]);
      const d = empty.tryAcquire({}, 1, 0);
      assert.deepStrictEqual([d.allowed, d.remaining, d.limits], [true, Infinity, []]);
    }
    const policy = perUserAndGlobal(2, 3);
    assert.deepStrictEqual(
      [policy.size, policy.names, policy.keyedBy('per-user'), policy.keyedBy('global')],
      [2, ['per-user', 'global'], ['user'], []],
    );
    assert.deepStrictEqual(policy.limits, [{ name: 'per-user', by: ['user'] }, { name: 'global', by: [] }]);
    // Copies: changing one changes nothing in the policy.
    policy.names.push('x');
    policy.keyedBy('per-user').push('x');
    assert.deepStrictEqual([policy.names, policy.keyedBy('per-user')], [['per-user', 'global'], ['user']]);
    const first = policy.tryAcquire({ user: 'alice' }, 2, 0);
    assert.deepStrictEqual([first.allowed, first.remaining, first.limit, first.deniedBy], [true, 0, 2, null]);
    assert.deepStrictEqual(first.limits.map((l) => [l.name, l.remaining]), [['per-user', 0], ['global', 1]]);
    const denied = policy.tryAcquire({ user: 'alice' }, 1, 0);
    assert.deepStrictEqual([denied.allowed, denied.deniedBy], [false, 'per-user']);
    assert.equal(policy.tryAcquire({ user: 'bob' }, 1, 0).allowed, true, 'the denial took nothing from global');
    assert.equal(policy.tryAcquire({ user: 'carol' }, 1, 0).deniedBy, 'global');
    assert.deepStrictEqual(policy.headers(denied), {
      'RateLimit-Policy': '"per-user";q=2;w=1000000, "global";q=3;w=1000000',
      RateLimit: '"per-user";r=0;t=1000000, "global";r=1;t=1000000',
      'Retry-After': '1000000',
    });
    assertLimiterError(() => policy.tryAcquire({}, 1, 0), 'invalid_value', 'request');
  });

  it('copies the configuration only; a KeyedLimiter brings its bound, not its keys', () => {
    const used = new Gcra({ burst: 2, emissionIntervalMs: 1000, name: 'ignored' });
    used.tryAcquire(2, 0);
    const keyed = new KeyedLimiter(new FixedWindow({ limit: 1, windowMs: 60_000 }), { maxKeys: 1, eviction: 'refuse' });
    keyed.tryAcquire('a', 1, 0);
    const policy = new Policy();
    policy.add('burst', used, { by: ['user'] });
    policy.add('per-user', keyed, { by: ['user'] });
    assert.deepStrictEqual(policy.names, ['burst', 'per-user']);
    assert.equal(policy.tryAcquire({ user: 'a' }, 1, 0).allowed, true, "neither the limiter's nor the store's state");
    assert.equal(policy.peek({ user: 'a' }, 0, 0).limits[0].remaining, 1, 'a fresh burst of 2, less one');
    assert.throws(() => policy.tryAcquire({ user: 'b' }, 1, 0), (e) => e instanceof RangeError && e.code === 'store_full');
    assert.equal(used.peek(0, 0).remaining, 0, 'the limiter given is left as it was');
  });

  it('refuses what Python refuses, with its codes, adding nothing', () => {
    const policy = new Policy();
    policy.add('a', new Gcra({ burst: 1, emissionIntervalMs: 1000 }));
    const gcra = new Gcra({ burst: 1, emissionIntervalMs: 1000 });
    const taken = assertLimiterError(() => policy.add('a', gcra), 'invalid_value', 'name');
    assert.equal(taken.message, '`name` is already the name of a limit in this policy');
    assertLimiterError(() => policy.add('', gcra), 'invalid_value', 'name');
    assertLimiterError(() => policy.add('caf\u00e9', gcra), 'invalid_value', 'name');
    assertLimiterError(() => policy.add('bad\ud800', gcra), 'invalid_value', 'name');
    assertLimiterError(() => policy.add('b', gcra, { by: ['user', 'user'] }), 'invalid_value', 'by');
    assertLimiterError(() => policy.add(5, gcra), 'invalid_type', 'name');
    assertLimiterError(() => policy.add('b', 5), 'invalid_type', 'limiter');
    assertLimiterError(() => policy.add('b', Policy.fromRates('1/second')), 'invalid_type', 'limiter');
    assertLimiterError(() => policy.add('b', gcra, { by: 'user' }), 'invalid_type', 'by');
    assertLimiterError(() => policy.add('b', gcra, { by: ['user', 5] }), 'invalid_type', 'by');
    assertLimiterError(() => policy.add('b', gcra, { by: ['us\udc00er'] }), 'invalid_value', 'by');
    assertLimiterError(() => policy.add('b', gcra, 'user'), 'invalid_type', 'options');
    assertLimiterError(() => policy.add('b', gcra, { maxKeys: 5 }), 'invalid_type', 'maxKeys');
    assertLimiterError(() => Policy.prototype.add.call({}, 'b', gcra), 'invalid_type', 'this');
    assert.deepStrictEqual(policy.names, ['a']);
    // `by` of null is none, as Python's by=None.
    policy.add('b', gcra, { by: null });
    assert.deepStrictEqual(policy.limits, [{ name: 'a', by: [] }, { name: 'b', by: [] }]);
  });

  it('keyedBy names an unknown limit; algorithm and by need a rate string, and fromConfig a configuration', () => {
    const policy = Policy.fromRates('1/second;5/minute', { by: ['user'] });
    assert.deepStrictEqual(policy.keyedBy('5/minute'), ['user']);
    const unknown = assertLimiterError(() => policy.keyedBy('nope'), 'invalid_value', 'name');
    assert.equal(unknown.message, '`name` is not the name of a limit in this policy: "nope"');
    assertLimiterError(() => policy.keyedBy(5), 'invalid_type', 'name');
    assertLimiterError(() => policy.keyedBy('x\ud800'), 'invalid_value', 'name');
    const none = assertLimiterError(() => new Policy(undefined, { by: ['user'] }), 'invalid_value', 'by');
    assert.equal(none.message, '`by` applies only to a rate string, and none was given');
    assertLimiterError(() => new Policy(null, { algorithm: 'gcra' }), 'invalid_value', 'algorithm');
    assertLimiterError(() => Policy.fromConfig(), 'invalid_type', 'config');
    assertLimiterError(() => Policy.fromConfig(null), 'invalid_type', 'config');
  });

  it('a calendar limit moves a policy without a clock to Date.now(), unless it holds state on the monotonic clock', () => {
    const DAY = 86_400_000;
    const daily = () => new FixedWindow({ limit: 1000, calendar: 'day' });
    const leftOfTheDay = (policy) => {
      for (;;) {
        const day = Math.floor(Date.now() / DAY);
        const reset = policy.tryAcquire({ user: 1 }).resetAfterMs;
        const expected = (day + 1) * DAY - Date.now();
        if (Math.floor(Date.now() / DAY) === day) return Math.abs(reset - expected);
      }
    };
    const added = new Policy();
    added.add('daily', daily(), { by: ['user'] });
    assert.ok(leftOfTheDay(added) < 60_000);
    // Decided on the monotonic clock: the jump to the epoch would make its limits forget what they hold.
    const busy = new Policy();
    busy.add('per-minute', new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 60_000 }), { by: ['user'] });
    assert.equal(busy.tryAcquire({ user: 1 }).allowed, true);
    const refused = assertLimiterError(() => busy.add('daily', daily(), { by: ['user'] }), 'invalid_value', 'limiter');
    assert.equal(
      refused.message,
      '`limiter` follows a calendar, which needs Date.now, and the policy has decided on performance.now: give it clock: Date.now',
    );
    assert.deepStrictEqual(busy.names, ['per-minute']);
    assert.equal(busy.tryAcquire({ user: 1 }).deniedBy, 'per-minute', 'still on its monotonic clock');
    // A clock given stays, whatever the policy holds.
    const given = new Policy(undefined, { clock: () => 100 * DAY + 3_600_000 });
    given.add('per-minute', new FixedWindow({ limit: 5, windowMs: 60_000 }));
    assert.equal(given.tryAcquire({}).allowed, true);
    given.add('daily', daily());
    assert.equal(given.tryAcquire({}).limits[1].resetAfterMs, DAY - 3_600_000);
  });

  it('a decision made before add has the headers of the limits it lists', () => {
    const policy = new Policy();
    policy.add('global', window(3));
    const before = policy.tryAcquire({}, 1, 0);
    policy.add('per-user', window(2), { by: ['user'] });
    assert.deepStrictEqual(policy.headers(before), { 'RateLimit-Policy': '"global";q=3;w=1000000', RateLimit: '"global";r=2;t=1000000' });
    const after = policy.tryAcquire({ user: 'a' }, 1, 0);
    assert.equal(policy.headers(after).RateLimit, '"global";r=1;t=1000000, "per-user";r=1;t=1000000');
    assertLimiterError(() => policy.headers({ ...after, limits: [...after.limits, after.limits[0]] }), 'invalid_type', 'decision.limits');
    // Fewer limits are those of an earlier decision only, told by their names.
    assertLimiterError(() => policy.headers({ ...after, limits: after.limits.slice(1) }), 'invalid_type', 'decision.limits');
    const unnamed = { ...before, limits: before.limits.map(({ name, ...numbers }) => numbers) };
    assertLimiterError(() => policy.headers(unnamed), 'invalid_type', 'decision.limits');
  });

  // Books `request` for a slot to come, calls `add` while it waits, then gives
  // the booking back: cancel() of a reservation, or an abort of acquire.
  async function giveBackAfterAdding(policy, time, request, how, add) {
    if (how === 'cancel') {
      const reservation = policy.reserve(request);
      assert.ok(reservation.ok && reservation.waitMs > 0);
      add();
      reservation.cancel();
      return;
    }
    const controller = new AbortController();
    const waiting = policy.acquire(request, 1, { signal: controller.signal });
    await time.advance(1);
    add();
    controller.abort();
    await assert.rejects(waiting, (e) => e.name === 'AbortError');
  }

  for (const how of ['cancel', 'acquire']) {
    it(`${how}: a booking gives nothing back to a limit added after it`, async () => {
      const time = fakeTime({ start: 0 }).install();
      try {
        const policy = new Policy(undefined, { clock: time.now });
        policy.add('per-user', new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 60_000 }), { by: ['user'] });
        assert.equal(policy.tryAcquire({ user: 1 }).allowed, true);
        await giveBackAfterAdding(policy, time, { user: 1 }, how, () => {
          policy.add('global', new FixedWindow({ limit: 1, windowMs: 1_000_000 }));
          assert.equal(policy.tryAcquire({ user: 2 }).allowed, true);
        });
        // 'global' never held user 1's booking: giving it back there admitted
        // a second request in a window of one.
        const denied = policy.tryAcquire({ user: 3 });
        assert.deepStrictEqual([denied.allowed, denied.deniedBy], [false, 'global']);
        // 'per-user' got it back: user 1 waits only for its refill.
        assert.equal(policy.peek({ user: 1 }).limits[0].retryAfterMs, 60_000 - time.now());
      } finally {
        time.uninstall();
      }
    });

    it(`${how}: a booking is given back though a limit added after it needs another field`, async () => {
      const time = fakeTime({ start: 0 }).install();
      try {
        const policy = new Policy(undefined, { clock: time.now });
        policy.add('global', new FixedWindow({ limit: 1, windowMs: 60_000 }));
        assert.equal(policy.tryAcquire(undefined).allowed, true);
        // Booked for the next window, at 60 s; the request has no "user" field.
        await giveBackAfterAdding(policy, time, {}, how, () => policy.add('per-user', new FixedWindow({ limit: 5, windowMs: 60_000 }), { by: ['user'] }));
        await time.advance(60_000);
        assert.equal(policy.tryAcquire({ user: 'a' }).allowed, true, "its unit is back in 'global'");
      } finally {
        time.uninstall();
      }
    });
  }
});

describe('keys as bytes, as Python takes bytes', () => {
  // Every way a keyed limiter takes its key, each checked to reach the key's
  // state: consumes one unit of a limit of 1 (or gives it back, for refund).
  const takes = {
    tryAcquire: (keyed, key) => keyed.tryAcquire(key, 1, 0).allowed,
    reserve: (keyed, key) => keyed.reserve(key, 1, 0, 0).ok,
    tryAcquireBatch: (keyed, key) => keyed.tryAcquireBatch(key, [1], 0)[0].allowed,
  };
  const oneUnit = () => new KeyedLimiter(new FixedWindow({ limit: 1, windowMs: SECOND }));

  /** Asserts that `a` and `b` are one key in every method, and that `other` is another. */
  function oneKey(a, b, other, what) {
    for (const [name, take] of Object.entries(takes)) {
      for (const [first, second] of [[a, b], [b, a]]) {
        const keyed = oneUnit();
        assert.equal(keyed.peek(second, 1, 0).allowed, true, `${what}: ${name}: peek before`);
        assert.equal(take(keyed, first), true, `${what}: ${name}: the first`);
        assert.equal(keyed.peek(second, 1, 0).allowed, false, `${what}: ${name}: peek of the other spelling`);
        assert.equal(take(keyed, second), false, `${what}: ${name}: the other spelling is denied`);
        assert.equal(take(keyed, other), true, `${what}: ${name}: another key`);
        keyed.refund(second, 1, 0);
        assert.equal(take(keyed, first), true, `${what}: ${name}: given back through the other spelling`);
        assert.equal(keyed.size, 2, `${what}: ${name}: two keys`);
      }
    }
  }

  it('a Uint8Array or a Buffer is the key of the string whose UTF-8 it is, in every method', () => {
    // Past the 64 bytes the scratch takes and the 128 the addon reads on its stack too.
    const texts = ['a', 'é€😀', '42', 'x'.repeat(64), 'y'.repeat(65), 'é'.repeat(70), 'z'.repeat(1000)];
    for (const text of texts) {
      const encoded = new TextEncoder().encode(text);
      oneKey(encoded, text, `${text}!`, `${text.length} characters as a Uint8Array`);
      oneKey(Buffer.from(text), text, Buffer.from(`${text}?`), `${text.length} characters as a Buffer`);
    }
    // 42 and '42' are one key: so is its UTF-8.
    oneKey(Buffer.from('42'), 42, 43, 'a number');
    // A leading U+FEFF is a character of the key, not a mark to drop.
    oneKey(Buffer.from([0xef, 0xbb, 0xbf, 0x61]), '\ufeffa', 'a', 'a byte order mark');
  });

  it('an empty Uint8Array is the empty key, as the empty string is', () => {
    oneKey(new Uint8Array(0), '', 'a', 'empty');
    oneKey(Buffer.alloc(0), new Uint8Array(0), new Uint8Array([0]), 'an empty Buffer');
  });

  it('bytes that are not UTF-8 are a key of their own, in every method', () => {
    const keys = [
      [0xff],
      [0xfe],
      [0x80],
      [0xc3], // the start of 'é' alone
      [0xed, 0xa0, 0x80], // a surrogate's UTF-8 (U+D800): not UTF-8
      [0x61, 0xff],
      [0xff, 0x61],
      [0x00, 0xff],
      Array(64).fill(0xff),
      Array(65).fill(0xff),
      [...Array(200).fill(0x61), 0xff],
    ].map((bytes) => new Uint8Array(bytes));
    // Nor any string, of those bytes read otherwise: Latin-1, U+FFFD for each.
    const strings = ['\u00ff', '\ufffd', 'a\ufffd', '\ufffda', '\u00ffa', 'a'];
    for (const [name, take] of Object.entries(takes)) {
      const keyed = oneUnit();
      for (const key of keys) assert.equal(take(keyed, key), true, `${name}: ${key.length} bytes`);
      for (const key of keys) assert.equal(take(keyed, new Uint8Array(key)), false, `${name}: ${key.length} bytes again, in a copy`);
      assert.equal(keyed.size, keys.length);
      for (const text of strings) assert.equal(keyed.tryAcquire(text, 1, 0).allowed, true, `${name}: ${JSON.stringify(text)}`);
      keyed.refund(Buffer.from([0xff]), 1, 0);
      assert.equal(keyed.peek(new Uint8Array([0xff]), 1, 0).allowed, true, `${name}: given back`);
      const r = keyed.reserve(new Uint8Array([0xff]), 1, 0, 0);
      assert.equal(r.ok, true);
      assert.equal(keyed.peek(new Uint8Array([0xff]), 1, 0).allowed, false);
      r.cancel();
      assert.equal(keyed.peek(new Uint8Array([0xff]), 1, 0).allowed, true, `${name}: cancelled`);
    }
  });

  it('a view reads its own bytes only, at the call: not the rest of its buffer, nor what is written after', () => {
    const keyed = oneUnit();
    const buffer = new Uint8Array([0x78, 0x61, 0x62, 0x63, 0x79]).buffer;
    assert.equal(keyed.tryAcquire(new Uint8Array(buffer, 1, 3), 1, 0).allowed, true);
    assert.equal(keyed.tryAcquire('abc', 1, 0).allowed, false);
    assert.equal(keyed.tryAcquire('xabcy', 1, 0).allowed, true);
    const odd = new Uint8Array([0x78, 0xff, 0xfe, 0x79]);
    assert.equal(keyed.tryAcquire(odd.subarray(1, 3), 1, 0).allowed, true);
    assert.equal(keyed.tryAcquire(new Uint8Array([0xff, 0xfe]), 1, 0).allowed, false);
    assert.equal(keyed.size, 3);
    // A reservation, and an acquire's booking, are given back to the key they were made for.
    for (const bytes of [[0x71], [0xf1]]) {
      const key = new Uint8Array(bytes);
      const r = keyed.reserve(key, 1, 0, 0);
      key[0] += 1;
      r.cancel();
      key[0] -= 1;
      assert.equal(keyed.peek(key, 1, 0).allowed, true, `${bytes}: given back to its own key`);
    }
  });

  it('a DataView, an ArrayBuffer, another typed array or a look-alike is refused with the TypeError that lists Uint8Array', async () => {
    const keyed = oneUnit();
    const message = '`key` must be a string, a number or a Uint8Array';
    const bytes = new Uint8Array([0x61]);
    const refused = [
      new DataView(bytes.buffer),
      bytes.buffer,
      new Uint8ClampedArray([0x61]),
      new Int8Array([0x61]),
      new Uint16Array([0x61]),
      new Proxy(bytes, {}),
      Object.create(Uint8Array.prototype),
      [0x61],
      { length: 1, 0: 0x61 },
      null,
      undefined,
      true,
      1n,
      Symbol('k'),
    ];
    for (const key of refused) {
      for (const call of keyCalls(keyed, key)) {
        assert.equal(assertLimiterError(call, 'invalid_type', 'key').message, message);
      }
      assert.equal((await assertLimiterRejects(keyed.acquire(key), 'invalid_type', 'key')).message, message);
    }
    assert.equal(keyed.size, 0, 'nothing taken');
  });

  it("a policy's request value may be bytes: a Uint8Array is the value of its UTF-8 string, and other bytes their own", async () => {
    // Its clock reads 0, as every call's nowMs here: `acquire` reads the
    // clock, and on performance.now() it moved the policy to the window of
    // the process's uptime, where a refund at 0 gives nothing back (the test
    // failed once the process had run a second).
    const limits = [{ name: 'u', by: ['user'], limiter: new FixedWindow({ limit: 1, windowMs: SECOND }) }];
    const policy = new Policy({ limits }, { clock: () => 0 });
    assert.equal(policy.tryAcquire({ user: Buffer.from('é'.repeat(40)) }, 1, 0).allowed, true);
    assert.equal(policy.tryAcquire({ user: 'é'.repeat(40) }, 1, 0).allowed, false);
    assert.equal(policy.tryAcquire({ user: new Uint8Array(0) }, 1, 0).allowed, true);
    assert.equal(policy.peek({ user: '' }, 1, 0).allowed, false);
    for (const bytes of [[0xff], Array(300).fill(0xfe)]) {
      const user = new Uint8Array(bytes);
      assert.equal(policy.peek({ user }, 1, 0).allowed, true, `${bytes.length} bytes`);
      assert.equal(policy.tryAcquire({ user }, 1, 0).allowed, true);
      assert.equal(policy.tryAcquire({ user: new Uint8Array(bytes) }, 1, 0).allowed, false);
      policy.refund({ user }, 1, 0);
      const r = policy.reserve({ user }, 1, 0, 0);
      assert.equal(r.ok, true, 'given back by refund');
      r.cancel();
      await policy.acquire({ user });
      assert.equal(policy.peek({ user }, 1, 0).allowed, false, 'cancelled, then taken by acquire');
    }
    assert.equal(policy.tryAcquire({ user: '\ufffd' }, 1, 0).allowed, true);
    assert.equal(policy.tryAcquire({ user: '\u00ff' }, 1, 0).allowed, true);
    const message = '`request.user` must be a string, a number or a Uint8Array, not object';
    const error = assertLimiterError(() => policy.tryAcquire({ user: new DataView(new ArrayBuffer(1)) }, 1, 0), 'invalid_type', 'request.user');
    assert.equal(error.message, message);
  });
});

describe('portable state', () => {
  const bucket = { capacity: 3, refillTokens: 1, refillPeriodMs: 100 };
  const portable = [
    ['TokenBucket', () => new TokenBucket(bucket), (o) => TokenBucket.fromBytes(o, bucket)],
    ['FixedWindow', () => new FixedWindow({ limit: 3, windowMs: 100 }), (o) => FixedWindow.fromBytes(o, { limit: 3, windowMs: 100 })],
    ['SlidingWindowCounter', () => new SlidingWindowCounter({ limit: 3, windowMs: 100 }), (o) => SlidingWindowCounter.fromBytes(o, { limit: 3, windowMs: 100 })],
    ['Gcra', () => new Gcra({ burst: 3, emissionIntervalMs: 100 }), (o) => Gcra.fromBytes(o, { burst: 3, emissionIntervalMs: 100 })],
    ['LeakyBucket', () => new LeakyBucket({ capacity: 3, intervalMs: 100 }), (o) => LeakyBucket.fromBytes(o, { capacity: 3, intervalMs: 100 })],
    ['SlidingWindowLog', () => new SlidingWindowLog({ limit: 3, windowMs: 100 }), (o) => SlidingWindowLog.fromBytes(o, { limit: 3, windowMs: 100 })],
  ];
  it('TokenBucket.fromBytes takes bandwidths as fromBandwidths does', () => {
    const bands = [bucket, { capacity: 10, refillTokens: 10, refillPeriodMs: SECOND }];
    const a = TokenBucket.fromBandwidths(bands, { name: 'two' });
    a.tryAcquire(3, 0);
    const b = TokenBucket.fromBytes(a.toBytes(), bands, { name: 'two' });
    assert.equal(b.name, 'two');
    assert.deepStrictEqual(b.tryAcquire(1, 50), a.tryAcquire(1, 50));
    assertLimiterError(() => TokenBucket.fromBytes(a.toBytes(), bucket), 'state_mismatch', 'bytes');
  });

  for (const [name, make, fromBytes] of portable) {
    it(`${name}: toBytes round trip keeps decisions`, () => {
      const a = make();
      a.tryAcquire(2, 10);
      const bytes = a.toBytes();
      assert.ok(bytes instanceof Uint8Array && bytes.length > 8);
      const b = fromBytes(bytes);
      assert.ok(b instanceof api[name]);
      for (const [cost, now] of [[1, 20], [1, 30], [1, 40], [2, 150]]) assert.deepStrictEqual(b.tryAcquire(cost, now), a.tryAcquire(cost, now));
      const c = make();
      c.restore(a.toBytes());
      assert.deepStrictEqual(c.peek(1, 160), a.peek(1, 160));
    });

    it(`${name}: corrupt bytes throw a RangeError with a state_* code and change nothing`, () => {
      const a = make();
      a.tryAcquire(1, 0);
      const good = a.toBytes();
      const before = a.peek(1, 0);
      const cases = [
        [good.slice(0, 4), 'state_truncated'],
        [Uint8Array.from(good, (b, i) => (i === 0 ? 0 : b)), 'state_corrupt'],
        [Uint8Array.from(good, (b, i) => (i === 2 ? 99 : b)), 'state_version'],
        [new Gcra({ burst: 9, emissionIntervalMs: 1 }).toBytes(), 'state_mismatch'],
      ];
      if (name === 'Gcra') cases[3][0] = new Gcra({ burst: 9, emissionIntervalMs: 7 }).toBytes();
      for (const [bytes, code] of cases) assertLimiterError(() => a.restore(bytes), code, 'bytes', code);
      assert.deepStrictEqual(a.peek(1, 0), before);
      assertLimiterError(() => a.restore('x'), 'invalid_type', 'bytes');
    });
  }
});

describe('hash seeds from the host', () => {
  // wasm has no address-space layout randomization, so the wasm build seeds
  // each store's hashes from crypto.getRandomValues() (else Math.random()) at
  // its first operation (workerd refuses random values at a module's global
  // scope, where limiters are built); the native addon's seeds come from the
  // process's layout.
  const wasm = process.env.RATEKEEPER_IMPL === 'wasm';
  /** Runs `run` with the host's generators counted, refusing those named in `refuse`. */
  function counting(run, { refuse = [] } = {}) {
    const { getRandomValues } = globalThis.crypto;
    const random = Math.random;
    const calls = { crypto: 0, math: 0 };
    const refused = (name) => {
      if (refuse.includes(name)) throw new Error('Disallowed operation called within global scope');
    };
    globalThis.crypto.getRandomValues = function (array) {
      calls.crypto++;
      refused('crypto');
      return getRandomValues.call(this, array);
    };
    Math.random = () => {
      calls.math++;
      refused('math');
      return random();
    };
    try {
      run();
    } finally {
      delete globalThis.crypto.getRandomValues; // back to the prototype's
      Math.random = random;
    }
    return [calls.crypto, calls.math];
  }
  const none = [0, 0];

  it('a keyed limiter takes them at its first operation, once, and decides alike', () => {
    let keyed;
    assert.deepEqual(counting(() => { keyed = new KeyedLimiter(new Gcra({ burst: 2, emissionIntervalMs: 10 })); }), none, 'built: none');
    const users = Array.from({ length: 200 }, (_, i) => `user-${i}`);
    assert.deepEqual(counting(() => users.forEach((user) => keyed.tryAcquire(user, 1, 0))), wasm ? [1, 0] : none);
    assert.deepEqual(counting(() => users.forEach((user) => keyed.tryAcquire(user, 1, 0))), none, 'then none');
    assert.deepEqual(users.map((user) => keyed.tryAcquire(user, 1, 0).allowed), users.map(() => false), 'every key kept its state');
  });

  it('without the Web Crypto API, Math.random(); a host that refuses both is asked again at the next operation', () => {
    const keyed = new KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: 10 }));
    const refused = counting(() => assert.equal(keyed.tryAcquire('a', 1, 0).allowed, true), { refuse: ['crypto', 'math'] });
    assert.deepEqual(refused, wasm ? [1, 1] : none);
    // Seeded now, the key held is rehashed: still found, still denied.
    const fallback = counting(() => assert.equal(keyed.tryAcquire('a', 1, 0).allowed, false), { refuse: ['crypto'] });
    assert.deepEqual(fallback, wasm ? [1, 2] : none);
    assert.deepEqual(counting(() => keyed.tryAcquire('b', 1, 0)), none);
  });

  it('a policy seeds its stores at its first operation', () => {
    let policy;
    const limits = [
      { name: 'per-user', by: ['user'], limiter: new Gcra({ burst: 1, emissionIntervalMs: 10 }) },
      { name: 'per-ip', by: ['ip'], limiter: new Gcra({ burst: 5, emissionIntervalMs: 10 }) },
    ];
    assert.deepEqual(counting(() => { policy = new Policy({ limits }); }), none, 'built: none');
    assert.deepEqual(counting(() => assert.equal(policy.tryAcquire({ user: 'a', ip: '10.0.0.1' }, 1, 0).allowed, true)), wasm ? [1, 0] : none);
    assert.deepEqual(counting(() => assert.equal(policy.tryAcquire({ user: 'a', ip: '10.0.0.1' }, 1, 0).allowed, false)), none);
  });
});
