'use strict';
// Shared helpers of the JS suite.

const assert = require('node:assert/strict');

// Snake_case core names that must never appear in a JS error message.
const RUST_SPELLING = ['refill_tokens', 'refill_period', 'initial_tokens', 'emission_interval', 'max_wait', 'taken_at'];

/**
 * Asserts that `fn` throws the binding's error for `code`: a TypeError for
 * `invalid_type`, a RangeError otherwise, with `.code` and a message naming
 * `argument` (JS spelling, never the Rust one). Returns the error.
 */
function assertLimiterError(fn, code, argument, where = '') {
  let caught;
  assert.throws(fn, (err) => {
    caught = err;
    return true;
  }, `${where}: expected a ${code} error`);
  checkLimiterError(caught, code, argument, where);
  return caught;
}

/** The same for a promise that must reject. */
async function assertLimiterRejects(promise, code, argument, where = '') {
  let caught;
  await assert.rejects(promise, (err) => {
    caught = err;
    return true;
  }, `${where}: expected a ${code} rejection`);
  checkLimiterError(caught, code, argument, where);
  return caught;
}

function checkLimiterError(caught, code, argument, where) {
  const label = `${where}: ${caught && caught.name}: ${caught && caught.message}`;
  const expectedClass = code === 'invalid_type' ? TypeError : RangeError;
  assert.ok(caught instanceof expectedClass, `${label}: not a ${expectedClass.name}`);
  assert.equal(caught.code, code, label);
  assert.equal(typeof caught.message, 'string', label);
  assert.ok(caught.message.includes(`\`${argument}\``), `${label}: message does not name \`${argument}\``);
  for (const rust of RUST_SPELLING) {
    assert.ok(!caught.message.includes(rust), `${label}: message uses the Rust spelling \`${rust}\``);
  }
}

/**
 * A fake clock and fake timers, for `acquire`: `now` is the `clock` option of a
 * limiter; `install()` replaces the global setTimeout / clearTimeout (read by
 * the JS layer at each call) until `uninstall()`; `advance(ms)` moves the clock
 * and runs the timers that come due, in order, letting promise callbacks run
 * after each. `lag` makes timers longer than `lag` fire that many ms before the
 * clock reaches their due time, as a real timer may.
 */
function fakeTime({ start = 1_000, lag = 0 } = {}) {
  let now = start;
  let seq = 0;
  const timers = new Map();
  const saved = {};
  const time = {
    now: () => now,
    scheduled: [],
    setTimeout(fn, delay) {
      const id = ++seq;
      // A real timer may fire early by a fraction of its delay, never by all of it.
      const due = now + (delay > lag ? delay - lag : Math.max(0, delay));
      timers.set(id, { due, fn });
      time.scheduled.push({ at: now, delay });
      return id;
    },
    clearTimeout(id) {
      timers.delete(id);
    },
    install() {
      saved.setTimeout = globalThis.setTimeout;
      saved.clearTimeout = globalThis.clearTimeout;
      globalThis.setTimeout = time.setTimeout;
      globalThis.clearTimeout = time.clearTimeout;
      return time;
    },
    uninstall() {
      globalThis.setTimeout = saved.setTimeout;
      globalThis.clearTimeout = saved.clearTimeout;
    },
    pending: () => timers.size,
    /** Moves the clock to `now + ms`, firing due timers in order at their due time. */
    async advance(ms) {
      const end = now + ms;
      await flush();
      for (;;) {
        let next;
        for (const [id, timer] of timers) {
          if (timer.due <= end && (next === undefined || timer.due < timers.get(next).due)) next = id;
        }
        if (next === undefined) break;
        const timer = timers.get(next);
        timers.delete(next);
        now = Math.max(now, timer.due);
        timer.fn();
        await flush();
      }
      now = end;
      await flush();
    },
  };
  return time;
}

/** Lets pending promise callbacks run. */
async function flush() {
  for (let i = 0; i < 5; i++) await Promise.resolve();
}

/**
 * An AbortSignal that counts its abort listeners, around a real one (see
 * `controller`): `live` holds those listening now, `most()` the most that
 * ever listened at once. How the tests check that the waits sharing one
 * signal listen to it once (Node warns past ten listeners).
 */
function countingSignal() {
  const controller = new AbortController();
  const live = new Set();
  let most = 0;
  const signal = {
    get aborted() {
      return controller.signal.aborted;
    },
    get reason() {
      return controller.signal.reason;
    },
    addEventListener(type, listener, options) {
      live.add(listener);
      most = Math.max(most, live.size);
      controller.signal.addEventListener(type, listener, options);
    },
    removeEventListener(type, listener) {
      live.delete(listener);
      controller.signal.removeEventListener(type, listener);
    },
  };
  return { controller, signal, live, most: () => most };
}

/**
 * A clock reading `read`, which runs a hook at one of its reads: `at(n, run)`
 * runs `run` inside the n-th read from now (the caller's code run where the
 * package reads its clock, to test what that code may do there).
 */
function hookedClock(read) {
  let reads = 0;
  let due = -1;
  let hook = null;
  const clock = () => {
    if (++reads === due) hook();
    return read();
  };
  const at = (n, run) => {
    due = reads + n;
    hook = run;
  };
  return { clock, at };
}

module.exports = { assertLimiterError, assertLimiterRejects, checkLimiterError, countingSignal, fakeTime, flush, hookedClock };
