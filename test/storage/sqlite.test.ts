import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { openStorage } from '../../src/storage/index.ts';
import { SqliteStorage } from '../../src/storage/sqlite.ts';
import { UsageRejectedError, type UsageRecord } from '../../src/storage/usage/types.ts';
import { UsageRecorder } from '../../src/usage/recorder.ts';
import { storageContracts } from './contract.ts';
import { OLD_KEY, assertMaxPriorityUpgrade, usage, type InspectableStorage } from './harness.ts';

const root = mkdtempSync(join(tmpdir(), 'floodgate-sqlite-'));
after(() => rmSync(root, { recursive: true, force: true }));

let counter = 0;

storageContracts('sqlite', {
  async freshStore() {
    // A nested, not-yet-existing directory also proves the directory is created.
    const path = join(root, `store-${++counter}`, 'nested', 'floodgate.db');
    return {
      async open(): Promise<InspectableStorage> {
        const storage = new SqliteStorage({ path });
        await storage.migrate();
        return storage;
      },
    };
  },
});

/** A record with a NULL in a NOT NULL column, as a buggy caller could produce. */
const invalid = (): UsageRecord => usage({ userPath: null as unknown as string });

/** Stored usage records (all time) at or below `prefix`. */
async function countUsage(storage: SqliteStorage, prefix = '/'): Promise<number> {
  const rows = await storage.usage.summarize({ userPathPrefix: prefix, from: new Date(0), to: new Date(8.64e15) });
  return rows.reduce((n, row) => n + row.requests, 0);
}

async function openFresh(): Promise<SqliteStorage> {
  const storage = new SqliteStorage({ path: join(root, `usage-${++counter}`, 'floodgate.db') });
  await storage.migrate();
  return storage;
}

describe('SqliteStorage usage', () => {
  it('makes a batch visible to usage.summarize as soon as usage.insert resolves', async () => {
    const storage = await openFresh();
    try {
      assert.equal(await countUsage(storage), 0);
      for (let i = 1; i <= 3; i++) {
        await storage.usage.insert(Array.from({ length: 100 }, () => usage({ userPath: `/seq/${i}` })));
        assert.equal(await countUsage(storage, '/seq'), i * 100);
        assert.equal(await countUsage(storage, `/seq/${i}`), 100);
      }
      // The GET /v1/usage sequence: flush the recorder, then summarise.
      const recorder = new UsageRecorder(storage.usage, { flushIntervalMs: 60_000, batchSize: 7 });
      for (let i = 0; i < 20; i++) recorder.record(usage({ userPath: '/recorded', totalTokens: 3 }));
      await recorder.flush();
      assert.equal(recorder.pending, 0);
      const [row] = await storage.usage.summarize({ userPathPrefix: '/recorded', from: new Date(0), to: new Date(8.64e15) });
      assert.equal(row?.requests, 20);
      assert.equal(row?.totalTokens, 60);
      await recorder.close();
    } finally {
      await storage.close();
    }
  });

  it('rejects a refused insert as UsageRejectedError carrying the SQLite error, writes none of that batch, and goes on writing', async () => {
    const storage = await openFresh();
    try {
      await assert.rejects(
        storage.usage.insert([usage({ userPath: '/bad' }), invalid()]),
        (err: Error & { cause?: { code?: string } }) => {
          assert.ok(err instanceof UsageRejectedError);
          assert.match(err.message, /NOT NULL constraint failed: usage_records\.user_path/);
          assert.equal(err.cause?.code, 'SQLITE_CONSTRAINT_NOTNULL');
          return true;
        },
      );
      assert.equal(await countUsage(storage, '/bad'), 0);
      await storage.usage.insert([usage({ userPath: '/good' })]);
      assert.equal(await countUsage(storage), 1);
    } finally {
      await storage.close();
    }
  });

  it('lets UsageRecorder write the other records of a refused batch and set the refused one aside', async () => {
    const storage = await openFresh();
    const errors: Error[] = [];
    const setAside: Array<{ record: UsageRecord; reason: Error }> = [];
    const recorder = new UsageRecorder(storage.usage, { flushIntervalMs: 60_000, onError: (err) => errors.push(err), onSetAside: (record, reason) => setAside.push({ record, reason }) });
    try {
      recorder.record(usage({ userPath: '/kept', requestId: 'req-1' }));
      recorder.record({ ...invalid(), requestId: 'req-2' });
      recorder.record(usage({ userPath: '/kept', requestId: 'req-3' }));
      await recorder.flush();
      assert.equal(recorder.pending, 0);
      assert.deepEqual(errors, []);
      assert.equal(await countUsage(storage, '/kept'), 2);
      assert.deepEqual(setAside.map((s) => s.record.requestId), ['req-2']);
      assert.match(setAside[0]?.reason.message ?? '', /NOT NULL constraint failed/);
      assert.equal(recorder.setAside, 1);
    } finally {
      await recorder.close();
      await storage.close();
    }
  });
});

