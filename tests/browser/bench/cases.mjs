// The cases of the wasm-vs-`limiter` benchmark, shared by Node and the Chromium
// page (run.mjs): ns per decision, every call allowed (1e9 per second), the
// median of ROUNDS rounds with the cases interleaved.
const RATE = 1e9;

/** Returns [name, ns per call] for each case. `api`: a ratekeeper build; `limiter`: the `limiter` package; `extra`: more cases. */
export function bench({ api, limiter, extra = {} }, n = 200_000, rounds = 9) {
  const bucket = new api.TokenBucket({ capacity: RATE, refillTokens: RATE, refillPeriodMs: 1000 });
  const gcra = new api.Gcra({ burst: RATE, emissionIntervalMs: 1e-6 });
  const theirs = new limiter.TokenBucket({ bucketSize: RATE, tokensPerInterval: RATE, interval: 'second' });
  // Keyed and policy decisions over 1024 keys in turn, each key's a bucket
  // that admits every call and stays short of full (refilled one token
  // every 100 s), so that every key stays held: its first call inserts it, in the
  // warm-up, and every later one finds it.
  const keys = Array.from({ length: 1024 }, (_, i) => `client-${i}`);
  const requests = keys.map((user) => ({ user }));
  const held = new api.TokenBucket({ capacity: 1e8, refillTokens: 1, refillPeriodMs: 1e5 });
  const keyed = new api.KeyedLimiter(held);
  const policy = new api.Policy();
  policy.add('per-user', held, { by: ['user'] });
  // One loop per case: a shared loop would see many callees at one call site.
  const cases = {
    'ratekeeper wasm: TokenBucket.tryAcquire()': (k) => {
      let s = 0;
      for (let i = 0; i < k; i++) s += bucket.tryAcquire().allowed ? 1 : 0;
      return s;
    },
    'ratekeeper wasm: Gcra.tryAcquire()': (k) => {
      let s = 0;
      for (let i = 0; i < k; i++) s += gcra.tryAcquire().allowed ? 1 : 0;
      return s;
    },
    'ratekeeper wasm: KeyedLimiter.tryAcquire(key), 1024 keys': (k) => {
      let s = 0;
      for (let i = 0; i < k; i++) s += keyed.tryAcquire(keys[i & 1023]).allowed ? 1 : 0;
      return s;
    },
    'ratekeeper wasm: Policy.tryAcquire({ user }), 1024 users': (k) => {
      let s = 0;
      for (let i = 0; i < k; i++) s += policy.tryAcquire(requests[i & 1023]).allowed ? 1 : 0;
      return s;
    },
    'limiter: TokenBucket.tryRemoveTokens(1)': (k) => {
      let s = 0;
      for (let i = 0; i < k; i++) s += theirs.tryRemoveTokens(1) ? 1 : 0;
      return s;
    },
    ...extra,
  };
  const samples = Object.fromEntries(Object.keys(cases).map((name) => [name, []]));
  for (const run of Object.values(cases)) run(n / 10); // warm-up
  for (let r = 0; r < rounds; r++) {
    for (const [name, run] of Object.entries(cases)) {
      const t0 = performance.now();
      const allowed = run(n);
      const ns = ((performance.now() - t0) * 1e6) / n;
      if (allowed !== n) throw new Error(`${name}: ${n - allowed} denied`);
      samples[name].push(ns);
    }
  }
  return Object.entries(samples).map(([name, list]) => [name, list.sort((a, b) => a - b)[list.length >> 1]]);
}

/** A napi case for Node (the addon's bucket), to put beside the others. */
export function napiCase(napi) {
  const bucket = new napi.TokenBucket({ capacity: RATE, refillTokens: RATE, refillPeriodMs: 1000 });
  return {
    'ratekeeper napi: TokenBucket.tryAcquire()': (k) => {
      let s = 0;
      for (let i = 0; i < k; i++) s += bucket.tryAcquire().allowed ? 1 : 0;
      return s;
    },
  };
}
