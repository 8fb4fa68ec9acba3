/** The saved counters repository (src/storage/counters/). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { saved, TEAM_DAY, TEAM_OWN, withStorage, type Harness } from './harness.ts';

export function countersContract(name: string, harness: Harness): void {
  describe(`Storage contract, saved counters: ${name}`, () => {
    it('writes, replaces and removes saved counters', async () => {
      await withStorage(harness, async (storage) => {
        assert.deepEqual(await storage.counters.list(), []);
        const big = Number.MAX_SAFE_INTEGER;
        await storage.counters.write([
          saved(TEAM_DAY),
          saved(TEAM_OWN, { windowStart: 1_735_603_200 }),
          saved(`${TEAM_OWN}alice`, { requestsCurrent: big, tokensPrevious: big }),
          saved(`${TEAM_OWN}bob`),
          saved('provider\u0000open:ai\u000060', { periodSeconds: 60, windowStart: 1_735_689_660 }),
        ]);
        const byKey = async () => new Map((await storage.counters.list()).map((c) => [c.key, c]));
        let listed = await byKey();
        assert.equal(listed.size, 5);
        assert.deepEqual(listed.get(`${TEAM_OWN}alice`), saved(`${TEAM_OWN}alice`, { requestsCurrent: big, tokensPrevious: big }));
        assert.deepEqual(listed.get(TEAM_OWN), saved(TEAM_OWN, { windowStart: 1_735_603_200 }));

        // Newer windows replace the saved ones; removals go first.
        await storage.counters.write([saved(TEAM_DAY, { requestsCurrent: 9 }), saved(`${TEAM_OWN}carol`)], { keys: [`${TEAM_OWN}bob`, 'nothing'] });
        listed = await byKey();
        assert.deepEqual([...listed.keys()].sort(), [TEAM_DAY, TEAM_OWN, `${TEAM_OWN}alice`, `${TEAM_OWN}carol`, 'provider\u0000open:ai\u000060'].sort());
        assert.equal(listed.get(TEAM_DAY)?.requestsCurrent, 9);

        // A per-child rule's own key as a prefix takes its children with it, and nothing else.
        await storage.counters.write([], { prefixes: [TEAM_OWN] });
        assert.deepEqual([...(await byKey()).keys()].sort(), [TEAM_DAY, 'provider\u0000open:ai\u000060'].sort());

        await storage.counters.write([saved(`${TEAM_OWN}dave`)], { all: true });
        assert.deepEqual(await storage.counters.list(), [saved(`${TEAM_OWN}dave`)]);
      });
    });

  });
}
