'use strict';
// `ratekeeper/redis`: limits shared by every process and host, kept in Redis.
//
// `RedisLimiter` (one limiter per key, as `KeyedLimiter`) and `RedisPolicy`
// (several limits, all or nothing, as `Policy`) decide on Redis through the
// user's own client: ioredis (`Redis` or `Cluster`) or node-redis (`redis`
// v4 and later, `createClient` or `createCluster`). Each decision is one
// EVALSHA of the script the core ships (`REDIS_SCRIPT`, protocol 1:
// core/redis/PROTOCOL.md), which decides exactly as the in-process classes
// do, in integer microseconds. Keys, ARGV and decisions are the same as the
// Python client's (ratekeeper.redis), so Node and Python processes share
// limits.
//
// Node only: the wasm build has no RESP client (browsers and workers cannot
// open TCP connections to Redis).

const { createHash } = require('node:crypto');
const api = require('../index.js');
const { numberKey, isUint8Array, bytesCopy, bytesKey, inspected, inspectedOther, inspectSymbol, onlyKnown, isSignal, listen, unlisten, abortedNow, reasonOf, configData, ownCopy, BRANDS, textOf, hasField } = require('./api.cjs');

const { TokenBucket, Gcra, FixedWindow, SlidingWindowCounter, SlidingWindowLog, KeyedLimiter, Policy, RateLimited } = api;
// What an argument is, by the classes' brand checks (as they check each
// other), never `instanceof`: that takes a Proxy of a limiter (a reactive
// wrapper) or an object inheriting from one, whose getters and methods then
// threw an uncoded TypeError (a private field read through `this`).
const { isLimiter, isKeyed, isPolicy, takeStores } = api[BRANDS];

/** The script EVALSHA runs (core/redis/ratekeeper.lua): see redisScript. */
const REDIS_SCRIPT = redisScript();

/**
 * The script, as the native addon holds it (the core embeds it); where no
 * addon loads (macOS, Windows, arm64, musl: index.js fell back to the
 * WebAssembly build, whose .wasm leaves it out, being for browsers too), the
 * copy the package ships beside this file (scripts/package.sh), so that
 * this module loads wherever 'ratekeeper' does. (It threw the addon's error
 * there, which told to reinstall.) Without either (a checkout, not packed),
 * the addon's error.
 */
function redisScript() {
  try {
    return require('../native.js').REDIS_SCRIPT;
  } catch (error) {
    try {
      return require('node:fs').readFileSync(require('node:path').join(__dirname, 'ratekeeper.lua'), 'utf8');
    } catch {
      throw error;
    }
  }
}

/** The SHA-1 of the script: what EVALSHA calls. */
const REDIS_SCRIPT_SHA = createHash('sha1').update(REDIS_SCRIPT).digest('hex');
/** The largest value a configuration may let the script's arithmetic reach (µs or units). */
const MAX_EXACT = 2 ** 51;
/** The latest caller time: 2^52 µs after the Unix epoch (year 2112). */
const MAX_NOW = 2 ** 52;
/** The longest window and the longest wait: 2^50 µs (35 years). */
const MAX_SPAN = 2 ** 50;
/** The most costs sent in one batch. */
const MAX_BATCH = 1024;
/**
 * Round trips in flight per hot key; calls beyond wait and go as one batch.
 * (Two overlap the client's parsing with the server's work, but measured no
 * faster: bench/redis_hot_key.cjs.)
 */
const IN_FLIGHT = 1;
/** The default bound on one round trip, in milliseconds. */
const DEFAULT_COMMAND_TIMEOUT_MS = 1000;

/** The options both Redis classes take (checked by onlyKnown: `onErorr` is refused). */
const STORE_OPTIONS = ['prefix', 'clock', 'onError', 'batching', 'commandTimeoutMs'];

// Messages name the argument in backticks, as the in-process classes and
// the Python client write them: "`cost` must be ...", "`calendar`: ...".
function typeError(name, expected) {
  const error = new TypeError(`\`${name}\` must be ${expected}`);
  error.code = 'invalid_type';
  return error;
}

function rangeError(name, message, code = 'invalid_value') {
  const joined = /^(must|lacks|is) /.test(message) ? ' ' : ': ';
  const error = new RangeError(`\`${name}\`${joined}${message}`);
  error.code = code;
  return error;
}

/**
 * A limiter's duration in milliseconds as whole microseconds, at least 1.
 * `ms * 1000` may miss a whole number by its rounding (1.1 ms: 1100.0000000000002),
 * by some 2^-52 of it; anything further, beyond 10^-4 µs per 1000 s (the
 * Python client's bound), is a fraction of a microsecond. (2^-40 of it, the
 * bound before, let half a microsecond through from a window of a week.)
 */
function micros(ms, name) {
  const us = Math.round(ms * 1000);
  if (!(us >= 1) || Math.abs(ms * 1000 - us) > 1e-4 * Math.max(1, ms * 1e-6)) {
    throw rangeError(name, `must be a whole number of microseconds on Redis, not ${ms} ms`);
  }
  return us;
}

/**
 * Milliseconds (an instant or a wait) as the nearest whole µs, halves up, to
 * the float's own value, as the core reads a float and the Python client
 * reads one: `Math.round(ms * 1000)` rounds the product first (to a quarter
 * of a µs at epoch milliseconds), and sent 1790000990486.8064 ms as ...807
 * µs, not ...806. Only a product within its rounding of a half can round
 * otherwise than the exact value: that one is computed exactly.
 */
function wholeMicros(ms) {
  const scaled = ms * 1000;
  const nearest = Math.round(scaled);
  if (Math.abs(Math.abs(scaled - nearest) - 0.5) > Math.abs(scaled) * 2 ** -52) return nearest;
  // ms = mantissa * 2^exponent exactly; µs = floor(mantissa * 1000 * 2^exponent + 1/2).
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, ms);
  const bits = view.getBigUint64(0);
  const biased = Number((bits >> 52n) & 0x7ffn);
  const mantissa = (bits & ((1n << 52n) - 1n)) | (biased === 0 ? 0n : 1n << 52n);
  const exponent = (biased === 0 ? 1 : biased) - 1075;
  const units = mantissa * 1000n;
  if (exponent >= 0) return Number(units << BigInt(exponent));
  const half = 1n << BigInt(-exponent - 1);
  return Number((units + half) >> BigInt(-exponent));
}

function exact(value, name, what, max = MAX_EXACT) {
  if (value > max) {
    throw rangeError(name, `${what} is ${value}, above 2^${Math.log2(max)} (the limit of exact arithmetic on Redis)`, 'overflow');
  }
}

