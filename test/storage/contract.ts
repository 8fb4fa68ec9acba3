/**
 * The storage contract: one suite that every Storage implementation must pass, so SQLite and
 * PostgreSQL cannot drift apart. Each implementation's test file supplies a harness.
 */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { BudgetDefinition } from '../../src/budgets/types.ts';
import type { RuleDefinition } from '../../src/ratelimit/types.ts';
import type { ApiKeyRecord, BatchRecord, RefusalCount, SavedCounter, Storage, StoredFile, UsageRecord } from '../../src/storage/types.ts';

/** The storage plus introspection the implementations expose for tests. */
export type InspectableStorage = Storage & {
  schemaVersion(): Promise<number>;
  appliedMigrationCount(): Promise<number>;
};

/** One empty backing store (file or database); `open` may be called repeatedly against it. */
export interface Store {
  /** A new, already migrated connection to this store. */
  open(): Promise<InspectableStorage>;
}

export interface Harness {
  /** A fresh, empty store per test. */
  freshStore(): Promise<Store>;
}

const T0 = new Date('2025-01-01T00:00:00.000Z');
const at = (seconds: number): Date => new Date(T0.getTime() + seconds * 1000);

function rule(overrides: Partial<RuleDefinition> = {}): RuleDefinition {
  return {
    scope: 'user_path',
    subject: '/team',
    periodSeconds: 60,
    maxRequests: 100,
    maxTokens: undefined,
    source: 'manual',
    createdAt: at(0),
    updatedAt: at(0),
    ...overrides,
  };
}

/** Saved windows of a counter key (NUL-separated, as the engine writes them). */
function saved(key: string, overrides: Partial<SavedCounter> = {}): SavedCounter {
  return { key, periodSeconds: 86_400, windowStart: 1_735_689_600, requestsPrevious: 3, requestsCurrent: 4, tokensPrevious: 0, tokensCurrent: 250, ...overrides };
}

const TEAM_DAY = 'user_path\u0000/team\u000086400';
const TEAM_OWN = `${TEAM_DAY}\u0000`;

/** A usage record of the contract's fixed time window; shared with the backend-specific tests. */
export function usage(overrides: Partial<UsageRecord> = {}): UsageRecord {
  return {
    timestampMs: at(10).getTime(),
    userPath: '/a',
    provider: 'openai',
    model: 'gpt-4o-mini',
    endpoint: '/v1/chat/completions',
    promptTokens: 10,
    completionTokens: 5,
    totalTokens: 15,
    cachedPromptTokens: 0,
    costUsd: 0,
    cached: false,
    status: 200,
    latencyMs: 12,
    apiKeyId: null,
    requestId: null,
    estimated: false,
    ...overrides,
  };
}

function budget(overrides: Partial<BudgetDefinition> = {}): BudgetDefinition {
  return {
    userPath: '/team',
    period: 'day',
    maxUsd: 10,
    source: 'manual',
    createdAt: at(0),
    updatedAt: at(0),
    ...overrides,
  };
}

function key(id: string, overrides: Partial<ApiKeyRecord> = {}): ApiKeyRecord {
  return {
    id,
    name: `key ${id}`,
    userPath: '/team',
    keyHash: `hash-${id}`,
    maxPriority: 'normal',
    createdAt: at(Number(id.replace(/\D/g, '') || 0)),
    ...overrides,
  };
}

function file(id: string, overrides: Partial<StoredFile> = {}): StoredFile {
  return {
    id,
    userPath: '/team/a',
    purpose: 'batch',
    filename: 'input.jsonl',
    bytes: 5,
    createdAt: at(1),
    expiresAt: at(3601),
    content: Buffer.from([0, 1, 2, 255, 10]),
    provider: null,
    providerFileId: null,
    ...overrides,
  };
}

function batch(id: string, overrides: Partial<BatchRecord> = {}): BatchRecord {
  return {
    id,
    userPath: '/team/a',
    apiKeyId: null,
    provider: 'mock',
    model: 'mock-1',
    endpoint: '/v1/chat/completions',
    inputFileId: 'file-1',
    completionWindow: '24h',
    providerBatchId: null,
    status: 'validating',
    outputFileId: null,
    errorFileId: null,
    requestCounts: { total: 2, completed: 0, failed: 0 },
    metadata: { job: 'nightly' },
    errors: null,
    times: { expires_at: 86_400 },
    createdAt: at(2),
    updatedAt: at(2),
    ...overrides,
  };
}

/** Opens a fresh store, runs `fn`, and always closes the connection. */
async function withStorage(
  harness: Harness,
  fn: (storage: InspectableStorage, store: Store) => Promise<void>,
): Promise<void> {
  const store = await harness.freshStore();
  const storage = await store.open();
  try {
    await fn(storage, store);
  } finally {
    await storage.close();
  }
}

/** A key stored before migration 7 (no max_priority), for the upgrade tests of each database. */
export const OLD_KEY = { id: 'key-old', name: 'old', userPath: '/team', keyHash: 'hash-old', createdAt: new Date('2026-01-10T08:00:00Z') } as const;

