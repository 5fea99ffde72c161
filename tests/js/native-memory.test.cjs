'use strict';
// The napi addon's memory shared with JS (bindings-node/src/memory.rs): the
// scratch and a policy's details. JS can get hold of those arrays (getters
// of %TypedArray%.prototype it replaced see them: `buffer` as the package
// loads, `length` as a policy is fitted) and try to detach their
// ArrayBuffer (structuredClone with transfer, ArrayBuffer.prototype.transfer);
// the addon must never read or write memory that was freed (the new owner
// collected). Where the runtime refuses the detach (Node 20's structuredClone
// copies an external buffer instead) every answer stays right; where it
// detaches one, and where RATEKEEPER_NO_EXTERNAL_BUFFERS makes the addon
// hand JS arrays of JS's own, which do detach (the path of runtimes that
// forbid external buffers), the operations that need a detached view throw
// a coded error. The last test runs this file and two suites again that way.
const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');

const napi = (process.env.RATEKEEPER_IMPL || 'napi') === 'napi';
// Whether the addon shares its own memory with JS (else JS's arrays, copied).
const shared = process.env.RATEKEEPER_NO_EXTERNAL_BUFFERS === undefined;

/**
 * `f()`, or the coded error it throws where a view of JS's own was
 * detached, or `view` (a view JS took of the addon's memory) was.
 */
function answerOrCodedError(f, view) {
  if (shared && (view === undefined || view.length > 0)) return f();
  try {
    return f();
  } catch (error) {
    assert.ok((error instanceof TypeError || error instanceof RangeError) && typeof error.code === 'string', String(error));
    return 'refused';
  }
}

/**
 * Runs `f` with %TypedArray%.prototype's `length` and `buffer` getters
 * spied on; returns the Float64Arrays of length `n` they saw.
 */
function caughtArrays(n, f) {
  const TA = Object.getPrototypeOf(Float64Array.prototype);
  const descriptors = ['length', 'buffer'].map((name) => [name, Object.getOwnPropertyDescriptor(TA, name)]);
  const length = descriptors[0][1].get;
  const seen = new Set();
  for (const [name, descriptor] of descriptors) {
    Object.defineProperty(TA, name, {
      configurable: true,
      get() {
        if (this instanceof Float64Array && length.call(this) === n) seen.add(this);
        return descriptor.get.call(this);
      },
    });
  }
  try {
    f();
  } finally {
    for (const [name, descriptor] of descriptors) Object.defineProperty(TA, name, descriptor);
  }
  return [...seen];
}

/**
 * `ArrayBuffer.prototype.transfer` (which detaches the buffer it is called
 * on, an external one too), from a new context where Node 20 has it only
 * behind a flag; undefined where neither has it.
 */
function transferMethod() {
  if (typeof ArrayBuffer.prototype.transfer === 'function') return ArrayBuffer.prototype.transfer;
  require('node:v8').setFlagsFromString('--harmony-rab-gsab-transfer');
  return require('node:vm').runInNewContext('ArrayBuffer.prototype.transfer');
}

/** A fresh copy of the package, so that other tests' views are left alone. */
function freshApi() {
  const dir = path.join(__dirname, '../../bindings-node');
  for (const file of ['index.js', 'lib/api.cjs']) delete require.cache[path.join(dir, file)];
  return require(path.join(dir, 'index.js'));
}

/** The buffer of `array` moved away (or copied, where the runtime will not detach it). */
function transferred(array) {
  return structuredClone(array.buffer, { transfer: [array.buffer] });
}

function collectGarbage() {
  require('node:v8').setFlagsFromString('--expose-gc');
  require('node:vm').runInNewContext('gc')();
}

/**
 * Runs `operate(round)` `rounds` times, each between allocations of
 * Float64Arrays of `n` numbers, and returns how many of those the addon
 * wrote into (memory freed under it and reused).
 */
function writtenIntoFresh(n, rounds, operate) {
  const fresh = [];
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < 10; i++) fresh.push(new Float64Array(n));
    operate(round);
  }
  return fresh.filter((array) => array.some((x) => x !== 0)).length;
}

