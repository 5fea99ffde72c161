'use strict';
// Hostile arguments to the public API, on the napi addon or the wasm build
// (RATEKEEPER_IMPL=wasm): every refusal is a RangeError or TypeError carrying
// one of the core's stable codes, with a message naming the argument, and
// changes nothing (the next decision is a twin's that never saw the call);
// corrupt state bytes are refused the same way. Deterministic (fixed seeds).
const assert = require('node:assert/strict');
const { test } = require('node:test');
const R = require('./impl.cjs');
const { assertLimiterError, checkLimiterError } = require('./helpers.cjs');

const CODES = new Set([
  'zero_value',
  'too_large',
  'overflow',
  'cost_exceeds_limit',
  'invalid_value',
  'invalid_type',
  'invalid_syntax',
  'store_full',
  'out_of_memory',
  'state_truncated',
  'state_corrupt',
  'state_version',
  'state_mismatch',
  'invalid_config',
]);

/** Asserts `error` is a refusal as documented, naming `argument` (its JS spelling). */
function refusal(error, argument, context) {
  assert.ok(error instanceof RangeError || error instanceof TypeError, `${context}: a RangeError or TypeError, not ${error?.constructor?.name}: ${error?.message}`);
  assert.ok(CODES.has(error.code), `${context}: a stable code, not ${error.code} (${error.message})`);
  // TypeError exactly for the wrong type (or a configuration of the wrong shape).
  assert.equal(error instanceof TypeError, error.code === 'invalid_type' || error.code === 'invalid_config', `${context}: ${error.constructor.name} with ${error.code}`);
  if (argument !== undefined) assert.ok(error.message.includes(`\`${argument}\``), `${context}: the message names \`${argument}\`: ${error.message}`);
}

/** Seeded, so that a failure reproduces. */
function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return s / 2 ** 32;
  };
}

const HOSTILE = [
  NaN,
  Infinity,
  -Infinity,
  -1,
  0.5,
  2 ** 53,
  2 ** 64,
  1e308,
  10n,
  '5',
  '',
  true,
  Symbol('s'),
  {},
  [],
  [5],
  new Number(5),
  { valueOf: () => 5 },
  () => 5,
  new Proxy({}, {}),
];

const LIMITERS = {
  TokenBucket: () => new R.TokenBucket({ capacity: 5, refillTokens: 1, refillPeriodMs: 1000 }),
  Gcra: () => new R.Gcra({ burst: 5, emissionIntervalMs: 100 }),
  LeakyBucket: () => new R.LeakyBucket({ capacity: 5, intervalMs: 100 }),
  SlidingWindowLog: () => new R.SlidingWindowLog({ limit: 5, windowMs: 1000 }),
  SlidingWindowCounter: () => new R.SlidingWindowCounter({ limit: 5, windowMs: 1000 }),
  FixedWindow: () => new R.FixedWindow({ limit: 5, windowMs: 1000 }),
};

// Each method's arguments after the key (a KeyedLimiter's) or the request (a Policy's): [JS name, valid value].
const ARGS = {
  tryAcquire: [['cost', 1], ['nowMs', 10]],
  peek: [['cost', 1], ['nowMs', 10]],
  reserve: [['cost', 1], ['maxWaitMs', 1000], ['nowMs', 10]],
  refund: [['cost', 1], ['takenAtMs', 10]],
};

/** Calls `make()[method](...lead, ...args)` with one argument hostile, on a limiter and a twin that never sees it. */
function hostileCalls(label, make, lead, state) {
  for (const [method, params] of Object.entries(ARGS)) {
    params.forEach(([name], at) => {
      for (const value of [...HOSTILE, 6]) {
        const args = params.map(([, valid]) => valid);
        args[at] = value;
        const limiter = make();
        const twin = make();
        limiter.tryAcquire(...lead, 2, 0);
        twin.tryAcquire(...lead, 2, 0);
        let error;
        try {
          limiter[method](...lead, ...args);
        } catch (e) {
          error = e;
        }
        const context = `${label}.${method}(${name} = ${typeof value === 'symbol' ? 'a symbol' : String(value)})`;
        if (error === undefined) continue;
        // 6 exceeds every limit here: refused as a cost, whatever the argument.
        refusal(error, value === 6 ? 'cost' : name, context);
        assert.deepEqual(state(limiter), state(twin), `${context}: the refused call changed nothing`);
      }
    });
  }
}

test('every method of every limiter refuses hostile arguments naming them, and changes nothing', () => {
  for (const [label, make] of Object.entries(LIMITERS)) {
    hostileCalls(label, make, [], (l) => [l.peek(1, 500), l.peek(5, 5000), [...l.toBytes()]]);
  }
});

test('a KeyedLimiter and a Policy refuse hostile arguments naming them, and change nothing', () => {
  const keyed = () => new R.KeyedLimiter(LIMITERS.Gcra(), { maxKeys: 4 });
  hostileCalls('KeyedLimiter', keyed, ['a'], (k) => [k.size, k.peek('a', 1, 500), k.peek('a', 5, 5000)]);
  const policy = () => new R.Policy({ limits: [{ name: 'all', rate: '10/second' }, { name: 'user', rate: '5/second', by: ['user'] }] });
  hostileCalls('Policy', policy, [{ user: 'a' }], (p) => [p.peek({ user: 'a' }, 1, 500), p.peek({ user: 'a' }, 5, 5000)]);
  for (const key of [1.5, NaN, 10n, Symbol('k'), null, {}, ['a'], new String('a')]) {
    const k = keyed();
    assert.throws(() => k.tryAcquire(key, 1, 0), (e) => (refusal(e, 'key', `key ${typeof key}`), true));
    assert.equal(k.size, 0);
  }
  for (const request of ['user', 5, { user: 1.5 }, { user: null }, { user: 10n }, {}]) {
    const p = policy();
    assert.throws(() => p.tryAcquire(request, 1, 0), (e) => (refusal(e, undefined, `request ${JSON.stringify(request, (_, v) => (typeof v === 'bigint' ? `${v}n` : v))}`), true));
    assert.deepEqual(p.peek({ user: 'a' }, 5, 0).allowed, true);
  }
});

