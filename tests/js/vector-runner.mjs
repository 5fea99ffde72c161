// Runs the shared conformance vectors (tests/vectors/*.json and
// tests/vectors/core-only/*.json) through the JS API. Written once for the
// Node suite (vectors.test.cjs, on the napi addon and the wasm build) and the
// browser page (tests/browser/page), so it returns problems as strings.
//
// Units: vector durations and instants are integer nanoseconds; the JS API
// takes milliseconds (ns / 1e6), and outputs are compared by rounding back to
// ns. Integers are parsed exactly (see parseVectors), so that a scenario whose
// inputs no JS number can carry exactly is recognised, not rounded: a count
// above 2^53 - 1, or an instant such as 2^64 - 1 ns that has no exact
// millisecond value. Such a scenario is reported as inexpressible and not run;
// `maxWaitMs: Infinity` stands for a wait bound of 2^64 - 1 ns (no bound).

const U64_MAX = 2n ** 64n - 1n;
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const BIG = '\u0000big:';

/** The JS spelling of each core (Rust) argument name, as error messages must use. */
export const JS_ARGUMENT = {
  capacity: 'capacity',
  refill_tokens: 'refillTokens',
  refill_period: 'refillPeriodMs',
  initial_tokens: 'initialTokens',
  limit: 'limit',
  window: 'windowMs',
  cost: 'cost',
  now: 'nowMs',
  burst: 'burst',
  emission_interval: 'emissionIntervalMs',
  tokens: 'tokens',
  period: 'periodMs',
  interval: 'intervalMs',
  max_wait: 'maxWaitMs',
  bandwidths: 'bandwidths',
  new: 'other',
  state: 'bytes',
};

// Only the snake_case names: `window` and `now` are prefixes of their JS spelling.
const RUST_SPELLING = Object.keys(JS_ARGUMENT).filter((rust) => rust.includes('_'));

const DECISION_KEYS = ['allowed', 'limit', 'remaining', 'resetAfterMs', 'retryAfterMs'];

/**
 * JSON.parse, except that integers of 16 digits or more (beyond what a double
 * holds exactly) become BigInts. Strings are left alone.
 */
export function parseVectors(text) {
  const tagged = text.replace(/"(?:[^"\\]|\\.)*"|-?\d{16,}(?![.\deE])/g, (token) =>
    token.startsWith('"') ? token : JSON.stringify(BIG + token),
  );
  return JSON.parse(tagged, (_key, value) =>
    typeof value === 'string' && value.startsWith(BIG) ? BigInt(value.slice(BIG.length)) : value,
  );
}

class Inexpressible extends Error {}

/** A vector count as a JS number; a string (a wrong-type scenario) passes through. */
function count(value, what) {
  if (typeof value === 'bigint') {
    if (value > MAX_SAFE || value < -MAX_SAFE) {
      throw new Inexpressible(`${what} ${value} is beyond 2^53 - 1, the largest count a JS number holds`);
    }
    return Number(value);
  }
  return value;
}

/** A vector duration or instant in ns as milliseconds, if a JS number carries it exactly. */
function ms(ns, what) {
  if (typeof ns !== 'number' && typeof ns !== 'bigint') return ns;
  const millis = Number(ns) / 1e6;
  // The binding rounds millis * 1e6 to the nearest nanosecond: it must land on ns.
  if (ns >= 0 && BigInt(Math.round(millis * 1e6)) !== BigInt(ns)) {
    throw new Inexpressible(`${what} ${ns} ns has no exact value in JS milliseconds`);
  }
  return millis;
}

function maxWait(ns) {
  return typeof ns === 'bigint' && ns === U64_MAX ? Infinity : ms(ns, 'max_wait_ns');
}

/** The nanoseconds a millisecond output stands for. */
const toNs = (millis) => Math.round(millis * 1e6);

