// Compile-only (tsc --noEmit, run by `bash scripts/wasm.sh test`): the wasm build's
// index.d.ts / web.d.mts describe the API as used, through the package's "exports",
// and are exactly the napi addon's surface (bindings-node/index.d.ts): the wasm
// entries re-export the copy of that file which the build puts in pkg/.
import init, { initSync, Gcra, LeakyBucket, SlidingWindowLog, TokenBucket, type Decision, type Reservation } from 'ratekeeper-wasm/web'
import * as node from 'ratekeeper-wasm'
import type * as napi from '../../bindings-node/index'

export async function usage(signal: AbortSignal): Promise<[Decision[], Reservation]> {
  await init()
  await init(new URL('https://example.invalid/ratekeeper_wasm_bg.wasm'))
  await init(null)
  initSync(new Uint8Array(8))
  const bucket = new TokenBucket({ capacity: 5, refillTokens: 1, refillPeriodMs: 1000 })
  const empty = new node.TokenBucket({ capacity: 5, refillTokens: 1, refillPeriodMs: 250.5, initialTokens: 0 })
  const log = new node.SlidingWindowLog({ limit: 1, windowMs: 1000 })
  const gcra = Gcra.perPeriod({ burst: 2, tokens: 10, periodMs: 1000, name: 'api' })
  const queue = new LeakyBucket({ capacity: 10, intervalMs: 100 })
  await queue.acquire(1, { signal, timeoutMs: 1000 })
  const d: Decision = bucket.tryAcquire()
  const headers = gcra.headers(d)
  const total: number = d.remaining + d.limit + d.retryAfterMs + d.resetAfterMs + headers.RateLimit.length
  return [[d, empty.tryAcquire(2), log.tryAcquire(1, performance.now()), gcra.peek(undefined, 5), { ...d, remaining: total }], queue.reserve(1)]
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
type Web = typeof import('ratekeeper-wasm/web')
type Members<C extends abstract new (...args: never) => unknown> = {
  [K in keyof InstanceType<C>]: InstanceType<C>[K] extends (...args: infer A) => infer R ? [A, R] : InstanceType<C>[K]
}
type Surface<M extends typeof napi> = {
  [K in keyof M]: M[K] extends abstract new (...args: never) => unknown ? [ConstructorParameters<M[K]>, Members<M[K]>] : M[K]
}
export const sameSurface: [true, true][] = [
  [] as unknown as Same<Omit<Surface<Web>, 'init' | 'initSync' | 'default'>, Surface<typeof node>, Surface<typeof napi>>,
  [] as unknown as Same<Decision, node.Decision, napi.Decision>,
  [] as unknown as Same<Reservation, node.Reservation, napi.Reservation>,
  [] as unknown as Same<import('ratekeeper-wasm/web').HandlerOptions<1>, node.HandlerOptions<1>, napi.HandlerOptions<1>>,
  [] as unknown as Same<import('ratekeeper-wasm/web').TokenBucketOptions, node.TokenBucketOptions, napi.TokenBucketOptions>,
]
