// Types of the Node entry (node.cjs): exactly the napi addon's surface. The file
// below is bindings-node/index.d.ts, copied into pkg/ by `bash scripts/wasm.sh build`.
export * from './pkg/ratekeeper'
