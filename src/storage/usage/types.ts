/** Usage records: one row per request, written in batches off the request path, read summed. */

/** One request's usage, as the recorder hands it to storage. */
export interface UsageRecord {
  /** When the request started, epoch milliseconds. */
  timestampMs: number;
  userPath: string;
  /** Provider instance that executed the request (empty for cache hits served by the gateway). */
  provider: string;
  /** Model id as executed by the provider. */
  model: string;
  endpoint: string;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  /** Prompt tokens the provider served from its prompt cache (part of `promptTokens`). */
  cachedPromptTokens: number;
  /** What the request cost in US dollars (0 when its model has no price). */
  costUsd: number;
  cached: boolean;
  status: number;
  latencyMs: number;
  apiKeyId: string | null;
  /** The request's id (its `x-request-id`; a batch line's `request_id`); null when it has none. */
  requestId: string | null;
  /**
   * True when the token counts are the gateway's estimate, not the provider's report: a stream
   * that ended before its usage report (see src/tokens/estimate.ts).
   */
  estimated: boolean;
}

/**
 * `UsageRepository.insert` rejects with this when the database refused the records' values (a constraint,
 * a value out of range), not the write itself: the same records will fail again, whereas any
 * other error (connection lost, database locked) may pass on a retry.
 */
export class UsageRejectedError extends Error {
  constructor(cause: unknown) {
    super(`the database refused the usage record: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'UsageRejectedError';
  }
}

export interface UsageSummaryRow {
  provider: string;
  model: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  cachedPromptTokens: number;
  costUsd: number;
  cachedRequests: number;
  /** Requests whose token counts are estimates (`UsageRecord.estimated`). */
  estimatedRequests: number;
}

export interface UsageQuery {
  /**
   * Only records whose user path is this path or below it (`/a` covers `/a` and `/a/b`, not
   * `/ab`; `/` covers everything). Compared case-insensitively (ASCII), like rule matching.
   */
  userPathPrefix: string;
  from: Date;
  /** Exclusive. */
  to: Date;
}

/** What usage buckets are grouped by: the user path, the provider instance, or `provider/model`. */
export type UsageGroupBy = 'user_path' | 'provider' | 'model';

export interface UsageBucketQuery {
  from: Date;
  /** Exclusive. */
  to: Date;
  groupBy: UsageGroupBy;
  /** Bucket length in whole seconds (3600 for hours, 86400 for days), aligned to the Unix epoch, so buckets are UTC hours and days. */
  bucketSeconds: number;
}

/** The usage of one group in one time bucket. */
export interface UsageBucket {
  /** Start of the bucket. */
  start: Date;
  /** The group: a user path as recorded, a provider instance name, or `provider/model`. */
  key: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  /** What the bucket's requests cost in US dollars. */
  costUsd: number;
  /** Requests answered from the response cache. */
  cacheHits: number;
}

export interface UsageRepository {
  /**
   * Writes the records in one transaction: all of them or, when it rejects, none. The recorder
   * calls it off the request path with batches of a bounded size. Rejects with a
   * UsageRejectedError when the database refused the records' values.
   */
  insert(records: readonly UsageRecord[]): Promise<void>;
  /** Per provider and model, by provider then model (byte order). */
  summarize(query: UsageQuery): Promise<UsageSummaryRow[]>;
  /** Usage of every user path in time buckets, one row per bucket and group that has records, by start then key (byte order). */
  buckets(query: UsageBucketQuery): Promise<UsageBucket[]>;
  /** The summed `costUsd` of the records each query selects, in query order (one read for all). */
  sumCost(queries: readonly UsageQuery[]): Promise<number[]>;
}
