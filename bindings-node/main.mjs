// The `ratekeeper` package's ES module entry on Node (export condition `node`):
// the same module instance as main.cjs.
import main from './main.cjs';

export * from './index.mjs';
export const { pacedFetch, init, initSync } = main;
export default main;
