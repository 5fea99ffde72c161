'use strict';
// pacedFetch: a `fetch` that sends its requests at a limiter's rate, first come
// first served. Written once for every build of the `ratekeeper` package: Node
// requires this file (and paced-fetch/headers.cjs, what a response says of
// when to ask again); the package's browser and worker entries import
// lib/paced-fetch.mjs, the same files bundled as an ES module by
// scripts/package.sh. It needs only the limiter's public API (`reserve`, and
// a reservation's `cancel()`), so it works with the napi and the wasm build alike.
//
// How it waits: each call books its slot at once with `limiter.reserve`, so the
// limiter itself keeps the order and the spacing; the calls wait in one queue
// behind ONE timer, armed for the head's slot (no polling). When a server says
// to slow down (a 429, 503 or 403 with `Retry-After`, or a `RateLimit` header with
// nothing remaining), the queue pauses until then: every booking still queued is
// refunded, and the requests are booked again when the pause ends, in the same
// order (booked then, at the time it is: a booking made now for later would
// move the limiter's clock ahead, and a call of another on the same limiter
// would be decided at that later time, where more is free).
//
// The limiter may be shared (with `acquire` calls, say). A bucket gives back
// exactly only its latest booking, so a booking given back when another
// booked after it would let two units go at once: then pacedFetch gives
// nothing back (the slot goes unused) and moves nobody up, as `acquire` does.
// It knows from the count a ratekeeper limiter keeps (BOOKINGS), and asks
// the limiter whether those behind move up (MOVES_UP).

const { isSignal, listen, unlisten } = require('./api/values.cjs');
const { parseRetryAfter, ageOf, parseRateLimit } = require('./paced-fetch/headers.cjs');

// The answers whose `Retry-After` pauses the queue (and sends the request
// again): a 429, a 503, and a 403, which servers send for a rate limit too
// (GitHub's secondary rate limits). A 403 without Retry-After is an answer.
const RETRY_STATUSES = new Set([429, 503, 403]);
// The answers that refuse a request before any work on it (a rate limit's
// 429, a 403 asking to wait): sent again whatever its method.
const REFUSED = new Set([429, 403]);
// A ratekeeper limiter's answer to whether the bookings behind an aborted one
// move up into the slots it left (see lib/api/limiters.cjs, waitersOf): true
// for a GCRA or a leaky bucket; 'latest' for a token bucket, which gives back
// exactly only its latest booking, and where a booking made again could land
// later than it was (its capacity clips the refill a booking took), so that
// nobody moves; false for a window algorithm, which gives each booking back
// where it was counted, and books again only after every other.
const MOVES_UP = Symbol.for('ratekeeper.movesUp');
// A ratekeeper limiter's count of bookings of a slot to come, reconfigures
// and restores, by anyone (lib/api/limiters.cjs).
const BOOKINGS = Symbol.for('ratekeeper.bookings');
// A ratekeeper limiter's reading of its own clock (lib/api/limiters.cjs):
// the default `clock`, so that the queue counts time as the limiter does.
const NOW = Symbol.for('ratekeeper.now');
// A 503 may come after the server did some of the work: only these are sent
// again after one (a 429 or 403 says the request was refused, so any is).
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE']);

/** Whether `input` is a `Request` (duck-typed: any realm's, or a polyfill's). */
function isRequest(input) {
  return input !== null && typeof input === 'object' && typeof input.clone === 'function' && typeof input.method === 'string';
}

/**
 * An error thrown by `onEvent`: reported, never thrown on, so that the queue
 * and the process stay whole. Browsers, Deno and workers have `reportError`;
 * Node has none (an error thrown from a microtask would end the process
 * there), so it gets a warning on stderr (`process.emitWarning`).
 */
function report(error) {
  try {
    if (typeof globalThis.reportError === 'function') globalThis.reportError(error);
    // emitWarning takes an Error or a string only: `throw {}` is reported too.
    else if (typeof globalThis.process?.emitWarning === 'function') globalThis.process.emitWarning(error instanceof Error ? error : String(error));
    else if (typeof console !== 'undefined') console.error(error);
  } catch {
    // Reporting failed (String() of an object whose toString throws): nothing more to do.
  }
}

/**
 * `value`, the answer of the limiter's method `name`, else (a thenable: an
 * async limiter's) a TypeError naming it: a Promise is no decision, and
 * pacedFetch books each request as it is called, to keep the order. A
 * rejection it may bring is handled here: unhandled, it would end a Node
 * process.
 */
