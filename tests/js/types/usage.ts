// Type-level usage of the JS API, checked with `tsc --noEmit -p tests/js/types`
// against bindings-node/index.d.ts. It is never run. `@ts-expect-error` lines
// must stay errors: they prove the declarations reject misuse.

import {
  SlidingWindowLog,
  TokenBucket,
  type Decision,
  type SlidingWindowLogOptions,
  type TokenBucketOptions,
} from 'ratekeeper';

const bucketOptions: TokenBucketOptions = { capacity: 10, refillTokens: 1, refillPeriodMs: 100 };
const bucket: TokenBucket = new TokenBucket(bucketOptions);
const started = new TokenBucket({ ...bucketOptions, initialTokens: 0 });

const logOptions: SlidingWindowLogOptions = { limit: 100, windowMs: 60_000 };
const log: SlidingWindowLog = new SlidingWindowLog(logOptions);

// `cost` and `nowMs` are both optional numbers.
const decisions: Decision[] = [
  bucket.tryAcquire(),
  bucket.tryAcquire(2),
  bucket.tryAcquire(undefined, performanceNow()),
  started.tryAcquire(1, 1234.5),
  log.tryAcquire(),
  log.tryAcquire(3, 0),
];

export function describe(d: Decision): string {
  const allowed: boolean = d.allowed;
  const counts: [number, number] = [d.remaining, d.limit];
  const waits: [number, number] = [d.retryAfterMs, d.resetAfterMs];
  return allowed ? `${counts[0]} of ${counts[1]} left` : `retry in ${waits[0]} ms`;
}
export const summaries: string[] = decisions.map(describe);

function performanceNow(): number {
  return 0;
}

// @ts-expect-error: `refillPeriodMs` is required
new TokenBucket({ capacity: 10, refillTokens: 1 });
// @ts-expect-error: the Python spelling is not an option
new TokenBucket({ capacity: 10, refill_tokens: 1, refillPeriodMs: 100 });
// @ts-expect-error: counts are numbers
new TokenBucket({ capacity: '10', refillTokens: 1, refillPeriodMs: 100 });
// @ts-expect-error: the options object is required
new SlidingWindowLog();
// @ts-expect-error: `windowMs`, not `window`
new SlidingWindowLog({ limit: 1, window: 1000 });
// @ts-expect-error: `cost` is a number
bucket.tryAcquire('1');
// @ts-expect-error: `nowMs` is a number
log.tryAcquire(1, new Date());
// @ts-expect-error: a decision has no `retryAfter` (it is `retryAfterMs`)
decisions[0]?.retryAfter;
