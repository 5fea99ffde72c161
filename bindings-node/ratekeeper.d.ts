// The whole surface of the `ratekeeper` package on Node and in edge workers
// (package.json `exports`): the limiters (index.d.ts, shared with the
// WebAssembly build) and pacedFetch. Browsers' `init` loads the .wasm
// (wasm/browser.d.mts); here it does nothing.
export * from './index'
export * from './paced-fetch'

/**
 * Does nothing on Node, where the package is ready at import: for code shared
 * with browsers, whose build loads its `.wasm` in `init()`.
 */
export declare function init(input?: unknown): Promise<void>
/** Does nothing on Node: see `init`. */
export declare function initSync(module?: unknown): void

/**
 * The default export: `init`, carrying the whole API (`ratekeeper.Gcra`), as
 * `main.cjs` marks it (`__esModule`), so that `import init, { Gcra } from
 * 'ratekeeper'` in code shared with browsers, compiled to CommonJS, calls it.
 */
declare const main: typeof init & typeof import('./ratekeeper')
export default main
