import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MemoryCounterStore } from '../../src/counters/memory.ts';
import { RateLimiter, type AdmissionTarget } from '../../src/ratelimit/index.ts';
import { admitted, immediate, rule, setup, T0 } from './helpers.ts';

/** explain() and then admit() on the same target, at the same instant: the dry run must predict the real decision. */
async function explainThenAdmit(limiter: RateLimiter, target: AdmissionTarget) {
  const before = immediate(limiter.status());
  const preview = await limiter.explain(target);
  assert.deepEqual(immediate(limiter.status()), before, 'explain counts nothing');
  const result = immediate(limiter.admit(target));
  if (result.ok) {
    assert.equal(preview.refusal, undefined, 'explain said refused, admit admitted');
  } else {
    assert.ok(preview.refusal, `explain said admitted, admit refused: ${result.message}`);
    assert.deepEqual(preview.refusal, result);
  }
  return { preview, result };
}

describe('explain: a dry run of admission', () => {
  it('predicts every admission and refusal of a sequence, with the breach and Retry-After admit gives', async () => {
    const { limiter, clock } = setup([
      rule('user_path', '/a', 60, { maxRequests: 3 }),
      rule('provider', 'p', 60, { maxRequests: 2, maxTokens: 50 }),
      rule('model', 'p/m', 0, { maxRequests: 5 }),
    ]);
    const target = { userPath: '/a/x', provider: 'p', model: 'm' };
    const outcomes: string[] = [];
    for (let i = 0; i < 3; i++) {
      const { result } = await explainThenAdmit(limiter, target);
      outcomes.push(result.ok ? 'admitted' : result.message);
    }
    assert.deepEqual(outcomes, ['admitted', 'admitted', 'rate limit exceeded for provider p: minute request limit of 2 reached']);
    limiter.chargeTokens(target, 80);
    clock.setSeconds(T0 + 30);
    const { result } = await explainThenAdmit(limiter, target);
    assert.ok(!result.ok);
    assert.equal(result.breach.kind, 'tokens', 'the token window frees up last, so its breach is the one reported');
  });

  it('lists every rule admit would check, with the admin list record of each', async () => {
    const { limiter } = setup([
      rule('user_path', '/', 60, { maxRequests: 10 }),
      rule('user_path', '/a', 0, { maxRequests: 1 }),
      rule('user_path', '/b', 60, { maxRequests: 1 }),
      rule('provider', 'p', 3600, { maxRequests: 9 }),
      rule('model', 'm', 60, { maxTokens: 9 }),
    ]);
    const ticket = admitted(limiter.admit({ userPath: '/a', provider: 'p', model: 'm' }));
    const preview = await limiter.explain({ userPath: '/a', provider: 'p', model: 'm' });
    const listed = new Map(immediate(limiter.status()).map((s) => [`${s.scope} ${s.subject} ${s.period_seconds}`, s]));
    assert.deepEqual(
      preview.rules,
      ['user_path / 60', 'user_path /a 0', 'provider p 3600', 'model m 60'].map((key) => listed.get(key)),
    );
    assert.equal(preview.refusal?.message, 'rate limit exceeded for /a: concurrent request limit of 1 reached');
    assert.equal(preview.refusal?.userPathBreached, true);

    const batch = await limiter.explain({ userPath: '/a' }, { holdSlot: false });
    assert.deepEqual(batch.rules.map((r) => r.period_seconds), [60], 'a request that takes no slot is not checked against concurrency rules');
    assert.equal(batch.refusal, undefined);
    ticket.release();
    assert.equal((await limiter.explain({ userPath: '/a', provider: 'p', model: 'm' })).refusal, undefined);
  });

  it('admits with no rules at all', async () => {
    const { limiter } = setup([]);
    assert.deepEqual(await limiter.explain({ userPath: '/a', provider: 'p', model: 'm' }), { rules: [], refusal: undefined, learned: undefined });
  });
  it('predicts the refusal of a per-child rule that keeps as many active children as it may', async () => {
    const limiter = new RateLimiter({ clock: { now: () => T0 * 1000 }, store: new MemoryCounterStore({ maxChildren: 2 }) });
    limiter.replaceRules([{ ...rule('user_path', '/team', 60, { maxRequests: 5 }), perChild: true }]);
    admitted(limiter.admit({ userPath: '/team/a' }));
    admitted(limiter.admit({ userPath: '/team/b' }));
    const { preview, result } = await explainThenAdmit(limiter, { userPath: '/team/c' });
    assert.equal(result.ok, false);
    assert.equal(preview.refusal?.message, 'rate limit exceeded for /team/c: the minute limit of /team already counts 2 active children (rate_limits.max_children)');
  });
});
