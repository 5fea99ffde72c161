// Types of pacedFetch (lib/paced-fetch.cjs), part of the `ratekeeper` package's
// surface (ratekeeper.d.ts) for every build: native and WebAssembly.
import type { Limiter } from './index'

/** What `onEvent` is told, for progress displays and logs. */
export interface PacedFetchEvent {
  /**
   * `queued` (booked), `sent` (handed to fetch), `response`, `paused` (a
   * server asked to wait), `aborted` (its signal took it out of the queue),
   * `rejected` (taken out of the queue, its call rejected: a pause beyond its
   * `maxWaitMs`, its booking refused when booked again, or `clock` failing
   * in the queue's timer).
   */
  type: 'queued' | 'sent' | 'response' | 'paused' | 'aborted' | 'rejected'
  /** The request's number, from 0 in call order (not for `paused`). */
  id?: number
  /** The request's slot on `clock` (`queued`, `sent`); queued while a pause lasts, the pause's end, when it is booked. */
  slotMs?: number
  /** How many times the request was retried before (`sent`). */
  attempt?: number
  /** The response status (`response`). */
  status?: number
  /** When the pause ends, on `clock` (`paused`). */
  untilMs?: number
  /** When the event happened, on `clock` (`NaN` when `clock` fails to read then). */
  atMs: number
  /** Requests waiting in the queue after the event. */
  waiting: number
  /** The end of the latest pause on `clock` (`-Infinity` when none). */
  pausedUntilMs: number
}

/** Options of `pacedFetch`. Each given as `null` takes its default, as left out. */
export interface PacedFetchOptions<Input = Request | string | URL, Init = RequestInit> {
  /**
   * Units a request takes from the limiter: a whole number (else a
   * `RangeError` when pacedFetch is made), or a function of the call's
   * arguments (a call whose function returns no number rejects with a
   * `TypeError` naming `cost`, booking nothing). Default 1.
   */
  cost?: number | ((input: Input, init?: Init) => number) | null
  /**
   * The longest a request may wait for its slot; a call whose slot is further
   * away rejects at once with a `TimeoutError` DOMException (its
   * `retryAfterMs`: the wait it would have had), booking nothing, and so
   * does a queued call that a server's pause would move further. While a
   * pause lasts, a call is booked when it ends: one the pause alone would
   * keep waiting too long rejects at once, and one whose slot then lies too
   * far rejects then (no later than maxWaitMs after the call).
   * Default `Infinity`.
   */
  maxWaitMs?: number | null
  /**
   * The most requests waiting for their slot at once. A call beyond rejects at
   * once, booking nothing, with a `RateLimited` (code `rate_limited`) whose
   * `retryAfterMs` is the time until the head of the queue leaves. Bounds the
   * queue's memory when calls come faster than the rate for long. Default
   * `Infinity`.
   */
  maxWaiting?: number | null
  /**
   * How many times one request is sent again after a 429, 503 or 403 answer with
   * `Retry-After` (after the pause it asks for, in call order: ahead of the
   * requests called after it). Default 1; 0 returns such answers as they
   * are (the queue still pauses). A 429 or 403 refused the request, which
   * goes again whatever its method; after a 503 only an idempotent method
   * (GET, HEAD, OPTIONS, PUT, DELETE, TRACE) is sent again, and never a
   * request whose body is a stream (sent once); a `Request` with a body goes
   * as a copy while a retry may follow.
   */
  retries?: number | null
  /** A longer `Retry-After` (or RateLimit reset) is not waited for by a retry, and pauses the queue at most this long (and never more than a year, whatever this says). Default 60000. */
  maxRetryAfterMs?: number | null
  /**
   * The limiter's clock, in milliseconds. Default: the limiter's own, as it
   * reads it when given no `nowMs` (its `clock` option; else `Date.now()`
   * for a `FixedWindow` or `SlidingWindowCounter` with a `calendar`, else
   * `performance.now()`); for a limiter of another kind, its method
   * `[Symbol.for('ratekeeper.now')]()` when it has one, else
   * `performance.now()`. Given, it must be the limiter's clock: one behind
   * it by more than a year is refused at each call (see `pacedFetch`). A
   * read that throws or is no finite number (a `RangeError` or `TypeError`
   * naming `clock`) rejects the call that made it; when the queue's timer
   * makes it, every queued request (each told `rejected`).
   */
  clock?: (() => number) | null
  /**
   * Wall-clock milliseconds, for a `Retry-After` given as an HTTP date (read
   * only then), which counts from it when the response has no valid `Date`
   * (with one, from that `Date` plus its `Age`: both the server's clock).
   * Default `Date.now()`. A read that throws or is no finite
   * number rejects the request whose answer it was read for.
   */
  wallClock?: (() => number) | null
  /** Timer functions (tests, simulation). Default the global `setTimeout` / `clearTimeout`. */
  timers?: { setTimeout(fn: () => void, ms: number): unknown; clearTimeout(id: any): void } | null
  /** Called on every change of the queue. An exception it throws is reported (`reportError`; in Node, which has none, `process.emitWarning`), and stops nothing. */
  onEvent?: ((event: PacedFetchEvent) => void) | null
}

/** The paced `fetch` returned by `pacedFetch`. */
export interface PacedFetch<Input = Request | string | URL, Init = RequestInit, Result = Response> {
  (input: Input, init?: Init): Promise<Result>
  /** Requests booked and not yet sent. */
  readonly waiting: number
  /** The end of the latest pause a server asked for, on `clock` (`-Infinity` when none). */
  readonly pausedUntilMs: number
}

