'use strict';
// The server helpers (middleware, fastifyHook) with the limiters of
// ratekeeper/redis, against a real Redis, in real Express and Fastify apps on
// 127.0.0.1: the answers of the in-process KeyedLimiter and Policy of the same
// configuration, onError deciding through an outage, a rejection reaching the
// app's error handler.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { createRequire } = require('node:module');
const { ROOT, rk, rkRedis, CLIENTS, ioredis, close, withClient, prefix } = require('./helpers.cjs');

// Express and Fastify of the JS suite (tests/js/package.json), which
// scripts/redis.sh installs with the addon (node.sh build runs npm ci there).
const suite = createRequire(path.join(ROOT, 'tests/js/package.json'));
const express = suite('express');
const Fastify = suite('fastify');

const { RedisLimiter, RedisPolicy } = rkRedis;
const { middleware, fastifyHook } = rk;

// GCRA: the RateLimit `t` and Retry-After of a decision are whole seconds,
// the same whichever clock decided a few milliseconds apart (a window's
// reset would depend on where its clock stands in the window).
const perMinute = () => rk.Gcra.perPeriod({ burst: 2, tokens: 2, periodMs: 60_000, name: 'per-minute' });
const RATES = '2/minute;100/hour';
const BY_CLIENT = { algorithm: 'gcra', by: ['client'] };

// The client named by a header; POST costs 2; /health is exempt.
const key = (request) => request.headers['x-client'];
const fields = (request) => ({ client: request.headers['x-client'] });
const cost = (request) => (request.method === 'POST' ? 2 : 1);
const skip = (request) => request.url === '/health';

/** A 500's body: the error's class and message. */
const failure = (error) => `${error.name}: ${error.message}`;

/**
 * An app of `framework` on 127.0.0.1 behind the helper made of `options`,
 * answering "hello" at / and /health: `{ url, close }`.
 */
async function serve(framework, options) {
  if (framework === 'express') {
    const app = express();
    app.use(middleware(options));
    app.all(['/', '/health'], (req, res) => res.type('text/plain').send('hello'));
    app.use((error, req, res, next) => res.status(500).type('text/plain').send(failure(error)));
    const server = await new Promise((resolve) => {
      const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
    });
    return { url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((resolve) => server.close(resolve)) };
  }
  const app = Fastify({ logger: false });
  app.addHook('onRequest', fastifyHook(options));
  for (const route of ['/', '/health']) app.all(route, async (request, reply) => reply.type('text/plain').send('hello'));
  app.setErrorHandler((error, request, reply) => reply.code(500).type('text/plain').send(failure(error)));
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { url: `http://127.0.0.1:${app.server.address().port}`, close: () => app.close() };
}

/** `fn(url)` with an app of `framework` behind the helper of `options`, closed after. */
async function withServer(framework, options, fn) {
  const server = await serve(framework, options);
  try {
    return await fn(server.url);
  } finally {
    await server.close();
  }
}

/** What a request answers, headers included. */
async function get(url, client, method = 'GET', route = '/') {
  const response = await fetch(`${url}${route}`, { method, headers: client === undefined ? {} : { 'x-client': client } });
  return {
    status: response.status,
    body: await response.text(),
    contentType: response.headers.get('content-type'),
    policy: response.headers.get('ratelimit-policy'),
    rateLimit: response.headers.get('ratelimit'),
    retryAfter: response.headers.get('retry-after'),
  };
}

/** The answers to one run of requests: alice's third is denied, bob's POST costs 2, carol's /health is skipped. */
async function run(url) {
  const answers = [];
  for (const [client, method, route] of [['alice'], ['alice'], ['alice'], ['bob', 'POST'], ['bob'], ['carol', 'GET', '/health']]) {
    answers.push(await get(url, client, method, route));
  }
  return answers;
}

const FRAMEWORKS = ['express', 'fastify'];
const LIBRARIES = ['ioredis', 'node-redis'];

