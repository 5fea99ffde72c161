// Module worker: the web build with `performance.now()` from the worker's global.
import init, * as api from '/bindings-wasm/web.mjs';
import { fixedScenario } from './scenarios.mjs';

try {
  await init();
  postMessage({ ok: true, result: fixedScenario(api) });
} catch (error) {
  postMessage({ ok: false, error: `${error?.name}: ${error?.message}` });
}