function gcd(a, b) {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

/**
 * Throws, naming `name`, when `value` looks like a limiter, keyed limiter or
 * policy but is none of this module's: one of the other build (under the
 * `browser` condition, Jest with jsdom say, 'ratekeeper' is the WebAssembly
 * build, and this module always the native one), of another copy of the
 * package, or a Proxy of one.
 */
function nativeOnly(value, name) {
  if (isLimiter(value) || isKeyed(value) || isPolicy(value)) return;
  let kind;
  try {
    kind = typeof value?.tryAcquire === 'function' ? value.constructor?.name : undefined;
  } catch {
    return; // a revoked Proxy, say: refused as what it is not, by the caller
  }
  if (RATEKEEPER_CLASSES.includes(kind)) {
    throw typeError(
      name,
      `a ${kind} of the native build this module decides with, itself (not a Proxy of one): build it with the classes 'ratekeeper/redis' exports (under the \`browser\` condition, 'ratekeeper' is the WebAssembly build)`,
    );
  }
}
const RATEKEEPER_CLASSES = ['Gcra', 'TokenBucket', 'LeakyBucket', 'FixedWindow', 'SlidingWindowCounter', 'SlidingWindowLog', 'KeyedLimiter', 'Policy'];

/** The script's configuration of one in-process limiter: `{ args, limit, limiter }`. */
function limitOf(limiter) {
  if (!isLimiter(limiter)) {
    nativeOnly(limiter, 'limiter');
    throw typeError('limiter', 'a Gcra, TokenBucket, FixedWindow, SlidingWindowCounter or SlidingWindowLog');
  }
  const algorithm = limiter.algorithm;
  let args;
  if (algorithm === 'gcra') {
    const interval = micros(limiter.emissionIntervalMs, 'emissionIntervalMs');
    exact(limiter.burst * interval, 'burst', 'burst * emissionIntervalMs (µs)');
    args = ['gcra', limiter.burst, interval];
  } else if (algorithm === 'token_bucket') {
    const bands = limiter.bandwidths;
    args = ['token_bucket', bands.length];
    for (const band of bands) {
      if (band.refill !== 'greedy') throw rangeError('refill', "only greedy token buckets are supported on Redis, not 'interval'");
      if (band.initialTokens !== band.capacity) throw rangeError('initialTokens', 'token buckets on Redis start full');
      const period = micros(band.refillPeriodMs, 'refillPeriodMs');
      exact(band.capacity * (period / gcd(band.refillTokens, period)), 'capacity', 'the time to refill the capacity (1/refillTokens µs)');
      exact(band.refillTokens, 'refillTokens', 'refillTokens');
      args.push(band.capacity, band.refillTokens, period);
    }
  } else if (algorithm === 'fixed_window' || algorithm === 'sliding_window_counter' || algorithm === 'sliding_window_log') {
    const window = micros(limiter.windowMs, 'windowMs');
    exact(window, 'windowMs', 'the window (µs)', MAX_SPAN);
    // Counts, like times, are numbers in the script.
    exact(limiter.limit, 'limit', 'limit');
    if (algorithm === 'sliding_window_counter') exact(limiter.limit * window, 'limit', 'limit * windowMs (µs)');
    if (limiter.calendar !== null) {
      throw rangeError('calendar', 'calendar windows are not supported on Redis');
    }
    args = [algorithm, limiter.limit, window];
  } else {
    throw rangeError(
      'algorithm',
      `${algorithm} is not supported on Redis (gcra, token_bucket, fixed_window, sliding_window_counter and sliding_window_log are)`,
    );
  }
  return { args, limit: limiter.limit };
}

// Rate strings, read as the core reads them (the in-process Policy has
// checked them first): a count, '/' or 'per', a multiple, a unit.
const UNITS = { second: 1, minute: 60, hour: 3600, day: 86400, month: 30 * 86400, year: 360 * 86400 };
// Space as the core reads it (char::is_whitespace and U+001C to U+001F),
// which JS's \s alone does not cover (U+001C to U+001F, U+0085); \s's
// U+FEFF, which the core refuses, never gets here.
const RATE = (() => {
  const space = '[\\s\\x1c-\\x1f\\x85]*';
  return new RegExp(`^${space}(\\d+)${space}(?:\\/|[pP][eE][rR])${space}(\\d*)${space}([A-Za-z]+)${space}$`);
})();

function parseRates(text) {
  return text.split(/[;,|]/).map((item) => {
    const match = RATE.exec(item);
    const word = match === null ? '' : match[3].toLowerCase();
    const unit = UNITS[word] ?? (word.endsWith('s') ? UNITS[word.slice(0, -1)] : undefined);
    if (unit === undefined) throw rangeError('rate', `cannot read ${JSON.stringify(item)}`, 'invalid_syntax');
    return { amount: Number(match[1]), periodMs: Number(match[2] || 1) * unit * 1000 };
  });
}

/** The in-process limiter a policy configuration's limit describes (as the core's LimitConfig::limiter). */
function limiterOfRate(algorithm, rate, burst) {
  const rates = parseRates(rate);
  const [{ amount, periodMs }] = rates;
  switch (algorithm) {
    case 'token_bucket':
      return TokenBucket.fromBandwidths(
        rates.map((r, i) => ({ capacity: i === 0 && burst != null ? burst : r.amount, refillTokens: r.amount, refillPeriodMs: r.periodMs })),
      );
    case 'gcra':
      return Gcra.perPeriod({ burst: burst ?? amount, tokens: amount, periodMs });
    case 'fixed_window':
      return new FixedWindow({ limit: amount, windowMs: periodMs });
    case 'sliding_window_counter':
      return new SlidingWindowCounter({ limit: amount, windowMs: periodMs });
    case 'sliding_window_log':
      return new SlidingWindowLog({ limit: amount, windowMs: periodMs });
    default:
      throw rangeError(
        'algorithm',
        `${algorithm} is not supported on Redis (gcra, token_bucket, fixed_window, sliding_window_counter and sliding_window_log are)`,
      );
  }
}

/** Every limit of what `Policy` takes, `{ name, by, args, limit }`, and the in-process policy (headers, checks). */
function policyLimits(config, algorithm, by) {
  // None is the in-process empty policy, to which `add` adds limits; a
  // RedisPolicy has no `add` (its limits are the script's arguments, fixed
  // here), so it would admit everything for ever: refused as `{ limits: [] }`
  // is, and as Python refuses `None`.
  if (config === undefined || config === null) throw rangeError('config', 'a policy on Redis needs at least one limit', 'zero_value');
  if (config !== null && typeof config === 'object' && Array.isArray(config.limits)) {
    config.limits.forEach((item, i) => nativeOnly(item?.limiter, `limits[${i}].limiter`));
  }
  const local = new Policy(config, { ...(algorithm === undefined ? {} : { algorithm }), ...(by === undefined ? {} : { by }) });
  let limiters;
  if (typeof config === 'string' && !config.trimStart().startsWith('{')) {
    limiters = config.split(/[;,|]/).map((rate) => limiterOfRate(algorithm ?? 'token_bucket', rate, undefined));
  } else if (typeof config === 'object' && Array.isArray(config.limits) && config.limits.some((l) => l?.limiter !== undefined)) {
    // Configured limiters (each its own field, as Policy reads them). A
    // KeyedLimiter, as Policy takes it: its limiter's configuration, keyed by the item's `by`.
    limiters = config.limits.map(({ limiter }) => (isKeyed(limiter) ? limiter.limiter : limiter));
  } else {
    // The data Policy read (its own fields, through JSON: a BigInt or boxed
    // number as the number, a toJSON's answer), not the object as it is,
    // whose inherited fields Policy never saw.
    limiters = configData(config).limits.map((item) => {
      if (item.calendar != null) throw rangeError('calendar', 'calendar windows are not supported on Redis');
      return limiterOfRate(item.algorithm ?? 'token_bucket', item.rate, item.burst);
    });
  }
  const limits = local.limits.map(({ name, by: fields }, i) => ({ name, by: fields, ...limitOf(limiters[i]) }));
  if (limits.length === 0) throw rangeError('config', 'a policy on Redis needs at least one limit', 'zero_value');
  return { local, limits };
}

/**
 * `part` (a string, or a Buffer of bytes that are not UTF-8) as a key writes
 * it: `<length in UTF-8 bytes>:<part>`, so that parts side by side read back one way.
 */
function counted(part) {
  if (typeof part === 'string') return `${Buffer.byteLength(part)}:${part}`;
  return Buffer.concat([Buffer.from(`${part.length}:`), part]);
}

/**
 * A key part: a string, a number standing for its decimal string, or a
 * Uint8Array standing for the string whose UTF-8 it is (as in-process, and
 * as Python's bytes), a Buffer of its bytes when they are not UTF-8. A
 * string with a lone surrogate is refused, as in-process (see textOf): the
 * client would send U+FFFD in its place, two keys as one.
 */
function keyPart(value, name) {
  if (typeof value === 'string') return textOf(value, name);
  if (typeof value === 'number') return numberKey(value, name);
  if (isUint8Array(value)) {
    const key = bytesKey(value);
    return typeof key === 'string' ? key : Buffer.from(key.bytes.buffer, key.bytes.byteOffset, key.bytes.byteLength);
  }
  throw typeError(name, 'a string, a number or a Uint8Array');
}

/**
 * `parts` (strings and Buffers) as one key: a string when every part is
 * one, else a Buffer (a key holding bytes that are not UTF-8).
 */
function joined(parts) {
  if (parts.every((part) => typeof part === 'string')) return parts.join('');
  return Buffer.concat(parts.map((part) => (typeof part === 'string' ? Buffer.from(part) : part)));
}

/**
 * What finds the hot-key queue of `key` (see acquireOne): the key itself,
 * or a Buffer's bytes, as Latin-1, behind a lone surrogate, which no string
 * key holds (see textOf): one queue per key, never one for two keys.
 */
function keyId(key) {
  return typeof key === 'string' ? key : `\uDC00${key.toString('latin1')}`;
}

/** One of 256 marks for a Redis key, under which its resets are counted (FNV-1a of keyId). */
function markOf(key) {
  const id = keyId(key);
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193);
  return h & 255;
}

/**
 * Sends a command (an array of strings, and Buffers for keys of bytes that
 * are not UTF-8) with the user's client: ioredis or
 * node-redis. `key` is the command's first key, which a node-redis cluster
 * routes by (ioredis's Cluster finds it in the command itself).
 */
