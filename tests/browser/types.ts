// Compile-only (tsc --noEmit, run by `bash scripts/wasm.sh test`): the wasm build's
// hand-written index.d.ts / web.d.ts describe the API as used, through the package's
// "exports", and are exactly the napi addon's surface (bindings-node/index.d.ts).
import init, { initSync, SlidingWindowLog, TokenBucket, type Decision } from 'ratekeeper-wasm/web'
import * as node from 'ratekeeper-wasm'
import type * as napi from '../../bindings-node/index'

export async function usage(): Promise<Decision[]> {
  await init()
  await init(new URL('https://example.invalid/ratekeeper_wasm_bg.wasm'))
  initSync(new Uint8Array(8))
  const bucket = new TokenBucket({ capacity: 5, refillTokens: 1, refillPeriodMs: 1000 })
  const empty = new node.TokenBucket({ capacity: 5, refillTokens: 1, refillPeriodMs: 250.5, initialTokens: 0 })
  const log = new node.SlidingWindowLog({ limit: 1, windowMs: 1000 })
  const d: Decision = bucket.tryAcquire()
  const allowed: boolean = d.allowed
  const total: number = d.remaining + d.limit + d.retryAfterMs + d.resetAfterMs
  return [d, empty.tryAcquire(2), log.tryAcquire(1, performance.now()), log.tryAcquire(undefined, 5), { ...d, allowed, remaining: total }]
}

// @ts-expect-error capacity is required
new TokenBucket({ refillTokens: 1, refillPeriodMs: 1000 })
// @ts-expect-error the option is windowMs
new SlidingWindowLog({ limit: 1, window: 1000 })
// @ts-expect-error cost is a number
new node.TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 1 }).tryAcquire('1')
// @ts-expect-error the Node entry has no init
node.init

// One surface: the wasm entries (web and Node) and the napi addon declare the same types.
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false
type Same<Wasm, Node, Napi> = [Equal<Wasm, Node>, Equal<Node, Napi>]
type Members<C extends abstract new (...args: never) => unknown> = {
  [K in keyof InstanceType<C>]: InstanceType<C>[K] extends (...args: infer A) => infer R ? [A, R] : InstanceType<C>[K]
}
export const sameSurface: [true, true][] = [
  [] as unknown as Same<Decision, node.Decision, napi.Decision>,
  [] as unknown as Same<import('ratekeeper-wasm/web').TokenBucketOptions, node.TokenBucketOptions, napi.TokenBucketOptions>,
  [] as unknown as Same<import('ratekeeper-wasm/web').SlidingWindowLogOptions, node.SlidingWindowLogOptions, napi.SlidingWindowLogOptions>,
  [] as unknown as Same<ConstructorParameters<typeof TokenBucket>, ConstructorParameters<typeof node.TokenBucket>, ConstructorParameters<typeof napi.TokenBucket>>,
  [] as unknown as Same<ConstructorParameters<typeof SlidingWindowLog>, ConstructorParameters<typeof node.SlidingWindowLog>, ConstructorParameters<typeof napi.SlidingWindowLog>>,
  [] as unknown as Same<Members<typeof TokenBucket>, Members<typeof node.TokenBucket>, Members<typeof napi.TokenBucket>>,
  [] as unknown as Same<Members<typeof SlidingWindowLog>, Members<typeof node.SlidingWindowLog>, Members<typeof napi.SlidingWindowLog>>,
]
