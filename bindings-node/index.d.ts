// The JS surface of ratekeeper: ONE declaration file for the napi addon (this
// package) and the WebAssembly build, which ships this very file (copied by
// scripts/wasm.sh into bindings-wasm/pkg/) and adds only `init` / `initSync`
// for the web target. Hand-written, as the classes are written once in
// lib/api.cjs; tests/js/types/usage.ts and tests/browser/types.ts check it.
//
// Time: every `...Ms` value and `nowMs` is milliseconds as a `number`
// (fractions allowed, rounded to the nanosecond). `nowMs` defaults to the
// limiter's clock: `performance.now()`, unless a `clock` option was given.
//
// Errors: bad values throw a `RangeError`, values of the wrong type a
// `TypeError` (the promise-returning `acquire` rejects with them instead); both carry `.code` (`zero_value`, `too_large`, `overflow`,
// `cost_exceeds_limit`, `invalid_value`, `invalid_type`, `invalid_syntax`,
// `store_full`, `out_of_memory` (a keyed store that could not grow for a new
// key), `state_truncated`, `state_corrupt`, `state_version`,
// `state_mismatch`; `invalid_config` for a policy configuration of the wrong
// shape, a TypeError whose message names the field) and a message naming the
// argument in JS spelling. A failed call changes nothing.

/** A limiter's answer to one request. A denial is a value, not an exception. */
export interface Decision {
  /** Whether the request was admitted (and its cost consumed). */
  allowed: boolean
  /** Units still available now, after this request's cost if it was admitted. */
  remaining: number
  /** The most units the limiter admits at once: its capacity or limit. */
  limit: number
  /**
   * `0` when allowed; otherwise milliseconds after `nowMs` until the same cost
   * would be allowed, if nothing else consumes (exact to the nanosecond: 1 ns
   * earlier it would not be). `nowMs + retryAfterMs`, as floats add, reaches
   * that instant: on the epoch (1.7e12) it may exceed the wait by a float step
   * of the sum, a quarter of a microsecond.
   */
  retryAfterMs: number
  /** Milliseconds after `nowMs` until the limiter is back to its fresh state. */
  resetAfterMs: number
}

/** The outcome of `reserve`: a booked slot, or (when `ok` is false) nothing booked. */
export interface Reservation {
  /** Whether the slot was booked. */
  ok: boolean
  /**
   * Milliseconds to wait before proceeding. When not `ok`: the wait that would
   * have been needed (`decision.retryAfterMs`).
   */
  waitMs: number
  /** The slot on the limiter's clock, `nowMs + waitMs`. */
  atMs: number
  /** The cost asked for. */
  cost: number
  /** Why nothing was booked (when not `ok`), else `null`. */
  decision: Decision | null
  /**
   * Gives an unused booking back at exactly its slot, the first time only
   * (nothing for a refused reservation). Exact where `refund(cost, atMs)` may
   * not be: `atMs` is a float, a quarter of a microsecond from the next one on
   * a clock counting from the epoch. Not enumerable.
   */
  cancel(): void
}

/**
 * The IETF RateLimit header values of a decision (`Retry-After` only when
 * denied). A type, not an interface, so that it is a `Record<string, string>`
 * to TypeScript: `new Response(body, { headers })`, `new Headers(headers)` and
 * Node's `res.writeHead(429, headers)` take it.
 */
export type RateLimitHeaders = {
  /** `"name";q=<limit>;w=<window seconds>` */
  'RateLimit-Policy': string
  /** `"name";r=<remaining>;t=<reset seconds>` */
  RateLimit: string
  /** Whole seconds, rounded up, for a denied request only. */
  'Retry-After'?: string
}

/** Options every limiter takes besides its own. */
export interface CommonOptions {
  /**
   * The name in the `RateLimit-Policy` / `RateLimit` headers. Default
   * `'default'`. A structured-field string there: printable ASCII (space to
   * `~`) and not empty, else a `RangeError` (`invalid_value`). null: the default.
   */
  name?: string | null
  /**
   * The clock that `nowMs` defaults to, returning milliseconds (default:
   * `performance.now()`; `Date.now()` for a limiter with a `calendar`). For
   * tests and simulation: `acquire` schedules its timer by this clock, so it
   * must advance with the timers. null: the default.
   */
  clock?: (() => number) | null
}

/** One bandwidth of a token bucket. Counts are whole numbers from 0 to 2^53 - 1. */
export interface BandwidthOptions {
  /** The most tokens held; greater than zero. */
  capacity: number
  /** Tokens added every `refillPeriodMs`; greater than zero. */
  refillTokens: number
  /** Milliseconds between refills; greater than zero. */
  refillPeriodMs: number
  /** Tokens at the first call, at most `capacity`. Default: `capacity` (full). */
  initialTokens?: number | null
  /** `'greedy'` (continuously, the default) or `'interval'` (all at each period's end). */
  refill?: 'greedy' | 'interval' | null
}

/** A bandwidth as a bucket reports it. */
export interface Bandwidth {
  capacity: number
  refillTokens: number
  refillPeriodMs: number
  initialTokens: number
  refill: 'greedy' | 'interval'
}

