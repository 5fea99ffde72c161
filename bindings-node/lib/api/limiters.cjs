'use strict';
// The limiters of one backend (see lib/api.cjs): `Limiter`, what every one
// offers, and a class per algorithm.
const { invalidType, invalidValue, inspected, inspectedOther, inspectSymbol, BOOKINGS, MOVES_UP, NOW, plainArray, ownCopy, textOf } = require('./values.cjs');

module.exports = function limiters(shared, { acquireSlot, untracked, abortRule }) {
  const { B, out, yes, tryAcquireOp, peekOp, reserveOp, noopOp, decision, abstract, notThis, thisChecks, stateBytes, badType, known, number } = shared;
  const { defaultClock, handles, readClock, hotNow, toUint8Array, decisionFields, reservation, takenAt } = shared;

  // Module-private: lets the constructors below hand a built handle to Limiter,
  // and the subclasses reach what Limiter keeps private.
  class Built {
    constructor(handle, options) {
      this.handle = handle;
      this.options = options;
    }
  }

  /** The `Built` of a limiter `make` builds from `options` (as `known` to `what`). */
  function builtBy(make, options, what) {
    const own = known(options, what);
    return new Built(make(own), own);
  }

  let configOf;
  let internalsOf;
  let isLimiter;

  // The checks of `this` (see thisChecks); `isLimiter` is set below, by the class.
  const { own: ownLimiter, failed: limiterError } = thisChecks((self) => isLimiter(self), 'a Limiter');

  /**
   * The configuration of `self` as the getters of the class `kind` of
   * `algorithm` read it: a limiter of another class (a Gcra as `this` of a
   * TokenBucket getter) is no more one of them than an object is.
   */
  function configAs(self, algorithm, kind) {
    const config = isLimiter(self) ? configOf(self) : null;
    if (config === null || config.algorithm !== algorithm) throw notThis(kind);
    return config;
  }

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
    // Read inside: a subclass may answer otherwise by its getters (see reconfigure).
    const { name } = internalsOf(limiter);
    if (name !== 'default') shown.name = name;
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
        // null is the default, as for every other option: the name 'default'
        // (it was a TypeError, `name` must be a string) and the default
        // clock, as Python's clock=None.
        name = options == null ? undefined : (options.name ?? undefined);
        clock = options == null ? undefined : (options.clock ?? undefined);
        if (name !== undefined && typeof name !== 'string') badType('name', 'a string');
        if (name !== undefined) {
          // Refused as Python refuses it: the native half would read U+FFFD in its place (see textOf).
          textOf(name, 'name');
          // And as the core refuses a policy limit's name: one the headers cannot carry.
          B.checkName(name);
        }
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
      configOf = (limiter) => (limiter.#config ??= ownCopy(B.config(limiter.#h)));
      internalsOf = (limiter) => ({ handle: limiter.#h, name: limiter.#name, clock: limiter.#clock });
      // A brand check, where `instanceof` takes a Proxy of a limiter (a
      // framework's reactive wrapper) or an object inheriting from one,
      // whose private fields then threw an uncoded TypeError.
      isLimiter = (value) => value !== null && typeof value === 'object' && #h in value;
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
      try {
        return decision(yes(tryAcquireOp(this.#h, number(cost, 1, 'cost'), hotNow(this.#clock, nowMs))));
      } catch (error) {
        throw limiterError(this, error);
      }
    }

    peek(cost, nowMs) {
      try {
        return decision(yes(peekOp(this.#h, number(cost, 1, 'cost'), hotNow(this.#clock, nowMs))));
      } catch (error) {
        throw limiterError(this, error);
      }
    }

    reserve(cost, maxWaitMs, nowMs) {
      try {
        const units = number(cost, 1, 'cost');
        const maxWait = number(maxWaitMs, Infinity, 'max_wait');
        const now = this.#now(nowMs);
        // Reads the handle through `this`, so that a reservation keeps its
        // limiter alive: the napi build reuses a collected limiter's handle.
        const give = (high, low) => B.refund(this.#h, units, [NaN, high, low]);
        const booked = yes(reserveOp(this.#h, units, maxWait, now));
        // Read from the scratch first: counting the booking calls builtins
        // (WeakMap.prototype.get) that JS may have replaced with ones that
        // make operations of their own, writing it.
        const r = reservation(booked, units, now, decision, give);
        if (booked && r.waitMs > 0) this.#untracked();
        return r;
      } catch (error) {
        throw limiterError(this, error);
      }
    }

    /** Counts a booking of a slot to come (or a reconfigure, a restore) that no acquire waiter holds: for the waiters (see untracked) and pacedFetch. */
    #untracked() {
      untracked(this);
      this.#bookings++;
    }

    /** The bookings of a slot to come, reconfigures and restores so far (for pacedFetch). */
    [BOOKINGS]() {
      ownLimiter(this);
      return this.#bookings;
    }

    /**
     * For pacedFetch: true when the bookings behind one given back move up,
     * 'latest' when a booking is given back only while it is the latest,
     * false when any is given back where it was counted (see waitersOf).
     */
    [MOVES_UP]() {
      ownLimiter(this);
      const waiters = waitersOf(this);
      return waiters === 'up' ? true : waiters === 'latest' ? 'latest' : false;
    }

    /**
     * For pacedFetch: the time now on this limiter's clock, in
     * milliseconds, its default `clock`. A calendar limiter counts Unix
     * time (Date.now) where pacedFetch read performance.now by default:
     * its slots lay 1.7e12 ms ahead (refused as another clock), and a
     * limiter on a clock of its own (a test's) had to be given it twice.
     */
    [NOW]() {
      ownLimiter(this);
      return this.#read();
    }

    refund(cost, takenAtMs) {
      ownLimiter(this);
      if (typeof cost !== 'number') badType('cost', 'a number');
      let takenAt = takenAtMs;
      if (takenAt === undefined || takenAt === null) takenAt = this.#read();
      else if (typeof takenAt !== 'number') badType('taken_at', 'a number');
      B.refund(this.#h, cost, [takenAt, NaN, NaN]);
    }

    reconfigure(other, nowMs) {
      ownLimiter(this);
      if (!isLimiter(other)) badType('other', 'a limiter');
      // `other`'s own configuration, what reconfigure takes: its getters may
      // be a subclass's, answering otherwise (a calendar's `calendar` null).
      if (this.#clock === defaultClock && configOf(other).calendar != null) {
        invalidValue('`other` follows a calendar, which needs Date.now, and this limiter reads performance.now: build it with clock: Date.now');
      }
      B.reconfigure(this.#h, other.#h, this.#now(nowMs));
      this.#untracked();
      this.#config = null;
    }

    acquire(cost, options) {
      // Rejects, as for a bad argument: acquire never throws.
      if (!isLimiter(this)) return Promise.reject(notThis('a Limiter'));
      const h = this.#h;
      return acquireSlot(
        {
          reserve: (units, maxWait, now) => {
            const booked = yes(reserveOp(h, units, maxWait, now));
            if (booked && out()[0] > 0) this.#bookings++;
            return booked;
          },
          refund: (units, high, low) => B.refund(h, units, [NaN, high, low]),
          // None: its one state, which every call touches (see marksOf).
          marks: () => [],
          read: () => this.#read(),
          owner: this,
          label: this.#name,
          ...abortRule(waitersOf(this), ''),
        },
        cost,
        options,
      );
    }

    /** The state of this limiter as bytes (versioned, tied to its configuration): see `fromBytes`. */
    toBytes() {
      ownLimiter(this);
      return toUint8Array(B.toBytes(this.#h));
    }

    /** Replaces this limiter's state by `bytes` from `toBytes()` of a limiter of the same configuration. */
    restore(bytes) {
      ownLimiter(this);
      B.restore(this.#h, stateBytes(bytes));
      this.#untracked();
    }

    /** A limiter built from `options` (as its constructor takes them) holding the state `bytes`. */
    static fromBytes(bytes, options) {
      if (this === Limiter) throw abstract('call fromBytes on one of its subclasses');
      // Detached (`const { fromBytes } = Gcra`), `this` is no class to build.
      if (typeof this !== 'function' || !Object.prototype.isPrototypeOf.call(Limiter, this)) throw notThis('a subclass of Limiter');
      // The bytes as given now: reading the options runs the caller's getters.
      const state = stateBytes(bytes);
      const limiter = new this(options);
      limiter.restore(state);
      return limiter;
    }

    headers(decision) {
      ownLimiter(this);
      const [allowed, remaining, limit, retryAfterMs, resetAfterMs] = decisionFields(decision, 'decision');
      // A policy's decision (every limit's, in `limits`) put under this
      // limiter's name and window made headers up, where the policy refuses
      // a limiter's decision.
      if (decision.limits !== undefined) invalidType("`decision` must be a limiter's decision, not a policy's (policy.headers takes that)");
      const values = B.headers(this.#h, this.#name, allowed, remaining, limit, retryAfterMs, resetAfterMs).split('\n');
      const headers = { 'RateLimit-Policy': values[0], RateLimit: values[1] };
      if (values.length > 2) headers['Retry-After'] = values[2];
      return headers;
    }

    get limit() {
      ownLimiter(this);
      return configOf(this).limit;
    }

    get windowMs() {
      ownLimiter(this);
      return configOf(this).windowMs;
    }

    get algorithm() {
      ownLimiter(this);
      return configOf(this).algorithm;
    }

    /** A window algorithm's calendar ('day', 'week' or 'month', UTC), or null. */
    get calendar() {
      ownLimiter(this);
      return configOf(this).calendar ?? null;
    }

    get name() {
      ownLimiter(this);
      return this.#name;
    }

    /** Takes what tryAcquire takes into native code and does nothing: the floor of a call (benchmarks). */
    _noop(cost, nowMs) {
      // As tryAcquire (the same path, for the benchmark's floor).
      try {
        return noopOp(this.#h, cost, nowMs);
      } catch (error) {
        throw limiterError(this, error);
      }
    }

    /** `TokenBucket { capacity: 10, refillTokens: 1, refillPeriodMs: 1000 }` in console.log. */
    [inspectSymbol](depth, options, inspect) {
      if (!isLimiter(this)) return inspectedOther(this, 'Limiter', depth, options, inspect);
      return inspected(classOf[configOf(this).algorithm].name, shownOptions(this), depth, options, inspect);
    }
  }

  /**
   * What the waiters of `limiter` (the limiter, or a key of a keyed limiter)
   * do when one of them is aborted, as the core says (`waiters` in the
   * configuration):
   * - 'up' (a GCRA, a leaky bucket): those booked after it give theirs back,
   *   newest first, then it gives its own, and they book again in order,
   *   moving up into the slots it left; each lands no later than it was. A
   *   bucket keeps no record of single bookings and gives back exactly only
   *   its latest: a booking given back from the middle of the queue would
   *   let the next one share a slot with a later waiter (two units at once
   *   from a burst of one).
   * - 'latest' (a token bucket, of any bandwidths): a booking takes the
   *   refill up to its slot, which the capacity clips, and gives back only
   *   its cost, so that a waiter booked again could land later than it was
   *   (a refill period later). Nobody moves: the aborted booking is given
   *   back only while it is the latest (of its key, on a keyed limiter: see
   *   marksOf in waiting.cjs), else its slot goes unused.
   * - 'any' (a window algorithm): each booking is kept where it was counted
   *   (the log at its instant, the counters per window), so an aborted one
   *   is given back as its refund does (see the README), and nobody moves.
   */
  const waitersOf = (limiter) => configOf(limiter).waiters;

  const bucketConfig = (self) => configAs(self, 'token_bucket', 'a TokenBucket');

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
      const state = stateBytes(bytes);
      const bucket = TokenBucket.fromBandwidths(options, common);
      bucket.restore(state);
      return bucket;
    }

    get bandwidths() {
      return bucketConfig(this).bandwidths.map((band) => ({ ...band }));
    }

    get capacity() {
      return bucketConfig(this).bandwidths[0].capacity;
    }

    get refillTokens() {
      return bucketConfig(this).bandwidths[0].refillTokens;
    }

    get refillPeriodMs() {
      return bucketConfig(this).bandwidths[0].refillPeriodMs;
    }

    get initialTokens() {
      return bucketConfig(this).bandwidths[0].initialTokens;
    }

    get refill() {
      return bucketConfig(this).bandwidths[0].refill;
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
      return configAs(this, 'gcra', 'a Gcra').burst;
    }

    get emissionIntervalMs() {
      return configAs(this, 'gcra', 'a Gcra').emissionIntervalMs;
    }
  }

  /** A queue: units leave `intervalMs` apart, first come first served, at most `capacity` queued. */
  class LeakyBucket extends Limiter {
    constructor(options, built) {
      super(built instanceof Built ? built : builtBy((own) => B.leakyBucket(own), options, 'LeakyBucket'));
    }

    get capacity() {
      return configAs(this, 'leaky_bucket', 'a LeakyBucket').capacity;
    }

    get intervalMs() {
      return configAs(this, 'leaky_bucket', 'a LeakyBucket').intervalMs;
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

  return { Built, configOf, internalsOf, isLimiter, waitersOf, classOf, Limiter, TokenBucket, Gcra, LeakyBucket, SlidingWindowLog, SlidingWindowCounter, FixedWindow };
};
