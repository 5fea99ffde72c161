// `ratekeeper/redis` (Node only: lib/redis.cjs): limits shared by every
// process and host through Redis, with the same names and decisions as the
// in-process KeyedLimiter and Policy, each method returning a promise.
// Not in the WebAssembly build: browsers and edge workers cannot speak RESP.
import type {
  AcquireOptions,
  Decision,
  FixedWindow,
  Gcra,
  Key,
  KeyedLimiter,
  Limiter,
  LimiterDecision,
  Policy,
  PolicyConfig,
  PolicyDecision,
  PolicyOptions,
  PolicyRequest,
  RateLimitHeaders,
  SlidingWindowCounter,
  SlidingWindowLog,
  TokenBucket,
} from './index'

/**
 * The user's own client: an ioredis `Redis` or `Cluster` (detected by
 * `call` and `evalsha`), or a node-redis (`redis` v4 and later) client from
 * `createClient` (detected by `sendCommand`) or `createCluster` (detected by
 * `sendCommand` and `getSlotRandomNode`). Recommended: ioredis with
 * `enableOfflineQueue: false`, node-redis with `disableOfflineQueue: true`,
 * and an `'error'` listener on either (see the README). A key of bytes that
 * are not UTF-8 goes to it as a `Buffer` (a `Uint8Array`), as ioredis and
 * node-redis send bytes: what it is called with may hold one.
 */
export type RedisClient =
  | { call(command: string, ...args: Array<string | number | Uint8Array>): Promise<unknown>; evalsha(...args: any[]): Promise<unknown> }
  | { sendCommand(args: Array<string | Uint8Array>): Promise<unknown> }
  | {
      sendCommand(firstKey: string | Uint8Array | undefined, isReadonly: boolean | undefined, args: Array<string | Uint8Array>): Promise<unknown>
      getSlotRandomNode(slot: number): unknown
    }

/**
 * What decides when Redis cannot answer within `commandTimeoutMs`: besides
 * `'open'`, `'closed'` and a `Limiter`, a `KeyedLimiter` for a `RedisLimiter`
 * and a `Policy` for a `RedisPolicy` (the class deciding the same target).
 */
export type OnError = 'open' | 'closed' | Limiter | KeyedLimiter | Policy
/** `onError` of a `RedisLimiter`: the fallback decides for a key. */
export type LimiterOnError = 'open' | 'closed' | Limiter | KeyedLimiter
/** `onError` of a `RedisPolicy`: the fallback decides for a request. */
export type PolicyOnError = 'open' | 'closed' | Limiter | Policy

/** Options of RedisLimiter and RedisPolicy (`F`: what each takes as `onError`); each given as `null` takes its default, as left out. */
export interface RedisOptions<F extends OnError = OnError> {
  /** The start of every key (default `'ratekeeper:'`, without braces); keys are `prefix{tag}:name:key` (name and values written `<length>:<bytes>`), as the Python client's. */
  prefix?: string | null
  /**
   * The caller's clock: Unix milliseconds (`Date.now`), sent as whole µs (at
   * most 2^52). Default: none, the Redis server's `TIME`. A `nowMs` argument
   * is caller time too (and is not batched). `acquire` waits until its slot
   * has come on this clock (read again after each sleep); on the server's
   * clock it sleeps once, the wait booked.
   */
  clock?: (() => number) | null
  /**
   * When Redis cannot answer (down, unreachable, slower than
   * `commandTimeoutMs`): `'closed'` (the default) denies, `'open'` allows,
   * an in-process limiter, keyed limiter or policy decides instead. Such
   * decisions have `fromStore: false`. A fallback `Policy`'s fields are
   * asked of every request, Redis up or down, as its limits are at the call
   * (one `add`ed later too): a request lacking one is a `RangeError`
   * (`invalid_value`), as the `Policy` refuses it.
   */
  onError?: F | null
  /** Hot keys: calls for a key while its round trip is in flight go as one batch. Default `true`. */
  batching?: boolean | null
  /** The longest wait for one round trip, in ms, before `onError` decides. Default 1000. */
  commandTimeoutMs?: number | null
}

