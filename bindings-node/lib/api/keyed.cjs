'use strict';
// KeyedLimiter: one limiter per key, every key configured alike (see lib/api.cjs).
const { inspected, inspectedOther, inspectSymbol, arrayOf, keyArg } = require('./values.cjs');

module.exports = function keyed(shared, { acquireSlot, untracked, forgot, givesBack, abortRule, keyMarks }, { Built, Limiter, classOf, internalsOf, isLimiter, waitersOf }) {
  const { B, yes, keyedOp, decision, badType, known, number, hotNow, nowFrom, readClock, keyOf, keyArgOf, thisChecks } = shared;
  const { keyedHandles, reservation, takenAt, fromFlat } = shared;
  let isKeyed;
  let configurationOf;

  // The checks of `this` (see thisChecks); `isKeyed` is set below, by the class.
  const { own: ownKeyed, failed: keyedError } = thisChecks((self) => isKeyed(self), 'a KeyedLimiter');

  /**
   * One limiter per key, every key configured as `limiter` (a configured
   * limiter of any class; its state is not copied: every key starts fresh).
   * Keys are strings, numbers standing for their decimal string, or
   * Uint8Arrays standing for the string whose UTF-8 they are. Keys back
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
      if (!isLimiter(limiter)) badType('limiter', 'a limiter');
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
      // The configuration every key has, for headers and getters (never
      // deciding: a log's ring left out, see `get limiter`).
      this.#prototype = new Limiter(new Built(B.keyedPrototype(this.#h, false), { name, clock }));
      this.#clock = clock;
      if (maxKeys !== undefined) this.#maxKeys = maxKeys;
      if (eviction !== undefined) this.#eviction = eviction;
    }

    // op: 0 peek, 1 tryAcquire, 2 reserve (as the native keyedOp).
    tryAcquire(key, cost, nowMs) {
      try {
        return decision(yes(keyedOp(this.#h, keyOf(key), number(cost, 1, 'cost'), 0, hotNow(this.#clock, nowMs), 1)));
      } catch (error) {
        throw keyedError(this, error);
      }
    }

    peek(key, cost, nowMs) {
      try {
        return decision(yes(keyedOp(this.#h, keyOf(key), number(cost, 1, 'cost'), 0, hotNow(this.#clock, nowMs), 0)));
      } catch (error) {
        throw keyedError(this, error);
      }
    }

    reserve(key, cost, maxWaitMs, nowMs) {
      try {
        const k = keyOf(key);
        const units = number(cost, 1, 'cost');
        const maxWait = number(maxWaitMs, Infinity, 'max_wait');
        const now = nowFrom(this.#clock, nowMs);
        // Through `this`: a reservation keeps its store alive (see Limiter.reserve).
        const give = givesBack(this, () => keyMarks(k), (high, low) => B.keyedRefund(this.#h, keyArg(k, 'key'), units, [NaN, high, low]));
        const booked = yes(keyedOp(this.#h, k, units, maxWait, now, 2));
        // Read from the scratch first (see Limiter.reserve): the key's marks
        // are made by builtins JS may replace (TextEncoder's encode).
        const r = reservation(booked, units, now, decision, give);
        if (booked && r.waitMs > 0) untracked(this, keyMarks(k));
        return r;
      } catch (error) {
        throw keyedError(this, error);
      }
    }

    refund(key, cost, takenAtMs) {
      ownKeyed(this);
      const k = keyArgOf(key);
      if (typeof cost !== 'number') badType('cost', 'a number');
      B.keyedRefund(this.#h, k, cost, [takenAt(this.#clock, takenAtMs), NaN, NaN]);
    }

    acquire(key, cost, options) {
      let k;
      let arg;
      try {
        ownKeyed(this);
        k = keyOf(key);
        arg = keyArg(k, 'key');
      } catch (error) {
        return Promise.reject(error);
      }
      const h = this.#h;
      // Made once it waits: an acquire due at once needs none.
      let marks;
      return acquireSlot(
        {
          reserve: (units, maxWait, now) => yes(keyedOp(h, k, units, maxWait, now, 2)),
          marks: () => (marks ??= keyMarks(k)),
          refund: (units, high, low) => B.keyedRefund(h, arg, units, [NaN, high, low]),
          read: () => readClock(this.#clock),
          owner: this,
          label: `${this.#prototype.name} [${k}]`,
          // One queue per key: a ByteKey is a new object each call.
          ...abortRule(waitersOf(this.#prototype), typeof k === 'string' ? k : k.id),
        },
        cost,
        options,
      );
    }

    /** Decides each of `costs` in turn for `key` at one instant: one decision per cost. */
    tryAcquireBatch(key, costs, nowMs) {
      ownKeyed(this);
      const k = keyArgOf(key);
      const units = arrayOf(costs, 'number');
      if (units === undefined) badType('costs', 'an array of numbers');
      const flat = B.keyedTryAcquireBatch(this.#h, k, units, nowFrom(this.#clock, nowMs));
      const decisions = new Array(units.length);
      for (let i = 0; i < units.length; i++) decisions[i] = fromFlat(flat, 5 * i);
      return decisions;
    }

    headers(decision) {
      ownKeyed(this);
      return this.#prototype.headers(decision);
    }

    /**
     * Puts `key` back to fresh, as a key never seen (its units and bookings
     * forgotten); whether the store held it. A booking of the key made
     * before it then gives nothing back (see givesBack), and waiters of the
     * key behind one that aborts stay where they were, as after a
     * reconfigure (unless the store did not hold the key: then nothing
     * changed). Other keys' bookings are given back as before.
     */
    reset(key) {
      ownKeyed(this);
      const k = keyOf(key);
      const held = B.keyedReset(this.#h, keyArg(k, 'key'));
      // A key not held: the reset changed nothing, the waiters are as booked.
      if (held) forgot(this, keyMarks(k));
      return held;
    }

    /** Drops the keys back to fresh (calls do it lazily anyway). */
    reclaim(nowMs) {
      ownKeyed(this);
      B.keyedReclaim(this.#h, nowFrom(this.#clock, nowMs));
    }

    /** How many keys the store holds. */
    get size() {
      ownKeyed(this);
      return B.keyedLen(this.#h);
    }

    get limit() {
      ownKeyed(this);
      return this.#prototype.limit;
    }

    get windowMs() {
      ownKeyed(this);
      return this.#prototype.windowMs;
    }

    get algorithm() {
      ownKeyed(this);
      return this.#prototype.algorithm;
    }

    get name() {
      ownKeyed(this);
      return this.#prototype.name;
    }

    /** The most keys held, or null: no bound. */
    get maxKeys() {
      ownKeyed(this);
      return this.#maxKeys;
    }

    /** What happens at `maxKeys`: 'nearest_fresh' or 'refuse'. */
    get eviction() {
      ownKeyed(this);
      return this.#eviction;
    }

    /** A fresh limiter of every key's configuration (its class, name and clock). */
    get limiter() {
      ownKeyed(this);
      // Whole: a log's ring allocated as its constructor allocates it, so
      // that no decision allocates (the wasm build's decisions on one
      // limiter run unguarded, and one that ran out of memory trapped).
      return this.#fresh(true);
    }

    /** A new limiter of every key's configuration; `whole`: see keyed_prototype in src/shared/keyed.rs. */
    #fresh(whole) {
      const { name, clock } = internalsOf(this.#prototype);
      const Class = classOf[this.#prototype.algorithm];
      return new Class(undefined, new Built(B.keyedPrototype(this.#h, whole), { name, clock }));
    }

    static {
      // A brand check (see isLimiter).
      isKeyed = (value) => value !== null && typeof value === 'object' && #h in value;
      // What a Policy (and a RedisPolicy) takes of a KeyedLimiter: its keys'
      // configuration, which it reads and lets go. Not through `limiter`,
      // whose limiter decides and so has a log's ring allocated whole: 32
      // MiB for a log of limit 2^20, given back only once collected (on the
      // wasm build, each Policy built from such a keyed log grew the
      // module's memory, which never shrinks, by that). A subclass's own
      // `limiter` is still what it answers (checked by the caller).
      configurationOf = (keyed) => (getterOf(keyed, 'limiter') === limiterGetter ? keyed.#fresh(false) : keyed.limiter);
    }

    /** `KeyedLimiter { limiter: Gcra { ... }, size: 2 }` in console.log: the options given, and the keys held. */
    [inspectSymbol](depth, options, inspect) {
      if (!isKeyed(this)) return inspectedOther(this, 'KeyedLimiter', depth, options, inspect);
      const shown = { limiter: this.#prototype };
      if (this.#maxKeys !== null) shown.maxKeys = this.#maxKeys;
      if (this.#eviction !== 'nearest_fresh') shown.eviction = this.#eviction;
      shown.size = this.size;
      return inspected('KeyedLimiter', shown, depth, options, inspect);
    }
  }

  const limiterGetter = Object.getOwnPropertyDescriptor(KeyedLimiter.prototype, 'limiter').get;

  return { KeyedLimiter, isKeyed, configurationOf };
};

/** The getter `object[name]` reads (its own, or the nearest prototype's), or undefined when it is a plain value. */
function getterOf(object, name) {
  for (let o = object; o !== null; o = Object.getPrototypeOf(o)) {
    const own = Object.getOwnPropertyDescriptor(o, name);
    if (own !== undefined) return own.get;
  }
  return undefined;
}
