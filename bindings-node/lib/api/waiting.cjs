'use strict';
// The one waiting `acquire` of limiters, keyed limiters and policies (see
// lib/api.cjs): each books its slot at once, then waits behind one timer per
// limiter, first come first served; an abort or a timeout gives the booking
// back.
const { isSignal, listen, unlisten, abortedNow, reasonOf } = require('./values.cjs');

module.exports = function waiting({ B, out, number, known, badType, cancelOnce, RateLimited }) {
  /** The longest delay timers take (about 24.8 days; see timerDelay). */
  const MAX_TIMER_MS = 2 ** 31 - 1;

  /**
   * The waiting acquires of one limiter, keyed limiter or policy (`owner`),
   * in slot order (booking order for equal slots) behind ONE timer armed for
   * the first: Node's timers count whole milliseconds and may fire a little
   * early on the limiter's clock, and a waiter that set a timer of its own to
   * cover the rest could be overtaken by the next one.
   */
  const waitersOf = new WeakMap();

  function waiters(owner, read) {
    let w = waitersOf.get(owner);
    if (w === undefined) {
      // booked: waiters' bookings so far (each waiter's `seq`); foreign:
      // bookings no waiter holds, reconfigures and restores (see untracked);
      // grown: limits added to a policy (see grew).
      // cancel: the clearTimeout of the setTimeout that armed the timer.
      w = { list: [], timer: undefined, due: NaN, armedBy: undefined, cancel: undefined, read, booked: 0, foreign: 0, grown: 0 };
      waitersOf.set(owner, w);
    }
    return w;
  }

  /** Adds `waiter` ({ atMs, seq, done, fail, giveBack, rebook }) to `w`, in slot order. */
  function wait(w, waiter) {
    let at = w.list.length;
    while (at > 0 && w.list[at - 1].atMs > waiter.atMs) at--;
    w.list.splice(at, 0, waiter);
    arm(w);
  }

  /**
   * Counts a booking of a slot to come (or a reconfigure, a restore) that no
   * waiter of `owner` holds: waiters booked before it must not move up into
   * its slot.
   */
  function untracked(owner) {
    const w = waitersOf.get(owner);
    if (w !== undefined) w.foreign++;
  }

  /** Resets of each keyed limiter or policy that found a key: see givesBack. */
  const resetsOf = new WeakMap();

  /**
   * Counts a reset of `owner` (a KeyedLimiter or Policy) that found a key:
   * a booking no waiter holds was forgotten (see untracked), and no booking
   * made before gives anything back (see givesBack).
   */
  function forgot(owner) {
    resetsOf.set(owner, (resetsOf.get(owner) ?? 0) + 1);
    untracked(owner);
  }

  /**
   * `give(high, low)`, the give-back of a booking of `owner` made now, as it
   * stands until a reset finds a key of `owner`, and doing nothing after.
   * The store forgot that key's bookings, and the key, used again, may book
   * their slots anew: given back, an old booking would free a unit of those
   * (two requests in a window of one). The store cannot tell which bookings
   * a reset forgot, nor a policy which of its keys a request reached, so
   * none made before a reset gives anything back: its slot goes unused.
   */
  function givesBack(owner, give) {
    const resets = resetsOf.get(owner) ?? 0;
    return (high, low) => {
      if ((resetsOf.get(owner) ?? 0) === resets) give(high, low);
    };
  }

  /**
   * Counts a limit added to the policy `owner`: waiters booked before it
   * must not move up, as that books again in every limit, the new one too,
   * whose fields their requests may lack (see withdraw).
   */
  function grew(owner) {
    const w = waitersOf.get(owner);
    if (w !== undefined) w.grown++;
  }

  /**
   * Takes `waiter` out of `w` (aborted) and gives its booking back: moving
   * up those behind in its queue, or, `latestOnly`, only while it is the
   * latest booking (see waitersOf in limiters.cjs).
   */
  function withdraw(w, waiter) {
    const i = w.list.indexOf(waiter);
    if (i < 0) return;
    w.list.splice(i, 1);
    // Booked after it but by no waiter here (a reserve() the caller holds),
    // or reconfigured since: those behind would move up into slots others
    // hold (two units at once from a burst of one). Then nobody moves, and
    // nothing is given back: its slot goes unused. (Counted as such, not as
    // the bookings after it less the waiters still here: a later waiter
    // gone, of another key or aborted, or one of cost 0, is none of those.)
    if (waiter.queue !== null && w.foreign > waiter.foreign) {
      arm(w);
      return;
    }
    // Behind it, a waiter in no queue: booked after a limit was added to a
    // policy of one limit that moves up (of several since), it shares that
    // limit but is never booked again. Given back from the middle of their
    // queue, this booking would free the slot at its end, which the next
    // caller would share with that waiter (two units at once from a burst
    // of one). So nobody moves, and nothing is given back, as above. (Only
    // a policy's waiters can be in a queue and in none: a limiter's
    // algorithm, and so its keys', never changes.)
    if (waiter.queue !== null && w.list.some((other) => other.queue === null && other.seq > waiter.seq)) {
      arm(w);
      return;
    }
    // A token bucket (alone or per key), or a policy of several limits
    // with a bucket among them: nobody can move up (a waiter booked again
    // could land later than it was, or be refused), and a bucket gives back
    // exactly only its latest booking. Given back only when it is the
    // latest (nobody booked after it: no waiter, of any key, nor a
    // reserve()); else its slot goes unused.
    if (waiter.latestOnly && (w.foreign > waiter.foreign || w.booked > waiter.seq + 1)) {
      arm(w);
      return;
    }
    const later =
      waiter.queue === null
        ? []
        : w.list.filter((other) => other.queue === waiter.queue && other.seq > waiter.seq).sort((a, b) => b.seq - a.seq);
    // Behind it, one booked before a limit was added: nobody moves (see
    // grew), and nothing is given back, as above. With nobody behind, the
    // booking is given back, in the limits it was booked in.
    if (later.some((other) => other.grown < w.grown)) {
      arm(w);
      return;
    }
    try {
      for (const other of later) other.giveBack();
      waiter.giveBack();
    } finally {
      // Aborted too (a signal shared by many waiters): given back above, and
      // taken out and settled now, so that its own listener finds nothing
      // left to do (a signal-like may never announce it).
      const gone = new Set();
      for (const other of later.reverse()) {
        if (other.aborted()) {
          gone.add(other);
          other.leave();
          continue;
        }
        const error = other.rebook();
        if (error !== null) {
          gone.add(other);
          other.fail(error);
        }
      }
      if (gone.size > 0) w.list = w.list.filter((other) => !gone.has(other));
      w.list.sort((a, b) => a.atMs - b.atMs || a.seq - b.seq);
      arm(w);
    }
  }

  function arm(w) {
    if (w.list.length === 0) {
      disarm(w);
      return;
    }
    const due = w.list[0].atMs;
    // Armed through the timers in place now: fake timers installed or
    // removed since (a test's end) would leave it to timers nobody runs,
    // and every waiter behind it waiting for ever.
    if (w.timer !== undefined && w.due === due && w.armedBy === setTimeout) return;
    disarm(w);
    w.due = due;
    let left;
    try {
      left = due - w.read();
    } catch (error) {
      left = 0; // the timer's read fails the same way, and fails the waiters
    }
    w.armedBy = setTimeout;
    w.cancel = clearTimeout;
    w.timer = setTimeout(() => wake(w), timerDelay(Math.max(left, 0)));
  }

  /** Clears `w`'s timer, through the timers that armed it. */
  function disarm(w) {
    if (w.timer !== undefined) w.cancel(w.timer);
    w.timer = undefined;
  }

  /** Lets every waiter whose slot has come go, in order; a clock that throws fails them all. */
  function wake(w) {
    w.timer = undefined;
    let now;
    try {
      now = w.read();
      // NaN would leave every waiter undue, behind a timer armed again and again.
      if (Number.isNaN(now)) badType('now', 'a number');
    } catch (error) {
      // Newest first: a bucket gives back exactly only its latest booking.
      for (const waiter of w.list.splice(0).sort((a, b) => b.seq - a.seq)) waiter.fail(error);
      return;
    }
    while (w.list.length > 0 && w.list[0].atMs <= now) w.list.shift().done();
    arm(w);
  }

  /**
   * The one `acquire`, for limiters, keyed limiters and policies: books a slot
   * through `slot.reserve(units, maxWaitMs, nowMs)` (true when booked, the
   * scratch holding [waitMs, atMs, slotHigh, slotLow], else the decision),
   * then waits for it on one timer; an abort gives the booking back through
   * `slot.refund(units, slotHigh, slotLow)`.
   */
  function acquireSlot(slot, cost, options) {
    try {
      return acquireUnits(slot, number(cost, 1, 'cost'), options);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  function acquireUnits(slot, units, options) {
    let signal;
    let timeoutMs = Infinity;
    if (options !== undefined && options !== null) {
      if (typeof options !== 'object') badType('options', 'an object');
      options = known(options, 'acquire');
      signal = options.signal ?? undefined;
      if (signal !== undefined && !isSignal(signal)) badType('signal', 'an AbortSignal');
      timeoutMs = number(options.timeoutMs, Infinity, 'timeout');
      if (timeoutMs !== Infinity) B.checkMillis(timeoutMs, 'timeout');
    }
    if (signal !== undefined && signal.aborted) return Promise.reject(signal.reason);
    if (!slot.reserve(units, timeoutMs, slot.read())) {
      const retryAfterMs = out()[2];
      if (retryAfterMs > timeoutMs) {
        // The platform's error for a timeout (as AbortSignal.timeout's), with
        // the wait that was needed, as RateLimited and Python's carry it.
        const error = new DOMException(`the wait (${retryAfterMs} ms) would exceed timeoutMs (${timeoutMs} ms)`, 'TimeoutError');
        return Promise.reject(Object.assign(error, { retryAfterMs }));
      }
      return Promise.reject(new RateLimited(`${slot.label}: cannot book ${units} now; retry in ${retryAfterMs} ms`, retryAfterMs));
    }
    const s = out();
    const [waitMs, atMs, high, low] = [s[0], s[1], s[2], s[3]];
    // Due now and nobody waiting ahead (a caller held up, by a collection
    // say, may book a slot already passed while earlier ones still wait).
    // Waiters of other keys of a keyed limiter are not ahead of it.
    const pending = waitersOf.get(slot.owner)?.list ?? [];
    if (waitMs === 0 && !pending.some((other) => slot.queue === null || other.queue === slot.queue)) return Promise.resolve();
    const w = waiters(slot.owner, slot.read);
    // Each booking's give-back, from when it is made (see givesBack).
    const refund = (high, low) => slot.refund(units, high, low);
    return new Promise((resolve, reject) => {
      let settled = false;
      // Settles once. `done` and `fail` run in the waiters' timer: see unlisten.
      const settle = () => {
        if (settled) return false;
        settled = true;
        if (signal !== undefined) unlisten(signal, onAbort);
        return true;
      };
      const waiter = {
        atMs,
        seq: w.booked++,
        foreign: w.foreign,
        grown: w.grown,
        queue: slot.queue,
        latestOnly: slot.latestOnly === true,
        aborted: () => signal !== undefined && abortedNow(signal),
        giveBack: cancelOnce(givesBack(slot.owner, refund), high, low),
        /** Books again after a withdrawal ahead (see withdraw): null, or the error that fails it. */
        rebook() {
          try {
            if (!slot.reserve(units, Infinity, slot.read())) {
              const retryAfterMs = out()[2];
              return new RateLimited(`${slot.label}: cannot book ${units} again; retry in ${retryAfterMs} ms`, retryAfterMs);
            }
          } catch (error) {
            return error;
          }
          const again = out();
          waiter.atMs = again[1];
          waiter.giveBack = cancelOnce(givesBack(slot.owner, refund), again[2], again[3]);
          return null;
        },
        done() {
          if (settle()) resolve();
        },
        fail(error) {
          if (!settle()) return;
          waiter.giveBack();
          reject(error);
        },
        /** Rejects it as aborted, its booking given back and taken out by withdraw. */
        leave() {
          if (settle()) reject(reasonOf(signal));
        },
      };
      const onAbort = () => {
        if (settled) return;
        settled = true;
        try {
          withdraw(w, waiter);
        } finally {
          reject(reasonOf(signal));
        }
      };
      wait(w, waiter);
      if (signal === undefined) return;
      try {
        listen(signal, onAbort);
      } catch (error) {
        // Never listened to: the waiter leaves as an aborted one does, its
        // booking given back, rather than hold a slot nobody takes.
        settled = true;
        try {
          withdraw(w, waiter);
        } finally {
          reject(error);
        }
      }
    });
  }

  /**
   * A timer's delay for a wait of `ms`: whole milliseconds, at most what
   * timers take (2^31 - 1 ms, about 24.8 days; a longer delay fires at once,
   * with a warning). A longer wait takes several timers.
   */
  function timerDelay(ms) {
    return Math.min(Math.ceil(ms), MAX_TIMER_MS);
  }

  /**
   * The part of an acquire's slot (see acquireSlot) that says what its
   * waiters do around an aborted one, from the core's answer `waiters`
   * ('up', 'latest' or 'any': see waitersOf in limiters.cjs): in `queue`
   * when they move up; given back only while the latest when 'latest'.
   */
  function abortRule(waiters, queue) {
    return { queue: waiters === 'up' ? queue : null, latestOnly: waiters === 'latest' };
  }

  return { acquireSlot, untracked, grew, forgot, givesBack, abortRule };
};
