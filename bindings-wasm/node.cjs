'use strict';
// Node entry of the WebAssembly build: the same API as the napi addon, from the
// same JS layer (pkg/api.cjs, bindings-node/lib/api.cjs and lib/api/ bundled) over the
// wasm-bindgen output. pkg/ is not committed: `bash scripts/wasm.sh build` makes it.
let wasm;
let createApi;
try {
  wasm = require('./pkg/nodejs/ratekeeper_wasm.js');
  ({ createApi } = require('./pkg/api.cjs'));
} catch (error) {
  if (error && error.code === 'MODULE_NOT_FOUND' && /ratekeeper_wasm|api\.cjs/.test(String(error.message))) {
    throw new Error('ratekeeper-wasm is not built: run `bash scripts/wasm.sh build` at the repository root', {
      cause: error,
    });
  }
  throw error;
}

module.exports = createApi(wasm);
