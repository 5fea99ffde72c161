// pacedFetch (bindings-node/lib/paced-fetch.cjs) in Node with a fake fetch, an
// injected clock and fake timers: the spacing, first come first served, one
// timer, abort, Retry-After and RateLimit pauses. Runs on the native addon, or
// on the wasm build with RATEKEEPER_IMPL=wasm (both built by the repository's scripts).
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';

const require = createRequire(import.meta.url);
const impl = process.env.RATEKEEPER_IMPL === 'wasm' ? '../../bindings-wasm/node.cjs' : '../../bindings-node/index.js';
const { Gcra, TokenBucket, LeakyBucket, FixedWindow, SlidingWindowCounter, SlidingWindowLog, KeyedLimiter, Policy, RateLimited } = require(impl);
const { pacedFetchFor, parseRetryAfter, parseRateLimit } = require('../../bindings-node/lib/paced-fetch.cjs');
const { countingSignal, hookedClock } = require('../js/helpers.cjs');
// As the package's entries make it: the build's RateLimited for its errors.
const pacedFetch = pacedFetchFor(RateLimited);

/** assert.rejects' check of a refusal: an instance of the build's RateLimited, with `fields`. */
function rateLimited(fields) {
  return (error) => {
    assert.ok(error instanceof RateLimited, `a RateLimited, not ${error?.constructor?.name}`);
    assert.equal(error.name, 'RateLimited');
    assert.equal(error.code, 'rate_limited');
    for (const [name, value] of Object.entries(fields)) {
      if (value instanceof RegExp) assert.match(error[name], value, name);
      else assert.equal(error[name], value, name);
    }
    return true;
  };
}

/** A clock and timers that move only when told; records the most timers ever pending. */
function fakeTime() {
  let now = 0;
  let next = 1;
  let most = 0;
  const pending = new Map();
  const flush = () => new Promise((resolve) => setImmediate(resolve));
  return {
    clock: () => now,
    timers: {
      setTimeout(fn, ms) {
        const id = next++;
        pending.set(id, { at: now + ms, fn });
        most = Math.max(most, pending.size);
        return id;
      },
      clearTimeout(id) {
        pending.delete(id);
      },
    },
    get most() {
      return most;
    },
    get pending() {
      return pending.size;
    },
    async advance(ms) {
      const end = now + ms;
      for (;;) {
        await flush();
        let first = null;
        for (const [id, t] of pending) if (t.at <= end && (first === null || t.at < first[1].at)) first = [id, t];
        if (first === null) break;
        pending.delete(first[0]);
        now = Math.max(now, first[1].at);
        first[1].fn();
      }
      now = end;
      await flush();
    },
  };
}

/** A fetch that records when each URL arrived and answers with `answer(url, count)` (default 200). */
function fakeFetch(time, answer = () => ({ status: 200 })) {
  const log = [];
  const seen = new Map();
  const fetch = async (url) => {
    const count = (seen.get(url) ?? 0) + 1;
    seen.set(url, count);
    log.push([url, time.clock()]);
    const { status, headers } = answer(url, count);
    return new Response(status === 204 ? null : 'body', { status, headers });
  };
  return { fetch, log };
}

const tenPerSecond = (clock) => Gcra.perPeriod({ burst: 1, tokens: 10, periodMs: 1000, clock });

test('requests leave at the limiter rate, in call order, behind one timer', async () => {
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time);
  const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers });
  const done = ['/0', '/1', '/2', '/3', '/4'].map((url) => paced(url));
  assert.equal(paced.waiting, 4, 'the first left at once');
  await time.advance(1000);
  const responses = await Promise.all(done);
  assert.deepEqual(responses.map((r) => r.status), [200, 200, 200, 200, 200]);
  assert.deepEqual(log, [['/0', 0], ['/1', 100], ['/2', 200], ['/3', 300], ['/4', 400]]);
  assert.equal(time.most, 1, 'one timer at a time');
  assert.equal(paced.waiting, 0);
});

test('a token bucket lets its burst through, then paces', async () => {
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time);
  const bucket = new TokenBucket({ capacity: 3, refillTokens: 1, refillPeriodMs: 50, clock: time.clock });
  const paced = pacedFetch(fetch, bucket, { clock: time.clock, timers: time.timers });
  const done = Array.from({ length: 5 }, (_, i) => paced(`/${i}`));
  await time.advance(500);
  await Promise.all(done);
  assert.deepEqual(log.map(([, at]) => at), [0, 0, 0, 50, 100]);
});

test('aborting a queued request refunds its booking and rejects with the reason', async () => {
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time);
  const gcra = tenPerSecond(time.clock);
  const paced = pacedFetch(fetch, gcra, { clock: time.clock, timers: time.timers });
  const controller = new AbortController();
  const first = paced('/a');
  const second = paced('/b', { signal: controller.signal });
  assert.equal(paced.waiting, 1);
  controller.abort();
  await assert.rejects(second, { name: 'AbortError' });
  assert.equal(paced.waiting, 0);
  // The refund gave the slot at 100 back: the next request takes it.
  assert.equal(gcra.reserve(1, Infinity, 0).atMs, 100);
  await time.advance(1000);
  await first;
  assert.deepEqual(log, [['/a', 0]], 'the aborted request never left');
  // An already aborted signal rejects at once, booking nothing.
  await assert.rejects(paced('/c', { signal: AbortSignal.abort() }), { name: 'AbortError' });
});

test('a 429 with Retry-After pauses the queue, then retries once', async () => {
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time, (url, count) =>
    url === '/a' && count === 1 ? { status: 429, headers: { 'Retry-After': '2' } } : { status: 200 },
  );
  const events = [];
  const paced = pacedFetch(fetch, tenPerSecond(time.clock), {
    clock: time.clock,
    timers: time.timers,
    onEvent: (e) => events.push(e.type),
  });
  const a = paced('/a');
  const b = paced('/b');
  await time.advance(5000);
  assert.equal((await a).status, 200, 'the retry answered');
  assert.equal((await b).status, 200);
  assert.deepEqual(log, [['/a', 0], ['/a', 2000], ['/b', 2100]]);
  assert.ok(events.includes('paused'));
  assert.equal(paced.pausedUntilMs, 2000);
});

test("a cache's answer (`Age` above 0): its RateLimit is ignored, and its Retry-After seconds count from when it was made", async () => {
  // A response served again by a cache paused the queue by its RateLimit
  // (`r=0` as it was long ago) at each reuse, and for the whole of its
  // Retry-After seconds, counted again from its reuse.
  const run = async (headers, status = 200) => {
    const time = fakeTime();
    const { fetch, log } = fakeFetch(time, (url, count) => (url === '/a' && count === 1 ? { status, headers } : { status: 200 }));
    const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers });
    const sent = [paced('/a'), paced('/b')];
    await time.advance(20_000);
    await Promise.all(sent);
    return log;
  };
  const exhausted = { RateLimit: '"api";r=0;t=5' };
  assert.deepEqual(await run(exhausted), [['/a', 0], ['/b', 5000]], 'from the server: paused');
  assert.deepEqual(await run({ ...exhausted, Age: '0' }), [['/a', 0], ['/b', 5000]], 'Age 0: fresh from the server');
  assert.deepEqual(await run({ ...exhausted, Age: '30' }), [['/a', 0], ['/b', 100]], 'from a cache: ignored');
  assert.deepEqual(await run({ 'RateLimit-Remaining': '0', 'RateLimit-Reset': '5', Age: '1' }), [['/a', 0], ['/b', 100]], 'the older fields too');
  // RFC 9111, 5.1: a list counts by its first member; an invalid Age is ignored.
  assert.deepEqual(await run({ ...exhausted, Age: '3, 0' }), [['/a', 0], ['/b', 100]], 'a list');
  for (const age of ['-1', '1.5', 'soon', '']) {
    assert.deepEqual(await run({ ...exhausted, Age: age }), [['/a', 0], ['/b', 5000]], `Age ${JSON.stringify(age)}: ignored`);
  }
  // Retry-After seconds count from when the response was made: what is left of them.
  assert.deepEqual(await run({ 'Retry-After': '5', Age: '3' }, 429), [['/a', 0], ['/a', 2000], ['/b', 2100]], 'Retry-After less Age');
  assert.deepEqual(await run({ 'Retry-After': '5', Age: '9' }, 503), [['/a', 0], ['/a', 100], ['/b', 200]], 'all spent: no pause');
  // A date is the same instant whenever it is read.
  const noon = Date.UTC(2025, 0, 1, 12);
  assert.equal(parseRetryAfter('Wed, 01 Jan 2025 12:00:30 GMT', noon, 20), 30_000);
  assert.equal(parseRetryAfter('30', noon, 20), 10_000);
  assert.equal(parseRetryAfter('30', noon, 40), 0);
});

test("an HTTP-date Retry-After counts from the response's Date, on the server's clock: a client clock off by an hour pauses as asked", async () => {
  // Measured against the local clock alone, a client an hour behind the
  // server paused the whole hour (capped at maxRetryAfterMs, and not
  // retried), and one an hour ahead not at all (a date past: retried at
  // once, into another 429). RFC 9110 (section 10.2.3) counts a date from
  // "the time of the response", which the response's Date tells on the
  // same clock as the Retry-After date.
  const noon = Date.UTC(2025, 0, 1, 12);
  const serverDate = 'Wed, 01 Jan 2025 12:00:00 GMT';
  const retryAt = 'Wed, 01 Jan 2025 12:00:30 GMT';
  const run = async (wall, headers) => {
    const time = fakeTime();
    const { fetch, log } = fakeFetch(time, (url, count) => (url === '/a' && count === 1 ? { status: 429, headers } : { status: 200 }));
    const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, wallClock: () => wall + time.clock(), timers: time.timers });
    const sent = [paced('/a'), paced('/b')];
    await time.advance(120_000);
    const answers = await Promise.all(sent);
    return [log, answers.map((r) => r.status)];
  };
  const asked = [[['/a', 0], ['/a', 30_000], ['/b', 30_100]], [200, 200]];
  for (const skew of [0, -3_600_000, 3_600_000, 29_000, -29_000]) {
    assert.deepEqual(await run(noon + skew, { 'Retry-After': retryAt, Date: serverDate }), asked, `client clock off by ${skew} ms`);
  }
  // Its other forms of date too.
  for (const date of ['Wednesday, 01-Jan-25 12:00:00 GMT', 'Wed Jan  1 12:00:00 2025']) {
    assert.deepEqual(await run(noon - 3_600_000, { 'Retry-After': retryAt, Date: date }), asked, date);
  }
  // No Date, or one that is no HTTP-date (a list of two, junk): the local clock, as before.
  for (const date of [undefined, 'soon', `${serverDate}, ${serverDate}`, 'Wed, 31 Feb 2025 12:00:00 GMT']) {
    const headers = { 'Retry-After': retryAt, ...(date !== undefined && { Date: date }) };
    assert.deepEqual(await run(noon + 10_000, headers), [[['/a', 0], ['/a', 20_000], ['/b', 20_100]], [200, 200]], String(date));
  }
  // A cache's answer: the server's now is its Date plus its Age.
  assert.deepEqual(await run(noon - 3_600_000, { 'Retry-After': retryAt, Date: serverDate, Age: '10' }), [[['/a', 0], ['/a', 20_000], ['/b', 20_100]], [200, 200]], 'Age 10');
  // A date at or before the response's: no wait (clamped at 0), whatever the local clock says.
  for (const at of ['Wed, 01 Jan 2025 11:59:00 GMT', serverDate]) {
    assert.deepEqual(await run(noon - 3_600_000, { 'Retry-After': at, Date: serverDate }), [[['/a', 0], ['/a', 100], ['/b', 200]], [200, 200]], at);
  }
  // Delay-seconds are no date: the Date changes nothing.
  assert.deepEqual(await run(noon - 3_600_000, { 'Retry-After': '30', Date: serverDate }), asked, 'delay-seconds');
  // The parser: the date less the response's Date (and its Age), never below 0.
  assert.equal(parseRetryAfter(retryAt, noon + 3_600_000, 0, serverDate), 30_000);
  assert.equal(parseRetryAfter(retryAt, noon + 3_600_000, 20, serverDate), 10_000);
  assert.equal(parseRetryAfter(retryAt, noon + 3_600_000, 40, serverDate), 0);
  assert.equal(parseRetryAfter(retryAt, noon + 10_000, 0, 'soon'), 20_000);
  assert.equal(parseRetryAfter(retryAt, noon + 10_000, 0, null), 20_000);
  assert.equal(parseRetryAfter('30', noon, 0, 'Wed, 01 Jan 2025 13:00:00 GMT'), 30_000);
});

test('a stored answer served without `Age` is taken as new: its Retry-After date waits the whole delay again, as for a client clock ahead', async () => {
  // The rule PACKAGE.md states. A 429 made at noon, served ten minutes
  // later by a cache that adds no `Age` (RFC 9111, section 4, says it
  // must), reads exactly as a fresh one to a client whose clock is ten
  // minutes ahead of the server's: counted from the local clock, that
  // client retried at once, into the next 429. Both wait the 30 s from
  // the old `Date`; with the `Age` a cache owes, the date is past.
  const noon = Date.UTC(2025, 0, 1, 12);
  const answer = { 'Retry-After': 'Wed, 01 Jan 2025 12:00:30 GMT', Date: 'Wed, 01 Jan 2025 12:00:00 GMT' };
  const run = async (wall, headers) => {
    const time = fakeTime();
    const { fetch, log } = fakeFetch(time, (url, count) => (url === '/a' && count === 1 ? { status: 429, headers } : { status: 200 }));
    const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, wallClock: () => wall + time.clock(), timers: time.timers });
    const sent = [paced('/a'), paced('/b')];
    await time.advance(120_000);
    await Promise.all(sent);
    return log;
  };
  assert.deepEqual(await run(noon + 600_000, answer), [['/a', 0], ['/a', 30_000], ['/b', 30_100]], 'no Age: the whole delay');
  assert.deepEqual(await run(noon + 600_000, { ...answer, Age: '600' }), [['/a', 0], ['/a', 100], ['/b', 200]], 'Age 600: past');
});

test("a 403 with Retry-After (GitHub's secondary rate limit) pauses and is sent again as a 429 is, any method; a 403 without it is an answer", async () => {
  // Read on 429 and 503 only, a 403 asking to wait went back to the caller
  // at once, and the queue went on into more 403s. A 403 is a refusal, as
  // a 429 is (the server did nothing), so a POST is sent again too, where
  // after a 503 only an idempotent method is.
  const run = async (headers, method = 'GET', options = {}) => {
    const time = fakeTime();
    const { fetch, log } = fakeFetch(time, (url, count) => (url === '/a' && count === 1 ? { status: 403, headers } : { status: 200 }));
    const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers, ...options });
    const sent = [paced('/a', { method }), paced('/b')];
    await time.advance(10_000);
    const answers = await Promise.all(sent);
    return [log, answers.map((r) => r.status), paced.pausedUntilMs];
  };
  const retried = [[['/a', 0], ['/a', 2000], ['/b', 2100]], [200, 200], 2000];
  assert.deepEqual(await run({ 'Retry-After': '2' }), retried, 'GET');
  assert.deepEqual(await run({ 'Retry-After': '2' }, 'POST'), retried, 'POST');
  assert.deepEqual(await run({ 'Retry-After': 'Thu, 01 Jan 1970 00:00:02 GMT', Date: 'Thu, 01 Jan 1970 00:00:00 GMT' }), retried, 'a date');
  // retries: 0 returns it, and the queue still pauses.
  assert.deepEqual(await run({ 'Retry-After': '2' }, 'GET', { retries: 0 }), [[['/a', 0], ['/b', 2000]], [403, 200], 2000], 'retries: 0');
  // Without Retry-After (or with an invalid one), a 403 is the answer: not sent again, no pause.
  for (const headers of [{}, { 'Retry-After': 'soon' }]) {
    assert.deepEqual(await run(headers), [[['/a', 0], ['/b', 100]], [403, 200], -Infinity], JSON.stringify(headers));
  }
  // Its RateLimit fields pause the queue, as on any answer, without sending it again.
  assert.deepEqual(await run({ RateLimit: '"api";r=0;t=3' }), [[['/a', 0], ['/b', 3000]], [403, 200], 3000], 'RateLimit');
});

