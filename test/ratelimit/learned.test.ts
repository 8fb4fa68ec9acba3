import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MemoryCounterStore } from '../../src/counters/memory.ts';
import { RateLimiter, type AdmissionRefusal, type AdmitOutcome, type LearnedSettings, type RuleDefinition } from '../../src/ratelimit/index.ts';
import type { Capacity } from '../../src/shared/capacity.ts';
import { immediate, rule, T0 } from './helpers.ts';

const SETTINGS: LearnedSettings = { reserve: 0, cooldownMs: 5000 };

/** A limiter whose providers `p` and `q` learn (with `settings`), `off` does not, on a clock moved by hand (ms). */
function world(rules: RuleDefinition[] = [], settings: LearnedSettings = SETTINGS) {
  let nowMs = T0 * 1000 + 250;
  const clock = { now: () => nowMs, advance: (ms: number) => void (nowMs += ms), get ms() { return nowMs; } };
  const limiter = new RateLimiter({ clock, store: new MemoryCounterStore(), learned: new Map([['p', settings], ['q', settings]]) });
  limiter.replaceRules(rules);
  return { clock, limiter };
}

function capacity(fields: Partial<Capacity>): Capacity {
  return { requests: undefined, tokens: undefined, throttled: false, retryAfterMs: undefined, malformed: [], ...fields };
}

function refused(result: ReturnType<RateLimiter['admit']>): AdmissionRefusal {
  const value = immediate(result);
  assert.equal(value.ok, false, 'refused');
  return value as AdmissionRefusal;
}

