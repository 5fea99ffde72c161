'use strict';
// The `ratekeeper` package's entry for Node asked for the `browser` condition
// with `require` (Jest with jsdom): the WebAssembly build, as the browser entry
// (browser.mjs) gives, but CommonJS. Jest's module system cannot require an
// ES module (Node only can from 20.19 and 22.12, Jest only on Node 24.9 and
// later), so browser.mjs failed there to load at all. Bundlers ask for
// `module`, listed first, and keep browser.mjs. The wasm loads synchronously
// here (wasm/pkg/nodejs), so `init()` and `initSync()` do nothing. Node's
// `import` under that condition gets this module too (browser-node.mjs), so
// that a process that imports and requires the package has one instance.
const api = require('../lib/api.cjs').createApi(require('./pkg/nodejs/ratekeeper_wasm.js'));

async function init() {}
function initSync() {}

module.exports = {
  ...api,
  pacedFetch: require('../lib/paced-fetch.cjs').pacedFetchFor(api.RateLimited),
  init,
  initSync,
  default: init,
};
// `import init, { Gcra } from 'ratekeeper'` compiled to CommonJS (Babel,
// TypeScript, as Jest runs it) reads `default` of a module marked so.
Object.defineProperty(module.exports, '__esModule', { value: true });
