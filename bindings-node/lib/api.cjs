'use strict';
// The JS API of ratekeeper, written once for both builds: the napi addon
// (bindings-node/index.js passes it native.js) and the WebAssembly build
// (scripts/wasm.sh copies this file into bindings-wasm/pkg/, as api.cjs for
// Node and wrapped as api.mjs for browsers and workers).
//
// `createApi(backend)` takes the native half of a build — the same functions
// under the same names in both: one constructor function per algorithm
// returning a handle (a core AnyLimiter), then tryAcquire / peek / reserve /
// refund / reconfigure / headers / config / noop on a handle, typeError /
// checkMillis / takeError, and scratch() — and returns the public classes and
// helpers.
//
// Speed: an operation returns `allowed` and writes its numbers into a shared
// Float64Array (`scratch()`), from which this file builds the decision as a
// plain object literal. Building the object here costs a few nanoseconds;
// building it through Node-API cost several times the decision itself.
// Arguments are type-checked here (typeof is free in JS, a Node-API type
// check is not); values are checked by the core, which throws with `.code`.

function createApi(B) {
  // The backend's scratch, fetched on first use (the web build has no memory
  // before init()) and again whenever the wasm memory grew, which detaches
  // the old view (its length becomes 0).
  let scratch = new Float64Array(0);
  function out() {
    if (scratch.length === 0) scratch = B.scratch();
    return scratch;
  }

  // tryAcquire / peek / reserve return 1 (allowed, booked) or 0, or throw; the
  // wasm build returns 2 instead of throwing and keeps the error for takeError()
  // (a Result would cost it an array per call).
  function yes(status) {
    if (status === 2) throw B.takeError();
    return status === 1;
  }

  function decision(allowed) {
    const s = out();
    return { allowed, remaining: s[0], limit: s[1], retryAfterMs: s[2], resetAfterMs: s[3] };
  }

  /** Throws the binding's TypeError (code `invalid_type`) for argument `name` (its Rust spelling). */
  function badType(name, expected) {
    B.typeError(name, expected);
    throw new TypeError(`${name} must be ${expected}`); // not reached: typeError throws
  }

  /** A number argument, `fallback` for undefined or null. */
  function number(value, fallback, name) {
    if (typeof value === 'number') return value;
    if (value === undefined || value === null) return fallback;
    return badType(name, 'a number');
  }

  const defaultClock = () => performance.now();

  // The napi build's handles are indices into a native table: each is given
  // back once its limiter is collected. (The wasm build's handles are objects
  // that wasm-bindgen frees itself; it has no `free`.)
  const handles = typeof B.free === 'function' ? new FinalizationRegistry((handle) => B.free(handle)) : null;

  // Module-private: lets the constructors below hand a built handle to Limiter,
  // and the subclasses reach what Limiter keeps private.
  class Built {
    constructor(handle, options) {
      this.handle = handle;
      this.options = options;
    }
  }
  let configOf;

  /**
   * What every limiter offers. Not constructible itself: build a TokenBucket,
   * Gcra, LeakyBucket, SlidingWindowLog, SlidingWindowCounter or FixedWindow.
   */
  class Limiter {
    #h;
    #name;
    #clock;
    #config = null;

    constructor(built) {
      if (!(built instanceof Built)) throw new TypeError('Limiter is abstract: build one of its subclasses');
      const { options } = built;
      const name = options == null ? undefined : options.name;
      const clock = options == null ? undefined : options.clock;
      if (name !== undefined && typeof name !== 'string') badType('name', 'a string');
      if (clock !== undefined && typeof clock !== 'function') badType('clock', 'a function');
      this.#h = built.handle;
      if (handles !== null) handles.register(this, built.handle);
      this.#name = name === undefined ? 'default' : name;
      this.#clock = clock === undefined ? defaultClock : clock;
    }

    static {
      configOf = (limiter) => (limiter.#config ??= B.config(limiter.#h));
    }

    /** The time now on this limiter's clock, in milliseconds. */
    #read() {
      const now = this.#clock();
      return typeof now === 'number' ? now : badType('now', 'a number');
    }

    #now(nowMs) {
      if (typeof nowMs === 'number') return nowMs;
      if (nowMs === undefined || nowMs === null) return this.#read();
      return badType('now', 'a number');
    }

    tryAcquire(cost, nowMs) {
      return decision(yes(B.tryAcquire(this.#h, number(cost, 1, 'cost'), this.#now(nowMs))));
    }

    peek(cost, nowMs) {
      return decision(yes(B.peek(this.#h, number(cost, 1, 'cost'), this.#now(nowMs))));
    }

    reserve(cost, maxWaitMs, nowMs) {
      const units = number(cost, 1, 'cost');
      const maxWait = number(maxWaitMs, Infinity, 'max_wait');
      const now = this.#now(nowMs);
      if (yes(B.reserve(this.#h, units, maxWait, now))) {
        const s = out();
        return { ok: true, waitMs: s[0], atMs: s[1], cost: units, decision: null };
      }
      const denied = decision(false);
      return { ok: false, waitMs: denied.retryAfterMs, atMs: now + denied.retryAfterMs, cost: units, decision: denied };
    }

    refund(cost, takenAtMs) {
      if (typeof cost !== 'number') badType('cost', 'a number');
      let takenAt = takenAtMs;
      if (takenAt === undefined || takenAt === null) takenAt = this.#read();
      else if (typeof takenAt !== 'number') badType('taken_at', 'a number');
      B.refund(this.#h, cost, takenAt);
    }

    reconfigure(other, nowMs) {
      if (!(other instanceof Limiter)) badType('other', 'a limiter');
      B.reconfigure(this.#h, other.#h, this.#now(nowMs));
      this.#config = null;
    }

    acquire(cost, options) {
      try {
        return this.#acquire(number(cost, 1, 'cost'), options);
      } catch (error) {
        return Promise.reject(error);
      }
    }

    #acquire(units, options) {
      let signal;
      let timeoutMs = Infinity;
      if (options !== undefined && options !== null) {
        if (typeof options !== 'object') badType('options', 'an object');
        signal = options.signal ?? undefined;
        if (signal !== undefined && !isSignal(signal)) badType('signal', 'an AbortSignal');
        timeoutMs = number(options.timeoutMs, Infinity, 'timeout');
        if (timeoutMs !== Infinity) B.checkMillis(timeoutMs, 'timeout');
      }
      if (signal !== undefined && signal.aborted) return Promise.reject(signal.reason);
      const h = this.#h;
      if (!yes(B.reserve(h, units, timeoutMs, this.#read()))) {
        const retryAfterMs = out()[2];
        if (retryAfterMs > timeoutMs) {
          return Promise.reject(
            new DOMException(`the wait (${retryAfterMs} ms) would exceed timeoutMs (${timeoutMs} ms)`, 'TimeoutError'),
          );
        }
        return Promise.reject(new RateLimited(`${this.#name}: cannot book ${units} now; retry in ${retryAfterMs} ms`, retryAfterMs));
      }
      const s = out();
      const waitMs = s[0];
      const atMs = s[1];
      if (waitMs === 0) return Promise.resolve();
      return new Promise((resolve, reject) => {
        let timer;
        const onAbort = () => {
          clearTimeout(timer);
          B.refund(h, units, atMs);
          reject(signal.reason);
        };
        // One timer for the whole wait. Timers may fire up to a millisecond
        // early on this clock (Node counts whole milliseconds): then, and only
        // then, one more timer covers the rest, so nobody proceeds before the slot.
        const fire = () => {
          let left;
          try {
            left = atMs - this.#read();
          } catch (error) {
            left = 0;
            reject(error);
          }
          if (left > 0) {
            timer = setTimeout(fire, Math.ceil(left));
            return;
          }
          if (signal !== undefined) signal.removeEventListener('abort', onAbort);
          resolve();
        };
        timer = setTimeout(fire, Math.ceil(waitMs));
        if (signal !== undefined) signal.addEventListener('abort', onAbort, { once: true });
      });
    }

    headers(decision) {
      if (decision === null || typeof decision !== 'object') badType('decision', 'a decision');
      const { allowed, remaining, limit, retryAfterMs, resetAfterMs } = decision;
      if (
        typeof allowed !== 'boolean' ||
        typeof remaining !== 'number' ||
        typeof limit !== 'number' ||
        typeof retryAfterMs !== 'number' ||
        typeof resetAfterMs !== 'number'
      ) {
        badType('decision', 'a decision');
      }
      const values = B.headers(this.#h, this.#name, allowed, remaining, limit, retryAfterMs, resetAfterMs).split('\n');
      const headers = { 'RateLimit-Policy': values[0], RateLimit: values[1] };
      if (values.length > 2) headers['Retry-After'] = values[2];
      return headers;
    }

    get limit() {
      return configOf(this).limit;
    }

    get windowMs() {
      return configOf(this).windowMs;
    }

    get algorithm() {
      return configOf(this).algorithm;
    }

    get name() {
      return this.#name;
    }

    /** Takes what tryAcquire takes into native code and does nothing: the floor of a call (benchmarks). */
    _noop(cost, nowMs) {
      return B.noop(this.#h, cost, nowMs);
    }
  }

  function isSignal(value) {
    return typeof value === 'object' && typeof value.aborted === 'boolean' && typeof value.addEventListener === 'function';
  }

  /** A token bucket: `capacity` tokens, `refillTokens` more every `refillPeriodMs`. */
  class TokenBucket extends Limiter {
    constructor(options, built) {
      super(built instanceof Built ? built : new Built(B.tokenBucket(options), options));
    }

    /** A bucket enforcing every one of `bandwidths` (1 to 4) at once. */
    static fromBandwidths(bandwidths, options) {
      const handle = B.tokenBucketFromBandwidths(bandwidths);
      if (options !== undefined && options !== null && typeof options !== 'object') badType('options', 'an object');
      return new TokenBucket(undefined, new Built(handle, options));
    }

    get bandwidths() {
      return configOf(this).bandwidths.map((band) => ({ ...band }));
    }

    get capacity() {
      return configOf(this).bandwidths[0].capacity;
    }

    get refillTokens() {
      return configOf(this).bandwidths[0].refillTokens;
    }

    get refillPeriodMs() {
      return configOf(this).bandwidths[0].refillPeriodMs;
    }

    get initialTokens() {
      return configOf(this).bandwidths[0].initialTokens;
    }

    get refill() {
      return configOf(this).bandwidths[0].refill;
    }
  }

  /** The generic cell rate algorithm: `burst` at once, then one unit every `emissionIntervalMs`. */
  class Gcra extends Limiter {
    constructor(options, built) {
      super(built instanceof Built ? built : new Built(B.gcra(options), options));
    }

    /** `burst` at once, `tokens` every `periodMs` (one every periodMs / tokens, a whole number of ns). */
    static perPeriod(options) {
      return new Gcra(undefined, new Built(B.gcraPerPeriod(options), options));
    }

    get burst() {
      return configOf(this).burst;
    }

    get emissionIntervalMs() {
      return configOf(this).emissionIntervalMs;
    }
  }

  /** A queue: units leave `intervalMs` apart, first come first served, at most `capacity` queued. */
  class LeakyBucket extends Limiter {
    constructor(options) {
      super(new Built(B.leakyBucket(options), options));
    }

    get capacity() {
      return configOf(this).capacity;
    }

    get intervalMs() {
      return configOf(this).intervalMs;
    }
  }

  /** At most `limit` units in any window of `windowMs`, exactly. */
  class SlidingWindowLog extends Limiter {
    constructor(options) {
      super(new Built(B.slidingWindowLog(options), options));
    }
  }

  /** About `limit` units per sliding window of `windowMs`, from O(1) state. */
  class SlidingWindowCounter extends Limiter {
    constructor(options) {
      super(new Built(B.slidingWindowCounter(options), options));
    }
  }

  /** At most `limit` units per aligned window of `windowMs`. */
  class FixedWindow extends Limiter {
    constructor(options) {
      super(new Built(B.fixedWindow(options), options));
    }
  }

  /** A request that cannot be served: `code` is 'rate_limited', `retryAfterMs` when to ask again. */
  class RateLimited extends Error {
    constructor(message, retryAfterMs) {
      super(message);
      this.name = 'RateLimited';
      this.code = 'rate_limited';
      this.retryAfterMs = retryAfterMs;
    }
  }

  // --- Server helpers ----------------------------------------------------------
  // TEMPORARY: one limiter per key, kept in a Map and built by the caller's
  // `create(key)`, until the core has keyed limiters. Limiters back in their
  // fresh state (resetAfterMs 0) answer exactly as a new one would, so they are
  // dropped whenever the map has doubled in size.
  class KeyedLimiters {
    constructor(create) {
      this.create = create;
      this.map = new Map();
      this.sweepAt = 1024;
    }

    get(key) {
      let limiter = this.map.get(key);
      if (limiter === undefined) {
        limiter = this.create(key);
        if (!(limiter instanceof Limiter)) badType('create', 'a function returning a limiter');
        if (this.map.size >= this.sweepAt) this.sweep();
        this.map.set(key, limiter);
      }
      return limiter;
    }

    sweep() {
      for (const [key, limiter] of this.map) {
        if (limiter.peek(0).resetAfterMs === 0) this.map.delete(key);
      }
      this.sweepAt = Math.max(1024, 2 * this.map.size);
    }
  }

  function handlerOptions(options) {
    if (options === null || typeof options !== 'object') badType('options', 'an object');
    const { key, create, cost } = options;
    if (typeof key !== 'function') badType('key', 'a function');
    if (typeof create !== 'function') badType('create', 'a function');
    if (cost !== undefined && typeof cost !== 'function') badType('cost', 'a function');
    const store = new KeyedLimiters(create);
    // The limiter and decision for one request.
    return (request) => {
      const k = key(request);
      if (typeof k !== 'string' && typeof k !== 'number') badType('key', 'a string or a number');
      const limiter = store.get(k);
      const d = limiter.tryAcquire(cost === undefined ? 1 : cost(request));
      return { decision: d, headers: limiter.headers(d) };
    };
  }

  const TOO_MANY = 'Too Many Requests\n';

  /**
   * Express-style middleware `(req, res, next)`: one limiter per `key(req)`,
   * built by `create(key)`; every response carries RateLimit-Policy and
   * RateLimit, and a denied request gets 429 with Retry-After.
   */
  function middleware(options) {
    const decide = handlerOptions(options);
    return function ratekeeper(req, res, next) {
      let outcome;
      try {
        outcome = decide(req);
      } catch (error) {
        next(error);
        return;
      }
      for (const [name, value] of Object.entries(outcome.headers)) res.setHeader(name, value);
      if (outcome.decision.allowed) {
        next();
        return;
      }
      res.statusCode = 429;
      res.setHeader('Content-Type', 'text/plain; charset=utf-8');
      res.end(TOO_MANY);
    };
  }

  /** The same for Fastify: `fastify.addHook('onRequest', fastifyHook({ key, create }))`. */
  function fastifyHook(options) {
    const decide = handlerOptions(options);
    return function ratekeeper(request, reply, done) {
      let outcome;
      try {
        outcome = decide(request);
      } catch (error) {
        done(error);
        return;
      }
      reply.headers(outcome.headers);
      if (outcome.decision.allowed) {
        done();
        return;
      }
      // Answering from the hook: Fastify then skips the handler; done() is not called.
      reply.code(429).type('text/plain; charset=utf-8').send(TOO_MANY);
    };
  }

  return {
    Limiter,
    TokenBucket,
    Gcra,
    LeakyBucket,
    SlidingWindowLog,
    SlidingWindowCounter,
    FixedWindow,
    RateLimited,
    middleware,
    fastifyHook,
  };
}

module.exports = { createApi };
