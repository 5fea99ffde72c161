// `import wasmUrl from 'ratekeeper/ratekeeper.wasm'`: the .wasm's URL, as a
// bundler's asset loader answers such an import (esbuild's file loader,
// Vite's `?url`, webpack's asset/resource), for `init(wasmUrl)`.
declare const url: string
export default url
