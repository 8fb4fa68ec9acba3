/**
 * The counter store contract: the same vectors, with the same expected results, for every store
 * (memory, Redis). The stores run on their own clocks (the engine's for memory, the Redis
 * server's for Redis), so the vectors use the longest window a rule may have (366 days) and read
 * every expectation relative to the time the store says it used.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AdmitOutcome, CounterAdmission, CounterReading, CounterRow, CounterRule, CounterStore, LearnedDimension, LearnedHandle, LearnedRecord, LearnedUpdate, MaybePromise, SlotLease } from '../../src/ratelimit/index.ts';

export interface StoreUnderTest {
  store: CounterStore;
  close(): Promise<void>;
}

/** The longest window: its boundaries are 366 days apart, so no vector crosses one. */
export const LONG = 31_622_400;
const MAX_SAFE = Number.MAX_SAFE_INTEGER;

export function ruleKey(subject: string, periodSeconds: number, scope = 'user_path'): string {
  return [scope, subject.toLowerCase(), periodSeconds].join('\u0000');
}

export function counterRule(store: CounterStore, subject: string, periodSeconds: number, caps: { maxRequests?: number; maxTokens?: number }, scope = 'user_path'): CounterRule {
  return { counter: store.counter(ruleKey(subject, periodSeconds, scope)), periodSeconds, maxRequests: caps.maxRequests ?? 0, maxTokens: caps.maxTokens ?? 0 };
}

const wallSeconds = (): number => Math.floor(Date.now() / 1000);

/** The key of a per-child rule's own counter (see counterKeyOf). */
export function ownKey(subject: string, periodSeconds: number): string {
  return ruleKey(subject, periodSeconds) + '\u0000';
}

/** The counter rule of one child of the per-child rule `own`. */
export function childRule(store: CounterStore, own: string, periodSeconds: number, child: string, caps: { maxRequests?: number; maxTokens?: number }): CounterRule {
  const counter = store.childCounter(own, periodSeconds, child, wallSeconds(), undefined);
  assert.ok(!('full' in counter), 'a store with room counts a new child');
  return { counter, periodSeconds, maxRequests: caps.maxRequests ?? 0, maxTokens: caps.maxTokens ?? 0 };
}

export async function admit(store: CounterStore, rules: readonly CounterRule[]): Promise<CounterAdmission> {
  const outcome: AdmitOutcome = await store.tryAdmit(rules, wallSeconds());
  assert.notEqual(outcome.status, 'unavailable');
  return outcome as CounterAdmission;
}

/** An admission that also checks `target`'s learned capacity (on the wall clock, as the stores' clocks are). */
export async function admitLearned(store: CounterStore, rules: readonly CounterRule[], target: LearnedHandle): Promise<CounterAdmission> {
  const outcome: AdmitOutcome = await store.tryAdmit(rules, wallSeconds(), { handle: target, nowMs: Date.now() });
  assert.notEqual(outcome.status, 'unavailable');
  return outcome as CounterAdmission;
}

/** What one answer taught, at the wall clock's now: `in` fields are delays from now. */
export function lesson(fields: {
  requests?: { limit?: number; remaining: number; resetIn?: number };
  tokens?: { limit?: number; remaining: number; resetIn?: number };
  cooldownIn?: number;
  throttled?: boolean;
  reserve?: number;
}): LearnedUpdate {
  const atMs = Date.now();
  const dimension = (d: { limit?: number; remaining: number; resetIn?: number } | undefined): LearnedDimension | undefined =>
    d && { limit: d.limit, remaining: d.remaining, resetAtMs: d.resetIn === undefined ? undefined : atMs + d.resetIn };
  return {
    requests: dimension(fields.requests),
    tokens: dimension(fields.tokens),
    cooldownUntilMs: fields.cooldownIn === undefined ? undefined : atMs + fields.cooldownIn,
    throttled: fields.throttled ?? false,
    reserve: fields.reserve ?? 0,
    atMs,
  };
}

