'use strict';
// ratekeeper/redis against a real server: configurations, time, keys and
// TTLs, headers, waiting, the script cache, hot-key batching.
const test = require('node:test');
const assert = require('node:assert/strict');
const vm = require('node:vm');
const { URL: REDIS_URL, rk, rkRedis, CLIENTS, ioredis, close, withClient, prefix, LATE_MS, sleep, until, spy } = require('./helpers.cjs');
const { countingSignal } = require('../js/helpers.cjs');

const { RedisLimiter, RedisPolicy } = rkRedis;
const HOUR = 3_600_000;
// Caller time: Unix milliseconds (keys expire no earlier than it), in 2033.
const T0 = 2_000_000_000_000;

/** A raw command on either library. */
function raw(client, ...command) {
  return typeof client.call === 'function' ? client.call(...command) : client.sendCommand(command.map(String));
}

/**
 * Loads the script into Redis's cache through `client`, with no
 * commandTimeoutMs to meet: a limiter of 50 ms that loaded it, before a call
 * of its that had to time out, failed on a stall of the machine.
 */
async function loadScript(client) {
  assert.equal(String(await raw(client, 'SCRIPT', 'LOAD', rkRedis.REDIS_SCRIPT)), rkRedis.REDIS_SCRIPT_SHA);
}

/**
 * `client`, whose script calls in `mode` (null: none) run at once but
 * resolve only once `release()` is called (a reply that comes late); `sent`
 * holds each script call's promise as sent, by mode, and `refunds` the
 * refunds'.
 */
function holdingReplies(client, mode) {
  const { promise: released, release } = releasable();
  const sent = { acquire: [], peek: [], reserve: [], refund: [] };
  const proxy = hooked(client, (words, send) => {
    let reply = send();
    if (words.includes(mode)) reply = reply.then(async (r) => (await released, r));
    const kind = Object.keys(sent).find((k) => words.includes(k));
    if (kind !== undefined) sent[kind].push(reply);
    return reply;
  });
  return { client: proxy, release, sent, refunds: sent.refund };
}

/** A promise, and the function that resolves it. */
function releasable() {
  let release;
  const promise = new Promise((resolve) => {
    release = resolve;
  });
  return { promise, release };
}

/**
 * `client`, whose `SCRIPT LOAD` runs at once but answers only once
 * `release()` is called (a reload that ends late); `sent` names each
 * command sent, in order.
 */
function holdingScriptLoad(client) {
  const { promise: released, release } = releasable();
  const sent = [];
  const proxy = hooked(client, async (words, send) => {
    sent.push(words[0]);
    const reply = await send();
    if (words[0] === 'SCRIPT') await released;
    return reply;
  });
  return { client: proxy, sent, release };
}

/**
 * `client`, each of whose commands goes through `hook(words, send)`: `words`
 * the command as strings, `send()` sends it and gives its reply's promise.
 */