test('retries: 0 returns the 429, and the queue still pauses', async () => {
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time, (url) =>
    url === '/a' ? { status: 429, headers: { 'Retry-After': '1' } } : { status: 200 },
  );
  const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers, retries: 0 });
  const a = paced('/a');
  const b = paced('/b');
  await time.advance(3000);
  assert.equal((await a).status, 429);
  await b;
  assert.deepEqual(log, [['/a', 0], ['/b', 1000]]);
});

test('a Retry-After that asks no wait (0, a date past, spent in a cache) and is not retried leaves the queue its slots on a shared limiter', async () => {
  // Such a pause was one all the same: the queued bookings were released,
  // kept unused since another booked the limiter after them, and the
  // requests booked again behind that one, each a queue's length later.
  const wall = Date.UTC(2026, 10, 30, 12, 0, 0);
  const answers = [
    ['0', {}, {}],
    ['Mon, 30 Nov 2026 11:59:00 GMT', {}, {}],
    ['5', { Age: '9' }, {}],
    ['5', {}, { maxRetryAfterMs: 0 }],
  ];
  for (const [retryAfter, more, options] of answers) {
    const time = fakeTime();
    const { fetch, log } = fakeFetch(time, (url) =>
      url === '/0' ? { status: 429, headers: { 'Retry-After': retryAfter, ...more } } : { status: 200 },
    );
    const gcra = tenPerSecond(time.clock);
    const events = [];
    const paced = pacedFetch(fetch, gcra, {
      clock: time.clock,
      wallClock: () => wall,
      timers: time.timers,
      retries: 0,
      onEvent: (e) => events.push(e.type),
      ...options,
    });
    const sent = ['/0', '/1', '/2', '/3'].map((url) => paced(url));
    const other = gcra.acquire(); // booked after them: their slots cannot be given back
    await time.advance(2000);
    assert.equal((await sent[0]).status, 429, retryAfter);
    await Promise.all([...sent, other]);
    assert.deepEqual(log, [['/0', 0], ['/1', 100], ['/2', 200], ['/3', 300]], `Retry-After: ${retryAfter}`);
    assert.ok(!events.includes('paused'), 'nothing paused');
    assert.equal(paced.pausedUntilMs, -Infinity);
  }
});

test('a RateLimit header with nothing remaining pauses the queue until its reset', async () => {
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time, (url) =>
    url === '/a' ? { status: 200, headers: { RateLimit: '"api";r=0;t=3' } } : { status: 200 },
  );
  const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers });
  const a = paced('/a');
  const b = paced('/b');
  await time.advance(5000);
  await Promise.all([a, b]);
  assert.deepEqual(log, [['/a', 0], ['/b', 3000]]);
});

test("behind a server answering with ratekeeper's own headers, a client paced alike is not paused beyond its pace", async () => {
  // The server: a bucket of 5, then 1 per second; its answers carry its headers.
  const time = fakeTime();
  const server = new TokenBucket({ capacity: 5, refillTokens: 1, refillPeriodMs: 1000, name: 'api', clock: time.clock });
  const { fetch, log } = fakeFetch(time, () => {
    const d = server.tryAcquire();
    return { status: d.allowed ? 200 : 429, headers: server.headers(d) };
  });
  const client = new TokenBucket({ capacity: 5, refillTokens: 1, refillPeriodMs: 1000, clock: time.clock });
  const paced = pacedFetch(fetch, client, { clock: time.clock, timers: time.timers });
  const sent = Array.from({ length: 8 }, (_, i) => paced(`/${i}`));
  await time.advance(10_000);
  const answers = await Promise.all(sent);
  assert.deepEqual(answers.map((r) => r.status), Array(8).fill(200));
  // The fifth answer says r=0;t=5: the pause is a unit's share, 1 s, not 5.
  assert.deepEqual(log.map(([, at]) => at), [0, 0, 0, 0, 0, 1000, 2000, 3000]);
});

test('maxWaitMs and a full queue reject at once, booking nothing', async () => {
  const time = fakeTime();
  const { fetch } = fakeFetch(time);
  const gcra = tenPerSecond(time.clock);
  const paced = pacedFetch(fetch, gcra, { clock: time.clock, timers: time.timers, maxWaitMs: 250 });
  const ok = [paced('/0'), paced('/1'), paced('/2')];
  await assert.rejects(paced('/3'), { name: 'TimeoutError', retryAfterMs: 300 });
  assert.equal(paced.waiting, 2);

  const queue = new LeakyBucket({ capacity: 1, intervalMs: 100, clock: time.clock });
  const shaped = pacedFetch(fetch, queue, { clock: time.clock, timers: time.timers });
  ok.push(shaped('/x'));
  await assert.rejects(shaped('/y'), rateLimited({ retryAfterMs: 100 }));
  await time.advance(1000);
  await Promise.all(ok);
});

test('the header parsers', () => {
  assert.equal(parseRetryAfter('3', 0), 3000);
  assert.equal(parseRetryAfter('Thu, 01 Jan 1970 00:00:05 GMT', 1000), 4000);
  assert.equal(parseRetryAfter('soon', 0), null);
  assert.equal(parseRetryAfter(null, 0), null);
  // Neither delay-seconds nor an HTTP-date (Date.parse reads dates into them): ignored.
  for (const odd of ['1.5', '-1', '1 2', '+3']) assert.equal(parseRetryAfter(odd, 0), null, odd);
  // The three HTTP-date forms, all GMT whatever the local zone (Date.parse read
  // the zoneless asctime form as local time); anything else is no date.
  const noon = Date.UTC(2025, 0, 1, 12, 0, 0);
  const zone = process.env.TZ;
  process.env.TZ = 'Asia/Tokyo'; // Node reads it again on change
  try {
    for (const date of ['Wed, 01 Jan 2025 12:00:30 GMT', 'Wednesday, 01-Jan-25 12:00:30 GMT', 'Wed Jan  1 12:00:30 2025']) {
      assert.equal(parseRetryAfter(date, noon), 30_000, date);
    }
  } finally {
    if (zone === undefined) delete process.env.TZ;
    else process.env.TZ = zone;
  }
  assert.equal(parseRetryAfter('Sunday, 06-Nov-94 08:49:37 GMT', noon), 0, 'a two-digit year more than 50 years ahead is past');
  assert.equal(parseRetryAfter('Wednesday, 01-Jan-75 12:00:30 GMT', noon), 0, '50 years and 30 s ahead: 1975');
  // Across a century: the year ending so that is nearest ahead, within 50
  // years (this century's alone read tomorrow as a century ago: a retry at once).
  assert.equal(parseRetryAfter('Friday, 01-Jan-00 00:00:10 GMT', Date.UTC(2099, 11, 31, 23, 59, 50)), 20_000, '2100');
  assert.equal(parseRetryAfter('Saturday, 01-Jan-00 00:00:10 GMT', Date.UTC(1999, 11, 31, 23, 59, 50)), 20_000, '2000');
  assert.equal(parseRetryAfter('Friday, 31-Dec-99 23:59:59 GMT', Date.UTC(2100, 0, 1)), 0, '2099: past');
  for (const junk of ['5 May', 'Wed, 31 Feb 2025 12:00:30 GMT', 'wed, 01 Jan 2025 12:00:30 GMT', 'Wed, 01 Jan 2025 12:00:30 UTC', 'Wed, 01 Jan 0099 12:00:30 GMT']) {
    assert.equal(parseRetryAfter(junk, noon), null, junk);
  }
  const h = (o) => new Headers(o);
  assert.equal(parseRateLimit(h({ RateLimit: '"a";r=0;t=2, "b";r=0;t=5' })), 5000);
  assert.equal(parseRateLimit(h({ RateLimit: '"a";r=3;t=2' })), null);
  // With the same policy's q and w, at most one unit's share of its window:
  // a bucket of 5 per 5 s says t=5 when emptied, and earns a unit in 1 s.
  const bucket = { 'RateLimit-Policy': '"api";q=5;w=5', RateLimit: '"api";r=0;t=5' };
  assert.equal(parseRateLimit(h(bucket)), 1000);
  assert.equal(parseRateLimit(h({ 'RateLimit-Policy': '"other";q=5;w=5', RateLimit: '"api";r=0;t=5' })), 5000);
  // A window of 0 is malformed (w is a non-zero Integer) and bounds nothing: it cut the pause to none.
  assert.equal(parseRateLimit(h({ 'RateLimit-Policy': '"api";q=5;w=0', RateLimit: '"api";r=0;t=5' })), 5000);
  // Each policy its own share (0.6 s and 0.1 s); the longest wins.
  assert.equal(parseRateLimit(h({ 'RateLimit-Policy': '"a";q=100;w=60, "b";q=10;w=1', RateLimit: '"a";r=0;t=30, "b";r=0;t=1' })), 600);
  assert.equal(parseRateLimit(h({ RateLimit: 'limit=10, remaining=0, reset=7' })), 7000);
  assert.equal(parseRateLimit(h({ 'RateLimit-Remaining': '0', 'RateLimit-Reset': '4' })), 4000);
  // A blank value is no number (Number('') is 0, "nothing left"): ignored.
  assert.equal(parseRateLimit(h({ RateLimit: 'limit=10, remaining=, reset=30' })), null);
  assert.equal(parseRateLimit(h({ RateLimit: '"a";r= ;t=30' })), null);
  assert.equal(parseRateLimit(h({ 'RateLimit-Remaining': '', 'RateLimit-Reset': '4' })), null);
  assert.equal(parseRateLimit(h({ 'RateLimit-Remaining': '0', 'RateLimit-Reset': '' })), null);
  assert.throws(() => pacedFetch(null, {}), TypeError);
  assert.throws(() => pacedFetch(fetch, tenPerSecond(), { retries: -1 }), RangeError);
});

test('an HTTP-date at a leap second (23:59:60) is a date, in each of its three forms', async () => {
  // RFC 9110's time-of-day runs to 23:59:60: refused as 31 Feb is, a 429
  // dated then was returned unretried, and the queue went on at once.
  const wall = Date.UTC(2016, 11, 31, 23, 59, 58);
  for (const date of ['Sat, 31 Dec 2016 23:59:60 GMT', 'Saturday, 31-Dec-16 23:59:60 GMT', 'Sat Dec 31 23:59:60 2016']) {
    // The instant it ends: the next day's 00:00:00.
    assert.equal(parseRetryAfter(date, wall), 2000, date);
  }
  // Only the last second of a day leaps.
  for (const junk of ['Sat, 31 Dec 2016 23:58:60 GMT', 'Sat, 31 Dec 2016 12:59:60 GMT', 'Sat, 31 Dec 2016 23:59:61 GMT', 'Sat, 32 Dec 2016 23:59:60 GMT']) {
    assert.equal(parseRetryAfter(junk, wall), null, junk);
  }
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time, (url, count) =>
    url === '/a' && count === 1 ? { status: 429, headers: { 'Retry-After': 'Sat, 31 Dec 2016 23:59:60 GMT' } } : { status: 200 },
  );
  const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, wallClock: () => wall + time.clock(), timers: time.timers });
  const sent = [paced('/a'), paced('/b')];
  await time.advance(5000);
  assert.deepEqual((await Promise.all(sent)).map((r) => r.status), [200, 200]);
  assert.deepEqual(log, [['/a', 0], ['/a', 2000], ['/b', 2100]]);
});

test('a pause longer than maxWaitMs rejects with TimeoutError, not a RangeError', async () => {
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time, (url) =>
    url === '/a' ? { status: 429, headers: { 'Retry-After': '5' } } : { status: 200 },
  );
  const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers, retries: 0, maxWaitMs: 1000 });
  assert.equal((await paced('/a')).status, 429);
  assert.equal(paced.pausedUntilMs, 5000);
  await assert.rejects(paced('/b'), { name: 'TimeoutError' });
  assert.equal(paced.waiting, 0);
  assert.deepEqual(log, [['/a', 0]]);
});

test('a wait beyond what timers take is split into timers they take', async () => {
  const time = fakeTime();
  const delays = [];
  const timers = {
    setTimeout: (fn, ms) => {
      delays.push(ms);
      return time.timers.setTimeout(fn, ms);
    },
    clearTimeout: time.timers.clearTimeout,
  };
  const { fetch, log } = fakeFetch(time);
  const month = 30 * 24 * 3600 * 1000; // beyond 2^31 - 1 ms
  const gcra = new Gcra({ burst: 1, emissionIntervalMs: month, clock: time.clock });
  const paced = pacedFetch(fetch, gcra, { clock: time.clock, timers, maxWaitMs: Infinity });
  const done = [paced('/0'), paced('/1')];
  await time.advance(month - 1);
  assert.deepEqual(log, [['/0', 0]], 'not sent early');
  await time.advance(1);
  await Promise.all(done);
  assert.deepEqual(log, [['/0', 0], ['/1', month]]);
  assert.ok(delays.length >= 2 && delays.every((ms) => ms <= 2 ** 31 - 1), String(delays));
});

test('an aborted request gives back exactly its slot on a clock counting from the epoch', async () => {
  const time = fakeTime();
  const epoch = 1.7e12 + 0.123456;
  const clock = () => epoch + time.clock();
  const { fetch } = fakeFetch(time);
  // A slot a third of a millisecond on, which a float at 1.7e12 ms cannot hold.
  const queue = new LeakyBucket({ capacity: 10, intervalMs: 1000 / 3, clock });
  const paced = pacedFetch(fetch, queue, { clock, timers: time.timers });
  const controller = new AbortController();
  const first = paced('/a');
  const second = paced('/b', { signal: controller.signal });
  const before = queue.peek(1).retryAfterMs;
  controller.abort();
  await assert.rejects(second, { name: 'AbortError' });
  assert.ok(queue.peek(1).retryAfterMs < before, 'the slot was given back');
  await time.advance(1000);
  await first;
});

test("a request moved by a pause is refused naming what is left of its maxWaitMs, to the nanosecond", async () => {
  const time = fakeTime();
  await time.advance(0.1);
  let answerA;
  const fetch = (url) =>
    url === '/a'
      ? new Promise((resolve) => {
          answerA = () => resolve(new Response('busy', { status: 429, headers: { 'Retry-After': '2' } }));
        })
      : Promise.resolve(new Response('ok'));
  const events = [];
  const onEvent = ({ type, id, waiting }) => events.push([type, id, waiting]);
  const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers, maxWaitMs: 1000, retries: 0, onEvent });
  const a = paced('/a');
  const b = paced('/b'); // booked at 100.1, its deadline 1000.1
  await time.advance(0.2);
  answerA(); // at 0.3: a pause of 2 s, past what is left of b's 1000 ms (999.8000000000001 as a float)
  await assert.rejects(b, { name: 'TimeoutError', message: 'the pause (2000 ms) would exceed what is left of maxWaitMs (999.8 ms)' });
  assert.equal((await a).status, 429);
  // onEvent hears of every change of the queue: b leaving it too.
  assert.deepEqual(events.slice(-3), [['response', 0, 1], ['rejected', 1, 0], ['paused', undefined, 0]]);
});

