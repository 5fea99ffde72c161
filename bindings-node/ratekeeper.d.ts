// The whole surface of the `ratekeeper` package on Node and in edge workers
// (package.json `exports`): the limiters (index.d.ts, shared with the
// WebAssembly build) and pacedFetch. Browsers add `init` (wasm/browser.d.mts).
export * from './index'
export * from './paced-fetch'
