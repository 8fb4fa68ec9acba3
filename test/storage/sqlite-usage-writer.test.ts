import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { SqliteStorage } from '../../src/storage/sqlite.ts';
import { SqliteUsageWriter } from '../../src/storage/sqlite-usage-writer.ts';
import type { UsageRecord } from '../../src/storage/types.ts';
import { UsageBatch, type UsageColumns } from '../../src/storage/usage-batch.ts';
import { UsageRecorder } from '../../src/usage/recorder.ts';

const root = mkdtempSync(join(tmpdir(), 'floodgate-usage-writer-'));
after(() => rmSync(root, { recursive: true, force: true }));

let counter = 0;
const freshPath = (): string => join(root, `db-${++counter}`, 'floodgate.db');

function usage(overrides: Partial<UsageRecord> = {}): UsageRecord {
  return {
    timestampMs: Date.parse('2025-01-01T00:00:10.000Z'),
    userPath: '/a',
    provider: 'openai',
    model: 'gpt-4o-mini',
    endpoint: '/v1/chat/completions',
    promptTokens: 10,
    completionTokens: 5,
    totalTokens: 15,
    cached: false,
    status: 200,
    latencyMs: 12,
    apiKeyId: null,
    ...overrides,
  };
}

const columnsOf = (list: UsageRecord[]): UsageColumns => UsageBatch.from(list).columns();

const records = (n: number, overrides: Partial<UsageRecord> = {}): UsageRecord[] =>
  Array.from({ length: n }, () => usage(overrides));

async function open(path: string, busyTimeoutMs?: number): Promise<SqliteStorage> {
  const storage = new SqliteStorage(busyTimeoutMs === undefined ? { path } : { path, busyTimeoutMs });
  await storage.migrate();
  return storage;
}

/** Stored usage records (all time) at or below `prefix`. */
async function countUsage(storage: SqliteStorage, prefix = '/'): Promise<number> {
  const rows = await storage.summarizeUsage({ userPathPrefix: prefix, from: new Date(0), to: new Date(8.64e15) });
  return rows.reduce((n, row) => n + row.requests, 0);
}

/** A record with a NULL in a NOT NULL column, as a buggy caller could produce. */
const invalid = (): UsageRecord => usage({ userPath: null as unknown as string });

describe('SqliteStorage usage writer thread', () => {
  it('makes a batch visible to summarizeUsage as soon as insertUsage resolves', async () => {
    const storage = await open(freshPath());
    try {
      // A read before the writes must not leave this connection on an old snapshot.
      assert.equal(await countUsage(storage), 0);
      for (let i = 1; i <= 3; i++) {
        await storage.insertUsage(UsageBatch.from(records(100, { userPath: `/seq/${i}` })));
        assert.equal(await countUsage(storage, '/seq'), i * 100);
        assert.equal(await countUsage(storage, `/seq/${i}`), 100);
      }
      // The GET /v1/usage sequence: flush the recorder, then summarise.
      const recorder = new UsageRecorder(storage, { flushIntervalMs: 60_000, batchSize: 7 });
      for (const r of records(20, { userPath: '/recorded', totalTokens: 3 })) recorder.record(r);
      await recorder.flush();
      assert.equal(recorder.pending, 0);
      const [row] = await storage.summarizeUsage({ userPathPrefix: '/recorded', from: new Date(0), to: new Date(8.64e15) });
      assert.equal(row?.requests, 20);
      assert.equal(row?.totalTokens, 60);
      await recorder.close();
    } finally {
      await storage.close();
    }
  });

  it('keeps the event loop running while the writer waits for the write lock', async () => {
    const path = freshPath();
    const storage = await open(path, 30_000);
    const blocker = new Database(path);
    try {
      await storage.insertUsage(UsageBatch.from([usage({ userPath: '/warm' })]));
      blocker.exec('BEGIN IMMEDIATE');
      let settled = false;
      const insert = storage.insertUsage(UsageBatch.from(records(3, { userPath: '/blocked' }))).finally(() => {
        settled = true;
      });
      // The batch cannot commit while the lock is held; an insert on this thread would block
      // here until the busy timeout and then fail.
      await sleep(100);
      assert.equal(settled, false);
      assert.equal(await countUsage(storage, '/blocked'), 0);
      blocker.exec('COMMIT');
      await insert;
      assert.equal(await countUsage(storage, '/blocked'), 3);
    } finally {
      if (blocker.inTransaction) blocker.exec('ROLLBACK');
      blocker.close();
      await storage.close();
    }
  });

  it('close() commits every pending batch before it resolves, and refuses later ones', async () => {
    const path = freshPath();
    const storage = await open(path);
    const inserts = Array.from({ length: 8 }, (_, i) => storage.insertUsage(UsageBatch.from(records(250, { userPath: `/close/${i}` }))));
    await storage.close();
    await Promise.all(inserts);
    await assert.rejects(storage.insertUsage(UsageBatch.from([usage()])), /closed/);
    await storage.close(); // idempotent

    const reopened = await open(path);
    try {
      assert.equal(await countUsage(reopened, '/close'), 2000);
    } finally {
      await reopened.close();
    }
  });

  it('rejects a failed insert with the SQLite error, writes none of that batch, and goes on writing', async () => {
    const storage = await open(freshPath());
    try {
      await assert.rejects(
        storage.insertUsage(UsageBatch.from([usage({ userPath: '/bad' }), invalid()])),
        (err: Error & { code?: string }) => {
          assert.match(err.message, /NOT NULL constraint failed: usage_records\.user_path/);
          assert.equal(err.code, 'SQLITE_CONSTRAINT_NOTNULL');
          return true;
        },
      );
      assert.equal(await countUsage(storage, '/bad'), 0);
      await storage.insertUsage(UsageBatch.from([usage({ userPath: '/good' })]));
      assert.equal(await countUsage(storage), 1);
    } finally {
      await storage.close();
    }
  });

  it('lets UsageRecorder keep the records of a rejected batch for its retry', async () => {
    const storage = await open(freshPath());
    const errors: Error[] = [];
    const recorder = new UsageRecorder(storage, { flushIntervalMs: 60_000, onError: (err) => errors.push(err) });
    try {
      recorder.record(usage({ userPath: '/kept' }));
      recorder.record(invalid());
      await recorder.flush();
      assert.equal(recorder.pending, 2);
      assert.match(errors[0]?.message ?? '', /NOT NULL constraint failed/);
      assert.equal(await countUsage(storage), 0);
    } finally {
      await recorder.close(); // fails again; the records stay queued
      await storage.close();
    }
  });

  it('does not keep the process alive when close() is forgotten', async () => {
    const path = freshPath();
    const sqlite = new URL('../../src/storage/sqlite.ts', import.meta.url).href;
    const batchModule = new URL('../../src/storage/usage-batch.ts', import.meta.url).href;
    // A script file, not -e: a worker thread inherits --input-type, and then cannot load its entry.
    mkdirSync(dirname(path), { recursive: true });
    const script = join(dirname(path), 'forgets-close.mjs');
    writeFileSync(
      script,
      `import { SqliteStorage } from ${JSON.stringify(sqlite)};
      import { UsageBatch } from ${JSON.stringify(batchModule)};
      const storage = new SqliteStorage({ path: ${JSON.stringify(path)} });
      await storage.migrate();
      const record = ${JSON.stringify(usage({ userPath: '/child' }))};
      await storage.insertUsage(UsageBatch.from([record]));
      console.log('inserted');`,
    );
    // The timeout only guards against a hang: a kept-alive child never exits on its own.
    const { stdout } = await promisify(execFile)(process.execPath, [script], { timeout: 60_000 });
    assert.equal(stdout.trim(), 'inserted');
    const storage = await open(path);
    try {
      assert.equal(await countUsage(storage, '/child'), 1);
    } finally {
      await storage.close();
    }
  });
});

