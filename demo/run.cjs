// Replays a trace through the JS package (`napi` addon or `wasm` build) and
// prints one JSON line per decision, with times converted back to integer ns.
const [which = 'napi', tracePath = `${__dirname}/trace.json`] = process.argv.slice(2);
const rk = which === 'wasm' ? require('../bindings-wasm/node.cjs') : require('../bindings-node/index.js');
const trace = JSON.parse(require('node:fs').readFileSync(tracePath, 'utf8'));

const build = ({ algorithm, config: c }) =>
  algorithm === 'token_bucket'
    ? new rk.TokenBucket({ capacity: c.capacity, refillTokens: c.refill_tokens, refillPeriodMs: c.refill_period_ns / 1e6 })
    : new rk.SlidingWindowLog({ limit: c.limit, windowMs: c.window_ns / 1e6 });

trace.limiters.forEach((spec, i) => {
  const limiter = build(spec);
  trace.requests.forEach((r, j) => {
    const d = limiter.tryAcquire(r.cost, r.now_ns / 1e6);
    console.log(JSON.stringify({
      limiter: i, request: j, allowed: d.allowed, remaining: d.remaining,
      retry_after_ns: Math.round(d.retryAfterMs * 1e6), reset_after_ns: Math.round(d.resetAfterMs * 1e6),
    }));
  });
});
