// Browser and worker entry of the WebAssembly build. Call `await init()` once
// (or `initSync(module)`), then use the API exactly as with the Node build: the
// same JS layer (pkg/api.mjs, generated from bindings-node/lib/api.cjs) over the
// wasm-bindgen output. pkg/ is not committed: `bash scripts/wasm.sh build` makes it.
import initWasm, * as wasm from './pkg/web/ratekeeper_wasm.js';
import { createApi } from './pkg/api.mjs';

// Before init(), wasm-bindgen's functions fail with "Cannot read properties
// of undefined": every one but the decisions (reachable only from a limiter,
// which cannot be built before init) first checks, and throws an error that
// says what to do. The decisions stay as they are: the hot path.
const HOT = new Set(['tryAcquire', 'peek', 'reserve', 'keyedOp', 'keyedOpScratch', 'noop']);
let ready = false;

function notReady() {
  const error = new Error('ratekeeper: call `await init()` (or `initSync(module)`) before using the WebAssembly build');
  error.code = 'not_initialized';
  throw error;
}

const backend = {};
for (const [name, value] of Object.entries(wasm)) {
  backend[name] =
    // Classes (the handles) are left as they are too: instances come only from the functions.
    typeof value !== 'function' || HOT.has(name) || /^(default|initSync|\w+Handle)$/.test(name)
      ? value
      : function guarded(...args) {
          if (!ready) notReady();
          return value.apply(this, args);
        };
}

const api = createApi(backend);

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
} = api;

// The init() loading now, as a promise that settles without throwing.
let loading;

/** Fetches and instantiates the .wasm (by default the file next to the glue code). */
export async function init(input) {
  // A Promise of any input is read here: the glue read only a Response
  // out of one, and handed a URL or a string on to WebAssembly.instantiate.
  input = await input;
  // null, as undefined, is the default (the package's rule for an
  // optional argument): the glue threw an uncoded TypeError reading it.
  if (input === null) input = undefined;
  // One load at a time, each of its own input: the glue gave a call made
  // while another loaded that load, whose failure (input that is no .wasm,
  // passed by another part of the app) was then this call's too.
  while (!ready && loading !== undefined) await loading;
  if (ready) return;
  const load = instantiate(input);
  const settled = load.then(
    () => {},
    () => {},
  );
  loading = settled;
  settled.then(() => {
    if (loading === settled) loading = undefined;
  });
  return load;
}

async function instantiate(input) {
  try {
    await initWasm(input === undefined ? undefined : { module_or_path: input });
  } catch (cause) {
    // Node given the `browser` condition (a test runner's, say) loads this
    // entry from a file: URL, which its fetch does not read ("fetch failed").
    if (input !== undefined || !import.meta.url.startsWith('file:')) throw cause;
    const error = new Error(
      "ratekeeper: init() cannot fetch the .wasm from a file: URL in this runtime; pass its bytes, `await init(await readFile(new URL(import.meta.resolve('ratekeeper/ratekeeper.wasm'))))` (readFile from node:fs/promises), or load the package without the `browser` condition (the native addon)",
      { cause },
    );
    error.code = 'init_failed';
    throw error;
  }
  ready = true;
}

/** Instantiates from bytes or a compiled `WebAssembly.Module`, synchronously. */
export function initSync(module) {
  initWasmSync(module);
}

function initWasmSync(module) {
  wasm.initSync({ module });
  ready = true;
}

export default init;
