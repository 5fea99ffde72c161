// An edge worker limiting requests per client (the `x-client` header, else the
// connecting address): 3 at once, then 1 more a minute, per client. It imports
// `ratekeeper`, which edge.test.mjs resolves through the installed package's
// `workerd` export condition (the WebAssembly build) before handing the worker to workerd.
import { KeyedLimiter, TokenBucket } from 'ratekeeper';

// Counts what the wasm build asks of crypto.getRandomValues() (its stores'
// hash seeds), for the test to see that workerd gave it.
const { getRandomValues } = crypto;
let randoms = 0;
crypto.getRandomValues = (array) => {
  randoms++;
  return getRandomValues.call(crypto, array);
};

// Built in the module's global scope, as workers keep state per isolate. Its
// hash seeds come from crypto.getRandomValues() at its first request: workerd
// refuses random values in the global scope.
const perClient = new KeyedLimiter(
  new TokenBucket({ capacity: 3, refillTokens: 1, refillPeriodMs: 60_000, name: 'edge', clock: () => Date.now() }),
  { maxKeys: 100_000 },
);

export default {
  async fetch(request) {
    const key = request.headers.get('x-client') ?? request.headers.get('cf-connecting-ip') ?? 'anonymous';
    const decision = perClient.tryAcquire(key);
    const headers = { ...perClient.headers(decision), 'content-type': 'application/json' };
    const body = { key, ...decision, algorithm: perClient.algorithm, keys: perClient.size, randoms };
    return new Response(JSON.stringify(body), { status: decision.allowed ? 200 : 429, headers });
  },
};
