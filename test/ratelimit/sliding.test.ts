import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { admitted, refused, rule, setup, statusOf, T0 } from './helpers.ts';

describe('sliding window admission', () => {
  it('refuses the 11th of 10 per minute for 61 s (aligned t0)', () => {
    const { clock, limiter } = setup([rule('user_path', '/team', 60, { maxRequests: 10 })]);
    for (let i = 0; i < 10; i++) admitted(limiter.admit({ userPath: '/team' }));
    const refusal = refused(limiter.admit({ userPath: '/team' }));
    assert.equal(refusal.retryAfterSeconds, 61);
    assert.equal(refusal.message, 'rate limit exceeded for /team: minute request limit of 10 reached');
    assert.deepEqual(refusal.headers, { requests: { limit: 10, remaining: 0, reset: 61 } });

    clock.setSeconds(T0 + 60);
    assert.equal(refused(limiter.admit({ userPath: '/team' })).retryAfterSeconds, 1);
    clock.setSeconds(T0 + 61);
    admitted(limiter.admit({ userPath: '/team' }));
  });

  it('computes Retry-After from mid-window', () => {
    const { clock, limiter } = setup([rule('user_path', '/team', 60, { maxRequests: 10 })], { startSeconds: T0 + 30 });
    for (let i = 0; i < 10; i++) admitted(limiter.admit({ userPath: '/team' }));
    assert.equal(refused(limiter.admit({ userPath: '/team' })).retryAfterSeconds, 31);
    clock.setSeconds(T0 + 60);
    assert.equal(refused(limiter.admit({ userPath: '/team' })).retryAfterSeconds, 1);
    clock.setSeconds(T0 + 61);
    admitted(limiter.admit({ userPath: '/team' }));
  });

  it('lets the previous window decay second by second', () => {
    const { clock, limiter } = setup([rule('user_path', '/team', 60, { maxRequests: 10 })]);
    for (let i = 0; i < 10; i++) admitted(limiter.admit({ userPath: '/team' }));
    clock.setSeconds(T0 + 90); // estimate floor(10 * 30/60) = 5
    for (let i = 0; i < 5; i++) admitted(limiter.admit({ userPath: '/team' }));
    const refusal = refused(limiter.admit({ userPath: '/team' }));
    assert.equal(refusal.retryAfterSeconds, 1); // at +91: floor(10*29/60) + 5 = 9
    clock.setSeconds(T0 + 91);
    admitted(limiter.admit({ userPath: '/team' }));
    refused(limiter.admit({ userPath: '/team' }));
  });

  it('refuses 30 tokens against 10 per minute for 101 s', () => {
    const { clock, limiter } = setup([rule('user_path', '/team', 60, { maxTokens: 10 })]);
    admitted(limiter.admit({ userPath: '/team' }));
    limiter.chargeTokens({ userPath: '/team' }, 30);
    const refusal = refused(limiter.admit({ userPath: '/team' }));
    assert.equal(refusal.retryAfterSeconds, 101);
    assert.equal(refusal.breach.kind, 'tokens');
    assert.equal(refusal.message, 'rate limit exceeded for /team: minute token limit of 10 reached');
    assert.deepEqual(refusal.headers, { tokens: { limit: 10, remaining: 0, reset: 101 } });
    clock.setSeconds(T0 + 100);
    refused(limiter.admit({ userPath: '/team' }));
    clock.setSeconds(T0 + 101);
    admitted(limiter.admit({ userPath: '/team' }));
  });

  it('rolls one period into previous and clears after two or more', () => {
    const { clock, limiter } = setup([rule('user_path', '/team', 60, { maxRequests: 100 })]);
    for (let i = 0; i < 10; i++) admitted(limiter.admit({ userPath: '/team' }));
    clock.setSeconds(T0 + 60);
    assert.equal(statusOf(limiter, 'user_path', '/team', 60).requests_used, 10);
    clock.setSeconds(T0 + 90);
    assert.equal(statusOf(limiter, 'user_path', '/team', 60).requests_used, 5);
    admitted(limiter.admit({ userPath: '/team' })); // rolls the counter: previous 10, current 1
    assert.equal(statusOf(limiter, 'user_path', '/team', 60).requests_used, 6);
    clock.setSeconds(T0 + 120); // one more period: previous = 1
    assert.equal(statusOf(limiter, 'user_path', '/team', 60).requests_used, 1);
    admitted(limiter.admit({ userPath: '/team' }));
    clock.setSeconds(T0 + 240); // two periods on: everything gone
    assert.equal(statusOf(limiter, 'user_path', '/team', 60).requests_used, 0);
    admitted(limiter.admit({ userPath: '/team' }));
    assert.equal(statusOf(limiter, 'user_path', '/team', 60).requests_used, 1);
  });

  it('uses epoch-aligned custom windows', () => {
    const { clock, limiter } = setup([rule('provider', 'openai', 300, { maxRequests: 1 })], { startSeconds: 1_700_000_100 });
    admitted(limiter.admit({ provider: 'openai' }));
    const refusal = refused(limiter.admit({ provider: 'openai' }));
    assert.equal(refusal.message, 'rate limit exceeded for provider openai: 300s request limit of 1 reached');
    // Window [1_700_000_100, 1_700_000_400): 300 s to the end, then the previous count decays over 1 s.
    assert.equal(refusal.retryAfterSeconds, 301);
    clock.setSeconds(1_700_000_401);
    admitted(limiter.admit({ provider: 'openai' }));
  });
});
