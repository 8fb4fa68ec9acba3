/** The keys repository (src/storage/keys/), and the watchers of keys. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { key, withStorage, type Harness } from './harness.ts';

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
      const store = await harness.freshStore();
      const [writer, watcher] = [await store.open(), await store.open()];
      let calls = 0;
      const stop = await watcher.watch('keys', () => calls++);
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
        await writer.keys.insert(key('k1'));
        await created;
        const revoked = told('a revocation');
        assert.equal(await writer.keys.delete('k1'), true);
        await revoked;
        await stop();
        const after = calls;
        await writer.keys.insert(key('k2'));
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