function sameNs(actualMs, expectedNs) {
  const expected = Number(expectedNs);
  const actual = toNs(actualMs);
  // Beyond 2^53 ns (104 days) a double has no nanosecond resolution either way.
  return expected <= Number.MAX_SAFE_INTEGER ? actual === expected : Math.abs(actual - expected) <= expected * 2 ** -50;
}

function bandwidth(c) {
  const options = {
    capacity: count(c.capacity, 'capacity'),
    refillTokens: count(c.refill_tokens, 'refill_tokens'),
    refillPeriodMs: ms(c.refill_period_ns, 'refill_period_ns'),
  };
  if (c.initial_tokens !== undefined) options.initialTokens = count(c.initial_tokens, 'initial_tokens');
  if (c.refill !== undefined) options.refill = c.refill;
  return options;
}

/** The limiter a scenario describes, built through the public API. */
function build(api, { algorithm, config: c }) {
  const window = () =>
    c.calendar !== undefined
      ? { limit: count(c.limit, 'limit'), calendar: c.calendar }
      : { limit: count(c.limit, 'limit'), windowMs: ms(c.window_ns, 'window_ns') };
  switch (algorithm) {
    case 'keyed':
      return new api.KeyedLimiter(build(api, c));
    case 'policy':
      return buildPolicy(api, c);
    case 'token_bucket':
      return c.bandwidths !== undefined
        ? api.TokenBucket.fromBandwidths(c.bandwidths.map(bandwidth))
        : new api.TokenBucket(bandwidth(c));
    case 'gcra':
      return c.emission_interval_ns !== undefined
        ? new api.Gcra({ burst: count(c.burst, 'burst'), emissionIntervalMs: ms(c.emission_interval_ns, 'emission_interval_ns') })
        : api.Gcra.perPeriod({ burst: count(c.burst, 'burst'), tokens: count(c.tokens, 'tokens'), periodMs: ms(c.period_ns, 'period_ns') });
    case 'leaky_bucket':
      return new api.LeakyBucket({ capacity: count(c.capacity, 'capacity'), intervalMs: ms(c.interval_ns, 'interval_ns') });
    case 'sliding_window_log':
      return new api.SlidingWindowLog(window());
    case 'sliding_window_counter':
      return new api.SlidingWindowCounter(window());
    case 'fixed_window':
      return new api.FixedWindow(window());
    default:
      throw new Error(`unknown algorithm ${JSON.stringify(algorithm)}`);
  }
}

/**
 * The vectors state each limit's limiter exactly (`{ name, by, algorithm,
 * config }`), which rate strings cannot always (no unit below the second):
 * each limiter is built as above and handed to the Policy as `limiter`.
 */
function buildPolicy(api, c) {
  return new api.Policy({ limits: c.limits.map((l) => ({ name: l.name, by: l.by, limiter: build(api, l) })) });
}

const hex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
const unhex = (text) => Uint8Array.from(text.match(/../g) ?? [], (pair) => parseInt(pair, 16));

/**
 * Portable state: after the steps, `toBytes()` is exactly `state`; it restores
 * into a fresh limiter (which then answers as the original), and each broken
 * variant is refused with a RangeError of its `state_*` code.
 */
function stateProblem(api, scenario, limiter) {
  const got = hex(limiter.toBytes());
  if (got !== scenario.state) return `state: expected ${scenario.state}, got ${got}`;
  const fresh = build(api, scenario);
  fresh.restore(unhex(scenario.state));
  if (hex(fresh.toBytes()) !== scenario.state) return 'restored: toBytes differs';
  for (const c of scenario.restore) {
    const problem = errorProblem(() => build(api, scenario).restore(unhex(c.bytes)), { code: c.expect_error, argument: 'state' });
    if (problem) return `restore ${c.bytes}: ${problem}`;
  }
  return null;
}

