'use strict';
// Policy: all-or-nothing limits over requests (see lib/api.cjs), from a
// declarative configuration, rate strings or configured limiters.
const { invalidType, invalidValue, numberKey, isUint8Array, isRequest, bytesKey, inspected, inspectedOther, inspectSymbol, arrayOf, ownCopy, textOf, requestText, hasField } = require('./values.cjs');
const { configRead } = require('./config.cjs');

module.exports = function policy(shared, { acquireSlot, untracked, grew, forgot, givesBack, abortRule, requestMarks }, { internalsOf, isLimiter }, { isKeyed, configurationOf }) {
  const { B, out, policyOp, fitPolicy, badType, known, number, defaultClock, hotNow, nowFrom, readClock } = shared;
  const { policyHandles, typeName, decisionFields, takenAt, reservation, thisChecks } = shared;
  let isPolicy;

  // The checks of `this` (see thisChecks); `isPolicy` is set below, by the class.
  const { own: ownPolicy, failed: policyError } = thisChecks((self) => isPolicy(self), 'a Policy');

  // The default clock of a policy that holds a calendar limit: the epoch,
  // read through the global each time, as fake timers replace it.
  const epochClock = () => Date.now();

  /**
   * Whether `text` is a configuration's JSON rather than rate strings: its
   * first character past whitespace and a byte order mark is `{`. The same
   * test as Python's `Policy(text)` (bindings-python/src/policy_config.rs,
   * `config_text`): whitespace is what the rate grammar skips (Python's `\s`,
   * which has U+0085 and U+001C to U+001F where `\s` here has not), and a
   * BOM, which `\s` here has, is skipped too, so that a file saved with one
   * is refused as the JSON it is (`invalid_config`) in both languages.
   */
  const configText = (text) => /^[\s\x1c-\x1f\x85]*\{/.test(text);

  /**
   * The backend's policy of the configuration `config` (an object or JSON
   * text, read by `configRead`, lib/api/config.cjs), refusing a toJSON that
   * answers undefined. What serde's reading refuses and JSON.parse took (a
   * count written `2.0`, a field given twice) is refused after the data's
   * shape and before the core's own errors (a zero burst), as Python says
   * them: serde finds it before the core reads anything, but the
   * configuration is read again field by field, to name the place of a
   * wrong shape.
   */
  function policyOfConfig(config) {
    const read = configRead(config);
    if (read === undefined) badType('config', 'an object or a string');
    const { data, refused } = read;
    let h;
    try {
      h = B.policyFromConfig(data);
    } catch (error) {
      throw refused !== undefined && error?.code !== 'invalid_config' ? refused : error;
    }
    if (refused !== undefined) {
      if (typeof B.freePolicy === 'function') B.freePolicy(h);
      throw refused;
    }
    return h;
  }

  /**
   * Refuses, as Python does, a field name with a lone surrogate: UTF-8
   * carries it as U+FFFD, so the limit would be keyed by another field,
   * which no request has. (A limit's name is refused likewise: two names
   * would be one.)
   */
  function wellFormedFields(by) {
    for (const field of by) if (typeof field === 'string') textOf(field, 'by');
  }

  /**
   * Whether a policy's `limits` is an array giving any limit as a limiter,
   * read up to its first hole, which both readings refuse (`some` took
   * minutes over an array of length 2^32 - 1 holding nothing).
   */
  function ofLimiters(limits) {
    if (!Array.isArray(limits)) return false;
    for (let i = 0; i < limits.length && i in limits; i++) if (limits[i]?.limiter !== undefined) return true;
    return false;
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
      for (let [i, limit] of limits.entries()) {
        if (limit === null || typeof limit !== 'object') badType('config', 'an object or a string');
        // Its own fields, each read once, as options are (see known): an
        // inherited `maxKeys`, `eviction` or `by` (a polluted Object.prototype) is none.
        limit = ownCopy(limit);
        // A misspelt field (max_keys here) would be dropped without a word.
        const unknown = Object.keys(limit).find((field) => !LIMITER_FIELDS.has(field));
        if (unknown !== undefined) {
          const expected = '`name`, `by`, `limiter`, `maxKeys` or `eviction`';
          const message = `policy configuration: limits[${i}]: unknown field \`${unknown}\`, expected ${expected}`;
          throw Object.assign(new TypeError(message), { code: 'invalid_config' });
        }
        const { name } = limit;
        // null is none, as for maxKeys and eviction here and Policy.add's `by: null` (it was a TypeError).
        const by = arrayOf(limit.by == null ? [] : limit.by, 'string');
        let { limiter, maxKeys, eviction } = limit;
        if (typeof name !== 'string') badType('name', 'a string');
        textOf(name, 'name');
        if (by === undefined) badType('by', 'an array of strings');
        wellFormedFields(by);
        if (isKeyed(limiter)) {
          if (maxKeys != null || eviction != null) invalidValue('`maxKeys` and `eviction` come from the KeyedLimiter given as `limiter`');
          ({ maxKeys, eviction } = limiter);
          limiter = configurationOf(limiter);
        }
        if (!isLimiter(limiter)) badType('limiter', 'a limiter or a KeyedLimiter');
        if (maxKeys != null && typeof maxKeys !== 'number') badType('max_keys', 'a number');
        if (eviction != null && typeof eviction !== 'string') badType('eviction', 'a string');
        // Not on a monotonic clock yet: the constructor chooses the clock once every limit is in.
        B.policyAdd(h, name, by, internalsOf(limiter).handle, maxKeys ?? undefined, eviction ?? undefined, false);
      }
    } catch (error) {
      if (typeof B.freePolicy === 'function') B.freePolicy(h);
      throw error;
    }
    return h;
  }

  /**
   * All-or-nothing limits over requests. A request is a plain object of
   * fields (`{ user: 'alice', route: '/a' }`), values strings, numbers
   * (as their decimal string) or Uint8Arrays (as the string whose UTF-8
   * they are, as a key: see keyOf); each limit is keyed by some of its
   * fields (none: global). A request is admitted only if every limit admits
   * it, and then consumes in every limit; else nothing is consumed.
   *
   * `config`: `{ limits: [{ name, rate, algorithm?, burst?, calendar?, by?, maxKeys... }] }`
   * (the core's declarative configuration, snake_case keys), its JSON text,
   * `{ limits: [{ name, by?, limiter }] }` with configured limiters, or a rate string such as '10/second;100/day' (then `options.algorithm` and `options.by`);
   * none (undefined or null): an empty policy, which admits everything until `add` adds limits.
   */
  class Policy {
    #h;
    #limits;
    #clock;
    /** Each field a limit is keyed by, once, with the first such limit's name. */
    #needs = [];
    /** What its waiters do around an aborted one ('up', 'latest' or 'any'): see `acquire`. */
    #waiters = 'any';

    constructor(config, options) {
      let algorithm;
      let by;
      let clock;
      if (options !== undefined && options !== null) {
        if (typeof options !== 'object') badType('options', 'an object');
        options = known(options, 'Policy');
        // null is the default, as Python's None (and Policy.add's `by: null`).
        if (options.algorithm != null) {
          if (typeof options.algorithm !== 'string') badType('algorithm', 'a string');
          algorithm = options.algorithm;
        }
        if (options.by != null) {
          by = arrayOf(options.by, 'string');
          if (by === undefined) badType('by', 'an array of strings');
          wellFormedFields(by);
        }
        if (options.clock != null) {
          if (typeof options.clock !== 'function') badType('clock', 'a function');
          clock = options.clock;
        }
      }
      // Text, as Python reads every str argument of a policy: else a lone
      // surrogate reached the rate parser as U+FFFD (an `invalid_syntax`).
      if (typeof config === 'string') textOf(config, 'config');
      const rates = typeof config === 'string' && !configText(config);
      const none = config === undefined || config === null;
      // Read once (a getter may answer otherwise the next time), if a configuration's.
      let listed;
      // As in Python: silently dropped, `by` would leave one global limit
      // where the caller asked for one per user.
      if (!rates && (algorithm !== undefined || by !== undefined)) {
        // The one given named, as Python names it (`algorithm` when both are).
        const which = none ? ', and none was given' : "; a configuration names each limit's";
        invalidValue(`\`${algorithm !== undefined ? 'algorithm' : 'by'}\` applies only to a rate string${which}`);
      }
      if (none) {
        this.#h = B.policyNew();
      } else if (rates) {
        this.#h = B.policyFromRates(config, algorithm ?? 'token_bucket', by ?? []);
      } else if (typeof config === 'string') {
        this.#h = policyOfConfig(config);
      } else if (config !== null && typeof config === 'object' && ofLimiters((listed = config.limits))) {
        this.#h = fromLimiters(listed);
      } else if (config !== null && typeof config === 'object') {
        this.#h = policyOfConfig(config);
      } else {
        badType('config', 'an object or a string');
      }
      if (policyHandles !== null) policyHandles.register(this, this.#h);
      const calendar = this.#readLimits();
      // A calendar's windows are UTC days, weeks and months: by default such
      // a policy reads the epoch clock, as the Python binding does.
      this.#clock = clock ?? (calendar ? epochClock : defaultClock);
    }

    /**
     * Reads the limits from the backend, with what follows from them (the
     * fields requests need, which bookings are given back, room for the
     * answers); whether one follows a calendar.
     */
    #readLimits() {
      const limits = B.policyLimits(this.#h);
      this.#limits = [];
      let calendar = false;
      // What its waiters do around an aborted one (the core's answer: see
      // `acquire`), then each limit: its name, its calendar ('' for none),
      // its number of fields, then the fields.
      this.#waiters = limits[0];
      for (let i = 1; i < limits.length; ) {
        const count = Number(limits[i + 2]);
        this.#limits.push({ name: limits[i], by: limits.slice(i + 3, i + 3 + count) });
        calendar ||= limits[i + 1] !== '';
        i += 3 + count;
      }
      this.#needs = [];
      for (const { name, by } of this.#limits) {
        for (const field of by) if (!this.#needs.some(([known]) => known === field)) this.#needs.push([field, name]);
      }
      // policyOp answers in an array the backend sizes.
      fitPolicy(this.#limits.length);
      return calendar;
    }

    /**
     * Adds a limit called `name`, keyed by the request fields `options.by`
     * (none: one limiter every request shares), each key starting as a fresh
     * copy of `limiter`'s configuration (not its state nor its name); a
     * KeyedLimiter brings its `maxKeys` and `eviction` too, not its keys. As
     * Python's `Policy.add`: a name taken already, empty or not printable
     * ASCII, or `by` naming a field twice, is a RangeError `invalid_value`;
     * so is a calendar limit added to a policy without a clock of its own
     * that holds state read on the monotonic clock (else such a policy reads
     * `Date.now()` from then on).
     */
    add(name, limiter, options) {
      ownPolicy(this);
      let by = [];
      if (options !== undefined && options !== null) {
        if (typeof options !== 'object') badType('options', 'an object');
        options = known(options, 'Policy.add');
        if (options.by !== undefined && options.by !== null) {
          by = arrayOf(options.by, 'string');
          if (by === undefined) badType('by', 'an array of strings');
          wellFormedFields(by);
        }
      }
      if (typeof name !== 'string') badType('name', 'a string');
      textOf(name, 'name');
      let maxKeys;
      let eviction;
      if (isKeyed(limiter)) {
        ({ maxKeys, eviction } = limiter);
        limiter = configurationOf(limiter);
      }
      // Checked after, as the constructor checks it: a KeyedLimiter's
      // `limiter` may be a subclass's getter, answering anything.
      if (!isLimiter(limiter)) badType('limiter', 'a limiter or a KeyedLimiter');
      const { handle } = internalsOf(limiter);
      const epoch = B.policyAdd(this.#h, name, by, handle, maxKeys ?? undefined, eviction ?? undefined, this.#clock === defaultClock);
      if (epoch) this.#clock = epochClock;
      this.#readLimits();
      grew(this);
    }

    /** One limit per rate of `rates` ('10/second;100/day'), each named by its rate. */
    static fromRates(rates, options) {
      if (typeof rates !== 'string') badType('rates', 'a string');
      textOf(rates, 'rates');
      // Rates only, as in Python: JSON text is fromConfig's, and the rate
      // parser refuses it, naming the place.
      if (configText(rates)) B.policyFromRates(rates, 'token_bucket', []);
      return new Policy(rates, options);
    }

    /** A policy from its declarative configuration (an object or JSON text). */
    static fromConfig(config, options) {
      // A configuration, not none: `new Policy()` is the empty policy.
      if (config === undefined || config === null) badType('config', 'an object or a string');
      if (typeof config === 'string') textOf(config, 'config');
      // JSON text only, as in Python: a rate string is fromRates' (which
      // takes `algorithm` and `by` for it), and the configuration's reader
      // refuses it (`invalid_config`), naming the place.
      if (typeof config === 'string' && !configText(config)) policyOfConfig(config);
      return new Policy(config, options);
    }

    #fields(request) {
      const fields = this.#given(request);
      // Named here, as the Redis policy names it: the core knows no field names.
      for (const [field, limit] of this.#needs) {
        if (request === undefined || request === null || !hasField(request, field)) {
          invalidValue(`\`request\` lacks the field ${JSON.stringify(field)} that limit ${JSON.stringify(limit)} is keyed by`);
        }
      }
      return fields;
    }

    /** The fields of `request`, names and values alternating. */
    #given(request) {
      const fields = [];
      const given = request !== undefined && request !== null;
      if (given && !isRequest(request)) badType('request', 'an object');
      for (const name of given ? Object.keys(request) : []) {
        const value = request[name];
        // A bad value is named by its field (`request.user`), as the Redis
        // policy names it (Python: `request['user']`).
        if (typeof value === 'string') fields.push(name, value);
        else if (typeof value === 'number') fields.push(name, numberKey(value, `request.${name}`));
        else if (isUint8Array(value)) fields.push(name, bytesKey(value));
        else invalidType(`\`request.${name}\` must be a string, a number or a Uint8Array, not ${typeName(value)}`);
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
      try {
        return this.#decide(request, cost, nowMs, true);
      } catch (error) {
        throw policyError(this, error);
      }
    }

    peek(request, cost, nowMs) {
      try {
        return this.#decide(request, cost, nowMs, false);
      } catch (error) {
        throw policyError(this, error);
      }
    }

    // op: 0 peek, 1 tryAcquire, 2 reserve (as the native policyOp).
    #decide(request, cost, nowMs, consume) {
      const flat = policyOp(this.#h, this.#fields(request), number(cost, 1, 'cost'), 0, hotNow(this.#clock, nowMs), consume ? 1 : 0);
      return this.#decision(flat, flat[0] === 1);
    }

    reserve(request, cost, maxWaitMs, nowMs) {
      try {
        const fields = this.#fields(request);
        const units = number(cost, 1, 'cost');
        const maxWait = number(maxWaitMs, Infinity, 'max_wait');
        const now = nowFrom(this.#clock, nowMs);
        // Given back in the limits it was booked in only: one added since
        // never held it, and giving it back there would admit more than that
        // limit allows (nor does the request need that limit's fields).
        const limits = this.#limits.length;
        // Its keys in those limits (see untracked and givesBack).
        const marks = () => requestMarks(this.#limits, fields, limits, false);
        // Through `this`: a reservation keeps its policy alive (see Limiter.reserve).
        const give = givesBack(this, marks, (high, low) => B.policyRefund(this.#h, requestText(fields), units, [NaN, high, low], limits));
        const flat = policyOp(this.#h, fields, units, maxWait, now, 2);
        // Read from the scratch and the details first (see Limiter.reserve):
        // the request's marks are made by builtins JS may replace.
        const r = reservation(flat[0] === 1, units, now, () => this.#decision(flat, false), give);
        // A booking of a slot to come that no waiter holds (see untracked).
        if (r.ok && r.waitMs > 0) untracked(this, marks());
        return r;
      } catch (error) {
        throw policyError(this, error);
      }
    }

    refund(request, cost, takenAtMs) {
      ownPolicy(this);
      // As strings: see requestText.
      const fields = requestText(this.#fields(request));
      if (typeof cost !== 'number') badType('cost', 'a number');
      B.policyRefund(this.#h, fields, cost, [takenAt(this.#clock, takenAtMs), NaN, NaN], this.#limits.length);
    }

    /**
     * Puts `request`'s key back to fresh, as a key never seen, in every limit
     * keyed by fields that `request` all gives; how many of those limits held
     * it. A global limit is never reset (it counts every request, and no part
     * of it is this request's), nor a limit keyed by a field `request` lacks:
     * `{ user }` resets the limits by user and keeps those by IP. A request
     * that would reset no limit throws (`invalid_value`). As after
     * `keyed.reset`, a booking of a key it reset made before it then gives
     * nothing back (see givesBack), and waiters of such a key behind one
     * that aborts stay where they were (unless no limit held the key: then
     * nothing changed). Bookings of other keys are given back as before.
     */
    reset(request) {
      ownPolicy(this);
      const fields = this.#given(request);
      const held = B.policyReset(this.#h, requestText(fields));
      // No limit held the key: nothing changed, the waiters are as booked.
      // Else the keys it reset: in every limit keyed by fields it all gives.
      if (held > 0) forgot(this, requestMarks(this.#limits, fields, this.#limits.length, true));
      return held;
    }

    acquire(request, cost, options) {
      let fields;
      let args;
      try {
        ownPolicy(this);
        fields = this.#fields(request);
        args = requestText(fields);
      } catch (error) {
        return Promise.reject(error);
      }
      const h = this.#h;
      // The limits the latest booking was made in (see reserve): a booking
      // is given back before it is made again.
      let limits = 0;
      return acquireSlot(
        {
          reserve: (units, maxWait, now) => {
            limits = this.#limits.length;
            return policyOp(h, fields, units, maxWait, now, 2)[0] === 1;
          },
          marks: () => requestMarks(this.#limits, fields, limits, false),
          refund: (units, high, low) => B.policyRefund(h, args, units, [NaN, high, low], limits),
          read: () => readClock(this.#clock),
          owner: this,
          label: 'policy',
          // A policy of one limit that moves up (a GCRA, a leaky bucket: see
          // waitersOf in limiters.cjs) moves the waiters behind an aborted
          // one up, as that limiter does (one queue: those of other keys
          // too, which share its global limits). One of several limits does
          // not, buckets only or not: each holds a booking until the slowest
          // limit's slot, and a waiter booked again could land later, or be
          // refused. With a bucket among its limits (or one token bucket),
          // it gives back only the latest booking; one of windows only gives
          // each booking back where it was counted.
          ...abortRule(this.#waiters, ''),
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
      ownPolicy(this);
      const flat = decisionFields(decision, 'decision');
      // Read once, as decisionFields reads the rest: a getter may answer otherwise the next time.
      const limits = decision.limits;
      const listed = [];
      if (Array.isArray(limits)) for (let i = 0; i < limits.length && i <= this.#limits.length; i++) listed.push(limits[i]);
      // Fewer: a decision made before `add` added the others, whose headers
      // list the limits it has (as in Python), told by their names: a
      // decision missing some other limit would have its numbers sent under
      // another limit's name.
      const first = listed.length < this.#limits.length && listed.every((d, i) => d?.name === this.#limits[i].name);
      if (!Array.isArray(limits) || (limits.length !== this.#limits.length && !first)) {
        invalidType(
          `\`decision.limits\` must be an array of ${this.#limits.length} decisions, one per limit of the policy (of a decision made before \`add\`: of its first limits, named as they are)`,
        );
      }
      for (let i = 0; i < listed.length; i++) flat.push(...decisionFields(listed[i], `decision.limits[${i}]`));
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
      ownPolicy(this);
      B.policyReclaim(this.#h, nowFrom(this.#clock, nowMs));
    }

    /** The limits, in order: `{ name, by }`. */
    get limits() {
      ownPolicy(this);
      return this.#limits.map(({ name, by }) => ({ name, by: [...by] }));
    }

    /** The limits' names, in order. */
    get names() {
      ownPolicy(this);
      return this.#limits.map(({ name }) => name);
    }

    /** The number of limits (Python: `len(policy)`). */
    get size() {
      ownPolicy(this);
      return this.#limits.length;
    }

    /**
     * The fields limit `name` is keyed by (empty for a global limit); a
     * RangeError `invalid_value` for a name no limit has (Python: RateLimitError `invalid_value`).
     */
    keyedBy(name) {
      ownPolicy(this);
      if (typeof name !== 'string') badType('name', 'a string');
      textOf(name, 'name');
      const limit = this.#limits.find((l) => l.name === name);
      if (limit === undefined) invalidValue(`\`name\` is not the name of a limit in this policy: ${JSON.stringify(name)}`);
      return [...limit.by];
    }

    static {
      // A brand check (see isLimiter).
      isPolicy = (value) => value !== null && typeof value === 'object' && #h in value;
    }

    /** `Policy { limits: [ { name: '10/second', by: [] } ] }` in console.log. */
    [inspectSymbol](depth, options, inspect) {
      if (!isPolicy(this)) return inspectedOther(this, 'Policy', depth, options, inspect);
      return inspected('Policy', { limits: this.limits }, depth, options, inspect);
    }
  }

  return { Policy, isPolicy };
};
