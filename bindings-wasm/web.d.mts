// Types of web.mjs: the shared surface (bindings-node/index.d.ts, copied into pkg/
// by `bash scripts/wasm.sh build`) plus initialisation.
export * from './pkg/ratekeeper.js'

/** Where to load the .wasm from: a URL, a fetch `Response`, bytes or a compiled module. */
export type InitInput = RequestInfo | URL | Response | BufferSource | WebAssembly.Module

/**
 * Loads the .wasm (default: `ratekeeper_wasm_bg.wasm` next to the glue code); call once before use.
 * Before it, constructors and static methods throw an `Error` with `code: 'not_initialized'`.
 */
export declare function init(input?: InitInput | Promise<InitInput> | null): Promise<void>
export default init

/** Like `init`, synchronously, from bytes or a compiled module (for workers). */
export declare function initSync(module: BufferSource | WebAssembly.Module): void