function commandSender(client) {
  if (client !== null && typeof client === 'object') {
    // ioredis (Redis and Cluster): `call(name, ...args)`; its `sendCommand` takes a Command object.
    if (typeof client.call === 'function' && typeof client.evalsha === 'function') {
      // The arguments as one array (ioredis flattens it), not spread: a
      // batch of some 125,000 costs spread overflows V8's stack.
      return (command) => client.call(command[0], command.slice(1));
    }
    // node-redis v4 in legacyMode: its sendCommand takes a callback (and
    // returns nothing); the promise API is under `v4`.
    // (v4's `v4` getter throws outside legacyMode.)
    if (client.options?.legacyMode === true && typeof client.v4?.sendCommand === 'function') return commandSender(client.v4);
    if (typeof client.sendCommand === 'function') {
      // node-redis v4 and later, `createCluster`: `sendCommand(firstKey, isReadonly, args)`.
      if (typeof client.getSlotRandomNode === 'function') {
        return (command, key) => client.sendCommand(key, false, command);
      }
      // node-redis v4 and later, `createClient`: `sendCommand([name, ...args])`.
      return (command) => client.sendCommand(command);
    }
  }
  throw typeError('client', 'an ioredis client or a node-redis (redis v4+) client or cluster');
}

/** A script's reply as numbers: an array, or one string of integers ('text' mode, PROTOCOL.md). */
function integers(reply) {
  const numbers = Array.isArray(reply) ? reply.map(Number) : typeof reply === 'string' || Buffer.isBuffer(reply) ? String(reply).split(' ').map(Number) : [];
  if (numbers.length === 0 || !numbers.every(Number.isSafeInteger)) {
    // Not the script's reply (a client that resolves to something else): not
    // an outage that onError may hide.
    const shown = typeof reply === 'string' ? reply.slice(0, 80) : String(reply).slice(0, 80);
    const error = new TypeError(`ratekeeper: the client resolved the script's call to ${shown}, not its reply of integers`);
    error.code = 'invalid_reply';
    throw error;
  }
  return numbers;
}

/**
 * An error reply that no retry mends, which onError must not hide: the
 * script's own (a bug or a configuration it refuses), a NOPERM (the ACL user
 * may not run the script, or a command the script calls: Redis 7.0 words
 * that one "can't run this command"), a WRONGTYPE (a key of the limiter's
 * holds another type), the script failing on a key's value it did not
 * write (`user_script:<line>:`). Not a fault of the store's reach.
 */
function isScriptError(error) {
  return error instanceof Error && /^(ERR .*)?ratekeeper:|NOPERM|can't run this command|WRONGTYPE|user_script:\d+:/.test(error.message ?? '');
}

/** Rejects with a TimeoutError after `ms`; the late answer, if any, is dropped (and its error caught). */
function within(promise, ms) {
  if (ms === Infinity) return promise;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new DOMException(`Redis did not answer within ${ms} ms`, 'TimeoutError')), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

/** The longest delay timers take (2^31 - 1 ms, about 24.8 days): a longer one fires at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Resolves after `ms`, in timers of at most MAX_TIMER_MS; rejects with `signal`'s reason when it aborts. */
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    // Already aborted: no 'abort' event will come.
    if (signal !== undefined && signal.aborted) {
      reject(signal.reason);
      return;
    }
    let timer;
    const onAbort = () => {
      clearTimeout(timer);
      // A getter's throw escaped the listener, leaving the wait pending for ever.
      reject(reasonOf(signal));
    };
    const wait = (left) => {
      timer = setTimeout(() => {
        if (left > MAX_TIMER_MS) return wait(left - MAX_TIMER_MS);
        if (signal !== undefined) unlisten(signal, onAbort);
        resolve();
      }, Math.min(left, MAX_TIMER_MS));
    };
    // Listened to first: a signal whose addEventListener throws (a
    // polyfill's) rejects with its error, leaving no timer to hold the
    // process for the rest of the wait.
    if (signal !== undefined) listen(signal, onAbort);
    wait(ms);
  });
}

/**
 * `promise`, or `signal`'s reason as soon as it aborts; what `promise` gives
 * after that goes to `late` (its rejection is dropped).
 */
function abortable(promise, signal, late) {
  if (signal === undefined) return promise;
  return new Promise((resolve, reject) => {
    let done = false;
    // Rejects with `reason` at once; the answer, when it comes, goes to `late`.
    const giveUp = (reason) => {
      if (done) return;
      done = true;
      promise.then(late, () => undefined);
      reject(reason);
    };
    const onAbort = () => giveUp(reasonOf(signal));
    // Read without throwing (a throw reads as not aborted, as the in-process
    // waiters read it): a getter that threw here dropped the booking under
    // way, and on its reply escaped as an unhandled rejection, the acquire
    // pending for ever. The sleep that follows reads it again, and fails.
    if (abortedNow(signal)) return onAbort();
    let listening = true;
    try {
      listen(signal, onAbort);
    } catch {
      // Never listened to (a polyfill's signal): the round trip goes on
      // unlistened, as the in-process acquire, which books at once, listens
      // only to wait for its slot. Rejecting here failed an acquire whose
      // units were granted at once, and in-process resolves; the sleep, when
      // a wait is needed, listens again and fails as in-process fails (its
      // booking given back). An abort meanwhile is read on the reply.
      listening = false;
    }
    promise.then(
      (value) => {
        if (listening) unlisten(signal, onAbort);
        if (done) return;
        done = true;
        // Aborted with no event (an already-aborted signal's reason read late).
        if (abortedNow(signal)) {
          late(value);
          reject(reasonOf(signal));
        } else resolve(value);
      },
      (error) => {
        if (listening) unlisten(signal, onAbort);
        if (done) return;
        done = true;
        reject(error);
      },
    );
  });
}

function checkCost(cost, limit) {
  if (cost === undefined || cost === null) return 1;
  if (typeof cost !== 'number') throw typeError('cost', 'a number');
  if (!Number.isInteger(cost) || cost < 0) throw rangeError('cost', `must be a whole number of units, at least 0, not ${cost}`);
  // Checked before any limit, as every in-process method checks it: a cost
  // no JS number holds exactly is invalid_value there, not cost_exceeds_limit.
  if (!Number.isSafeInteger(cost)) throw rangeError('cost', 'must be a safe integer (at most 2^53 - 1)');
  if (cost > limit) throw rangeError('cost', `${cost} is more than the limit ${limit}`, 'cost_exceeds_limit');
  return cost;
}

/**
 * Gives back, once (a `cancel()` too), what a reservation booked for a
 * waiting acquire that does not go ahead (aborted, or a reply nobody waits
 * for any more): on a bucket limit (GCRA, token bucket), only while the
 * booking is still the latest on its key, else nothing (its slot goes
 * unused); on a window, where it was counted; to the `onError` limiter, as
 * `cancel()` gives it back. Resolves when done; rejects as `cancel()` does.
 */
let giveBackLatest;

/**
 * A booking of `reserve`: the in-process Reservation's fields (`ok`,
 * `waitMs`, `atMs`, `cost`, `decision`) plus `fromStore`, and `cancel()`,
 * as Python's RedisReservation has.
 */
class RedisReservation {
  #cancel;
  #release;

  constructor(fields, cancel, release = cancel) {
    Object.assign(this, fields);
    this.#cancel = cancel;
    this.#release = release;
  }

  static {
    giveBackLatest = (r) => {
      const release = r.#release;
      r.#cancel = r.#release = null;
      return release === null ? Promise.resolve() : release();
    };
  }

  /**
   * Gives an unused booking back, once (later calls do nothing): to Redis
   * at its slot, or to the `onError` limiter that admitted it, at the
   * instant it was taken there (its own reservation's `cancel()`). As it
   * is, wherever the booking stands (on a bucket, cancel the latest first;
   * an aborted acquire gives back with giveBackLatest instead). Resolves
   * when done; when Redis cannot be reached the booking stays (it expires
   * with its key) and the promise still resolves. Rejects only with the
   * script's own errors (a key of another type, NOPERM).
   */
  cancel() {
    const cancel = this.#cancel;
    this.#cancel = this.#release = null;
    return cancel === null ? Promise.resolve() : cancel();
  }
}

/**
 * What RedisLimiter and RedisPolicy share: keys, arguments, replies, the
 * fault policy, hot-key batching. `kind` is 'limiter' or 'policy'.
 */
