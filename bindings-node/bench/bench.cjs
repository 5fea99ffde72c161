'use strict';
// ns per decision: ratekeeper (napi addon and wasm build) beside the limiters a
// Node user would pick, in one run, and the ratios between them. A benchmark,
// not a test: it asserts nothing and CI does not run it.
//
//   npm ci --prefix bindings-node/bench     (once: the peers below)
//   bash scripts/node.sh build && bash scripts/wasm.sh build
//   node bindings-node/bench/bench.cjs
//
// Peers: rate-limiter-flexible's RateLimiterMemory (`await consume(key)`, as its
// users call it), `limiter`'s RateLimiter and TokenBucket (`tryRemoveTokens`,
// synchronous, no keys), express-rate-limit's MemoryStore (`await increment(key)`).
// Every limiter is configured so that every call is allowed (1e9 per second).
//
// Keys: ratekeeper's KeyedLimiter (the core's keyed store: one small state per
// key, in Rust), beside a JS Map from key to limiter. "single" uses one key;
// "100k keys" cycles through 100,000. Policies: a ratekeeper Policy of two
// limits per user beside rate-limiter-flexible's RateLimiterUnion of two.
//
// Floors: `_noop(cost, nowMs)` goes through the same JS method and the same
// native call as tryAcquire (the numbers and the status through the scratch,
// see bindings-node/index.js) and decides nothing; `noop()` is that native
// call alone; `NoopFloor#noop(cost, nowMs)` is a napi-rs class method doing
// nothing. The hot operations are plain Node-API callbacks taking
// a handle (bindings-node/src/fast.rs), not napi-rs methods or functions:
// napi-rs checks the class of `this` on every method call and opens a
// "native borrow scope" on every call, each costing more than the decision.
//
// BENCH_N (calls per round, default 200000) and BENCH_ROUNDS (default 9) tune
// it; each figure is the median of the rounds, the cases interleaved per round,
// and each ratio the median of the rounds' ratios.

const path = require('node:path');

const rk = require('..');
const native = require('../native.js');
const { RateLimiterMemory, RateLimiterUnion } = require('rate-limiter-flexible');
const { RateLimiter, TokenBucket: LimiterBucket } = require('limiter');
const { MemoryStore } = require('express-rate-limit');

let wasm = null;
try {
  wasm = require(path.join(__dirname, '../../bindings-wasm/node.cjs'));
} catch (error) {
  console.error(`(no wasm build: ${error.message.split('\n')[0]})`);
}

const N = Number(process.env.BENCH_N) || 200_000;
const ROUNDS = Number(process.env.BENCH_ROUNDS) || 9;
const KEYS = 100_000;
const RATE = 1e9; // per second: never denies
const keys = Array.from({ length: KEYS }, (_, i) => `client-${i}`);

const bucketOf = (api) => new api.TokenBucket({ capacity: RATE, refillTokens: RATE, refillPeriodMs: 1000 });
const keyed = (api) => {
  const map = new Map();
  for (const key of keys) map.set(key, bucketOf(api));
  return map;
};
// The keyed store holds every key, as a store of clients who used some of
// their budget does: it drops keys back to fresh, and a bucket refilling at
// RATE is fresh again a nanosecond after a call. This one refills a token
// every 1,000 s, from a capacity no run uses up (ten million), so it never
// denies either.
const keyedStore = (api) => {
  const limiter = new api.KeyedLimiter(new api.TokenBucket({ capacity: 1e7, refillTokens: 1, refillPeriodMs: 1e6 }));
  for (const key of keys) limiter.tryAcquire(key);
  if (limiter.size !== KEYS) throw new Error(`the store holds ${limiter.size} keys, not ${KEYS}`);
  return limiter;
};

