'use strict';
// The `ratekeeper` package's CommonJS entry on Node (export condition `node`):
// the native addon's API (index.js) and pacedFetch (lib/paced-fetch.cjs).
// `init` and `initSync` do nothing here (the addon, or the wasm fallback, is
// ready at require): they let code shared with browsers call `await init()`.
const api = require('./index.js');

module.exports = {
  ...api,
  pacedFetch: require('./lib/paced-fetch.cjs').pacedFetchFor(api.RateLimited),
  init: async function init() {},
  initSync: function initSync() {},
};
