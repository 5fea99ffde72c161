'use strict';
// The JS examples of the markdown files run as written against the build
// under test, and the values their comments state are the values they give
// (doc-examples.cjs says how those are read). The wasm README's run on the
// wasm build only; the Redis examples in tests/redis/docs.test.cjs.

const { it } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const { pathToFileURL } = require('node:url');

const express = require('express');
const Fastify = require('fastify');

const api = require('./impl.cjs');
const { ROOT, runnable, run, stated } = require('./doc-examples.cjs');

const WASM = (process.env.RATEKEEPER_IMPL || 'napi') === 'wasm';

/** Runs the blocks of `file` in turn, each given the names `namesOf(block)`; resolves to the blocks and the claims checked. */
async function runAll(file, { modules = {}, namesOf = () => ({}) } = {}) {
  const claims = [];
  const examples = runnable(file);
  for (const block of examples) claims.push(...(await run(block, { modules, names: namesOf(block) })));
  return { claims, examples };
}

/** Sends one request to `app` (a request listener) listening on 127.0.0.1; resolves to its status and headers. */
async function request(app, method, url) {
  const server = http.createServer(app);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const response = await fetch(`http://127.0.0.1:${server.address().port}${url}`, { method });
    await response.arrayBuffer();
    return { status: response.status, headers: Object.fromEntries(response.headers) };
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

it('reads a value a comment states, and takes prose for prose', () => {
  assert.deepStrictEqual(stated("{ 'RateLimit-Policy': '\"default\";q=5;w=5', RateLimit: 'r' }"), {
    text: "{ 'RateLimit-Policy': '\"default\";q=5;w=5', RateLimit: 'r' }",
    value: { 'RateLimit-Policy': '"default";q=5;w=5', RateLimit: 'r' },
  });
  assert.deepStrictEqual(stated('true'), { text: 'true', value: true });
  assert.deepStrictEqual(stated('[1, 100_000]: the waits'), { text: '[1, 100_000]', value: [1, 100_000] });
  for (const prose of ['none left: denied', 'cost 2', 'Express: res.set(headers)', '{ allowed, remaining }', 'wait', "a Decision, for key 'alice'", '']) {
    assert.equal(stated(prose), null, prose);
  }
});

it("the repository README's Node example runs", async () => {
  const { examples } = await runAll('README.md', { modules: { ratekeeper: api } });
  assert.equal(examples.length, 1);
});

it("the Node README's examples run and state true values", async () => {
  const app = express();
  let fastify;
  let loggedIn = 0;
  const { claims, examples } = await runAll('bindings-node/README.md', {
    modules: { ratekeeper: api, express, fastify: (options) => (fastify = Fastify(options)) },
    // What the text leaves to the reader: a time (a replay's, a test's),
    // the Express app a login route is added to, and what the route does;
    // and to an example that imports nothing, going on from those before
    // it, the package's names.
    namesOf: (block) => ({
      ...(/from 'ratekeeper'|require\('ratekeeper'\)/.test(block.source) ? {} : api),
      nowMs: performance.now(),
      app,
      logIn: async () => ({ user: `user-${++loggedIn}` }),
    }),
  });
  assert.equal(examples.length, 6);
  // The values it states now: one the reader no longer recognised would
  // otherwise go unchecked silently.
  assert.ok(claims.some((claim) => claim.code === 'fresh.headers(fresh.tryAcquire(1, 0))'), JSON.stringify(claims));
  // The hooks and the login route are live: the example's Fastify answers
  // with every limit of both policies, and the route with its limiter's headers.
  fastify.get('/', async () => 'ok');
  const hooked = await fastify.inject({ method: 'GET', url: '/' });
  assert.equal(hooked.statusCode, 200);
  assert.equal(hooked.headers['ratelimit-policy'], '"10/second";q=10;w=1, "1000/day";q=1000;w=86400, "100/minute";q=100;w=60');
  const login = await request(app, 'POST', '/login');
  assert.deepStrictEqual([login.status, login.headers['ratelimit-policy'], loggedIn], [200, '"default";q=10;w=1', 1]);
  await fastify.close();
});

if (WASM) {
  it("the wasm README's examples run on the wasm build", async () => {
    const web = await import(pathToFileURL(path.join(ROOT, 'bindings-wasm/web.mjs')).href);
    // `init()` fetches the .wasm next to the glue, which Node's fetch cannot
    // read from a file: URL (the README says so): here it is given the bytes.
    const bytes = fs.readFileSync(path.join(ROOT, 'bindings-wasm/pkg/web/ratekeeper_wasm_bg.wasm'));
    const browser = { ...web, init: (input) => web.init(input ?? bytes) };
    const fetched = [];
    const { examples } = await runAll('bindings-wasm/README.md', {
      modules: { ratekeeper: browser, 'ratekeeper-wasm': api },
      namesOf: () => ({ urls: ['/a', '/b', '/c'], fetch: (url) => fetched.push(url) }),
    });
    assert.equal(examples.length, 2);
    assert.deepStrictEqual(fetched, ['/a', '/b', '/c']);
  });
}
