// Type-level usage of the JS API, checked with `tsc --noEmit -p tests/js/types`
// against bindings-node/index.d.ts (the one surface of both builds). It is
// never run. `@ts-expect-error` lines must stay errors: they prove the
// declarations reject misuse.

import { pacedFetch, type PacedFetch } from '../../../bindings-node/paced-fetch.js';
import {
  FixedWindow,
  Gcra,
  KeyedLimiter,
  LeakyBucket,
  Limiter,
  Policy,
  RateLimited,
  SlidingWindowCounter,
  SlidingWindowLog,
  TokenBucket,
  fastifyHook,
  ipKey,
  middleware,
  type AcquireOptions,
  type AcquireTimeoutError,
  type Bandwidth,
  type Decision,
  type Key,
  type PolicyDecision,
  type PolicyRequest,
  type PolicyReservation,
  type RateLimitHeaders,
  type RateLimitHook,
  type RateLimitMiddleware,
  type ReplyLike,
  type RequestDecider,
  type ResponseLike,
  type Reservation,
  type TokenBucketOptions,
  type WindowOptions,
} from 'ratekeeper';

const bucketOptions: TokenBucketOptions = { capacity: 10, refillTokens: 1, refillPeriodMs: 100, refill: 'interval' };
const bucket: TokenBucket = new TokenBucket(bucketOptions);
const both: TokenBucket = TokenBucket.fromBandwidths(
  [bucketOptions, { capacity: 100, refillTokens: 100, refillPeriodMs: 60_000, initialTokens: 0 }],
  { name: 'both', clock: () => 0 },
);
const windowOptions: WindowOptions = { limit: 100, windowMs: 60_000, name: 'per-minute' };
const limiters: Limiter[] = [
  bucket,
  both,
  new Gcra({ burst: 5, emissionIntervalMs: 100 }),
  Gcra.perPeriod({ burst: 5, tokens: 10, periodMs: 1000 }),
  new LeakyBucket({ capacity: 10, intervalMs: 100 }),
  new SlidingWindowLog(windowOptions),
  new SlidingWindowCounter(windowOptions),
  new FixedWindow({ ...windowOptions, clock: () => performance.now() }),
];

// `cost` and `nowMs` are optional numbers everywhere.
const decisions: Decision[] = limiters.flatMap((l) => [l.tryAcquire(), l.tryAcquire(2), l.peek(undefined, 1234.5), l.peek(0)]);
const reservation: Reservation = bucket.reserve(1, 500, 0);
const waitMs: number = reservation.ok ? reservation.waitMs : (reservation.decision?.retryAfterMs ?? 0);
bucket.refund(reservation.cost, reservation.atMs);
reservation.cancel();
bucket.refund(1);
bucket.reconfigure(new TokenBucket({ capacity: 20, refillTokens: 2, refillPeriodMs: 100 }), waitMs);
const headers: RateLimitHeaders = bucket.headers(bucket.tryAcquire());
const retryAfter: string | undefined = headers['Retry-After'];
// A Record<string, string> to what takes headers: fetch's Response and Headers, Node's writeHead.
const headersRecord: Record<string, string> = headers;
export const asResponse = new Response(null, { status: 429, headers: bucket.headers(bucket.tryAcquire()) });
const config: [number, number, string, string, Bandwidth[], number, 'greedy' | 'interval'] = [
  bucket.limit, bucket.windowMs, bucket.algorithm, bucket.name, both.bandwidths, bucket.capacity, bucket.refill,
];
export const calendar: 'day' | 'week' | 'month' | null = bucket.calendar;

export async function waiting(signal: AbortSignal): Promise<void> {
  const options: AcquireOptions = { signal, timeoutMs: 1000 };
  await bucket.acquire();
  await bucket.acquire(2, options);
  try {
    await new LeakyBucket({ capacity: 1, intervalMs: 10 }).acquire(1, { timeoutMs: 5 });
  } catch (error) {
    if (error instanceof RateLimited) {
      const code: 'rate_limited' = error.code;
      console.log(code, error.retryAfterMs);
    } else if (error instanceof DOMException && error.name === 'TimeoutError') {
      const wait: number = (error as AcquireTimeoutError).retryAfterMs;
      console.log(wait);
    }
  }
}

