'use strict';
// The implementation under test: the napi addon (default) or the wasm build.
// RATEKEEPER_IMPL=wasm runs the same suite against bindings-wasm/node.cjs.
const which = process.env.RATEKEEPER_IMPL || 'napi';
if (which !== 'napi' && which !== 'wasm') throw new Error(`RATEKEEPER_IMPL must be napi or wasm, not ${which}`);
module.exports = which === 'wasm' ? require('../../bindings-wasm/node.cjs') : require('../../bindings-node/index.js');
