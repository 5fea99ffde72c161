'use strict';
// The Redis clients' differential test (clients/README.md): generated
// scenarios through the Node client and the Python client, each on its own
// key prefixes of one real server, every answer and the state left in Redis
// compared; and scenarios where Python and Node call by turns on the same
// keys, every answer compared with the in-process core's. Python: the
// repo's .venv (bash scripts/python.sh build), or RATEKEEPER_PYTHON.
const test = require('node:test');
const assert = require('node:assert/strict');
const { URL } = require('./helpers.cjs');
const { generate } = require('./clients/generate.cjs');
const { SEEDS, INTERLEAVED, python, sideBySide, interleaved, connect, cleanUp, scenariosOf } = require('./clients/differential.cjs');

test('the scenarios are the same on every run', () => {
  assert.equal(JSON.stringify(generate(7, 30)), JSON.stringify(generate(7, 30)));
  assert.equal(JSON.stringify(generate(7, 30, true)), JSON.stringify(generate(7, 30, true)));
});

test('the scenarios cover every algorithm, form and operation', () => {
  const seen = new Set();
  const specs = (s) => (s.kind === 'limiter' ? [s.subject.limiter] : (s.subject.limits ?? []).map((l) => l.limiter ?? l));
  for (const s of [...scenariosOf(SEEDS), ...scenariosOf(INTERLEAVED, true)]) {
    seen.add(s.kind);
    if (s.subject.form !== undefined) seen.add(`form ${s.subject.form}`);
    if (s.interleaved) seen.add('interleaved');
    if (s.early) seen.add('from 1970');
    for (const spec of specs(s)) {
      seen.add(spec.algorithm ?? 'token_bucket');
      if (spec.bands !== undefined) seen.add(`${spec.bands.length} bands`);
      if (spec.sub_ns !== undefined || spec.calendar !== undefined) seen.add('refused');
    }
    if ((s.subject.limits ?? []).some((l) => l.keyed)) seen.add('keyed limit');
    for (const op of s.ops) {
      seen.add(op.op);
      if (op.clock) seen.add('by the clock');
      if (op.ns !== undefined) seen.add('sub-µs now');
      if (op.op === 'reserve' && op.cancel) seen.add('cancel');
      if (op.op === 'acquire') seen.add(`acquire within ${op.timeout === null ? 'no bound' : op.timeout === 0 ? '0' : 'a timeout'}`);
      if (op.cost === 0) seen.add('cost 0');
      if (op.side !== undefined) seen.add(`by ${op.side}`);
    }
  }
  const wanted = ['limiter', 'policy', 'form limiters', 'form rates', 'form text', 'interleaved', 'from 1970', 'keyed limit', 'refused'];
  wanted.push('gcra', 'token_bucket', 'fixed_window', 'sliding_window_counter', 'sliding_window_log', '1 bands', '2 bands', '3 bands', '4 bands');
  wanted.push('try_acquire', 'peek', 'batch', 'reserve', 'cancel', 'refund', 'acquire', 'state', 'by the clock', 'sub-µs now', 'cost 0');
  wanted.push('acquire within 0', 'acquire within a timeout', 'acquire within no bound', 'by python', 'by node');
  assert.deepStrictEqual(wanted.filter((w) => !seen.has(w)), []);
});

test('the Python and Node clients answer alike, and by turns on the same keys as the core', async (t) => {
  const clients = await connect(URL);
  const py = python(URL);
  const tag = `test${process.pid}`;
  try {
    const side = scenariosOf(SEEDS);
    const turns = scenariosOf(INTERLEAVED, true);
    const found = [...(await sideBySide(clients, py, side, tag)), ...(await interleaved(clients, py, turns, tag))];
    const operations = (list) => list.reduce((n, s) => n + s.ops.length, 0);
    t.diagnostic(`${side.length} scenarios side by side (${operations(side)} operations each), ${turns.length} by turns (${operations(turns)} operations)`);
    // The first few in full; `node tests/redis/clients/differential.cjs` lists them all.
    assert.deepStrictEqual(found.slice(0, 3), [], `${found.length} scenarios differ`);
  } finally {
    py.close();
    await cleanUp(clients.ioredis);
    await clients.close();
  }
});
