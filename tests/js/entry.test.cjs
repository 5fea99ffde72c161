'use strict';
// The entry points: the ES module entry of the build under test exports the
// same API as its CommonJS entry (napi: index.mjs beside index.js; wasm:
// web.mjs, initialised here from the .wasm bytes, beside node.cjs).

const { it } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { pathToFileURL } = require('node:url');

const cjs = require('./impl.cjs');

const ROOT = path.join(__dirname, '..', '..');
const EXPORTS = [
  'FixedWindow', 'Gcra', 'KeyedLimiter', 'LeakyBucket', 'Limiter', 'Policy', 'RateLimited', 'SlidingWindowCounter', 'SlidingWindowLog',
  'TokenBucket', 'fastifyHook', 'ipKey', 'middleware',
];

it('the CommonJS entry exports exactly the API', () => {
  assert.deepStrictEqual(Object.keys(cjs).sort(), EXPORTS);
});

it('the ES module entry exports the same API and answers the same', async () => {
  let esm;
  if ((process.env.RATEKEEPER_IMPL || 'napi') === 'wasm') {
    esm = await import(pathToFileURL(path.join(ROOT, 'bindings-wasm/web.mjs')).href);
    assert.equal(typeof esm.init, 'function');
    // Before init(), an error that says so, not wasm-bindgen's "Cannot read properties of undefined".
    assert.throws(() => new esm.Gcra({ burst: 1, emissionIntervalMs: 10 }), { code: 'not_initialized', message: /init\(\)/ });
    assert.throws(() => esm.Policy.fromRates('1/second'), { code: 'not_initialized' });
    const bytes = fs.readFileSync(path.join(ROOT, 'bindings-wasm/pkg/web/ratekeeper_wasm_bg.wasm'));
    // An init() still instantiating when initSync() is called (two parts of
    // an app each initialising) ends on the instance initSync made: a
    // limiter built in between keeps its state (a second instance read it
    // out of bounds, or another limiter's state).
    const pending = esm.init(bytes);
    esm.initSync(bytes);
    const early = new esm.TokenBucket({ capacity: 3, refillTokens: 1, refillPeriodMs: 1000 });
    assert.equal(early.tryAcquire(1, 0).remaining, 2);
    await pending;
    assert.equal(early.tryAcquire(1, 0).remaining, 1);
    await esm.init(bytes);
    esm.initSync(bytes);
    assert.equal(new esm.TokenBucket({ capacity: 3, refillTokens: 1, refillPeriodMs: 1000 }).tryAcquire(1, 0).remaining, 2);
    assert.equal(early.tryAcquire(1, 0).remaining, 0);
  } else {
    esm = await import(pathToFileURL(path.join(ROOT, 'bindings-node/index.mjs')).href);
    assert.equal(esm.TokenBucket, cjs.TokenBucket, 'one module instance behind both entries');
  }
  for (const name of EXPORTS) assert.equal(typeof esm[name], 'function', name);
  const answers = (api) => {
    const gcra = new api.Gcra({ burst: 2, emissionIntervalMs: 10, name: 'g' });
    const d = [1, 1, 1].map(() => gcra.tryAcquire(1, 0));
    return [d, gcra.headers(d[2]), gcra.reserve(1, Infinity, 0)];
  };
  assert.deepStrictEqual(answers(esm), answers(cjs));
});

it("the web entry's init() takes a Promise of any input it takes, and each call's own input once another's failed", () => {
  if ((process.env.RATEKEEPER_IMPL || 'napi') !== 'wasm') return; // the napi build has no init()
  // Each scenario in a process of its own: the first init() to succeed
  // makes the one instance, and later calls return at once.
  const { spawnSync } = require('node:child_process');
  const scenario = (body) => {
    const script = `
      import { readFileSync } from 'node:fs';
      import http from 'node:http';
      const bytes = readFileSync(${JSON.stringify(path.join(ROOT, 'bindings-wasm/pkg/web/ratekeeper_wasm_bg.wasm'))});
      const server = http.createServer((request, response) => {
        response.writeHead(200, { 'content-type': 'application/wasm' });
        response.end(bytes);
      });
      await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
      const url = 'http://127.0.0.1:' + server.address().port + '/ratekeeper.wasm';
      const web = await import(${JSON.stringify(pathToFileURL(path.join(ROOT, 'bindings-wasm/web.mjs')).href)});
      const works = () => new web.Gcra({ burst: 1, emissionIntervalMs: 10 }).tryAcquire(1, 0).allowed;
      try {
        ${body}
      } finally {
        server.close();
      }`;
    const run = spawnSync(process.execPath, ['--no-warnings', '--input-type=module', '-e', script], { encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    return JSON.parse(run.stdout);
  };
  // The types take `Promise<InitInput>`, a URL or a string among them:
  // those were handed on unread to WebAssembly.instantiate, which threw.
  assert.deepStrictEqual(scenario('await web.init(Promise.resolve(new URL(url))); console.log(JSON.stringify(works()));'), true);
  assert.deepStrictEqual(scenario('await web.init(Promise.resolve(url)); console.log(JSON.stringify(works()));'), true);
  // Two parts of an app, one passing what is no .wasm: the other's
  // init(bytes) was given the first one's pending load, and failed with it.
  assert.deepStrictEqual(
    scenario(`
      const wrong = web.init(new Uint8Array([0, 1, 2])).then(() => 'instantiated', (error) => error.name);
      const right = web.init(bytes).then(() => 'instantiated', (error) => error.message);
      const fetched = web.init(url).then(() => 'instantiated', (error) => error.message);
      console.log(JSON.stringify([await wrong, await right, await fetched, works()]));`),
    ['CompileError', 'instantiated', 'instantiated', true],
  );
  // null is no input but the default, as undefined (it threw an uncoded
  // TypeError in the glue): in Node, the file: URL no fetch reads.
  assert.deepStrictEqual(
    scenario(`
      const none = await web.init(null).then(() => 'instantiated', (error) => [error.name, error.code]);
      const missing = await web.init().then(() => 'instantiated', (error) => [error.name, error.code]);
      console.log(JSON.stringify([none, missing]));`),
    [['Error', 'init_failed'], ['Error', 'init_failed']],
  );
});
