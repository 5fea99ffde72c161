'use strict';
// acquire(cost, { signal, timeoutMs }): reserve, then one timer. Most tests
// drive it with an injected clock (the `clock` option) and fake timers
// (helpers.fakeTime), so that they are exact and instant; a few use real time.

const { describe, it, afterEach } = require('node:test');
const assert = require('node:assert/strict');

const { TokenBucket, Gcra, LeakyBucket, SlidingWindowLog, SlidingWindowCounter, FixedWindow, KeyedLimiter, Policy, RateLimited } = require('./impl.cjs');
const { assertLimiterRejects, countingSignal, fakeTime, flush, hookedClock } = require('./helpers.cjs');

let time;
afterEach(() => {
  time?.uninstall();
  time = undefined;
});

/** Fake time starting at 1000 ms, installed; and a record of when each promise settled. */
function setup(options) {
  time = fakeTime(options).install();
  const settled = [];
  const track = (label, promise) =>
    promise.then(
      () => settled.push([label, time.now()]),
      (error) => settled.push([label, time.now(), error]),
    );
  return { time, settled, track };
}

/** The algorithms whose waiters move up, one unit every 100 ms. */
const MOVERS = {
  Gcra: (clock) => new Gcra({ burst: 1, emissionIntervalMs: 100, clock }),
  LeakyBucket: (clock) => new LeakyBucket({ capacity: 10, intervalMs: 100, clock }),
};

/** The buckets, one unit every 100 ms: a token bucket's waiters do not move up (see below). */
const BUCKETS = {
  ...MOVERS,
  TokenBucket: (clock) => new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 100, clock }),
};

/**
 * `setup()` with a limiter of `make`, emptied, and waiter 'a' booked with
 * `controller`'s signal; `runOut()` advances past every slot and says when
 * each waiter went.
 */
function abortable(make) {
  const { time, settled, track } = setup();
  const limiter = make(time.now);
  limiter.tryAcquire();
  const controller = new AbortController();
  track('a', limiter.acquire(1, { signal: controller.signal }));
  const runOut = async () => {
    await time.advance(1_000);
    time.uninstall();
    return Object.fromEntries(settled.map(([label, when]) => [label, when]));
  };
  return { time, track, limiter, controller, runOut };
}

