import { isUnder, subtreeMatch } from '../../user-path/user-path.ts';
import { byText } from '../shared/values.ts';
import { usageGroupKey } from './rows.ts';
import type { UsageBucket, UsageBucketQuery, UsageQuery, UsageRecord, UsageRepository, UsageSummaryRow } from './types.ts';

export class MemoryUsage implements UsageRepository {
  readonly #records: UsageRecord[] = [];

  async insert(records: readonly UsageRecord[]): Promise<void> {
    for (const r of records) this.#records.push({ ...r });
  }

  async summarize(query: UsageQuery): Promise<UsageSummaryRow[]> {
    const groups = new Map<string, UsageSummaryRow>();
    for (const r of this.#select(query)) {
      const id = `${r.provider}\u0000${r.model}`;
      let row = groups.get(id);
      if (!row) {
        row = {
          provider: r.provider,
          model: r.model,
          requests: 0,
          promptTokens: 0,
          completionTokens: 0,
          totalTokens: 0,
          cachedPromptTokens: 0,
          costUsd: 0,
          cachedRequests: 0,
          estimatedRequests: 0,
        };
        groups.set(id, row);
      }
      row.requests++;
      row.promptTokens += r.promptTokens;
      row.completionTokens += r.completionTokens;
      row.totalTokens += r.totalTokens;
      row.cachedPromptTokens += r.cachedPromptTokens;
      row.costUsd += r.costUsd;
      if (r.cached) row.cachedRequests++;
      if (r.estimated) row.estimatedRequests++;
    }
    return [...groups.values()].sort((a, b) => byText(a.provider, b.provider) || byText(a.model, b.model));
  }

  async buckets(query: UsageBucketQuery): Promise<UsageBucket[]> {
    const from = query.from.getTime();
    const to = query.to.getTime();
    const bucketMs = query.bucketSeconds * 1000;
    const groups = new Map<string, UsageBucket>();
    for (const r of this.#records) {
      const ts = r.timestampMs;
      if (ts < from || ts >= to) continue;
      const start = Math.floor(ts / bucketMs) * bucketMs;
      const key = usageGroupKey(query.groupBy, r);
      const id = `${start}\u0000${key}`;
      let bucket = groups.get(id);
      if (!bucket) {
        bucket = { start: new Date(start), key, requests: 0, promptTokens: 0, completionTokens: 0, costUsd: 0, cacheHits: 0 };
        groups.set(id, bucket);
      }
      bucket.requests++;
      bucket.promptTokens += r.promptTokens;
      bucket.completionTokens += r.completionTokens;
      bucket.costUsd += r.costUsd;
      if (r.cached) bucket.cacheHits++;
    }
    return [...groups.values()].sort((a, b) => a.start.getTime() - b.start.getTime() || byText(a.key, b.key));
  }

  async sumCost(queries: readonly UsageQuery[]): Promise<number[]> {
    return queries.map((query) => {
      let cost = 0;
      for (const r of this.#select(query)) cost += r.costUsd;
      return cost;
    });
  }

  /** The records of the query's subtree and time window. */
  *#select(query: UsageQuery): Iterable<UsageRecord> {
    const prefix = subtreeMatch(query.userPathPrefix)?.exact ?? '/';
    const from = query.from.getTime();
    const to = query.to.getTime();
    for (const r of this.#records) {
      if (r.timestampMs < from || r.timestampMs >= to) continue;
      if (!isUnder(r.userPath, prefix)) continue;
      yield r;
    }
  }
}