// The server helpers, typed by the request the key function reads.
interface Req {
  ip: string;
  method: string;
}
const perIp = new KeyedLimiter(new Gcra({ burst: 10, emissionIntervalMs: 100 }), { maxKeys: 10_000, eviction: 'refuse' });
export const handler = middleware<Req>({
  limiter: perIp,
  key: (req) => req.ip,
  cost: (req) => (req.method === 'POST' ? 5 : 1),
});
const policy = new Policy({
  limits: [
    { name: 'per-ip', algorithm: 'gcra', rate: '10/second', burst: 20, by: ['ip'] },
    { name: 'daily', algorithm: 'fixed_window', rate: '10000/day', calendar: 'day' },
  ],
});
export const hook = fastifyHook<Req>({ limiter: policy, fields: (request) => ({ ip: request.ip }) });
export const asyncHandler = middleware<Req>({ limiter: perIp, key: async (req) => req.ip, cost: async () => 1 });
export const fixedCost = fastifyHook<Req>({ limiter: policy, fields: (r) => ({ ip: r.ip }), cost: 2 });
export const skipping = fastifyHook<Req>({ limiter: policy, fields: (r) => ({ ip: r.ip }), skip: (r) => r.method === 'OPTIONS' });
// Defaults: the key is the client's address; a Policy's fields are client, method and path.
export const byAddress = middleware<Req>({ limiter: perIp });
export const byRoute = fastifyHook<Req>({ limiter: Policy.fromRates('10/second', { by: ['client', 'path'] }), cost: 2 });
// An IPv6 client keyed by its /64, or each address whole; ipKey in a key of one's own.
export const bySlash64 = middleware<Req>({ limiter: perIp, ipv6Subnet: 64 });
export const byWholeAddress = fastifyHook<Req>({ limiter: Policy.fromRates('10/second', { by: ['client'] }), ipv6Subnet: false });
export const byForwarded = middleware<Req>({ limiter: perIp, key: (req) => ipKey(req.ip, 48) });
export const keyOfAddress: string = ipKey('2001:db8::1') + ipKey('::1', false);
// One limiter every request shares.
export const shared = middleware<Req>({ limiter: bucket, cost: (req) => (req.method === 'POST' ? 2 : 1), skip: () => false });
// The decision alone (an app answering its own 429): a promise where a function
// answers one, so awaited; a Policy's is a PolicyDecision. Still handlers.
export async function deciding(req: Req): Promise<unknown[]> {
  const decision: Decision = await handler.decide(req);
  const policyDecision: PolicyDecision = await hook.decide(req);
  const { decide, skips } = skipping;
  const skipped: boolean = await skips(req);
  const either: Decision | Promise<Decision> = byAddress.decide(req);
  const headers: RateLimitHeaders = perIp.headers(decision);
  // @ts-expect-error: a KeyedLimiter's decision is no PolicyDecision
  const notPolicy: PolicyDecision = await handler.decide(req);
  return [policyDecision.deniedBy, await decide(req), skipped, either, headers, notPolicy, shared.skips(req)];
}
export const stillHandlers: [
  (req: Req, res: ResponseLike, next: (error?: unknown) => void) => void,
  (request: Req, reply: ReplyLike, done: (error?: Error) => void) => void,
  RateLimitMiddleware<Req>,
  RateLimitHook<Req, PolicyDecision>,
  RequestDecider<Req>,
] = [handler, hook, byAddress, byRoute, hook];
// @ts-expect-error: decide may answer a promise: await it
handler.decide({ ip: '1.2.3.4', method: 'GET' }).allowed;
// @ts-expect-error: decide takes the handler's request
handler.decide(42);

