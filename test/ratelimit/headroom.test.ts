import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MemoryCounterStore } from '../../src/counters/memory.ts';
import { RateLimiter, type Headroom, type Priority, type RuleDefinition } from '../../src/ratelimit/index.ts';
import { admitted, immediate, refused, rule, T0 } from './helpers.ts';

function setup(rules: RuleDefinition[], headroom: Headroom) {
  let nowMs = T0 * 1000;
  const clock = { now: () => nowMs, setSeconds: (seconds: number) => void (nowMs = seconds * 1000) };
  const limiter = new RateLimiter({ clock, store: new MemoryCounterStore(), headroom });
  limiter.replaceRules(rules);
  return { limiter, clock };
}

const at = (priority: Priority) => ({ priority });

describe('headroom: lower priorities meet only their share of each cap', () => {
  it('refuses low at 8 of a cap of 10 with low: 0.2, while high reaches 10', () => {
    const { limiter } = setup([rule('user_path', '/team', 60, { maxRequests: 10 })], { normal: 0, low: 0.2 });
    const target = { userPath: '/team/batch' };
    for (let i = 0; i < 8; i++) admitted(limiter.admit(target, at('low')));
    const refusal = refused(limiter.admit(target, at('low')));
    assert.equal(refusal.message, 'rate limit exceeded for /team: minute request limit of 10 reached for low priority');
    assert.deepEqual(refusal.headers, { requests: { limit: 8, remaining: 0, reset: refusal.retryAfterSeconds } });
    admitted(limiter.admit(target, at('normal')));
    admitted(limiter.admit(target, at('high')));
    assert.equal(refused(limiter.admit(target, at('high'))).message, 'rate limit exceeded for /team: minute request limit of 10 reached');
  });

  it('computes Retry-After against the reduced cap', () => {
    const { limiter, clock } = setup([rule('provider', 'p', 60, { maxRequests: 10 })], { normal: 0.5, low: 0.5 });
    const target = { provider: 'p' };
    for (let i = 0; i < 6; i++) admitted(limiter.admit(target));
    clock.setSeconds(T0 + 60);
    // 6 carried from the previous window and 1 now: 7, below 10, but at or above normal's 5 until
    // floor(6 * r / 60) + 1 < 5, that is r <= 39 seconds of overlap left: 21 seconds on.
    admitted(limiter.admit(target, at('high')));
    const refusal = refused(limiter.admit(target, at('normal')));
    assert.equal(refusal.message, 'rate limit exceeded for provider p: minute request limit of 10 reached for normal priority');
    assert.equal(refusal.retryAfterSeconds, 21);
  });

  it('applies to concurrency: low may hold only its share of the slots', () => {
    const { limiter } = setup([rule('model', 'p/m', 0, { maxRequests: 4 })], { normal: 0.25, low: 0.5 });
    const target = { provider: 'p', model: 'm' };
    const lows = [admitted(limiter.admit(target, at('low'))), admitted(limiter.admit(target, at('low')))];
    assert.equal(refused(limiter.admit(target, at('low'))).message, 'rate limit exceeded for model p/m: concurrent request limit of 4 reached for low priority');
    const normal = admitted(limiter.admit(target, at('normal')));
    refused(limiter.admit(target, at('normal')));
    admitted(limiter.admit(target, at('high')));
    for (const ticket of lows) ticket.release();
    refused(limiter.admit(target, at('low'))); // normal and high still hold two slots: low's share
    normal.release();
    admitted(limiter.admit(target, at('low')));
  });

  it('never admits a priority whose share of a cap rounds down to nothing, without touching the counters', () => {
    const { limiter } = setup([rule('user_path', '/', 0, { maxRequests: 1 })], { normal: 0, low: 0.5 });
    const refusal = refused(limiter.admit({ userPath: '/a' }, at('low')));
    assert.equal(refusal.message, 'rate limit exceeded for /: concurrent request limit of 1 reached for low priority');
    assert.equal(refusal.retryAtSeconds, Infinity);
    assert.equal(immediate(limiter.status())[0]!.in_flight, 0);
    admitted(limiter.admit({ userPath: '/a' }, at('normal')));
  });

  it('is exact for fractions floating point cannot hold (0.9 of 10 keeps 1)', () => {
    const { limiter } = setup([rule('user_path', '/', 60, { maxRequests: 10 })], { normal: 0, low: 0.9 });
    admitted(limiter.admit({ userPath: '/a' }, at('low')));
    refused(limiter.admit({ userPath: '/a' }, at('low')));
  });

  it('is predicted by explain, priority and all', async () => {
    const { limiter } = setup([rule('user_path', '/team', 60, { maxRequests: 10, maxTokens: 100 })], { normal: 0.1, low: 0.2 });
    const target = { userPath: '/team' };
    for (let i = 0; i < 8; i++) admitted(limiter.admit(target));
    const preview = await limiter.explain(target, at('low'));
    assert.deepEqual(preview.refusal, refused(limiter.admit(target, at('low'))));
    assert.equal((await limiter.explain(target, at('normal'))).refusal, undefined);
  });
});