function decided(name, value, what = 'a value') {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function') || typeof value.then !== 'function') return value;
  Promise.resolve(value).catch(() => {});
  throw typeError(`\`${name}\` must return ${what}, not a Promise: pacedFetch needs a limiter that decides at once`);
}

/**
 * The answer of `limiter`'s method `symbol` (MOVES_UP, BOOKINGS), named
 * `name`. A ratekeeper limiter's own method, of either build, refuses a
 * `this` that is not of its class (its brand check, TypeError
 * `invalid_type`): a Proxy of a limiter (a framework's reactive wrapper) or
 * an object inheriting from one has the limiter's methods, but each of them
 * refuses it. Refused here, naming `limiter`: the error named `this`, a
 * value the caller never passed. Asked of the method rather than checked by
 * class, since pacedFetch is shared by the builds, each with classes of its
 * own, and takes a limiter of another kind too.
 */
function ask(limiter, symbol, name) {
  let answer;
  try {
    answer = limiter[symbol]();
  } catch (error) {
    if (error?.code !== 'invalid_type') throw error;
    const message = '`limiter` must be a limiter itself, not a Proxy of one (a reactive wrapper) or an object inheriting from one: its methods refuse it as `this`';
    throw typeError(message, { cause: error });
  }
  return decided(name, answer);
}

/** A TypeError (code `invalid_type`), as the limiters' own; `options` as the TypeError constructor takes them (`cause`). */
function typeError(message, options) {
  return Object.assign(new TypeError(message, options), { code: 'invalid_type' });
}

/** A RangeError (code `invalid_value`), as the limiters' own. */
function rangeError(message) {
  return Object.assign(new RangeError(message), { code: 'invalid_value' });
}

/** The options pacedFetch takes: another is refused, as the limiters refuse theirs (a misspelt one would be ignored). */
const OPTIONS = ['cost', 'maxWaitMs', 'maxWaiting', 'retries', 'maxRetryAfterMs', 'clock', 'wallClock', 'timers', 'onEvent'];

/**
 * Milliseconds as a message shows them: to the nanosecond, as the limiters'
 * own are, so that a sum of floats reads 300, not 300.00000000000006.
 */
function shownMs(ms) {
  return Math.round(ms * 1e6) / 1e6;
}

/**
 * What the clock `name` (`clock`, `wallClock`) reads: a finite number of
 * milliseconds, else a TypeError or RangeError naming it, as a limiter's
 * clock is checked. NaN would leave every request undue (a pause ending at
 * NaN never ends), behind a timer armed again and again.
 */
function readMs(name, read) {
  const ms = read();
  if (typeof ms !== 'number') throw typeError(`\`${name}\` must return a number of milliseconds, not ${ms === null ? 'null' : typeof ms}`);
  if (!Number.isFinite(ms)) throw rangeError(`\`${name}\` must return a finite number of milliseconds, not ${ms}`);
  return ms;
}

/** A TimeoutError carrying the wait that was needed, as acquire's does. */
function timeoutError(message, retryAfterMs) {
  return Object.assign(new DOMException(message, 'TimeoutError'), { retryAfterMs });
}

/**
 * The package's `pacedFetch` for one build: its `rate_limited` errors are
 * instances of that build's `RateLimited`, which the entries (main.cjs,
 * wasm/browser.mjs, wasm/workerd.mjs) pass in. This file cannot require it:
 * it is wrapped as an ES module on its own (scripts/package.sh).
 */
function pacedFetchFor(RateLimited) {
  return function pacedFetch(fetch, limiter, options) {
    return pace(RateLimited, fetch, limiter, options);
  };
}

/** The longest delay timers take (2^31 - 1 ms, about 24.8 days): a longer one fires at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;
// The longest pause a server's answer makes, whatever maxRetryAfterMs says:
// a year, which keeps the end of any pause within the limiter's range of
// time (2^64 ns) on an epoch clock too.
const MAX_PAUSE_MS = 365 * 24 * 3600 * 1000;

/**
 * Wraps `fetch` so that its requests leave at `limiter`'s rate, in the order
 * they were made. See paced-fetch.d.ts for the options.
 */
