'use strict';
// The Redis examples of the READMEs (marked `<!-- example: needs Redis ... -->`)
// run as written against the test server, with ioredis and an Express app,
// and the values their comments state are the values they give
// (tests/js/doc-examples.cjs, which runs the other examples in the JS suite).
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { createRequire } = require('node:module');
const { URL: URL_, ROOT, rk, rkRedis, close, withClient } = require('./helpers.cjs');
const { blocks, needsRedis, run } = require('../js/doc-examples.cjs');

// Express of the JS suite (tests/js/package.json), as middleware.test.cjs takes it.
const express = createRequire(path.join(ROOT, 'tests/js/package.json'))('express');

/**
 * ioredis as the examples use it, `new Redis(options)`, pointed at the test
 * server (they name none: localhost:6379); every client made is in `made`,
 * to be closed after.
 */
function pointedIoredis(made) {
  const Redis = require('ioredis');
  return class extends Redis {
    constructor(options = {}) {
      super(URL_, options);
      this.on('error', () => {});
      made.push(this);
    }
  };
}

for (const file of ['README.md', 'bindings-node/README.md']) {
  test(`the Redis example of ${file} runs against Redis`, async () => {
    const examples = blocks(file, 'js').filter(needsRedis);
    assert.equal(examples.length, 1, file);
    const made = [];
    const app = express();
    // The examples' keys are ratekeeper's defaults: none may be left from another test.
    await withClient('ioredis', (client) => client.flushdb());
    try {
      await run(examples[0], {
        modules: { ratekeeper: rk, 'ratekeeper/redis': rkRedis, ioredis: pointedIoredis(made) },
        names: { app },
      });
      assert.equal(made.length, 1, 'one client, made by the example');
      // Its decisions came from Redis (an `onError` would have decided without it): its keys are there.
      const keys = await made[0].keys('ratekeeper:*');
      assert.ok(keys.length > 0, `no key in Redis: ${keys}`);
    } finally {
      for (const client of made) await close(client);
    }
  });
}