/** Options of `new TokenBucket(options)`. */
export interface TokenBucketOptions extends BandwidthOptions, CommonOptions {}

/** Options of `new Gcra(options)`. */
export interface GcraOptions extends CommonOptions {
  /** The most units admitted at once; greater than zero. */
  burst: number
  /** Milliseconds between two units at the sustained rate; greater than zero. */
  emissionIntervalMs: number
}

/** Options of `Gcra.perPeriod(options)`. */
export interface GcraPerPeriodOptions extends CommonOptions {
  /** The most units admitted at once; greater than zero. */
  burst: number
  /** Units per `periodMs`; `periodMs / tokens` must be a whole number of nanoseconds. */
  tokens: number
  /** The period, in milliseconds. */
  periodMs: number
}

/** Options of `new LeakyBucket(options)`. */
export interface LeakyBucketOptions extends CommonOptions {
  /** The most units queued, the one leaving included; greater than zero. */
  capacity: number
  /** Milliseconds between two units leaving; greater than zero. */
  intervalMs: number
}

/** Options of the window algorithms. */
export interface WindowOptions extends CommonOptions {
  /** The most units per window (`SlidingWindowLog`: at most 2^20). */
  limit: number
  /** The window's length in milliseconds; greater than zero. */
  windowMs: number
}

/**
 * Options of `FixedWindow` and `SlidingWindowCounter` on calendar periods in
 * UTC instead of a fixed length: `nowMs` is then milliseconds since the Unix
 * epoch (the default clock is then `Date.now`), and `windowMs` reads the
 * nominal length (a month: 30 days).
 */
export interface CalendarWindowOptions extends CommonOptions {
  limit: number
  calendar: 'day' | 'week' | 'month'
  /** Not given beside a calendar (`null`: not given; a number is a `RangeError`). */
  windowMs?: null
}

/** Options of `FixedWindow` and `SlidingWindowCounter` on windows of `windowMs`: `calendar` null is none. */
export interface FixedLengthWindowOptions extends WindowOptions {
  calendar?: null
}

/**
 * What `acquire` rejects with at once when the wait would exceed `timeoutMs`:
 * a `DOMException` named `'TimeoutError'`, with the wait that was needed.
 * `catch (e) { if (e instanceof DOMException && e.name === 'TimeoutError') (e as AcquireTimeoutError).retryAfterMs }`
 */
export interface AcquireTimeoutError extends DOMException {
  readonly name: 'TimeoutError'
  /** The wait, in milliseconds, that was needed. */
  readonly retryAfterMs: number
}

/** Options of `acquire`. */
export interface AcquireOptions {
  /**
   * Aborting gives the booking back and rejects with `signal.reason`: the
   * waiters behind move up on a `Gcra` or a `LeakyBucket` (a policy of one
   * such limit); a `TokenBucket`, or a policy of several limits with a
   * bucket among them, gives it back only while it is the latest booking
   * of its keys (see the README, "Waiters behind an aborted one").
   */
  signal?: AbortSignal | null
  /** The longest wait accepted; a longer one rejects at once with a `TimeoutError` DOMException. Default: no bound. */
  timeoutMs?: number | null
}

/**
 * What every limiter offers. Abstract: build a `TokenBucket`, `Gcra`,
 * `LeakyBucket`, `SlidingWindowLog`, `SlidingWindowCounter` or `FixedWindow`.
 */
