// Browser and worker entry of the WebAssembly build. Call `await init()` once
// (or `initSync(module)`), then use the API exactly as with the Node build: the
// same JS layer (pkg/api.mjs, generated from bindings-node/lib/api.cjs) over the
// wasm-bindgen output. pkg/ is not committed: `bash scripts/wasm.sh build` makes it.
import initWasm, * as wasm from './pkg/web/ratekeeper_wasm.js';
import { createApi } from './pkg/api.mjs';

const api = createApi(wasm);

export const {
  Limiter,
  TokenBucket,
  Gcra,
  LeakyBucket,
  SlidingWindowLog,
  SlidingWindowCounter,
  FixedWindow,
  KeyedLimiter,
  Policy,
  RateLimited,
  middleware,
  fastifyHook,
} = api;

/** Fetches and instantiates the .wasm (by default the file next to the glue code). */
export async function init(input) {
  await initWasm(input === undefined ? undefined : { module_or_path: input });
}

/** Instantiates from bytes or a compiled `WebAssembly.Module`, synchronously. */
export function initSync(module) {
  initWasmSync(module);
}

function initWasmSync(module) {
  wasm.initSync({ module });
}

export default init;
