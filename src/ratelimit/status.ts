/**
 * Status records for the admin API (`GET /admin/rate-limits`) and the self-service
 * usage view. Field names are the wire names, so the HTTP layer can serialise as is.
 */
import type { CompiledRule } from './rules.ts';
import type { CounterRow } from './store.ts';
import type { RuleSource, Scope } from './types.ts';

/**
 * One rule with its live counters.
 * - `user_path`: the subject for `user_path` rules, `''` for provider/model rules (kept
 *   present so every record has the same shape).
 * - Windowed rules carry `requests_used`/`tokens_used` (sliding estimates) and
 *   `window_start`/`window_end` (the current fixed window); `*_remaining` is
 *   max(cap − used, 0) and only present when that cap is.
 * - Concurrent rules carry `in_flight`, with `requests_used` = in_flight and
 *   `requests_remaining` = max(cap − in_flight, 0); no token or window fields.
 * - Times are RFC 3339 UTC without fractional seconds (`2025-01-01T00:00:00Z`).
 */
export interface RuleStatus {
  scope: Scope;
  subject: string;
  user_path: string;
  source: RuleSource;
  period_label: string;
  period_seconds: number;
  max_requests?: number;
  max_tokens?: number;
  requests_used?: number;
  requests_remaining?: number;
  tokens_used?: number;
  tokens_remaining?: number;
  in_flight?: number;
  window_start?: string;
  window_end?: string;
  created_at: string;
  updated_at: string;
}

/** A user-path rule governing a caller, for `/v1/usage`. */
export interface UserPathUsage extends RuleStatus {
  /** True when this rule would refuse a request right now. */
  exhausted: boolean;
}

/** RFC 3339 UTC with whole seconds: `2025-01-01T00:00:00Z`. */
export function formatTimestamp(epochSeconds: number): string {
  return new Date(epochSeconds * 1000).toISOString().slice(0, 19) + 'Z';
}

export function formatDate(date: Date): string {
  return formatTimestamp(Math.floor(date.getTime() / 1000));
}

/** Build a record from the rule and its counters. */
export function ruleStatus(rule: CompiledRule, row: CounterRow): RuleStatus {
  const def = rule.definition;
  const status: RuleStatus = {
    scope: def.scope,
    subject: def.subject,
    user_path: def.scope === 'user_path' ? def.subject : '',
    source: def.source,
    period_label: rule.label,
    period_seconds: def.periodSeconds,
  } as RuleStatus; // timestamps are appended last so records read in the specification's field order
  if (def.maxRequests !== undefined) status.max_requests = def.maxRequests;
  if (def.maxTokens !== undefined) status.max_tokens = def.maxTokens;
  if (rule.concurrent) {
    const inFlight = row.inFlight;
    status.in_flight = inFlight;
    status.requests_used = inFlight;
    status.requests_remaining = Math.max(rule.maxRequests - inFlight, 0);
    return withTimestamps(status, def.createdAt, def.updatedAt);
  }
  const period = def.periodSeconds;
  const start = row.windowStart;
  const requestsUsed = row.requestsUsed;
  const tokensUsed = row.tokensUsed;
  status.requests_used = requestsUsed;
  if (def.maxRequests !== undefined) status.requests_remaining = Math.max(def.maxRequests - requestsUsed, 0);
  status.tokens_used = tokensUsed;
  if (def.maxTokens !== undefined) status.tokens_remaining = Math.max(def.maxTokens - tokensUsed, 0);
  status.window_start = formatTimestamp(start);
  status.window_end = formatTimestamp(start + period);
  return withTimestamps(status, def.createdAt, def.updatedAt);
}

function withTimestamps(status: RuleStatus, createdAt: Date, updatedAt: Date): RuleStatus {
  status.created_at = formatDate(createdAt);
  status.updated_at = formatDate(updatedAt);
  return status;
}

/** Whether the record's rule would refuse a request now (token caps only when enforced). */
export function isExhausted(status: RuleStatus, enforceTokens: boolean): boolean {
  if (status.requests_remaining === 0) return true;
  return enforceTokens && status.tokens_remaining === 0;
}