// The napi build only (the wasm build's arrays are views of its own memory).
if (napi) {
  describe('the addon and detached shared arrays', () => {
    it("answers a policy right, in memory of its own, after JS took the details' buffer", () => {
      const api = freshApi();
      let policy;
      const [details] = caughtArrays(2 + 5 * 4, () => {
        policy = new api.Policy('1/second;2/second;3/second;4/second');
      });
      assert.ok(details, 'the details array was not seen');
      let moved = new Float64Array(transferred(details));
      const remaining = (at) => answerOrCodedError(() => policy.tryAcquire({}, 1, at).limits.map((l) => l.remaining));
      const right = (got) => got === 'refused' || got.join() === '0,1,2,3';
      assert.ok(right(remaining(5000)));
      moved = null;
      collectGarbage();
      // A second apart: every limit full again at each.
      const wrong = [];
      const hit = writtenIntoFresh(2 + 5 * 4, 500, (round) => {
        const got = remaining(6000 + 1000 * round);
        if (!right(got)) wrong.push(got);
      });
      assert.equal(hit, 0, 'the addon wrote into memory freed under it');
      assert.deepEqual(wrong, []);
      assert.equal(moved, null);
    });

    it('answers right after JS took the scratch while an operation was under way', () => {
      let api;
      const [scratch] = caughtArrays(86, () => {
        api = freshApi();
      });
      assert.ok(scratch, 'the scratch was not seen');
      // A key that is not ASCII is checked (isWellFormed) before its
      // arguments are written: take the scratch's buffer then, as a
      // replaced isWellFormed could.
      const limiter = new api.KeyedLimiter(new api.Gcra({ burst: 5, emissionIntervalMs: 1000 }));
      const isWellFormed = String.prototype.isWellFormed;
      let moved = null;
      String.prototype.isWellFormed = function () {
        if (moved === null) moved = new Float64Array(transferred(scratch));
        return isWellFormed.call(this);
      };
      let first;
      try {
        first = answerOrCodedError(() => limiter.tryAcquire('b\u00e9', 1, 0).remaining, scratch);
      } finally {
        String.prototype.isWellFormed = isWellFormed;
      }
      assert.ok(moved !== null);
      assert.ok(first === 4 || first === 'refused', "'b\u00e9' answered for itself");
      moved = null;
      collectGarbage();
      const wrong = [];
      const hit = writtenIntoFresh(86, 500, (round) => {
        const key = `k${round}`;
        const got = answerOrCodedError(() => [limiter.tryAcquire(key, 1, 0).remaining, limiter.tryAcquire(key, 2, 0).remaining], scratch);
        if (got !== 'refused' && got.join() !== '4,2') wrong.push(got);
      });
      assert.equal(hit, 0, 'the addon wrote into memory freed under it');
      assert.deepEqual(wrong, []);
    });

    it('answers right when every view of the scratch and the details was taken before an operation', () => {
      let api;
      const [scratch] = caughtArrays(86, () => {
        api = freshApi();
      });
      const bucket = new api.TokenBucket({ capacity: 10, refillTokens: 1, refillPeriodMs: 1000 });
      bucket.tryAcquire(1, 0);
      bucket.tryAcquire(1, 0);
      let policy;
      const [details] = caughtArrays(2 + 5 * 4, () => {
        policy = new api.Policy('1/second;2/second;3/second;4/second');
      });
      assert.ok(details && scratch);
      transferred(details);
      transferred(scratch);
      if (!shared) {
        assert.equal(answerOrCodedError(() => bucket.tryAcquire(1, 0)), 'refused');
        return;
      }
      assert.equal(bucket.tryAcquire(1, 0).remaining, 7);
      assert.deepEqual(
        policy.tryAcquire({}, 1, 0).limits.map((l) => l.remaining),
        [0, 1, 2, 3],
      );
      assert.equal(bucket.peek(1, 0).remaining, 6);
    });

    it('refuses the operations of a scratch JS detached, rather than repeat the last one on its limiter', () => {
      // The addon read a call's arguments from its memory, where JS's writes
      // through a detached view never land: each later call was the last
      // one again, taking that call's cost from that call's limiter, and
      // answered `{ allowed: false }` with no numbers.
      const transfer = transferMethod();
      let api;
      const [scratch] = caughtArrays(86, () => {
        api = freshApi();
      });
      assert.ok(scratch, 'the scratch was not seen');
      const make = () => new api.TokenBucket({ capacity: 10, refillTokens: 1, refillPeriodMs: 1000 });
      const [mine, last, twin] = [make(), make(), make()];
      last.tryAcquire(3, 0);
      twin.tryAcquire(3, 0);
      transfer.call(scratch.buffer);
      assert.equal(scratch.length, 0, 'the buffer was not detached');
      for (let i = 0; i < 3; i++) {
        assert.throws(
          () => mine.tryAcquire(1, 0),
          (error) => error instanceof TypeError && error.code === 'invalid_type',
        );
      }
      const keyed = new api.KeyedLimiter(make());
      assert.throws(() => keyed.tryAcquire('a', 1, 0), (error) => error.code === 'invalid_type');
      // Read outside the scratch: the last call's limiter kept its state.
      assert.deepEqual(last.toBytes(), twin.toBytes());
      assert.deepEqual(mine.toBytes(), make().toBytes());
    });

    it('frees its memory with each worker that used it', async () => {
      const { Worker } = require('node:worker_threads');
      const source = `
        const api = require(${JSON.stringify(path.join(__dirname, '../../bindings-node/index.js'))});
        const policy = new api.Policy(Array.from({ length: 30 }, (_, i) => (i + 1) + '/second').join(';'));
        const bucket = new api.TokenBucket({ capacity: 3, refillTokens: 1, refillPeriodMs: 1000 });
        require('node:worker_threads').parentPort.postMessage([
          bucket.tryAcquire(1, 0).remaining,
          policy.tryAcquire({}, 1, 0).limits[29].remaining,
        ]);`;
      for (let i = 0; i < 6; i++) {
        const worker = new Worker(source, { eval: true });
        const [answer] = await Promise.all([
          new Promise((resolve, reject) => worker.once('message', resolve).once('error', reject)),
          new Promise((resolve) => worker.once('exit', resolve)),
        ]);
        assert.deepEqual(answer, [2, 29]);
      }
    });

    if (shared) {
      it('does all this too where the runtime forbids external buffers (arrays of JS, copied)', () => {
        const { spawnSync } = require('node:child_process');
        const env = { ...process.env, RATEKEEPER_NO_EXTERNAL_BUFFERS: '1' };
        delete env.NODE_TEST_CONTEXT; // a run of its own, not a subtest of this one
        const files = ['native-memory.test.cjs', 'api.test.cjs', 'policy.test.cjs'].map((f) => path.join(__dirname, f));
        const run = spawnSync(process.execPath, ['--test', '--test-reporter=dot', ...files], { env, encoding: 'utf8' });
        assert.equal(run.status, 0, `${run.stdout}\n${run.stderr}`);
      });
    } else {
      it('hands JS arrays that detach, and then refuses the operations that need them', () => {
        let api;
        const [scratch] = caughtArrays(86, () => {
          api = freshApi();
        });
        const bucket = new api.TokenBucket({ capacity: 10, refillTokens: 1, refillPeriodMs: 1000 });
        transferred(scratch);
        assert.equal(scratch.length, 0, 'the copying path hands over arrays of JS');
        assert.equal(answerOrCodedError(() => bucket.tryAcquire(1, 0)), 'refused');
      });
    }
  });
}