// Keyed limiters, policies, portable state.
const keyedDecisions: Decision[] = [perIp.tryAcquire('1.2.3.4'), perIp.peek(42, 1, 0), ...perIp.tryAcquireBatch('k', [1, 2], 0)];
const keyedReservation: Reservation = perIp.reserve('k', 1, 100);
perIp.refund('k', keyedReservation.cost, keyedReservation.atMs);
// Keys as bytes, as Python's bytes: a Uint8Array (a Buffer is one), in every method.
const byteKey = new TextEncoder().encode('k');
const byteDecisions: Decision[] = [perIp.tryAcquire(byteKey), perIp.peek(new Uint8Array([0xff]), 1, 0), ...perIp.tryAcquireBatch(new Uint8Array(0), [1])];
perIp.refund(byteKey, perIp.reserve(byteKey).cost);
const byteWait: Promise<void> = perIp.acquire(byteKey.subarray(1));
const byteField: PolicyRequest = { ip: byteKey, port: 443 };
const keys: Key[] = ['k', 42, byteKey, new Uint8Array(0)];
middleware<Req>({ limiter: perIp, key: () => byteKey });
// A key or fields read from a header the client may leave out: nothing goes to next(error), never unlimited.
interface HeaderReq {
  get(name: string): string | undefined;
}
middleware<HeaderReq>({ limiter: perIp, key: (req) => req.get('x-api-key') });
fastifyHook<HeaderReq>({ limiter: policy, fields: async (req) => { const ip = req.get('x-ip'); return ip === undefined ? null : { ip }; } });
// @ts-expect-error: a DataView is no key (nor an ArrayBuffer)
perIp.tryAcquire(new DataView(byteKey.buffer));
// @ts-expect-error: nor another typed array
perIp.peek(new Int8Array(1));
perIp.reclaim();
const wasHeld: boolean = perIp.reset('10.0.0.1');
void wasHeld;
const size: number = perIp.size;
const bound: [number | null, 'nearest_fresh' | 'refuse'] = [perIp.maxKeys, perIp.eviction];
const perIpLimiter: Limiter = perIp.limiter;
const perIpCopy = new KeyedLimiter(perIp.limiter, { maxKeys: perIp.maxKeys, eviction: perIp.eviction });
const boundedPolicy = new Policy({
  limits: [
    { name: 'a', by: ['ip'], limiter: perIpLimiter, maxKeys: 10, eviction: 'refuse' },
    { name: 'b', by: ['ip'], limiter: perIpCopy },
  ],
});
// @ts-expect-error: a KeyedLimiter brings its own bound
new Policy({ limits: [{ name: 'c', limiter: perIpCopy, maxKeys: 2 }] });
// `null` is "none" in a configuration, as the README says, for these four.
new Policy({ limits: [{ name: 'd', rate: '3/second', burst: null, calendar: null, max_keys: null, eviction: null }] });
// @ts-expect-error: but not for the rate
new Policy({ limits: [{ name: 'e', rate: null }] });
const pd: PolicyDecision = policy.tryAcquire({ ip: '1.2.3.4' }, 1);
const deniedBy: string | null = pd.deniedBy;
const firstLimit: string | undefined = pd.limits[0]?.name;
const pr: PolicyReservation = Policy.fromRates('10/second;100/day', { algorithm: 'gcra', by: ['user'] }).reserve({ user: 7 });
pr.cancel();
// A policy of no limits answers {}: the type says so, and a field still reads as a string.
const policyHeaders: RateLimitHeaders | Record<string, never> = policy.headers(pd);
// @ts-expect-error: a limiter's headers are not a policy decision's (a TypeError)
bucket.headers(pd);
// @ts-expect-error: nor a keyed limiter's
perIp.headers(pd);
const policyLine: string = policyHeaders['RateLimit-Policy'];
export const policyHeadersObject = new Headers(policy.headers(pd));
// @ts-expect-error not every policy's headers are a RateLimitHeaders
const assumed: RateLimitHeaders = policy.headers(pd);
const exact = new Policy({ limits: [{ name: 'exact', by: ['user'], limiter: new Gcra({ burst: 2, emissionIntervalMs: 100 }) }] });
const monthly = new FixedWindow({ limit: 1000, calendar: 'month', clock: Date.now });
const bytes: Uint8Array = monthly.toBytes();
monthly.restore(bytes);
const copy: FixedWindow = FixedWindow.fromBytes(bytes, { limit: 1000, calendar: 'month' });
const copyBuckets: TokenBucket = TokenBucket.fromBytes(both.toBytes(), both.bandwidths, { name: 'both' });
const copyGcra: Gcra = Gcra.fromBytes(new Gcra({ burst: 1, emissionIntervalMs: 1 }).toBytes(), { burst: 1, emissionIntervalMs: 1 });
export async function waitingKeyed(): Promise<void> {
  await perIp.acquire('k', 1, { timeoutMs: 100 });
  await policy.acquire({ ip: 'x' }, 1, { timeoutMs: 100 });
}
// Grown in code, as Python's Policy() and add: a limiter or a KeyedLimiter, keyed by `by`.
const grown = new Policy();
grown.add('per-ip', perIpCopy, { by: ['ip'] });
grown.add('global', monthly);
grown.add('per-user', bucket, { by: null });
// @ts-expect-error: `by` is an option, as Python's keyword
grown.add('x', bucket, ['ip']);
// @ts-expect-error: a policy is no limit of another
grown.add('y', exact);
const grownNames: string[] = grown.names;
const grownSize: number = grown.size;
const grownBy: string[] = grown.keyedBy('per-ip');
const limitsHeld: number = grown.reset({ user: 'alice' });
// @ts-expect-error: a request, not a key
grown.reset('alice');
const grownLimits: Array<{ name: string; by: string[] }> = grown.limits;
// @ts-expect-error: read-only, as a Map's size
grown.size = 3;
export const more: unknown[] = [keyedDecisions, byteDecisions, byteWait, byteField, keys, size, bound, perIpLimiter, boundedPolicy, deniedBy, firstLimit, pr, policyHeaders, policyLine, assumed, exact, copy, copyGcra, copyBuckets];
export const grownPolicy: unknown[] = [grownNames, grownSize, grownBy, limitsHeld, grownLimits, new Policy(null, { clock: Date.now })];

