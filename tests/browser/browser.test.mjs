// Runs the WebAssembly build (bindings-wasm/pkg/web, via web.mjs) in a real
// Chromium: the page runs fixed scenarios (four algorithms), every shared vector,
// real waiting with acquire, and the fixed scenario again in a module worker;
// this file asserts on what the page reports.
// Needs `bash scripts/wasm.sh build` first; run with `node --test tests/browser/`.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { startServer } from './server.mjs';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const OUT = fileURLToPath(new URL('./out/', import.meta.url));
const CHROMIUM = process.env.RATEKEEPER_CHROMIUM || '/usr/bin/chromium';
// From /work/shared/TOOLCHAIN.md: no sandbox (root in a container), nothing that phones home.
const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
];

function assertThrown(error, kind, code, argument) {
  assert.ok(error, `expected a ${kind} with code ${code}, nothing was thrown`);
  assert.equal(error.name, kind, error.message);
  assert.ok(kind === 'RangeError' ? error.isRangeError : error.isTypeError, `${error.name} is not a ${kind}`);
  assert.equal(error.code, code);
  assert.match(error.message, new RegExp(`\\b${argument}\\b`), 'the message names the argument in JS spelling');
}

function assertFixedScenario(fixed) {
  const allowed = fixed.burst.filter((d) => d.allowed);
  const denied = fixed.burst.filter((d) => !d.allowed);
  assert.equal(allowed.length, 5);
  assert.equal(denied.length, 7);
  assert.deepEqual(fixed.burst.slice(0, 5).map((d) => d.remaining), [4, 3, 2, 1, 0], 'the first five are the allowed ones');
  for (const d of denied) assert.deepEqual([d.remaining, d.limit, d.retryAfterMs], [0, 5, 1000]);

  assert.deepEqual(fixed.logAt, { 0: true, 999: false, 1000: true });

  assert.deepEqual(fixed.gcraBurst.map((d) => [d.allowed, d.remaining, d.retryAfterMs]), [[true, 1, 0], [true, 0, 0], [false, 0, 100]]);
  assert.deepEqual(fixed.gcraHeaders, { 'RateLimit-Policy': '"api";q=2;w=1', RateLimit: '"api";r=0;t=1', 'Retry-After': '1' });
  assert.deepEqual(fixed.queueWaits, [0, 100, 200, null]);
  assertThrown(fixed.errors.gcraPeriod, 'RangeError', 'invalid_value', 'periodMs');

  assertThrown(fixed.errors.zeroCapacity, 'RangeError', 'zero_value', 'capacity');
  assertThrown(fixed.errors.costAboveCapacity, 'RangeError', 'cost_exceeds_limit', 'cost');
  assertThrown(fixed.errors.costAsString, 'TypeError', 'invalid_type', 'cost');
  assertThrown(fixed.errors.negativeWindow, 'RangeError', 'invalid_value', 'windowMs');
  assertThrown(fixed.errors.notAnObject, 'TypeError', 'invalid_type', 'options');
  assert.equal(fixed.afterErrors.allowed, true, 'the bucket keeps working after bad calls');

  const [first, second] = fixed.defaultNow;
  assert.equal(first.allowed, true);
  assert.equal(second.allowed, false);
  assert.ok(second.retryAfterMs > 0 && second.retryAfterMs <= 60_000, `retryAfterMs ${second.retryAfterMs}`);
}

test('the WebAssembly build in Chromium', { timeout: 120_000 }, async (t) => {
  const glue = join(ROOT, 'bindings-wasm/pkg/web/ratekeeper_wasm.js');
  assert.ok(existsSync(glue), `${glue} is missing: run \`bash scripts/wasm.sh build\``);
  assert.ok(existsSync(CHROMIUM), `no Chromium at ${CHROMIUM}: apt-get install -y chromium, or set RATEKEEPER_CHROMIUM`);

  const server = await startServer(ROOT);
  let browser;
  try {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
    const page = await context.newPage();
    const problems = [];
    page.on('pageerror', (error) => problems.push(`pageerror: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error' || message.type() === 'warning') problems.push(`console.${message.type()}: ${message.text()}`);
    });

    await page.goto(`${server.url}/tests/browser/page/index.html`);
    await page.waitForSelector('#status:is([data-state="done"], [data-state="failed"])', { timeout: 60_000 });
    const results = await page.evaluate(() => window.__ratekeeperResults);
    await mkdir(OUT, { recursive: true });
    await page.screenshot({ path: join(OUT, 'chromium.png'), fullPage: true });

    await t.test('the page ran without errors', () => {
      assert.equal(results.error, undefined);
      assert.deepEqual(problems, []);
      assert.match(results.userAgent, /Chrome\//);
    });

    await t.test('fixed scenario in the page', () => assertFixedScenario(results.fixed));

    await t.test('fixed scenario in a module worker', () => assertFixedScenario(results.worker));

    await t.test('every shared vector passes in the page', async () => {
      const dirs = { './': 'tests/vectors', 'core-only/': 'tests/vectors/core-only' };
      assert.deepEqual(Object.keys(results.vectors), Object.keys(dirs));
      for (const [key, dir] of Object.entries(dirs)) {
        const index = JSON.parse(await readFile(join(ROOT, dir, 'index.json'), 'utf8'));
        const files = (await readdir(join(ROOT, dir))).filter((f) => f.endsWith('.json') && f !== 'index.json');
        assert.deepEqual(files.sort(), Object.keys(index.files).sort(), `${dir}: the vector files are the ones index.json lists`);
        const total = Object.values(index.files).reduce((a, b) => a + b, 0);
        const run = results.vectors[key];
        assert.deepEqual(run.fileProblems, [], dir);
        assert.deepEqual(run.results.filter((r) => r.problem).map((r) => `${dir}/${r.file} / ${r.name}: ${r.problem}`), []);
        assert.equal(run.total, total, dir);
        assert.equal(run.results.length, total, `${dir}: took up as many scenarios as index.json lists`);
        const inexpressible = run.results.filter((r) => r.inexpressible).length;
        assert.equal(run.results.filter((r) => r.problem === null).length + inexpressible, total);
        if (key === './') assert.equal(inexpressible, 0, 'every portable vector fits JS numbers');
      }
    });

    await t.test('acquire paces real waiters at the rate, never early', () => {
      const { intervalMs, resolved, timeout } = results.pacing;
      assert.equal(resolved.length, 6);
      resolved.forEach((at, i) => assert.ok(at >= i * intervalMs - 0.5, `waiter ${i} resolved at ${at} ms, before ${i * intervalMs} ms`));
      for (let i = 1; i < resolved.length; i++) assert.ok(resolved[i] >= resolved[i - 1], 'first come first served');
      assert.ok(resolved[5] < 5 * intervalMs + 1000, `the last waiter came ${resolved[5]} ms after the start`);
      assert.equal(timeout, 'TimeoutError');
    });

    await t.test('the server serves the build and nothing else', async () => {
      const wasm = await fetch(`${server.url}/bindings-wasm/pkg/web/ratekeeper_wasm_bg.wasm`);
      assert.equal(wasm.status, 200);
      assert.equal(wasm.headers.get('content-type'), 'application/wasm');
      await wasm.arrayBuffer();
      for (const path of ['/Cargo.toml', '/bindings-wasm/pkg/nodejs/ratekeeper_wasm.js', '/tests/browser/page/%2e%2e/%2e%2e/%2e%2e/Cargo.toml']) {
        const response = await fetch(`${server.url}${path}`);
        await response.arrayBuffer();
        assert.equal(response.status, 404, path);
      }
    });
  } finally {
    await browser?.close();
    await server.close();
  }
});