if (napi) {
  describe('native memory V8 is told of', () => {
    it('collects dropped sliding-window logs while it runs, a large ring counting as memory', async () => {
      // Never told of a log's ring (2^20 units: 32 MiB), V8 collected a
      // dropped log no sooner than any small object: in the review's run,
      // none of 200 dropped logs was collected, and memory grew without bound.
      const { SlidingWindowLog } = require('../../bindings-node/index.js');
      let collected = 0;
      const watch = new FinalizationRegistry(() => collected++);
      for (let i = 0; i < 40 && collected === 0; i++) {
        watch.register(new SlidingWindowLog({ limit: 2 ** 20, windowMs: 60_000 }), i);
        await new Promise((resolve) => setImmediate(resolve)); // a turn: finalizers may run
      }
      for (let i = 0; i < 20 && collected === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.ok(collected > 0, 'no dropped log was collected');
    });
  });
}

if (napi) {
  describe('native memory V8 is told of, after a reconfigure', () => {
    it('collects dropped logs whose ring a reconfigure made large', async () => {
      // A log built with a small limit, then reconfigured to 2^20, holds a
      // 32 MiB ring V8 must hear of, as one built that large does.
      const { SlidingWindowLog } = require('../../bindings-node/index.js');
      const large = new SlidingWindowLog({ limit: 2 ** 20, windowMs: 60_000 });
      let collected = 0;
      const watch = new FinalizationRegistry(() => collected++);
      for (let i = 0; i < 40 && collected === 0; i++) {
        const log = new SlidingWindowLog({ limit: 1, windowMs: 60_000 });
        log.reconfigure(large, 0);
        watch.register(log, i);
        await new Promise((resolve) => setImmediate(resolve));
      }
      for (let i = 0; i < 20 && collected === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.ok(collected > 0, 'no dropped log was collected');
      assert.ok(large instanceof SlidingWindowLog); // kept alive to the end
    });
  });
}

if (napi) {
  describe('native memory V8 is told of, for keyed stores and policies', () => {
    // What V8 was told (napi_adjust_external_memory): the tables of keys grow
    // and shrink on the hot path, which must tell it too, or V8 collects a
    // dropped store holding megabytes no sooner than any small object.
    const { externalMemory } = require('../../bindings-node/native.js');
    const KEYS = 50_000;
    // Other native memory (array buffers) may move a little meanwhile.
    const SLACK = 256 * 1024;

    for (const [name, make, decide, reclaim] of [
      [
        'a keyed store',
        (api) => new api.KeyedLimiter(new api.Gcra({ burst: 5, emissionIntervalMs: 1_000 })),
        (store, i) => store.tryAcquire(`client-${i}`, 1, 0),
        (store) => store.reclaim(1e9),
      ],
      [
        'a policy',
        (api) => new api.Policy('10/second;100/minute', { by: ['user'] }),
        (policy, i) => policy.tryAcquire({ user: `client-${i}` }, 1, 0),
        (policy) => policy.reclaim(1e9),
      ],
    ]) {
      it(`${name}: its keys' table as it grows, and as reclaim shrinks it`, () => {
        const api = freshApi(); // where the addon copies the scratch, it reads the newest copy's
        const before = externalMemory();
        const store = make(api);
        for (let i = 0; i < KEYS; i++) decide(store, i);
        // At least a 4-byte position and a 16-byte state per key, per limit.
        const grown = externalMemory() - before;
        assert.ok(grown >= KEYS * 20, `V8 was told of ${grown} bytes for ${KEYS} keys`);
        reclaim(store);
        const left = externalMemory() - before;
        assert.ok(Math.abs(left) < SLACK, `V8 still counts ${left} bytes once every key is gone`);
      });
    }

    it("a Policy or RedisPolicy built from a keyed log takes its configuration, not a log's ring allocated whole", () => {
      // Through `keyed.limiter`, each took a limiter that decides, its ring
      // of 2 * limit 16-byte entries allocated whole (32 MiB here), only to
      // read its configuration and let it go.
      const { RedisPolicy } = require('../../bindings-node/lib/redis.cjs');
      const api = require('../../bindings-node/index.js'); // the one RedisPolicy takes
      const keyed = new api.KeyedLimiter(new api.SlidingWindowLog({ limit: 1 << 20, windowMs: 60_000 }));
      const before = externalMemory();
      const policy = new api.Policy({ limits: [{ name: 'a', by: ['user'], limiter: keyed }] });
      policy.add('b', keyed, { by: ['ip'] });
      const client = { sendCommand: async () => null }; // never called: only built
      new RedisPolicy(client, { limits: [{ name: 'a', by: ['user'], limiter: keyed }] });
      const grown = externalMemory() - before;
      assert.ok(grown < SLACK, `V8 was told of ${grown} bytes`);
      // The getter's limiter has its ring whole, as a constructed log's.
      // Garbage collected first: telling V8 of 32 MiB may start a
      // collection, whose freed array buffers (earlier tests') would count
      // against it (seen once under load).
      collectGarbage();
      const whole = externalMemory();
      const limiter = keyed.limiter;
      const told = externalMemory() - whole;
      assert.ok(told >= 32 * 1024 * 1024 - SLACK, `keyed.limiter is whole: V8 was told of ${told} bytes`);
      assert.equal(limiter.tryAcquire(1, 0).allowed, true);
    });
  });
}
