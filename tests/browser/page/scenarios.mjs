// Fixed scenarios with known answers, run in the page and in a module worker.
// They only record what happened; browser.test.mjs asserts.

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

export function fixedScenario({ TokenBucket, SlidingWindowLog, Gcra, LeakyBucket }) {
  // A bucket of 5 refilling 1/s hit by 12 requests at one instant.
  const bucket = new TokenBucket({ capacity: 5, refillTokens: 1, refillPeriodMs: 1000 });
  const burst = Array.from({ length: 12 }, () => bucket.tryAcquire(1, 0));

  // A sliding log of 1 per 1000 ms.
  const log = new SlidingWindowLog({ limit: 1, windowMs: 1000 });
  const logAt = Object.fromEntries([0, 999, 1000].map((ms) => [ms, log.tryAcquire(1, ms).allowed]));

  // A GCRA of 10 per second, 2 at once: three at 0 ms, and its headers.
  const gcra = Gcra.perPeriod({ burst: 2, tokens: 10, periodMs: 1000, name: 'api' });
  const gcraBurst = [0, 0, 0].map((ms) => gcra.tryAcquire(1, ms));
  const gcraHeaders = gcra.headers(gcraBurst[2]);

  // A queue of 3 leaving 100 ms apart: four bookings at 0 ms.
  const queue = new LeakyBucket({ capacity: 3, intervalMs: 100 });
  const queueWaits = [0, 0, 0, 0].map((ms) => {
    const r = queue.reserve(1, Infinity, ms);
    return r.ok ? r.waitMs : null;
  });

  const errors = {
    zeroCapacity: thrown(() => new TokenBucket({ capacity: 0, refillTokens: 1, refillPeriodMs: 1000 })),
    costAboveCapacity: thrown(() => bucket.tryAcquire(6, 1000)),
    costAsString: thrown(() => bucket.tryAcquire('1', 1000)),
    negativeWindow: thrown(() => new SlidingWindowLog({ limit: 1, windowMs: -1 })),
    notAnObject: thrown(() => new SlidingWindowLog(7)),
    gcraPeriod: thrown(() => Gcra.perPeriod({ burst: 7, tokens: 7, periodMs: 1000 })),
  };
  // The bucket keeps working after the bad calls: one token is back at 1000 ms.
  const afterErrors = bucket.tryAcquire(1, 1000);

  // No `nowMs`: the binding reads performance.now() itself.
  const slow = new TokenBucket({ capacity: 1, refillTokens: 1, refillPeriodMs: 60_000 });
  const defaultNow = [slow.tryAcquire(), slow.tryAcquire()];

  return { burst, logAt, gcraBurst, gcraHeaders, queueWaits, errors, afterErrors, defaultNow };
}

/**
 * Real waiting in the browser: six acquires on a GCRA of one per 50 ms, issued
 * at once; records when each was booked for and when it resolved.
 */
export async function pacing({ Gcra }) {
  const gcra = new Gcra({ burst: 1, emissionIntervalMs: 50 });
  const start = performance.now();
  const slots = Array.from({ length: 6 }, (_, i) => start + i * 50);
  const resolved = [];
  const waiters = slots.map(async () => {
    await gcra.acquire();
    resolved.push(performance.now() - start);
  });
  // A timeout shorter than the wait (asked behind the six, in the same tick):
  // rejected at once, nothing booked.
  const timeout = gcra.acquire(1, { timeoutMs: 1 }).then(() => null, (e) => e.name);
  await Promise.all(waiters);
  return { intervalMs: 50, resolved, timeout: await timeout };
}
