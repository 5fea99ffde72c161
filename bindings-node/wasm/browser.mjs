// The `ratekeeper` package's entry for browsers, Deno and bundlers (export
// conditions `browser`, `deno`, `default`): the WebAssembly build. Call
// `await init()` once (it fetches ratekeeper_wasm_bg.wasm next to the glue) or
// `initSync(bytesOrModule)`, then use the same API as on Node.
// scripts/package.sh puts web.mjs and pkg/ (the wasm build) beside this file.
import { RateLimited } from './web.mjs';
import { pacedFetchFor } from '../lib/paced-fetch.mjs';

export * from './web.mjs';
export { default } from './web.mjs';

/** pacedFetch, rejecting with this build's `RateLimited` when a limiter cannot book. */
export const pacedFetch = /* @__PURE__ */ pacedFetchFor(RateLimited);
