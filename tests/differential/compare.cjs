'use strict';
// Compares the records of one scenario from the napi addon, the wasm build
// (run-js.cjs) and Python (bindings-python/tests/differential.py).
//
// napi and wasm speak the same units: their records must be identical, float
// bit for bit. Python records each decision exactly (ns) beside its floats:
// from those nanoseconds follow the milliseconds JS must answer (units.cjs,
// the core's own conversions), so a decision is compared to the nanosecond
// whatever the magnitudes. A booked reservation's wait and slot are floats
// in both (no exact form in either API): they must be the plain conversions
// of one same ns (and the state bytes after it, compared exactly, pin the
// booking). Errors compare by code, TypeError or not, the argument named
// (each binding's spelling mapped to the core's) and the message with that
// argument's spelling put back.

const { isDeepStrictEqual } = require('node:util');
const { after, plain, plainAgree, msOf, scaled, MS, SEC, U64_MAX } = require('./units.cjs');

// Each binding's spelling of an argument -> the core's.
const FROM_JS = {
  refillTokens: 'refill_tokens',
  refillPeriodMs: 'refill_period',
  initialTokens: 'initial_tokens',
  emissionIntervalMs: 'emission_interval',
  periodMs: 'period',
  intervalMs: 'interval',
  windowMs: 'window',
  nowMs: 'now',
  maxWaitMs: 'max_wait',
  takenAtMs: 'taken_at',
  timeoutMs: 'timeout',
  maxKeys: 'max_keys',
  other: 'new',
  bytes: 'state',
};
const FROM_PYTHON = { other: 'new', data: 'state' };

const canonical = (argument, table) => (argument === null ? null : (table[argument] ?? argument));

// What messages say in each language's words: quoted text (JS quotes as
// JSON does, "route"; Python as repr, 'route'), and the clocks a calendar
// needs (the README of each binding).
const IDIOMS = [
  [/"([^"]*)"|'([^']*)'/g, (_, a, b) => `«${a ?? b}»`],
  [/clock: Date\.now|clock=time\.time/g, 'an epoch clock'],
  [/Date\.now|time\.time/g, 'the epoch clock'],
  [/performance\.now|time\.monotonic/g, 'the monotonic clock'],
];
const unquoted = (message) => IDIOMS.reduce((m, [from, to]) => m.replace(from, to), message);

function sameError(js, py) {
  const problems = [];
  if (js.error !== py.error) problems.push(`code ${js.error} (JS) vs ${py.error} (Python)`);
  if (js.type !== py.type) problems.push(`TypeError: ${js.type} (JS) vs ${py.type} (Python)`);
  const a = canonical(js.argument, FROM_JS);
  const b = canonical(py.argument, FROM_PYTHON);
  if (a !== b) problems.push(`argument ${js.argument} (JS) vs ${py.argument} (Python)`);
  else if (a !== null) {
    const jsMessage = unquoted(js.message.replace(`\`${js.argument}\``, `\`${a}\``));
    const pyMessage = unquoted(py.message.replace(`\`${py.argument}\``, `\`${b}\``));
    if (jsMessage !== pyMessage) problems.push(`message ${JSON.stringify(js.message)} (JS) vs ${JSON.stringify(py.message)} (Python)`);
  } else if (unquoted(js.message) !== unquoted(py.message)) problems.push(`message ${JSON.stringify(js.message)} (JS) vs ${JSON.stringify(py.message)} (Python)`);
  return problems;
}

/** The JS decision Python's exact one stands for, decided at `nowMs`. */
function expectedJs(py, nowMs) {
  const retry = BigInt(py.retry_ns);
  return {
    allowed: py.allowed,
    remaining: py.remaining,
    limit: py.limit,
    retryAfterMs: after(nowMs, retry, MS),
    resetAfterMs: plain(BigInt(py.reset_ns), MS),
  };
}

/** Python's own floats against its exact numbers. */
function pythonFloats(py) {
  const retry = BigInt(py.retry_ns);
  const want = py.from === null ? plain(retry, SEC) : after(py.from, retry, SEC);
  const problems = [];
  if (py.retry_after !== want) problems.push(`Python retry_after ${py.retry_after} is not ${want}, ${py.retry_ns} ns from now=${py.from}`);
  const reset = plain(BigInt(py.reset_ns), SEC);
  if (py.reset_after !== reset) problems.push(`Python reset_after ${py.reset_after} is not ${reset} (${py.reset_ns} ns)`);
  return problems;
}