export declare abstract class Limiter {
  /**
   * Decides a request of `cost` (default 1) at `nowMs`, consuming it if
   * allowed. `cost` 0 is always allowed and reads the state.
   * @throws {RangeError} `cost_exceeds_limit` (it could never be allowed), `invalid_value`.
   * @throws {TypeError} `invalid_type`.
   */
  tryAcquire(cost?: number | null, nowMs?: number | null): Decision
  /** The answer `tryAcquire` would give, consuming nothing. */
  peek(cost?: number | null, nowMs?: number | null): Decision
  /**
   * Books `cost` (default 1) for the earliest moment it fits, if that is at
   * most `maxWaitMs` (default `Infinity`) away. Bookings are served first come
   * first served at exactly the limiter's rate; a later `tryAcquire` never
   * jumps ahead of one.
   */
  reserve(cost?: number | null, maxWaitMs?: number | null, nowMs?: number | null): Reservation
  /**
   * Gives back `cost` units taken at `takenAtMs` (default: now) and not used:
   * permits not needed (for a booking, `reservation.cancel()` is exact). Never above
   * a fresh limiter; a window algorithm removes units only from the window
   * they were taken in.
   */
  refund(cost: number, takenAtMs?: number | null): void
  /**
   * Replaces this limiter's configuration with `other`'s (a limiter of the
   * same class; for a token bucket, with as many bandwidths), carrying the
   * state over as the core documents per algorithm. The name and clock stay;
   * only `other`'s configuration is used, never its state.
   */
  reconfigure(other: this, nowMs?: number | null): void
  /**
   * Resolves when a slot for `cost` (default 1) comes: reserves it, then waits
   * on one timer (first come first served, no polling). Rejects at once, booking
   * nothing, with a `TimeoutError` DOMException when the wait would exceed
   * `timeoutMs` (its `retryAfterMs` is that wait; its `code` is the DOM's 23,
   * not a string), or with `RateLimited` when no slot can be booked now (a full
   * `LeakyBucket` queue; a `TimeoutError` when room comes only after
   * `timeoutMs`). Aborting `signal` during the wait gives the booking back
   * (see `AcquireOptions.signal`) and rejects with `signal.reason`.
   */
  acquire(cost?: number | null, options?: AcquireOptions | null): Promise<void>
  /**
   * The header values of `decision` (made by this limiter), under its `name`
   * and window. A policy's decision (one with `limits`) is a `TypeError`
   * (`invalid_type`): `policy.headers` takes it.
   */
  headers(decision: LimiterDecision): RateLimitHeaders
  /** The most units admitted at once (capacity, burst or limit). */
  readonly limit: number
  /** The `w` of `RateLimit-Policy`: the window, or the time to refill (drain) from empty (full). */
  readonly windowMs: number
  /** `'token_bucket'`, `'gcra'`, `'leaky_bucket'`, `'sliding_window_log'`, `'sliding_window_counter'` or `'fixed_window'`. */
  readonly algorithm: string
  /** A window algorithm's calendar (UTC days, ISO weeks, months), or `null`: windows of `windowMs`. */
  readonly calendar: 'day' | 'week' | 'month' | null
  /** The name in the headers. */
  readonly name: string
  /**
   * The state as bytes (versioned, tied to this configuration): store it, then
   * `restore` it or `fromBytes` it into a limiter of the same configuration.
   */
  toBytes(): Uint8Array
  /**
   * Replaces the state by `bytes` from `toBytes()`.
   * @throws {RangeError} `state_truncated`, `state_corrupt`, `state_version`, `state_mismatch` (another algorithm or configuration).
   */
  restore(bytes: Uint8Array): void
}

/**
 * A token bucket: holds up to `capacity` tokens, gains `refillTokens` every
 * `refillPeriodMs`; a request of cost `n` is admitted when `n` tokens are there.
 * @example
 * const bucket = new TokenBucket({ capacity: 5, refillTokens: 1, refillPeriodMs: 1000 })
 * if (!bucket.tryAcquire().allowed) { ... }
 */
export declare class TokenBucket extends Limiter {
  constructor(options: TokenBucketOptions)
  /**
   * A bucket holding the state `bytes` (see `toBytes`): built from `options`
   * as the constructor takes them, or from bandwidths as `fromBandwidths`
   * (then `common` holds `name` and `clock`).
   */
  static fromBytes(bytes: Uint8Array, options: TokenBucketOptions): TokenBucket
  static fromBytes(bytes: Uint8Array, bandwidths: BandwidthOptions[], common?: CommonOptions | null): TokenBucket
  /** A bucket enforcing every one of `bandwidths` (1 to 4) at once: allowed only if all allow. */
  static fromBandwidths(bandwidths: BandwidthOptions[], options?: CommonOptions | null): TokenBucket
  /** Every bandwidth (a copy). */
  readonly bandwidths: Bandwidth[]
  /** Of the first bandwidth (the only one unless built by `fromBandwidths`). */
  readonly capacity: number
  readonly refillTokens: number
  readonly refillPeriodMs: number
  readonly initialTokens: number
  readonly refill: 'greedy' | 'interval'
}

/** The generic cell rate algorithm: the answers of a token bucket of `burst` refilling one unit per `emissionIntervalMs`. */
export declare class Gcra extends Limiter {
  constructor(options: GcraOptions)
  /** A limiter built from `options` holding the state `bytes` (see `toBytes`). */
  static fromBytes(bytes: Uint8Array, options: GcraOptions): Gcra
  /** `burst` at once, `tokens` per `periodMs`. */
  static perPeriod(options: GcraPerPeriodOptions): Gcra
  readonly burst: number
  readonly emissionIntervalMs: number
}

/**
 * A queue (traffic shaping): units leave `intervalMs` apart, first come first
 * served, at most `capacity` queued. `reserve` / `acquire` shape; `tryAcquire`
 * admits only what may leave at once.
 */
export declare class LeakyBucket extends Limiter {
  constructor(options: LeakyBucketOptions)
  /** A limiter built from `options` holding the state `bytes` (see `toBytes`). */
  static fromBytes(bytes: Uint8Array, options: LeakyBucketOptions): LeakyBucket
  readonly capacity: number
  readonly intervalMs: number
}

/** At most `limit` units in any window of `windowMs`, exactly. */
export declare class SlidingWindowLog extends Limiter {
  constructor(options: WindowOptions)
  /** A limiter built from `options` holding the state `bytes` (see `toBytes`). */
  static fromBytes(bytes: Uint8Array, options: WindowOptions): SlidingWindowLog
}

