'use strict';
// What the Redis tests share: the server (RATEKEEPER_REDIS_URL, required:
// without it every test file fails), clients of both libraries, the package.
const assert = require('node:assert/strict');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { random } = require('../random.cjs');

const URL_ = process.env.RATEKEEPER_REDIS_URL;
assert.ok(
  URL_,
  'RATEKEEPER_REDIS_URL is not set: these tests need a real Redis server (bash scripts/redis.sh server start, then RATEKEEPER_REDIS_URL=redis://127.0.0.1:6391/0)',
);

const ROOT = path.resolve(__dirname, '../..');
const rk = require(path.join(ROOT, 'bindings-node/index.js'));
const rkRedis = require(path.join(ROOT, 'bindings-node/lib/redis.cjs'));

/** ioredis, failing fast while disconnected (no offline queue) as the README advises. */
async function ioredis(options = {}) {
  const Redis = require('ioredis');
  const client = new Redis(URL_, { enableOfflineQueue: false, maxRetriesPerRequest: 1, lazyConnect: true, ...options });
  client.on('error', () => {});
  await client.connect();
  return client;
}

/** node-redis (`redis`, or its v4 / v5 alias `module`), failing fast while disconnected. */
async function nodeRedis(options = {}, module = 'redis') {
  const { createClient } = require(module);
  const client = createClient({ url: URL_, disableOfflineQueue: true, ...options });
  client.on('error', () => {});
  await client.connect();
  return client;
}

const CLIENTS = {
  ioredis,
  'node-redis': nodeRedis,
  'node-redis 4': (options) => nodeRedis(options, 'redis4'),
  'node-redis 5': (options) => nodeRedis(options, 'redis5'),
};

async function close(client) {
  try {
    if (typeof client.quit === 'function' && client.status !== undefined) await client.quit();
    else if (typeof client.close === 'function') await client.close();
    else await client.quit();
  } catch {
    if (typeof client.disconnect === 'function') client.disconnect();
  }
}

/** A prefix of keys of its own for each test. */
let counter = 0;
function prefix(name) {
  counter += 1;
  return `rk-node-test:${process.pid}:${name}:${counter}:`;
}

/** scripts/redis.sh (stops and starts the server named by RATEKEEPER_REDIS_URL). */
function redisSh(...args) {
  const script = process.env.RATEKEEPER_REDIS_SERVER_SCRIPT || path.join(ROOT, 'scripts/redis.sh');
  const port = new URL(URL_).port || '6379';
  execFileSync('bash', [script, ...args], { env: { ...process.env, RATEKEEPER_REDIS_PORT: port }, stdio: 'inherit' });
}

/**
 * `commandTimeoutMs` for a limiter one of whose calls must time out (its
 * reply held back by the test, or Redis paused) while its other calls must
 * not: a loaded machine (CI's two cores) stalls a process now and then for
 * tens of ms, which failed a call that had to be answered within 50 ms.
 * A second, as the limiters' default (which the other tests keep): each
 * late case waits for it once. (A call that warms the script cache up goes
 * through a limiter without one.)
 */
const LATE_MS = 1000;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `condition()` (which may return a promise) holds, at most `ms`; `what()` describes a failure. */
async function until(condition, ms = 15_000, what = () => String(condition)) {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() >= deadline) throw new Error(`still false after ${ms} ms: ${what()}`);
    await sleep(5);
  }
}

/** `client`, calling `seen(name)` with the name of every command it sends. */
function spy(client, seen) {
  return new Proxy(client, {
    get(target, name) {
      const value = Reflect.get(target, name, target);
      if ((name === 'call' || name === 'sendCommand') && typeof value === 'function') {
        return (...args) => {
          seen(Array.isArray(args[0]) ? args[0][0] : args[0]);
          return value.apply(target, args);
        };
      }
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** `fn(client)` with a fresh client of `library`, closed after. */
async function withClient(library, fn) {
  const client = await CLIENTS[library]();
  try {
    return await fn(client);
  } finally {
    await close(client);
  }
}

module.exports = { URL: URL_, ROOT, rk, rkRedis, ioredis, nodeRedis, CLIENTS, close, withClient, prefix, redisSh, random, LATE_MS, sleep, until, spy };
