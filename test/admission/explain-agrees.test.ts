/**
 * The explain dry run and real admission walk the same way: over many random rule sets and
 * counter states, what explain predicts for a request is what admitting it then does.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ExplainKind } from '../../src/admission/core.ts';
import { GatewayError } from '../../src/errors/gateway-error.ts';
import type { RuleDefinition } from '../../src/ratelimit/index.ts';
import type { Route } from '../../src/routing/types.ts';
import { rule } from '../ratelimit/helpers.ts';
import { prng } from '../support/random.ts';
import { answer, coreWorld, T0_MS, TestLifetime } from './helpers.ts';

const PATHS = ['/', '/t', '/t/x', '/t/y', '/t/z', '/t/x/deep', '/u'];
const MODELS = ['a/m', 'b/m', 'c/n', 'fast', 'spread'];
const KINDS: ExplainKind[] = ['dispatch', 'session', 'submission'];

type Outcome = { admitted: true; target: string | undefined } | { admitted: false; message: string; retryAfter: number };

function randomRules(random: () => number): RuleDefinition[] {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const rules = new Map<string, RuleDefinition>();
  const count = 1 + Math.floor(random() * 6);
  for (let i = 0; i < count; i++) {
    const scope = pick(['user_path', 'user_path', 'provider', 'model'] as const);
    const subject = scope === 'user_path' ? pick(['/', '/t', '/t/x', '/u']) : scope === 'provider' ? pick(['a', 'b', 'c']) : pick(['a/m', 'b/m', 'm', 'n']);
    const concurrent = random() < 0.35;
    const period = concurrent ? 0 : pick([1, 5, 60]);
    const caps = concurrent || random() < 0.8 ? { maxRequests: 1 + Math.floor(random() * 3) } : { maxTokens: 5 + Math.floor(random() * 20) };
    const definition = rule(scope, subject, period, caps);
    const perChild = scope === 'user_path' && subject !== '/u' && random() < 0.4;
    rules.set(`${scope} ${subject} ${period}`, perChild ? { ...definition, perChild: true } : definition);
  }
  return [...rules.values()];
}

function caught(err: unknown): Outcome {
  assert.ok(err instanceof GatewayError && err.status === 429, `admission threw ${String(err)}`);
  return { admitted: false, message: err.message, retryAfter: Number(err.headers?.['retry-after']) };
}

describe('the explain dry run', () => {
  it('predicts what admission does, over random rules and counter states', async () => {
    let compared = 0;
    let refusals = 0;
    for (let seed = 1; seed <= 150; seed++) {
      const random = prng(seed);
      const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
      const world = coreWorld({
        providers: { a: ['m'], b: ['m'], c: ['n'] },
        routing: {
          aliases: {
            fast: { strategy: 'first', targets: [{ model: 'a/m', weight: 1 }, { model: 'b/m', weight: 1 }] },
            spread: { strategy: 'round_robin', targets: [{ model: 'b/m', weight: 1 }, { model: 'c/n', weight: 1 }, { model: 'a/m', weight: 1 }] },
          },
          failover: { 'a/m': ['c/n'], fast: ['c/n'] },
        },
        rules: randomRules(random),
        maxChildren: 2,
        budgets: random() < 0.3 ? [{ userPath: '/t', period: 'day', maxUsd: 1, source: 'manual', createdAt: new Date(T0_MS), updatedAt: new Date(T0_MS) }] : [],
      });
      const open: TestLifetime[] = [];
      const route = (model: string): Route => world.resolver.preview(model)!;
      for (let step = 0; step < 40; step++) {
        const caller = { userPath: pick(PATHS), keyId: null };
        const kind = pick(KINDS);
        const model = pick(MODELS);

        // Predict, then do it, on the same route and clock.
        const predicted = await world.core.explain(caller.userPath, route(model), kind);
        const expected: Outcome = predicted.breach === undefined
          ? { admitted: true, target: predicted.target?.id }
          : { admitted: false, message: predicted.breach.message, retryAfter: predicted.breach.retryAfterSeconds };
        const lifetime = new TestLifetime();
        let actual: Outcome;
        try {
          if (kind === 'dispatch') {
            const called: string[] = [];
            const done = await world.core.dispatch(caller, route(model), lifetime, async (target) => {
              called.push(target.id);
              return answer(200, { promptTokens: 2, completionTokens: 1, totalTokens: 3 });
            });
            assert.deepEqual(called, [done.target.id], 'one call, to the target admitted');
            actual = { admitted: true, target: done.target.id };
            world.core.complete(caller, { provider: done.target.provider.name, model: done.target.model, endpoint: 'chat', usage: done.result.usage(), status: 200, startedAt: world.clock.now(), cached: false, requestId: 'req' });
          } else if (kind === 'session') {
            actual = { admitted: true, target: (await world.core.admitSession(caller, route(model), lifetime)).target.id };
          } else {
            await world.core.admitOne(caller, {});
            actual = { admitted: true, target: undefined };
          }
        } catch (err) {
          actual = caught(err);
        }
        assert.deepEqual(actual, expected, `seed ${seed} step ${step}: ${kind} ${model} for ${caller.userPath}`);
        compared++;
        if (!actual.admitted) refusals++;

        // Move the state on: some requests stay in flight, time passes, spend accrues.
        if (random() < 0.5) open.push(lifetime);
        else lifetime.end();
        if (open.length > 0 && random() < 0.3) open.splice(Math.floor(random() * open.length), 1)[0]!.end();
        if (random() < 0.3) world.clock.set(world.clock.now() + Math.floor(random() * 4000));
        if (random() < 0.1) world.budgets.observe(caller.userPath, world.clock.now(), 0.5);
      }
    }
    assert.equal(compared, 150 * 40);
    assert.ok(refusals > compared / 10, `the random states refuse often enough to matter (${refusals} of ${compared})`);
  });
});