describe('acquire', () => {
  it('resolves at once when the cost is available, without a timer', async () => {
    const { time } = setup();
    const bucket = new TokenBucket({ capacity: 2, refillTokens: 1, refillPeriodMs: 100, clock: time.now });
    await bucket.acquire();
    await bucket.acquire(1);
    assert.equal(time.scheduled.length, 0);
    assert.equal(bucket.peek(1).allowed, false, 'both units were taken');
  });

  it('waiters are served first come first served, each at its slot, behind one timer', async () => {
    const { time, settled, track } = setup();
    const gcra = new Gcra({ burst: 1, emissionIntervalMs: 100, clock: time.now });
    for (const label of ['a', 'b', 'c', 'd']) track(label, gcra.acquire());
    assert.equal(time.pending(), 1, 'one timer, armed for the first slot');
    await time.advance(1_000);
    assert.deepStrictEqual(settled, [['a', 1_000], ['b', 1_100], ['c', 1_200], ['d', 1_300]]);
    assert.deepStrictEqual(time.scheduled.map((t) => t.delay), [100, 100, 100], 'armed again for each next slot; none for the first');
  });

  it('a waiter whose slot has passed when it books still goes after those waiting ahead', async () => {
    const { time, settled, track } = setup();
    // The limiter's clock moves on before the timer runs (a caller held up):
    // c books a slot already passed, and b, due earlier, still waits for it.
    let clock = 1_000;
    const gcra = new Gcra({ burst: 1, emissionIntervalMs: 100, clock: () => clock });
    track('a', gcra.acquire());
    track('b', gcra.acquire());
    clock = 1_250;
    track('c', gcra.acquire());
    await flush();
    await time.advance(100);
    assert.deepStrictEqual(settled.map(([label]) => label), ['a', 'b', 'c']);
  });

  it('a later tryAcquire does not jump ahead of a waiter', async () => {
    const { time, settled, track } = setup();
    const bucket = new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 100, clock: time.now });
    bucket.tryAcquire();
    track('waiter', bucket.acquire());
    await time.advance(50);
    assert.equal(bucket.tryAcquire().allowed, false);
    await time.advance(50);
    assert.deepStrictEqual(settled, [['waiter', 1_100]]);
    assert.equal(bucket.tryAcquire().allowed, false, 'the waiter took the refilled token');
  });

  it('a wait beyond timeoutMs rejects at once with a TimeoutError, booking nothing', async () => {
    const { time } = setup();
    const bucket = new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 100, clock: time.now });
    bucket.tryAcquire();
    const before = bucket.peek(1);
    const error = await bucket.acquire(1, { timeoutMs: 99 }).then(() => null, (e) => e);
    assert.ok(error instanceof DOMException, `${error}`);
    assert.equal(error.name, 'TimeoutError');
    assert.equal(error.retryAfterMs, 100, 'the wait needed, as RateLimited carries it');
    assert.equal(time.now(), 1_000, 'rejected at once');
    assert.equal(time.pending(), 0);
    assert.deepStrictEqual(bucket.peek(1), before, 'nothing was booked');
    // A wait of exactly timeoutMs is accepted.
    const ok = bucket.acquire(1, { timeoutMs: 100 });
    await time.advance(100);
    await ok;
  });

  it('timeoutMs 0 takes only what is there now', async () => {
    const { time } = setup();
    const log = new SlidingWindowLog({ limit: 1, windowMs: 1_000, clock: time.now });
    await log.acquire(1, { timeoutMs: 0 });
    const error = await log.acquire(1, { timeoutMs: 0 }).then(() => null, (e) => e);
    assert.equal(error?.name, 'TimeoutError');
  });

  it('aborting during the wait refunds the booking and rejects with signal.reason', async () => {
    const { time, settled, track } = setup();
    const bucket = new Gcra({ burst: 1, emissionIntervalMs: 100, clock: time.now });
    bucket.tryAcquire();
    const controller = new AbortController();
    track('aborted', bucket.acquire(1, { signal: controller.signal }));
    track('next', bucket.acquire());
    await time.advance(30);
    controller.abort();
    await flush();
    const [label, at, error] = settled[0];
    assert.deepStrictEqual([label, at], ['aborted', 1_030]);
    assert.ok(error instanceof DOMException && error.name === 'AbortError', `${error}`);
    assert.equal(error, controller.signal.reason);
    // 'next' moved up into the slot given back (1100, not 1200), and a new
    // acquire comes after it: one unit per 100 ms, never two at one slot.
    track('after', bucket.acquire());
    await time.advance(1_000);
    assert.deepStrictEqual(settled.slice(1).map(([l, t]) => [l, t]), [['next', 1_100], ['after', 1_200]]);
  });

  it('aborting a waiter with others behind moves them up, and a new booking never shares their slot', async () => {
    for (const [name, make] of Object.entries(MOVERS)) {
      const { time, track, limiter, controller, runOut } = abortable(make);
      track('b', limiter.acquire());
      track('c', limiter.acquire());
      await time.advance(10);
      controller.abort();
      track('d', limiter.acquire());
      const at = await runOut();
      assert.deepStrictEqual([at.b, at.c, at.d], [1_100, 1_200, 1_300], name);
    }
  });

  it('a booking no waiter holds, a reconfigure or a restore, between two waiters keeps the second in its slot', async () => {
    // Moved up, the second waiter shared a slot with a reserve() the caller
    // held (two units at once from a burst of one; a leaky queue refused it).
    for (const between of ['reserve', 'reconfigure', 'restore']) {
      for (const [name, make] of Object.entries(BUCKETS)) {
        const { time, track, limiter, controller, runOut } = abortable(make);
        if (between === 'reserve') assert.equal(limiter.reserve().waitMs, 200, name);
        else if (between === 'restore') limiter.restore(limiter.toBytes());
        else limiter.reconfigure(make(time.now));
        track('b', limiter.acquire());
        await time.advance(10);
        controller.abort();
        const at = await runOut();
        assert.equal(at.b, between === 'reserve' ? 1_300 : 1_200, `${name}, ${between}`);
      }
    }
  });

  it('waiters that left after it are no bookings of others: an abort still moves those behind up', async () => {
    // Counted as bookings of others, they kept the waiters behind an aborted
    // one in their slots, and its slot went unused.
    for (const between of ['aborted', 'of cost 0', 'of another key']) {
      for (const [name, make] of Object.entries(MOVERS)) {
        const { time, settled, track } = setup();
        const limiter = new KeyedLimiter(make(time.now));
        limiter.tryAcquire('k');
        limiter.tryAcquire('other');
        const [a, gone] = [new AbortController(), new AbortController()];
        track('first', limiter.acquire('k'));
        track('a', limiter.acquire('k', 1, { signal: a.signal }));
        if (between === 'aborted') track('gone', limiter.acquire('k', 1, { signal: gone.signal }));
        if (between === 'of cost 0') track('zero', limiter.acquire('k', 0));
        if (between === 'of another key') track('other', limiter.acquire('other'));
        track('b', limiter.acquire('k'));
        gone.abort();
        await time.advance(150); // 'first', 'zero' and 'other' go meanwhile
        a.abort();
        track('c', limiter.acquire('k'));
        await time.advance(1_000);
        time.uninstall();
        const at = Object.fromEntries(settled.map(([label, when, error]) => [label, error === undefined ? when : 'rejected']));
        assert.deepStrictEqual([at.first, at.b, at.c], [1_100, 1_200, 1_300], `${name}, a waiter ${between} after the aborted one`);
      }
    }
  });

  it("aborting a token bucket's waiter moves nobody: those behind keep their slots, none later, and its own goes unused", async () => {
    // Moved up, the waiters booked again landed later than they were: a
    // booking takes the refill up to its slot, which the capacity clips, and
    // gives back only its cost (core/tests/moves_up.rs). Given back from the
    // middle of the queue, the aborted booking would let the next acquire
    // share a later waiter's slot (two units at once).
    const interval = (clock) => new TokenBucket({ capacity: 3, refillTokens: 3, refillPeriodMs: 100, refill: 'interval', clock });
    const bands = (clock) =>
      TokenBucket.fromBandwidths(
        [
          { capacity: 1, refillTokens: 1, refillPeriodMs: 250 },
          { capacity: 3, refillTokens: 1, refillPeriodMs: 2_000 },
        ],
        { clock },
      );
    const cases = [
      // An emptied bucket of 3 refilled 3 every 100 ms: the second waiter went from 1100 to 1200.
      { make: interval, empty: 3, costs: [1, 1, 2, 2, 2], slots: [1_100, 1_100, 1_200, 1_300, 1_400], next: 1_400 },
      // Two bandwidths: the second went from 1500 to 2500.
      { make: bands, empty: 1, costs: [1, 1, 1], slots: [1_250, 1_500, 3_000], next: 5_000 },
    ];
    for (const { make, empty, costs, slots, next } of cases) {
      for (const keyed of [false, true]) {
        const { time, settled, track } = setup();
        const limiter = keyed ? new KeyedLimiter(make(time.now)) : make(time.now);
        const args = keyed ? ['k'] : [];
        assert.equal(limiter.tryAcquire(...args, empty).allowed, true);
        const controller = new AbortController();
        // The first aborted at once: the others booked again at the instant they were booked.
        costs.forEach((cost, i) => track(i, limiter.acquire(...args, cost, i === 0 ? { signal: controller.signal } : undefined)));
        controller.abort();
        track('next', limiter.acquire(...args, 1));
        await time.advance(10_000);
        time.uninstall();
        const at = Object.fromEntries(settled.map(([label, when, error]) => [label, error === undefined ? when : error.name]));
        const name = `${limiter.algorithm}${keyed ? ', keyed' : ''}, costs ${costs}`;
        assert.equal(at[0], 'AbortError', name);
        assert.deepStrictEqual(
          costs.slice(1).map((_, i) => at[i + 1]),
          slots.slice(1),
          `${name}: each in its slot`,
        );
        // After the unit its slot held: one refill of 3 at 1400 (the last
        // waiter's 2, then 1), a second refill of the 2 s bandwidth.
        assert.equal(at.next, next, `${name}: the next acquire`);
      }
    }
  });

  /** A bucket of one unit every 100 ms on a fake clock, emptied (alone, or keyed: its key `k`), and what setup() gives. */
  const emptiedBucket = (keyed) => {
    const test = setup();
    const bucket = new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 100, clock: test.time.now });
    const limiter = keyed ? new KeyedLimiter(bucket) : bucket;
    const args = keyed ? ['k'] : [];
    limiter.tryAcquire(...args);
    return { ...test, limiter, args };
  };

  it("a token bucket's aborted waiter gives its booking back only while it is the latest", async () => {
    // One unit every 100 ms. b aborted with c behind: kept unused (given
    // back, it freed the slot at the end of the queue, and the next acquire
    // shared c's: two units at once). c aborted, the latest: given back.
    for (const keyed of [false, true]) {
      const { time, settled, track, limiter, args } = emptiedBucket(keyed);
      const [b, c] = [new AbortController(), new AbortController()];
      track('b', limiter.acquire(...args, 1, { signal: b.signal }));
      track('c', limiter.acquire(...args, 1, { signal: c.signal }));
      track('d', limiter.acquire(...args));
      await time.advance(10);
      b.abort();
      track('e', limiter.acquire(...args));
      await time.advance(10);
      // d is behind c: c is not the latest either.
      c.abort();
      await time.advance(1_000);
      time.uninstall();
      const at = Object.fromEntries(settled.map(([label, when, error]) => [label, error === undefined ? when : error.name]));
      assert.deepStrictEqual(at, { b: 'AbortError', c: 'AbortError', d: 1_300, e: 1_400 }, keyed ? 'keyed' : 'limiter');
    }
    for (const keyed of [false, true]) {
      const { time, settled, track, limiter, args } = emptiedBucket(keyed);
      const latest = new AbortController();
      track('a', limiter.acquire(...args));
      track('b', limiter.acquire(...args, 1, { signal: latest.signal }));
      await time.advance(10);
      latest.abort();
      track('c', limiter.acquire(...args));
      await time.advance(1_000);
      time.uninstall();
      const at = Object.fromEntries(settled.map(([label, when, error]) => [label, error === undefined ? when : error.name]));
      assert.deepStrictEqual(at, { a: 1_100, b: 'AbortError', c: 1_200 }, `${keyed ? 'keyed' : 'limiter'}: the latest given back`);
    }
  });

  it("an acquire of another key due at once is no booking behind a key's waiters", async () => {
    // Taken for a waiter of the same queue, it kept an aborted waiter's key
    // from moving up (the freed slot went unused).
    const { time, settled, track } = setup();
    const keyed = new KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: 100, clock: time.now }));
    keyed.tryAcquire('a');
    const controller = new AbortController();
    track('a1', keyed.acquire('a', 1, { signal: controller.signal }));
    track('a2', keyed.acquire('a'));
    await keyed.acquire('b');
    controller.abort();
    await time.advance(1_000);
    time.uninstall();
    assert.deepStrictEqual(settled.filter(([label]) => label === 'a2').map(([, when]) => when), [1_100]);
  });

  it('aborting a waiter of a window algorithm moves nobody: its future window is not given back', async () => {
    // Giving back the later bookings would free nothing (a window gives back
    // only in the window it counts now), and booking them again would push
    // them a window further each.
    for (const make of [
      (clock) => new FixedWindow({ limit: 1, windowMs: 100, clock }),
      (clock) => new SlidingWindowCounter({ limit: 1, windowMs: 100, clock }),
    ]) {
      const { time, settled, track } = setup();
      const limiter = make(time.now);
      while (limiter.tryAcquire().allowed);
      const controller = new AbortController();
      track('a', limiter.acquire(1, { signal: controller.signal }));
      track('b', limiter.acquire());
      track('c', limiter.acquire());
      await flush();
      const before = limiter.peek().retryAfterMs;
      controller.abort();
      await flush();
      assert.equal(limiter.peek().retryAfterMs, before, `${limiter.algorithm}: nothing booked again`);
      await time.advance(1_000);
      time.uninstall();
      const at = Object.fromEntries(settled.map(([label, when, error]) => [label, error === undefined ? when : 'rejected']));
      assert.equal(at.a, 'rejected');
      assert.ok(at.b < at.c, `${limiter.algorithm}: b and c keep their order`);
    }
  });

  it('one signal aborting many waiters gives every booking back, booking none of them again', async () => {
    const { time } = setup();
    const gcra = new Gcra({ burst: 1, emissionIntervalMs: 100, clock: time.now });
    gcra.tryAcquire();
    const fresh = gcra.peek().retryAfterMs;
    const controller = new AbortController();
    const waiting = Array.from({ length: 200 }, () => gcra.acquire(1, { signal: controller.signal }).then(() => 'resolved', () => 'rejected'));
    controller.abort();
    assert.deepStrictEqual(new Set(await Promise.all(waiting)), new Set(['rejected']));
    assert.equal(gcra.peek().retryAfterMs, fresh, 'every booking given back');
    assert.equal(time.pending(), 0);
  });

  it('one signal shared by many waiters is listened to once, and let go when the last settles', async () => {
    const { time } = setup();
    const gcra = new Gcra({ burst: 1, emissionIntervalMs: 100, clock: time.now });
    gcra.tryAcquire();
    const { controller, signal, live, most } = countingSignal();
    const served = Array.from({ length: 20 }, () => gcra.acquire(1, { signal }));
    assert.equal(most(), 1, 'one listener for 20 waiters');
    await time.advance(100 * 20);
    await Promise.all(served);
    assert.equal(live.size, 0, 'let go once every waiter went');
    const aborted = Array.from({ length: 20 }, () => gcra.acquire(1, { signal }).then(() => 'resolved', (error) => error.name));
    assert.equal(most(), 1);
    controller.abort();
    assert.deepStrictEqual(new Set(await Promise.all(aborted)), new Set(['AbortError']));
    assert.equal(live.size, 0);
    assert.equal(time.pending(), 0);
  });

  it('many waiters sharing a real signal raise no MaxListenersExceededWarning', async () => {
    const { time } = setup();
    const bucket = new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 100, clock: time.now });
    bucket.tryAcquire();
    const warnings = [];
    const onWarning = (warning) => warnings.push(warning.name);
    process.on('warning', onWarning);
    try {
      const controller = new AbortController();
      const waiting = Array.from({ length: 30 }, () => bucket.acquire(1, { signal: controller.signal }).catch((error) => error.name));
      controller.abort();
      assert.deepStrictEqual(new Set(await Promise.all(waiting)), new Set(['AbortError']));
      // Node emits its warnings on a later turn.
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('warning', onWarning);
    }
    assert.deepStrictEqual(warnings, []);
  });

  it('aborting a keyed waiter moves up the later waiters of its key, and leaves the others where they were', async () => {
    const { time, settled, track } = setup();
    const keyed = new KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: 100, clock: time.now }));
    const controller = new AbortController();
    keyed.tryAcquire('x');
    keyed.tryAcquire('y');
    track('x1', keyed.acquire('x', 1, { signal: controller.signal }));
    track('y1', keyed.acquire('y'));
    track('x2', keyed.acquire('x'));
    track('y2', keyed.acquire('y'));
    controller.abort();
    track('x3', keyed.acquire('x'));
    await time.advance(1_000);
    const at = Object.fromEntries(settled.map(([label, when]) => [label, when]));
    assert.deepStrictEqual(at, { x1: 1_000, y1: 1_100, x2: 1_100, y2: 1_200, x3: 1_200 });
  });

  it('waiters of one key given as bytes queue as one: with its string, or, not UTF-8, with the same bytes', async () => {
    // Each call's key is a new Uint8Array: queued by the key, not the object.
    const { time, settled, track } = setup();
    const keyed = new KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: 100, clock: time.now }));
    const x = () => new Uint8Array([0xff, 0x78]);
    const y = () => Buffer.from('y');
    const controller = new AbortController();
    keyed.tryAcquire(x());
    keyed.tryAcquire('y');
    track('x1', keyed.acquire(x(), 1, { signal: controller.signal }));
    track('y1', keyed.acquire(y(), 1, { signal: controller.signal }));
    track('x2', keyed.acquire(x()));
    track('y2', keyed.acquire('y'));
    track('y3', keyed.acquire(y()));
    controller.abort();
    track('x3', keyed.acquire(x()));
    await time.advance(1_000);
    const at = Object.fromEntries(settled.map(([label, when]) => [label, when]));
    assert.deepStrictEqual(at, { x1: 1_000, y1: 1_000, x2: 1_100, y2: 1_100, y3: 1_200, x3: 1_200 });
  });

  it('a key with a lone surrogate is refused at once, never queued with the key U+FFFD', async () => {
    // The store read it as U+FFFD: it waited in that key's queue, for its slots.
    const { time, settled, track } = setup();
    const keyed = new KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: 100, clock: time.now }));
    keyed.tryAcquire('\ufffd');
    const refused = keyed.acquire('\ud800');
    track('a', keyed.acquire('\ufffd'));
    await time.advance(1_000);
    await assertLimiterRejects(refused, 'invalid_value', 'key');
    assert.deepStrictEqual(settled.map(([label, when]) => [label, when]), [['a', 1_100]]);
  });

  it('a custom abort reason is what it rejects with', async () => {
    const { time } = setup();
    const fixed = new FixedWindow({ limit: 1, windowMs: 1_000, clock: time.now });
    await fixed.acquire();
    const controller = new AbortController();
    const pending = fixed.acquire(1, { signal: controller.signal });
    const reason = new Error('shutting down');
    controller.abort(reason);
    await assert.rejects(pending, (e) => e === reason);
    assert.equal(fixed.peek(1, 1_500).allowed, false, 'the window still holds the first unit');
    assert.equal(fixed.peek(1, 2_000).allowed, true, 'the refunded booking no longer holds the next window');
  });

  it('an already aborted signal rejects at once, booking nothing', async () => {
    const { time } = setup();
    const bucket = new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 100, clock: time.now });
    const reason = new Error('gone');
    await assert.rejects(bucket.acquire(1, { signal: AbortSignal.abort(reason) }), (e) => e === reason);
    assert.equal(bucket.peek(1).allowed, true);
  });

  it('a signal aborted after the slot came changes nothing', async () => {
    const { time } = setup();
    const bucket = new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 100, clock: time.now });
    bucket.tryAcquire();
    const controller = new AbortController();
    const pending = bucket.acquire(1, { signal: controller.signal });
    await time.advance(100);
    await pending;
    controller.abort();
    assert.equal(bucket.peek(1).allowed, false, 'no refund after the slot');
  });

  it('a full queue rejects with RateLimited and its retryAfterMs', async () => {
    const { time } = setup();
    const queue = new LeakyBucket({ capacity: 2, intervalMs: 100, clock: time.now });
    const a = queue.acquire();
    const b = queue.acquire();
    const error = await queue.acquire().then(() => null, (e) => e);
    assert.ok(error instanceof RateLimited, `${error}`);
    assert.deepStrictEqual([error.code, error.retryAfterMs], ['rate_limited', 200]);
    // Room comes in 200 ms: past a shorter timeoutMs that is a TimeoutError.
    const late = await queue.acquire(1, { timeoutMs: 199 }).then(() => null, (e) => e);
    assert.deepStrictEqual([late.name, late.retryAfterMs], ['TimeoutError', 200]);
    const full = await queue.acquire(1, { timeoutMs: 200 }).then(() => null, (e) => e);
    assert.ok(full instanceof RateLimited, `${full}`);
    await time.advance(100);
    await Promise.all([a, b]);
  });

  it('never resolves before its slot, even when a timer fires early', async () => {
    const { time, settled, track } = setup({ lag: 3 });
    const gcra = new Gcra({ burst: 1, emissionIntervalMs: 100, clock: time.now });
    gcra.tryAcquire();
    track('waiter', gcra.acquire());
    await time.advance(200);
    assert.deepStrictEqual(settled, [['waiter', 1_100]]);
    assert.deepStrictEqual(time.scheduled.map((t) => t.delay), [100, 3], 'a second timer covered the rest');
  });

  it('a timer that fires twice arms no second timer, and the last waiter gone leaves none', async () => {
    // A faulty timer (a fake one, say) running its callback again after the
    // waiters' timer was armed anew: that timer is the only one, or the
    // extra one, never cleared, would keep the process alive up to its
    // slot with nobody waiting.
    const { time, settled, track } = setup();
    const fired = [];
    const setTimer = time.setTimeout;
    globalThis.setTimeout = (fn, delay) => setTimer(() => fired.push(fn) && fn(), delay);
    const gcra = new Gcra({ burst: 1, emissionIntervalMs: 100, clock: time.now });
    gcra.tryAcquire();
    track('a', gcra.acquire());
    const controller = new AbortController();
    track('b', gcra.acquire(1, { signal: controller.signal }));
    await time.advance(100);
    assert.deepStrictEqual(settled, [['a', 1_100]]);
    assert.equal(time.pending(), 1, "armed for b's slot");
    fired[0](); // the timer that let a go, once more
    await time.advance(0);
    assert.deepStrictEqual(settled, [['a', 1_100]], 'b is not due');
    assert.equal(time.pending(), 1, 'still one timer');
    controller.abort();
    await time.advance(0);
    assert.equal(settled.length, 2);
    assert.equal(time.pending(), 0, 'no timer left with nobody waiting');
  });

  it('aborting on a clock counting from the epoch gives back exactly the booked slot', async () => {
    // Slots a third of a millisecond apart, which floats at 1.7e12 ms (a
    // quarter of a microsecond apart) cannot hold: the booking is given back
    // at its exact slot, not at atMs.
    const { time } = setup({ start: 1.7e12 + 0.123456 });
    const clock = time.now;
    const third = 1000 / 3;
    const cases = [
      ['LeakyBucket', new LeakyBucket({ capacity: 10, intervalMs: third, clock })],
      ['SlidingWindowLog', new SlidingWindowLog({ limit: 1, windowMs: third, clock })],
      ['KeyedLimiter', new KeyedLimiter(new LeakyBucket({ capacity: 10, intervalMs: third, clock }))],
      ['Policy', new Policy({ limits: [{ name: 'q', limiter: new LeakyBucket({ capacity: 10, intervalMs: third }) }] }, { clock })],
    ];
    for (const [name, limiter] of cases) {
      const args = name === 'KeyedLimiter' ? ['k'] : name === 'Policy' ? [{}] : [];
      limiter.tryAcquire(...args, 1);
      const before = limiter.peek(...args, 1).retryAfterMs;
      const controller = new AbortController();
      const waiting = limiter.acquire(...args, 1, { signal: controller.signal });
      assert.ok(limiter.peek(...args, 1).retryAfterMs > before, `${name}: booked`);
      controller.abort();
      await assert.rejects(waiting, { name: 'AbortError' });
      assert.equal(limiter.peek(...args, 1).retryAfterMs, before, `${name}: the booking was given back`);
    }
  });

  it('a wait beyond what timers take (2^31 - 1 ms) is split into timers they take', async () => {
    const { time, settled, track } = setup();
    const month = 30 * 24 * 3600 * 1000;
    const gcra = new Gcra({ burst: 1, emissionIntervalMs: month, clock: time.now });
    gcra.tryAcquire();
    track('waiter', gcra.acquire());
    await time.advance(month - 1);
    assert.deepStrictEqual(settled, [], 'not before its slot');
    await time.advance(1);
    assert.deepStrictEqual(settled, [['waiter', 1_000 + month]]);
    const delays = time.scheduled.map((t) => t.delay);
    assert.ok(delays.length >= 2 && delays.every((ms) => ms <= 2 ** 31 - 1), String(delays));
  });

  it('a waiter left on fake timers removed before it came due strands nobody: the next acquire arms a timer of the timers in place', async () => {
    // As at the end of a test that leaves a limiter of the module under
    // test with a waiter: its fake timer never fires, and the one timer
    // was "armed" for the same slot, so later waiters waited for ever.
    const settled = [];
    let now = 0;
    const gcra = new Gcra({ burst: 1, emissionIntervalMs: 100, clock: () => now });
    gcra.tryAcquire();
    const left = fakeTime({ start: 0 }).install();
    gcra.acquire().then(() => settled.push(['left', now]));
    left.uninstall();
    time = fakeTime({ start: 0 }).install();
    gcra.acquire().then(() => settled.push(['next', now]));
    // Both waiters' timers now run on the timers in place.
    for (let t = 0; t < 3; t++) {
      now += 100;
      await time.advance(100);
    }
    // The waiter left behind goes too, at its slot by the clock.
    assert.deepStrictEqual(settled, [['left', 100], ['next', 200]]);
  });

  // The fake timers' clock, throwing while `broken` is set.
  const breakable = (time) => {
    const clock = () => {
      if (clock.broken) throw new Error('clock failed');
      return time.now();
    };
    clock.broken = false;
    return clock;
  };

  it('a clock that throws during the wait rejects with its error and gives the booking back', async () => {
    const { time } = setup();
    const clock = breakable(time);
    const gcra = new Gcra({ burst: 1, emissionIntervalMs: 100, clock });
    gcra.tryAcquire();
    const waiting = gcra.acquire();
    const booked = gcra.peek().retryAfterMs;
    clock.broken = true;
    const settled = waiting.then(() => null, (error) => error);
    await time.advance(100);
    assert.equal((await settled).message, 'clock failed');
    clock.broken = false;
    assert.ok(gcra.peek().retryAfterMs < booked, 'the booking was given back');
  });

  it("a clock that throws fails every waiter with its error, one aborted by another's signal as it is let go included", async () => {
    // Failed newest first: b's signal, let go, aborts a's, whose waiter
    // already failed with the clock (its booking given back). That abort
    // comes too late: a rejects with the clock's error, not the abort.
    const { time } = setup();
    const clock = breakable(time);
    const gcra = new Gcra({ burst: 1, emissionIntervalMs: 100, clock });
    gcra.tryAcquire();
    const a = new AbortController();
    const signal = { aborted: false, addEventListener() {}, removeEventListener: () => a.abort() };
    const reasons = [gcra.acquire(1, { signal: a.signal }), gcra.acquire(1, { signal })].map((p) => p.then(() => 'resolved', (error) => error.message));
    clock.broken = true;
    await time.advance(200);
    assert.deepStrictEqual(await Promise.all(reasons), ['clock failed', 'clock failed']);
    assert.equal(a.signal.aborted, true, "b's signal aborted a's");
  });

  it("a clock that throws gives a bucket's booking back only while no reserve() came after it on its key", async () => {
    // Every waiter fails with the clock, newest first, giving its booking
    // back. Given back from before a reserve() still held on its key, a
    // bucket's frees the slot at the end of the queue: the next booking
    // shared it with that reserve() (two units at once from a burst of one).
    // Its slot goes unused then, as on an abort; another key's reserve()
    // changes nothing.
    for (const [name, make] of Object.entries(BUCKETS)) {
      for (const key of ['alice', 'bob']) {
        const { time } = setup();
        try {
          let broken = false;
          const clock = () => {
            if (broken) throw new Error('clock failed');
            return time.now();
          };
          const keyed = new KeyedLimiter(make(clock));
          keyed.tryAcquire('alice');
          keyed.tryAcquire('bob');
          const waiting = keyed.acquire('alice').catch((error) => error.message);
          const held = keyed.reserve(key).atMs;
          broken = true;
          await time.advance(100);
          assert.equal(await waiting, 'clock failed');
          broken = false;
          const expected = key === 'alice' ? [1_200, 1_300] : [1_100, 1_100];
          assert.deepStrictEqual([held, keyed.reserve('alice').atMs], expected, `${name}: a reserve() of ${key}`);
        } finally {
          time.uninstall();
        }
      }
    }
  });

  it('a clock that answers NaN during the wait rejects with a RangeError naming the clock, and gives the booking back', async () => {
    const { time } = setup();
    let broken = false;
    const gcra = new Gcra({ burst: 1, emissionIntervalMs: 100, clock: () => (broken ? NaN : time.now()) });
    gcra.tryAcquire();
    const waiting = gcra.acquire();
    const booked = gcra.peek().retryAfterMs;
    broken = true;
    const settled = assertLimiterRejects(waiting, 'invalid_value', 'clock');
    await time.advance(100);
    await settled;
    broken = false;
    assert.ok(gcra.peek().retryAfterMs < booked, 'the booking was given back');
    assert.equal(time.pending(), 0, 'no timer left armed');
    // A leaky bucket gives back its latest booking only: the waiters fail newest first.
    const make = () => new LeakyBucket({ capacity: 10, intervalMs: 100, clock: () => (broken ? NaN : time.now()) });
    const [queue, twin] = [make(), make()];
    queue.tryAcquire();
    twin.tryAcquire();
    const failing = [queue.acquire(), queue.acquire(), queue.acquire()].map((p) => p.catch((error) => error.code));
    broken = true;
    await time.advance(100);
    assert.deepStrictEqual(await Promise.all(failing), ['invalid_value', 'invalid_value', 'invalid_value']);
    broken = false;
    assert.equal(queue.peek().retryAfterMs, twin.peek().retryAfterMs, 'all three given back');
    assert.deepStrictEqual(queue.toBytes(), twin.toBytes());
  });

  it('a clock that books or aborts waiters of its own limiter as the timer is armed leaves no timer once every waiter settled', async () => {
    // Arming reads the clock: what the clock did then (an acquire, an abort)
    // armed the timer for the waiters it left, and the arming under way
    // armed its own over it, losing one timer or keeping one for a waiter
    // gone. Either kept the process alive, up to its slot, with nobody waiting.
    for (const inClock of ['acquire', 'abort']) {
      const { time } = setup();
      let hook = null;
      const clock = () => {
        const run = hook;
        hook = null;
        run?.();
        return time.now();
      };
      // A token bucket: an aborted waiter that is not the latest moves
      // nobody, and the timer is armed again for the next one, reading the
      // clock first thing.
      const bucket = new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 100, clock });
      bucket.tryAcquire();
      const [a, b, c] = [new AbortController(), new AbortController(), new AbortController()];
      const outcomes = [bucket.acquire(1, { signal: a.signal }), bucket.acquire(1, { signal: b.signal })];
      hook = inClock === 'acquire' ? () => outcomes.push(bucket.acquire(1, { signal: c.signal })) : () => b.abort();
      a.abort();
      b.abort();
      c.abort();
      const reasons = await Promise.all(outcomes.map((p) => p.then(() => 'resolved', (error) => error.name)));
      assert.deepStrictEqual(reasons, inClock === 'acquire' ? ['AbortError', 'AbortError', 'AbortError'] : ['AbortError', 'AbortError'], inClock);
      assert.equal(time.pending(), 0, `${inClock}: no timer left armed`);
      time.uninstall();
    }
  });

  /**
   * A clock on `time` that runs `hook` (set with `at(n, hook)`) as it is
   * read for the n-th time from then on: the caller's code, run from inside
   * the binding.
   */
  /**
   * The limiters whose waiters move up behind an aborted one (alone, keyed,
   * a policy of one), one unit every 100 ms on `clock`, emptied: each as
   * `{ acquire(options) }`, for one key or request.
   */
  const QUEUES = {
    Gcra: (clock) => new Gcra({ burst: 1, emissionIntervalMs: 100, clock }),
    LeakyBucket: (clock) => new LeakyBucket({ capacity: 10, intervalMs: 100, clock }),
    KeyedLimiter: (clock) => new KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: 100, clock })),
    Policy: (clock) => new Policy({ limits: [{ name: 'q', limiter: new Gcra({ burst: 1, emissionIntervalMs: 100 }) }] }, { clock }),
  };
  const emptiedQueue = (make, clock) => {
    const limiter = make(clock);
    const args = limiter instanceof KeyedLimiter ? ['k'] : limiter instanceof Policy ? [{}] : [];
    limiter.tryAcquire(...args);
    return { acquire: (options) => limiter.acquire(...args, 1, options) };
  };

  /** Where each tracked promise went: its time, or its error's name. */
  const outcomes = (settled) => Object.fromEntries(settled.map(([label, when, error]) => [label, error === undefined ? when : error.name]));

  it('a clock that aborts or books waiters while those behind an aborted one move up books each once, in order', async () => {
    // a (aborted), b, c, d wait; the clock, read as they move up, aborts c
    // (not booked again yet, or booked again already) or books x. Read
    // between the give-back of their bookings and their booking again, it
    // moved d up into the slot at 1100 then, and d booked again at 1300
    // after b: the slot at 1100 went unused, and so did every slot after
    // (each later acquire one slot late); x, a newcomer, went ahead of b,
    // c and d.
    const cases = {
      'aborts a waiter as the clock is first read': (controllers) => controllers.c.abort(),
      'aborts a waiter as the clock is read again': (controllers) => controllers.b.abort(),
      'books a waiter': (controllers, track, queue) => track('x', queue.acquire()),
    };
    const expected = {
      'aborts a waiter as the clock is first read': { a: 'AbortError', b: 1_100, c: 'AbortError', d: 1_200, e: 1_300 },
      'aborts a waiter as the clock is read again': { a: 'AbortError', b: 'AbortError', c: 1_100, d: 1_200, e: 1_300 },
      'books a waiter': { a: 'AbortError', b: 1_100, c: 1_200, d: 1_300, x: 1_400, e: 1_500 },
    };
    for (const [inClock, run] of Object.entries(cases)) {
      for (const [name, make] of Object.entries(QUEUES)) {
        const { time, settled, track } = setup();
        const { clock, at } = hookedClock(() => time.now());
        const queue = emptiedQueue(make, clock);
        const controllers = { a: new AbortController(), b: new AbortController(), c: new AbortController() };
        for (const label of ['a', 'b', 'c']) track(label, queue.acquire({ signal: controllers[label].signal }));
        track('d', queue.acquire());
        at(inClock.endsWith('read again') ? 2 : 1, () => run(controllers, track, queue));
        controllers.a.abort();
        await flush();
        track('e', queue.acquire());
        await time.advance(1_000);
        time.uninstall();
        assert.deepStrictEqual(outcomes(settled), expected[inClock], `${name}: the clock ${inClock}`);
      }
    }
  });

  it('a clock that aborts a waiter ahead of an aborted one, as those behind it move up, books each once', async () => {
    // c aborts; the clock, read for d to book again at, aborts a, ahead of
    // c, whose withdrawal moves b and d up and lets c go as aborted. Read
    // once c's place was taken, c's withdrawal went on from a place c no
    // longer had: it took the last waiter (d) out, who never settled.
    for (const [name, make] of Object.entries(QUEUES)) {
      const { time, settled, track } = setup();
      const { clock, at } = hookedClock(() => time.now());
      const queue = emptiedQueue(make, clock);
      const controllers = { a: new AbortController(), b: new AbortController(), c: new AbortController() };
      for (const label of ['a', 'b', 'c']) track(label, queue.acquire({ signal: controllers[label].signal }));
      track('d', queue.acquire());
      at(1, () => controllers.a.abort());
      controllers.c.abort();
      await flush();
      track('e', queue.acquire());
      await time.advance(1_000);
      time.uninstall();
      assert.deepStrictEqual(outcomes(settled), { a: 'AbortError', b: 1_100, c: 'AbortError', d: 1_200, e: 1_300 }, name);
    }
  });

  it("an aborted key's waiters moved up go at their new slots, ahead of another key's due later", async () => {
    // x2 moves up to 1100, ahead of y1 (1150). Left behind y1 in the queue,
    // it went only when y1 did.
    const { time, settled, track } = setup();
    const keyed = new KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: 100, clock: time.now }));
    keyed.tryAcquire('x');
    const controller = new AbortController();
    track('x1', keyed.acquire('x', 1, { signal: controller.signal }));
    track('x2', keyed.acquire('x'));
    await time.advance(50);
    keyed.tryAcquire('y');
    track('y1', keyed.acquire('y'));
    controller.abort();
    await time.advance(1_000);
    assert.deepStrictEqual(outcomes(settled), { x1: 'AbortError', x2: 1_100, y1: 1_150 });
  });

  it("waiters moved up go at their new slots, ahead of another key's waiter booked before them and due later", async () => {
    // y1 booked before x2, for a later slot than the one x2 moves up to:
    // the queue stays in the order of the slots, not of the bookings, or
    // x2 went only when y1 did.
    const { time, settled, track } = setup();
    const keyed = new KeyedLimiter(new Gcra({ burst: 1, emissionIntervalMs: 100, clock: time.now }));
    keyed.tryAcquire('x');
    const controller = new AbortController();
    track('x1', keyed.acquire('x', 1, { signal: controller.signal }));
    await time.advance(50);
    keyed.tryAcquire('y');
    track('y1', keyed.acquire('y'));
    track('x2', keyed.acquire('x'));
    controller.abort();
    await time.advance(1_000);
    assert.deepStrictEqual(outcomes(settled), { x1: 'AbortError', x2: 1_100, y1: 1_150 });
  });

  it('waiters booked for one slot go in the order they were booked', async () => {
    // A window's waiters share the start of the next window.
    const { time, settled, track } = setup();
    const window = new FixedWindow({ limit: 2, windowMs: 1_000, clock: time.now });
    window.tryAcquire(2);
    for (const label of ['a', 'b', 'c']) track(label, window.acquire());
    await time.advance(2_000);
    assert.deepStrictEqual(settled, [['a', 2_000], ['b', 2_000], ['c', 3_000]]);
  });

  it('waiters all due at once (a clock that jumped ahead) are let go in order, in work that grows as their number', async () => {
    // Each let go with the queue's shift(): past 16k or so waiters, where
    // V8 moves the whole array on each one, serving them took a time of the
    // square of their number (a laptop waking with many waiting). Measured
    // without a clock: the elements that the array built-ins called while
    // the timer runs go over (a shift() or a splice() at the front moves
    // every one behind it), for 3000 waiters let go by one timer.
    const { time, settled, track } = setup();
    const wakes = [];
    const setTimer = time.setTimeout;
    globalThis.setTimeout = (fn, delay) => setTimer(() => wakes.push(counted(fn)), delay);
    const COUNTED = ['shift', 'unshift', 'splice', 'slice', 'filter', 'map', 'some', 'every', 'find', 'findIndex', 'indexOf', 'includes', 'sort', 'copyWithin', 'reverse', 'forEach', 'concat'];
    const counted = (fn) => {
      const saved = COUNTED.map((name) => Array.prototype[name]);
      let went = 0;
      COUNTED.forEach((name, i) => {
        Array.prototype[name] = function (...args) {
          went += this.length;
          return saved[i].apply(this, args);
        };
      });
      try {
        fn();
      } finally {
        COUNTED.forEach((name, i) => (Array.prototype[name] = saved[i]));
      }
      return went;
    };
    let clock = 1_000;
    const gcra = new Gcra({ burst: 1, emissionIntervalMs: 1, clock: () => clock });
    gcra.tryAcquire();
    const count = 3_000;
    for (let i = 0; i < count; i++) track(i, gcra.acquire());
    clock += 2 * count;
    await time.advance(1);
    assert.deepStrictEqual(
      settled.map(([label]) => label),
      Array.from({ length: count }, (_, i) => i),
      'every one, first come first served',
    );
    assert.deepStrictEqual(wakes.length, 1, 'one timer let them all go');
    assert.ok(wakes[0] <= 4 * count, `the built-ins went over ${wakes[0]} elements to let ${count} waiters go`);
    assert.equal(time.pending(), 0);
  });

  it("the caller's code run as a due waiter goes (its signal's removeEventListener) finds the due ones behind it still waiting", async () => {
    // a, b, c and d are due at once (the limiter's clock jumped 400 ms
    // ahead); a's signal, let go as a goes, books x (due too, behind them)
    // and aborts c (d and x move up), or c and d (x moves up): each as the
    // queue then stands, the waiters behind a in it.
    for (const abortD of [false, true]) {
      const { time, settled, track } = setup();
      let jump = 0;
      const gcra = new Gcra({ burst: 1, emissionIntervalMs: 100, clock: () => time.now() + jump });
      gcra.tryAcquire();
      const [c, d] = [new AbortController(), new AbortController()];
      let run = () => {};
      const signal = {
        aborted: false,
        addEventListener() {},
        removeEventListener() {
          const hook = run;
          run = () => {};
          hook();
        },
      };
      track('a', gcra.acquire(1, { signal }));
      track('b', gcra.acquire());
      track('c', gcra.acquire(1, { signal: c.signal }));
      track('d', gcra.acquire(1, { signal: d.signal }));
      run = () => {
        track('x', gcra.acquire());
        c.abort();
        if (abortD) d.abort();
      };
      jump = 400;
      await time.advance(1_000);
      assert.deepStrictEqual(
        outcomes(settled),
        abortD ? { a: 1_100, b: 1_100, c: 'AbortError', d: 'AbortError', x: 1_100 } : { a: 1_100, b: 1_100, c: 'AbortError', d: 1_100, x: 1_200 },
        `d aborted: ${abortD}`,
      );
      assert.deepStrictEqual(
        settled.filter(([, , error]) => error === undefined).map(([label]) => label),
        abortD ? ['a', 'b', 'x'] : ['a', 'b', 'd', 'x'],
        'in the order they booked',
      );
      assert.equal(time.pending(), 0);
      time.uninstall();
    }
  });

  it('a timer is armed for the whole milliseconds up to the slot, rounded up: it never fires before it', async () => {
    // Rounded down, the timer fired short of the slot, and timers of 0 ms
    // followed, each short of it again on a clock that had not moved.
    const { time, settled, track } = setup();
    const gcra = new Gcra({ burst: 1, emissionIntervalMs: 100.5, clock: time.now });
    gcra.tryAcquire();
    track('waiter', gcra.acquire());
    assert.deepStrictEqual(time.scheduled.map((t) => t.delay), [101]);
    await time.advance(200);
    assert.deepStrictEqual(settled, [['waiter', 1_101]], 'as its timer fired, after its slot');
    assert.equal(time.scheduled.length, 1, 'one timer');
  });

  it("a signal's code that aborts a waiter while those behind an aborted one move up books each once", async () => {
    // A signal-like's `aborted` getter, read to tell which of those behind
    // are aborted too, and its removeEventListener, called as one of them
    // leaves: run while the others were booked again, an abort of c there
    // moved d up into the slot at 1100, and d booked again at 1200 or 1300.
    for (const where of ['aborted', 'removeEventListener']) {
      for (const [name, make] of Object.entries(QUEUES)) {
        const { time, settled, track } = setup();
        const queue = emptiedQueue(make, time.now);
        const [a, c] = [new AbortController(), new AbortController()];
        let hook = null;
        const run = () => {
          const once = hook;
          hook = null;
          once?.();
        };
        // b's signal: aborted with a's (removeEventListener), or never (aborted).
        const own = where === 'aborted' ? new AbortController().signal : a.signal;
        const b = {
          get aborted() {
            if (where === 'aborted') run();
            return own.aborted;
          },
          get reason() {
            return own.reason;
          },
          addEventListener: (...args) => own.addEventListener(...args),
          removeEventListener(...args) {
            if (where === 'removeEventListener') run();
            own.removeEventListener(...args);
          },
        };
        track('a', queue.acquire({ signal: a.signal }));
        track('b', queue.acquire({ signal: b }));
        track('c', queue.acquire({ signal: c.signal }));
        track('d', queue.acquire());
        hook = () => c.abort();
        a.abort();
        await flush();
        track('e', queue.acquire());
        await time.advance(1_000);
        time.uninstall();
        const expected =
          where === 'aborted'
            ? { a: 'AbortError', b: 1_100, c: 'AbortError', d: 1_200, e: 1_300 }
            : { a: 'AbortError', b: 'AbortError', c: 'AbortError', d: 1_100, e: 1_200 };
        assert.deepStrictEqual(outcomes(settled), expected, `${name}: c aborted from b's signal's ${where}`);
      }
    }
  });

  it('a signal aborted by the clock as acquire books rejects, and its booking is given back', async () => {
    // Aborted after acquire read `signal.aborted` and before it listened
    // (the clock is read to book, then to arm the timer), the abort was
    // never heard: the acquire went at its slot, aborted.
    for (const read of [1, 2]) {
      for (const [name, make] of Object.entries(QUEUES)) {
        const { time, settled, track } = setup();
        const { clock, at } = hookedClock(() => time.now());
        const queue = emptiedQueue(make, clock);
        const controller = new AbortController();
        at(read, () => controller.abort());
        track('a', queue.acquire({ signal: controller.signal }));
        track('b', queue.acquire());
        await time.advance(1_000);
        time.uninstall();
        assert.deepStrictEqual(outcomes(settled), { a: 'AbortError', b: 1_100 }, `${name}: aborted at the clock's read ${read}`);
      }
    }
  });

  it("a clock that throws never lets a waiter's code book between two give-backs", async () => {
    // Every waiter fails, newest first, each giving its booking back. The
    // newest one's signal-like, let go as it failed, books x before the
    // older ones gave theirs back: each of those freed the slot at the end
    // of the queue, x's, and the bookings after shared it (two units at once
    // from a burst of one).
    for (const [name, make] of Object.entries(QUEUES)) {
      const { time, settled, track } = setup();
      let broken = false;
      const clock = () => {
        if (broken) {
          broken = false;
          throw new Error('clock failed');
        }
        return time.now();
      };
      const queue = emptiedQueue(make, clock);
      const own = new AbortController().signal;
      let booking = () => track('x', queue.acquire());
      const signal = {
        get aborted() {
          return own.aborted;
        },
        addEventListener: (...args) => own.addEventListener(...args),
        removeEventListener(...args) {
          const once = booking;
          booking = null;
          once?.();
          own.removeEventListener(...args);
        },
      };
      track('a', queue.acquire());
      track('b', queue.acquire());
      track('c', queue.acquire({ signal }));
      await time.advance(50);
      broken = true;
      await time.advance(50);
      for (const label of ['d', 'e', 'f']) track(label, queue.acquire());
      await time.advance(1_000);
      time.uninstall();
      const at = outcomes(settled);
      assert.deepStrictEqual([at.a, at.b, at.c], ['Error', 'Error', 'Error'], name);
      const slots = ['x', 'd', 'e', 'f'].map((label) => at[label]);
      assert.deepStrictEqual(slots, [...slots].sort((p, q) => p - q), `${name}: in order`);
      for (let i = 1; i < slots.length; i++) assert.ok(slots[i] - slots[i - 1] >= 100, `${name}: ${slots} share a slot`);
    }
  });

  it('bad arguments reject with the binding errors', async () => {
    const { time } = setup();
    const bucket = new TokenBucket({ capacity: 2, refillTokens: 1, refillPeriodMs: 100, clock: time.now });
    await assertLimiterRejects(bucket.acquire('1'), 'invalid_type', 'cost');
    await assertLimiterRejects(bucket.acquire(3), 'cost_exceeds_limit', 'cost');
    await assertLimiterRejects(bucket.acquire(1, 5), 'invalid_type', 'options');
    await assertLimiterRejects(bucket.acquire(1, { signal: {} }), 'invalid_type', 'signal');
    // Without removeEventListener its waiter's timer would throw when the slot came.
    const lookalike = { aborted: false, addEventListener() {} };
    await assertLimiterRejects(bucket.acquire(1, { signal: lookalike }), 'invalid_type', 'signal');
    await assertLimiterRejects(bucket.acquire(1, { timeoutMs: '5' }), 'invalid_type', 'timeoutMs');
    await assertLimiterRejects(bucket.acquire(1, { timeoutMs: -1 }), 'invalid_value', 'timeoutMs');
    await assertLimiterRejects(bucket.acquire(1, { timeoutMs: NaN }), 'invalid_value', 'timeoutMs');
    assert.equal(bucket.peek(2).allowed, true, 'nothing was booked');
  });

  it('a signal whose addEventListener throws rejects with its error, and the booking is given back', async () => {
    const { time } = setup();
    const bucket = new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 100, clock: time.now });
    bucket.tryAcquire();
    const refusing = { aborted: false, addEventListener() { throw new Error('no listeners here'); }, removeEventListener() {} };
    await assert.rejects(bucket.acquire(1, { signal: refusing }), { message: 'no listeners here' });
    // The slot at 100 ms it booked is free again: the next waiter gets it.
    const next = bucket.acquire(1);
    await time.advance(100);
    await next;
    assert.equal(bucket.peek().allowed, false, 'the next waiter took the slot at 100 ms');
    assert.equal(bucket.peek().retryAfterMs, 100);
  });
});