describe('SqliteUsageWriter thread failures', () => {
  const crashing = new URL('./fixtures/crashing-usage-worker.ts', import.meta.url);

  it('rejects the batches a dead thread owed and starts a new thread for the next batch', async () => {
    const path = freshPath();
    const storage = await open(path); // migrations first, as SqliteStorage does
    const writer = new SqliteUsageWriter({ path, busyTimeoutMs: 5000, workerUrl: crashing });
    const insert = (userPath: string, n = 1): Promise<void> => writer.insert(columnsOf(records(n, { userPath })));
    try {
      await insert('/ok/1');
      await assert.rejects(insert('/throw'), /SQLite usage writer thread failed: writer thread crashed on purpose/);
      await insert('/ok/2');
      // Sent before the thread died: rejected with it, though the thread never read them.
      const dying = [insert('/exit'), insert('/ok/lost', 5), insert('/ok/lost', 5)];
      for (const p of dying) await assert.rejects(p, /SQLite usage writer thread exited \(code 3\)/);
      await insert('/ok/3');
      assert.equal(await countUsage(storage, '/ok'), 3);
      assert.equal(await countUsage(storage, '/ok/lost'), 0);
    } finally {
      await writer.close();
      await storage.close();
    }
  });

  it('rejects when the thread cannot prepare its insert', async () => {
    // No migrations ran on this file: the thread fails to prepare its insert.
    const path = freshPath();
    const storage = new SqliteStorage({ path });
    const writer = new SqliteUsageWriter({ path, busyTimeoutMs: 5000 });
    try {
      await assert.rejects(writer.insert(columnsOf([usage()])), /writer thread failed: .*no such table: usage_records/);
    } finally {
      await writer.close();
      await storage.close();
    }
  });
});

describe('SqliteStorage :memory: usage', () => {
  it('writes usage on its own connection: visible at once, failures reject', async () => {
    const storage = await open(':memory:');
    try {
      await storage.insertUsage(UsageBatch.from(records(3, { userPath: '/mem' })));
      assert.equal(await countUsage(storage, '/mem'), 3);
      await assert.rejects(storage.insertUsage(UsageBatch.from([usage({ userPath: '/mem' }), invalid()])), /NOT NULL constraint failed/);
      assert.equal(await countUsage(storage, '/mem'), 3);
    } finally {
      await storage.close();
    }
  });
});
