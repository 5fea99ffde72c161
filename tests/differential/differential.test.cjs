'use strict';
// The cross-binding differential test (README.md beside this file): the
// generated scenarios through the napi addon, the wasm build and Python,
// compared exactly. Run by `bash scripts/wasm.sh test`, after the builds of
// the three (scripts/test.sh runs the Python and Node suites before it).

const test = require('node:test');
const assert = require('node:assert/strict');

const { SEEDS, differences, scenariosOf } = require('./differential.cjs');
const { generate } = require('./generate.cjs');

test('the scenarios are the same on every run', () => {
  assert.equal(JSON.stringify(generate(7, 50)), JSON.stringify(generate(7, 50)));
});

test('the scenarios cover every algorithm, subject and operation', () => {
  const scenarios = scenariosOf(SEEDS);
  const seen = new Set();
  const algorithms = (spec) => (spec.keyed ? [spec.keyed] : spec.limits ? spec.limits.map((l) => l.limiter) : [spec]);
  for (const s of scenarios) {
    seen.add(s.kind);
    for (const spec of algorithms(s.subject)) {
      seen.add(spec.algorithm);
      if (spec.calendar !== undefined) seen.add(`${spec.algorithm} calendar ${spec.calendar}`);
      if (spec.bandwidths !== undefined) seen.add(`${spec.bandwidths.length} bandwidths`);
    }
    for (const op of s.ops) seen.add(op.op);
  }
  const wanted = ['limiter', 'keyed', 'policy', 'token_bucket', 'gcra', 'leaky_bucket', 'sliding_window_log', 'sliding_window_counter', 'fixed_window'];
  for (const calendar of ['day', 'week', 'month']) wanted.push(`fixed_window calendar ${calendar}`, `sliding_window_counter calendar ${calendar}`);
  wanted.push('1 bandwidths', '2 bandwidths', '3 bandwidths', '4 bandwidths');
  wanted.push('try_acquire', 'peek', 'reserve', 'cancel', 'refund', 'headers', 'batch', 'reclaim', 'reconfigure', 'roundtrip', 'restore_broken');
  assert.deepStrictEqual(wanted.filter((w) => !seen.has(w)), []);
});

test('napi, wasm and Python answer every scenario alike', (t) => {
  const scenarios = scenariosOf(SEEDS);
  const found = differences(scenarios);
  const known = found.filter((d) => d.known);
  const operations = scenarios.reduce((n, s) => n + s.ops.length, 0);
  t.diagnostic(`${scenarios.length} scenarios (seeds ${SEEDS.map(([seed]) => seed).join(', ')}), ${operations} operations`);
  // Known: JS headers read back from floats that cannot carry the exact ns (README.md).
  for (const d of known) t.diagnostic(`known: ${d.scenario} #${d.at} ${d.op.op}: ${d.problems.join('; ')}`);
  const discrepancies = found.filter((d) => !d.known);
  // The first few in full; `node tests/differential/differential.cjs` lists them all.
  assert.deepStrictEqual(discrepancies.slice(0, 3), [], `${discrepancies.length} scenarios differ`);
});
