import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MemoryCounterStore } from '../../src/counters/memory.ts';
import { RateLimiter } from '../../src/ratelimit/index.ts';
import { admitted, immediate, MIDNIGHT, refused, rule, setup, statusOf, T0 } from './helpers.ts';

describe('admission', () => {
  it('costs nothing and returns one shared ticket when no rules exist', () => {
    const limiter = new RateLimiter({ store: new MemoryCounterStore() });
    const first = admitted(limiter.admit({ userPath: '/a', provider: 'p', model: 'm' }));
    const second = admitted(limiter.admit({ userPath: '/b' }));
    assert.equal(first, second);
    assert.equal(first.headers, undefined);
    first.release();
  });

  it('counts nothing when any matching rule is breached', () => {
    const { limiter } = setup([
      rule('user_path', '/a', 60, { maxRequests: 5 }),
      rule('provider', 'p', 60, { maxRequests: 1 }),
      rule('model', 'm', 60, { maxRequests: 5 }),
      rule('user_path', '/a', 0, { maxRequests: 5 }),
    ]);
    const ticket = admitted(limiter.admit({ userPath: '/a', provider: 'p', model: 'm' }));
    ticket.release();
    for (let i = 0; i < 3; i++) {
      assert.equal(refused(limiter.admit({ userPath: '/a', provider: 'p', model: 'm' })).breach.scope, 'provider');
    }
    assert.equal(statusOf(limiter, 'user_path', '/a', 60).requests_used, 1);
    assert.equal(statusOf(limiter, 'model', 'm', 60).requests_used, 1);
    assert.equal(statusOf(limiter, 'user_path', '/a', 0).in_flight, 0);
  });

  it('reports the breach with the longest Retry-After', () => {
    const { limiter } = setup(
      [
        rule('user_path', '/a', 0, { maxRequests: 1 }),
        rule('user_path', '/a', 60, { maxRequests: 1 }),
        rule('provider', 'p', 3600, { maxRequests: 1 }),
        rule('model', 'p/m', 60, { maxRequests: 1 }),
      ],
      { startSeconds: MIDNIGHT },
    );
    admitted(limiter.admit({ userPath: '/a', provider: 'p', model: 'm' }));
    const refusal = refused(limiter.admit({ userPath: '/a', provider: 'p', model: 'm' }));
    assert.equal(refusal.retryAfterSeconds, 3601);
    assert.equal(refusal.message, 'rate limit exceeded for provider p: hour request limit of 1 reached');
    assert.deepEqual(refusal.breach, {
      scope: 'provider',
      subject: 'p',
      ruleSubject: 'p',
      periodSeconds: 3600,
      label: 'hour',
      kind: 'requests',
      cap: 1,
      message: refusal.message,
    });
  });

  it('refuses a saturated concurrency rule with Retry-After 1 and releases idempotently', () => {
    const { limiter } = setup([rule('provider', 'p', 0, { maxRequests: 2 })]);
    const first = admitted(limiter.admit({ provider: 'p' }));
    const second = admitted(limiter.admit({ provider: 'p' }));
    assert.equal(first.headers, undefined); // concurrency-only: no x-ratelimit headers
    const refusal = refused(limiter.admit({ provider: 'p' }));
    assert.equal(refusal.retryAfterSeconds, 1);
    assert.equal(refusal.breach.kind, 'concurrent');
    assert.equal(refusal.message, 'rate limit exceeded for provider p: concurrent request limit of 2 reached');
    assert.equal(refusal.headers, undefined);

    first.release();
    first.release();
    first.release();
    assert.equal(statusOf(limiter, 'provider', 'p', 0).in_flight, 1);
    const third = admitted(limiter.admit({ provider: 'p' }));
    refused(limiter.admit({ provider: 'p' }));
    second.release();
    third.release();
    assert.equal(statusOf(limiter, 'provider', 'p', 0).in_flight, 0);
  });

  it('admits exactly the cap out of a burst', () => {
    const { limiter } = setup([
      rule('user_path', '/c', 0, { maxRequests: 50 }),
      rule('user_path', '/r', 60, { maxRequests: 50 }),
    ]);
    let concurrent = 0;
    let windowed = 0;
    for (let i = 0; i < 200; i++) {
      if (immediate(limiter.admit({ userPath: '/c' })).ok) concurrent++;
      if (immediate(limiter.admit({ userPath: '/r' })).ok) windowed++;
    }
    assert.equal(concurrent, 50);
    assert.equal(windowed, 50);
    assert.equal(statusOf(limiter, 'user_path', '/c', 0).in_flight, 50);
  });

  it('takes no concurrency slot for batch submissions but counts the request', () => {
    const { limiter } = setup([
      rule('user_path', '/a', 0, { maxRequests: 1 }),
      rule('user_path', '/a', 60, { maxRequests: 10 }),
    ]);
    const live = admitted(limiter.admit({ userPath: '/a' }));
    admitted(limiter.admit({ userPath: '/a' }, { holdSlot: false }));
    admitted(limiter.admit({ userPath: '/a' }, { holdSlot: false }));
    assert.equal(statusOf(limiter, 'user_path', '/a', 0).in_flight, 1);
    assert.equal(statusOf(limiter, 'user_path', '/a', 60).requests_used, 3);
    refused(limiter.admit({ userPath: '/a' }));
    live.release();
  });

  it('keeps counters when only caps change, and shows the latest spelling', () => {
    const { limiter } = setup([rule('user_path', '/team', 60, { maxRequests: 5 })]);
    for (let i = 0; i < 5; i++) admitted(limiter.admit({ userPath: '/team' }));
    refused(limiter.admit({ userPath: '/team' }));
    limiter.upsertRule(rule('user_path', '/TEAM', 60, { maxRequests: 6 }));
    assert.equal(immediate(limiter.status()).length, 1);
    const ticket = admitted(limiter.admit({ userPath: '/team' }));
    assert.deepEqual(ticket.headers, { requests: { limit: 6, remaining: 0, reset: 60 } });
    const refusal = refused(limiter.admit({ userPath: '/team' }));
    assert.equal(refusal.message, 'rate limit exceeded for /TEAM: minute request limit of 6 reached');
  });

  it('restarts counters for a moved rule (different period is a different key)', () => {
    const { limiter } = setup([rule('user_path', '/team', 60, { maxRequests: 1 })]);
    admitted(limiter.admit({ userPath: '/team' }));
    assert.equal(immediate(limiter.deleteRule({ scope: 'user_path', subject: '/team', periodSeconds: 60 })), true);
    limiter.upsertRule(rule('user_path', '/team', 3600, { maxRequests: 1 }));
    admitted(limiter.admit({ userPath: '/team' }));
    refused(limiter.admit({ userPath: '/team' }));
  });

  it('survives reset and delete while tickets are live', () => {
    const { limiter } = setup([rule('user_path', '/a', 0, { maxRequests: 2 })]);
    const key = { scope: 'user_path' as const, subject: '/a', periodSeconds: 0 };
    const old1 = admitted(limiter.admit({ userPath: '/a' }));
    const old2 = admitted(limiter.admit({ userPath: '/a' }));
    assert.equal(immediate(limiter.resetRule(key)), true);
    assert.equal(statusOf(limiter, 'user_path', '/a', 0).in_flight, 0);
    const fresh = admitted(limiter.admit({ userPath: '/a' }));
    old1.release();
    old2.release();
    assert.equal(statusOf(limiter, 'user_path', '/a', 0).in_flight, 1); // the old releases didn't free fresh's slot
    admitted(limiter.admit({ userPath: '/a' }));
    refused(limiter.admit({ userPath: '/a' }));

    immediate(limiter.resetAll());
    assert.equal(statusOf(limiter, 'user_path', '/a', 0).in_flight, 0);
    const afterAll = admitted(limiter.admit({ userPath: '/a' }));
    fresh.release();
    assert.equal(statusOf(limiter, 'user_path', '/a', 0).in_flight, 1);

    assert.equal(immediate(limiter.deleteRule(key)), true);
    limiter.upsertRule(rule('user_path', '/a', 0, { maxRequests: 2 }));
    assert.equal(statusOf(limiter, 'user_path', '/a', 0).in_flight, 0);
    const recreated = admitted(limiter.admit({ userPath: '/a' }));
    afterAll.release();
    assert.equal(statusOf(limiter, 'user_path', '/a', 0).in_flight, 1);
    recreated.release();
    recreated.release();
    assert.equal(statusOf(limiter, 'user_path', '/a', 0).in_flight, 0);
  });

  it('still gives back the slots of rules that were not reset', () => {
    const { limiter } = setup([rule('user_path', '/a', 0, { maxRequests: 5 }), rule('provider', 'p', 0, { maxRequests: 5 })]);
    const ticket = admitted(limiter.admit({ userPath: '/a', provider: 'p', model: 'm' }));
    assert.equal(immediate(limiter.resetRule({ scope: 'user_path', subject: '/a', periodSeconds: 0 })), true);
    const fresh = admitted(limiter.admit({ userPath: '/a', provider: 'p', model: 'm' }));
    assert.equal(statusOf(limiter, 'provider', 'p', 0).in_flight, 2);
    ticket.release();
    assert.equal(statusOf(limiter, 'provider', 'p', 0).in_flight, 1, 'the provider slot, taken before an unrelated reset, is given back');
    assert.equal(statusOf(limiter, 'user_path', '/a', 0).in_flight, 1, "the reset rule keeps the fresh request's slot");
    fresh.release();
    assert.equal(statusOf(limiter, 'provider', 'p', 0).in_flight, 0);
    assert.equal(statusOf(limiter, 'user_path', '/a', 0).in_flight, 0);
  });

  it('clears windows on reset and delete', () => {
    const { limiter } = setup([rule('provider', 'p', 60, { maxRequests: 1 })]);
    admitted(limiter.admit({ provider: 'p' }));
    refused(limiter.admit({ provider: 'p' }));
    assert.equal(immediate(limiter.resetRule({ scope: 'provider', subject: 'P', periodSeconds: 60 })), true);
    admitted(limiter.admit({ provider: 'p' }));
    assert.equal(immediate(limiter.resetRule({ scope: 'provider', subject: 'q', periodSeconds: 60 })), false);
    assert.equal(immediate(limiter.deleteRule({ scope: 'provider', subject: 'p', periodSeconds: 3600 })), false);
  });

  it('validates rules on write', () => {
    const { limiter } = setup([]);
    assert.throws(() => limiter.upsertRule(rule('user_path', '/a', 60, { maxRequests: 0 })), /max_requests must be an integer from 1 to 9007199254740991/);
    assert.throws(() => limiter.replaceRules([rule('provider', 'a b', 60, { maxRequests: 1 })]), /provider name/);
    assert.equal(limiter.ruleCount, 0);
  });
});

