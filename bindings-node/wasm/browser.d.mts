// Types of the browser / Deno / default entry: the package's one surface
// (../ratekeeper.d.ts) plus `init` / `initSync` of the web build.
export * from '../ratekeeper.js'
export { init, initSync, type InitInput } from './web.mjs'
export { default } from './web.mjs'