describe('SqliteStorage specifics', () => {
  it('uses WAL mode and creates the database file', async () => {
    const path = join(root, 'wal', 'db.sqlite');
    const storage = await openStorage({ type: 'sqlite', sqlite: { path } });
    try {
      assert.ok(storage instanceof SqliteStorage);
      assert.ok(existsSync(path));
      await storage.usage.insert([]);
      assert.ok(existsSync(`${path}-wal`));
    } finally {
      await storage.close();
      await storage.close(); // idempotent
    }
  });

  it('refuses use before migrate()', async () => {
    const storage = new SqliteStorage({ path: ':memory:' });
    try {
      await assert.rejects(storage.rules.list(), /migrate\(\)/);
    } finally {
      await storage.close();
    }
  });

  it('openStorage rejects postgres without a URL, naming the setting', async () => {
    await assert.rejects(
      openStorage({ type: 'postgres', sqlite: { path: ':memory:' }, postgres: {} }),
      /storage\.postgres\.url.*POSTGRES_URL/,
    );
  });
});

describe('SqliteStorage migration 6 (file expiry)', () => {
  it('gives files stored before it an expiry 30 days after their upload', async () => {
    const path = join(root, `expiry-${++counter}`, 'floodgate.db');
    const storage = new SqliteStorage({ path });
    await storage.migrate();
    await storage.close();
    // Back to the schema before version 6, holding a file stored then.
    const db = new Database(path);
    db.exec('DROP INDEX files_expires_at; DROP INDEX files_user_path; ALTER TABLE files DROP COLUMN expires_at; DELETE FROM schema_migrations WHERE version = 6');
    const createdAt = Date.parse('2026-01-10T08:00:00Z');
    db.prepare('INSERT INTO files (id, user_path, purpose, filename, bytes, created_at, content) VALUES (?, ?, ?, ?, ?, ?, ?)')
      .run('file-old', '/team', 'batch', 'in.jsonl', 3, createdAt, Buffer.from('abc'));
    db.close();

    const upgraded = new SqliteStorage({ path });
    try {
      await upgraded.migrate();
      const file = await upgraded.files.get('file-old');
      assert.equal(file?.expiresAt?.toISOString(), '2026-02-09T08:00:00.000Z');
      assert.deepEqual(await upgraded.files.usage('/team', new Date(createdAt)), { files: 1, bytes: 3 });
    } finally {
      await upgraded.close();
    }
  });
});

describe('SqliteStorage migration 7 (a key\'s max_priority)', () => {
  it('gives keys stored before it max_priority normal, and keeps what new keys set', async () => {
    const path = join(root, `max-priority-${++counter}`, 'floodgate.db');
    const storage = new SqliteStorage({ path });
    await storage.migrate();
    await storage.close();
    // Back to the schema before version 7, holding a key stored then.
    const db = new Database(path);
    db.exec('ALTER TABLE api_keys DROP COLUMN max_priority; DELETE FROM schema_migrations WHERE version = 7');
    db.prepare('INSERT INTO api_keys (id, name, user_path, key_hash, created_at) VALUES (?, ?, ?, ?, ?)').run(OLD_KEY.id, OLD_KEY.name, OLD_KEY.userPath, OLD_KEY.keyHash, OLD_KEY.createdAt.getTime());
    db.close();

    const upgraded = new SqliteStorage({ path });
    try {
      await upgraded.migrate();
      await assertMaxPriorityUpgrade(upgraded);
    } finally {
      await upgraded.close();
    }
  });
});
