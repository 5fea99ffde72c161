// Module worker: the web build with `performance.now()` from the worker's global.
import init, { SlidingWindowLog, TokenBucket } from '/bindings-wasm/web.mjs';
import { fixedScenario } from './scenarios.mjs';

try {
  await init();
  postMessage({ ok: true, result: fixedScenario({ TokenBucket, SlidingWindowLog }) });
} catch (error) {
  postMessage({ ok: false, error: `${error?.name}: ${error?.message}` });
}
