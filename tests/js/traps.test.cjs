'use strict';
// Input no state can be; running out of memory; and, in the wasm build, the
// module after a trap. A keyed store (or a policy's) that cannot grow for a
// new key refuses it with a RangeError `out_of_memory` and goes on, in both
// builds (where the failed allocation aborted the Node process, and trapped
// in the wasm module). Another call that runs the module out of memory (it
// holds 4 GiB at most, and a browser may refuse it sooner) ends in a
// WebAssembly.RuntimeError; every other limiter must go on answering, after
// any number of them, and the process must go on.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');

const WASM = (process.env.RATEKEEPER_IMPL || 'napi') === 'wasm';

// The module's exports, caught as the build loads: the tests read and fill its memory.
let exported;
const { Instance } = WebAssembly;
WebAssembly.Instance = new Proxy(Instance, {
  construct(target, args, newTarget) {
    const instance = Reflect.construct(target, args, newTarget);
    exported ??= instance.exports;
    return instance;
  },
});
let rk;
try {
  rk = require('./impl.cjs');
} finally {
  WebAssembly.Instance = Instance;
}
const { Gcra, KeyedLimiter, Policy, SlidingWindowLog, TokenBucket } = rk;

const MIB = 1 << 20;

/** Grows `memory` as far as it goes, so that the module's allocator can take no more pages. */
function fill(memory) {
  for (let pages = 1 << 16; pages >= 1; pages >>= 1) {
    try {
      memory.grow(pages);
    } catch {
      // past the maximum: try half as many
    }
  }
}