for (const framework of FRAMEWORKS) {
  for (const library of LIBRARIES) {
    test(`${framework}, ${library}: a RedisLimiter answers as the in-process KeyedLimiter of its configuration`, () =>
      withClient(library, async (client) => {
        const limiter = new RedisLimiter(client, perMinute(), { prefix: prefix('mw-keyed') });
        const expected = await withServer(framework, { limiter: new rk.KeyedLimiter(perMinute()), key, cost, skip }, run);
        const answers = await withServer(framework, { limiter, key, cost, skip }, run);
        assert.deepEqual(answers, expected);
        // Not two servers failing alike: the answers are the limit's.
        assert.deepEqual(
          answers.map((a) => [a.status, a.body, a.rateLimit, a.retryAfter]),
          [
            [200, 'hello', '"per-minute";r=1;t=30', null],
            [200, 'hello', '"per-minute";r=0;t=60', null],
            [429, 'Too Many Requests', '"per-minute";r=0;t=60', '30'],
            [200, 'hello', '"per-minute";r=0;t=60', null],
            [429, 'Too Many Requests', '"per-minute";r=0;t=60', '30'],
            [200, 'hello', null, null],
          ],
        );
        assert.equal(answers[0].policy, '"per-minute";q=2;w=60');
        assert.equal(answers[2].contentType, 'text/plain; charset=utf-8');
        // In Redis: alice's and bob's two units; carol, skipped, charged nothing.
        assert.deepEqual(
          await Promise.all(['alice', 'bob', 'carol'].map(async (name) => (await limiter.peek(name, 0)).remaining)),
          [0, 0, 2],
        );
      }));

    test(`${framework}, ${library}: a RedisPolicy answers as the in-process Policy of its configuration`, () =>
      withClient(library, async (client) => {
        const limiter = new RedisPolicy(client, RATES, { ...BY_CLIENT, prefix: prefix('mw-policy') });
        const expected = await withServer(framework, { limiter: new rk.Policy(RATES, BY_CLIENT), fields, cost, skip }, run);
        const answers = await withServer(framework, { limiter, fields, cost, skip }, run);
        assert.deepEqual(answers, expected);
        assert.deepEqual(
          answers.map((a) => [a.status, a.rateLimit, a.retryAfter]),
          [
            [200, '"2/minute";r=1;t=30, "100/hour";r=99;t=36', null],
            [200, '"2/minute";r=0;t=60, "100/hour";r=98;t=72', null],
            [429, '"2/minute";r=0;t=60, "100/hour";r=98;t=72', '30'],
            [200, '"2/minute";r=0;t=60, "100/hour";r=98;t=72', null],
            [429, '"2/minute";r=0;t=60, "100/hour";r=98;t=72', '30'],
            [200, null, null],
          ],
        );
        assert.equal(answers[0].policy, '"2/minute";q=2;w=60, "100/hour";q=100;w=3600');
        assert.equal((await limiter.peek({ client: 'carol' }, 0)).remaining, 2);
      }));
  }

  test(`${framework}: the default key and fields are the client's address, method and path`, () =>
    withClient('ioredis', async (client) => {
      const limiter = new RedisLimiter(client, perMinute(), { prefix: prefix('mw-default') });
      await withServer(framework, { limiter }, async (url) => assert.equal((await get(url)).status, 200));
      assert.equal((await limiter.peek('127.0.0.1', 0)).remaining, 1);
      const policy = new RedisPolicy(client, '2/minute', { algorithm: 'gcra', by: ['client', 'method', 'path'], prefix: prefix('mw-default') });
      await withServer(framework, { limiter: policy }, async (url) => assert.equal((await get(url, undefined, 'POST')).status, 200));
      assert.equal((await policy.peek({ client: '127.0.0.1', method: 'POST', path: '/' }, 0)).remaining, 1);
      assert.equal((await policy.peek({ client: '127.0.0.1', method: 'GET', path: '/' }, 0)).remaining, 2);
    }));

  test(`${framework}: Redis down, onError decides: 'closed' denies, 'open' allows, an in-process limiter decides as in-process`, async () => {
    // A client whose connection is gone (no offline queue): every call
    // fails at once, as while the server is unreachable.
    const client = await ioredis();
    client.disconnect();
    const options = (onError) => ({ prefix: prefix('mw-down'), onError });
    const answers = async (limiter) => withServer(framework, { limiter, key, cost, skip }, run);
    const closed = await answers(new RedisLimiter(client, perMinute(), options('closed')));
    assert.deepEqual(closed.slice(0, 5).map((a) => [a.status, a.rateLimit, a.retryAfter]), Array(5).fill([429, '"per-minute";r=0;t=1', '1']));
    const open = await answers(new RedisLimiter(client, perMinute(), options('open')));
    assert.deepEqual(open.slice(0, 5).map((a) => [a.status, a.rateLimit, a.retryAfter]), Array(5).fill([200, '"per-minute";r=2;t=0', null]));
    const fallback = await answers(new RedisLimiter(client, perMinute(), options(new rk.KeyedLimiter(perMinute()))));
    assert.deepEqual(fallback, await answers(new rk.KeyedLimiter(perMinute())));
    // A RedisPolicy's fallback Policy likewise.
    const policy = new RedisPolicy(client, RATES, { ...BY_CLIENT, ...options(new rk.Policy(RATES, BY_CLIENT)) });
    const byPolicy = await withServer(framework, { limiter: policy, fields, cost, skip }, run);
    assert.deepEqual(byPolicy, await withServer(framework, { limiter: new rk.Policy(RATES, BY_CLIENT), fields, cost, skip }, run));
    assert.deepEqual(
      byPolicy.map((a) => a.status),
      [200, 200, 429, 200, 429, 200],
    );
  });

  test(`${framework}: an error onError does not answer (WRONGTYPE) reaches the app's error handler`, () =>
    withClient('ioredis', async (client) => {
      const p = prefix('mw-wrongtype');
      // 'open' hides an outage, never a misconfiguration.
      const limiter = new RedisLimiter(client, perMinute(), { prefix: p, onError: 'open' });
      await withServer(framework, { limiter, key }, async (url) => {
        assert.equal((await get(url, 'alice')).status, 200);
        const [stored] = await client.keys(`${p}*`);
        await client.del(stored);
        await client.rpush(stored, 'another type');
        const failed = await get(url, 'alice');
        assert.equal(failed.status, 500);
        assert.match(failed.body, /WRONGTYPE/);
        assert.deepEqual([failed.policy, failed.rateLimit], [null, null]);
        // Another key is decided as before.
        assert.equal((await get(url, 'bob')).status, 200);
      });
    }));
}

