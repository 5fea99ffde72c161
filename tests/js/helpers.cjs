'use strict';
// Shared assertions of the JS suite.

const assert = require('node:assert/strict');

/** Core (Rust) argument names -> their JS spelling, as error messages must use. */
const JS_ARGUMENT = {
  capacity: 'capacity',
  refill_tokens: 'refillTokens',
  refill_period: 'refillPeriodMs',
  initial_tokens: 'initialTokens',
  limit: 'limit',
  window: 'windowMs',
  cost: 'cost',
  now: 'nowMs',
};

// Only the snake_case names: `window` and `now` are prefixes of their JS spelling.
const RUST_SPELLING = Object.keys(JS_ARGUMENT).filter((rust) => rust.includes('_'));

/**
 * Asserts that `fn` throws the binding's error for `code`: a TypeError for
 * `invalid_type`, a RangeError otherwise, with `.code` and a message naming
 * `argument` (JS spelling, never the Rust one). Returns the error.
 */
function assertLimiterError(fn, code, argument, where = '') {
  let caught;
  assert.throws(fn, (err) => {
    caught = err;
    return true;
  }, `${where}: expected a ${code} error`);
  const label = `${where}: ${caught && caught.name}: ${caught && caught.message}`;
  const expectedClass = code === 'invalid_type' ? TypeError : RangeError;
  assert.ok(caught instanceof expectedClass, `${label}: not a ${expectedClass.name}`);
  assert.equal(caught.code, code, label);
  assert.equal(typeof caught.message, 'string', label);
  assert.ok(caught.message.includes(argument), `${label}: message does not name \`${argument}\``);
  for (const rust of RUST_SPELLING) {
    assert.ok(!caught.message.includes(rust), `${label}: message uses the Rust spelling \`${rust}\``);
  }
  return caught;
}

module.exports = { JS_ARGUMENT, assertLimiterError };
