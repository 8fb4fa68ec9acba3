/** The refusal counts repository (src/storage/refusals/). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RefusalBucket, RefusalCount } from '../../src/storage/refusals/types.ts';
import { at, withStorage, type Harness } from './harness.ts';

export function refusalsContract(name: string, harness: Harness): void {
  describe(`Storage contract, refusal counts: ${name}`, () => {
    it('adds refusal counts to the stored ones by key, and buckets them like usage', async () => {
      await withStorage(harness, async (storage) => {
        const count = (over: Partial<RefusalCount>): RefusalCount => ({
          minuteMs: at(0).getTime(), userPath: '/team/a', provider: 'openai', model: 'gpt-4o', scope: 'user_path', subject: '/team', period: 'minute', count: 1, ...over,
        });
        await storage.refusals.add([]);
        await storage.refusals.add([
          count({ count: 5 }),
          count({ userPath: '/team/b', count: 2 }),
          count({ scope: 'budget', subject: '/team', period: 'day', count: 1 }),
          count({ minuteMs: at(60).getTime(), provider: 'anthropic', model: 'claude', scope: 'provider', subject: 'anthropic', count: 4 }),
          count({ minuteMs: at(3600).getTime(), userPath: '/batch', provider: '', model: '', count: 3 }),
          count({ minuteMs: at(-60).getTime(), count: 100 }), // before the window
        ]);
        // A second write of the same keys (another minute's flush, another replica) adds to them.
        await storage.refusals.add([count({ count: 2 }), count({ minuteMs: at(3600).getTime(), userPath: '/batch', provider: '', model: '', count: 1 })]);
        const window = { from: at(0), to: at(86_400) };
        const plain = (buckets: RefusalBucket[]) => buckets.map((b) => [b.start.toISOString(), b.key, b.refused]);
        assert.deepEqual(plain(await storage.refusals.buckets({ ...window, groupBy: 'user_path', bucketSeconds: 3600 })), [
          ['2025-01-01T00:00:00.000Z', '/team/a', 12],
          ['2025-01-01T00:00:00.000Z', '/team/b', 2],
          ['2025-01-01T01:00:00.000Z', '/batch', 4],
        ]);
        assert.deepEqual(plain(await storage.refusals.buckets({ ...window, groupBy: 'model', bucketSeconds: 86_400 })), [
          ['2025-01-01T00:00:00.000Z', '', 4],
          ['2025-01-01T00:00:00.000Z', 'anthropic/claude', 4],
          ['2025-01-01T00:00:00.000Z', 'openai/gpt-4o', 10],
        ]);
        assert.deepEqual(plain(await storage.refusals.buckets({ ...window, groupBy: 'provider', bucketSeconds: 86_400 })), [
          ['2025-01-01T00:00:00.000Z', '', 4],
          ['2025-01-01T00:00:00.000Z', 'anthropic', 4],
          ['2025-01-01T00:00:00.000Z', 'openai', 10],
        ]);
        assert.deepEqual(await storage.refusals.buckets({ from: at(-3600), to: at(-60), groupBy: 'user_path', bucketSeconds: 3600 }), []);
      });
    });

  });
}