/** About `limit` units per sliding window of `windowMs` (a weighted estimate), from O(1) state. */
export declare class SlidingWindowCounter extends Limiter {
  constructor(options: FixedLengthWindowOptions | CalendarWindowOptions)
  /** A limiter built from `options` holding the state `bytes` (see `toBytes`). */
  static fromBytes(bytes: Uint8Array, options: FixedLengthWindowOptions | CalendarWindowOptions): SlidingWindowCounter
}

/** At most `limit` units per aligned window of `windowMs` (so up to 2 * limit across a boundary). */
export declare class FixedWindow extends Limiter {
  constructor(options: FixedLengthWindowOptions | CalendarWindowOptions)
  /** A limiter built from `options` holding the state `bytes` (see `toBytes`). */
  static fromBytes(bytes: Uint8Array, options: FixedLengthWindowOptions | CalendarWindowOptions): FixedWindow
}

/** A request that cannot be served (see `acquire`). */
export declare class RateLimited extends Error {
  constructor(message: string, retryAfterMs: number)
  readonly code: 'rate_limited'
  /** When asking again may succeed, in milliseconds. */
  readonly retryAfterMs: number
}

/**
 * A key of a `KeyedLimiter`: a string (UTF-8; one with a lone surrogate,
 * `'\uD800'`: a `RangeError`, `invalid_value`), a whole number standing for
 * its decimal string (`42` and `'42'` are one key; `1.5` or `NaN`: a
 * `RangeError`, `invalid_value`), or a `Uint8Array` (a Node `Buffer` too)
 * standing for its bytes, as Python's `bytes`: the same key as the string
 * whose UTF-8 they are (`Buffer.from('a')` and `'a'` are one key; an empty
 * one is the key `''`), and bytes that are not UTF-8 a key of their own. Only
 * the view's bytes count (not the rest of its buffer), read at the call.
 * Anything else (a `DataView`, an `ArrayBuffer`, another typed array) is a
 * `TypeError`, `invalid_type`.
 */
export type Key = string | number | Uint8Array

/** Options of `KeyedLimiter`. */
export interface KeyedOptions {
  /** The most keys kept (default, or null: no bound). */
  maxKeys?: number | null
  /**
   * At the bound, a new key makes room by forgetting the keys nearest to
   * fresh (`'nearest_fresh'`, the default: a forgotten key may be admitted
   * early by what its state still held, reservations booked ahead included),
   * or fails with `store_full` (`'refuse'`; without `maxKeys`, a
   * `RangeError` `invalid_value`: a store without a bound never refuses).
   */
  eviction?: 'nearest_fresh' | 'refuse' | null
}

/**
 * One limiter per key, every key configured as the limiter given (its state
 * is not copied: each key starts fresh). Keys back to their fresh state are
 * dropped lazily, or by `reclaim`.
 */
export declare class KeyedLimiter {
  constructor(limiter: Limiter, options?: KeyedOptions | null)
  tryAcquire(key: Key, cost?: number | null, nowMs?: number | null): Decision
  /** Consumes nothing and inserts no key. */
  peek(key: Key, cost?: number | null, nowMs?: number | null): Decision
  reserve(key: Key, cost?: number | null, maxWaitMs?: number | null, nowMs?: number | null): Reservation
  refund(key: Key, cost: number, takenAtMs?: number | null): void
  acquire(key: Key, cost?: number | null, options?: AcquireOptions | null): Promise<void>
  /** Decides each of `costs` in turn for `key` at one instant. A cost above the limit fails the whole call (`cost_exceeds_limit`, naming the first such cost), deciding nothing. */
  tryAcquireBatch(key: Key, costs: number[], nowMs?: number | null): Decision[]
  /** As `Limiter.headers`: a policy's decision is a `TypeError` (`invalid_type`). */
  headers(decision: LimiterDecision): RateLimitHeaders
  /** Drops the keys back to their fresh state. */
  reclaim(nowMs?: number | null): void
  /**
   * Puts `key` back to fresh, as a key never seen: its units and the
   * bookings made on it are forgotten (a login limit cleared once its user
   * signed in, say): a booking of it made before, cancelled or aborted
   * after, gives nothing back (those of other keys do). Returns whether the
   * store held it.
   */
  reset(key: Key): boolean
  /** How many keys are held. */
  readonly size: number
  readonly limit: number
  readonly windowMs: number
  readonly algorithm: string
  readonly name: string
  /** The most keys held, or null: no bound. */
  readonly maxKeys: number | null
  /** What happens at `maxKeys`. */
  readonly eviction: 'nearest_fresh' | 'refuse'
  /**
   * A new, fresh limiter of every key's configuration: its class, name and
   * clock. Each read makes one, as its constructor does: a
   * `SlidingWindowLog`'s ring is allocated whole (2 * limit 16-byte entries,
   * 32 MiB at a limit of 2^20), given back once the limiter is collected (on
   * the wasm build, whose memory never shrinks, that room stays the
   * module's). Read it once, not per request; `limit`, `windowMs`,
   * `algorithm` and `name` are the keyed limiter's own getters. A `Policy`
   * given the KeyedLimiter takes its configuration without one.
   */
  readonly limiter: Limiter
}