class Store {
  constructor(client, limits, options, kind) {
    this.send = commandSender(client);
    this.limits = limits;
    // Names are written as values are, `<length>:<name>`, so that no name
    // ending like a value (`a:2:x`) shares a key with another name's.
    this.names = limits.map((l) => counted(l.key ?? l.name));
    this.kind = kind;
    let prefix = 'ratekeeper:';
    let clock = null;
    let onError = 'closed';
    let batching = true;
    let commandTimeoutMs = DEFAULT_COMMAND_TIMEOUT_MS;
    if (options !== undefined && options !== null) {
      if (typeof options !== 'object') throw typeError('options', 'an object');
      const what = kind === 'policy' ? 'RedisPolicy' : 'RedisLimiter';
      onlyKnown(options, kind === 'policy' ? [...STORE_OPTIONS, 'algorithm', 'by'] : STORE_OPTIONS, what);
      if (options.prefix !== undefined) {
        if (typeof options.prefix !== 'string') throw typeError('prefix', 'a string');
        // Keys carry a hash tag, {...}, so that a request's keys share a
        // Cluster slot: a brace in the prefix would be the tag instead.
        if (/[{}]/.test(options.prefix)) throw rangeError('prefix', `must not contain '{' or '}' (keys carry their own hash tag): ${options.prefix}`);
        // A policy with a global limit is tagged by its prefix, and Redis
        // reads an empty tag, {}, as none: its keys would span slots.
        if (options.prefix === '') throw rangeError('prefix', 'must not be empty (it is the hash tag of a policy with a global limit)');
        prefix = textOf(options.prefix, 'prefix');
      }
      if (options.clock !== undefined && options.clock !== null) {
        if (typeof options.clock !== 'function') throw typeError('clock', 'a function');
        clock = options.clock;
      }
      if (options.onError !== undefined) {
        const f = options.onError;
        // Besides a plain Limiter, the in-process class that decides for the
        // same target: a key (RedisLimiter), or a request (RedisPolicy).
        const [keyed, Keyed] = kind === 'policy' ? [isPolicy, 'Policy'] : [isKeyed, 'KeyedLimiter'];
        nativeOnly(f, 'onError');
        if (!(f === 'open' || f === 'closed' || isLimiter(f) || keyed(f))) {
          throw typeof f === 'string' ? rangeError('onError', `must be 'open', 'closed' or an in-process Limiter or ${Keyed}, not ${JSON.stringify(f)}`) : typeError('onError', `'open', 'closed' or an in-process Limiter or ${Keyed}`);
        }
        onError = f;
      }
      if (options.batching !== undefined) {
        if (typeof options.batching !== 'boolean') throw typeError('batching', 'a boolean');
        batching = options.batching;
      }
      if (options.commandTimeoutMs !== undefined) {
        const t = options.commandTimeoutMs;
        if (typeof t !== 'number') throw typeError('commandTimeoutMs', 'a number');
        if (!(t > 0)) throw rangeError('commandTimeoutMs', `must be more than 0 ms, not ${t}`);
        // A timer's longest delay; a longer one fires at once (Infinity waits for ever).
        if (t > MAX_TIMER_MS && t !== Infinity) throw rangeError('commandTimeoutMs', `must be at most 2^31 - 1 ms (or Infinity), not ${t}`);
        commandTimeoutMs = t;
      }
    }
    this.prefix = prefix;
    this.clock = clock;
    this.onError = onError;
    // The fields a fallback Policy's limits are keyed by ([field, limit]):
    // every request must have them too, so that one lacking them fails at
    // once, not only while Redis is down (as in Python). Read again by
    // fallbackFieldsNow() once the Policy has had limits added.
    this.fallbackFields = [];
    this.fallbackSize = 0;
    this.batching = batching;
    this.commandTimeoutMs = commandTimeoutMs;
    this.limit = Math.min(...limits.map((l) => l.limit));
    // Fields every limit is keyed by: the hash tag, so that a request's keys share a slot.
    this.common = limits[0].by.filter((f) => limits.every((l) => l.by.includes(f)));
    // Every limit's index, for keys() (see keysOf).
    this.every = limits.map((_, i) => i);
    this.config = [limits.length];
    for (const l of limits) this.config.push(...l.args);
    this.queues = new Map();
    // Per mark of a Redis key (see markOf), the resets that found it (see
    // forgot): a call made before one of its keys' gives nothing back.
    this.resets = new Array(256).fill(0);
  }

  /**
   * Counts a reset of `keys` whose UNLINK found `held` of them (or may have:
   * one that rejected may have run): the store forgot their bookings and
   * units, and a key, used again, may take the same slots (or, on the
   * callers' clock, leave the same marks) anew: given back, a call made
   * before would free a unit of those (two requests at once from a limit of
   * one). As in-process, a call made before a reset of one of its keys gives
   * nothing back (see givesBack); counted per mark, two keys sharing one
   * count as one, which gives back less, never more. A reset by another
   * process (or limiter) is not seen here: see PROTOCOL.md, "Guarded refund".
   */
  forgot(keys, held) {
    if (held > 0) for (const mark of new Set(keys.map(markOf))) this.resets[mark] += 1;
  }

  /**
   * The resets counted on the marks of `keys`: a sum of counts that only
   * grow, so it changes with any of them. Read before a call is sent: a
   * reset meanwhile counts as after it.
   */
  resetsOf(keys) {
    let sum = 0;
    for (const mark of new Set(keys.map(markOf))) sum += this.resets[mark];
    return sum;
  }

  /** Whether a call on `keys`, sent when `resetsOf(keys)` was `resets`, may still give back: no reset found one of them since. */
  givesBack(keys, resets) {
    return this.resetsOf(keys) === resets;
  }

  /** UNLINK of `keys` for a reset: how many Redis held; counted (see forgot), a rejection as one that may have run. */
  async unlink(keys) {
    let held;
    try {
      held = Number(await within(this.send(['UNLINK', ...keys], keys[0]), this.commandTimeoutMs));
    } catch (error) {
      this.forgot(keys, 1);
      throw error;
    }
    this.forgot(keys, held);
    return held;
  }

  /**
   * Each limit's key: `prefix{tag}:name:key`, the tag shared by all, the name
   * and each value of the key written `<length>:<bytes>` (as the Python client builds them).
   */
  keys(request) {
    for (const [field, name] of this.fallbackFieldsNow()) {
      if (!hasField(request, field)) throw rangeError('request', `lacks the field ${JSON.stringify(field)} that onError's limit ${JSON.stringify(name)} is keyed by`);
    }
    return this.keysOf(request, this.every);
  }

  /**
   * The keys `reset(request)` unlinks: the request's key in every limit
   * keyed by fields it all gives, as an in-process Policy resets (never a
   * global limit's).
   */
  resetKeys(request) {
    const reached = [];
    for (let i = 0; i < this.limits.length; i++) if (reaches(this.limits[i], request)) reached.push(i);
    if (reached.length === 0) throw rangeError('request', 'lacks a field of each limit keyed by fields, so it resets none');
    return this.keysOf(request, reached);
  }

  /**
   * The keys of the limits at `indices` for `request`, which must give
   * their fields; as Buffers when some value is bytes that are not UTF-8.
   */
  keysOf(request, indices) {
    const values = new Map();
    let bytes = false;
    for (const i of indices) {
      const limit = this.limits[i];
      for (const field of limit.by) {
        if (values.has(field)) continue;
        if (!hasField(request, field)) {
          throw rangeError('request', `lacks the field ${JSON.stringify(field)} that limit ${JSON.stringify(limit.name)} is keyed by`);
        }
        const part = keyPart(request[field], this.kind === 'limiter' ? 'key' : `request.${field}`);
        if (typeof part !== 'string') bytes = true;
        values.set(field, counted(part));
      }
    }
    // No field in common (a global limit): the whole policy on the slot of
    // its prefix. A limit keyed by fields has every field in common.
    const parts = this.common.map((f) => values.get(f));
    if (bytes) {
      // A value of bytes that are not UTF-8: the keys as Buffers, as the Python client sends bytes.
      const tag = parts.length > 0 ? joined(parts) : this.prefix;
      return indices.map((i) => joined([this.prefix, '{', tag, '}:', this.names[i], ':', ...this.limits[i].by.map((f) => values.get(f))]));
    }
    const tag = parts.length > 0 ? parts.join('') : this.prefix;
    return indices.map((i) => `${this.prefix}{${tag}}:${this.names[i]}:${this.limits[i].by.map((f) => values.get(f)).join('')}`);
  }

