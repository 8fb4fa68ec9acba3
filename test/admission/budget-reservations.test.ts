/**
 * Budget reservations in the admission core (memory counters): the budgets are checked and
 * reserved in the admission's own step, so a budget's refusal counts nothing on the rate limits,
 * and a failover moves the reservation to the price of the target that executes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { PricedTarget, ReservationEstimate } from '../../src/admission/core.ts';
import type { ProviderResult } from '../../src/providers/types.ts';
import { rule } from '../ratelimit/helpers.ts';
import { answer, coreWorld, settle, T0_MS, TestLifetime, refusal } from './helpers.ts';

const CALLER = { userPath: '/team/alice', keyId: 'key-1' };
const USAGE = { promptTokens: 7, completionTokens: 3, totalTokens: 10 };

/** a/m costs $0.10 a request, b/m $0.30 (the estimate at each target's prices). */
const PRICED: ReservationEstimate = { tokens: 0, costUsd: (target: PricedTarget) => (target.provider.name === 'a' ? 0.1 : 0.3) };

function world(maxUsd: number) {
  return coreWorld({
    providers: { a: ['m'], b: ['m'] },
    routing: { failover: { 'a/m': ['b/m'] } },
    rules: [rule('user_path', '/team', 60, { maxRequests: 100 })],
    budgets: [{ userPath: '/team', period: 'day', maxUsd, source: 'manual', createdAt: new Date(T0_MS), updatedAt: new Date(T0_MS) }],
    budgetReservations: true,
  });
}

const requestsUsed = async (w: ReturnType<typeof world>): Promise<number> => (await w.limiter.status())[0]!.requests_used;
const reservedUsd = (w: ReturnType<typeof world>): number | undefined => w.budgets.status()[0]!.reserved_usd;

describe('budget reservations in the admission step', () => {
  it('a request refused by its budget counts nothing on the rate limits', async () => {
    const w = world(1);
    w.budgets.observe('/team/alice', T0_MS, 0.8);
    const err = await refusal(w.core.dispatch(CALLER, w.route('b/m'), new TestLifetime(), async () => answer(200, USAGE), undefined, PRICED));
    assert.equal(err.code, 'budget_exceeded');
    assert.equal(await requestsUsed(w), 0, 'the admission that the budget refused counted no request');
    assert.equal(reservedUsd(w), 0);
    // The cheaper target still fits: admitted, counted, and reserved at its own price.
    let finish: (result: ProviderResult) => void = () => {};
    const running = w.core.dispatch(CALLER, w.route('a/m'), new TestLifetime(), () => new Promise((resolve) => (finish = resolve)), undefined, PRICED);
    await settle();
    assert.equal(reservedUsd(w), 0.1);
    finish(answer(200, USAGE));
    const done = await running;
    assert.equal(await requestsUsed(w), 1);
    done.settlement?.settle(10, 0.05);
    assert.equal(reservedUsd(w), 0);
  });

  it('a failover moves the reservation to the price of the target that executes', async () => {
    const w = world(1);
    let finish: (result: ProviderResult) => void = () => {};
    const seen: number[] = [];
    const call = async (target: { provider: { name: string } }): Promise<ProviderResult> => {
      seen.push(reservedUsd(w)!);
      if (target.provider.name === 'a') return answer(500);
      return new Promise((resolve) => (finish = resolve));
    };
    const running = w.core.dispatch(CALLER, w.route('a/m'), new TestLifetime(), call, undefined, PRICED);
    await settle();
    assert.deepEqual(seen, [0.1, 0.3], "a's price while a runs, b's once the request failed over to b");
    assert.equal(reservedUsd(w), 0.3);
    finish(answer(200, USAGE));
    const done = await running;
    assert.equal(done.target.id, 'b/m');
    done.settlement?.settle(10, 0.25);
    assert.equal(reservedUsd(w), 0, 'settled once, to nothing reserved');
  });

  it("a failover whose target's price no longer fits the budget is refused by the budget", async () => {
    const w = world(0.25);
    const called: string[] = [];
    const call = async (target: { id: string }): Promise<ProviderResult> => {
      called.push(target.id);
      return answer(500);
    };
    const err = await refusal(w.core.dispatch(CALLER, w.route('a/m'), new TestLifetime(), call, undefined, PRICED));
    assert.equal(err.code, 'budget_exceeded');
    assert.equal(err.message, 'budget exceeded for /team: day budget of $0.25 reached (this request needs an estimated $0.30)');
    assert.deepEqual(called, ['a/m'], 'b is never called');
    assert.equal(reservedUsd(w), 0, 'nothing stays reserved');
    assert.deepEqual(w.refusals.map((r) => [r.scope, r.subject]), [['budget', '/team']]);
  });
});
