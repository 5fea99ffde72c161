// Runs the shared conformance vectors (tests/vectors, see CONTRACT.md) against the
// JS classes: ns become ms (ns / 1e6), outputs are compared by rounding back to ns.

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
const DECISION_KEYS = ['allowed', 'limit', 'remaining', 'resetAfterMs', 'retryAfterMs'];

// Wrong-type cases (strings) pass through unconverted.
const ms = (ns) => (typeof ns === 'number' ? ns / 1e6 : ns);
const ns = (ms) => Math.round(ms * 1e6);

function construct({ TokenBucket, SlidingWindowLog }, { algorithm, config }) {
  switch (algorithm) {
    case 'token_bucket': {
      const options = { capacity: config.capacity, refillTokens: config.refill_tokens, refillPeriodMs: ms(config.refill_period_ns) };
      if ('initial_tokens' in config) options.initialTokens = config.initial_tokens;
      return new TokenBucket(options);
    }
    case 'sliding_window_log':
      return new SlidingWindowLog({ limit: config.limit, windowMs: ms(config.window_ns) });
    default:
      throw new Error(`unknown algorithm ${algorithm}`);
  }
}

/** Why `fn` did not throw `expected`, or null when it did. */
function checkError(fn, expected) {
  let error;
  try {
    fn();
    return `expected ${expected.code} (${expected.argument}), nothing thrown`;
  } catch (e) {
    error = e;
  }
  const argument = JS_ARGUMENT[expected.argument];
  const kind = expected.code === 'invalid_type' ? TypeError : RangeError;
  if (!(error instanceof kind)) return `expected a ${kind.name}, got ${error?.constructor?.name}: ${error?.message}`;
  if (error.code !== expected.code) return `expected code ${expected.code}, got ${error.code}`;
  if (!argument || !String(error.message).includes(argument)) return `message does not name ${argument}: ${error.message}`;
  return null;
}

function checkDecision(decision, expect) {
  if (Object.getPrototypeOf(decision) !== Object.prototype) return 'not a plain object';
  const keys = Object.keys(decision).sort().join();
  if (keys !== DECISION_KEYS.join()) return `keys ${keys}`;
  const got = {
    allowed: decision.allowed,
    remaining: decision.remaining,
    limit: decision.limit,
    retry_after_ns: ns(decision.retryAfterMs),
    reset_after_ns: ns(decision.resetAfterMs),
  };
  for (const key of Object.keys(got)) {
    if (got[key] !== expect[key]) return `${key}: expected ${expect[key]}, got ${got[key]}`;
  }
  return null;
}

/** Why the scenario failed, or null. */
function runScenario(classes, scenario) {
  if (scenario.expect_error) return checkError(() => construct(classes, scenario), scenario.expect_error);
  const limiter = construct(classes, scenario);
  for (const [i, step] of scenario.steps.entries()) {
    const call = () => limiter.tryAcquire(step.cost, ms(step.now_ns));
    let problem;
    if (step.expect_error) {
      problem = checkError(call, step.expect_error);
    } else {
      try {
        problem = checkDecision(call(), step.expect);
      } catch (error) {
        problem = `threw ${error?.constructor?.name}: ${error?.message}`;
      }
    }
    if (problem) return `step ${i}: ${problem}`;
  }
  return null;
}

/** Fetches index.json and every file it names from `base`, runs them all. */
export async function runVectors(classes, base) {
  const get = async (name) => {
    const response = await fetch(new URL(name, base));
    if (!response.ok) throw new Error(`GET ${name}: ${response.status}`);
    return response.json();
  };
  const index = await get('index.json');
  const total = Object.values(index.files).reduce((a, b) => a + b, 0);
  const results = [];
  const fileProblems = [];
  for (const [file, count] of Object.entries(index.files)) {
    const { scenarios } = await get(file);
    if (scenarios.length !== count) fileProblems.push(`${file}: index.json says ${count} scenarios, the file has ${scenarios.length}`);
    for (const scenario of scenarios) {
      let problem;
      try {
        problem = runScenario(classes, scenario);
      } catch (error) {
        problem = `threw ${error?.constructor?.name}: ${error?.message}`;
      }
      results.push({ file, name: scenario.name, problem });
    }
  }
  return { index: index.files, total, ran: results.length, fileProblems, results };
}
