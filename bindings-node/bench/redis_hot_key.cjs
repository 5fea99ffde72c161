'use strict';
// One hot key, 256 concurrent callers, through a real Redis: RedisLimiter
// with hot-key batching (calls for a key while its round trip is in flight go
// as one batch) against the same without it. Throughput (decisions per
// second) and p99 latency of each, measured side by side in one run (rounds
// interleaved), and the ratio. A benchmark, not a test: it asserts nothing.
//
//   bash scripts/redis.sh server start
//   npm ci --prefix tests/redis            (ioredis, node-redis)
//   RATEKEEPER_REDIS_URL=redis://127.0.0.1:6391/0 node bindings-node/bench/redis_hot_key.cjs
//
// BENCH_CALLERS (default 256), BENCH_MS (per round, default 2000),
// BENCH_ROUNDS (default 3) and BENCH_CLIENT ('ioredis' or 'node-redis') tune it.

const { Gcra } = require('../index.js');
const { RedisLimiter } = require('../lib/redis.cjs');

if (!process.env.RATEKEEPER_REDIS_URL) {
  console.error('redis_hot_key: set RATEKEEPER_REDIS_URL (e.g. redis://127.0.0.1:6391/0)');
  process.exit(2);
}
// The clients as the Redis tests make them (no offline queue), from tests/redis/node_modules.
const { CLIENTS, close } = require('../../tests/redis/helpers.cjs');
const CALLERS = Number(process.env.BENCH_CALLERS ?? 256);
const MS = Number(process.env.BENCH_MS ?? 2000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const LIBRARY = process.env.BENCH_CLIENT ?? 'ioredis';

/** `CALLERS` loops calling tryAcquire on one key for `MS`: decisions per second and p99 latency (ms). */
async function round(limiter) {
  const latencies = [];
  const end = performance.now() + MS;
  let errors = 0;
  const caller = async () => {
    while (performance.now() < end) {
      const started = performance.now();
      const d = await limiter.tryAcquire('hot');
      latencies.push(performance.now() - started);
      if (!d.fromStore) errors += 1;
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: CALLERS }, caller));
  const elapsed = performance.now() - started;
  latencies.sort((a, b) => a - b);
  return { rate: (latencies.length / elapsed) * 1000, p99: latencies[Math.floor(latencies.length * 0.99)], errors };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  const client = await CLIENTS[LIBRARY]();
  // Every call allowed: a burst of 1e9, one more every microsecond.
  const gcra = new Gcra({ burst: 1e9, emissionIntervalMs: 0.001, name: 'hot' });
  const cases = {
    batching: new RedisLimiter(client, gcra, { prefix: 'rk-bench:batching:', commandTimeoutMs: 10_000 }),
    'no batching': new RedisLimiter(client, gcra, { prefix: 'rk-bench:single:', batching: false, commandTimeoutMs: 10_000 }),
  };
  const results = { batching: [], 'no batching': [] };
  await round(cases.batching); // warm-up: the script loaded, connections up
  for (let r = 0; r < ROUNDS; r++) {
    for (const name of Object.keys(cases)) results[name].push(await round(cases[name]));
  }
  console.log(`redis_hot_key: ${LIBRARY}, one key, ${CALLERS} concurrent callers, ${ROUNDS} rounds of ${MS} ms (median)`);
  const summary = {};
  for (const [name, rounds] of Object.entries(results)) {
    summary[name] = { rate: median(rounds.map((x) => x.rate)), p99: median(rounds.map((x) => x.p99)) };
    const errors = rounds.reduce((s, x) => s + x.errors, 0);
    console.log(
      `  ${name.padEnd(12)} ${summary[name].rate.toFixed(0).padStart(9)} decisions/s   p99 ${summary[name].p99.toFixed(2).padStart(8)} ms` +
        (errors ? `   (${errors} not from the store)` : ''),
    );
  }
  console.log(
    `  ratio: throughput ${(summary.batching.rate / summary['no batching'].rate).toFixed(1)}x, ` +
      `p99 ${(summary['no batching'].p99 / summary.batching.p99).toFixed(1)}x lower with batching`,
  );
  await close(client);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
