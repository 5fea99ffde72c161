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