/** One limit of a policy's declarative configuration (the core's `LimitConfig`, snake_case keys). */
export interface LimitConfig {
  /** Unique in the policy; printable ASCII and not empty, as a limiter's `name`. */
  name: string
  /** Default `'token_bucket'`. */
  algorithm?: 'token_bucket' | 'gcra' | 'leaky_bucket' | 'sliding_window_log' | 'sliding_window_counter' | 'fixed_window'
  /** A rate string: `'10/second'`, `'100 per minute'`; a token bucket takes several (`'10/second;100/day'`). */
  rate: string
  /** The burst (bucket capacity); default (or `null`) the rate's amount. */
  burst?: number | null
  /** Calendar windows (UTC) for `fixed_window` and `sliding_window_counter`, with a `rate` per its period (`'N/day'`, `'N/7 days'`, `'N/month'`); `null`: none. */
  calendar?: 'day' | 'week' | 'month' | null
  /** The request fields the limit is keyed by; none: global. */
  by?: string[]
  /** The most keys held; default (or `null`) no bound. */
  max_keys?: number | null
  /** At `max_keys` (`'refuse'` only with it): as `KeyedOptions.eviction`; `null`: the default. */
  eviction?: 'nearest_fresh' | 'refuse' | null
}

/**
 * A limit of configured limiters: each key of `by` gets a copy of `limiter`'s
 * configuration, at most `maxKeys` keys held (`eviction` at the bound), as
 * `KeyedOptions` has them. Another field is a `TypeError` (`invalid_config`).
 */
export interface LimiterLimit {
  /** Unique in the policy; printable ASCII and not empty, as a limiter's `name`. */
  name: string
  /** The request fields each key is made of; none (or `null`): one limiter every request shares. */
  by?: string[] | null
  limiter: Limiter
  maxKeys?: number | null
  eviction?: 'nearest_fresh' | 'refuse' | null
}

/** A limit whose keys follow a `KeyedLimiter`: its configuration and its bound. */
export interface KeyedLimiterLimit {
  /** Unique in the policy; printable ASCII and not empty, as a limiter's `name`. */
  name: string
  /** As `LimiterLimit`'s (`null`: none). */
  by?: string[] | null
  limiter: KeyedLimiter
  /** The bound is the KeyedLimiter's: giving one here is a `RangeError`. */
  maxKeys?: null
  eviction?: null
}

/** A policy's configuration: declarative limits, or configured limiters. */
export interface PolicyConfig {
  limits: LimitConfig[] | (LimiterLimit | KeyedLimiterLimit)[]
}

/**
 * Options of `Policy`: for a rate string, its algorithm and fields (beside a
 * configuration, which names each limit's, they are a RangeError
 * `invalid_value`); the clock.
 */
export interface PolicyOptions {
  /** null: the default, as left out. */
  algorithm?: LimitConfig['algorithm'] | null
  by?: string[] | null
  clock?: (() => number) | null
}

/**
 * Options of `policy.add`: the request fields the limit is keyed by (none,
 * `[]` or null: one limiter every request shares).
 */
export interface PolicyAddOptions {
  by?: string[] | null
}

/** A request's fields: each value a `Key` (a string, a whole number as its decimal string, or a `Uint8Array` as its bytes). */
export type PolicyRequest = Record<string, Key>

/** A decision a limiter's `headers` takes: any but a policy's (which has `limits`). */
export type LimiterDecision = Decision & { limits?: undefined }

/** A policy's answer: the combined decision (tightest remaining, longest waits), who denied, and each limit's own. */
export interface PolicyDecision extends Decision {
  /** The limit that denied (the longest wait), or `null` when allowed. */
  deniedBy: string | null
  /** Each limit's decision, in the policy's order. */
  limits: Array<Decision & { name: string }>
}

/** A policy's reservation: `decision` is a `PolicyDecision` when nothing was booked. */
export interface PolicyReservation extends Omit<Reservation, 'decision'> {
  decision: PolicyDecision | null
}

/**
 * All-or-nothing limits: a request is admitted only if every limit admits
 * it, and then consumes in every one; otherwise in none.
 */
