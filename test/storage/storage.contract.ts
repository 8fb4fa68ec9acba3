/** What belongs to the database as a whole: migrations, ping, data kept across a reopen. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { at, rule, saved, TEAM_OWN, usage, budget, key, withStorage, type Harness } from './harness.ts';

export function storageContract(name: string, harness: Harness): void {
  describe(`Storage contract, the storage as a whole: ${name}`, () => {
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
        await storage.keys.insert(key('k1'));
        await storage.migrate();
        assert.equal((await storage.keys.list()).length, 1);
      });
    });

    it('answers a ping while open', async () => {
      await withStorage(harness, async (storage) => {
        await storage.ping();
        await storage.ping();
      });
    });

    it('keeps data across close and reopen', async () => {
      const store = await harness.freshStore();
      const first = await store.open();
      await first.keys.insert(key('k1'));
      await first.rules.upsert(rule());
      await first.budgets.upsert(budget());
      await first.usage.insert([usage({ costUsd: 0.5, cachedPromptTokens: 3 })]);
      await first.counters.write([saved(`${TEAM_OWN}alice`)]);
      await first.close();

      const second = await store.open();
      try {
        assert.deepEqual(await second.keys.list(), [key('k1')]);
        assert.deepEqual(await second.rules.list(), [rule()]);
        assert.deepEqual(await second.budgets.list(), [budget()]);
        assert.deepEqual(await second.counters.list(), [saved(`${TEAM_OWN}alice`)]);
        const rows = await second.usage.summarize({ userPathPrefix: '/', from: at(0), to: at(100) });
        assert.equal(rows[0]?.requests, 1);
        assert.equal(rows[0]?.costUsd, 0.5);
        assert.equal(rows[0]?.cachedPromptTokens, 3);
        assert.deepEqual(await second.usage.sumCost([{ userPathPrefix: '/a', from: at(0), to: at(100) }]), [0.5]);
      } finally {
        await second.close();
      }
    });
  });
}