describe('reservations', () => {
  it("a reservation keeps its limiter: cancelled after the limiter's last reference went, it gives back to it alone", async () => {
    // The napi build's handles are table indices, reused once a collected
    // limiter's is freed: a reservation holding only the index would give
    // its unit to whichever limiter came next.
    const v8 = require('node:v8');
    const vm = require('node:vm');
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc');
    const reservations = [];
    for (let i = 0; i < 8; i++) {
      const gone = new Gcra({ burst: 1, emissionIntervalMs: 1_000 });
      gone.tryAcquire(1, 0);
      reservations.push(gone.reserve(1, undefined, 0));
    }
    for (let i = 0; i < 5; i++) {
      gc();
      await new Promise((resolve) => setImmediate(resolve));
    }
    const fresh = Array.from({ length: 8 }, () => new Gcra({ burst: 1, emissionIntervalMs: 1_000 }));
    for (const limiter of fresh) limiter.tryAcquire(1, 0);
    for (const r of reservations) r.cancel();
    assert.deepStrictEqual(
      fresh.map((limiter) => limiter.peek(1, 0).allowed),
      fresh.map(() => false),
      'no limiter got a unit it never gave',
    );
  });
});

describe('acquire in real time', () => {
  it('paces waiters at the rate, none before its slot', async () => {
    const bucket = new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 20 });
    const start = performance.now();
    const slots = [];
    await Promise.all(
      [0, 1, 2, 3].map(async () => {
        await bucket.acquire();
        slots.push(performance.now() - start);
      }),
    );
    assert.equal(slots.length, 4);
    slots.forEach((at, i) => assert.ok(at >= i * 20 - 0.5, `waiter ${i} resolved at ${at.toFixed(2)} ms, before ${i * 20} ms`));
    assert.deepStrictEqual([...slots].sort((x, y) => x - y), slots, 'first come first served');
  });

  // Bounded: were the abort never heard, the wait would never end (its clock stands still).
  it('an AbortSignal.timeout() aborts a real wait and refunds it', { timeout: 30_000 }, async () => {
    // The timers are real; the limiter's clock stands still, so that the wait
    // left after the refund is one refill exactly (on the runtime's clock, a
    // machine that paused the test a second made it look like no refund).
    const bucket = new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 10_000, clock: () => 0 });
    bucket.tryAcquire();
    await assert.rejects(bucket.acquire(1, { signal: AbortSignal.timeout(20) }), (e) => e.name === 'TimeoutError');
    const retry = bucket.peek(1).retryAfterMs;
    assert.equal(retry, 10_000, 'the refund freed the booked slot: one refill away, not two');
  });
});
