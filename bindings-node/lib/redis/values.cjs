'use strict';
// ratekeeper/redis: the numbers the script takes (microseconds, exact
// integers) and the errors its clients throw, named as in-process.

/** The largest value a configuration may let the script's arithmetic reach (µs or units). */
const MAX_EXACT = 2 ** 51;
/** The latest caller time: 2^52 µs after the Unix epoch (year 2112). */
const MAX_NOW = 2 ** 52;
/** The longest window and the longest wait: 2^50 µs (35 years). */
const MAX_SPAN = 2 ** 50;
/**
 * The most callers of a hot key sent in one batch (tryAcquireBatch sends its
 * costs as given): the script runs atomically, every other command on the
 * server waiting for it, for a time that grows with the batch (README, "Hot
 * keys"). The Python client's is the same.
 */
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

module.exports = { MAX_EXACT, MAX_NOW, MAX_SPAN, MAX_BATCH, IN_FLIGHT, DEFAULT_COMMAND_TIMEOUT_MS, STORE_OPTIONS, typeError, rangeError, micros, wholeMicros, exact, gcd, checkCost };
