'use strict';
// ratekeeper/redis: what RedisLimiter and RedisPolicy share (see Store).

const api = require('../../index.js');
const { isUint8Array, bytesCopy, onlyKnown, isSignal, ownCopy, textOf, hasField, BRANDS } = require('../api.cjs');
const { MAX_NOW, MAX_SPAN, MAX_BATCH, IN_FLIGHT, DEFAULT_COMMAND_TIMEOUT_MS, STORE_OPTIONS, typeError, rangeError, wholeMicros } = require('./values.cjs');
const { REDIS_SCRIPT, REDIS_SCRIPT_SHA, commandSender, integers, isScriptError, within, nonce } = require('./wire.cjs');
const { nativeOnly } = require('./limits.cjs');
const { counted, keyPart, joined, keyId, reaches } = require('./keys.cjs');
const { MAX_TIMER_MS, sleep, abortable } = require('./timers.cjs');
const { RedisReservation, giveBackLatest, dueOf } = require('./reservation.cjs');

const { RateLimited } = api;
// Brand checks, never `instanceof` (see limits.cjs).
const { isLimiter, isKeyed, isPolicy } = api[BRANDS];

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
      // null is "not given" for each, as for `clock` and as every optional
      // argument's and option's null is in the package (prefix, onError,
      // batching and commandTimeoutMs were a TypeError).
      if (options.prefix !== undefined && options.prefix !== null) {
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
      if (options.onError !== undefined && options.onError !== null) {
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
      if (options.batching !== undefined && options.batching !== null) {
        if (typeof options.batching !== 'boolean') throw typeError('batching', 'a boolean');
        batching = options.batching;
      }
      if (options.commandTimeoutMs !== undefined && options.commandTimeoutMs !== null) {
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
  }

  /**
   * UNLINK of `keys` for a reset: how many Redis held. A booking made
   * before gives nothing back since, whichever client reset the key: its
   * give-back carries the key's birth (PROTOCOL.md, "Guarded refund").
   */
  async unlink(keys) {
    return Number(await within(this.send(['UNLINK', ...keys], keys[0]), this.commandTimeoutMs));
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
   * cluster, SCRIPT LOAD may reach another node than the key's; else the
   * script was flushed again meanwhile). Not once `abandoned()` (the caller
   * was answered without Redis, or left): a NOSCRIPT, or a reload, that
   * ends after that ends there, rather than sending a new decision nobody
   * waits for (its units taken ahead of the callers still there until its
   * give-back came, and on a bucket with a booking behind it, never).
   */
  async evaluate(keys, args, abandoned = () => false) {
    const rest = [String(keys.length), ...keys, ...args.map(String)];
    const key = keys[0];
    let missing;
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        return await this.send(['EVALSHA', REDIS_SCRIPT_SHA, ...rest], key);
      } catch (error) {
        if (!(error instanceof Error) || !String(error.message).startsWith('NOSCRIPT') || abandoned()) throw error;
        missing = error;
      }
      if (attempt === 0) {
        await this.send(['SCRIPT', 'LOAD', REDIS_SCRIPT], key);
        if (abandoned()) throw missing;
      }
    }
    try {
      return await this.send(['EVAL', REDIS_SCRIPT, ...rest], key);
    } catch (error) {
      // An ACL user allowed EVALSHA and SCRIPT LOAD but not EVAL: the
      // NOSCRIPT stands, an outage `onError` answers, as the Python client
      // answers it (a NOPERM here rejected the call, for a flush that the
      // next call's reload mends).
      if (error instanceof Error && /^NOPERM\b.*'eval' command/i.test(String(error.message))) throw missing;
      throw error;
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
    // faster than an array of them (PROTOCOL.md); an acquire's nonce after it.
    const args = ['1', mode, this.wireNow(nowMs), ...this.config, costs.length, ...costs, 'text'];
    if (mode === 'acquire') args.push(nonce());
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
   * its keys since; and a late NOSCRIPT sends nothing more. Once `gone()`
   * (the caller left: an aborted acquire), a NOSCRIPT or a reload sends
   * nothing more either, and a fault rejects rather than asking `onError`,
   * for nobody.
   */
  async ask(keys, args, taken, gone = () => false) {
    let late = false;
    const sent = this.evaluate(keys, args, () => late || gone());
    try {
      return integers(await within(sent, this.commandTimeoutMs));
    } catch (error) {
      if (isScriptError(error) || error?.code === 'invalid_reply') throw error;
      late = true;
      if (taken !== null) {
        sent
          .then((reply) => {
            const took = taken(integers(reply));
            // With the keys' births: nothing to a key reset since (PROTOCOL.md, "Guarded refund").
            return took === null ? undefined : this.refundAt(keys, took[0], String(took[1]), took[2]);
          })
          .catch(() => undefined);
      }
      if (gone()) throw error;
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
   * `gone()`: whether the caller left meanwhile (see ask).
   */
  async reserve(target, keys, cost, maxWaitMs, nowMs, gone = () => false) {
    let maxWait = MAX_SPAN;
    if (maxWaitMs !== undefined && maxWaitMs !== null && maxWaitMs !== Infinity) {
      if (typeof maxWaitMs !== 'number') throw typeError('maxWaitMs', 'a number');
      if (!(maxWaitMs >= 0)) throw rangeError('maxWaitMs', `must be at least 0, not ${maxWaitMs}`);
      maxWait = Math.min(wholeMicros(maxWaitMs), MAX_SPAN);
    }
    const args = ['1', 'reserve', this.wireNow(nowMs), ...this.config, 1, cost, maxWait, nonce()];
    // After `now, booked, wait` and the decision at now: each limit's mark,
    // then each key's birth, which a guarded refund sends back as they are
    // (PROTOCOL.md, "Guarded refund").
    const n = this.limits.length;
    const marksOf = (numbers) => numbers.slice(3 + (n === 1 ? 6 : 6 + 5 * n));
    // A late booking is nobody's: given back only while it is the latest.
    const booked = (numbers) => (numbers[1] === 1 ? [cost, numbers[0] + numbers[2], marksOf(numbers)] : null);
    const numbers = await this.ask(keys, args, cost > 0 ? booked : null, gone);
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
    // Booked at the clock's reading (no `nowMs`): the slot on that clock, for acquire (see sleepUntil).
    const due = ok && this.clock !== null && (nowMs === undefined || nowMs === null) ? numbers[0] + numbers[2] : null;
    if (!(ok && cost > 0)) return new RedisReservation(fields, null, null, due);
    const marks = marksOf(numbers);
    // cancel() gives back as it is ("the latest first"): no limit's mark (an
    // empty count each), only the keys' births, so that a key reset since by
    // any process (or expired and made again) gives nothing back.
    const births = [...Array(n).fill(''), ...marks.slice(-n)];
    return new RedisReservation(
      fields,
      () => this.refundAt(keys, cost, slot, births),
      () => this.refundAt(keys, cost, slot, marks),
      due,
    );
  }

  /**
   * Sleeps until the slot of `r`, an acquire's booking: its `waitMs`; then,
   * booked on the caller's `clock`, what is left until the slot on that
   * clock, read after each sleep, until it has come there, as the
   * in-process acquire re-arms its timer until the limiter's clock reaches
   * the slot (lib/api/waiting.cjs, wake): a clock counting coarser than
   * the timers (tenths of a second) or running behind them has not reached
   * the slot when the wait has passed on the timers'. No round trip: the
   * slot is known from the booking. The clock is read and checked as for a
   * booking, and its throw rejects (the caller gives the booking back); one
   * that never reaches the slot keeps the acquire waiting until its signal
   * aborts, as in-process. `timeoutMs` bounds none of it: it bounds the wait
   * booked, at booking, as in-process.
   *
   * On the server's clock (the default: the script reads TIME), one sleep:
   * reading that clock again costs a round trip per acquire, and the sleep
   * begins once the reply is in, after the script read it, so a timer that
   * takes its wait ends after the slot there (clock rates aside), and the
   * next call's script reads it a round trip later still. Only a timer that
   * fires early (Node's count whole milliseconds from a time the loop read
   * before) may end it sooner, by a millisecond or so, less those round trips.
   */
  async sleepUntil(r, signal) {
    const due = dueOf(r);
    let waitMs = r.waitMs;
    while (waitMs > 0) {
      await sleep(waitMs, signal);
      // What is left on the caller's clock, read as a booking reads it (its errors naming `clock()`).
      waitMs = due === null ? 0 : (due - Number(this.wireNow(undefined))) / 1000;
    }
  }

  /**
   * acquire: books once (reserve within what is left of `timeoutMs`) and
   * sleeps until the slot (see sleepUntil); an abort, or a throw of the
   * caller's clock read for what is left, gives the booking back. While Redis
   * cannot answer, retries after the fallback's `retryAfterMs`. `book(left,
   * gone)` books within `left` ms; `gone()` says the caller left (aborted).
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
      let gone = false;
      const booking = book(left, () => gone);
      // Aborted during the booking's round trip: rejects at once, and the
      // booking, when it comes, goes back (the round trip cannot be recalled;
      // a reload of the script under way sends none).
      const r = await abortable(
        booking,
        signal,
        (late) => {
          if (late.ok) giveBack(late);
        },
        () => {
          gone = true;
        },
      );
      if (r.ok) {
        try {
          await this.sleepUntil(r, signal);
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
   * the booking is the latest on its key, and no key born since gives back
   * (PROTOCOL.md, "Guarded refund"). Argument errors and the script's
   * own throw.
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

module.exports = { Store };