function hooked(client, hook) {
  return new Proxy(client, {
    get(target, name) {
      const value = Reflect.get(target, name, target);
      if ((name === 'call' || name === 'sendCommand') && typeof value === 'function') {
        return (...args) => hook((Array.isArray(args[0]) ? args[0] : args.flat()).map(String), () => value.apply(target, args));
      }
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

for (const library of Object.keys(CLIENTS)) {
  test(`${library}: a key's TTL ends when its state is back to fresh (reset_after), server time`, () =>
    withClient(library, async (client) => {
      const p = prefix('ttl');
      const limiter = new RedisLimiter(client, new rk.FixedWindow({ limit: 5, windowMs: 10_000, name: 'w' }), { prefix: p });
      const serverMs = async () => {
        const [seconds, micros] = (await raw(client, 'TIME')).map(Number);
        return seconds * 1000 + micros / 1000;
      };
      // The window's key expires at its end: a decision in the window's last
      // second may see the key gone before PEXPIRETIME reads it, so start
      // in a window with more than a second left.
      const left = 10_000 - ((await serverMs()) % 10_000);
      if (left < 1000) await sleep(left + 50);
      const before = await serverMs();
      const d = await limiter.tryAcquire('alice', 2);
      const after = await serverMs();
      assert.equal(d.allowed, true);
      assert.equal(d.fromStore, true);
      assert.equal(d.remaining, 3);
      const key = `${p}{5:alice}:1:w:5:alice`;
      const expiresAt = Number(await raw(client, 'PEXPIRETIME', key));
      // The window ends at a multiple of 10 s since the epoch: the key expires then,
      // resetAfterMs after the time decided at (between before and after).
      assert.equal(expiresAt % 10_000, 0);
      const decidedAt = expiresAt - d.resetAfterMs;
      assert.ok(decidedAt >= before - 1 && decidedAt <= after + 1, `${before} <= ${decidedAt} <= ${after}`);
      // A state a refund leaves fresh is kept a second at most, with its
      // latest time: a token bucket given back what it took.
      const bucket = new RedisLimiter(client, new rk.TokenBucket({ capacity: 3, refillTokens: 1, refillPeriodMs: 10_000 }), { prefix: p });
      const bob = `${p}{3:bob}:27:token_bucket/1/3/1/10000000:3:bob`;
      await bucket.tryAcquire('bob', 1);
      assert.ok(Number(await raw(client, 'PTTL', bob)) > 9000);
      await bucket.refund('bob', 1);
      const ttl = Number(await raw(client, 'PTTL', bob));
      assert.ok(ttl > 0 && ttl <= 1000, `${ttl}`);
    }));

  test(`${library}: caller time (clock option and nowMs) and server time agree with the in-process limiter`, () =>
    withClient(library, async (client) => {
      const p = prefix('time');
      const gcra = new rk.Gcra({ burst: 2, emissionIntervalMs: 500 });
      const caller = new RedisLimiter(client, gcra, { prefix: p, clock: () => 2_000_000_000_000 });
      assert.deepEqual(
        [await caller.tryAcquire('k'), await caller.tryAcquire('k'), await caller.tryAcquire('k')].map((d) => [d.allowed, d.retryAfterMs]),
        [[true, 0], [true, 0], [false, 500]],
      );
      assert.equal((await caller.tryAcquire('k', 1, 2_000_000_000_500)).allowed, true);
      // (An interval of 5 s: three calls on the server's clock take less than 1 s.)
      const server = new RedisLimiter(client, new rk.Gcra({ burst: 2, emissionIntervalMs: 5000 }), { prefix: p + 'server:' });
      const [a, b, c] = [await server.tryAcquire('k'), await server.tryAcquire('k'), await server.tryAcquire('k')];
      assert.deepEqual([a.allowed, b.allowed, c.allowed], [true, true, false]);
      assert.ok(c.retryAfterMs > 4000 && c.retryAfterMs <= 5000, `${c.retryAfterMs}`);
      // Caller time is checked: a number of ms since the epoch, at most 2^52 µs.
      await assert.rejects(caller.tryAcquire('k', 1, 'now'), { name: 'TypeError', code: 'invalid_type' });
      await assert.rejects(caller.tryAcquire('k', 1, -1), { name: 'RangeError' });
      await assert.rejects(caller.tryAcquire('k', 1, NaN), { name: 'RangeError' });
      await assert.rejects(caller.tryAcquire('k', 1, 2 ** 52 / 1000 + 1), { name: 'RangeError', code: 'overflow' });
      assert.throws(() => new RedisLimiter(client, gcra, { clock: 5 }), { name: 'TypeError' });
    }));
}

test('the configurations Policy takes: rate strings, objects, JSON, configured limiters', () =>
  withClient('ioredis', async (client) => {
    const p = prefix('config');
    const fromRates = new RedisPolicy(client, '2/second;3/minute', { by: ['user'], prefix: p + 'a:' });
    assert.deepEqual(fromRates.limits, new rk.Policy('2/second;3/minute', { by: ['user'] }).limits);
    const decisions = [];
    for (let i = 0; i < 4; i++) decisions.push(await fromRates.tryAcquire({ user: 'u' }, 1, T0));
    assert.deepEqual(decisions.map((d) => d.allowed), [true, true, false, false]);
    assert.equal(decisions[2].deniedBy, '2/second');
    const config = {
      limits: [
        { name: 'burst', rate: '5/second', algorithm: 'gcra', burst: 2, by: ['user'] },
        { name: 'hourly', rate: '4/hour', algorithm: 'fixed_window', by: ['user', 'route'] },
        { name: 'global', rate: '100/minute', algorithm: 'sliding_window_counter' },
        { name: 'bands', rate: '10/second;50/minute', burst: 3 },
        { name: 'log', rate: '5/minute', algorithm: 'sliding_window_log', by: ['route'] },
      ],
    };
    const local = new rk.Policy(config);
    for (const form of [config, JSON.stringify(config)]) {
      const remote = new RedisPolicy(client, form, { prefix: prefix('config-form') });
      const mirror = new rk.Policy(config);
      for (let i = 0; i < 6; i++) {
        const now = T0 + i * 100;
        const request = { user: 'u', route: i % 2 ? '/a' : '/b' };
        const { fromStore, ...got } = await remote.tryAcquire(request, 1, now);
        assert.equal(fromStore, true);
        assert.deepEqual(got, mirror.tryAcquire(request, 1, now));
      }
    }
    // Headers come from the in-process policy's code.
    const d = await new RedisPolicy(client, config, { prefix: p + 'h:' }).tryAcquire({ user: 'x', route: '/' }, 1, T0);
    assert.deepEqual(new RedisPolicy(client, config).headers(d), local.headers(local.tryAcquire({ user: 'x', route: '/' }, 1, T0)));
    // Configured limiters.
    const limiters = new RedisPolicy(client, {
      limits: [
        { name: 'a', by: ['k'], limiter: new rk.TokenBucket({ capacity: 2, refillTokens: 1, refillPeriodMs: 1000 }) },
        { name: 'b', limiter: new rk.FixedWindow({ limit: 3, windowMs: 60_000 }) },
      ],
    }, { prefix: p + 'l:' });
    const got = [];
    for (const k of ['x', 'x', 'x', 'y', 'y']) got.push((await limiters.tryAcquire({ k }, 1, T0)).allowed);
    assert.deepEqual(got, [true, true, false, true, false]);
    // A policy's keys share one hash tag: the fields common to all limits, or the prefix alone.
    await limiters.tryAcquire({ k: 'z' }, 0, T0);
    assert.ok(Number(await client.exists(`${p}l:{${p}l:}:1:a:1:x`)) === 1);
  }));

test('what Redis cannot do is refused, naming the argument', () =>
  withClient('ioredis', async (client) => {
    const refuse = (make, name, type = RangeError) =>
      assert.throws(make, (error) => error instanceof type && error.message.startsWith(`\`${name}\``), name);
    refuse(() => new RedisLimiter(client, new rk.LeakyBucket({ capacity: 2, intervalMs: 10 })), 'algorithm');
    refuse(() => new RedisLimiter(client, new rk.FixedWindow({ limit: 2, windowMs: 2 ** 51 / 1000 })), 'windowMs');
    refuse(() => new RedisLimiter(client, new rk.FixedWindow({ limit: 2, calendar: 'month' })), 'calendar');
    refuse(() => new RedisLimiter(client, new rk.SlidingWindowCounter({ limit: 2, calendar: 'week' })), 'calendar');
    refuse(() => new RedisLimiter(client, new rk.FixedWindow({ limit: 2, calendar: 'day' })), 'calendar');
    // The calendar first, as Python names it: a limit whose product with the
    // nominal 30 days is past 2^51 is still a calendar limit, refused as one.
    refuse(() => new RedisLimiter(client, new rk.SlidingWindowCounter({ limit: 1e6, calendar: 'month' })), 'calendar');
    refuse(() => new RedisPolicy(client, { limits: [{ name: 'm', limiter: new rk.SlidingWindowCounter({ limit: 1e6, calendar: 'month' }) }] }), 'calendar');
    refuse(() => new RedisLimiter(client, new rk.TokenBucket({ capacity: 2, refillTokens: 1, refillPeriodMs: 10, refill: 'interval' })), 'refill');
    refuse(() => new RedisLimiter(client, new rk.TokenBucket({ capacity: 2, refillTokens: 1, refillPeriodMs: 10, initialTokens: 0 })), 'initialTokens');
    refuse(() => new RedisLimiter(client, new rk.Gcra({ burst: 2, emissionIntervalMs: 0.0005 })), 'emissionIntervalMs');
    refuse(() => new RedisLimiter(client, new rk.SlidingWindowCounter({ limit: 1e6, windowMs: 86_400_000 * 30 })), 'limit');
    refuse(() => new RedisLimiter(client, {}), 'limiter', TypeError);
    refuse(() => new RedisLimiter({}, new rk.Gcra({ burst: 1, emissionIntervalMs: 1 })), 'client', TypeError);
    refuse(() => new RedisPolicy(client, { limits: [{ name: 'd', rate: '1/day', algorithm: 'fixed_window', calendar: 'day' }] }), 'calendar');
    refuse(() => new RedisPolicy(client, '1/second', { algorithm: 'leaky_bucket' }), 'algorithm');
    refuse(() => new RedisPolicy(client, { limits: [{ name: 'q', rate: '1/second', algorithm: 'leaky_bucket' }] }), 'algorithm');
    // A string naming no fallback is a bad value, as `eviction: 'lru'` is (and as in Python); another type, a bad type.
    for (const Store of [RedisLimiter, RedisPolicy]) {
      const target = Store === RedisLimiter ? new rk.Gcra({ burst: 1, emissionIntervalMs: 1 }) : '1/second';
      assert.throws(() => new Store(client, target, { onError: 'maybe' }), { name: 'RangeError', code: 'invalid_value', message: /^`onError` must be 'open', 'closed' or .*, not "maybe"$/ });
      assert.throws(() => new Store(client, target, { onError: 5 }), { name: 'TypeError', code: 'invalid_type', message: /^`onError` must be / });
    }
    refuse(() => new RedisPolicy(client, '1/second', { prefix: 'app{x}:' }), 'prefix');
    // A fraction of a microsecond, however long the duration (Python refuses the same).
    refuse(() => new RedisLimiter(client, new rk.FixedWindow({ limit: 2, windowMs: 1000.0005 })), 'windowMs');
    new RedisLimiter(client, new rk.FixedWindow({ limit: 2, windowMs: 1.1 })); // 1100 µs, whatever the float's rounding
    // A fallback decides the store's own target: a key, or a request.
    const gcra = () => new rk.Gcra({ burst: 1, emissionIntervalMs: 1 });
    refuse(() => new RedisLimiter(client, gcra(), { onError: new rk.Policy('1/second') }), 'onError', TypeError);
    refuse(() => new RedisPolicy(client, '1/second', { onError: new rk.KeyedLimiter(gcra()) }), 'onError', TypeError);
    new RedisLimiter(client, gcra(), { onError: new rk.KeyedLimiter(gcra()) });
    new RedisPolicy(client, '1/second', { onError: new rk.Policy('1/second') });
    // A count past 2^51 is as inexact in the script as a time.
    refuse(() => new RedisLimiter(client, new rk.FixedWindow({ limit: 2 ** 52, windowMs: 1 })), 'limit');
    // Bad configurations fail as the in-process Policy fails; good ones pass
    // as there (the core's space includes U+001C to U+001F and U+0085).
    assert.throws(() => new RedisPolicy(client, '1/fortnight'), { code: 'invalid_syntax' });
    assert.throws(() => new RedisPolicy(client, { limits: [] }), { name: 'RangeError', code: 'zero_value' });
    for (const rate of ['10/second\u001c', '\u0085 10 per 2 minutes\u001f']) {
      new rk.Policy(rate);
      assert.deepEqual(new RedisPolicy(client, rate).limits, new rk.Policy(rate).limits);
    }
    const limiter = new RedisLimiter(client, new rk.Gcra({ burst: 2, emissionIntervalMs: 1 }));
    await assert.rejects(limiter.tryAcquire('k', 3), { name: 'RangeError', code: 'cost_exceeds_limit' });
    await assert.rejects(limiter.tryAcquire('k', 1.5), { name: 'RangeError' });
    await assert.rejects(limiter.tryAcquire({}, 1), { name: 'TypeError' });
    await assert.rejects(limiter.refund('k', 1, 'x'), (error) => error instanceof TypeError && error.message.startsWith('`takenAtMs`'));
    await assert.rejects(new RedisPolicy(client, '1/second', { by: ['user'] }).tryAcquire({}), { name: 'RangeError', message: /request/ });
  }));

/** The package loaded again (a fresh module registry, require.cache cleared): classes of their own. */
function anotherCopy() {
  const dir = require('node:path').join(__dirname, '../../bindings-node') + require('node:path').sep;
  const kept = Object.keys(require.cache)
    .filter((file) => file.startsWith(dir))
    .map((file) => [file, require.cache[file]]);
  for (const [file] of kept) delete require.cache[file];
  try {
    return require(`${dir}index.js`);
  } finally {
    for (const [file, module] of kept) require.cache[file] = module;
  }
}

test("a Proxy of a limiter, keyed limiter or policy, one inheriting from it, or another copy's, is refused by name, as in-process", async () => {
  // `instanceof` took a Proxy (a reactive wrapper) and an object inheriting
  // from one: its getters then threw an uncoded TypeError (a private field
  // read through `this`), or, as onError, its first fallback did.
  const down = { sendCommand: () => Promise.reject(new Error('connect ECONNREFUSED')) };
  const gcra = new rk.Gcra({ burst: 2, emissionIntervalMs: 10 });
  const keyed = new rk.KeyedLimiter(gcra);
  const policy = new rk.Policy('5/second');
  const other = anotherCopy();
  assert.notEqual(other.Gcra, rk.Gcra);
  const refused = (make, name) =>
    assert.throws(make, (e) => e instanceof TypeError && e.code === 'invalid_type' && e.message.startsWith(`\`${name}\` must be`), `${name}: ${make}`);
  const wrapped = (value) => [new Proxy(value, {}), Object.create(value)];
  for (const fake of [...wrapped(gcra), new other.Gcra({ burst: 2, emissionIntervalMs: 10 })]) {
    refused(() => new RedisLimiter(down, fake), 'limiter');
    refused(() => new RedisLimiter(down, gcra, { onError: fake }), 'onError');
    refused(() => new RedisPolicy(down, '5/second', { onError: fake }), 'onError');
    refused(() => new RedisPolicy(down, { limits: [{ name: 'a', limiter: fake }] }), 'limits[0].limiter');
  }
  for (const fake of [...wrapped(keyed), new other.KeyedLimiter(new other.Gcra({ burst: 2, emissionIntervalMs: 10 }))]) {
    refused(() => new RedisLimiter(down, gcra, { onError: fake }), 'onError');
    refused(() => new RedisPolicy(down, { limits: [{ name: 'a', limiter: fake }] }), 'limits[0].limiter');
  }
  for (const fake of [...wrapped(policy), new other.Policy('5/second')]) refused(() => new RedisPolicy(down, '5/second', { onError: fake }), 'onError');
  // A revoked Proxy, whose every trap throws, is no limiter either.
  const { proxy: revoked, revoke } = Proxy.revocable(gcra, {});
  revoke();
  refused(() => new RedisLimiter(down, revoked), 'limiter');
  refused(() => new RedisLimiter(down, gcra, { onError: revoked }), 'onError');
  // The classes themselves, and a subclass's instances, still decide while Redis is down.
  class Mine extends rk.Gcra {}
  const mine = new Mine({ burst: 2, emissionIntervalMs: 10, clock: () => 0 });
  assert.equal((await new RedisLimiter(down, mine, { onError: keyed }).tryAcquire('k')).remaining, 1);
  assert.equal((await new RedisLimiter(down, gcra, { onError: mine }).tryAcquire('k')).remaining, 1);
  assert.equal((await new RedisPolicy(down, { limits: [{ name: 'a', limiter: keyed }] }, { onError: policy }).tryAcquire({})).remaining, 4);
});

test('a method or getter of RedisLimiter or RedisPolicy called detached, or on another object, fails naming `this`', async () => {
  // Reading a private field of such a `this` threw (or rejected with) V8's
  // uncoded TypeError, or another for `this._keys` of undefined; so did
  // `_keys` itself, which every instance exposes as the others.
  const down = { sendCommand: () => Promise.reject(new Error('connect ECONNREFUSED')) };
  const limiter = new RedisLimiter(down, new rk.Gcra({ burst: 2, emissionIntervalMs: 10 }));
  const policy = new RedisPolicy(down, '5/second');
  const shared = Object.getPrototypeOf(RedisLimiter.prototype);
  let checked = 0;
  for (const [instance, kind, other] of [[limiter, 'a RedisLimiter', policy], [policy, 'a RedisPolicy', limiter]]) {
    for (let proto = Object.getPrototypeOf(instance); proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
      for (const key of Reflect.ownKeys(proto)) {
        // The custom inspection shows any `this` (console.log must not throw): tested below.
        if (key === 'constructor' || key === Symbol.for('nodejs.util.inspect.custom')) continue;
        const { value, get } = Object.getOwnPropertyDescriptor(proto, key);
        const expected = `\`this\` must be ${proto === shared ? 'a RedisLimiter or a RedisPolicy' : kind}`;
        for (const self of [undefined, {}, new Proxy(instance, {}), Object.create(instance), proto === shared ? new rk.Gcra({ burst: 1, emissionIntervalMs: 1 }) : other]) {
          // Through an async function: the shared methods reject (each returns a promise), getters and headers throw.
          await assert.rejects(
            async () => (value ?? get).call(self, 'k'),
            (e) => e instanceof TypeError && e.code === 'invalid_type' && e.message === expected,
            `${kind}: ${String(key)}`,
          );
          checked++;
        }
      }
    }
  }
  assert.ok(checked > 60, `only ${checked} calls checked`);
  assert.equal((await limiter.tryAcquire('k')).fromStore, false);
});

test('decisions carry the in-process headers; peek consumes nothing; batches decide in order', () =>
  withClient('node-redis', async (client) => {
    const local = new rk.KeyedLimiter(new rk.TokenBucket({ capacity: 3, refillTokens: 1, refillPeriodMs: 1000, name: 'api' }));
    const remote = new RedisLimiter(client, new rk.TokenBucket({ capacity: 3, refillTokens: 1, refillPeriodMs: 1000, name: 'api' }), { prefix: prefix('headers') });
    const now = T0;
    const peeked = await remote.peek('u', 2, now);
    assert.equal(peeked.allowed, true);
    assert.equal(peeked.remaining, 1);
    const batch = await remote.tryAcquireBatch('u', [2, 2, 1], now);
    const expected = local.tryAcquireBatch('u', [2, 2, 1], now);
    assert.deepEqual(batch.map(({ fromStore, ...d }) => d), expected);
    assert.deepEqual(remote.headers(batch[1]), local.headers(expected[1]));
    assert.ok(remote.headers(batch[1])['Retry-After']);
    assert.equal(remote.name, 'api');
    assert.equal(remote.limit, 3);
    assert.equal(remote.algorithm, 'token_bucket');
  }));

for (const library of Object.keys(CLIENTS)) {
  test(`${library}: reset puts a key back to fresh in Redis and in a KeyedLimiter onError, and leaves the others`, () =>
    withClient(library, async (client) => {
      const fallback = new rk.KeyedLimiter(new rk.Gcra({ burst: 1, emissionIntervalMs: 60_000 }));
      const limiter = new RedisLimiter(client, new rk.Gcra({ burst: 2, emissionIntervalMs: 60_000 }), { prefix: prefix('reset'), onError: fallback });
      assert.equal(await limiter.reset('alice'), false, 'never seen: Redis holds nothing');
      for (const key of ['alice', 'bob']) {
        await limiter.tryAcquire(key, 2, T0);
        assert.equal((await limiter.peek(key, 1, T0)).allowed, false);
      }
      fallback.tryAcquire('alice');
      assert.equal(await limiter.reset(Buffer.from('alice')), true, "its bytes: the same key");
      const fresh = await limiter.peek('alice', 2, T0);
      assert.deepEqual([fresh.allowed, fresh.remaining, fresh.fromStore], [true, 0, true]);
      assert.equal((await limiter.peek('bob', 1, T0)).allowed, false, 'another key keeps what it used');
      assert.equal(fallback.peek('alice').allowed, true, 'the fallback forgot the key too');
      await assert.rejects(limiter.reset(1.5), { name: 'RangeError', code: 'invalid_value' });
    }));
}

for (const library of Object.keys(CLIENTS)) {
  test(`${library}: a policy's reset clears the limits keyed by fields the request gives, in Redis and in a Policy onError`, () =>
    withClient(library, async (client) => {
      const oneAMinute = () => new rk.Gcra({ burst: 1, emissionIntervalMs: 60_000 });
      const fallback = new rk.Policy({ limits: [{ name: 'per-user', by: ['user'], limiter: oneAMinute() }] });
      const limits = [
        { name: 'per-user', by: ['user'], limiter: oneAMinute() },
        { name: 'per-ip', by: ['ip'], limiter: oneAMinute() },
        { name: 'per-user-ip', by: ['user', 'ip'], limiter: oneAMinute() },
        { name: 'global', limiter: new rk.FixedWindow({ limit: 10, windowMs: 60_000 }) },
      ];
      const policy = new RedisPolicy(client, { limits }, { prefix: prefix('policy-reset'), onError: fallback });
      const attempt = { user: 'alice', ip: '192.0.2.1', path: '/login' };
      assert.equal((await policy.tryAcquire(attempt, 1, T0)).allowed, true);
      fallback.tryAcquire({ user: 'alice' });

      assert.equal(await policy.reset({ user: 'alice' }), 1, "the user's limit only: the others need the IP");
      let peeked = await policy.peek(attempt, 1, T0);
      assert.deepEqual([peeked.deniedBy, peeked.limits[0].remaining], ['per-ip', 1]);
      assert.equal(fallback.peek({ user: 'alice' }).allowed, true, 'the fallback forgot the user too');
      assert.equal(await policy.reset({ user: Buffer.from('alice') }), 0, 'held no more (its bytes: the same key)');
      assert.equal(await policy.reset(attempt), 2, 'every keyed limit the request was counted in');
      peeked = await policy.peek(attempt, 1, T0);
      assert.deepEqual([peeked.allowed, peeked.limits[3].remaining], [true, 8], 'the global window keeps its count (1 counted, 1 asked)');
      for (const nothing of [{}, undefined, { usr: 'alice' }, { path: '/login' }]) {
        await assert.rejects(policy.reset(nothing), { name: 'RangeError', code: 'invalid_value', message: /resets none/ });
      }
      await assert.rejects(policy.reset('alice'), { name: 'TypeError', code: 'invalid_type' });
      assert.equal((await policy.tryAcquire(attempt, 1, T0)).allowed, true);
      assert.equal(await policy.reset({ user: 'bob', ip: '192.0.2.2' }), 0, "another user's: alice's kept");
      assert.equal((await policy.peek(attempt, 1, T0)).deniedBy, 'per-user');
    }));
}

test('reset rejects with a TimeoutError when Redis does not answer within commandTimeoutMs', () =>
  withClient('ioredis', async (client) => {
    const admin = await CLIENTS.ioredis();
    try {
      const limiter = new RedisLimiter(client, new rk.Gcra({ burst: 1, emissionIntervalMs: 1000 }), { prefix: prefix('reset-late'), commandTimeoutMs: 50 });
      await limiter.tryAcquire('k');
      // Paused until the reset has timed out (a stall of the machine outlasting
      // a pause of 300 ms let the reset be answered).
      await raw(admin, 'CLIENT', 'PAUSE', '60000', 'WRITE');
      await assert.rejects(limiter.reset('k'), { name: 'TimeoutError' });
    } finally {
      await raw(admin, 'CLIENT', 'UNPAUSE');
      await close(admin);
    }
  }));

test('acquires sharing one signal listen to it once at a time, each aborting', () =>
  withClient('ioredis', async (client) => {
    // A listener each: Node warned (MaxListenersExceededWarning) past ten.
    const limiter = new RedisLimiter(client, new rk.Gcra({ burst: 1, emissionIntervalMs: 60_000 }), { prefix: prefix('shared-signal') });
    await limiter.tryAcquire('k');
    const { controller, signal, most } = countingSignal();
    const waiting = Array.from({ length: 20 }, () => limiter.acquire('k', 1, { signal }).catch((error) => error.name));
    // Every booking's round trip done: each waits for its slot, a minute or more away.
    await until(async () => (await limiter.peek('k')).retryAfterMs > 20 * 60_000);
    controller.abort();
    assert.deepEqual(new Set(await Promise.all(waiting)), new Set(['AbortError']));
    assert.equal(most(), 1);
  }));

test('acquire waits for its turn, honours timeoutMs and AbortSignal', () =>
  withClient('ioredis', async (client) => {
    const limiter = new RedisLimiter(client, new rk.Gcra({ burst: 1, emissionIntervalMs: 150 }), { prefix: prefix('acquire') });
    const started = performance.now();
    await limiter.acquire('k');
    await limiter.acquire('k');
    const waited = performance.now() - started;
    assert.ok(waited >= 100, `waited ${waited} ms`);
    // The timeout and the abort on a key whose next unit is a minute away
    // (150 ms on the server's clock: a stall of the machine let it come,
    // and the acquire was admitted).
    const minute = new RedisLimiter(client, new rk.Gcra({ burst: 1, emissionIntervalMs: 60_000 }), { prefix: prefix('acquire-abort') });
    await minute.tryAcquire('w');
    await assert.rejects(minute.acquire('w', 1, { timeoutMs: 10 }), (e) => e.name === 'TimeoutError' && e.retryAfterMs > 10);
    const controller = new AbortController();
    const pending = minute.acquire('w', 1, { signal: controller.signal });
    setTimeout(() => controller.abort(new Error('stop')), 20);
    await assert.rejects(pending, { message: 'stop' });
    // Aborted while its booking's round trip is in flight: rejects, and gives the slot back.
    await minute.tryAcquire('k');
    const slot = (await minute.reserve('k', 1, 120_000)).atMs;
    await minute.refund('k', 1, slot);
    const early = new AbortController();
    const inFlight = minute.acquire('k', 1, { signal: early.signal });
    early.abort(new Error('early'));
    await assert.rejects(inFlight, { message: 'early' });
    // The rejection comes at the abort; the booking goes back once its reply
    // comes (then the next unit waits a minute, not two).
    await until(async () => (await minute.peek('k')).retryAfterMs <= 60_000);
    assert.equal((await minute.reserve('k', 1, 120_000)).atMs, slot);
    // ... and rejects with the abort's reason when the booking was refused too.
    const late = new AbortController();
    const refusedInFlight = minute.acquire('k', 1, { signal: late.signal, timeoutMs: 0 });
    late.abort(new Error('late'));
    await assert.rejects(refusedInFlight, { message: 'late' });
    // reserve books the next slot; refund at its atMs gives it back (caller
    // time: exact slots, however long a call takes).
    const booking = await limiter.reserve('r', 1, 1000, T0);
    assert.deepEqual([booking.ok, booking.waitMs, booking.atMs, booking.decision, booking.fromStore], [true, 0, T0, null, true]);
    const next = await limiter.reserve('r', 1, 1000, T0);
    assert.deepEqual([next.ok, next.waitMs, next.atMs], [true, 150, T0 + 150]);
    const refused = await limiter.reserve('r', 1, 10, T0);
    assert.deepEqual([refused.ok, refused.decision.retryAfterMs], [false, 300]);
    await limiter.refund('r', 1, next.atMs);
    const again = await limiter.reserve('r', 1, 1000, T0);
    assert.deepEqual([again.ok, again.atMs], [true, T0 + 150]);
    // (A minute: a second on the server's clock could pass in a stall.)
    const policy = new RedisPolicy(client, '1/minute', { prefix: prefix('acquire-policy') });
    await policy.acquire();
    await assert.rejects(policy.acquire(undefined, 1, { timeoutMs: 50 }), { name: 'TimeoutError' });
  }));

for (const library of Object.keys(CLIENTS)) {
  test(`${library}: what Redis decides after commandTimeoutMs, once onError answered, is given back`, () =>
    withClient(library, async (client) => {
      const admin = await CLIENTS[library]();
      try {
        const options = { prefix: prefix('late'), onError: 'open', commandTimeoutMs: 50 };
        const limiter = new RedisLimiter(client, new rk.FixedWindow({ limit: 5, windowMs: HOUR }), options);
        const policy = new RedisPolicy(client, '5/hour', { ...options, algorithm: 'fixed_window' });
        await loadScript(client);
        // The server holds every script until the pause ends, once onError
        // has answered them all; then they run, late. (A pause of 400 ms that
        // a stall of the machine outlasted before all were sent let them be
        // answered.)
        await raw(admin, 'CLIENT', 'PAUSE', '60000', 'WRITE');
        const [taken, booked, batch, request] = await Promise.all([
          limiter.tryAcquire('taken', 2),
          limiter.reserve('booked', 3, HOUR),
          limiter.tryAcquireBatch('batch', [1, 3, 2]),
          policy.tryAcquire(undefined, 4),
        ]);
        await raw(admin, 'CLIENT', 'UNPAUSE');
        assert.deepEqual(
          [taken.fromStore, booked.ok, booked.fromStore, batch.map((d) => d.fromStore), request.fromStore],
          [false, true, false, [false, false, false], false],
        );
        // Each late script's booking is followed by its give-back, on the same
        // connection, before any peek sent after it: the limits end up whole.
        let left = [];
        await until(
          async () => {
            left = await Promise.all([limiter.peek('taken', 0), limiter.peek('booked', 0), limiter.peek('batch', 0), policy.peek(undefined, 0)]);
            return left.every((d) => d.fromStore && d.remaining === 5);
          },
          10_000,
          () => `not given back: ${JSON.stringify(left.map((d) => [d.fromStore, d.remaining]))}`,
        );
      } finally {
        await raw(admin, 'CLIENT', 'UNPAUSE');
        await close(admin);
      }
    }));

  test(`${library}: a late reply whose give-back cannot be made, and a late NOSCRIPT, end there`, () =>
    withClient(library, async (client) => {
      const admin = await CLIENTS[library]();
      const unhandled = [];
      const onUnhandled = (reason) => unhandled.push(reason);
      process.on('unhandledRejection', onUnhandled);
      try {
        const p = prefix('late-end');
        const window = () => new rk.FixedWindow({ limit: 5, windowMs: HOUR });
        const observer = new RedisLimiter(admin, window(), { prefix: p });
        // A clock that throws by the time the late reply comes: the give-back
        // is dropped, and nothing rejects unhandled.
        let broken = false;
        const clock = () => {
          if (broken) throw new Error('the clock broke');
          return Date.now();
        };
        const limiter = new RedisLimiter(client, window(), { prefix: p, onError: 'open', commandTimeoutMs: 50, clock });
        await loadScript(client);
        // Paused until onError has answered (a stall outlasting a pause of
        // 300 ms let the call be answered), then the reply comes, late.
        await raw(admin, 'CLIENT', 'PAUSE', '60000', 'WRITE');
        assert.equal((await limiter.tryAcquire('k', 2)).fromStore, false);
        broken = true;
        await raw(admin, 'CLIENT', 'UNPAUSE');
        await until(async () => (await observer.peek('k', 0)).remaining === 3);
        // A late NOSCRIPT: no SCRIPT LOAD and no new decision follow it.
        const sent = [];
        const spied = new RedisLimiter(spy(client, (name) => sent.push(name)), window(), { prefix: p, onError: 'open', commandTimeoutMs: 50 });
        await raw(admin, 'SCRIPT', 'FLUSH');
        await raw(admin, 'CLIENT', 'PAUSE', '60000', 'WRITE');
        assert.equal((await spied.tryAcquire('n', 2)).fromStore, false);
        await raw(admin, 'CLIENT', 'UNPAUSE');
        await until(async () => (await observer.peek('n', 0)).fromStore);
        await sleep(100);
        assert.deepEqual(sent, ['EVALSHA']);
        assert.equal((await observer.peek('n', 0)).remaining, 5);
        assert.deepEqual(unhandled, []);
      } finally {
        process.off('unhandledRejection', onUnhandled);
        await raw(admin, 'CLIENT', 'UNPAUSE');
        await close(admin);
      }
    }));

  test(`${library}: a late tryAcquire gives its units back only while it is the key's latest (never a slot booked behind it)`, () =>
    withClient(library, async (client) => {
      const other = await CLIENTS[library]();
      try {
        const p = prefix('late-latest');
        const gcra = () => new rk.Gcra({ burst: 1, emissionIntervalMs: 1000 });
        const held = holdingReplies(client, 'acquire');
        const mine = new RedisLimiter(held.client, gcra(), { prefix: p, onError: 'open', commandTimeoutMs: 50, clock: () => T0 });
        const theirs = new RedisLimiter(other, gcra(), { prefix: p, clock: () => T0 });
        await loadScript(client);
        // Redis takes the unit; its reply is late, and onError answers.
        assert.equal((await mine.tryAcquire('k')).fromStore, false);
        // Redis ran it (sent on another connection, it could come after what
        // `theirs` sends, had Redis stalled past the timeout).
        await until(async () => (await theirs.peek('k', 0)).remaining === 0);
        // Another process books behind it, then the late reply comes, and its give-back.
        const behind = await theirs.reserve('k', 1, HOUR);
        assert.equal(behind.atMs, T0 + 1000);
        held.release();
        await until(() => held.refunds.length === 1);
        await held.refunds[0];
        // Given back from the middle of the line (a plain refund), the unit
        // went to the next caller at `behind`'s slot: two units at once from
        // a burst of one. Its slot goes unused instead.
        const after = await theirs.reserve('k', 1, HOUR);
        assert.equal(after.atMs - behind.atMs, 1000);
        // The latest, it is given back: the next caller takes its slot, now.
        const alone = holdingReplies(client, 'acquire');
        const single = new RedisLimiter(alone.client, gcra(), { prefix: `${p}alone:`, onError: 'open', commandTimeoutMs: 50, clock: () => T0 });
        assert.equal((await single.tryAcquire('k')).fromStore, false);
        alone.release();
        await until(() => alone.refunds.length === 1);
        await alone.refunds[0];
        assert.equal((await new RedisLimiter(other, gcra(), { prefix: `${p}alone:`, clock: () => T0 }).tryAcquire('k')).allowed, true);
      } finally {
        await close(other);
      }
    }));

  test(`${library}: callers queued behind a hot key's round trip that timed out are decided by onError at once`, () =>
    withClient(library, async (client) => {
      const admin = await CLIENTS[library]();
      const sent = [];
      const window = new rk.FixedWindow({ limit: 100, windowMs: HOUR });
      const limiter = new RedisLimiter(spy(client, (name) => sent.push(name)), window, { prefix: prefix('queued'), onError: 'open', commandTimeoutMs: 100 });
      try {
        await loadScript(client);
        // A server that does not answer (writes paused): the first round
        // trip times out; the 63 callers that queued behind it are not sent
        // as a second round to time out in turn (twice commandTimeoutMs).
        // Long: ended once they are answered.
        await raw(admin, 'CLIENT', 'PAUSE', '60000', 'WRITE');
        const ds = await Promise.all(Array.from({ length: 64 }, () => limiter.tryAcquire('hot')));
        assert.ok(ds.every((d) => d.allowed && !d.fromStore));
        assert.deepEqual(sent, ['EVALSHA']);
        // A fallback whose limit is below a queued caller's cost denies that caller alone, as 'closed' does.
        const small = new RedisLimiter(client, window, { prefix: prefix('queued'), onError: new rk.Gcra({ burst: 2, emissionIntervalMs: 1000 }), commandTimeoutMs: 100 });
        const [first, over, last] = await Promise.all([small.tryAcquire('hot', 1), small.tryAcquire('hot', 3), small.tryAcquire('hot', 1)]);
        assert.deepEqual([first, over, last].map((d) => [d.allowed, d.fromStore]), [[true, false], [false, false], [true, false]]);
        assert.equal(over.retryAfterMs, 1000);
      } finally {
        await raw(admin, 'CLIENT', 'UNPAUSE');
        await close(admin);
      }
    }));

  test(`${library}: the script is loaded again after SCRIPT FLUSH (NOSCRIPT)`, () =>
    withClient(library, async (client) => {
      const limiter = new RedisLimiter(client, new rk.FixedWindow({ limit: 2, windowMs: HOUR }), { prefix: prefix('noscript') });
      assert.equal((await limiter.tryAcquire('k')).fromStore, true);
      await raw(client, 'SCRIPT', 'FLUSH');
      const d = await limiter.tryAcquire('k');
      assert.equal(d.fromStore, true);
      assert.equal(d.remaining, 0);
      assert.deepEqual((await raw(client, 'SCRIPT', 'EXISTS', rkRedis.REDIS_SCRIPT_SHA)).map(Number), [1]);
    }));

  test(`${library}: a SCRIPT FLUSH between the reload and its EVALSHA sends the script itself; a user without EVAL has onError answer, as in Python`, () =>
    withClient(library, async (admin) => {
      const p = prefix('flushed-again');
      const user = `rk-no-eval-${process.pid}`;
      const protocol = require('node:fs').readFileSync(require('node:path').join(__dirname, '../../core/redis/PROTOCOL.md'), 'utf8');
      const listed = /^ {4}(\+evalsha .*)$/m.exec(protocol)[1].split(' ');
      await raw(admin, 'ACL', 'SETUSER', user, 'reset', 'on', '>secret', `~${p}*`, ...listed.filter((c) => c !== '+eval'));
      // No ready check (ioredis runs INFO, which the user may not); node-redis reads the user from the URL.
      const url = new URL(REDIS_URL);
      url.username = user;
      url.password = 'secret';
      const noEval = await CLIENTS[library]({ username: user, password: 'secret', enableReadyCheck: false, url: url.href });
      try {
        for (const [client, allowed] of [[await CLIENTS[library](), true], [noEval, false]]) {
          const sent = [];
          // Each SCRIPT LOAD followed at once by another process's SCRIPT FLUSH.
          const flushing = hooked(client, async (words, send) => {
            sent.push(words[0]);
            const reply = await send();
            if (words[0] === 'SCRIPT') await raw(admin, 'SCRIPT', 'FLUSH');
            return reply;
          });
          await raw(admin, 'SCRIPT', 'FLUSH');
          const limiter = new RedisLimiter(flushing, new rk.FixedWindow({ limit: 5, windowMs: HOUR }), { prefix: `${p}${allowed}:`, onError: 'open' });
          const d = await limiter.tryAcquire('k');
          assert.deepEqual(sent, ['EVALSHA', 'SCRIPT', 'EVALSHA', 'EVAL']);
          // EVAL decided; refused to the user (NOPERM), the NOSCRIPT stands: an outage onError answers, as Python's client answers it.
          assert.deepEqual([d.allowed, d.fromStore, d.remaining], allowed ? [true, true, 4] : [true, false, 5]);
          if (allowed) await close(client);
        }
      } finally {
        await close(noEval);
        await raw(admin, 'ACL', 'DELUSER', user);
      }
    }));

  test(`${library}: a script reload that ends after onError answered sends no decision after it`, () =>
    withClient(library, async (client) => {
      const admin = await CLIENTS[library]();
      try {
        const p = prefix('late-reload');
        // SCRIPT LOAD runs at once; its reply comes after commandTimeoutMs.
        const { client: late, sent, release } = holdingScriptLoad(client);
        const gcra = () => new rk.Gcra({ burst: 1, emissionIntervalMs: HOUR });
        const limiter = new RedisLimiter(late, gcra(), { prefix: p, onError: 'open', commandTimeoutMs: 50 });
        await raw(admin, 'SCRIPT', 'FLUSH');
        assert.equal((await limiter.tryAcquire('k')).fromStore, false);
        release();
        // What follows the reload's reply runs in the microtasks after it:
        // sent by now. The limiter's next call goes on the same connection,
        // after it, and before any reply to it can come back.
        await new Promise((resolve) => setImmediate(resolve));
        assert.equal((await limiter.peek('k', 0)).remaining, 1);
        // No EVALSHA of a decision onError already made for nobody to wait
        // for (taking the key's one unit until its give-back came).
        assert.deepEqual(sent, ['EVALSHA', 'SCRIPT', 'EVALSHA']);
      } finally {
        await close(admin);
      }
    }));

  test(`${library}: an acquire aborted while the script is loaded again sends no booking after the reload`, () =>
    withClient(library, async (client) => {
      const admin = await CLIENTS[library]();
      try {
        const { client: held, sent, release } = holdingScriptLoad(client);
        const fallback = new rk.Gcra({ burst: 1, emissionIntervalMs: HOUR });
        const limiter = new RedisLimiter(held, new rk.Gcra({ burst: 1, emissionIntervalMs: HOUR }), { prefix: prefix('abort-reload'), onError: fallback });
        await raw(admin, 'SCRIPT', 'FLUSH');
        const controller = new AbortController();
        const pending = limiter.acquire('k', 1, { signal: controller.signal });
        await until(() => sent.length === 2);
        controller.abort(new Error('stop'));
        await assert.rejects(pending, { message: 'stop' });
        release();
        // As above: whatever follows the reload is sent before the peek.
        await new Promise((resolve) => setImmediate(resolve));
        assert.equal((await limiter.peek('k', 0)).remaining, 1);
        // Neither a booking nobody waits for (nor its give-back), nor the fallback's.
        assert.deepEqual(sent, ['EVALSHA', 'SCRIPT', 'EVALSHA']);
        assert.equal(fallback.peek(0).remaining, 1);
      } finally {
        await close(admin);
      }
    }));

  test(`${library}: 256 concurrent callers on one hot key admit exactly the bound, in few round trips`, () =>
    withClient(library, async (client) => {
      let calls = 0;
      // Count the EVALSHA round trips through the client's own command entry point.
      const spied = spy(client, (name) => {
        if (name === 'EVALSHA') calls += 1;
      });
      for (const [batching, limit] of [[true, 100], [false, 100], [true, 1]]) {
        calls = 0;
        const limiter = new RedisLimiter(spied, new rk.FixedWindow({ limit, windowMs: HOUR }), { prefix: prefix('hot'), batching });
        const costs = Array.from({ length: 256 }, (_, i) => (i % 7 === 0 ? 0 : 1));
        const decisions = await Promise.all(costs.map((cost) => limiter.tryAcquire('hot', cost)));
        const admitted = decisions.reduce((sum, d, i) => sum + (d.allowed ? costs[i] : 0), 0);
        assert.equal(admitted, limit, `batching ${batching}`);
        assert.ok(decisions.every((d) => d.fromStore));
        if (batching) assert.ok(calls <= 3, `${calls} round trips`);
        else assert.equal(calls, 256);
        // Each caller got its own decision, in order: remaining counts down.
        const remaining = decisions.filter((d, i) => d.allowed && costs[i] === 1).map((d) => d.remaining);
        assert.deepEqual(remaining, [...remaining].sort((a, b) => b - a));
      }
      // Callers that call again as soon as they are answered join the next
      // batch together: 64 callers, 4 calls each, go in 1 + 4 round trips
      // (the first alone, then 63, then all 64 three times), not one lone
      // call every other round trip.
      calls = 0;
      const limiter = new RedisLimiter(spied, new rk.FixedWindow({ limit: 1000, windowMs: HOUR }), { prefix: prefix('hot-loop') });
      const caller = async () => {
        for (let i = 0; i < 4; i++) assert.equal((await limiter.tryAcquire('hot')).allowed, true);
      };
      await Promise.all(Array.from({ length: 64 }, caller));
      assert.equal(calls, 5);
    }));
}

test('RedisLimiter keys are the Python client\'s: prefix{len:key}:name:len:key', () =>
  withClient('ioredis', async (client) => {
    const p = prefix('keys');
    const limiter = new RedisLimiter(client, new rk.FixedWindow({ limit: 2, windowMs: HOUR }), { prefix: p });
    await limiter.tryAcquire('é€', 1);
    await limiter.tryAcquire(42, 1);
    await limiter.tryAcquire(1e21, 1); // all its digits, as Python spells the int
    // A named limiter's name is in its keys, as the Python client's default;
    // an unnamed one's configuration (algorithm and script arguments).
    await new RedisLimiter(client, new rk.FixedWindow({ limit: 2, windowMs: HOUR, name: 'api' }), { prefix: p }).tryAcquire('k', 1);
    const keys = (await client.keys(`${p}*`)).sort();
    const big = '1000000000000000000000';
    const config = '25:fixed_window/2/3600000000';
    assert.deepEqual(keys, [`${p}{2:42}:${config}:2:42`, `${p}{5:é€}:${config}:5:é€`, `${p}{1:k}:3:api:1:k`, `${p}{22:${big}}:${config}:22:${big}`].sort());
    // A number that is not whole is no key (it was the key '1.5'), as in-process.
    for (const bad of [1.5, NaN, Infinity]) {
      await assert.rejects(limiter.tryAcquire(bad, 1), (e) => e instanceof RangeError && e.code === 'invalid_value' && e.message.includes('`key`'));
    }
    assert.equal((await client.keys(`${p}*`)).length, 4, 'nothing written');
  }));

test('a key, a request value or a prefix with a lone surrogate is refused by name, as in-process and in Python, writing nothing', () =>
  withClient('ioredis', async (client) => {
    // The client wrote it as UTF-8, with U+FFFD in its place: keys '\ud800'
    // and '\udc00' were one key, sharing one limit.
    const p = prefix('surrogates');
    const text = (name) => `\`${name}\` must be valid Unicode text (no lone surrogates)`;
    const refused = (name) => (e) => e instanceof RangeError && e.code === 'invalid_value' && e.message === text(name);
    const limiter = new RedisLimiter(client, new rk.FixedWindow({ limit: 1, windowMs: HOUR }), { prefix: p });
    for (const key of ['\ud800', 'a'.repeat(100) + '\udfff', '\ude00\ud83d']) {
      await assert.rejects(limiter.tryAcquire(key, 1), refused('key'));
      await assert.rejects(limiter.peek(key, 1), refused('key'));
      await assert.rejects(limiter.tryAcquireBatch(key, [1]), refused('key'));
      await assert.rejects(limiter.reserve(key, 1), refused('key'));
      await assert.rejects(limiter.refund(key, 1), refused('key'));
      await assert.rejects(limiter.acquire(key, 1), refused('key'));
    }
    const policy = new RedisPolicy(client, '1/hour', { by: ['user'], prefix: p });
    await assert.rejects(policy.tryAcquire({ user: 'x\ud800' }, 1), refused('request.user'));
    assert.throws(() => new RedisPolicy(client, '1/hour', { prefix: `${p}\ud800` }), refused('prefix'));
    assert.deepEqual(await client.keys(`${p}*`), [], 'nothing written');
    // U+FFFD itself, and a pair, are keys of their own.
    assert.equal((await limiter.tryAcquire('\ufffd', 1)).allowed, true);
    assert.equal((await limiter.tryAcquire('\ud83d\ude00', 1)).allowed, true);
    assert.equal((await policy.tryAcquire({ user: '\ufffd' }, 1)).allowed, true);
  }));

for (const library of Object.keys(CLIENTS)) {
  test(`${library}: a key or a request value as bytes is the key of its UTF-8 string, and other bytes their own, in every method`, () =>
    withClient(library, async (client) => {
      const p = prefix('bytes');
      const limiter = new RedisLimiter(client, new rk.FixedWindow({ limit: 1, windowMs: HOUR }), { prefix: p, clock: () => T0 });
      const odd = () => new Uint8Array([0xff, 0x00, 0x61]);
      for (const [a, b] of [[Buffer.from('é€'), 'é€'], ['x'.repeat(100), new TextEncoder().encode('x'.repeat(100))], [new Uint8Array(0), ''], [odd(), odd()]]) {
        assert.equal((await limiter.peek(b, 1)).allowed, true);
        assert.equal((await limiter.tryAcquire(a, 1)).allowed, true);
        assert.equal((await limiter.peek(b, 1)).allowed, false, 'one key');
        assert.equal((await limiter.tryAcquire(b, 1)).allowed, false);
        assert.deepEqual((await limiter.tryAcquireBatch(b, [1])).map((d) => d.allowed), [false]);
        assert.equal((await limiter.reserve(b, 1, 0)).ok, false);
        await limiter.refund(b, 1);
        const r = await limiter.reserve(b, 1, 0);
        assert.equal(r.ok, true, 'given back through the other spelling');
        await r.cancel();
        await limiter.acquire(b, 1);
        assert.equal((await limiter.peek(a, 1)).allowed, false, 'cancelled, then taken by acquire');
      }
      // Nor the same as a string read from those bytes otherwise.
      for (const text of ['\u00ff\u0000a', '\ufffd\u0000a']) assert.equal((await limiter.tryAcquire(text, 1)).allowed, true);
      const policy = new RedisPolicy(client, '1/hour', { by: ['user'], prefix: p, clock: () => T0 });
      assert.equal((await policy.tryAcquire({ user: odd() }, 1)).allowed, true);
      assert.equal((await policy.tryAcquire({ user: odd() }, 1)).allowed, false);
      assert.equal((await policy.tryAcquire({ user: Buffer.from('bob') }, 1)).allowed, true);
      assert.equal((await policy.tryAcquire({ user: 'bob' }, 1)).allowed, false);
      // Concurrent calls of one request go as one batch: two users of bytes are two requests.
      const two = new RedisPolicy(client, '1/hour;2/hour', { by: ['user'], prefix: p, clock: () => T0 });
      const users = [[0xff], [0xfe], [0xff], [0xc3]].map((bytes) => ({ user: new Uint8Array(bytes) }));
      assert.deepEqual((await Promise.all(users.map((request) => two.tryAcquire(request)))).map((d) => d.allowed), [true, true, false, true]);
      // Refused as in-process, naming the argument, writing nothing.
      const before = (await raw(client, 'KEYS', `${p}*`)).length;
      const typeError = (name, tail = '') => (e) => e instanceof TypeError && e.code === 'invalid_type' && e.message === `\`${name}\` must be a string, a number or a Uint8Array${tail}`;
      for (const key of [new DataView(new ArrayBuffer(1)), new ArrayBuffer(1), new Int8Array(1), {}]) {
        await assert.rejects(limiter.tryAcquire(key, 1), typeError('key'));
        await assert.rejects(limiter.acquire(key, 1), typeError('key'));
        await assert.rejects(policy.tryAcquire({ user: key }, 1), typeError('request.user'));
      }
      // Every field's value, not only those a limit is keyed by, as an
      // in-process Policy reads them: a request with `plan: undefined` was
      // decided while Redis answered, and refused by an onError Policy once
      // it could not.
      for (const plan of [undefined, null, {}]) {
        for (const call of [(r) => policy.tryAcquire(r, 1), (r) => policy.peek(r, 1), (r) => policy.reset(r)]) {
          await assert.rejects(call({ user: 'bob', plan }), typeError('request.plan'));
        }
        assert.throws(() => rk.Policy.fromRates('1/hour', { by: ['user'] }).tryAcquire({ user: 'bob', plan }), { name: 'TypeError', code: 'invalid_type', message: /^`request\.plan` must be a string, a number or a Uint8Array/ });
      }
      // An array, a Map or a Set is no request (their entries were read as
      // no fields), as in-process and as Python refuses a list; nor is one
      // of another realm (a `vm` context's), nor binary data (a Uint8Array's
      // bytes were read as the fields "0", "1"...), as Python refuses bytes.
      const global = new RedisPolicy(client, '1/hour', { prefix: p, clock: () => T0 });
      const other = (code) => vm.runInNewContext(code);
      const args = function () {
        return arguments;
      };
      const wrongs = [
        [], new Map([['user', 'bob']]), new Set(['bob']), other("new Map([['user', 'bob']])"), other("new Set(['bob'])"),
        new TextEncoder().encode('bob'), Buffer.from('bob'), new Int32Array(1), new ArrayBuffer(1), new DataView(new ArrayBuffer(1)), other('new Uint8Array([98])'),
        // A primitive boxed, or a function's `arguments`: their characters
        // or values were read as the fields "0", "1"...
        new String('bob'), Object('bob'), new Number(1), other("new String('bob')"), args('bob'),
      ];
      for (const wrong of wrongs) {
        for (const call of [(r) => global.tryAcquire(r, 1), (r) => policy.peek(r, 1), (r) => policy.reset(r)]) {
          await assert.rejects(call(wrong), (e) => e instanceof TypeError && e.code === 'invalid_type' && e.message.startsWith('`request` must be an object'));
        }
      }
      assert.equal((await raw(client, 'KEYS', `${p}*`)).length, before, 'nothing written');
    }));
}

test("a key of bytes is written as those bytes, as the Python client writes bytes; a buffer written after is another key", () =>
  withClient('ioredis', async (client) => {
    const p = prefix('bytes-keys');
    const limiter = new RedisLimiter(client, new rk.FixedWindow({ limit: 1, windowMs: HOUR, name: 'w' }), { prefix: p });
    const key = new Uint8Array([0xff, 0x00]);
    assert.equal((await limiter.tryAcquire(key, 1, T0)).allowed, true);
    // The same array, written to between calls: the key of its bytes at each call.
    key[0] = 0xfe;
    assert.equal((await limiter.tryAcquire(key, 1, T0)).allowed, true, 'the new bytes are a new key');
    key[0] = 0xff;
    assert.equal((await limiter.tryAcquire(key, 1, T0)).allowed, false);
    await limiter.tryAcquire(Buffer.from('é'), 1, T0);
    const keys = (await client.keysBuffer(`${p}*`)).map((k) => k.toString('hex')).sort();
    const of = (bytes) => Buffer.concat([Buffer.from(`${p}{2:`), Buffer.from(bytes), Buffer.from('}:1:w:2:'), Buffer.from(bytes)]);
    const expected = [of([0xff, 0]), of([0xfe, 0]), Buffer.from(`${p}{2:é}:1:w:2:é`)];
    assert.deepEqual(keys, expected.map((k) => k.toString('hex')).sort());
  }));

test('a fallback KeyedLimiter decides for the key bytes of the call, though the caller writes to them after', async () => {
  const down = { sendCommand: () => Promise.reject(new Error('The client is closed')) };
  const fallback = new rk.KeyedLimiter(new rk.FixedWindow({ limit: 1, windowMs: HOUR }));
  const limiter = new RedisLimiter(down, new rk.FixedWindow({ limit: 1, windowMs: HOUR }), { onError: fallback });
  const key = new Uint8Array([0xff]);
  const decided = limiter.tryAcquire(key, 1);
  key[0] = 0xfe;
  const d = await decided;
  assert.deepEqual([d.allowed, d.fromStore], [true, false]);
  assert.deepEqual([fallback.peek(new Uint8Array([0xff]), 1).allowed, fallback.peek(new Uint8Array([0xfe]), 1).allowed], [false, true]);
});

test('a fallback Policy of other limits answers each limit by name, and its headers are made', async () => {
  const down = { sendCommand: () => Promise.reject(new Error('connect ECONNREFUSED')) };
  const local = rk.Policy.fromRates('100/minute;10/second', { by: ['user'], clock: () => 5_000 });
  const policy = new RedisPolicy(down, '10/second;100/minute;7/hour', { by: ['user'], onError: local });
  const d = await policy.tryAcquire({ user: 'a' });
  assert.equal(d.fromStore, false);
  assert.deepEqual(d.limits.map((l) => [l.name, l.limit, l.remaining]), [
    ['10/second', 10, 9],
    ['100/minute', 100, 99],
    ['7/hour', 10, 9], // not in the fallback: its whole decision
  ]);
  // It threw: the fallback's two limits for three.
  assert.match(policy.headers(d)['RateLimit-Policy'], /^"10\/second";q=10;w=1, "100\/minute";q=100;w=60/);
});

test("a fallback's booking, cancelled in a later window, goes back to the window it was taken in", async () => {
  // It was given back by a refund at the time of the cancel: cancelled in a
  // later window, it freed a unit of that window, which then let two
  // requests through a limit of one.
  const down = { sendCommand: () => Promise.reject(new Error('connect ECONNREFUSED')) };
  let now = 1000;
  const clock = () => now;
  const window = () => new rk.FixedWindow({ limit: 1, windowMs: 100, clock });
  const policy = new rk.Policy(null, { clock });
  policy.add('w', new rk.FixedWindow({ limit: 1, windowMs: 100 }), { by: ['user'] });
  const stores = [
    [new RedisLimiter(down, new rk.Gcra({ burst: 10, emissionIntervalMs: 100 }), { onError: window() }), 'k'],
    [new RedisLimiter(down, new rk.Gcra({ burst: 10, emissionIntervalMs: 100 }), { onError: new rk.KeyedLimiter(window()) }), 'k'],
    [new RedisPolicy(down, '10/second', { by: ['user'], onError: policy }), { user: 'u' }],
  ];
  for (const [i, [store, target]] of stores.entries()) {
    now += 1000; // a window of its own
    const first = await store.reserve(target, 1, 0);
    assert.deepEqual([first.ok, first.fromStore, first.decision], [true, false, null], `${i}`);
    now += 150; // the next window
    assert.equal((await store.tryAcquire(target)).allowed, true, `${i}`);
    await first.cancel(); // its unit was the window before's
    const denied = await store.tryAcquire(target);
    assert.deepEqual([denied.allowed, denied.fromStore], [false, false], `${i}`);
    // Refused by the fallback: its decision, as before.
    const refused = await store.reserve(target, 1, 0);
    assert.deepEqual([refused.ok, refused.fromStore], [false, false], `${i}`);
    assert.ok(refused.waitMs > 0 && refused.waitMs === refused.decision.retryAfterMs, `${i}`);
  }
});

test('a limit whose name ends like a key never shares a key with another limit', () =>
  withClient('ioredis', async (client) => {
    const p = prefix('names');
    const hourly = () => new rk.FixedWindow({ limit: 1, windowMs: HOUR });
    const policy = new RedisPolicy(client, {
      limits: [
        { name: 'a', by: ['k'], limiter: hourly() },
        { name: 'a:2:x', limiter: hourly() },
      ],
    }, { prefix: p });
    // Names unwritten as `<length>:<name>`, `a` of key `x:` and `a:2:x` were one key.
    assert.equal((await policy.tryAcquire({ k: 'x:' }, 1, T0)).allowed, true);
    assert.equal((await client.keys(`${p}*`)).length, 2, 'one key per limit');
    const next = await policy.tryAcquire({ k: 'y' }, 1, T0);
    assert.deepEqual([next.allowed, next.deniedBy], [false, 'a:2:x'], 'the global limit is spent');
  }));

test("a long sliding-window log is read page by page and decides as the core's, across every page boundary", () =>
  withClient('ioredis', async (client) => {
    // The script reads a log's entries in pages (16 when walking the oldest
    // out for a cost that does not fit, 1000 for those that left the
    // window), each page starting past the previous one's last entry. The
    // random traces never hold more than a few entries; this log crosses
    // both page sizes.
    const LIMIT = 2500;
    const config = () => new rk.SlidingWindowLog({ limit: LIMIT, windowMs: 10_000, name: 'log' });
    const local = new rk.KeyedLimiter(config());
    const redis = new RedisLimiter(client, config(), { prefix: prefix('pages'), batching: false });
    const numbers = (d) => [d.allowed, d.remaining, d.limit, d.retryAfterMs, d.resetAfterMs];
    const same = async (op, cost, at, what) => {
      const [a, b] = [local[op]('k', cost, T0 + at), await redis[op]('k', cost, T0 + at)];
      assert.deepEqual(numbers(b), numbers(a), `${what}: ${op}(${cost}) at +${at} ms`);
    };
    // One unit per ms, then a few more at once, the last one three times
    // (an instant's entries add up in one member).
    for (let i = 0; i < LIMIT - 10; i++) await same('tryAcquire', 1, i, 'filling');
    for (const cost of [4, 3, 3]) await same('tryAcquire', cost, LIMIT, 'filling');
    for (const cost of [1, 15, 16, 17, 32, 33, 999, 1000, 1001, 2047, LIMIT]) await same('peek', cost, LIMIT, 'a full log');
    // 999, 1000, 1001 and then 1500 entries leave the window: the last walk
    // of those gone spans two pages, and is written back by the acquire.
    for (const gone of [999, 1000, 1001]) await same('peek', 1, 10_000 + gone - 1, `${gone} gone`);
    for (const cost of [1, 17, 1001, LIMIT]) await same('peek', cost, 11_499, '1500 gone');
    await same('tryAcquire', 1001, 11_499, '1500 gone');
    for (const cost of [1, 17, 1000, 1001, LIMIT]) await same('peek', cost, 11_499, 'after the acquire');
    await same('tryAcquire', LIMIT, 30_000, 'every entry gone');
  }));

test('a log whose entries have all left the window is unlinked, not emptied entry by entry, from a batch too', () =>
  withClient('ioredis', async (client) => {
    const config = () => new rk.SlidingWindowLog({ limit: 20, windowMs: 1000, name: 'log' });
    const unlinks = async () => Number(/cmdstat_unlink:calls=(\d+)/.exec(await client.info('commandstats'))?.[1] ?? 0);
    const numbers = (d) => [d.allowed, d.remaining, d.retryAfterMs, d.resetAfterMs];
    // Long after, and exactly when the newest entry leaves (a window after it).
    for (const now of [T0 + 5000, T0 + 19 + 1000]) {
      const local = new rk.KeyedLimiter(config());
      const redis = new RedisLimiter(client, config(), { prefix: prefix(`emptied-${now}`), batching: false });
      for (let i = 0; i < 20; i++) await redis.tryAcquire('k', 1, T0 + i);
      for (let i = 0; i < 20; i++) local.tryAcquire('k', 1, T0 + i);
      const before = await unlinks();
      // Several costs in one call: each after the first decides on a copy of
      // the state, which must keep knowing that every stored entry is gone.
      const got = await redis.tryAcquireBatch('k', [1, 2, 3], now);
      assert.deepEqual(got.map(numbers), local.tryAcquireBatch('k', [1, 2, 3], now).map(numbers));
      assert.equal((await unlinks()) - before, 1, `the old entries went with one UNLINK at ${now}`);
      assert.deepEqual(numbers(await redis.peek('k', 15, now)), numbers(local.peek('k', 15, now)));
    }
  }));

test('a log holding a booking ahead, which a policy made at a slower limit\'s slot, has nothing remaining until then, as in the core', () =>
  withClient('ioredis', async (client) => {
    const config = () => ({
      limits: [
        { name: 'global', limiter: new rk.SlidingWindowLog({ limit: 10, windowMs: 1000 }) },
        { name: 'per-user', by: ['user'], limiter: new rk.FixedWindow({ limit: 1, windowMs: 3600 }) },
      ],
    });
    const local = new rk.Policy(config());
    const redis = new RedisPolicy(client, config(), { prefix: prefix('log-booked') });
    const same = async (op, request, ...args) => {
      const { fromStore, ...got } = await redis[op](request, ...args);
      assert.deepEqual(got, local[op](request, ...args), `${op} ${JSON.stringify(request)}`);
      return got;
    };
    await same('tryAcquire', { user: 'a' }, 1, T0);
    const [booked, remote] = [local.reserve({ user: 'a' }, 1, Infinity, T0 + 1), await redis.reserve({ user: 'a' }, 1, Infinity, T0 + 1)];
    assert.deepEqual([remote.ok, remote.waitMs], [booked.ok, booked.waitMs]);
    // At the fixed window's next window (the log had room at once): the log books it there too.
    assert.equal(booked.waitMs, 3600 - (T0 % 3600) - 1);
    const d = await same('tryAcquire', { user: 'b' }, 1, T0 + 2);
    assert.deepEqual([d.allowed, d.deniedBy, d.remaining, d.limits[0].remaining], [false, 'global', 0, 0]);
  }));

test('unnamed limiters of different configurations never share a key', () =>
  withClient('ioredis', async (client) => {
    const p = prefix('unnamed');
    const gcra = new RedisLimiter(client, new rk.Gcra({ burst: 10, emissionIntervalMs: 100 }), { prefix: p });
    const window = new RedisLimiter(client, new rk.FixedWindow({ limit: 100, windowMs: 1000 }), { prefix: p });
    const log = new RedisLimiter(client, new rk.SlidingWindowLog({ limit: 5, windowMs: 1000 }), { prefix: p });
    const answers = [await gcra.tryAcquire('alice'), await window.tryAcquire('alice'), await log.tryAcquire('alice')];
    assert.deepEqual(answers.map((d) => [d.allowed, d.remaining, d.fromStore]), [[true, 9, true], [true, 99, true], [true, 4, true]]);
    const again = new RedisLimiter(client, new rk.Gcra({ burst: 10, emissionIntervalMs: 100 }), { prefix: p });
    assert.equal((await again.tryAcquire('alice')).remaining, 8, 'the same configuration shares its keys');
  }));

test("a caller's milliseconds go as the nearest µs to the float's own value, as Python's seconds do", () =>
  withClient('ioredis', async (client) => {
    // Math.round(ms * 1000) rounded the product first (to a quarter of a µs
    // at epoch ms): 1790000990486.8064 ms went as ...807 µs, where its
    // exact value (and the Python client, for the same instant in seconds,
    // 1790000990.4868064) is ...806. A booking of nothing answers the µs sent.
    const clock = { ms: 0 };
    const limiter = new RedisLimiter(client, new rk.Gcra({ burst: 1, emissionIntervalMs: 1000 }), { prefix: prefix('float-now'), clock: () => clock.ms });
    for (const [ms, us] of [
      [1790000990486.8064, 1790000990486806],
      [1795420534626.1506, 1795420534626151],
      [0.0025, 3],
    ]) {
      assert.equal((await limiter.reserve('k', 0, undefined, ms)).atMs, us / 1000, `${ms} ms`);
      clock.ms = ms;
      assert.equal((await limiter.reserve('k', 0)).atMs, us / 1000, `${ms} ms by the clock`);
    }
  }));

test('a caller clock of any origin keeps keys until fresh; an empty prefix is refused', () =>
  withClient('ioredis', async (client) => {
    const p = prefix('mono');
    // performance.now() reads as 1970 in Unix time: keys set to expire then
    // (PXAT) were gone as soon as written, and every request passed.
    const limiter = new RedisLimiter(client, new rk.Gcra({ burst: 1, emissionIntervalMs: 60_000 }), { prefix: p, clock: () => performance.now() });
    const allowed = [];
    for (let i = 0; i < 3; i++) allowed.push((await limiter.tryAcquire('k')).allowed);
    assert.deepEqual(allowed, [true, false, false]);
    const [key] = await client.keys(`${p}*`);
    const ttl = Number(await client.pttl(key));
    assert.ok(ttl > 59_000 && ttl <= 61_000, `expires a second after it is fresh, on the server's clock: ${ttl}`);
    assert.throws(() => new RedisLimiter(client, new rk.Gcra({ burst: 1, emissionIntervalMs: 1 }), { prefix: '' }), RangeError);
    assert.throws(() => new RedisPolicy(client, '1/second', { prefix: '' }), RangeError);
  }));

test('the script refuses two limits naming one key (each would decide on the same state)', () =>
  withClient('ioredis', async (client) => {
    const key = `${prefix('twice')}k`;
    const { REDIS_SCRIPT } = require('../../bindings-node/native.js');
    // A GCRA of burst 2 and a fixed window of 5 on one key: three calls
    // were all allowed, and the window's state overwrote the GCRA's.
    const call = () => client.eval(REDIS_SCRIPT, 2, key, key, 1, 'acquire', T0 * 1000, 2, 'gcra', 2, 100, 'fixed_window', 5, 1000, 1, 1);
    await assert.rejects(call(), { message: /^ratekeeper: limits 1 and 2 name the same key/ });
    assert.equal(await client.exists(key), 0, 'nothing written');
  }));

test('a stored number past 2^53 rejects as the script\'s error, never answered by onError as an outage', () =>
  withClient('ioredis', async (client) => {
    // Read as 1e23, it made a TTL Redis refused ("value is not an integer or
    // out of range"), which read as Redis out of reach: onError 'open' let
    // every request through.
    const p = prefix('huge');
    const limiter = new RedisLimiter(client, new rk.Gcra({ burst: 2, emissionIntervalMs: 1000 }), { prefix: p, onError: 'open' });
    assert.equal((await limiter.tryAcquire('k', 1, T0)).allowed, true);
    const [key] = await client.keys(`${p}*`);
    await client.set(key, '99999999999999999999999 0');
    await assert.rejects(limiter.tryAcquire('k', 1, T0 + 1), { message: /^ratekeeper: the key of limit 1 holds a value this script did not write/ });
  }));

test("the script's own errors reject, never answered by onError (as in Python)", async () => {
  // A client and script that disagree (a bug), not a fault of the store.
  const refusing = { sendCommand: async () => Promise.reject(new Error('ratekeeper: protocol version 2 is not 1')) };
  const limiter = new RedisLimiter(refusing, new rk.Gcra({ burst: 1, emissionIntervalMs: 1000 }), { onError: 'open' });
  const calls = [() => limiter.tryAcquire('k'), () => limiter.peek('k'), () => limiter.reserve('k'), () => limiter.refund('k', 1)];
  for (const call of calls) await assert.rejects(call(), { message: /^ratekeeper: protocol version/ });
  const policy = new RedisPolicy(refusing, '5/minute', { onError: 'open' });
  const results = await Promise.allSettled([1, 2, 3].map(() => policy.tryAcquire({})));
  assert.deepEqual(results.map((r) => r.status), ['rejected', 'rejected', 'rejected']);
});

test('a misspelt option is refused, naming it, as the in-process classes refuse theirs', async () => {
  const client = { sendCommand: async () => Promise.reject(new Error('unused')) };
  const gcra = new rk.Gcra({ burst: 1, emissionIntervalMs: 1000 });
  assert.throws(() => new RedisLimiter(client, gcra, { onErorr: 'open' }), {
    name: 'TypeError',
    code: 'invalid_type',
    message: /^`onErorr` is not an option of RedisLimiter, which takes prefix, clock, onError, /,
  });
  assert.throws(() => new RedisPolicy(client, '1/second', { by: ['u'], timeoutMs: 50 }), { code: 'invalid_type', message: /^`timeoutMs` is not an option of RedisPolicy/ });
  await assert.rejects(new RedisLimiter(client, gcra, { onError: 'open' }).acquire('k', 1, { timeout: 10 }), {
    code: 'invalid_type',
    message: '`timeout` is not an option of acquire, which takes signal, timeoutMs',
  });
});

test('an option given as null takes its default, as left out and as in-process: the default prefix, onError, batching and commandTimeoutMs', async () => {
  // prefix, onError, batching and commandTimeoutMs given as null were a
  // TypeError (`prefix` must be a string...), where `clock: null` and every
  // in-process option's null are the default.
  const nulls = { prefix: null, clock: null, onError: null, batching: null, commandTimeoutMs: null };
  await withClient('ioredis', async (client) => {
    // The default prefix, 'ratekeeper:', under a name of this run's own.
    const name = `nulls-${process.pid}-${Date.now()}`;
    const limiter = new RedisLimiter(client, new rk.Gcra({ burst: 2, emissionIntervalMs: 1000, name }), nulls);
    const calls = await Promise.all([limiter.tryAcquire('k', null, null), limiter.tryAcquire('k'), limiter.tryAcquire('k')]);
    assert.deepEqual(calls.map((d) => [d.allowed, d.fromStore]), [[true, true], [true, true], [false, true]]);
    const key = `ratekeeper:{1:k}:${name.length}:${name}:1:k`;
    assert.deepEqual(await client.keys(`ratekeeper:*${name}*`), [key]);
    // A rate of this test's own: its key is the policy's under the default prefix.
    const policy = new RedisPolicy(client, '3/7 seconds', { ...nulls, algorithm: null, by: null });
    const decided = await policy.tryAcquire(null, null, null);
    assert.deepEqual([decided.allowed, decided.remaining, decided.fromStore], [true, 2, true]);
    const policyKeys = await client.keys('ratekeeper:{ratekeeper:}:*3/7 seconds*');
    assert.equal(policyKeys.length, 1);
    await client.unlink(key, ...policyKeys);
  });
  // Redis not answering: null is onError's default, 'closed', which denies.
  const down = { sendCommand: async () => Promise.reject(new Error('down')) };
  const gcra = new rk.Gcra({ burst: 1, emissionIntervalMs: 1000 });
  for (const store of [new RedisLimiter(down, gcra, nulls), new RedisPolicy(down, '1/second', nulls)]) {
    const d = await store.tryAcquire(store instanceof RedisLimiter ? 'k' : {});
    assert.deepEqual([d.allowed, d.fromStore, d.retryAfterMs], [false, false, 1000], store.constructor.name);
  }
  // Another type keeps its error.
  assert.throws(() => new RedisLimiter(down, gcra, { batching: 1 }), { name: 'TypeError', code: 'invalid_type', message: '`batching` must be a boolean' });
  assert.throws(() => new RedisLimiter(down, gcra, { prefix: 5 }), { name: 'TypeError', code: 'invalid_type', message: '`prefix` must be a string' });
});

test('a RedisPolicy needs a configuration: none is refused by name, not taken as an empty policy', () => {
  // `new Policy()` is an empty in-process policy, which `add` fills; a
  // RedisPolicy has no `add`, so one of no limits is refused, and none was a
  // TypeError `invalid_type` where `{ limits: [] }` (and Python's None) is a
  // RangeError `zero_value`.
  const client = { sendCommand: async () => Promise.reject(new Error('unused')) };
  const noLimits = { name: 'RangeError', code: 'zero_value', message: '`config`: a policy on Redis needs at least one limit' };
  for (const none of [undefined, null, { limits: [] }]) {
    assert.equal(new rk.Policy(none).size, 0);
    assert.throws(() => new RedisPolicy(client, none), noLimits);
  }
  assert.throws(() => new RedisPolicy(client), noLimits);
  // What the in-process Policy refuses, refused as it refuses it.
  for (const bad of [[], {}, '']) {
    let local;
    assert.throws(() => new rk.Policy(bad), (e) => (local = e) instanceof Error);
    assert.throws(() => new RedisPolicy(client, bad), { name: local.name, code: local.code, message: local.message });
  }
});

test("a RedisPolicy's limits, names, size and keyedBy are the in-process Policy's, errors and all; it has no add", () => {
  // It had only `limits`: `names`, `size` and `keyedBy`, Python's `names`,
  // `len` and `keyed_by`, were undefined.
  const client = { sendCommand: async () => Promise.reject(new Error('unused')) };
  const config = { limits: [{ name: 'per-user', rate: '5/second', by: ['user'] }, { name: 'global', rate: '100/minute' }, { name: 'route', rate: '2/second', by: ['user', 'route'] }] };
  const policy = new RedisPolicy(client, config);
  const local = new rk.Policy(config);
  assert.deepEqual(policy.limits, local.limits);
  assert.deepEqual(policy.names, ['per-user', 'global', 'route']);
  assert.equal(policy.size, 3);
  assert.deepEqual(policy.keyedBy('route'), ['user', 'route']);
  assert.deepEqual(policy.keyedBy('global'), []);
  // Copies: the caller's changes stay the caller's.
  policy.names.push('x');
  policy.keyedBy('route').push('x');
  assert.deepEqual([policy.names, policy.keyedBy('route')], [local.names, local.keyedBy('route')]);
  for (const name of ['nope', 5]) {
    let expected;
    assert.throws(() => local.keyedBy(name), (e) => (expected = e) instanceof Error);
    assert.throws(() => policy.keyedBy(name), { name: expected.name, code: expected.code, message: expected.message });
  }
  assert.throws(() => policy.keyedBy('nope'), { name: 'RangeError', code: 'invalid_value' });
  assert.equal('add' in policy, false);
  // Detached, as the other members: `this` named.
  for (const read of [() => Object.getOwnPropertyDescriptor(RedisPolicy.prototype, 'names').get.call({}), () => Object.getOwnPropertyDescriptor(RedisPolicy.prototype, 'size').get.call({}), () => policy.keyedBy.call({}, 'route')]) {
    assert.throws(read, { name: 'TypeError', code: 'invalid_type', message: /^`this` must be a RedisPolicy/ });
  }
});

test('a RedisPolicy reads a request\'s fields as the in-process Policy does: a non-enumerable property is no field', async () => {
  // Redis took it (Object.hasOwn) where the in-process Policy, reading
  // Object.keys, had no such field: the same request was keyed on Redis
  // and refused by an onError Policy once Redis failed.
  let sent = 0;
  const client = { sendCommand: () => (sent++, Promise.reject(new Error('connect ECONNREFUSED'))) };
  const policy = new RedisPolicy(client, '10/second', { by: ['user'], prefix: prefix('hidden') });
  const hidden = Object.defineProperty({}, 'user', { value: 'u', enumerable: false });
  const lacking = { name: 'RangeError', code: 'invalid_value', message: '`request` lacks the field "user" that limit "10/second" is keyed by' };
  assert.throws(() => new rk.Policy('10/second', { by: ['user'] }).tryAcquire(hidden), lacking);
  await assert.rejects(policy.tryAcquire(hidden), lacking);
  await assert.rejects(policy.reset(hidden), { name: 'RangeError', code: 'invalid_value' });
  assert.equal(sent, 0, 'refused before Redis is asked');
});

test("a fallback Policy's fields are its limits' at the call: one added after construction is asked of every request, Redis up or down", async () => {
  // They were read once, at construction: a limit `add`ed to the fallback
  // later was never asked for, and while Redis was down the fallback
  // refused the request as its own (Redis up, it was admitted).
  let sent = 0;
  const down = { sendCommand: () => (sent++, Promise.reject(new Error('connect ECONNREFUSED'))) };
  const fallback = new rk.Policy('10/second', { by: ['user'], clock: () => 5_000 });
  const policy = new RedisPolicy(down, '10/second', { by: ['user'], onError: fallback, prefix: prefix('added') });
  assert.equal((await policy.tryAcquire({ user: 'u' })).fromStore, false);
  sent = 0;
  fallback.add('per-ip', new rk.Gcra({ burst: 5, emissionIntervalMs: 100 }), { by: ['ip'] });
  // As the in-process policy refuses it, naming the field and the fallback's limit, before any round trip.
  assert.throws(() => fallback.tryAcquire({ user: 'u' }), { name: 'RangeError', code: 'invalid_value', message: /lacks the field "ip"/ });
  const lacking = { name: 'RangeError', code: 'invalid_value', message: '`request` lacks the field "ip" that onError\'s limit "per-ip" is keyed by' };
  for (const call of [() => policy.tryAcquire({ user: 'u' }), () => policy.peek({ user: 'u' }), () => policy.reserve({ user: 'u' }), () => policy.tryAcquireBatch({ user: 'u' }, [1])]) {
    await assert.rejects(call(), lacking);
  }
  assert.equal(sent, 0, 'refused before Redis is asked');
  const d = await policy.tryAcquire({ user: 'u', ip: '1.2.3.4' });
  assert.deepEqual([d.allowed, d.fromStore], [true, false]);
  assert.equal(fallback.peek({ user: 'u', ip: '1.2.3.4' }).limits[1].remaining, 3, 'the added limit took one: one more leaves 3 of 5');
  await withClient('ioredis', async (client) => {
    const up = new RedisPolicy(client, '10/second', { by: ['user'], onError: fallback, prefix: prefix('added') });
    fallback.add('per-route', new rk.Gcra({ burst: 5, emissionIntervalMs: 100 }), { by: ['route'] });
    await assert.rejects(up.tryAcquire({ user: 'u', ip: '1.2.3.4' }), { ...lacking, message: '`request` lacks the field "route" that onError\'s limit "per-route" is keyed by' });
    assert.equal((await up.tryAcquire({ user: 'u', ip: '1.2.3.4', route: '/a' })).fromStore, true);
  });
});

test('errors no retry mends reject too: NOPERM, WRONGTYPE, a value the script cannot read (as in Python)', async () => {
  // A misconfiguration looked like an outage: onError 'open' allowed every
  // request, for ever, with nothing but fromStore to tell.
  for (const reply of [
    "NOPERM User app has no permissions to run the 'evalsha' command",
    'WRONGTYPE Operation against a key holding the wrong kind of value script: f00, on @user_script:48.',
    'ERR user_script:38: attempt to compare nil with number script: f00, on @user_script:38.',
    "ERR The user executing the script can't run this command or subcommand script: f00, on @user_script:1.",
    // Redis 7.2 on (and Valkey) words that one so.
    "ERR ACL failure in script: User app has no permissions to run the 'zadd' command script: f00, on @user_script:1.",
  ]) {
    const client = { sendCommand: async () => Promise.reject(new Error(reply)) };
    const limiter = new RedisLimiter(client, new rk.Gcra({ burst: 1, emissionIntervalMs: 1000 }), { onError: 'open' });
    await assert.rejects(limiter.tryAcquire('k'), { message: reply });
  }
  // A server still loading its data is a fault of reach: onError answers.
  const loading = { sendCommand: async () => Promise.reject(new Error('LOADING Redis is loading the dataset in memory')) };
  const d = await new RedisLimiter(loading, new rk.Gcra({ burst: 1, emissionIntervalMs: 1000 }), { onError: 'open' }).tryAcquire('k');
  assert.deepEqual([d.allowed, d.fromStore], [true, false]);
});

test("an ACL user of exactly PROTOCOL.md's commands runs every algorithm; one without UNLINK gets the error", () =>
  withClient('ioredis', async (admin) => {
    const protocol = require('node:fs').readFileSync(require('node:path').join(__dirname, '../../core/redis/PROTOCOL.md'), 'utf8');
    const listed = /^ {4}(\+evalsha .*)$/m.exec(protocol)[1].split(' ');
    assert.ok(listed.includes('+unlink') && listed.length >= 14, listed.join(' '));
    const p = prefix('acl');
    const user = `rk-acl-${process.pid}`;
    const config = {
      limits: [
        { name: 'gcra', rate: '5/second', algorithm: 'gcra', by: ['user'] },
        { name: 'bucket', rate: '4/second;10/minute', by: ['user'] },
        { name: 'fixed', rate: '4/second', algorithm: 'fixed_window', by: ['user'] },
        { name: 'counter', rate: '4/second', algorithm: 'sliding_window_counter', by: ['user'] },
        { name: 'log', rate: '4/second', algorithm: 'sliding_window_log', by: ['user'] },
      ],
    };
    // Every command the script and the client may send: the script not
    // loaded yet, server time and caller time, a batch, a refund back to
    // fresh, a log whose entries have all left the window.
    const run = async (client, keys) => {
      const policy = new RedisPolicy(client, config, { prefix: keys });
      const local = new rk.Policy(config);
      const same = async (got, want) => {
        const { fromStore, ...numbers } = await got;
        assert.equal(fromStore, true);
        assert.deepEqual(numbers, want);
      };
      await policy.tryAcquire({ user: 'server-time' });
      for (const cost of [1, 2, 1]) await same(policy.tryAcquire({ user: 'u' }, cost, T0), local.tryAcquire({ user: 'u' }, cost, T0));
      await same(policy.peek({ user: 'u' }, 1, T0 + 10), local.peek({ user: 'u' }, 1, T0 + 10));
      await policy.refund({ user: 'u' }, 1, T0);
      local.refund({ user: 'u' }, 1, T0);
      await same(policy.tryAcquire({ user: 'u' }, 1, T0 + 5 * HOUR), local.tryAcquire({ user: 'u' }, 1, T0 + 5 * HOUR));
      await policy.tryAcquire({ user: 'fresh' }, 1, T0);
      await policy.refund({ user: 'fresh' }, 1, T0);
      const fresh = await admin.keys(`${keys}*fresh*`);
      assert.equal(fresh.length, 5);
      for (const key of fresh) {
        const ttl = await admin.pttl(key);
        assert.ok(ttl > 0 && ttl <= 1000, `a refund back to fresh keeps ${key} a second at most, not ${ttl} ms`);
      }
    };
    const grant = async (commands) => {
      await admin.call('ACL', 'SETUSER', user, 'reset', 'on', '>secret', `~${p}*`, ...commands);
      await admin.call('SCRIPT', 'FLUSH');
    };
    try {
      await grant(listed);
      // No ready check: it runs INFO, which the user may not.
      const client = await ioredis({ username: user, password: 'secret', enableReadyCheck: false });
      try {
        await run(client, `${p}all:`);
        await grant(listed.filter((command) => command !== '+unlink'));
        // Raised, not answered by onError as an outage (Redis 7.0 words it so; 7.2 on, "ACL failure in script").
        await assert.rejects(run(client, `${p}no-unlink:`), /can't run this command|ACL failure in script/);
      } finally {
        await close(client);
      }
    } finally {
      await admin.call('ACL', 'DELUSER', user);
    }
  }));

test('acquire waits out a slot further than timers reach (2^31 - 1 ms) in several timers, never at once', () =>
  withClient('ioredis', async (client) => {
    // A timer of more than 2^31 - 1 ms fires at once: a second call on "1
    // per 30 days" went through 1 ms later. Long timers are held here and
    // fired by hand; short ones (the client's) run as usual.
    const DAY = 86_400_000;
    const held = [];
    const realSetTimeout = globalThis.setTimeout;
    globalThis.setTimeout = (fn, ms, ...rest) => (ms > DAY ? (held.push({ fn, ms }), { ref() {}, unref() {} }) : realSetTimeout(fn, ms, ...rest));
    try {
      const limiter = new RedisLimiter(client, new rk.Gcra({ burst: 1, emissionIntervalMs: 30 * DAY }), { prefix: prefix('month') });
      await limiter.acquire('u');
      let went = false;
      const second = limiter.acquire('u').then(() => (went = true));
      await until(() => held.length === 1, 5_000, () => 'the wait was never armed');
      assert.equal(held[0].ms, 2 ** 31 - 1, 'the first timer is the longest timers take');
      held.shift().fn();
      await sleep(10);
      assert.equal(went, false, 'still waiting after the first timer');
      assert.equal(held.length, 1);
      assert.ok(held[0].ms > 4 * DAY && held[0].ms < 6 * DAY, `then the rest: ${held[0].ms} ms`);
      held.shift().fn();
      await second;
    } finally {
      globalThis.setTimeout = realSetTimeout;
    }
  }));

test('util.inspect of a Proxy of a Redis limiter or policy, or of an object inheriting from one, shows it, never throws', () => {
  // Node asks the target's custom inspection with the Proxy as `this`: its brand check threw.
  const { inspect } = require('node:util');
  const client = { call() {}, evalsha() {} };
  const limiter = new RedisLimiter(client, new rk.Gcra({ burst: 2, emissionIntervalMs: 1000, name: 'api' }));
  const policy = new RedisPolicy(client, '10/second');
  for (const [instance, kind] of [[limiter, 'RedisLimiter'], [policy, 'RedisPolicy']]) {
    const shown = (value) => inspect(value, { breakLength: Infinity, depth: 4 });
    assert.equal(shown(new Proxy(instance, {})), `Proxy [ ${inspect(instance, { breakLength: Infinity, depth: 3 })}, {} ]`);
    assert.equal(shown(Object.create(instance)), `${kind} {}`);
  }
});

test('commandTimeoutMs past what timers take is refused, not a timeout of 1 ms', () => {
  const client = { call() {}, evalsha() {} };
  assert.throws(() => new RedisLimiter(client, new rk.Gcra({ burst: 1, emissionIntervalMs: 1 }), { commandTimeoutMs: 2 ** 31 }), { name: 'RangeError', message: /commandTimeoutMs/ });
  new RedisLimiter(client, new rk.Gcra({ burst: 1, emissionIntervalMs: 1 }), { commandTimeoutMs: 2 ** 31 - 1 });
  new RedisLimiter(client, new rk.Gcra({ burst: 1, emissionIntervalMs: 1 }), { commandTimeoutMs: Infinity });
});

test('an in-process fallback never throws for a cost the store takes, one caller or a batch; a request lacking its fields fails at once', async () => {
  // A cost above the fallback's (stricter) limit threw while Redis was
  // down, rejecting every caller of a batch and taking units from the
  // fallback for a call that failed. It is denied as 'closed' denies.
  const down = { sendCommand: () => new Promise(() => {}) }; // never answers
  const fallback = new rk.KeyedLimiter(new rk.Gcra({ burst: 2, emissionIntervalMs: 60_000 }));
  const limiter = new RedisLimiter(down, new rk.Gcra({ burst: 10, emissionIntervalMs: 1000 }), { onError: fallback, commandTimeoutMs: 20 });
  const decisions = await Promise.all([limiter.tryAcquire('a', 1), limiter.tryAcquire('a', 1), limiter.tryAcquire('a', 5)]);
  assert.deepEqual(decisions.map((d) => [d.allowed, d.fromStore, d.retryAfterMs]), [[true, false, 0], [true, false, 0], [false, false, 1000]]);
  const batch = await limiter.tryAcquireBatch('b', [1, 5]);
  assert.deepEqual(batch.map((d) => d.allowed), [true, false]);
  assert.equal(fallback.peek('b', 0).remaining, 1, 'the fallback took one unit, for the one allowed');
  const policy = new RedisPolicy(down, '10/second', { by: ['user'], onError: new rk.Policy('10/second', { by: ['ip'] }), commandTimeoutMs: 20 });
  await assert.rejects(policy.tryAcquire({ user: 'u' }), { name: 'RangeError', message: /lacks the field "ip" that onError's limit "10\/second" is keyed by/ });
  assert.equal((await policy.tryAcquire({ user: 'u', ip: '1.2.3.4' })).fromStore, false);
});

test("a reservation's cancel() gives its booking back once, to Redis at its slot or to the onError limiter, as Python's", () =>
  withClient('ioredis', async (client) => {
    const at = T0;
    const limiter = new RedisLimiter(client, new rk.Gcra({ burst: 1, emissionIntervalMs: 1000 }), { prefix: prefix('cancel') });
    const policy = new RedisPolicy(client, '1/second', { by: ['user'], prefix: prefix('cancel-policy') });
    for (const [store, target] of [[limiter, 'k'], [policy, { user: 'u' }]]) {
      await store.tryAcquire(target, 1, at);
      const booked = await store.reserve(target, 1, 5000, at);
      assert.deepEqual([booked.ok, booked.fromStore, booked.waitMs], [true, true, 1000]);
      const next = await store.reserve(target, 1, 5000, at);
      assert.equal(next.waitMs, 2000);
      await next.cancel();
      await next.cancel(); // once: this one must not give back `again` below
      const again = await store.reserve(target, 1, 5000, at);
      assert.equal(again.waitMs, 2000, 'the cancelled slot is booked again');
      assert.equal((await store.reserve(target, 1, 5000, at)).waitMs, 3000, 'the second cancel gave nothing back');
      const refused = await store.reserve(target, 1, 0, at);
      assert.equal(refused.ok, false);
      await refused.cancel(); // nothing booked, nothing given back
      assert.equal((await store.peek(target, 1, at)).retryAfterMs, 4000);
    }
    // Decided by onError while Redis does not answer: cancel gives it back there.
    const down = { sendCommand: () => new Promise(() => {}) };
    const fallback = new rk.KeyedLimiter(new rk.Gcra({ burst: 2, emissionIntervalMs: 60_000 }));
    const offline = new RedisLimiter(down, new rk.Gcra({ burst: 10, emissionIntervalMs: 1000 }), { onError: fallback, commandTimeoutMs: 20 });
    const local = await offline.reserve('a', 1);
    assert.deepEqual([local.ok, local.fromStore], [true, false]);
    assert.equal(fallback.peek('a', 0).remaining, 1);
    await local.cancel();
    assert.equal(fallback.peek('a', 0).remaining, 2);
  }));

test('an aborted acquire whose give-back the script refuses leaves no rejection unhandled', () =>
  withClient('ioredis', async (client) => {
    const unhandled = [];
    const onUnhandled = (reason) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const p = prefix('abort-wrongtype');
      const limiter = new RedisLimiter(client, new rk.Gcra({ burst: 1, emissionIntervalMs: 2000, name: 'g' }), { prefix: p });
      await limiter.acquire('k');
      const controller = new AbortController();
      const pending = limiter.acquire('k', 1, { signal: controller.signal });
      await sleep(50); // booked, and waiting
      const [key] = await client.keys(`${p}*`);
      await client.del(key);
      await client.rpush(key, 'another type'); // the give-back will meet WRONGTYPE
      controller.abort(new Error('stop'));
      await assert.rejects(pending, { message: 'stop' });
      await sleep(100);
      assert.deepEqual(unhandled, []);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  }));

test('console.log shows the limiter or the limits, not the client', () =>
  withClient('ioredis', async (client) => {
    const { inspect } = require('node:util');
    const limiter = new RedisLimiter(client, new rk.Gcra({ burst: 2, emissionIntervalMs: 1000, name: 'api' }));
    assert.equal(inspect(limiter), "RedisLimiter { limiter: Gcra { burst: 2, emissionIntervalMs: 1000, name: 'api' } }");
    const policy = new RedisPolicy(client, '10/second', { by: ['user'] });
    const limits = [{ name: '10/second', by: ['user'] }];
    assert.equal(inspect(policy, { depth: 3 }), `RedisPolicy ${inspect({ limits }, { depth: 3 })}`);
  }));

/** `client` (ioredis), each script call answered `ms` later than Redis answers it. */
function slowed(client, ms) {
  return new Proxy(client, {
    get(target, name) {
      const value = Reflect.get(target, name, target);
      if (name === 'call') return async (...args) => {
        const reply = await value.apply(target, args);
        if (args[0] === 'EVALSHA') await sleep(ms);
        return reply;
      };
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

// Reset and used again, a key books the same slots anew: a bucket on the
// callers' clock, whose line ends where it ended before, and a window, which
// counts per window whoever booked there.
const AFTER_RESET = {
  gcra: () => new rk.Gcra({ burst: 1, emissionIntervalMs: 1000 }),
  token_bucket: () => new rk.TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 1000 }),
  fixed_window: () => new rk.FixedWindow({ limit: 1, windowMs: 10_000 }),
  sliding_window_log: () => new rk.SlidingWindowLog({ limit: 1, windowMs: 10_000 }),
};

test('a call made before a reset through the limiter gives nothing back, aborted, cancelled or late (as in-process)', () =>
  withClient('ioredis', async (client) => {
    // Given back after the reset, it freed a unit the key had taken anew:
    // the next caller got the slot of a booking made since, two units at
    // once from a limit of one.
    const now = T0 + 5000;
    for (const [name, make] of Object.entries(AFTER_RESET)) {
      for (const how of ['aborted', 'cancelled', 'late']) {
        const seen = holdingReplies(client, how === 'late' ? 'acquire' : null);
        const options = { prefix: prefix(`reset-${name}-${how}`), clock: () => now };
        // Only the late call may time out: every other call is answered
        // (with onError 'open' and 50 ms, a stall of the machine admitted an
        // aborted acquire at once, or failed the reset).
        const late = how === 'late' ? { onError: 'open', commandTimeoutMs: LATE_MS } : {};
        const limiter = new RedisLimiter(seen.client, make(), { ...options, ...late });
        assert.equal((await limiter.peek('k', 0)).fromStore, true); // the script is loaded
        const controller = new AbortController();
        let before;
        let waiting;
        if (how === 'late') {
          // Redis takes the unit; its reply is late, and onError answers.
          assert.equal((await limiter.tryAcquire('k')).fromStore, false);
        } else {
          assert.equal((await limiter.tryAcquire('k')).allowed, true);
          if (how === 'aborted') {
            waiting = limiter.acquire('k', 1, { signal: controller.signal });
            await until(() => seen.sent.reserve.length === 1);
            await seen.sent.reserve[0];
          } else {
            before = await limiter.reserve('k', 1, HOUR);
          }
        }
        assert.equal(await limiter.reset('k'), true);
        const other = new RedisLimiter(client, make(), options);
        assert.equal((await other.tryAcquire('k')).allowed, true);
        const behind = await other.reserve('k', 1, HOUR);
        if (how === 'aborted') {
          controller.abort();
          await assert.rejects(waiting);
        } else if (how === 'cancelled') {
          await before.cancel();
        } else {
          seen.release();
          await until(() => seen.sent.acquire.length > 0);
          await Promise.all(seen.sent.acquire);
          // The give-back, if any, is sent as the reply comes, before the next turn.
          await new Promise(setImmediate);
        }
        await Promise.all(seen.refunds);
        const after = await other.reserve('k', 1, HOUR);
        const shown = `${name} ${how}: ${after.ok} ${after.atMs - now} after ${behind.atMs - now}`;
        assert.ok(behind.ok && (after.ok || name === 'sliding_window_log'), shown);
        assert.ok(!after.ok || after.atMs > behind.atMs, shown);
      }
    }
  }));

test('a reset of another key leaves a booking to give back (per key, as in-process)', () =>
  withClient('ioredis', async (client) => {
    const limiter = new RedisLimiter(client, new rk.Gcra({ burst: 1, emissionIntervalMs: 1000 }), { prefix: 'rk-node-reset-other:', clock: () => T0 });
    await limiter.reset('k');
    await limiter.reset('other');
    assert.equal((await limiter.tryAcquire('k')).allowed, true);
    assert.equal((await limiter.tryAcquire('other')).allowed, true);
    const booked = await limiter.reserve('k', 1, HOUR);
    assert.equal(await limiter.reset('other'), true);
    await booked.cancel();
    assert.equal((await limiter.reserve('k', 1, HOUR)).waitMs, 1000);
  }));

test('a late reply gives back only the units it took: none of a cost it denied, nothing of a peek', () =>
  withClient('ioredis', async (client) => {
    // What onError answered in its place is given back as the late reply
    // says it took: refunding what it only decided freed units taken by others.
    const p = prefix('late-taken');
    const window = () => new rk.FixedWindow({ limit: 5, windowMs: HOUR });
    const options = { prefix: p, onError: 'open', commandTimeoutMs: 50, clock: () => T0 };
    const observer = new RedisLimiter(client, window(), { prefix: p, clock: () => T0 });
    assert.equal((await observer.tryAcquire('k', 2)).remaining, 3);
    // A batch of which Redis takes 1 and denies 5; its reply late, onError answers.
    const batch = holdingReplies(client, 'acquire');
    const limiter = new RedisLimiter(batch.client, window(), options);
    assert.deepEqual((await limiter.tryAcquireBatch('k', [1, 5])).map((d) => d.fromStore), [false, false]);
    batch.release();
    await until(() => batch.refunds.length === 1);
    await batch.refunds[0];
    // The unit it took, not the 5 it denied too (a refund of 6 freed the 2 taken before).
    assert.equal((await observer.peek('k', 0)).remaining, 3);
    // A late peek took nothing, and gives nothing back.
    const peeking = holdingReplies(client, 'peek');
    const peeker = new RedisLimiter(peeking.client, window(), options);
    assert.equal((await peeker.peek('k', 1)).fromStore, false);
    peeking.release();
    await Promise.all(peeking.sent.peek);
    // The give-back, if any, is sent as the reply comes, before the next turn.
    await new Promise(setImmediate);
    assert.equal(peeking.refunds.length, 0);
    assert.equal((await observer.peek('k', 0)).remaining, 3);
  }));

test('a reset that found nothing leaves a booking to give back (as in Python)', () =>
  withClient('ioredis', async (client) => {
    // A reset that found no key forgot nothing: the booking of another key
    // gives back.
    const limiter = new RedisLimiter(client, new rk.Gcra({ burst: 1, emissionIntervalMs: 1000 }), { prefix: prefix('reset-none'), clock: () => T0 });
    assert.equal((await limiter.tryAcquire('k')).allowed, true);
    const booked = await limiter.reserve('k', 1, HOUR);
    assert.equal(await limiter.reset('unused'), false);
    await booked.cancel();
    assert.equal((await limiter.reserve('k', 1, HOUR)).waitMs, 1000);
  }));

test('a reset whose UNLINK ran but failed to answer: a call made before it gives nothing back', () =>
  withClient('ioredis', async (client) => {
    // The UNLINK ran and its reply was lost (the connection dropped): the
    // key was forgotten all the same, and takes its slots anew. Given back,
    // the booking made before freed the one made since (two units at once
    // from a burst of one).
    const failing = hooked(client, async (words, send) => {
      const reply = await send();
      if (words[0] === 'UNLINK') throw new Error('Connection is closed.');
      return reply;
    });
    const gcra = () => new rk.Gcra({ burst: 1, emissionIntervalMs: 1000 });
    const options = { prefix: prefix('reset-failed'), clock: () => T0 };
    const limiter = new RedisLimiter(failing, gcra(), options);
    const other = new RedisLimiter(client, gcra(), options);
    assert.equal((await limiter.tryAcquire('k')).allowed, true);
    const before = await limiter.reserve('k', 1, HOUR);
    await assert.rejects(limiter.reset('k'), { message: 'Connection is closed.' });
    assert.equal((await other.tryAcquire('k')).allowed, true);
    const behind = await other.reserve('k', 1, HOUR);
    assert.deepEqual([before.atMs, behind.atMs], [T0 + 1000, T0 + 1000]);
    await before.cancel();
    assert.equal((await other.reserve('k', 1, HOUR)).atMs, behind.atMs + 1000);
  }));

test('a cancel made while a reset is under way gives nothing back, though calls sent since took the key anew (as in Python)', () =>
  withClient('ioredis', async (client) => {
    // cancel() found no reset counted yet (its UNLINK in flight) and sent the
    // refund behind the calls made meanwhile: it freed the slot of the
    // booking made since the UNLINK, which the next caller got too (two
    // units at once from a limit of one).
    const now = T0 + 5000;
    for (const [name, make] of Object.entries(AFTER_RESET)) {
      const limiter = new RedisLimiter(client, make(), { prefix: prefix(`cancel-resetting-${name}`), clock: () => now });
      assert.equal((await limiter.tryAcquire('k')).allowed, true);
      const before = await limiter.reserve('k', 1, HOUR);
      const resetting = limiter.reset('k');
      const taking = limiter.tryAcquire('k');
      const booking = limiter.reserve('k', 1, HOUR); // the slot `before` had
      const cancelling = before.cancel();
      assert.equal(await resetting, true);
      assert.equal((await taking).allowed, true);
      const behind = await booking;
      await cancelling;
      const after = await limiter.reserve('k', 1, HOUR);
      const shown = `${name}: ${after.ok} ${after.atMs - now} after ${behind.atMs - now}`;
      // Never beside `behind` (a log of one unit books no third instant at all).
      assert.ok(behind.ok && (after.ok || name === 'sliding_window_log'), shown);
      assert.ok(!after.ok || after.atMs > behind.atMs, shown);
    }
  }));

test('a late reply after a reset through the limiter gives nothing back, though the key took the same units anew (as in Python)', () =>
  withClient('ioredis', async (client) => {
    // Reset and used again on the callers' clock, a bucket's line ends where
    // the late call left it (its marks match: the guarded refund would give
    // back), and a window counts whoever took there: given back, the late
    // call's unit freed the one taken since, two at once from a limit of one.
    const now = T0 + 5000;
    for (const [name, make] of Object.entries(AFTER_RESET)) {
      const seen = holdingReplies(client, 'acquire');
      const options = { prefix: prefix(`reset-again-${name}`), clock: () => now };
      // The held acquire times out; the reset must not (it did at 50 ms, on a stall of the machine).
      const limiter = new RedisLimiter(seen.client, make(), { ...options, onError: 'open', commandTimeoutMs: LATE_MS });
      assert.equal((await limiter.peek('k', 0)).fromStore, true); // the script is loaded
      // Redis takes the unit; its reply is late, and onError answers.
      assert.equal((await limiter.tryAcquire('k')).fromStore, false);
      assert.equal(await limiter.reset('k'), true);
      const other = new RedisLimiter(client, make(), options);
      assert.equal((await other.tryAcquire('k')).allowed, true);
      seen.release();
      await until(() => seen.sent.acquire.length > 0);
      await Promise.all(seen.sent.acquire);
      // The give-back, if any, is sent as the reply comes, before the next turn.
      await new Promise(setImmediate);
      await Promise.all(seen.refunds);
      assert.equal((await other.peek('k')).allowed, false, name);
    }
  }));

test('acquire rejects at its abort while the booking is in flight, and gives the booking back when it comes', () =>
  withClient('ioredis', async (client) => {
    const minute = new RedisLimiter(slowed(client, 400), new rk.Gcra({ burst: 1, emissionIntervalMs: 60_000 }), {
      prefix: prefix('abort-in-flight'),
      commandTimeoutMs: 5_000,
    });
    await minute.tryAcquire('k');
    const controller = new AbortController();
    const pending = minute.acquire('k', 1, { signal: controller.signal });
    const started = performance.now();
    setTimeout(() => controller.abort(new Error('stop')), 50);
    await assert.rejects(pending, { message: 'stop' });
    // It waited for the round trip (450 ms) before.
    const took = performance.now() - started;
    assert.ok(took < 300, `rejected after ${took} ms`);
    await until(async () => (await minute.peek('k')).retryAfterMs <= 60_000);
  }));

test('an acquire aborted while its booking is in flight, which then fails, asks nothing of the onError limiter', async () => {
  // The caller left: a fallback asked now would book for nobody (a key
  // made in a KeyedLimiter, its unit given back at once).
  let fail;
  let sent = 0;
  const failing = {
    sendCommand: () => {
      sent += 1;
      return new Promise((_, reject) => {
        fail = reject;
      });
    },
  };
  const fallback = new rk.KeyedLimiter(new rk.Gcra({ burst: 1, emissionIntervalMs: 1000 }));
  const limiter = new RedisLimiter(failing, new rk.Gcra({ burst: 1, emissionIntervalMs: 1000 }), { onError: fallback, commandTimeoutMs: HOUR });
  const controller = new AbortController();
  const pending = limiter.acquire('k', 1, { signal: controller.signal });
  await until(() => sent === 1);
  controller.abort(new Error('stop'));
  await assert.rejects(pending, { message: 'stop' });
  fail(new Error('connect ECONNREFUSED'));
  for (let i = 0; i < 5; i++) await new Promise(setImmediate);
  assert.equal(sent, 1);
  assert.equal(fallback.size, 0);
});

test('one caller of a batch whose request only the fallback reads badly fails alone, at once', () =>
  withClient('ioredis', async (client) => {
    // Redis: per user; the fallback: per user and ip. Redis goes away after
    // the first call; the next batch, a good request, is decided by the
    // fallback. One whose ip is no key is refused at the call, as an
    // in-process Policy refuses it (it was sent, and refused by the
    // fallback alone once Redis was down; decided while Redis was up).
    const fallback = new rk.Policy({ limits: [{ name: 'per-ip', rate: '5/second', by: ['user', 'ip'] }] });
    const config = { limits: [{ name: 'per-user', rate: '100/second', by: ['user'] }] };
    const policy = new RedisPolicy(client, config, { prefix: prefix('fallback-error'), onError: fallback });
    const first = policy.tryAcquire({ user: 'u', ip: '10.0.0.1' });
    const good = policy.tryAcquire({ user: 'u', ip: '10.0.0.2' });
    const bad = assert.rejects(policy.tryAcquire({ user: 'u', ip: { not: 'an ip' } }), {
      name: 'TypeError',
      code: 'invalid_type',
      message: '`request.ip` must be a string, a number or a Uint8Array',
    });
    first.then(() => client.disconnect());
    assert.equal((await first).fromStore, true);
    const answer = await good;
    assert.deepEqual([answer.allowed, answer.fromStore], [true, false]);
    await bad;
    assert.equal(fallback.peek({ user: 'u', ip: '10.0.0.2' }, 0).remaining, 4);
  }));

test('a batch of 150,000 costs on ioredis is decided by Redis', () =>
  withClient('ioredis', async (client) => {
    // Spread into one call's arguments, it overflowed V8's stack: a
    // RangeError taken for an outage, and onError ('open') allowed all.
    const limiter = new RedisLimiter(client, new rk.FixedWindow({ limit: 100, windowMs: HOUR }), {
      prefix: prefix('big-batch'),
      onError: 'open',
      commandTimeoutMs: 10_000,
    });
    const decisions = await limiter.tryAcquireBatch('k', new Array(150_000).fill(1));
    assert.equal(decisions.length, 150_000);
    assert.ok(decisions.every((d) => d.fromStore));
    assert.equal(decisions.filter((d) => d.allowed).length, 100);
  }));

test('a node-redis 4 client in legacyMode decides through its promise API', async () => {
  const { createClient } = require('redis4');
  const client = createClient({ url: process.env.RATEKEEPER_REDIS_URL, legacyMode: true });
  client.on('error', () => {});
  await client.connect();
  try {
    const limiter = new RedisLimiter(client, new rk.Gcra({ burst: 2, emissionIntervalMs: 100 }), { prefix: prefix('legacy') });
    const d = await limiter.tryAcquire('k');
    assert.deepEqual([d.allowed, d.remaining, d.limit, d.fromStore], [true, 1, 2, true]);
  } finally {
    await client.v4.quit().catch(() => client.v4.disconnect());
  }
});

test("a reply that is not the script's is refused, not answered by onError", async () => {
  // A client resolving every command to 'OK' (a wrapper, a mock): its
  // replies read as NaN decisions from the store.
  const fake = { evalsha() {}, call: async () => 'OK' };
  const limiter = new RedisLimiter(fake, new rk.Gcra({ burst: 2, emissionIntervalMs: 100 }), { prefix: prefix('fake'), onError: 'open' });
  await assert.rejects(limiter.tryAcquire('k'), { code: 'invalid_reply' });
  await assert.rejects(limiter.peek('k'), { code: 'invalid_reply' });
});

test("a hot key's queue ends with its last round trip: calls on many keys leave no memory behind", async () => {
  require('node:v8').setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc');
  // A client whose script allows every cost at once, as a text reply; ARGV
  // (after the command, SHA, 1 and the key): version, mode, now, 1, 'gcra',
  // burst, interval, then the number of costs.
  const allowing = { sendCommand: async (command) => `1000${' 1 0 9 10 0 0'.repeat(Number(command[11]))}` };
  const limiter = new RedisLimiter(allowing, new rk.Gcra({ burst: 10, emissionIntervalMs: 1000 }), { prefix: prefix('queues') });
  const heapUsed = async () => {
    for (let i = 0; i < 5; i++) {
      gc();
      await new Promise(setImmediate);
    }
    return process.memoryUsage().heapUsed;
  };
  const calls = async (from, count) => {
    for (let i = from; i < from + count; i += 1000) {
      const ds = await Promise.all(Array.from({ length: 1000 }, (_, j) => limiter.tryAcquire(`key-${i + j}`)));
      assert.ok(ds.every((d) => d.allowed && d.fromStore));
    }
  };
  await calls(0, 10_000);
  const before = await heapUsed();
  // Each key's queue kept held some 190 bytes: 9 MB for these.
  await calls(10_000, 50_000);
  const grown = (await heapUsed()) - before;
  assert.ok(grown < 3 * 2 ** 20, `the heap grew by ${grown} bytes`);
});

test('a refund above the limit gives back what was taken, as in-process (not cost_exceeds_limit)', () =>
  withClient('ioredis', async (client) => {
    const make = () => new rk.Gcra({ burst: 5, emissionIntervalMs: 1000 });
    const local = make();
    const remote = new RedisLimiter(client, make(), { prefix: prefix('refund-over') });
    for (let i = 0; i < 3; i++) {
      assert.equal(local.tryAcquire(1, T0).allowed, true);
      assert.equal((await remote.tryAcquire('k', 1, T0)).allowed, true);
    }
    local.refund(100, T0);
    await remote.refund('k', 100, T0);
    // Beyond a safe integer: refused as in-process, with the same code.
    assert.throws(() => local.refund(2 ** 53, T0), { name: 'RangeError', code: 'invalid_value' });
    await assert.rejects(remote.refund('k', 2 ** 53, T0), { name: 'RangeError', code: 'invalid_value' });
    for (let i = 0; i < 6; i++) {
      const want = local.tryAcquire(1, T0);
      const got = await remote.tryAcquire('k', 1, T0);
      assert.deepEqual([got.allowed, got.remaining], [want.allowed, want.remaining]);
    }
  }));

test('a cost past a safe integer is invalid_value in every method, as in-process and as refund, not cost_exceeds_limit', () =>
  withClient('ioredis', async (client) => {
    // tryAcquire, peek, reserve, acquire and batches compared such a cost
    // with the limit first, where the in-process classes, and refund, refuse
    // it as no count a JS number holds exactly.
    const make = () => new rk.Gcra({ burst: 5, emissionIntervalMs: 1000 });
    const local = new rk.KeyedLimiter(make());
    const localPolicy = new rk.Policy('5/second');
    const limiter = new RedisLimiter(client, make(), { prefix: prefix('big-cost') });
    const policy = new RedisPolicy(client, '5/second', { prefix: prefix('big-cost') });
    for (const [big, code] of [[2 ** 53, 'invalid_value'], [2 ** 60, 'invalid_value'], [2 ** 53 - 1, 'cost_exceeds_limit']]) {
      const calls = {
        tryAcquire: [() => local.tryAcquire('k', big), () => limiter.tryAcquire('k', big)],
        peek: [() => local.peek('k', big), () => limiter.peek('k', big)],
        reserve: [() => local.reserve('k', big), () => limiter.reserve('k', big)],
        acquire: [() => local.acquire('k', big), () => limiter.acquire('k', big)],
        tryAcquireBatch: [() => local.tryAcquireBatch('k', [big]), () => limiter.tryAcquireBatch('k', [big])],
        policy: [() => localPolicy.tryAcquire({}, big), () => policy.tryAcquire({}, big)],
      };
      for (const [name, [inProcess, remote]] of Object.entries(calls)) {
        await assert.rejects(async () => inProcess(), { name: 'RangeError', code, message: /cost/ }, `${name} ${big} in-process`);
        await assert.rejects(remote(), { name: 'RangeError', code, message: /cost/ }, `${name} ${big}`);
      }
    }
    await assert.rejects(limiter.refund('k', 2 ** 53), { name: 'RangeError', code: 'invalid_value', message: /cost/ });
  }));

test('acquire refuses a signal that is not an AbortSignal before booking, as in-process', () =>
  withClient('ioredis', async (client) => {
    // `{ aborted: false }` passed the check, the booking went to Redis, and
    // the wait failed on `signal.addEventListener` (a TypeError without a
    // code): the unit stayed booked, given back to nobody.
    const make = () => new rk.FixedWindow({ limit: 2, windowMs: HOUR });
    const limiter = new RedisLimiter(client, make(), { prefix: prefix('bad-signal') });
    const signal = { aborted: false };
    await assert.rejects(new rk.KeyedLimiter(make()).acquire('k', 1, { signal }), { name: 'TypeError', code: 'invalid_type', message: /signal/ });
    await assert.rejects(limiter.acquire('k', 1, { signal }), { name: 'TypeError', code: 'invalid_type', message: /signal/ });
    assert.equal((await limiter.peek('k', 0)).remaining, 2);
  }));

test('a batch refuses a cost that is not a number (null, undefined, a hole), as in-process, taking nothing', () =>
  withClient('ioredis', async (client) => {
    // Each was read as the default cost, 1 (a hole reached the script as
    // 'undefined' and failed there, uncoded).
    const make = () => new rk.FixedWindow({ limit: 3, windowMs: HOUR });
    const local = new rk.KeyedLimiter(make());
    const limiter = new RedisLimiter(client, make(), { prefix: prefix('batch-costs') });
    for (const costs of [[1, undefined], [1, null], [1, , 1]]) {
      assert.throws(() => local.tryAcquireBatch('k', costs), { name: 'TypeError', code: 'invalid_type', message: /costs/ });
      await assert.rejects(limiter.tryAcquireBatch('k', costs), { name: 'TypeError', code: 'invalid_type', message: /costs/ });
    }
    assert.equal((await limiter.peek('k', 0)).remaining, 3);
  }));

test("a policy's configuration is read as Policy reads it: own fields, through JSON", () =>
  withClient('ioredis', async (client) => {
    // The limits were read from the object as it is: an inherited `burst`
    // set Redis's capacity (the in-process policy, whose headers are sent,
    // reads own fields only); a BigInt or boxed `burst`, or a toJSON, which
    // Policy reads through JSON, were refused (`capacity`) or threw uncoded.
    const item = (fields, proto = {}) => Object.assign(Object.create(proto), { name: 'a', rate: '4/hour', ...fields });
    const configs = {
      'an inherited burst': { limits: [item({}, { burst: 1 })] },
      'a BigInt burst': { limits: [item({ burst: 2n })] },
      'a boxed burst': { limits: [item({ burst: Object(2) })] },
      'a toJSON': { toJSON: () => ({ limits: [{ name: 'a', rate: '2/hour' }] }) },
    };
    for (const [what, config] of Object.entries(configs)) {
      const local = new rk.Policy(config);
      const remote = new RedisPolicy(client, config, { prefix: prefix('config-read') });
      const want = [];
      const got = [];
      for (let i = 0; i < 5; i++) {
        want.push(local.tryAcquire({}, 1, T0).allowed);
        got.push((await remote.tryAcquire({}, 1, T0)).allowed);
      }
      assert.deepEqual(got, want, what);
    }
  }));

test("a fallback Policy decides for the request's fields at the call, as in-process, though the caller changes it after", async () => {
  // The fallback read the request object when Redis had failed, a round
  // trip later: a caller reusing one object for the next call had the
  // first call decided (and counted) for the next one's user.
  const down = { sendCommand: () => Promise.reject(new Error('The client is closed')) };
  const local = new rk.Policy('1/hour', { by: ['user'] });
  const fallback = new rk.Policy('1/hour', { by: ['user'] });
  const policy = new RedisPolicy(down, '10/hour', { by: ['user'], onError: fallback });
  const want = [];
  const calls = [];
  const request = { user: 'a' };
  for (const user of ['a', 'b']) {
    request.user = user;
    want.push(local.tryAcquire(request).allowed);
    calls.push(policy.tryAcquire(request));
  }
  const got = await Promise.all(calls);
  assert.deepEqual(got.map((d) => [d.allowed, d.fromStore]), want.map((allowed) => [allowed, false]));
  assert.deepEqual([fallback.peek({ user: 'a' }, 0).remaining, fallback.peek({ user: 'b' }, 0).remaining], [0, 0]);
});

test('a duration of a week or more and a fraction of a microsecond is refused, as the Python client refuses it', () => {
  // The bound on ms * 1000's rounding grew with the duration (2^-40 of it):
  // half a microsecond passed from a week on, and Redis decided on a window
  // rounded to whole µs, another than the in-process limiter's.
  const client = { call() {}, evalsha() {} };
  const week = 7 * 86_400_000;
  for (const ms of [week + 0.0005, 30 * 86_400_000 + 0.0004]) {
    const refused = (limiter, name) => assert.throws(() => new RedisLimiter(client, limiter), { name: 'RangeError', code: 'invalid_value', message: new RegExp(`^\`${name}\` must be a whole number of microseconds`) }, `${name} ${ms}`);
    refused(new rk.FixedWindow({ limit: 2, windowMs: ms }), 'windowMs');
    refused(new rk.Gcra({ burst: 2, emissionIntervalMs: ms }), 'emissionIntervalMs');
    refused(new rk.TokenBucket({ capacity: 2, refillTokens: 1, refillPeriodMs: ms }), 'refillPeriodMs');
  }
  // Whole microseconds pass, however long, whatever the float's rounding.
  for (const ms of [week, 30 * 86_400_000 + 0.001, 2 ** 50 / 1000, 1.1, 0.001]) new RedisLimiter(client, new rk.FixedWindow({ limit: 2, windowMs: ms }));
});

test('acquire with a signal whose removeEventListener throws waits and resolves, as in-process', () =>
  withClient('ioredis', async (client) => {
    // The signal passes the check (its functions are there), and the wait
    // stopped listening unguarded: from the booking's round trip's answer
    // (abortable: the acquire never settled, its rejection unhandled), and
    // from the sleep's timer (an uncaught exception, ending a Node
    // process). The in-process acquire and pacedFetch guard both.
    const make = () => new rk.Gcra({ burst: 1, emissionIntervalMs: 50 });
    const limiter = new RedisLimiter(client, make(), { prefix: prefix('unlisten') });
    const signal = {
      aborted: false,
      addEventListener() {},
      removeEventListener() {
        throw new Error('removeEventListener of another realm');
      },
    };
    const local = new rk.KeyedLimiter(make());
    await local.acquire('k', 1, { signal });
    await local.acquire('k', 1, { signal }); // waits for its slot
    await limiter.acquire('k', 1, { signal });
    await limiter.acquire('k', 1, { signal }); // waits for its slot
  }));

/**
 * A limiter of one per minute whose next slot is known: `given back()`
 * waits until the slot is free again (a booking of it given back) and
 * checks it is that slot. `unhandled` collects unhandled rejections while
 * `body` runs, and must stay empty.
 */
async function withBookedMinute(client, name, body) {
  const minute = new RedisLimiter(client, new rk.Gcra({ burst: 1, emissionIntervalMs: 60_000 }), { prefix: prefix(name) });
  await minute.tryAcquire('k');
  const slot = (await minute.reserve('k', 1, 120_000)).atMs;
  await minute.refund('k', 1, slot);
  const givenBack = async (what) => {
    await until(async () => (await minute.peek('k')).retryAfterMs <= 60_000);
    assert.equal((await minute.reserve('k', 1, 120_000)).atMs, slot, what);
    await minute.refund('k', 1, slot);
  };
  const unhandled = [];
  const onUnhandled = (reason) => unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  try {
    await body(minute, givenBack);
    assert.deepEqual(unhandled, []);
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
}

test('acquire with a signal whose addEventListener throws rejects with its error and gives the booking back, as in-process', () =>
  withClient('ioredis', async (client) => {
    // The signal passes the check, the booking goes to Redis, and listening
    // during its round trip threw: the acquire rejected, and the booking,
    // when it came, was dropped, a slot booked for nobody (the next unit a
    // minute later than it should be). Listening for the sleep threw after
    // its timer was armed, which then held the process for the whole wait.
    return withBookedMinute(client, 'add-listener', async (minute, givenBack) => {
      // Throwing every time: the round trip goes unlistened, the sleep's listening fails.
      let refused = 0;
      const refusing = {
        aborted: false,
        addEventListener() {
          refused += 1;
          throw new Error('no listeners here');
        },
        removeEventListener() {},
      };
      await assert.rejects(minute.acquire('k', 1, { signal: refusing }), { message: 'no listeners here' });
      assert.equal(refused, 2);
      await givenBack('for the sleep, never listened to');
      // Aborted during the unlistened round trip: read on its reply.
      const unheard = { ...refusing, reason: new Error('aborted unheard') };
      const pending = minute.acquire('k', 1, { signal: unheard });
      unheard.aborted = true;
      await assert.rejects(pending, { message: 'aborted unheard' });
      await givenBack('aborted during the round trip');
      // Throwing from its second listener on: the sleep's.
      let listeners = 0;
      const flaky = {
        aborted: false,
        addEventListener() {
          listeners += 1;
          if (listeners > 1) throw new Error('one listener only');
        },
        removeEventListener() {},
      };
      const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
      const before = timers();
      await assert.rejects(minute.acquire('k', 1, { signal: flaky }), { message: 'one listener only' });
      assert.equal(listeners, 2);
      await until(async () => (await minute.peek('k')).retryAfterMs <= 60_000);
      // (The give-back's round trip answered, its timer is gone too.)
      assert.equal(timers(), before, 'no timer left for the wait');
      await givenBack('for the sleep');
    });
  }));

test('acquire granted at once resolves though its signal cannot be listened to, as in-process, the units kept', () =>
  withClient('ioredis', async (client) => {
    // Listening during the booking's round trip threw, and the acquire
    // rejected with that error, though Redis had granted the units at once
    // (given back on the reply): the in-process acquire listens only to
    // wait for a slot, and resolves.
    const refusing = { aborted: false, addEventListener() { throw new Error('no listeners here'); }, removeEventListener() {} };
    const local = new rk.KeyedLimiter(new rk.FixedWindow({ limit: 2, windowMs: HOUR }));
    const localPolicy = new rk.Policy('2/hour', { algorithm: 'fixed_window' });
    const limiter = new RedisLimiter(client, new rk.FixedWindow({ limit: 2, windowMs: HOUR }), { prefix: prefix('refusing-now') });
    const policy = new RedisPolicy(client, '2/hour', { algorithm: 'fixed_window', prefix: prefix('refusing-now') });
    await local.acquire('k', 1, { signal: refusing });
    await localPolicy.acquire({}, 1, { signal: refusing });
    await limiter.acquire('k', 1, { signal: refusing });
    await policy.acquire({}, 1, { signal: refusing });
    assert.deepEqual(
      [local.peek('k', 0).remaining, localPolicy.peek({}, 0).remaining, (await limiter.peek('k', 0)).remaining, (await policy.peek({}, 0)).remaining],
      [1, 1, 1, 1],
    );
  }));

test('acquire with a signal whose `aborted` getter throws rejects with its error and gives the booking back, as in-process', () =>
  withClient('ioredis', async (client) => {
    // Read while the booking's round trip runs, the throw escaped: on the
    // reply, from a callback of its own, as an unhandled rejection (which
    // ends a Node process), the acquire pending for ever and the slot booked
    // for nobody; before it, the acquire rejected and the booking, when it
    // came, was dropped. A throw reads as not aborted, as the in-process
    // waiters read one; the sleep's read then fails the acquire.
    return withBookedMinute(client, 'aborted-getter', async (minute, givenBack) => {
      // Reads 1 and 2 check the signal before booking; 3 is as the round trip starts, 4 on its reply.
      for (const throwFrom of [3, 4]) {
        let reads = 0;
        const signal = {
          get aborted() {
            reads += 1;
            if (reads >= throwFrom) throw new Error('aborted getter');
            return false;
          },
          reason: new Error('aborted'),
          addEventListener() {},
          removeEventListener() {},
        };
        let outcome;
        minute.acquire('k', 1, { signal }).then(
          () => (outcome = 'resolved'),
          (error) => (outcome = error.message),
        );
        await until(() => outcome !== undefined, 15_000, () => `acquire settles (getter throwing from read ${throwFrom})`);
        assert.equal(outcome, 'aborted getter', `read ${throwFrom}`);
        await givenBack(`given back (read ${throwFrom})`);
      }
    });
  }));

test('acquire aborted while it sleeps by a signal whose `reason` getter throws rejects with that error and gives the booking back', () =>
  withClient('ioredis', async (client) => {
    // The abort listener read `reason` as it rejected: the throw escaped
    // the listener, its timer already cleared, and the acquire stayed
    // pending for ever, its slot booked for nobody.
    return withBookedMinute(client, 'reason-getter', async (minute, givenBack) => {
      const listeners = new Set();
      let aborted = false;
      const signal = {
        get aborted() {
          return aborted;
        },
        get reason() {
          throw new Error('reason getter');
        },
        addEventListener: (_, listener) => listeners.add(listener),
        removeEventListener: (_, listener) => listeners.delete(listener),
      };
      let outcome;
      minute.acquire('k', 1, { signal }).then(
        () => (outcome = 'resolved'),
        (error) => (outcome = error.message),
      );
      // Booked, and sleeping until the slot: listened to by the sleep.
      await until(async () => (await minute.peek('k')).retryAfterMs > 60_000 && listeners.size === 1);
      aborted = true;
      assert.doesNotThrow(() => [...listeners].forEach((listener) => listener()));
      await until(() => outcome !== undefined, 15_000, () => 'acquire settles');
      assert.equal(outcome, 'reason getter');
      await givenBack('after the abort');
    });
  }));
