/**
 * The Redis counter store against a real Redis (127.0.0.1:6379, a key prefix per test): the
 * contract shared with the memory store, the same traffic through both on the Redis clock, what
 * several gateways sharing one prefix see, keys and leases, and what happens when Redis stops.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { MemoryCounterStore } from '../../src/counters/memory.ts';
import { RateLimiter, type AdmissionResult, type CounterAdmission, type CounterRule, type CounterStore, type MaybePromise, type RuleDefinition, type SlotLease } from '../../src/ratelimit/index.ts';
import { prng } from '../support/random.ts';
import { listenForSaturations } from '../../src/counters/redis/saturations.ts';
import { freshSecond, openRedisStore, ownRedis, REDIS_URL, type OwnRedis, type TestRedisStore } from '../support/redis.ts';
import { admit, admitLearned, childRule, counterRule, counterStoreContract, learnedRecord, lesson, LONG, ownKey, read, ruleKey } from './contract.ts';

counterStoreContract('RedisCounterStore', () => openRedisStore());

describe('RedisCounterStore and MemoryCounterStore on the same traffic', () => {
  it('agree on every answer, second by second, across window rolls (memory on the Redis clock)', async () => {
    const redis = await openRedisStore();
    try {
      const memory = new MemoryCounterStore();
      const both = (subject: string, period: number, caps: { maxRequests?: number; maxTokens?: number }, scope?: string) =>
        [counterRule(redis.store, subject, period, caps, scope), counterRule(memory, subject, period, caps, scope)] as const;
      const r1 = both('/a', 1, { maxRequests: 3 });
      const r2 = both('/a', 2, { maxRequests: 5, maxTokens: 40 });
      const r3 = both('p', 3, { maxRequests: 8, maxTokens: 25 }, 'provider');
      const c1 = both('/a', 0, { maxRequests: 2 });
      const lists = [[r1, r2, c1], [r2, r3], [r3, c1], [r1, r3]].map((list) => [list.map((r) => r[0]), list.map((r) => r[1])] as const);
      const held: Array<{ rules: readonly [CounterRule[], CounterRule[]]; leases: [SlotLease, SlotLease] }> = [];
      const next = prng(25);
      const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
      const compareReads = async (t: number): Promise<void> => {
        for (const [onRedis, inMemory] of lists) {
          const shared = await redis.store.read(onRedis, t);
          assert.equal(shared.nowSeconds, t);
          assert.deepEqual(shared.rows, memory.read(inMemory, t).rows);
        }
      };
      let admissions = 0;
      let refusals = 0;
      for (let round = 0; round < 6; round++) {
        const t = await freshSecond(redis.client);
        for (let op = 0; op < 8; op++) {
          const choice = next();
          if (choice < 0.6) {
            const [onRedis, inMemory] = pick(lists);
            const shared = (await redis.store.tryAdmit(onRedis, t)) as CounterAdmission;
            const local = memory.tryAdmit(inMemory, t) as CounterAdmission;
            assert.equal(shared.nowSeconds, t, 'the operation ran in the second it was planned for');
            assert.equal(shared.status, local.status);
            assert.deepEqual(shared.rows, local.rows);
            if (shared.status === 'admitted') admissions++;
            else refusals++;
            if (shared.lease !== undefined) held.push({ rules: [onRedis, inMemory], leases: [shared.lease, local.lease!] });
          } else if (choice < 0.8) {
            const [onRedis, inMemory] = pick(lists);
            const tokens = 1 + Math.floor(next() * 12);
            await redis.store.addTokens(onRedis, tokens, t);
            memory.addTokens(inMemory, tokens, t);
          } else if (held.length > 0) {
            const { rules, leases } = held.splice(Math.floor(next() * held.length), 1)[0]!;
            const slots = (list: CounterRule[]) => list.filter((rule) => rule.periodSeconds === 0);
            redis.store.release(slots(rules[0]), leases[0]);
            memory.release(slots(rules[1]), leases[1]);
          }
          await compareReads(t);
        }
        // On to the next second, or the one after: windows of 1, 2 and 3 s roll in every way.
        if (next() < 0.5) await sleep(1000);
      }
      assert.ok(admissions > 5 && refusals > 5, `the traffic both admitted and refused (${admissions} / ${refusals})`);
    } finally {
      await redis.close();
    }
  });
});

describe('RedisCounterStore: gateways sharing one prefix', () => {
  it('share every counter: a cap admits that many in total, whichever gateway asks', async () => {
    const a = await openRedisStore();
    const b = await openRedisStore({ prefix: a.prefix });
    try {
      const onA = [counterRule(a.store, '/team', LONG, { maxRequests: 5 }), counterRule(a.store, '/team', 0, { maxRequests: 50 })];
      const onB = [counterRule(b.store, '/team', LONG, { maxRequests: 5 }), counterRule(b.store, '/team', 0, { maxRequests: 50 })];
      const outcomes = await Promise.all(Array.from({ length: 20 }, (_, i) => admit(i % 2 === 0 ? a.store : b.store, i % 2 === 0 ? onA : onB)));
      assert.equal(outcomes.filter((o) => o.status === 'admitted').length, 5);
      const reading = await read(b.store, onB);
      assert.equal(reading.rows[0]!.requestsCurrent, 5);
      assert.equal(reading.rows[1]!.inFlight, 5);
      // A gateway that stops enforcing the rule (its rules reloaded) leaves the shared counters alone.
      a.store.retire(ruleKey('/team', LONG));
      assert.equal((await read(b.store, onB)).rows[0]!.requestsCurrent, 5);
      assert.equal((await read(a.store, [counterRule(a.store, '/team', LONG, { maxRequests: 5 })])).rows[0]!.requestsCurrent, 5);
      // A reset through either is seen by both.
      await b.store.reset(ruleKey('/team', LONG));
      assert.equal((await admit(a.store, onA)).status, 'admitted');
    } finally {
      await b.close();
      await a.close();
    }
  });

  it("give back all of a request's slots at once, removing its lease from every rule", async () => {
    const gateway = await openRedisStore();
    try {
      const rules = [counterRule(gateway.store, '/a', 0, { maxRequests: 3 }), counterRule(gateway.store, 'p', 0, { maxRequests: 3 }, 'provider')];
      const admission = await admit(gateway.store, rules);
      const keys = rules.map((rule) => gateway.names.counterKey(rule.counter.key));
      for (const key of keys) assert.equal(Number(await gateway.client.zcard(key)), 1);
      gateway.store.release(rules, admission.lease!);
      // A read through the store travels after the release.
      assert.deepEqual((await read(gateway.store, rules)).rows.map((row) => row.inFlight), [0, 0]);
      for (const key of keys) assert.equal(Number(await gateway.client.zcard(key)), 0);
    } finally {
      await gateway.close();
    }
  });
});

describe('RedisCounterStore: keys and leases', () => {
  it('keeps the keys of one admission under one hash tag, expiring two windows after theirs started', async () => {
    const gateway = await openRedisStore();
    try {
      const rules = [counterRule(gateway.store, '/team', 60, { maxRequests: 9 }), counterRule(gateway.store, 'openai', 0, { maxRequests: 9 }, 'provider'), counterRule(gateway.store, 'openai/gpt-4o', 3600, { maxTokens: 9 }, 'model')];
      const admission = await admit(gateway.store, rules);
      const keys = rules.map((rule) => gateway.names.counterKey(rule.counter.key));
      for (const key of keys) {
        assert.ok(key.startsWith(`{${gateway.prefix}}`), key);
        assert.equal(key.indexOf('{'), 0, 'the prefix in braces is the first (and only) hash tag');
      }
      assert.equal(Number(await gateway.client.expiretime(keys[0]!)), admission.rows[0]!.windowStart + 120);
      assert.equal(Number(await gateway.client.expiretime(keys[2]!)), admission.rows[2]!.windowStart + 7200);
      const [, expiry] = await gateway.client.zrange(keys[1]!, '0', '0', 'WITHSCORES');
      assert.ok(Number(await gateway.client.pexpiretime(keys[1]!)) >= Number(expiry), 'the lease set lives at least as long as its lease');
    } finally {
      await gateway.close();
    }
  });

  it('frees the slots of a gateway that stopped renewing within the lease time, and keeps a renewed one', async () => {
    const dead = await openRedisStore({ leaseSeconds: 1 });
    const alive = await openRedisStore({ leaseSeconds: 1, prefix: dead.prefix });
    const watcher = await openRedisStore({ prefix: dead.prefix });
    try {
      const slot = (store: CounterStore) => [counterRule(store, '/a', 0, { maxRequests: 2 })];
      assert.equal((await admit(dead.store, slot(dead.store))).status, 'admitted');
      assert.equal((await admit(alive.store, slot(alive.store))).status, 'admitted');
      dead.store.close(); // like a kill -9: nothing renews its lease any more
      assert.equal((await admit(watcher.store, slot(watcher.store))).status, 'refused');
      // Twice the lease time: the dead gateway's slot is gone, the renewed one is still held.
      await sleep(2000);
      const reading = await read(watcher.store, slot(watcher.store));
      assert.equal(reading.rows[0]!.inFlight, 1);
      assert.equal((await admit(watcher.store, slot(watcher.store))).status, 'admitted');
    } finally {
      await watcher.close();
      await alive.close();
      await dead.close();
    }
  });
});

const PER_CHILD: RuleDefinition = { scope: 'user_path', subject: '/Team', periodSeconds: LONG, maxRequests: 2, perChild: true, source: 'manual', createdAt: new Date(0), updatedAt: new Date(0) };

async function outcome(answer: MaybePromise<AdmissionResult>): Promise<string> {
  const result = await answer;
  if (result.ok) result.release();
  return result.ok ? 'admitted' : result.message;
}

describe('RedisCounterStore: per-child rules', () => {
  it("keeps a child's counter under the rule's key and the lowercase child, shared by every gateway", async () => {
    const a = await openRedisStore();
    const b = await openRedisStore({ prefix: a.prefix, maxChildren: 1 });
    try {
      const onA = new RateLimiter({ store: a.store });
      const onB = new RateLimiter({ store: b.store });
      onA.replaceRules([PER_CHILD]);
      onB.replaceRules([PER_CHILD]);
      assert.equal(await outcome(onA.admit({ userPath: '/team/Alice/x' })), 'admitted');
      assert.equal(await outcome(onB.admit({ userPath: '/team/alice/y' })), 'admitted');
      assert.equal(await outcome(onA.admit({ userPath: '/team/alice' })), 'rate limit exceeded for /Team/alice: 31622400s request limit of 2 reached');
      // max_children bounds what a gateway keeps in memory, not the children Redis counts.
      for (const child of ['bob', 'carol']) assert.equal(await outcome(onB.admit({ userPath: `/team/${child}` })), 'admitted');
      assert.equal(await outcome(onA.admit({ userPath: '/team' })), 'admitted');
      const own = ownKey('/team', LONG);
      assert.equal(a.names.counterKey(own + 'alice'), `{${a.prefix}}rl:user_path:/team:${LONG}:/alice`);
      assert.equal(Number(await a.client.exists(a.names.counterKey(own), a.names.counterKey(own + 'alice'), a.names.counterKey(own + 'bob'))), 3);
      const listed = await onB.status({ expandChildren: true });
      assert.deepEqual(listed.map((s) => [s.user_path, s.requests_used]), [['/Team', 1], ['/Team/alice', 2], ['/Team/bob', 1], ['/Team/carol', 1]]);
      assert.deepEqual((await onA.usageFor('/team/bob/z')).map((u) => [u.user_path, u.requests_used]), [['/Team/bob', 1]]);
      // A reset through one gateway clears every child, for all.
      await onA.resetRule({ scope: 'user_path', subject: '/team', periodSeconds: LONG });
      assert.deepEqual((await onB.status({ expandChildren: true })).map((s) => s.user_path), ['/Team']);
      assert.equal(Number(await a.client.exists(a.names.counterKey(own + 'alice'))), 0);
      assert.equal(await outcome(onB.admit({ userPath: '/team/alice' })), 'admitted');
    } finally {
      await b.close();
      await a.close();
    }
  });
});

describe('RedisCounterStore: learned capacity', () => {
  it('shares it: what one gateway learned refuses the next admission on another', async () => {
    const a = await openRedisStore();
    const b = await openRedisStore({ prefix: a.prefix });
    try {
      const onB = b.store.learnedCounter('openai', 'gpt-4o');
      assert.equal((await admitLearned(b.store, [], onB)).status, 'admitted');
      a.store.learn(a.store.learnedCounter('openai', 'gpt-4o'), lesson({ cooldownIn: 20_000, throttled: true }));
      // The write travels with a's next batch: any later call on a sees it, and b once it landed.
      await learnedRecord(a.store, a.store.learnedCounter('openai', 'gpt-4o'));
      const refused = await admitLearned(b.store, [counterRule(b.store, 'openai', LONG, { maxRequests: 9 }, 'provider')], onB);
      assert.equal(refused.learned?.cause, 'cooldown');
      assert.equal(refused.rows[0]!.requestsCurrent, 0);
      assert.equal((await b.store.readLearned(undefined, Date.now())).records.length, 1, 'listed by every gateway');
    } finally {
      await b.close();
      await a.close();
    }
  });

  it('tells every gateway of a saturation: an admission no rule governs is judged at once from what it heard', async () => {
    const a = await openRedisStore();
    const b = await openRedisStore({ prefix: a.prefix });
    const subscriber = new Redis(REDIS_URL, { protocol: 2 });
    try {
      listenForSaturations(subscriber, b.names.learnedChannel, (saturation) => b.store.heardSaturation(saturation));
      await subscriber.subscribe(b.names.learnedChannel);
      const onB = b.store.learnedCounter('openai', 'gpt-4o');
      const before = b.store.tryAdmit([], Math.floor(Date.now() / 1000), { handle: onB, nowMs: Date.now() });
      assert.ok(!(before instanceof Promise), 'answered at once, without a round trip');
      assert.equal((before as CounterAdmission).status, 'admitted');
      a.store.learn(a.store.learnedCounter('openai', 'gpt-4o'), lesson({ requests: { limit: 10, remaining: 0, resetIn: 30_000 } }));
      await waitUntil(() => (b.store.tryAdmit([], 0, { handle: onB, nowMs: Date.now() }) as CounterAdmission).status === 'refused');
      const refused = b.store.tryAdmit([], 0, { handle: onB, nowMs: Date.now() }) as CounterAdmission;
      assert.equal(refused.learned?.cause, 'requests');
      assert.ok(Math.abs(refused.learned!.untilMs - (Date.now() + 30_000)) < 1500);
      // A later answer that ends the saturation is heard too.
      a.store.learn(a.store.learnedCounter('openai', 'gpt-4o'), lesson({ requests: { limit: 10, remaining: 10, resetIn: 30_000 } }));
      await waitUntil(() => (b.store.tryAdmit([], 0, { handle: onB, nowMs: Date.now() }) as CounterAdmission).status === 'admitted');
    } finally {
      subscriber.disconnect();
      await b.close();
      await a.close();
    }
  });

  it('keeps one small key per target, under the hash tag, expiring at its last reset, listed in the index', async () => {
    const gateway = await openRedisStore();
    try {
      const target = gateway.store.learnedCounter('anthropic', 'claude-x');
      gateway.store.learn(target, lesson({ requests: { limit: 50, remaining: 0, resetIn: 90_000 }, tokens: { remaining: 10, resetIn: 120_000 } }));
      await learnedRecord(gateway.store, target);
      const key = gateway.names.learnedKey('anthropic', 'claude-x');
      assert.ok(key.startsWith(`{${gateway.prefix}}`));
      assert.equal(Number(await gateway.client.strlen(key)), 96);
      const [seconds, micros] = await gateway.client.time();
      const nowMs = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
      const expiry = Number(await gateway.client.pexpiretime(key));
      assert.ok(Math.abs(expiry - (nowMs + 120_000)) < 1000, `expires at the tokens' reset: ${expiry - nowMs} ms`);
      assert.deepEqual(await gateway.client.zrange(gateway.names.learnedIndex, '0', '-1'), [key]);
      // A refusal of a counter reset leaves it.
      await gateway.store.resetAll();
      assert.equal(Number(await gateway.client.exists(key)), 1);
    } finally {
      await gateway.close();
    }
  });

  it('writes the first answer of a burst at once, the rest at most once a second, and a saturating one at once', async () => {
    const gateway = await openRedisStore();
    try {
      const target = gateway.store.learnedCounter('p', 'm');
      gateway.store.learn(target, lesson({ requests: { remaining: 10, resetIn: 60_000 } }));
      assert.equal((await learnedRecord(gateway.store, target))?.requests?.remaining, 10);
      gateway.store.learn(target, lesson({ requests: { remaining: 9, resetIn: 60_000 } }));
      gateway.store.learn(target, lesson({ requests: { remaining: 8, resetIn: 60_000 } }));
      assert.equal((await learnedRecord(gateway.store, target))?.requests?.remaining, 10, 'held back');
      await sleep(1100);
      assert.equal((await learnedRecord(gateway.store, target))?.requests?.remaining, 8, 'one write carried both');
      gateway.store.learn(target, lesson({ requests: { remaining: 7, resetIn: 60_000 } }));
      gateway.store.learn(target, lesson({ requests: { remaining: 0, resetIn: 60_000 } }));
      assert.equal((await admitLearned(gateway.store, [], target)).learned?.cause, 'requests', 'the saturating answer went out at once');
    } finally {
      await gateway.close();
    }
  });

  it('reads the learned key in the admission script: one command per admission', async () => {
    const redis = await ownRedis();
    const gateway = await openRedisStore({ url: redis.url });
    const observer = new Redis(redis.url, { protocol: 2 });
    const monitor = await observer.monitor();
    try {
      const target = gateway.store.learnedCounter('p', 'm');
      gateway.store.learn(target, lesson({ cooldownIn: 60_000, throttled: true }));
      const rules = [counterRule(gateway.store, '/a', LONG, { maxRequests: 9 })];
      const sent: string[] = [];
      const fromScripts: string[] = [];
      monitor.on('monitor', (_time: string, args: string[], source: string) => (source.startsWith('lua') ? fromScripts : sent).push(String(args[0]).toLowerCase()));
      // The first call loads the script; the monitor reports it a moment later.
      await admitLearned(gateway.store, rules, target);
      await waitUntil(() => sent.includes('eval'));
      await sleep(50);
      sent.length = 0;
      fromScripts.length = 0;
      assert.equal((await admitLearned(gateway.store, rules, target)).status, 'refused');
      await waitUntil(() => sent.length > 0 && fromScripts.includes('get'));
      assert.deepEqual(sent, ['evalsha'], 'one command from the gateway');
      assert.ok(fromScripts.includes('get'), 'the learned key is read inside the script');
    } finally {
      monitor.disconnect();
      observer.disconnect();
      await gateway.close();
      await redis.stop();
    }
  });
});

describe('RedisCounterStore: when Redis stops', () => {
  let redis: OwnRedis;
  before(async () => {
    redis = await ownRedis();
  });
  after(() => redis.stop());

  const open = async (onError: 'local' | 'allow' | 'deny'): Promise<TestRedisStore> => {
    await redis.start(); // after a test that left it stopped
    return openRedisStore({ url: redis.url, onError, timeoutMs: 200 });
  };

  it('on_error local: counts in memory while Redis is down, then goes back to the shared counters', async () => {
    const gateway = await open('local');
    try {
      const rules = [counterRule(gateway.store, '/a', LONG, { maxRequests: 3 })];
      assert.equal((await admit(gateway.store, rules)).status, 'admitted');
      await redis.stop();
      const statuses: string[] = [];
      for (let i = 0; i < 4; i++) statuses.push((await admit(gateway.store, rules)).status);
      assert.deepEqual(statuses, ['admitted', 'admitted', 'admitted', 'refused'], 'a fresh local count with the same cap');
      assert.equal(gateway.store.available, false);
      await assert.rejects(gateway.store.reset(ruleKey('/a', LONG)), { name: 'CounterStoreUnavailableError' });
      await redis.start();
      await waitUntil(() => gateway.store.available);
      // This Redis kept nothing (no persistence): the shared count starts again.
      const admission = await admit(gateway.store, rules);
      assert.equal(admission.status, 'admitted');
      assert.equal(admission.rows[0]!.requestsCurrent, 1);
      assert.equal(Number(await gateway.client.exists(gateway.names.counterKey(rules[0]!.counter.key))), 1);
    } finally {
      await gateway.close();
    }
  });

  for (const onError of ['allow', 'deny'] as const) {
    it(`on_error ${onError}: answers 'unavailable' with that fallback while Redis is down, and counts nothing`, async () => {
      const gateway = await open(onError);
      try {
        const rules = [counterRule(gateway.store, '/a', LONG, { maxRequests: 1 })];
        await redis.stop();
        for (let i = 0; i < 3; i++) assert.deepEqual(await gateway.store.tryAdmit(rules, 0), { status: 'unavailable', fallback: onError, reason: 'the rate-limit counters (Redis) cannot be reached; try again shortly' });
        await gateway.store.addTokens(rules, 5, 0);
        await redis.start();
        await waitUntil(() => gateway.store.available);
        const admission = await admit(gateway.store, rules);
        assert.equal(admission.status, 'admitted');
        assert.deepEqual([admission.rows[0]!.requestsCurrent, admission.rows[0]!.tokensCurrent], [1, 0]);
      } finally {
        await gateway.close();
      }
    });
  }

  it('on_error local: counts children in memory, at most max_children, the rest on one overflow counter', async () => {
    await redis.start();
    const gateway = await openRedisStore({ url: redis.url, onError: 'local', timeoutMs: 200, maxChildren: 2 });
    try {
      const own = ownKey('/team', LONG);
      const child = (name: string) => childRule(gateway.store, own, LONG, name, { maxRequests: 2 });
      await redis.stop();
      const [alice, bob, carol, dave] = ['alice', 'bob', 'carol', 'dave'].map(child);
      const statuses: string[] = [];
      for (const rule of [alice, alice, alice, bob, carol, dave, dave]) statuses.push((await admit(gateway.store, [rule!])).status);
      // alice and bob have local counters; carol and dave share the overflow one (cap 2).
      assert.deepEqual(statuses, ['admitted', 'admitted', 'refused', 'admitted', 'admitted', 'admitted', 'refused']);
      assert.deepEqual((await gateway.store.readChildren(own, LONG, Math.floor(Date.now() / 1000))).map((c) => c.child), ['alice', 'bob']);
    } finally {
      await redis.start();
      await gateway.close();
    }
  });

  it('answers within the timeout while Redis hangs, and recovers when it resumes', async () => {
    const gateway = await open('local');
    try {
      const rules = [counterRule(gateway.store, '/a', LONG, { maxRequests: 9 })];
      assert.equal((await admit(gateway.store, rules)).status, 'admitted');
      redis.pause();
      try {
        // Answered by the local fallback while Redis still answers nothing.
        const [first, second, reading] = await Promise.all([admit(gateway.store, rules), admit(gateway.store, rules), read(gateway.store, rules)]);
        assert.deepEqual([first.status, second.status], ['admitted', 'admitted']);
        assert.equal(reading.rows[0]!.requestsCurrent, 2, 'the local count');
      } finally {
        redis.resume();
      }
      await waitUntil(() => gateway.store.available);
      // The shared count has the admission from before the hang (and maybe those it ran late).
      assert.ok((await read(gateway.store, rules)).rows[0]!.requestsCurrent >= 1);
    } finally {
      await gateway.close();
    }
  });
});

async function waitUntil(condition: () => boolean): Promise<void> {
  while (!condition()) await sleep(20);
}
