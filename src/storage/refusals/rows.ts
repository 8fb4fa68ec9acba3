/**
 * The refusals table, as both SQL repositories read and write it, and the bucketing the in-memory
 * repository and the refusal log (src/usage/refusals.ts) share.
 */
import type { UsageBucketQuery, UsageGroupBy } from '../usage/types.ts';
import type { RefusalBucket, RefusalCount } from './types.ts';

/** The columns of the refusals table that make a row's key, in the order of its primary key. */
export const REFUSAL_KEY_COLUMNS = 'minute, user_path, provider, model, scope, subject, period';

/**
 * The SQL expression of each group key, as USAGE_GROUP_KEY_SQL for usage records (../usage/rows.ts); a refusal that
 * named no provider (a batch submission) has the empty key.
 */
export const REFUSAL_GROUP_KEY_SQL: Readonly<Record<UsageGroupBy, string>> = {
  user_path: 'user_path',
  provider: 'provider',
  model: "CASE WHEN provider = '' THEN '' ELSE provider || '/' || model END",
};

/** The group key of one count, as REFUSAL_GROUP_KEY_SQL computes it. */
export function refusalGroupKey(groupBy: UsageGroupBy, count: Pick<RefusalCount, 'userPath' | 'provider' | 'model'>): string {
  switch (groupBy) {
    case 'user_path':
      return count.userPath;
    case 'provider':
      return count.provider;
    case 'model':
      return count.provider === '' ? '' : `${count.provider}/${count.model}`;
  }
}

/** The key of a count: everything but the count itself. */
export function refusalKey(count: Omit<RefusalCount, 'count'>): string {
  return [count.minuteMs, count.userPath, count.provider, count.model, count.scope, count.subject, count.period].join('\u0000');
}

/** Sums counts into buckets of a query, sorted by start then key (byte order). */
export function bucketCounts(counts: Iterable<RefusalCount>, query: UsageBucketQuery): RefusalBucket[] {
  const from = query.from.getTime();
  const to = query.to.getTime();
  const bucketMs = query.bucketSeconds * 1000;
  const buckets = new Map<string, RefusalBucket>();
  for (const count of counts) {
    if (count.minuteMs < from || count.minuteMs >= to) continue;
    const start = Math.floor(count.minuteMs / bucketMs) * bucketMs;
    const key = refusalGroupKey(query.groupBy, count);
    const id = `${start}\u0000${key}`;
    const bucket = buckets.get(id);
    if (bucket === undefined) buckets.set(id, { start: new Date(start), key, refused: count.count });
    else bucket.refused += count.count;
  }
  return [...buckets.values()].sort((a, b) => a.start.getTime() - b.start.getTime() || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}
