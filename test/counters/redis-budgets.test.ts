/**
 * Budget reservations on the Redis counters (budgets.reservations): two gateways sharing a prefix,
 * each with its own rate limiter and budget tracker, as replicas are. A request's budgets travel in
 * its admission's own script call, so the check and the reservation hold across replicas and a
 * budget's refusal writes nothing; statuses show every replica's reservations.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { BudgetTracker, type BudgetHold } from '../../src/budgets/tracker.ts';
import type { BudgetDefinition } from '../../src/budgets/types.ts';
import type { RedisCounterStore } from '../../src/counters/redis/store.ts';
import { RateLimiter } from '../../src/ratelimit/index.ts';
import { rule } from '../ratelimit/helpers.ts';
import { openRedisStore, ownRedis, testPrefix, type OwnRedis, type TestRedisStore } from '../support/redis.ts';

const PATH = '/team/alice';
const HOUR = 3600;

function budget(maxUsd: number): BudgetDefinition {
  return { userPath: '/team', period: 'day', maxUsd, source: 'manual', createdAt: new Date(), updatedAt: new Date() };
}

/** A gateway on `store`: a request cap on /team and a budget of `maxUsd` on it, reservations on. */
function replica(store: RedisCounterStore, maxUsd: number) {
  const limiter = new RateLimiter({ store, reservations: true });
  limiter.replaceRules([rule('user_path', '/team', HOUR, { maxRequests: 100 })]);
  const tracker = new BudgetTracker({
    now: Date.now,
    source: { settle: async () => true, sumCost: async (queries) => queries.map(() => 0), budgets: async () => [budget(maxUsd)] },
    reservations: true,
    ledger: store,
  });
  tracker.replaceAll([budget(maxUsd)]);
  return {
    limiter,
    tracker,
    /** One admission claiming `costUsd`: the hold when admitted, or what refused it. */
    async admit(costUsd: number): Promise<BudgetHold | 'budget' | 'rule'> {
      const claim = tracker.claim(PATH, costUsd)!;
      const result = await limiter.admit({ userPath: PATH }, undefined, claim);
      if ('spendRefused' in result) {
        assert.equal(claim.result().ok, false, 'the claim knows it was refused');
        return 'budget';
      }
      if (!result.ok) return 'rule';
      const reserved = claim.result();
      assert.ok(reserved.ok);
      return reserved.hold;
    },
    async requestsUsed(): Promise<number> {
      return (await limiter.status())[0]!.requests_used;
    },
    async sharedReserved(): Promise<number | undefined> {
      return (await tracker.sharedStatus())[0]!.reserved_usd;
    },
  };
}

describe('budget reservations on Redis counters', () => {
  let prefix: string;
  let a: TestRedisStore;
  let b: TestRedisStore;
  before(async () => {
    prefix = testPrefix();
    a = await openRedisStore({ prefix });
    b = await openRedisStore({ prefix });
  });
  after(async () => {
    await a?.close();
    await b?.close();
  });

  it('two replicas racing on a $1 budget admit three requests estimated at $0.30, never a fourth', async () => {
    const [one, two] = [replica(a.store, 1), replica(b.store, 1)];
    const outcomes = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? one : two).admit(0.3)));
    const holds = outcomes.filter((o): o is BudgetHold => typeof o === 'object');
    assert.equal(holds.length, 3);
    assert.equal(outcomes.filter((o) => o === 'budget').length, 7);
    assert.equal(await one.requestsUsed(), 3, 'the requests a budget refused were not counted');
    // Each replica shows every replica's reservations, not only its own.
    assert.equal(await one.sharedReserved(), 0.9);
    assert.equal(await two.sharedReserved(), 0.9);
    const own = one.tracker.status()[0]!.reserved_usd! + two.tracker.status()[0]!.reserved_usd!;
    assert.equal(Math.round(own * 100) / 100, 0.9, "each replica's own share adds up to the shared figure");
    for (const hold of holds) hold.release(0.2);
    await eventually(async () => (await two.sharedReserved()) === 0);
    // $0.60 settled in Redis: a replica that has not yet read it from storage is held by it too.
    assert.equal(await two.admit(0.5), 'budget');
    const fits = await two.admit(0.4);
    assert.ok(typeof fits === 'object');
    fits.release(0);
  });
});

