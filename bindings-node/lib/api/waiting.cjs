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
      // list, head: the waiters are list[head], list[head + 1]... (see live).
      // grown: limits added to a policy (see grew).
      // cancel: the clearTimeout of the setTimeout that armed the timer.
      // token: what the timer armed now wakes with (see arm).
      w = { list: [], head: 0, timer: undefined, token: undefined, due: NaN, armedBy: undefined, cancel: undefined, read, grown: 0 };
      waitersOf.set(owner, w);
    }
    return w;
  }

  /**
   * The waiters of `w`, as an array of those alone. Those wake() lets go
   * leave the front of `w.list` by a count (`w.head`), their places emptied:
   * shifted out one by one, past 16k or so waiters (where V8 moves the
   * whole array on each shift()), waiters all due at once (a clock that
   * jumped ahead, a laptop waking) took a time of the square of their
   * number to go. The places are cut off here, by what reads the whole
   * queue anyway (a withdrawal), and by wake() once they are half of it.
   */
  function live(w) {
    if (w.head > 0) {
      w.list.splice(0, w.head);
      w.head = 0;
    }
    return w.list;
  }

  /** Whether a waiter of `w` is in `queue` (any, when `queue` is null): one ahead of a booking of that queue. */
  function ahead(w, queue) {
    for (let at = w.head; at < w.list.length; at++) if (queue === null || w.list[at].queue === queue) return true;
    return false;
  }

  /** Adds `waiter` ({ atMs, seq, marks, done, fail, giveBack, rebook }) to `w`, in slot order. */
  function wait(w, waiter) {
    let at = w.list.length;
    while (at > w.head && w.list[at - 1].atMs > waiter.atMs) at--;
    w.list.splice(at, 0, waiter);
    arm(w);
  }

  /**
   * What touched each state of a limiter, keyed limiter or policy (`owner`)
   * since a booking, for the give-back of that booking (see withdraw and
   * givesBack): its events (bookings of a slot to come, reconfigures,
   * restores, resets that found a key), numbered (`seq`), and for each kind
   * of event the latest that touched every state (`every`: a limiter's
   * events, whose marks are none; a reconfigure, a restore) and the latest
   * that touched the keys of each mark (`keys`, three numbers per mark, made
   * at the first event on a key: see markOf). A call on one key touches no
   * other key's state (the core's Policy::each_key), so a booking of one key
   * may be given back whatever happened to other keys since. As Python's
   * (bindings-python/src/shared/marks.rs, Marks).
   */
  const marksOf = new WeakMap();

  // The kinds of event, each counting those after it too. ANY: a bucket
  // gives a booking back only while none touched its states since (it gives
  // back exactly only its latest). FOREIGN: one no waiter made (a
  // reserve(), a reset, a reconfigure, a restore): the waiters behind an
  // aborted one move up only while none touched their states since. RESET:
  // a reset that found a key, which forgot its bookings; the key, used
  // again, may book their slots anew, and a booking made before, given back,
  // would free a unit of those (two requests in a window of one). And NONE,
  // numbered only, of no kind: it touches no state's marks (an acquire due
  // at once that waits for the waiters ahead to go: see acquireUnits).
  const NONE = -1;
  const ANY = 0;
  const FOREIGN = 1;
  const RESET = 2;

  /**
   * How many marks a keyed limiter or policy keeps: its keys are told apart
   * by a hash into this many (see markOf), and two keys that share one (one
   * pair in 256) count as one, which gives back less, never more.
   */
  const MARKS = 256;

  /**
   * Counts an event of `owner` of kind `kind` (and so of the kinds before
   * it) on the states of `keys` (marks; none: every state; of kind NONE, on
   * no state); returns its seq.
   */
  function event(owner, keys, kind) {
    let m = marksOf.get(owner);
    if (m === undefined) {
      m = { seq: 0, every: [0, 0, 0], keys: null };
      marksOf.set(owner, m);
    }
    const seq = ++m.seq;
    if (kind === NONE) return seq;
    if (keys.length === 0) {
      for (let k = 0; k <= kind; k++) m.every[k] = seq;
      return seq;
    }
    if (m.keys === null) m.keys = new Float64Array(3 * MARKS);
    for (const key of keys) for (let k = 0; k <= kind; k++) m.keys[3 * key + k] = seq;
    return seq;
  }

  /** The latest event of `owner` of kind `kind` on the states of `keys`: one after a booking's seq touched them since. */
  function latest(owner, keys, kind) {
    const m = marksOf.get(owner);
    if (m === undefined) return 0;
    let seq = m.every[kind];
    if (m.keys !== null) for (const key of keys) seq = Math.max(seq, m.keys[3 * key + kind]);
    return seq;
  }

  /** The number of `owner`'s latest event: a booking's, once it is counted. */
  function events(owner) {
    return marksOf.get(owner)?.seq ?? 0;
  }

  /**
   * Counts a booking of a slot to come, of `keys` (marks; none for a
   * limiter: its one state), or a reconfigure or restore (of every state),
   * that no waiter of `owner` holds: waiters booked before it must not move
   * up into its slot, nor a bucket give back one from before it.
   */
  function untracked(owner, keys = []) {
    event(owner, keys, FOREIGN);
  }

  /**
   * Counts a reset of `owner` (a KeyedLimiter or Policy) that found a key,
   * whose marks are `keys`: it forgot the key's bookings (see untracked),
   * and no booking of that key made before gives anything back (see
   * givesBack); those of other keys do.
   */
  function forgot(owner, keys) {
    event(owner, keys, RESET);
  }

  /**
   * `give(high, low)`, the give-back of a booking of `owner` made now, as it
   * stands until a reset finds a key of it (of those `keys()` marks), and
   * doing nothing after: the store forgot that key's bookings, and the key,
   * used again, may book their slots anew. The store cannot tell which
   * bookings a reset forgot, so none of that key made before gives
   * anything back: its slot goes unused.
   */
  function givesBack(owner, keys, give) {
    const since = events(owner);
    return (high, low) => {
      if (latest(owner, keys(), RESET) <= since) give(high, low);
    };
  }

  /** The UTF-8 of a key's string, or a ByteKey's bytes (see keyOf). */
  const UTF8 = new TextEncoder();
  const bytesOf = (key) => (typeof key === 'string' ? UTF8.encode(key) : key.bytes);

  /**
   * The mark of the key `bytes` of the limit at `place` (0 in a keyed
   * limiter): the top byte of the 32-bit FNV-1a of `place` (4 bytes,
   * little-endian) then `bytes`, mixed by MurmurHash3's finalizer, as
   * Python computes it (bindings-python/src/shared/marks.rs, mark), so that both tell keys apart
   * alike.
   */
  function markOf(place, bytes) {
    let hash = 0x811c9dc5;
    for (let i = 0; i < 4; i++) hash = Math.imul(hash ^ ((place >>> (8 * i)) & 0xff), 0x01000193);
    for (const byte of bytes) hash = Math.imul(hash ^ byte, 0x01000193);
    hash ^= hash >>> 16;
    hash = Math.imul(hash, 0x85ebca6b);
    hash ^= hash >>> 13;
    hash = Math.imul(hash, 0xc2b2ae35);
    hash ^= hash >>> 16;
    return hash >>> 24;
  }

  /** The marks of a keyed limiter's key (a string or a ByteKey: see keyOf). */
  function keyMarks(key) {
    return [markOf(0, bytesOf(key))];
  }

  /**
   * The marks of a policy's request (`fields`: names and values
   * alternating) in each of the first `count` of its `limits` ({ by }) whose
   * fields it all gives; only those keyed by fields when `reset` (a global
   * limit is never reset). A limit's key is the core's: each field's value,
   * its length first (8 bytes, little-endian).
   */
  function requestMarks(limits, fields, count, reset) {
    const keys = [];
    for (let place = 0; place < count; place++) {
      const { by } = limits[place];
      if (reset && by.length === 0) continue;
      const parts = [];
      for (const field of by) {
        let at = 0;
        while (at < fields.length && fields[at] !== field) at += 2;
        if (at >= fields.length) break;
        const value = bytesOf(fields[at + 1]);
        const length = new Uint8Array(8);
        new DataView(length.buffer).setUint32(0, value.length, true);
        parts.push(length, value);
      }
      if (parts.length < 2 * by.length) continue;
      const key = new Uint8Array(parts.reduce((n, part) => n + part.length, 0));
      let at = 0;
      for (const part of parts) {
        key.set(part, at);
        at += part.length;
      }
      keys.push(markOf(place, key));
    }
    return keys;
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
   * Takes `waiter` out of `w` (aborted), a waiter of `owner`, and gives its
   * booking back: moving up those behind in its queue, or, `latestOnly`,
   * only while it is the latest booking of its keys (see waitersOf in
   * limiters.cjs).
   */
  function withdraw(w, owner, waiter) {
    if (!live(w).includes(waiter)) return;
    // The caller's code first (see askFirst): the queue is read as it left it.
    const asked = askFirst(w, waiter);
    const i = live(w).indexOf(waiter);
    // Taken out by that code: an abort it made ahead of this waiter gave
    // back the bookings behind, this one's too, and let it go as aborted.
    if (i < 0) return;
    live(w).splice(i, 1);
    const later =
      waiter.queue === null
        ? []
        : live(w).filter((other) => other.queue === waiter.queue && other.seq > waiter.seq).sort((a, b) => b.seq - a.seq);
    // Booked after it on its keys (or those behind) but by no waiter here
    // (a reserve() the caller holds), a reset of one, or reconfigured since:
    // those behind would move up into slots others hold (two units at once
    // from a burst of one). Then nobody moves, and nothing is given back: its
    // slot goes unused. (Told per key: a call on another key, of a keyed
    // limiter or of each limit of a policy, touched none of theirs. And as
    // such, not as the bookings after it less the waiters still here: a
    // later waiter gone, of another key or aborted, or one of cost 0, is
    // none of those.) Counted from its latest booking, as Python counts: a
    // booking made before that was made before those behind it too (each
    // booked again after it as it moved up, or booked later), and stays
    // ahead of them when they move up.
    if (waiter.queue !== null && [waiter, ...later].some((other) => latest(owner, other.marks, FOREIGN) > waiter.since)) {
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
    if (waiter.queue !== null && live(w).some((other) => other.queue === null && other.seq > waiter.seq)) {
      arm(w);
      return;
    }
    // A token bucket (alone or per key), or a policy of several limits
    // with a bucket among them: nobody can move up (a waiter booked again
    // could land later than it was, or be refused), and a bucket gives back
    // exactly only its latest booking. Given back only when it is the
    // latest of its keys (nobody booked on them after it: no waiter, nor a
    // reserve(); nor reset one); else its slot goes unused.
    if (waiter.latestOnly && latest(owner, waiter.marks, ANY) > waiter.since) {
      arm(w);
      return;
    }
    // Behind it, one booked before a limit was added: nobody moves (see
    // grew), and nothing is given back, as above. With nobody behind, the
    // booking is given back, in the limits it was booked in.
    if (later.some((other) => other.grown < w.grown)) {
      arm(w);
      return;
    }
    // Those that leave: each with the error that fails it, or null (aborted).
    const leaving = [];
    try {
      for (const other of later) other.giveBack();
      waiter.giveBack();
    } finally {
      // Aborted too (a signal shared by many waiters, whose listeners run
      // one after another): given back above and taken out, so that its
      // own listener finds nothing left to do (a signal-like may never
      // announce it). The others booked again, in order, at the time read
      // first: no code of the caller's runs from the first give-back to
      // the queue put back in order.
      for (const other of later.reverse()) {
        if (other.left() || asked.aborted.has(other)) {
          leaving.push([other, null]);
          continue;
        }
        const error = other.rebook(asked.now);
        if (error !== null) leaving.push([other, error]);
      }
      if (leaving.length > 0) {
        const gone = new Set(leaving.map(([other]) => other));
        w.list = live(w).filter((other) => !gone.has(other));
      }
      live(w).sort((a, b) => a.atMs - b.atMs || a.seq - b.seq);
      // Settled once the queue is whole: settling runs the caller's code
      // (a signal-like's removeEventListener and reason), which may abort,
      // book or settle waiters of this very owner.
      for (const [other, error] of leaving) {
        if (error === null) other.leave();
        else other.fail(error);
      }
      arm(w);
    }
  }

  /**
   * What withdrawing `waiter` from `w` needs of the caller's code, asked
   * before the queue is read: the time those behind it in its queue book
   * again at (`now`: a number, or `{ error }` when the clock threw, which
   * fails them), and which of them are aborted too (`aborted`: their
   * signals read, a signal-like's getter). That code may abort, book or
   * settle waiters of this very owner (each withdrawn or queued in full
   * there); run between the give-back of the bookings behind and their
   * booking again, an abort moved up the waiters not booked again yet,
   * whom this withdrawal then booked a second time (a slot booked and
   * never used, by anyone), and an acquire booked ahead of them (first
   * come first served no more). A waiter queued behind since is booked
   * again at `now` too, and is not aborted unless settled.
   */
  function askFirst(w, waiter) {
    const behind = waiter.queue === null ? [] : live(w).filter((other) => other !== waiter && other.queue === waiter.queue && other.seq > waiter.seq);
    if (behind.length === 0) return { now: undefined, aborted: new Set() };
    let now;
    try {
      now = w.read();
    } catch (error) {
      now = { error };
    }
    return { now, aborted: new Set(behind.filter((other) => other.aborted())) };
  }

  function arm(w) {
    if (w.list.length === w.head) {
      disarm(w);
      return;
    }
    // Armed through the timers in place now: fake timers installed or
    // removed since (a test's end) would leave it to timers nobody runs,
    // and every waiter behind it waiting for ever.
    if (w.timer !== undefined && w.due === w.list[w.head].atMs && w.armedBy === setTimeout) return;
    let now;
    try {
      now = w.read();
    } catch (error) {
      now = Infinity; // due at once: the timer's read fails the same way, and fails the waiters
    }
    // Read first: the clock is the caller's, and may add or withdraw
    // waiters of this very owner (an acquire, an abort from inside it),
    // each arming the timer for the list it left. Armed after the read,
    // for the list as it is now, over whatever that armed: one timer, which
    // the last waiter gone clears. (Armed before, the timer the read armed
    // was lost, or this one armed for a waiter gone, and either kept the
    // process alive, up to the slot, with nobody waiting.)
    disarm(w);
    if (w.list.length === w.head) return;
    const due = w.list[w.head].atMs;
    w.due = due;
    w.armedBy = setTimeout;
    w.cancel = clearTimeout;
    // Only the timer armed now wakes the waiters: one that runs again, or
    // runs once cleared (a faulty timer, a fake one's), would have wake()
    // forget the timer armed now and arm another, and that one, never
    // cleared, kept the process alive up to its slot with nobody waiting.
    const token = {};
    w.token = token;
    w.timer = setTimeout(() => {
      if (w.token === token) wake(w);
    }, timerDelay(Math.max(due - now, 0)));
  }

  /** Clears `w`'s timer, through the timers that armed it. */
  function disarm(w) {
    if (w.timer !== undefined) w.cancel(w.timer);
    w.timer = undefined;
    w.token = undefined;
  }

  /** Lets every waiter whose slot has come go, in order; a clock that throws fails them all. */
  function wake(w) {
    w.timer = undefined;
    w.token = undefined;
    let now;
    try {
      now = w.read();
      // NaN would leave every waiter undue, behind a timer armed again and again.
      if (Number.isNaN(now)) badType('now', 'a number');
    } catch (error) {
      // Newest first: a bucket gives back exactly only its latest booking
      // (see abandon). Every booking given back before any is rejected:
      // letting its signal go runs the caller's code (a signal-like's
      // removeEventListener), and an acquire made there, between two
      // give-backs, booked the slot at the end of the queue, which each
      // later give-back then freed again, for the next caller to share (two
      // units at once from a burst of one).
      const failing = live(w).splice(0).sort((a, b) => b.seq - a.seq).filter((waiter) => waiter.abandon());
      for (const waiter of failing) waiter.refuse(error);
      return;
    }
    // Each taken out before it goes, as its going runs the caller's code (a
    // signal-like's removeEventListener), which may book, abort or read the
    // waiters left: those behind it are still there, ahead of any it books.
    while (w.head < w.list.length && w.list[w.head].atMs <= now) {
      const waiter = w.list[w.head];
      w.list[w.head] = undefined;
      w.head++;
      // Cut off once half the array: each waiter left is moved at most once
      // for each one let go (see live).
      if (2 * w.head >= w.list.length) live(w);
      waiter.done();
    }
    arm(w);
  }

  /**
   * The one `acquire`, for limiters, keyed limiters and policies: books a slot
   * through `slot.reserve(units, maxWaitMs, nowMs)` (true when booked, the
   * scratch holding [waitMs, atMs, slotHigh, slotLow], else the decision),
   * then waits for it on one timer; an abort gives the booking back through
   * `slot.refund(units, slotHigh, slotLow)`. `slot.marks()`: the marks of
   * the keys the latest booking holds (see marksOf).
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
    const pending = waitersOf.get(slot.owner);
    if (waitMs === 0 && (pending === undefined || !ahead(pending, slot.queue))) return Promise.resolve();
    const w = waiters(slot.owner, slot.read);
    // Each booking's give-back, from when it is made (see givesBack).
    const refund = (high, low) => slot.refund(units, high, low);
    // The marks of its keys (see marksOf), those of its latest booking.
    let keys = slot.marks();
    return new Promise((resolve, reject) => {
      let settled = false;
      // Settles once. `done` and `fail` run in the waiters' timer: see unlisten.
      const settle = () => {
        if (settled) return false;
        settled = true;
        if (signal !== undefined) unlisten(signal, onAbort);
        return true;
      };
      // Rejects it with `error` once settled and given back (see abandon),
      // letting its signal go.
      const refuse = (error) => {
        if (signal !== undefined) unlisten(signal, onAbort);
        reject(error);
      };
      // A booking of its keys, which a waiter holds (see marksOf). One due
      // at once, waiting only for those ahead to go, books no slot to come:
      // it takes its units now, as a tryAcquire does, so that, as a
      // reserve() due at once (see untracked) and as in Python (which waits
      // for nothing then), it keeps no booking of its keys from being given
      // back. Numbered still: its place among the waiters, and its own
      // give-back, checks what came after it.
      const seq = event(slot.owner, keys, waitMs > 0 ? ANY : NONE);
      const waiter = {
        atMs,
        // Its place in the queue, kept when it moves up.
        seq,
        // Its latest booking's event: what came on its keys since is what
        // its give-back checks (see withdraw).
        since: seq,
        marks: keys,
        grown: w.grown,
        queue: slot.queue,
        latestOnly: slot.latestOnly === true,
        aborted: () => signal !== undefined && abortedNow(signal),
        // Settled: aborted, its withdrawal under way or to come (see withdraw).
        left: () => settled,
        giveBack: cancelOnce(givesBack(slot.owner, () => keys, refund), high, low),
        /**
         * Books again after a withdrawal ahead (see withdraw), at `now`
         * (see askFirst): null, or the error that fails it.
         */
        rebook(now) {
          if (typeof now !== 'number') return now.error;
          try {
            if (!slot.reserve(units, Infinity, now)) {
              const retryAfterMs = out()[2];
              return new RateLimited(`${slot.label}: cannot book ${units} again; retry in ${retryAfterMs} ms`, retryAfterMs);
            }
          } catch (error) {
            return error;
          }
          // Read before the marks are made (see Limiter.reserve).
          const again = out();
          const [atMs, high, low] = [again[1], again[2], again[3]];
          waiter.atMs = atMs;
          // Counted as any booking of its keys, its `seq` kept (its place in
          // the queue): from now on, it moves up only while nobody else
          // booked on its keys since this booking (what came before it was
          // checked as it moved, and lies before those behind it too).
          keys = slot.marks();
          waiter.marks = keys;
          waiter.since = event(slot.owner, keys, ANY);
          waiter.giveBack = cancelOnce(givesBack(slot.owner, () => keys, refund), high, low);
          return null;
        },
        done() {
          if (settle()) resolve();
        },
        fail(error) {
          if (waiter.abandon()) refuse(error);
        },
        /**
         * Settles it, to fail, and gives its booking back, running none of
         * the caller's code (see wake): true unless it had settled.
         */
        abandon() {
          if (settled) return false;
          settled = true;
          // Its clock failed (see wake), and every waiter of its owner with
          // it, newest first, each giving its booking back once those behind
          // it gave theirs. A bucket's only while nothing but a waiter booked
          // on its keys since (no reserve() held, no reset): given back from
          // before such a booking, it would free the slot at the end of the
          // queue, which the next caller would share with that booking (two
          // units at once from a burst of one). Its slot goes unused then, as
          // on an abort (see withdraw). (One that failed when booked again,
          // in withdraw, gave its booking back already.)
          const anywhere = waiter.queue === null && !waiter.latestOnly;
          if (anywhere || latest(slot.owner, waiter.marks, FOREIGN) <= waiter.since) waiter.giveBack();
          return true;
        },
        refuse,
        /** Rejects it as aborted, its booking given back and taken out by withdraw. */
        leave() {
          if (settle()) reject(reasonOf(signal));
        },
      };
      const onAbort = () => {
        if (settled) return;
        settled = true;
        try {
          withdraw(w, slot.owner, waiter);
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
          withdraw(w, slot.owner, waiter);
        } finally {
          reject(error);
        }
        return;
      }
      // Aborted since `signal.aborted` was read, by the caller's code run
      // since (the clock, read to book and to arm the timer; a
      // signal-like's addEventListener): announced before it listened, the
      // abort was never heard, and the waiter went at its slot.
      if (abortedNow(signal)) {
        unlisten(signal, onAbort);
        onAbort();
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

  return { acquireSlot, untracked, grew, forgot, givesBack, abortRule, keyMarks, requestMarks };
};
