'use strict';
// The server helpers against real servers: Express with `middleware`, Fastify
// with `fastifyHook`, listening on 127.0.0.1, hit with real HTTP requests.

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { rmSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join } = require('node:path');

const express = require('express');
const Fastify = require('fastify');

const { middleware, fastifyHook, FixedWindow, Gcra, KeyedLimiter, Policy, RateLimited, TokenBucket } = require('./impl.cjs');
const { pacedFetchFor } = require('../../bindings-node/lib/paced-fetch.cjs');
const { assertLimiterError, checkLimiterError } = require('./helpers.cjs');

// Two requests per client per minute, the client named by a header; POST costs 2.
const options = () => ({
  limiter: new KeyedLimiter(new FixedWindow({ limit: 2, windowMs: 60_000, name: 'per-minute' })),
  key: (request) => request.headers['x-client'] ?? 'anonymous',
  cost: (request) => (request.method === 'POST' ? 2 : 1),
});

// The same as a Policy: two per client per minute, and 100 a minute in all.
const policyOptions = () => ({
  limiter: new Policy({
    limits: [
      { name: 'per-minute', algorithm: 'fixed_window', rate: '2/minute', by: ['client'] },
      { name: 'global', algorithm: 'fixed_window', rate: '100/minute' },
    ],
  }),
  fields: (request) => {
    const client = request.headers['x-client'] ?? 'anonymous';
    if (client === 'boom') throw new Error('no key');
    return { client };
  },
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
    contentType: response.headers.get('content-type'),
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
    // Byte for byte what the ASGI middleware answers (test_asgi.py): the reason phrase alone.
    assert.equal(third.body, 'Too Many Requests');
    assert.equal(third.contentType, 'text/plain; charset=utf-8');
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

/** The policy scenario: every limit is listed in the headers; the 429 names the per-client one. */
function policyScenario(server) {
  it('admits two per client, lists every limit, and answers 429 with Retry-After', async () => {
    const { url } = server;
    const first = await get(url, 'alice');
    assert.deepStrictEqual([first.status, first.body], [200, 'hello']);
    assert.equal(first.policy, '"per-minute";q=2;w=60, "global";q=100;w=60');
    assert.match(first.rateLimit, /^"per-minute";r=1;t=\d+, "global";r=99;t=\d+$/);
    assert.equal((await get(url, 'alice')).status, 200);
    const third = await get(url, 'alice');
    assert.equal(third.status, 429);
    assert.match(third.rateLimit, /^"per-minute";r=0;t=\d+, "global";r=98;t=\d+$/, 'nothing consumed in global');
    const retry = Number(third.retryAfter);
    assert.ok(Number.isInteger(retry) && retry >= 1 && retry <= 60, `Retry-After ${third.retryAfter}`);
    assert.equal((await get(url, 'bob', 'POST')).status, 200);
    assert.equal((await get(url, 'bob')).status, 429);
    assert.equal((await get(url, 'boom')).status, 500);
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
  before(() => expressServer(server, failingKey(options())));
  after(() => new Promise((resolve) => server.http.close(resolve)));
  scenario(server);
});

describe('fastifyHook, in a real Fastify app', () => {
  const server = {};
  before(() => fastifyServer(server, failingKey(options())));
  after(() => server.app.close());
  scenario(server);
});

// The same functions answering through promises, as a key looked up in a
// session store would: the decision waits for them, a rejection goes to the framework.
const asyncFunctions = (base) => ({
  ...base,
  key: async (request) => base.key(request),
  cost: (request) => Promise.resolve(base.cost(request)),
});

describe('middleware with async key and cost functions, in a real Express app', () => {
  const server = {};
  before(() => expressServer(server, asyncFunctions(failingKey(options()))));
  after(() => new Promise((resolve) => server.http.close(resolve)));
  scenario(server);
});

describe('fastifyHook with async key and cost functions, in a real Fastify app', () => {
  const server = {};
  before(() => fastifyServer(server, asyncFunctions(failingKey(options()))));
  after(() => server.app.close());
  scenario(server);
});

/**
 * An Express app on 127.0.0.1 behind `middleware(options)` (each in turn, for
 * an array), answering "hello"; on the Unix socket `socketPath` if given.
 */
async function expressServer(server, options, socketPath) {
  const app = express();
  for (const each of [options].flat()) app.use(middleware(each));
  app.all('/', (req, res) => res.type('text/plain').send('hello'));
  // Quiet error handler: answers 500 without printing the stack.
  app.use((error, req, res, next) => res.status(500).send(failure(error)));
  await new Promise((resolve) => {
    server.http = socketPath === undefined ? app.listen(0, '127.0.0.1', resolve) : app.listen(socketPath, resolve);
  });
  server.url = socketPath === undefined ? `http://127.0.0.1:${server.http.address().port}/` : undefined;
}

/** A 500's body: the error's class, code and message. */
const failure = (error) => `${error.name} (${error.code}): ${error.message}`;

/** The same with Fastify and `fastifyHook(options)`. */
async function fastifyServer(server, options, socketPath) {
  const app = Fastify({ logger: false });
  for (const each of [options].flat()) app.addHook('onRequest', fastifyHook(each));
  app.all('/', async (request, reply) => reply.type('text/plain').send('hello'));
  app.setErrorHandler((error, request, reply) => reply.code(500).type('text/plain').send(failure(error)));
  server.app = app;
  if (socketPath !== undefined) {
    await app.listen({ path: socketPath });
    return;
  }
  await app.listen({ port: 0, host: '127.0.0.1' });
  server.url = `http://127.0.0.1:${app.server.address().port}/`;
}

describe('middleware with a Policy, in a real Express app', () => {
  const server = {};
  before(() => expressServer(server, policyOptions()));
  after(() => new Promise((resolve) => server.http.close(resolve)));
  policyScenario(server);
});

describe('fastifyHook with a Policy, in a real Fastify app', () => {
  const server = {};
  before(() => fastifyServer(server, policyOptions()));
  after(() => server.app.close());
  policyScenario(server);
});

// A store that keeps one client and refuses others: as a KeyedLimiter, and as a policy's limit.
const fullStores = {
  keyed: () => ({
    limiter: new KeyedLimiter(new FixedWindow({ limit: 5, windowMs: 60_000 }), { maxKeys: 1, eviction: 'refuse' }),
    key: (request) => request.headers['x-client'],
  }),
  policy: () => ({
    limiter: new Policy({
      limits: [{ name: 'per-client', algorithm: 'fixed_window', rate: '5/minute', by: ['client'], max_keys: 1, eviction: 'refuse' }],
    }),
    fields: (request) => ({ client: request.headers['x-client'] }),
  }),
};

const frameworks = [
  ['middleware', expressServer, (server) => new Promise((resolve) => server.http.close(resolve))],
  ['fastifyHook', fastifyServer, (server) => server.app.close()],
];

for (const [framework, serve, close] of frameworks) {
  for (const [what, make] of Object.entries(fullStores)) {
    describe(`${framework}: a full ${what} store that refuses new keys`, () => {
      const server = {};
      before(() => serve(server, make()));
      after(() => close(server));
      it('answers a new key 503, without RateLimit headers, and still serves the held key', async () => {
        assert.equal((await get(server.url, 'alice')).status, 200);
        const refused = await get(server.url, 'bob');
        assert.deepStrictEqual([refused.status, refused.body], [503, 'Service Unavailable']);
        assert.equal(refused.contentType, 'text/plain; charset=utf-8');
        assert.deepStrictEqual([refused.policy, refused.rateLimit, refused.retryAfter], [null, null, null]);
        const held = await get(server.url, 'alice');
        assert.equal(held.status, 200);
        assert.match(held.rateLimit, /r=3/);
      });
    });
  }
}

// A store that could not grow for a new key (`out_of_memory`, which a flood
// of new keys brings: see out-of-memory tests) is answered as a full one is.
// Raised here by the store's own tryAcquire, replaced.
for (const [framework, serve, close] of frameworks) {
  describe(`${framework}: a store out of memory`, () => {
    const server = {};
    before(() => {
      const limiter = new KeyedLimiter(new FixedWindow({ limit: 5, windowMs: 60_000 }));
      limiter.tryAcquire = () => {
        throw Object.assign(new RangeError('out of memory: the store could not grow for this request, which changed nothing'), { code: 'out_of_memory' });
      };
      return serve(server, { limiter, key: (request) => request.headers['x-client'] });
    });
    after(() => close(server));
    it('answers 503, without RateLimit headers, not 500', async () => {
      const refused = await get(server.url, 'alice');
      assert.deepStrictEqual([refused.status, refused.body], [503, 'Service Unavailable']);
      assert.deepStrictEqual([refused.policy, refused.rateLimit, refused.retryAfter], [null, null, null]);
    });
  });
}

// A request that cannot be keyed: its key read from a header the client left
// out. Let through unlimited, any client could skip the limit by leaving the
// header out: refused (500) instead, and charged nothing. A Policy read
// nothing as {} and counted the request under its global limits only.
const unkeyable = {
  key: () => ({
    limiter: new KeyedLimiter(new FixedWindow({ limit: 5, windowMs: 60_000, name: 'per-client' })),
    key: (request) => request.headers['x-client'],
  }),
  fields: () => ({
    limiter: new Policy({ limits: [{ name: 'per-client', algorithm: 'fixed_window', rate: '5/minute' }] }),
    fields: (request) => (request.headers['x-client'] === undefined ? null : { client: request.headers['x-client'] }),
  }),
};

for (const [framework, serve, close] of frameworks) {
  for (const [option, make] of Object.entries(unkeyable)) {
    for (const [how, wrap] of [['sync', (f) => f], ['async', (f) => async (request) => f(request)]]) {
      describe(`${framework}: \`${option}\` returning nothing (${how})`, () => {
        const server = {};
        before(() => {
          const options = make();
          return serve(server, { ...options, [option]: wrap(options[option]) });
        });
        after(() => close(server));
        it('fails the request (500, naming the option), never lets it through, and charges nothing', async () => {
          const refused = await get(server.url, undefined);
          assert.equal(refused.status, 500);
          assert.match(refused.body, new RegExp(`\`${option}\` returned (undefined|null): a request that cannot be keyed is refused`));
          assert.deepStrictEqual([refused.policy, refused.rateLimit], [null, null]);
          const keyed = await get(server.url, 'alice');
          assert.equal(keyed.status, 200);
          assert.match(keyed.rateLimit, /^"per-client";r=4;t=\d+$/);
        });
      });
    }
  }
}

// `skip`: how requests are exempted (health checks), since a key of nothing
// is refused. A skipped request goes on undecided: no headers, no charge.
for (const [framework, serve, close] of frameworks) {
  for (const [how, wrap] of [['sync', (f) => f], ['async', (f) => async (request) => f(request)]]) {
    describe(`${framework}: \`skip\` (${how})`, () => {
      const server = {};
      before(() => serve(server, {
        limiter: new KeyedLimiter(new FixedWindow({ limit: 1, windowMs: 60_000, name: 'per-client' })),
        key: (request) => request.headers['x-client'],
        skip: wrap((request) => {
          if (request.headers['x-skip'] === 'odd') return 'yes';
          return request.headers['x-skip'] === 'true' || request.headers['x-client'] === undefined;
        }),
      }));
      after(() => close(server));
      it('lets a skipped request through without headers, charging nothing', async () => {
        const skipped = { 'x-client': 'alice', 'x-skip': 'true' };
        for (let i = 0; i < 3; i++) {
          const response = await fetch(server.url, { headers: skipped });
          assert.equal(response.status, 200);
          assert.deepStrictEqual([response.headers.get('ratelimit'), response.headers.get('ratelimit-policy')], [null, null]);
          assert.equal(await response.text(), 'hello');
        }
        // No key, skipped: not refused as unkeyable.
        assert.equal((await get(server.url, undefined)).status, 200);
        // Alice's one request is still hers: nothing was charged.
        const first = await get(server.url, 'alice');
        assert.equal(first.status, 200);
        assert.match(first.rateLimit, /^"per-client";r=0;t=\d+$/);
        assert.equal((await get(server.url, 'alice')).status, 429);
      });
      it('fails a request whose skip answers no boolean (500, naming skip)', async () => {
        const response = await fetch(server.url, { headers: { 'x-client': 'bob', 'x-skip': 'odd' } });
        assert.equal(response.status, 500);
        assert.match(await response.text(), /`skip` must return a boolean, not string/);
        assert.equal((await get(server.url, 'bob')).status, 200);
      });
    });
  }
}

// A HEAD request gets the fields GET would (RFC 9110), Content-Length too,
// as the ASGI middleware sends it: Express's answer to HEAD had none.
for (const [framework, serve, close] of frameworks) {
  describe(`${framework}: a HEAD request it answers itself`, () => {
    const server = {};
    // One request per client, and one client: bob's is refused (503).
    before(() => serve(server, {
      limiter: new KeyedLimiter(new FixedWindow({ limit: 1, windowMs: 60_000 }), { maxKeys: 1, eviction: 'refuse' }),
      key: (request) => request.headers['x-client'],
    }));
    after(() => close(server));
    it("carries GET's Content-Length and no content, for 429 and 503", async () => {
      const lengths = async (client, status) => {
        const answers = [];
        for (const method of ['HEAD', 'GET']) {
          const response = await fetch(server.url, { method, headers: { 'x-client': client } });
          assert.equal(response.status, status);
          answers.push([response.headers.get('content-length'), await response.text()]);
        }
        return answers;
      };
      assert.equal((await get(server.url, 'alice')).status, 200);
      assert.deepStrictEqual(await lengths('alice', 429), [['17', ''], ['17', 'Too Many Requests']]);
      assert.deepStrictEqual(await lengths('bob', 503), [['19', ''], ['19', 'Service Unavailable']]);
    });
  });
}

// Fastify's `handlerTimeout` runs from the request's start, its hooks
// included: a slow `key` (a session store, a Redis round trip) may still be
// pending when Fastify answers 503 itself. The hook then answered the sent
// reply again (a denial's 429), and Fastify logged "Reply was already sent,
// did you forget to "return reply" in "/" (GET)?", blaming the route.
describe('fastifyHook: a reply Fastify already sent (handlerTimeout) while the key was pending', () => {
  for (const denied of [false, true]) {
    it(`is left as it is (${denied ? 'denied' : 'allowed'}): no second answer, nothing logged of it`, async () => {
      const limiter = new KeyedLimiter(new FixedWindow({ limit: 1, windowMs: 60_000 }));
      if (denied) limiter.tryAcquire('alice');
      let release;
      const keyed = new Promise((resolve) => (release = resolve));
      const logged = [];
      const app = Fastify({ handlerTimeout: 20, logger: { level: 'warn', stream: { write: (line) => logged.push(JSON.parse(line)) } } });
      app.addHook('onRequest', fastifyHook({ limiter, key: () => keyed }));
      let handled = 0;
      app.get('/', async () => {
        handled++;
        return 'hello';
      });
      await app.listen({ port: 0, host: '127.0.0.1' });
      try {
        const timedOut = await get(`http://127.0.0.1:${app.server.address().port}/`, 'alice');
        assert.equal(timedOut.status, 503);
        assert.equal(timedOut.rateLimit, null);
        // The key comes once Fastify has answered: the hook decides a request already answered.
        release('alice');
        await keyed;
        await new Promise((resolve) => setImmediate(resolve));
        assert.equal(limiter.peek('alice', 0).remaining, 0, 'decided');
        assert.equal(handled, 0);
        assert.deepStrictEqual(logged.map((entry) => entry.err?.code ?? entry.msg).filter((what) => what !== 'FST_ERR_HANDLER_TIMEOUT'), []);
      } finally {
        await app.close();
      }
    });
  }
});

describe('the helpers check their options', () => {
  for (const helper of [middleware, fastifyHook]) {
    it(`${helper.name}: a KeyedLimiter, a Policy or a limiter, and functions`, () => {
      const limiter = new KeyedLimiter(new FixedWindow({ limit: 1, windowMs: 1000 }));
      assertLimiterError(() => helper(), 'invalid_type', 'options');
      assertLimiterError(() => helper({ key: () => 'k' }), 'invalid_type', 'limiter');
      assertLimiterError(() => helper({ limiter: 42 }), 'invalid_type', 'limiter');
      assert.throws(() => helper({ limiter: {} }), /^TypeError: `limiter` must be a ratekeeper KeyedLimiter, Policy or limiter$/);
      // The limiter given for the options: said so, where the error named `limiter` as missing.
      for (const given of [limiter, Policy.fromRates('1/second'), new FixedWindow({ limit: 1, windowMs: 1000 })]) {
        assertLimiterError(() => helper(given), 'invalid_type', 'options');
        assert.throws(() => helper(given), /pass \{ limiter \}$/);
      }
      assertLimiterError(() => helper({ limiter, key: 'k' }), 'invalid_type', 'key');
      assertLimiterError(() => helper({ limiter, key: () => 'k', cost: '2' }), 'invalid_type', 'cost');
      assertLimiterError(() => helper({ limiter, key: () => 'k', skip: true }), 'invalid_type', 'skip');
      assertLimiterError(() => helper({ limiter: Policy.fromRates('1/second'), fields: 1 }), 'invalid_type', 'fields');
      // An option of the other kind of limiter would be ignored: refused.
      assertLimiterError(() => helper({ limiter: Policy.fromRates('1/second'), key: () => 'k' }), 'invalid_type', 'key');
      assertLimiterError(() => helper({ limiter, key: () => 'k', fields: () => ({}) }), 'invalid_type', 'fields');
      // The same errors as the ASGI middleware's (test_asgi.py), whose messages these are.
      assert.throws(() => helper({ limiter: Policy.fromRates('1/second'), key: () => 'k' }), /^TypeError: `key` is for a KeyedLimiter: a Policy takes `fields`$/);
      assert.throws(() => helper({ limiter, fields: () => ({}) }), /^TypeError: `fields` is for a Policy: a KeyedLimiter takes `key`$/);
      // A policy keyed by a field the default fields lack would fail every
      // request with tryAcquire's RangeError: thrown at once instead.
      const keyed = Policy.fromRates('1/second', { by: ['ip'] });
      assertLimiterError(() => helper({ limiter: keyed }), 'invalid_value', 'fields');
      assert.throws(() => helper({ limiter: keyed }), /^RangeError: `fields` must be given: limit "1\/second" of `limiter` is keyed by "ip", which the default fields \(client, method, path\) lack$/);
      helper({ limiter: keyed, fields: (req) => ({ ip: req.ip }) });
      helper({ limiter: Policy.fromRates('1/second') });
      // Defaults: a KeyedLimiter's key is the client's address, a Policy's
      // fields client, method and path. A key was required, and a keyed
      // Policy's fields.
      helper({ limiter });
      helper({ limiter: Policy.fromRates('1/second', { by: ['client', 'method', 'path'] }) });
    });

    it(`${helper.name}: one limiter every request shares, which takes neither \`key\` nor \`fields\``, () => {
      // It was refused ("a KeyedLimiter or a Policy"), where the ASGI middleware takes it.
      const shared = new FixedWindow({ limit: 1, windowMs: 1000 });
      helper({ limiter: shared });
      helper({ limiter: shared, cost: (req) => 1, skip: () => false });
      assertLimiterError(() => helper({ limiter: shared, key: () => 'k' }), 'invalid_type', 'key');
      assertLimiterError(() => helper({ limiter: shared, fields: () => ({}) }), 'invalid_type', 'fields');
      assert.throws(
        () => helper({ limiter: shared, key: () => 'k' }),
        /^TypeError: `key` is for a KeyedLimiter: one limiter that every request shares takes neither `key` nor `fields` \(pass new KeyedLimiter\(limiter\) for one per key\)$/,
      );
      assertLimiterError(() => helper({ limiter: shared, cost: 2 }), 'cost_exceeds_limit', 'cost');
      assert.equal(shared.peek(0).remaining, 1);
    });

    it(`${helper.name}: null for \`key\`, \`fields\` or \`skip\` is the default, as the ASGI middleware's None`, () => {
      // RateLimitMiddleware(app, limiter, key=None, fields=None, skip=None)
      // is the middleware of no key, fields or skip of one's own; these
      // threw a TypeError (`key` must be a function) for the same options.
      const keyed = new KeyedLimiter(new FixedWindow({ limit: 2, windowMs: 60_000 }));
      const byAddress = helper({ limiter: keyed, key: null, fields: null, skip: null });
      assert.equal(byAddress.decide({ ip: '203.0.113.7' }).remaining, 1);
      assert.equal(keyed.peek('203.0.113.7', 0).remaining, 1);
      assert.equal(byAddress.skips({ ip: '203.0.113.7' }), false);
      const policy = Policy.fromRates('2/minute', { by: ['client', 'path'] });
      const byFields = helper({ limiter: policy, key: null, fields: null, skip: null });
      assert.equal(byFields.decide({ ip: '203.0.113.7', method: 'GET', url: '/a' }).remaining, 1);
      assert.equal(policy.peek({ client: '203.0.113.7', path: '/a' }, 0).remaining, 1);
      const shared = new FixedWindow({ limit: 2, windowMs: 60_000 });
      assert.equal(helper({ limiter: shared, key: null, fields: null, skip: null }).decide({}).remaining, 1);
      // ipv6Subnet stays a number or false: null could read as Python's None (each address whole) or the default.
      assertLimiterError(() => helper({ limiter: keyed, ipv6Subnet: null }), 'invalid_type', 'ipv6Subnet');
    });

    it(`${helper.name}: null for \`cost\` is its default, 1, as every optional argument's null is`, () => {
      // It was a TypeError (`cost` must be a number or a function), where
      // tryAcquire(null) costs 1 (Python refuses cost=None: its default is a value).
      const keyed = new KeyedLimiter(new FixedWindow({ limit: 3, windowMs: 60_000 }));
      assert.equal(helper({ limiter: keyed, cost: null }).decide({ ip: '203.0.113.7' }).remaining, 2);
      const policy = Policy.fromRates('3/minute', { by: ['client'] });
      assert.equal(helper({ limiter: policy, cost: null }).decide({ ip: '203.0.113.7', method: 'GET', url: '/' }).remaining, 2);
      const shared = new FixedWindow({ limit: 3, windowMs: 60_000 });
      const helped = helper({ limiter: shared, cost: null, key: null, fields: null, skip: null });
      assert.equal(helped.decide({}).remaining, 2);
      assert.equal(helped.decide({}).remaining, 1);
      // Another type keeps its error.
      assertLimiterError(() => helper({ limiter: shared, cost: '1' }), 'invalid_type', 'cost');
    });
  }

  it('an answer that cannot be written goes to next(error), as does a rejected key', async () => {
    const limiter = new KeyedLimiter(new FixedWindow({ limit: 1, windowMs: 1000 }));
    const sent = { statusCode: 200, setHeader() { throw Object.assign(new Error('sent'), { code: 'ERR_HTTP_HEADERS_SENT' }); }, end() {} };
    const errors = [];
    middleware({ limiter, key: () => 'k' })({}, sent, (e) => errors.push(e));
    assert.deepStrictEqual(errors.map((e) => e?.code), ['ERR_HTTP_HEADERS_SENT']);
    const failed = await new Promise((resolve) => {
      middleware({ limiter, key: () => Promise.reject(new Error('store down')) })({}, sent, resolve);
    });
    assert.equal(failed.message, 'store down');
    const replies = [];
    const reply = { headers() { throw new Error('sent'); }, code: () => reply, type: () => reply, send() {} };
    fastifyHook({ limiter, key: () => 'k' })({}, reply, (e) => replies.push(e?.message));
    assert.deepStrictEqual(replies, ['sent']);
  });

  it('a key function throwing or rejecting with no Error still goes to next(error), never lets the request through', async () => {
    // next(undefined) and done(null) read as "go on", next('route') as "skip
    // the route": such a throw let every request through, unlimited.
    const limiter = new KeyedLimiter(new FixedWindow({ limit: 1, windowMs: 1000 }));
    const res = { setHeader() {}, end() {} };
    const reasons = [undefined, null, 'route', 0, Object.create(null)];
    for (const reason of reasons) {
      for (const key of [() => { throw reason; }, () => Promise.reject(reason)]) {
        const [viaExpress, viaFastify] = await Promise.all([
          new Promise((resolve) => middleware({ limiter, key })({}, res, resolve)),
          new Promise((resolve) => fastifyHook({ limiter, key })({}, {}, resolve)),
        ]);
        for (const error of [viaExpress, viaFastify]) {
          assert.ok(error instanceof Error, `a ${typeof reason} thrown`);
          assert.equal(error.cause, reason);
          assert.match(error.message, /key, fields or cost failed/);
        }
      }
    }
  });

  it('a key that is not a string, a number or a Uint8Array goes to next(error)', () => {
    const errors = [];
    const res = { setHeader() {}, end() {} };
    const limiter = new KeyedLimiter(new FixedWindow({ limit: 1, windowMs: 1000 }));
    middleware({ limiter, key: () => ({}) })({}, res, (e) => errors.push(e));
    middleware({ limiter, key: () => new DataView(new ArrayBuffer(1)) })({}, res, (e) => errors.push(e));
    assert.deepStrictEqual(errors.map((e) => [e.name, e.code, e.message]), Array(2).fill(['TypeError', 'invalid_type', '`key` must be a string, a number or a Uint8Array']));
  });

  it("a key or a request's field answered as bytes counts as the string of its UTF-8; other bytes as their own", async () => {
    for (const helper of [middleware, fastifyHook]) {
      const limiter = new KeyedLimiter(new FixedWindow({ limit: 1, windowMs: 60_000 }));
      const byKey = helper({ limiter, key: async (request) => request.key });
      assert.equal((await byKey.decide({ key: Buffer.from('alice') })).allowed, true, helper.name);
      assert.equal((await byKey.decide({ key: 'alice' })).allowed, false, `${helper.name}: the same key`);
      assert.equal((await byKey.decide({ key: new Uint8Array([0xff]) })).allowed, true, `${helper.name}: bytes of their own`);
      assert.equal((await byKey.decide({ key: Buffer.from([0xff]) })).allowed, false, `${helper.name}: the same bytes`);
      const policy = new Policy({ limits: [{ name: 'u', by: ['user'], limiter: new FixedWindow({ limit: 1, windowMs: 60_000 }) }] });
      const byFields = helper({ limiter: policy, fields: (request) => ({ user: request.key }) });
      assert.equal(byFields.decide({ key: new TextEncoder().encode('bob') }).allowed, true, helper.name);
      assert.equal(byFields.decide({ key: 'bob' }).allowed, false, `${helper.name}: the same field`);
    }
  });
});

// A fixed cost, as the ASGI middleware takes an int: charged to every
// request. Only a function was taken (a number was a TypeError).
for (const [framework, serve, close] of frameworks) {
  for (const [what, make] of Object.entries({
    keyed: () => ({ limiter: new KeyedLimiter(new FixedWindow({ limit: 5, windowMs: 60_000, name: 'per-client' })), key: (request) => request.headers['x-client'] }),
    policy: () => ({ limiter: Policy.fromConfig({ limits: [{ name: 'per-client', algorithm: 'fixed_window', rate: '5/minute', by: ['client'] }] }), fields: (request) => ({ client: request.headers['x-client'] }) }),
  })) {
    describe(`${framework}: a fixed cost (${what})`, () => {
      const server = {};
      before(() => serve(server, { ...make(), cost: 2 }));
      after(() => close(server));
      it('charges every request that many units', async () => {
        const first = await get(server.url, 'alice');
        assert.equal(first.status, 200);
        assert.match(first.rateLimit, /^"per-client";r=3;t=\d+$/);
        assert.match((await get(server.url, 'alice')).rateLimit, /^"per-client";r=1;t=\d+$/);
        const denied = await get(server.url, 'alice');
        assert.equal(denied.status, 429);
        assert.match(denied.rateLimit, /^"per-client";r=1;t=\d+$/);
      });
    });
  }
}

describe('a fixed cost is checked when the helper is made, as the ASGI middleware checks its own', () => {
  for (const helper of [middleware, fastifyHook]) {
    it(`${helper.name}: tryAcquire's errors, naming \`cost\`, and nothing charged`, () => {
      const limiter = new KeyedLimiter(new FixedWindow({ limit: 2, windowMs: 60_000 }));
      const policy = Policy.fromRates('2/minute', { by: ['user'] });
      for (const [options, cost, code] of [
        [{ limiter, key: () => 'k' }, 3, 'cost_exceeds_limit'],
        [{ limiter: policy, fields: () => ({ user: 'u' }) }, 3, 'cost_exceeds_limit'],
        [{ limiter, key: () => 'k' }, -1, 'invalid_value'],
        [{ limiter, key: () => 'k' }, 1.5, 'invalid_value'],
        [{ limiter, key: () => 'k' }, NaN, 'invalid_value'],
        [{ limiter: policy, fields: () => ({ user: 'u' }) }, Infinity, 'invalid_value'],
        [{ limiter, key: () => 'k' }, 2n, 'invalid_type'],
      ]) {
        assertLimiterError(() => helper({ ...options, cost }), code, 'cost', String(cost));
      }
      assert.equal(limiter.size, 0);
      assert.equal(policy.peek({ user: 'u' }, 1).remaining, 1);
      // Within the limit: taken, with a cost of 0 too. A store too full for
      // a new key refuses no cost: taken.
      helper({ limiter, key: () => 'k', cost: 2 });
      helper({ limiter, key: () => 'k', cost: 0 });
      const full = new KeyedLimiter(new FixedWindow({ limit: 2, windowMs: 60_000 }), { maxKeys: 1, eviction: 'refuse' });
      full.tryAcquire('held');
      helper({ limiter: full, key: () => 'k', cost: 2 });
      assertLimiterError(() => helper({ limiter: full, key: () => 'k', cost: 3 }), 'cost_exceeds_limit', 'cost');
      assert.equal(full.size, 1);
    });
  }
});

describe('a cost function that returns no number', () => {
  it('goes to next(error) / done(error) naming `cost`, charging nothing: it was read as a cost of 1', async () => {
    // tryAcquire reads an undefined or null cost as its default: such a
    // request was charged 1, whatever the function meant to charge.
    const res = { setHeader() {}, end() {} };
    const reply = { headers() {}, code: () => reply, type: () => reply, send() {} };
    for (const answer of [undefined, null, '2']) {
      for (const [what, cost] of [['sync', () => answer], ['async', async () => answer]]) {
        const limiter = new KeyedLimiter(new FixedWindow({ limit: 5, windowMs: 60_000 }));
        const [viaExpress, viaFastify] = await Promise.all([
          new Promise((resolve) => middleware({ limiter, key: () => 'k', cost })({}, res, resolve)),
          new Promise((resolve) => fastifyHook({ limiter, key: () => 'k', cost })({}, reply, resolve)),
        ]);
        for (const error of [viaExpress, viaFastify]) {
          checkLimiterError(error, 'invalid_type', 'cost', `${what} ${answer}`);
        }
        assert.equal(limiter.peek('k', 0).remaining, 5, `${what} ${answer}: nothing charged`);
      }
    }
  });
});

// Two helpers in a row, as an app limits every route and then one of them:
// a response is limited by both, and lists both limits, as two stacked ASGI
// middlewares list theirs. The second helper's headers replaced the first's.
const stacked = () => [
  { limiter: new KeyedLimiter(new FixedWindow({ limit: 100, windowMs: 60_000, name: 'global' })), key: () => 'everyone' },
  { limiter: new KeyedLimiter(new FixedWindow({ limit: 1, windowMs: 60_000, name: 'login' })), key: (request) => request.headers['x-client'] },
];

for (const [framework, serve, close] of frameworks) {
  describe(`${framework}: two in a row`, () => {
    const server = {};
    before(() => serve(server, stacked()));
    after(() => close(server));
    it("each response lists both limiters' items, the 429 too", async () => {
      const first = await get(server.url, 'alice');
      assert.equal(first.status, 200);
      assert.equal(first.policy, '"global";q=100;w=60, "login";q=1;w=60');
      assert.match(first.rateLimit, /^"global";r=99;t=\d+, "login";r=0;t=\d+$/);
      assert.equal(first.retryAfter, null);
      const denied = await get(server.url, 'alice');
      assert.equal(denied.status, 429);
      assert.equal(denied.policy, '"global";q=100;w=60, "login";q=1;w=60');
      assert.match(denied.rateLimit, /^"global";r=98;t=\d+, "login";r=0;t=\d+$/);
      const retry = Number(denied.retryAfter);
      assert.ok(Number.isInteger(retry) && retry >= 1 && retry <= 60, `Retry-After ${denied.retryAfter}`);
    });
  });
}

// A Retry-After already set (by the app, before the helper) is one value:
// a denial's replaces it. Listed with it as a RateLimit item is, it read
// "3600, 60", which is no Retry-After at all.
describe('a Retry-After set before a helper denies', () => {
  for (const helper of [middleware, fastifyHook]) {
    it(`${helper.name}: is replaced by the denial's, where RateLimit's items are listed after the earlier ones`, () => {
      const limiter = new KeyedLimiter(new FixedWindow({ limit: 1, windowMs: 60_000, name: 'login' }));
      limiter.tryAcquire('alice');
      const headers = { 'Retry-After': '3600', RateLimit: '"earlier";r=5;t=10' };
      const getHeader = (name) => headers[name];
      const passed = () => assert.fail('the denied request went on');
      const handler = helper({ limiter, key: () => 'alice' });
      if (helper === middleware) {
        handler({}, { statusCode: 200, setHeader: (name, value) => (headers[name] = value), getHeader, end() {} }, passed);
      } else {
        const reply = { sent: false, getHeader, headers: (set) => Object.assign(headers, set), code: () => reply, type: () => reply, send: () => (reply.sent = true) };
        handler({}, reply, passed);
      }
      assert.match(headers.RateLimit, /^"earlier";r=5;t=10, "login";r=0;t=\d+$/);
      assert.match(headers['Retry-After'], /^\d+$/);
      assert.notEqual(headers['Retry-After'], '3600');
    });
  }
});

// An empty address is no address: refused as an unknown one is, rather
// than keyed '' (one key that every such request would share). So is a
// framework's `ip` of null: its socket's peer, a proxy say, is not read
// instead (every client behind it would share its key).
describe('the default key or fields, for an empty client address', () => {
  for (const helper of [middleware, fastifyHook]) {
    it(`${helper.name}: refuses the request as of an unknown address, charging nothing`, () => {
      const keyed = new KeyedLimiter(new FixedWindow({ limit: 5, windowMs: 60_000 }));
      const policy = Policy.fromRates('5/minute', { by: ['client'] });
      for (const request of [{ ip: '' }, { socket: { remoteAddress: '' } }, { ip: null, socket: { remoteAddress: '10.0.0.1' } }]) {
        assert.throws(() => helper({ limiter: keyed }).decide(request), { name: 'TypeError', code: 'invalid_type', message: /the client's address, read by the default `key`, is unknown/ });
        assert.throws(() => helper({ limiter: policy }).decide({ ...request, method: 'GET', url: '/' }), { name: 'TypeError', code: 'invalid_type', message: /read by the default `fields`, is unknown/ });
      }
      assert.equal(keyed.size, 0);
      assert.equal(policy.peek({ client: '' }, 0).remaining, 5);
    });
  }
});

// After an async `key`, `fields`, `cost` or `skip`, the request goes on
// outside the promise: an error that next() or done() throws is then the
// runtime's to report (an uncaught exception, as from any callback), not a
// rejection that nobody handles.
describe('an error thrown further down the chain after an async key', () => {
  for (const helper of ['middleware', 'fastifyHook']) {
    it(`${helper}: is an uncaught exception, not an unhandled rejection`, () => {
      const { spawnSync } = require('node:child_process');
      const script = `
        const { ${helper}, FixedWindow, KeyedLimiter } = require(${JSON.stringify(join(__dirname, 'impl.cjs'))});
        process.on('uncaughtException', (error) => console.log('uncaught: ' + error.message));
        process.on('unhandledRejection', (error) => console.log('unhandled rejection: ' + error.message));
        const handler = ${helper}({ limiter: new KeyedLimiter(new FixedWindow({ limit: 5, windowMs: 60000 })), key: async () => 'k' });
        const response = { statusCode: 200, setHeader() {}, getHeader() {}, end() {} };
        const reply = { sent: false, getHeader() {}, headers() {} };
        handler({}, ${helper === 'middleware' ? 'response' : 'reply'}, (error) => {
          if (error === undefined) throw new Error('the chain failed');
        });
      `;
      const run = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', env: process.env });
      assert.equal(run.status, 0, run.stderr);
      assert.equal(run.stdout, 'uncaught: the chain failed\n');
    });
  }
});

/** A request made with node:http (`options`: a socketPath, a path fetch would not send as is): status, body and RateLimit. */
function rawGet(options) {
  return new Promise((resolve, reject) => {
    // No keep-alive agent: its pooled sockets outlive the servers here.
    http.get({ agent: false, ...options }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk) => (body += chunk));
      response.on('end', () => resolve({ status: response.statusCode, body, rateLimit: response.headers.ratelimit ?? null }));
    }).on('error', reject);
  });
}

// Without `key` or `fields`, the helpers limit by the client's address (and
// for a Policy its method and path too), as the ASGI middleware and
// express-rate-limit do. A KeyedLimiter needed a `key`, and a Policy read
// the request as {}, so that a keyed one needed `fields`.
for (const [framework, serve, close] of frameworks) {
  describe(`${framework}: the default key, the client's address`, () => {
    const server = {};
    const limiter = new KeyedLimiter(new FixedWindow({ limit: 1, windowMs: 60_000, name: 'per-client' }));
    before(() => serve(server, { limiter }));
    after(() => close(server));
    it('limits each address', async () => {
      const first = await get(server.url, 'alice');
      assert.equal(first.status, 200);
      assert.match(first.rateLimit, /^"per-client";r=0;t=\d+$/);
      // Another header, the same address: the same key.
      assert.equal((await get(server.url, 'bob')).status, 429);
      assert.equal(limiter.size, 1);
      assert.equal(limiter.peek('127.0.0.1', 0).remaining, 0);
    });
  });

  describe(`${framework}: a Policy's default fields, client, method and path`, () => {
    const server = {};
    const policy = new Policy({
      limits: [{ name: 'per-route', algorithm: 'fixed_window', rate: '1/minute', by: ['client', 'method', 'path'] }],
    });
    before(() => serve(server, { limiter: policy }));
    after(() => close(server));
    it("are the ASGI middleware's request_fields: the path without its query, percent-decoded", async () => {
      const url = new URL(server.url);
      // The app answers 404 here: the helper decided the request first.
      const first = await get(new URL('/caf%C3%A9?page=1', url));
      assert.match(first.rateLimit, /^"per-route";r=0;t=\d+$/);
      assert.equal((await get(new URL('/caf%C3%A9?page=2', url))).status, 429);
      // An absolute-form target names the same path: no new key per host named.
      const absolute = await rawGet({ host: '127.0.0.1', port: url.port, path: 'http://elsewhere.example/caf%C3%A9' });
      assert.equal(absolute.status, 429);
      // A fragment (never sent by browsers, but by any raw client) is no part
      // of the path Express and Fastify route by: it made a new key per
      // fragment, a fresh limit for a route each time.
      for (const target of ['/caf%C3%A9#1', '/caf%C3%A9#2?page=3']) {
        assert.equal((await rawGet({ host: '127.0.0.1', port: url.port, path: target })).status, 429, target);
      }
      // An absolute-form target without a path names "/", as both route it: it was a path "" of its own.
      assert.equal((await get(new URL('/', url))).status, 200);
      for (const target of ['http://elsewhere.example', 'http://elsewhere.example?page=2']) {
        assert.equal((await rawGet({ host: '127.0.0.1', port: url.port, path: target })).status, 429, target);
      }
      // An encoded '#' is a character of the path, as in the ASGI scope: another path.
      assert.equal((await get(new URL('/caf%C3%A9%231', url))).status, 404);
      assert.equal(policy.peek({ client: '127.0.0.1', method: 'GET', path: '/café#1' }, 0).remaining, 0);
      assert.equal((await get(new URL('/caf%C3%A9', url), undefined, 'POST')).status, 404);
      assert.equal((await get(new URL('/tea', url))).status, 404);
      const request = { client: '127.0.0.1', method: 'GET', path: '/café' };
      assert.equal(policy.peek(request, 0).remaining, 0);
      assert.equal(policy.peek({ ...request, method: 'POST' }, 0).remaining, 0);
      assert.equal(policy.peek({ ...request, path: '/tea' }, 0).remaining, 0);
      assert.equal(policy.peek({ ...request, path: '/caf%C3%A9' }, 0).remaining, 1);
      assert.equal(policy.peek({ ...request, method: 'HEAD' }, 0).remaining, 1);
    });
  });
}

// The default key of an IPv6 client is its network, /56 unless `ipv6Subnet`
// says otherwise (ip-key.test.cjs has the cases): each address was a key of
// its own, so that a client taking a new address within its network, as one
// may at will, got a fresh limit with each. The servers trust the test as
// their proxy (it connects from 127.0.0.1), whose X-Forwarded-For names each
// client: Express's req.ip and Fastify's request.ip read it, as they read
// the socket's address, without the machine needing IPv6.
const proxied = [
  ['middleware', async (server, options) => {
    const app = express();
    app.set('trust proxy', 'loopback');
    app.use(middleware(options));
    app.all('/', (req, res) => res.type('text/plain').send('hello'));
    await new Promise((resolve) => (server.http = app.listen(0, '127.0.0.1', resolve)));
    server.url = `http://127.0.0.1:${server.http.address().port}/`;
    server.close = () => new Promise((resolve) => server.http.close(resolve));
  }],
  ['fastifyHook', async (server, options) => {
    const app = Fastify({ logger: false, trustProxy: '127.0.0.1' });
    app.addHook('onRequest', fastifyHook(options));
    app.all('/', async (request, reply) => reply.type('text/plain').send('hello'));
    await app.listen({ port: 0, host: '127.0.0.1' });
    server.url = `http://127.0.0.1:${app.server.address().port}/`;
    server.close = () => app.close();
  }],
];

/** The statuses of one request from each of `clients` in turn, named by X-Forwarded-For. */
async function statusesFrom(url, clients) {
  const statuses = [];
  for (const client of clients) statuses.push((await fetch(url, { headers: { 'x-forwarded-for': client } })).status);
  return statuses;
}

for (const [framework, serve] of proxied) {
  describe(`${framework}: the default key of an IPv6 client, its /56`, () => {
    const server = {};
    const limiter = new KeyedLimiter(new FixedWindow({ limit: 1, windowMs: 60_000, name: 'per-client' }));
    before(() => serve(server, { limiter }));
    after(() => server.close());
    it('limits two addresses of one /56 together, and another /56 apart', async () => {
      const siblings = ['2001:db8:1234:5601::1', '2001:db8:1234:56ff:abcd::2', '2001:DB8:1234:5600::3'];
      assert.deepStrictEqual(await statusesFrom(server.url, siblings), [200, 429, 429]);
      assert.equal(limiter.peek('2001:db8:1234:5600::/56', 0).remaining, 0);
      // An IPv4 client of a server listening on `::`, as Node reports it, keys as its IPv4 address.
      assert.deepStrictEqual(await statusesFrom(server.url, ['2001:db8:1234:5700::1', '::ffff:203.0.113.7', '203.0.113.7']), [200, 200, 429]);
      assert.equal(limiter.peek('203.0.113.7', 0).remaining, 0);
      assert.equal(limiter.size, 3);
    });
  });

  describe(`${framework}: a Policy's default client field of an IPv6 client, its /56`, () => {
    const server = {};
    const policy = Policy.fromRates('1/minute', { by: ['client'] });
    before(() => serve(server, { limiter: policy }));
    after(() => server.close());
    it('limits two addresses of one /56 together', async () => {
      assert.deepStrictEqual(await statusesFrom(server.url, ['2001:db8:1234:5601::1', '2001:db8:1234:56ff::2', '2001:db8:1234:5700::1']), [200, 429, 200]);
      assert.equal(policy.peek({ client: '2001:db8:1234:5600::/56' }, 0).remaining, 0);
    });
  });

  for (const [ipv6Subnet, statuses] of [
    [64, [200, 429, 200, 200]],
    [48, [200, 429, 429, 200]],
    // Each address whole (in canonical text: 2001:db8:0:1::0001 is 2001:db8:0:1::1).
    [false, [200, 429, 200, 200]],
  ]) {
    describe(`${framework}: ipv6Subnet ${ipv6Subnet}`, () => {
      const server = {};
      const limiter = new KeyedLimiter(new FixedWindow({ limit: 1, windowMs: 60_000 }));
      before(() => serve(server, { limiter, ipv6Subnet }));
      after(() => server.close());
      it('sets the network the default key reads', async () => {
        const clients = ['2001:db8:0:1::1', '2001:db8:0:1:0:0:0:0001', ipv6Subnet === false ? '2001:db8:0:1::2' : '2001:db8:0:2::1', '2001:db9::1'];
        assert.deepStrictEqual(await statusesFrom(server.url, clients), statuses);
      });
    });
  }
}

// A server without `request.ip` (plain node:http, Connect, Polka): the
// default key is the socket's peer address. It was undefined, and every
// request failed (500).
describe('middleware on a plain node:http server: the default key, the peer address', () => {
  const limiter = new KeyedLimiter(new FixedWindow({ limit: 1, windowMs: 60_000, name: 'per-peer' }));
  const handle = middleware({ limiter });
  let server;
  before(async () => {
    server = http.createServer((req, res) => handle(req, res, (error) => {
      res.statusCode = error === undefined ? 200 : 500;
      res.end(error === undefined ? 'hello' : failure(error));
    }));
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  });
  after(() => new Promise((resolve) => server.close(resolve)));
  it('limits each peer address', async () => {
    const url = `http://127.0.0.1:${server.address().port}/`;
    const first = await get(url);
    assert.equal(first.status, 200, first.body);
    assert.match(first.rateLimit, /^"per-peer";r=0;t=\d+$/);
    assert.equal((await get(url)).status, 429);
    assert.equal(limiter.size, 1);
    assert.equal(limiter.peek('127.0.0.1', 0).remaining, 0);
  });
});

// A client whose address is unknown (a Unix socket's, here) cannot be
// keyed by it: refused, as for a `key` that returns nothing, not counted
// under one key that every such request would share.
for (const [framework, serve, close] of frameworks) {
  for (const [what, limiter, option] of [
    ['KeyedLimiter', () => new KeyedLimiter(new FixedWindow({ limit: 5, windowMs: 60_000 })), 'key'],
    ['Policy', () => Policy.fromRates('5/minute', { by: ['client'] }), 'fields'],
  ]) {
    describe(`${framework}: a ${what} with the default ${option}, for a client of unknown address`, () => {
      const server = {};
      const socketPath = join(tmpdir(), `ratekeeper-middleware-${process.pid}-${framework}-${what}.sock`);
      const made = limiter();
      before(() => {
        rmSync(socketPath, { force: true });
        return serve(server, { limiter: made }, socketPath);
      });
      after(async () => {
        await close(server);
        rmSync(socketPath, { force: true });
      });
      it(`fails the request (500, naming \`${option}\` and the unknown address) and charges nothing`, async () => {
        const refused = await rawGet({ socketPath, path: '/' });
        assert.equal(refused.status, 500);
        // The ASGI middleware's words. Not "`key` returned undefined": the app
        // passed no `key`, and behind a proxy over a Unix socket every request fails so.
        assert.equal(
          refused.body,
          `TypeError (invalid_type): the client's address, read by the default \`${option}\`, is unknown (a Unix socket's client, say): ` +
            `behind a proxy, let the server trust its forwarded address, or pass \`${option}\`; a request that cannot be keyed is refused, not let through unlimited`,
        );
        assert.equal(refused.rateLimit, null);
        if (what === 'KeyedLimiter') assert.equal(made.size, 0);
        else assert.equal(made.peek({ client: '' }, 0).remaining, 5);
      });
    });
  }
}

// One limiter that every request shares, as the ASGI middleware takes one:
// it was refused ("a KeyedLimiter or a Policy").
for (const [framework, serve, close] of frameworks) {
  describe(`${framework}: one limiter every request shares`, () => {
    const server = {};
    const shared = new FixedWindow({ limit: 3, windowMs: 60_000, name: 'everyone' });
    before(() => serve(server, { limiter: shared, cost: (request) => (request.method === 'POST' ? 2 : 1) }));
    after(() => close(server));
    it('counts every request against it, whoever sends it', async () => {
      const first = await get(server.url, 'alice', 'POST');
      assert.equal(first.status, 200);
      assert.equal(first.policy, '"everyone";q=3;w=60');
      assert.match(first.rateLimit, /^"everyone";r=1;t=\d+$/);
      assert.equal((await get(server.url, 'bob')).status, 200);
      const denied = await get(server.url, 'carol');
      assert.equal(denied.status, 429);
      assert.match(denied.rateLimit, /^"everyone";r=0;t=\d+$/);
      assert.ok(Number(denied.retryAfter) >= 1);
      assert.equal(shared.peek(0).remaining, 0);
    });
  });
}

// A request whose fields lack one a limit is keyed by fails with the error
// the Policy's own tryAcquire(request) throws for it, a RangeError
// (invalid_value), as the ASGI middleware raises the RateLimitError
// (invalid_value) of try_acquire.
for (const [framework, serve, close] of frameworks) {
  describe(`${framework}: \`fields\` lacking a field the Policy is keyed by`, () => {
    const server = {};
    const policy = Policy.fromRates('5/minute', { by: ['user'] });
    before(() => serve(server, { limiter: policy, fields: (request) => ({ client: request.ip }) }));
    after(() => close(server));
    it("fails the request with tryAcquire's RangeError", async () => {
      let inProcess;
      assert.throws(() => policy.tryAcquire({ client: '127.0.0.1' }), (error) => (inProcess = error) instanceof RangeError);
      const refused = await get(server.url, 'alice');
      assert.equal(refused.status, 500);
      assert.equal(refused.body, `RangeError (invalid_value): ${inProcess.message}`);
      assert.equal(inProcess.message, '`request` lacks the field "user" that limit "5/minute" is keyed by');
      assert.equal(refused.rateLimit, null);
    });
  });
}

// `decide(request)` and `skips(request)` on what the helpers return: the
// decision for a request without answering it (an app that answers its own
// 429, logs, or tests its key function), as the ASGI middleware's `decide`
// and `skips`. The helpers offered no way to it but a response to inspect.
describe('decide and skips: the decision alone, as the ASGI middleware has them', () => {
  const byClient = (request) => request.headers['x-client'];
  for (const helper of [middleware, fastifyHook]) {
    it(`${helper.name}: plain functions answer the Decision itself, consumed as the handler consumes it`, () => {
      const limiter = new KeyedLimiter(new FixedWindow({ limit: 3, windowMs: 60_000, name: 'per-client' }));
      const handler = helper({ limiter, key: byClient, cost: (request) => (request.method === 'POST' ? 2 : 1) });
      assert.equal(typeof handler, 'function');
      const alice = { method: 'POST', headers: { 'x-client': 'alice' } };
      const decision = handler.decide(alice);
      assert.equal(typeof decision?.then, 'undefined', 'no promise for plain functions');
      assert.deepStrictEqual([decision.allowed, decision.remaining, decision.limit], [true, 1, 3]);
      assert.equal(limiter.peek('alice', 0).remaining, 1);
      // A detached method decides the same: closures, not `this`.
      const { decide, skips } = handler;
      const denied = decide(alice);
      assert.deepStrictEqual([denied.allowed, denied.remaining], [false, 1]);
      assert.ok(denied.retryAfterMs > 0);
      assert.equal(limiter.headers(denied).RateLimit.startsWith('"per-client";r=1;t='), true);
      // Without `skip`, nothing is skipped.
      assert.equal(skips(alice), false);
      // The handler counts against the same limiter.
      const res = { headers: {}, setHeader(name, value) { this.headers[name] = value; }, getHeader() {}, end() {} };
      const reply = { headers(values) { res.headers = values; }, code: () => reply, type: () => reply, send() {} };
      const passed = [];
      const request = { method: 'GET', headers: { 'x-client': 'alice' } };
      if (helper === middleware) handler(request, res, (error) => passed.push(error));
      else handler(request, reply, (error) => passed.push(error));
      assert.deepStrictEqual(passed, [undefined]);
      assert.match(res.headers.RateLimit, /^"per-client";r=0;t=\d+$/);
      assert.equal(decide(request).allowed, false);
    });

    it(`${helper.name}: a Policy's decide answers its PolicyDecision, with the default fields`, () => {
      const policy = Policy.fromRates('1/minute', { by: ['client', 'path'] });
      const handler = helper({ limiter: policy });
      const request = { ip: '10.0.0.1', method: 'GET', url: '/caf%C3%A9?page=1', headers: {} };
      const first = handler.decide(request);
      assert.deepStrictEqual([first.allowed, first.deniedBy, first.limits.map((limit) => limit.name)], [true, null, ['1/minute']]);
      assert.equal(policy.peek({ client: '10.0.0.1', path: '/café' }, 0).remaining, 0);
      assert.equal(handler.decide(request).deniedBy, '1/minute');
    });

    it(`${helper.name}: \`skips\` answers \`skip\`'s answer, and \`decide\` decides whatever \`skip\` says`, () => {
      const limiter = new KeyedLimiter(new FixedWindow({ limit: 5, windowMs: 60_000 }));
      const handler = helper({ limiter, key: byClient, skip: (request) => request.headers['x-skip'] === 'yes' });
      const skipped = { headers: { 'x-client': 'alice', 'x-skip': 'yes' } };
      assert.equal(handler.skips(skipped), true);
      assert.equal(handler.skips({ headers: { 'x-client': 'alice' } }), false);
      assert.equal(limiter.size, 0, 'skips decides nothing');
      // As Python's decide: the decision alone; whether to skip is skips'.
      assert.equal(handler.decide(skipped).remaining, 4);
    });

    it(`${helper.name}: a function answering a promise makes the answer a promise`, async () => {
      const limiter = new KeyedLimiter(new FixedWindow({ limit: 5, windowMs: 60_000 }));
      const request = { method: 'POST', headers: { 'x-client': 'alice' } };
      for (const options of [
        { key: async (r) => byClient(r) },
        { key: byClient, cost: async () => 2 },
      ]) {
        const handler = helper({ limiter, cost: 2, ...options, skip: async () => false });
        const decision = handler.decide(request);
        assert.ok(decision instanceof Promise);
        assert.equal((await decision).allowed, true);
        const skips = handler.skips(request);
        assert.ok(skips instanceof Promise);
        assert.equal(await skips, false);
      }
      assert.equal(limiter.peek('alice', 0).remaining, 1);
    });

    it(`${helper.name}: the handler's errors, thrown, or rejected for a promise`, async () => {
      const limiter = new KeyedLimiter(new FixedWindow({ limit: 5, windowMs: 60_000 }));
      const anonymous = { headers: {} };
      const refusal = /^TypeError: `key` returned undefined: a request that cannot be keyed is refused, not let through unlimited$/;
      const handler = helper({ limiter, key: byClient, skip: (request) => request.headers['x-skip'] });
      assertLimiterError(() => handler.decide(anonymous), 'invalid_type', 'key');
      assert.throws(() => handler.decide(anonymous), refusal);
      assert.throws(() => handler.skips(anonymous), /^TypeError: `skip` must return a boolean, not undefined$/);
      assertLimiterError(() => handler.skips(anonymous), 'invalid_type', 'skip');
      const later = helper({ limiter, key: async (request) => byClient(request), skip: async (request) => request.headers['x-skip'] });
      await assert.rejects(later.decide(anonymous), refusal);
      await assert.rejects(later.skips(anonymous), /^TypeError: `skip` must return a boolean, not undefined$/);
      // The default key: a request of no known address is refused.
      assertLimiterError(() => helper({ limiter }).decide({ socket: {} }), 'invalid_type', 'key');
      assertLimiterError(() => helper({ limiter: Policy.fromRates('1/second') }).decide({}), 'invalid_type', 'fields');
      for (const answer of [undefined, null]) {
        const costless = helper({ limiter, key: byClient, cost: () => answer });
        assertLimiterError(() => costless.decide({ headers: { 'x-client': 'alice' } }), 'invalid_type', 'cost', String(answer));
      }
      // The key function's own error, as it was thrown.
      const thrown = Symbol('no session');
      assert.throws(() => helper({ limiter, key: () => { throw thrown; } }).decide(anonymous), (error) => error === thrown);
      assert.equal(limiter.size, 0, 'nothing charged');
      // A full store's refusal, which the handler answers 503: thrown, as Python's decide raises it.
      const full = new KeyedLimiter(new FixedWindow({ limit: 5, windowMs: 60_000 }), { maxKeys: 1, eviction: 'refuse' });
      const bounded = helper({ limiter: full, key: byClient });
      assert.equal(bounded.decide({ headers: { 'x-client': 'alice' } }).allowed, true);
      assert.throws(() => bounded.decide({ headers: { 'x-client': 'bob' } }), (error) => error instanceof RangeError && error.code === 'store_full');
      assert.equal(full.size, 1);
    });
  }
});

// An app answering its own 429 (a JSON body) from `decide`, on real requests:
// the default key reads Express's req.ip and Fastify's request.ip.
for (const [framework, serve] of [
  ['middleware', async (server, limiter) => {
    const { decide } = middleware({ limiter });
    const app = express();
    app.get('/', async (req, res, next) => {
      try {
        const decision = await decide(req);
        res.set(limiter.headers(decision));
        if (decision.allowed) res.json({ hello: 'world' });
        else res.status(429).json({ retryAfterMs: decision.retryAfterMs });
      } catch (error) {
        next(error);
      }
    });
    await new Promise((resolve) => (server.http = app.listen(0, '127.0.0.1', resolve)));
    server.url = `http://127.0.0.1:${server.http.address().port}/`;
    server.close = () => new Promise((resolve) => server.http.close(resolve));
  }],
  ['fastifyHook', async (server, limiter) => {
    const hook = fastifyHook({ limiter });
    const app = Fastify({ logger: false });
    app.get('/', async (request, reply) => {
      const decision = await hook.decide(request);
      reply.headers(limiter.headers(decision));
      if (decision.allowed) return { hello: 'world' };
      return reply.code(429).send({ retryAfterMs: decision.retryAfterMs });
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    server.url = `http://127.0.0.1:${app.server.address().port}/`;
    server.close = () => app.close();
  }],
]) {
  describe(`${framework}: an app answering its own 429 from \`decide\``, () => {
    const server = {};
    const limiter = new KeyedLimiter(new FixedWindow({ limit: 1, windowMs: 60_000, name: 'per-client' }));
    before(() => serve(server, limiter));
    after(() => server.close());
    it('decides each request by its client address', async () => {
      const first = await fetch(server.url);
      assert.equal(first.status, 200);
      assert.deepStrictEqual(await first.json(), { hello: 'world' });
      assert.match(first.headers.get('ratelimit'), /^"per-client";r=0;t=\d+$/);
      const denied = await fetch(server.url);
      assert.equal(denied.status, 429);
      assert.ok((await denied.json()).retryAfterMs > 0);
      assert.ok(Number(denied.headers.get('retry-after')) >= 1);
      assert.equal(limiter.peek('127.0.0.1', 0).remaining, 0);
    });
  });
}

// pacedFetch reading the helpers' own headers: a client paced faster than
// the server allows should meet the server's rate from its RateLimit fields,
// without 429s. Two helpers in a row, both limiters named "default" (the
// default), list two items of one name in each field: keyed by name alone,
// pacedFetch paired the first limit's `r=0` with the second's policy (10 per
// 1 s: 0.1 s) where the first earns a unit each 0.5 s, and the requests met
// a 429 every few. Real HTTP to Express on 127.0.0.1; time is fake, shared by
// the server's limiters and pacedFetch, and moves only when no request is on
// the wire.
describe('middleware in a row, read by pacedFetch', () => {
  it('a paced client keeps to the server\'s rate from its RateLimit fields alone: no 429', async () => {
    let now = 0;
    const clock = () => now;
    const pending = new Map();
    let nextTimer = 1;
    const timers = {
      setTimeout(fn, ms) {
        pending.set(nextTimer, { at: now + ms, fn });
        return nextTimer++;
      },
      clearTimeout(id) {
        pending.delete(id);
      },
    };
    const app = express();
    app.use(middleware({ limiter: new TokenBucket({ capacity: 4, refillTokens: 4, refillPeriodMs: 2_000, clock }) }));
    app.get('/', middleware({ limiter: new TokenBucket({ capacity: 10, refillTokens: 10, refillPeriodMs: 1_000, clock }) }), (req, res) => res.send('ok'));
    const server = await new Promise((resolve) => {
      const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
    });
    try {
      const url = `http://127.0.0.1:${server.address().port}/`;
      let onTheWire = 0;
      const statuses = [];
      const counted = async (input, init) => {
        onTheWire++;
        try {
          const response = await fetch(input, init);
          statuses.push(response.status);
          return response;
        } finally {
          onTheWire--;
        }
      };
      // 50 a second, well above the server's 2.
      const paced = pacedFetchFor(RateLimited)(counted, new Gcra({ burst: 1, emissionIntervalMs: 20, clock }), { clock, timers, retries: 5 });
      let settled = false;
      const calls = Promise.all(Array.from({ length: 16 }, () => paced(url).then((response) => response.text().then(() => response.status))));
      calls.then(() => (settled = true), () => (settled = true));
      while (!settled) {
        // A real turn of the event loop: responses arrive, pacedFetch reads them.
        await new Promise((resolve) => setImmediate(resolve));
        if (onTheWire > 0 || settled) continue;
        let first = null;
        for (const [id, timer] of pending) if (first === null || timer.at < first[1].at) first = [id, timer];
        assert.ok(first !== null, 'nothing on the wire and no timer: the calls would never settle');
        pending.delete(first[0]);
        now = Math.max(now, first[1].at);
        first[1].fn();
      }
      assert.deepStrictEqual(await calls, Array(16).fill(200));
      assert.deepStrictEqual(statuses, Array(16).fill(200), 'no 429 on the way');
      // 4 at once (the client's own 20 ms apart), then one each 0.5 s: the
      // server's rate, not slower (6,060 ms on the fake clock).
      assert.ok(now <= 6_000 + 100, `took ${now} ms`);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