test('constructors refuse hostile option values naming the option', () => {
  const bases = {
    TokenBucket: [R.TokenBucket, { capacity: 5, refillTokens: 1, refillPeriodMs: 1000 }],
    Gcra: [R.Gcra, { burst: 5, emissionIntervalMs: 100 }],
    LeakyBucket: [R.LeakyBucket, { capacity: 5, intervalMs: 100 }],
    SlidingWindowLog: [R.SlidingWindowLog, { limit: 5, windowMs: 1000 }],
    SlidingWindowCounter: [R.SlidingWindowCounter, { limit: 5, windowMs: 1000 }],
    FixedWindow: [R.FixedWindow, { limit: 5, windowMs: 1000 }],
  };
  for (const [label, [Class, base]] of Object.entries(bases)) {
    for (const option of [...Object.keys(base), 'name', 'clock']) {
      for (const value of HOSTILE) {
        let error;
        try {
          new Class({ ...base, [option]: value });
        } catch (e) {
          error = e;
        }
        if (error === undefined) {
          // Taken: a value of the option's type (a fraction of a millisecond, a name, a clock); a Number object is none.
          const type = option === 'name' ? 'string' : option === 'clock' ? 'function' : 'number';
          assert.equal(typeof value, type, `${label} took ${option} = ${String(typeof value === 'symbol' ? 'a symbol' : value)}`);
          continue;
        }
        // An overflow names the product's duration, not the count that made it.
        if (error.code !== 'overflow') refusal(error, option, `${label}.${option}`);
        else refusal(error, undefined, `${label}.${option}`);
      }
    }
  }
});

test('state bytes: every prefix, random bit flips and another algorithm\'s are refused as state errors, changing nothing', () => {
  const random = rng(0x5eed);
  for (const [label, make] of Object.entries(LIMITERS)) {
    const source = make();
    source.tryAcquire(2, 500);
    source.reserve(3, Infinity, 600);
    const bytes = source.toBytes();
    const candidates = [];
    for (let n = 0; n < bytes.length; n++) candidates.push(bytes.slice(0, n));
    candidates.push(Uint8Array.from([...bytes, 0]));
    for (let i = 0; i < 150; i++) {
      const flipped = bytes.slice();
      for (let f = 1 + Math.floor(random() * 3); f > 0; f--) {
        const bit = Math.floor(random() * flipped.length * 8);
        flipped[bit >> 3] ^= 1 << (bit & 7);
      }
      candidates.push(flipped);
    }
    for (const [other, makeOther] of Object.entries(LIMITERS)) if (other !== label) candidates.push(makeOther().toBytes());
    for (const candidate of candidates) {
      const limiter = make();
      const twin = make();
      let error;
      try {
        limiter.restore(candidate);
      } catch (e) {
        error = e;
      }
      const context = `${label}.restore([${candidate}])`;
      if (error !== undefined) {
        refusal(error, 'bytes', context);
        assert.match(error.code, /^state_/, context);
        assert.deepEqual([...limiter.toBytes()], [...twin.toBytes()], `${context}: changed nothing`);
        continue;
      }
      // Taken: the state is one the limiter can go on from, without a failure.
      for (const now of [1000, 1e9]) {
        limiter.tryAcquire(1, now);
        limiter.peek(5, now);
        limiter.reserve(5, Infinity, now).cancel();
      }
      assert.ok(limiter.toBytes().length > 0);
    }
  }
});

test('an array that is a Proxy, or whose elements answer otherwise when read again, is read once as a plain array', () => {
  // Array.isArray takes a Proxy of an array, and so did the wasm build, where
  // the napi build threw napi-rs's uncoded `Failed to get Array length`.
  const bucket = () => new R.TokenBucket({ capacity: 5, refillTokens: 1, refillPeriodMs: 1000 });
  const band = { capacity: 5, refillTokens: 1, refillPeriodMs: 1000 };
  assert.equal(new R.KeyedLimiter(bucket()).tryAcquireBatch('a', new Proxy([1, 1], {}), 0).length, 2);
  assert.deepEqual(new R.Policy('10/second', { by: new Proxy(['user'], {}) }).limits, [{ name: '10/second', by: ['user'] }]);
  assert.deepEqual(new R.Policy({ limits: [{ name: 'a', limiter: bucket(), by: new Proxy(['user'], {}) }] }).limits, [{ name: 'a', by: ['user'] }]);
  assert.equal(R.TokenBucket.fromBandwidths(new Proxy([band], {})).limit, 5);

  // A cost checked as a number, then read again as a string: napi-rs threw
  // its uncoded `NumberExpected`, the wasm build a RangeError (NaN).
  let reads = 0;
  const costs = [];
  Object.defineProperty(costs, 0, { get: () => (reads++ === 0 ? 1 : 'x'), enumerable: true });
  assert.equal(new R.KeyedLimiter(bucket()).tryAcquireBatch('a', costs, 0)[0].remaining, 4);
  assert.equal(reads, 1);
  // The same for the fields of `by`.
  reads = 0;
  const by = [];
  Object.defineProperty(by, 0, { get: () => (reads++ === 0 ? 'user' : 5), enumerable: true });
  assert.deepEqual(new R.Policy('10/second', { by }).limits, [{ name: '10/second', by: ['user'] }]);
  assert.equal(reads, 1);
  // A bandwidth checked for unknown options, then read again with one: taken unchecked.
  reads = 0;
  const bands = [];
  Object.defineProperty(bands, 0, { get: () => (reads++ === 0 ? band : { ...band, capacity: 7, intialTokens: 0 }), enumerable: true });
  assert.equal(R.TokenBucket.fromBandwidths(bands).limit, 5);
  assert.equal(reads, 1);
  // Still refused as before: a hole, and too many bandwidths (with the length given).
  assert.throws(() => R.TokenBucket.fromBandwidths([band, , band]), { name: 'TypeError', code: 'invalid_type', message: '`bandwidths` must be an array of objects' });
  assert.throws(() => R.TokenBucket.fromBandwidths(new Array(1000).fill(band)), { name: 'RangeError', code: 'too_large', message: '`bandwidths` must be at most 4 (got 1000)' });
});

