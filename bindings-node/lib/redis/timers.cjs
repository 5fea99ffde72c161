'use strict';
// ratekeeper/redis: waiting, as the in-process acquire waits: a sleep of any
// length, and a round trip given up when its signal aborts.

const { listen, unlisten, abortedNow, reasonOf } = require('../api.cjs');

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
 * after that goes to `late` (its rejection is dropped). `left()` is called
 * once the caller is answered so, before anything goes to `late`.
 */
function abortable(promise, signal, late, left = () => {}) {
  if (signal === undefined) return promise;
  return new Promise((resolve, reject) => {
    let done = false;
    // Rejects with `reason` at once; the answer, when it comes, goes to `late`.
    const giveUp = (reason) => {
      if (done) return;
      done = true;
      left();
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

module.exports = { MAX_TIMER_MS, sleep, abortable };
