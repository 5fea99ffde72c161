'use strict';
// Exact conversions between the nanoseconds of a scenario and the floats the
// bindings speak (JS milliseconds, Python seconds), written as the core
// writes them (core/src/host.rs), in BigInt arithmetic: a float's own value
// scaled and rounded once (halves up), the plain `u64 as f64 / scale` of an
// answer, and the `*_f64_after` form of a `retry_after` counted from a
// given `now`. The generator keeps to instants and durations these carry
// exactly; the comparison derives from one binding's exact nanoseconds the
// floats another must answer.

const U64_MAX = 2n ** 64n - 1n;
const MS = 1_000_000n;
const SEC = 1_000_000_000n;

const view = new DataView(new ArrayBuffer(8));

/** The bits of a float as a BigInt. */
function bitsOf(x) {
  view.setFloat64(0, x);
  return view.getBigUint64(0);
}

function fromBits(bits) {
  view.setBigUint64(0, bits);
  return view.getFloat64(0);
}

/**
 * `value` (units) times `scale` (ns per unit, a BigInt), rounded to the
 * nearest nanosecond, halves up, or null where the core refuses it (NaN,
 * infinite, negative, 2^64 ns or more).
 */
function scaled(value, scale) {
  if (!Number.isFinite(value) || value < 0) return null;
  const bits = bitsOf(value) & ~(1n << 63n);
  const biased = bits >> 52n;
  const fraction = bits & ((1n << 52n) - 1n);
  const [m, e] = biased === 0n ? [fraction, -1074n] : [fraction | (1n << 52n), biased - 1075n];
  const exact = m * scale;
  let ns;
  if (e >= 0n) ns = exact << e;
  else {
    const shift = -e;
    ns = (exact + (1n << (shift - 1n))) >> shift;
  }
  return ns > U64_MAX ? null : ns;
}

/** `n` ns as the core answers it in units of `scale`: `n as f64 / scale`. */
function plain(n, scale) {
  return Number(n) / Number(scale);
}

/**
 * The wait `wait` ns after `now` (a float in units of `scale`), as the core
 * answers a `retry_after` counted from a given `now` (`Nanos::as_*_f64_after`):
 * the smallest float near the plain one whose float sum with `now` reaches
 * `now` plus the wait.
 */
function after(now, wait, scale) {
  let w = plain(wait, scale);
  if (wait === 0n) return w;
  const at = scaled(now, scale);
  if (at === null) return w;
  let target = at + wait;
  if (target > U64_MAX) target = U64_MAX;
  for (let i = 0; i < 8; i++) {
    const sum = scaled(now + w, scale);
    if (sum === null || sum >= target) break;
    w = fromBits(bitsOf(now + w) + 1n) - now;
  }
  return w;
}

/** Milliseconds for `ns`, when they carry it exactly (else null). */
function msOf(ns) {
  const ms = plain(ns, MS);
  return scaled(ms, MS) === ns ? ms : null;
}

/**
 * The interval [lo, hi] of ns that answer `value` plainly in units of
 * `scale` (the answer is monotonic in ns), or null when none does.
 */
function plainRange(value, scale) {
  const first = (pred) => {
    // The least n in [0, 2^64) with pred(n), pred monotonic; 2^64 if none.
    let lo = 0n;
    let hi = U64_MAX + 1n;
    while (lo < hi) {
      const mid = (lo + hi) >> 1n;
      if (pred(mid)) hi = mid;
      else lo = mid + 1n;
    }
    return lo;
  };
  const lo = first((n) => plain(n, scale) >= value);
  const end = first((n) => plain(n, scale) > value);
  return lo < end ? [lo, end - 1n] : null;
}

/** Whether some ns answers `a` plainly in units of `scaleA` and `b` in units of `scaleB`. */
function plainAgree(a, scaleA, b, scaleB) {
  const x = plainRange(a, scaleA);
  const y = plainRange(b, scaleB);
  return x !== null && y !== null && x[0] <= y[1] && y[0] <= x[1];
}

module.exports = { U64_MAX, MS, SEC, scaled, plain, after, msOf, plainRange, plainAgree };