export declare class Policy {
  /**
   * `config`: a configuration object, its JSON text, or a rate string such
   * as `'10/second;100/day'`; none (undefined or null): an empty policy,
   * which admits everything until `add` adds limits (Python's `Policy()`).
   */
  constructor(config?: PolicyConfig | string | null, options?: PolicyOptions | null)
  /** One limit per rate, each named by its rate. */
  static fromRates(rates: string, options?: PolicyOptions | null): Policy
  /**
   * A policy from a configuration: an object or its JSON text (Python's
   * `from_config`). Text that is not a configuration's JSON, a rate string
   * included, is a `TypeError` (`invalid_config`): `fromRates` takes rates.
   * The options are the clock only, as Python's `from_config(config, *, clock)`:
   * the configuration names each limit's algorithm and fields (`algorithm`
   * or `by` given is a `RangeError`, `invalid_value`).
   */
  static fromConfig(config: PolicyConfig | string, options?: Pick<PolicyOptions, 'clock'> | null): Policy
  /**
   * Adds a limit called `name`, keyed by the request fields `options.by`,
   * each key starting as a fresh copy of `limiter`'s configuration (not its
   * state nor its name); a `KeyedLimiter` brings its `maxKeys` and
   * `eviction` too, not its keys (Python's `policy.add(name, limiter, by=...)`).
   * A name taken already, empty or not printable ASCII, or `by` naming a
   * field twice: a `RangeError` (`invalid_value`). A calendar limit moves a
   * policy without a `clock` of its own to `Date.now()`, or is a
   * `RangeError` (`invalid_value`) once its limits hold state read on the
   * monotonic clock. A booking made before gives nothing back to the new
   * limit, and a decision made before has the headers of the limits it lists.
   */
  add(name: string, limiter: Limiter | KeyedLimiter, options?: PolicyAddOptions | null): void
  tryAcquire(request?: PolicyRequest | null, cost?: number | null, nowMs?: number | null): PolicyDecision
  peek(request?: PolicyRequest | null, cost?: number | null, nowMs?: number | null): PolicyDecision
  /** Books in every limit for the earliest moment all fit, or in none. */
  reserve(request?: PolicyRequest | null, cost?: number | null, maxWaitMs?: number | null, nowMs?: number | null): PolicyReservation
  refund(request: PolicyRequest | null | undefined, cost: number, takenAtMs?: number | null): void
  acquire(request?: PolicyRequest | null, cost?: number | null, options?: AcquireOptions | null): Promise<void>
  /**
   * Every limit the decision lists (those the policy had when it decided)
   * in `RateLimit-Policy` and `RateLimit` (comma-separated items);
   * `Retry-After` when denied. A decision of no limits answers `{}`.
   */
  headers(decision: PolicyDecision): RateLimitHeaders | Record<string, never>
  reclaim(nowMs?: number | null): void
  /**
   * Puts `request`'s key back to fresh, as a key never seen, in every limit
   * keyed by fields that `request` all gives (`KeyedLimiter.reset` in each);
   * returns how many of those limits held it. A global limit is never reset,
   * nor a limit keyed by a field `request` lacks: `{ user }` resets the
   * limits by user and keeps those by IP; the request given to `tryAcquire`
   * resets every keyed limit it was counted in. A request that would reset
   * no limit (a misspelt field, say) is a `RangeError` (`invalid_value`). A
   * booking of a key it reset made before it, cancelled or aborted after,
   * gives nothing back (those of other keys do).
   */
  reset(request: PolicyRequest): number
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

/**
 * Limiters of other modules that the server helpers take as a `KeyedLimiter`
 * (keyed by `key`), by name: `ratekeeper/redis` (redis.d.ts) adds its
 * `RedisLimiter`, as it lets the helpers take it at run time. None in the
 * WebAssembly build, which has no Redis.
 */
export interface KeyedStores {}
/** The same for a `Policy` (keyed by `fields`): `ratekeeper/redis` adds its `RedisPolicy`. */
export interface PolicyStores {}
/** A limiter of `KeyedStores`: decided as a `KeyedLimiter`, each decision a promise. */
type KeyedStore = KeyedStores[keyof KeyedStores]
/** A limiter of `PolicyStores`: decided as a `Policy`, each decision a promise. */
type PolicyStore = PolicyStores[keyof PolicyStores]
/** The decision a limiter of another module (`KeyedStore`, `PolicyStore`) answers. */
type StoreDecision<L> = L extends { tryAcquire(...args: never[]): Promise<infer D extends Decision> } ? D : never

/**
 * Options of the server helpers: a `KeyedLimiter` (or a `RedisLimiter`) and
 * the key of a request, a `Policy` (or a `RedisPolicy`) and its fields, or
 * one limiter every request shares. Each function may answer through a
 * promise (a key looked up in a session store): the request is then decided
 * once it settles, and a rejection goes to `next(error)` / `done(error)`. The
 * same options, with the same defaults and errors, as the Python ASGI
 * middleware's.
 */
export type HandlerOptions<Request> = (
  | {
      /** A `RedisLimiter` of `ratekeeper/redis` too, once imported (see `KeyedStores`). */
      limiter: KeyedLimiter | KeyedStore
      /**
       * The client a request counts against. Default: the client's address,
       * `request.ip` (Express's `req.ip` and Fastify's `request.ip`, which
       * follow their trust proxy settings: behind a proxy, set those to the
       * proxy's address, not `true`, which takes the first `X-Forwarded-For`
       * address, the one a client writes: a fresh key at will; or read
       * an API key or a user id here; without `request.ip`, as on a plain
       * `http` server, the socket's peer address). `undefined` or `null` (a
       * header the client left out, as `(req) => req.get('x-api-key')` answers;
       * an unknown address: a Unix socket's) goes to `next(error)`: a request
       * that cannot be keyed is never let through unlimited; exempt requests
       * with `skip`. Not a function (nor `null`, the default, as the ASGI
       * middleware's `key=None`): a `TypeError` (`invalid_type`). An
       * IPv6 client's default key is its network: see `ipv6Subnet`.
       */
      key?: ((request: Request) => Key | null | undefined | PromiseLike<Key | null | undefined>) | null
      /**
       * How the default `key` keys an IPv6 client: by its network of this
       * many bits, `2001:db8:1234:5600::/56` (see `ipKey`). Default 56: a
       * client usually holds a whole network (RFC 6177 recommends a /56 for
       * a home; a /64 is the least a single host gets) and may take a new
       * address in it at will, each a fresh limit were addresses keyed
       * whole, as `false` keys them. An IPv4-mapped address
       * (`::ffff:1.2.3.4`) is keyed as its IPv4 address either way. Not a
       * number or `false`: a `TypeError` (`invalid_type`), `null` too (where
       * every other option's `null` is its default: here it could as well
       * mean Python's `ipv6_subnet=None`, each address whole); not a whole
       * number from 1 to 128: a `RangeError` (`invalid_value`); beside a
       * `key` of your own (call `ipKey` in it): a `TypeError`.
       */
      ipv6Subnet?: number | false
      /**
       * The cost of every request, or a function answering a request's (a
       * number: `undefined` or `null` goes to `next(error)`). Default (or
       * `null`) 1. A number the limiter would refuse (above its limit,
       * negative, not whole) throws its RangeError or TypeError naming
       * `cost` at once.
       */
      cost?: number | ((request: Request) => number | PromiseLike<number>) | null
      /** A Policy's option: a `TypeError` (`invalid_type`) here (`null`: not given). */
      fields?: null
    }
  | {
      /** A `RedisPolicy` of `ratekeeper/redis` too, once imported (see `PolicyStores`). */
      limiter: Policy | PolicyStore
      /**
       * The request's fields. Default: `client` (the client's address, as
       * `key`'s default), `method` and `path` (the URL's path, without its
       * query, percent-decoded): the ASGI middleware's `request_fields`. A
       * policy with a limit keyed by another field and no `fields` is a
       * `RangeError` (`invalid_value`) naming `fields`, as each request's
       * `tryAcquire` would throw; a `fields` answer that lacks one gets
       * that `tryAcquire` error at the request (naming `request`; it goes
       * to `next(error)`). `undefined` or `null` (an unknown address, by
       * default) goes to `next(error)`, as for `key`. Express routes
       * without regard to case or a trailing slash by default: `/LOGIN`
       * and `/login/` have paths (and limits by `path`) of their own unless
       * its `case sensitive routing` and `strict routing` are set.
       */
      fields?: ((request: Request) => PolicyRequest | null | undefined | PromiseLike<PolicyRequest | null | undefined>) | null
      /**
       * As for a KeyedLimiter: how the default fields' `client` keys an IPv6
       * client (default 56; `false`: each address whole). Beside `fields` of
       * your own: a `TypeError` (`invalid_type`).
       */
      ipv6Subnet?: number | false
      /** As for a KeyedLimiter. */
      cost?: number | ((request: Request) => number | PromiseLike<number>) | null
      /** A KeyedLimiter's option: a `TypeError` (`invalid_type`) here (`null`: not given). */
      key?: null
    }
  | {
      /** One limiter that every request counts against, whoever sends it. */
      limiter: Limiter
      /** As for a KeyedLimiter. */
      cost?: number | ((request: Request) => number | PromiseLike<number>) | null
      /** Not taken (a `TypeError`, `invalid_type`; `null`: not given): pass `new KeyedLimiter(limiter)` for one per key. */
      key?: null
      /** Not taken (a `TypeError`, `invalid_type`; `null`: not given). */
      fields?: null
      /** Not taken (a `TypeError`, `invalid_type`): no address is read. */
      ipv6Subnet?: never
    }
) & {
  /**
   * Whether to let `request` through undecided: no RateLimit headers, nothing
   * charged (health checks, say). Called first, before `key`/`fields`; a
   * value other than a boolean goes to `next(error)`. Default (or `null`):
   * none is skipped.
   */
  skip?: ((request: Request) => boolean | PromiseLike<boolean>) | null
}

/**
 * The key of a client at `address`, as the server helpers' default `key` and
 * `fields` key it: an IPv6 address is its network of `ipv6Subnet` bits
 * (default 56) in canonical text, `2001:db8:1234:5600::/56`, or with `false`
 * the address itself in canonical text; an IPv4-mapped one
 * (`::ffff:1.2.3.4`, what Node reports for an IPv4 client of a server
 * listening on `::`) its IPv4 address, `1.2.3.4`; a zone id (`fe80::1%eth0`)
 * is dropped. Anything else (an IPv4 address, a host name) is the key as it
 * is. The ASGI middleware's `ip_key`, key for key. For a `key` of your own
 * that reads an address: `key: (req) => ipKey(req.get('x-client-ip') ?? '')`.
 * An `ipv6Subnet` not a number or `false` is a `TypeError` (`invalid_type`),
 * `null` too (it could mean Python's `ip_key(address, None)`, the address
 * whole, as well as the default), not a whole number from 1 to 128 a
 * `RangeError` (`invalid_value`); an
 * `address` not a string a `TypeError`.
 */
export declare function ipKey(address: string, ipv6Subnet?: number | false): string

/** What `middleware` needs of a response (Express's, or Node's own `ServerResponse`). */
export interface ResponseLike {
  statusCode: number
  setHeader(name: string, value: string): unknown
  /** Where given, RateLimit items an earlier helper set are kept, ours added after them. */
  getHeader?(name: string): unknown
  end(body?: string): unknown
}

/** What `fastifyHook` needs of a Fastify reply. */
export interface ReplyLike {
  headers(values: Record<string, string>): unknown
  /** Where given, RateLimit items an earlier hook set are kept, ours added after them. */
  getHeader?(name: string): unknown
  code(status: number): ReplyLike
  type(contentType: string): ReplyLike
  send(body?: string): unknown
}

/**
 * What the handlers made by `middleware` and `fastifyHook` also offer: the
 * steps they take for each request, without answering it (an app that
 * answers its own 429, logs, or tests its `key` function), as the ASGI
 * middleware's `decide` and `skips`. Closures: `const { decide } = handler` works.
 *
 * Each answers the value itself when the functions it calls (`key` or
 * `fields`, then `cost`; `skip`) answer at once, and a promise of it when one
 * answers with a promise, as the handler decides: `await` takes both. The
 * errors are the handler's, thrown (or the promise rejects): a `key` or
 * `fields` returning `undefined` or `null`, a `cost` returning no number, a
 * `skip` answering no boolean (`TypeError`, `invalid_type`, naming it), a full
 * store's `RangeError` `store_full` (which the handler answers 503); an error
 * of one of those functions comes as it was thrown.
 */
export interface RequestDecider<Request, D extends Decision = Decision> {
  /**
   * Decides `request` as the handler would, consuming its cost: its
   * `Decision` (a `PolicyDecision` for a Policy), whatever `skip` says (ask
   * `skips` first). `limiter.headers(decision)` are the headers the handler sets.
   */
  decide(request: Request): D | Promise<D>
  /** Whether `skip` exempts `request` (`false` without `skip`); decides nothing. */
  skips(request: Request): boolean | Promise<boolean>
}

/** What `middleware` returns: the middleware, with `decide` and `skips`. */
export interface RateLimitMiddleware<Request, D extends Decision = Decision> extends RequestDecider<Request, D> {
  (req: Request, res: ResponseLike, next: (error?: unknown) => void): void
}

/** What `fastifyHook` returns: the hook, with `decide` and `skips`. */
export interface RateLimitHook<Request, D extends Decision = Decision> extends RequestDecider<Request, D> {
  (request: Request, reply: ReplyLike, done: (error?: Error) => void): void
}

/**
 * An Express-style middleware `(req, res, next)`: sets `RateLimit-Policy` and
 * `RateLimit` on every response (after the items of an earlier helper: another
 * limiter's, which also limits the request); answers a denied request with 429, `Retry-After`
 * and the body `Too Many Requests` (text/plain; charset=utf-8, as the ASGI
 * middleware's), without calling `next`. A full store made with eviction
 * `'refuse'` refuses a new key with 503 (no RateLimit headers); any other error
 * goes to `next(error)`, one of writing the answer included (headers already sent).
 * It has `decide(req)` and `skips(req)` (see `RequestDecider`).
 */
export declare function middleware<Request = unknown>(
  options: HandlerOptions<Request> & { limiter: Policy },
): RateLimitMiddleware<Request, PolicyDecision>
export declare function middleware<Request = unknown>(
  options: HandlerOptions<Request> & { limiter: KeyedStore },
): RateLimitMiddleware<Request, StoreDecision<KeyedStore>>
export declare function middleware<Request = unknown>(
  options: HandlerOptions<Request> & { limiter: PolicyStore },
): RateLimitMiddleware<Request, StoreDecision<PolicyStore>>
export declare function middleware<Request = unknown>(options: HandlerOptions<Request>): RateLimitMiddleware<Request>

/**
 * The same as a Fastify `onRequest` hook: `fastify.addHook('onRequest', fastifyHook({ limiter, key }))`,
 * the default key `request.ip`; with `decide(request)` and `skips(request)` (see `RequestDecider`).
 * A reply already sent when the decision comes (Fastify's `handlerTimeout`
 * answered while `key` was pending) is left as it is.
 * Fastify's `addHook` gives a hook made in its call no request type (its
 * functions would read `unknown`): name it, `fastifyHook<FastifyRequest>({ ... })`.
 */
export declare function fastifyHook<Request = unknown>(
  options: HandlerOptions<Request> & { limiter: Policy },
): RateLimitHook<Request, PolicyDecision>
export declare function fastifyHook<Request = unknown>(
  options: HandlerOptions<Request> & { limiter: KeyedStore },
): RateLimitHook<Request, StoreDecision<KeyedStore>>
export declare function fastifyHook<Request = unknown>(
  options: HandlerOptions<Request> & { limiter: PolicyStore },
): RateLimitHook<Request, StoreDecision<PolicyStore>>
export declare function fastifyHook<Request = unknown>(options: HandlerOptions<Request>): RateLimitHook<Request>
