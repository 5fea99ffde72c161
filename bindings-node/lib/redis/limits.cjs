'use strict';
// ratekeeper/redis: the script's arguments for an in-process limiter or a
// policy's configuration (what Redis supports of them, checked here).

const api = require('../../index.js');
const { configData, BRANDS } = require('../api.cjs');
const { MAX_SPAN, typeError, rangeError, micros, exact, gcd } = require('./values.cjs');

const { TokenBucket, Gcra, FixedWindow, SlidingWindowCounter, SlidingWindowLog, Policy } = api;
// What an argument is, by the classes' brand checks (as they check each
// other), never `instanceof`: that takes a Proxy of a limiter (a reactive
// wrapper) or an object inheriting from one, whose getters and methods then
// threw an uncoded TypeError (a private field read through `this`).
const { isLimiter, isKeyed, isPolicy, configurationOf } = api[BRANDS];

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
    // The calendar first, as the Python client checks it: a calendar's
    // windowMs is only its nominal length, so the bounds below, checked on
    // it, would blame the limit for what is a calendar limit.
    if (limiter.calendar !== null) {
      throw rangeError('calendar', 'calendar windows are not supported on Redis');
    }
    const window = micros(limiter.windowMs, 'windowMs');
    exact(window, 'windowMs', 'the window (µs)', MAX_SPAN);
    // Counts, like times, are numbers in the script.
    exact(limiter.limit, 'limit', 'limit');
    if (algorithm === 'sliding_window_counter') exact(limiter.limit * window, 'limit', 'limit * windowMs (µs)');
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
    // KeyedLimiter, as Policy takes it: its limiter's configuration, keyed by the item's `by`
    // (not its `limiter`, whose log would have its ring allocated whole: see configurationOf).
    limiters = config.limits.map(({ limiter }) => (isKeyed(limiter) ? configurationOf(limiter) : limiter));
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


module.exports = { nativeOnly, limitOf, policyLimits };
