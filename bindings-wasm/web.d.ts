// Types of web.mjs: the shared surface (index.d.ts) plus initialisation.
export { Decision, SlidingWindowLog, SlidingWindowLogOptions, TokenBucket, TokenBucketOptions } from './index'

/** Where to load the .wasm from: a URL, a fetch `Response`, bytes or a compiled module. */
export type InitInput = RequestInfo | URL | Response | BufferSource | WebAssembly.Module

/** Loads the .wasm (default: `ratekeeper_wasm_bg.wasm` next to the glue code); call once before use. */
export declare function init(input?: InitInput | Promise<InitInput>): Promise<void>
export default init

/** Like `init`, synchronously, from bytes or a compiled module (for workers). */
export declare function initSync(module: BufferSource | WebAssembly.Module): void
