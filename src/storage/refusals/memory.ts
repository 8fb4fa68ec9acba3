import type { UsageBucketQuery } from '../usage/types.ts';
import { bucketCounts, refusalKey } from './rows.ts';
import type { RefusalBucket, RefusalCount, RefusalRepository } from './types.ts';

export class MemoryRefusals implements RefusalRepository {
  readonly #counts = new Map<string, RefusalCount>();

  async add(counts: readonly RefusalCount[]): Promise<void> {
    for (const count of counts) {
      const key = refusalKey(count);
      const stored = this.#counts.get(key);
      if (stored === undefined) this.#counts.set(key, { ...count });
      else stored.count += count.count;
    }
  }

  async buckets(query: UsageBucketQuery): Promise<RefusalBucket[]> {
    return bucketCounts(this.#counts.values(), query);
  }
}