test('aborting a request in the middle of the queue moves those behind up: no two share a slot', async () => {
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time);
  const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers });
  const controller = new AbortController();
  const calls = ['/0', '/1', '/2', '/3'].map((url) => paced(url, url === '/1' ? { signal: controller.signal } : {}));
  controller.abort();
  await assert.rejects(calls[1], { name: 'AbortError' });
  const late = paced('/4');
  await time.advance(1000);
  await Promise.all([calls[0], calls[2], calls[3], late]);
  assert.deepEqual(log, [['/0', 0], ['/2', 100], ['/3', 200], ['/4', 300]]);
});

test("aborting a window algorithm's request moves nobody: those behind keep their slots", async () => {
  // Moved up, they were given back (which a window does only in its latest
  // window) and booked again after every other booking: a window further
  // each, and past maxWaitMs for the last.
  for (const make of [(clock) => new FixedWindow({ limit: 1, windowMs: 1000, clock }), (clock) => new SlidingWindowCounter({ limit: 1, windowMs: 1000, clock })]) {
    const time = fakeTime();
    const { fetch, log } = fakeFetch(time);
    const limiter = make(time.clock);
    limiter.tryAcquire(1, 0);
    const slots = [];
    const paced = pacedFetch(fetch, limiter, { clock: time.clock, timers: time.timers, maxWaitMs: 10_000, onEvent: (e) => e.type === 'queued' && slots.push(e.slotMs) });
    const controller = new AbortController();
    const calls = ['/0', '/1', '/2'].map((url) => paced(url, url === '/0' ? { signal: controller.signal } : {}));
    const next = limiter.peek(1, 0).retryAfterMs;
    controller.abort();
    await assert.rejects(calls[0], { name: 'AbortError' });
    assert.equal(limiter.peek(1, 0).retryAfterMs, next, `${limiter.algorithm}: nothing booked again`);
    await time.advance(20_000);
    await Promise.all(calls.slice(1));
    assert.deepEqual(log.map(([, at]) => at), slots.slice(1), `${limiter.algorithm}: each went at its first slot`);
  }
});

test('a booking of another after its requests keeps them in their slots when one aborts: no two units at once', async () => {
  // Moved up, the request behind took a slot that the other booking holds
  // too (two units at once from a burst of one).
  for (const make of [(clock) => new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 1000, clock }), (clock) => new Gcra({ burst: 1, emissionIntervalMs: 1000, clock })]) {
    const time = fakeTime();
    const { fetch, log } = fakeFetch(time);
    const limiter = make(time.clock);
    limiter.tryAcquire(1, 0);
    const paced = pacedFetch(fetch, limiter, { clock: time.clock, timers: time.timers });
    const controller = new AbortController();
    const first = paced('/a', { signal: controller.signal }); // at 1000
    const second = paced('/b'); // at 2000
    const other = limiter.reserve(1, Infinity, 0); // at 3000
    assert.equal(other.atMs, 3000);
    controller.abort();
    await assert.rejects(first, { name: 'AbortError' });
    assert.equal(limiter.tryAcquire(1, 3000).allowed, false, `${limiter.algorithm}: the other's slot is not free`);
    await time.advance(5000);
    await second;
    assert.deepEqual(log, [['/b', 2000]], `${limiter.algorithm}: kept its slot`);
  }
  // With no booking of another after it, those behind still move up.
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time);
  const limiter = new Gcra({ burst: 1, emissionIntervalMs: 1000, clock: time.clock });
  limiter.tryAcquire(1, 0);
  limiter.reserve(1, Infinity, 0).cancel(); // before: no matter
  const paced = pacedFetch(fetch, limiter, { clock: time.clock, timers: time.timers });
  const controller = new AbortController();
  const first = paced('/a', { signal: controller.signal });
  const second = paced('/b');
  controller.abort();
  await assert.rejects(first, { name: 'AbortError' });
  await time.advance(5000);
  await second;
  assert.deepEqual(log, [['/b', 1000]]);
});

test("aborting a token bucket's request moves nobody: none later, and its booking given back only while it is the latest", async () => {
  // Moved up, the requests behind it went later than they were booked (a
  // booking takes the refill up to its slot, which the capacity clips, and
  // gives back only its cost: core/tests/moves_up.rs); given back from the
  // middle of the queue, as a window's, the next booking shared a later
  // request's slot (two units at once from a bucket of one).
  {
    const time = fakeTime();
    const { fetch, log } = fakeFetch(time);
    const bucket = new TokenBucket({ capacity: 3, refillTokens: 3, refillPeriodMs: 100, refill: 'interval', clock: time.clock });
    bucket.tryAcquire(3, 0);
    const costs = { '/0': 1, '/1': 1, '/2': 2, '/3': 2, '/4': 2 };
    const slots = [];
    const paced = pacedFetch(fetch, bucket, { clock: time.clock, timers: time.timers, cost: (url) => costs[url], onEvent: (e) => e.type === 'queued' && slots.push(e.slotMs) });
    const controller = new AbortController();
    const calls = Object.keys(costs).map((url) => paced(url, url === '/0' ? { signal: controller.signal } : {}));
    assert.deepEqual(slots, [100, 100, 200, 300, 400]);
    controller.abort();
    await assert.rejects(calls[0], { name: 'AbortError' });
    await time.advance(1000);
    await Promise.all(calls.slice(1));
    assert.deepEqual(log, [['/1', 100], ['/2', 200], ['/3', 300], ['/4', 400]], 'each at its slot');
  }
  for (const aborted of ['/a', '/b']) {
    const time = fakeTime();
    const { fetch, log } = fakeFetch(time);
    const bucket = new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 1000, clock: time.clock });
    bucket.tryAcquire(1, 0);
    const paced = pacedFetch(fetch, bucket, { clock: time.clock, timers: time.timers });
    const controller = new AbortController();
    const calls = ['/a', '/b'].map((url) => paced(url, url === aborted ? { signal: controller.signal } : {})); // at 1000, 2000
    controller.abort();
    await assert.rejects(calls[aborted === '/a' ? 0 : 1], { name: 'AbortError' });
    // /a's slot goes unused; /b's, the latest, is given back.
    assert.equal(bucket.reserve(1, Infinity, 0).atMs, aborted === '/a' ? 3000 : 2000, `${aborted} aborted`);
    await time.advance(5000);
    assert.deepEqual(log, aborted === '/a' ? [['/b', 2000]] : [['/a', 1000]], `${aborted} aborted`);
  }
});

test("a pause gives a token bucket's queued bookings back newest first, only while each is the latest", async () => {
  // Given back as a window's, /a's booking (before another's reserve) freed
  // a unit at the other's slot (two at once); kept with the rest, as a
  // GCRA's are when another booked after the first, /b's slot went unused.
  const time = fakeTime();
  const { fetch } = fakeFetch(time, (url) => (url === '/x' ? { status: 429, headers: { 'Retry-After': '10' } } : { status: 200 }));
  const bucket = new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 1000, clock: time.clock });
  const paced = pacedFetch(fetch, bucket, { clock: time.clock, timers: time.timers, retries: 0, maxWaitMs: 60_000 });
  const x = paced('/x'); // sent at once
  const a = paced('/a'); // at 1000
  const other = bucket.reserve(1, Infinity, 0); // at 2000
  const b = paced('/b'); // at 3000
  assert.equal(other.atMs, 2000);
  assert.equal((await x).status, 429);
  assert.equal(paced.pausedUntilMs, 10_000);
  assert.equal(bucket.peek(1, 2000).allowed, false, "the other's slot is not free");
  assert.equal(bucket.peek(1, 3000).allowed, true, "/b's slot, the latest, was given back");
  await time.advance(20_000);
  assert.deepEqual([(await a).status, (await b).status], [200, 200]);
});

test("a pause books its requests when it ends, not ahead: another's call meanwhile is decided at its own time", async () => {
  // Booked at the pause's end with that time as `now`, a request moved the
  // limiter's clock 10 s ahead, where the bucket was whole again: a call of
  // another at 100 ms was decided there, and 9 units went within 100 ms
  // from a bucket of 5.
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time, (url) => (url === '/a' ? { status: 429, headers: { 'Retry-After': '10' } } : { status: 200 }));
  const limiter = new TokenBucket({ capacity: 5, refillTokens: 1, refillPeriodMs: 1000, clock: time.clock });
  const events = [];
  const paced = pacedFetch(fetch, limiter, { clock: time.clock, timers: time.timers, retries: 0, onEvent: (e) => events.push(e) });
  assert.equal(limiter.tryAcquire(4, 0).allowed, true);
  assert.equal((await paced('/a')).status, 429);
  assert.equal(paced.pausedUntilMs, 10_000);
  await time.advance(100);
  const b = paced('/b');
  assert.deepEqual(events.filter((e) => e.type === 'queued').map((e) => [e.id, e.slotMs]), [[0, 0], [1, 10_000]], 'queued for the pause end');
  assert.equal(limiter.tryAcquire(4, 100).allowed, false, 'the bucket holds 0.1 unit at 100 ms');
  await time.advance(10_000);
  assert.equal((await b).status, 200);
  assert.deepEqual(log, [['/a', 0], ['/b', 10_000]]);
  // Booked at 10 s, when the bucket held 5.1 units: 4 remain.
  assert.equal(limiter.peek(4, 10_100).allowed, true);
  assert.equal(limiter.peek(5, 10_100).allowed, false);
});

test('a timer firing late past a deadline sends what is free at once, never throws', async () => {
  // The booking after a pause, or after an abort, took what was left of
  // maxWaitMs, negative once the timer was late: the limiter threw a RangeError.
  const late = (time, by) => ({ setTimeout: (fn, ms) => time.timers.setTimeout(fn, ms + by), clearTimeout: (id) => time.timers.clearTimeout(id) });
  {
    const time = fakeTime();
    const { fetch, log } = fakeFetch(time, (url) => (url === '/a' ? { status: 429, headers: { 'Retry-After': '3' } } : { status: 200 }));
    const limiter = new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 1000, clock: time.clock });
    const paced = pacedFetch(fetch, limiter, { clock: time.clock, timers: late(time, 0.5), maxWaitMs: 3000, retries: 0 });
    const a = paced('/a');
    const b = paced('/b'); // its deadline 3000, the pause's end
    await time.advance(4000);
    assert.deepEqual([(await a).status, (await b).status], [429, 200]);
    assert.deepEqual(log, [['/a', 0], ['/b', 3000.5]]);
  }
  {
    const time = fakeTime();
    const { fetch, log } = fakeFetch(time);
    const limiter = new Gcra({ burst: 1, emissionIntervalMs: 100, clock: time.clock });
    const paced = pacedFetch(fetch, limiter, { clock: time.clock, timers: late(time, 150), maxWaitMs: 200 });
    const controller = new AbortController();
    const calls = [paced('/a'), paced('/b', { signal: controller.signal }), paced('/c')]; // at 0, 100, 200
    await time.advance(220);
    controller.abort();
    await assert.rejects(calls[1], { name: 'AbortError' });
    await time.advance(1000);
    await Promise.all([calls[0], calls[2]]);
    assert.deepEqual(log.map(([url]) => url), ['/a', '/c']);
  }
});

test('a booking given back as too far ahead still counts as its own: an abort after it moves those behind up', async () => {
  // Counted by the limiter and not by pacedFetch, it read as another's
  // booking after every request queued before it, which then never moved up.
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time);
  const DAY = 86_400_000;
  // A GCRA: a token bucket's requests never move up (see below).
  const limiter = new Gcra({ burst: 1000, emissionIntervalMs: DAY, clock: time.clock });
  limiter.tryAcquire(1000, 0);
  const paced = pacedFetch(fetch, limiter, { clock: time.clock, timers: time.timers, cost: (url) => (url === '/huge' ? 1000 : 1) });
  const controller = new AbortController();
  const a = paced('/a', { signal: controller.signal }); // at 1 day
  const b = paced('/b'); // at 2 days
  await assert.rejects(paced('/huge'), { name: 'RangeError', message: /books \d+ ms ahead/ }); // 1,002 days
  controller.abort();
  await assert.rejects(a, { name: 'AbortError' });
  await time.advance(3 * DAY);
  await b;
  assert.deepEqual(log, [['/b', DAY]]);
});

test("a Request's own signal aborts it while it waits", async () => {
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time);
  const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers });
  const first = paced('http://x/0');
  const controller = new AbortController();
  const second = paced(new Request('http://x/1', { signal: controller.signal }));
  assert.equal(paced.waiting, 1);
  controller.abort();
  await assert.rejects(second, { name: 'AbortError' });
  assert.equal(paced.waiting, 0);
  await time.advance(1000);
  await first;
  assert.deepEqual(log.length, 1, 'the aborted request never left');
});

test('a request left waiting under fake timers removed since strands nobody behind it', async () => {
  // Default clock and timers: the timer armed under the fake setTimeout
  // never fires, and a later call found a timer armed for the same slot.
  const log = [];
  const fetch = async (url) => {
    log.push(url);
    return new Response('ok');
  };
  const paced = pacedFetch(fetch, Gcra.perPeriod({ burst: 1, tokens: 20, periodMs: 1000 }));
  const first = paced('/0');
  const real = { setTimeout: globalThis.setTimeout, clearTimeout: globalThis.clearTimeout };
  globalThis.setTimeout = () => 0;
  globalThis.clearTimeout = () => {};
  const second = paced('/1');
  Object.assign(globalThis, real);
  const third = paced('/2');
  let timeout;
  const stranded = new Promise((_, reject) => {
    timeout = setTimeout(() => reject(new Error(`stranded: sent ${log}`)), 3000);
  });
  await Promise.race([Promise.all([first, second, third]), stranded]);
  clearTimeout(timeout);
  assert.deepEqual(log, ['/0', '/1', '/2']);
});

test("init's signal: null detaches a Request from its own signal, as fetch does", async () => {
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time);
  const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers });
  const first = paced('http://x/0');
  const controller = new AbortController();
  const second = paced(new Request('http://x/1', { signal: controller.signal }), { signal: null });
  controller.abort();
  await time.advance(1000);
  await Promise.all([first, second]);
  assert.deepEqual(log.length, 2, 'the request no longer follows its own signal');
});

test('a retry sends a body again; a stream body, or a POST answered 503, is not sent twice', async () => {
  const time = fakeTime();
  const bodies = [];
  const statuses = { '/limited': 429, '/busy': 503, '/stream': 429 };
  const fetch = async (input, init) => {
    const request = new Request(input, init);
    bodies.push([new URL(request.url).pathname, await request.text()]);
    const count = bodies.filter(([path]) => path === new URL(request.url).pathname).length;
    const status = count === 1 ? (statuses[new URL(request.url).pathname] ?? 200) : 200;
    return new Response('', { status, headers: status === 200 ? {} : { 'Retry-After': '1' } });
  };
  const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers });
  const post = (body) => ({ method: 'POST', body, duplex: 'half' });
  const calls = [
    paced(new Request('http://x/limited', post('once'))),
    paced('http://x/busy', post('twice?')),
    paced('http://x/stream', post(new Blob(['stream']).stream())),
  ];
  await time.advance(10_000);
  const statusesSeen = (await Promise.all(calls)).map((r) => r.status);
  assert.deepEqual(statusesSeen, [200, 503, 429]);
  assert.deepEqual(
    bodies.map(([, body]) => body),
    ['once', 'once', 'twice?', 'stream'],
    'the 429 of a Request with a body is retried first, with the same body; the 503 POST and the stream are not',
  );
});

