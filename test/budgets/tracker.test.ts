import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BudgetTracker } from '../../src/budgets/tracker.ts';
import type { BudgetDefinition } from '../../src/budgets/types.ts';
import { MemoryStorage, MemoryStore } from '../../src/storage/memory.ts';
import type { UsageRecord } from '../../src/storage/usage/types.ts';
import { UsageRecorder } from '../../src/usage/recorder.ts';

const T0 = Date.parse('2025-03-12T10:00:00.000Z'); // a Wednesday

function budget(userPath: string, period: string, maxUsd: number, source: 'manual' | 'config' = 'manual'): BudgetDefinition {
  return { userPath, period, maxUsd, source, createdAt: new Date(T0 - 3_600_000), updatedAt: new Date(T0 - 60_000) };
}

function spend(userPath: string, costUsd: number, timestampMs: number): UsageRecord {
  return {
    timestampMs, userPath, provider: 'p', model: 'm', endpoint: 'chat', promptTokens: 1, completionTokens: 1, totalTokens: 2,
    cachedPromptTokens: 0, costUsd, cached: false, status: 200, latencyMs: 1, apiKeyId: null, requestId: null, estimated: false,
  };
}

/**
 * A tracker wired as the gateway wires it: this replica's usage goes through a recorder into a
 * store; `other` writes to the same store as another replica would.
 */
function setup(options: { flushIntervalMs?: number } = {}) {
  const clock = { now: T0 };
  const store = new MemoryStore();
  const storage = new MemoryStorage(store);
  let tracker: BudgetTracker | undefined;
  const recorder = new UsageRecorder(storage.usage, { flushIntervalMs: options.flushIntervalMs ?? 3_600_000, onRecord: (r) => tracker?.observe(r.userPath, r.timestampMs, r.costUsd) });
  let failing = false;
  let listingGate: Promise<void> | undefined;
  tracker = new BudgetTracker({
    now: () => clock.now,
    source: {
      settle: async () => {
        await recorder.flush();
        return !failing && !recorder.failing;
      },
      sumCost: (queries) => storage.usage.sumCost(queries),
      budgets: async () => {
        const rows = await storage.budgets.list();
        await listingGate;
        return rows;
      },
    },
  });
  return {
    clock,
    tracker,
    /** Stores budgets and gives them to the tracker, as the budget manager does. */
    define: async (...definitions: BudgetDefinition[]) => {
      for (const definition of definitions) await storage.budgets.upsert(definition);
      tracker!.replaceAll(await storage.budgets.list());
    },
    storage,
    /** This replica records a request's cost. */
    local: (userPath: string, costUsd: number, at = clock.now) => recorder.record(spend(userPath, costUsd, at)),
    /** Another replica's record, already in storage. */
    other: (userPath: string, costUsd: number, at = clock.now) => void store.usage.insert([spend(userPath, costUsd, at)]),
    stored: async () => (await storage.usage.summarize({ userPathPrefix: '/', from: new Date(0), to: new Date(8.64e15) })).reduce((n, row) => n + row.requests, 0),
    /** The next budget listings are read, then held until the returned function is called. */
    holdListings: (): (() => void) => {
      let release = (): void => {};
      listingGate = new Promise((resolve) => {
        release = resolve;
      });
      return () => {
        listingGate = undefined;
        release();
      };
    },
    setFailing: (value: boolean) => {
      failing = value;
    },
    close: async () => {
      await tracker!.close();
      await recorder.close();
    },
  };
}

const spentOf = (tracker: BudgetTracker, userPath: string): number[] => tracker.statusFor(userPath).map((s) => s.spent_usd);

