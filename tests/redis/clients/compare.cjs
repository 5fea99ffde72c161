'use strict';
// Compares what the two Redis clients recorded for one scenario
// (run-node.cjs, bindings-python/tests/redis/clients_runner.py): every
// decision field (µs), every error's code, TypeError or not and the argument
// it names, every booking, the headers, and the state left in Redis.

const { isDeepStrictEqual } = require('node:util');

/** An error record without what may differ by language: the message's words. */
function bare(record) {
  if (record === null || typeof record !== 'object') return record;
  if (Array.isArray(record)) return record.map(bare);
  const out = {};
  for (const [k, v] of Object.entries(record)) {
    if (k === 'message' || k === 'js') continue;
    out[k] = bare(v);
  }
  return out;
}

/**
 * Two state dumps: every key alike, but that a key whose expiry is counted
 * from the server's clock ('relative': a key kept a second once fresh) may
 * be gone from one of them by the time it was read.
 */
function stateProblems(node, python) {
  const problems = [];
  for (const key of new Set([...Object.keys(node), ...Object.keys(python)])) {
    const a = node[key];
    const b = python[key];
    if (a === undefined || b === undefined) {
      if ((a ?? b).expiry !== 'relative') problems.push(`key ${key} only in ${a === undefined ? 'Python' : 'Node'}'s: ${JSON.stringify(a ?? b)}`);
    } else if (!isDeepStrictEqual(a, b)) problems.push(`key ${key}: ${JSON.stringify(a)} (Node) vs ${JSON.stringify(b)} (Python)`);
  }
  return problems;
}

/**
 * The differences of one scenario: `[{ at, op, node, python, problems }]`,
 * `at` -1 for the construction. Stops at the first operation that differs
 * (what follows differs for that reason), but for the state.
 */
function compareScenario(scenario, node, python) {
  if (!isDeepStrictEqual(bare(node.error), bare(python.error))) {
    return [{ at: -1, op: 'construct', node: node.error, python: python.error, problems: ['construction'] }];
  }
  for (let i = 0; i < scenario.ops.length && node.error === null; i++) {
    const op = scenario.ops[i];
    const a = node.ops[i];
    const b = python.ops[i];
    if (op.op === 'state') {
      const problems = stateProblems(a.state, b.state);
      if (problems.length > 0) return [{ at: i, op, problems }];
      continue;
    }
    if (!isDeepStrictEqual(bare(a), bare(b))) return [{ at: i, op, node: a, python: b, problems: ['answer'] }];
  }
  return [];
}

module.exports = { compareScenario, bare, stateProblems };
