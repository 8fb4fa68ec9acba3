/**
 * What the storage contract suites share: the harness each implementation's test file supplies
 * (memory.test.ts, sqlite.test.ts, postgres.test.ts), and the records the suites write.
 */

import assert from 'node:assert/strict';
import type { BudgetDefinition } from '../../src/budgets/types.ts';
import type { RuleDefinition } from '../../src/ratelimit/types.ts';
import type { BatchRecord, StoredFile } from '../../src/storage/batch-files/types.ts';
import type { SavedCounter } from '../../src/storage/counters/types.ts';
import type { ApiKeyRecord } from '../../src/storage/keys/types.ts';
import type { Storage, WatchedAggregate } from '../../src/storage/types.ts';
import type { UsageRecord } from '../../src/storage/usage/types.ts';

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

export const T0 = new Date('2025-01-01T00:00:00.000Z');
export const at = (seconds: number): Date => new Date(T0.getTime() + seconds * 1000);

export function rule(overrides: Partial<RuleDefinition> = {}): RuleDefinition {
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
export function saved(key: string, overrides: Partial<SavedCounter> = {}): SavedCounter {
  return { key, periodSeconds: 86_400, windowStart: 1_735_689_600, requestsPrevious: 3, requestsCurrent: 4, tokensPrevious: 0, tokensCurrent: 250, ...overrides };
}

export const TEAM_DAY = 'user_path\u0000/team\u000086400';
export const TEAM_OWN = `${TEAM_DAY}\u0000`;

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

export function budget(overrides: Partial<BudgetDefinition> = {}): BudgetDefinition {
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

export function key(id: string, overrides: Partial<ApiKeyRecord> = {}): ApiKeyRecord {
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

export function file(id: string, overrides: Partial<StoredFile> = {}): StoredFile {
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

export function batch(id: string, overrides: Partial<BatchRecord> = {}): BatchRecord {
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
export async function withStorage(
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
  await upgraded.keys.insert({ id: 'key-new', name: 'new', userPath: null, keyHash: 'hash-new', maxPriority: 'high', createdAt: new Date('2026-01-11T08:00:00Z') });
  assert.deepEqual((await upgraded.keys.list()).map((k) => [k.id, k.userPath, k.maxPriority]), [[OLD_KEY.id, OLD_KEY.userPath, 'normal'], ['key-new', null, 'high']]);
}


/**
 * Opens two connections to one fresh store and asserts that a watcher of `aggregate` on one is
 * told of each write made through the other (within 3 s), and of nothing once it stopped watching.
 */
export async function assertWatcherTold(
  harness: Harness,
  aggregate: WatchedAggregate,
  writes: ReadonlyArray<readonly [what: string, write: (writer: InspectableStorage) => Promise<unknown>]>,
  writeAfterStop: (writer: InspectableStorage) => Promise<unknown>,
): Promise<void> {
  const store = await harness.freshStore();
  const [writer, watcher] = [await store.open(), await store.open()];
  let calls = 0;
  const stop = await watcher.watch(aggregate, () => calls++);
  const told = async (what: string): Promise<void> => {
    const seen = calls;
    const deadline = Date.now() + 3000;
    while (calls === seen) {
      assert.ok(Date.now() < deadline, `the watcher was not told of ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  };
  try {
    for (const [what, write] of writes) {
      const done = told(what);
      await write(writer);
      await done;
    }
    await stop();
    const after = calls;
    await writeAfterStop(writer);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    assert.equal(calls, after, 'stopped watching');
  } finally {
    await stop();
    await writer.close();
    await watcher.close();
  }
}