describe('BudgetTracker', () => {
  it('costs nothing without budgets: no check, no local bookkeeping, no refresh', async () => {
    const s = setup();
    s.local('/team', 5);
    assert.equal(s.tracker.check('/team'), undefined);
    assert.deepEqual(s.tracker.status(), []);
    await s.tracker.refresh();
    assert.equal(await s.stored(), 0, 'no refresh ran (it would have flushed the recorder)');
    await s.close();
  });

  it('refuses once local spend reaches the cap, on the path and below it, with the wait until the period ends', async () => {
    const s = setup();
    await s.define(budget('/Team', 'day', 1));
    await s.tracker.refresh();
    s.local('/team/a', 0.6);
    assert.equal(s.tracker.check('/team/a'), undefined);
    s.local('/TEAM/b', 0.4); // 0.6 + 0.4 is 0.9999999999999999 as binary floats: rounded, it is the cap
    s.clock.now = T0 + 1500;
    const breach = s.tracker.check('/team/a/x');
    assert.deepEqual(breach, {
      userPath: '/Team',
      period: 'day',
      message: 'budget exceeded for /Team: day budget of $1.00 reached',
      retryAfterMs: Date.parse('2025-03-13T00:00:00Z') - (T0 + 1500),
    });
    assert.deepEqual(s.tracker.check('/team'), breach);
    assert.equal(s.tracker.check('/teams'), undefined);
    assert.equal(s.tracker.check('/'), undefined);
    await s.close();
  });

  it('learns other replicas\' spend at a refresh, and counts its own records once after they are stored', async () => {
    const s = setup();
    await s.define(budget('/team', 'month', 10));
    s.other('/team/x', 2);
    await s.tracker.refresh();
    assert.deepEqual(spentOf(s.tracker, '/team'), [2]);
    s.local('/team', 1.25);
    s.other('/team/y', 3);
    assert.deepEqual(spentOf(s.tracker, '/team'), [3.25], 'own spend at once, the other replica\'s not yet');
    await s.tracker.refresh();
    assert.equal(await s.stored(), 3, 'the refresh stored this replica\'s record first');
    assert.deepEqual(spentOf(s.tracker, '/team'), [6.25]);
    await s.tracker.refresh();
    assert.deepEqual(spentOf(s.tracker, '/team'), [6.25]);
    await s.close();
  });

  it('keeps the last numbers and its local spend while storage cannot be written', async () => {
    const s = setup();
    await s.define(budget('/team', 'day', 10));
    s.other('/team', 1);
    await s.tracker.refresh();
    s.setFailing(true);
    s.local('/team', 2);
    s.other('/team', 4);
    await s.tracker.refresh();
    assert.deepEqual(spentOf(s.tracker, '/team'), [3]);
    s.setFailing(false);
    await s.tracker.refresh();
    assert.deepEqual(spentOf(s.tracker, '/team'), [7]);
    await s.close();
  });

  it('starts over when the period rolls over, reading the new period from storage', async () => {
    const s = setup();
    await s.define(budget('/team', 'day', 1));
    await s.tracker.refresh();
    s.local('/team', 1);
    assert.ok(s.tracker.check('/team'));
    const midnight = Date.parse('2025-03-13T00:00:00Z');
    s.other('/team', 0.25, midnight + 10); // another replica, already in the new day
    s.clock.now = midnight + 1000;
    assert.equal(s.tracker.check('/team'), undefined);
    // A request that started before midnight belongs to the day before.
    s.local('/team', 5, midnight - 1);
    s.local('/team', 0.5);
    assert.deepEqual(spentOf(s.tracker, '/team'), [0.5]);
    await s.tracker.refresh();
    const [status] = s.tracker.statusFor('/team');
    assert.equal(status?.spent_usd, 0.75);
    assert.equal(status?.period_start, '2025-03-13T00:00:00Z');
    assert.equal(status?.period_end, '2025-03-14T00:00:00Z');
    await s.close();
  });

  it('reports the breached budget that frees up last', async () => {
    const s = setup();
    await s.define(budget('/', 'day', 1), budget('/team', 'month', 1), budget('/team/a', '3600s', 1));
    await s.tracker.refresh();
    s.local('/team/a', 1);
    assert.equal(s.tracker.check('/team/a')?.message, 'budget exceeded for /team: month budget of $1.00 reached');
    assert.equal(s.tracker.check('/team/a')?.retryAfterMs, Date.parse('2025-04-01T00:00:00Z') - T0);
    assert.equal(s.tracker.check('/other')?.message, 'budget exceeded for /: day budget of $1.00 reached');
    await s.close();
  });

  it('a budget added later starts from the spend already stored; a cap change keeps the spend; delete forgets it', async () => {
    const s = setup();
    await s.define(budget('/a', 'day', 5));
    s.other('/team/x', 0.3);
    s.local('/team/x', 0.2);
    await s.storage.budgets.upsert(budget('/team', 'week', 0.5));
    s.tracker.upsert(budget('/team', 'week', 0.5));
    await s.tracker.refresh();
    assert.deepEqual(spentOf(s.tracker, '/team'), [0.5]);
    assert.ok(s.tracker.check('/team/x'));
    await s.storage.budgets.upsert(budget('/TEAM', 'week', 0.75));
    s.tracker.upsert(budget('/TEAM', 'week', 0.75));
    assert.deepEqual(spentOf(s.tracker, '/team'), [0.5]);
    assert.equal(s.tracker.check('/team/x'), undefined);
    await s.storage.budgets.delete({ userPath: '/team', period: 'week' });
    assert.equal(s.tracker.delete({ userPath: '/team', period: 'week' }), true);
    assert.equal(s.tracker.delete({ userPath: '/team', period: 'week' }), false);
    assert.deepEqual(s.tracker.statusFor('/team'), []);
    await s.close();
  });

  it('takes budgets written through another replica at a refresh, keeping spend; a local change meanwhile wins', async () => {
    const s = setup();
    await s.define(budget('/a', 'day', 5));
    s.local('/a', 1);
    await s.storage.budgets.upsert(budget('/b', 'day', 0.5)); // another replica's admin API
    await s.storage.budgets.upsert(budget('/A', 'day', 1)); // ... and its cap change
    s.other('/b', 0.5);
    assert.equal(s.tracker.check('/b'), undefined);
    await s.tracker.refresh();
    assert.equal(s.tracker.check('/b')?.message, 'budget exceeded for /b: day budget of $0.50 reached');
    assert.equal(s.tracker.check('/a')?.message, 'budget exceeded for /A: day budget of $1.00 reached');
    // A delete and a cap change made on this replica while a refresh holds an older listing survive that refresh.
    const release = s.holdListings();
    const refreshing = s.tracker.refresh();
    await new Promise((resolve) => setImmediate(resolve)); // the refresh has read the listing
    await s.storage.budgets.delete({ userPath: '/b', period: 'day' });
    s.tracker.delete({ userPath: '/b', period: 'day' });
    await s.storage.budgets.upsert(budget('/a', 'day', 3));
    s.tracker.upsert(budget('/a', 'day', 3));
    release();
    await refreshing;
    assert.deepEqual(s.tracker.status().map((r) => [r.user_path, r.max_usd]), [['/a', 3]]);
    await s.close();
  });

  it('shows whole status records, sorted by path then period length, with the month\'s own length', async () => {
    const s = setup();
    await s.define(budget('/team', 'month', 200, 'config'), budget('/team', 'day', 10), budget('/', 'week', 0.01), budget('/team', '3600s', 0.5));
    await s.tracker.refresh();
    s.local('/team/a', 0.25);
    s.local('/team/b', 0.000000001);
    assert.deepEqual(s.tracker.status(), [
      {
        user_path: '/', source: 'manual', period_label: 'week', period_seconds: 604800, max_usd: 0.01, spent_usd: 0.250000001, remaining_usd: 0,
        period_start: '2025-03-10T00:00:00Z', period_end: '2025-03-17T00:00:00Z', created_at: '2025-03-12T09:00:00Z', updated_at: '2025-03-12T09:59:00Z',
      },
      {
        user_path: '/team', source: 'manual', period_label: '3600s', period_seconds: 3600, max_usd: 0.5, spent_usd: 0.250000001, remaining_usd: 0.249999999,
        period_start: '2025-03-12T10:00:00Z', period_end: '2025-03-12T11:00:00Z', created_at: '2025-03-12T09:00:00Z', updated_at: '2025-03-12T09:59:00Z',
      },
      {
        user_path: '/team', source: 'manual', period_label: 'day', period_seconds: 86400, max_usd: 10, spent_usd: 0.250000001, remaining_usd: 9.749999999,
        period_start: '2025-03-12T00:00:00Z', period_end: '2025-03-13T00:00:00Z', created_at: '2025-03-12T09:00:00Z', updated_at: '2025-03-12T09:59:00Z',
      },
      {
        user_path: '/team', source: 'config', period_label: 'month', period_seconds: 31 * 86400, max_usd: 200, spent_usd: 0.250000001, remaining_usd: 199.749999999,
        period_start: '2025-03-01T00:00:00Z', period_end: '2025-04-01T00:00:00Z', created_at: '2025-03-12T09:00:00Z', updated_at: '2025-03-12T09:59:00Z',
      },
    ]);
    assert.deepEqual(s.tracker.statusFor('/team/a').map((r) => r.user_path), ['/', '/team', '/team', '/team']);
    assert.deepEqual(s.tracker.statusFor('/other').map((r) => r.period_label), ['week']);
    await s.close();
  });
});