describe('learned capacity in the engine', () => {
  it('refuses a target whose provider said it has no requests left, as a model breach, until the reset', () => {
    const { clock, limiter } = world([rule('model', 'p/m', 60, { maxRequests: 10 })]);
    assert.equal(immediate(limiter.admit({ provider: 'p', model: 'm' })).ok, true);
    limiter.learn({ provider: 'p', model: 'm' }, capacity({ requests: { limit: 100, remaining: 0, resetInMs: 1500 } }));
    const refusal = refused(limiter.admit({ provider: 'p', model: 'm' }));
    assert.deepEqual(refusal.breach, {
      scope: 'model', subject: 'p/m', ruleSubject: 'p/m', periodSeconds: 0, label: 'learned', kind: 'learned', cap: 0,
      message: "rate limit exceeded for model p/m: the provider's own request limit is spent until it resets (learned from its answers)",
    });
    assert.equal(refusal.retryAfterSeconds, 2, 'whole seconds, rounded up');
    assert.equal(refusal.retryAtSeconds, (clock.ms + 1500) / 1000, 'the reset to the millisecond: a waiting request wakes then');
    assert.equal(refusal.counterKey, 'learned\u0000p\u0000m');
    assert.equal(refusal.userPathBreached, false, 'a target to skip, not the consumer over its limit');
    assert.equal(refusal.headers, undefined, 'no x-ratelimit triple: those are the gateway\'s own rules');
    assert.equal(immediate(limiter.admit({ provider: 'p', model: 'other' })).ok, true, 'per (provider, model)');
    clock.advance(1499);
    refused(limiter.admit({ provider: 'p', model: 'm' }));
    clock.advance(1);
    assert.equal(immediate(limiter.admit({ provider: 'p', model: 'm' })).ok, true, 'free again at the reset');
    const [status] = immediate(limiter.status());
    assert.equal(status?.requests_used, 2, 'refusals counted nothing on the model rule');
  });

  it('cools a target down after a refusal: its retry-after, else the provider\'s cooldown', () => {
    const { clock, limiter } = world();
    limiter.learn({ provider: 'p', model: 'a' }, capacity({ throttled: true, retryAfterMs: 2000 }));
    limiter.learn({ provider: 'p', model: 'b' }, capacity({ throttled: true }));
    const a = refused(limiter.admit({ provider: 'p', model: 'a' }));
    assert.match(a.message, /the provider refused and asked to retry later/);
    assert.equal(a.retryAfterSeconds, 2);
    assert.equal(refused(limiter.admit({ provider: 'p', model: 'b' })).retryAfterSeconds, 5, 'cooldown_seconds');
    clock.advance(2000);
    assert.equal(immediate(limiter.admit({ provider: 'p', model: 'a' })).ok, true);
    refused(limiter.admit({ provider: 'p', model: 'b' }));
  });

  it('saturates at the reserve, and cools down a spent limit that says no reset', () => {
    const { limiter } = world([], { reserve: 10, cooldownMs: 3000 });
    limiter.learn({ provider: 'p', model: 'm' }, capacity({ tokens: { limit: 1000, remaining: 11, resetInMs: 60_000 } }));
    assert.equal(immediate(limiter.admit({ provider: 'p', model: 'm' })).ok, true);
    limiter.learn({ provider: 'p', model: 'm' }, capacity({ tokens: { limit: 1000, remaining: 10, resetInMs: 60_000 } }));
    assert.equal(refused(limiter.admit({ provider: 'p', model: 'm' })).retryAfterSeconds, 60);
    limiter.learn({ provider: 'q', model: 'm' }, capacity({ requests: { limit: undefined, remaining: 0, resetInMs: undefined } }));
    assert.equal(refused(limiter.admit({ provider: 'q', model: 'm' })).retryAfterSeconds, 3);
  });

  it('reports the breach with the longest Retry-After, and a consumer over its own limit as such', () => {
    const { limiter } = world([rule('provider', 'p', 3600, { maxRequests: 1 }), rule('user_path', '/a', 60, { maxRequests: 1 })]);
    assert.equal(immediate(limiter.admit({ userPath: '/a', provider: 'p', model: 'm' })).ok, true);
    limiter.learn({ provider: 'p', model: 'm' }, capacity({ throttled: true, retryAfterMs: 10_000 }));
    const both = refused(limiter.admit({ userPath: '/a', provider: 'p', model: 'm' }));
    assert.equal(both.breach.scope, 'provider', 'the hour window outlasts the 10 s cooldown');
    assert.equal(both.userPathBreached, true);
    limiter.learn({ provider: 'p', model: 'm' }, capacity({ throttled: true, retryAfterMs: 86_400_000 }));
    assert.equal(refused(limiter.admit({ provider: 'p', model: 'm' })).breach.kind, 'learned', 'a day-long cooldown outlasts the hour');
  });

  it('learns nothing for a provider that does not learn', () => {
    const { limiter } = world();
    assert.equal(limiter.learn({ provider: 'off', model: 'm' }, capacity({ throttled: true })), undefined);
    assert.equal(immediate(limiter.admit({ provider: 'off', model: 'm' })).ok, true);
    assert.equal(limiter.learn({ provider: 'p', model: 'm' }, capacity({ malformed: ['retry-after'] })), undefined, 'an answer that teaches nothing');
    assert.deepEqual(immediate(limiter.learnedCapacity()).records, []);
  });

  it('explains a saturated target, with or without rules, counting nothing', async () => {
    const { clock, limiter } = world();
    limiter.learn({ provider: 'p', model: 'm' }, capacity({ requests: { limit: 5, remaining: 0, resetInMs: 2500 } }));
    const preview = await limiter.explain({ provider: 'p', model: 'm' });
    assert.deepEqual(preview.learned, { untilMs: clock.ms + 2500, cause: 'requests', nowMs: clock.ms });
    assert.equal(preview.refusal?.breach.kind, 'learned');
    assert.equal(preview.refusal?.retryAfterSeconds, 3);
    limiter.replaceRules([rule('model', 'p/m', 60, { maxRequests: 10 })]);
    const withRules = await limiter.explain({ userPath: '/', provider: 'p', model: 'm' });
    assert.equal(withRules.refusal?.breach.kind, 'learned');
    assert.equal(withRules.rules[0]?.requests_used, 0);
    assert.equal((await limiter.explain({ provider: 'p', model: 'other' })).learned, undefined);
  });

  it('lets a request no rule governs through when the counters cannot answer, even under on_error deny', async () => {
    /** Counters that cannot be reached, with the operator's `deny`. */
    class Unreachable extends MemoryCounterStore {
      override tryAdmit(): AdmitOutcome {
        return { status: 'unavailable', fallback: 'deny', reason: 'the rate-limit counters (Redis) cannot be reached' };
      }
    }
    const limiter = new RateLimiter({ clock: { now: () => T0 * 1000 }, store: new Unreachable(), learned: new Map([['p', SETTINGS]]) });
    limiter.replaceRules([rule('user_path', '/capped', 60, { maxRequests: 1 })]);
    assert.equal(immediate(limiter.admit({ userPath: '/free', provider: 'p', model: 'm' })).ok, true, 'only the learned capacity was asked');
    assert.throws(() => limiter.admit({ userPath: '/capped', provider: 'p', model: 'm' }), { name: 'CounterStoreUnavailableError' });
  });

  it('lists what was learned, for the providers that learn, by provider and model', () => {
    const { clock, limiter } = world();
    limiter.learn({ provider: 'q', model: 'b' }, capacity({ requests: { limit: 5, remaining: 4, resetInMs: 1000 } }));
    limiter.learn({ provider: 'p', model: 'z' }, capacity({ throttled: true }));
    limiter.learn({ provider: 'p', model: 'a' }, capacity({ tokens: { limit: 9, remaining: 9, resetInMs: 1000 } }));
    const { nowMs, records } = immediate(limiter.learnedCapacity());
    assert.equal(nowMs, clock.ms);
    assert.deepEqual(records.map((entry) => `${entry.provider}/${entry.model}`), ['p/a', 'p/z', 'q/b']);
    assert.equal(records[1]!.record.cause, 'cooldown');
    assert.equal(records[1]!.record.throttledAtMs, clock.ms);
  });
});