test("a policy configuration that contains itself is refused as invalid_config, naming the place", () => {
  // JSON.stringify's own TypeError had no code.
  const config = { limits: [{ name: 'a', rate: '1/second' }] };
  config.limits[0].by = [config];
  assert.throws(() => new R.Policy(config), {
    name: 'TypeError',
    code: 'invalid_config',
    message: 'policy configuration: limits[0].by[0]: expected JSON data, found a circular reference',
  });
  // An object met twice, not within itself, is no cycle.
  const by = ['user'];
  const shared = new R.Policy({ limits: [{ name: 'a', rate: '1/second', by }, { name: 'b', rate: '2/second', by }] });
  assert.deepEqual(shared.limits, [{ name: 'a', by: ['user'] }, { name: 'b', by: ['user'] }]);
});

test('options inherited from a polluted Object.prototype are no options: only own ones are read', async () => {
  const polluted = { initialTokens: 0, calendar: 'day', timeoutMs: 0, maxKeys: 1, eviction: 'refuse', by: ['polluted'], clock: () => 0, name: 'polluted' };
  for (const [name, value] of Object.entries(polluted)) Object.prototype[name] = value;
  try {
    const bucket = new R.TokenBucket({ capacity: 5, refillTokens: 1, refillPeriodMs: 1000 });
    assert.equal(bucket.initialTokens, 5);
    assert.equal(bucket.name, 'default');
    assert.equal(bucket.tryAcquire(5, 0).allowed, true, 'starts full');
    const fromBands = R.TokenBucket.fromBandwidths([{ capacity: 3, refillTokens: 1, refillPeriodMs: 1000 }]);
    assert.equal(fromBands.initialTokens, 3);
    const window = new R.FixedWindow({ limit: 1, windowMs: 1000 });
    assert.deepEqual([window.calendar, window.windowMs], [null, 1000]);
    const keyed = new R.KeyedLimiter(new R.Gcra({ burst: 1, emissionIntervalMs: 1000 }), {});
    assert.equal(keyed.maxKeys, null);
    assert.ok(keyed.tryAcquire('a', 1, 0).allowed && keyed.tryAcquire('b', 1, 0).allowed, 'no bound of one key');
    // A policy's limits given as limiters: their fields are own ones too.
    const policy = new R.Policy({ limits: [{ name: 'a', limiter: new R.Gcra({ burst: 1, emissionIntervalMs: 1000 }) }] });
    assert.deepEqual(policy.limits, [{ name: 'a', by: [] }]);
    const byUser = new R.Policy({ limits: [{ name: 'a', by: ['user'], limiter: new R.Gcra({ burst: 1, emissionIntervalMs: 1000 }) }] });
    assert.ok(['u1', 'u2', 'u3'].every((user) => byUser.tryAcquire({ user }, 1, 0).allowed), 'no bound of one key');
    const gcra = new R.Gcra({ burst: 1, emissionIntervalMs: 10 });
    gcra.tryAcquire();
    // An inherited timeoutMs of 0 would refuse the wait at once.
    assert.equal(await gcra.acquire(1, {}), undefined);
  } finally {
    for (const name of Object.keys(polluted)) delete Object.prototype[name];
  }
});

test('state bytes are read by the Uint8Array itself: a lying own length, another realm, a Proxy', () => {
  const vm = require('node:vm');
  const options = { burst: 5, emissionIntervalMs: 100 };
  const source = new R.Gcra(options);
  source.tryAcquire(3, 0);
  const bytes = source.toBytes();
  // wasm-bindgen's glue sized its copy by `length`, then wrote every byte,
  // past the copy into the module's heap (other limiters' state); a
  // `byteLength` of 0 read as no bytes.
  for (const [property, value] of [['length', 2], ['length', 1e6], ['byteLength', 0]]) {
    const lying = Uint8Array.from(bytes);
    Object.defineProperty(lying, property, { value });
    const limiter = new R.Gcra(options);
    limiter.restore(lying);
    assert.deepEqual([...limiter.toBytes()], [...bytes], `an own ${property} of ${value}`);
    assert.deepEqual([...R.Gcra.fromBytes(lying, options).toBytes()], [...bytes], `fromBytes, an own ${property} of ${value}`);
  }
  // A Uint8Array of another realm (a `vm` context; Jest's Buffer) is one.
  const foreign = vm.runInNewContext('Uint8Array').from(bytes);
  assert.deepEqual([...R.Gcra.fromBytes(foreign, options).toBytes()], [...bytes]);
  // A view of shared memory, at an offset.
  const shared = new Uint8Array(new SharedArrayBuffer(bytes.length + 3), 3);
  shared.set(bytes);
  assert.deepEqual([...R.Gcra.fromBytes(shared, options).toBytes()], [...bytes]);
  // A Proxy of one and an object inheriting from Uint8Array.prototype pass
  // `instanceof`, and their getters threw an uncoded TypeError.
  for (const fake of [new Proxy(bytes, {}), Object.create(Uint8Array.prototype), new DataView(bytes.buffer), bytes.buffer, [...bytes]]) {
    const limiter = new R.Gcra(options);
    const before = [...limiter.toBytes()];
    assert.throws(() => limiter.restore(fake), (e) => (refusal(e, 'bytes', 'restore'), true));
    assert.throws(() => R.Gcra.fromBytes(fake, options), (e) => (refusal(e, 'bytes', 'fromBytes'), true));
    assert.deepEqual([...limiter.toBytes()], before);
  }
});

