// An edge worker limiting requests per client (the `x-client` header, else the
// connecting address): 3 at once, then 1 more a minute, per client. It imports
// `ratekeeper`, which edge.test.mjs resolves through the installed package's
// `workerd` export condition (the WebAssembly build) before handing the worker to workerd.
import { TokenBucket } from 'ratekeeper';

// One limiter per client key (the keyed store is not in the core yet); an
// isolate keeps it between requests.
const limiters = new Map();

function limiterFor(key) {
  let limiter = limiters.get(key);
  if (limiter === undefined) {
    limiter = new TokenBucket({ capacity: 3, refillTokens: 1, refillPeriodMs: 60_000, name: 'edge', clock: () => Date.now() });
    limiters.set(key, limiter);
  }
  return limiter;
}

export default {
  async fetch(request) {
    const key = request.headers.get('x-client') ?? request.headers.get('cf-connecting-ip') ?? 'anonymous';
    const limiter = limiterFor(key);
    const decision = limiter.tryAcquire();
    const headers = { ...limiter.headers(decision), 'content-type': 'application/json' };
    return new Response(JSON.stringify({ key, ...decision, algorithm: limiter.algorithm }), {
      status: decision.allowed ? 200 : 429,
      headers,
    });
  },
};