/** The record a store holds for `target`, read now. */
export async function learnedRecord(store: CounterStore, target: LearnedHandle): Promise<LearnedRecord | undefined> {
  const reading = await store.readLearned([target], Date.now());
  assert.ok(reading.records.length <= 1);
  return reading.records[0]?.record;
}

/** `actual` is `expected` ms from now, give or take the clocks of the test, the store and the round trips. */
function near(actual: number | undefined, expectedFromNow: number, what: string): void {
  assert.ok(actual !== undefined, `${what} is set`);
  const expected = Date.now() + expectedFromNow;
  assert.ok(Math.abs(actual - expected) < 1500, `${what}: ${actual} is about ${expected}`);
}

export async function read(store: CounterStore, rules: readonly CounterRule[]): Promise<CounterReading> {
  return store.read(rules, wallSeconds());
}

/** A windowed row in the window containing `now` with these counts (no previous window in these vectors). */
function windowed(now: number, period: number, requests: number, tokens = 0): CounterRow {
  return { windowStart: now - (now % period), requestsPrevious: 0, requestsCurrent: requests, tokensPrevious: 0, tokensCurrent: tokens, requestsUsed: requests, tokensUsed: tokens, tokensReserved: 0, inFlight: 0 };
}

function slots(inFlight: number): CounterRow {
  return { windowStart: 0, requestsPrevious: 0, requestsCurrent: 0, tokensPrevious: 0, tokensCurrent: 0, requestsUsed: 0, tokensUsed: 0, tokensReserved: 0, inFlight };
}

function leaseOf(admission: CounterAdmission): SlotLease {
  assert.equal(admission.status, 'admitted');
  assert.ok(admission.lease !== undefined, 'an admission with concurrency rules holds a lease');
  return admission.lease;
}