test('an option that is a revoked Proxy, or a Proxy of an array whose trap throws, is a wrong type, again and again', () => {
  // The wasm build let the exception unwind through the module, leaking
  // its shadow stack: after about a thousand, every call trapped
  // ("memory access out of bounds"). Node-API reads no Proxy as an array.
  const { proxy: revoked, revoke } = Proxy.revocable([], {});
  revoke();
  const trapped = new Proxy([], {
    get() {
      throw new Error('trap');
    },
  });
  const base = { capacity: 5, refillTokens: 1, refillPeriodMs: 1000 };
  const limiter = new R.Gcra({ burst: 5, emissionIntervalMs: 100 });
  const cases = [['refillPeriodMs', revoked], ['capacity', trapped], ['refill', revoked]];
  const errors = new Map();
  for (let i = 0; i < 3000; i++) {
    for (const [option, value] of cases) {
      try {
        new R.TokenBucket({ ...base, [option]: value });
      } catch (e) {
        errors.set(option, e);
      }
    }
  }
  assert.equal(limiter.tryAcquire(1, 0).remaining, 4);
  assert.equal(new R.TokenBucket(base).capacity, 5);
  for (const [option] of cases) refusal(errors.get(option), option, option);
  assert.throws(() => new R.FixedWindow({ limit: 1, calendar: revoked }), (e) => (refusal(e, 'calendar', 'calendar'), true));
});

test('a setter on Object.prototype that calls back into the limiter while its error is made finds it free', () => {
  // The wasm build made the error (setting its `code`) while it still held
  // the limiter borrowed, or its last error: the call back panicked, and the
  // caller got a RuntimeError ("unreachable") from the module.
  const gcra = new R.Gcra({ burst: 5, emissionIntervalMs: 100 });
  const keyed = new R.KeyedLimiter(gcra);
  const policy = new R.Policy('5/second', { by: ['user'] });
  let callBack = () => {};
  const seen = [];
  const bad = { allowed: false, remaining: -1, limit: 5, retryAfterMs: 0, resetAfterMs: 0 };
  const calls = [
    [gcra, () => gcra.tryAcquire(NaN, 0), () => gcra.tryAcquire(1, 0).remaining],
    [gcra, () => gcra.reserve(1, -1, 0), () => gcra.peek(1, 0).remaining],
    [gcra, () => gcra.refund(NaN, 0), () => gcra.tryAcquire(1, 0).remaining],
    [gcra, () => gcra.reconfigure(new R.Gcra({ burst: 5, emissionIntervalMs: 100 }), NaN), () => gcra.tryAcquire(1, 0).remaining],
    [gcra, () => gcra.headers(bad), () => gcra.tryAcquire(1, 0).remaining],
    [gcra, () => gcra.restore(new Uint8Array([1, 2, 3])), () => gcra.tryAcquire(1, 0).remaining],
    [keyed, () => keyed.tryAcquire('a', NaN, 0), () => keyed.tryAcquire('a', 1, 0).remaining],
    [keyed, () => keyed.refund('a', NaN, 0), () => keyed.tryAcquire('a', 1, 0).remaining],
    [keyed, () => keyed.tryAcquireBatch('a', [NaN], 0), () => keyed.tryAcquire('a', 1, 0).remaining],
    [keyed, () => keyed.reclaim(NaN), () => keyed.tryAcquire('a', 1, 0).remaining],
    [policy, () => policy.tryAcquire({ user: 'a' }, NaN, 0), () => policy.tryAcquire({ user: 'a' }, 1, 0).remaining],
    [policy, () => policy.refund({ user: 'a' }, NaN, 0), () => policy.tryAcquire({ user: 'a' }, 1, 0).remaining],
    [policy, () => policy.reclaim(NaN), () => policy.tryAcquire({ user: 'a' }, 1, 0).remaining],
    [policy, () => policy.headers({ ...bad, deniedBy: null, limits: [bad] }), () => policy.tryAcquire({ user: 'a' }, 1, 0).remaining],
  ];
  Object.defineProperty(Object.prototype, 'code', {
    configurable: true,
    set(value) {
      Object.defineProperty(this, 'code', { value, writable: true, enumerable: true, configurable: true });
      const again = callBack;
      callBack = () => {};
      try {
        seen.push(again());
      } catch (e) {
        seen.push(e);
      }
    },
  });
  try {
    for (const [, call, back] of calls) {
      callBack = back;
      seen.length = 0;
      assert.throws(call, (e) => (refusal(e, undefined, String(call)), true));
      assert.ok(seen.length === 1 && typeof seen[0] === 'number', `${call}: called back, ${seen[0]}`);
    }
  } finally {
    delete Object.prototype.code;
  }
  // The configuration, read into an object whose fields a setter may watch.
  const fresh = new R.TokenBucket({ capacity: 5, refillTokens: 1, refillPeriodMs: 1000 });
  let answer;
  Object.defineProperty(Object.prototype, 'limit', {
    configurable: true,
    set(value) {
      Object.defineProperty(this, 'limit', { value, writable: true, enumerable: true, configurable: true });
      if (answer === undefined) answer = fresh.tryAcquire(1, 0).remaining;
    },
  });
  try {
    assert.equal(fresh.capacity, 5);
  } finally {
    delete Object.prototype.limit;
  }
  assert.equal(answer, 4);
});

/** A signal-like (`fetch` takes any such) whose `aborted` reads `aborted()`, and which announces an abort only on `fire()`. */
function signalLike(aborted) {
  const listeners = new Set();
  const signal = {
    get aborted() {
      return aborted();
    },
    reason: new Error('aborted'),
    addEventListener: (_, listener) => listeners.add(listener),
    removeEventListener: (_, listener) => listeners.delete(listener),
  };
  return { signal, fire: () => [...listeners].forEach((listener) => listener()), listeners };
}

