/**
 * Status records for the admin API (`GET /admin/rate-limits`) and the self-service
 * usage view (`GET /v1/usage`). Field names are the wire names, so the HTTP layer can
 * serialise as is.
 */
import type { CompiledRule } from './rules.ts';
import type { CounterRow } from './store.ts';
import type { RuleSource, Scope } from './types.ts';

/**
 * One rule with its live counters. Every record carries the three counters, so a client
 * can read any record without checking its kind; the other optional fields are present
 * only where they apply.
 * - `user_path`: the subject for `user_path` rules, `''` for provider/model rules (kept
 *   present so every record has the same shape); on the record of one child's counter of a
 *   per-child rule, the child's path (`/team/alice` under `/team`).
 * - `per_child`: present (true) on per-child rules and their children's records only.
 * - `requests_used`/`tokens_used`: the sliding estimates on windowed rules. On a concurrent
 *   rule `requests_used` is the slot count and `tokens_used` is 0.
 * - `in_flight`: live concurrency slots; 0 on a windowed rule.
 * - `tokens_reserved`: with reservations on, on rules with a token cap: the tokens running requests
 *   reserved, apart from `tokens_used`; `tokens_remaining` counts them as used.
 * - `*_remaining`: max(cap − used, 0), only present when that cap is.
 * - `window_start`/`window_end`: the current fixed window, windowed rules only.
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
  per_child?: true;
  /** On a per-child rule's own record when its children are listed (`expand=children`): how many are active. */
  active_children?: number;
  requests_used: number;
  requests_remaining?: number;
  tokens_used: number;
  /** Token rules: tokens reserved by requests still running (reservations on; 0 otherwise), not in `tokens_used`. */
  tokens_reserved?: number;
  tokens_remaining?: number;
  in_flight: number;
  window_start?: string;
  window_end?: string;
  created_at: string;
  updated_at: string;
}

/** A user-path rule governing a caller, for `/v1/usage`. */
export interface UserPathUsage extends RuleStatus {
  /** used / max_requests (in_flight / max_requests on a concurrent rule), unclamped; absent without max_requests. */
  requests_usage_ratio?: number;
  /** tokens_used / max_tokens, unclamped; absent without max_tokens. */
  tokens_usage_ratio?: number;
  /** Whole seconds until the current fixed window ends (>= 1), as in the reset headers; windowed rules only. */
  resets_in_seconds?: number;
  /** True when this rule would refuse a request right now. */
  exhausted: boolean;
}

/** RFC 3339 UTC with whole seconds: `2025-01-01T00:00:00Z`. */
function formatTimestamp(epochSeconds: number): string {
  return new Date(epochSeconds * 1000).toISOString().slice(0, 19) + 'Z';
}

function formatDate(date: Date): string {
  return formatTimestamp(Math.floor(date.getTime() / 1000));
}

/** Build a record from the rule and its counters. Keys are added in the specification's field order. */
export function ruleStatus(rule: CompiledRule, row: CounterRow, reservations = false): RuleStatus {
  const def = rule.definition;
  const concurrent = rule.concurrent;
  const requestsUsed = concurrent ? row.inFlight : row.requestsUsed;
  const tokensUsed = concurrent ? 0 : row.tokensUsed;
  return {
    scope: def.scope,
    subject: def.subject,
    user_path: def.scope === 'user_path' ? rule.counterOwner : '',
    source: def.source,
    period_label: rule.label,
    period_seconds: def.periodSeconds,
    ...(def.maxRequests !== undefined && { max_requests: def.maxRequests }),
    ...(def.maxTokens !== undefined && { max_tokens: def.maxTokens }),
    ...(rule.perChild && { per_child: true as const }),
    requests_used: requestsUsed,
    ...(def.maxRequests !== undefined && { requests_remaining: Math.max(def.maxRequests - requestsUsed, 0) }),
    tokens_used: tokensUsed,
    ...(reservations && def.maxTokens !== undefined && !concurrent && { tokens_reserved: row.tokensReserved }),
    ...(def.maxTokens !== undefined && { tokens_remaining: Math.max(def.maxTokens - tokensUsed - (concurrent ? 0 : row.tokensReserved), 0) }),
    in_flight: concurrent ? row.inFlight : 0,
    ...(!concurrent && {
      window_start: formatTimestamp(row.windowStart),
      window_end: formatTimestamp(row.windowStart + def.periodSeconds),
    }),
    created_at: formatDate(def.createdAt),
    updated_at: formatDate(def.updatedAt),
  };
}

/**
 * The `/v1/usage` record of a user-path rule at `nowSeconds`: its status with how much of
 * each cap is used, when its window resets and whether it would refuse a request now
 * (token caps count only when enforced).
 */
export function userPathUsage(rule: CompiledRule, row: CounterRow, nowSeconds: number, enforceTokens: boolean, reservations = false): UserPathUsage {
  const status = ruleStatus(rule, row, reservations);
  const exhausted = status.requests_remaining === 0 || (enforceTokens && status.tokens_remaining === 0);
  return {
    ...status,
    ...(status.max_requests !== undefined && { requests_usage_ratio: status.requests_used / status.max_requests }),
    ...(status.max_tokens !== undefined && { tokens_usage_ratio: status.tokens_used / status.max_tokens }),
    // The store reads a windowed rule at the window containing now, so this is in [1, period].
    ...(!rule.concurrent && { resets_in_seconds: rule.periodSeconds - (nowSeconds - row.windowStart) }),
    exhausted,
  };
}
