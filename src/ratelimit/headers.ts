/**
 * Header data for admitted and refused requests, as plain numbers; the HTTP layer turns
 * them into `x-ratelimit-*` headers.
 */
import type { CompiledRule } from './rules.ts';
import type { CounterRow } from './store.ts';

/** One dimension's `x-ratelimit-{limit,remaining,reset}-*` values. */
export interface RateLimitTriple {
  readonly limit: number;
  readonly remaining: number;
  /** Whole seconds until the current fixed window ends (>= 1); Retry-After on a breach. */
  readonly reset: number;
}

export interface RateLimitHeaderData {
  readonly requests?: RateLimitTriple;
  readonly tokens?: RateLimitTriple;
}

/**
 * For each dimension, the windowed rule with the least remaining wins (all scopes
 * compete; on a tie the first in evaluation order). `rows` hold the counts after this
 * request was counted (row i is rule i). Returns undefined when no windowed cap matched.
 */
export function successHeaders(
  rules: readonly CompiledRule[],
  rows: readonly CounterRow[],
  nowSeconds: number,
): RateLimitHeaderData | undefined {
  let requestLimit = 0;
  let requestRemaining = Infinity;
  let requestReset = 0;
  let tokenLimit = 0;
  let tokenRemaining = Infinity;
  let tokenReset = 0;
  for (let i = 0; i < rules.length; i++) {
    const rule = rules[i]!;
    const period = rule.periodSeconds;
    if (period === 0) continue;
    const row = rows[i]!;
    const elapsed = nowSeconds - row.windowStart;
    if (rule.maxRequests > 0) {
      const used = row.requestsUsed;
      const remaining = used >= rule.maxRequests ? 0 : rule.maxRequests - used;
      if (remaining < requestRemaining) {
        requestRemaining = remaining;
        requestLimit = rule.maxRequests;
        requestReset = period - elapsed;
      }
    }
    if (rule.maxTokens > 0) {
      // Reserved tokens are as good as used: another request cannot have them.
      const used = row.tokensUsed + row.tokensReserved;
      const remaining = used >= rule.maxTokens ? 0 : rule.maxTokens - used;
      if (remaining < tokenRemaining) {
        tokenRemaining = remaining;
        tokenLimit = rule.maxTokens;
        tokenReset = period - elapsed;
      }
    }
  }
  // Absent dimensions are left out entirely (not set to undefined) so the data serialises cleanly.
  if (tokenLimit === 0) {
    if (requestLimit === 0) return undefined;
    return { requests: { limit: requestLimit, remaining: requestRemaining, reset: requestReset } };
  }
  const tokens = { limit: tokenLimit, remaining: tokenRemaining, reset: tokenReset };
  if (requestLimit === 0) return { tokens };
  return { requests: { limit: requestLimit, remaining: requestRemaining, reset: requestReset }, tokens };
}