  /**
   * `fallbackFields` of the fallback Policy's limits as they are now: one
   * `add`ed after construction keys it by fields too. A Policy only ever
   * gains limits, so its size tells when to read them again.
   */
  fallbackFieldsNow() {
    const f = this.onError;
    if (isPolicy(f) && f.size !== this.fallbackSize) {
      const limits = f.limits;
      this.fallbackFields = limits.flatMap(({ name, by }) => by.map((field) => [field, name]));
      this.fallbackSize = limits.length;
    }
    return this.fallbackFields;
  }

  /**
   * What `onError` decides for: the key, or the request's fields as they
   * are now. A fallback Policy reads them only once Redis has failed, after
   * the caller may have changed the request (one object reused for the next
   * call): as in-process, the fields are the call's.
   */
  target(target) {
    // A key that is an object is a Uint8Array (keys() refused any other), which the caller may write into meanwhile.
    if (this.kind === 'limiter') return typeof target === 'object' ? bytesCopy(target) : target;
    if (!isPolicy(this.onError) || target === undefined || target === null) return target ?? {};
    const fields = ownCopy(target);
    for (const field in fields) {
      if (typeof fields[field] === 'object' && isUint8Array(fields[field])) fields[field] = bytesCopy(fields[field]);
    }
    return fields;
  }

  /** ARGV's `now`: the caller's, in µs, or '' for the server's clock. */
  wireNow(nowMs, name = 'nowMs') {
    let now = nowMs;
    if (now === undefined || now === null) {
      if (this.clock === null) return '';
      now = this.clock();
      // What the clock gave: named as the in-process classes name it.
      name = 'clock()';
    }
    if (typeof now !== 'number') throw typeError(name, 'a number');
    if (!Number.isFinite(now) || now < 0) throw rangeError(name, `must be a finite number of milliseconds, at least 0, not ${now}`);
    const us = wholeMicros(now);
    if (us > MAX_NOW) throw rangeError(name, 'is more than 2^52 µs', 'overflow');
    return String(us);
  }

