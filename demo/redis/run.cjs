'use strict';
// The multi-level, cross-service demo: a Python ASGI service (service.py) and
// a Node HTTP service (service.cjs) share per-client limits through one Redis
// (policy.json: per second / minute / hour; overall, per method, per endpoint;
// all or nothing). The driver sends requests to both, alternating, and shows
// that a request admitted by one counts against the other.
//
//   bash scripts/redis.sh server start && bash scripts/python.sh build && npm ci --prefix tests/redis
//   RATEKEEPER_REDIS_URL=redis://127.0.0.1:6391/0 node demo/redis/run.cjs
//
// Exits non-zero when a decision is not the expected one.
const path = require('node:path');
const { spawn } = require('node:child_process');
const assert = require('node:assert/strict');

const ROOT = path.resolve(__dirname, '../..');
const URL_ = process.env.RATEKEEPER_REDIS_URL ?? 'redis://127.0.0.1:6391/0';
const PYTHON = process.env.RATEKEEPER_PYTHON ?? path.join(ROOT, '.venv/bin/python');
const env = { ...process.env, RATEKEEPER_REDIS_URL: URL_, DEMO_PREFIX: `ratekeeper-demo:${Date.now()}:` };

/** Starts a service; resolves with its base URL once it prints "listening <port>". */
function start(command, file) {
  const child = spawn(command, [path.join(__dirname, file), '0'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${file} exited (${code})`)));
    child.stdout.on('data', (chunk) => {
      const match = /listening (\d+)/.exec(String(chunk));
      if (match) resolve(`http://127.0.0.1:${match[1]}`);
    });
  });
}
const children = [];

let services;
const admitted = { python: 0, node: 0 };

/** One request; prints a line; checks the status and the limit that denied. */
async function send(service, client, method, endpoint, expectDeniedBy = null) {
  const res = await fetch(services[service] + endpoint, { method, headers: { 'x-client': client } });
  const body = await res.json();
  const status = res.status === 200 ? '200 admitted' : `429 denied by ${body.deniedBy}`;
  console.log(`  ${service.padEnd(6)} ${client.padEnd(5)} ${method.padEnd(4)} ${endpoint.padEnd(8)} -> ${status.padEnd(32)} RateLimit: ${res.headers.get('ratelimit').split(',').slice(0, 2).map((item) => item.trim()).join(', ')}, ...`);
  assert.equal(body.fromStore, true);
  assert.equal(body.deniedBy, expectDeniedBy, `${service} ${client} ${method} ${endpoint}`);
  if (res.status === 200) admitted[service] += 1;
}

async function main() {
  services = { python: await start(PYTHON, 'service.py'), node: await start(process.execPath, 'service.cjs') };
  console.log(`Python service ${services.python}, Node service ${services.node}, Redis ${URL_}\n`);

  // Fixed windows, aligned to the second: start just after a second begins, so
  // that steps 1 to 3 fall in one window.
  await new Promise((resolve) => setTimeout(resolve, 1000 - (Date.now() % 1000) + 20));
  console.log('1. Per endpoint (3/second for each client): alice on GET /search, alternating services');
  await send('python', 'alice', 'GET', '/search');
  await send('node', 'alice', 'GET', '/search');
  await send('python', 'alice', 'GET', '/search');
  await send('node', 'alice', 'GET', '/search', 'endpoint/second');
  console.log('   bob has limits of his own:');
  await send('node', 'bob', 'GET', '/search');

  console.log('\n2. Per method (4/second): alice GET /items, then GET /cart: the 3 GETs above count');
  await send('node', 'alice', 'GET', '/items');
  await send('python', 'alice', 'GET', '/cart', 'method/second');
  console.log('   all or nothing: that denial consumed nothing, so POST still fits the overall 5/second');

  console.log('\n3. Overall (5/second per client): alice POST /cart on one service, POST /pay on the other');
  await send('python', 'alice', 'POST', '/cart');
  await send('node', 'alice', 'POST', '/pay', 'client/second');

  console.log('\n4. A second later: a new per-second window; the minute and hour ones still hold what both admitted');
  await new Promise((resolve) => setTimeout(resolve, 1100));
  await send('node', 'alice', 'POST', '/pay');

  const total = admitted.python + admitted.node;
  console.log(`\nAdmitted: ${admitted.python} by Python, ${admitted.node} by Node; alice's and bob's counters live once, in Redis.`);
  assert.equal(total, 7);
}

main()
  .then(() => console.log('demo: every decision as expected'))
  .catch((error) => {
    console.error(error);
    process.exitCode = 1;
  })
  .finally(() => {
    for (const child of children) child.kill();
  });