/**
 * Wraps `fetch` so that requests leave at `limiter`'s rate, first come first
 * served. Each call books its slot at once with `limiter.reserve` and waits in
 * one queue behind one timer. Aborting the request's signal (`init.signal`,
 * else a `Request`'s own) while queued gives the booking back, moves those
 * behind it up into the slots left (a `Gcra`'s or a `LeakyBucket`'s, as for
 * `acquire`), and rejects with `signal.reason` (after leaving, fetch handles
 * the signal). A `TokenBucket`'s requests keep their slots (booked again,
 * one could go later than it was: its capacity clips the refill a booking
 * took), and the aborted booking is given back only while it is the latest,
 * else its slot goes unused; a window algorithm's keep theirs too, the
 * booking given back where it was counted. The limiter may be shared: when
 * another booked it after the aborted request (an `acquire`, a
 * `reserve()`), a bucket's booking is not given back and nobody moves, as
 * for `acquire`, since two units would go at once. A limiter of another
 * kind tells which it is by a method `[Symbol.for('ratekeeper.movesUp')]()`
 * answering at once `true` (those behind move up: the default, for a
 * limiter without it), `'latest'` (nobody moves; a booking is given back
 * only while it is the latest) or `false` (nobody moves; any booking is
 * given back, where it was counted). A `fetch` whose answer is no `Response`
 * rejects its call. A 429, 503 or 403 answer with `Retry-After` (a 403 for a
 * rate limit, as GitHub's secondary limits send; one without it is only
 * an answer), or a `RateLimit` header
 * with nothing remaining, pauses the queue until then (queued bookings are
 * refunded, and the requests booked again, in order, when the pause ends:
 * booked then, so that the limiter's other callers meanwhile are decided
 * at their own time; one asking no wait, `Retry-After: 0` or a date past,
 * pauses nothing unless its request is sent again); a 429/503/403 request is sent
 * again `retries` times. `RateLimit`'s `t` is when the quota is whole again:
 * with the same policy's `RateLimit-Policy` (`q`, `w`), the pause lasts at
 * most `w / q` seconds, the time a bucket takes to earn a unit back (a window
 * not reset by then answers 429 with `Retry-After`, which pauses again), where
 * its unit is a request: a policy whose `qu` names another
 * (`"content-bytes"`, `"concurrent-requests"`) bounds nothing so; where
 * a name repeats (server helpers in a row, each limiter named `"default"`),
 * the n-th item of that name goes with the n-th policy of that name.
 * `t` is optional: an item with `r=0` and none pauses as if `t` were that
 * policy's `w` (so `w / q` seconds, or `w` for `q=0` or another unit), and is ignored when
 * no such policy gives a window; a malformed `t` (`t=-1`, or a decimal
 * `t=1.5`: `r`, `t`, `q` and `w` are Integers) is ignored. A `RateLimit`
 * or `RateLimit-Policy` field that breaks structured-field syntax is
 * ignored as a whole (RFC 9651, section 4.2).
 * A response from a cache (an `Age` header above 0, RFC 9111) tells of the
 * server as it was when it was made: its RateLimit fields are ignored (the
 * draft's section 7.3), and its `Retry-After` delay-seconds count from
 * then (`Retry-After: 5` with `Age: 3` pauses 2 s; an HTTP date is kept).
 * A `Retry-After` date counts from the response's `Date` (plus its `Age`),
 * on the server's clock, so that a client clock off from it waits what the
 * server asked (RFC 9110, section 10.2.3); without a valid `Date`, from `wallClock`.
 * A cache that adds no `Age` goes unnoticed: its stored answer is taken as
 * new, and its `Retry-After` (seconds, or a date from its old `Date`) waits
 * the whole delay again (the local clock cannot tell it from clock skew).
 * A slot further than `maxWaitMs` rejects with a
 * `TimeoutError` DOMException; a limiter that cannot book (a full `LeakyBucket`)
 * rejects with a `RateLimited` (code `rate_limited`) and its `retryAfterMs`; a limiter
 * booking more than a year ahead reads another clock than `clock` (by
 * default pacedFetch reads the limiter's own), and each
 * call rejects with a `RangeError` (`invalid_value`), booking nothing. Bad
 * arguments, and options it does not take, throw a `TypeError`
 * (`invalid_type`) or `RangeError` (`invalid_value`) naming them; so does a
 * `KeyedLimiter`, `Policy` or Redis limiter given as `limiter` (their
 * `reserve` takes a key first), and a Proxy of a limiter (a reactive
 * wrapper's) or an object inheriting from one (the limiter's methods refuse
 * it as `this`: pass the limiter itself); a call whose `fetch` resolves to
 * something without `headers.get` rejects with a `TypeError` naming `fetch`,
 * and one whose `limiter.reserve` returns a Promise (an async limiter's: no
 * decision, and pacedFetch books each call as it is made) with a
 * `TypeError` naming `limiter.reserve`.
 * @example
 * const get = pacedFetch(fetch, Gcra.perPeriod({ burst: 1, tokens: 5, periodMs: 1000 }))
 * const pages = await Promise.all(urls.map((url) => get(url)))  // 5 per second
 */
export declare function pacedFetch<Input = Request | string | URL, Init extends { signal?: AbortSignal | null } = RequestInit, Result = Response>(
  fetch: (input: Input, init?: Init) => Promise<Result>,
  limiter: Limiter,
  options?: PacedFetchOptions<Input, Init> | null,
): PacedFetch<Input, Init, Result>