test('a signal whose `aborted` throws, or turns true unannounced, leaves the waiters behind an abort booked, and settles', async () => {
  // Read while a waiter ahead was withdrawn: the throw escaped the abort
  // listener (an uncaught exception) after the waiters behind had given
  // their bookings back and before they booked again, so that they went on
  // waiting, and were let through, holding none; and a waiter whose signal
  // said aborted without announcing it was given back and left pending forever.
  let now = 0;
  const limiter = new R.Gcra({ burst: 1, emissionIntervalMs: 1000, clock: () => now });
  limiter.tryAcquire();
  let armed = false;
  const first = signalLike(() => armed);
  const throwing = signalLike(() => {
    if (armed) throw new Error('aborted getter');
    return false;
  });
  const unannounced = signalLike(() => armed);
  const last = new AbortController();
  const settled = [];
  const track = (name, promise) => promise.then(() => settled.push(`${name} ok`), (e) => settled.push(`${name} ${e.message}`));
  const waits = [
    track('first', limiter.acquire(1, { signal: first.signal })), // at 1000
    track('throwing', limiter.acquire(1, { signal: throwing.signal })), // at 2000
    track('unannounced', limiter.acquire(1, { signal: unannounced.signal })), // at 3000
    track('last', limiter.acquire(1, { signal: last.signal })), // at 4000
  ];
  try {
    armed = true;
    assert.doesNotThrow(() => first.fire());
    // The waiter whose `aborted` threw, and the last one, moved up and hold 1000 and 2000.
    assert.equal(limiter.peek(1, 1000).allowed, false);
    assert.equal(limiter.peek(1, 2000).allowed, false);
    assert.equal(limiter.peek(1, 3000).allowed, true);
    await Promise.resolve();
    await Promise.resolve();
    assert.deepEqual(settled.sort(), ['first aborted', 'unannounced aborted']);
    assert.equal(unannounced.listeners.size, 0, 'no longer listened to');
  } finally {
    // Every waiter leaves, so that no timer is left behind.
    armed = false;
    throwing.fire();
    unannounced.fire();
    last.abort(new Error('done'));
    await Promise.all(waits);
  }
  assert.deepEqual(settled.sort(), ['first aborted', 'last done', 'throwing aborted', 'unannounced aborted']);
  assert.equal(limiter.peek(1, 1000).allowed, true, 'every booking given back');
});

test('a Proxy of a limiter, a keyed limiter or a policy (a reactive wrapper), or an object inheriting from one, is refused by name', () => {
  // `instanceof` took them, and their private fields then threw an uncoded
  // TypeError: when given, or at each request of a middleware.
  const gcra = new R.Gcra({ burst: 5, emissionIntervalMs: 100 });
  const keyed = new R.KeyedLimiter(gcra);
  const policy = new R.Policy('5/second');
  const wrapped = (value) => [new Proxy(value, {}), Object.create(value)];
  for (const other of wrapped(gcra)) {
    const limiter = new R.Gcra({ burst: 5, emissionIntervalMs: 100 });
    assert.throws(() => limiter.reconfigure(other, 0), (e) => (refusal(e, 'other', 'reconfigure'), true));
    assert.throws(() => new R.KeyedLimiter(other), (e) => (refusal(e, 'limiter', 'KeyedLimiter'), true));
    assert.throws(() => new R.Policy({ limits: [{ name: 'a', limiter: other }] }), (e) => (refusal(e, 'limiter', 'Policy'), true));
    assert.deepEqual(limiter.tryAcquire(1, 0).remaining, 4);
  }
  for (const other of wrapped(keyed)) {
    assert.throws(() => new R.Policy({ limits: [{ name: 'a', limiter: other }] }), (e) => (refusal(e, 'limiter', 'Policy'), true));
    assert.throws(() => R.middleware({ limiter: other, key: () => 'a' }), (e) => (refusal(e, 'limiter', 'middleware'), true));
  }
  for (const other of wrapped(policy)) {
    assert.throws(() => R.middleware({ limiter: other }), (e) => (refusal(e, 'limiter', 'middleware'), true));
    assert.throws(() => R.fastifyHook({ limiter: other }), (e) => (refusal(e, 'limiter', 'fastifyHook'), true));
  }
  // A subclass's instances are limiters.
  class Mine extends R.Gcra {}
  const mine = new Mine({ burst: 2, emissionIntervalMs: 100 });
  assert.equal(new R.KeyedLimiter(mine).limit, 2);
  gcra.reconfigure(mine, 0);
  assert.equal(gcra.limit, 2);
});

test("a subclass's getters answering otherwise change nothing the package checks or shows: it reads the limiter itself", () => {
  // reconfigure checked `other.calendar`, Policy.add took a KeyedLimiter's
  // `limiter` unchecked (an uncoded TypeError, a private field read), and
  // util.inspect looked the class up by `algorithm` (it threw).
  const { inspect } = require('node:util');
  class Uncalendared extends R.FixedWindow {
    get calendar() {
      return null;
    }
  }
  const monotonic = new R.FixedWindow({ limit: 5, windowMs: 1000 });
  const daily = new Uncalendared({ limit: 5, calendar: 'day', clock: Date.now });
  assert.throws(() => monotonic.reconfigure(daily), (e) => (refusal(e, 'other', 'reconfigure'), true));
  assert.deepEqual([monotonic.calendar, monotonic.windowMs], [null, 1000], 'unchanged');
  class Unwrapping extends R.KeyedLimiter {
    get limiter() {
      return {};
    }
  }
  const policy = new R.Policy();
  const keyed = new Unwrapping(new R.Gcra({ burst: 5, emissionIntervalMs: 100 }));
  assert.throws(() => policy.add('a', keyed), (e) => (refusal(e, 'limiter', 'Policy.add'), true));
  assert.throws(() => new R.Policy({ limits: [{ name: 'a', limiter: keyed }] }), (e) => (refusal(e, 'limiter', 'Policy'), true));
  assert.equal(policy.size, 0);
  class Renamed extends R.Gcra {
    get algorithm() {
      return 'GCRA';
    }

    get name() {
      return 'shown';
    }
  }
  assert.equal(inspect(new Renamed({ burst: 5, emissionIntervalMs: 100 })), 'Gcra { burst: 5, emissionIntervalMs: 100 }');
});

