'use strict';
// The `ratekeeper` package's CommonJS entry on Node (export condition `node`):
// the native addon's API (index.js) and pacedFetch (lib/paced-fetch.cjs).
// `init` and `initSync` do nothing here (the addon, or the wasm fallback, is
// ready at require): they let code shared with browsers call `await init()`.
const api = require('./index.js');

async function init() {}
function initSync() {}

module.exports = {
  ...api,
  pacedFetch: require('./lib/paced-fetch.cjs').pacedFetchFor(api.RateLimited),
  init,
  initSync,
};
// `import init, { Gcra } from 'ratekeeper'` compiled to CommonJS (Babel,
// TypeScript, as Jest runs it in its default `node` environment) reads
// `default` of a module marked so: `init`, carrying the whole API, as
// main.mjs's default is (and wasm/browser.cjs's under Jest's jsdom).
// Unmarked, the default was this object, and `await init()` threw "init is
// not a function". Not enumerable: `{ ...require('ratekeeper') }` is the API.
Object.assign(init, module.exports);
Object.defineProperty(module.exports, 'default', { value: init, writable: true, configurable: true });
Object.defineProperty(module.exports, '__esModule', { value: true });
