/** The usage_records table, as both SQL repositories read and write it. */
import { toNumber } from '../shared/values.ts';
import type { UsageBucket, UsageGroupBy, UsageRecord, UsageSummaryRow } from './types.ts';

export const USAGE_COLUMNS =
  'ts, user_path, provider, model, endpoint, prompt_tokens, completion_tokens, total_tokens, cached_prompt_tokens, cost_usd, cached, status, latency_ms, api_key_id, request_id, estimated';

/**
 * The SQL expression of a usage group's key in `usage_records`. A fixed whitelist: the group
 * names the caller passes never reach the SQL text.
 */
export const USAGE_GROUP_KEY_SQL: Readonly<Record<UsageGroupBy, string>> = {
  user_path: 'user_path',
  provider: 'provider',
  // Qualified: the same model id on two providers is two different things to an operator.
  model: "provider || '/' || model",
};

/** The group key of one record, as USAGE_GROUP_KEY_SQL computes it. */
export function usageGroupKey(groupBy: UsageGroupBy, record: { userPath: string; provider: string; model: string }): string {
  switch (groupBy) {
    case 'user_path':
      return record.userPath;
    case 'provider':
      return record.provider;
    case 'model':
      return `${record.provider}/${record.model}`;
  }
}

/** A summary's sums, as both databases spell them (they spell the counts of cached and estimated requests each their own way). */
export const USAGE_SUMS = `COUNT(*) AS requests,
  SUM(prompt_tokens) AS prompt_tokens,
  SUM(completion_tokens) AS completion_tokens,
  SUM(total_tokens) AS total_tokens,
  SUM(cached_prompt_tokens) AS cached_prompt_tokens,
  SUM(cost_usd) AS cost_usd`;

/** A summary row: counts are numbers (SQLite) or bigint text (PostgreSQL); sums of no rows are NULL. */
export interface SummaryRow {
  provider: string;
  model: string;
  requests: number | string;
  prompt_tokens: number | string | null;
  completion_tokens: number | string | null;
  total_tokens: number | string | null;
  cached_prompt_tokens: number | string | null;
  cost_usd: number | null;
  cached_requests: number | string | null;
  estimated_requests: number | string | null;
}

export function summaryFromRow(row: SummaryRow): UsageSummaryRow {
  return {
    provider: row.provider,
    model: row.model,
    requests: toNumber(row.requests),
    promptTokens: toNumber(row.prompt_tokens ?? 0),
    completionTokens: toNumber(row.completion_tokens ?? 0),
    totalTokens: toNumber(row.total_tokens ?? 0),
    cachedPromptTokens: toNumber(row.cached_prompt_tokens ?? 0),
    costUsd: row.cost_usd ?? 0,
    cachedRequests: toNumber(row.cached_requests ?? 0),
    estimatedRequests: toNumber(row.estimated_requests ?? 0),
  };
}

/** A bucket row; its start is in whatever unit the query computed, turned to a Date by the caller. */
export interface BucketRow {
  key: string;
  requests: number | string;
  prompt_tokens: number | string;
  completion_tokens: number | string;
  cost_usd: number;
  cache_hits: number | string;
}

export function bucketFromRow(start: Date, row: BucketRow): UsageBucket {
  return {
    start,
    key: row.key,
    requests: toNumber(row.requests),
    promptTokens: toNumber(row.prompt_tokens),
    completionTokens: toNumber(row.completion_tokens),
    costUsd: row.cost_usd,
    cacheHits: toNumber(row.cache_hits),
  };
}

/** The unnest() casts of USAGE_COLUMNS in PostgreSQL, and each record's value in that order (also SQLite's parameters). */
export const USAGE_PG_TYPES = [
  'timestamptz', 'text', 'text', 'text', 'text', 'bigint', 'bigint', 'bigint', 'bigint', 'double precision', 'boolean',
  'integer', 'integer', 'text', 'text', 'boolean',
] as const;

export function usageParams(r: UsageRecord): unknown[] {
  return [
    new Date(r.timestampMs), r.userPath, r.provider, r.model, r.endpoint, r.promptTokens, r.completionTokens,
    r.totalTokens, r.cachedPromptTokens, r.costUsd, r.cached, r.status, Math.round(r.latencyMs), r.apiKeyId,
    r.requestId, r.estimated,
  ];
}