/** A decision of a Redis-backed limiter: `fromStore` is false when `onError` made it. */
export interface RedisDecision extends Decision {
  fromStore: boolean
}

/** A decision of a RedisPolicy. */
export interface RedisPolicyDecision extends PolicyDecision {
  fromStore: boolean
}

/** The limiters Redis runs (greedy token buckets starting full, windows not on calendars). */
export type RedisLimiterConfig = Gcra | TokenBucket | FixedWindow | SlidingWindowCounter | SlidingWindowLog

/**
 * A booking (`reserve`): the in-process Reservation's fields. `atMs` is the
 * slot in Unix ms on the clock that decided; `decision` says why when not
 * `ok`; `fromStore` is false when `onError` decided.
 */
export interface RedisReservation<D extends RedisDecision = RedisDecision> {
  ok: boolean
  waitMs: number
  atMs: number
  cost: number
  decision: D | null
  fromStore: boolean
  /**
   * Gives an unused booking back, once (later calls do nothing): to Redis at
   * its slot, or to the `onError` limiter that admitted it, at the instant
   * it was taken there (as that limiter's own reservation's `cancel()`). It gives back as it
   * is, wherever the booking stands: on a bucket, cancel the latest first; nothing once a
   * reset through the same limiter or policy found its key since it was booked. Resolves when
   * Redis cannot be reached too (the booking then expires with its key);
   * rejects only with the script's own errors (NOPERM, a key of another type).
   */
  cancel(): Promise<void>
}

/** One limiter per key, kept in Redis: KeyedLimiter's methods as promises. */
export declare class RedisLimiter {
  constructor(client: RedisClient, limiter: RedisLimiterConfig, options?: RedisOptions<LimiterOnError> | null)
  tryAcquire(key: Key, cost?: number | null, nowMs?: number | null): Promise<RedisDecision>
  peek(key: Key, cost?: number | null, nowMs?: number | null): Promise<RedisDecision>
  tryAcquireBatch(key: Key, costs: number[], nowMs?: number | null): Promise<RedisDecision[]>
  /** Gives back units Redis gave (`fromStore: true`), taken at `takenAtMs` (default now). */
  refund(key: Key, cost: number, takenAtMs?: number | null): Promise<void>
  /** Books the earliest slot within `maxWaitMs` (first come, first served across processes). */
  reserve(key: Key, cost?: number | null, maxWaitMs?: number | null, nowMs?: number | null): Promise<RedisReservation>
  /**
   * Books once and sleeps until the slot (RateLimited / TimeoutError / `signal.reason` otherwise):
   * on the caller's `clock`, until it has come on that clock (sleeping again what is left there,
   * with no other round trip); on the server's, one sleep. Aborted (or the clock throwing there),
   * it gives the booking back: on a bucket only while it is the key's latest (else its slot goes
   * unused), on a window where it was counted. `timeoutMs` bounds the wait booked, at booking.
   */
  acquire(key: Key, cost?: number | null, options?: AcquireOptions | null): Promise<void>
  /** As `Limiter.headers`: a policy's decision is a `TypeError` (`invalid_type`). */
  headers(decision: LimiterDecision): RateLimitHeaders
  /**
   * Puts `key` back to fresh, as a key never seen (one UNLINK; a KeyedLimiter
   * given as `onError` resets its key too): whether Redis held it. An error
   * of Redis, or no answer within `commandTimeoutMs` (a `TimeoutError`), rejects.
   */
  reset(key: Key): Promise<boolean>
  readonly limit: number
  readonly windowMs: number
  readonly algorithm: string
  readonly name: string
}

/**
 * All-or-nothing limits kept in Redis: Policy's methods as promises, and its
 * members that describe the limits. No `add`: the limits are fixed at
 * construction.
 */
