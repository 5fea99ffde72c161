'use strict';
// Node entry of the WebAssembly build: the same classes as the napi addon
// (`TokenBucket`, `SlidingWindowLog`), loaded synchronously. The wasm-bindgen
// output under pkg/nodejs/ is not committed: `bash scripts/wasm.sh build` makes it.
let binding;
try {
  binding = require('./pkg/nodejs/ratekeeper_wasm.js');
} catch (error) {
  if (error && error.code === 'MODULE_NOT_FOUND' && String(error.message).includes('ratekeeper_wasm')) {
    throw new Error('ratekeeper-wasm is not built: run `bash scripts/wasm.sh build` at the repository root', {
      cause: error,
    });
  }
  throw error;
}

module.exports = {
  TokenBucket: binding.TokenBucket,
  SlidingWindowLog: binding.SlidingWindowLog,
};