// `null` for an optional argument or option is its default, as the README
// says (`tryAcquire(null, nowMs)` costs 1, `refill: null` is 'greedy') and
// the runtime takes it: Python's `None`, or a value of `T | null` passed on.
const maybeNow: number | null = null;
const nullBucket = new TokenBucket({ capacity: 2, refillTokens: 1, refillPeriodMs: 10, initialTokens: null, refill: null, clock: null });
const nullDecisions: Decision[] = [nullBucket.tryAcquire(null, 5), nullBucket.peek(null, maybeNow)];
const nullReservation: Reservation = nullBucket.reserve(null, null, null);
nullBucket.refund(1, null);
nullBucket.reconfigure(new TokenBucket(bucketOptions), null);
const nullBands = TokenBucket.fromBandwidths([{ capacity: 2, refillTokens: 1, refillPeriodMs: 10, initialTokens: null }], null);
const nullCopy = TokenBucket.fromBytes(nullBands.toBytes(), nullBands.bandwidths, null);
const nullKeyed = new KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: 1 }), null);
const nullKeyedAnswers: unknown[] = [
  nullKeyed.tryAcquire('k', null, null),
  nullKeyed.peek('k', null, null),
  nullKeyed.reserve('k', null, null, null),
  nullKeyed.tryAcquireBatch('k', [1], null),
];
nullKeyed.refund('k', 1, null);
nullKeyed.reclaim(null);
const nullPolicy = new Policy('1/second', null);
nullPolicy.add('also', new Gcra({ burst: 1, emissionIntervalMs: 1 }), null);
const nullPolicyAnswers: unknown[] = [
  nullPolicy.tryAcquire(null, null, null),
  nullPolicy.peek(null, null, null),
  nullPolicy.reserve(null, null, null, null),
  Policy.fromRates('1/second', null),
  Policy.fromConfig({ limits: [{ name: 'a', rate: '1/second' }] }, null),
];
nullPolicy.refund(null, 1, null);
nullPolicy.reclaim(null);
export async function waitingWithNulls(): Promise<void> {
  await nullBucket.acquire(null, null);
  await nullBucket.acquire(null, { signal: null, timeoutMs: null });
  await nullKeyed.acquire('k', null, { signal: null });
  await nullPolicy.acquire(null, null, null);
}
// The server helpers' functions too, as the ASGI middleware's key=None, fields=None, skip=None; and their cost.
const maybeCost: number | null = null;
const nullHelpers: unknown[] = [
  middleware({ limiter: perIp, key: null, fields: null, skip: null, cost: null }),
  fastifyHook({ limiter: policy, key: null, fields: null, skip: null, cost: maybeCost }),
  middleware({ limiter: bucket, key: null, fields: null, cost: null }),
];
// A limiter's name ('default'), a window's calendar beside windowMs, windowMs beside a calendar, a configured limit's `by`.
const maybeName: string | null = null;
const nullNamed: unknown[] = [
  new Gcra({ burst: 1, emissionIntervalMs: 1, name: maybeName }),
  Gcra.perPeriod({ burst: 1, tokens: 1, periodMs: 1, name: null }),
  TokenBucket.fromBandwidths([bucketOptions], { name: null, clock: null }),
  new FixedWindow({ limit: 1, windowMs: 1000, calendar: null }),
  new SlidingWindowCounter({ limit: 1, calendar: 'day', windowMs: null }),
  new Policy({ limits: [{ name: 'all', by: null, limiter: new Gcra({ burst: 1, emissionIntervalMs: 1 }), maxKeys: null }] }),
];
// pacedFetch's options, each null: its default.
const nullPaced: PacedFetch = pacedFetch(fetch, nullBucket, {
  cost: maybeCost, maxWaitMs: null, maxWaiting: null, retries: null, maxRetryAfterMs: null, clock: null, wallClock: null, timers: null, onEvent: null,
});
const alsoPaced: PacedFetch = pacedFetch(fetch, nullBucket, null);
export const nulls: unknown[] = [nullDecisions, nullReservation, nullCopy, nullKeyedAnswers, nullPolicyAnswers, nullHelpers, nullNamed, nullPaced, alsoPaced];
// @ts-expect-error: ipv6Subnet refuses null, which could mean Python's None (each address whole) as well as the default
middleware<Req>({ limiter: perIp, ipv6Subnet: null });
// @ts-expect-error: so does ipKey's
ipKey('::1', null);
// @ts-expect-error: a log has no calendar
new SlidingWindowLog({ limit: 1, windowMs: 1000, calendar: null });

