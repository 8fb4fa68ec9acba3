import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { retryAfterSeconds, slidingEstimate, windowStart } from '../../src/ratelimit/window.ts';

/** Straightforward simulation: walk forward one second at a time, rolling like the store does. */
function bruteForceRetryAfter(previous: number, current: number, cap: number, period: number, elapsed: number): number {
  for (let d = 1; ; d++) {
    const t = elapsed + d; // seconds since the current window's start
    let estimate: number;
    if (t < period) estimate = Math.floor((previous * (period - t)) / period) + current;
    else if (t < 2 * period) estimate = Math.floor((current * (2 * period - t)) / period);
    else estimate = 0;
    if (estimate < cap) return d;
  }
}

describe('window arithmetic', () => {
  it('aligns windows to the epoch', () => {
    assert.equal(windowStart(125, 60), 120);
    assert.equal(windowStart(120, 60), 120);
    assert.equal(windowStart(86399, 86400), 0);
  });

  it('blends the previous window by its remaining overlap', () => {
    assert.equal(slidingEstimate(10, 0, 60, 0), 10);
    assert.equal(slidingEstimate(10, 0, 60, 1), 9); // floor(10*59/60)
    assert.equal(slidingEstimate(10, 3, 60, 30), 8);
    assert.equal(slidingEstimate(0, 7, 60, 59), 7);
  });

  it('stays exact when previous × overlap passes 2^53', () => {
    const big = 2 ** 40;
    assert.equal(slidingEstimate(big, 0, 86400, 1), Number((BigInt(big) * 86399n) / 86400n));
  });

  it('floors exactly just below 2^53, where a rounded quotient is closest to the next integer', () => {
    // Deterministic pseudo-random products near the top of the safe range, and exact multiples.
    let seed = 12345;
    const next = (limit: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return 1 + (seed % limit);
    };
    for (let n = 0; n < 2000; n++) {
      const period = next(86400 * 7);
      const overlap = next(period); // period - elapsed
      const previous = Math.floor(Number.MAX_SAFE_INTEGER / overlap) - next(1000);
      const exact = Number((BigInt(previous) * BigInt(overlap)) / BigInt(period));
      assert.equal(slidingEstimate(previous, 0, period, period - overlap), exact, `floor(${previous} * ${overlap} / ${period})`);
      assert.equal(slidingEstimate(period * 7, 0, period, period - overlap), 7 * overlap, 'an exact multiple stays whole');
    }
    const now = Number.MAX_SAFE_INTEGER - 5;
    assert.equal(windowStart(now, 86400), now - (now % 86400));
  });

  it('gives the required Retry-After vectors', () => {
    // 10 per minute, 10 requests at an aligned t0.
    assert.equal(retryAfterSeconds(0, 10, 10, 60, 0), 61);
    // Token cap 10 per minute, 30 tokens charged at an aligned t0.
    assert.equal(retryAfterSeconds(0, 30, 10, 60, 0), 101);
    // Mid-window: 10 requests 30 s into the window.
    assert.equal(retryAfterSeconds(0, 10, 10, 60, 30), 31);
  });

  it('can extend past the end of the next window', () => {
    // Massive overshoot: needs both windows to roll off.
    assert.equal(retryAfterSeconds(0, 1000, 1, 60, 0), 120);
  });

  it('matches a second-by-second simulation', () => {
    let seed = 42;
    const random = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    for (let i = 0; i < 20000; i++) {
      const period = 1 + random(120);
      const elapsed = random(period);
      const cap = 1 + random(20);
      const previous = random(60);
      const current = random(40);
      if (slidingEstimate(previous, current, period, elapsed) < cap) continue; // only breaches matter
      assert.equal(
        retryAfterSeconds(previous, current, cap, period, elapsed),
        bruteForceRetryAfter(previous, current, cap, period, elapsed),
        JSON.stringify({ previous, current, cap, period, elapsed }),
      );
    }
  });
});