test('a fetch-like function whose answer is no Response rejects its call', async () => {
  const time = fakeTime();
  const paced = pacedFetch(async () => ({ data: 1 }), tenPerSecond(time.clock), { clock: time.clock, timers: time.timers });
  await assert.rejects(paced('/a'), TypeError);
  const events = [];
  const throwing = pacedFetch(async () => new Response(''), tenPerSecond(time.clock), {
    clock: time.clock,
    timers: time.timers,
    onEvent: (e) => {
      events.push(e.type);
      if (e.type === 'queued') throw new Error('listener');
    },
  });
  const reported = [];
  const saved = globalThis.reportError;
  globalThis.reportError = (error) => reported.push(error.message);
  try {
    const calls = [throwing('/0'), throwing('/1')];
    await time.advance(1000);
    assert.deepEqual((await Promise.all(calls)).map((r) => r.status), [200, 200], 'a throwing onEvent stops nothing');
    assert.deepEqual(reported, ['listener', 'listener']);
  } finally {
    globalThis.reportError = saved;
  }
});

test('maxWaitMs still bounds a queued request when a server pause moves it', async () => {
  const time = fakeTime();
  const { fetch } = fakeFetch(time, (url, count) =>
    url === '/a' && count === 1 ? { status: 429, headers: { 'Retry-After': '2' } } : { status: 200 },
  );
  const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers, maxWaitMs: 500 });
  const a = paced('/a');
  const b = assert.rejects(paced('/b'), { name: 'TimeoutError' });
  await time.advance(5000);
  assert.equal((await a).status, 200, 'the retried request waits for the pause (maxRetryAfterMs bounds it)');
  await b;
});

test('bad arguments and misspelt options throw with a code, naming them', () => {
  const time = fakeTime();
  const gcra = tenPerSecond(time.clock);
  assert.throws(() => pacedFetch(null, gcra), { name: 'TypeError', code: 'invalid_type', message: '`fetch` must be a function' });
  assert.throws(() => pacedFetch(fetch, {}), { name: 'TypeError', code: 'invalid_type', message: '`limiter` must be a limiter' });
  // A keyed limiter's or a policy's reserve takes a key or a request first.
  for (const other of [new KeyedLimiter(gcra), Policy.fromRates('10/second')]) {
    assert.throws(() => pacedFetch(fetch, other), { name: 'TypeError', code: 'invalid_type', message: /^`limiter` must be an in-process limiter/ });
  }
  assert.throws(() => pacedFetch(fetch, gcra, { maxWait: 5 }), {
    name: 'TypeError',
    code: 'invalid_type',
    message: /^`maxWait` is not an option of pacedFetch, which takes cost, maxWaitMs, /,
  });
  assert.throws(() => pacedFetch(fetch, gcra, { maxWaitMs: -1 }), { name: 'RangeError', code: 'invalid_value', message: '`maxWaitMs` must be a number >= 0, not -1' });
});

test('a Proxy of a limiter, or an object inheriting from one, is refused naming `limiter`; a limiter of the other build, or of another kind, paces', async () => {
  // Taken for a limiter by its methods, each refused when made with the
  // limiter's own error, "`this` must be a Limiter", naming no argument.
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time);
  const options = { clock: time.clock, timers: time.timers };
  const gcra = tenPerSecond(time.clock);
  const windowed = new FixedWindow({ limit: 1, windowMs: 100, clock: time.clock });
  for (const [what, wrapped] of [['a Proxy', new Proxy(gcra, {})], ['a Proxy of a window', new Proxy(windowed, {})], ['an heir', Object.create(gcra)]]) {
    assert.throws(() => pacedFetch(fetch, wrapped, options), (error) => {
      assert.equal(error.name, 'TypeError', what);
      assert.equal(error.code, 'invalid_type', what);
      assert.match(error.message, /^`limiter` must be a limiter itself, not a Proxy of one /, what);
      assert.equal(error.cause?.message, '`this` must be a Limiter', what);
      return true;
    });
  }
  assert.equal(gcra.reserve(1, Infinity, 0).atMs, 0, 'nothing booked');
  // pacedFetch is shared by the builds, each with classes of its own: the
  // other build's limiter paces, and a Proxy of it is refused alike.
  const other = require(process.env.RATEKEEPER_IMPL === 'wasm' ? '../../bindings-node/index.js' : '../../bindings-wasm/node.cjs');
  assert.notEqual(other.Gcra, Gcra);
  const foreign = other.Gcra.perPeriod({ burst: 1, tokens: 10, periodMs: 1000, clock: time.clock });
  assert.throws(() => pacedFetch(fetch, new Proxy(foreign, {}), options), { name: 'TypeError', code: 'invalid_type', message: /^`limiter` must be a limiter itself/ });
  // A limiter of another kind (here one forwarding to a ratekeeper limiter) is taken, as documented.
  const forwarding = { reserve: (...args) => foreign.reserve(...args) };
  for (const limiter of [foreign, forwarding]) {
    log.length = 0;
    const start = time.clock();
    const paced = pacedFetch(fetch, limiter, options);
    const done = [paced('/a'), paced('/b')];
    await time.advance(1000);
    await Promise.all(done);
    assert.deepEqual(log.map(([, at]) => at - start), [0, 100]);
  }
});

test('options of the wrong type throw a TypeError naming them when pacedFetch is made, not at each call', () => {
  const time = fakeTime();
  const gcra = tenPerSecond(time.clock);
  // Each was taken, and then every call rejected with the engine's uncoded
  // TypeError (`clock is not a function`), or an onEvent that is none was
  // reported on every event; a count of another type was a RangeError
  // reading `not 1` for the string '1'.
  const refused = [
    [{ clock: 5 }, '`clock` must be a function'],
    [{ wallClock: 'now' }, '`wallClock` must be a function'],
    [{ onEvent: 5 }, '`onEvent` must be a function'],
    [{ timers: {} }, '`timers` must be an object with the functions setTimeout and clearTimeout'],
    [{ timers: { setTimeout } }, '`timers` must be an object with the functions setTimeout and clearTimeout'],
    [{ maxWaitMs: '1' }, '`maxWaitMs` must be a number, not string'],
    [{ retries: 1n }, '`retries` must be a number, not bigint'],
    [[], '`options` must be an object'],
  ];
  for (const [options, message] of refused) {
    assert.throws(() => pacedFetch(fetch, gcra, options), { name: 'TypeError', code: 'invalid_type', message }, message);
  }
});

test('an option given as null takes its default, as undefined does, as every option of the package', async () => {
  // Each was a TypeError (`cost` must be a number or a function, `clock`
  // must be a function...), where the limiters and the server helpers take
  // null for any option's default: a `number | null` had to be rewritten.
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time);
  const gcra = tenPerSecond(time.clock);
  const options = { cost: null, maxWaitMs: null, maxWaiting: null, retries: null, maxRetryAfterMs: null, clock: null, wallClock: null, timers: null, onEvent: null };
  for (const [name, value] of Object.entries(options)) {
    assert.equal(typeof pacedFetch(fetch, gcra, { [name]: value }), 'function', name);
  }
  // All at once, the timers given: the defaults pace as left out (cost 1,
  // the limiter's own clock, no bound on the wait or the queue).
  const paced = pacedFetch(fetch, gcra, { ...options, timers: time.timers });
  const done = ['/0', '/1', '/2'].map((url) => paced(url));
  assert.equal(paced.waiting, 2, 'the first left at once');
  await time.advance(1000);
  await Promise.all(done);
  assert.deepEqual(log, [['/0', 0], ['/1', 100], ['/2', 200]]);
  // A 429 retried once, after the pause it asks (retries and maxRetryAfterMs by default).
  const retried = fakeFetch(time, (url, count) => (count === 1 ? { status: 429, headers: { 'Retry-After': '1' } } : { status: 200 }));
  const again = pacedFetch(retried.fetch, tenPerSecond(time.clock), { ...options, timers: time.timers });
  const answer = again('/r');
  await time.advance(2000);
  assert.equal((await answer).status, 200);
  assert.deepEqual(retried.log.map(([url, at]) => [url, at - retried.log[0][1]]), [['/r', 0], ['/r', 1000]]);
  // Other wrong types keep their errors.
  assert.throws(() => pacedFetch(fetch, gcra, { cost: '1' }), { name: 'TypeError', code: 'invalid_type', message: '`cost` must be a number or a function' });
  assert.throws(() => pacedFetch(fetch, gcra, { timers: 5 }), { name: 'TypeError', code: 'invalid_type', message: /^`timers` must be an object/ });
});

test('by default the queue reads the limiter\'s own clock: a calendar limiter\'s Date.now, a clock given to the limiter', async () => {
  // pacedFetch read performance.now() whatever the limiter read. A
  // calendar limiter counts Unix time: booked at performance.now(), its
  // requests were counted in the windows of January 1970 (a day's window
  // ran from the process's start, never from midnight UTC), and a limiter
  // on a clock of its own paced by another clock than its own.
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time);
  const midnight = Date.UTC(2026, 0, 2);
  const realNow = Date.now;
  try {
    for (const Window of [FixedWindow, SlidingWindowCounter]) {
      log.length = 0;
      const start = time.clock();
      // 100 ms before midnight UTC; the calendar limiter's default clock reads Date.now at each call.
      Date.now = () => midnight - 100 + (time.clock() - start);
      const daily = new Window({ limit: 1, calendar: 'day' });
      // Where the limiter itself, asked at that instant, books the second unit: in the next UTC day.
      const twin = new Window({ limit: 1, calendar: 'day' });
      twin.tryAcquire(1, midnight - 100);
      const next = twin.reserve(1, Infinity, midnight - 100).atMs;
      assert.ok(next >= midnight, `${Window.name}: ${next} in a later day`);
      const slots = [];
      const paced = pacedFetch(fetch, daily, { timers: time.timers, onEvent: (event) => event.type === 'queued' && slots.push(event.slotMs) });
      const done = [paced('/a'), paced('/b')];
      assert.deepEqual(slots, [midnight - 100, next], Window.name);
      await time.advance(next - (midnight - 100));
      await Promise.all(done);
      assert.deepEqual(log.map(([url, at]) => [url, at - start]), [['/a', 0], ['/b', next - (midnight - 100)]], Window.name);
      // Counted with the limiter's own calls: its tryAcquire, now, finds the unit taken.
      assert.equal(daily.tryAcquire().allowed, false, Window.name);
    }
  } finally {
    Date.now = realNow;
  }
  // A limiter on a clock of its own (a test's, here 5 s ahead of pacedFetch's would-be clock).
  log.length = 0;
  const own = () => 5000 + time.clock();
  const paced = pacedFetch(fetch, Gcra.perPeriod({ burst: 1, tokens: 10, periodMs: 1000, clock: own }), { timers: time.timers });
  const slots = [];
  const events = pacedFetch(fetch, Gcra.perPeriod({ burst: 1, tokens: 10, periodMs: 1000, clock: own }), { timers: time.timers, onEvent: (e) => e.type === 'queued' && slots.push(e.slotMs) });
  const done = [paced('/a'), paced('/b'), events('/c'), events('/d')];
  assert.deepEqual(slots, [own(), own() + 100]);
  await time.advance(1000);
  await Promise.all(done);
  assert.deepEqual(log.map(([url]) => url), ['/a', '/c', '/b', '/d']);
  // A clock given to pacedFetch still wins: the limiter's then must match it.
  const epoch = () => 1.7e12 + time.clock();
  const onEpoch = Gcra.perPeriod({ burst: 1, tokens: 10, periodMs: 1000, clock: epoch });
  onEpoch.tryAcquire();
  await assert.rejects(pacedFetch(fetch, onEpoch, { clock: time.clock, timers: time.timers })('/e'), { name: 'RangeError', code: 'invalid_value', message: /reads another clock/ });
});

test('a fetch that resolves to no Response rejects its call, naming `fetch`', async () => {
  const time = fakeTime();
  for (const answer of [undefined, null, 'ok', { status: 200 }]) {
    const paced = pacedFetch(async () => answer, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers });
    await assert.rejects(paced('/a'), { name: 'TypeError', code: 'invalid_type', message: /^`fetch` must resolve to a Response, not / });
  }
});

test('a limiter on another clock than pacedFetch rejects each request at once, booking nothing', async () => {
  // The limiter reads the epoch (as a worker's may); pacedFetch, performance.now().
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time);
  const epoch = () => 1.7e12 + time.clock();
  const gcra = Gcra.perPeriod({ burst: 1, tokens: 10, periodMs: 1000, clock: epoch });
  gcra.tryAcquire();
  const paced = pacedFetch(fetch, gcra, { clock: time.clock, timers: time.timers });
  await assert.rejects(paced('/a'), { name: 'RangeError', code: 'invalid_value', message: /reads another clock than pacedFetch's `clock`/ });
  assert.equal(paced.waiting, 0);
  assert.deepEqual(log, []);
  assert.equal(gcra.peek(1, epoch() + 100).allowed, true, 'the booking was given back');
});

test('retries is a whole number, maxWaiting a whole number or Infinity', () => {
  const time = fakeTime();
  assert.throws(() => pacedFetch(fetch, tenPerSecond(time.clock), { retries: 1.5 }), { name: 'RangeError', message: /retries/ });
  assert.throws(() => pacedFetch(fetch, tenPerSecond(time.clock), { retries: Infinity }), { name: 'RangeError', message: /retries/ });
  for (const maxWaiting of [-1, 0.5, NaN]) {
    assert.throws(() => pacedFetch(fetch, tenPerSecond(time.clock), { maxWaiting }), { name: 'RangeError', message: /maxWaiting/ });
  }
  // A value of another type is a TypeError, as the limiters' own.
  assert.throws(() => pacedFetch(fetch, tenPerSecond(time.clock), { maxWaiting: '3' }), { name: 'TypeError', code: 'invalid_type', message: '`maxWaiting` must be a number, not string' });
  pacedFetch(fetch, tenPerSecond(time.clock), { maxWaiting: Infinity });
});

test('maxWaiting bounds the queue: a call beyond rejects at once, booking nothing', async () => {
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time);
  const gcra = tenPerSecond(time.clock);
  const paced = pacedFetch(fetch, gcra, { clock: time.clock, timers: time.timers, maxWaiting: 2 });
  const ok = [paced('/0'), paced('/1'), paced('/2')];
  assert.equal(paced.waiting, 2, 'the first left at once, two wait');
  await time.advance(30);
  await assert.rejects(paced('/3'), rateLimited({ retryAfterMs: 70, message: /2 requests are waiting/ }));
  assert.equal(gcra.peek(1).retryAfterMs, 270, 'the refused call booked nothing: the next slot is still 300');
  await time.advance(70);
  assert.equal(paced.waiting, 1, 'the head left: room for one');
  ok.push(paced('/4'));
  await time.advance(1000);
  await Promise.all(ok);
  assert.deepEqual(log, [['/0', 0], ['/1', 100], ['/2', 200], ['/4', 300]]);

  // maxWaiting 0: a request goes when it is due at once, else is refused.
  const limiter = tenPerSecond(time.clock);
  const none = pacedFetch(fetch, limiter, { clock: time.clock, timers: time.timers, maxWaiting: 0 });
  const first = none('/a');
  assert.equal(none.waiting, 0, 'due now: sent without queueing');
  await assert.rejects(none('/b'), rateLimited({ retryAfterMs: 100 }));
  assert.equal(limiter.peek(1).retryAfterMs, 100, 'the refused booking was given back');
  await time.advance(100);
  await Promise.all([first, none('/c')]);
  assert.deepEqual(log.slice(-2), [['/a', 1100], ['/c', 1200]]);
});