/** Why `fn` did not throw the binding's error for `expected` ({ code, argument }), or null. */
export function errorProblem(fn, expected) {
  let error;
  try {
    fn();
    return `expected ${expected.code} (${expected.argument}), nothing thrown`;
  } catch (e) {
    if (e instanceof Inexpressible) throw e;
    error = e;
  }
  const argument = JS_ARGUMENT[expected.argument] ?? expected.argument;
  const kind = expected.code === 'invalid_type' ? TypeError : RangeError;
  const what = `${error?.name}: ${error?.message}`;
  if (!(error instanceof kind)) return `expected a ${kind.name}, got ${what}`;
  if (error.code !== expected.code) return `expected code ${expected.code}, got ${error.code} (${what})`;
  if (!String(error.message).includes(argument)) return `the message does not name \`${argument}\`: ${what}`;
  const rust = RUST_SPELLING.find((name) => String(error.message).includes(name));
  if (rust) return `the message uses the Rust spelling \`${rust}\`: ${what}`;
  return null;
}

/** A count as JS reads it: 2^64 - 1, no bound (a policy without limits), is Infinity. */
const countOf = (n) => (String(n) === '18446744073709551615' ? Infinity : Number(n));

/** Why `d` differs from the vector's expectation, or null. */
export function decisionProblem(d, expect) {
  if (d === null || Object.getPrototypeOf(d) !== Object.prototype) return 'a decision is a plain object';
  const keys = Object.keys(d).sort().join();
  if (keys !== DECISION_KEYS.join()) return `decision keys ${keys}`;
  const checks = [
    ['allowed', d.allowed === expect.allowed, d.allowed],
    ['remaining', d.remaining === countOf(expect.remaining), d.remaining],
    ['limit', d.limit === countOf(expect.limit), d.limit],
    ['retry_after_ns', sameNs(d.retryAfterMs, expect.retry_after_ns), toNs(d.retryAfterMs)],
    ['reset_after_ns', sameNs(d.resetAfterMs, expect.reset_after_ns), toNs(d.resetAfterMs)],
  ];
  const wrong = checks.find(([, ok]) => !ok);
  return wrong ? `${wrong[0]}: expected ${expect[wrong[0]]}, got ${wrong[2]}` : null;
}

/** Why a policy decision differs from the vector's expectation (with denied_by and limits), or null. */
function policyDecisionProblem(d, expect) {
  const { deniedBy, limits, ...combined } = d;
  const problem = decisionProblem(combined, expect);
  if (problem) return `combined: ${problem}`;
  if (deniedBy !== expect.denied_by) return `denied_by: expected ${expect.denied_by}, got ${deniedBy}`;
  if (!Array.isArray(limits) || limits.length !== expect.limits.length) return `limits: expected ${expect.limits.length}`;
  for (const [i, l] of limits.entries()) {
    const { name, ...own } = l;
    if (typeof name !== 'string') return `limits[${i}] has no name`;
    const p = decisionProblem(own, expect.limits[i]);
    if (p) return `limits[${i}] (${name}): ${p}`;
  }
  return null;
}

function policyStepProblem(policy, step) {
  const op = step.op ?? 'acquire';
  const cost = count(step.cost, 'cost');
  const now = ms(step.now_ns, 'now_ns');
  const call = {
    acquire: () => policy.tryAcquire(step.request, cost, now),
    peek: () => policy.peek(step.request, cost, now),
  }[op];
  if (!call) return `unknown policy op ${op}`;
  if (step.expect_error) return errorProblem(call, step.expect_error);
  return policyDecisionProblem(call(), step.expect);
}

/** A keyed store seen as one limiter: every call on `step.key`. */
function keyedView(store, key) {
  return {
    tryAcquire: (cost, now) => store.tryAcquire(key, cost, now),
    peek: (cost, now) => store.peek(key, cost, now),
    reserve: (cost, maxWaitMs, now) => store.reserve(key, cost, maxWaitMs, now),
    refund: (cost, now) => store.refund(key, cost, now),
  };
}

