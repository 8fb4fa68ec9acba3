/** The usage repository (src/storage/usage/). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { UsageBucket } from '../../src/storage/usage/types.ts';
import { at, usage, withStorage, type Harness } from './harness.ts';

export function usageContract(name: string, harness: Harness): void {
  describe(`Storage contract, usage: ${name}`, () => {
    it('inserts usage and summarises by user-path subtree', async () => {
      await withStorage(harness, async (storage) => {
        await storage.usage.insert([]);
        await storage.usage.insert([
          usage({ userPath: '/a', cachedPromptTokens: 4, costUsd: 0.25 }),
          usage({ userPath: '/a/b', promptTokens: 1, completionTokens: 2, totalTokens: 3, cached: true }),
          usage({ userPath: '/A/c', model: 'other', costUsd: 0.000123456789 }),
          usage({ userPath: '/ab' }),
          usage({ userPath: '/', provider: 'anthropic', model: 'claude' }),
          usage({ userPath: '/a', timestampMs: at(1000).getTime() }), // outside the window
          usage({ userPath: '/a_x' }),
          usage({ userPath: '/a%y/z' }),
        ]);
        const window = { from: at(0), to: at(1000) }; // `to` is exclusive

        const a = await storage.usage.summarize({ userPathPrefix: '/a', ...window });
        assert.deepEqual(a, [
          {
            provider: 'openai',
            model: 'gpt-4o-mini',
            requests: 2,
            promptTokens: 11,
            completionTokens: 7,
            totalTokens: 18,
            cachedPromptTokens: 4,
            costUsd: 0.25,
            cachedRequests: 1,
            estimatedRequests: 0,
          },
          {
            provider: 'openai',
            model: 'other',
            requests: 1,
            promptTokens: 10,
            completionTokens: 5,
            totalTokens: 15,
            cachedPromptTokens: 0,
            costUsd: 0.000123456789,
            cachedRequests: 0,
            estimatedRequests: 0,
          },
        ]);

        const all = await storage.usage.summarize({ userPathPrefix: '/', ...window });
        assert.deepEqual(
          all.map((r) => [r.provider, r.model, r.requests]),
          [
            ['anthropic', 'claude', 1],
            ['openai', 'gpt-4o-mini', 5],
            ['openai', 'other', 1],
          ],
        );

        // LIKE wildcards in a path match literally.
        const underscore = await storage.usage.summarize({ userPathPrefix: '/a_x', ...window });
        assert.deepEqual(underscore.map((r) => r.requests), [1]);
        const percent = await storage.usage.summarize({ userPathPrefix: '/a%y', ...window });
        assert.deepEqual(percent.map((r) => r.requests), [1]);
        assert.deepEqual(await storage.usage.summarize({ userPathPrefix: '/a%', ...window }), []);

        assert.deepEqual(await storage.usage.summarize({ userPathPrefix: '/nobody', ...window }), []);
        assert.deepEqual(
          await storage.usage.summarize({ userPathPrefix: '/a', from: at(2000), to: at(3000) }),
          [],
        );
      });
    });

    it('buckets usage by hour or day, grouped by user path, provider or provider/model', async () => {
      await withStorage(harness, async (storage) => {
        const hour = 3600;
        const records = [
          usage({ timestampMs: at(10).getTime(), userPath: '/a', cached: true, promptTokens: 0, completionTokens: 0, totalTokens: 0 }),
          usage({ timestampMs: at(hour - 1).getTime(), userPath: '/b', provider: 'anthropic', model: 'claude' }),
          usage({ timestampMs: at(hour).getTime(), userPath: '/a', promptTokens: 1, completionTokens: 2, totalTokens: 3 }),
          usage({ timestampMs: at(hour + 59).getTime(), userPath: '/a', model: 'other' }),
          usage({ timestampMs: at(26 * hour).getTime(), userPath: '/a' }), // the next day
          usage({ timestampMs: at(-1).getTime(), userPath: '/a' }), // before the window
          usage({ timestampMs: at(48 * hour).getTime(), userPath: '/a' }), // `to` is exclusive
        ];
        await storage.usage.insert(records);
        const window = { from: at(0), to: at(48 * hour) };
        const plain = (buckets: UsageBucket[]) =>
          buckets.map((b) => [b.start.toISOString(), b.key, b.requests, b.promptTokens, b.completionTokens, b.cacheHits]);

        assert.deepEqual(plain(await storage.usage.buckets({ ...window, groupBy: 'user_path', bucketSeconds: hour })), [
          ['2025-01-01T00:00:00.000Z', '/a', 1, 0, 0, 1],
          ['2025-01-01T00:00:00.000Z', '/b', 1, 10, 5, 0],
          ['2025-01-01T01:00:00.000Z', '/a', 2, 11, 7, 0],
          ['2025-01-02T02:00:00.000Z', '/a', 1, 10, 5, 0],
        ]);
        assert.deepEqual(plain(await storage.usage.buckets({ ...window, groupBy: 'provider', bucketSeconds: 86_400 })), [
          ['2025-01-01T00:00:00.000Z', 'anthropic', 1, 10, 5, 0],
          ['2025-01-01T00:00:00.000Z', 'openai', 3, 11, 7, 1],
          ['2025-01-02T00:00:00.000Z', 'openai', 1, 10, 5, 0],
        ]);
        assert.deepEqual(plain(await storage.usage.buckets({ ...window, groupBy: 'model', bucketSeconds: 86_400 })), [
          ['2025-01-01T00:00:00.000Z', 'anthropic/claude', 1, 10, 5, 0],
          ['2025-01-01T00:00:00.000Z', 'openai/gpt-4o-mini', 2, 1, 2, 1],
          ['2025-01-01T00:00:00.000Z', 'openai/other', 1, 10, 5, 0],
          ['2025-01-02T00:00:00.000Z', 'openai/gpt-4o-mini', 1, 10, 5, 0],
        ]);
        assert.deepEqual(await storage.usage.buckets({ from: at(100 * hour), to: at(200 * hour), groupBy: 'user_path', bucketSeconds: hour }), []);
      });
    });

    it('buckets sum the costs of their records', async () => {
      await withStorage(harness, async (storage) => {
        await storage.usage.insert([
          usage({ userPath: '/a', costUsd: 0.5 }),
          usage({ userPath: '/a', costUsd: 0.25, timestampMs: at(20).getTime() }),
          usage({ userPath: '/b', costUsd: 0.125 }),
          usage({ userPath: '/b', costUsd: 1, timestampMs: at(3600).getTime() }),
        ]);
        const buckets = await storage.usage.buckets({ from: at(0), to: at(7200), groupBy: 'user_path', bucketSeconds: 3600 });
        assert.deepEqual(buckets.map((b) => [b.start.toISOString(), b.key, b.costUsd]), [
          ['2025-01-01T00:00:00.000Z', '/a', 0.75],
          ['2025-01-01T00:00:00.000Z', '/b', 0.125],
          ['2025-01-01T01:00:00.000Z', '/b', 1],
        ]);
      });
    });

    it('sums costs per subtree and window, one result per query in query order', async () => {
      await withStorage(harness, async (storage) => {
        assert.deepEqual(await storage.usage.sumCost([]), []);
        await storage.usage.insert([
          usage({ userPath: '/team', costUsd: 1.5 }),
          usage({ userPath: '/Team/a', costUsd: 0.25, timestampMs: at(20).getTime() }),
          usage({ userPath: '/team/a/x', costUsd: 0.125 }),
          usage({ userPath: '/teams', costUsd: 100 }),
          usage({ userPath: '/team_', costUsd: 1000 }),
          usage({ userPath: '/team', costUsd: 10_000, timestampMs: at(60).getTime() }), // after every window below
          usage({ userPath: '/other', costUsd: 0.0000001 }),
        ]);
        const window = { from: at(0), to: at(60) }; // `to` is exclusive
        assert.deepEqual(
          await storage.usage.sumCost([
            { userPathPrefix: '/team', ...window },
            { userPathPrefix: '/TEAM/A', ...window },
            { userPathPrefix: '/team/a', from: at(15), to: at(60) },
            { userPathPrefix: '/nobody', ...window },
            { userPathPrefix: '/team', from: at(0), to: at(61) },
          ]),
          [1.875, 0.375, 0.25, 0, 10_001.875],
        );
        const [all] = await storage.usage.sumCost([{ userPathPrefix: '/', ...window }]);
        assert.equal(Math.round((all ?? 0) * 1e9), 1101875000100);
      });
    });

    it('keeps each record\'s request id and estimated flag; summaries count the estimated requests', async () => {
      await withStorage(harness, async (storage) => {
        await storage.usage.insert([
          usage({ requestId: 'req-1', estimated: true }),
          usage({ requestId: null }),
          usage({ requestId: 'req-3', estimated: true, model: 'other' }),
        ]);
        const rows = await storage.usage.summarize({ userPathPrefix: '/', from: at(0), to: at(100) });
        assert.deepEqual(rows.map((r) => [r.model, r.requests, r.estimatedRequests]), [['gpt-4o-mini', 2, 1], ['other', 1, 1]]);
      });
    });

    it('inserts a large usage batch', async () => {
      await withStorage(harness, async (storage) => {
        const records = Array.from({ length: 2500 }, (_, i) =>
          usage({ userPath: `/bulk/${i % 10}`, totalTokens: 2, latencyMs: i + 0.4, apiKeyId: 'k1' }),
        );
        await storage.usage.insert(records);
        const rows = await storage.usage.summarize({ userPathPrefix: '/bulk', from: at(0), to: at(100) });
        assert.equal(rows[0]?.requests, 2500);
        assert.equal(rows[0]?.totalTokens, 5000);
      });
    });

  });
}
