import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { openStorage } from '../../src/storage/index.ts';
import { SqliteStorage } from '../../src/storage/sqlite.ts';
import { UsageBatch } from '../../src/storage/usage-batch.ts';
import { storageContract } from './contract.ts';
import type { InspectableStorage } from './contract.ts';

const root = mkdtempSync(join(tmpdir(), 'floodgate-sqlite-'));
after(() => rmSync(root, { recursive: true, force: true }));

let counter = 0;

storageContract('sqlite', {
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

describe('SqliteStorage specifics', () => {
  it('uses WAL mode and creates the database file', async () => {
    const path = join(root, 'wal', 'db.sqlite');
    const storage = await openStorage({ type: 'sqlite', sqlite: { path } });
    try {
      assert.equal(storage.kind, 'sqlite');
      assert.ok(existsSync(path));
      await storage.insertUsage(new UsageBatch());
      assert.ok(existsSync(`${path}-wal`));
    } finally {
      await storage.close();
      await storage.close(); // idempotent
    }
  });

  it('refuses use before migrate()', async () => {
    const storage = new SqliteStorage({ path: ':memory:' });
    try {
      await assert.rejects(storage.listRules(), /migrate\(\)/);
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
