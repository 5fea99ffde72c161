// Types of the browser / Deno / default entry: the package's one surface
// (../ratekeeper.d.ts) plus `init` / `initSync` of the web build.
export * from '../ratekeeper'
export { init, initSync, type InitInput } from './web'
export { default } from './web'
