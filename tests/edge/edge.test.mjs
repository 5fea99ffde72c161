// The packed tarball ($RATEKEEPER_TARBALL) inside Cloudflare's workerd, run by
// miniflare: the tarball is installed into an empty folder, `ratekeeper` is
// resolved through its `workerd` export condition (as wrangler's bundler would),
// and worker.mjs answers real dispatchFetch calls: admitted, then 429 with the
// RateLimit headers and Retry-After, per client.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, before, test } from 'node:test';
import { Miniflare } from 'miniflare';

const TARBALL = process.env.RATEKEEPER_TARBALL;
let dir;
let mf;

/** Every module of the installed package's wasm build, for workerd (which does not read node_modules itself). */
function packageModules(root) {
  const modules = [];
  const walk = (folder) => {
    for (const entry of readdirSync(folder, { withFileTypes: true })) {
      const path = join(folder, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.wasm')) modules.push({ type: 'CompiledWasm', path });
      else if (/\.m?js$/.test(entry.name)) modules.push({ type: 'ESModule', path });
    }
  };
  walk(join(root, 'wasm'));
  modules.push({ type: 'ESModule', path: join(root, 'lib/paced-fetch.mjs') });
  return modules;
}

before(async () => {
  assert.ok(TARBALL && existsSync(TARBALL), 'set RATEKEEPER_TARBALL (bash scripts/package.sh test does)');
  dir = mkdtempSync(join(tmpdir(), 'ratekeeper-edge-'));
  writeFileSync(join(dir, 'package.json'), '{ "name": "edge-worker", "version": "0.0.0", "private": true }\n');
  execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--loglevel=error', TARBALL], { cwd: dir });
  const root = join(dir, 'node_modules/ratekeeper');
  const entry = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).exports['.'].workerd.default;
  assert.equal(entry, './wasm/workerd.mjs');
  // The bare specifier, resolved as a bundler with the `workerd` condition would.
  const source = readFileSync(new URL('./worker.mjs', import.meta.url), 'utf8').replace(
    "from 'ratekeeper'",
    `from './${relative(dir, join(root, entry))}'`,
  );
  writeFileSync(join(dir, 'worker.mjs'), source);
  mf = new Miniflare({
    modulesRoot: dir,
    modules: [{ type: 'ESModule', path: join(dir, 'worker.mjs') }, ...packageModules(root)],
    compatibilityDate: '2025-01-01',
  });
  await mf.ready;
});

after(async () => {
  if (mf) await mf.dispose();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const get = (client) => mf.dispatchFetch('http://localhost/', { headers: { 'x-client': client } });

test('each client gets its burst, then 429 with RateLimit headers and Retry-After', async () => {
  const answers = [];
  for (let i = 0; i < 4; i++) {
    const response = await get('alice');
    answers.push([response.status, response.headers.get('ratelimit'), response.headers.get('retry-after')]);
    const body = await response.json();
    assert.equal(body.algorithm, 'token_bucket');
  }
  assert.deepEqual(answers.slice(0, 3).map((a) => a[0]), [200, 200, 200]);
  assert.deepEqual(answers.slice(0, 3).map((a) => a[1].match(/r=(\d+)/)[1]), ['2', '1', '0']);
  assert.equal(answers[3][0], 429);
  assert.match(answers[3][1], /^"edge";r=0;t=\d+$/);
  // One token a minute: the fourth waits for the first to come back, less the
  // time the calls took (seconds at most, on a loaded machine).
  assert.ok(Number(answers[3][2]) >= 50 && Number(answers[3][2]) <= 60, `Retry-After ${answers[3][2]}`);

  // Another client has a key of its own in the worker's KeyedLimiter.
  const bob = await get('bob');
  assert.equal(bob.status, 200);
  assert.equal(bob.headers.get('ratelimit-policy'), '"edge";q=3;w=180');
  // Seeded from crypto.getRandomValues() once, at the first request, in a handler.
  assert.deepEqual(((body) => [body.keys, body.randoms])(await bob.json()), [2, 1]);
  const again = await get('alice');
  assert.equal(again.status, 429);
  await again.arrayBuffer();
});
