// The `ratekeeper` package's entry for Cloudflare's workerd (export condition
// `workerd`): the WebAssembly build, imported as a compiled module (how workerd
// and wrangler load .wasm) and initialised at import, so no `init()` is needed.
// scripts/package.sh puts web.mjs and pkg/ (the wasm build) beside this file.
import wasmModule from './pkg/web/ratekeeper_wasm_bg.wasm';
import { initSync, RateLimited } from './web.mjs';
import { pacedFetchFor } from '../lib/paced-fetch.mjs';

initSync(wasmModule);

export * from './web.mjs';
// Already initialised: `init()` / `initSync()` return at once, for code written for browsers.
export { default } from './web.mjs';

/** pacedFetch, rejecting with this build's `RateLimited` when a limiter cannot book. */
export const pacedFetch = /* @__PURE__ */ pacedFetchFor(RateLimited);