test('decide(request) answers a promise of the decision, which limiter.headers(decision) reads', () =>
  withClient('ioredis', async (client) => {
    const limiter = new RedisLimiter(client, perMinute(), { prefix: prefix('mw-decide') });
    const policy = new RedisPolicy(client, RATES, { ...BY_CLIENT, prefix: prefix('mw-decide') });
    const request = { headers: { 'x-client': 'alice' }, method: 'GET', url: '/' };
    for (const [helper, options, rateLimit] of [
      [middleware, { limiter, key }, '"per-minute";r=1;t=30'],
      [fastifyHook, { limiter: policy, fields }, '"2/minute";r=1;t=30, "100/hour";r=99;t=36'],
    ]) {
      const answer = helper(options).decide(request);
      assert.ok(answer instanceof Promise);
      const decision = await answer;
      assert.deepEqual([decision.allowed, decision.remaining, decision.fromStore], [true, 1, true]);
      assert.equal(options.limiter.headers(decision).RateLimit, rateLimit);
    }
    // A rejection is decide's: its promise rejects.
    await assert.rejects(middleware({ limiter, key: () => ({}) }).decide(request), { code: 'invalid_type' });
  }));

test('the options are checked as for the in-process classes, when the helper is made, sending nothing', () => {
  let sent = 0;
  const client = {
    sendCommand: async () => {
      sent += 1;
    },
  };
  const limiter = new RedisLimiter(client, perMinute());
  const policy = new RedisPolicy(client, RATES, BY_CLIENT);
  for (const helper of [middleware, fastifyHook]) {
    // A fixed cost tryAcquire would refuse: its error, naming `cost`; a RedisPolicy's limit is its smallest.
    for (const [options, code] of [
      [{ limiter, cost: 3 }, 'cost_exceeds_limit'],
      [{ limiter: policy, fields, cost: 3 }, 'cost_exceeds_limit'],
      [{ limiter, cost: 1.5 }, 'invalid_value'],
      [{ limiter: policy, fields, cost: -1 }, 'invalid_value'],
    ]) {
      assert.throws(() => helper(options), (error) => error.code === code && error.message.startsWith('`cost`'));
    }
    helper({ limiter, cost: 2 });
    helper({ limiter: policy, fields, cost: 2 });
    // An option of the other kind, a policy keyed by a field the default fields lack, the limiter for the options.
    assert.throws(() => helper({ limiter, fields }), { name: 'TypeError', code: 'invalid_type', message: '`fields` is for a RedisPolicy: a RedisLimiter takes `key`' });
    assert.throws(() => helper({ limiter: policy, key }), { name: 'TypeError', code: 'invalid_type', message: '`key` is for a RedisLimiter: a RedisPolicy takes `fields`' });
    assert.throws(() => helper({ limiter: new RedisPolicy(client, '1/second', { by: ['user'] }) }), { name: 'RangeError', code: 'invalid_value', message: /^`fields` must be given: limit "1\/second"/ });
    helper({ limiter: new RedisPolicy(client, '1/second', { by: ['client', 'path'] }) });
    // So with its onError Policy's: the RedisPolicy refuses every request lacking "user", Redis up or down.
    const byUser = rk.Policy.fromRates('1/second', { by: ['user'] });
    assert.throws(() => helper({ limiter: new RedisPolicy(client, '1/second', { by: ['client'], onError: byUser }) }), {
      name: 'RangeError',
      code: 'invalid_value',
      message: /^`fields` must be given: limit "1\/second" of `limiter`'s onError is keyed by "user"/,
    });
    helper({ limiter: new RedisPolicy(client, '1/second', { by: ['client'], onError: rk.Policy.fromRates('1/second', { by: ['client'] }) }) });
    for (const given of [limiter, policy]) assert.throws(() => helper(given), { code: 'invalid_type', message: /pass \{ limiter \}$/ });
    // Neither a Proxy of one nor an object that looks like one (the brand checks are the classes' own).
    const forged = { tryAcquire: async () => ({ allowed: true }), headers: () => ({}), limit: 2, limits: [] };
    for (const other of [new Proxy(limiter, {}), new Proxy(policy, {}), forged, Object.create(limiter)]) {
      assert.throws(() => helper({ limiter: other }), { name: 'TypeError', message: '`limiter` must be a ratekeeper KeyedLimiter, Policy or limiter' });
    }
  }
  assert.equal(sent, 0);
});
