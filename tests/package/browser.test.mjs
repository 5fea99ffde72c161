// pacedFetch in a real Chromium, from the packed tarball ($RATEKEEPER_TARBALL)
// installed into an empty folder: tests/browser/pace/ (the demo page) imports the
// package's browser build and sends a burst of 12 requests, paced at 10 per second,
// to this file's server on 127.0.0.1, which records when each one arrives and
// answers request #5 once with 429 and `Retry-After: 1`. The test asserts the
// spacing the server saw and takes a screenshot (tests/browser/out/paced-fetch.png).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { extname, join, posix } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const TARBALL = process.env.RATEKEEPER_TARBALL;
const CHROMIUM = process.env.RATEKEEPER_CHROMIUM || '/usr/bin/chromium';
const PAGE = fileURLToPath(new URL('../browser/pace/', import.meta.url));
const OUT = fileURLToPath(new URL('../browser/out/', import.meta.url));
const ARGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
  '--disable-sync', '--no-first-run', '--disable-quic'];
const TYPES = { '.html': 'text/html', '.mjs': 'text/javascript', '.js': 'text/javascript', '.wasm': 'application/wasm' };
const EMISSION_MS = 100;

let dir;
let server;
const arrivals = []; // [item, attempt, ms on this process's clock]

before(async () => {
  assert.ok(TARBALL && existsSync(TARBALL), 'set RATEKEEPER_TARBALL (bash scripts/package.sh test does)');
  assert.ok(existsSync(CHROMIUM), `no Chromium at ${CHROMIUM}`);
  dir = mkdtempSync(join(tmpdir(), 'ratekeeper-browser-'));
  writeFileSync(join(dir, 'package.json'), '{ "name": "web-app", "version": "0.0.0", "private": true }\n');
  execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--loglevel=error', TARBALL], { cwd: dir });
  const pkg = join(dir, 'node_modules/ratekeeper');
  const seen = new Map();
  server = createServer(async (request, response) => {
    const path = posix.normalize(new URL(request.url, 'http://x').pathname);
    const item = path.match(/^\/api\/item\/(\d+)$/);
    if (path === '/api/warm') return void response.writeHead(204).end();
    if (item) {
      const attempt = seen.get(item[1]) ?? 0;
      seen.set(item[1], attempt + 1);
      arrivals.push([Number(item[1]), attempt, performance.now()]);
      const throttle = item[1] === '5' && attempt === 0;
      response.writeHead(throttle ? 429 : 200, {
        'content-type': 'application/json',
        ...(throttle ? { 'retry-after': '1' } : {}),
      });
      response.end(JSON.stringify({ item: Number(item[1]), attempt }));
      return;
    }
    let file = null;
    if (path === '/' || path === '/index.html') file = join(PAGE, 'index.html');
    else if (path === '/pace.mjs') file = join(PAGE, 'pace.mjs');
    else if (path.startsWith('/ratekeeper/') && !path.includes('..')) file = join(pkg, path.slice('/ratekeeper/'.length));
    const type = file && TYPES[extname(file)];
    if (!type) return void response.writeHead(404).end();
    try {
      response.writeHead(200, { 'content-type': type, 'cache-control': 'no-store' }).end(await readFile(file));
    } catch {
      response.writeHead(404).end();
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
});

after(async () => {
  if (server) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('a burst leaves the page at the limiter rate, and pauses on Retry-After', { timeout: 90_000 }, async () => {
  // playwright-core is installed in tests/browser (bash scripts/wasm.sh setup).
  const { chromium } = createRequire(new URL('../browser/', import.meta.url))('playwright-core');
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
  try {
    const page = await browser.newPage({ viewport: { width: 900, height: 560 } });
    const problems = [];
    page.on('pageerror', (error) => problems.push(error.message));
    await page.goto(`http://127.0.0.1:${server.address().port}/?count=12&rate=10`);
    await page.waitForFunction(() => document.title === 'done', null, { timeout: 30_000 });
    mkdirSync(OUT, { recursive: true });
    await page.screenshot({ path: join(OUT, 'paced-fetch.png') });
    const result = await page.evaluate(() => window.paceResult);
    assert.deepEqual(problems, []);
    assert.equal(result.emissionIntervalMs, EMISSION_MS);
    assert.deepEqual(result.responses.map((r) => r.status), Array(12).fill(200), 'every request answered 200 in the end');
    assert.equal(result.responses[5].body.attempt, 1, '#5 was retried once');

    // The page: every send at or after its slot, slots 100 ms apart but for the pause.
    for (const s of result.sent) assert.ok(s.atMs >= s.slotMs - 0.001, `#${s.id} sent at ${s.atMs}, before its slot ${s.slotMs}`);

    // The server, in arrival order: #0..#5 100 ms apart, #5 again 1 s later, then #6..#11 100 ms apart.
    assert.deepEqual(arrivals.map(([item, attempt]) => [item, attempt]), [
      [0, 0], [1, 0], [2, 0], [3, 0], [4, 0], [5, 0], [5, 1], [6, 0], [7, 0], [8, 0], [9, 0], [10, 0], [11, 0],
    ]);
    const at = arrivals.map(([, , ms]) => ms);
    const gaps = at.slice(1).map((t, i) => t - at[i]);
    // Transit jitter (a busy machine: 2 cores shared) delays single arrivals by up to
    // about one interval; it cannot make them early: the spacing holds between any
    // two, less one arrival's jitter, and the typical (median) gap is the interval.
    const shown = `gaps ${gaps.map(Math.round)}`;
    for (const run of [at.slice(0, 6), at.slice(6)]) {
      for (let i = 0; i < run.length; i++) {
        for (let j = i + 1; j < run.length; j++) assert.ok(run[j] - run[i] >= (j - i) * EMISSION_MS - 120, shown);
      }
    }
    const paced = [...gaps.slice(0, 5), ...gaps.slice(6)].sort((a, b) => a - b);
    const median = paced[paced.length >> 1];
    assert.ok(median >= EMISSION_MS - 5 && median <= EMISSION_MS * 1.3, `median gap ${median}; ${shown}`);
    // The pause starts when the 429 reaches the page, after it reached the server.
    assert.ok(gaps[5] >= 1000 - 5, `Retry-After: 1 paused the queue ${gaps[5]} ms`);
    console.log(`server saw gaps (ms): ${gaps.map((g) => g.toFixed(1)).join(' ')}`);
  } finally {
    await browser.close();
  }
});