export declare class RedisPolicy {
  /**
   * `config`: what `Policy` takes, of at least one limit: none (undefined
   * or null), which `Policy` reads as the empty policy that `add` fills, or
   * `{ limits: [] }`, is a `RangeError` (`zero_value`), as in Python.
   */
  constructor(client: RedisClient, config: PolicyConfig | string, options?: (RedisOptions<PolicyOnError> & Omit<PolicyOptions, 'clock'>) | null)
  tryAcquire(request?: PolicyRequest | null, cost?: number | null, nowMs?: number | null): Promise<RedisPolicyDecision>
  peek(request?: PolicyRequest | null, cost?: number | null, nowMs?: number | null): Promise<RedisPolicyDecision>
  tryAcquireBatch(request: PolicyRequest | null | undefined, costs: number[], nowMs?: number | null): Promise<RedisPolicyDecision[]>
  /** Gives back units Redis gave (`fromStore: true`) in every limit, taken at `takenAtMs` (default now). */
  refund(request: PolicyRequest | null | undefined, cost: number, takenAtMs?: number | null): Promise<void>
  reserve(request?: PolicyRequest | null, cost?: number | null, maxWaitMs?: number | null, nowMs?: number | null): Promise<RedisReservation<RedisPolicyDecision>>
  /**
   * Books once and sleeps until the slot (on the caller's `clock`, until it has come there),
   * as `RedisLimiter.acquire`; aborted, gives the booking back per limit key as it does.
   */
  acquire(request?: PolicyRequest | null, cost?: number | null, options?: AcquireOptions | null): Promise<void>
  headers(decision: PolicyDecision): RateLimitHeaders
  /**
   * Puts `request`'s key back to fresh in every limit keyed by fields it all
   * gives, as `Policy.reset` (one UNLINK; a Policy given as `onError` resets
   * them too): how many of those limits Redis held the key in. A request
   * that would reset no limit rejects with a `RangeError` (`invalid_value`);
   * an error of Redis, or no answer within `commandTimeoutMs` (a
   * `TimeoutError`), rejects too.
   */
  reset(request: PolicyRequest): Promise<number>
  /** The limits, in order (Python: a tuple of `PolicyLimit(name, by)`). */
  readonly limits: Array<{ name: string; by: string[] }>
  /** The limits' names, in order. */
  readonly names: string[]
  /** The number of limits, as a `Map`'s `size` (Python: `len(policy)`). */
  readonly size: number
  /**
   * The fields limit `name` is keyed by (`[]` for a global limit); a
   * `RangeError` (`invalid_value`) for a name no limit has (Python: `RateLimitError`, `invalid_value`).
   */
  keyedBy(name: string): string[]
}

// The server helpers of 'ratekeeper' (`middleware`, `fastifyHook`) take these
// limiters too, as lib/redis.cjs lets them at run time: a RedisLimiter keyed
// as a KeyedLimiter (`key`), a RedisPolicy as a Policy (`fields`), each
// decision a promise (`decide(request)` answers one).
declare module './index' {
  interface KeyedStores {
    RedisLimiter: RedisLimiter
  }
  interface PolicyStores {
    RedisPolicy: RedisPolicy
  }
}

/** The server-side script (protocol 1), the same bytes every binding ships. */
export declare const REDIS_SCRIPT: string
/** Its SHA-1, what EVALSHA calls. */
export declare const REDIS_SCRIPT_SHA: string
/** The largest value a configuration may let the script reach (2^51). */
export declare const MAX_EXACT: number
/** The latest caller time, in µs since the Unix epoch (2^52). */
export declare const MAX_NOW: number
/** The longest window and the longest wait, in µs (2^50). */
export declare const MAX_SPAN: number
/**
 * The native build's classes, which these classes take (as `limiter` and
 * `onError`): the same as those of 'ratekeeper' on Node; where 'ratekeeper'
 * resolves to the WebAssembly build (the `browser` condition: Jest with
 * jsdom, say), build the limiters given here with these. `RateLimited` is
 * that build's too, the class `acquire` rejects with here (there, not the
 * one 'ratekeeper' exports).
 */
export { Gcra, TokenBucket, FixedWindow, SlidingWindowCounter, SlidingWindowLog, KeyedLimiter, Policy, RateLimited } from './index'
