/**
 * Waiting for capacity, on the admission core with the memory store and timers that move only
 * when told to: who waits, when it is woken, in which order, and what it counts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Caller } from '../../src/admission/core.ts';
import { GatewayError } from '../../src/errors/gateway-error.ts';
import type { Priority } from '../../src/ratelimit/index.ts';
import { rule } from '../ratelimit/helpers.ts';
import { answer, coreWorld, settle, T0_MS, TestLifetime, type CoreWorld } from './helpers.ts';

const caller = (userPath: string, maxWaitMs: number, priority: Priority = 'normal'): Caller => ({ userPath, keyId: null, maxWaitMs, priority });

/** A request to `a/m` that records when it reached the upstream; its lifetime ends when the test says. */
function request(world: CoreWorld, who: Caller, log: string[], name: string) {
  const lifetime = new TestLifetime();
  const done = world.core.dispatch(who, world.route('a/m'), lifetime, async () => {
    log.push(name);
    return answer(200);
  });
  // Settled either way: a test looks at the outcome when it wants.
  const outcome = done.then(
    (value) => ({ ok: true as const, headers: value.headers }),
    (err: unknown) => ({ ok: false as const, err: err as GatewayError }),
  );
  return { lifetime, outcome };
}

describe('waiting for capacity', () => {
  it('waits for a concurrency slot, and is served when it is released, with the wait in a header', async () => {
    const world = coreWorld({ providers: { a: ['m'] }, rules: [rule('provider', 'a', 0, { maxRequests: 1 })] });
    const log: string[] = [];
    const first = request(world, caller('/x', 0), log, 'first');
    await settle();
    const second = request(world, caller('/x', 3000), log, 'second');
    await world.timers.advance(700);
    assert.deepEqual(log, ['first'], 'the second waits while the slot is held');
    first.lifetime.end();
    await settle();
    assert.deepEqual(log, ['first', 'second']);
    const outcome = await second.outcome;
    assert.ok(outcome.ok);
    assert.equal(outcome.headers?.['x-floodgate-queue-wait-ms'], '700');
    assert.deepEqual(world.waits.map((w) => w.outcome), ['admitted']);
  });

  it('answers the 429 at once when the refusal\'s wait is longer than the request may wait', async () => {
    const world = coreWorld({ providers: { a: ['m'] }, rules: [rule('provider', 'a', 0, { maxRequests: 1 })] });
    const log: string[] = [];
    request(world, caller('/x', 0), log, 'first');
    await settle();
    const outcome = await request(world, caller('/x', 200), log, 'second').outcome;
    assert.ok(!outcome.ok);
    assert.equal(outcome.err.status, 429);
    assert.equal(outcome.err.headers?.['x-floodgate-queue-wait-ms'], undefined, 'it did not wait');
    assert.equal(world.queue.depth, 0);
  });

  it('waits for a window to free, woken at the moment it does', async () => {
    // A 3-second window with a cap of 2, its two requests at the window's start.
    const start = Math.ceil(T0_MS / 3000) * 3000;
    const world = coreWorld({ providers: { a: ['m'] }, rules: [rule('user_path', '/team', 3, { maxRequests: 2 })] });
    world.timers.set(start);
    const log: string[] = [];
    for (const name of ['one', 'two']) request(world, caller('/team', 0), log, name).lifetime.end();
    await settle();
    const third = request(world, caller('/team', 5000), log, 'three');
    await world.timers.advance(3999);
    assert.deepEqual(log, ['one', 'two'], 'the estimate is 2 until a second into the next window');
    await world.timers.advance(1);
    assert.deepEqual(log, ['one', 'two', 'three']);
    const outcome = await third.outcome;
    assert.ok(outcome.ok);
    assert.equal(outcome.headers?.['x-floodgate-queue-wait-ms'], '4000');
    const used = (await world.limiter.status())[0]!;
    // The previous window's 2 weigh 1 a second into this one; the third is counted once, when admitted.
    assert.equal(used.requests_used, 2);
  });

  it('gets the 429 of its last refusal once what is left of its wait is shorter than the refusal\'s', async () => {
    const world = coreWorld({ providers: { a: ['m'] }, rules: [rule('provider', 'a', 0, { maxRequests: 1 })] });
    const log: string[] = [];
    request(world, caller('/x', 0), log, 'first');
    await settle();
    const second = request(world, caller('/x', 2500), log, 'second');
    await world.timers.advance(2500);
    const outcome = await second.outcome;
    assert.ok(!outcome.ok);
    assert.equal(outcome.err.message, 'rate limit exceeded for provider a: concurrent request limit of 1 reached');
    assert.equal(outcome.err.headers?.['retry-after'], '1');
    // Re-checked at 1 s and 2 s; then 500 ms were left, less than the refusal's 1 s.
    assert.equal(outcome.err.headers?.['x-floodgate-queue-wait-ms'], '2000');
    assert.deepEqual(log, ['first']);
    assert.equal(world.queue.depth, 0);
    assert.equal(world.waits.at(-1)?.outcome, 'timed_out');
    // Refused once, whatever the checks along its wait: its 429 is one refusal.
    assert.deepEqual(world.refusals, [{ userPath: '/x', provider: 'a', model: 'm', scope: 'provider', subject: 'a', period: 'concurrent' }]);
  });

  it('serves higher priority first', async () => {
    const world = coreWorld({ providers: { a: ['m'] }, rules: [rule('provider', 'a', 0, { maxRequests: 1 })] });
    const log: string[] = [];
    const holder = request(world, caller('/x', 0, 'high'), log, 'holder');
    await settle();
    const low = request(world, caller('/x', 10_000, 'low'), log, 'low');
    await world.timers.advance(10);
    const high = request(world, caller('/x', 10_000, 'high'), log, 'high');
    await world.timers.advance(10);
    holder.lifetime.end();
    await settle();
    assert.deepEqual(log, ['holder', 'high']);
    assert.ok((await high.outcome).ok);
    assert.equal(world.queue.depthOf('low'), 1, 'high holds the slot now: low waits on');
    high.lifetime.end();
    await settle();
    assert.deepEqual(log, ['holder', 'high', 'low']);
    assert.ok((await low.outcome).ok);
  });

  it('takes turns among the children of the breached rule\'s path: one consumer\'s many do not starve a sibling', async () => {
    const world = coreWorld({ providers: { a: ['m'] }, rules: [rule('user_path', '/team', 0, { maxRequests: 1 })] });
    const log: string[] = [];
    const holder = request(world, caller('/team/carol', 0), log, 'holder');
    await settle();
    const waiting = [];
    for (let i = 1; i <= 5; i++) {
      waiting.push(request(world, caller('/team/alice', 60_000), log, `alice${i}`));
      await world.timers.advance(1);
    }
    waiting.push(request(world, caller('/team/bob/x', 60_000), log, 'bob'));
    await world.timers.advance(1);
    let current = holder;
    for (let served = 0; served < 3; served++) {
      current.lifetime.end();
      await settle();
      const name = log.at(-1)!;
      current = waiting.find((_, i) => (i < 5 ? `alice${i + 1}` : 'bob') === name)!;
    }
    assert.deepEqual(log, ['holder', 'alice1', 'bob', 'alice2']);
  });

  it('leaves the queue at once when its client goes, counting nothing and calling nothing', async () => {
    const world = coreWorld({ providers: { a: ['m'] }, rules: [rule('provider', 'a', 0, { maxRequests: 1 }), rule('user_path', '/', 60, { maxRequests: 100 })] });
    const log: string[] = [];
    const holder = request(world, caller('/x', 0), log, 'holder');
    await settle();
    const gone = request(world, caller('/x', 10_000), log, 'gone');
    await world.timers.advance(100);
    gone.lifetime.cancel.cancel();
    const outcome = await gone.outcome;
    assert.ok(!outcome.ok);
    assert.equal(outcome.err.code, 'client_closed_request');
    assert.equal(world.queue.depth, 0);
    holder.lifetime.end();
    await world.timers.advance(5000);
    assert.deepEqual(log, ['holder']);
    const minute = (await world.limiter.status()).find((s) => s.period_seconds === 60)!;
    assert.equal(minute.requests_used, 1, 'only the holder was counted');
    assert.equal(world.waits.at(-1)?.outcome, 'cancelled');
  });

  it('refuses a place past max_depth with queue_full', async () => {
    const world = coreWorld({ providers: { a: ['m'] }, rules: [rule('provider', 'a', 0, { maxRequests: 1 })], maxDepth: 1 });
    const log: string[] = [];
    request(world, caller('/x', 0), log, 'holder');
    await settle();
    request(world, caller('/x', 10_000), log, 'waiting');
    await settle();
    const outcome = await request(world, caller('/x', 10_000), log, 'third').outcome;
    assert.ok(!outcome.ok);
    assert.equal(outcome.err.status, 429);
    assert.equal(outcome.err.code, 'queue_full');
    assert.equal(outcome.err.message, 'queue full: 1 requests already waiting');
    // A 429 for want of capacity all the same: a refusal by the rule that refused it.
    assert.deepEqual(world.refusals, [{ userPath: '/x', provider: 'a', model: 'm', scope: 'provider', subject: 'a', period: 'concurrent' }]);
  });

  it('answers every waiter with its 429 when the queue closes (shutdown)', async () => {
    const world = coreWorld({ providers: { a: ['m'] }, rules: [rule('provider', 'a', 0, { maxRequests: 1 })] });
    const log: string[] = [];
    request(world, caller('/x', 0), log, 'holder');
    await settle();
    const waiters = [request(world, caller('/x', 10_000), log, 'w1'), request(world, caller('/x', 10_000, 'low'), log, 'w2')];
    await world.timers.advance(50);
    world.queue.close();
    for (const waiter of waiters) {
      const outcome = await waiter.outcome;
      assert.ok(!outcome.ok);
      assert.equal(outcome.err.status, 429);
      assert.equal(outcome.err.headers?.['x-floodgate-queue-wait-ms'], '50');
    }
  });

  it('a woken window waiter that is admitted wakes the next, one at a time', async () => {
    const start = Math.ceil(T0_MS / 60_000) * 60_000;
    const world = coreWorld({ providers: { a: ['m'] }, rules: [rule('provider', 'a', 1, { maxRequests: 3 })] });
    world.timers.set(start);
    const log: string[] = [];
    for (let i = 0; i < 3; i++) request(world, caller('/x', 0), log, `now${i}`);
    await settle();
    const waiting = [];
    for (let i = 0; i < 5; i++) waiting.push(request(world, caller('/x', 10_000), log, `later${i}`));
    await settle();
    // A 1-second window: the next second still carries the three, the one after has room for three.
    await world.timers.advance(1999);
    assert.deepEqual(log.slice(3), []);
    await world.timers.advance(1);
    assert.deepEqual(log.slice(3), ['later0', 'later1', 'later2']);
    await world.timers.advance(2000);
    assert.deepEqual(log.slice(3), ['later0', 'later1', 'later2', 'later3', 'later4']);
  });
});