function pace(RateLimited, fetch, limiter, options) {
  if (typeof fetch !== 'function') throw typeError('`fetch` must be a function');
  if (limiter === null || typeof limiter !== 'object' || typeof limiter.reserve !== 'function') {
    throw typeError('`limiter` must be a limiter');
  }
  // Their reserve takes a key or a request first: called as a limiter's, it
  // would book the cost as a key (and a Redis one answers a promise). Only
  // they have `maxKeys`, `limits` or `tryAcquireBatch`.
  if ('maxKeys' in limiter || 'limits' in limiter || typeof limiter.tryAcquireBatch === 'function') {
    throw typeError('`limiter` must be an in-process limiter (a TokenBucket, Gcra...), not a keyed, Redis or policy one: pace each destination with a limiter of its own');
  }
  // Whether those behind an aborted booking move up, or (latestOnly) nobody
  // moves and a booking is given back only while it is the latest. A
  // limiter without the answer is taken for a bucket whose waiters move up
  // (its refund gives back the latest booking).
  const waiters = typeof limiter[MOVES_UP] === 'function' ? ask(limiter, MOVES_UP, "limiter[Symbol.for('ratekeeper.movesUp')]") : true;
  const latestOnly = waiters === 'latest';
  const movesUp = !latestOnly && Boolean(waiters);
  // Read once here to be checked: later reads are in listeners and timers, where nothing may throw.
  if (typeof limiter[BOOKINGS] === 'function') ask(limiter, BOOKINGS, "limiter[Symbol.for('ratekeeper.bookings')]");
  if (options !== undefined && options !== null) {
    // An array's indices would read as no option at all: refused, as the limiters refuse one.
    if (typeof options !== 'object' || Array.isArray(options)) throw typeError('`options` must be an object');
    for (const option of Object.keys(options)) {
      if (!OPTIONS.includes(option)) throw typeError(`\`${option}\` is not an option of pacedFetch, which takes ${OPTIONS.join(', ')}`);
    }
  }
  // null is "not given", as every optional argument's and option's null is
  // in the package (it was a TypeError for each): the defaults below take
  // undefined only. Each option read once, as the destructuring read it.
  const given = {};
  if (options !== undefined && options !== null) {
    for (const option of OPTIONS) {
      const value = options[option];
      if (value !== null) given[option] = value;
    }
  }
  const {
    cost = 1,
    maxWaitMs = Infinity,
    maxWaiting = Infinity,
    retries = 1,
    maxRetryAfterMs = 60_000,
    clock = typeof limiter[NOW] === 'function' ? () => limiter[NOW]() : () => performance.now(),
    wallClock = () => Date.now(),
    timers = { setTimeout: (fn, ms) => setTimeout(fn, ms), clearTimeout: (id) => clearTimeout(id) },
    onEvent,
  } = given;
  if (typeof cost !== 'number' && typeof cost !== 'function') throw typeError('`cost` must be a number or a function');
  // Checked here, as the counts below, not at each call (each rejected with the limiter's error).
  if (typeof cost === 'number' && !(Number.isSafeInteger(cost) && cost >= 0)) {
    throw rangeError(`\`cost\` must be a whole number from 0 to 2^53 - 1, not ${cost}`);
  }
  const counts = [['maxWaitMs', maxWaitMs], ['maxWaiting', maxWaiting], ['retries', retries], ['maxRetryAfterMs', maxRetryAfterMs]];
  for (const [name, value] of counts) {
    // A value of another type is a TypeError, as the limiters' own ('1' is not 1).
    if (typeof value !== 'number') throw typeError(`\`${name}\` must be a number, not ${value === null ? 'null' : typeof value}`);
    if (!(value >= 0)) throw rangeError(`\`${name}\` must be a number >= 0, not ${value}`);
  }
  // Checked here, not at the first call that uses one: each call would
  // reject with the engine's uncoded TypeError (`clock is not a function`),
  // and an `onEvent` that is none would be reported on every event.
  for (const [name, value] of [['clock', clock], ['wallClock', wallClock], ['onEvent', onEvent]]) {
    if (value !== undefined && typeof value !== 'function') throw typeError(`\`${name}\` must be a function`);
  }
  if (timers === null || typeof timers !== 'object' || typeof timers.setTimeout !== 'function' || typeof timers.clearTimeout !== 'function') {
    throw typeError('`timers` must be an object with the functions setTimeout and clearTimeout');
  }
  if (!Number.isInteger(retries)) throw rangeError(`\`retries\` must be a whole number, not ${retries}`);
  if (!Number.isInteger(maxWaiting) && maxWaiting !== Infinity) {
    throw rangeError(`\`maxWaiting\` must be a whole number or Infinity, not ${maxWaiting}`);
  }

  // Entries waiting for their slot, in booking order: all booked, or (while
  // a pause lasts, and until it is over) none, to be booked when it ends.
  const queue = [];
  let pausedUntil = -Infinity; // on `clock`
  // The bookings others made (see BOOKINGS): the limiter's count, less this queue's own.
  let mine = 0;
  const others = typeof limiter[BOOKINGS] === 'function' ? () => limiter[BOOKINGS]() - mine : () => 0;
  // This queue's bookings so far, and the latest of them still standing
  // (given back or not): each entry records its own and the one below it
  // (see isLatest). Numbers, not entries: a chain of entries would keep
  // every request ever sent alive.
  let ownBookings = 0;
  let top = 0;
  let timer = null;
  let timerAt = NaN;
  // The setTimeout that armed `timer`: by default the global one of the
  // moment, which fake timers may replace and then remove (a test's end),
  // leaving a timer nobody runs.
  const timersInPlace = given.timers === undefined ? () => globalThis.setTimeout : () => timers.setTimeout;
  let armedBy;
  let nextId = 0;
  // The requests taken out of the queue meanwhile, each with the error that
  // fails it, while `whole` runs (else null).
  let held = null;
  // The clocks, checked at each read (see readMs). A read that fails in the
  // timer fails the queued requests; in a call, that call.
  const readClock = () => readMs('clock', clock);
  const readWall = () => readMs('wallClock', wallClock);
  const emit = (event) => {
    if (onEvent === undefined) return;
    // A clock failing now (it fails the requests concerned) leaves the
    // event told, at NaN: lost, it would leave them queued to onEvent.
    let atMs;
    try {
      atMs = readClock();
    } catch {
      atMs = NaN;
    }
    try {
      onEvent({ ...event, atMs, waiting: queue.length, pausedUntilMs: pausedUntil });
    } catch (error) {
      report(error);
    }
  };

  function arm() {
    if (queue.length === 0) {
      if (timer !== null) timers.clearTimeout(timer);
      timer = null;
      return;
    }
    if (timer !== null && timerAt === Math.max(queue[0].atMs, pausedUntil) && armedBy === timersInPlace()) return;
    let now;
    try {
      now = readClock();
    } catch {
      now = Infinity; // due at once: the timer's read fails the same way, and fails the requests
    }
    // Read first: the clock is the caller's, and may call or abort requests
    // of this very queue (from inside it), each arming the timer for the
    // queue it left. Armed after the read, for the queue as it is now, over
    // whatever that armed: one timer, which the last request gone clears.
    // (Armed before, the timer the read armed was lost, or this one armed
    // for a request gone, and either kept the process alive, up to the
    // slot, with nothing queued.)
    if (timer !== null) timers.clearTimeout(timer);
    timer = null;
    if (queue.length === 0) return;
    const due = Math.max(queue[0].atMs, pausedUntil);
    timerAt = due;
    armedBy = timersInPlace();
    // At most what timers take (2^31 - 1 ms; a longer delay fires at once):
    // a longer wait takes several timers.
    timer = timers.setTimeout(fire, Math.min(Math.max(0, Math.ceil(due - now)), MAX_TIMER_MS));
  }

  function fire() {
    timer = null;
    let now;
    try {
      now = readClock();
    } catch (error) {
      // Thrown from the timer, it would end a Node process and leave the
      // queue waiting for ever: the requests fail with it, their bookings
      // given back, each told 'rejected'.
      releaseAll();
      whole(() => {
        for (const entry of queue.splice(0)) drop(entry, error);
      });
      arm();
      return;
    }
    bookAfterPause(now);
    // Timers may fire a little early on this clock: whoever is not due waits for the next one.
    while (queue.length > 0 && queue[0].reservation !== null && queue[0].atMs <= now && pausedUntil <= now) send(queue.shift());
    arm();
  }

  /** Once a pause is over, books the requests it left unbooked, in order, within what is left of each one's maxWaitMs. */
  function bookAfterPause(now) {
    if (pausedUntil > now || queue.length === 0 || queue[0].reservation !== null) return;
    rebook(0, queue.slice(), now);
  }

  /** Whether another booked `entry`'s limiter after it (or reconfigured or restored it). */
  function bookedByOthersSince(entry) {
    return others() > entry.others;
  }

  /**
   * Whether `entry`'s booking is the limiter's latest: nobody booked after
   * it, neither another (see BOOKINGS) nor this queue (a request booked
   * later, or one aborted and kept unused), or those who did gave theirs
   * back since, newest first.
   */
  function isLatest(entry) {
    return top === entry.own && !bookedByOthersSince(entry);
  }

  /** How a refusal names `maxWait`: maxWaitMs, or (`again`) what is left of it. */
  function bound(maxWait, again) {
    return `${again ? 'what is left of maxWaitMs' : 'maxWaitMs'} (${shownMs(maxWait)} ms)`;
  }

  /** The TimeoutError of a request that the pause alone would keep past `maxWait` (see `bound`), or null. */
  function pauseExceeds(now, maxWait, again) {
    const pause = pausedUntil - now;
    return pause > maxWait ? timeoutError(`the pause (${shownMs(pause)} ms) would exceed ${bound(maxWait, again)}`, pause) : null;
  }

  /**
   * Books `entry` at `now`, within `maxWait` (its maxWaitMs, or when `again`,
   * what is left of it); null, or the error to reject it with.
   */
  function book(entry, now, maxWait, again = false) {
    const r = decided('limiter.reserve', limiter.reserve(entry.cost, maxWait, now), 'a reservation');
    // Beyond what any pause reaches, the limiter counts on another clock
    // (Date.now() where pacedFetch reads performance.now()): each request
    // would wait for decades.
    if ((r.ok ? r.atMs - now : r.waitMs) > MAX_PAUSE_MS) {
      if (r.ok && r.waitMs > 0) mine++; // counted by the limiter, as any booking of ours
      if (r.ok) giveBack(Object.assign(entry, { atMs: r.atMs, reservation: r, below: top, own: (top = ++ownBookings) }));
      return rangeError(
        `\`limiter\` books ${Math.round(r.ok ? r.atMs - now : r.waitMs)} ms ahead: it reads another clock than pacedFetch's \`clock\` (give both the same)`,
      );
    }
    if (r.ok) {
      // Counted as the limiter counts bookings (BOOKINGS): those of a slot to come.
      if (r.waitMs > 0) mine++;
      entry.atMs = r.atMs;
      entry.reservation = r;
      entry.others = others();
      entry.below = top;
      entry.own = top = ++ownBookings;
      return null;
    }
    if (r.waitMs > maxWait) {
      return timeoutError(`the wait (${shownMs(r.waitMs)} ms) would exceed ${bound(maxWait, again)}`, r.waitMs);
    }
    return new RateLimited(`cannot book ${entry.cost} now; retry in ${r.waitMs} ms`, r.waitMs);
  }

  /**
   * Gives back the bookings of the queue from `from` on, and books again
   * those in `again`, in order, at `now`, within what is left of each one's
   * maxWaitMs: so that nobody queued keeps a slot that an earlier booking
   * given back moved, and two requests never share one.
   */
  function rebook(from, again, now) {
    whole(() => {
      for (let i = queue.length - 1; i >= from; i--) giveBack(queue[i]);
      queue.length = from;
      for (const entry of again) {
        let error;
        try {
          // A timer that fired late may leave less than nothing of it: then
          // only a slot free at once will do.
          error = book(entry, now, Math.max(0, entry.deadline - now), true);
        } catch (thrown) {
          // The limiter refused the arguments (a clock out of its range, say):
          // this request fails, and the others are still booked.
          error = thrown;
        }
        if (error === null) queue.push(entry);
        else drop(entry, error);
      }
    });
  }

  /**
   * The server asked for a pause: every queued booking is given back (kept,
   * unused, when others booked after the first: see BOOKINGS), and the
   * requests wait unbooked, in call order (`first`, a request to send
   * again, among them), to be booked when it ends; those whose maxWaitMs it
   * exceeds reject now. A pause of nothing (`Retry-After: 0`, a date
   * already past, delay-seconds spent in a cache, maxRetryAfterMs 0) with
   * no request to send again changes nothing: released and booked again,
   * the queue's bookings were kept unused where another booked the
   * limiter after them, and the requests waited as many slots again.
   */
  function pause(ms, first) {
    if (first === undefined && !(ms > 0)) return;
    const now = readClock();
    pausedUntil = Math.max(pausedUntil, now + Math.min(ms, MAX_PAUSE_MS));
    releaseAll();
    if (first !== undefined) {
      first.reservation = null; // spent on its first answer
      // In call order: ahead of those called after it, behind a request
      // called before it and sent again already (two 429s in a row).
      let at = 0;
      while (at < queue.length && queue[at].id < first.id) at++;
      queue.splice(at, 0, first);
    }
    whole(() => {
      for (const entry of queue.splice(0)) {
        const error = pauseExceeds(now, entry.deadline - now, true);
        if (error !== null) {
          drop(entry, error);
        } else {
          entry.atMs = pausedUntil;
          queue.push(entry);
        }
      }
    });
    emit({ type: 'paused', untilMs: pausedUntil });
    arm();
  }

  /**
   * Gives back every queued booking, newest first (kept, unused, when others
   * booked after the first: see BOOKINGS; for a token bucket, each one
   * kept unless it is the latest then); the requests stay queued, unbooked.
   */
  function releaseAll() {
    const booked = queue.filter((entry) => entry.reservation !== null);
    const keep = booked.length > 0 && movesUp && bookedByOthersSince(booked[0]);
    for (const entry of booked.reverse()) {
      if (latestOnly ? isLatest(entry) : !keep) giveBack(entry);
      entry.reservation = null;
    }
  }

  /** Gives `entry`'s booking back, if it has one: exactly at its slot (`cancel()`), or at `atMs` for a limiter without it. */
  function giveBack(entry) {
    const r = entry.reservation;
    if (r === null) return;
    // The latest no more: the one below it is (see isLatest).
    if (top === entry.own) top = entry.below;
    if (typeof r.cancel === 'function') r.cancel();
    else limiter.refund(entry.cost, entry.atMs);
    entry.reservation = null;
  }

  /**
   * Gives back the booking of `entry`, a request leaving before it was
   * queued, where that frees no slot another holds: a window's (given back
   * where it was counted), else only while it is the limiter's latest. The
   * caller's code run since it booked (a signal-like's addEventListener)
   * may have booked after it, through this queue or not: given back then, a
   * bucket's or a GCRA's booking freed the slot at the end, which the next
   * booking shared (two requests at once from a burst of one). Its slot
   * goes unused instead, as an aborted queued request's does (see onAbort).
   */
  function leaveUnqueued(entry) {
    if ((!latestOnly && !movesUp) || isLatest(entry)) giveBack(entry);
  }

  /** Whether `entry`'s signal is aborted (its listener may not have run yet). */
  function isAborted(entry) {
    return entry.signal !== undefined && entry.signal.aborted;
  }

  /** Stops listening to `entry`'s signal, from the timer too (see unlisten). */
  function stopListening(entry) {
    if (entry.signal !== undefined) unlisten(entry.signal, entry.onAbort);
  }

  function fail(entry, error) {
    stopListening(entry);
    entry.reject(error);
  }

  /** Fails a queued `entry` that leaves the queue (a pause beyond its maxWaitMs, its booking refused), and tells onEvent (see `whole`). */
  function drop(entry, error) {
    if (held !== null) {
      held.push([entry, error]);
      return;
    }
    fail(entry, error);
    emit({ type: 'rejected', id: entry.id });
  }

  /**
   * Runs `change`, which takes requests out of the queue and puts others
   * back, failing those it took out and telling onEvent of them
   * ('rejected') once it is done. Both run the caller's code (a
   * signal-like's removeEventListener, onEvent): run as each left, a call
   * made there went into the queue ahead of those not yet put back, and
   * ahead of the call under way (its booking then came first: first come
   * first served no more), and an abort of a request not yet put back was
   * not heard (its listener did not find it), and the request went.
   */
  function whole(change) {
    if (held !== null) return change();
    held = [];
    try {
      return change();
    } finally {
      const dropped = held;
      held = null;
      for (const [entry, error] of dropped) fail(entry, error);
      for (const [entry] of dropped) emit({ type: 'rejected', id: entry.id });
    }
  }

  function send(entry) {
    stopListening(entry);
    emit({ type: 'sent', id: entry.id, slotMs: entry.atMs, attempt: entry.attempt });
    // A Request with a body can be read once: a copy goes, while a retry may follow.
    const input = entry.replayable && isRequest(entry.input) && entry.input.body != null && entry.attempt < retries ? entry.input.clone() : entry.input;
    let sent;
    try {
      sent = Promise.resolve(fetch(input, entry.init));
    } catch (error) {
      sent = Promise.reject(error);
    }
    sent.then(
      (response) => {
        try {
          answered(entry, response);
        } catch (error) {
          // Not a Response (a fetch-like function's own result), say; or
          // the clock failing as a 429 was to be retried, its signal
          // listened to again: let go, or a shared signal kept the request.
          fail(entry, error);
        }
      },
      (error) => fail(entry, error),
    );
  }

  function answered(entry, response) {
    if (response === null || typeof response !== 'object' || typeof response.headers?.get !== 'function') {
      throw typeError(`\`fetch\` must resolve to a Response, not ${response === null ? 'null' : typeof response}`);
    }
    emit({ type: 'response', id: entry.id, status: response.status });
    const headers = response.headers;
    // A cache's answer (an `Age` above 0) tells of the server as it was
    // then: its Retry-After seconds count from then, and its RateLimit
    // fields are ignored (the draft's section 7.3: they SHOULD be, on a
    // response from a cache), or each reuse of a response saying `r=0`
    // would pause the queue again, long after the quota came back.
    const age = ageOf(headers);
    const retryAfter = RETRY_STATUSES.has(response.status) ? parseRetryAfter(headers.get('retry-after'), readWall, age, headers.get('date')) : null;
    if (retryAfter !== null) {
      const again = entry.replayable && (REFUSED.has(response.status) || IDEMPOTENT.has(entry.method));
      const retry = again && entry.attempt < retries && retryAfter <= Math.min(maxRetryAfterMs, MAX_PAUSE_MS) && !(entry.signal && entry.signal.aborted);
      if (retry) {
        entry.attempt += 1;
        // The answer is dropped: free its connection.
        if (response.body && typeof response.body.cancel === 'function') response.body.cancel().catch(() => {});
        if (entry.signal !== undefined) {
          try {
            listen(entry.signal, entry.onAbort);
          } catch (error) {
            // Never listened to (a polyfill's signal), it would wait
            // unabortable: it rejects with that error, not retried, and
            // the queue still pauses as the server asked.
            pause(Math.min(retryAfter, maxRetryAfterMs));
            entry.reject(error);
            return;
          }
        }
        // Its wait is bounded by maxRetryAfterMs now, not by maxWaitMs.
        entry.deadline = Infinity;
        pause(retryAfter, entry);
        // Aborted before it was queued again, by the caller's code run since
        // its signal was read (the response body's cancel, the clock read by
        // the pause): its listener did not find it, and it went again. Taken
        // out now, as its listener does (which finds it gone if it ran since).
        if (entry.signal !== undefined && entry.signal.aborted) {
          stopListening(entry);
          entry.onAbort();
        }
        return;
      }
      pause(Math.min(retryAfter, maxRetryAfterMs));
    } else if (age === 0) {
      const wait = parseRateLimit(headers);
      if (wait !== null && wait > 0) pause(Math.min(wait, maxRetryAfterMs));
    }
    entry.resolve(response);
  }

  function paced(input, init) {
    // A call's bookings after a pause (bookAfterPause) may take requests
    // out: told once this one is queued (see `whole`).
    return new Promise((resolve, reject) => whole(() => {
      // fetch takes init's signal over the Request's own, null included
      // (which detaches the request from its own).
      const own = init != null && init.signal !== undefined ? init.signal : isRequest(input) ? input.signal : null;
      const signal = own == null ? undefined : own;
      if (signal !== undefined && !isSignal(signal)) {
        reject(typeError('`signal` must be an AbortSignal'));
        return;
      }
      if (signal !== undefined && signal.aborted) {
        reject(signal.reason);
        return;
      }
      // A full queue books nothing: the caller may try again once its head has left.
      const refuseFull = (readNow) => {
        reject(new RateLimited(`${queue.length} requests are waiting, the most maxWaiting allows`, Math.max(0, queue[0].atMs - readNow())));
      };
      if (queue.length >= maxWaiting && queue.length > 0) {
        refuseFull(readClock);
        return;
      }
      const units = typeof cost === 'function' ? cost(input, init) : cost;
      // The limiter takes a missing cost for 1: a function that returned
      // nothing (a forgotten `return`) would book 1 for every request.
      if (typeof units !== 'number') {
        reject(typeError(`\`cost\` must return a number, not ${units === null ? 'null' : typeof units}`));
        return;
      }
      const method = String((init != null && init.method) || (isRequest(input) ? input.method : 'GET')).toUpperCase();
      // A stream body can be sent once: no retry.
      const body = init != null ? init.body : undefined;
      const replayable = !(body != null && typeof body.getReader === 'function');
      const now = readClock();
      // Read again: the caller's code run since (the cost function, init's
      // getters, the clock) may have called requests of this very queue.
      const full = queue.length >= maxWaiting;
      if (full && queue.length > 0) {
        refuseFull(() => now);
        return;
      }
      const entry = {
        id: nextId++,
        input,
        init,
        method,
        replayable,
        cost: units,
        atMs: 0,
        deadline: now + maxWaitMs,
        // Its booking (null until booked, and while a pause lasts), and the
        // bookings others had made when it was booked (see BOOKINGS).
        reservation: null,
        others: 0,
        // This queue's count of its bookings at its own and at the one
        // standing below it when it was booked (see isLatest).
        own: 0,
        below: 0,
        attempt: 0,
        signal,
        resolve,
        reject,
        onAbort: null,
      };
      entry.onAbort = () => {
        if (!queue.includes(entry)) return;
        // The caller's code first: the clock (the time those behind book
        // again at) and the signals of those behind (a signal-like's
        // getter), which may call or abort requests of this very queue.
        // Run after its place was read, an abort ahead of it moved it a
        // place up, and the requests behind were moved up from the place it
        // had: one taken out unbooked (never sent, never settled), one
        // queued twice (sent twice). A clock that fails here must not throw
        // from the listener (Node would end the process); nobody moves then.
        let moveAt = null;
        let aborted = null;
        if (entry.reservation !== null && movesUp && !bookedByOthersSince(entry)) {
          try {
            moveAt = readClock();
          } catch {
            // the timer's read fails the same way, and fails the requests
          }
          // Each read once: read twice, a getter that changed its answer
          // left a request neither booked again nor failed.
          if (moveAt !== null) aborted = new Set(queue.slice(queue.indexOf(entry) + 1).filter(isAborted));
        }
        const at = queue.indexOf(entry);
        // Taken out by that code: an abort ahead of it let it go as aborted too.
        if (at < 0) return;
        // Checked again after that code, which may have booked the limiter
        // after it (see bookedByOthersSince): nobody moves then.
        if (entry.reservation === null || bookedByOthersSince(entry)) moveAt = null;
        let alsoAborted = [];
        if (moveAt === null) {
          // Unbooked (in a pause), a window's booking (given back where it
          // was counted), a token bucket's (given back while it is the
          // latest, else kept unused), or one that others booked after
          // (kept, unused): nobody moves.
          queue.splice(at, 1);
          if (entry.reservation !== null && (latestOnly ? isLatest(entry) : !movesUp)) giveBack(entry);
        } else {
          // Those behind move up into the slots it and they leave, in order.
          // Those aborted too (one signal over many requests, whose
          // listeners run one after another) leave with it, booked no more:
          // each booked again by every listener before its own was
          // quadratic work (4,000 requests: 5.9 s).
          // A request called since, behind it, is booked again too.
          const behind = queue.slice(at + 1);
          alsoAborted = behind.filter((other) => aborted.has(other));
          rebook(at, behind.filter((other) => !aborted.has(other)), moveAt);
        }
        emit({ type: 'aborted', id: entry.id });
        arm();
        reject(signal.reason);
        for (const other of alsoAborted) {
          fail(other, other.signal.reason);
          emit({ type: 'aborted', id: other.id });
        }
      };
      // A pause over: those it left are booked first (after this, every
      // queued request is booked unless a pause lasts).
      bookAfterPause(now);
      if (pausedUntil > now) {
        // Booked when the pause ends, behind those waiting for it.
        const error = pauseExceeds(now, maxWaitMs, false);
        if (error !== null) {
          reject(error);
          return;
        }
        entry.atMs = pausedUntil;
      } else {
        const error = book(entry, now, maxWaitMs);
        if (error !== null) {
          reject(error);
          return;
        }
      }
      // maxWaiting 0, and an empty queue: only a request due now may go.
      const wait = Math.max(entry.atMs, pausedUntil) - now;
      if (full && wait > 0) {
        giveBack(entry);
        reject(new RateLimited(`the request would wait ${shownMs(wait)} ms, and maxWaiting is 0`, wait));
        return;
      }
      if (signal !== undefined) {
        try {
          listen(signal, entry.onAbort);
        } catch (error) {
          // Never listened to (a polyfill's signal): the call rejects with
          // that error, its booking given back (as acquire's waiter, and
          // where that frees nobody's slot: see leaveUnqueued), rather than
          // hold a slot that every call after it waits behind.
          leaveUnqueued(entry);
          reject(error);
          return;
        }
        // Aborted since `signal.aborted` was read, by the caller's code run
        // since (the cost function, the clock; a signal-like's
        // addEventListener): announced before it listened (or before it was
        // queued, where its listener looks for it), the abort was never
        // heard, and the request went at its slot.
        if (signal.aborted) {
          stopListening(entry);
          leaveUnqueued(entry);
          reject(signal.reason);
          return;
        }
      }
      queue.push(entry);
      emit({ type: 'queued', id: entry.id, slotMs: entry.atMs });
      // Due now and nobody ahead: no timer round trip.
      if (queue.length === 1 && entry.atMs <= now && pausedUntil <= now) fire();
      else arm();
    }));
  }

  Object.defineProperty(paced, 'waiting', { get: () => queue.length, enumerable: true });
  Object.defineProperty(paced, 'pausedUntilMs', { get: () => pausedUntil, enumerable: true });
  return paced;
}

module.exports = { pacedFetchFor, parseRetryAfter, parseRateLimit };