test('util.inspect (console.log) of a Proxy of a limiter, a keyed limiter or a policy, or of an object inheriting from one, shows it, never throws', () => {
  // Node asks the target's custom inspection to show a Proxy, with the
  // Proxy as `this`: its brand check threw the TypeError naming `this`
  // (console.log of a reactive wrapper's limiter threw).
  const { inspect } = require('node:util');
  const shown = (value, options) => inspect(value, { breakLength: Infinity, ...options });
  const instances = [...Object.values(LIMITERS).map((make) => make()), new R.KeyedLimiter(LIMITERS.Gcra()), new R.Policy('5/second')];
  for (const instance of instances) {
    // As a Proxy's target, a level deeper (inspect's default depth is 2).
    const own = shown(instance, { depth: 1 });
    const kind = instance.constructor.name;
    // A Proxy as with showProxy, its target by its own inspection, and no trap run.
    const traps = { get: () => assert.fail('a trap ran'), getPrototypeOf: () => assert.fail('a trap ran'), ownKeys: () => assert.fail('a trap ran') };
    assert.equal(shown(new Proxy(instance, {})), `Proxy [ ${own}, {} ]`, kind);
    assert.match(shown(new Proxy(instance, traps)), new RegExp(`^Proxy \\[ ${kind} \\{`), kind);
    // Deeper than asked: as Node shows any Proxy there with showProxy.
    assert.equal(shown({ a: new Proxy(instance, {}) }, { depth: 0 }), shown({ a: new Proxy({}, {}) }, { depth: 0, showProxy: true }), kind);
    // Any other object inheriting from one: as Node shows an object without a custom inspection.
    assert.equal(shown(Object.create(instance)), `${kind} {}`, kind);
    assert.equal(shown(new Proxy(Object.create(instance), {})), `Proxy [ ${kind} {}, {} ]`, kind);
    assert.equal(shown(Object.assign(Object.create(instance), { note: 1 })), `${kind} { note: 1 }`, kind);
    // Called by hand on no object at all: the class's name, as without Node's inspect.
    for (const self of [undefined, null, 5, {}]) {
      const text = instance[Symbol.for('nodejs.util.inspect.custom')].call(self, 2, {});
      assert.equal(typeof text, 'string', `${kind} on ${self === null ? 'null' : typeof self}`);
    }
  }
});

test('a method or getter called detached, or on an object that is not of its class, throws the TypeError naming `this`', async () => {
  // Reading a private field of such a `this` threw V8's uncoded TypeError
  // ("Cannot read private member #h from an object whose class did not declare it").
  const gcra = new R.Gcra({ burst: 5, emissionIntervalMs: 100 });
  const keyed = new R.KeyedLimiter(gcra);
  const policy = new R.Policy('5/second');
  const instances = { ...Object.fromEntries(Object.entries(LIMITERS).map(([name, make]) => [name, make()])), KeyedLimiter: keyed, Policy: policy };
  const wrapped = (value) => [new Proxy(value, {}), Object.create(value)];
  let checked = 0;
  for (const [name, instance] of Object.entries(instances)) {
    // Each class's own methods and getters, and those it inherits (Limiter's), by the class that defines them.
    for (let proto = Object.getPrototypeOf(instance); proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
      const kind = `a ${proto.constructor.name}`;
      for (const key of Reflect.ownKeys(proto)) {
        // The custom inspection shows any `this` (see the test below): console.log must not throw.
        if (key === 'constructor' || key === Symbol.for('nodejs.util.inspect.custom')) continue;
        const { value, get } = Object.getOwnPropertyDescriptor(proto, key);
        const member = value ?? get;
        // Not of its class: anything else, a wrapper of an instance, an instance of another class.
        const others = [undefined, null, 5, {}, ...wrapped(instance)];
        others.push(name === 'Policy' ? keyed : policy, proto === R.Limiter.prototype ? keyed : name === 'Gcra' ? instances.TokenBucket : gcra);
        for (const self of others) {
          const label = `${name}: ${String(key)} on ${self === null ? 'null' : typeof self}`;
          let error;
          try {
            // acquire rejects (it never throws); the rest throw.
            await member.call(self);
          } catch (e) {
            error = e;
          }
          assert.ok(error !== undefined, `${label}: no error`);
          checkLimiterError(error, 'invalid_type', 'this', label);
          assert.equal(error.message, `\`this\` must be ${kind}`, label);
          checked++;
        }
        // On an instance of its class, `this` passes (the arguments may not).
        if (key === 'acquire') continue;
        try {
          member.call(instance, ...(name === 'KeyedLimiter' ? ['k'] : name === 'Policy' ? [{}] : []));
        } catch (e) {
          assert.ok(!e.message.startsWith('`this`'), `${name}: ${String(key)} on an instance: ${e.message}`);
        }
      }
    }
  }
  assert.ok(checked > 300, `only ${checked} calls checked`);
  // A class's static builder detached: fromBytes needs its class.
  const { fromBytes } = R.Gcra;
  const bytes = gcra.toBytes();
  for (const make of [() => fromBytes(bytes, { burst: 5, emissionIntervalMs: 100 }), () => R.TokenBucket.fromBytes.call({}, bytes, {})]) {
    const error = assertLimiterError(make, 'invalid_type', 'this');
    assert.equal(error.message, '`this` must be a subclass of Limiter');
  }
  // The others name their class themselves, and a reservation's cancel is its own.
  const { fromBandwidths } = R.TokenBucket;
  const { perPeriod } = R.Gcra;
  const { fromRates, fromConfig } = R.Policy;
  assert.equal(fromBandwidths([{ capacity: 2, refillTokens: 1, refillPeriodMs: 10 }]).capacity, 2);
  assert.equal(perPeriod({ burst: 2, tokens: 1, periodMs: 10 }).burst, 2);
  assert.equal(fromRates('1/second').limits.length, fromConfig({ limits: [{ name: 'a', rate: '1/second' }] }).limits.length);
  const { cancel } = gcra.reserve(5, Infinity, 0);
  assert.equal(gcra.peek(1, 0).allowed, false);
  cancel();
  assert.equal(gcra.peek(1, 0).remaining, 4);
});