export const summaries: unknown[] = [decisions, retryAfter, headersRecord, config];

// @ts-expect-error: `refillPeriodMs` is required
new TokenBucket({ capacity: 10, refillTokens: 1 });
// @ts-expect-error: the Python spelling is not an option
new TokenBucket({ capacity: 10, refill_tokens: 1, refillPeriodMs: 100 });
// @ts-expect-error: counts are numbers
new TokenBucket({ capacity: '10', refillTokens: 1, refillPeriodMs: 100 });
// @ts-expect-error: refill is 'greedy' or 'interval'
new TokenBucket({ capacity: 10, refillTokens: 1, refillPeriodMs: 100, refill: 'lazy' });
// @ts-expect-error: the options object is required
new SlidingWindowLog();
// @ts-expect-error: `windowMs`, not `window`
new FixedWindow({ limit: 1, window: 1000 });
// @ts-expect-error: Gcra takes emissionIntervalMs, perPeriod takes tokens and periodMs
new Gcra({ burst: 1, tokens: 1, periodMs: 1 });
// @ts-expect-error: Limiter is abstract
new Limiter();
// @ts-expect-error: `cost` is a number
bucket.tryAcquire('1');
// @ts-expect-error: `nowMs` is a number
bucket.peek(1, new Date());
// @ts-expect-error: refund needs its cost
bucket.refund();
// @ts-expect-error: reconfigure takes a limiter of the same class
bucket.reconfigure(new Gcra({ burst: 1, emissionIntervalMs: 1 }));
// @ts-expect-error: acquire's options are an object
bucket.acquire(1, 500);
// @ts-expect-error: a decision has no `retryAfter` (it is `retryAfterMs`)
decisions[0]?.retryAfter;
// @ts-expect-error: the key is a string, a number or a Uint8Array
middleware<Req>({ limiter: perIp, key: (req) => req });
// @ts-expect-error: one limiter every request shares takes no `key`
middleware<Req>({ limiter: bucket, key: (req) => req.ip });
// @ts-expect-error: one limiter every request shares takes no `fields`
fastifyHook<Req>({ limiter: bucket, fields: (req) => ({ ip: req.ip }) });
// @ts-expect-error: the helpers take a KeyedLimiter, a Policy or a limiter
middleware<Req>({ limiter: { tryAcquire: () => ({}) } });
// @ts-expect-error: a Policy takes `fields`, not `key`
middleware<Req>({ limiter: policy, key: (req) => req.ip });
// @ts-expect-error: a KeyedLimiter takes `key`, not `fields`
middleware<Req>({ limiter: perIp, key: (req) => req.ip, fields: (req) => ({ ip: req.ip }) });
// @ts-expect-error: `cost` is a number or a function answering one
middleware<Req>({ limiter: perIp, key: (req) => req.ip, cost: '2' });
// @ts-expect-error: ipv6Subnet is a prefix length or false
middleware<Req>({ limiter: perIp, ipv6Subnet: true });
// @ts-expect-error: one limiter every request shares reads no address
middleware<Req>({ limiter: bucket, ipv6Subnet: 64 });
// @ts-expect-error: ipKey takes a string
ipKey(42);
// @ts-expect-error: skip answers a boolean
middleware<Req>({ limiter: perIp, key: (req) => req.ip, skip: (req) => req.ip });
// @ts-expect-error: keys are strings, numbers or Uint8Arrays
perIp.tryAcquire({});
// @ts-expect-error: a calendar is 'day', 'week' or 'month'
new FixedWindow({ limit: 1, calendar: 'year' });
// @ts-expect-error: a request's values are strings, numbers or Uint8Arrays
policy.tryAcquire({ ip: true });
// @ts-expect-error: restore takes bytes
monthly.restore('state');
