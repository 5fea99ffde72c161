// The packed `ratekeeper` tarball ($RATEKEEPER_TARBALL, made by `bash
// scripts/package.sh pack`) installed offline into an empty folder: Node's
// require and import get the native addon; the `browser` export condition (what
// a bundler's browser build asks for) gets the WebAssembly build; the typings
// of both are checked by tsc when TypeScript is at hand.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, test } from 'node:test';

const TARBALL = process.env.RATEKEEPER_TARBALL;
let dir;

function node(args, input) {
  return execFileSync(process.execPath, args, { cwd: dir, input, encoding: 'utf8' });
}

before(() => {
  assert.ok(TARBALL && existsSync(TARBALL), 'set RATEKEEPER_TARBALL (bash scripts/package.sh test does)');
  dir = mkdtempSync(join(tmpdir(), 'ratekeeper-install-'));
  writeFileSync(join(dir, 'package.json'), '{ "name": "consumer", "version": "0.0.0", "private": true }\n');
  // The package has no dependencies: nothing to fetch.
  execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--loglevel=error', TARBALL], { cwd: dir });
});

after(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('the tarball holds both builds and the typings', () => {
  const root = join(dir, 'node_modules/ratekeeper');
  for (const file of [
    'main.cjs', 'main.mjs', 'main.d.mts', 'index.js', 'index.d.ts', 'ratekeeper.d.ts', 'paced-fetch.d.ts', 'lib/api.cjs', 'lib/api/limiters.cjs',
    'lib/paced-fetch.cjs', 'lib/paced-fetch/headers.cjs', 'lib/paced-fetch.mjs', 'lib/redis.cjs', 'lib/redis/store.cjs', 'lib/redis/wire.cjs', 'lib/ratekeeper.lua', 'redis.d.ts', 'ratekeeper.linux-x64-gnu.node', 'wasm/browser.mjs', 'wasm/browser.cjs', 'wasm/browser-node.mjs', 'wasm/url.d.mts',
    'wasm/workerd.mjs', 'wasm/browser.d.mts', 'wasm/web.mjs', 'wasm/pkg/api.mjs', 'wasm/pkg/web/ratekeeper_wasm_bg.wasm',
    'wasm/pkg/nodejs/ratekeeper_wasm.js', 'wasm/pkg/nodejs/ratekeeper_wasm_bg.wasm', 'LICENSE-MIT', 'LICENSE-APACHE',
  ]) {
    assert.ok(existsSync(join(root, file)), `${file} is in the package`);
  }
  // Typings nothing refers to (the loader's own, wasm-bindgen's raw glue's) stay out.
  for (const file of ['native.d.ts', 'wasm/pkg/web/ratekeeper_wasm.d.ts']) {
    assert.ok(!existsSync(join(root, file)), `${file} is not in the package`);
  }
});

const USE = `
  const d = new api.TokenBucket({ capacity: 2, refillTokens: 1, refillPeriodMs: 1000 }).tryAcquire(1, 0);
  const g = api.Gcra.perPeriod({ burst: 1, tokens: 1, periodMs: 1000 });
  console.log(JSON.stringify({ remaining: d.remaining, paced: typeof api.pacedFetch(fetch, g), init: typeof api.init }));
`;

test('require("ratekeeper") is the native addon', () => {
  const out = node(['-e', `
    const where = require.resolve('ratekeeper');
    const api = require('ratekeeper');
    ${USE}
    console.log(where);
  `]).trim().split('\n');
  assert.deepEqual(JSON.parse(out[0]), { remaining: 1, paced: 'function', init: 'function' });
  assert.match(out[1], /node_modules\/ratekeeper\/main\.cjs$/);
});

test("code shared with browsers, compiled to CommonJS (Babel, as Jest's default node environment runs it), calls the default export: init", () => {
  // `import init, { Gcra } from 'ratekeeper'; await init()`, as NPM.md shows
  // for code shared between browsers and Node: Babel's interop read the
  // unmarked main.cjs as the default, and init() threw "is not a function"
  // (under jsdom, wasm/browser.cjs was marked already).
  const out = node(['-e', `
    (async () => {
      const api = require('ratekeeper');
      const init = api.__esModule ? api.default : api;
      await init();
      init.initSync();
      console.log(JSON.stringify([typeof init, init === api.init, init.Gcra === api.Gcra, init.pacedFetch === api.pacedFetch]));
    })();
  `]).trim();
  assert.deepEqual(JSON.parse(out), ['function', true, true, true]);
});

test('where no native addon loads, require and import fall back to the WebAssembly build, with a warning', () => {
  // As on macOS, Windows, arm64, musl or an older glibc: loading the .node fails.
  const noAddon = "process.dlopen = () => { throw new Error('not this platform'); };";
  const required = execFileSync(process.execPath, ['-e', `${noAddon}
    const api = require('ratekeeper');
    ${USE}
    console.log(typeof api.KeyedLimiter, new api.KeyedLimiter(new api.Gcra({ burst: 1, emissionIntervalMs: 10 })).tryAcquire('k', 1, 0).allowed);
  `], { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const out = required.trim().split('\n');
  assert.deepEqual(JSON.parse(out[0]), { remaining: 1, paced: 'function', init: 'function' });
  assert.equal(out[1], 'function true');
  const imported = node(['--input-type=module', '--no-warnings', '-e', `${noAddon}
    const api = await import('ratekeeper');
    ${USE}
  `]).trim();
  assert.deepEqual(JSON.parse(imported), { remaining: 1, paced: 'function', init: 'function' });
  const warned = spawnSync(process.execPath, ['-e', `${noAddon} require('ratekeeper');`], { cwd: dir, encoding: 'utf8' });
  assert.equal(warned.status, 0);
  assert.match(warned.stderr, /\[RATEKEEPER_WASM_FALLBACK\] Warning: no native addon of ratekeeper loads on/);
  // Here, where the addon ships, the detail is why it did not load.
  assert.match(warned.stderr, /Loading the linux-x64 addon failed: /);
});

test('import("ratekeeper") is the native addon, the same instance as require', () => {
  const out = node(['--input-type=module', '-e', `
    import * as api from 'ratekeeper';
    import init from 'ratekeeper';
    import { createRequire } from 'node:module';
    const required = createRequire(process.cwd() + '/')('ratekeeper');
    if (api.TokenBucket !== required.TokenBucket) throw new Error('two instances');
    // Code shared with browsers: init and initSync do nothing on Node, and
    // the default export is init, as the browser entry's (with the API on it).
    if ((await api.init()) !== undefined || api.initSync() !== undefined) throw new Error('init answered');
    if (typeof init !== 'function' || (await init()) !== undefined) throw new Error('the default export is no init');
    if (init.TokenBucket !== api.TokenBucket) throw new Error('the default export lost the API');
    ${USE}
    console.log(import.meta.resolve('ratekeeper'));
  `]).trim().split('\n');
  assert.deepEqual(JSON.parse(out[0]), { remaining: 1, paced: 'function', init: 'function' });
  assert.match(out[1], /node_modules\/ratekeeper\/main\.mjs$/);
});

test('where no native addon loads, ratekeeper/redis loads too, with the same script, and takes the limiters of the fallback', () => {
  // As on macOS, Windows, arm64 or musl: it required the addon for its
  // script, and threw the addon's error ("Cannot find native binding ...
  // try `npm i` again") where 'ratekeeper' fell back to the WebAssembly build.
  const noAddon = "process.dlopen = () => { throw new Error('not this platform'); };";
  const script = `
    const { RedisLimiter, RedisPolicy, REDIS_SCRIPT, REDIS_SCRIPT_SHA } = require('ratekeeper/redis');
    const api = require('ratekeeper');
    const client = { call() {}, evalsha() {} };
    const keyed = new RedisLimiter(client, new api.Gcra({ burst: 1, emissionIntervalMs: 10 }));
    const policy = new RedisPolicy(client, { limits: [{ name: 'a', limiter: new api.Gcra({ burst: 1, emissionIntervalMs: 10 }) }] });
    console.log(JSON.stringify([REDIS_SCRIPT.length, REDIS_SCRIPT_SHA, keyed.algorithm, policy.names]));
  `;
  const fallback = spawnSync(process.execPath, ['--no-warnings', '-e', `${noAddon} ${script}`], { cwd: dir, encoding: 'utf8' });
  assert.equal(fallback.status, 0, fallback.stderr);
  const native = JSON.parse(node(['-e', script]));
  assert.deepEqual(JSON.parse(fallback.stdout), native);
  assert.deepEqual(native.slice(2), ['gcra', ['a']]);
});

test('ratekeeper/redis resolves under node, from require and import, with the script inside', () => {
  const out = node(['--input-type=module', '-e', `
    import { RedisLimiter, RedisPolicy, REDIS_SCRIPT_SHA } from 'ratekeeper/redis';
    import { createRequire } from 'node:module';
    const required = createRequire(process.cwd() + '/')('ratekeeper/redis');
    if (required.RedisLimiter !== RedisLimiter) throw new Error('two instances');
    console.log(JSON.stringify({ limiter: typeof RedisLimiter, policy: typeof RedisPolicy, sha: REDIS_SCRIPT_SHA }));
    console.log(import.meta.resolve('ratekeeper/redis'));
  `]).trim().split('\n');
  const got = JSON.parse(out[0]);
  assert.deepEqual([got.limiter, got.policy], ['function', 'function']);
  assert.match(got.sha, /^[0-9a-f]{40}$/);
  assert.match(out[1], /node_modules\/ratekeeper\/lib\/redis\.cjs$/);
});

test("pacedFetch refuses with its entry's own RateLimited, on Node and under the browser condition", () => {
  // A queue with room for none: the second call is refused (maxWaiting 0).
  const refuse = `
    const queue = new api.LeakyBucket({ capacity: 1, intervalMs: 1000 });
    const paced = api.pacedFetch(async () => new Response('ok'), queue, { maxWaiting: 0 });
    await paced('http://127.0.0.1/1');
    const error = await paced('http://127.0.0.1/2').then(() => null, (e) => e);
    console.log(JSON.stringify({ instance: error instanceof api.RateLimited, name: error.name, code: error.code, wait: error.retryAfterMs > 0 }));
  `;
  const want = { instance: true, name: 'RateLimited', code: 'rate_limited', wait: true };
  const required = node(['-e', `(async () => { const api = require('ratekeeper'); ${refuse} })();`]);
  assert.deepEqual(JSON.parse(required), want, 'main.cjs');
  const browser = node(['--conditions=browser', '--input-type=module', '-e', `
    import * as api from 'ratekeeper';
    import { readFileSync } from 'node:fs';
    api.initSync(readFileSync(new URL('./pkg/web/ratekeeper_wasm_bg.wasm', import.meta.resolve('ratekeeper'))));
    ${refuse}
  `]);
  assert.deepEqual(JSON.parse(browser), want, 'wasm/browser-node.mjs');
});

test('the browser condition resolves to the WebAssembly build', () => {
  const out = node(['--conditions=browser', '--input-type=module', '-e', `
    import * as api from 'ratekeeper';
    import { createRequire } from 'node:module';
    ${USE}
    console.log(Object.keys(createRequire(import.meta.url).cache).filter((file) => /\\.node$|native\\.js$/.test(file)).length);
    console.log(import.meta.resolve('ratekeeper'));
  `]).trim().split('\n');
  assert.deepEqual(JSON.parse(out[0]), { remaining: 1, paced: 'function', init: 'function' });
  assert.equal(out[1], '0', 'no native addon loaded');
  // Node's own: wasm/browser.cjs's module instance (see below); bundlers take wasm/browser.mjs.
  assert.match(out[2], /node_modules\/ratekeeper\/wasm\/browser-node\.mjs$/);
});

test('under the browser condition in Node, import and require share one instance of the WebAssembly build', () => {
  // A process that imports the package (its own code) and requires it (a
  // CommonJS dependency) loaded wasm/browser.mjs and wasm/browser.cjs, two
  // copies of the build: its classes differed, so that `instanceof` and
  // RateLimited held across none, and a limiter of one was refused by the
  // other's KeyedLimiter and Policy.
  const out = node(['--conditions=browser', '--input-type=module', '-e', `
    import * as imported from 'ratekeeper';
    import importedDefault from 'ratekeeper';
    import { createRequire } from 'node:module';
    const required = createRequire(import.meta.url)('ratekeeper');
    const gcra = new required.Gcra({ burst: 1, emissionIntervalMs: 1000 });
    const keyed = new imported.KeyedLimiter(gcra);
    console.log(JSON.stringify({
      classes: ['Limiter', 'Gcra', 'KeyedLimiter', 'Policy', 'RateLimited'].every((name) => imported[name] === required[name]),
      instance: gcra instanceof imported.Gcra && keyed instanceof required.KeyedLimiter,
      decides: [keyed.tryAcquire('a', 1, 0).allowed, keyed.tryAcquire('a', 1, 0).allowed],
      init: imported.init === required.init && importedDefault === imported.init,
    }));
    // The names the entry bundlers take exports, each there.
    const web = await import(new URL('./browser.mjs', import.meta.resolve('ratekeeper')));
    console.log(JSON.stringify([Object.keys(imported).sort(), Object.keys(web).sort()]));
  `]).trim().split('\n');
  assert.deepEqual(JSON.parse(out[0]), { classes: true, instance: true, decides: [true, false], init: true });
  const [names, webNames] = JSON.parse(out[1]);
  assert.deepEqual(names, webNames);
});

test('require under the browser condition (Jest with jsdom) is the WebAssembly build, as CommonJS', () => {
  // Jest's module system requires no ES module (before Node 24.9): it failed
  // on wasm/browser.mjs with "Must use import to load ES Module". A Node that
  // requires none either stands for it.
  const noRequireEsm = process.allowedNodeEnvironmentFlags.has('--experimental-require-module') ? ['--no-experimental-require-module'] : [];
  const out = node([...noRequireEsm, '--conditions=browser', '-e', `
    (async () => {
      const api = require('ratekeeper');
      ${USE}
      // \`import init, { KeyedLimiter } from 'ratekeeper'\` as Babel compiles it.
      const init = api.__esModule ? api.default : api;
      await init();
      const keyed = new api.KeyedLimiter(new api.Gcra({ burst: 1, emissionIntervalMs: 1000 }), { maxKeys: 10 });
      console.log(JSON.stringify([keyed.tryAcquire('a', 1, 0).allowed, keyed.tryAcquire('a', 1, 0).allowed, init === api.init]));
      console.log(Object.keys(require.cache).filter((file) => /\.node$|native\.js$/.test(file)).length);
      console.log(require.resolve('ratekeeper'));
    })();
  `]).trim().split('\n');
  assert.deepEqual(JSON.parse(out[0]), { remaining: 1, paced: 'function', init: 'function' });
  assert.deepEqual(JSON.parse(out[1]), [true, false, true]);
  assert.equal(out[2], '0', 'no native addon loaded');
  assert.match(out[3], /node_modules\/ratekeeper\/wasm\/browser\.cjs$/);
});

test('under the browser condition in Node, the WebAssembly build is loaded at import: init() and initSync() do nothing', () => {
  const out = node(['--conditions=browser', '--input-type=module', '-e', `
    import init, { initSync, Gcra } from 'ratekeeper';
    console.log(new Gcra({ burst: 2, emissionIntervalMs: 10 }).tryAcquire(1, 0).remaining);
    await init();
    initSync();
    console.log(new Gcra({ burst: 2, emissionIntervalMs: 10 }).tryAcquire(1, 0).remaining);
  `]).trim().split('\n');
  assert.deepEqual(out, ['1', '1']);
});

test("in Node, the browsers' entry's init() says how to give it the .wasm, and that way works", () => {
  // Node's fetch reads no file: URL, which init() fetches by default there:
  // wasm/browser.mjs, loaded in Node by a tool that resolves as a bundler
  // does (the `module` condition: see PACKAGE.md), here by its path.
  const out = node(['--input-type=module', '-e', `
    import { readFile } from 'node:fs/promises';
    const { init, Gcra } = await import(new URL('./wasm/browser.mjs', import.meta.resolve('ratekeeper/package.json')));
    try {
      await init();
    } catch (error) {
      console.log(JSON.stringify({ code: error.code, message: error.message, cause: error.cause?.message }));
    }
    await init(await readFile(new URL(import.meta.resolve('ratekeeper/ratekeeper.wasm'))));
    console.log(new Gcra({ burst: 2, emissionIntervalMs: 10 }).tryAcquire(1, 0).remaining);
  `]).trim().split('\n');
  const failed = JSON.parse(out[0]);
  assert.equal(failed.code, 'init_failed');
  assert.match(failed.message, /cannot fetch the \.wasm from a file: URL .* init\(await readFile\(new URL\(import\.meta\.resolve\('ratekeeper\/ratekeeper\.wasm'\)\)\)\)/);
  assert.equal(typeof failed.cause, 'string', 'the fetch error is kept as the cause');
  assert.equal(out[1], '1', 'the recipe in the message works');
});

test('under the browser condition in Node, ratekeeper/redis takes the native limiters it exports, and names them for a wasm one', () => {
  // 'ratekeeper' is then the WebAssembly build, ratekeeper/redis the native
  // one: a wasm Gcra was refused with a message that did not say why.
  const out = node(['--conditions=browser', '--input-type=module', '-e', `
    import { init, Gcra as WasmGcra } from 'ratekeeper';
    import { RedisLimiter, RedisPolicy, Gcra } from 'ratekeeper/redis';
    import { readFile } from 'node:fs/promises';
    await init(await readFile(new URL(import.meta.resolve('ratekeeper/ratekeeper.wasm'))));
    const client = { call() {}, evalsha() {} };
    const wasmGcra = () => new WasmGcra({ burst: 1, emissionIntervalMs: 10 });
    for (const make of [
      () => new RedisLimiter(client, wasmGcra()),
      () => new RedisLimiter(client, new Gcra({ burst: 1, emissionIntervalMs: 10 }), { onError: wasmGcra() }),
      () => new RedisPolicy(client, { limits: [{ name: 'a', limiter: wasmGcra() }] }),
    ]) {
      try {
        make();
      } catch (error) {
        console.log(JSON.stringify({ name: error.name, message: error.message }));
      }
    }
    console.log(new RedisLimiter(client, new Gcra({ burst: 1, emissionIntervalMs: 10 })).algorithm);
  `]).trim().split('\n');
  const refusals = out.slice(0, 3).map((line) => JSON.parse(line));
  assert.deepEqual(refusals.map((r) => r.name), ['TypeError', 'TypeError', 'TypeError']);
  for (const [refused, name] of refusals.map((r, i) => [r, ['limiter', 'onError', 'limits[0].limiter'][i]])) {
    assert.match(refused.message, new RegExp(`^\`${name.replace(/[[\]]/g, '\\$&')}\` must be a Gcra of the native build .* the classes 'ratekeeper/redis' exports`));
  }
  assert.equal(out[3], 'gcra');
});

test("ratekeeper/redis exports the RateLimited its acquire rejects with: 'ratekeeper''s on Node, the native build's under the browser condition", () => {
  // A client whose every script call answers "not booked, retry in 5 s"
  // (the reply of a reserve: now, booked, wait, then the decision).
  const refused = `
    const client = { call: async () => [1000000, 0, 0, 0, 0, 0, 1, 5000000, 5000000], evalsha() {} };
    const error = await new RedisLimiter(client, new Gcra({ burst: 1, emissionIntervalMs: 10 })).acquire('k').then(() => null, (e) => e);
    console.log(JSON.stringify([error.name, error.retryAfterMs, error instanceof RateLimited, RateLimited === api.RateLimited]));
  `;
  const onNode = node(['--input-type=module', '-e', `
    import { RedisLimiter, Gcra, RateLimited } from 'ratekeeper/redis';
    import * as api from 'ratekeeper';
    ${refused}
  `]);
  assert.deepEqual(JSON.parse(onNode), ['RateLimited', 5000, true, true]);
  // 'ratekeeper' is the WebAssembly build there: its RateLimited is another
  // class, and ratekeeper/redis exported none, so that `instanceof` held for
  // no class the caller could import.
  const underBrowser = node(['--conditions=browser', '--input-type=module', '-e', `
    import { RedisLimiter, Gcra, RateLimited } from 'ratekeeper/redis';
    import * as api from 'ratekeeper';
    ${refused}
  `]);
  assert.deepEqual(JSON.parse(underBrowser), ['RateLimited', 5000, true, false]);
});

test("a bundler's browser build (esbuild) takes the WebAssembly build, and it runs", async () => {
  const esbuildPath = new URL('./node_modules/esbuild/lib/main.js', import.meta.url);
  // A failure, not a skip: a skipped test would read as passing.
  assert.ok(existsSync(esbuildPath), 'no esbuild in tests/package/node_modules: run bash scripts/package.sh setup');
  const { build } = await import(esbuildPath.href);
  writeFileSync(join(dir, 'app.mjs'), "export { default as init, initSync, Gcra, pacedFetch } from 'ratekeeper';\n");
  const bundle = (options) =>
    build({ entryPoints: ['app.mjs'], absWorkingDir: dir, bundle: true, format: 'esm', metafile: true, logLevel: 'silent', ...options });
  const web = await bundle({ platform: 'browser', outfile: join(dir, 'out/app.mjs') });
  const inputs = Object.keys(web.metafile.inputs);
  assert.ok(inputs.includes('node_modules/ratekeeper/wasm/browser.mjs'), inputs.join());
  assert.ok(inputs.includes('node_modules/ratekeeper/wasm/pkg/web/ratekeeper_wasm.js'));
  assert.ok(!inputs.some((file) => /main\.c?js|native\.js|index\.js$/.test(file)), `no native code: ${inputs}`);
  const app = await import(pathToFileURL(join(dir, 'out/app.mjs')).href);
  app.initSync(readFileSync(join(dir, 'node_modules/ratekeeper/wasm/pkg/web/ratekeeper_wasm_bg.wasm')));
  const gcra = app.Gcra.perPeriod({ burst: 1, tokens: 2, periodMs: 1000 });
  assert.deepEqual([gcra.tryAcquire(1, 0).allowed, gcra.tryAcquire(1, 0).retryAfterMs], [true, 500]);
  assert.equal(typeof app.pacedFetch, 'function');
  // A require() in a browser bundle takes the same ES module (the `module`
  // condition, before `require`, which is for Node: wasm/browser.cjs reads its .wasm with fs).
  writeFileSync(join(dir, 'app.cjs'), "module.exports = require('ratekeeper');\n");
  const required = await bundle({ entryPoints: ['app.cjs'], format: 'cjs', platform: 'browser', write: false, outfile: 'app.js' });
  const requiredInputs = Object.keys(required.metafile.inputs);
  assert.ok(requiredInputs.includes('node_modules/ratekeeper/wasm/browser.mjs'), requiredInputs.join());
  assert.ok(!requiredInputs.some((file) => /browser\.cjs|browser-node\.mjs|pkg\/nodejs/.test(file)), requiredInputs.join());

  // A page's bundle cannot see the .wasm the glue fetches beside it: the
  // package exports it (ratekeeper/ratekeeper.wasm) for the bundler to emit,
  // and the page calls init(wasmUrl).
  writeFileSync(join(dir, 'asset.mjs'), "export { default as wasmUrl } from 'ratekeeper/ratekeeper.wasm';\n");
  const outdir = join(dir, 'out-asset');
  await build({ entryPoints: ['asset.mjs'], absWorkingDir: dir, bundle: true, format: 'esm', platform: 'browser', loader: { '.wasm': 'file' }, outdir, logLevel: 'silent' });
  const { wasmUrl } = await import(pathToFileURL(join(outdir, 'asset.js')).href);
  assert.deepEqual(readFileSync(join(outdir, wasmUrl)), readFileSync(join(dir, 'node_modules/ratekeeper/wasm/pkg/web/ratekeeper_wasm_bg.wasm')));

  // As wrangler bundles a Cloudflare worker: the workerd condition, the .wasm left as a module import.
  const worker = await bundle({ platform: 'neutral', conditions: ['workerd', 'worker', 'browser'], external: ['*.wasm'], write: false, outfile: 'worker.mjs' });
  assert.ok(Object.keys(worker.metafile.inputs).includes('node_modules/ratekeeper/wasm/workerd.mjs'));

  // package.json's `sideEffects`: a page that takes no pacedFetch gets none
  // of it, and a worker that takes only a limiter still initialises the
  // wasm at import (workerd.mjs is listed as having side effects).
  writeFileSync(join(dir, 'lean.mjs'), "export { default as init, Gcra } from 'ratekeeper';\n");
  const bundled = (result) => Object.entries(Object.values(result.metafile.outputs)[0].inputs).filter(([, input]) => input.bytesInOutput > 0).map(([file]) => file);
  const lean = await bundle({ entryPoints: ['lean.mjs'], platform: 'browser', write: false, outfile: 'lean.js' });
  assert.ok(!bundled(lean).some((file) => file.includes('paced-fetch')), `no pacedFetch: ${bundled(lean)}`);
  assert.ok(bundled(lean).includes('node_modules/ratekeeper/wasm/pkg/api.mjs'), 'the limiters are there');
  assert.ok(bundled(web).includes('node_modules/ratekeeper/lib/paced-fetch.mjs'), 'pacedFetch is there when taken');
  writeFileSync(join(dir, 'lean-worker.mjs'), "export { Gcra } from 'ratekeeper';\n");
  const leanWorker = await bundle({ entryPoints: ['lean-worker.mjs'], platform: 'neutral', conditions: ['workerd', 'worker', 'browser'], external: ['*.wasm'], write: false, outfile: 'w.mjs' });
  assert.ok(bundled(leanWorker).includes('node_modules/ratekeeper/wasm/workerd.mjs'), `workerd.mjs kept: ${bundled(leanWorker)}`);
  assert.match(leanWorker.outputFiles[0].text, /initSync\(\w+\)/);
  assert.ok(!bundled(leanWorker).some((file) => file.includes('paced-fetch')), `no pacedFetch: ${bundled(leanWorker)}`);
});

test("npm's README is the one for users", () => {
  const readme = readFileSync(join(dir, 'node_modules/ratekeeper/README.md'), 'utf8');
  assert.match(readme, /^# ratekeeper\n/);
  for (const topic of ['npm install ratekeeper', 'await init(', 'ratekeeper/ratekeeper.wasm', 'RATEKEEPER_WASM_FALLBACK']) assert.ok(readme.includes(topic), topic);
  assert.ok(!readme.includes('scripts/'), 'nothing of the repository');
  // Its Node example runs as written (an ES module).
  node(['--input-type=module', '-e', `${firstExample(readme, '## Node')}\nconsole.log(JSON.stringify(d));`]);
});

/** The first ```js block after `heading` in `markdown`. */
function firstExample(markdown, heading) {
  return markdown.split(heading)[1].split('```js\n')[1].split('```')[0];
}

test("the repository's Node examples run against the package, and show what they print", () => {
  const repo = new URL('../../', import.meta.url);
  const readme = readFileSync(new URL('README.md', repo), 'utf8');
  const binding = readFileSync(new URL('bindings-node/README.md', repo), 'utf8');
  for (const example of [firstExample(readme, '## Node and WebAssembly'), firstExample(binding, '## Quick start')]) {
    node(['--input-type=module', '-e', example]);
  }
  // The quick start's `bucket` stays on its clock: five seconds on, it is
  // full again. (It was given an explicit 12_500 ms, which held it there, and
  // calls on performance.now() got no refill for the next 12 s.)
  const onItsClock = "if (!bucket.peek(5, performance.now() + 5000).allowed) throw new Error('the bucket is held ahead of its clock');";
  node(['--input-type=module', '-e', `${firstExample(binding, '## Quick start')}\n${onItsClock}`]);
  // CommonJS, as written; `nowMs` is the reader's clock.
  for (const heading of ['## Keyed limiters', '## Policies']) {
    node(['--input-type=commonjs', '-e', `const nowMs = performance.now();\n${firstExample(binding, heading)}`]);
  }
  // The headers example ends with an expression and, in a comment, its value.
  const lines = firstExample(binding, '## Headers').trimEnd().split('\n');
  const [expression, shown] = [lines.at(-2).replace(/\/\/.*$/, ''), lines.at(-1).replace(/^\/\/ /, '')];
  const setup = lines.slice(0, -2).join('\n');
  const printed = node(['--input-type=module', '-e', `import { TokenBucket } from 'ratekeeper';\n${setup}\nconsole.log(JSON.stringify(${expression}));`]);
  assert.deepEqual(JSON.parse(printed), new Function(`return (${shown});`)());
});

test('the export conditions in package.json', () => {
  const pkg = JSON.parse(readFileSync(join(dir, 'node_modules/ratekeeper/package.json'), 'utf8'));
  const dot = pkg.exports['.'];
  assert.deepEqual(Object.keys(dot), ['workerd', 'deno', 'browser', 'node', 'default']);
  for (const condition of ['workerd', 'deno', 'browser', 'default']) assert.match(Object.values(dot[condition]).join(), /wasm\//);
  // Bundlers ask for `module`; Node for `node` (its import: browser.cjs's
  // instance, one for both) or, Jest with jsdom, for `require`, which takes CommonJS.
  assert.deepEqual(dot.browser, {
    types: './wasm/browser.d.mts',
    module: './wasm/browser.mjs',
    node: { import: './wasm/browser-node.mjs', default: './wasm/browser.cjs' },
    require: './wasm/browser.cjs',
    default: './wasm/browser.mjs',
  });
  assert.deepEqual(dot.node, {
    import: { types: './main.d.mts', default: './main.mjs' },
    require: { types: './ratekeeper.d.ts', default: './main.cjs' },
  });
  // Types outside the node condition, for TypeScript's bundler resolution.
  assert.deepEqual(pkg.exports['./redis'], { types: './redis.d.ts', node: './lib/redis.cjs' });
  assert.deepEqual(pkg.exports['./ratekeeper.wasm'], { types: './wasm/url.d.mts', default: './wasm/pkg/web/ratekeeper_wasm_bg.wasm' });
  // Tools that ignore exports get the same entry; nothing keeps it from publishing.
  assert.equal(pkg.main, 'main.cjs');
  for (const field of ['private', 'scripts', 'devDependencies', 'napi']) assert.equal(pkg[field], undefined, field);
});

test('the typings type-check from a consumer (tsc)', () => {
  const tsc = new URL('../../bindings-node/node_modules/.bin/tsc', import.meta.url).pathname;
  assert.ok(existsSync(tsc), 'no tsc in bindings-node/node_modules: run bash scripts/node.sh setup');
  writeFileSync(join(dir, 'use.ts'), `
    import { Gcra, pacedFetch, type Decision, type PacedFetch } from 'ratekeeper'
    const gcra: Gcra = Gcra.perPeriod({ burst: 1, tokens: 5, periodMs: 1000 })
    const get: PacedFetch = pacedFetch(fetch, gcra, { retries: 2, maxWaitMs: 10_000, maxWaiting: 100 })
    const d: Decision = gcra.tryAcquire()
    export const sent: Promise<Response> = get('https://example.com/', { signal: AbortSignal.timeout(1000) })
    export const left: number = get.waiting + d.remaining
  `);
  writeFileSync(join(dir, 'browser.ts'), `
    import init, { TokenBucket, pacedFetch } from 'ratekeeper'
    import wasmUrl from 'ratekeeper/ratekeeper.wasm'
    await init(wasmUrl)
    export const paced = pacedFetch(fetch, new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 10 }))
  `);
  // Code shared between a browser bundle and Node, type-checked as Node sees
  // it: the default export is init, carrying the API (main.d.mts).
  writeFileSync(join(dir, 'shared.mts'), `
    import init, { Gcra } from 'ratekeeper'
    await init()
    export const gcra: Gcra = Gcra.perPeriod({ burst: 1, tokens: 5, periodMs: 1000 })
    export const same: typeof Gcra = init.Gcra
  `);
  // From CommonJS, require's types; and the default import of code shared
  // with browsers, compiled to CommonJS (main.cjs marks its default: init,
  // carrying the API), which they lacked ("has no default export").
  writeFileSync(join(dir, 'required.cts'), `
    import ratekeeper = require('ratekeeper')
    export const gcra: ratekeeper.Gcra = ratekeeper.Gcra.perPeriod({ burst: 1, tokens: 5, periodMs: 1000 })
  `);
  writeFileSync(join(dir, 'shared.cts'), `
    import init, { Gcra } from 'ratekeeper'
    export const ready: Promise<void> = init()
    export const same: typeof Gcra = init.Gcra
  `);
  const options = ['--noEmit', '--strict', '--target', 'es2022', '--lib', 'es2022,dom', '--types', ''];
  execFileSync(tsc, [...options, '--module', 'nodenext', '--moduleResolution', 'nodenext', 'use.ts', 'shared.mts', 'required.cts', 'shared.cts'], { cwd: dir, stdio: 'inherit' });
  execFileSync(tsc, [...options, '--module', 'esnext', '--moduleResolution', 'bundler', 'browser.ts'], { cwd: dir, stdio: 'inherit' });
  // The wasm entries' types are an ES module's, as their files are: under
  // nodenext (and Deno) init was "not callable" when they read as CommonJS.
  writeFileSync(join(dir, 'browser.mts'), readFileSync(join(dir, 'browser.ts')));
  execFileSync(tsc, [...options, '--module', 'nodenext', '--moduleResolution', 'nodenext', '--customConditions', 'browser', 'browser.mts'], { cwd: dir, stdio: 'inherit' });
});
