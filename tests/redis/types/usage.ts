// tsc --noEmit over ratekeeper/redis (bindings-node/redis.d.ts): tsc -p tests/redis/types/tsconfig.json
import { Gcra, KeyedLimiter, Policy, RateLimited, fastifyHook, middleware } from 'ratekeeper'
import { RedisLimiter, RedisPolicy, RateLimited as RedisRateLimited, type RedisClient, type RedisDecision, type RedisPolicyDecision } from 'ratekeeper/redis'
declare const client: { call(c: string, ...a: Array<string | number>): Promise<unknown>; evalsha(...a: any[]): Promise<unknown> }
async function main(): Promise<void> {
  const l = new RedisLimiter(client, new Gcra({ burst: 2, emissionIntervalMs: 10 }), { onError: new KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: 1 })), commandTimeoutMs: 100 })
  const d: RedisDecision = await l.tryAcquire('k', 1)
  const h = l.headers(d)
  const held: boolean = await l.reset('k')
  const p = new RedisPolicy(client, '10/second', { by: ['user'], algorithm: 'gcra', onError: 'open' })
  const pd = await p.tryAcquire({ user: 'u' })
  console.log(h, held, pd.fromStore, pd.deniedBy, pd.limits[0]?.name)
  await p.acquire({ user: 'u' }, 1, { timeoutMs: 10 }).catch((error: unknown) => {
    // The class acquire rejects with here: 'ratekeeper''s on Node, the native build's under the browser condition.
    if (error instanceof RedisRateLimited) console.log(error.retryAfterMs)
  })
  const same: typeof RateLimited = RedisRateLimited
  console.log(same)
  const limitsHeld: number = await p.reset({ user: 'u' })
  console.log(limitsHeld)
  // Policy's members that describe the limits, the same shapes; no `add` (the limits are fixed).
  const described: [Array<{ name: string; by: string[] }>, string[], number, string[]] = [p.limits, p.names, p.size, p.keyedBy('10/second')]
  const local: Pick<Policy, 'limits' | 'names' | 'size' | 'keyedBy'> = p
  console.log(described, local)
  // @ts-expect-error a RedisPolicy's limits are fixed at construction
  p.add('more', new Gcra({ burst: 1, emissionIntervalMs: 1 }))
  // Each class takes the fallback that decides its own target (the runtime refuses the other).
  // @ts-expect-error a Policy decides for a request, not a key
  new RedisLimiter(client, new Gcra({ burst: 2, emissionIntervalMs: 10 }), { onError: new Policy('1/second') })
  // @ts-expect-error a KeyedLimiter decides for a key, not a request
  new RedisPolicy(client, '1/second', { onError: new KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: 1 })) })
  new RedisPolicy(client, '1/second', { onError: new Policy('1/second') })
  const r = await l.reserve('k', 1, 100)
  if (r.ok) await r.cancel()
  else console.log(r.decision?.retryAfterMs)
  await l.refund('k', 1, Date.now())
  // null for an optional argument is its default, as in-process (and as the runtime takes it).
  const none: number | null = null
  const nd: unknown[] = [
    await l.tryAcquire('k', null, none), await l.peek('k', null, null), await l.tryAcquireBatch('k', [1], null),
    await l.reserve('k', null, null, null), await p.tryAcquire(null, null, null), await p.peek(null, null, null),
    await p.tryAcquireBatch(null, [1], null), await p.reserve(null, null, null, null),
    new RedisLimiter(client, new Gcra({ burst: 1, emissionIntervalMs: 1 }), null), new RedisPolicy(client, '1/second', null),
    // Each option null: its default (the prefix 'ratekeeper:', the server's clock, 'closed', batching, 1000 ms).
    new RedisLimiter(client, new Gcra({ burst: 1, emissionIntervalMs: 1 }), { prefix: null, clock: null, onError: null, batching: null, commandTimeoutMs: null }),
    new RedisPolicy(client, '1/second', { prefix: null, clock: null, onError: null, batching: null, commandTimeoutMs: null, algorithm: null, by: null }),
    middleware({ limiter: l, cost: null }), fastifyHook({ limiter: p, cost: null }),
  ]
  await l.refund('k', 1, null)
  await l.acquire('k', null, { signal: null, timeoutMs: null })
  await p.refund(null, 1, null)
  await p.acquire(null, null, null)
  console.log(nd)
  // Keys and request values as bytes, as Python's bytes: a Uint8Array (a Buffer is one).
  const bytes = new Uint8Array([0xff])
  const bd: RedisDecision[] = [await l.tryAcquire(bytes), await l.peek(bytes), ...(await l.tryAcquireBatch(bytes, [1]))]
  await l.refund(bytes, 1)
  await l.acquire(bytes)
  console.log(bd, (await l.reserve(bytes)).ok, (await p.tryAcquire({ user: bytes })).allowed)
  // @ts-expect-error a DataView is no key
  await l.tryAcquire(new DataView(bytes.buffer))
  // Such a key goes to the client as bytes: each client shape takes them.
  const sent = client as RedisClient
  if ('getSlotRandomNode' in sent) await sent.sendCommand(bytes, false, ['GET', bytes])
  else if ('sendCommand' in sent) await sent.sendCommand(['GET', bytes])
  else await sent.call('GET', bytes)
  // The server helpers take both, keyed as a KeyedLimiter and a Policy; `decide` answers a promise of their decision.
  interface Req { ip: string; headers: Record<string, string | undefined>; method: string }
  const perKey = middleware({ limiter: l, key: (req: Req) => req.headers['x-api-key'], cost: (req) => (req.method === 'POST' ? 2 : 1), skip: (req) => req.ip === '' })
  const keyed: RedisDecision = await perKey.decide({ ip: '1.2.3.4', headers: {}, method: 'GET' })
  const perFields = fastifyHook<Req>({ limiter: p, fields: (req) => ({ user: req.headers['x-user'] ?? 'anonymous' }), cost: 1 })
  const fielded: RedisPolicyDecision = await perFields.decide({ ip: '1.2.3.4', headers: {}, method: 'GET' })
  console.log(keyed.fromStore, fielded.fromStore, fielded.deniedBy, middleware({ limiter: l }), fastifyHook({ limiter: p }))
  // @ts-expect-error an object that merely looks like one is not taken (nor at run time: a brand check)
  middleware({ limiter: { tryAcquire: async () => keyed, headers: () => ({}) } })
  // @ts-expect-error a RedisLimiter takes `key`, not `fields`
  middleware({ limiter: l, fields: () => ({ user: 'u' }) })
  // @ts-expect-error a RedisPolicy takes `fields`, not `key`
  fastifyHook({ limiter: p, key: () => 'k' })
}
void main()
