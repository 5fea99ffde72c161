// Browser and worker entry of the WebAssembly build. Call `await init()` once
// (or `initSync(module)`), then use the classes exactly as with the Node build.
// The wasm-bindgen output under pkg/web/ is not committed: `bash scripts/wasm.sh build` makes it.
import initWasm, { initSync as initWasmSync, SlidingWindowLog, TokenBucket } from './pkg/web/ratekeeper_wasm.js';

export { SlidingWindowLog, TokenBucket };

/** Fetches and instantiates the .wasm (by default the file next to the glue code). */
export async function init(input) {
  await initWasm(input === undefined ? undefined : { module_or_path: input });
}

/** Instantiates from bytes or a compiled `WebAssembly.Module`, synchronously. */
export function initSync(module) {
  initWasmSync({ module });
}

export default init;
