'use strict';
// One Node process of the cross-language test: `callers` concurrent callers,
// each trying `calls` times to take 1 unit of `key` through RedisLimiter
// (GCRA: a burst of `limit`, then one per hour, server time: no window
// boundary to fall inside the run), from the wall-clock instant
// `startAt` (ms), 5 ms apart. Prints {"admitted": n, "fromStore": all?} on stdout.
//   node hammer.cjs <url> <prefix> <key> <limit> <callers> <calls> <startAt> <library>
const [url, prefix, key, limit, callers, calls, startAt, library] = process.argv.slice(2);
process.env.RATEKEEPER_REDIS_URL = url;
const { rk, rkRedis, CLIENTS, close } = require('./helpers.cjs');

async function main() {
  const client = await CLIENTS[library]();
  const limiter = new rkRedis.RedisLimiter(client, new rk.Gcra({ burst: Number(limit), emissionIntervalMs: 3_600_000 }), { prefix, commandTimeoutMs: 30_000 });
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, Number(startAt) - Date.now())));
  let admitted = 0;
  let fromStore = true;
  await Promise.all(
    Array.from({ length: Number(callers) }, async () => {
      for (let i = 0; i < Number(calls); i++) {
        const d = await limiter.tryAcquire(key, 1);
        if (d.allowed) admitted += 1;
        fromStore &&= d.fromStore;
        // Paced, so that every process is still calling when the bound is reached.
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    }),
  );
  process.stdout.write(`${JSON.stringify({ admitted, fromStore })}\n`);
  await close(client);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
