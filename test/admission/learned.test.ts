/**
 * Capacity learned from the providers' answers, on the admission core with the memory store and a
 * clock that moves only when told to: which targets are called, skipped, waited on and refused.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Caller } from '../../src/admission/core.ts';
import type { ProviderResult } from '../../src/providers/types.ts';
import type { Capacity } from '../../src/shared/capacity.ts';
import { answer, coreWorld, scriptedCalls, settle, TestLifetime, type CoreWorld, refusal } from './helpers.ts';

const CALLER: Caller = { userPath: '/team', keyId: null };
const LEARN = { reserve: 0, cooldownMs: 5000 };

/** An upstream answer that says this about the provider's capacity. */
function said(status: number, fields: Partial<Capacity>): ProviderResult {
  return { ...answer(status), capacity: { requests: undefined, tokens: undefined, throttled: status === 429, retryAfterMs: undefined, malformed: [], ...fields } };
}

function failoverWorld(): CoreWorld {
  return coreWorld({ providers: { a: ['m'], b: ['m'] }, routing: { failover: { 'a/m': ['b/m'] } }, learned: { a: LEARN, b: LEARN } });
}

async function dispatch(world: CoreWorld, model: string, call: ReturnType<typeof scriptedCalls>['call'], caller: Caller = CALLER): Promise<string> {
  const done = await world.core.dispatch(caller, world.route(model), new TestLifetime(), call);
  return done.target.id;
}