test("a policy's headers read the decision's limits once", () => {
  // Read three times: a getter answering otherwise the third time made
  // `forEach` throw an uncoded TypeError.
  const policy = new R.Policy('5/second');
  const decision = policy.tryAcquire({}, 1, 0);
  const expected = policy.headers(decision);
  let reads = 0;
  const limits = decision.limits;
  Object.defineProperty(decision, 'limits', { get: () => (reads++ < 2 ? limits : 5) });
  assert.deepEqual(policy.headers(decision), expected);
  assert.equal(reads, 1);
  // An array holding more than it says (a Proxy) is read as long as it said.
  assert.deepEqual(policy.headers({ ...decision, limits: new Proxy(limits, {}) }), expected);
});

test('options are listed once: the keys checked for unknown ones are those copied', () => {
  // The keys were checked on one listing and the options copied from
  // another: a Proxy adding a misspelt option the second time passed unnoticed.
  const listed = (target, extra) => {
    const proxy = new Proxy(target, {
      ownKeys: (t) => (proxy.listings++ === 0 ? Reflect.ownKeys(t) : [...Reflect.ownKeys(t), extra]),
      getOwnPropertyDescriptor: (t, key) => (key === extra ? { value: 0, enumerable: true, configurable: true } : Reflect.getOwnPropertyDescriptor(t, key)),
      get: (t, key) => (key === extra ? 0 : key === 'listings' ? t.listings : t[key]),
      set: (t, key, value) => ((t[key] = value), true),
    });
    Object.defineProperty(target, 'listings', { value: 0, writable: true, enumerable: false });
    return proxy;
  };
  const options = listed({ capacity: 5, refillTokens: 1, refillPeriodMs: 1000 }, 'intialTokens');
  assert.equal(new R.TokenBucket(options).initialTokens, 5);
  assert.equal(options.listings, 1);
  const limit = listed({ name: 'a', limiter: new R.Gcra({ burst: 1, emissionIntervalMs: 10 }) }, 'max_keys');
  assert.deepEqual(new R.Policy({ limits: [limit] }).limits, [{ name: 'a', by: [] }]);
  assert.equal(limit.listings, 1);
  // A misspelt option in that listing is refused, as ever.
  assert.throws(() => new R.TokenBucket({ capacity: 5, refillTokens: 1, refillPeriodMs: 1000, intialTokens: 0 }), { name: 'TypeError', code: 'invalid_type' });
});

test('an array of costs or fields is read up to its first element of another type', () => {
  // Copied whole before the check: an array of length 2^32 - 1 holding
  // nothing took minutes to refuse.
  let reads = 0;
  const costs = [1, 'x'];
  Object.defineProperty(costs, 2, { get: () => (reads++, 1), enumerable: true });
  const keyed = new R.KeyedLimiter(new R.Gcra({ burst: 5, emissionIntervalMs: 100 }));
  assert.throws(() => keyed.tryAcquireBatch('a', costs, 0), (e) => (refusal(e, 'costs', 'costs'), true));
  const by = ['user', 5];
  Object.defineProperty(by, 2, { get: () => (reads++, 'route'), enumerable: true });
  assert.throws(() => new R.Policy('5/second', { by }), (e) => (refusal(e, 'by', 'by'), true));
  assert.throws(() => new R.Policy({ limits: [{ name: 'a', by, limiter: new R.Gcra({ burst: 1, emissionIntervalMs: 10 }) }] }), (e) => (refusal(e, 'by', 'by'), true));
  assert.equal(reads, 0);
  const empty = [];
  empty.length = 2 ** 32 - 1;
  assert.throws(() => keyed.tryAcquireBatch('a', empty, 0), (e) => (refusal(e, 'costs', 'costs'), true));
  assert.throws(() => new R.Policy('5/second', { by: empty }), (e) => (refusal(e, 'by', 'by'), true));
  assert.equal(keyed.size, 0);
  assert.deepEqual(keyed.tryAcquireBatch('a', [1, -0, 2], 0).map((d) => d.remaining), [4, 4, 2]);
});

test("a policy's configuration reads its limits once, and up to its first hole", () => {
  // Read three times: a getter answering otherwise the third time made
  // `entries` throw an uncoded TypeError.
  let reads = 0;
  const given = [{ name: 'a', limiter: new R.Gcra({ burst: 1, emissionIntervalMs: 10 }) }];
  const config = {
    get limits() {
      return reads++ < 2 ? given : 5;
    },
  };
  assert.deepEqual(new R.Policy(config).limits, [{ name: 'a', by: [] }]);
  assert.equal(reads, 1);
  // Holes: JSON wrote each as null, refused once all were written (an
  // array of length 2^32 - 1 holding nothing took minutes), and looking for
  // a limiter among them took as long.
  const holes = (...first) => Object.assign([...first], { length: 2 ** 32 - 1 });
  const refused = (e, place) => e instanceof TypeError && e.code === 'invalid_config' && e.message.includes(place);
  assert.throws(() => new R.Policy({ limits: holes() }), (e) => refused(e, 'limits[0]: expected JSON data, found a hole'));
  assert.throws(() => new R.Policy({ limits: holes({ name: 'a', rate: '1/second' }) }), (e) => refused(e, 'limits[1]'));
  assert.throws(() => new R.Policy({ limits: [{ name: 'a', rate: '1/second', by: holes('user') }] }), (e) => refused(e, 'limits[0].by[1]'));
  assert.throws(() => new R.Policy({ limits: holes(given[0]) }), (e) => (refusal(e, 'config', 'a hole after a limiter'), true));
  // A hole is refused where null would be, with the same code.
  assert.throws(() => new R.Policy({ limits: [{ name: 'a', rate: '1/second' }, , { name: 'b', rate: '1/second' }] }), (e) => refused(e, 'limits[1]'));
});