function sameDecision(js, py, nowMs) {
  const problems = pythonFloats(py);
  const want = expectedJs(py, nowMs);
  const got = { allowed: js.allowed, remaining: js.remaining, limit: js.limit, retryAfterMs: js.retryAfterMs, resetAfterMs: js.resetAfterMs };
  if (!isDeepStrictEqual(got, want)) {
    problems.push(`decision ${JSON.stringify(got)} (JS) vs ${JSON.stringify(want)} (from Python's ${JSON.stringify(py)})`);
  }
  if (py.limits !== undefined) {
    if (js.deniedBy !== py.denied_by) problems.push(`deniedBy ${js.deniedBy} (JS) vs ${py.denied_by} (Python)`);
    if (js.limits.length !== py.limits.length) problems.push(`${js.limits.length} limits (JS) vs ${py.limits.length} (Python)`);
    js.limits.forEach((limit, i) => {
      const p = py.limits[i];
      if (p === undefined) return;
      if (limit.name !== p.name) problems.push(`limits[${i}].name ${limit.name} (JS) vs ${p.name} (Python)`);
      const { name: _, ...gotLimit } = limit;
      const wantLimit = expectedJs(p, nowMs);
      if (!isDeepStrictEqual(gotLimit, wantLimit)) {
        problems.push(`limits[${i}] ${JSON.stringify(gotLimit)} (JS) vs ${JSON.stringify(wantLimit)} (from Python's ${JSON.stringify(p)})`);
      }
    });
  }
  return problems;
}

function sameReservation(js, py, op) {
  const nowMs = msOf(BigInt(op.now));
  if (js.ok !== py.ok) return [`ok ${js.ok} (JS) vs ${py.ok} (Python)`];
  const problems = [];
  if (js.cost !== py.cost) problems.push(`cost ${js.cost} (JS) vs ${py.cost} (Python)`);
  if (js.ok) {
    if (js.decision !== null || py.decision !== null) problems.push('a booked reservation has a decision');
    if (!plainAgree(py.wait, SEC, js.waitMs, MS)) problems.push(`wait ${js.waitMs} ms (JS) vs ${py.wait} s (Python)`);
    if (!plainAgree(py.at, SEC, js.atMs, MS)) problems.push(`at ${js.atMs} ms (JS) vs ${py.at} s (Python)`);
    return problems;
  }
  problems.push(...sameDecision(js.decision, py.decision, nowMs));
  if (js.waitMs !== js.decision.retryAfterMs) problems.push(`JS waitMs ${js.waitMs} is not its decision's retryAfterMs`);
  if (js.atMs !== nowMs + js.waitMs) problems.push(`JS atMs ${js.atMs} is not nowMs + waitMs`);
  if (py.wait !== py.decision.retry_after) problems.push(`Python wait ${py.wait} is not its decision's retry_after`);
  let slot = BigInt(op.now) + BigInt(py.decision.retry_ns);
  if (slot > U64_MAX) slot = U64_MAX;
  if (py.at !== plain(slot, SEC)) problems.push(`Python at ${py.at} is not now + wait (${slot} ns)`);
  return problems;
}

/**
 * Whether JS's floats of a decision (and of each limit's, for a policy) carry
 * Python's exact nanoseconds: read back, the same ns.
 */
function floatsExact(js, py) {
  const exact = (j, p) => scaled(j.retryAfterMs, MS) === BigInt(p.retry_ns) && scaled(j.resetAfterMs, MS) === BigInt(p.reset_ns);
  return exact(js, py) && (py.limits ?? []).every((p, i) => exact(js.limits[i], p));
}

/** Whether two sets of headers differ only in whole numbers, each by one. */
function offByOne(a, b) {
  if (a === undefined || b === undefined) return false;
  const keys = Object.keys(a);
  if (!isDeepStrictEqual(keys, Object.keys(b))) return false;
  return keys.every((k) => {
    const [x, y] = [a[k], b[k]];
    if (x.replace(/\d+/g, '#') !== y.replace(/\d+/g, '#')) return false;
    const [xs, ys] = [x.match(/\d+/g) ?? [], y.match(/\d+/g) ?? []];
    return xs.every((n, i) => {
      const d = BigInt(n) - BigInt(ys[i]);
      return d >= -1n && d <= 1n;
    });
  });
}

/**
 * The differences between JS's record and Python's of operation `op`; those
 * of a known cause apart (`known`). `decided` is the pair of decisions the
 * headers are of (JS's, Python's).
 */