function stepProblem(limiter, step, algorithm) {
  if (algorithm === 'policy') return policyStepProblem(limiter, step);
  if (algorithm === 'keyed') return stepProblem(keyedView(limiter, step.key), step);
  const op = step.op ?? 'acquire';
  const cost = count(step.cost, 'cost');
  const now = ms(step.now_ns, 'now_ns');
  const call = {
    acquire: () => limiter.tryAcquire(cost, now),
    peek: () => limiter.peek(cost, now),
    reserve: () => limiter.reserve(cost, maxWait(step.max_wait_ns), now),
    refund: () => limiter.refund(cost, now),
  }[op];
  if (!call) return `unknown op ${op}`;
  if (step.expect_error) return errorProblem(call, step.expect_error);
  const got = call();
  const expect = step.expect;
  switch (op) {
    case 'refund':
      return got === undefined ? null : `refund returned ${got}`;
    case 'reserve': {
      if (expect.denied) {
        if (got.ok || got.cost !== cost) return `expected a denied reservation of ${cost}, got ok=${got.ok} cost=${got.cost}`;
        if (!sameNs(got.waitMs, expect.denied.retry_after_ns)) return `denied waitMs ${got.waitMs} is not the decision's retryAfterMs`;
        return decisionProblem(got.decision, expect.denied);
      }
      if (!got.ok || got.decision !== null) return `expected a booking, got ok=${got.ok}`;
      if (!sameNs(got.waitMs, expect.wait_ns)) return `wait_ns: expected ${expect.wait_ns}, got ${toNs(got.waitMs)}`;
      // The slot, now + wait, exact: refund(cost, atMs) must find it.
      if (!sameNs(got.atMs, BigInt(step.now_ns) + BigInt(expect.wait_ns))) return `atMs ${got.atMs} is not now + wait`;
      return null;
    }
    default:
      return decisionProblem(got, expect);
  }
}

/**
 * Runs one scenario against `api` (the exports of a build). Returns
 * `{ problem: null }` when it passes, `{ problem: string }` when it fails, or
 * `{ inexpressible: reason }` when JS numbers cannot carry its inputs.
 */
export function runScenario(api, scenario) {
  try {
    if (scenario.expect_error) {
      if (scenario.steps !== undefined) return { problem: 'a scenario has either steps or expect_error' };
      return { problem: errorProblem(() => build(api, scenario), scenario.expect_error) };
    }
    // Every input is converted before anything runs, so inexpressible is all or nothing.
    for (const step of scenario.steps) {
      count(step.cost, 'cost');
      ms(step.now_ns, 'now_ns');
      if (step.op === 'reserve') maxWait(step.max_wait_ns);
    }
    const limiter = build(api, scenario);
    for (const [i, step] of scenario.steps.entries()) {
      let problem;
      try {
        problem = stepProblem(limiter, step, scenario.algorithm);
      } catch (error) {
        problem = `threw ${error?.name}: ${error?.message}`;
      }
      if (problem) return { problem: `step ${i} (${step.op ?? 'acquire'} at ${step.now_ns} ns, cost ${step.cost}): ${problem}` };
    }
    if (scenario.state !== undefined) return { problem: stateProblem(api, scenario, limiter) };
    return { problem: null };
  } catch (error) {
    if (error instanceof Inexpressible) return { inexpressible: error.message };
    return { problem: `threw ${error?.name}: ${error?.message}` };
  }
}

/**
 * Runs a vector directory: `read(name)` returns a file's text. Returns the
 * index, the per-file counts and every scenario's outcome.
 */
export async function runDirectory(api, read) {
  const index = parseVectors(await read('index.json'));
  const files = Object.keys(index.files).sort();
  const total = Object.values(index.files).reduce((sum, n) => sum + n, 0);
  const fileProblems = [];
  const results = [];
  for (const file of files) {
    const { scenarios } = parseVectors(await read(file));
    if (scenarios.length !== index.files[file]) {
      fileProblems.push(`${file}: index.json lists ${index.files[file]} scenarios, the file has ${scenarios.length}`);
    }
    for (const scenario of scenarios) results.push({ file, name: scenario.name, ...runScenario(api, scenario) });
  }
  return { files, total, fileProblems, results };
}
