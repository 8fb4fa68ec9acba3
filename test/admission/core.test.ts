import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayError } from '../../src/errors/gateway-error.ts';
import { rule } from '../ratelimit/helpers.ts';
import { answer, brokenStream, coreWorld, scriptedCalls, T0_MS, TestLifetime, refusal } from './helpers.ts';

const CALLER = { userPath: '/team/alice', keyId: 'key-1' };
const USAGE = { promptTokens: 7, completionTokens: 3, totalTokens: 10 };

/** In-flight counts of every rule, by `scope subject`. */
async function inFlight(world: ReturnType<typeof coreWorld>): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const status of await world.limiter.status()) if (status.period_seconds === 0) out[`${status.scope} ${status.subject}`] = status.in_flight;
  return out;
}

describe('AdmissionCore.dispatch', () => {
  it('skips a target saturated by its provider rules without calling it', async () => {
    const world = coreWorld({
      providers: { a: ['m'], b: ['m'] },
      routing: { aliases: { fast: { strategy: 'first', targets: [{ model: 'a/m', weight: 1 }, { model: 'b/m', weight: 1 }] } } },
      rules: [rule('provider', 'a', 60, { maxRequests: 1 })],
    });
    const calls = scriptedCalls({ 'a/m': () => answer(200, USAGE), 'b/m': () => answer(200, USAGE) });
    await world.core.dispatch(CALLER, world.route('fast'), new TestLifetime(), calls.call);
    const second = await world.core.dispatch(CALLER, world.route('fast'), new TestLifetime(), calls.call);
    assert.deepEqual(calls.called, ['a/m', 'b/m']);
    assert.equal(second.target.id, 'b/m');
  });

  it('fails over on a retryable upstream answer and on a stream broken before its first byte', async () => {
    const world = coreWorld({ providers: { a: ['m'], b: ['m'], c: ['m'] }, routing: { failover: { 'a/m': ['b/m', 'c/m'] } } });
    const calls = scriptedCalls({ 'a/m': () => answer(503), 'b/m': brokenStream, 'c/m': () => answer(200, USAGE) });
    const done = await world.core.dispatch(CALLER, world.route('a/m'), new TestLifetime(), calls.call);
    assert.deepEqual(calls.called, ['a/m', 'b/m', 'c/m']);
    assert.equal(done.target.id, 'c/m');
    assert.equal(done.result.status, 200);
  });

  it('does not fail over on a client error, and the last candidate answers whatever it says', async () => {
    const world = coreWorld({ providers: { a: ['m'], b: ['m'] }, routing: { failover: { 'a/m': ['b/m'] } } });
    const clientError = scriptedCalls({ 'a/m': () => answer(400), 'b/m': () => answer(200) });
    assert.equal((await world.core.dispatch(CALLER, world.route('a/m'), new TestLifetime(), clientError.call)).result.status, 400);
    assert.deepEqual(clientError.called, ['a/m']);
    const bothFail = scriptedCalls({ 'a/m': () => answer(500), 'b/m': () => answer(502) });
    const last = await world.core.dispatch(CALLER, world.route('a/m'), new TestLifetime(), bothFail.call);
    assert.equal(last.result.status, 502);
    assert.equal(last.target.id, 'b/m');
  });

  it('answers the last upstream failure when the remaining candidates are saturated', async () => {
    const world = coreWorld({
      providers: { a: ['m'], b: ['m'] },
      routing: { failover: { 'a/m': ['b/m'] } },
      rules: [rule('provider', 'b', 0, { maxRequests: 1 })],
    });
    const lifetime = new TestLifetime();
    await world.core.admitOne(CALLER, { provider: 'b' }, { lifetime }); // b's only slot is taken
    const calls = scriptedCalls({ 'a/m': () => answer(503) });
    const err = await refusal(world.core.dispatch(CALLER, world.route('a/m'), new TestLifetime(), calls.call));
    assert.equal(err.status, 503);
    assert.equal(err.type, 'provider_error');
  });

  it('refuses with the first target\'s 429 and the soonest Retry-After when every target is saturated', async () => {
    const world = coreWorld({
      providers: { a: ['m'], b: ['m'] },
      routing: { aliases: { fast: { strategy: 'first', targets: [{ model: 'a/m', weight: 1 }, { model: 'b/m', weight: 1 }] } } },
      rules: [rule('provider', 'a', 3600, { maxRequests: 1 }), rule('provider', 'b', 60, { maxRequests: 1 })],
    });
    const calls = scriptedCalls({ 'a/m': () => answer(200), 'b/m': () => answer(200) });
    await world.core.dispatch(CALLER, world.route('fast'), new TestLifetime(), calls.call);
    await world.core.dispatch(CALLER, world.route('fast'), new TestLifetime(), calls.call);
    const err = await refusal(world.core.dispatch(CALLER, world.route('fast'), new TestLifetime(), calls.call));
    assert.equal(err.status, 429);
    assert.equal(err.message, 'rate limit exceeded for provider a: hour request limit of 1 reached');
    assert.equal(err.headers?.['retry-after'], '61', 'b frees first (its minute window), not a (its hour)');
    assert.equal(err.headers?.['x-ratelimit-reset-requests'], '61');
    assert.deepEqual(calls.called, ['a/m', 'b/m']);
  });

  it('refuses a user-path breach before any target is tried or called', async () => {
    const world = coreWorld({ providers: { a: ['m'], b: ['m'] }, routing: { failover: { 'a/m': ['b/m'] } }, rules: [rule('user_path', '/team', 60, { maxRequests: 1 })] });
    const calls = scriptedCalls({ 'a/m': () => answer(200), 'b/m': () => answer(200) });
    await world.core.dispatch(CALLER, world.route('a/m'), new TestLifetime(), calls.call);
    world.admissions.length = 0;
    const err = await refusal(world.core.dispatch(CALLER, world.route('a/m'), new TestLifetime(), calls.call));
    assert.equal(err.message, 'rate limit exceeded for /team: minute request limit of 1 reached');
    assert.deepEqual(calls.called, ['a/m']);
    assert.equal(world.admissions.length, 1, 'one admission check, then the 429');
  });

  it('counts user-path rules once per request and provider rules per attempt', async () => {
    const world = coreWorld({
      providers: { a: ['m'], b: ['m'] },
      routing: { failover: { 'a/m': ['b/m'] } },
      rules: [rule('user_path', '/team', 60, { maxRequests: 10 }), rule('provider', 'a', 60, { maxRequests: 10 }), rule('provider', 'b', 60, { maxRequests: 10 })],
    });
    const calls = scriptedCalls({ 'a/m': () => answer(500), 'b/m': () => answer(200) });
    await world.core.dispatch(CALLER, world.route('a/m'), new TestLifetime(), calls.call);
    const used = Object.fromEntries((await world.limiter.status()).map((s) => [s.subject, s.requests_used]));
    assert.deepEqual(used, { '/team': 1, a: 1, b: 1 });
  });

  it('checks budgets once, after the rate limits, and never calls upstream past a reached budget', async () => {
    const world = coreWorld({
      providers: { a: ['m'], b: ['m'] },
      routing: { failover: { 'a/m': ['b/m'] } },
      budgets: [{ userPath: '/team', period: 'day', maxUsd: 10, source: 'manual', createdAt: new Date(T0_MS), updatedAt: new Date(T0_MS) }],
    });
    const calls = scriptedCalls({ 'a/m': () => answer(500), 'b/m': () => answer(200) });
    await world.core.dispatch(CALLER, world.route('a/m'), new TestLifetime(), calls.call);
    world.budgets.observe('/team/alice', T0_MS, 10);
    const err = await refusal(world.core.dispatch(CALLER, world.route('a/m'), new TestLifetime(), calls.call));
    assert.equal(err.code, 'budget_exceeded');
    assert.equal(err.message, 'budget exceeded for /team: day budget of $10.00 reached');
    assert.deepEqual(calls.called, ['a/m', 'b/m']);
  });

  describe('concurrency slots', () => {
    const rules = [rule('user_path', '/team', 0, { maxRequests: 5 }), rule('provider', 'a', 0, { maxRequests: 5 }), rule('provider', 'b', 0, { maxRequests: 5 })];
    const setup = () => coreWorld({ providers: { a: ['m'], b: ['m'] }, routing: { failover: { 'a/m': ['b/m'] } }, rules });

    it('are held until the request ends on success', async () => {
      const world = setup();
      const lifetime = new TestLifetime();
      await world.core.dispatch(CALLER, world.route('a/m'), lifetime, scriptedCalls({ 'a/m': () => answer(200) }).call);
      assert.deepEqual(await inFlight(world), { 'user_path /team': 1, 'provider a': 1, 'provider b': 0 });
      lifetime.end();
      assert.deepEqual(await inFlight(world), { 'user_path /team': 0, 'provider a': 0, 'provider b': 0 });
    });

    it('go back when the request ends with an error', async () => {
      const world = setup();
      const lifetime = new TestLifetime();
      const calls = scriptedCalls({ 'a/m': () => { throw new GatewayError({ status: 400, type: 'invalid_request_error', message: 'bad' }); } });
      await refusal(world.core.dispatch(CALLER, world.route('a/m'), lifetime, calls.call));
      lifetime.end();
      assert.deepEqual(await inFlight(world), { 'user_path /team': 0, 'provider a': 0, 'provider b': 0 });
    });

    it('go back when the client leaves mid-call', async () => {
      const world = setup();
      const lifetime = new TestLifetime();
      const calls = scriptedCalls({
        'a/m': () => {
          lifetime.cancel.cancel();
          throw new GatewayError({ status: 499, type: 'provider_error', message: 'cancelled' });
        },
      });
      await refusal(world.core.dispatch(CALLER, world.route('a/m'), lifetime, calls.call));
      assert.deepEqual(calls.called, ['a/m'], 'a cancelled request does not fail over');
      lifetime.end();
      assert.deepEqual(await inFlight(world), { 'user_path /team': 0, 'provider a': 0, 'provider b': 0 });
    });

    it('of a failed attempt go back at once, the request keeping its own', async () => {
      const world = setup();
      const lifetime = new TestLifetime();
      await world.core.dispatch(CALLER, world.route('a/m'), lifetime, scriptedCalls({ 'a/m': () => answer(502), 'b/m': () => answer(200) }).call);
      assert.deepEqual(await inFlight(world), { 'user_path /team': 1, 'provider a': 0, 'provider b': 1 });
      lifetime.end();
      assert.deepEqual(await inFlight(world), { 'user_path /team': 0, 'provider a': 0, 'provider b': 0 });
    });
  });
});

