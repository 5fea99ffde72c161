// ns per decision of the wasm build in Node and in Chromium, beside the pure-JS
// `limiter` package (and, in Node, the napi addon), in one run, with the ratios.
// A benchmark, not a test: it asserts nothing.
//
//   npm ci --prefix bindings-node/bench          (once: `limiter`)
//   bash scripts/wasm.sh build && bash scripts/node.sh build
//   node tests/browser/bench/run.mjs              (BENCH_N, BENCH_ROUNDS tune it)
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { extname, join, posix } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { bench, napiCase } from './cases.mjs';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const require = createRequire(import.meta.url);
const N = Number(process.env.BENCH_N) || 200_000;
const ROUNDS = Number(process.env.BENCH_ROUNDS) || 9;
const LIMITER = join(ROOT, 'bindings-node/bench/node_modules/limiter/dist/esm/');

function print(where, rows) {
  const base = rows.find(([name]) => name.startsWith('limiter'))[1];
  console.log(`\n${where} (ns per decision, median of ${ROUNDS} rounds of ${N}; ratio = limiter / this, > 1 is faster than limiter)`);
  for (const [name, ns] of rows) console.log(`  ${ns.toFixed(1).padStart(7)} ns  x${(base / ns).toFixed(2).padEnd(6)} ${name}`);
}

const limiter = await import(pathToFileURL(join(LIMITER, 'index.js')).href);
const wasm = require(join(ROOT, 'bindings-wasm/node.cjs'));
let extra = {};
try {
  extra = napiCase(require(join(ROOT, 'bindings-node/index.js')));
} catch (error) {
  console.error(`(no napi addon: ${error.message.split('\n')[0]})`);
}
print(`Node ${process.version}`, bench({ api: wasm, limiter, extra }, N, ROUNDS));

const SERVED = { '/bindings-wasm/': join(ROOT, 'bindings-wasm/'), '/limiter/': LIMITER, '/bench/': fileURLToPath(new URL('./', import.meta.url)) };
const TYPES = { '.html': 'text/html', '.mjs': 'text/javascript', '.js': 'text/javascript', '.wasm': 'application/wasm' };
const server = createServer(async (request, response) => {
  const path = posix.normalize(new URL(request.url, 'http://x').pathname);
  const prefix = Object.keys(SERVED).find((p) => path.startsWith(p));
  const file = path === '/' ? join(ROOT, 'tests/browser/bench/index.html') : prefix && !path.includes('..') ? join(SERVED[prefix], path.slice(prefix.length)) : null;
  try {
    if (!file || !TYPES[extname(file)]) throw new Error('not served');
    response.writeHead(200, { 'content-type': TYPES[extname(file)] }).end(await readFile(file));
  } catch {
    response.writeHead(404).end();
  }
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const { chromium } = createRequire(new URL('../', import.meta.url))('playwright-core');
const browser = await chromium.launch({
  executablePath: process.env.RATEKEEPER_CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'],
});
try {
  const page = await browser.newPage();
  await page.goto(`http://127.0.0.1:${server.address().port}/?n=${N}&rounds=${ROUNDS}`);
  await page.waitForFunction(() => document.title === 'done', null, { timeout: 300_000 });
  print(`Chromium ${browser.version()}`, await page.evaluate(() => window.benchResult));
} finally {
  await browser.close();
  server.closeAllConnections();
  server.close();
}