test("a policy's configuration nested deeper than the engine's stack is refused as invalid_config", () => {
  // JSON.stringify's own RangeError ("Maximum call stack size exceeded"), uncoded.
  let by = 'user';
  for (let i = 0; i < 5000; i++) by = [by];
  assert.throws(() => new R.Policy({ limits: [{ name: 'a', rate: '1/second', by }] }), {
    name: 'TypeError',
    code: 'invalid_config',
    message: /^policy configuration: limits\[0\]\.by(\[0\])+: expected JSON data, found data nested more than 127 deep$/,
  });
  let nested = {};
  for (let i = 0; i < 5000; i++) nested = { limits: nested };
  assert.throws(() => new R.Policy(nested), { name: 'TypeError', code: 'invalid_config' });
});

/** `object[name]` replaced while installed: it calls `fire()`, then the original. */
function replacedMethod(object, name) {
  return (fire) => {
    const original = object[name];
    object[name] = function (...args) {
      fire();
      return Reflect.apply(original, this, args);
    };
    return () => {
      object[name] = original;
    };
  };
}

/** The getter `object[name]` replaced while installed: it calls `fire()`, then the original. */
function replacedGetter(object, name) {
  return (fire) => {
    const descriptor = Object.getOwnPropertyDescriptor(object, name);
    Object.defineProperty(object, name, {
      ...descriptor,
      get() {
        fire();
        return descriptor.get.call(this);
      },
    });
    return () => Object.defineProperty(object, name, descriptor);
  };
}

test('an operation made by a builtin JS replaced, called by the package during another operation, changes neither answer', () => {
  // The napi build writes an operation's arguments (and a key, a request)
  // into memory shared with the addon and reads its answer there, the wasm
  // build its answer: a builtin the package called in between (a key's
  // charCodeAt or isWellFormed, a typed array's length getter, those making
  // a booking's marks), replaced with one that makes an operation of its
  // own, wrote over them. A call then decided another limiter, another key
  // or with another cost, or answered another call's numbers (a
  // reservation's slot, given back by its cancel()).
  const hooks = {
    'String.prototype.charCodeAt': replacedMethod(String.prototype, 'charCodeAt'),
    'String.prototype.isWellFormed': replacedMethod(String.prototype, 'isWellFormed'),
    '%TypedArray%.prototype.length': replacedGetter(Object.getPrototypeOf(Uint8Array.prototype), 'length'),
    '%ArrayIteratorPrototype%.next': replacedMethod(Object.getPrototypeOf([][Symbol.iterator]()), 'next'),
    'TextEncoder.prototype.encode': replacedMethod(TextEncoder.prototype, 'encode'),
    'WeakMap.prototype.get': replacedMethod(WeakMap.prototype, 'get'),
    'Array.prototype.reduce': replacedMethod(Array.prototype, 'reduce'),
  };
  const world = (n) => ({
    bucket: new R.TokenBucket({ capacity: n, refillTokens: 1, refillPeriodMs: 1000 }),
    gcra: new R.Gcra({ burst: n, emissionIntervalMs: 1000 }),
    keyed: new R.KeyedLimiter(new R.Gcra({ burst: n, emissionIntervalMs: 1000 })),
    policy: new R.Policy(`${n}/second`, { by: ['user'] }),
  });
  const decided = (d) => [d.allowed, d.remaining, d.limit, d.retryAfterMs, d.resetAfterMs];
  const booked = (r) => [r.ok, r.waitMs, r.atMs];
  // Each on a world of its own, limits of 3: a reservation waits.
  const operations = {
    'Limiter.tryAcquire': (w) => decided(w.bucket.tryAcquire(2, 0)),
    'Limiter.reserve': (w) => (w.gcra.tryAcquire(3, 0), booked(w.gcra.reserve(1, Infinity, 0))),
    'KeyedLimiter.tryAcquire': (w) => decided(w.keyed.tryAcquire('abcdef', 2, 0)),
    'KeyedLimiter.tryAcquire, a key not ASCII': (w) => decided(w.keyed.tryAcquire('\u00e9t\u00e9', 2, 0)),
    'KeyedLimiter.reserve': (w) => (w.keyed.tryAcquire('abcdef', 3, 0), booked(w.keyed.reserve('abcdef', 1, Infinity, 0))),
    'Policy.tryAcquire': (w) => decided(w.policy.tryAcquire({ user: 'abcdef' }, 2, 0)),
    'Policy.tryAcquire, a value not ASCII': (w) => decided(w.policy.tryAcquire({ user: '\u00e9t\u00e9' }, 2, 0)),
    'Policy.reserve': (w) => (w.policy.tryAcquire({ user: 'abcdef' }, 3, 0), booked(w.policy.reserve({ user: 'abcdef' }, 1, Infinity, 0))),
  };
  const wrong = [];
  for (const [hookName, install] of Object.entries(hooks)) {
    for (const [name, operate] of Object.entries(operations)) {
      const expected = operate(world(3));
      const mine = world(3);
      // Another world's calls, of other limits, costs and keys (the keys
      // longer than this one's), made each time the package calls the
      // builtin, but from inside one of them.
      const other = world(50);
      let inside = false;
      const fire = () => {
        if (inside) return;
        inside = true;
        try {
          other.bucket.tryAcquire(7, 0);
          other.keyed.tryAcquire('zzzzzzzzzz', 1, 0);
          other.policy.tryAcquire({ user: 'zzzzzzzzzz' }, 1, 0);
        } finally {
          inside = false;
        }
      };
      const uninstall = install(fire);
      let got;
      try {
        got = operate(mine);
      } catch (error) {
        got = error;
      } finally {
        uninstall();
      }
      if (!(Array.isArray(got) && got.join() === expected.join())) wrong.push(`${name}, ${hookName}: ${got}, not ${expected}`);
    }
  }
  assert.deepEqual(wrong, []);
});