test('in Node, which has no reportError, a throwing onEvent is a process warning, and the process goes on', async () => {
  const time = fakeTime();
  const saved = globalThis.reportError;
  delete globalThis.reportError;
  const warnings = [];
  const onWarning = (warning) => warnings.push(warning.message);
  process.on('warning', onWarning);
  try {
    const paced = pacedFetch(async () => new Response('ok'), tenPerSecond(time.clock), {
      clock: time.clock,
      timers: time.timers,
      onEvent: (e) => {
        if (e.type === 'sent') throw new Error('logger bug');
        if (e.type === 'response') throw 7; // not an Error: emitWarning refuses those
      },
    });
    const calls = [paced('/a'), paced('/b')];
    await time.advance(1000);
    assert.deepEqual((await Promise.all(calls)).map((r) => r.status), [200, 200]);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(warnings.sort(), ['7', '7', 'logger bug', 'logger bug']);
  } finally {
    process.off('warning', onWarning);
    if (saved !== undefined) globalThis.reportError = saved;
  }
});

test('a signal that is not an AbortSignal rejects the call with a TypeError, booking nothing', async () => {
  const time = fakeTime();
  const limiter = tenPerSecond(time.clock);
  const paced = pacedFetch(async () => new Response('ok'), limiter, { clock: time.clock, timers: time.timers });
  await assert.rejects(paced('/a', { signal: { aborted: false, addEventListener() {} } }), TypeError);
  assert.equal(limiter.peek(1).allowed, true, 'nothing was booked');
});

test('a huge Retry-After with maxRetryAfterMs Infinity pauses a year at most, and strands nobody', async () => {
  const time = fakeTime();
  const { fetch } = fakeFetch(time, (url) => (url === '/a' ? { status: 429, headers: { 'Retry-After': '100000000000' } } : { status: 200 }));
  const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers, maxRetryAfterMs: Infinity });
  const a = paced('/a');
  const b = paced('/b');
  await time.advance(0);
  assert.equal((await a).status, 429, 'beyond a year: the answer, not a retry');
  assert.equal(paced.pausedUntilMs, 365 * 24 * 3600 * 1000, 'paused for a year');
  const settled = await Promise.race([b.then((r) => r.status), new Promise((resolve) => setImmediate(() => resolve('pending')))]);
  assert.equal(settled, 'pending', 'b waits for the end of the pause');
  await time.advance(365 * 24 * 3600 * 1000);
  assert.equal((await b).status, 200);
});

test('messages show milliseconds to the nanosecond, not a float sum', async () => {
  const time = fakeTime();
  await time.advance(0.1);
  const { fetch } = fakeFetch(time);
  const gcra = new Gcra({ burst: 1, emissionIntervalMs: 0.2, clock: time.clock });
  const paced = pacedFetch(fetch, gcra, { clock: time.clock, timers: time.timers, maxWaiting: 0 });
  const first = paced('/a');
  // The slot, 0.1 + 0.2, is 0.30000000000000004 ms as a float.
  await assert.rejects(paced('/b'), rateLimited({ message: 'the request would wait 0.2 ms, and maxWaiting is 0' }));
  await time.advance(1);
  await first;
});

/** What `promise` settled to so far: ['ok', value], ['rejected', error] or ['pending']. */
async function settled(promise) {
  const pending = new Promise((resolve) => setImmediate(() => resolve(['pending'])));
  return Promise.race([promise.then((value) => ['ok', value], (error) => ['rejected', error]), pending]);
}

test('a clock or wallClock that fails or reads NaN fails the requests it concerns: nothing stalls, nothing throws from the timer', async () => {
  // A wallClock reading NaN made an HTTP-date Retry-After NaN, and the pause
  // ended at NaN: nothing was ever sent again, behind a timer armed again and
  // again (every millisecond on real timers). A clock failing in the timer
  // threw from it (a Node process ended) and stranded the queue; one reading
  // NaN when a pause began paused it for ever.
  const date = 'Wed, 01 Jan 2025 12:00:01 GMT';
  {
    const time = fakeTime();
    const { fetch, log } = fakeFetch(time, (url) => (url === '/a' ? { status: 429, headers: { 'Retry-After': date } } : { status: 200 }));
    const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers, wallClock: () => NaN });
    const a = assert.rejects(paced('/a'), { name: 'RangeError', code: 'invalid_value', message: '`wallClock` must return a finite number of milliseconds, not NaN' });
    const b = paced('/b');
    await time.advance(1000);
    await a;
    assert.equal(paced.pausedUntilMs, -Infinity, 'no pause');
    assert.equal((await b).status, 200);
    assert.deepEqual(log, [['/a', 0], ['/b', 100]]);
    assert.equal(time.pending, 0, 'no timer left armed');
  }
  for (const [broken, error] of [
    [() => { throw new Error('no clock'); }, { message: 'no clock' }],
    [() => NaN, { name: 'RangeError', code: 'invalid_value', message: '`clock` must return a finite number of milliseconds, not NaN' }],
  ]) {
    const time = fakeTime();
    let failing = false;
    const clock = () => (failing ? broken() : time.clock());
    const { fetch, log } = fakeFetch(time);
    const gcra = tenPerSecond(time.clock);
    const paced = pacedFetch(fetch, gcra, { clock, timers: time.timers });
    const a = paced('/a');
    const failed = [paced('/b'), paced('/c')].map((call) => assert.rejects(call, error));
    failing = true;
    await time.advance(100); // the timer reads the clock
    assert.deepEqual((await settled(Promise.all(failed)))[0], 'ok', 'both rejected');
    await a;
    assert.equal(paced.waiting, 0);
    assert.equal(time.pending, 0, 'no timer left armed');
    assert.equal(gcra.peek(1, 100).allowed, true, 'their bookings were given back');
    // A clock that reads again takes calls again.
    failing = false;
    assert.equal((await paced('/d')).status, 200);
    assert.deepEqual(log, [['/a', 0], ['/d', 100]]);
  }
  {
    // A clock failing when a request aborts: the listener threw (Node ended
    // the process). It leaves, and the timer fails those behind.
    const time = fakeTime();
    let failing = false;
    const clock = () => (failing ? assert.fail('no clock') : time.clock());
    const paced = pacedFetch(fakeFetch(time).fetch, tenPerSecond(time.clock), { clock, timers: time.timers });
    const controller = new AbortController();
    const a = paced('/a');
    const b = assert.rejects(paced('/b', { signal: controller.signal }), { name: 'AbortError' });
    const c = assert.rejects(paced('/c'), { message: 'no clock' });
    failing = true;
    controller.abort();
    await b;
    await time.advance(200);
    await Promise.all([a, c]);
    assert.equal(time.pending, 0);
  }
  {
    // NaN when an answer pauses the queue: that call fails, the queue goes on.
    const time = fakeTime();
    let nan = false;
    const clock = () => (nan ? NaN : time.clock());
    let answer;
    const { fetch, log } = fakeFetch(time);
    const held = (url) => (url === '/a' ? new Promise((resolve) => (answer = resolve)) : fetch(url));
    const paced = pacedFetch(held, tenPerSecond(time.clock), { clock, timers: time.timers, retries: 0 });
    const a = assert.rejects(paced('/a'), { name: 'RangeError', message: /^`clock` must return a finite number/ });
    const b = paced('/b');
    nan = true;
    answer(new Response('', { status: 429, headers: { 'Retry-After': '1' } }));
    await a;
    nan = false;
    assert.equal(paced.pausedUntilMs, -Infinity);
    await time.advance(1000);
    assert.equal((await settled(b))[0], 'ok');
    assert.deepEqual(log, [['/b', 100]]);
  }
});

test('requests sent again after 429s go again in call order', async () => {
  // Each went to the head of the queue: the second 429 to arrive put its
  // request ahead of the first's, and /b went before /a.
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time, (url, count) => (count === 1 && url !== '/c' ? { status: 429, headers: { 'Retry-After': '1' } } : { status: 200 }));
  const bucket = new TokenBucket({ capacity: 2, refillTokens: 1, refillPeriodMs: 100, clock: time.clock });
  const paced = pacedFetch(fetch, bucket, { clock: time.clock, timers: time.timers });
  const calls = [paced('/a'), paced('/b'), paced('/c')];
  await time.advance(5000);
  assert.deepEqual((await Promise.all(calls)).map((r) => r.status), [200, 200, 200]);
  assert.deepEqual(log, [['/a', 0], ['/b', 0], ['/a', 1000], ['/b', 1000], ['/c', 1100]]);
});

test('one signal aborting many queued requests books none of them again', async () => {
  // Each abort listener gave back and booked again every request behind
  // its own, those aborted too included: quadratic in the queue (4,000
  // requests on one signal: 5.9 s of work, the page frozen meanwhile).
  const time = fakeTime();
  const gcra = tenPerSecond(time.clock);
  let reserves = 0;
  // A limiter of another kind (taken for a bucket): its reserve calls counted.
  const counted = { reserve: (...args) => (reserves++, gcra.reserve(...args)), refund: (...args) => gcra.refund(...args) };
  const events = [];
  const paced = pacedFetch(fakeFetch(time).fetch, counted, { clock: time.clock, timers: time.timers, onEvent: (e) => e.type === 'aborted' && events.push(e.id) });
  const first = paced('/first');
  const controller = new AbortController();
  const n = 300;
  const calls = Array.from({ length: n }, (_, i) => assert.rejects(paced(`/${i}`, { signal: controller.signal }), { name: 'AbortError' }));
  const last = paced('/last');
  assert.equal(reserves, n + 2);
  controller.abort();
  await Promise.all(calls);
  assert.equal(reserves, n + 3, 'only /last booked again, into the slot after /first');
  assert.deepEqual(events.sort((a, b) => a - b), Array.from({ length: n }, (_, i) => i + 1), 'each aborted once');
  assert.equal(paced.waiting, 1);
  await time.advance(100);
  assert.deepEqual([(await first).status, (await last).status], [200, 200]);
  assert.equal(time.pending, 0);
});

test('one signal shared by many queued requests is listened to once, and let go when the last leaves the queue', async () => {
  // A listener each: Node warned (MaxListenersExceededWarning) past ten.
  const time = fakeTime();
  const paced = pacedFetch(fakeFetch(time).fetch, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers });
  const { controller, signal, live, most } = countingSignal();
  const sent = Array.from({ length: 20 }, (_, i) => paced(`/${i}`, { signal }));
  assert.equal(most(), 1, 'one listener for 20 requests');
  await time.advance(2000);
  assert.deepEqual(new Set((await Promise.all(sent)).map((r) => r.status)), new Set([200]));
  assert.equal(live.size, 0, 'let go once every request went');
  const ahead = paced('/ahead'); // goes at once: those behind it wait
  const aborted = Array.from({ length: 20 }, (_, i) => paced(`/x${i}`, { signal }).catch((error) => error.name));
  controller.abort();
  assert.deepEqual(new Set(await Promise.all(aborted)), new Set(['AbortError']));
  assert.equal((await ahead).status, 200);
  assert.equal(most(), 1);
  assert.equal(live.size, 0);
  assert.equal(paced.waiting, 0);
});

test('a clock that calls or aborts requests of its own queue as the timer is armed leaves no timer once every request settled', async () => {
  // Arming reads the clock: what the clock did then (a call, an abort)
  // armed the timer for the queue it left, and the arming under way armed
  // its own over it, losing one timer or keeping one for a request gone.
  // Either kept the process alive, up to its slot, with nothing queued.
  for (const inClock of ['call', 'abort']) {
    const time = fakeTime();
    let hook = null;
    const clock = () => {
      const run = hook;
      hook = null;
      run?.();
      return time.clock();
    };
    const { fetch, log } = fakeFetch(time);
    // A token bucket: an aborted request that is not the latest moves
    // nobody, and the timer is armed again for the next one, reading the
    // clock first thing.
    const bucket = new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 100, clock });
    const paced = pacedFetch(fetch, bucket, { clock, timers: time.timers });
    bucket.tryAcquire();
    const [a, b, c] = [new AbortController(), new AbortController(), new AbortController()];
    const calls = [paced('/a', { signal: a.signal }), paced('/b', { signal: b.signal })];
    hook = inClock === 'call' ? () => calls.push(paced('/c', { signal: c.signal })) : () => b.abort();
    a.abort();
    b.abort();
    c.abort();
    const reasons = await Promise.all(calls.map((call) => call.then(() => 'sent', (error) => error.name)));
    assert.deepEqual(reasons, inClock === 'call' ? ['AbortError', 'AbortError', 'AbortError'] : ['AbortError', 'AbortError'], inClock);
    assert.equal(paced.waiting, 0, inClock);
    assert.equal(time.pending, 0, `${inClock}: no timer left armed`);
    assert.deepEqual(log, [], inClock);
  }
});

test('a clock failing as a 429 is to be retried rejects the request and lets its signal go', async () => {
  // Listened to again for the retry, the signal kept the request's listener
  // (and the request with it) after the clock's error rejected it: on a
  // signal shared by every request (a server's shutdown), one per failure.
  const time = fakeTime();
  let failing = false;
  const clock = () => {
    if (failing) throw new Error('no clock');
    return time.clock();
  };
  const { fetch } = fakeFetch(time, () => {
    failing = true; // read next by the pause the 429 asks for
    return { status: 429, headers: { 'Retry-After': '1' } };
  });
  const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock, timers: time.timers });
  const { signal, live } = countingSignal();
  const call = assert.rejects(paced('/a', { signal }), { message: 'no clock' });
  await time.advance(10);
  await call;
  assert.equal(live.size, 0, 'the signal is let go');
});

test('a cost that is no whole number is refused when pacedFetch is made; a cost function returning no number rejects the call', async () => {
  // A numeric cost was taken, and every call then rejected with the
  // limiter's error; a function returning undefined (a forgotten `return`)
  // booked 1 for each request, the limiter's default.
  const time = fakeTime();
  const gcra = tenPerSecond(time.clock);
  for (const cost of [-1, NaN, Infinity, 1.5, 2 ** 53]) {
    assert.throws(() => pacedFetch(fetch, gcra, { cost }), { name: 'RangeError', code: 'invalid_value', message: `\`cost\` must be a whole number from 0 to 2^53 - 1, not ${cost}` });
  }
  for (const [returned, shown] of [[undefined, 'undefined'], [null, 'null'], ['2', 'string']]) {
    const paced = pacedFetch(fakeFetch(time).fetch, gcra, { clock: time.clock, timers: time.timers, cost: () => returned });
    await assert.rejects(paced('/a'), { name: 'TypeError', code: 'invalid_type', message: `\`cost\` must return a number, not ${shown}` });
  }
  assert.equal(gcra.peek(1, 0).allowed, true, 'nothing was booked');
  const paced = pacedFetch(fakeFetch(time).fetch, gcra, { clock: time.clock, timers: time.timers, cost: 0 });
  assert.equal((await paced('/free')).status, 200);
});

