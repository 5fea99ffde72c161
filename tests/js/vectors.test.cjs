'use strict';
// The shared conformance vectors, every file of tests/vectors/ and of
// tests/vectors/core-only/, every op (acquire, peek, reserve, refund), through
// the JS API of the build under test (impl.cjs). The logic lives in
// vector-runner.mjs, which the browser page runs too.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const api = require('./impl.cjs');

// RATEKEEPER_VECTORS lets a scratch copy stand in for tests/vectors.
const ROOT = process.env.RATEKEEPER_VECTORS || path.join(__dirname, '..', 'vectors');

for (const [dir, portable] of [
  [ROOT, true],
  [path.join(ROOT, 'core-only'), false],
]) {
  const label = path.relative(path.join(__dirname, '..'), dir) || dir;
  test(label, async (t) => {
    const { runDirectory } = await import('./vector-runner.mjs');
    const read = async (name) => fs.promises.readFile(path.join(dir, name), 'utf8');
    const { files, total, fileProblems, results } = await runDirectory(api, read);

    const present = fs.readdirSync(dir).filter((f) => f.endsWith('.json') && f !== 'index.json').sort();
    assert.deepStrictEqual(present, files, 'the vector files are exactly those index.json lists');
    assert.deepStrictEqual(fileProblems, [], 'scenario counts agree with index.json');
    assert.ok(total > 0, 'index.json lists no scenarios');

    // A scenario JS numbers cannot express (core-only/ probes the ends of
    // u64) is not a test here, rather than a skipped one: the Rust runner
    // (core/tests/vectors.rs) runs it, and the diagnostic below counts it.
    for (const r of results.filter((r) => !r.inexpressible)) {
      await t.test(`${r.file}: ${r.name}`, () => {
        assert.equal(r.problem, null);
      });
    }

    const ran = results.filter((r) => !r.inexpressible).length;
    const inexpressible = results.length - ran;
    assert.ok(ran > inexpressible, `${ran} scenarios ran, ${inexpressible} inexpressible: most must run here`);
    t.diagnostic(`${label}: ${ran} scenarios ran, ${inexpressible} inexpressible in JS numbers, ${total} in index.json`);
    assert.equal(results.length, total, 'every scenario listed in index.json was taken up');
    // The portable vectors must all fit JS numbers; only core-only/ probes the ends of u64.
    if (portable) assert.equal(inexpressible, 0, 'a portable vector is inexpressible in JS numbers');
  });
}
