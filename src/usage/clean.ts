/**
 * The last gate before a usage record is queued: every path that records usage (model requests,
 * passthrough, batches, realtime) passes here, so whatever slipped past the checks where a value
 * entered, the record is one every database can store.
 */
import { MAX_USD } from '../budgets/types.ts';
import { storableText, tokenCount } from '../shared/values.ts';
import type { UsageRecord } from '../storage/usage/types.ts';

/** PostgreSQL `integer` (latency, status). */
const MAX_INT32 = 2_147_483_647;

/**
 * The record with storable values: text without NUL or lone surrogates; token counts whole and
 * within MAX_TOKEN_COUNT (see tokenCount); a cost that is finite and at most MAX_USD (so an absurd cost still
 * reaches every budget, the cautious reading; 0 when absent); integers where the schema holds integers.
 */
export function cleanRecord(r: Omit<UsageRecord, 'costUsd'> & { costUsd?: number }): UsageRecord {
  const promptTokens = count(r.promptTokens);
  return {
    timestampMs: Number.isFinite(r.timestampMs) ? Math.round(r.timestampMs) : Date.now(),
    userPath: storableText(r.userPath),
    provider: storableText(r.provider),
    model: storableText(r.model),
    endpoint: storableText(r.endpoint),
    promptTokens,
    completionTokens: count(r.completionTokens),
    totalTokens: count(r.totalTokens),
    // Part of the prompt tokens, never more (pricing relies on it).
    cachedPromptTokens: Math.min(count(r.cachedPromptTokens), promptTokens),
    costUsd: storableCost(r.costUsd ?? 0),
    cached: r.cached === true,
    status: integer(r.status, 0, 999),
    latencyMs: integer(r.latencyMs, 0, MAX_INT32),
    apiKeyId: r.apiKeyId === null ? null : storableText(r.apiKeyId),
    requestId: r.requestId === null ? null : storableText(r.requestId),
    estimated: r.estimated === true,
  };
}

function count(value: number): number {
  return tokenCount(value) ?? 0;
}

/** A cost from 0 to MAX_USD; NaN is 0. */
export function storableCost(value: number): number {
  if (Number.isNaN(value) || value <= 0) return 0;
  return Math.min(value, MAX_USD);
}

function integer(value: number, min: number, max: number): number {
  if (Number.isNaN(value)) return min;
  return Math.min(max, Math.max(min, Math.round(value)));
}