describe('learned capacity in the admission core', () => {
  it('skips the primary without calling it while its provider says no requests remain, until the reset', async () => {
    const world = failoverWorld();
    let primary = (): ProviderResult => said(200, { requests: { limit: 10, remaining: 0, resetInMs: 2000 } });
    const calls = scriptedCalls({ 'a/m': () => primary(), 'b/m': () => answer(200) });
    assert.equal(await dispatch(world, 'a/m', calls.call), 'a/m', 'the answer that said so is served');
    assert.deepEqual(world.saturated, [{ target: 'a/m', untilMs: world.clock.now() + 2000, cause: 'requests' }]);
    assert.equal(await dispatch(world, 'a/m', calls.call), 'b/m');
    await world.timers.advance(1999);
    assert.equal(await dispatch(world, 'a/m', calls.call), 'b/m');
    await world.timers.advance(1);
    primary = () => answer(200);
    assert.equal(await dispatch(world, 'a/m', calls.call), 'a/m');
    assert.deepEqual(calls.called, ['a/m', 'b/m', 'b/m', 'a/m']);
  });

  it('fails a refused request over, and sends nothing to the primary while its retry-after runs', async () => {
    const world = failoverWorld();
    const calls = scriptedCalls({ 'a/m': () => said(429, { retryAfterMs: 2000 }), 'b/m': () => answer(200) });
    assert.equal(await dispatch(world, 'a/m', calls.call), 'b/m');
    assert.deepEqual(calls.called, ['a/m', 'b/m']);
    assert.deepEqual(world.throttled, ['a/m']);
    await world.timers.advance(1999);
    assert.equal(await dispatch(world, 'a/m', calls.call), 'b/m');
    assert.deepEqual(calls.called, ['a/m', 'b/m', 'b/m'], 'the primary was not called');
    await world.timers.advance(1);
    await dispatch(world, 'a/m', calls.call);
    assert.equal(calls.called.at(-2), 'a/m', 'called again once the retry-after passed');
  });

  it('cools a 429 without retry-after down for the provider\'s cooldown', async () => {
    const world = failoverWorld();
    const calls = scriptedCalls({ 'a/m': () => said(429, {}), 'b/m': () => answer(200) });
    await dispatch(world, 'a/m', calls.call);
    await world.timers.advance(4999);
    await dispatch(world, 'a/m', calls.call);
    assert.deepEqual(calls.called, ['a/m', 'b/m', 'b/m']);
    await world.timers.advance(1);
    await dispatch(world, 'a/m', calls.call);
    assert.equal(calls.called[3], 'a/m');
  });

  it('spreads an alias over the targets that still have capacity', async () => {
    const world = coreWorld({
      providers: { a: ['m'], b: ['m'], c: ['m'] },
      routing: { aliases: { fast: { strategy: 'round_robin', targets: [{ model: 'a/m', weight: 1 }, { model: 'b/m', weight: 1 }, { model: 'c/m', weight: 1 }] } } },
      learned: { a: LEARN, b: LEARN, c: LEARN },
    });
    const calls = scriptedCalls({
      'a/m': () => answer(200),
      'b/m': () => answer(200),
      'c/m': () => said(200, { tokens: { limit: 1000, remaining: 0, resetInMs: 60_000 } }),
    });
    const served: string[] = [];
    for (let i = 0; i < 12; i++) served.push(await dispatch(world, 'fast', calls.call));
    const c = calls.called.filter((id) => id === 'c/m').length;
    assert.equal(c, 1, 'c was called once, then said its tokens were spent');
    const a = served.filter((id) => id === 'a/m').length;
    const b = served.filter((id) => id === 'b/m').length;
    assert.equal(a + b, 11);
    // c's turns fall through to the target listed after it (as for a target saturated by its rules).
    assert.deepEqual([a, b], [7, 4], 'spread over a and b');
  });

  it('refuses with the soonest reset when every target is saturated by what was learned', async () => {
    const world = failoverWorld();
    world.core.observe({ provider: 'a', model: 'm' }, said(429, { retryAfterMs: 9000 }));
    world.core.observe({ provider: 'b', model: 'm' }, said(200, { requests: { limit: 10, remaining: 0, resetInMs: 2500 } }));
    const calls = scriptedCalls({});
    const err = await refusal(dispatch(world, 'a/m', calls.call));
    assert.equal(err.status, 429);
    assert.equal(err.message, 'rate limit exceeded for model a/m: the provider refused and asked to retry later (learned from its answers)');
    assert.equal(err.headers?.['retry-after'], '3');
    assert.equal(err.headers?.['retry-after-ms'], '3000');
    assert.deepEqual(calls.called, []);
  });

  it('lets a request that may wait wait for the reset, and serves it then', async () => {
    const world = failoverWorld();
    world.core.observe({ provider: 'a', model: 'm' }, said(200, { requests: { limit: 10, remaining: 0, resetInMs: 1200 } }));
    world.core.observe({ provider: 'b', model: 'm' }, said(429, { retryAfterMs: 30_000 }));
    const calls = scriptedCalls({ 'a/m': () => answer(200), 'b/m': () => answer(200) });
    const served = world.core.dispatch({ ...CALLER, maxWaitMs: 5000 }, world.route('a/m'), new TestLifetime(), calls.call);
    await settle();
    assert.equal(world.queue.depth, 1);
    await world.timers.advance(1199);
    assert.deepEqual(calls.called, [], 'nothing is called before the reset');
    await world.timers.advance(1);
    const done = await served;
    assert.equal(done.target.id, 'a/m');
    assert.equal(done.headers?.['x-floodgate-queue-wait-ms'], '1200');
    assert.deepEqual(world.waits.map((w) => w.outcome), ['admitted']);
  });

  it('explains a target saturated by what was learned', async () => {
    const world = failoverWorld();
    world.core.observe({ provider: 'a', model: 'm' }, said(429, { retryAfterMs: 4000 }));
    const explained = await world.core.explain('/team', world.route('a/m'), 'dispatch');
    assert.deepEqual(explained.targets.map((t) => [t.target.id, t.learned?.untilMs ?? null, t.breach?.periodLabel ?? null]), [
      ['a/m', world.clock.now() + 4000, 'learned'],
      ['b/m', null, null],
    ]);
    assert.equal(explained.target?.id, 'b/m');
  });

  it('learns nothing for a provider that does not learn, and from a passthrough answer naming no model', async () => {
    const world = coreWorld({ providers: { a: ['m'], b: ['m'] }, routing: { failover: { 'a/m': ['b/m'] } }, learned: { b: LEARN } });
    const calls = scriptedCalls({ 'a/m': () => said(429, { retryAfterMs: 60_000 }), 'b/m': () => answer(200) });
    await dispatch(world, 'a/m', calls.call);
    await dispatch(world, 'a/m', calls.call);
    assert.deepEqual(calls.called, ['a/m', 'b/m', 'a/m', 'b/m'], 'a is called each time');
    world.core.observe({ provider: 'b', model: undefined }, said(429, { retryAfterMs: 60_000 }));
    assert.equal(await dispatch(world, 'b/m', calls.call), 'b/m');
    assert.deepEqual(world.throttled, ['a/m', 'a/m', 'b/'], 'every 429 is counted all the same');
  });
});
