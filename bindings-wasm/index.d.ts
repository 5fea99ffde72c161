// The JS surface of ratekeeper, shared by the napi addon and this WebAssembly
// build (node.cjs; web.mjs adds `init` / `initSync`, see web.d.ts). Hand-written:
// keep it in step with bindings-node/index.d.ts.

/** Options of `new TokenBucket(options)`. Counts are whole numbers from 0 to 2^53 - 1. */
export interface TokenBucketOptions {
  /** The most tokens the bucket holds; greater than zero. */
  capacity: number
  /** Tokens added every `refillPeriodMs`; greater than zero. */
  refillTokens: number
  /** Milliseconds between refills (fractions allowed, rounded to the nanosecond); greater than zero. */
  refillPeriodMs: number
  /** Tokens at the start, at most `capacity`. Default (`undefined` or `null`): `capacity`, a full bucket. */
  initialTokens?: number
}

/** Options of `new SlidingWindowLog(options)`. */
export interface SlidingWindowLogOptions {
  /** The most units admitted in any window; a whole number from 1 to 2^20 (1,048,576). */
  limit: number
  /** The window's length in milliseconds (fractions allowed, rounded to the nanosecond); greater than zero. */
  windowMs: number
}

/**
 * The outcome of one `tryAcquire` call: a plain object, created fresh for each call.
 * A denial is a value, not an exception.
 */
export interface Decision {
  /** Whether the request was admitted (and its cost consumed). */
  allowed: boolean
  /** Units still available now, after this request's cost if it was admitted. */
  remaining: number
  /** The most units the limiter can ever hold: its capacity or limit. */
  limit: number
  /** `0` when allowed; otherwise milliseconds after `nowMs` until the same cost would be allowed. */
  retryAfterMs: number
  /** Milliseconds after `nowMs` until the limiter is back to its fresh state. */
  resetAfterMs: number
}

/**
 * A token bucket: holds up to `capacity` tokens and gains `refillTokens` every
 * `refillPeriodMs`; a request of cost `n` is admitted when `n` tokens are there, and takes them.
 *
 * Bad arguments throw a `RangeError` (a `TypeError` for a wrong type) whose `code` is the
 * core's error code and whose message names the argument; a failed call changes nothing.
 *
 * @example
 * const bucket = new TokenBucket({ capacity: 5, refillTokens: 1, refillPeriodMs: 1000 })
 * const { allowed, retryAfterMs } = bucket.tryAcquire()
 */
export declare class TokenBucket {
  /**
   * @throws {RangeError} `zero_value`, `too_large` (`initialTokens` above `capacity`),
   * `overflow` or `invalid_value` (negative, NaN, infinite, fractional).
   * @throws {TypeError} `invalid_type`: `options` is not an object, or an option is not a number.
   */
  constructor(options: TokenBucketOptions)
  /**
   * Asks for `cost` tokens (default 1) at `nowMs` (milliseconds on the `performance.now()`
   * clock; default, for `undefined` or `null`: `performance.now()`).
   *
   * @throws {RangeError} `cost_exceeds_limit` when `cost` is above the capacity;
   * `invalid_value` for a bad `cost` or `nowMs`.
   * @throws {TypeError} `invalid_type` when `cost` or `nowMs` is not a number.
   */
  tryAcquire(cost?: number, nowMs?: number): Decision
}

/**
 * A sliding-window log: admits at most `limit` units in any window of `windowMs` milliseconds.
 * Errors as for `TokenBucket`.
 *
 * @example
 * const log = new SlidingWindowLog({ limit: 100, windowMs: 60_000 })
 * if (!log.tryAcquire().allowed) { // reject the request }
 */
export declare class SlidingWindowLog {
  /**
   * @throws {RangeError} `zero_value`, `too_large` (`limit` above 2^20),
   * `overflow` or `invalid_value`.
   * @throws {TypeError} `invalid_type`: `options` is not an object, or an option is not a number.
   */
  constructor(options: SlidingWindowLogOptions)
  /**
   * Asks for `cost` units (default 1) at `nowMs` (default: `performance.now()`).
   *
   * @throws {RangeError} `cost_exceeds_limit` when `cost` is above `limit`;
   * `invalid_value` for a bad `cost` or `nowMs`.
   * @throws {TypeError} `invalid_type` when `cost` or `nowMs` is not a number.
   */
  tryAcquire(cost?: number, nowMs?: number): Decision
}
