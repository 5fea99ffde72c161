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

/** Throws a TypeError (code `invalid_type`) with `message`, which names the argument. */
function invalidType(message) {
  throw Object.assign(new TypeError(message), { code: 'invalid_type' });
}

/** Throws a RangeError (code `invalid_value`) with `message`, which names the argument. */
function invalidValue(message) {
  throw Object.assign(new RangeError(message), { code: 'invalid_value' });
}

/**
 * A number as a key: its decimal string, all digits for a whole number
 * (1e21 is '1000000000000000000000', as Python spells the int, not String's
 * '1e+21'), so that the bindings and the Redis clients (lib/redis.cjs) agree.
 */
function numberKey(n, name) {
  if (!Number.isInteger(n)) {
    // As Python refuses a float: 1.5 or NaN names no whole number.
    invalidValue(`\`${name}\` must be a whole number or a string, not ${n}`);
  }
  return Number.isSafeInteger(n) ? String(n) : BigInt(n).toString();
}

/**
 * Writes `key` into `bytes` when it is ASCII and fits, and returns its
 * length; else -1. How the hot keyed operations pass a short key through
 * memory shared with the native half: a string argument costs more to read.
 * The caller reads `bytes` before any other keyed operation can write them
 * (no user code runs in between, short of a String.prototype.charCodeAt
 * replaced with one that makes keyed calls itself).
 */
function asciiInto(bytes, key) {
  const n = key.length;
  if (n > bytes.length) return -1;
  for (let i = 0; i < n; i++) {
    const c = key.charCodeAt(i);
    if (c > 0x7f) return -1;
    bytes[i] = c;
  }
  return n;
}

/**
 * Writes a policy's request (`fields`: names and values alternating, as
 * strings) into `bytes`, each string as its length in one byte, then its
 * characters; returns the bytes written, or -1 when a string is not ASCII
 * or longer than 255 characters, or the whole does not fit (the request
 * then goes as strings). Reading strings through the engine's API took
 * most of a policy's call (src/shared.rs with_request_bytes reads these).
 */
function fieldsInto(bytes, fields) {
  let at = 0;
  for (const text of fields) {
    const n = text.length;
    if (n > 255 || at + 1 + n > bytes.length) return -1;
    bytes[at++] = n;
    for (let i = 0; i < n; i++) {
      const c = text.charCodeAt(i);
      if (c > 0x7f) return -1;
      bytes[at++] = c;
    }
  }
  return at;
}

/**
 * Throws a TypeError (code `invalid_type`) naming the first key of `options`
 * not in `known`, and listing those `what` takes: a misspelt option would
 * otherwise be ignored (`intialTokens`: a bucket starting full).
 */
function onlyKnown(options, known, what) {
  for (const option of Object.keys(options)) {
    if (!known.includes(option)) invalidType(`\`${option}\` is not an option of ${what}, which takes ${known.join(', ')}`);
  }
}

/**
 * How Node's console.log and util.inspect show an object of `kind`: its
 * class and `shown`, a plain object (as `Map(2) { ... }` shows a Map's
 * entries). Browsers ignore the symbol; their consoles list the getters.
 */
function inspected(kind, shown, depth, options, inspect) {
  if (typeof inspect !== 'function') return `[${kind}]`;
  if (depth < 0) return options.stylize(`[${kind}]`, 'special');
  // `shown` stands for the object's own properties: the depth left is its.
  return `${kind} ${inspect(shown, { ...options, depth })}`;
}
const inspectSymbol = Symbol.for('nodejs.util.inspect.custom');
/**
 * A limiter's method counting bookings of a slot to come, reconfigures and
 * restores, by anyone (a symbol of the global registry, which
 * lib/paced-fetch.cjs, a module of its own, reads too).
 */
