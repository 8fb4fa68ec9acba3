import type { FastifyInstance } from 'fastify';
import { roundUsd } from '../../shared/money.ts';
import type { RefusalBucket } from '../../storage/refusals/types.ts';
import type { UsageBucket, UsageBucketQuery } from '../../storage/usage/types.ts';
import type { HttpServices } from '../context.ts';
import { badRequest } from '../../errors/gateway-error.ts';
import { adminUsageQuery } from '../schemas/admin-usage.ts';
import { parseBody } from '../validation.ts';

const DAY_MS = 86_400_000;
const BUCKET_SECONDS = { hour: 3600, day: 86_400 } as const;
/**
 * Longest range a query may cover, in days, per bucket size: enough for a month of hours or a year
 * of days, and a bound on the answer's size (buckets × groups).
 */
const MAX_RANGE_DAYS = { hour: 31, day: 366 } as const;
const DEFAULT_RANGE_DAYS = 7;

/**
 * `GET /admin/usage?from&to&group_by&bucket`: every consumer's usage in UTC hour or day buckets,
 * for the dashboard's charts. `from` and `to` are whole UTC days, both included; by default the
 * last seven days up to today.
 */
export function registerAdminUsage(app: FastifyInstance, services: Pick<HttpServices, 'now' | 'usage' | 'storage' | 'refusals'>): void {
  app.get('/admin/usage', async (request) => {
    const query = parseBody(adminUsageQuery, request.query);
    const today = new Date(services.now()).toISOString().slice(0, 10);
    const to = dayStart(query.to ?? today) + DAY_MS;
    const from = query.from !== undefined ? dayStart(query.from) : to - DEFAULT_RANGE_DAYS * DAY_MS;
    if (from >= to) throw badRequest('from: must not be after to', 'from');
    const maxDays = MAX_RANGE_DAYS[query.bucket];
    if (to - from > maxDays * DAY_MS) throw badRequest(`from: the range may cover at most ${maxDays} days with bucket=${query.bucket}`, 'from');
    const bucketQuery: UsageBucketQuery = { from: new Date(from), to: new Date(to), groupBy: query.group_by, bucketSeconds: BUCKET_SECONDS[query.bucket] };
    // Recent records may still sit in the recorder's buffer; a usage query is rare enough to wait for them.
    await services.usage.flush();
    // Refusals are written at most once a minute: those not written yet come from memory.
    await services.refusals.settled();
    const [buckets, stored] = await Promise.all([services.storage.usage.buckets(bucketQuery), services.storage.refusals.buckets(bucketQuery)]);
    return { buckets: withRefused(buckets, [...stored, ...services.refusals.pending(bucketQuery)]).map(present) };
  });
}

function dayStart(day: string): number {
  return Date.parse(`${day}T00:00:00Z`);
}

type Bucket = UsageBucket & { refused: number };

/** The usage buckets with their refusals added; a group refused in a bucket where it has no usage gets a bucket of its own. */
function withRefused(usage: readonly UsageBucket[], refusals: readonly RefusalBucket[]): Bucket[] {
  const byId = new Map<string, Bucket>();
  const id = (start: Date, key: string) => `${start.getTime()}\u0000${key}`;
  for (const bucket of usage) byId.set(id(bucket.start, bucket.key), { ...bucket, refused: 0 });
  for (const { start, key, refused } of refusals) {
    const known = byId.get(id(start, key));
    if (known !== undefined) known.refused += refused;
    else byId.set(id(start, key), { start, key, requests: 0, promptTokens: 0, completionTokens: 0, costUsd: 0, cacheHits: 0, refused });
  }
  // By start, then key in byte order, as storage orders them.
  return [...byId.values()].sort((a, b) => a.start.getTime() - b.start.getTime() || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

function present(bucket: Bucket): Record<string, unknown> {
  return {
    // RFC 3339 UTC with whole seconds, like every other time the admin API shows.
    start: bucket.start.toISOString().slice(0, 19) + 'Z',
    key: bucket.key,
    requests: bucket.requests,
    prompt_tokens: bucket.promptTokens,
    completion_tokens: bucket.completionTokens,
    cost_usd: roundUsd(bucket.costUsd),
    cache_hits: bucket.cacheHits,
    refused: bucket.refused,
  };
}
