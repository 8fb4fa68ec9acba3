/** The files and batches repositories (src/storage/batch-files/). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { at, file, batch, withStorage, type Harness } from './harness.ts';

export function batchFilesContract(name: string, harness: Harness): void {
  describe(`Storage contract, files and batches: ${name}`, () => {
    it('stores files with their bytes, and remote files without', async () => {
      await withStorage(harness, async (storage) => {
        assert.equal(await storage.files.get('file-1'), undefined);
        await storage.files.insert(file('file-1'));
        await storage.files.insert(file('file-2', { content: null, provider: 'openai', providerFileId: 'file-up', bytes: 0, purpose: 'batch_output' }));
        assert.deepEqual(await storage.files.get('file-1'), file('file-1'));
        assert.deepEqual(await storage.files.get('file-2'), file('file-2', { content: null, provider: 'openai', providerFileId: 'file-up', bytes: 0, purpose: 'batch_output' }));
        await assert.rejects(storage.files.insert(file('file-1')));
        // A megabyte of arbitrary bytes round-trips unchanged.
        const big = Buffer.alloc(1024 * 1024, 7);
        await storage.files.insert(file('file-big', { content: big, bytes: big.length }));
        assert.ok((await storage.files.get('file-big'))?.content?.equals(big));
        // A file without an expiry round-trips too.
        await storage.files.insert(file('file-kept', { expiresAt: null }));
        assert.deepEqual(await storage.files.get('file-kept'), file('file-kept', { expiresAt: null }));
      });
    });

    it('deletes files, counts the live files of one user path, and removes expired ones', async () => {
      await withStorage(harness, async (storage) => {
        await storage.files.insert(file('f-a1', { userPath: '/team/a', bytes: 100, expiresAt: at(100) }));
        await storage.files.insert(file('f-a2', { userPath: '/Team/A', bytes: 20, expiresAt: at(200) }));
        await storage.files.insert(file('f-a3', { userPath: '/team/a', bytes: 3, expiresAt: null }));
        await storage.files.insert(file('f-child', { userPath: '/team/a/x', bytes: 1000, expiresAt: at(200) }));
        await storage.files.insert(file('f-b', { userPath: '/team/b', bytes: 7, expiresAt: at(50) }));
        // The path itself only (any case), not its children; expired files are not counted.
        assert.deepEqual(await storage.files.usage('/team/a', at(10)), { files: 3, bytes: 123 });
        assert.deepEqual(await storage.files.usage('/TEAM/a', at(100)), { files: 2, bytes: 23 });
        assert.deepEqual(await storage.files.usage('/nobody', at(10)), { files: 0, bytes: 0 });

        assert.equal(await storage.files.delete('f-a2'), true);
        assert.equal(await storage.files.delete('f-a2'), false);
        assert.equal(await storage.files.get('f-a2'), undefined);
        assert.deepEqual(await storage.files.usage('/team/a', at(10)), { files: 2, bytes: 103 });

        // Expiry at or before the time given: gone; later ones and those without expiry stay.
        assert.equal(await storage.files.deleteExpired(at(100)), 2);
        assert.equal(await storage.files.get('f-a1'), undefined);
        assert.equal(await storage.files.get('f-b'), undefined);
        assert.ok(await storage.files.get('f-a3'));
        assert.ok(await storage.files.get('f-child'));
        assert.equal(await storage.files.deleteExpired(at(100)), 0);
      });
    });

    it('inserts, updates, reads and lists batches newest first, by subtree, with paging', async () => {
      await withStorage(harness, async (storage) => {
        await storage.batches.insert(batch('b1'));
        await storage.batches.insert(batch('b2', { userPath: '/team/b' }));
        await storage.batches.insert(batch('b3', { userPath: '/Team/a/x', metadata: null }));
        await storage.batches.insert(batch('b4', { userPath: '/team_z' }));
        await assert.rejects(storage.batches.insert(batch('b1')));
        assert.deepEqual(await storage.batches.get('b1'), batch('b1'));
        assert.equal(await storage.batches.get('nope'), undefined);

        const done = batch('b1', {
          status: 'completed',
          outputFileId: 'file-out',
          requestCounts: { total: 2, completed: 1, failed: 1 },
          errors: [{ code: 'invalid', message: 'bad line', param: 'body', line: 2 }],
          times: { expires_at: 86_400, completed_at: 99 },
          providerBatchId: 'batch_up',
          updatedAt: at(9),
        });
        assert.equal(await storage.batches.update(done), true);
        assert.equal(await storage.batches.update(batch('nope')), false);
        assert.deepEqual(await storage.batches.get('b1'), done);

        const ids = async (userPathPrefix: string, after?: string, limit = 10): Promise<string[]> =>
          (await storage.batches.list({ userPathPrefix, limit, ...(after === undefined ? {} : { after }) })).map((b) => b.id);
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

  });
}
