'use strict';
// The cross-binding differential run: scenarios from fixed seeds
// (generate.cjs), run through the napi addon and the wasm build in this
// process (run-js.cjs) and through Python in a child process
// (bindings-python/tests/differential.py, with the repository's .venv), then
// compared (compare.cjs). differential.test.cjs is the test; run directly,
//
//   node tests/differential/differential.cjs [seed count]...
//
// prints every discrepancy (scenario, operation, what differs).

const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { generate } = require('./generate.cjs');
const { run } = require('./run-js.cjs');
const { compareScenario } = require('./compare.cjs');

const ROOT = path.join(__dirname, '..', '..');
const PYTHON = process.env.RATEKEEPER_PYTHON || path.join(ROOT, '.venv', 'bin', 'python');
const RUNNER = path.join(ROOT, 'bindings-python', 'tests', 'differential.py');

// What the test runs: [seed, scenarios] pairs.
const SEEDS = [
  [1, 500],
  [2, 500],
  [3, 500],
  [4, 500],
  [5, 500],
  [6, 500],
];

/** Python's records of `scenarios`. */
function runPython(scenarios) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratekeeper-differential-'));
  try {
    const file = path.join(dir, 'scenarios.json');
    fs.writeFileSync(file, JSON.stringify(scenarios));
    const out = execFileSync(PYTHON, [RUNNER, file], { maxBuffer: 1 << 30, encoding: 'utf8' });
    return JSON.parse(out);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const implementations = () => ({
  napi: require('../../bindings-node/index.js'),
  wasm: require('../../bindings-wasm/node.cjs'),
});

/** Every discrepancy among the three bindings over `scenarios`. */
function differences(scenarios) {
  const { napi, wasm } = implementations();
  const n = run(napi, scenarios);
  const w = run(wasm, scenarios);
  const p = runPython(scenarios);
  return scenarios.flatMap((s, i) => compareScenario(s, n[i], w[i], p[i]).map((d) => ({ scenario: s.id, ...d })));
}

function scenariosOf(seeds) {
  return seeds.flatMap(([seed, count]) => generate(seed, count));
}

module.exports = { SEEDS, differences, scenariosOf, runPython, implementations };

if (require.main === module) {
  const args = process.argv.slice(2).map(Number);
  const seeds = args.length > 0 ? Array.from({ length: args.length / 2 }, (_, i) => [args[2 * i], args[2 * i + 1]]) : SEEDS;
  const scenarios = scenariosOf(seeds);
  const found = differences(scenarios);
  for (const d of found) console.log(JSON.stringify(d));
  const known = found.filter((d) => d.known).length;
  const operations = scenarios.reduce((s, x) => s + x.ops.length, 0);
  console.log(`${scenarios.length} scenarios, ${operations} operations: ${found.length - known} discrepancies, ${known} known (README.md)`);
  process.exitCode = found.length > known ? 1 : 0;
}