  /**
   * EVALSHA; on NOSCRIPT, SCRIPT LOAD and EVALSHA once more, then EVAL (on a
   * cluster, SCRIPT LOAD may reach another node than the key's). Not once
   * `abandoned()`: a NOSCRIPT that comes after the caller was answered
   * without Redis ends there, rather than sending a new decision nobody
   * waits for.
   */
  async evaluate(keys, args, abandoned = () => false) {
    const rest = [String(keys.length), ...keys, ...args.map(String)];
    const key = keys[0];
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.send(['EVALSHA', REDIS_SCRIPT_SHA, ...rest], key);
      } catch (error) {
        if (!(error instanceof Error) || !String(error.message).startsWith('NOSCRIPT') || abandoned()) throw error;
        if (attempt === 1) return this.send(['EVAL', REDIS_SCRIPT, ...rest], key);
      }
      await this.send(['SCRIPT', 'LOAD', REDIS_SCRIPT], key);
    }
  }

  /**
   * One round trip deciding `costs` in order (`targets[i]` is what the
   * fallback decides for). `settle`: each answer as `{ value }` or, when the
   * fallback threw for that target alone, `{ error }` (a hot key's batch
   * gathers callers of other requests, whose errors are their own).
   */
  async decide(targets, keys, mode, costs, nowMs, settle = false) {
    // 'text': the reply as one string of integers, read several times
    // faster than an array of them (PROTOCOL.md).
    const args = ['1', mode, this.wireNow(nowMs), ...this.config, costs.length, ...costs, 'text'];
    // A late reply's units go back with the marks that follow its decisions
    // (PROTOCOL.md, "Guarded refund"): on a bucket only while nothing was
    // taken since, where a plain refund handed the slot of a booking made
    // behind them to the next caller (two units at once from a burst of one).
    const n = this.limits.length;
    const taken = (numbers) => {
      const units = this.decisions(numbers, costs.length).reduce((sum, d, i) => sum + (d.allowed ? costs[i] : 0), 0);
      return units > 0 ? [units, numbers[0], numbers.slice(1 + costs.length * (n === 1 ? 6 : 6 + 5 * n))] : null;
    };
    const numbers = await this.ask(keys, args, mode === 'acquire' ? taken : null);
    if (numbers === null) {
      return costs.map((cost, i) => {
        if (!settle) return this.fallback(targets[i], cost, mode === 'peek');
        try {
          return { value: this.fallback(targets[i], cost, mode === 'peek') };
        } catch (error) {
          return { error };
        }
      });
    }
    const decisions = this.decisions(numbers, costs.length);
    return settle ? decisions.map((value) => ({ value })) : decisions;
  }

  /**
   * One script call: its reply as numbers, or null when Redis did not
   * answer within commandTimeoutMs or failed (the script's own errors
   * throw). The call may still run on the server (late, or sent again by
   * the client once it reconnects), and take what it decides, which nobody
   * uses: `onError` answered in its place. So when a late reply comes, what
   * `taken(numbers)` says it took (`[cost, at, marks]`, `at` in the script's
   * µs, `marks` the reply's, so that a bucket gives back only while nothing
   * was taken there since; or null for nothing; `taken` null: nothing to
   * give back) is refunded, never rejecting, unless a reset found one of
   * its keys since; and a late NOSCRIPT sends nothing more.
   */
  async ask(keys, args, taken) {
    let late = false;
    const resets = this.resetsOf(keys);
    const sent = this.evaluate(keys, args, () => late);
    try {
      return integers(await within(sent, this.commandTimeoutMs));
    } catch (error) {
      if (isScriptError(error) || error?.code === 'invalid_reply') throw error;
      late = true;
      if (taken !== null) {
        sent
          .then((reply) => {
            const took = taken(integers(reply));
            // Nothing once a reset found one of its keys since (see forgot).
            return took === null || !this.givesBack(keys, resets) ? undefined : this.refundAt(keys, took[0], String(took[1]), took[2]);
          })
          .catch(() => undefined);
      }
      return null;
    }
  }

  decisions(reply, count) {
    const n = this.limits.length;
    // A lone limit's own answer is the combined one, which the script does
    // not send twice: read it from there.
    const stride = n === 1 ? 6 : 6 + 5 * n;
    if (reply.length < 1 + count * stride) {
      const error = new TypeError(`ratekeeper: a reply of ${reply.length} integers for ${count} decisions of ${n} limits`);
      error.code = 'invalid_reply';
      throw error;
    }
    const out = new Array(count);
    for (let j = 0; j < count; j++) {
      const at = 1 + j * stride;
      const d = {
        allowed: reply[at] === 1,
        remaining: reply[at + 2],
        limit: reply[at + 3],
        retryAfterMs: reply[at + 4] / 1000,
        resetAfterMs: reply[at + 5] / 1000,
      };
      if (this.kind === 'policy') {
        d.deniedBy = reply[at + 1] === 0 ? null : this.limits[reply[at + 1] - 1].name;
        d.limits = this.limits.map((l, i) => {
          if (n === 1) {
            const { allowed, remaining, limit, retryAfterMs, resetAfterMs } = d;
            return { name: l.name, allowed, remaining, limit, retryAfterMs, resetAfterMs };
          }
          const k = at + 6 + 5 * i;
          return {
            name: l.name,
            allowed: reply[k] === 1,
            remaining: reply[k + 1],
            limit: reply[k + 2],
            retryAfterMs: reply[k + 3] / 1000,
            resetAfterMs: reply[k + 4] / 1000,
          };
        });
      }
      d.fromStore = true;
      out[j] = d;
    }
    return out;
  }

  /** The decision `onError` makes when Redis cannot answer (in time). */
  fallback(target, cost, peek) {
    const f = this.onError;
    if (f === 'open' || f === 'closed') return this.openOrClosed(f === 'open');
    let d;
    try {
      d = isLimiter(f) ? (peek ? f.peek(cost) : f.tryAcquire(cost)) : peek ? f.peek(target, cost) : f.tryAcquire(target, cost);
    } catch (error) {
      // A cost above the fallback's limit (a stricter limit for an
      // outage, say), which it never admits: denied as 'closed' denies,
      // rather than thrown during an outage (as in Python).
      if (error?.code !== 'cost_exceeds_limit') throw error;
      return this.openOrClosed(false);
    }
    return this.answered(d);
  }

  /**
   * `fallback` for `reserve`: `{ d, booked }`, the decision and the
   * in-process fallback's Reservation when it booked (else null). It books
   * with its own `reserve` (`maxWaitMs` 0: now or not at all, as
   * tryAcquire takes), whose `cancel()` gives the units back at the
   * instant they were taken, on the fallback's clock: a refund at the time
   * of the cancel would free units of a later window than theirs (and let
   * through more than its limit there).
   */
  fallbackBooking(target, cost) {
    const f = this.onError;
    if (f === 'open' || f === 'closed') return { d: this.openOrClosed(f === 'open'), booked: null };
    let r;
    try {
      r = isLimiter(f) ? f.reserve(cost, 0) : f.reserve(target, cost, 0);
    } catch (error) {
      // As in `fallback`: a cost the fallback never admits is denied as 'closed'.
      if (error?.code !== 'cost_exceeds_limit') throw error;
      return { d: this.openOrClosed(false), booked: null };
    }
    if (!r.ok) return { d: this.answered(r.decision), booked: null };
    // What tryAcquire would have answered: the fallback as it is now, with
    // the units taken (a peek of nothing).
    return { d: this.answered(isLimiter(f) ? f.peek(0) : f.peek(target, 0)), booked: r };
  }

  /** What onError 'open' (`allowed`) or 'closed' answers. */
  openOrClosed(allowed) {
    // Denied: try again in a second, and (for the RateLimit header's `t`,
    // which should not say sooner) count a second to "reset" too.
    const wait = allowed ? 0 : 1000;
    const answer = (limit) => ({ allowed, remaining: allowed ? limit : 0, limit, retryAfterMs: wait, resetAfterMs: wait });
    const d = answer(this.limit);
    if (this.kind === 'policy') {
      d.deniedBy = allowed ? null : this.limits[0].name;
      d.limits = this.limits.map((l) => ({ name: l.name, ...answer(l.limit) }));
    }
    d.fromStore = false;
    return d;
  }

  /** The in-process fallback's decision `local` as this store's. */
  answered(local) {
    let d = local;
    if (this.kind === 'policy') {
      // Each limit as the fallback's limit of its name answered, when it
      // has one, else as the fallback answered as a whole: a fallback
      // Policy of other limits than these (fewer, more, in another order)
      // still gives one decision per limit, for the headers.
      const { allowed, remaining, limit, retryAfterMs, resetAfterMs } = local;
      const whole = { allowed, remaining, limit, retryAfterMs, resetAfterMs };
      const own = new Map(Array.isArray(local.limits) ? local.limits.map((l) => [l.name, l]) : []);
      const names = this.limits.map((l) => l.name);
      d = { ...whole, deniedBy: allowed ? null : names.includes(local.deniedBy) ? local.deniedBy : names[0] };
      d.limits = names.map((name) => {
        const o = own.get(name) ?? whole;
        return { name, allowed: o.allowed, remaining: o.remaining, limit: o.limit, retryAfterMs: o.retryAfterMs, resetAfterMs: o.resetAfterMs };
      });
    }
    d.fromStore = false;
    return d;
  }

  /**
   * tryAcquire: while IN_FLIGHT round trips for these keys are in flight,
   * later calls wait, and go together as one batch when one comes back.
   */
  acquireOne(target, keys, cost, nowMs) {
    if (!this.batching || (nowMs !== undefined && nowMs !== null)) {
      return this.decide([target], keys, 'acquire', [cost], nowMs).then((d) => d[0]);
    }
    const id = keys.length === 1 ? keyId(keys[0]) : keys.map(keyId).join('\n');
    return new Promise((resolve, reject) => {
      const entry = { target, cost, resolve, reject };
      let hot = this.queues.get(id);
      if (hot === undefined) {
        hot = { inFlight: 0, waiting: [] };
        this.queues.set(id, hot);
      }
      if (hot.inFlight < IN_FLIGHT && hot.waiting.length === 0) this.sendBatch(hot, id, keys, [entry]);
      else hot.waiting.push(entry);
    });
  }

  /** Sends `batch` as one call, answers each of its callers, then sends what waited meanwhile. */
  async sendBatch(hot, id, keys, batch) {
    hot.inFlight += 1;
    try {
      const answers = await this.decide(
        batch.map((e) => e.target),
        keys,
        'acquire',
        batch.map((e) => e.cost),
        undefined,
        true,
      );
      for (let i = 0; i < batch.length; i++) {
        if ('error' in answers[i]) batch[i].reject(answers[i].error);
        else batch[i].resolve(answers[i].value);
      }
      // Redis did not answer this round in time: the callers that queued
      // behind it are decided by `onError` now, rather than each waiting
      // for one more round to time out (up to twice commandTimeoutMs). The
      // next call asks Redis again. (Only a fallback throws.)
      if (answers.length > 0 && ('error' in answers[0] || !answers[0].value.fromStore)) {
        for (const e of hot.waiting.splice(0)) {
          // One fallback's error (an in-process limiter refusing the cost) is its caller's alone.
          try {
            e.resolve(this.fallback(e.target, e.cost, false));
          } catch (error) {
            e.reject(error);
          }
        }
      }
    } catch (error) {
      for (const e of batch) e.reject(error);
    }
    // The next batch goes once the callers just answered have run: one that
    // calls again at once joins it (the round trip stays ours until then),
    // rather than going alone while every other waits for its answer.
    setImmediate(() => {
      hot.inFlight -= 1;
      if (hot.waiting.length > 0) this.sendBatch(hot, id, keys, hot.waiting.splice(0, MAX_BATCH));
      else if (hot.inFlight === 0) this.queues.delete(id);
    });
  }

  /**
   * Books `cost` for the first moment every limit admits it, within
   * `maxWaitMs` (ms; at most 2^50 µs): the in-process Reservation
   * (`{ ok, waitMs, atMs, cost, decision }`, `atMs` in Unix ms on the clock
   * that decided) plus `fromStore`. When Redis cannot answer, `onError`
   * decides now: an in-process limiter books now or not at all, and
   * `cancel` gives its booking back there, at the instant it was taken.
   */
  async reserve(target, keys, cost, maxWaitMs, nowMs) {
    let maxWait = MAX_SPAN;
    if (maxWaitMs !== undefined && maxWaitMs !== null && maxWaitMs !== Infinity) {
      if (typeof maxWaitMs !== 'number') throw typeError('maxWaitMs', 'a number');
      if (!(maxWaitMs >= 0)) throw rangeError('maxWaitMs', `must be at least 0, not ${maxWaitMs}`);
      maxWait = Math.min(wholeMicros(maxWaitMs), MAX_SPAN);
    }
    const args = ['1', 'reserve', this.wireNow(nowMs), ...this.config, 1, cost, maxWait];
    // After `now, booked, wait` and the decision at now: each limit's mark,
    // which a guarded refund sends back as it is (PROTOCOL.md, "Guarded refund").
    const n = this.limits.length;
    const marksOf = (numbers) => numbers.slice(3 + (n === 1 ? 6 : 6 + 5 * n));
    // A late booking is nobody's: given back only while it is the latest.
    const booked = (numbers) => (numbers[1] === 1 ? [cost, numbers[0] + numbers[2], marksOf(numbers)] : null);
    const resets = this.resetsOf(keys);
    const numbers = await this.ask(keys, args, cost > 0 ? booked : null);
    if (numbers === null) {
      const { d, booked: local } = this.fallbackBooking(target, cost);
      const waitMs = d.allowed ? 0 : d.retryAfterMs;
      const fields = { ok: d.allowed, waitMs, atMs: Date.now() + waitMs, cost, decision: d.allowed ? null : d, fromStore: false };
      // Given back by the fallback's own booking, at the instant it was taken.
      return new RedisReservation(fields, local !== null && cost > 0 ? async () => local.cancel() : null);
    }
    const ok = numbers[1] === 1;
    // The decision at `now` follows `now, booked, wait`: read it as a batch reply of one.
    const [decision] = this.decisions(numbers.slice(2), 1);
    // The slot in the script's own µs, where `cancel` gives back.
    const slot = String(numbers[0] + numbers[2]);
    const fields = { ok, waitMs: numbers[2] / 1000, atMs: (numbers[0] + numbers[2]) / 1000, cost, decision: ok ? null : decision, fromStore: true };
    if (!(ok && cost > 0)) return new RedisReservation(fields, null);
    const marks = marksOf(numbers);
    // Nothing once a reset found one of its keys since the booking was sent (see forgot).
    return new RedisReservation(
      fields,
      async () => (this.givesBack(keys, resets) ? this.refundAt(keys, cost, slot) : undefined),
      async () => (this.givesBack(keys, resets) ? this.refundAt(keys, cost, slot, marks) : undefined),
    );
  }

  /**
   * acquire: books once (reserve within what is left of `timeoutMs`) and
   * sleeps until the slot; an abort gives the booking back. While Redis
   * cannot answer, retries after the fallback's `retryAfterMs`.
   */
  async wait(book, giveBack, label, options) {
    let signal;
    let timeoutMs = Infinity;
    if (options !== undefined && options !== null) {
      if (typeof options !== 'object') throw typeError('options', 'an object');
      onlyKnown(options, ['signal', 'timeoutMs'], 'acquire');
      signal = options.signal ?? undefined;
      // Listened to as the in-process acquire listens (checked as it checks):
      // found wanting only once the booking was made, the unit stayed booked.
      if (signal !== undefined && !isSignal(signal)) throw typeError('signal', 'an AbortSignal');
      if (options.timeoutMs !== undefined && options.timeoutMs !== null) {
        if (typeof options.timeoutMs !== 'number') throw typeError('timeoutMs', 'a number');
        if (!(options.timeoutMs >= 0)) throw rangeError('timeoutMs', `must be at least 0, not ${options.timeoutMs}`);
        timeoutMs = options.timeoutMs;
      }
    }
    const deadline = performance.now() + timeoutMs;
    for (let retry = false; ; retry = true) {
      if (signal !== undefined && signal.aborted) throw signal.reason;
      const left = Math.max(deadline - performance.now(), 0);
      const booking = book(left);
      // Aborted during the booking's round trip: rejects at once, and the
      // booking, when it comes, goes back (the round trip cannot be recalled).
      const r = await abortable(booking, signal, (late) => {
        if (late.ok) giveBack(late);
      });
      if (r.ok) {
        try {
          if (r.waitMs > 0) await sleep(r.waitMs, signal);
        } catch (reason) {
          giveBack(r);
          throw reason;
        }
        return;
      }
      const waitMs = r.decision.retryAfterMs;
      if (waitMs > left) {
        // With the wait that was needed, as the in-process acquire's; after a
        // retry, against what is left, and saying who decided.
        const budget = retry ? `the ${Math.floor(left)} ms left of timeoutMs (${timeoutMs} ms)` : `timeoutMs (${timeoutMs} ms)`;
        const who = r.fromStore ? '' : ' (Redis did not answer: the onError limiter decided)';
        const error = new DOMException(`the wait (${waitMs} ms) would exceed ${budget}${who}`, 'TimeoutError');
        throw Object.assign(error, { retryAfterMs: waitMs });
      }
      if (r.fromStore) throw new RateLimited(`${label}: cannot book ${r.cost} now; retry in ${waitMs} ms`, waitMs);
      await sleep(Math.max(1, Math.ceil(waitMs)), signal);
    }
  }

  /**
   * Gives back a booking `reserve` made for an acquire that does not go
   * ahead: on a bucket only while it is the latest on its key (another
   * process may have booked behind it, whose slot a give-back from the
   * middle handed out a second time), else its slot goes unused; see
   * giveBackLatest. Never throws.
   */
  release(r) {
    // Never rejecting unhandled: a script error (a key of another type,
    // NOPERM) has nobody to go to, the caller being answered.
    giveBackLatest(r).catch(() => {});
  }

  refund(keys, cost, takenAtMs) {
    const at = takenAtMs === undefined || takenAtMs === null ? '' : this.wireNow(takenAtMs, 'takenAtMs');
    return this.refundAt(keys, cost, at);
  }

  /**
   * `refund` at `at`: the script's µs (a string), or '' for now; with a
   * booking's `marks` (its reply's), guarded: a bucket gives back only while
   * the booking is the latest on its key. Argument errors and the script's own throw.
   */
  refundAt(keys, cost, at, marks = []) {
    // Redis unreachable: nothing to give back to, and no call throws (see "Faults").
    const args = ['1', 'refund', this.wireNow(undefined), ...this.config, 1, cost, at, ...marks];
    return within(this.evaluate(keys, args), this.commandTimeoutMs).then(
      () => undefined,
      (error) => {
        if (isScriptError(error)) throw error;
      },
    );
  }
}