function compareRecord(js, py, op, decided) {
  if (js.op !== py.op) return [`op ${js.op} (JS) vs ${py.op} (Python): the harness is out of step`];
  const problems = [];
  if ((js.error !== undefined) !== (py.error !== undefined)) {
    const show = (r) => (r.error !== undefined ? `${r.error}: ${r.message}` : 'no error');
    problems.push(`${show(js)} (JS) vs ${show(py)} (Python)`);
  } else if (js.error !== undefined) problems.push(...sameError(js, py));
  const nowMs = op.now === undefined ? undefined : msOf(BigInt(op.now));
  if (js.decision !== undefined || py.decision !== undefined) {
    if (js.decision === undefined || py.decision === undefined) problems.push('a decision on one side only');
    else problems.push(...sameDecision(js.decision, py.decision, nowMs));
  }
  if (js.decisions !== undefined || py.decisions !== undefined) {
    const a = js.decisions ?? [];
    const b = py.decisions ?? [];
    if (a.length !== b.length) problems.push(`${a.length} decisions (JS) vs ${b.length} (Python)`);
    else a.forEach((d, i) => problems.push(...sameDecision(d, b[i], nowMs).map((p) => `[${i}] ${p}`)));
  }
  if (js.reservation !== undefined || py.reservation !== undefined) {
    if (js.reservation === undefined || py.reservation === undefined) problems.push('a reservation on one side only');
    else problems.push(...sameReservation(js.reservation, py.reservation, op));
  }
  const known = [];
  if (!isDeepStrictEqual(js.headers, py.headers)) {
    const message = `headers ${JSON.stringify(js.headers)} (JS) vs ${JSON.stringify(py.headers)} (Python)`;
    // Known (see README.md): JS's headers(decision) reads the decision's
    // floats back, and where they cannot carry its exact ns (past 2^53 ns,
    // or a retryAfterMs made to reach its instant from nowMs) a rounded-up
    // second can come out one off.
    const inexact = decided !== undefined && !floatsExact(decided[0], decided[1]);
    (inexact && offByOne(js.headers, py.headers) ? known : problems).push(message);
  }
  if (js.state !== py.state) problems.push(`state ${js.state} (JS) vs ${py.state} (Python)`);
  if (js.size !== py.size) problems.push(`size ${js.size} (JS) vs ${py.size} (Python)`);
  if (!isDeepStrictEqual(js.members, py.members)) problems.push(`members ${JSON.stringify(js.members)} (JS) vs ${JSON.stringify(py.members)} (Python)`);
  return { problems, known };
}

/**
 * The discrepancies of one scenario, each `{ at, op, binding, problems }`
 * (`at`: the operation's index, -1 for building; `known: true` for one of a
 * known cause, which the comparison goes on past); the first other
 * operation that differs ends the comparison (what follows differs for
 * that reason).
 */
function compareScenario(scenario, napi, wasm, python) {
  const ops = [{ op: 'build' }, ...scenario.ops];
  const decisions = [];
  const found = [];
  for (let i = 0; i < ops.length; i++) {
    const [n, w, p] = [napi[i], wasm[i], python[i]];
    if (n === undefined && w === undefined && p === undefined) break;
    if (!isDeepStrictEqual(n, w)) {
      return [...found, { at: i - 1, op: ops[i], binding: 'napi vs wasm', problems: [`${JSON.stringify(n)} (napi) vs ${JSON.stringify(w)} (wasm)`] }];
    }
    if (n === undefined || p === undefined) {
      return [...found, { at: i - 1, op: ops[i], binding: 'JS vs Python', problems: [`${JSON.stringify(n)} (JS) vs ${JSON.stringify(p)} (Python)`] }];
    }
    // A decision's headers, and those of the `headers` op after it, are of that decision.
    if (n.decision !== undefined && p.decision !== undefined && ['try_acquire', 'peek'].includes(n.op)) decisions.push([n.decision, p.decision]);
    const decided = ops[i].op === 'headers' ? decisions[ops[i].decision] : n.decision !== undefined ? [n.decision, p.decision] : undefined;
    const { problems, known } = compareRecord(n, p, ops[i], decided);
    if (known.length > 0) found.push({ at: i - 1, op: ops[i], binding: 'JS vs Python', problems: known, known: true });
    if (problems.length > 0) return [...found, { at: i - 1, op: ops[i], binding: 'JS vs Python', problems }];
  }
  return found;
}

module.exports = { compareScenario };