describe('tokens', () => {
  it('charges every matching token window, the root when no user path is given', () => {
    const { limiter } = setup([
      rule('user_path', '/', 60, { maxTokens: 1000 }),
      rule('user_path', '/a', 60, { maxTokens: 1000 }),
      rule('provider', 'p', 60, { maxTokens: 1000 }),
      rule('model', 'p/m', 60, { maxTokens: 1000 }),
      rule('model', 'm', 60, { maxTokens: 1000 }),
      rule('model', 'q/m', 60, { maxTokens: 1000 }),
    ]);
    limiter.chargeTokens({ userPath: '/a/b', provider: 'p', model: 'm' }, 100);
    limiter.chargeTokens({ provider: 'p', model: 'm' }, 10);
    limiter.chargeTokens({ userPath: '/a' }, 0);
    limiter.chargeTokens({ userPath: '/a' }, -5);
    assert.equal(statusOf(limiter, 'user_path', '/', 60).tokens_used, 110);
    assert.equal(statusOf(limiter, 'user_path', '/a', 60).tokens_used, 100);
    assert.equal(statusOf(limiter, 'provider', 'p', 60).tokens_used, 110);
    assert.equal(statusOf(limiter, 'model', 'p/m', 60).tokens_used, 110);
    assert.equal(statusOf(limiter, 'model', 'm', 60).tokens_used, 110);
    assert.equal(statusOf(limiter, 'model', 'q/m', 60).tokens_used, 0);
    assert.equal(statusOf(limiter, 'user_path', '/a', 60).tokens_remaining, 900);
  });

  it('does not enforce token caps when usage tracking is off', () => {
    const { limiter } = setup([rule('user_path', '/a', 60, { maxTokens: 10, maxRequests: 100 })], { enforceTokens: false });
    limiter.chargeTokens({ userPath: '/a' }, 500);
    const ticket = admitted(limiter.admit({ userPath: '/a' }));
    assert.deepEqual(ticket.headers, { requests: { limit: 100, remaining: 99, reset: 60 } });
    assert.ok(limiter.hasTokenRules);
    assert.equal(immediate(limiter.usageFor('/a/b'))[0]!.exhausted, false);
  });

  it('enforces token caps when usage tracking is on', () => {
    const { limiter } = setup([rule('provider', 'p', 60, { maxTokens: 10 })]);
    limiter.chargeTokens({ provider: 'p', model: 'm' }, 10);
    assert.equal(refused(limiter.admit({ provider: 'p', model: 'm' })).message, 'rate limit exceeded for provider p: minute token limit of 10 reached');
  });
});

