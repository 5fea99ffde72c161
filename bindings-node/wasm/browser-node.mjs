// The `ratekeeper` package's ES module entry for Node asked for the `browser`
// condition (`node --conditions=browser`, a test runner's): the same module
// instance as wasm/browser.cjs, which `require` gets there, as main.mjs is
// main.cjs's. Each loaded its own copy of the wasm build before, when one
// process both imported and required the package (its code, and a CommonJS
// dependency's): two instances, whose classes differ (`instanceof`,
// `RateLimited`) and whose limiters the other's refuse. Loaded at import, as
// browser.cjs is: `init()` and `initSync()` do nothing. Bundlers never get
// here: they ask for `module`, listed before `node` (see PACKAGE.md).
import { createRequire } from 'node:module';

// Through require, not `import ... from './browser.cjs'`: a runtime that
// honours `__esModule` (Bun) would import its `default`, `init`, as the API.
const api = createRequire(import.meta.url)('./browser.cjs');

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
  ipKey,
  pacedFetch,
  init,
  initSync,
} = api;
export default init;
