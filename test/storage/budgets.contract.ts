/** The budgets repository (src/storage/budgets/), and the watchers of budgets. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { BudgetDefinition } from '../../src/budgets/types.ts';
import { assertWatcherTold, at, budget, withStorage, type Harness } from './harness.ts';

export function budgetsContract(name: string, harness: Harness): void {
  describe(`Storage contract, budgets: ${name}`, () => {
    it('tells a watcher of the budgets of a creation, a change, a deletion and a re-seed made through another connection', async () => {
      await assertWatcherTold(harness, 'budgets', [
        ['a creation', (writer) => writer.budgets.upsert(budget())],
        ['a change', (writer) => writer.budgets.upsert(budget({ maxUsd: 20, updatedAt: at(5) }))],
        ['a deletion', async (writer) => assert.equal(await writer.budgets.delete(budget()), true)],
        ['a re-seed', (writer) => writer.budgets.replaceConfig([budget({ userPath: '/seeded', source: 'config' })])],
      ], (writer) => writer.budgets.upsert(budget({ userPath: '/later' })));
    });

    it('upserts budgets by case-insensitive key, keeping createdAt, and deletes them', async () => {
      await withStorage(harness, async (storage) => {
        assert.deepEqual(await storage.budgets.list(), []);
        await storage.budgets.upsert(budget({ userPath: '/Team' }));
        await storage.budgets.upsert(budget({ userPath: '/TEAM', maxUsd: 12.5, updatedAt: at(50), createdAt: at(50) }));
        await storage.budgets.upsert(budget({ period: 'month', maxUsd: 200 }));
        await storage.budgets.upsert(budget({ userPath: '/a', period: '3600s', maxUsd: 0.01, source: 'config' }));
        assert.deepEqual(await storage.budgets.list(), [
          budget({ userPath: '/a', period: '3600s', maxUsd: 0.01, source: 'config' }),
          budget({ userPath: '/TEAM', maxUsd: 12.5, updatedAt: at(50) }), // spelling of the latest write
          budget({ period: 'month', maxUsd: 200 }),
        ]);
        assert.equal(await storage.budgets.delete({ userPath: '/team', period: 'week' }), false);
        assert.equal(await storage.budgets.delete({ userPath: '/team', period: 'DAY' }), false);
        assert.equal(await storage.budgets.delete({ userPath: '/tEaM', period: 'day' }), true);
        assert.equal(await storage.budgets.delete({ userPath: '/team', period: 'day' }), false);
        assert.deepEqual((await storage.budgets.list()).map((b) => [b.userPath, b.period]), [['/a', '3600s'], ['/team', 'month']]);
      });
    });

    it('replaceConfig replaces config budgets, keeps manual ones and reports skipped keys', async () => {
      await withStorage(harness, async (storage) => {
        await storage.budgets.upsert(budget({ userPath: '/manual', maxUsd: 7 }));
        await storage.budgets.upsert(budget({ userPath: '/Clash', maxUsd: 8 }));
        const config = (userPath: string, maxUsd: number, seconds: number): BudgetDefinition =>
          budget({ userPath, maxUsd, source: 'config', createdAt: at(seconds), updatedAt: at(seconds) });
        const first = await storage.budgets.replaceConfig([config('/old', 1, 1), config('/kept', 1, 1), config('/changed', 1, 1), config('/clash', 1, 1)]);
        assert.deepEqual(first, [{ userPath: '/clash', period: 'day' }]);

        const second = await storage.budgets.replaceConfig([config('/kept', 1, 99), config('/changed', 2, 99), config('/new', 1, 99)]);
        assert.deepEqual(second, []);
        const byPath = new Map((await storage.budgets.list()).map((b) => [b.userPath, b]));
        assert.deepEqual([...byPath.keys()], ['/changed', '/Clash', '/kept', '/manual', '/new']);
        assert.deepEqual(byPath.get('/kept'), config('/kept', 1, 1));
        assert.deepEqual(byPath.get('/changed'), { ...config('/changed', 2, 1), updatedAt: at(99) });
        assert.deepEqual(byPath.get('/Clash'), budget({ userPath: '/Clash', maxUsd: 8 }));
        assert.deepEqual(byPath.get('/new'), config('/new', 1, 99));

        assert.deepEqual(await storage.budgets.replaceConfig([]), []);
        assert.deepEqual((await storage.budgets.list()).map((b) => b.userPath), ['/Clash', '/manual']);
      });
    });

  });
}