/** After migration 7 on a database holding OLD_KEY: it is at normal, and a new key keeps what it sets. */
export async function assertMaxPriorityUpgrade(upgraded: InspectableStorage): Promise<void> {
  assert.ok((await upgraded.schemaVersion()) >= 7);
  await upgraded.insertApiKey({ id: 'key-new', name: 'new', userPath: null, keyHash: 'hash-new', maxPriority: 'high', createdAt: new Date('2026-01-11T08:00:00Z') });
  assert.deepEqual((await upgraded.listApiKeys()).map((k) => [k.id, k.userPath, k.maxPriority]), [[OLD_KEY.id, OLD_KEY.userPath, 'normal'], ['key-new', null, 'high']]);
}

export function storageContract(name: string, harness: Harness): void {
  describe(`Storage contract: ${name}`, () => {
    it('migrates idempotently', async () => {
      await withStorage(harness, async (storage) => {
        const version = await storage.schemaVersion();
        const count = await storage.appliedMigrationCount();
        assert.ok(version >= 1);
        await storage.migrate();
        await storage.migrate();
        assert.equal(await storage.schemaVersion(), version);
        assert.equal(await storage.appliedMigrationCount(), count);
        // Data written before a re-run survives it.
        await storage.insertApiKey(key('k1'));
        await storage.migrate();
        assert.equal((await storage.listApiKeys()).length, 1);
      });
    });

    it('answers a ping while open', async () => {
      await withStorage(harness, async (storage) => {
        await storage.ping();
        await storage.ping();
      });
    });

    it('inserts, lists and deletes API keys', async () => {
      await withStorage(harness, async (storage) => {
        assert.deepEqual(await storage.listApiKeys(), []);
        await storage.insertApiKey(key('k2', { userPath: null, name: 'unbound' }));
        await storage.insertApiKey(key('k1'));
        const keys = await storage.listApiKeys();
        assert.deepEqual(keys, [key('k1'), key('k2', { userPath: null, name: 'unbound' })]);
        assert.ok(keys[0]?.createdAt instanceof Date);

        assert.equal(await storage.deleteApiKey('k1'), true);
        assert.equal(await storage.deleteApiKey('k1'), false);
        assert.equal(await storage.deleteApiKey('nope'), false);
        assert.deepEqual(
          (await storage.listApiKeys()).map((k) => k.id),
          ['k2'],
        );
      });
    });

    it('tells a watcher of the keys of a creation and a revocation made through another connection', async () => {
      const store = await harness.freshStore();
      const [writer, watcher] = [await store.open(), await store.open()];
      let calls = 0;
      const stop = await watcher.watchApiKeys(() => calls++);
      const told = async (what: string): Promise<void> => {
        const seen = calls;
        const deadline = Date.now() + 3000;
        while (calls === seen) {
          assert.ok(Date.now() < deadline, `the watcher was not told of ${what}`);
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
      };
      try {
        const created = told('a creation');
        await writer.insertApiKey(key('k1'));
        await created;
        const revoked = told('a revocation');
        assert.equal(await writer.deleteApiKey('k1'), true);
        await revoked;
        await stop();
        const after = calls;
        await writer.insertApiKey(key('k2'));
        await new Promise((resolve) => setTimeout(resolve, 1500));
        assert.equal(calls, after, 'stopped watching');
      } finally {
        await stop();
        await writer.close();
        await watcher.close();
      }
    });

    it('keeps each key\'s max_priority', async () => {
      await withStorage(harness, async (storage) => {
        await storage.insertApiKey(key('k1', { maxPriority: 'high' }));
        await storage.insertApiKey(key('k2', { maxPriority: 'low' }));
        await storage.insertApiKey(key('k3'));
        assert.deepEqual((await storage.listApiKeys()).map((k) => [k.id, k.maxPriority]), [['k1', 'high'], ['k2', 'low'], ['k3', 'normal']]);
      });
    });

    it('rejects a duplicate key hash', async () => {
      await withStorage(harness, async (storage) => {
        await storage.insertApiKey(key('k1', { keyHash: 'same' }));
        await assert.rejects(storage.insertApiKey(key('k2', { keyHash: 'same' })));
        assert.equal((await storage.listApiKeys()).length, 1);
      });
    });

    it('upserts rules by case-insensitive key, keeping createdAt', async () => {
      await withStorage(harness, async (storage) => {
        await storage.upsertRule(rule({ subject: '/Team' }));
        await storage.upsertRule(
          rule({ subject: '/TEAM', maxRequests: 5, maxTokens: 1000, createdAt: at(50), updatedAt: at(50) }),
        );
        const rules = await storage.listRules();
        assert.equal(rules.length, 1);
        assert.deepEqual(rules[0], {
          ...rule(),
          subject: '/TEAM', // spelling of the latest write
          maxRequests: 5,
          maxTokens: 1000,
          createdAt: at(0),
          updatedAt: at(50),
        });
        // Same subject, other period or scope: distinct rules.
        await storage.upsertRule(rule({ periodSeconds: 3600 }));
        await storage.upsertRule(rule({ scope: 'model', subject: 'openai/gpt-4o', periodSeconds: 0, maxRequests: 2 }));
        await storage.upsertRule(rule({ scope: 'provider', subject: 'openai', maxRequests: undefined, maxTokens: 9_000_000_000 }));
        const listed = await storage.listRules();
        assert.deepEqual(
          listed.map((r) => [r.scope, r.subject, r.periodSeconds]),
          [
            ['model', 'openai/gpt-4o', 0],
            ['provider', 'openai', 60],
            ['user_path', '/TEAM', 60],
            ['user_path', '/team', 3600],
          ],
        );
        // Caps beyond 32 bits survive as numbers.
        assert.equal(listed[1]?.maxTokens, 9_000_000_000);
        assert.equal(listed[1]?.maxRequests, undefined);
      });
    });

    it('stores whether a rule is per-child; changing it updates the rule', async () => {
      await withStorage(harness, async (storage) => {
        await storage.upsertRule(rule({ perChild: true }));
        assert.deepEqual(await storage.listRules(), [rule({ perChild: true })]);
        await storage.upsertRule(rule({ updatedAt: at(5) }));
        assert.deepEqual(await storage.listRules(), [rule({ updatedAt: at(5) })]);
        await storage.replaceConfigRules([rule({ subject: '/seeded', source: 'config', perChild: true })]);
        await storage.replaceConfigRules([rule({ subject: '/seeded', source: 'config', createdAt: at(9), updatedAt: at(9) })]);
        const seeded = (await storage.listRules()).find((r) => r.subject === '/seeded');
        assert.deepEqual(seeded, rule({ subject: '/seeded', source: 'config', updatedAt: at(9) }), 'a per_child change is a change: updatedAt moves');
      });
    });

    it('writes, replaces and removes saved counters', async () => {
      await withStorage(harness, async (storage) => {
        assert.deepEqual(await storage.listCounters(), []);
        const big = Number.MAX_SAFE_INTEGER;
        await storage.writeCounters([
          saved(TEAM_DAY),
          saved(TEAM_OWN, { windowStart: 1_735_603_200 }),
          saved(`${TEAM_OWN}alice`, { requestsCurrent: big, tokensPrevious: big }),
          saved(`${TEAM_OWN}bob`),
          saved('provider\u0000open:ai\u000060', { periodSeconds: 60, windowStart: 1_735_689_660 }),
        ]);
        const byKey = async () => new Map((await storage.listCounters()).map((c) => [c.key, c]));
        let listed = await byKey();
        assert.equal(listed.size, 5);
        assert.deepEqual(listed.get(`${TEAM_OWN}alice`), saved(`${TEAM_OWN}alice`, { requestsCurrent: big, tokensPrevious: big }));
        assert.deepEqual(listed.get(TEAM_OWN), saved(TEAM_OWN, { windowStart: 1_735_603_200 }));

        // Newer windows replace the saved ones; removals go first.
        await storage.writeCounters([saved(TEAM_DAY, { requestsCurrent: 9 }), saved(`${TEAM_OWN}carol`)], { keys: [`${TEAM_OWN}bob`, 'nothing'] });
        listed = await byKey();
        assert.deepEqual([...listed.keys()].sort(), [TEAM_DAY, TEAM_OWN, `${TEAM_OWN}alice`, `${TEAM_OWN}carol`, 'provider\u0000open:ai\u000060'].sort());
        assert.equal(listed.get(TEAM_DAY)?.requestsCurrent, 9);

        // A per-child rule's own key as a prefix takes its children with it, and nothing else.
        await storage.writeCounters([], { prefixes: [TEAM_OWN] });
        assert.deepEqual([...(await byKey()).keys()].sort(), [TEAM_DAY, 'provider\u0000open:ai\u000060'].sort());

        await storage.writeCounters([saved(`${TEAM_OWN}dave`)], { all: true });
        assert.deepEqual(await storage.listCounters(), [saved(`${TEAM_OWN}dave`)]);
      });
    });

    it('deletes rules case-insensitively and reports a missing rule', async () => {
      await withStorage(harness, async (storage) => {
        await storage.upsertRule(rule({ subject: '/Team' }));
        assert.equal(await storage.deleteRule({ scope: 'user_path', subject: '/team', periodSeconds: 3600 }), false);
        assert.equal(await storage.deleteRule({ scope: 'provider', subject: '/team', periodSeconds: 60 }), false);
        assert.equal(await storage.deleteRule({ scope: 'user_path', subject: '/TEAM', periodSeconds: 60 }), true);
        assert.equal(await storage.deleteRule({ scope: 'user_path', subject: '/team', periodSeconds: 60 }), false);
        assert.deepEqual(await storage.listRules(), []);
      });
    });

    it('replaceConfigRules replaces config rules, keeps manual ones and reports skipped keys', async () => {
      await withStorage(harness, async (storage) => {
        await storage.upsertRule(rule({ subject: '/manual', source: 'manual', maxRequests: 7 }));
        await storage.upsertRule(rule({ subject: '/Clash', source: 'manual', maxRequests: 8 }));
        const first = await storage.replaceConfigRules([
          rule({ subject: '/old', source: 'config', createdAt: at(1), updatedAt: at(1) }),
          rule({ subject: '/kept', source: 'config', createdAt: at(1), updatedAt: at(1) }),
          rule({ subject: '/changed', source: 'config', createdAt: at(1), updatedAt: at(1) }),
          rule({ subject: '/clash', source: 'config', maxRequests: 1, createdAt: at(1), updatedAt: at(1) }),
        ]);
        assert.deepEqual(first, [{ scope: 'user_path', subject: '/clash', periodSeconds: 60 }]);

        // A restart re-seeds: /old is gone, /kept unchanged, /changed has a new cap, /new appears.
        const second = await storage.replaceConfigRules([
          rule({ subject: '/kept', source: 'config', createdAt: at(99), updatedAt: at(99) }),
          rule({ subject: '/changed', source: 'config', maxRequests: 1, createdAt: at(99), updatedAt: at(99) }),
          rule({ subject: '/new', source: 'config', createdAt: at(99), updatedAt: at(99) }),
          rule({ subject: '/CLASH', source: 'config', createdAt: at(99), updatedAt: at(99) }),
        ]);
        assert.deepEqual(second, [{ scope: 'user_path', subject: '/CLASH', periodSeconds: 60 }]);

        const bySubject = new Map((await storage.listRules()).map((r) => [r.subject, r]));
        assert.deepEqual([...bySubject.keys()].sort(), ['/Clash', '/changed', '/kept', '/manual', '/new']);
        assert.equal(bySubject.get('/manual')?.source, 'manual');
        assert.equal(bySubject.get('/manual')?.maxRequests, 7);
        assert.equal(bySubject.get('/Clash')?.source, 'manual');
        assert.equal(bySubject.get('/Clash')?.maxRequests, 8);
        assert.deepEqual(bySubject.get('/kept')?.createdAt, at(1));
        assert.deepEqual(bySubject.get('/kept')?.updatedAt, at(1));
        assert.deepEqual(bySubject.get('/changed')?.createdAt, at(1));
        assert.deepEqual(bySubject.get('/changed')?.updatedAt, at(99));
        assert.equal(bySubject.get('/changed')?.maxRequests, 1);
        assert.deepEqual(bySubject.get('/new')?.createdAt, at(99));
        assert.equal(bySubject.get('/new')?.source, 'config');

        // An empty declaration removes every config rule and nothing else.
        assert.deepEqual(await storage.replaceConfigRules([]), []);
        assert.deepEqual(
          (await storage.listRules()).map((r) => r.subject),
          ['/Clash', '/manual'],
        );
      });
    });

    it('inserts usage and summarises by user-path subtree', async () => {
      await withStorage(harness, async (storage) => {
        await storage.insertUsage([]);
        await storage.insertUsage([
          usage({ userPath: '/a', cachedPromptTokens: 4, costUsd: 0.25 }),
          usage({ userPath: '/a/b', promptTokens: 1, completionTokens: 2, totalTokens: 3, cached: true }),
          usage({ userPath: '/A/c', model: 'other', costUsd: 0.000123456789 }),
          usage({ userPath: '/ab' }),
          usage({ userPath: '/', provider: 'anthropic', model: 'claude' }),
          usage({ userPath: '/a', timestampMs: at(1000).getTime() }), // outside the window
          usage({ userPath: '/a_x' }),
          usage({ userPath: '/a%y/z' }),
        ]);
        const window = { from: at(0), to: at(1000) }; // `to` is exclusive

        const a = await storage.summarizeUsage({ userPathPrefix: '/a', ...window });
        assert.deepEqual(a, [
          {
            provider: 'openai',
            model: 'gpt-4o-mini',
            requests: 2,
            promptTokens: 11,
            completionTokens: 7,
            totalTokens: 18,
            cachedPromptTokens: 4,
            costUsd: 0.25,
            cachedRequests: 1,
            estimatedRequests: 0,
          },
          {
            provider: 'openai',
            model: 'other',
            requests: 1,
            promptTokens: 10,
            completionTokens: 5,
            totalTokens: 15,
            cachedPromptTokens: 0,
            costUsd: 0.000123456789,
            cachedRequests: 0,
            estimatedRequests: 0,
          },
        ]);

        const all = await storage.summarizeUsage({ userPathPrefix: '/', ...window });
        assert.deepEqual(
          all.map((r) => [r.provider, r.model, r.requests]),
          [
            ['anthropic', 'claude', 1],
            ['openai', 'gpt-4o-mini', 5],
            ['openai', 'other', 1],
          ],
        );

        // LIKE wildcards in a path match literally.
        const underscore = await storage.summarizeUsage({ userPathPrefix: '/a_x', ...window });
        assert.deepEqual(underscore.map((r) => r.requests), [1]);
        const percent = await storage.summarizeUsage({ userPathPrefix: '/a%y', ...window });
        assert.deepEqual(percent.map((r) => r.requests), [1]);
        assert.deepEqual(await storage.summarizeUsage({ userPathPrefix: '/a%', ...window }), []);

        assert.deepEqual(await storage.summarizeUsage({ userPathPrefix: '/nobody', ...window }), []);
        assert.deepEqual(
          await storage.summarizeUsage({ userPathPrefix: '/a', from: at(2000), to: at(3000) }),
          [],
        );
      });
    });

    it('buckets usage by hour or day, grouped by user path, provider or provider/model', async () => {
      await withStorage(harness, async (storage) => {
        const hour = 3600;
        const records = [
          usage({ timestampMs: at(10).getTime(), userPath: '/a', cached: true, promptTokens: 0, completionTokens: 0, totalTokens: 0 }),
          usage({ timestampMs: at(hour - 1).getTime(), userPath: '/b', provider: 'anthropic', model: 'claude' }),
          usage({ timestampMs: at(hour).getTime(), userPath: '/a', promptTokens: 1, completionTokens: 2, totalTokens: 3 }),
          usage({ timestampMs: at(hour + 59).getTime(), userPath: '/a', model: 'other' }),
          usage({ timestampMs: at(26 * hour).getTime(), userPath: '/a' }), // the next day
          usage({ timestampMs: at(-1).getTime(), userPath: '/a' }), // before the window
          usage({ timestampMs: at(48 * hour).getTime(), userPath: '/a' }), // `to` is exclusive
        ];
        await storage.insertUsage(records);
        const window = { from: at(0), to: at(48 * hour) };
        const plain = (buckets: Awaited<ReturnType<Storage['bucketUsage']>>) =>
          buckets.map((b) => [b.start.toISOString(), b.key, b.requests, b.promptTokens, b.completionTokens, b.cacheHits]);

        assert.deepEqual(plain(await storage.bucketUsage({ ...window, groupBy: 'user_path', bucketSeconds: hour })), [
          ['2025-01-01T00:00:00.000Z', '/a', 1, 0, 0, 1],
          ['2025-01-01T00:00:00.000Z', '/b', 1, 10, 5, 0],
          ['2025-01-01T01:00:00.000Z', '/a', 2, 11, 7, 0],
          ['2025-01-02T02:00:00.000Z', '/a', 1, 10, 5, 0],
        ]);
        assert.deepEqual(plain(await storage.bucketUsage({ ...window, groupBy: 'provider', bucketSeconds: 86_400 })), [
          ['2025-01-01T00:00:00.000Z', 'anthropic', 1, 10, 5, 0],
          ['2025-01-01T00:00:00.000Z', 'openai', 3, 11, 7, 1],
          ['2025-01-02T00:00:00.000Z', 'openai', 1, 10, 5, 0],
        ]);
        assert.deepEqual(plain(await storage.bucketUsage({ ...window, groupBy: 'model', bucketSeconds: 86_400 })), [
          ['2025-01-01T00:00:00.000Z', 'anthropic/claude', 1, 10, 5, 0],
          ['2025-01-01T00:00:00.000Z', 'openai/gpt-4o-mini', 2, 1, 2, 1],
          ['2025-01-01T00:00:00.000Z', 'openai/other', 1, 10, 5, 0],
          ['2025-01-02T00:00:00.000Z', 'openai/gpt-4o-mini', 1, 10, 5, 0],
        ]);
        assert.deepEqual(await storage.bucketUsage({ from: at(100 * hour), to: at(200 * hour), groupBy: 'user_path', bucketSeconds: hour }), []);
      });
    });

    it('adds refusal counts to the stored ones by key, and buckets them like usage', async () => {
      await withStorage(harness, async (storage) => {
        const count = (over: Partial<RefusalCount>): RefusalCount => ({
          minuteMs: at(0).getTime(), userPath: '/team/a', provider: 'openai', model: 'gpt-4o', scope: 'user_path', subject: '/team', period: 'minute', count: 1, ...over,
        });
        await storage.addRefusals([]);
        await storage.addRefusals([
          count({ count: 5 }),
          count({ userPath: '/team/b', count: 2 }),
          count({ scope: 'budget', subject: '/team', period: 'day', count: 1 }),
          count({ minuteMs: at(60).getTime(), provider: 'anthropic', model: 'claude', scope: 'provider', subject: 'anthropic', count: 4 }),
          count({ minuteMs: at(3600).getTime(), userPath: '/batch', provider: '', model: '', count: 3 }),
          count({ minuteMs: at(-60).getTime(), count: 100 }), // before the window
        ]);
        // A second write of the same keys (another minute's flush, another replica) adds to them.
        await storage.addRefusals([count({ count: 2 }), count({ minuteMs: at(3600).getTime(), userPath: '/batch', provider: '', model: '', count: 1 })]);
        const window = { from: at(0), to: at(86_400) };
        const plain = (buckets: Awaited<ReturnType<Storage['bucketRefusals']>>) => buckets.map((b) => [b.start.toISOString(), b.key, b.refused]);
        assert.deepEqual(plain(await storage.bucketRefusals({ ...window, groupBy: 'user_path', bucketSeconds: 3600 })), [
          ['2025-01-01T00:00:00.000Z', '/team/a', 12],
          ['2025-01-01T00:00:00.000Z', '/team/b', 2],
          ['2025-01-01T01:00:00.000Z', '/batch', 4],
        ]);
        assert.deepEqual(plain(await storage.bucketRefusals({ ...window, groupBy: 'model', bucketSeconds: 86_400 })), [
          ['2025-01-01T00:00:00.000Z', '', 4],
          ['2025-01-01T00:00:00.000Z', 'anthropic/claude', 4],
          ['2025-01-01T00:00:00.000Z', 'openai/gpt-4o', 10],
        ]);
        assert.deepEqual(plain(await storage.bucketRefusals({ ...window, groupBy: 'provider', bucketSeconds: 86_400 })), [
          ['2025-01-01T00:00:00.000Z', '', 4],
          ['2025-01-01T00:00:00.000Z', 'anthropic', 4],
          ['2025-01-01T00:00:00.000Z', 'openai', 10],
        ]);
        assert.deepEqual(await storage.bucketRefusals({ from: at(-3600), to: at(-60), groupBy: 'user_path', bucketSeconds: 3600 }), []);
      });
    });

    it('buckets sum the costs of their records', async () => {
      await withStorage(harness, async (storage) => {
        await storage.insertUsage([
          usage({ userPath: '/a', costUsd: 0.5 }),
          usage({ userPath: '/a', costUsd: 0.25, timestampMs: at(20).getTime() }),
          usage({ userPath: '/b', costUsd: 0.125 }),
          usage({ userPath: '/b', costUsd: 1, timestampMs: at(3600).getTime() }),
        ]);
        const buckets = await storage.bucketUsage({ from: at(0), to: at(7200), groupBy: 'user_path', bucketSeconds: 3600 });
        assert.deepEqual(buckets.map((b) => [b.start.toISOString(), b.key, b.costUsd]), [
          ['2025-01-01T00:00:00.000Z', '/a', 0.75],
          ['2025-01-01T00:00:00.000Z', '/b', 0.125],
          ['2025-01-01T01:00:00.000Z', '/b', 1],
        ]);
      });
    });

    it('sums costs per subtree and window, one result per query in query order', async () => {
      await withStorage(harness, async (storage) => {
        assert.deepEqual(await storage.sumCost([]), []);
        await storage.insertUsage([
          usage({ userPath: '/team', costUsd: 1.5 }),
          usage({ userPath: '/Team/a', costUsd: 0.25, timestampMs: at(20).getTime() }),
          usage({ userPath: '/team/a/x', costUsd: 0.125 }),
          usage({ userPath: '/teams', costUsd: 100 }),
          usage({ userPath: '/team_', costUsd: 1000 }),
          usage({ userPath: '/team', costUsd: 10_000, timestampMs: at(60).getTime() }), // after every window below
          usage({ userPath: '/other', costUsd: 0.0000001 }),
        ]);
        const window = { from: at(0), to: at(60) }; // `to` is exclusive
        assert.deepEqual(
          await storage.sumCost([
            { userPathPrefix: '/team', ...window },
            { userPathPrefix: '/TEAM/A', ...window },
            { userPathPrefix: '/team/a', from: at(15), to: at(60) },
            { userPathPrefix: '/nobody', ...window },
            { userPathPrefix: '/team', from: at(0), to: at(61) },
          ]),
          [1.875, 0.375, 0.25, 0, 10_001.875],
        );
        const [all] = await storage.sumCost([{ userPathPrefix: '/', ...window }]);
        assert.equal(Math.round((all ?? 0) * 1e9), 1101875000100);
      });
    });

    it('upserts budgets by case-insensitive key, keeping createdAt, and deletes them', async () => {
      await withStorage(harness, async (storage) => {
        assert.deepEqual(await storage.listBudgets(), []);
        await storage.upsertBudget(budget({ userPath: '/Team' }));
        await storage.upsertBudget(budget({ userPath: '/TEAM', maxUsd: 12.5, updatedAt: at(50), createdAt: at(50) }));
        await storage.upsertBudget(budget({ period: 'month', maxUsd: 200 }));
        await storage.upsertBudget(budget({ userPath: '/a', period: '3600s', maxUsd: 0.01, source: 'config' }));
        assert.deepEqual(await storage.listBudgets(), [
          budget({ userPath: '/a', period: '3600s', maxUsd: 0.01, source: 'config' }),
          budget({ userPath: '/TEAM', maxUsd: 12.5, updatedAt: at(50) }), // spelling of the latest write
          budget({ period: 'month', maxUsd: 200 }),
        ]);
        assert.equal(await storage.deleteBudget({ userPath: '/team', period: 'week' }), false);
        assert.equal(await storage.deleteBudget({ userPath: '/team', period: 'DAY' }), false);
        assert.equal(await storage.deleteBudget({ userPath: '/tEaM', period: 'day' }), true);
        assert.equal(await storage.deleteBudget({ userPath: '/team', period: 'day' }), false);
        assert.deepEqual((await storage.listBudgets()).map((b) => [b.userPath, b.period]), [['/a', '3600s'], ['/team', 'month']]);
      });
    });

    it('replaceConfigBudgets replaces config budgets, keeps manual ones and reports skipped keys', async () => {
      await withStorage(harness, async (storage) => {
        await storage.upsertBudget(budget({ userPath: '/manual', maxUsd: 7 }));
        await storage.upsertBudget(budget({ userPath: '/Clash', maxUsd: 8 }));
        const config = (userPath: string, maxUsd: number, seconds: number): BudgetDefinition =>
          budget({ userPath, maxUsd, source: 'config', createdAt: at(seconds), updatedAt: at(seconds) });
        const first = await storage.replaceConfigBudgets([config('/old', 1, 1), config('/kept', 1, 1), config('/changed', 1, 1), config('/clash', 1, 1)]);
        assert.deepEqual(first, [{ userPath: '/clash', period: 'day' }]);

        const second = await storage.replaceConfigBudgets([config('/kept', 1, 99), config('/changed', 2, 99), config('/new', 1, 99)]);
        assert.deepEqual(second, []);
        const byPath = new Map((await storage.listBudgets()).map((b) => [b.userPath, b]));
        assert.deepEqual([...byPath.keys()], ['/changed', '/Clash', '/kept', '/manual', '/new']);
        assert.deepEqual(byPath.get('/kept'), config('/kept', 1, 1));
        assert.deepEqual(byPath.get('/changed'), { ...config('/changed', 2, 1), updatedAt: at(99) });
        assert.deepEqual(byPath.get('/Clash'), budget({ userPath: '/Clash', maxUsd: 8 }));
        assert.deepEqual(byPath.get('/new'), config('/new', 1, 99));

        assert.deepEqual(await storage.replaceConfigBudgets([]), []);
        assert.deepEqual((await storage.listBudgets()).map((b) => b.userPath), ['/Clash', '/manual']);
      });
    });

    it('keeps each record\'s request id and estimated flag; summaries count the estimated requests', async () => {
      await withStorage(harness, async (storage) => {
        await storage.insertUsage([
          usage({ requestId: 'req-1', estimated: true }),
          usage({ requestId: null }),
          usage({ requestId: 'req-3', estimated: true, model: 'other' }),
        ]);
        const rows = await storage.summarizeUsage({ userPathPrefix: '/', from: at(0), to: at(100) });
        assert.deepEqual(rows.map((r) => [r.model, r.requests, r.estimatedRequests]), [['gpt-4o-mini', 2, 1], ['other', 1, 1]]);
      });
    });

    it('inserts a large usage batch', async () => {
      await withStorage(harness, async (storage) => {
        const records = Array.from({ length: 2500 }, (_, i) =>
          usage({ userPath: `/bulk/${i % 10}`, totalTokens: 2, latencyMs: i + 0.4, apiKeyId: 'k1' }),
        );
        await storage.insertUsage(records);
        const rows = await storage.summarizeUsage({ userPathPrefix: '/bulk', from: at(0), to: at(100) });
        assert.equal(rows[0]?.requests, 2500);
        assert.equal(rows[0]?.totalTokens, 5000);
      });
    });

    it('stores files with their bytes, and remote files without', async () => {
      await withStorage(harness, async (storage) => {
        assert.equal(await storage.getFile('file-1'), undefined);
        await storage.insertFile(file('file-1'));
        await storage.insertFile(file('file-2', { content: null, provider: 'openai', providerFileId: 'file-up', bytes: 0, purpose: 'batch_output' }));
        assert.deepEqual(await storage.getFile('file-1'), file('file-1'));
        assert.deepEqual(await storage.getFile('file-2'), file('file-2', { content: null, provider: 'openai', providerFileId: 'file-up', bytes: 0, purpose: 'batch_output' }));
        await assert.rejects(storage.insertFile(file('file-1')));
        // A megabyte of arbitrary bytes round-trips unchanged.
        const big = Buffer.alloc(1024 * 1024, 7);
        await storage.insertFile(file('file-big', { content: big, bytes: big.length }));
        assert.ok((await storage.getFile('file-big'))?.content?.equals(big));
        // A file without an expiry round-trips too.
        await storage.insertFile(file('file-kept', { expiresAt: null }));
        assert.deepEqual(await storage.getFile('file-kept'), file('file-kept', { expiresAt: null }));
      });
    });

    it('deletes files, counts the live files of one user path, and removes expired ones', async () => {
      await withStorage(harness, async (storage) => {
        await storage.insertFile(file('f-a1', { userPath: '/team/a', bytes: 100, expiresAt: at(100) }));
        await storage.insertFile(file('f-a2', { userPath: '/Team/A', bytes: 20, expiresAt: at(200) }));
        await storage.insertFile(file('f-a3', { userPath: '/team/a', bytes: 3, expiresAt: null }));
        await storage.insertFile(file('f-child', { userPath: '/team/a/x', bytes: 1000, expiresAt: at(200) }));
        await storage.insertFile(file('f-b', { userPath: '/team/b', bytes: 7, expiresAt: at(50) }));
        // The path itself only (any case), not its children; expired files are not counted.
        assert.deepEqual(await storage.fileUsage('/team/a', at(10)), { files: 3, bytes: 123 });
        assert.deepEqual(await storage.fileUsage('/TEAM/a', at(100)), { files: 2, bytes: 23 });
        assert.deepEqual(await storage.fileUsage('/nobody', at(10)), { files: 0, bytes: 0 });

        assert.equal(await storage.deleteFile('f-a2'), true);
        assert.equal(await storage.deleteFile('f-a2'), false);
        assert.equal(await storage.getFile('f-a2'), undefined);
        assert.deepEqual(await storage.fileUsage('/team/a', at(10)), { files: 2, bytes: 103 });

        // Expiry at or before the time given: gone; later ones and those without expiry stay.
        assert.equal(await storage.deleteExpiredFiles(at(100)), 2);
        assert.equal(await storage.getFile('f-a1'), undefined);
        assert.equal(await storage.getFile('f-b'), undefined);
        assert.ok(await storage.getFile('f-a3'));
        assert.ok(await storage.getFile('f-child'));
        assert.equal(await storage.deleteExpiredFiles(at(100)), 0);
      });
    });

    it('inserts, updates, reads and lists batches newest first, by subtree, with paging', async () => {
      await withStorage(harness, async (storage) => {
        await storage.insertBatch(batch('b1'));
        await storage.insertBatch(batch('b2', { userPath: '/team/b' }));
        await storage.insertBatch(batch('b3', { userPath: '/Team/a/x', metadata: null }));
        await storage.insertBatch(batch('b4', { userPath: '/team_z' }));
        await assert.rejects(storage.insertBatch(batch('b1')));
        assert.deepEqual(await storage.getBatch('b1'), batch('b1'));
        assert.equal(await storage.getBatch('nope'), undefined);

        const done = batch('b1', {
          status: 'completed',
          outputFileId: 'file-out',
          requestCounts: { total: 2, completed: 1, failed: 1 },
          errors: [{ code: 'invalid', message: 'bad line', param: 'body', line: 2 }],
          times: { expires_at: 86_400, completed_at: 99 },
          providerBatchId: 'batch_up',
          updatedAt: at(9),
        });
        assert.equal(await storage.updateBatch(done), true);
        assert.equal(await storage.updateBatch(batch('nope')), false);
        assert.deepEqual(await storage.getBatch('b1'), done);

        const ids = async (userPathPrefix: string, after?: string, limit = 10): Promise<string[]> =>
          (await storage.listBatches({ userPathPrefix, limit, ...(after === undefined ? {} : { after }) })).map((b) => b.id);
        assert.deepEqual(await ids('/'), ['b4', 'b3', 'b2', 'b1']);
        assert.deepEqual(await ids('/team'), ['b3', 'b2', 'b1']);
        assert.deepEqual(await ids('/team/a'), ['b3', 'b1']);
        assert.deepEqual(await ids('/team/b'), ['b2']);
        assert.deepEqual(await ids('/team_'), []);
        assert.deepEqual(await ids('/', undefined, 2), ['b4', 'b3']);
        assert.deepEqual(await ids('/', 'b3', 2), ['b2', 'b1']);
        assert.deepEqual(await ids('/team', 'b3'), ['b2', 'b1']);
        assert.deepEqual(await ids('/', 'b1'), []);
        assert.deepEqual(await ids('/', 'unknown'), []);
      });
    });

    it('keeps data across close and reopen', async () => {
      const store = await harness.freshStore();
      const first = await store.open();
      await first.insertApiKey(key('k1'));
      await first.upsertRule(rule());
      await first.upsertBudget(budget());
      await first.insertUsage([usage({ costUsd: 0.5, cachedPromptTokens: 3 })]);
      await first.writeCounters([saved(`${TEAM_OWN}alice`)]);
      await first.close();

      const second = await store.open();
      try {
        assert.deepEqual(await second.listApiKeys(), [key('k1')]);
        assert.deepEqual(await second.listRules(), [rule()]);
        assert.deepEqual(await second.listBudgets(), [budget()]);
        assert.deepEqual(await second.listCounters(), [saved(`${TEAM_OWN}alice`)]);
        const rows = await second.summarizeUsage({ userPathPrefix: '/', from: at(0), to: at(100) });
        assert.equal(rows[0]?.requests, 1);
        assert.equal(rows[0]?.costUsd, 0.5);
        assert.equal(rows[0]?.cachedPromptTokens, 3);
        assert.deepEqual(await second.sumCost([{ userPathPrefix: '/a', from: at(0), to: at(100) }]), [0.5]);
      } finally {
        await second.close();
      }
    });
  });
}
