'use strict';
// ratekeeper/redis: a booking of `reserve` and how it is given back.

/**
 * Gives back, once (a `cancel()` too), what a reservation booked for a
 * waiting acquire that does not go ahead (aborted, or a reply nobody waits
 * for any more): on a bucket limit (GCRA, token bucket), only while the
 * booking is still the latest on its key, else nothing (its slot goes
 * unused); on a window, where it was counted; to the `onError` limiter, as
 * `cancel()` gives it back. Resolves when done; rejects as `cancel()` does.
 */
let giveBackLatest;

/**
 * The slot of a reservation in µs on the caller's clock, when the booking
 * read it (the `clock` option): what a waiting acquire reads that clock
 * again for (see Store's `sleepUntil`); null on the server's clock, at a
 * `nowMs` given, or for the `onError` limiter's booking.
 */
let dueOf;

/**
 * A booking of `reserve`: the in-process Reservation's fields (`ok`,
 * `waitMs`, `atMs`, `cost`, `decision`) plus `fromStore`, and `cancel()`,
 * as Python's RedisReservation has.
 */
class RedisReservation {
  #cancel;
  #release;
  #due;

  constructor(fields, cancel, release = cancel, due = null) {
    Object.assign(this, fields);
    this.#cancel = cancel;
    this.#release = release;
    this.#due = due;
  }

  static {
    giveBackLatest = (r) => {
      const release = r.#release;
      r.#cancel = r.#release = null;
      return release === null ? Promise.resolve() : release();
    };
    dueOf = (r) => r.#due;
  }

  /**
   * Gives an unused booking back, once (later calls do nothing): to Redis
   * at its slot, or to the `onError` limiter that admitted it, at the
   * instant it was taken there (its own reservation's `cancel()`). As it
   * is, wherever the booking stands (on a bucket, cancel the latest first;
   * an aborted acquire gives back with giveBackLatest instead). Resolves
   * when done; when Redis cannot be reached the booking stays (it expires
   * with its key) and the promise still resolves. Rejects only with the
   * script's own errors (a key of another type, NOPERM).
   */
  cancel() {
    const cancel = this.#cancel;
    this.#cancel = this.#release = null;
    return cancel === null ? Promise.resolve() : cancel();
  }
}

module.exports = { RedisReservation, giveBackLatest, dueOf };