test('a signal whose removeEventListener throws strands nobody, and throws nothing from the timer', async () => {
  // Sending it, the timer threw (a Node process ended) and /c never went.
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time);
  const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers });
  const listeners = [];
  const signal = {
    aborted: false,
    addEventListener: (type, listener) => listeners.push(listener),
    removeEventListener() {
      throw new Error('cannot remove');
    },
  };
  const calls = [paced('/a'), paced('/b', { signal }), paced('/c')];
  await time.advance(200);
  assert.deepEqual((await Promise.all(calls)).map((r) => r.status), [200, 200, 200]);
  assert.deepEqual(log, [['/a', 0], ['/b', 100], ['/c', 200]]);
  // Its listener, left in place, finds the request gone.
  signal.aborted = true;
  for (const listener of listeners) listener();
  assert.equal(paced.waiting, 0);
});

test("a call made from onEvent as a request leaves the queue goes behind those called before it", async () => {
  // A pause past b's maxWaitMs takes b out ('rejected'), and onEvent heard
  // of it while the queue was being rebuilt: d, called from onEvent, went
  // in ahead of c (called before it, not yet put back), was booked first
  // when the pause ended, and pushed c past its own maxWaitMs.
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time, (url) =>
    url === '/a' ? { status: 200, headers: { 'RateLimit-Remaining': '0', 'RateLimit-Reset': '0.7' } } : { status: 200 },
  );
  const twoPerSecond = Gcra.perPeriod({ burst: 1, tokens: 2, periodMs: 1000, clock: time.clock });
  let answerA;
  const held = (url) => (url === '/a' ? new Promise((resolve) => (answerA = () => resolve(fetch(url)))) : fetch(url));
  // Each call's status, or the name of its error.
  const outcome = (call) => call.then((response) => response.status, (error) => error.name);
  let d;
  const onEvent = ({ type }) => {
    if (type === 'rejected' && d === undefined) d = outcome(paced('/d'));
  };
  const paced = pacedFetch(held, twoPerSecond, { clock: time.clock, timers: time.timers, maxWaitMs: 1000, onEvent });
  const a = outcome(paced('/a')); // sent at 0
  const b = outcome(paced('/b')); // its slot at 500, its deadline 1000
  await time.advance(400);
  const c = outcome(paced('/c')); // its slot at 1000, its deadline 1400
  await time.advance(50);
  answerA(); // at 450: a pause of 700 ms, to 1150: past b's deadline, within c's
  assert.equal(await b, 'TimeoutError');
  assert.ok(d !== undefined, 'onEvent heard of b');
  await time.advance(2000);
  assert.deepEqual([await a, await c, await d], [200, 200, 'TimeoutError'], "c, called before d, goes first when the pause ends; d's slot after it lies past its maxWaitMs");
  assert.deepEqual(log, [['/a', 450], ['/c', 1150]]);
});

test('a signal whose addEventListener throws rejects its call with that error, its booking given back', async () => {
  // Its booking was kept: the call rejected, and /c waited behind a slot
  // nobody took.
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time);
  const gcra = tenPerSecond(time.clock);
  const events = [];
  const paced = pacedFetch(fetch, gcra, { clock: time.clock, timers: time.timers, onEvent: ({ type, id }) => events.push(`${type} ${id}`) });
  const signal = {
    aborted: false,
    addEventListener() {
      throw new Error('cannot listen');
    },
    removeEventListener() {},
  };
  const a = paced('/a');
  await assert.rejects(paced('/b', { signal }), { message: 'cannot listen' });
  assert.equal(paced.waiting, 0);
  const c = paced('/c');
  await time.advance(500);
  assert.deepEqual([(await a).status, (await c).status], [200, 200]);
  assert.deepEqual(log, [['/a', 0], ['/c', 100]], "/b's slot was given back");
  assert.deepEqual(events.filter((event) => event.endsWith(' 1')), [], '/b never queued');
  assert.equal(time.pending, 0);
});

test('a signal whose addEventListener throws when its request is to be retried rejects it, and the queue still pauses', async () => {
  // The call rejected, and the server's Retry-After was dropped with it:
  // /b went at once, into the 429s the server asked to spare it.
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time, (url, count) => (url === '/a' && count === 1 ? { status: 429, headers: { 'Retry-After': '1' } } : { status: 200 }));
  const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers });
  let listens = 0;
  const signal = {
    aborted: false,
    addEventListener() {
      if (++listens > 1) throw new Error('cannot listen again');
    },
    removeEventListener() {},
  };
  const a = assert.rejects(paced('/a', { signal }), { message: 'cannot listen again' });
  const b = paced('/b');
  await time.advance(50); // /a's 429 arrives
  await a;
  assert.equal(paced.pausedUntilMs, 1000);
  await time.advance(2000);
  assert.equal((await b).status, 200);
  assert.deepEqual(log, [['/a', 0], ['/b', 1000]]);
  assert.equal(time.pending, 0);
});

test("a clock failing in the timer tells onEvent 'rejected' for each request it takes out", async () => {
  // They were rejected untold: a display counting queued requests kept
  // them for ever. The event reads the clock too: its atMs is NaN then,
  // where the event was lost (a warning).
  for (const broken of [() => { throw new Error('no clock'); }, () => NaN]) {
    const time = fakeTime();
    let failing = false;
    const clock = () => (failing ? broken() : time.clock());
    const events = [];
    const onEvent = ({ type, id, atMs, waiting }) => events.push([type, id, atMs, waiting]);
    let answer;
    const held = (url) => new Promise((resolve) => (answer = () => resolve(fakeFetch(time).fetch(url))));
    const paced = pacedFetch(held, tenPerSecond(time.clock), { clock, timers: time.timers, onEvent });
    const a = paced('/a');
    const failed = [paced('/b'), paced('/c')].map((call) => assert.rejects(call));
    failing = true;
    await time.advance(100); // the timer reads the clock
    await Promise.all(failed);
    assert.deepEqual(events, [
      ['queued', 0, 0, 1],
      ['sent', 0, 0, 0],
      ['queued', 1, 0, 1],
      ['queued', 2, 0, 2],
      ['rejected', 1, NaN, 0],
      ['rejected', 2, NaN, 0],
    ]);
    failing = false;
    answer();
    assert.equal((await a).status, 200);
  }
});

test("a limiter answering with a Promise is refused with a TypeError naming the method, not read as a decision", async () => {
  // reserve's Promise read as a refusal (it has no `ok`): the call rejected
  // with a RateLimited to "retry in undefined ms". A rejected one also went
  // unhandled (a Node process ends on one).
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time);
  const gcra = tenPerSecond(time.clock);
  const refund = (...args) => gcra.refund(...args);
  const options = { clock: time.clock, timers: time.timers };
  for (const answer of [() => Promise.resolve({ ok: true, atMs: 0, waitMs: 0 }), () => Promise.reject(new Error('store down')), () => ({ then() {} })]) {
    const paced = pacedFetch(fetch, { reserve: answer, refund }, options);
    await assert.rejects(paced('/a'), {
      name: 'TypeError',
      code: 'invalid_type',
      message: '`limiter.reserve` must return a reservation, not a Promise: pacedFetch needs a limiter that decides at once',
    });
    assert.equal(paced.waiting, 0);
  }
  for (const name of ['ratekeeper.movesUp', 'ratekeeper.bookings']) {
    const limiter = { reserve: (...args) => gcra.reserve(...args), refund, [Symbol.for(name)]: async () => 0 };
    assert.throws(() => pacedFetch(fetch, limiter, options), {
      name: 'TypeError',
      code: 'invalid_type',
      message: `\`limiter[Symbol.for('${name}')]\` must return a value, not a Promise: pacedFetch needs a limiter that decides at once`,
    });
  }
  assert.deepEqual(log, [], 'nothing sent');
  assert.equal(time.pending, 0);
});

test('RateLimit fields as structured lists: several policies, strings holding , and ;, unknown parameters, garbage ignored', () => {
  // Cut at every `,` and `;`, strings included: an unknown parameter's
  // string (`note="x;r=1"`) overwrote a policy's r, one holding a `,` cut
  // its item in two, an item's parameters were read as the older draft's
  // dictionary (`remaining=0` beside `r=5`), and a string left open still
  // gave its parameters.
  const pause = (fields) => parseRateLimit(new Headers(fields));
  // Several policies: the longest exhausted one governs; one with some left pauses nothing.
  assert.equal(pause({ RateLimit: '"default";r=50;t=30, "burst";r=0;t=1' }), 1000);
  assert.equal(pause({ RateLimit: '"day";r=0;t=3600,"burst";r=0;t=1' }), 3_600_000);
  assert.equal(pause({ RateLimit: '"default";r=50;t=30, "burst";r=3;t=1' }), null);
  // Whitespace after `;` and around `,`, and the draft's other parameters (pk's bytes hold `=`, qu is a string).
  assert.equal(pause({ RateLimit: '  "a";  r=0;  t=2;pk=:cHJvamVjdC0xMjM=:  ,  "b";r=9;t=9  ' }), 2000);
  assert.equal(pause({ 'RateLimit-Policy': '"a";q=10;qu="requests";w=10;pk=:cHJvamVjdC0xMjM=:', RateLimit: '"a";r=0;t=5' }), 1000);
  // Strings holding `,` and `;`, in names (matched between the two fields) and in unknown parameters.
  assert.equal(pause({ RateLimit: '"a";r=0;t=5;note="x;r=1"' }), 5000);
  assert.equal(pause({ RateLimit: '"a";r=5;t=60;note="x;r=0;y"' }), null);
  assert.equal(pause({ RateLimit: '"a";r=0;note="wait, t=9";t=2' }), 2000);
  assert.equal(pause({ RateLimit: '"a";r=0;t=2;note="say \\"hi\\"; r=1, \\\\"' }), 2000);
  assert.equal(pause({ 'RateLimit-Policy': '"free, tier";q=10;w=10, "b";q=1;w=60', RateLimit: '"free, tier";r=0;t=5' }), 1000);
  assert.equal(pause({ 'RateLimit-Policy': '"a;b";q=10;w=10', RateLimit: '"a;b";r=0;t=5' }), 1000);
  // An item's parameters are no dictionary: only the older draft's own members are.
  assert.equal(pause({ RateLimit: '"a";r=5;t=1;remaining=0;reset=30' }), null);
  assert.equal(pause({ RateLimit: 'limit=10, remaining=0, reset=30' }), 30_000);
  // Garbage: ignored, never thrown on. A string left open runs to the end
  // (a parse error: the whole field is ignored, see below).
  assert.equal(pause({ RateLimit: '"open;r=0;t=5' }), null);
  // Members that are well-formed structured items but no policy's (no `r`,
  // a token `r`, a negative `t`, no `t` nor policy) are ignored one by one.
  assert.equal(pause({ RateLimit: '"a";r=0;t=5, garbage, "b";r=x;t=1, "c";r=0;t=-1, "d";r=0' }), 5000);
  let seed = 38;
  const alphabet = ['"', '\\', ';', ',', '=', ' ', ':', 'r', 't', 'q', 'w', '0', '5', 'a', 'remaining', 'reset'];
  for (let i = 0; i < 2000; i++) {
    let text = '';
    for (let n = 0; n < 12; n++) {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      text += alphabet[seed % alphabet.length];
    }
    const got = pause({ RateLimit: text, 'RateLimit-Policy': text });
    assert.ok(got === null || (Number.isFinite(got) && got >= 0), `${text}: ${got}`);
  }
});

test('a RateLimit or RateLimit-Policy field that breaks structured-field syntax is ignored as a whole (RFC 9651), its well-formed members too', () => {
  // Read member by member, `"a";r=0;t=5, ;;` paused 5 s: RFC 9651 (section
  // 4.2) ignores a field that fails to parse as a whole, and the draft
  // reads both fields as structured Lists.
  const pause = (fields) => parseRateLimit(new Headers(fields));
  const broken = [
    '"a";r=0;t=5, ;;',
    '"a";r=0;t=5, =',
    '"a";r=0;t=5,',
    '"a";r=0;t=5 "b";r=1',
    '"a";r=0;t=5, "b";R=1',
    '"a";r=0;t=5, "b";r = 1',
    '"a";r=0;t=5, "b";r=1;t=1234567890123456',
    '"a";r=0;t=5, "b";r=1;t=1.2345',
    '"a";r=0;t=5, "b";r=1;t=1.',
    '"a";r=0;t=5, "b";r=1;t=-',
    '"a";r=0;t=5, "b";r=1;note="\\x"',
    '"a";r=0;t=5, "b";r=1;note="caf\u00e9"',
    '"a";r=0;t=5, "b";r=1;pk=:not base64:',
    '"a";r=0;t=5, "b";r=1;on=?2',
    '"a";r=0;t=5, ("b" "c"',
    '"a";r=0;t=5, ("b""c")',
    '"a";r=0;t=5, "b";r=1;d=@1.5',
    '"a";r=0;t=5, "b";r=1;s=%"%C3%A9"',
    '"a";r=0;t=5, "b";r=1;s=%"%ff"',
    // Neither a List nor the older draft's Dictionary: the two forms mixed.
    '"a";r=0;t=5, remaining=0, reset=5',
    'limit=10, remaining=0, reset=5, "a"',
    'limit=10, remaining=0, reset=5;',
    'limit=10, remaining=0, Reset=5',
  ];
  for (const value of broken) {
    assert.equal(pause({ RateLimit: value }), null, value);
    assert.equal(pause({ 'RateLimit-Policy': '"a";q=5;w=5', RateLimit: value }), null, `${value}, with a policy`);
  }
  // A broken RateLimit-Policy is ignored too: it bounds no pause, `t` governs.
  for (const value of ['"a";q=5;w=5, ;;', '"a";q=5;w=5, "b";q=1;w=1;Q=2', '"a";q=5;w=5;n="open']) {
    assert.equal(pause({ 'RateLimit-Policy': value, RateLimit: '"a";r=0;t=5' }), 5000, value);
    assert.equal(pause({ 'RateLimit-Policy': value, RateLimit: '"a";r=0' }), null, `${value}, no t`);
  }
  // Every structured type parses, so the field is read: a token name, an
  // inner list, Booleans, Decimals, byte sequences, Dates, Display
  // Strings, keys with `*`, `_`, `-` and `.`, whitespace where RFC 9651 allows it.
  const valid = '("x" y);n=1, a;r=0;t=5;ok;no=?0;f=-1.25;pk=:AQID:;d=@1700000000;s=%"caf%c3%a9";*k_-.9=tok/en:x, "b";r=3;t=1 ,\t"c";  r=9';
  assert.equal(pause({ RateLimit: valid }), 5000);
  assert.equal(pause({ 'RateLimit-Policy': 'a;q=5;w=5;y=?1, ("p" q);z=1', RateLimit: valid }), 1000);
  // The older draft's Dictionary, its members cut at `,` or `;`, still parses.
  assert.equal(pause({ RateLimit: 'limit=10, remaining=0, reset=5' }), 5000);
  assert.equal(pause({ RateLimit: 'limit=10;remaining=0;reset=5' }), 5000);
  // An empty field is an empty list: nothing to read, nothing thrown.
  assert.equal(pause({ RateLimit: '' }), null);
});

