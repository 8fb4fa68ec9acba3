/** The keys repository (src/storage/keys/), and the watchers of keys. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { assertWatcherTold, key, withStorage, type Harness } from './harness.ts';

export function keysContract(name: string, harness: Harness): void {
  describe(`Storage contract, keys: ${name}`, () => {
    it('inserts, lists and deletes API keys', async () => {
      await withStorage(harness, async (storage) => {
        assert.deepEqual(await storage.keys.list(), []);
        await storage.keys.insert(key('k2', { userPath: null, name: 'unbound' }));
        await storage.keys.insert(key('k1'));
        const keys = await storage.keys.list();
        assert.deepEqual(keys, [key('k1'), key('k2', { userPath: null, name: 'unbound' })]);
        assert.ok(keys[0]?.createdAt instanceof Date);

        assert.equal(await storage.keys.delete('k1'), true);
        assert.equal(await storage.keys.delete('k1'), false);
        assert.equal(await storage.keys.delete('nope'), false);
        assert.deepEqual(
          (await storage.keys.list()).map((k) => k.id),
          ['k2'],
        );
      });
    });

    it('tells a watcher of the keys of a creation and a revocation made through another connection', async () => {
      await assertWatcherTold(harness, 'keys', [
        ['a creation', (writer) => writer.keys.insert(key('k1'))],
        ['a revocation', async (writer) => assert.equal(await writer.keys.delete('k1'), true)],
      ], (writer) => writer.keys.insert(key('k2')));
    });

    it('keeps each key\'s max_priority', async () => {
      await withStorage(harness, async (storage) => {
        await storage.keys.insert(key('k1', { maxPriority: 'high' }));
        await storage.keys.insert(key('k2', { maxPriority: 'low' }));
        await storage.keys.insert(key('k3'));
        assert.deepEqual((await storage.keys.list()).map((k) => [k.id, k.maxPriority]), [['k1', 'high'], ['k2', 'low'], ['k3', 'normal']]);
      });
    });

    it('rejects a duplicate key hash', async () => {
      await withStorage(harness, async (storage) => {
        await storage.keys.insert(key('k1', { keyHash: 'same' }));
        await assert.rejects(storage.keys.insert(key('k2', { keyHash: 'same' })));
        assert.equal((await storage.keys.list()).length, 1);
      });
    });

  });
}
