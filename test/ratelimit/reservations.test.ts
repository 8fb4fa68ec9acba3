/**
 * Token reservations in the engine (memory store, injected clock): what admission reserves, how a
 * reservation is settled, moved off a failed attempt's target, and shown.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { admitted, immediate, refused, rule, setup, statusOf, T0 } from './helpers.ts';

const TEAM = '/team';
const minuteTokens = (cap: number) => rule('user_path', TEAM, 60, { maxTokens: cap });

describe('token reservations', () => {
  it('admits while used + reserved + estimate fits the cap, and refuses the next one', () => {
    const { limiter } = setup([minuteTokens(1000)], { reservations: true });
    const tickets = [1, 2, 3].map(() => admitted(limiter.admit({ userPath: TEAM }, { reserveTokens: 300 })));
    assert.deepEqual(tickets.map((t) => t.reservedTokens), [300, 300, 300]);
    const refusal = refused(limiter.admit({ userPath: TEAM }, { reserveTokens: 300 }));
    assert.equal(refusal.message, 'rate limit exceeded for /team: minute token limit of 1000 reached');
    assert.equal(refusal.breach.kind, 'tokens');
    assert.equal(refusal.retryAfterSeconds, 1, 'only reservations are in the way: they end with their requests');
    const status = statusOf(limiter, 'user_path', TEAM, 60);
    assert.deepEqual([status.tokens_used, status.tokens_reserved, status.tokens_remaining], [0, 900, 100]);
    // A request small enough still fits beside them.
    admitted(limiter.admit({ userPath: TEAM }, { reserveTokens: 100 }));
  });

  it('settling replaces the reservation by what was used, below and above the estimate, once', () => {
    const { limiter } = setup([minuteTokens(1000)], { reservations: true });
    const below = admitted(limiter.admit({ userPath: TEAM }, { reserveTokens: 300 }));
    immediate(below.settle(120));
    let status = statusOf(limiter, 'user_path', TEAM, 60);
    assert.deepEqual([status.tokens_used, status.tokens_reserved], [120, 0]);
    immediate(below.settle(999));
    assert.equal(statusOf(limiter, 'user_path', TEAM, 60).tokens_used, 120, 'a second settle changes nothing');
    const above = admitted(limiter.admit({ userPath: TEAM }, { reserveTokens: 300 }));
    immediate(above.settle(450));
    status = statusOf(limiter, 'user_path', TEAM, 60);
    assert.deepEqual([status.tokens_used, status.tokens_reserved, status.tokens_remaining], [570, 0, 430]);
  });

  it('counts reservations as used in x-ratelimit-remaining-tokens', () => {
    const { limiter } = setup([minuteTokens(1000)], { reservations: true });
    admitted(limiter.admit({ userPath: TEAM }, { reserveTokens: 300 }));
    const second = admitted(limiter.admit({ userPath: TEAM }, { reserveTokens: 200 }));
    assert.equal(second.headers?.tokens?.remaining, 500);
  });

  it('refuses a request whose estimate alone exceeds a cap, saying what it needs, with no wait that could help', () => {
    const { limiter } = setup([minuteTokens(1000), rule('user_path', '/', 60, { maxRequests: 1 })], { reservations: true });
    const refusal = refused(limiter.admit({ userPath: TEAM }, { reserveTokens: 1500 }));
    assert.equal(refusal.message, 'rate limit exceeded for /team: minute token limit of 1000 reached (this request needs an estimated 1500 tokens)');
    assert.equal(refusal.retryAtSeconds, Infinity);
    assert.equal(statusOf(limiter, 'user_path', '/', 60).requests_used, 0, 'nothing counted');
  });

  it('the Retry-After waits for the window to make room for the reservations and the estimate', () => {
    const { clock, limiter } = setup([minuteTokens(1000)], { reservations: true });
    immediate(admitted(limiter.admit({ userPath: TEAM }, { reserveTokens: 600 })).settle(600));
    clock.setSeconds(T0 + 60);
    const held = admitted(limiter.admit({ userPath: TEAM }, { reserveTokens: 300 }));
    // 600 carried over (sliding) + 300 reserved + 300 > 1000: room once the carried part is at most 400.
    const refusal = refused(limiter.admit({ userPath: TEAM }, { reserveTokens: 300 }));
    assert.equal(refusal.retryAfterSeconds, 20);
    immediate(held.settle(0));
  });

  it('an attempt that fails gives back its provider and model reservation; the user path keeps its own', () => {
    const { limiter } = setup([minuteTokens(1000), rule('provider', 'a', 60, { maxTokens: 500 }), rule('provider', 'b', 60, { maxTokens: 500 })], { reservations: true });
    const own = admitted(limiter.admit({ userPath: TEAM, provider: 'a', model: 'm' }, { reserveTokens: 300 }));
    assert.equal(statusOf(limiter, 'provider', 'a', 60).tokens_reserved, 300);
    own.releaseTargetSlots();
    const attempt = admitted(limiter.admit({ provider: 'b', model: 'm' }, { reserveTokens: 300 }));
    assert.deepEqual([statusOf(limiter, 'provider', 'a', 60).tokens_reserved, statusOf(limiter, 'provider', 'b', 60).tokens_reserved, statusOf(limiter, 'user_path', TEAM, 60).tokens_reserved], [0, 300, 300]);
    immediate(own.settle(250));
    immediate(attempt.settle(250));
    assert.deepEqual(
      [statusOf(limiter, 'provider', 'a', 60).tokens_used, statusOf(limiter, 'provider', 'b', 60).tokens_used, statusOf(limiter, 'user_path', TEAM, 60).tokens_used],
      [0, 250, 250],
      'the tokens land where the request executed',
    );
    assert.equal(statusOf(limiter, 'provider', 'b', 60).tokens_reserved, 0);
  });

  it('without a reservation asked, tokens are checked after the fact as before', () => {
    const { limiter } = setup([minuteTokens(1000)]);
    const ticket = admitted(limiter.admit({ userPath: TEAM }));
    assert.equal(ticket.reservedTokens, 0);
    assert.equal(statusOf(limiter, 'user_path', TEAM, 60).tokens_reserved, undefined, 'no tokens_reserved with reservations off');
  });
});