const BOOKINGS = Symbol.for('ratekeeper.bookings');
/** A limiter's method answering whether the bookings behind one given back move up (read by pacedFetch too). */
const MOVES_UP = Symbol.for('ratekeeper.movesUp');

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

  // The hot operations, read off the backend once: a property load on its
  // large exports object is not free on every call.
  const { tryAcquire: tryAcquireOp, peek: peekOp, reserve: reserveOp, keyedOp: keyedOpString, noop: noopOp } = B;

  // A keyed operation. The wasm build takes a short ASCII key through a
  // buffer in its memory (keyScratch, detached when the memory grows), since
  // passing a string costs wasm-bindgen an allocation and a free per call,
  // more than the decision; the napi build does the same in index.js.
  const keyedOp =
    B.keyScratch === undefined
      ? keyedOpString
      : (() => {
          const { keyedOpScratch } = B;
          let bytes = new Uint8Array(0);
          return (h, key, cost, maxWait, now, op) => {
            if (bytes.length === 0) bytes = B.keyScratch();
            const n = asciiInto(bytes, key);
            return n >= 0 ? keyedOpScratch(h, n, cost, maxWait, now, op) : keyedOpString(h, key, cost, maxWait, now, op);
          };
        })();

  // A policy's operation, answering `[status, deniedBy, then five numbers
  // per limit]`, and the call that makes room for those of a policy. The
  // wasm build takes a request of short ASCII fields through a buffer in its
  // memory (fieldScratch), as it does keys, and answers in another
  // (policyDetails: detached when the memory grows, moved by fitPolicy), and
  // returns a status of 2 instead of throwing; the napi build does the same
  // in index.js.
  const { policyOp, fitPolicy } =
    B.fieldScratch === undefined
      ? B
      : (() => {
          const { policyOpScratch, policyOp: policyOpStrings } = B;
          let bytes = new Uint8Array(0);
          let details = new Float64Array(0);
          let moved = -1;
          return {
            policyOp(h, fields, cost, maxWait, now, op) {
              if (bytes.length === 0) bytes = B.fieldScratch();
              const n = fieldsInto(bytes, fields);
              // The status in the low two bits; above them, how often the
              // details moved (another copy of this file may have moved them).
              const answer = n >= 0 ? policyOpScratch(h, n, cost, maxWait, now, op) : policyOpStrings(h, fields, cost, maxWait, now, op);
              if ((answer & 3) === 2) throw B.takeError();
              if (details.length === 0 || answer >>> 2 !== moved) {
                details = B.policyDetails();
                moved = answer >>> 2;
              }
              return details;
            },
            fitPolicy: B.fitPolicy,
          };
        })();

  function decision(allowed) {
    const s = out();
    return { allowed, remaining: s[0], limit: s[1], retryAfterMs: s[2], resetAfterMs: s[3] };
  }

  /** The TypeError (code `invalid_type`) of using the abstract `Limiter` itself. */
  function abstract(instead) {
    return Object.assign(new TypeError(`Limiter is abstract: ${instead}`), { code: 'invalid_type' });
  }

  /**
   * `bytes` of encoded state, checked. An empty array is passed on as a new
   * one: a detached one is empty too, and each backend reads that its own
   * way (wasm-bindgen's glue throws an uncoded TypeError), where this way
   * both answer `state_truncated`.
   */
  function stateBytes(bytes) {
    if (!(bytes instanceof Uint8Array)) badType('state', 'a Uint8Array');
    return bytes.byteLength === 0 ? new Uint8Array(0) : bytes;
  }

  /** Throws the binding's TypeError (code `invalid_type`) for argument `name` (its Rust spelling). */
  function badType(name, expected) {
    B.typeError(name, expected);
    throw new TypeError(`${name} must be ${expected}`); // not reached: typeError throws
  }

  // The options each function takes: a misspelt one (`intialTokens`) would
  // be ignored, and the limiter not what was asked for. Policy
  // configurations refuse unknown fields the same way.
  const COMMON = ['name', 'clock'];
  const BANDWIDTH = ['capacity', 'refillTokens', 'refillPeriodMs', 'initialTokens', 'refill'];
  const OPTIONS = {
    TokenBucket: [...BANDWIDTH, ...COMMON],
    bandwidth: BANDWIDTH,
    fromBandwidths: COMMON,
    Gcra: ['burst', 'emissionIntervalMs', ...COMMON],
    'Gcra.perPeriod': ['burst', 'tokens', 'periodMs', ...COMMON],
    LeakyBucket: ['capacity', 'intervalMs', ...COMMON],
    SlidingWindowLog: ['limit', 'windowMs', ...COMMON],
    SlidingWindowCounter: ['limit', 'windowMs', 'calendar', ...COMMON],
    FixedWindow: ['limit', 'windowMs', 'calendar', ...COMMON],
    KeyedLimiter: ['maxKeys', 'eviction'],
    Policy: ['algorithm', 'by', 'clock'],
    acquire: ['signal', 'timeoutMs'],
    'the server helpers': ['limiter', 'key', 'fields', 'cost'],
  };

  /**
   * `options`, having only options `what` takes (see OPTIONS), as a copy of
   * its own properties, each read once, without a prototype: an option
   * inherited (a polluted `Object.prototype.initialTokens`) is no option,
   * as a policy configuration reads only its own fields. Anything not an
   * object passes, for the caller to refuse.
   */
  function known(options, what) {
    if (Array.isArray(options)) {
      // An array's indices would read as no option at all: refused, as a misspelt option is.
      if (what === 'bandwidth') badType('bandwidths', 'an array of objects');
      badType('options', 'an object');
    }
    if (options === null || typeof options !== 'object') return options;
    onlyKnown(options, OPTIONS[what], what);
    return Object.assign(Object.create(null), options);
  }

  /** The `Built` of a limiter `make` builds from `options` (as `known` to `what`). */
  function builtBy(make, options, what) {
    const own = known(options, what);
    return new Built(make(own), own);
  }

  /** A number argument, `fallback` for undefined or null. */
  function number(value, fallback, name) {
    if (typeof value === 'number') return value;
    if (value === undefined || value === null) return fallback;
    return badType(name, 'a number');
  }

  // The runtime's clock as found at load, and the globals that fake timers
  // replace. Reading `globalThis.performance` costs V8 about 45 ns on every
  // call (an accessor on the global object: as much as a whole decision),
  // where comparing `Date` and `setTimeout` costs nothing (V8 folds global
  // data properties that keep their value) and `performance.now` on a held
  // object next to nothing.
  const runtimePerformance = globalThis.performance;
  const runtimeNow = runtimePerformance === undefined ? undefined : runtimePerformance.now;
  const RuntimeDate = Date;
  const runtimeSetTimeout = setTimeout;

  /**
   * Whether the default clock is still the runtime's own: no fake timers are
   * installed (they replace `Date` and `setTimeout`, as @sinonjs/fake-timers
   * and so Jest's do) and the runtime's `performance.now` was not replaced.
   * Otherwise the default clock is `globalThis.performance.now()`, whatever
   * it is then.
   */
  function runtimeClock() {
    return Date === RuntimeDate && setTimeout === runtimeSetTimeout && runtimeNow !== undefined && runtimePerformance.now === runtimeNow;
  }

  const defaultClock = () => (runtimeClock() ? runtimePerformance.now() : performance.now());

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
  let internalsOf;

  /**
   * A limiter's configuration as the options that build it, as its
   * constructor takes them: what a default would give is left out.
   */
  function shownOptions(limiter) {
    const config = configOf(limiter);
    let shown;
    switch (config.algorithm) {
      case 'token_bucket': {
        const bands = config.bandwidths.map(({ capacity, refillTokens, refillPeriodMs, initialTokens, refill }) => ({
          capacity,
          refillTokens,
          refillPeriodMs,
          ...(initialTokens !== capacity && { initialTokens }),
          ...(refill !== 'greedy' && { refill }),
        }));
        shown = bands.length === 1 ? bands[0] : { bandwidths: bands };
        break;
      }
      case 'gcra':
        shown = { burst: config.burst, emissionIntervalMs: config.emissionIntervalMs };
        break;
      case 'leaky_bucket':
        shown = { capacity: config.capacity, intervalMs: config.intervalMs };
        break;
      default:
        shown = config.calendar != null ? { limit: config.limit, calendar: config.calendar } : { limit: config.limit, windowMs: config.windowMs };
    }
    if (limiter.name !== 'default') shown.name = limiter.name;
    return shown;
  }

  /**
   * What every limiter offers. Not constructible itself: build a TokenBucket,
   * Gcra, LeakyBucket, SlidingWindowLog, SlidingWindowCounter or FixedWindow.
   */
  class Limiter {
    #h;
    #name;
    #clock;
    #config = null;
    // Bookings of a slot to come, reconfigures and restores, by anyone: how
    // pacedFetch tells whether others booked after it (see BOOKINGS).
    #bookings = 0;

    constructor(built) {
      if (!(built instanceof Built)) throw abstract('build one of its subclasses');
      const { options } = built;
      let name;
      let clock;
      try {
        // Read inside: a getter that throws (options are the caller's) must not strand the native limiter.
        name = options == null ? undefined : options.name;
        clock = options == null ? undefined : options.clock;
        if (name !== undefined && typeof name !== 'string') badType('name', 'a string');
        if (clock !== undefined && typeof clock !== 'function') badType('clock', 'a function');
      } catch (error) {
        // The native limiter is built, and nothing will hold it.
        if (typeof B.free === 'function') B.free(built.handle);
        throw error;
      }
      this.#h = built.handle;
      if (handles !== null) handles.register(this, built.handle);
      this.#name = name === undefined ? 'default' : name;
      // A calendar's windows are UTC days, weeks and months: such a limiter
      // reads the epoch clock by default (through the global each time, as
      // fake timers replace it), as a Policy and the Python binding do.
      // The built limiter's calendar, not the option's: a limiter that has
      // none ignores a `calendar` option and keeps the monotonic clock.
      const calendar = options != null && options.calendar != null && configOf(this).calendar != null;
      this.#clock = clock === undefined ? (calendar ? () => Date.now() : defaultClock) : clock;
    }

    static {
      // Without a prototype: a field it lacks (`calendar`) is none, whatever Object.prototype holds.
      configOf = (limiter) => (limiter.#config ??= Object.assign(Object.create(null), B.config(limiter.#h)));
      internalsOf = (limiter) => ({ handle: limiter.#h, name: limiter.#name, clock: limiter.#clock });
    }

    /** The time now on this limiter's clock, in milliseconds. */
    #read() {
      return readClock(this.#clock);
    }

    #now(nowMs) {
      if (typeof nowMs === 'number') return nowMs;
      if (nowMs === undefined || nowMs === null) return this.#read();
      return badType('now', 'a number');
    }

    tryAcquire(cost, nowMs) {
      return decision(yes(tryAcquireOp(this.#h, number(cost, 1, 'cost'), hotNow(this.#clock, nowMs))));
    }

    peek(cost, nowMs) {
      return decision(yes(peekOp(this.#h, number(cost, 1, 'cost'), hotNow(this.#clock, nowMs))));
    }

    reserve(cost, maxWaitMs, nowMs) {
      const units = number(cost, 1, 'cost');
      const maxWait = number(maxWaitMs, Infinity, 'max_wait');
      const now = this.#now(nowMs);
      // Reads the handle through `this`, so that a reservation keeps its
      // limiter alive: the napi build reuses a collected limiter's handle.
      const give = (high, low) => B.refund(this.#h, units, [NaN, high, low]);
      const booked = yes(reserveOp(this.#h, units, maxWait, now));
      if (booked && out()[0] > 0) this.#untracked();
      return reservation(booked, units, now, decision, give);
    }

    /** Counts a booking of a slot to come (or a reconfigure, a restore) that no acquire waiter holds: for the waiters (see untracked) and pacedFetch. */
    #untracked() {
      untracked(this);
      this.#bookings++;
    }

    /** The bookings of a slot to come, reconfigures and restores so far (for pacedFetch). */
    [BOOKINGS]() {
      return this.#bookings;
    }

    /** Whether the bookings behind one given back move up (for pacedFetch; see movesUp). */
    [MOVES_UP]() {
      return movesUp(this);
    }

    refund(cost, takenAtMs) {
      if (typeof cost !== 'number') badType('cost', 'a number');
      let takenAt = takenAtMs;
      if (takenAt === undefined || takenAt === null) takenAt = this.#read();
      else if (typeof takenAt !== 'number') badType('taken_at', 'a number');
      B.refund(this.#h, cost, [takenAt, NaN, NaN]);
    }

    reconfigure(other, nowMs) {
      if (!(other instanceof Limiter)) badType('other', 'a limiter');
      if (this.#clock === defaultClock && other.calendar !== null) {
        invalidValue('`other` follows a calendar, which needs Date.now, and this limiter reads performance.now: build it with clock: Date.now');
      }
      B.reconfigure(this.#h, other.#h, this.#now(nowMs));
      this.#untracked();
      this.#config = null;
    }

    acquire(cost, options) {
      const h = this.#h;
      return acquireSlot(
        {
          reserve: (units, maxWait, now) => {
            const booked = yes(reserveOp(h, units, maxWait, now));
            if (booked && out()[0] > 0) this.#bookings++;
            return booked;
          },
          refund: (units, high, low) => B.refund(h, units, [NaN, high, low]),
          read: () => this.#read(),
          owner: this,
          label: this.#name,
          queue: movesUp(this) ? '' : null,
        },
        cost,
        options,
      );
    }

    /** The state of this limiter as bytes (versioned, tied to its configuration): see `fromBytes`. */
    toBytes() {
      return toUint8Array(B.toBytes(this.#h));
    }

    /** Replaces this limiter's state by `bytes` from `toBytes()` of a limiter of the same configuration. */
    restore(bytes) {
      B.restore(this.#h, stateBytes(bytes));
      this.#untracked();
    }

    /** A limiter built from `options` (as its constructor takes them) holding the state `bytes`. */
    static fromBytes(bytes, options) {
      if (this === Limiter) throw abstract('call fromBytes on one of its subclasses');
      stateBytes(bytes);
      const limiter = new this(options);
      limiter.restore(bytes);
      return limiter;
    }

    headers(decision) {
      const [allowed, remaining, limit, retryAfterMs, resetAfterMs] = decisionFields(decision, 'decision');
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

    /** A window algorithm's calendar ('day', 'week' or 'month', UTC), or null. */
    get calendar() {
      return configOf(this).calendar ?? null;
    }

    get name() {
      return this.#name;
    }

    /** Takes what tryAcquire takes into native code and does nothing: the floor of a call (benchmarks). */
    _noop(cost, nowMs) {
      return noopOp(this.#h, cost, nowMs);
    }

    /** `TokenBucket { capacity: 10, refillTokens: 1, refillPeriodMs: 1000 }` in console.log. */
    [inspectSymbol](depth, options, inspect) {
      return inspected(classOf[this.algorithm].name, shownOptions(this), depth, options, inspect);
    }
  }

  /** napi returns a Uint8Array, wasm-bindgen too; a Buffer is turned into a plain Uint8Array. */
  function toUint8Array(bytes) {
    return Object.getPrototypeOf(bytes) === Uint8Array.prototype ? bytes : new Uint8Array(bytes);
  }

  /**
   * The one `acquire`, for limiters, keyed limiters and policies: books a slot
   * through `slot.reserve(units, maxWaitMs, nowMs)` (true when booked, the
   * scratch holding [waitMs, atMs, slotHigh, slotLow], else the decision),
   * then waits for it on one timer; an abort gives the booking back through
   * `slot.refund(units, slotHigh, slotLow)`.
   */
  const MAX_TIMER_MS = 2 ** 31 - 1;

  /**
   * The waiting acquires of one limiter, keyed limiter or policy (`owner`),
   * in slot order (booking order for equal slots) behind ONE timer armed for
   * the first: Node's timers count whole milliseconds and may fire a little
   * early on the limiter's clock, and a waiter that set a timer of its own to
   * cover the rest could be overtaken by the next one.
   */
  const waitersOf = new WeakMap();

  function waiters(owner, read) {
    let w = waitersOf.get(owner);
    if (w === undefined) {
      // booked: waiters' bookings so far (each waiter's `seq`); foreign:
      // bookings no waiter holds, reconfigures and restores (see untracked).
      // cancel: the clearTimeout of the setTimeout that armed the timer.
      w = { list: [], timer: undefined, due: NaN, armedBy: undefined, cancel: undefined, read, booked: 0, foreign: 0 };
      waitersOf.set(owner, w);
    }
    return w;
  }

  /** Adds `waiter` ({ atMs, seq, done, fail, giveBack, rebook }) to `w`, in slot order. */
  function wait(w, waiter) {
    let at = w.list.length;
    while (at > 0 && w.list[at - 1].atMs > waiter.atMs) at--;
    w.list.splice(at, 0, waiter);
    arm(w);
  }

  /**
   * Whether the waiters of `limiter` behind an aborted one move up. A bucket
   * keeps no record of single bookings, and gives back exactly only the
   * latest: a booking given back from the middle of the queue would let the
   * next one share a slot with a later waiter (two units at once from a
   * burst of one). So the waiters booked after it, in the same queue (the
   * limiter, or the key of a keyed limiter), give theirs back too, newest
   * first, and book again in order. A window algorithm keeps each booking
   * where it was counted (the log at its instant, the counters per window),
   * so an aborted booking is given back as its refund does (see the
   * README) and nobody moves; so is a policy's. Which algorithms keep their
   * bookings is the core's to say (`refundsAnyBooking` in the configuration).
   */
  const movesUp = (limiter) => !configOf(limiter).refundsAnyBooking;

  /**
   * Counts a booking of a slot to come (or a reconfigure, a restore) that no
   * waiter of `owner` holds: waiters booked before it must not move up into
   * its slot.
   */
  function untracked(owner) {
    const w = waitersOf.get(owner);
    if (w !== undefined) w.foreign++;
  }

  /** Takes `waiter` out of `w` (aborted) and gives its booking back, moving up those behind (see movesUp). */
  function withdraw(w, waiter) {
    const i = w.list.indexOf(waiter);
    if (i < 0) return;
    w.list.splice(i, 1);
    // Booked after it but by no waiter here (a reserve() the caller holds),
    // or reconfigured since: those behind would move up into slots others
    // hold (two units at once from a burst of one). Then nobody moves, and
    // nothing is given back: its slot goes unused. (Counted as such, not as
    // the bookings after it less the waiters still here: a later waiter
    // gone, of another key or aborted, or one of cost 0, is none of those.)
    if (waiter.queue !== null && w.foreign > waiter.foreign) {
      arm(w);
      return;
    }
    // A policy mixing bucket and window limits: nobody can move up (a window
    // frees nothing of a booking to come, so booking them again would count
    // them twice), and a bucket gives back exactly only its latest booking.
    // Given back only when it is the latest; else its slot goes unused.
    if (waiter.latestOnly && (w.foreign > waiter.foreign || w.booked > waiter.seq + 1)) {
      arm(w);
      return;
    }
    const later =
      waiter.queue === null
        ? []
        : w.list.filter((other) => other.queue === waiter.queue && other.seq > waiter.seq).sort((a, b) => b.seq - a.seq);
    try {
      for (const other of later) other.giveBack();
      waiter.giveBack();
    } finally {
      // Aborted too (a signal shared by many waiters): given back above, and
      // taken out now, so that its own listener finds nothing left to do.
      const gone = new Set();
      for (const other of later.reverse()) {
        if (other.aborted()) {
          gone.add(other);
          continue;
        }
        const error = other.rebook();
        if (error !== null) {
          gone.add(other);
          other.fail(error);
        }
      }
      if (gone.size > 0) w.list = w.list.filter((other) => !gone.has(other));
      w.list.sort((a, b) => a.atMs - b.atMs || a.seq - b.seq);
      arm(w);
    }
  }

  function arm(w) {
    if (w.list.length === 0) {
      disarm(w);
      return;
    }
    const due = w.list[0].atMs;
    // Armed through the timers in place now: fake timers installed or
    // removed since (a test's end) would leave it to timers nobody runs,
    // and every waiter behind it waiting for ever.
    if (w.timer !== undefined && w.due === due && w.armedBy === setTimeout) return;
    disarm(w);
    w.due = due;
    let left;
    try {
      left = due - w.read();
    } catch (error) {
      left = 0; // the timer's read fails the same way, and fails the waiters
    }
    w.armedBy = setTimeout;
    w.cancel = clearTimeout;
    w.timer = setTimeout(() => wake(w), timerDelay(Math.max(left, 0)));
  }

  /** Clears `w`'s timer, through the timers that armed it. */
  function disarm(w) {
    if (w.timer !== undefined) w.cancel(w.timer);
    w.timer = undefined;
  }

  /** Lets every waiter whose slot has come go, in order; a clock that throws fails them all. */
  function wake(w) {
    w.timer = undefined;
    let now;
    try {
      now = w.read();
      // NaN would leave every waiter undue, behind a timer armed again and again.
      if (Number.isNaN(now)) badType('now', 'a number');
    } catch (error) {
      // Newest first: a bucket gives back exactly only its latest booking.
      for (const waiter of w.list.splice(0).sort((a, b) => b.seq - a.seq)) waiter.fail(error);
      return;
    }
    while (w.list.length > 0 && w.list[0].atMs <= now) w.list.shift().done();
    arm(w);
  }

  function acquireSlot(slot, cost, options) {
    try {
      return acquireUnits(slot, number(cost, 1, 'cost'), options);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  function acquireUnits(slot, units, options) {
    let signal;
    let timeoutMs = Infinity;
    if (options !== undefined && options !== null) {
      if (typeof options !== 'object') badType('options', 'an object');
      options = known(options, 'acquire');
      signal = options.signal ?? undefined;
      if (signal !== undefined && !isSignal(signal)) badType('signal', 'an AbortSignal');
      timeoutMs = number(options.timeoutMs, Infinity, 'timeout');
      if (timeoutMs !== Infinity) B.checkMillis(timeoutMs, 'timeout');
    }
    if (signal !== undefined && signal.aborted) return Promise.reject(signal.reason);
    if (!slot.reserve(units, timeoutMs, slot.read())) {
      const retryAfterMs = out()[2];
      if (retryAfterMs > timeoutMs) {
        // The platform's error for a timeout (as AbortSignal.timeout's), with
        // the wait that was needed, as RateLimited and Python's carry it.
        const error = new DOMException(`the wait (${retryAfterMs} ms) would exceed timeoutMs (${timeoutMs} ms)`, 'TimeoutError');
        return Promise.reject(Object.assign(error, { retryAfterMs }));
      }
      return Promise.reject(new RateLimited(`${slot.label}: cannot book ${units} now; retry in ${retryAfterMs} ms`, retryAfterMs));
    }
    const s = out();
    const [waitMs, atMs, high, low] = [s[0], s[1], s[2], s[3]];
    // Due now and nobody waiting ahead (a caller held up, by a collection
    // say, may book a slot already passed while earlier ones still wait).
    // Waiters of other keys of a keyed limiter are not ahead of it.
    const pending = waitersOf.get(slot.owner)?.list ?? [];
    if (waitMs === 0 && !pending.some((other) => slot.queue === null || other.queue === slot.queue)) return Promise.resolve();
    const w = waiters(slot.owner, slot.read);
    const give = (high, low) => slot.refund(units, high, low);
    return new Promise((resolve, reject) => {
      let settled = false;
      // Settles once. `done` and `fail` run in the waiters' timer, so a
      // signal whose removeEventListener throws must not throw there (the
      // process would end, and the waiters behind would never wake);
      // its listener then stays, and finds the waiter settled.
      const settle = () => {
        if (settled) return false;
        settled = true;
        try {
          if (signal !== undefined) signal.removeEventListener('abort', onAbort);
        } catch {
          // kept listening: see above
        }
        return true;
      };
      const waiter = {
        atMs,
        seq: w.booked++,
        foreign: w.foreign,
        queue: slot.queue,
        latestOnly: slot.latestOnly === true,
        aborted: () => signal !== undefined && signal.aborted,
        giveBack: cancelOnce(give, high, low),
        /** Books again after a withdrawal ahead (see withdraw): null, or the error that fails it. */
        rebook() {
          try {
            if (!slot.reserve(units, Infinity, slot.read())) {
              const retryAfterMs = out()[2];
              return new RateLimited(`${slot.label}: cannot book ${units} again; retry in ${retryAfterMs} ms`, retryAfterMs);
            }
          } catch (error) {
            return error;
          }
          const again = out();
          waiter.atMs = again[1];
          waiter.giveBack = cancelOnce(give, again[2], again[3]);
          return null;
        },
        done() {
          if (settle()) resolve();
        },
        fail(error) {
          if (!settle()) return;
          waiter.giveBack();
          reject(error);
        },
      };
      const onAbort = () => {
        if (settled) return;
        settled = true;
        try {
          withdraw(w, waiter);
        } finally {
          reject(signal.reason);
        }
      };
      wait(w, waiter);
      if (signal !== undefined) signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /**
   * A timer's delay for a wait of `ms`: whole milliseconds, at most what
   * timers take (2^31 - 1 ms, about 24.8 days; a longer delay fires at once,
   * with a warning). A longer wait takes several timers.
   */
  function timerDelay(ms) {
    return Math.min(Math.ceil(ms), MAX_TIMER_MS);
  }

  /** `text` as UTF-8 reads it, each lone surrogate a U+FFFD. */
  function wellFormed(text) {
    return typeof text.toWellFormed === 'function' ? text.toWellFormed() : text;
  }

  /** A key: a string, or a number standing for its decimal string (42 and '42' are one key). */
  function keyOf(key) {
    if (typeof key === 'string') return key;
    if (typeof key === 'number') return numberKey(key, 'key');
    return badType('key', 'a string or a number');
  }

  /** Reads `clock()` as a number of milliseconds, naming the clock for what it returns. */
  function readClock(clock) {
    const now = clock();
    if (typeof now !== 'number') invalidType(`\`clock\` must return a number of milliseconds, not a ${typeof now}`);
    if (!(now >= 0 && now < Infinity)) invalidValue(`\`clock\` must return a number of milliseconds from 0, not ${now}`);
    return now;
  }

  // The napi build reads the default clock itself, cheaper than a call to
  // performance.now() from JS, while that clock is the runtime's own
  // (B.nativeNow is node:perf_hooks' performance.now): undefined asks it to.
  const nativeClock = B.nativeNow !== undefined && B.nativeNow === runtimeNow;

  /** `nowFrom` for tryAcquire and peek, which may leave the clock to the backend. */
  function hotNow(clock, nowMs) {
    const native = (nowMs === undefined || nowMs === null) && clock === defaultClock && nativeClock && runtimeClock();
    return native ? undefined : nowFrom(clock, nowMs);
  }

  function nowFrom(clock, nowMs) {
    if (typeof nowMs === 'number') return nowMs;
    if (nowMs === undefined || nowMs === null) return readClock(clock);
    return badType('now', 'a number');
  }

  const handlesOf = (free) => (typeof free === 'function' ? new FinalizationRegistry((handle) => free(handle)) : null);
  const keyedHandles = handlesOf(B.freeKeyed);
  const policyHandles = handlesOf(B.freePolicy);

  /**
   * One limiter per key, every key configured as `limiter` (a configured
   * limiter of any class; its state is not copied: every key starts fresh).
   * Keys are strings, or numbers standing for their decimal string. Keys back
   * to fresh are dropped lazily; `maxKeys` bounds the store (`eviction`:
   * 'nearest_fresh' forgets the keys nearest to fresh, 'refuse' throws
   * `store_full`).
   */
  class KeyedLimiter {
    #h;
    #prototype;
    #clock;
    #maxKeys = null;
    #eviction = 'nearest_fresh';

    constructor(limiter, options) {
      if (!(limiter instanceof Limiter)) badType('limiter', 'a limiter');
      let maxKeys;
      let eviction;
      if (options !== undefined && options !== null) {
        if (typeof options !== 'object') badType('options', 'an object');
        options = known(options, 'KeyedLimiter');
        if (options.maxKeys !== undefined && options.maxKeys !== null) {
          if (typeof options.maxKeys !== 'number') badType('max_keys', 'a number');
          maxKeys = options.maxKeys;
        }
        if (options.eviction !== undefined && options.eviction !== null) {
          if (typeof options.eviction !== 'string') badType('eviction', 'a string');
          eviction = options.eviction;
        }
      }
      const { handle, name, clock } = internalsOf(limiter);
      this.#h = B.keyedNew(handle, maxKeys, eviction);
      if (keyedHandles !== null) keyedHandles.register(this, this.#h);
      // The configuration every key has, for headers and getters.
      this.#prototype = new Limiter(new Built(B.keyedPrototype(this.#h), { name, clock }));
      this.#clock = clock;
      if (maxKeys !== undefined) this.#maxKeys = maxKeys;
      if (eviction !== undefined) this.#eviction = eviction;
    }

    // op: 0 peek, 1 tryAcquire, 2 reserve (as the native keyedOp).
    tryAcquire(key, cost, nowMs) {
      return decision(yes(keyedOp(this.#h, keyOf(key), number(cost, 1, 'cost'), 0, hotNow(this.#clock, nowMs), 1)));
    }

    peek(key, cost, nowMs) {
      return decision(yes(keyedOp(this.#h, keyOf(key), number(cost, 1, 'cost'), 0, hotNow(this.#clock, nowMs), 0)));
    }

    reserve(key, cost, maxWaitMs, nowMs) {
      const k = keyOf(key);
      const units = number(cost, 1, 'cost');
      const maxWait = number(maxWaitMs, Infinity, 'max_wait');
      const now = nowFrom(this.#clock, nowMs);
      // Through `this`: a reservation keeps its store alive (see Limiter.reserve).
      const give = (high, low) => B.keyedRefund(this.#h, k, units, [NaN, high, low]);
      const booked = yes(keyedOp(this.#h, k, units, maxWait, now, 2));
      if (booked && out()[0] > 0) untracked(this);
      return reservation(booked, units, now, decision, give);
    }

    refund(key, cost, takenAtMs) {
      const k = keyOf(key);
      if (typeof cost !== 'number') badType('cost', 'a number');
      B.keyedRefund(this.#h, k, cost, [takenAt(this.#clock, takenAtMs), NaN, NaN]);
    }

    acquire(key, cost, options) {
      let k;
      try {
        k = keyOf(key);
      } catch (error) {
        return Promise.reject(error);
      }
      const h = this.#h;
      return acquireSlot(
        {
          reserve: (units, maxWait, now) => yes(keyedOp(h, k, units, maxWait, now, 2)),
          refund: (units, high, low) => B.keyedRefund(h, k, units, [NaN, high, low]),
          read: () => readClock(this.#clock),
          owner: this,
          label: `${this.#prototype.name} [${k}]`,
          // The store reads a lone surrogate as U+FFFD: one key, one queue.
          queue: movesUp(this.#prototype) ? wellFormed(k) : null,
        },
        cost,
        options,
      );
    }

    /** Decides each of `costs` in turn for `key` at one instant: one decision per cost. */
    tryAcquireBatch(key, costs, nowMs) {
      const k = keyOf(key);
      const units = plainArray(costs);
      if (!Array.isArray(units) || !everyIs(units, 'number')) badType('costs', 'an array of numbers');
      const flat = B.keyedTryAcquireBatch(this.#h, k, units, nowFrom(this.#clock, nowMs));
      const decisions = new Array(units.length);
      for (let i = 0; i < units.length; i++) decisions[i] = fromFlat(flat, 5 * i);
      return decisions;
    }

    headers(decision) {
      return this.#prototype.headers(decision);
    }

    /** Drops the keys back to fresh (calls do it lazily anyway). */
    reclaim(nowMs) {
      B.keyedReclaim(this.#h, nowFrom(this.#clock, nowMs));
    }

    /** How many keys the store holds. */
    get size() {
      return B.keyedLen(this.#h);
    }

    get limit() {
      return this.#prototype.limit;
    }

    get windowMs() {
      return this.#prototype.windowMs;
    }

    get algorithm() {
      return this.#prototype.algorithm;
    }

    get name() {
      return this.#prototype.name;
    }

    /** The most keys held, or null: no bound. */
    get maxKeys() {
      return this.#maxKeys;
    }

    /** What happens at `maxKeys`: 'nearest_fresh' or 'refuse'. */
    get eviction() {
      return this.#eviction;
    }

    /** A fresh limiter of every key's configuration (its class, name and clock). */
    get limiter() {
      const { name, clock } = internalsOf(this.#prototype);
      const Class = classOf[this.#prototype.algorithm];
      return new Class(undefined, new Built(B.keyedPrototype(this.#h), { name, clock }));
    }

    /** `KeyedLimiter { limiter: Gcra { ... }, size: 2 }` in console.log: the options given, and the keys held. */
    [inspectSymbol](depth, options, inspect) {
      const shown = { limiter: this.#prototype };
      if (this.#maxKeys !== null) shown.maxKeys = this.#maxKeys;
      if (this.#eviction !== 'nearest_fresh') shown.eviction = this.#eviction;
      shown.size = this.size;
      return inspected('KeyedLimiter', shown, depth, options, inspect);
    }
  }

  /** What a value is, for a message: its typeof, or null. */
  function typeName(value) {
    return value === null ? 'null' : typeof value;
  }

  /**
   * The five fields of the decision `decision` (called `name` in messages):
   * a TypeError names the field that is not a boolean or a number. Their
   * values are checked natively, as every number is.
   */
  function decisionFields(decision, name) {
    if (decision === null || typeof decision !== 'object') invalidType(`\`${name}\` must be a decision, not ${typeName(decision)}`);
    const { allowed, remaining, limit, retryAfterMs, resetAfterMs } = decision;
    if (typeof allowed !== 'boolean') invalidType(`\`${name}.allowed\` must be a boolean, not ${typeName(allowed)}`);
    const fields = [allowed, remaining, limit, retryAfterMs, resetAfterMs];
    const names = ['allowed', 'remaining', 'limit', 'retryAfterMs', 'resetAfterMs'];
    for (let i = 1; i < 5; i++) {
      if (typeof fields[i] !== 'number') invalidType(`\`${name}.${names[i]}\` must be a number, not ${typeName(fields[i])}`);
    }
    return fields;
  }

  function takenAt(clock, takenAtMs) {
    if (takenAtMs === undefined || takenAtMs === null) return readClock(clock);
    if (typeof takenAtMs !== 'number') badType('taken_at', 'a number');
    return takenAtMs;
  }

  /** A decision from five numbers at `at` of `flat`: allowed (1 or 0), remaining, limit, retryAfterMs, resetAfterMs. */
  function fromFlat(flat, at) {
    return {
      allowed: flat[at] === 1,
      remaining: flat[at + 1],
      limit: flat[at + 2],
      retryAfterMs: flat[at + 3],
      resetAfterMs: flat[at + 4],
    };
  }

  /**
   * A Reservation: booked (the scratch holds [waitMs, atMs, slotHigh,
   * slotLow]; its `cancel()` calls `give(slotHigh, slotLow)` once) or denied
   * with `deny(false)`'s decision (its `cancel()` does nothing).
   */
  function reservation(booked, units, now, deny, give) {
    let r;
    let cancel = noCancel;
    if (booked) {
      const s = out();
      r = { ok: true, waitMs: s[0], atMs: s[1], cost: units, decision: null };
      cancel = cancelOnce(give, s[2], s[3]);
    } else {
      const denied = deny(false);
      r = { ok: false, waitMs: denied.retryAfterMs, atMs: now + denied.retryAfterMs, cost: units, decision: denied };
    }
    // Not enumerable: a reservation still compares and prints as its five fields.
    Object.defineProperty(r, 'cancel', { value: cancel, writable: true, configurable: true });
    return r;
  }

  function noCancel() {}

  /**
   * A reservation's `cancel()`: gives the booking back at exactly its slot
   * (`high * 2^32 + low` ns, which `atMs` cannot carry on an epoch clock),
   * the first time only.
   */
  function cancelOnce(give, high, low) {
    let given = false;
    return function cancel() {
      if (given) return;
      give(high, low);
      given = true;
    };
  }

  /**
   * A JSON.stringify replacer for a policy's configuration that refuses what
   * JSON cannot carry, with the `invalid_config` error the reader gives,
   * naming the place (`limits[0].burst`). JSON would write NaN and the
   * infinities as null, read as "not given", and drop a function or a
   * Symbol, so that the field took its default: a limit other than asked.
   * A BigInt that is a safe integer goes as that number; a larger one as a
   * string, which the reader refuses as it refuses any string for a number.
   */
  function jsonValues() {
    const places = new WeakMap();
    // The object holding each object on the way down: its ancestors, for a cycle.
    const parents = new WeakMap();
    return function jsonValue(key, raw) {
      const value = unboxed(raw);
      const holder = places.get(this) ?? '';
      const place = Array.isArray(this) ? `${holder}[${key}]` : holder === '' ? key : `${holder}.${key}`;
      if (value !== null && typeof value === 'object') {
        // JSON.stringify's own error for a cycle has no code, and names no place.
        for (let up = this; up !== undefined; up = parents.get(up)) if (up === value) notJson(place, 'a circular reference');
        places.set(value, place);
        parents.set(value, this);
      } else if (typeof value === 'number' && !Number.isFinite(value)) notJson(place, String(value));
      else if (typeof value === 'function' || typeof value === 'symbol') notJson(place, `a ${typeof value}`);
      else if (typeof value === 'bigint') {
        return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : `${value}n`;
      }
      return value;
    };
  }

  /**
   * A boxed number or BigInt's value, as JSON writes it (by its internal
   * slot, so from any realm: `instanceof Number` misses a `vm` context's);
   * anything else as it is.
   */
  function unboxed(raw) {
    if (raw === null || typeof raw !== 'object') return raw;
    for (const valueOf of UNBOXERS) {
      try {
        return valueOf.call(raw);
      } catch {
        // Not that kind of box.
      }
    }
    return raw;
  }
  const UNBOXERS = [Number.prototype.valueOf, BigInt.prototype.valueOf];

  function notJson(place, found) {
    throw Object.assign(new TypeError(`policy configuration: ${place || 'config'}: expected JSON data, found ${found}`), { code: 'invalid_config' });
  }

  /**
   * A policy's configuration as the backend reads it: plain data, as
   * `JSON.parse` makes it (src/policy_config.rs), each object without a
   * prototype, so that only its own fields are read. JSON text is parsed
   * here, by the engine's own parser (a repeated key: the last one counts);
   * an object goes through JSON and back (see `jsonValues`), so that only
   * its own enumerable fields count, and getters and `toJSON` as in JSON text.
   */
  function configData(config) {
    let text = config;
    if (typeof config !== 'string') {
      text = JSON.stringify(config, jsonValues());
      // A toJSON that answers undefined.
      if (text === undefined) badType('config', 'an object or a string');
    }
    try {
      return JSON.parse(text, ownFields);
    } catch (error) {
      throw Object.assign(new TypeError(`policy configuration: config is not JSON (${error.message})`), { code: 'invalid_config' });
    }
  }

  function ownFields(_key, value) {
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? Object.assign(Object.create(null), value) : value;
  }

  const LIMITER_FIELDS = new Set(['name', 'by', 'limiter', 'maxKeys', 'eviction']);

  /**
   * A policy of configured limiters: `[{ name, by?, limiter, maxKeys?,
   * eviction? }]`, each limit keyed by copies of its limiter; a KeyedLimiter
   * brings its configuration and its bound (as Python's `Policy.add`).
   */
  function fromLimiters(limits) {
    const h = B.policyNew();
    try {
      for (const [i, limit] of limits.entries()) {
        if (limit === null || typeof limit !== 'object') badType('config', 'an object or a string');
        // A misspelt field (max_keys here) would be dropped without a word.
        const unknown = Object.keys(limit).find((field) => !LIMITER_FIELDS.has(field));
        if (unknown !== undefined) {
          const expected = '`name`, `by`, `limiter`, `maxKeys` or `eviction`';
          const message = `policy configuration: limits[${i}]: unknown field \`${unknown}\`, expected ${expected}`;
          throw Object.assign(new TypeError(message), { code: 'invalid_config' });
        }
        const { name } = limit;
        const by = plainArray(limit.by === undefined ? [] : limit.by);
        let { limiter, maxKeys, eviction } = limit;
        if (typeof name !== 'string') badType('name', 'a string');
        if (!Array.isArray(by) || !everyIs(by, 'string')) badType('by', 'an array of strings');
        if (limiter instanceof KeyedLimiter) {
          if (maxKeys != null || eviction != null) invalidValue('`maxKeys` and `eviction` come from the KeyedLimiter given as `limiter`');
          ({ maxKeys, eviction } = limiter);
          limiter = limiter.limiter;
        }
        if (!(limiter instanceof Limiter)) badType('limiter', 'a limiter or a KeyedLimiter');
        if (maxKeys != null && typeof maxKeys !== 'number') badType('max_keys', 'a number');
        if (eviction != null && typeof eviction !== 'string') badType('eviction', 'a string');
        B.policyAdd(h, name, by, internalsOf(limiter).handle, maxKeys ?? undefined, eviction ?? undefined);
      }
    } catch (error) {
      if (typeof B.freePolicy === 'function') B.freePolicy(h);
      throw error;
    }
    return h;
  }

  /**
   * All-or-nothing limits over requests. A request is a plain object of
   * fields (`{ user: 'alice', route: '/a' }`), values strings or numbers
   * (numbers as their decimal string); each limit is keyed by some of its
   * fields (none: global). A request is admitted only if every limit admits
   * it, and then consumes in every limit; else nothing is consumed.
   *
   * `config`: `{ limits: [{ name, rate, algorithm?, burst?, calendar?, by?, maxKeys... }] }`
   * (the core's declarative configuration, snake_case keys), its JSON text,
   * `{ limits: [{ name, by?, limiter }] }` with configured limiters, or a rate string such as '10/second;100/day' (then `options.algorithm` and `options.by`).
   */
  class Policy {
    #h;
    #limits;
    #clock;
    /** Each field a limit is keyed by, once, with the first such limit's name. */
    #needs = [];
    /** How an aborted waiter's booking is given back: see `acquire`. */
    #buckets = 'none';

    constructor(config, options) {
      let algorithm;
      let by;
      let clock;
      if (options !== undefined && options !== null) {
        if (typeof options !== 'object') badType('options', 'an object');
        options = known(options, 'Policy');
        if (options.algorithm !== undefined) {
          if (typeof options.algorithm !== 'string') badType('algorithm', 'a string');
          algorithm = options.algorithm;
        }
        if (options.by !== undefined) {
          by = plainArray(options.by);
          if (!Array.isArray(by) || !everyIs(by, 'string')) badType('by', 'an array of strings');
        }
        if (options.clock !== undefined) {
          if (typeof options.clock !== 'function') badType('clock', 'a function');
          clock = options.clock;
        }
      }
      const rates = typeof config === 'string' && !config.trimStart().startsWith('{');
      // As in Python: silently dropped, `by` would leave one global limit
      // where the caller asked for one per user.
      if (!rates && (algorithm !== undefined || by !== undefined)) {
        invalidValue("`algorithm` and `by` apply only to a rate string; a configuration names each limit's");
      }
      if (rates) {
        this.#h = B.policyFromRates(config, algorithm ?? 'token_bucket', by ?? []);
      } else if (typeof config === 'string') {
        this.#h = B.policyFromConfig(configData(config));
      } else if (config !== null && typeof config === 'object' && Array.isArray(config.limits) && config.limits.some((l) => l?.limiter !== undefined)) {
        this.#h = fromLimiters(config.limits);
      } else if (config !== null && typeof config === 'object') {
        this.#h = B.policyFromConfig(configData(config));
      } else {
        badType('config', 'an object or a string');
      }
      if (policyHandles !== null) policyHandles.register(this, this.#h);
      const limits = B.policyLimits(this.#h);
      this.#limits = [];
      let calendar = false;
      // Each limit: its name, its calendar ('' for none), which bookings it gives
      // back ('any', or only the 'latest': a bucket's), its number of fields, then the fields.
      let buckets = 0;
      for (let i = 0; i < limits.length; ) {
        const count = Number(limits[i + 3]);
        this.#limits.push({ name: limits[i], by: limits.slice(i + 4, i + 4 + count) });
        calendar ||= limits[i + 1] !== '';
        if (limits[i + 2] === 'latest') buckets++;
        i += 4 + count;
      }
      this.#buckets = buckets === 0 ? 'none' : buckets === this.#limits.length ? 'all' : 'some';
      for (const { name, by } of this.#limits) {
        for (const field of by) if (!this.#needs.some(([known]) => known === field)) this.#needs.push([field, name]);
      }
      // A calendar's windows are UTC days, weeks and months: by default such
      // a policy reads the epoch clock (read through the global each time, as
      // fake timers replace it), as the Python binding does.
      this.#clock = clock ?? (calendar ? () => Date.now() : defaultClock);
      // policyOp answers in an array the backend sizes.
      fitPolicy(this.#limits.length);
    }

    /** One limit per rate of `rates` ('10/second;100/day'), each named by its rate. */
    static fromRates(rates, options) {
      if (typeof rates !== 'string') badType('rates', 'a string');
      // Rates only, as in Python: JSON text is fromConfig's, and the rate
      // parser refuses it, naming the place.
      if (rates.trimStart().startsWith('{')) B.policyFromRates(rates, 'token_bucket', []);
      return new Policy(rates, options);
    }

    /** A policy from its declarative configuration (an object or JSON text). */
    static fromConfig(config, options) {
      return new Policy(config, options);
    }

    #fields(request) {
      const fields = [];
      const given = request !== undefined && request !== null;
      if (given && typeof request !== 'object') badType('request', 'an object');
      for (const name of given ? Object.keys(request) : []) {
        const value = request[name];
        // A bad value is named by its field (`request.user`), as the Redis
        // policy names it (Python: `request['user']`).
        if (typeof value === 'string') fields.push(name, value);
        else if (typeof value === 'number') fields.push(name, numberKey(value, `request.${name}`));
        else invalidType(`\`request.${name}\` must be a string or a number, not ${typeName(value)}`);
      }
      // Named here, as the Redis policy names it: the core knows no field names.
      for (const [field, limit] of this.#needs) {
        if (!given || !Object.hasOwn(request, field)) {
          invalidValue(`\`request\` lacks the field ${JSON.stringify(field)} that limit ${JSON.stringify(limit)} is keyed by`);
        }
      }
      return fields;
    }

    #decision(flat, allowed) {
      // flat: [status, deniedBy, then five numbers per limit]
      const s = out();
      const limits = new Array(this.#limits.length);
      for (let i = 0; i < limits.length; i++) {
        const at = 2 + 5 * i;
        // Written out, not spread from fromFlat: a spread copies property by property.
        limits[i] = {
          name: this.#limits[i].name,
          allowed: flat[at] === 1,
          remaining: flat[at + 1],
          limit: flat[at + 2],
          retryAfterMs: flat[at + 3],
          resetAfterMs: flat[at + 4],
        };
      }
      return {
        allowed,
        remaining: s[0],
        limit: s[1],
        retryAfterMs: s[2],
        resetAfterMs: s[3],
        deniedBy: flat[1] < 0 ? null : this.#limits[flat[1]].name,
        limits,
      };
    }

    tryAcquire(request, cost, nowMs) {
      return this.#decide(request, cost, nowMs, true);
    }

    peek(request, cost, nowMs) {
      return this.#decide(request, cost, nowMs, false);
    }

    // op: 0 peek, 1 tryAcquire, 2 reserve (as the native policyOp).
    #decide(request, cost, nowMs, consume) {
      const flat = policyOp(this.#h, this.#fields(request), number(cost, 1, 'cost'), 0, hotNow(this.#clock, nowMs), consume ? 1 : 0);
      return this.#decision(flat, flat[0] === 1);
    }

    reserve(request, cost, maxWaitMs, nowMs) {
      const fields = this.#fields(request);
      const units = number(cost, 1, 'cost');
      const maxWait = number(maxWaitMs, Infinity, 'max_wait');
      const now = nowFrom(this.#clock, nowMs);
      const flat = policyOp(this.#h, fields, units, maxWait, now, 2);
      // A booking of a slot to come that no waiter holds (see untracked).
      if (flat[0] === 1 && out()[0] > 0) untracked(this);
      // Through `this`: a reservation keeps its policy alive (see Limiter.reserve).
      const give = (high, low) => B.policyRefund(this.#h, fields, units, [NaN, high, low]);
      return reservation(flat[0] === 1, units, now, () => this.#decision(flat, false), give);
    }

    refund(request, cost, takenAtMs) {
      const fields = this.#fields(request);
      if (typeof cost !== 'number') badType('cost', 'a number');
      B.policyRefund(this.#h, fields, cost, [takenAt(this.#clock, takenAtMs), NaN, NaN]);
    }

    acquire(request, cost, options) {
      let fields;
      try {
        fields = this.#fields(request);
      } catch (error) {
        return Promise.reject(error);
      }
      const h = this.#h;
      return acquireSlot(
        {
          reserve: (units, maxWait, now) => policyOp(h, fields, units, maxWait, now, 2)[0] === 1,
          refund: (units, high, low) => B.policyRefund(h, fields, units, [NaN, high, low]),
          read: () => readClock(this.#clock),
          owner: this,
          label: 'policy',
          // A bucket gives back exactly only its latest booking (see
          // movesUp): a policy of buckets only moves the waiters behind an
          // aborted one up, as a limiter does (one queue: those of other keys
          // too, which share its global limits); one of windows only gives
          // each booking back where it was counted; a mix gives back only
          // the latest booking.
          queue: this.#buckets === 'all' ? '' : null,
          latestOnly: this.#buckets === 'some',
        },
        cost,
        options,
      );
    }

    /**
     * RateLimit-Policy and RateLimit listing every limit (comma-separated
     * items, in the policy's order), and Retry-After when denied.
     */
    headers(decision) {
      const flat = decisionFields(decision, 'decision');
      if (!Array.isArray(decision.limits) || decision.limits.length !== this.#limits.length) {
        invalidType(`\`decision.limits\` must be an array of ${this.#limits.length} decisions, one per limit of the policy`);
      }
      decision.limits.forEach((d, i) => flat.push(...decisionFields(d, `decision.limits[${i}]`)));
      for (let i = 0; i < flat.length; i += 5) flat[i] = flat[i] ? 1 : 0;
      const values = B.policyHeaders(this.#h, flat).split('\n');
      // A policy without limits has none to announce.
      if (values[0] === '') return {};
      const headers = { 'RateLimit-Policy': values[0], RateLimit: values[1] };
      if (values.length > 2) headers['Retry-After'] = values[2];
      return headers;
    }

    /** Drops every limit's keys back to fresh. */
    reclaim(nowMs) {
      B.policyReclaim(this.#h, nowFrom(this.#clock, nowMs));
    }

    /** The limits, in order: `{ name, by }`. */
    get limits() {
      return this.#limits.map(({ name, by }) => ({ name, by: [...by] }));
    }

    /** `Policy { limits: [ { name: '10/second', by: [] } ] }` in console.log. */
    [inspectSymbol](depth, options, inspect) {
      return inspected('Policy', { limits: this.limits }, depth, options, inspect);
    }
  }

  /**
   * A plain array of the elements of the array `value` (of its first `most`
   * only, the rest left holes), each read once; anything else as it is. What
   * the backend reads is then what was checked here (an element's getter
   * may answer otherwise the second time), and an array that is a Proxy,
   * an array to Array.isArray and to wasm-bindgen, is one to Node-API too,
   * which reads no Proxy as an array.
   */
  function plainArray(value, most = Infinity) {
    if (!Array.isArray(value)) return value;
    const n = value.length;
    const copy = new Array(n);
    for (let i = 0; i < Math.min(n, most); i++) copy[i] = value[i];
    return copy;
  }

  /** Whether every element of `array` has type `type`; a hole has none (`every` would skip it). */
  function everyIs(array, type) {
    for (let i = 0; i < array.length; i++) if (typeof array[i] !== type) return false;
    return true;
  }

  function isSignal(value) {
    return (
      typeof value === 'object' &&
      typeof value.aborted === 'boolean' &&
      typeof value.addEventListener === 'function' &&
      typeof value.removeEventListener === 'function'
    );
  }

  /** A token bucket: `capacity` tokens, `refillTokens` more every `refillPeriodMs`. */
  class TokenBucket extends Limiter {
    constructor(options, built) {
      super(built instanceof Built ? built : builtBy((own) => B.tokenBucket(own), options, 'TokenBucket'));
    }

    /** A bucket enforcing every one of `bandwidths` (1 to 4) at once. */
    static fromBandwidths(bandwidths, options) {
      if (options !== undefined && options !== null && typeof options !== 'object') badType('options', 'an object');
      const own = known(options, 'fromBandwidths');
      // The backend reads no more than one past the most it takes (4), and names the length.
      const bands = plainArray(bandwidths, 5);
      if (Array.isArray(bands)) for (let i = 0; i < Math.min(bands.length, 5); i++) bands[i] = known(bands[i], 'bandwidth');
      return new TokenBucket(undefined, new Built(B.tokenBucketFromBandwidths(bands), own));
    }

    /**
     * A bucket holding the state `bytes`: `options` as the constructor takes
     * them, or an array of bandwidths as `fromBandwidths` (then `common` holds
     * `name` and `clock`).
     */
    static fromBytes(bytes, options, common) {
      if (!Array.isArray(options)) return super.fromBytes(bytes, options);
      stateBytes(bytes);
      const bucket = TokenBucket.fromBandwidths(options, common);
      bucket.restore(bytes);
      return bucket;
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
      super(built instanceof Built ? built : builtBy((own) => B.gcra(own), options, 'Gcra'));
    }

    /** `burst` at once, `tokens` every `periodMs` (one every periodMs / tokens, a whole number of ns). */
    static perPeriod(options) {
      return new Gcra(undefined, builtBy((own) => B.gcraPerPeriod(own), options, 'Gcra.perPeriod'));
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
    constructor(options, built) {
      super(built instanceof Built ? built : builtBy((own) => B.leakyBucket(own), options, 'LeakyBucket'));
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
    constructor(options, built) {
      super(built instanceof Built ? built : builtBy((own) => B.slidingWindowLog(own), options, 'SlidingWindowLog'));
    }
  }

  /** About `limit` units per sliding window of `windowMs`, from O(1) state. */
  class SlidingWindowCounter extends Limiter {
    constructor(options, built) {
      super(built instanceof Built ? built : builtBy((own) => B.slidingWindowCounter(own), options, 'SlidingWindowCounter'));
    }
  }

  /** At most `limit` units per aligned window of `windowMs`. */
  class FixedWindow extends Limiter {
    constructor(options, built) {
      super(built instanceof Built ? built : builtBy((own) => B.fixedWindow(own), options, 'FixedWindow'));
    }
  }

  /** Each algorithm's class, by the name its limiters' `algorithm` gives. */
  const classOf = {
    token_bucket: TokenBucket,
    gcra: Gcra,
    leaky_bucket: LeakyBucket,
    sliding_window_log: SlidingWindowLog,
    sliding_window_counter: SlidingWindowCounter,
    fixed_window: FixedWindow,
  };

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
  // The decision for one request: `limiter` is a KeyedLimiter (keyed by
  // `key(request)`) or a Policy (its request is `fields(request)`, a plain
  // object of fields); `cost(request)` defaults to 1. Each function may
  // return a promise (a key looked up in a session store, say): the
  // decision is then a promise too, taken once the key and then the cost
  // are known, so that requests are decided in the order their keys come.
  function handlerOptions(options) {
    if (options === null || typeof options !== 'object') badType('options', 'an object');
    const { limiter, key, fields, cost } = known(options, 'the server helpers');
    if (cost !== undefined && typeof cost !== 'function') badType('cost', 'a function');
    let inputOf;
    // Each mistake below would fail every request (a 500 each), or quietly
    // limit otherwise than asked: refused here instead.
    if (limiter instanceof KeyedLimiter) {
      if (typeof key !== 'function') badType('key', 'a function');
      if (fields !== undefined) invalidType('`fields` is for a Policy: a KeyedLimiter takes `key`');
      inputOf = key;
    } else if (limiter instanceof Policy) {
      if (key !== undefined) invalidType('`key` is for a KeyedLimiter: a Policy takes `fields`');
      if (fields !== undefined && typeof fields !== 'function') badType('fields', 'a function');
      if (fields === undefined) {
        const keyed = limiter.limits.find(({ by }) => by.length > 0);
        if (keyed !== undefined) {
          invalidType(`\`fields\` must be given: limit "${keyed.name}" of \`limiter\` is keyed by "${keyed.by[0]}"`);
        }
      }
      inputOf = fields === undefined ? () => ({}) : fields;
    } else {
      badType('limiter', 'a KeyedLimiter or a Policy');
    }
    const costOf = cost === undefined ? () => 1 : cost;
    const decide = (input, units) => {
      const d = limiter.tryAcquire(input, units);
      return { decision: d, headers: limiter.headers(d) };
    };
    return (request) => after(inputOf(request), (input) => after(costOf(request), (units) => decide(input, units)));
  }

  /** `then(value)`, or a promise of it once `value` settles when it is a promise. */
  function after(value, then) {
    return isThenable(value) ? Promise.resolve(value).then(then) : then(value);
  }

  function isThenable(value) {
    return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof value.then === 'function';
  }

  const TOO_MANY = 'Too Many Requests\n';
  const UNAVAILABLE = 'Service Unavailable\n';

  /** `value` as a message shows it; one that cannot be shown (a null-prototype object), as such. */
  function shown(value) {
    try {
      return String(value);
    } catch {
      return 'a value that cannot be shown';
    }
  }

  /**
   * Answers a request with `decide(request)` once it is known: `respond`
   * writes the answer and says whether the request goes on, then `pass()`
   * runs. `respond` gets null when a store made with eviction 'refuse' is
   * full and refuses the request's new key (answered 503, without RateLimit
   * headers: there is no decision, and no wait to promise). `fail` gets any
   * other error, one thrown by `respond` included (headers already sent).
   */
  function outcomeOf(decide, request, respond, pass, failWith) {
    // Always an Error: Express and Fastify read next(undefined) or
    // done(null) as "go on", and next('route') as "skip the route", so a
    // key function that threw such a value let the request through unlimited.
    const fail = (error) => failWith(error instanceof Error ? error : new Error(`ratekeeper: the request's key, fields or cost failed: ${shown(error)}`, { cause: error }));
    const settle = (outcome) => {
      let proceed;
      try {
        proceed = respond(outcome);
      } catch (error) {
        fail(error);
        return;
      }
      // Outside the try: an error thrown further down the chain is not this one's.
      if (proceed) pass();
    };
    const settleError = (error) => (error?.code === 'store_full' ? settle(null) : fail(error));
    let outcome;
    try {
      outcome = decide(request);
    } catch (error) {
      settleError(error);
      return;
    }
    if (isThenable(outcome)) {
      // Settled outside the promise, so that an error thrown by `pass` or
      // `fail` is the runtime's to report, as from any callback, rather than
      // a rejection nobody handles.
      outcome.then(
        (value) => queueMicrotask(() => settle(value)),
        (error) => queueMicrotask(() => settleError(error)),
      );
    } else {
      settle(outcome);
    }
  }

  /**
   * Express-style middleware `(req, res, next)`: `{ limiter: KeyedLimiter, key(req) }`
   * or `{ limiter: Policy, fields(req) }`, and `cost(req)` optionally (each may
   * return a promise); every response carries RateLimit-Policy and RateLimit,
   * and a denied request gets 429 with Retry-After. A full store that refuses
   * new keys answers 503; other errors go to `next(error)`, those of writing
   * the answer included (headers already sent, say).
   */
  function middleware(options) {
    const decide = handlerOptions(options);
    return function ratekeeper(req, res, next) {
      const respond = (outcome) => {
        if (outcome === null) {
          res.statusCode = 503;
          res.setHeader('Content-Type', 'text/plain; charset=utf-8');
          res.end(UNAVAILABLE);
          return false;
        }
        for (const [name, value] of Object.entries(outcome.headers)) res.setHeader(name, value);
        if (outcome.decision.allowed) return true;
        res.statusCode = 429;
        res.setHeader('Content-Type', 'text/plain; charset=utf-8');
        res.end(TOO_MANY);
        return false;
      };
      outcomeOf(decide, req, respond, () => next(), next);
    };
  }

  /** The same for Fastify: `fastify.addHook('onRequest', fastifyHook({ limiter, key }))`. */
  function fastifyHook(options) {
    const decide = handlerOptions(options);
    return function ratekeeper(request, reply, done) {
      const respond = (outcome) => {
        if (outcome === null) {
          reply.code(503).type('text/plain; charset=utf-8').send(UNAVAILABLE);
          return false;
        }
        reply.headers(outcome.headers);
        if (outcome.decision.allowed) return true;
        // Answering from the hook: Fastify then skips the handler; done() is not called.
        reply.code(429).type('text/plain; charset=utf-8').send(TOO_MANY);
        return false;
      };
      outcomeOf(decide, request, respond, () => done(), done);
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
    KeyedLimiter,
    Policy,
    RateLimited,
    middleware,
    fastifyHook,
  };
}

module.exports = { createApi, numberKey, asciiInto, fieldsInto, inspected, inspectSymbol, onlyKnown };