describe('AdmissionCore.complete', () => {
  it('charges tokens to the user path and to the target that executed, and records the usage', async () => {
    const world = coreWorld({
      providers: { a: ['m'], b: ['m'] },
      routing: { failover: { 'a/m': ['b/m'] } },
      rules: [rule('user_path', '/team', 60, { maxTokens: 1000 }), rule('provider', 'a', 60, { maxTokens: 1000 }), rule('model', 'b/m', 60, { maxTokens: 1000 })],
    });
    const done = await world.core.dispatch(CALLER, world.route('a/m'), new TestLifetime(), scriptedCalls({ 'a/m': () => answer(500), 'b/m': () => answer(200, USAGE) }).call);
    world.clock.set(T0_MS + 250);
    world.core.complete(CALLER, { provider: done.target.provider.name, model: done.target.model, endpoint: 'chat', usage: done.result.usage(), status: 200, startedAt: T0_MS, cached: false, requestId: 'req-1' });
    const tokens = Object.fromEntries((await world.limiter.status()).map((s) => [s.subject, s.tokens_used]));
    assert.deepEqual(tokens, { '/team': 10, a: 0, 'b/m': 10 });
    assert.equal(world.records.length, 1);
    assert.deepEqual(
      { ...world.records[0] },
      { timestampMs: T0_MS, userPath: '/team/alice', provider: 'b', model: 'm', endpoint: 'chat', promptTokens: 7, completionTokens: 3, totalTokens: 10, cachedPromptTokens: 0, cached: false, status: 200, latencyMs: 250, apiKeyId: 'key-1', requestId: 'req-1', estimated: false },
    );
  });

  it('charges nothing for a cache hit', async () => {
    const world = coreWorld({ providers: { a: ['m'] }, rules: [rule('user_path', '/', 60, { maxTokens: 1000 })] });
    world.core.complete(CALLER, { provider: 'a', model: 'm', endpoint: 'chat', usage: USAGE, status: 200, startedAt: T0_MS, cached: true, requestId: 'req-2' });
    assert.equal((await world.limiter.status())[0]!.tokens_used, 0);
    assert.equal(world.records[0]!.cached, true);
  });
});