describe('budget reservations on Redis counters: one script call per admission', () => {
  let redis: OwnRedis;
  before(async () => {
    redis = await ownRedis();
  });
  after(() => redis.stop());

  it('checks and reserves the budgets in the admission\'s own EVALSHA; a budget\'s refusal is one call too and writes nothing', async () => {
    // Leases long enough that no renewal runs during the test.
    const gateway = await openRedisStore({ url: redis.url, leaseSeconds: 300 });
    const observer = new Redis(redis.url, { protocol: 2 });
    const monitor = await observer.monitor();
    try {
      const one = replica(gateway.store, 1);
      const sent: string[][] = [];
      monitor.on('monitor', (_time: string, args: string[], source: string) => {
        if (!source.startsWith('lua')) sent.push(args.map(String));
      });
      // A command on the gateway's own connection after everything it sent: once the monitor shows
      // it, it has shown every command before it.
      let marks = 0;
      const synced = async (): Promise<void> => {
        const mark = `${gateway.names.tag}mark:${marks++}`;
        await gateway.client.exists(mark);
        await until(() => sent.some((args) => args.includes(mark)));
        for (let i = sent.length - 1; i >= 0; i--) if (sent[i]!.includes(mark)) sent.splice(i, 1);
      };
      // The first call loads the script (EVAL after a NOSCRIPT), and its release is a call of its own: out of the count.
      (await one.admit(0.3) as BudgetHold).release(0);
      await sleep(50);
      await synced();
      const calls: string[][][] = [];
      for (let i = 0; i < 4; i++) {
        sent.length = 0;
        const outcome = await one.admit(0.3);
        await synced();
        calls.push([...sent]);
        assert.equal(outcome === 'budget', i === 3, `admission ${i + 1}`);
      }
      for (const [i, commands] of calls.entries()) {
        assert.deepEqual(commands.map((args) => args[0]!.toLowerCase()), ['evalsha'], `admission ${i + 1}: one command`);
        const keys = commands[0]!.join(' ');
        assert.ok(keys.includes('rl:user_path:/team:3600') && keys.includes('br:/team'), `admission ${i + 1}: the rule's and the budget's keys in the same call`);
      }
      assert.equal(await one.requestsUsed(), 1 + 3, 'the admission the budget refused was not counted');
      assert.equal(await one.sharedReserved(), 0.9);
    } finally {
      monitor.disconnect();
      observer.disconnect();
      await gateway.close();
    }
  });

  it('while Redis is away, a replica decides on its own counts, and statuses show its own reservations', async () => {
    await redis.start();
    const gateway = await openRedisStore({ url: redis.url, onError: 'local', timeoutMs: 200 });
    try {
      const one = replica(gateway.store, 1);
      await redis.stop();
      const outcomes = [];
      for (let i = 0; i < 4; i++) outcomes.push(await one.admit(0.3));
      assert.deepEqual(outcomes.map((o) => typeof o === 'object'), [true, true, true, false]);
      assert.equal(await one.sharedReserved(), 0.9, "this replica's reservations");
      for (const hold of outcomes) if (typeof hold === 'object') hold.release(0);
      assert.equal(await one.sharedReserved(), 0);
    } finally {
      // Back up first: closing removes the test's keys.
      await redis.start();
      await gateway.close();
    }
  });
});

async function eventually(condition: () => Promise<boolean>, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    assert.ok(Date.now() < deadline, 'timed out');
    await sleep(10);
  }
}

async function until(condition: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    assert.ok(Date.now() < deadline, 'timed out');
    await sleep(10);
  }
}
