// A fixed scenario with known answers, run in the page and in a module worker.
// It only records what happened; browser.test.mjs asserts.

function thrown(fn) {
  try {
    fn();
    return null;
  } catch (error) {
    return {
      name: error?.constructor?.name,
      isRangeError: error instanceof RangeError,
      isTypeError: error instanceof TypeError,
      code: error?.code,
      message: String(error?.message),
    };
  }
}

export function fixedScenario({ TokenBucket, SlidingWindowLog }) {
  // A bucket of 5 refilling 1/s hit by 12 requests at one instant.
  const bucket = new TokenBucket({ capacity: 5, refillTokens: 1, refillPeriodMs: 1000 });
  const burst = Array.from({ length: 12 }, () => bucket.tryAcquire(1, 0));

  // A sliding log of 1 per 1000 ms.
  const log = new SlidingWindowLog({ limit: 1, windowMs: 1000 });
  const logAt = Object.fromEntries([0, 999, 1000].map((ms) => [ms, log.tryAcquire(1, ms).allowed]));

  const errors = {
    zeroCapacity: thrown(() => new TokenBucket({ capacity: 0, refillTokens: 1, refillPeriodMs: 1000 })),
    costAboveCapacity: thrown(() => bucket.tryAcquire(6, 1000)),
    costAsString: thrown(() => bucket.tryAcquire('1', 1000)),
    negativeWindow: thrown(() => new SlidingWindowLog({ limit: 1, windowMs: -1 })),
    notAnObject: thrown(() => new SlidingWindowLog(7)),
  };
  // The bucket keeps working after the bad calls: one token is back at 1000 ms.
  const afterErrors = bucket.tryAcquire(1, 1000);

  // No `nowMs`: the binding reads performance.now() itself.
  const slow = new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 60_000 });
  const defaultNow = [slow.tryAcquire(), slow.tryAcquire()];

  return { burst, logAt, errors, afterErrors, defaultNow };
}