describe('AdmissionCore.admitSession and admitOne', () => {
  it('a session takes one slot on its primary target, and never a failover candidate', async () => {
    const world = coreWorld({ providers: { a: ['m'], b: ['m'] }, routing: { failover: { 'a/m': ['b/m'] } }, rules: [rule('provider', 'a', 0, { maxRequests: 1 })] });
    const first = new TestLifetime();
    assert.equal((await world.core.admitSession(CALLER, world.route('a/m'), first)).target.id, 'a/m');
    const err = await refusal(world.core.admitSession(CALLER, world.route('a/m'), new TestLifetime()));
    assert.equal(err.message, 'rate limit exceeded for provider a: concurrent request limit of 1 reached');
    first.end();
    assert.equal((await world.core.admitSession(CALLER, world.route('a/m'), new TestLifetime())).target.id, 'a/m');
  });

  it('a submission meets user-path rules only and takes no slot', async () => {
    const world = coreWorld({ providers: { a: ['m'] }, rules: [rule('user_path', '/team', 0, { maxRequests: 1 }), rule('user_path', '/team', 60, { maxRequests: 2 })] });
    await world.core.admitOne(CALLER, {});
    const headers = await world.core.admitOne(CALLER, {});
    assert.equal(headers?.['x-ratelimit-remaining-requests'], '0');
    const err = await refusal(world.core.admitOne(CALLER, {}));
    assert.equal(err.message, 'rate limit exceeded for /team: minute request limit of 2 reached');
  });
});