// Two limits per user (per hour and per day) that never deny here: a
// ratekeeper Policy decides them all or nothing; rate-limiter-flexible's
// RateLimiterUnion consumes from each of its limiters (which is not all or
// nothing). The request object is built in the loop, as a server builds one.
// As for keyedStore, a key must not be fresh again between its calls (a
// token back every 3.6 s), or the policy's stores drop it and take it in
// again on every call; no key takes its 1,000 in a run.
const policyOf = (api) => new api.Policy('1000/hour;10000/day', { by: ['user'] });
const flexibleUnion = () =>
  new RateLimiterUnion(
    new RateLimiterMemory({ keyPrefix: 'hour', points: 1000, duration: 3600 }),
    new RateLimiterMemory({ keyPrefix: 'day', points: 10000, duration: 86400 }),
  );

// One loop per case, written out: a loop shared by every case would see many
// callees at one call site and slow them all down alike.
// The explicit times of the `(1, nowMs)` cases go on forward from one round to
// the next, as a clock's would, on a bucket of their own (the default clock is
// ahead of them): a time before the bucket's last one is time gone backwards,
// which the core decides on its exact path, not the path a clock leads to.
let explicitNow = performance.now();
function timesFrom(n) {
  const start = explicitNow;
  explicitNow += n * 1e-3;
  return start;
}

