// The `ratekeeper` package's ES module entry on Node (export condition `node`):
// the same module instance as main.cjs.
import main from './main.cjs';

export * from './index.mjs';
export const { pacedFetch, init, initSync } = main;
// `init`, as the browser entry's default is (`import init, { Gcra } from
// 'ratekeeper'; await init()` in code shared with browsers), carrying the
// whole API as well, as the default did before (`ratekeeper.Gcra`): main.cjs
// gave it the API, for its own default.
export default init;
