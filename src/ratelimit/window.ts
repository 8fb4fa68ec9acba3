/**
 * Sliding-window arithmetic on an integer-second clock. Pure functions, shared by the
 * in-memory counter store and the engine (a shared store's script must reproduce them
 * exactly).
 *
 * A window of `period` seconds starts at `now - now % period` (aligned to the Unix
 * epoch). The estimate blends the previous window in proportion to how much of it still
 * overlaps the sliding interval: floor(previous * (period - elapsed) / period) + current.
 */

/** Start (in seconds) of the fixed window containing `nowSeconds`. */
export function windowStart(nowSeconds: number, periodSeconds: number): number {
  // The contract's `now - now % period`, as a floored division: the same for a clock's non-negative
  // integers (exact for now < 2^53, see mulDivFloor), without a floating-point remainder.
  return Math.floor(nowSeconds / periodSeconds) * periodSeconds;
}

/** floor(a * b / c) for non-negative integers, exact even beyond 2^53. */
function mulDivFloor(a: number, b: number, c: number): number {
  const product = a * b;
  if (product <= Number.MAX_SAFE_INTEGER) {
    // The rounded quotient of two integers below 2^53 is off by less than 1/c, which is never
    // enough to cross an integer: its floor is exact.
    return Math.floor(product / c);
  }
  return Number((BigInt(a) * BigInt(b)) / BigInt(c));
}

/** The sliding-window estimate for a counter whose window started `elapsed` seconds ago. */
export function slidingEstimate(previous: number, current: number, periodSeconds: number, elapsed: number): number {
  if (previous === 0) return current;
  return mulDivFloor(previous, periodSeconds - elapsed, periodSeconds) + current;
}

/** Largest integer r with weight * r < k * period (weight >= 1, k >= 1). */
function largestOverlapBelow(k: number, periodSeconds: number, weight: number): number {
  const product = k * periodSeconds;
  if (product <= Number.MAX_SAFE_INTEGER) {
    const numerator = product - 1;
    return (numerator - (numerator % weight)) / weight;
  }
  return Number((BigInt(k) * BigInt(periodSeconds) - 1n) / BigInt(weight));
}

/**
 * The smallest whole number of seconds d >= 1 after which the estimate is below `cap`
 * with no new traffic. Exact, in O(1): the estimate only falls as time passes, so we
 * solve for the first second in each of the three phases that follow `now`:
 *   1. still in the current window:  floor(previous * r / period) + current < cap,
 *      r = period - elapsed - d (the previous window's remaining overlap);
 *   2. in the next window, where current has become previous and current is 0;
 *   3. two windows on, when both have rolled off (estimate 0, always below cap >= 1).
 * This is why a Retry-After can extend past the next window boundary.
 */
export function retryAfterSeconds(
  previous: number,
  current: number,
  cap: number,
  periodSeconds: number,
  elapsed: number,
): number {
  const untilWindowEnd = periodSeconds - elapsed; // >= 1
  if (current < cap) {
    if (previous === 0) return 1; // already below the cap
    const overlap = largestOverlapBelow(cap - current, periodSeconds, previous);
    const d = Math.max(1, untilWindowEnd - overlap);
    if (d < untilWindowEnd) return d;
  }
  // Phase 2: elapsed' = d - untilWindowEnd in [0, period - 1]; need current * (period - elapsed') < cap * period.
  let nextElapsed = 0;
  if (current > 0) nextElapsed = Math.max(0, periodSeconds - largestOverlapBelow(cap, periodSeconds, current));
  if (nextElapsed < periodSeconds) return untilWindowEnd + nextElapsed;
  return untilWindowEnd + periodSeconds;
}
