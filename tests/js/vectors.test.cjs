'use strict';
// Runs the shared conformance vectors (tests/vectors/*.json, see CONTRACT.md)
// through the JS API: durations and `now` in milliseconds (ns / 1e6), outputs
// compared in integer nanoseconds (Math.round(ms * 1e6)).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const { TokenBucket, SlidingWindowLog } = require('./impl.cjs');
const { JS_ARGUMENT, assertLimiterError } = require('./helpers.cjs');

// RATEKEEPER_VECTORS lets a scratch copy stand in for tests/vectors.
const DIR = process.env.RATEKEEPER_VECTORS || path.join(__dirname, '..', 'vectors');

function readJson(file) {
  return JSON.parse(fs.readFileSync(path.join(DIR, file), 'utf8'));
}

const index = readJson('index.json');
const listed = Object.keys(index.files).sort();
const expectedTotal = Object.values(index.files).reduce((sum, n) => sum + n, 0);
let ran = 0;

/**
 * A vector value as given to the binding: numbers must survive the trip
 * through a JS number exactly; anything else (a string in a wrong-type
 * scenario) is passed through untouched.
 */
function count(value, what) {
  if (typeof value === 'number') {
    assert.ok(Number.isSafeInteger(value), `vector ${what} = ${value} is not a safe JS integer`);
  }
  return value;
}

/** A vector duration or instant in ns, as milliseconds. */
function ms(ns, what) {
  return typeof count(ns, what) === 'number' ? ns / 1e6 : ns;
}

function build(scenario) {
  const c = scenario.config;
  switch (scenario.algorithm) {
    case 'token_bucket': {
      const options = {
        capacity: count(c.capacity, 'capacity'),
        refillTokens: count(c.refill_tokens, 'refill_tokens'),
        refillPeriodMs: ms(c.refill_period_ns, 'refill_period_ns'),
      };
      if (c.initial_tokens !== undefined) options.initialTokens = count(c.initial_tokens, 'initial_tokens');
      return new TokenBucket(options);
    }
    case 'sliding_window_log':
      return new SlidingWindowLog({ limit: count(c.limit, 'limit'), windowMs: ms(c.window_ns, 'window_ns') });
    default:
      throw new Error(`unknown algorithm ${JSON.stringify(scenario.algorithm)}`);
  }
}

function assertVectorError(fn, expected, where) {
  const argument = JS_ARGUMENT[expected.argument];
  assert.ok(argument, `${where}: no JS spelling for argument ${JSON.stringify(expected.argument)}`);
  assertLimiterError(fn, expected.code, argument, where);
}

function runScenario(scenario) {
  if (scenario.expect_error) {
    assert.equal(scenario.steps, undefined, 'a scenario has either steps or expect_error');
    assertVectorError(() => build(scenario), scenario.expect_error, 'constructor');
    return;
  }
  assert.ok(Array.isArray(scenario.steps) && scenario.steps.length > 0, 'a scenario needs steps');
  const limiter = build(scenario);
  scenario.steps.forEach((step, i) => {
    const where = `step ${i} (now_ns ${step.now_ns}, cost ${step.cost})`;
    const call = () => limiter.tryAcquire(count(step.cost, 'cost'), ms(step.now_ns, 'now_ns'));
    if (step.expect_error) {
      assertVectorError(call, step.expect_error, where);
      return;
    }
    const d = call();
    const actual = {
      allowed: d.allowed,
      remaining: d.remaining,
      limit: d.limit,
      retry_after_ns: Math.round(d.retryAfterMs * 1e6),
      reset_after_ns: Math.round(d.resetAfterMs * 1e6),
    };
    assert.deepStrictEqual(actual, step.expect, where);
  });
}

test('the vector files are exactly those listed in index.json', () => {
  const present = fs
    .readdirSync(DIR)
    .filter((f) => f.endsWith('.json') && f !== 'index.json')
    .sort();
  assert.deepStrictEqual(present, listed);
  assert.ok(expectedTotal > 0, 'index.json lists no scenarios');
});

for (const file of listed) {
  const vectors = readJson(file);
  test(file, async (t) => {
    assert.equal(vectors.scenarios.length, index.files[file], `scenario count of ${file} differs from index.json`);
    for (const scenario of vectors.scenarios) {
      await t.test(scenario.name, () => {
        runScenario(scenario);
        ran += 1;
      });
    }
  });
}

test('every scenario listed in index.json ran', () => {
  assert.equal(ran, expectedTotal);
});
