'use strict';
// The Redis clients' differential run (README.md beside this file): the
// generated scenarios through the Node client here and through the Python
// client in a child process (bindings-python/tests/redis/clients_runner.py,
// with the repository's .venv), each on key prefixes of its own on one
// server, compared; and interleaved scenarios, Python and Node calling by
// turns on the same keys, compared with the in-process core.
//
//   RATEKEEPER_REDIS_URL=redis://127.0.0.1:6391/0 node tests/redis/clients/differential.cjs [SEED COUNT]...
//
// prints every discrepancy (scenario, operation, the two answers), one JSON line each.

const { spawn } = require('node:child_process');
const path = require('node:path');
const readline = require('node:readline');

const { generate } = require('./generate.cjs');
const { runScenario, openSubject, runOp } = require('./run-node.cjs');
const { isDeepStrictEqual } = require('node:util');
const { compareScenario, bare } = require('./compare.cjs');
const { expectedOf, coreOf, compareWithCore, documentedRefusal } = require('./core.cjs');

const ROOT = path.resolve(__dirname, '../../..');
const PYTHON = process.env.RATEKEEPER_PYTHON || path.join(ROOT, '.venv/bin/python');
const RUNNER = path.join(ROOT, 'bindings-python/tests/redis/clients_runner.py');

// What the test runs: [seed, scenarios] pairs, the two clients side by side;
// and the interleaved ones, by turns on the same keys.
const SEEDS = [
  [1, 150],
  [2, 150],
  [3, 150],
];
const INTERLEAVED = [
  [11, 80],
  [12, 80],
];

/** The Python runner: `ask(request)` resolves to its answer. */
function python(url) {
  const child = spawn(PYTHON, [RUNNER, url], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = readline.createInterface({ input: child.stdout });
  const waiting = [];
  let failed = null;
  lines.on('line', (line) => waiting.shift().resolve(JSON.parse(line)));
  const fail = (error) => {
    failed = error;
    for (const w of waiting.splice(0)) w.reject(error);
  };
  child.on('error', fail);
  child.on('exit', (code) => fail(new Error(`the Python runner exited (${code})`)));
  return {
    ask(request) {
      if (failed !== null) return Promise.reject(failed);
      return new Promise((resolve, reject) => {
        waiting.push({ resolve, reject });
        child.stdin.write(`${JSON.stringify(request)}\n`);
      });
    },
    close() {
      child.removeAllListeners('exit');
      child.stdin.end();
    },
  };
}

/**
 * Runs `scenarios` through both clients (Node with ioredis for even ones,
 * node-redis for odd; Python with redis.Redis for even, redis.asyncio for
 * odd) and returns every discrepancy.
 */
async function sideBySide(clients, py, scenarios, tag) {
  const found = [];
  for (let i = 0; i < scenarios.length; i++) {
    const s = scenarios[i];
    const client = i % 2 === 0 ? clients.ioredis : clients.nodeRedis;
    const id = `${tag}:${s.id}`;
    const node = await runScenario(client, s, `rk-clients:n:${id}:`);
    const python = await py.ask({ cmd: 'run', scenario: s, prefix: `rk-clients:p:${id}:`, async: i % 2 === 1 });
    for (const d of compareScenario(s, node, python)) found.push({ scenario: s.id, ...d });
  }
  return found;
}

/**
 * Runs each interleaved scenario, its operations made by the client each
 * names, on one prefix, and compares every answer with the core's.
 */
async function interleaved(clients, py, scenarios, tag) {
  const found = [];
  for (let i = 0; i < scenarios.length; i++) {
    const s = scenarios[i];
    const prefix = `rk-clients:x:${tag}:${s.id}:`;
    const clock = { t: 0 };
    const opened = openSubject(i % 2 === 0 ? clients.ioredis : clients.nodeRedis, s, prefix, clock);
    const pyOpened = await py.ask({ cmd: 'open', scenario: s, prefix, async: i % 2 === 1 });
    // A configuration both refuse alike (a product past 2^51): nothing to run.
    if (opened.error !== undefined && isDeepStrictEqual(bare(opened.error), bare(pyOpened.error))) continue;
    if (opened.error !== undefined || pyOpened.error !== null) {
      found.push({ scenario: s.id, at: -1, problems: [`not built: ${JSON.stringify(opened.error)} (Node), ${JSON.stringify(pyOpened.error)} (Python)`] });
      continue;
    }
    const core = coreOf(s);
    for (let j = 0; j < s.ops.length; j++) {
      const op = s.ops[j];
      const expected = expectedOf(core, s, op);
      const got = op.side === 'node' ? await runOp(opened.store, op, clock) : await py.ask({ cmd: 'op', op, index: j });
      // A booking too far for the script's exact arithmetic (PROTOCOL.md): the states part.
      if (op.op === 'reserve' && documentedRefusal(s, expected, got)) break;
      const problems = compareWithCore(expected, got);
      if (problems.length > 0) {
        found.push({ scenario: s.id, at: j, op, expected, got, problems });
        break;
      }
      // A booking refused within its wait (a log's ring is full): the core
      // gives back what it booked in the other limits, Redis wrote nothing;
      // the states part here (PROTOCOL.md).
      if (expected.stop) break;
    }
  }
  return found;
}

/** Both clients of each library, connected to `url`. */
async function connect(url) {
  const Redis = require(require.resolve('ioredis', { paths: [path.join(ROOT, 'tests/redis')] }));
  const { createClient } = require(require.resolve('redis', { paths: [path.join(ROOT, 'tests/redis')] }));
  const ioredis = new Redis(url, { enableOfflineQueue: false, maxRetriesPerRequest: 1, lazyConnect: true });
  ioredis.on('error', () => {});
  await ioredis.connect();
  const nodeRedis = createClient({ url, disableOfflineQueue: true });
  nodeRedis.on('error', () => {});
  await nodeRedis.connect();
  return {
    ioredis,
    nodeRedis,
    async close() {
      await ioredis.quit();
      await nodeRedis.quit();
    },
  };
}

/** Deletes every key the runs left (`rk-clients:*`). */
async function cleanUp(client) {
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', 'rk-clients:*', 'COUNT', 1000);
    if (keys.length > 0) await client.unlink(...keys);
    cursor = next;
  } while (cursor !== '0');
}

const scenariosOf = (seeds, interleave = false) => seeds.flatMap(([seed, count]) => generate(seed, count, interleave));

module.exports = { SEEDS, INTERLEAVED, python, sideBySide, interleaved, connect, cleanUp, scenariosOf };

if (require.main === module) {
  (async () => {
    const url = process.env.RATEKEEPER_REDIS_URL;
    if (!url) throw new Error('set RATEKEEPER_REDIS_URL');
    const args = process.argv.slice(2).map(Number);
    const seeds = args.length > 0 ? Array.from({ length: args.length / 2 }, (_, i) => [args[2 * i], args[2 * i + 1]]) : null;
    const clients = await connect(url);
    const py = python(url);
    const tag = `cli${process.pid}`;
    try {
      const found = [
        ...(await sideBySide(clients, py, scenariosOf(seeds ?? SEEDS), tag)),
        ...(await interleaved(clients, py, scenariosOf(seeds ?? INTERLEAVED, true), tag)),
      ];
      for (const d of found) console.log(JSON.stringify(d));
      console.log(`${found.length} discrepancies`);
      process.exitCode = found.length > 0 ? 1 : 0;
    } finally {
      py.close();
      await cleanUp(clients.ioredis);
      await clients.close();
    }
  })();
}
