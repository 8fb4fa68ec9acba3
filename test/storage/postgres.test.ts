/**
 * Runs the storage contract against a real PostgreSQL server. Each run creates a throwaway
 * database (dropped at the end) on the server named by POSTGRES_TEST_URL, default
 * postgres://postgres@127.0.0.1:5432/postgres. An unreachable server fails the run loudly;
 * set FLOODGATE_SKIP_POSTGRES=1 to skip on purpose.
 */

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { openStorage } from '../../src/storage/index.ts';
import { PostgresStorage } from '../../src/storage/postgres.ts';
import { UsageRejectedError } from '../../src/storage/usage/types.ts';
import { storageContracts } from './contract.ts';
import { OLD_KEY, assertMaxPriorityUpgrade, usage, type InspectableStorage } from './harness.ts';

const skip = process.env.FLOODGATE_SKIP_POSTGRES === '1';
const adminUrl = process.env.POSTGRES_TEST_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const dbName = `floodgate_test_${randomBytes(6).toString('hex')}`;
const testUrl = (() => {
  const url = new URL(adminUrl);
  url.pathname = `/${dbName}`;
  return url.toString();
})();

let created = false;

async function admin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** One database per run; each test starts from an empty schema, migrations included. */
async function resetSchema(): Promise<void> {
  const client = new pg.Client({ connectionString: testUrl });
  await client.connect();
  try {
    await client.query('DROP SCHEMA public CASCADE; CREATE SCHEMA public;');
  } finally {
    await client.end();
  }
}

if (skip) {
  describe('PostgresStorage', () => {
    it('is skipped because FLOODGATE_SKIP_POSTGRES=1', { skip: 'FLOODGATE_SKIP_POSTGRES=1' }, () => {});
  });
} else {
  before(async () => {
    try {
      // The name is generated from hex digits, so interpolating it into DDL is safe.
      await admin((c) => c.query(`CREATE DATABASE ${dbName}`));
      created = true;
    } catch (err) {
      throw new Error(
        `PostgreSQL is not reachable at ${adminUrl} (set POSTGRES_TEST_URL, or FLOODGATE_SKIP_POSTGRES=1 to skip): ${
          (err as Error).message
        }`,
      );
    }
  });

  after(async () => {
    if (created) await admin((c) => c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`));
  });

  storageContracts('postgres', {
    async freshStore() {
      await resetSchema();
      return {
        async open(): Promise<InspectableStorage> {
          const storage = new PostgresStorage({ url: testUrl });
          await storage.migrate();
          return storage;
        },
      };
    },
  });

  describe('PostgresStorage specifics', () => {
    it('openStorage migrates before returning', async () => {
      await resetSchema();
      const storage = await openStorage({ type: 'postgres', sqlite: { path: 'unused' }, postgres: { url: testUrl } });
      try {
        assert.ok(storage instanceof PostgresStorage);
        assert.deepEqual(await storage.rules.list(), []);
        assert.deepEqual(await storage.keys.list(), []);
      } finally {
        await storage.close();
      }
    });

    it('concurrent migrate() calls apply each migration once', async () => {
      await resetSchema();
      const a = new PostgresStorage({ url: testUrl });
      const b = new PostgresStorage({ url: testUrl });
      try {
        await Promise.all([a.migrate(), b.migrate(), a.migrate()]);
        const applied = await a.appliedMigrationCount();
        // As many as one migrate() alone applies (versions need not be contiguous).
        await resetSchema();
        await a.migrate();
        assert.equal(await a.appliedMigrationCount(), applied);
      } finally {
        await a.close();
        await b.close();
      }
    });

    it('refuses a record its columns cannot hold as UsageRejectedError, and an unreachable server as another error', async () => {
      await resetSchema();
      const storage = new PostgresStorage({ url: testUrl });
      try {
        await storage.migrate();
        for (const bad of [usage({ model: 'a\u0000b' }), usage({ promptTokens: 10.5 }), usage({ totalTokens: 1e300 })]) {
          await assert.rejects(storage.usage.insert([usage(), bad]), (err: Error) => err instanceof UsageRejectedError);
        }
        const rows = await storage.usage.summarize({ userPathPrefix: '/', from: new Date(0), to: new Date(8.64e15) });
        assert.deepEqual(rows, [], 'nothing of a refused batch is written');
      } finally {
        await storage.close();
      }
      const unreachable = new PostgresStorage({ url: 'postgres://postgres@127.0.0.1:1/none' });
      try {
        await assert.rejects(unreachable.usage.insert([usage()]), (err: Error) => !(err instanceof UsageRejectedError));
      } finally {
        await unreachable.close();
      }
    });

    /**
     * A database as an earlier version left it: migrated up to date, then taken back by `rollBack`
     * (on a client of its own, storing the rows of then); `check` gets it migrated again.
     */
    async function upgradedFrom(rollBack: (client: pg.Client) => Promise<void>, check: (upgraded: PostgresStorage) => Promise<void>): Promise<void> {
      await resetSchema();
      const storage = new PostgresStorage({ url: testUrl });
      await storage.migrate();
      await storage.close();
      const client = new pg.Client({ connectionString: testUrl });
      await client.connect();
      try {
        await rollBack(client);
      } finally {
        await client.end();
      }
      const upgraded = new PostgresStorage({ url: testUrl });
      try {
        await upgraded.migrate();
        await check(upgraded);
      } finally {
        await upgraded.close();
      }
    }

    it('migration 6 gives files stored before it an expiry 30 days after their upload', async () => {
      await upgradedFrom(
        async (client) => {
          await client.query('ALTER TABLE files DROP COLUMN expires_at');
          await client.query('DROP INDEX files_user_path');
          await client.query('DELETE FROM schema_migrations WHERE version = 6');
          await client.query(
            'INSERT INTO files (id, user_path, purpose, filename, bytes, created_at, content) VALUES ($1, $2, $3, $4, $5, $6, $7)',
            ['file-old', '/team', 'batch', 'in.jsonl', 3, new Date('2026-01-10T08:00:00Z'), Buffer.from('abc')],
          );
        },
        async (upgraded) => {
          assert.equal((await upgraded.files.get('file-old'))?.expiresAt?.toISOString(), '2026-02-09T08:00:00.000Z');
          assert.deepEqual(await upgraded.files.usage('/team', new Date('2026-01-10T08:00:00Z')), { files: 1, bytes: 3 });
        },
      );
    });

    it('migration 7 gives keys stored before it max_priority normal, and keeps what new keys set', async () => {
      await upgradedFrom(
        async (client) => {
          await client.query('ALTER TABLE api_keys DROP COLUMN max_priority');
          await client.query('DELETE FROM schema_migrations WHERE version = 7');
          await client.query('INSERT INTO api_keys (id, name, user_path, key_hash, created_at) VALUES ($1, $2, $3, $4, $5)', [OLD_KEY.id, OLD_KEY.name, OLD_KEY.userPath, OLD_KEY.keyHash, OLD_KEY.createdAt]);
        },
        assertMaxPriorityUpgrade,
      );
    });
  });
}