describe('what the core reports: upstream attempts, failovers and refusals', () => {
  it('tells the request\'s trace of each call and failover, and the metrics of each failover', async () => {
    const world = coreWorld({ providers: { a: ['m'], b: ['m'], c: ['m'] }, routing: { failover: { 'a/m': ['b/m', 'c/m'] } } });
    const calls = scriptedCalls({ 'a/m': () => answer(500), 'b/m': () => answer(429), 'c/m': () => answer(200, USAGE) });
    const heard: string[] = [];
    const trace = {
      attempt: (target: { id: string }) => void heard.push(`call ${target.id}`),
      failedOver: (from: { id: string }, to: { id: string }, failure: GatewayError) => void heard.push(`${from.id} -> ${to.id}: ${failure.status}`),
    };
    await world.core.dispatch(CALLER, world.route('a/m'), new TestLifetime(), calls.call, trace);
    assert.deepEqual(heard, ['call a/m', 'a/m -> b/m: 500', 'call b/m', 'b/m -> c/m: 429', 'call c/m']);
    assert.deepEqual(world.failovers, ['a/m -> b/m', 'b/m -> c/m']);
    assert.deepEqual(world.refusals, [], 'failing over refuses nothing');
  });

  it('a request answered 429 is one refusal, by the rule that refused it and of what it asked for', async () => {
    const perChild = { ...rule('user_path', '/research', 60, { maxRequests: 1 }), perChild: true as const };
    const world = coreWorld({ providers: { a: ['m'], b: ['m'] }, routing: { aliases: { fast: { strategy: 'first', targets: [{ model: 'a/m', weight: 1 }, { model: 'b/m', weight: 1 }] } } }, rules: [perChild, rule('provider', 'a', 60, { maxRequests: 1 }), rule('provider', 'b', 60, { maxRequests: 1 })] });
    const calls = scriptedCalls({ 'a/m': () => answer(200), 'b/m': () => answer(200) });
    const x = { userPath: '/research/x', keyId: null };
    const y = { userPath: '/research/y', keyId: null };
    await world.core.dispatch(x, world.route('fast'), new TestLifetime(), calls.call);
    // Over its child's counter: the refusal names the rule's own path, not the child's.
    await refusal(world.core.dispatch(x, world.route('fast'), new TestLifetime(), calls.call));
    // a is saturated: b serves, and nothing is refused.
    await world.core.dispatch(y, world.route('fast'), new TestLifetime(), calls.call);
    assert.equal(world.refusals.length, 1);
    // Every target saturated: the route's first target's rule refused it.
    const z = { userPath: '/research/z', keyId: null };
    await refusal(world.core.dispatch(z, world.route('fast'), new TestLifetime(), calls.call));
    assert.deepEqual(world.refusals, [
      { userPath: '/research/x', provider: 'a', model: 'm', scope: 'user_path', subject: '/research', period: 'minute' },
      { userPath: '/research/z', provider: 'a', model: 'm', scope: 'provider', subject: 'a', period: 'minute' },
    ]);
  });

  it('a budget\'s 429 is a refusal by the budget; a submission asked for no provider or model', async () => {
    const world = coreWorld({
      providers: { a: ['m'] },
      rules: [rule('user_path', '/batch', 60, { maxRequests: 1 })],
      budgets: [{ userPath: '/team', period: 'day', maxUsd: 10, source: 'manual', createdAt: new Date(T0_MS), updatedAt: new Date(T0_MS) }],
    });
    world.budgets.observe('/team/alice', T0_MS, 10);
    const calls = scriptedCalls({ 'a/m': () => answer(200) });
    await refusal(world.core.dispatch(CALLER, world.route('a/m'), new TestLifetime(), calls.call));
    await refusal(world.core.admitSession(CALLER, world.route('a/m'), new TestLifetime()));
    const submitter = { userPath: '/batch', keyId: null };
    await world.core.admitOne(submitter, {});
    await refusal(world.core.admitOne(submitter, {}));
    await refusal(world.core.admitOne(CALLER, { provider: 'a' }));
    assert.deepEqual(world.refusals, [
      { userPath: '/team/alice', provider: 'a', model: 'm', scope: 'budget', subject: '/team', period: 'day' },
      { userPath: '/team/alice', provider: 'a', model: 'm', scope: 'budget', subject: '/team', period: 'day' },
      { userPath: '/batch', provider: '', model: '', scope: 'user_path', subject: '/batch', period: 'minute' },
      { userPath: '/team/alice', provider: 'a', model: '', scope: 'budget', subject: '/team', period: 'day' },
    ]);
    assert.deepEqual(calls.called, []);
  });
});