test('a Display String ending in `\\` ends at its quote: the parameters and members after it are read', async () => {
  // In a Display String (RFC 9651, section 4.2.10) `\` is a character, not
  // an escape. The field was checked by one scanner, which knew it, and cut
  // at `,` and `;` by another, which took `\"` for an escaped quote: the
  // string ran on over the rest, and `r=0;t=5` after it, or the next
  // member, was never read (no pause: the queue went on into the server's 429s).
  const pause = (fields) => parseRateLimit(new Headers(fields));
  assert.equal(pause({ RateLimit: '"a";s=%"x\\";r=0;t=5' }), 5000);
  assert.equal(pause({ RateLimit: '"a";s=%"x\\", "b";r=0;t=9' }), 9000);
  assert.equal(pause({ RateLimit: '"a";r=0;t=5;s=%"x\\", "b";r=0;t=9' }), 9000);
  assert.equal(pause({ RateLimit: '"a";s=%"\\";r=0;t=5' }), 5000, 'a backslash alone');
  // In RateLimit-Policy, its window still bounds the pause.
  assert.equal(pause({ 'RateLimit-Policy': '"a";s=%"x\\";q=5;w=5', RateLimit: '"a";r=0;t=5' }), 1000);
  assert.equal(pause({ 'RateLimit-Policy': '"z";s=%"\\", "a";q=5;w=5', RateLimit: '"a";r=0;t=5' }), 1000);
  // A String's `\"` is still an escaped quote (`"x\"` is left open: no field).
  assert.equal(pause({ RateLimit: '"a";r=0;t=5;s="x\\"' }), null);
  assert.equal(pause({ RateLimit: '"a";s="x\\";r=1";r=0;t=5' }), 5000);
  // A paced client behind such a server waits.
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time, (url) => (url === '/a' ? { status: 200, headers: { RateLimit: '"api";note=%"C:\\";r=0;t=3' } } : { status: 200 }));
  const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers });
  const sent = [paced('/a'), paced('/b')];
  await time.advance(5000);
  await Promise.all(sent);
  assert.deepEqual(log, [['/a', 0], ['/b', 3000]]);
});

test('a Byte Sequence that is no base64 breaks its field (RFC 9651, section 4.2.7): ignored as a whole', () => {
  // Its characters alone were checked: `pk=:a=b:` (an `=` inside) or
  // `pk=:a:` (one character left over) decode to nothing, and parsing
  // fails, but the field was read, and paused the queue.
  const pause = (fields) => parseRateLimit(new Headers(fields));
  for (const bytes of [':a=b:', ':a:', ':abcde:', ':=:', ':===:', ':ab=:', ':aGVsbA=:', ':aGVsbG8==:', ':ab===:', ':=aGVs:']) {
    assert.equal(pause({ RateLimit: `"a";r=0;t=5;pk=${bytes}` }), null, bytes);
    assert.equal(pause({ RateLimit: `"b";r=0;t=1, "a";r=0;t=5;pk=${bytes}` }), null, `${bytes}, in a second member`);
    // A broken RateLimit-Policy bounds nothing: `t` governs.
    assert.equal(pause({ 'RateLimit-Policy': `"a";q=5;w=5;pk=${bytes}`, RateLimit: '"a";r=0;t=5' }), 5000, `${bytes}, in the policy`);
  }
  // Base64 that decodes still parses: padded or not (the RFC asks parsers
  // not to fail on missing `=`, nor on pad bits that are not 0), empty too,
  // as express-rate-limit's partition key (`pk`) and Cloudflare-style fields write it.
  for (const bytes of ['::', ':aGVsbG8=:', ':aGVsbG8:', ':aGVsbA==:', ':aGVsbA:', ':iZ==:', ':/+Ah:', ':M2YyN2Q0ZjNmNzBk:']) {
    assert.equal(pause({ RateLimit: `"a";r=0;t=5;pk=${bytes}` }), 5000, bytes);
    assert.equal(pause({ 'RateLimit-Policy': `"a";q=5;w=5;pk=${bytes}`, RateLimit: `"a";r=0;t=5;pk=${bytes}` }), 1000, `${bytes}, both fields`);
  }
});

test('RateLimit items of one name go with the policies of that name in order: helpers in a row, each limiter "default"', () => {
  // Keyed by name alone, every item went with the last policy of its name:
  // the exhausted first limit (4 per 2 s, a unit each 0.5 s) paused the
  // second's share (10 per 1 s: 0.1 s), and the next request met a 429.
  const pause = (fields) => parseRateLimit(new Headers(fields));
  const policy = '"default";q=4;w=2, "default";q=10;w=1';
  assert.equal(pause({ 'RateLimit-Policy': policy, RateLimit: '"default";r=0;t=2, "default";r=9;t=1' }), 500);
  assert.equal(pause({ 'RateLimit-Policy': policy, RateLimit: '"default";r=3;t=1, "default";r=0;t=1' }), 100);
  // Another name between them counts for its own.
  assert.equal(pause({ 'RateLimit-Policy': '"a";q=1;w=60, "b";q=2;w=60, "a";q=10;w=1', RateLimit: '"a";r=0;t=60, "b";r=1;t=9, "a";r=5;t=1' }), 60_000);
  // As separate field lines (stacked ASGI middlewares), which fetch's Headers join with ", ".
  const lines = new Headers([['RateLimit-Policy', '"default";q=4;w=2'], ['RateLimit-Policy', '"default";q=10;w=1'], ['RateLimit', '"default";r=0;t=2'], ['RateLimit', '"default";r=9;t=1']]);
  assert.equal(parseRateLimit(lines), 500);
  // Fewer policies than items of the name: the last one stands for the rest.
  assert.equal(pause({ 'RateLimit-Policy': '"default";q=4;w=2', RateLimit: '"default";r=9;t=1, "default";r=0;t=2' }), 500);
});

test("a RateLimit item with nothing left and no `t` pauses by its policy's window; a malformed `t` is no missing one", async () => {
  // `t` is optional: `"api";r=0` was ignored whatever its policy said, and
  // the queue went on into the server's 429s.
  const pause = (fields) => parseRateLimit(new Headers(fields));
  // q units per w seconds: the whole quota is back within w; a unit, within w / q.
  assert.equal(pause({ 'RateLimit-Policy': '"api";q=10;w=60', RateLimit: '"api";r=0' }), 6000);
  assert.equal(pause({ 'RateLimit-Policy': '"api";q=0;w=60', RateLimit: '"api";r=0' }), 60_000, 'q=0: the window');
  assert.equal(pause({ 'RateLimit-Policy': '"a";q=1;w=5, "b";q=2;w=60', RateLimit: '"a";r=0, "b";r=0;t=1' }), 5000, 'the longest of several');
  // Nothing says how long: no policy of that name, or one without a window, without q, or with w=0.
  for (const policy of [undefined, '"other";q=10;w=60', '"api";q=10', '"api";w=60', '"api";q=10;w=0']) {
    assert.equal(pause({ ...(policy && { 'RateLimit-Policy': policy }), RateLimit: '"api";r=0' }), null, String(policy));
  }
  // A `t` that is there but malformed makes the item malformed: ignored, not read as absent.
  for (const t of ['t=-1', 't="5"', 't', 't=?1', 't=']) {
    assert.equal(pause({ 'RateLimit-Policy': '"api";q=10;w=60', RateLimit: `"api";r=0;${t}` }), null, t);
  }
  assert.equal(pause({ 'RateLimit-Policy': '"api";q=10;w=60', RateLimit: '"api";r=1' }), null, 'some left');
  // A paced client behind such a server: the queue pauses a unit's share of the window.
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time, (url) =>
    url === '/a' ? { status: 200, headers: { 'RateLimit-Policy': '"api";q=2;w=4', RateLimit: '"api";r=0' } } : { status: 200 },
  );
  const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers });
  const sent = [paced('/a'), paced('/b')];
  await time.advance(5000);
  await Promise.all(sent);
  assert.deepEqual(log, [['/a', 0], ['/b', 2000]]);
});

test('a RateLimit item or policy whose `r`, `t`, `q` or `w` is a Decimal is malformed, and ignored, as `w=0` is', () => {
  // `t=1.5` paused 1.5 s: the draft makes each of them a non-negative
  // Integer, and a Decimal is another structured type (RFC 9651).
  const pause = (fields) => parseRateLimit(new Headers(fields));
  for (const item of ['"api";r=0;t=1.5', '"api";r=0;t=2.0', '"api";r=0.0;t=2', '"api";r=0;t=1234567890123456']) {
    assert.equal(pause({ RateLimit: item }), null, item);
    // Nor is a malformed `t` read as absent (the policy's window standing for it).
    assert.equal(pause({ 'RateLimit-Policy': '"api";q=10;w=60', RateLimit: item }), null, `${item}, with a policy`);
  }
  // Another item of the field still counts.
  assert.equal(pause({ RateLimit: '"a";r=0;t=1.5, "b";r=0;t=2' }), 2000);
  // A policy whose `q` or `w` is a Decimal bounds nothing, as one with `w=0`: `t` alone governs.
  for (const policy of ['"api";q=5;w=5.0', '"api";q=5.0;w=5', '"api";q=5;w=0']) {
    assert.equal(pause({ 'RateLimit-Policy': policy, RateLimit: '"api";r=0;t=5' }), 5000, policy);
    assert.equal(pause({ 'RateLimit-Policy': policy, RateLimit: '"api";r=0' }), null, `${policy}, no t`);
  }
  // Well-formed: at most 15 digits, leading zeros allowed.
  assert.equal(pause({ RateLimit: '"api";r=0;t=007' }), 7000);
  // The older draft's values keep their decimals.
  assert.equal(pause({ RateLimit: 'limit=10, remaining=0, reset=1.5' }), 1500);
  assert.equal(pause({ 'RateLimit-Remaining': '0', 'RateLimit-Reset': '2.5' }), 2500);
});

test("a policy whose quota counts no requests (`qu`) bounds no pause by a unit's share: a byte's share is no request's", async () => {
  // `w / q` of a policy counting bytes (`qu="content-bytes"`, section
  // 3.1.2) was the time to earn one byte back: `"a";r=0;t=10` with
  // 65535 bytes per 10 s paused 0.15 ms, and the queue went on into the
  // server's 429s. Requests (the default, or said) keep the share.
  const pause = (fields) => parseRateLimit(new Headers(fields));
  const bytes = '"a";q=65535;qu="content-bytes";w=10';
  assert.equal(pause({ 'RateLimit-Policy': bytes, RateLimit: '"a";r=0;t=10' }), 10_000);
  // No `t`: the window alone, within which the whole quota is back.
  assert.equal(pause({ 'RateLimit-Policy': bytes, RateLimit: '"a";r=0' }), 10_000);
  assert.equal(pause({ 'RateLimit-Policy': '"a";q=4;qu="concurrent-requests";w=60', RateLimit: '"a";r=0;t=5' }), 5000);
  assert.equal(pause({ 'RateLimit-Policy': '"a";q=4;qu="concurrent-requests"', RateLimit: '"a";r=0' }), null, 'no window');
  for (const unit of ['', ';qu="requests"', ';qu="request"']) {
    assert.equal(pause({ 'RateLimit-Policy': `"a";q=10;w=10${unit}`, RateLimit: '"a";r=0;t=10' }), 1000, unit);
  }
  // A `qu` that is no String (a token, a Boolean) makes the policy malformed: it bounds nothing.
  for (const unit of [';qu=requests', ';qu']) {
    assert.equal(pause({ 'RateLimit-Policy': `"a";q=10;w=10${unit}`, RateLimit: '"a";r=0;t=10' }), 10_000, unit);
    assert.equal(pause({ 'RateLimit-Policy': `"a";q=10;w=10${unit}`, RateLimit: '"a";r=0' }), null, `${unit}, no t`);
  }
  // A paced client behind such a server waits the server's `t`.
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time, (url) =>
    url === '/a' ? { status: 200, headers: { 'RateLimit-Policy': bytes, RateLimit: '"a";r=0;t=3' } } : { status: 200 },
  );
  const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers });
  const sent = [paced('/a'), paced('/b')];
  await time.advance(5000);
  await Promise.all(sent);
  assert.deepEqual(log, [['/a', 0], ['/b', 3000]]);
});

test("the older draft's RateLimit with `;` between its members, and its names as an item's parameters, still pause", () => {
  // Read as one structured item, `limit=100; remaining=0; reset=30` (as
  // api.close.com sends it) and `"default"; remaining=0; reset=30` paused
  // nothing: the queue went on into the server's 429s.
  const pause = (fields) => parseRateLimit(new Headers(fields));
  assert.equal(pause({ RateLimit: 'limit=100; remaining=0; reset=30' }), 30_000);
  assert.equal(pause({ RateLimit: 'limit=100;remaining=0;reset=1.5' }), 1500);
  assert.equal(pause({ RateLimit: 'limit=100; remaining=3; reset=30' }), null);
  assert.equal(pause({ RateLimit: '"default"; limit=100; remaining=0; reset=30' }), 30_000);
  assert.equal(pause({ RateLimit: '"a";remaining=0;reset=30, "b";remaining=5;reset=1' }), 30_000, 'each item its own');
  // An item of the structured draft is read by its own `r` and `t` alone.
  assert.equal(pause({ RateLimit: '"a";r=5;t=1;remaining=0;reset=30' }), null);
});

/** Where each call went: its status, or its error's name; 'waiting' while it has not settled. */
function outcomes(calls) {
  const seen = Object.fromEntries(Object.keys(calls).map((label) => [label, 'waiting']));
  for (const [label, call] of Object.entries(calls)) {
    call.then((response) => (seen[label] = response.status), (error) => (seen[label] = error.name));
  }
  return seen;
}

test('a clock or signal that aborts a request ahead of an aborted one, as those behind move up, strands nobody and books each once', async () => {
  // The aborted request's place in the queue was read before the clock
  // (and the signals of those behind): an abort made there moved it a place
  // up, and the requests moved up from the place it had: /4, taken out
  // without a booking, never went nor settled (clock); /3 was queued twice,
  // and sent twice (signal).
  for (const where of ['clock', 'signal']) {
    const time = fakeTime();
    const { clock, at } = hookedClock(() => time.clock());
    const { fetch, log } = fakeFetch(time);
    const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock, timers: time.timers });
    const [x, a] = [new AbortController(), new AbortController()];
    let hook = null;
    const own = new AbortController().signal;
    // /3's signal, which aborts /1 as it is read.
    const signal = {
      get aborted() {
        const once = hook;
        hook = null;
        once?.();
        return own.aborted;
      },
      addEventListener: (...args) => own.addEventListener(...args),
      removeEventListener: (...args) => own.removeEventListener(...args),
    };
    const calls = {
      0: paced('/0'),
      1: paced('/1', { signal: x.signal }),
      2: paced('/2', { signal: a.signal }),
      3: paced('/3', { signal }),
      4: paced('/4'),
    };
    const seen = outcomes(calls);
    if (where === 'clock') at(1, () => x.abort());
    else hook = () => x.abort();
    a.abort();
    await time.advance(1000);
    assert.deepEqual(seen, { 0: 200, 1: 'AbortError', 2: 'AbortError', 3: 200, 4: 200 }, where);
    assert.deepEqual(log, [['/0', 0], ['/3', 100], ['/4', 200]], where);
    assert.equal(paced.waiting, 0, where);
  }
});