describe('success headers', () => {
  it('picks the least remaining per dimension across all scopes', () => {
    const { limiter } = setup(
      [
        rule('user_path', '/a', 60, { maxRequests: 100, maxTokens: 100_000 }),
        rule('user_path', '/a/b', 86400, { maxRequests: 1000 }),
        rule('provider', 'p', 60, { maxRequests: 5 }),
        rule('model', 'm', 3600, { maxTokens: 2000 }),
        rule('model', 'p/m', 0, { maxRequests: 1 }),
      ],
      { startSeconds: T0 + 15 },
    );
    limiter.chargeTokens({ userPath: '/a/b', provider: 'p', model: 'm' }, 1500);
    const ticket = admitted(limiter.admit({ userPath: '/a/b', provider: 'p', model: 'm' }));
    // T0 + 15 is 2023-11-14T22:14:15Z: 45 s left in the minute, 2745 s left in the hour.
    assert.deepEqual(ticket.headers, {
      requests: { limit: 5, remaining: 4, reset: 45 },
      tokens: { limit: 2000, remaining: 500, reset: 2745 },
    });
    ticket.release();
  });

  it('has no headers when only unmatched or concurrency rules exist', () => {
    const { limiter } = setup([rule('user_path', '/x', 60, { maxRequests: 5 }), rule('user_path', '/a', 0, { maxRequests: 5 })]);
    assert.equal(admitted(limiter.admit({ userPath: '/a' })).headers, undefined);
    assert.equal(admitted(limiter.admit({ userPath: '/b' })).headers, undefined);
  });
});