function cases() {
  const napiBucket = bucketOf(rk);
  const napiTimed = bucketOf(rk);
  const napiSingle = new Map([['k', napiBucket]]);
  const napiKeys = keyed(rk);
  const napiStore = keyedStore(rk);
  const napiPolicy = policyOf(rk);
  const floor = new native.NoopFloor();
  const now = performance.now();

  const list = [
    ['ratekeeper napi: tryAcquire()', 'single', (n) => {
      let s = 0;
      for (let i = 0; i < n; i++) s += napiBucket.tryAcquire().remaining;
      return s;
    }],
    ['ratekeeper napi: tryAcquire(1, nowMs)', 'single', (n) => {
      let s = 0;
      const start = timesFrom(n);
      for (let i = 0; i < n; i++) s += napiTimed.tryAcquire(1, start + i * 1e-3).remaining;
      return s;
    }],
    ['ratekeeper napi: map.get(key).tryAcquire()', 'single', (n) => {
      let s = 0;
      for (let i = 0; i < n; i++) s += napiSingle.get('k').tryAcquire().remaining;
      return s;
    }],
    ['floor: _noop(1, nowMs) (same path, no work)', 'floor', (n) => {
      let s = 0;
      for (let i = 0; i < n; i++) s += napiBucket._noop(1, now) ? 1 : 0;
      return s;
    }],
    ['floor: native noop() (the call without the JS layer)', 'floor', (n) => {
      let s = 0;
      for (let i = 0; i < n; i++) s += native.noop() === undefined ? 1 : 0;
      return s;
    }],
    ['floor: napi-rs class method noop(1, nowMs)', 'floor', (n) => {
      let s = 0;
      for (let i = 0; i < n; i++) s += floor.noop(1, now) ? 1 : 0;
      return s;
    }],
    ['ratekeeper napi: 100k keys, map.get(key).tryAcquire()', 'keys', (n) => {
      let s = 0;
      for (let i = 0; i < n; i++) s += napiKeys.get(keys[i % KEYS]).tryAcquire().remaining;
      return s;
    }],
    ['ratekeeper napi: KeyedLimiter.tryAcquire(key)', 'single', (n) => {
      let s = 0;
      for (let i = 0; i < n; i++) s += napiStore.tryAcquire('k').remaining;
      return s;
    }],
    ['ratekeeper napi: 100k keys, KeyedLimiter.tryAcquire(key)', 'keys', (n) => {
      let s = 0;
      for (let i = 0; i < n; i++) s += napiStore.tryAcquire(keys[i % KEYS]).remaining;
      return s;
    }],
    ['ratekeeper napi: 100k keys, Policy of 2 limits by user', 'keys', (n) => {
      let s = 0;
      for (let i = 0; i < n; i++) s += napiPolicy.tryAcquire({ user: keys[i % KEYS] }).remaining;
      return s;
    }],
  ];

  if (wasm) {
    const wasmBucket = bucketOf(wasm);
    const wasmTimed = bucketOf(wasm);
    const wasmSingle = new Map([['k', wasmBucket]]);
    const wasmKeys = keyed(wasm);
    const wasmStore = keyedStore(wasm);
    const wasmPolicy = policyOf(wasm);
    list.push(
      ['ratekeeper wasm: tryAcquire()', 'single', (n) => {
        let s = 0;
        for (let i = 0; i < n; i++) s += wasmBucket.tryAcquire().remaining;
        return s;
      }],
      ['ratekeeper wasm: tryAcquire(1, nowMs)', 'single', (n) => {
        let s = 0;
        const start = timesFrom(n);
        for (let i = 0; i < n; i++) s += wasmTimed.tryAcquire(1, start + i * 1e-3).remaining;
        return s;
      }],
      ['ratekeeper wasm: map.get(key).tryAcquire()', 'single', (n) => {
        let s = 0;
        for (let i = 0; i < n; i++) s += wasmSingle.get('k').tryAcquire().remaining;
        return s;
      }],
      ['floor: wasm _noop(1, nowMs)', 'floor', (n) => {
        let s = 0;
        for (let i = 0; i < n; i++) s += wasmBucket._noop(1, now) ? 1 : 0;
        return s;
      }],
      ['ratekeeper wasm: 100k keys, map.get(key).tryAcquire()', 'keys', (n) => {
        let s = 0;
        for (let i = 0; i < n; i++) s += wasmKeys.get(keys[i % KEYS]).tryAcquire().remaining;
        return s;
      }],
      ['ratekeeper wasm: 100k keys, KeyedLimiter.tryAcquire(key)', 'keys', (n) => {
        let s = 0;
        for (let i = 0; i < n; i++) s += wasmStore.tryAcquire(keys[i % KEYS]).remaining;
        return s;
      }],
      ['ratekeeper wasm: 100k keys, Policy of 2 limits by user', 'keys', (n) => {
        let s = 0;
        for (let i = 0; i < n; i++) s += wasmPolicy.tryAcquire({ user: keys[i % KEYS] }).remaining;
        return s;
      }],
    );
  }

  const limiterRate = new RateLimiter({ tokensPerInterval: RATE, interval: 'second' });
  const limiterBucket = new LimiterBucket({ bucketSize: RATE, tokensPerInterval: RATE, interval: 'second' });
  const limiterKeys = new Map(keys.map((k) => [k, new RateLimiter({ tokensPerInterval: RATE, interval: 'second' })]));
  const flexible = new RateLimiterMemory({ points: RATE, duration: 1 });
  const union = flexibleUnion();
  const store = new MemoryStore();
  store.init({ windowMs: 60_000 });
  list.push(
    ['limiter: RateLimiter.tryRemoveTokens(1)', 'single', (n) => {
      let s = 0;
      for (let i = 0; i < n; i++) s += limiterRate.tryRemoveTokens(1) ? 1 : 0;
      return s;
    }],
    ['limiter: TokenBucket.tryRemoveTokens(1)', 'single', (n) => {
      let s = 0;
      for (let i = 0; i < n; i++) s += limiterBucket.tryRemoveTokens(1) ? 1 : 0;
      return s;
    }],
    ['limiter: 100k keys, map.get(key).tryRemoveTokens(1)', 'keys', (n) => {
      let s = 0;
      for (let i = 0; i < n; i++) s += limiterKeys.get(keys[i % KEYS]).tryRemoveTokens(1) ? 1 : 0;
      return s;
    }],
    ['rate-limiter-flexible: await consume(key)', 'single', async (n) => {
      let s = 0;
      for (let i = 0; i < n; i++) s += (await flexible.consume('k')).remainingPoints;
      return s;
    }],
    ['rate-limiter-flexible: 100k keys, await consume(key)', 'keys', async (n) => {
      let s = 0;
      for (let i = 0; i < n; i++) s += (await flexible.consume(keys[i % KEYS])).remainingPoints;
      return s;
    }],
    ['rate-limiter-flexible: 100k keys, RateLimiterUnion of 2', 'keys', async (n) => {
      let s = 0;
      for (let i = 0; i < n; i++) s += (await union.consume(keys[i % KEYS])).hour.remainingPoints;
      return s;
    }],
    ['express-rate-limit MemoryStore: await increment(key)', 'single', async (n) => {
      let s = 0;
      for (let i = 0; i < n; i++) s += (await store.increment('k')).totalHits;
      return s;
    }],
    ['express-rate-limit MemoryStore: 100k keys', 'keys', async (n) => {
      let s = 0;
      for (let i = 0; i < n; i++) s += (await store.increment(keys[i % KEYS])).totalHits;
      return s;
    }],
  );
  return { list, shutdown: () => store.shutdown() };
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

async function time(run) {
  const start = process.hrtime.bigint();
  await run(N);
  return Number(process.hrtime.bigint() - start) / N;
}

// Memory per key, each measured in a child process of its own (`--memory=NAME`)
// so that nothing else allocated in between: 100k keys in a Map, after a GC.
const MEMORY = {
  'ratekeeper napi KeyedLimiter(TokenBucket)': async () => keyedStore(rk),
  'ratekeeper napi TokenBucket (Map)': async () => keyed(rk),
  'ratekeeper wasm TokenBucket (Map)': async () => keyed(require(path.join(__dirname, '../../bindings-wasm/node.cjs'))),
  'limiter RateLimiter (Map)': async () => new Map(keys.map((k) => [k, new RateLimiter({ tokensPerInterval: RATE, interval: 'second' })])),
  'rate-limiter-flexible (its own store)': async () => {
    const flexible = new RateLimiterMemory({ points: RATE, duration: 3600 });
    for (const key of keys) await flexible.consume(key);
    return flexible;
  },
};

async function measureMemory(name) {
  globalThis.gc();
  const before = process.memoryUsage();
  const toldBefore = native.externalMemory();
  const kept = await MEMORY[name]();
  globalThis.gc();
  const after = process.memoryUsage();
  const heap = after.heapUsed + after.external - (before.heapUsed + before.external);
  // The addon's native memory, as it told V8 (memoryUsage().external leaves it out).
  const told = native.externalMemory() - toldBefore;
  process.stdout.write(JSON.stringify({ heap: (heap + told) / KEYS, rss: (after.rss - before.rss) / KEYS, kept: kept !== null }));
}

function memoryPerKey() {
  const { execFileSync } = require('node:child_process');
  const rows = [];
  for (const name of Object.keys(MEMORY)) {
    if (name.includes('wasm') && !wasm) continue;
    const out = execFileSync(process.execPath, ['--expose-gc', __filename, `--memory=${name}`], { encoding: 'utf8' });
    rows.push([name, JSON.parse(out)]);
  }
  return rows;
}

async function main() {
  console.log(`node ${process.version}, ${require('node:os').cpus()[0].model}; ${N} calls x ${ROUNDS} rounds, median`);
  const { list, shutdown } = cases();
  for (const [, , run] of list) await run(Math.min(N, KEYS)); // warm up and fill every key
  const samples = new Map(list.map(([name]) => [name, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, , run] of list) samples.get(name).push(await time(run));
  }
  shutdown();
  const ns = new Map([...samples].map(([name, values]) => [name, median(values)]));

  const base = ns.get('ratekeeper napi: tryAcquire()');
  const width = Math.max(...list.map(([name]) => name.length));
  console.log(`\n${'case'.padEnd(width)}  ns/call  x ratekeeper napi tryAcquire()`);
  for (const [name, group] of list) {
    if (group === 'keys') continue;
    console.log(`${name.padEnd(width)}  ${ns.get(name).toFixed(1).padStart(7)}  ${(ns.get(name) / base).toFixed(2).padStart(6)}`);
  }
  const keyBase = ns.get('ratekeeper napi: 100k keys, KeyedLimiter.tryAcquire(key)');
  console.log(`\n${'100k keys'.padEnd(width)}  ns/call  x ratekeeper napi (100k keys)`);
  for (const [name, group] of list) {
    if (group !== 'keys') continue;
    console.log(`${name.padEnd(width)}  ${ns.get(name).toFixed(1).padStart(7)}  ${(ns.get(name) / keyBase).toFixed(2).padStart(6)}`);
  }

  // Each ratio is the median of the rounds' own ratios: this VM's speed can
  // change by 2x from one second to the next, and both cases of a round ran
  // close together.
  const ratio = (a, b) => median(samples.get(a).map((x, round) => x / samples.get(b)[round])).toFixed(2);
  const napi = 'ratekeeper napi: tryAcquire()';
  const napiKeyed = 'ratekeeper napi: KeyedLimiter.tryAcquire(key)';
  console.log('\nratios (issue 6 and 7 targets in brackets)');
  console.log(`  rate-limiter-flexible / ratekeeper napi KeyedLimiter, 1 key: ${ratio('rate-limiter-flexible: await consume(key)', napiKeyed)}  [>= 5]`);
  console.log(`  rate-limiter-flexible / ratekeeper napi, 100k keys:        ${ratio('rate-limiter-flexible: 100k keys, await consume(key)', 'ratekeeper napi: 100k keys, KeyedLimiter.tryAcquire(key)')}  [>= 8]`);
  console.log(`  limiter RateLimiter / ratekeeper napi:                      ${ratio('limiter: RateLimiter.tryRemoveTokens(1)', napi)}  [>= 2]`);
  console.log(`  limiter TokenBucket / ratekeeper napi:                      ${ratio('limiter: TokenBucket.tryRemoveTokens(1)', napi)}  [>= 2]`);
  // The floors take (1, nowMs) and read no clock: compared with the same call.
  const napiNow = 'ratekeeper napi: tryAcquire(1, nowMs)';
  console.log(`  ratekeeper napi (1, nowMs) / floor _noop (same path):      ${ratio(napiNow, 'floor: _noop(1, nowMs) (same path, no work)')}  [<= 2]`);
  console.log(`  ratekeeper napi (1, nowMs) / floor napi-rs class method:   ${ratio(napiNow, 'floor: napi-rs class method noop(1, nowMs)')}  [<= 2]`);
  console.log(`  ratekeeper napi: reading the default clock adds            ${(ns.get(napi) - ns.get(napiNow)).toFixed(0)} ns`);
  // A default-clock decision takes the floor's path and reads the clock: none
  // can take less than both, whatever it decides. The targets against peers
  // that read their clock on each call leave it this much time.
  const least = ns.get('floor: _noop(1, nowMs) (same path, no work)') + ns.get(napi) - ns.get(napiNow);
  const budget = (peer, times) => `${peer} / ${times} = ${(ns.get(peer) / times).toFixed(1)} ns`;
  console.log(`  the floor's path plus the clock's read:                    ${least.toFixed(1)} ns, against the targets' time:`);
  console.log(`    ${budget('limiter: TokenBucket.tryRemoveTokens(1)', 2)}; ${budget('rate-limiter-flexible: await consume(key)', 5)} (keyed)`);
  console.log(`  rate-limiter-flexible union / ratekeeper napi Policy, 100k: ${ratio('rate-limiter-flexible: 100k keys, RateLimiterUnion of 2', 'ratekeeper napi: 100k keys, Policy of 2 limits by user')}  (no target)`);
  if (wasm) {
    console.log(`  limiter RateLimiter / ratekeeper wasm:                      ${ratio('limiter: RateLimiter.tryRemoveTokens(1)', 'ratekeeper wasm: tryAcquire()')}  [>= 1]`);
    console.log(`  ratekeeper wasm / ratekeeper napi:                          ${ratio('ratekeeper wasm: tryAcquire()', napi)}`);
  }

  console.log('\nmemory per key at 100k keys (JS heap + external + the addon\'s native memory; RSS), each in a process of its own');
  for (const [name, m] of memoryPerKey()) {
    console.log(`  ${name.padEnd(40)} ${m.heap.toFixed(0).padStart(5)} B  ${m.rss.toFixed(0).padStart(5)} B`);
  }
}

const memoryArg = process.argv.find((arg) => arg.startsWith('--memory='));
const run = memoryArg ? measureMemory(memoryArg.slice('--memory='.length)) : main();
run.catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