export function counterStoreContract(name: string, open: () => Promise<StoreUnderTest>): void {
  describe(`${name}: the counter store contract`, () => {
    let subject: StoreUnderTest;
    let store: CounterStore;
    beforeEach(async () => {
      subject = await open();
      store = subject.store;
    });
    afterEach(() => subject.close());

    it('reserves tokens on the rules with a token cap and settles them to what was used, refusing what does not fit', async () => {
      const tokens = counterRule(store, '/res', LONG, { maxTokens: 1000 });
      const requests = counterRule(store, '/res-requests', LONG, { maxRequests: 100 });
      const reserving = async (): Promise<CounterAdmission> => (await store.tryAdmit([tokens, requests], wallSeconds(), undefined, 300)) as CounterAdmission;
      const leases: SlotLease[] = [];
      for (let i = 1; i <= 3; i++) {
        const admission = await reserving();
        assert.equal(admission.status, 'admitted');
        assert.equal(admission.rows[0]!.tokensReserved, 300 * i);
        assert.equal(admission.rows[1]!.tokensReserved, 0, 'a rule without a token cap reserves nothing');
        leases.push(leaseOf(admission));
      }
      const refused = await reserving();
      assert.equal(refused.status, 'refused', '900 reserved + 300 > 1000');
      assert.equal(refused.lease, undefined);
      assert.deepEqual([refused.rows[0]!.tokensReserved, refused.rows[1]!.requestsCurrent], [900, 3], 'a refusal reserves and counts nothing');
      // Settled below the estimate: the window gets what was used, the reservation goes.
      await store.settle([tokens], leases[0]!, 300, 100, wallSeconds());
      let now = await read(store, [tokens]);
      assert.deepEqual([now.rows[0]!.tokensCurrent, now.rows[0]!.tokensReserved], [100, 600]);
      // Above the estimate: all of it counts.
      await store.settle([tokens], leases[1]!, 300, 500, wallSeconds());
      now = await read(store, [tokens]);
      assert.deepEqual([now.rows[0]!.tokensCurrent, now.rows[0]!.tokensReserved], [600, 300]);
      assert.equal((await reserving()).status, 'refused', '600 used + 300 reserved + 300 > 1000');
      await store.settle([tokens], leases[2]!, 300, 0, wallSeconds());
      const last = await reserving();
      assert.equal(last.status, 'admitted', '600 + 300 fits');
      assert.equal(last.rows[0]!.tokensReserved, 300);
    });

    it('admissions and settlements asked at the same moment see each other\'s reservations, in order', async () => {
      const tokens = counterRule(store, '/res-burst', LONG, { maxTokens: 1000 });
      const reserving = (): MaybePromise<CounterAdmission> => store.tryAdmit([tokens], wallSeconds(), undefined, 300) as MaybePromise<CounterAdmission>;
      // Asked in one turn (one batch on Redis): each admission sees those before it.
      const burst = await Promise.all([reserving(), reserving(), reserving(), reserving()]);
      assert.deepEqual(burst.map((a) => a.status), ['admitted', 'admitted', 'admitted', 'refused']);
      assert.deepEqual(burst.map((a) => a.rows[0]!.tokensReserved), [300, 600, 900, 900]);
      // An admission, a settlement, two admissions, in one turn: the first is refused, the second
      // takes the room the settlement made.
      const refused = reserving();
      const settled = store.settle([tokens], leaseOf(burst[0]!), 300, 0, wallSeconds());
      const after = await Promise.all([refused, reserving(), reserving()]);
      await settled;
      assert.deepEqual(after.map((a) => a.status), ['refused', 'admitted', 'refused']);
      assert.deepEqual(after.map((a) => a.rows[0]!.tokensReserved), [900, 900, 900]);
      // Settled twice more at once, then read in the same turn: the read sees both gone.
      const both = [store.settle([tokens], leaseOf(burst[1]!), 300, 0, wallSeconds()), store.settle([tokens], leaseOf(after[1]!), 300, 0, wallSeconds())];
      const now = await read(store, [tokens]);
      await Promise.all(both);
      assert.equal(now.rows[0]!.tokensReserved, 300);
    });

    it('a reset drops the reservations held on the rule; settling one later still counts its tokens', async () => {
      const tokens = counterRule(store, '/res-reset', LONG, { maxTokens: 1000 });
      const held = (await store.tryAdmit([tokens], wallSeconds(), undefined, 400)) as CounterAdmission;
      assert.equal(held.status, 'admitted');
      await store.reset(tokens.counter.key);
      assert.equal((await read(store, [tokens])).rows[0]!.tokensReserved, 0);
      await store.settle([tokens], leaseOf(held), 400, 50, wallSeconds());
      const after = await read(store, [tokens]);
      assert.deepEqual([after.rows[0]!.tokensCurrent, after.rows[0]!.tokensReserved], [50, 0]);
    });

    it('counts a request in every window and refuses at the cap without counting', async () => {
      const team = counterRule(store, '/team', LONG, { maxRequests: 3 });
      const root = counterRule(store, '/', LONG, { maxRequests: 100 });
      for (let i = 1; i <= 3; i++) {
        const admission = await admit(store, [root, team]);
        assert.equal(admission.status, 'admitted');
        assert.equal(admission.lease, undefined, 'no concurrency rule, no lease');
        assert.deepEqual(admission.rows, [windowed(admission.nowSeconds, LONG, i), windowed(admission.nowSeconds, LONG, i)]);
      }
      const refusal = await admit(store, [root, team]);
      assert.equal(refusal.status, 'refused');
      assert.equal(refusal.lease, undefined);
      assert.deepEqual(refusal.rows, [windowed(refusal.nowSeconds, LONG, 3), windowed(refusal.nowSeconds, LONG, 3)]);
      const after = await read(store, [root, team]);
      assert.deepEqual(after.rows, [windowed(after.nowSeconds, LONG, 3), windowed(after.nowSeconds, LONG, 3)]);
    });

    it('checks every rule before counting any, token caps included', async () => {
      const requests = counterRule(store, '/a', LONG, { maxRequests: 10 });
      const tokens = counterRule(store, 'p', LONG, { maxTokens: 100 }, 'provider');
      const slot = counterRule(store, 'm', 0, { maxRequests: 5 }, 'model');
      await store.addTokens([tokens], 100, wallSeconds());
      const refusal = await admit(store, [requests, tokens, slot]);
      assert.equal(refusal.status, 'refused');
      assert.deepEqual(refusal.rows, [windowed(refusal.nowSeconds, LONG, 0), windowed(refusal.nowSeconds, LONG, 0, 100), slots(0)]);
      const admitted = await admit(store, [requests, slot]);
      assert.equal(admitted.status, 'admitted');
      assert.deepEqual(admitted.rows, [windowed(admitted.nowSeconds, LONG, 1), slots(1)]);
    });

    it('takes a slot per admission up to the cap and gives back exactly the released ones', async () => {
      const user = counterRule(store, '/a', 0, { maxRequests: 2 });
      const provider = counterRule(store, 'p', 0, { maxRequests: 5 }, 'provider');
      const first = leaseOf(await admit(store, [user, provider]));
      const second = leaseOf(await admit(store, [user, provider]));
      const full = await admit(store, [user, provider]);
      assert.equal(full.status, 'refused');
      assert.deepEqual(full.rows, [slots(2), slots(2)]);
      // A failover attempt ends: the provider slot goes back, the user-path slot stays.
      store.release([provider], first);
      assert.deepEqual((await read(store, [user, provider])).rows, [slots(2), slots(1)]);
      store.release([user], first);
      assert.deepEqual((await read(store, [user, provider])).rows, [slots(1), slots(1)]);
      const third = leaseOf(await admit(store, [user, provider]));
      store.release([user, provider], second);
      store.release([user, provider], third);
      assert.deepEqual((await read(store, [user, provider])).rows, [slots(0), slots(0)]);
    });

    it('does not give back slots taken before a reset, nor after a clear', async () => {
      const rule = counterRule(store, '/a', 0, { maxRequests: 2 });
      const old = leaseOf(await admit(store, [rule]));
      await store.reset(ruleKey('/a', 0));
      assert.deepEqual((await read(store, [rule])).rows, [slots(0)]);
      const fresh = leaseOf(await admit(store, [rule]));
      store.release([rule], old);
      assert.deepEqual((await read(store, [rule])).rows, [slots(1)], "the old lease did not free the fresh one's slot");
      await store.clear(ruleKey('/a', 0));
      const again = counterRule(store, '/a', 0, { maxRequests: 2 });
      assert.deepEqual((await read(store, [again])).rows, [slots(0)]);
      leaseOf(await admit(store, [again]));
      store.release([rule], fresh);
      assert.deepEqual((await read(store, [again])).rows, [slots(1)]);
    });

    it('adds tokens to windowed rules only, and refuses once a token cap is reached', async () => {
      const minute = counterRule(store, '/a', LONG, { maxRequests: 50, maxTokens: 100 });
      const slot = counterRule(store, '/a', 0, { maxRequests: 5 });
      await store.addTokens([minute, slot], 60, wallSeconds());
      let reading = await read(store, [minute, slot]);
      assert.deepEqual(reading.rows, [windowed(reading.nowSeconds, LONG, 0, 60), slots(0)]);
      const admitted = await admit(store, [minute]);
      assert.equal(admitted.status, 'admitted');
      assert.deepEqual(admitted.rows, [windowed(admitted.nowSeconds, LONG, 1, 60)]);
      await store.addTokens([minute], 40, wallSeconds());
      const refused = await admit(store, [minute]);
      assert.equal(refused.status, 'refused');
      assert.deepEqual(refused.rows, [windowed(refused.nowSeconds, LONG, 1, 100)]);
      reading = await read(store, [minute]);
      assert.deepEqual(reading.rows, [windowed(reading.nowSeconds, LONG, 1, 100)]);
    });

    it('reads without changing anything, unknown counters as zero', async () => {
      const rule = counterRule(store, '/never', LONG, { maxRequests: 1 });
      const slot = counterRule(store, '/never', 0, { maxRequests: 1 });
      for (let i = 0; i < 3; i++) {
        const reading = await read(store, [rule, slot]);
        assert.deepEqual(reading.rows, [windowed(reading.nowSeconds, LONG, 0), slots(0)]);
      }
      assert.equal((await admit(store, [rule, slot])).status, 'admitted');
    });

    it('resets one rule, clears a deleted one, and resets all', async () => {
      const a = counterRule(store, '/a', LONG, { maxRequests: 9 });
      const b = counterRule(store, '/b', LONG, { maxRequests: 9 });
      const c = counterRule(store, 'p', 0, { maxRequests: 9 }, 'provider');
      for (let i = 0; i < 2; i++) await admit(store, [a, b, c]);
      await store.reset(ruleKey('/a', LONG));
      let reading = await read(store, [a, b, c]);
      assert.deepEqual(reading.rows, [windowed(reading.nowSeconds, LONG, 0), windowed(reading.nowSeconds, LONG, 2), slots(2)]);
      await store.clear(ruleKey('/b', LONG));
      const b2 = counterRule(store, '/b', LONG, { maxRequests: 9 });
      reading = await read(store, [a, b2, c]);
      assert.deepEqual(reading.rows, [windowed(reading.nowSeconds, LONG, 0), windowed(reading.nowSeconds, LONG, 0), slots(2)]);
      await admit(store, [a, b2]);
      await store.resetAll();
      reading = await read(store, [a, b2, c]);
      assert.deepEqual(reading.rows, [windowed(reading.nowSeconds, LONG, 0), windowed(reading.nowSeconds, LONG, 0), slots(0)]);
    });

    it('counts exactly up to 2^53 - 1 and breaches exactly at the cap', async () => {
      const big = MAX_SAFE - 10;
      const atCap = counterRule(store, '/x', LONG, { maxTokens: big });
      const belowCap = counterRule(store, '/y', LONG, { maxTokens: big + 1 });
      await store.addTokens([atCap, belowCap], big, wallSeconds());
      const reading = await read(store, [atCap, belowCap]);
      assert.deepEqual(reading.rows, [windowed(reading.nowSeconds, LONG, 0, big), windowed(reading.nowSeconds, LONG, 0, big)]);
      assert.equal((await admit(store, [atCap])).status, 'refused');
      const admitted = await admit(store, [belowCap]);
      assert.equal(admitted.status, 'admitted');
      assert.deepEqual(admitted.rows, [windowed(admitted.nowSeconds, LONG, 1, big)]);
    });

    it('keeps the children of a per-child rule apart, lists the active ones, and resets them with the rule', async () => {
      const own = ownKey('/team', LONG);
      const team = { counter: store.counter(own), periodSeconds: LONG, maxRequests: 2, maxTokens: 0 };
      const alice = childRule(store, own, LONG, 'alice', { maxRequests: 2 });
      const bob = childRule(store, own, LONG, 'bob', { maxRequests: 2 });
      assert.equal(store.childCounter(own, LONG, 'alice', wallSeconds(), alice.counter), alice.counter, 'a child still kept answers the handle held');
      for (let i = 0; i < 2; i++) assert.equal((await admit(store, [alice])).status, 'admitted');
      assert.equal((await admit(store, [alice])).status, 'refused');
      assert.deepEqual((await admit(store, [bob, team])).rows.map((row) => row.requestsCurrent), [1, 1]);
      await store.addTokens([bob], 7, wallSeconds());
      let now = wallSeconds();
      assert.deepEqual(await store.readChildren(own, LONG, now), [
        { child: 'alice', row: windowed(now, LONG, 2) },
        { child: 'bob', row: windowed(now, LONG, 1, 7) },
      ]);
      const seen = store.findChild(own, LONG, 'alice', now);
      assert.ok(seen !== undefined && !('full' in seen));
      assert.deepEqual((await read(store, [{ ...alice, counter: seen }])).rows.map((row) => row.requestsCurrent), [2]);

      await store.reset(own);
      now = wallSeconds();
      assert.deepEqual(await store.readChildren(own, LONG, now), []);
      assert.deepEqual((await read(store, [team])).rows.map((row) => row.requestsCurrent), [0]);
      const again = childRule(store, own, LONG, 'alice', { maxRequests: 2 });
      assert.deepEqual((await admit(store, [again])).rows.map((row) => row.requestsCurrent), [1]);

      await store.clear(own);
      assert.deepEqual(await store.readChildren(own, LONG, wallSeconds()), []);
      const other = ownKey('/other', LONG);
      const carol = childRule(store, other, LONG, 'carol', { maxRequests: 2 });
      await admit(store, [carol]);
      await store.resetAll();
      assert.deepEqual(await store.readChildren(other, LONG, wallSeconds()), []);
    });

    it('lists a child holding a slot of a concurrent per-child rule', async () => {
      const own = ownKey('/team', 0);
      const alice = childRule(store, own, 0, 'alice', { maxRequests: 1 });
      const lease = leaseOf(await admit(store, [alice]));
      assert.deepEqual(await store.readChildren(own, 0, wallSeconds()), [{ child: 'alice', row: slots(1) }]);
      store.release([alice], lease);
      assert.deepEqual((await read(store, [alice])).rows, [slots(0)]);
      assert.deepEqual(await store.readChildren(own, 0, wallSeconds()), []);
    });

    it('judges learned capacity in the admission: a saturated target refuses and counts nothing', async () => {
      const rule = counterRule(store, 'p/m', LONG, { maxRequests: 9 }, 'model');
      const target = store.learnedCounter('p', 'm');
      assert.equal((await admitLearned(store, [rule], target)).status, 'admitted', 'nothing learned: capacity');
      assert.equal((await admitLearned(store, [], target)).status, 'admitted', 'without any rule too');
      store.learn(target, lesson({ requests: { limit: 100, remaining: 0, resetIn: 60_000 } }));
      const refused = await admitLearned(store, [rule], target);
      assert.equal(refused.status, 'refused');
      assert.equal(refused.learned?.cause, 'requests');
      near(refused.learned?.untilMs, 60_000, 'the reset');
      near(refused.learned?.nowMs, 0, "the store's clock");
      assert.deepEqual(refused.rows, [windowed(refused.nowSeconds, LONG, 1)], 'the refusal counted nothing');
      assert.equal((await admitLearned(store, [], target)).status, 'refused', 'without any rule too');
      assert.equal((await admit(store, [rule])).status, 'admitted', 'an admission that does not check it is not refused');
      const other = store.learnedCounter('p', 'other-model');
      assert.equal((await admitLearned(store, [rule], other)).status, 'admitted', 'another model of the provider has capacity');
    });

    it('saturates at or below the reserve, and on a refusal until its cooldown ends', async () => {
      const reserved = store.learnedCounter('p', 'reserved');
      store.learn(reserved, lesson({ tokens: { remaining: 6, resetIn: 60_000 }, reserve: 5 }));
      assert.equal((await admitLearned(store, [], reserved)).status, 'admitted', 'above the reserve');
      store.learn(reserved, lesson({ tokens: { remaining: 5, resetIn: 60_000 }, reserve: 5 }));
      const atReserve = await admitLearned(store, [], reserved);
      assert.equal(atReserve.learned?.cause, 'tokens');

      const throttled = store.learnedCounter('p', 'throttled');
      store.learn(throttled, lesson({ cooldownIn: 30_000, throttled: true }));
      const cooling = await admitLearned(store, [], throttled);
      assert.equal(cooling.status, 'refused');
      assert.equal(cooling.learned?.cause, 'cooldown');
      near(cooling.learned?.untilMs, 30_000, 'the cooldown end');
    });

    it('merges what answers teach: dimensions replaced, limits kept, cooldowns only lengthened', async () => {
      const target = store.learnedCounter('p', 'm');
      store.learn(target, lesson({ requests: { limit: 100, remaining: 40, resetIn: 20_000 }, tokens: { limit: 5000, remaining: 4000, resetIn: 30_000 } }));
      store.learn(target, lesson({ requests: { remaining: 39, resetIn: 10_000 }, cooldownIn: 60_000, throttled: true }));
      store.learn(target, lesson({ cooldownIn: 5_000, throttled: true }));
      const record = await learnedRecord(store, target);
      assert.ok(record !== undefined);
      assert.equal(record.requests?.limit, 100, 'a limit the later answer left out is kept');
      assert.equal(record.requests?.remaining, 39);
      near(record.requests?.resetAtMs, 10_000, 'the requests reset');
      assert.equal(record.tokens?.limit, 5000, 'a dimension the later answers left out is kept');
      assert.equal(record.tokens?.remaining, 4000);
      near(record.cooldownUntilMs, 60_000, 'the longer cooldown');
      near(record.throttledAtMs, 0, 'the last refusal');
      near(record.updatedAtMs, 0, 'the last write');
      assert.equal(record.cause, 'cooldown');
      near(record.saturatedUntilMs, 60_000, 'the saturation');
      near(record.expiresAtMs, 60_000, 'the expiry');
    });

    it('lets a target go once its reset has passed', async () => {
      const target = store.learnedCounter('p', 'm');
      store.learn(target, lesson({ requests: { limit: 10, remaining: 0, resetIn: 300 } }));
      assert.equal((await admitLearned(store, [], target)).status, 'refused');
      await sleep(400);
      assert.equal((await admitLearned(store, [], target)).status, 'admitted');
      const record = await learnedRecord(store, target);
      assert.equal(record?.saturatedUntilMs !== undefined && record.saturatedUntilMs <= Date.now(), true, 'the record stays, no longer saturating');
      assert.equal(record?.requests?.remaining, 0);
    });

    it('lists every learned record, reads only the targets asked for, and keeps them through a counter reset', async () => {
      const a = store.learnedCounter('p', 'a');
      const b = store.learnedCounter('q', 'b/with/slashes');
      const never = store.learnedCounter('p', 'never');
      store.learn(a, lesson({ requests: { remaining: 3, resetIn: 1000 } }));
      store.learn(b, lesson({ cooldownIn: 1000, throttled: true }));
      assert.equal(await learnedRecord(store, never), undefined);
      const all = await store.readLearned(undefined, Date.now());
      near(all.nowMs, 0, "the store's clock");
      assert.deepEqual(all.records.map((entry) => `${entry.provider} ${entry.model}`).sort(), ['p a', 'q b/with/slashes']);
      await store.resetAll();
      assert.equal((await learnedRecord(store, a))?.requests?.remaining, 3, 'a counter reset leaves what the providers said');
      assert.equal((await admitLearned(store, [], b)).status, 'refused');
    });

    it('answers each call with rows of its own', async () => {
      const rule = counterRule(store, '/a', LONG, { maxRequests: 9 });
      const first = await admit(store, [rule]);
      const second = await admit(store, [rule]);
      assert.notEqual(first.rows, second.rows);
      assert.equal(first.rows[0]!.requestsCurrent, 1, 'a later admission does not change an earlier answer');
      assert.equal(second.rows[0]!.requestsCurrent, 2);
    });
  });
}