test("a signal's removeEventListener that aborts a request as a pause takes another out: the abort is heard", async () => {
  // A pause past /d's maxWaitMs takes it out, letting its signal go while
  // the queue was being rebuilt: /k, aborted there, not yet put back, was
  // not found by its listener, and went when the pause ended.
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time, (url) =>
    url === '/a' ? { status: 200, headers: { 'RateLimit-Remaining': '0', 'RateLimit-Reset': '1.5' } } : { status: 200 },
  );
  let answerA;
  const held = (url) => (url === '/a' ? new Promise((resolve) => (answerA = () => resolve(fetch(url)))) : fetch(url));
  const onePerSecond = Gcra.perPeriod({ burst: 1, tokens: 1, periodMs: 1000, clock: time.clock });
  const paced = pacedFetch(held, onePerSecond, { clock: time.clock, timers: time.timers, maxWaitMs: 2000 });
  const k = new AbortController();
  const own = new AbortController().signal;
  let hook = () => k.abort();
  const signal = {
    get aborted() {
      return own.aborted;
    },
    addEventListener: (...args) => own.addEventListener(...args),
    removeEventListener(...args) {
      const once = hook;
      hook = null;
      once?.();
      own.removeEventListener(...args);
    },
  };
  const calls = { a: paced('/a'), d: paced('/d', { signal }) }; // /d: its slot at 1000, its deadline 2000
  await time.advance(500);
  calls.k = paced('/k', { signal: k.signal }); // its slot at 2000, its deadline 2500
  const seen = outcomes(calls);
  await time.advance(100);
  answerA(); // at 600: a pause to 2100, past /d's deadline, within /k's
  await time.advance(3000);
  assert.deepEqual(seen, { a: 200, d: 'TimeoutError', k: 'AbortError' });
  assert.deepEqual(log, [['/a', 600]]);
});

test('a call made from the cost function of a call counts against maxWaiting', async () => {
  // The queue's length was read before the cost function ran: /c, called
  // as /d's room was taken, was queued too, past maxWaiting.
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time);
  let paced;
  const cost = (input) => {
    if (input === '/c') calls.d = paced('/d');
    return 1;
  };
  const calls = {};
  paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers, maxWaiting: 1, cost });
  calls.a = paced('/a'); // sent at once
  calls.c = paced('/c');
  assert.equal(paced.waiting, 1);
  const seen = outcomes(calls);
  await time.advance(1000);
  assert.deepEqual(seen, { a: 200, c: 'RateLimited', d: 200 });
  assert.deepEqual(log, [['/a', 0], ['/d', 100]]);
});

test('a signal aborted by the caller\'s code as its call books, or as it is to be retried, rejects the call', async () => {
  // Aborted after the call read `signal.aborted` and before it listened
  // (by the clock, or by a 429's answer being read), the abort was never
  // heard: the request went at its slot, or again after the pause.
  for (const when of ['call', 'retry']) {
    const time = fakeTime();
    const { clock, at } = hookedClock(() => time.clock());
    const { fetch, log } = fakeFetch(time, (url, count) => (when === 'retry' && count === 1 ? { status: 429, headers: { 'Retry-After': '1' } } : { status: 200 }));
    let answer;
    const held = (url) => new Promise((resolve) => (answer = () => resolve(fetch(url))));
    const gcra = tenPerSecond(time.clock);
    const paced = pacedFetch(held, gcra, { clock, timers: time.timers });
    gcra.tryAcquire(1, 0);
    const controller = new AbortController();
    if (when === 'call') at(1, () => controller.abort());
    const seen = outcomes({ a: paced('/a', { signal: controller.signal }) });
    if (when === 'call') assert.equal(gcra.peek(1, 0).retryAfterMs, 100, 'its booking at 100 given back');
    await time.advance(100);
    if (when === 'retry') {
      at(1, () => controller.abort()); // the pause the 429 asks for reads it
      answer();
      await time.advance(0);
    }
    assert.equal(paced.waiting, 0, `${when}: nothing queued`);
    await time.advance(3000);
    assert.deepEqual(seen, { a: 'AbortError' }, when);
    assert.deepEqual(log, when === 'call' ? [] : [['/a', 100]], when);
  }
});

test("a request whose signal-like books another as it listens, then aborts or throws, keeps its booking unused", async () => {
  // Its signal-like's addEventListener calls the paced fetch again (/b,
  // booked after it), then aborts it or throws. Its booking, the limiter's
  // latest no more, was given back all the same: a bucket's give-back
  // freed the slot at the end, /b's, which /c then shared (two requests at
  // once from a burst of one), and a GCRA's the same.
  const limiters = {
    TokenBucket: (clock) => new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 100, initialTokens: 0, clock }),
    Gcra: (clock) => new Gcra({ burst: 1, emissionIntervalMs: 100, clock }),
  };
  for (const [name, make] of Object.entries(limiters)) {
    for (const how of ['aborts', 'throws']) {
      const time = fakeTime();
      const { fetch, log } = fakeFetch(time);
      const limiter = make(time.clock);
      if (name === 'Gcra') limiter.tryAcquire();
      const paced = pacedFetch(fetch, limiter, { clock: time.clock, timers: time.timers });
      const own = new AbortController();
      const calls = {};
      const signal = {
        get aborted() {
          return own.signal.aborted;
        },
        get reason() {
          return own.signal.reason;
        },
        addEventListener(...args) {
          calls.b = paced('/b');
          if (how === 'throws') throw new Error('no listening');
          own.signal.addEventListener(...args);
          own.abort();
        },
        removeEventListener: (...args) => own.signal.removeEventListener(...args),
      };
      calls.a = paced('/a', { signal });
      calls.c = paced('/c');
      const seen = outcomes(calls);
      await time.advance(1000);
      const context = `${name}: its signal-like ${how}`;
      assert.deepEqual(seen, { a: how === 'throws' ? 'Error' : 'AbortError', b: 200, c: 200 }, context);
      assert.deepEqual(log, [['/b', 200], ['/c', 300]], context);
    }
  }
});

test('a Retry-After of up to maxRetryAfterMs (default 60 s), that bound included, is waited for and retried; a longer one is not', async () => {
  const run = async (retryAfter, options = {}) => {
    const time = fakeTime();
    const { fetch, log } = fakeFetch(time, (url, count) => (count === 1 ? { status: 429, headers: { 'Retry-After': retryAfter } } : { status: 200 }));
    const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers, ...options });
    const a = paced('/a');
    await time.advance(200_000);
    return [(await a).status, log, paced.pausedUntilMs];
  };
  assert.deepEqual(await run('60'), [200, [['/a', 0], ['/a', 60_000]], 60_000], 'the default bound, 60 s');
  assert.deepEqual(await run('61'), [429, [['/a', 0]], 60_000], 'beyond it: answered, the queue paused 60 s');
  assert.deepEqual(await run('2', { maxRetryAfterMs: 2_000 }), [200, [['/a', 0], ['/a', 2_000]], 2_000], 'the bound given');
});

test('a shorter pause asked while a longer one lasts leaves the longer one', async () => {
  // Two requests answered 429 one after the other (sent together, a burst
  // of two): the second's Retry-After of 1 s cut the first's 5 s short, and
  // the queue went on into the server's 429s.
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time, (url) =>
    url === '/c' ? { status: 200 } : { status: 429, headers: { 'Retry-After': url === '/a' ? '5' : '1' } },
  );
  const gcra = Gcra.perPeriod({ burst: 2, tokens: 10, periodMs: 1000, clock: time.clock });
  const paced = pacedFetch(fetch, gcra, { clock: time.clock, timers: time.timers, retries: 0 });
  const sent = [paced('/a'), paced('/b'), paced('/c')];
  await time.advance(10_000);
  assert.deepEqual((await Promise.all(sent)).map((r) => r.status), [429, 429, 200]);
  assert.equal(paced.pausedUntilMs, 5_000);
  assert.deepEqual(log, [['/a', 0], ['/b', 0], ['/c', 5_000]]);
});

test("an acquire() booked after a queued request is another's booking: aborting the request leaves its slot unused", async () => {
  // Not counted, the request's booking was given back from before the
  // acquire's: it freed the slot at the end, 200, which the next booking
  // shared with the acquire (two units at once from a burst of one).
  const time = fakeTime();
  const { fetch } = fakeFetch(time);
  const gcra = tenPerSecond(time.clock);
  const paced = pacedFetch(fetch, gcra, { clock: time.clock, timers: time.timers });
  const first = paced('/a');
  const controller = new AbortController();
  const second = paced('/b', { signal: controller.signal });
  const waiter = new AbortController();
  const acquired = gcra.acquire(1, { signal: waiter.signal });
  try {
    controller.abort();
    await assert.rejects(second, { name: 'AbortError' });
    assert.equal(gcra.reserve(1, Infinity, 0).atMs, 300, 'the acquire keeps 200 to itself');
  } finally {
    // Its timer is a real one, on a clock that never reaches its slot.
    waiter.abort();
  }
  await assert.rejects(acquired, { name: 'AbortError' });
  await first;
});

test("a reserve() of cost 0, or an acquire() due at once, is no booking of another: aborting a request still moves those behind up", async () => {
  // Neither waits, so neither holds a slot that a request moved up could
  // share: counted as another's booking, they left the slot unused.
  for (const between of ['reserve', 'acquire']) {
    const time = fakeTime();
    const { fetch, log } = fakeFetch(time);
    const limiter = new Gcra({ burst: 1, emissionIntervalMs: 1000, clock: time.clock });
    limiter.tryAcquire(1, 0);
    const paced = pacedFetch(fetch, limiter, { clock: time.clock, timers: time.timers });
    const controller = new AbortController();
    const first = paced('/a', { signal: controller.signal }); // at 1000
    const second = paced('/b'); // at 2000
    if (between === 'reserve') assert.equal(limiter.reserve(0, Infinity, 0).waitMs, 0);
    else await limiter.acquire(0);
    controller.abort();
    await assert.rejects(first, { name: 'AbortError' });
    await time.advance(5000);
    await second;
    assert.deepEqual(log, [['/b', 1000]], between);
  }
});

test("a request of cost 0 is no booking of another's either: it hides none made after the queued requests", async () => {
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time);
  const limiter = new Gcra({ burst: 1, emissionIntervalMs: 1000, clock: time.clock });
  limiter.tryAcquire(1, 0);
  const paced = pacedFetch(fetch, limiter, { clock: time.clock, timers: time.timers, cost: (url) => (url === '/free' ? 0 : 1) });
  const controller = new AbortController();
  const first = paced('/a', { signal: controller.signal }); // at 1000
  const second = paced('/b'); // at 2000
  assert.equal(limiter.reserve(1, Infinity, 0).atMs, 3000); // another's
  const free = paced('/free'); // books nothing that waits
  controller.abort();
  await assert.rejects(first, { name: 'AbortError' });
  assert.equal(limiter.tryAcquire(1, 3000).allowed, false, "the other's slot is not free");
  await time.advance(5000);
  await Promise.all([second, free]);
  assert.deepEqual(log, [['/b', 2000], ['/free', 2000]], 'kept its slot');
});

test("another's booking made by the clock that an abort reads keeps those behind in their slots", async () => {
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time);
  const limiter = new Gcra({ burst: 1, emissionIntervalMs: 1000, clock: time.clock });
  limiter.tryAcquire(1, 0);
  const { clock, at } = hookedClock(time.clock);
  const paced = pacedFetch(fetch, limiter, { clock, timers: time.timers });
  const controller = new AbortController();
  const first = paced('/a', { signal: controller.signal }); // at 1000
  const second = paced('/b'); // at 2000
  at(1, () => assert.equal(limiter.reserve(1, Infinity, 0).atMs, 3000));
  controller.abort();
  await assert.rejects(first, { name: 'AbortError' });
  assert.equal(limiter.tryAcquire(1, 3000).allowed, false, "the other's slot is not free");
  await time.advance(5000);
  await second;
  assert.deepEqual(log, [['/b', 2000]], 'kept its slot');
});

test("a pause gives a window algorithm's queued bookings back, even with another's booked after them", async () => {
  // Kept, they left their units unused: a window's requests never move up,
  // so none shares the unit given back. (A log gives back any booking; the
  // other windows only one of their latest window.)
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time, (url, count) => (url === '/a' && count === 1 ? { status: 429, headers: { 'Retry-After': '5' } } : { status: 200 }));
  const limiter = new SlidingWindowLog({ limit: 2, windowMs: 1000, clock: time.clock });
  const paced = pacedFetch(fetch, limiter, { clock: time.clock, timers: time.timers });
  const calls = [paced('/a'), paced('/c'), paced('/b')]; // at 0, 0 and 1000
  const other = limiter.reserve(1, Infinity, 0);
  assert.deepEqual([other.ok, other.atMs], [true, 1000]);
  await time.advance(0); // the 429: a pause
  assert.equal(paced.pausedUntilMs, 5000);
  assert.equal(limiter.peek(1, 1000).allowed, true, "the request's booking at 1000 was given back");
  await time.advance(10_000);
  await Promise.all(calls);
  assert.deepEqual(log.map(([url]) => url), ['/a', '/c', '/a', '/b']);
});

test('a limiter whose reservations have no cancel() gets an aborted booking back through refund(cost, atMs)', async () => {
  const time = fakeTime();
  const { fetch } = fakeFetch(time);
  const gcra = tenPerSecond(time.clock);
  const refunds = [];
  const limiter = {
    reserve(cost, maxWaitMs, nowMs) {
      const { ok, waitMs, atMs, decision } = gcra.reserve(cost, maxWaitMs, nowMs);
      return { ok, waitMs, atMs, cost, decision };
    },
    refund(cost, takenAtMs) {
      refunds.push([cost, takenAtMs]);
    },
  };
  const paced = pacedFetch(fetch, limiter, { clock: time.clock, timers: time.timers });
  const first = paced('/a');
  const controller = new AbortController();
  const second = paced('/b', { signal: controller.signal });
  controller.abort();
  await assert.rejects(second, { name: 'AbortError' });
  assert.deepEqual(refunds, [[1, 100]]);
  await first;
});

test("a Retry-After retried lets the refused answer's body go (cancelled), not left unread", async () => {
  const time = fakeTime();
  const cancelled = [];
  let calls = 0;
  const fetch = async (url) => {
    calls++;
    if (calls > 1) return new Response('ok');
    const body = new ReadableStream({ cancel: () => cancelled.push(url) });
    return new Response(body, { status: 429, headers: { 'Retry-After': '1' } });
  };
  const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers });
  const answer = paced('/a');
  await time.advance(2000);
  assert.equal((await answer).status, 200);
  assert.deepEqual(cancelled, ['/a']);
});

test('a RateLimit pause is bounded by maxRetryAfterMs, as a Retry-After is', async () => {
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time, (url) => (url === '/a' ? { status: 200, headers: { RateLimit: '"api";r=0;t=3600' } } : { status: 200 }));
  const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers, maxRetryAfterMs: 1000 });
  const a = paced('/a');
  const b = paced('/b');
  await time.advance(5000);
  await Promise.all([a, b]);
  assert.deepEqual(log, [['/a', 0], ['/b', 1000]]);
});

test('a full queue whose first request is overdue (its timer late) refuses with retryAfterMs 0, never below', async () => {
  const time = fakeTime();
  let now = 0;
  const clock = () => now;
  const { fetch } = fakeFetch(time);
  const paced = pacedFetch(fetch, tenPerSecond(clock), { clock, timers: time.timers, maxWaiting: 1 });
  const calls = [paced('/0'), paced('/1')]; // '/1' due at 100
  now = 150; // its timer has not fired yet
  await assert.rejects(paced('/2'), rateLimited({ retryAfterMs: 0 }));
  await time.advance(200);
  await Promise.all(calls);
});

test("init without a signal leaves a Request its own", async () => {
  const time = fakeTime();
  const { fetch, log } = fakeFetch(time);
  const paced = pacedFetch(fetch, tenPerSecond(time.clock), { clock: time.clock, timers: time.timers });
  const first = paced('http://x/0');
  const controller = new AbortController();
  const second = paced(new Request('http://x/1', { signal: controller.signal }), { method: 'GET' });
  controller.abort();
  await assert.rejects(second, { name: 'AbortError' });
  assert.equal(paced.waiting, 0);
  await time.advance(1000);
  await first;
  assert.equal(log.length, 1, 'the aborted request never left');
});