/** Throws (each method rejects) unless `self` is a RedisLimiter or a RedisPolicy. */
let ownStore;
/** `cost` as `self`'s tryAcquire checks it (a RedisLimiter or a RedisPolicy): the server helpers' check of a fixed cost. */
let storeCost;
/** The Policy given as `self`'s `onError`, else undefined: the server helpers check its limits' fields too. */
let fallbackPolicy;

/**
 * What RedisLimiter and RedisPolicy offer, for a target: a key (RedisLimiter)
 * or a request (RedisPolicy). Every method returns a promise; argument errors
 * reject it.
 */
class RedisLimits {
  #store;

  constructor(store) {
    this.#store = store;
  }

  static {
    // A brand check: a method called detached, or on another object, read
    // the private fields of no RedisLimits (V8's uncoded TypeError).
    ownStore = (self) => {
      if (self === null || typeof self !== 'object' || !(#store in self)) throw typeError('this', 'a RedisLimiter or a RedisPolicy');
    };
    storeCost = (self, cost) => checkCost(cost, self.#store.limit);
    fallbackPolicy = (self) => (isPolicy(self.#store.onError) ? self.#store.onError : undefined);
  }

  /** Takes `cost` units for `target` if every limit has them, and says what happened. */
  async tryAcquire(target, cost, nowMs) {
    ownStore(this);
    const keys = this._keys(target);
    return this.#store.acquireOne(this.#store.target(target), keys, checkCost(cost, this.#store.limit), nowMs);
  }

  /** The decision `tryAcquire` would give, consuming nothing. */
  async peek(target, cost, nowMs) {
    ownStore(this);
    const keys = this._keys(target);
    return (await this.#store.decide([this.#store.target(target)], keys, 'peek', [checkCost(cost, this.#store.limit)], nowMs))[0];
  }

  /** Decides each of `costs` for `target` in turn, in one round trip. */
  async tryAcquireBatch(target, costs, nowMs) {
    ownStore(this);
    const keys = this._keys(target);
    if (!Array.isArray(costs)) throw typeError('costs', 'an array of numbers');
    // Every element a number, as in-process: checkCost reads a missing cost
    // as 1, and map skips a hole (sent as 'undefined').
    const checked = new Array(costs.length);
    for (let i = 0; i < costs.length; i++) {
      if (typeof costs[i] !== 'number') throw typeError('costs', 'an array of numbers');
      checked[i] = checkCost(costs[i], this.#store.limit);
    }
    if (checked.length === 0) return [];
    const t = this.#store.target(target);
    return this.#store.decide(checked.map(() => t), keys, 'acquire', checked, nowMs);
  }

  /** Gives back `cost` units taken at `takenAtMs` (caller time; default now) in every limit. */
  async refund(target, cost, takenAtMs) {
    ownStore(this);
    const keys = this._keys(target);
    if (typeof cost !== 'number') throw typeError('cost', 'a number');
    // Any number of units, as in-process: a refund gives back at most what was taken.
    const units = checkCost(cost, Infinity);
    await this.#store.refund(keys, units, takenAtMs);
  }

  /** Books `cost` units for the earliest moment within `maxWaitMs` (first come, first served across processes). */
  async reserve(target, cost, maxWaitMs, nowMs) {
    ownStore(this);
    const keys = this._keys(target);
    return this.#store.reserve(this.#store.target(target), keys, checkCost(cost, this.#store.limit), maxWaitMs, nowMs);
  }

  /**
   * Resolves once `cost` units are ours: books the earliest slot within
   * `timeoutMs` and sleeps until it. Rejects with a TimeoutError when the
   * wait would pass `timeoutMs`, with `signal.reason` on abort (the booking
   * given back), with RateLimited when nothing can be booked.
   */
  async acquire(target, cost, options) {
    ownStore(this);
    const keys = this._keys(target);
    const units = checkCost(cost, this.#store.limit);
    const t = this.#store.target(target);
    await this.#store.wait(
      (left) => this.#store.reserve(t, keys, units, left, undefined),
      (r) => this.#store.release(r),
      this.constructor.name,
      options,
    );
  }
}

/** Whether `value` is a RedisLimiter (a brand check, as in-process: no Proxy or forged object is one). */
let isRedisLimiter;
/** Throws unless `self` is a RedisLimiter. */
let ownLimiter;

/**
 * One limiter per key, kept in Redis: `KeyedLimiter`'s methods, each a
 * promise. `limiter` is an in-process Gcra, TokenBucket (greedy, starting
 * full, 1 to 4 bandwidths), FixedWindow or SlidingWindowCounter (not on
 * calendar windows) giving the configuration and the headers' name.
 */
class RedisLimiter extends RedisLimits {
  #store;
  #limiter;
  #lastKey;
  #lastKeys;

  constructor(client, limiter, options) {
    // Checked first: the name is a limiter's getter.
    const config = limitOf(limiter);
    const limit = { name: limiter.name, by: ['key'], ...config };
    // A limiter left unnamed is keyed by its configuration (`gcra/10/100000`:
    // algorithm and ARGV), as the Python client keys it: two unnamed limiters
    // of different configurations must not read each other's state.
    limit.key = limit.name === 'default' ? limit.args.join('/') : limit.name;
    const store = new Store(client, [limit], options, 'limiter');
    super(store);
    this.#store = store;
    this.#limiter = limiter;
  }

  static {
    // A brand check (see RedisLimits).
    isRedisLimiter = (value) => value !== null && typeof value === 'object' && #limiter in value;
    ownLimiter = (self) => {
      if (!isRedisLimiter(self)) throw typeError('this', 'a RedisLimiter');
    };
  }

  _keys(key) {
    // Reachable on the prototype as the public methods are: called on
    // another object, it read a private field of none (V8's uncoded TypeError).
    ownLimiter(this);
    // A hot key comes again and again: its keys are built once.
    if (key === this.#lastKey && key !== undefined) return this.#lastKeys;
    const keys = this.#store.keys({ key: keyPart(key, 'key') });
    // Not a Uint8Array, which may hold other bytes the next time.
    this.#lastKey = typeof key === 'object' ? undefined : key;
    this.#lastKeys = keys;
    return keys;
  }

  /** The RateLimit header values of a decision (the in-process limiter's). */
  headers(decision) {
    ownLimiter(this);
    return this.#limiter.headers(decision);
  }

  /**
   * Puts `key` back to fresh, as a key never seen: one UNLINK of its Redis
   * key (and the key of a KeyedLimiter given as `onError`, reset first).
   * Resolves to whether Redis held it; an error of Redis, or no answer
   * within `commandTimeoutMs` (a TimeoutError), rejects (then it may or may
   * not have been reset there), as `onError` answers decisions only.
   */
  async reset(key) {
    ownLimiter(this);
    const [stored] = this._keys(key);
    if (isKeyed(this.#store.onError)) this.#store.onError.reset(key);
    return (await this.#store.unlink([stored])) > 0;
  }

  get limit() {
    ownLimiter(this);
    return this.#limiter.limit;
  }

  get windowMs() {
    ownLimiter(this);
    return this.#limiter.windowMs;
  }

  get algorithm() {
    ownLimiter(this);
    return this.#limiter.algorithm;
  }

  get name() {
    ownLimiter(this);
    return this.#limiter.name;
  }

  /** `RedisLimiter { limiter: Gcra { ... } }` in console.log. */
  [inspectSymbol](depth, options, inspect) {
    if (this === null || typeof this !== 'object' || !(#limiter in this)) return inspectedOther(this, 'RedisLimiter', depth, options, inspect);
    return inspected('RedisLimiter', { limiter: this.#limiter }, depth, options, inspect);
  }
}

/** A policy's `request`, its fields (none when undefined or null); a TypeError when it is no object. */
function fieldsOf(request) {
  if (request === undefined || request === null) return {};
  if (typeof request !== 'object') throw typeError('request', 'an object');
  // Every field's value, not only those a limit is keyed by, as an
  // in-process Policy reads them: else a request with `user: undefined`
  // was decided while Redis answered and refused by an onError Policy
  // once it could not.
  for (const field of Object.keys(request)) keyPart(request[field], `request.${field}`);
  return request;
}

/** Whether a policy's `reset(request)` resets `limit` (`{ by }`): keyed by fields, each of them in `request`. */
const reaches = (limit, request) => limit.by.length > 0 && limit.by.every((field) => hasField(request, field));

/** Whether `value` is a RedisPolicy (see isRedisLimiter). */
let isRedisPolicy;
/** Throws unless `self` is a RedisPolicy. */
let ownPolicy;

/**
 * Several limits decided together, all or nothing, in Redis: `Policy`'s
 * methods, each a promise. `config` is what `Policy` takes (`{ limits: [...] }`,
 * its JSON, configured limiters, or rate strings with `options.algorithm` and
 * `options.by`), within what Redis supports, of at least one limit (none,
 * `undefined` or `null`, is a RangeError `zero_value`). `limits`, `names`,
 * `size` and `keyedBy` describe the limits as `Policy`'s do; there is no
 * `add`: the limits are fixed at construction.
 */
class RedisPolicy extends RedisLimits {
  #store;
  #local;

  constructor(client, config, options) {
    if (options !== undefined && options !== null && typeof options !== 'object') throw typeError('options', 'an object');
    const { local, limits } = policyLimits(config, options?.algorithm, options?.by);
    const store = new Store(client, limits, options, 'policy');
    super(store);
    this.#store = store;
    this.#local = local;
  }

  static {
    // A brand check (see RedisLimits).
    isRedisPolicy = (value) => value !== null && typeof value === 'object' && #local in value;
    ownPolicy = (self) => {
      if (!isRedisPolicy(self)) throw typeError('this', 'a RedisPolicy');
    };
  }

  _keys(request) {
    // See RedisLimiter's _keys.
    ownPolicy(this);
    return this.#store.keys(fieldsOf(request));
  }

  /**
   * Puts `request`'s key back to fresh, as a key never seen, in every limit
   * keyed by fields it all gives, as Policy's `reset`: one UNLINK (and the
   * keys of a Policy given as `onError`, reset first). Resolves to how many
   * of those limits Redis held the key in. A global limit is never reset,
   * nor one keyed by a field `request` lacks; a request that would reset no
   * limit rejects with a RangeError (`invalid_value`). An error of Redis, or
   * no answer within `commandTimeoutMs` (a TimeoutError), rejects, as
   * `onError` answers decisions only.
   */
  async reset(request) {
    ownPolicy(this);
    const given = fieldsOf(request);
    const keys = this.#store.resetKeys(given);
    const fallback = this.#store.onError;
    if (isPolicy(fallback) && fallback.limits.some((limit) => reaches(limit, given))) fallback.reset(given);
    return this.#store.unlink(keys);
  }

  /** RateLimit-Policy and RateLimit listing every limit, and Retry-After when denied. */
  headers(decision) {
    ownPolicy(this);
    return this.#local.headers(decision);
  }

  /** The limits, in order: `{ name, by }`. */
  get limits() {
    ownPolicy(this);
    return this.#local.limits;
  }

  /** The limits' names, in order. */
  get names() {
    ownPolicy(this);
    return this.#local.names;
  }

  /** The number of limits (Python: `len(policy)`). */
  get size() {
    ownPolicy(this);
    return this.#local.size;
  }

  /**
   * The fields limit `name` is keyed by (empty for a global limit); a
   * RangeError `invalid_value` for a name no limit has (Python: KeyError).
   */
  keyedBy(name) {
    ownPolicy(this);
    return this.#local.keyedBy(name);
  }

  /** `RedisPolicy { limits: [ { name: '10/second', by: [] } ] }` in console.log. */
  [inspectSymbol](depth, options, inspect) {
    if (this === null || typeof this !== 'object' || !(#local in this)) return inspectedOther(this, 'RedisPolicy', depth, options, inspect);
    return inspected('RedisPolicy', { limits: this.limits }, depth, options, inspect);
  }
}

// The server helpers of the API these classes decide with (middleware and
// fastifyHook of 'ratekeeper' on Node) take them too: a RedisLimiter keyed
// as a KeyedLimiter, a RedisPolicy as a Policy (see lib/api/server.cjs).
takeStores({ isKeyed: isRedisLimiter, isPolicy: isRedisPolicy, names: ['RedisLimiter', 'RedisPolicy'], checkCost: storeCost, fallbackPolicy });

module.exports = {
  RedisLimiter,
  RedisPolicy,
  REDIS_SCRIPT,
  REDIS_SCRIPT_SHA,
  MAX_EXACT,
  MAX_NOW,
  MAX_SPAN,
  // The native build's classes this module takes: where 'ratekeeper'
  // resolves to the WebAssembly build (the `browser` condition), these;
  // and the RateLimited its acquires reject with, which is then not
  // 'ratekeeper''s (`instanceof` held for no class the caller could import).
  RateLimited,
  Gcra,
  TokenBucket,
  FixedWindow,
  SlidingWindowCounter,
  SlidingWindowLog,
  KeyedLimiter,
  Policy,
};