async function collectGarbage() {
  require('node:v8').setFlagsFromString('--expose-gc');
  const gc = require('node:vm').runInNewContext('gc');
  for (let i = 0; i < 5; i++) {
    gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
}

describe("the wasm module's memory", () => {
  it('grows by at most 175 bytes a TokenBucket key, and to less than twice that as all its keys turn over', () => {
    if (!WASM) return; // the napi build's memory is the process's
    // bindings-wasm/README.md states these figures. First in the file:
    // memory other tests grew and gave back would take these keys.
    const keyed = new KeyedLimiter(new TokenBucket({ capacity: 5, refillTokens: 1, refillPeriodMs: 1000 }));
    const size = () => exported.memory.buffer.byteLength;
    const start = size();
    for (let i = 0; i < 100_000; i++) keyed.tryAcquire(`client-${i}`, 1, 0);
    const grown = size() - start;
    assert.ok(grown >= 100_000 * 100 && grown <= 100_000 * 175, `${grown / 100_000} bytes a key`);
    // Every key is fresh again 4 s later. Each wave of new keys sweeps
    // the last one out, shrinking the table, and grows it again where the
    // freed tables are too small for it: 1.7 times the first wave's from
    // the second wave on (as the README says), then no more.
    const waves = [1, 2, 3, 4, 5].map((wave) => {
      for (let i = 0; i < 100_000; i++) keyed.tryAcquire(`wave-${wave}-${i}`, 1, wave * 10_000);
      return size() - start;
    });
    assert.ok(waves[4] <= 2 * grown, `${waves.map((bytes) => bytes / grown)} times the first wave's`);
    assert.deepStrictEqual(waves.slice(2), [waves[1], waves[1], waves[1]], 'no more from the third wave on');
    keyed.reclaim(1e9);
    assert.equal(keyed.size, 0);
  });

  it("a Policy built from a keyed log takes its configuration, not a log's ring allocated whole", () => {
    if (!WASM) return; // the napi build's: native-memory.test.cjs
    // Through `keyed.limiter`, each took a limiter that decides, its ring
    // of 2 * limit 16-byte entries allocated whole (32 MiB here), given
    // back only once collected: the module's memory, which never shrinks,
    // grew by that for each (over an edge worker's 128 MB with two).
    const keyed = new KeyedLimiter(new SlidingWindowLog({ limit: 1 << 20, windowMs: 60_000 }));
    const size = () => exported.memory.buffer.byteLength;
    const start = size();
    const policy = new Policy({ limits: [{ name: 'a', by: ['user'], limiter: keyed }] });
    policy.add('b', keyed, { by: ['ip'] });
    assert.ok(size() - start < MIB, `the module grew by ${(size() - start) / MIB} MiB`);
    assert.equal(policy.tryAcquire({ user: 'alice', ip: '1' }, 1, 0).allowed, true);
  });

  it("reconfigure, a KeyedLimiter and a Policy take a log's configuration, not a copy of its ring", () => {
    if (!WASM) return; // the napi build's copy was freed at once, to the process
    // Each cloned the limiter, its ring of 2 * limit 16-byte entries (32
    // MiB here) with it, only to keep its configuration: the module's
    // memory, which never shrinks, grew to twice the log's own size.
    const RING = 2 * (1 << 20) * 16;
    const make = () => new SlidingWindowLog({ limit: 1 << 20, windowMs: 60_000 });
    const log = make();
    assert.equal(log.tryAcquire(1, 0).allowed, true);
    const size = () => exported.memory.buffer.byteLength;
    const fillers = [];
    /**
     * How far `f()` grows the module, from a memory with no room for a
     * ring: logs as large take the room there is, until one grows it (a
     * copy freed by the step before left room for the next one's).
     */
    const growth = (f) => {
      for (const before = size(); size() === before; ) fillers.push(make());
      const start = size();
      f();
      return size() - start;
    };
    // The same limiter: its configuration, its state kept. Its new ring is
    // made at the new limit, the old one freed after.
    const reconfigured = growth(() => log.reconfigure(log, 1));
    assert.ok(reconfigured <= RING + MIB, `reconfigure grew the module by ${reconfigured / MIB} MiB`);
    assert.equal(log.tryAcquire(1 << 20, 2).allowed, false, 'the unit taken before still counts');
    let keyed;
    let policy;
    for (const [what, take] of [
      ['a KeyedLimiter', () => (keyed = new KeyedLimiter(log))],
      ['a Policy', () => (policy = new Policy({ limits: [{ name: 'a', by: ['user'], limiter: log }] }))],
      ['policy.add', () => policy.add('b', log, { by: ['ip'] })],
    ]) {
      const grown = growth(take);
      assert.ok(grown < MIB, `${what} grew the module by ${grown / MIB} MiB`);
    }
    // Every key starts fresh, whatever the log has seen.
    assert.equal(keyed.tryAcquire('alice', 1 << 20, 2).allowed, true);
    assert.equal(policy.tryAcquire({ user: 'alice', ip: '1' }, 1 << 20, 2).allowed, true);
    // Restoring read the state into a copy of the whole log, its ring
    // with it, so that a failed restore changed nothing: the module grew by
    // a ring for a restore into a log that had one, and by two for
    // fromBytes, which builds its log first.
    const state = log.toBytes();
    const other = make();
    assert.equal(other.tryAcquire(5, 0).allowed, true);
    const restored = growth(() => other.restore(state));
    assert.ok(restored < MIB, `restore grew the module by ${restored / MIB} MiB`);
    assert.deepStrictEqual(other.toBytes(), state);
    const built = growth(() => SlidingWindowLog.fromBytes(state, { limit: 1 << 20, windowMs: 60_000 }));
    assert.ok(built <= RING + MIB, `fromBytes grew the module by ${built / MIB} MiB`);
    // A failed restore, late in the entries, leaves the log as it was.
    const cut = state.slice(0, state.length - 1);
    const failed = growth(() => assert.throws(() => other.restore(cut), { code: 'state_truncated' }));
    assert.ok(failed < MIB, `a failed restore grew the module by ${failed / MIB} MiB`);
    assert.deepStrictEqual(other.toBytes(), state);
  });
});

describe('a keyed store out of memory in the napi build', () => {
  it('refuses new keys with out_of_memory, changes nothing, and the process goes on', (t) => {
    if (WASM) return; // the module's memory: 'the wasm module after a trap' below
    if (process.platform !== 'linux') return t.skip('the address-space limit is set with bash and ulimit');
    // In a child process whose address space is limited (ulimit -v) to what
    // it holds once loaded and 256 MiB more, which the stores' tables then
    // fill: the process's memory, without exhausting the machine's. The
    // limited one runs --jitless: V8's optimising compiler, taking memory
    // for the hot loop at an instant of its own, found none left once a
    // table had it all ("Fatal process out of memory: Zone", std::bad_alloc:
    // 4 runs in 40); the address space it no longer reserves for code stays
    // V8's for the heap it grows after (sized as loaded without the flag).
    const { spawnSync } = require('node:child_process');
    const impl = require.resolve('./impl.cjs');
    const node = (script, kib) => {
      const limit = kib === undefined ? '' : `ulimit -v ${kib}; `;
      const flags = kib === undefined ? '' : '--jitless ';
      const run = spawnSync('bash', ['-c', `${limit}exec "$0" ${flags}-e "$1"`, process.execPath, script], {
        encoding: 'utf8',
        env: { ...process.env, RATEKEEPER_IMPL: 'napi' },
      });
      assert.equal(run.status, 0, `${run.signal ?? ''} ${run.stderr}`);
      return JSON.parse(run.stdout);
    };
    const size = 'Number(require("node:fs").readFileSync("/proc/self/status", "utf8").match(/VmSize:\\s+(\\d+)/)[1])';
    const loaded = node(`require(${JSON.stringify(impl)}); console.log(${size})`);
    const answers = node(
      `
      const { Gcra, KeyedLimiter, Policy } = require(${JSON.stringify(impl)});
      const flood = (decide) => {
        for (let i = 0; ; i++) {
          try {
            decide(i);
          } catch (error) {
            return { name: error.constructor.name, code: error.code, message: error.message, keys: i };
          }
        }
      };
      const keyed = new KeyedLimiter(new Gcra({ burst: 2, emissionIntervalMs: 1000 }));
      const policy = new Policy({ limits: [
        { name: 'per-user', algorithm: 'gcra', rate: '1/second', burst: 2, by: ['user'] },
        { name: 'all', algorithm: 'fixed_window', rate: '1000000000/second', by: [] },
      ] });
      const out = { keyed: flood((i) => keyed.tryAcquire(i, 1, 0)) };
      out.held = [keyed.tryAcquire(0, 1, 0).allowed, keyed.tryAcquire(0, 1, 0).allowed];
      out.policy = flood((i) => policy.tryAcquire({ user: String(i) }, 1, 0));
      const counted = () => policy.peek({ user: '0' }, 0, 0).limits[1].remaining;
      out.counted = counted();
      try {
        policy.tryAcquire({ user: 'one more' }, 1, 0);
      } catch (error) {
        out.again = error.code;
      }
      out.countedAfter = counted();
      out.size = keyed.size;
      console.log(JSON.stringify(out));
      `,
      loaded + 256 * 1024,
    );
    for (const store of ['keyed', 'policy']) {
      const { name, code, message } = answers[store];
      assert.deepStrictEqual({ name, code }, { name: 'RangeError', code: 'out_of_memory' }, `${store}: ${message}`);
      assert.match(message, /out of memory/);
    }
    assert.ok(answers.keyed.keys > 100_000, `${answers.keyed.keys} keys`);
    assert.equal(answers.size, answers.keyed.keys, 'the key refused is not held');
    assert.deepStrictEqual(answers.held, [true, false], 'a key held goes on deciding');
    assert.equal(answers.again, 'out_of_memory');
    assert.equal(answers.countedAfter, answers.counted, 'the global limit counted nothing for the request refused');
  });
});

describe('input longer than any state', () => {
  it('restore and fromBytes answer as its first bytes do, and the wasm build copies no more of it', () => {
    // No state is longer than about 40 MiB (a full log of the largest
    // limit); the wasm build copied the whole input into its memory, which
    // never shrinks, and one of 2 GiB or more trapped there.
    const options = { capacity: 5, refillTokens: 1, refillPeriodMs: 1000 };
    const bucket = new TokenBucket(options);
    bucket.tryAcquire(2, 0);
    const state = bucket.toBytes();
    const input = new Uint8Array(100 * MIB);
    input.set(state);
    const before = WASM ? exported.memory.buffer.byteLength : 0;
    const corrupt = { name: 'RangeError', code: 'state_corrupt', message: /bytes follow the last field/ };
    assert.throws(() => bucket.restore(input), corrupt);
    assert.throws(() => TokenBucket.fromBytes(input, options), corrupt);
    const log = new SlidingWindowLog({ limit: 3, windowMs: 1000 });
    log.tryAcquire(1, 0);
    input.fill(0).set(log.toBytes());
    assert.throws(() => SlidingWindowLog.fromBytes(input, { limit: 3, windowMs: 1000 }), corrupt);
    input.fill(7);
    assert.throws(() => bucket.restore(input), { name: 'RangeError', code: 'state_corrupt', message: /magic/ });
    assert.deepStrictEqual(bucket.toBytes(), state, 'nothing changed');
    if (WASM) assert.ok(exported.memory.buffer.byteLength - before < 64 * MIB, `the module grew by ${(exported.memory.buffer.byteLength - before) / MIB} MiB`);
  });
});

describe('the wasm module after a trap', () => {
  const config = { limits: [{ name: 'per-user', algorithm: 'gcra', rate: '10/second', burst: 1, by: ['user'] }] };
  let flooded;
  let total;
  let other;
  let keyed;
  let log;
  let keyedLog;
  // What the second test fills memory with, kept for the third but for a
  // thousand of them (collected to show that frees still work).
  let filler = [];

  it('a policy and a keyed store that run out of memory refuse new keys with out_of_memory and go on', async () => {
    if (!WASM) return; // napi: out-of-memory.test.cjs
    // What the tests above left to collect, collected before the memory is
    // filled: given back later, it would be filled again handle by handle.
    await collectGarbage();
    flooded = new Policy(config);
    other = new Policy(config);
    keyed = new KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: 100 }));
    // For the last test: a log whose state takes some 100 KB to write out.
    log = new SlidingWindowLog({ limit: 1 << 16, windowMs: 1e12 });
    for (let i = 0; i < 1 << 16; i++) log.tryAcquire(1, i);
    // And the limiter of a keyed log, made while memory is free.
    keyedLog = new KeyedLimiter(new SlidingWindowLog({ limit: 1 << 12, windowMs: 1e12 })).limiter;
    assert.equal(other.tryAcquire({ user: 'alice' }, 1, 0).allowed, true);
    assert.equal(keyed.tryAcquire('alice', 1, 0).allowed, true);
    total = new Policy({ limits: [...config.limits, { name: 'all', algorithm: 'fixed_window', rate: '1000000000/second', by: [] }] });
    assert.equal(total.tryAcquire({ user: 'first' }, 1, 0).allowed, true);
    fill(exported.memory);
    // Each store's table grows until memory runs out; the request that
    // needed it fails (it trapped, and the store was left unusable).
    const flood = (decide) => {
      for (let i = 0; ; i++) {
        assert.ok(i < 10_000_000, 'the module never ran out of memory');
        try {
          decide(i);
        } catch (error) {
          return error;
        }
      }
    };
    for (const [what, decide] of [
      ['a policy', (i) => flooded.tryAcquire({ user: `user-${i}` }, 1, 0)],
      ['a keyed store', (i) => keyed.tryAcquire(`key-${i}`, 1, 0)],
      ['a policy of two limits', (i) => total.tryAcquire({ user: `user-${i}` }, 1, 0)],
    ]) {
      const error = flood(decide);
      assert.ok(error instanceof RangeError && error.code === 'out_of_memory', `${what}: ${error}`);
      assert.match(error.message, /out of memory/);
    }
    // A batch that runs out of memory decides none of its costs: its cost
    // of 0, before the cost that inserts its new key, moved the store's
    // time, and a caller whose clock lags was then judged as of a batch
    // that failed (Alice, taken at 0, admitted at 50).
    assert.throws(() => keyed.tryAcquireBatch('batch-new', [0, 1], 150), { code: 'out_of_memory' });
    assert.equal(keyed.peek('alice', 1, 50).allowed, false);
    // Nothing changed: the global limit counted the requests admitted, not
    // the one refused (all or nothing).
    const counted = total.peek({ user: 'first' }, 0, 0).limits[1].remaining;
    assert.throws(() => total.tryAcquire({ user: 'one-more' }, 1, 0), { code: 'out_of_memory' });
    assert.equal(total.peek({ user: 'first' }, 0, 0).limits[1].remaining, counted);
    // No trap: thousands of them leave the module's stack where it was,
    // and nothing needs putting back.
    const stack = exported.__stack_pointer;
    const start = stack.value;
    for (let i = 0; i < 5_000; i++) {
      assert.throws(() => flooded.tryAcquire({ user: `again-${i}` }, 1, 0), { code: 'out_of_memory' });
      assert.throws(() => keyed.tryAcquire(`again-${i}`, 1, 0), { code: 'out_of_memory' });
    }
    assert.equal(stack.value, start);
    // The keys held go on deciding, in every store.
    assert.equal(flooded.tryAcquire({ user: 'user-0' }, 1, 0).allowed, false);
    assert.equal(flooded.tryAcquire({ user: 'user-0' }, 1, 100).allowed, true);
    assert.equal(keyed.tryAcquire('alice', 1, 0).allowed, false);
    assert.equal(keyed.tryAcquire('alice', 1, 100).allowed, true);
    assert.equal(other.tryAcquire({ user: 'alice' }, 1, 0).allowed, false);
    assert.equal(other.tryAcquire({ user: 'alice' }, 1, 100).allowed, true);
  });

  it('any number of traps leave the module working, and its frees too', async () => {
    if (!WASM) return;
    // What the test above left free, taken in small pieces: then building a
    // limiter traps (its handle finds no memory), as does a new key of a
    // keyed token bucket of two bandwidths, whose keys' states are boxed
    // (an allocation that still traps). Each trap kept
    // the frames of the module's stack it ended (at the bottom of its
    // memory), and after about 1,200 the stack ran past its bottom. Where
    // the memory is short of 4 GiB, every call of every limiter then
    // trapped, the FinalizationRegistry's frees too, which ended the
    // process; in a memory of 4 GiB (filled here, as by the module
    // itself), its frames wrapped round to the top of it, the heap.
    const bands = [
      { capacity: 10, refillTokens: 1, refillPeriodMs: 100 },
      { capacity: 100, refillTokens: 1, refillPeriodMs: 10 },
    ];
    const boxed = new KeyedLimiter(TokenBucket.fromBandwidths(bands));
    assert.equal(boxed.tryAcquire('held', 1, 0).allowed, true);
    await collectGarbage();
    try {
      for (;;) filler.push(new Gcra({ burst: 1, emissionIntervalMs: 100 }));
    } catch (error) {
      assert.ok(error instanceof WebAssembly.RuntimeError, String(error));
    }
    const top = new Uint8Array(exported.memory.buffer, exported.memory.buffer.byteLength - MIB);
    assert.ok(top.every((byte) => byte === 0));
    const stack = exported.__stack_pointer;
    const start = stack?.value;
    for (let i = 0; i < 5_000; i++) {
      assert.throws(() => new Gcra({ burst: 1, emissionIntervalMs: 100 }), WebAssembly.RuntimeError);
    }
    assert.throws(() => boxed.tryAcquire('new', 1, 0), WebAssembly.RuntimeError);
    assert.ok(top.every((byte) => byte === 0), 'the stack ran past its bottom, over the top of the memory');
    assert.ok(stack instanceof WebAssembly.Global, 'the module exports its stack pointer');
    assert.equal(stack.value, start, 'the stack is back where it started');
    // The store that trapped stays unusable (its state may be part changed).
    assert.throws(() => boxed.tryAcquire('held', 1, 0), WebAssembly.RuntimeError);
    filler.length -= 1_000;
    assert.equal(other.tryAcquire({ user: 'alice' }, 1, 200).allowed, true);
    assert.equal(keyed.tryAcquire('alice', 1, 200).allowed, true);
    await collectGarbage();
    const gcra = new Gcra({ burst: 1, emissionIntervalMs: 100 });
    assert.deepStrictEqual([gcra.tryAcquire(1, 0).allowed, gcra.tryAcquire(1, 0).allowed], [true, false]);
    assert.equal(new Policy(config).tryAcquire({ user: 'carol' }, 1, 0).allowed, true);
  });

  it('a limiter a trap left borrowed answers its decisions with that RuntimeError, leaving the stack as it was', async () => {
    if (!WASM) return;
    // What the tests above left free, taken in small pieces: then writing
    // the log's state out traps, midway through reading the log.
    let held = [];
    try {
      for (;;) held.push(new Gcra({ burst: 1, emissionIntervalMs: 100 }));
    } catch (error) {
      assert.ok(error instanceof WebAssembly.RuntimeError, String(error));
    }
    assert.throws(() => log.toBytes(), WebAssembly.RuntimeError);
    // tryAcquire, peek and reserve on one limiter run unguarded by
    // traps.js (they cannot trap): on a limiter left borrowed they answer
    // with the trap's error instead of trapping, and the stack stays put.
    const stack = exported.__stack_pointer;
    const start = stack.value;
    for (let i = 0; i < 5_000; i++) {
      assert.throws(() => log.tryAcquire(1, 1e9), WebAssembly.RuntimeError);
      assert.throws(() => log.reserve(1, Infinity, 1e9), WebAssembly.RuntimeError);
    }
    assert.equal(stack.value, start);
    // A keyed log's `limiter` decides unguarded too, so it must not
    // allocate either: its ring is whole from the start, as a constructed
    // log's. (It grew with its entries, and the growth that ran out of
    // memory trapped, the frames left on the stack.)
    for (let i = 0; i < 1 << 11; i++) assert.equal(keyedLog.tryAcquire(1, i).allowed, true);
    for (let i = 1 << 11; i < 1 << 12; i++) assert.equal(keyedLog.reserve(1, 0, i).ok, true);
    assert.equal(stack.value, start);
    // Left borrowed for reading: it is still read.
    assert.equal(log.peek(1, 1e9).allowed, false);
    assert.equal(other.tryAcquire({ user: 'alice' }, 1, 300).allowed, true);
    assert.equal(keyed.tryAcquire('alice', 1, 300).allowed, true);
    held = null;
    filler = null;
    await collectGarbage();
    const gcra = new Gcra({ burst: 1, emissionIntervalMs: 100 });
    assert.deepStrictEqual([gcra.tryAcquire(1, 0).allowed, gcra.peek(1, 0).allowed], [true, false]);
  });
});
