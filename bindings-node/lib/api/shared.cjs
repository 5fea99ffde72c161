'use strict';
// What the classes of the JS layer share over one backend `B` (see
// lib/api.cjs): its hot operations and the scratch their answers are read
// from, the decision built from it, argument checks, clocks, the registries
// that free native handles, and reservations.
const { invalidType, invalidValue, numberKey, isUint8Array, bytesCopy, bytesKey, keyArg, asciiInto, fieldsInto, onlyKnown, ownCopy, textOf, requestText } = require('./values.cjs');

module.exports = function shared(B) {
  // The backend's scratch, fetched on first use (the web build has no memory
  // before init()) and again whenever the wasm memory grew, which detaches
  // the old view (its length becomes 0). Told by its first element, a number
  // while it is attached: an operation's answer is read right after it, and
  // no code of JS's may run in between (see charCodeAt in values.cjs), as a
  // replaced getter of %TypedArray%.prototype.length would.
  let scratch = new Float64Array(0);
  function out() {
    if (scratch[0] === undefined) scratch = B.scratch();
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
  // more than the decision; the napi build does the same in index.js. A key
  // passed as a string is first checked for lone surrogates (see textOf),
  // which wasm-bindgen would write as U+FFFD: an ASCII one holds none. A
  // ByteKey (see keyOf) goes as its bytes.
  const keyedOp =
    B.keyScratch === undefined
      ? keyedOpString
      : (() => {
          const { keyedOpScratch, keyedOpBytes } = B;
          let bytes = new Uint8Array(0);
          return (h, key, cost, maxWait, now, op) => {
            if (bytes[0] === undefined) bytes = B.keyScratch();
            const n = asciiInto(bytes, key);
            if (n >= 0) return keyedOpScratch(h, n, cost, maxWait, now, op);
            return typeof key === 'string' ? keyedOpString(h, textOf(key, 'key'), cost, maxWait, now, op) : keyedOpBytes(h, key.bytes, cost, maxWait, now, op);
          };
        })();

  // A policy's operation, answering `[status, deniedBy, then five numbers
  // per limit]`, and the call that makes room for those of a policy. The
  // wasm build takes a request of short ASCII fields through a buffer in its
  // memory (fieldScratch), as it does keys, and answers in another
  // (policyDetails: detached when the memory grows, moved by fitPolicy), and
  // returns a status of 2 instead of throwing (a request passed as strings
  // is checked as a key is); the napi build does the same in index.js.
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
              if (bytes[0] === undefined) bytes = B.fieldScratch();
              const n = fieldsInto(bytes, fields);
              // The status in the low two bits; above them, how often the
              // details moved (another copy of the JS layer may have moved them).
              const answer = n >= 0 ? policyOpScratch(h, n, cost, maxWait, now, op) : policyOpStrings(h, requestText(fields), cost, maxWait, now, op);
              if ((answer & 3) === 2) throw B.takeError();
              if (details[0] === undefined || answer >>> 2 !== moved) {
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

  /**
   * The TypeError (code `invalid_type`) of a method called on a `this` that
   * is not `kind` ('a Limiter'): detached (`const f = limiter.tryAcquire;
   * f()`), or called on another object (a Proxy of one), where reading its
   * private fields threw V8's uncoded TypeError. One wording for every class.
   */
  function notThis(kind) {
    return Object.assign(new TypeError(`\`this\` must be ${kind}`), { code: 'invalid_type' });
  }

  /**
   * The checks of `this` for the class `kind` ('a Limiter') whose brand
   * check is `is`: `own(self)`, the first line of a method that is not hot,
   * throws notThis(kind) unless `self` is one; `failed(self, error)` is
   * what a hot method throws once it threw `error` on `self` (`error` when
   * `self` is one), asked only on the way out of a failed call, so that a
   * decision pays no check (its first private field read throws anyway).
   */
  function thisChecks(is, kind) {
    return {
      own(self) {
        if (!is(self)) throw notThis(kind);
      },
      failed(self, error) {
        return is(self) ? error : notThis(kind);
      },
    };
  }

  /** The TypeError (code `invalid_type`) of using the abstract `Limiter` itself. */
  function abstract(instead) {
    return Object.assign(new TypeError(`Limiter is abstract: ${instead}`), { code: 'invalid_type' });
  }

  /**
   * `bytes` of encoded state, checked (see isUint8Array), as a copy the
   * backend reads (see bytesCopy): wasm-bindgen's glue cannot write past
   * it into the module's heap. An empty one is read by each backend as
   * `state_truncated`.
   */
  function stateBytes(bytes) {
    if (!isUint8Array(bytes)) badType('state', 'a Uint8Array');
    return bytesCopy(bytes);
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
    'Policy.add': ['by'],
    acquire: ['signal', 'timeoutMs'],
    'the server helpers': ['limiter', 'key', 'fields', 'cost', 'skip', 'ipv6Subnet'],
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
    // The copy is checked, not `options`: a Proxy may list other keys each time.
    const own = ownCopy(options);
    onlyKnown(own, OPTIONS[what], what);
    return own;
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

  /** napi returns a Uint8Array, wasm-bindgen too; a Buffer is turned into a plain Uint8Array. */
  function toUint8Array(bytes) {
    return Object.getPrototypeOf(bytes) === Uint8Array.prototype ? bytes : new Uint8Array(bytes);
  }

  /**
   * A key: a string, a number standing for its decimal string (42 and '42'
   * are one key), or a Uint8Array standing for the string whose UTF-8 it
   * is (see bytesKey: a ByteKey when it is not UTF-8), as Python takes str,
   * int and bytes. A string is asked first, and alone: the hot path.
   */
  function keyOf(key) {
    if (typeof key === 'string') return key;
    if (typeof key === 'number') return numberKey(key, 'key');
    if (isUint8Array(key)) return bytesKey(key);
    return badType('key', 'a string, a number or a Uint8Array');
  }

  /**
   * keyOf, as the backend takes it outside the scratch (see keyArg): for
   * the keyed methods that pass their key on as an argument. (The hot ones
   * check it on their string path only: see keyedOp.)
   */
  function keyArgOf(key) {
    return keyArg(keyOf(key), 'key');
  }

  /** Reads `clock()` as a number of milliseconds, naming the clock for what it returns. */
  function readClock(clock) {
    const now = clock();
    if (typeof now !== 'number') invalidType(`\`clock\` must return a number of milliseconds, not ${typeName(now)}`);
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

  /** A request that cannot be served: `code` is 'rate_limited', `retryAfterMs` when to ask again. */
  class RateLimited extends Error {
    constructor(message, retryAfterMs) {
      super(message);
      this.name = 'RateLimited';
      this.code = 'rate_limited';
      this.retryAfterMs = retryAfterMs;
    }
  }

  return {
    B,
    out,
    yes,
    tryAcquireOp,
    peekOp,
    reserveOp,
    noopOp,
    keyedOp,
    policyOp,
    fitPolicy,
    decision,
    abstract,
    notThis,
    thisChecks,
    stateBytes,
    badType,
    known,
    number,
    defaultClock,
    handles,
    keyedHandles,
    policyHandles,
    toUint8Array,
    keyOf,
    keyArgOf,
    readClock,
    hotNow,
    nowFrom,
    typeName,
    decisionFields,
    takenAt,
    fromFlat,
    reservation,
    cancelOnce,
    RateLimited,
  };
};