describe('a saturated provider or model', () => {
  it('is refused without counting anything, whatever the case of its names', () => {
    const { limiter } = setup([
      rule('provider', 'p', 60, { maxRequests: 2 }),
      rule('model', 'p/m', 0, { maxRequests: 1 }),
      rule('user_path', '/', 60, { maxRequests: 1 }),
    ]);
    const ticket = admitted(limiter.admit({ provider: 'p', model: 'm' }));
    const busy = refused(limiter.admit({ provider: 'P', model: 'M' }));
    assert.equal(busy.retryAfterSeconds, 1);
    assert.equal(busy.breach.kind, 'concurrent');
    assert.equal(busy.userPathBreached, false);
    assert.equal(statusOf(limiter, 'provider', 'p', 60).requests_used, 1, 'the refusal counted nothing');
    admitted(limiter.admit({ provider: 'p', model: 'other' })).release(); // the model rule covers m only
    ticket.release();
    const full = refused(limiter.admit({ provider: 'p', model: 'm' }));
    assert.equal(full.breach.message, 'rate limit exceeded for provider p: minute request limit of 2 reached');
    assert.equal(full.retryAfterSeconds, 61);
    assert.equal(statusOf(limiter, 'provider', 'p', 60).requests_used, 2);
    assert.equal(statusOf(limiter, 'model', 'p/m', 0).in_flight, 0);
    assert.equal(statusOf(limiter, 'user_path', '/', 60).requests_used, 0, 'without a user path, user-path rules are not counted');
  });
});
