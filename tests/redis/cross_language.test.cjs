'use strict';
// Cross-language concurrency: 4 processes, 2 Node (ioredis, node-redis) and
// 2 Python (ratekeeper.redis, threads), each with several concurrent callers
// hammering one key through the real server: the total admitted is the bound,
// exactly. Python: the repo's .venv (bash scripts/python.sh build), or
// RATEKEEPER_PYTHON; the test fails when it cannot import ratekeeper.redis.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { execFile, execFileSync } = require('node:child_process');
const { URL, ROOT, prefix } = require('./helpers.cjs');

const PYTHON = process.env.RATEKEEPER_PYTHON || path.join(ROOT, '.venv/bin/python');

function run(command, args) {
  return new Promise((resolve, reject) => {
    execFile(command, args, { cwd: __dirname, timeout: 120_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${command} ${args[0]} failed: ${error.message}\n${stderr}`));
      else resolve(JSON.parse(stdout.trim().split('\n').pop()));
    });
  });
}

test('2 Node and 2 Python processes on one key admit exactly the bound', async () => {
  execFileSync(PYTHON, ['-c', 'import ratekeeper.redis'], { stdio: 'inherit' });
  // 4 x 400 attempts for 1300 units: whatever the scheduling, the other three
  // take at most 1200, so every process gets some, and 300 are denied.
  const LIMIT = 1300;
  const keyPrefix = prefix('cross');
  const startAt = String(Date.now() + 4000);
  const common = [URL, keyPrefix, 'shared-key', String(LIMIT)];
  const results = await Promise.all([
    run(process.execPath, [path.join(__dirname, 'hammer.cjs'), ...common, '16', '25', startAt, 'ioredis']),
    run(process.execPath, [path.join(__dirname, 'hammer.cjs'), ...common, '16', '25', startAt, 'node-redis']),
    run(PYTHON, [path.join(__dirname, 'hammer.py'), ...common, '8', '50', startAt]),
    run(PYTHON, [path.join(__dirname, 'hammer.py'), ...common, '8', '50', startAt]),
  ]);
  const admitted = results.reduce((sum, r) => sum + r.admitted, 0);
  assert.ok(results.every((r) => r.fromStore), JSON.stringify(results));
  assert.equal(admitted, LIMIT, JSON.stringify(results));
  assert.ok(results.every((r) => r.admitted > 0), `every process got some: ${JSON.stringify(results)}`);
});

test('a key of bytes is one key for the Node and the Python client: bytes as bytes, UTF-8 as its string', async () => {
  const { rk, rkRedis, ioredis, close } = require('./helpers.cjs');
  const keyPrefix = prefix('cross-bytes');
  // Python takes b'\xff\x00' and b'\xc3\xa9' (the UTF-8 of 'é'), each from a limit of 1 per hour.
  const python = [
    'import json, sys, redis, ratekeeper',
    'from ratekeeper.redis import RedisLimiter',
    'client = redis.Redis.from_url(sys.argv[1])',
    'limiter = RedisLimiter(client, ratekeeper.FixedWindow(1, 3600, name="w"), prefix=sys.argv[2])',
    'print(json.dumps([limiter.try_acquire(k).allowed for k in (b"\\xff\\x00", b"\\xc3\\xa9", b"\\xff\\x00")]))',
    'client.close()',
  ].join('\n');
  assert.deepEqual(await run(PYTHON, ['-c', python, URL, keyPrefix]), [true, true, false]);
  const client = await ioredis();
  try {
    const limiter = new rkRedis.RedisLimiter(client, new rk.FixedWindow({ limit: 1, windowMs: 3_600_000, name: 'w' }), { prefix: keyPrefix });
    const spent = async (key) => !(await limiter.peek(key)).allowed;
    assert.deepEqual(
      [await spent(new Uint8Array([0xff, 0x00])), await spent(Buffer.from('é')), await spent('é'), await spent(new Uint8Array([0xff])), await spent('\u00ff\u0000')],
      [true, true, true, false, false],
    );
  } finally {
    await close(client);
  }
});

test('a Node acquire aborted behind which a Python process booked gives nothing back: the next booking takes no slot twice', async () => {
  const { rk, rkRedis, ioredis, close, until } = require('./helpers.cjs');
  const keyPrefix = prefix('cross-give-back');
  // A Python process books one unit of `k` and prints its slot (Unix seconds).
  const book = () =>
    run(PYTHON, [
      '-c',
      [
        'import json, sys, redis, ratekeeper',
        'from ratekeeper.redis import RedisLimiter',
        'client = redis.Redis.from_url(sys.argv[1])',
        'r = RedisLimiter(client, ratekeeper.Gcra(1, 1.0, name="g"), prefix=sys.argv[2]).reserve("k", max_wait=100)',
        'print(json.dumps([r.ok, r.at]))',
        'client.close()',
      ].join('\n'),
      URL,
      keyPrefix,
    ]);
  const client = await ioredis();
  try {
    const limiter = new rkRedis.RedisLimiter(client, new rk.Gcra({ burst: 1, emissionIntervalMs: 1000, name: 'g' }), { prefix: keyPrefix });
    assert.equal((await limiter.tryAcquire('k')).allowed, true);
    const controller = new AbortController();
    const pending = limiter.acquire('k', 1, { signal: controller.signal });
    await until(async () => (await limiter.peek('k', 0)).resetAfterMs > 1500); // booked a second on
    const [behindOk, behind] = await book();
    assert.equal(behindOk, true);
    controller.abort(new Error('stop'));
    await assert.rejects(pending, { message: 'stop' });
    // The give-back goes out on this client's connection before this peek.
    await limiter.peek('k', 0);
    const [afterOk, after] = await book();
    assert.equal(afterOk, true);
    // Given back from the middle, the aborted booking's unit went to `after` at `behind`'s slot.
    assert.ok(Math.abs(after - behind - 1) < 1e-5, `${after - behind} s apart`);
  } finally {
    await close(client);
  }
});
