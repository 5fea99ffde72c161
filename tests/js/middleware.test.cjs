'use strict';
// The server helpers against real servers: Express with `middleware`, Fastify
// with `fastifyHook`, listening on 127.0.0.1, hit with real HTTP requests.

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');

const express = require('express');
const Fastify = require('fastify');

const { middleware, fastifyHook, FixedWindow, TokenBucket } = require('./impl.cjs');
const { assertLimiterError } = require('./helpers.cjs');

// Two requests per client per minute, the client named by a header; POST costs 2.
const options = () => ({
  key: (request) => request.headers['x-client'] ?? 'anonymous',
  create: () => new FixedWindow({ limit: 2, windowMs: 60_000, name: 'per-minute' }),
  cost: (request) => (request.method === 'POST' ? 2 : 1),
});

async function get(url, client, method = 'GET') {
  const response = await fetch(url, { method, headers: client === undefined ? {} : { 'x-client': client } });
  return {
    status: response.status,
    body: await response.text(),
    policy: response.headers.get('ratelimit-policy'),
    rateLimit: response.headers.get('ratelimit'),
    retryAfter: response.headers.get('retry-after'),
  };
}

/** The same scenario against a server at `url` whose handler answers "hello". */
function scenario(server) {
  it('admits the limit per client, then answers 429 with Retry-After', async () => {
    const { url } = server;
    const first = await get(url, 'alice');
    assert.deepStrictEqual([first.status, first.body], [200, 'hello']);
    assert.equal(first.policy, '"per-minute";q=2;w=60');
    assert.match(first.rateLimit, /^"per-minute";r=1;t=\d+$/);
    assert.equal(first.retryAfter, null);

    const second = await get(url, 'alice');
    assert.equal(second.status, 200);
    assert.match(second.rateLimit, /^"per-minute";r=0;t=\d+$/);

    const third = await get(url, 'alice');
    assert.equal(third.status, 429);
    assert.equal(third.body, 'Too Many Requests\n');
    assert.equal(third.policy, '"per-minute";q=2;w=60');
    assert.match(third.rateLimit, /^"per-minute";r=0;t=\d+$/);
    const retry = Number(third.retryAfter);
    assert.ok(Number.isInteger(retry) && retry >= 1 && retry <= 60, `Retry-After ${third.retryAfter}`);
  });

  it('keeps one limiter per key', async () => {
    const { url } = server;
    assert.equal((await get(url, 'bob')).status, 200);
    assert.equal((await get(url, 'carol')).status, 200);
    assert.equal((await get(url, 'bob')).status, 200);
    assert.equal((await get(url, 'bob')).status, 429);
    assert.equal((await get(url, 'carol')).status, 200);
  });

  it('charges each request its cost', async () => {
    const { url } = server;
    assert.equal((await get(url, 'dave', 'POST')).status, 200);
    const next = await get(url, 'dave');
    assert.equal(next.status, 429);
    assert.match(next.rateLimit, /r=0/);
  });

  it('a key function that fails sends the error on to the framework', async () => {
    const { url } = server;
    const response = await get(url, 'boom');
    assert.equal(response.status, 500);
    assert.equal(response.policy, null);
  });
}

const failingKey = (base) => ({
  ...base,
  key: (request) => {
    const client = base.key(request);
    if (client === 'boom') throw new Error('no key');
    return client;
  },
});

describe('middleware, in a real Express app', () => {
  const server = {};
  before(async () => {
    const app = express();
    app.use(middleware(failingKey(options())));
    app.all('/', (req, res) => res.type('text/plain').send('hello'));
    // Quiet error handler: answers 500 without printing the stack.
    app.use((error, req, res, next) => res.status(500).send(String(error.message)));
    await new Promise((resolve) => {
      server.http = app.listen(0, '127.0.0.1', resolve);
    });
    server.url = `http://127.0.0.1:${server.http.address().port}/`;
  });
  after(() => new Promise((resolve) => server.http.close(resolve)));
  scenario(server);
});

describe('fastifyHook, in a real Fastify app', () => {
  const server = {};
  before(async () => {
    const app = Fastify({ logger: false });
    app.addHook('onRequest', fastifyHook(failingKey(options())));
    app.all('/', async (request, reply) => reply.type('text/plain').send('hello'));
    server.app = app;
    await app.listen({ port: 0, host: '127.0.0.1' });
    server.url = `http://127.0.0.1:${app.server.address().port}/`;
  });
  after(() => server.app.close());
  scenario(server);
});

describe('the helpers check their options', () => {
  for (const helper of [middleware, fastifyHook]) {
    it(`${helper.name}: key and create are functions`, () => {
      const create = () => new FixedWindow({ limit: 1, windowMs: 1000 });
      assertLimiterError(() => helper(), 'invalid_type', 'options');
      assertLimiterError(() => helper({ create }), 'invalid_type', 'key');
      assertLimiterError(() => helper({ key: () => 'k' }), 'invalid_type', 'create');
      assertLimiterError(() => helper({ key: () => 'k', create, cost: 2 }), 'invalid_type', 'cost');
    });
  }

  it('a key that is not a string or number, or a create that returns no limiter, goes to next(error)', () => {
    const errors = [];
    const res = { setHeader() {}, end() {} };
    const create = () => new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 1000 });
    middleware({ key: () => ({}), create })({}, res, (e) => errors.push(e));
    middleware({ key: () => 1, create: () => ({}) })({}, res, (e) => errors.push(e));
    assert.deepStrictEqual(errors.map((e) => [e.name, e.code]), [['TypeError', 'invalid_type'], ['TypeError', 'invalid_type']]);
    assert.match(errors[0].message, /`key`/);
    assert.match(errors[1].message, /`create`/);
  });

  it('drops limiters back in their fresh state as the map grows, and keeps the others', () => {
    let t = 0;
    const created = [];
    const create = (key) => {
      created.push(key);
      return new FixedWindow({ limit: 1, windowMs: 1000, clock: () => t });
    };
    let outcome;
    const handler = middleware({ key: (req) => req.key, create });
    const res = { setHeader() {}, end() { outcome = 429; }, statusCode: 200 };
    const hit = (key) => {
      outcome = 200;
      handler({ key }, res, () => {});
      return outcome;
    };
    assert.equal(hit('kept'), 200);
    assert.equal(hit('kept'), 429);
    for (let i = 0; i < 1100; i++) hit(i); // a sweep at 1024 entries: none is fresh, all stay
    assert.equal(hit('kept'), 429, 'kept still holds its unit of the window [0, 1000)');
    t = 1000; // a new window: every limiter is back in its fresh state
    for (let i = 1100; i < 2200; i++) hit(i); // the sweep at 2048 entries drops them
    const before = created.length;
    assert.equal(hit('kept'), 200);
    assert.equal(created.length, before + 1, 'the fresh limiter of kept was dropped and made anew');
  });
});
