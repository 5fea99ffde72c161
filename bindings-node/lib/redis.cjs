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
//
// This file holds the public classes; redis/ what they share: store.cjs (the
// Store: keys, round trips, faults, hot-key batching, waiting), wire.cjs
// (the script, commands and replies), limits.cjs (a limiter's or a policy's
// arguments for the script), keys.cjs, values.cjs (numbers and errors),
// timers.cjs and reservation.cjs.

const api = require('../index.js');
const { inspected, inspectedOther, inspectSymbol, isRequest, BRANDS } = require('./api.cjs');
const { MAX_EXACT, MAX_NOW, MAX_SPAN, typeError, checkCost } = require('./redis/values.cjs');
const { REDIS_SCRIPT, REDIS_SCRIPT_SHA } = require('./redis/wire.cjs');
const { limitOf, policyLimits } = require('./redis/limits.cjs');
const { keyPart, reaches } = require('./redis/keys.cjs');
const { Store } = require('./redis/store.cjs');

const { TokenBucket, Gcra, FixedWindow, SlidingWindowCounter, SlidingWindowLog, KeyedLimiter, Policy, RateLimited } = api;
// Brand checks, never `instanceof` (see redis/limits.cjs).
const { isKeyed, isPolicy, takeStores } = api[BRANDS];

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
   * `timeoutMs` and sleeps until it (on the caller's `clock`, until it has
   * come on that clock: see Store's sleepUntil). Rejects with a TimeoutError
   * when the wait would pass `timeoutMs`, with `signal.reason` on abort (the
   * booking given back), with RateLimited when nothing can be booked.
   */
  async acquire(target, cost, options) {
    ownStore(this);
    const keys = this._keys(target);
    const units = checkCost(cost, this.#store.limit);
    const t = this.#store.target(target);
    await this.#store.wait(
      (left, gone) => this.#store.reserve(t, keys, units, left, undefined, gone),
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
  if (!isRequest(request)) throw typeError('request', 'an object');
  // Every field's value, not only those a limit is keyed by, as an
  // in-process Policy reads them: else a request with `user: undefined`
  // was decided while Redis answered and refused by an onError Policy
  // once it could not.
  for (const field of Object.keys(request)) keyPart(request[field], `request.${field}`);
  return request;
}

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
   * RangeError `invalid_value` for a name no limit has (Python: RateLimitError `invalid_value`).
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
