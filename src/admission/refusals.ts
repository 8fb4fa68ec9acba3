import type { BudgetBreach } from '../budgets/tracker.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import type { AdmissionRefusal, RateLimitHeaderData } from '../ratelimit/index.ts';

/** `x-ratelimit-*` headers from the engine's numbers; undefined when no windowed rule matched. */
export function rateLimitHeaders(data: RateLimitHeaderData | undefined): Record<string, string> | undefined {
  if (data === undefined) return undefined;
  const headers: Record<string, string> = {};
  const { requests, tokens } = data;
  if (requests !== undefined) {
    headers['x-ratelimit-limit-requests'] = String(requests.limit);
    headers['x-ratelimit-remaining-requests'] = String(requests.remaining);
    headers['x-ratelimit-reset-requests'] = String(requests.reset);
  }
  if (tokens !== undefined) {
    headers['x-ratelimit-limit-tokens'] = String(tokens.limit);
    headers['x-ratelimit-remaining-tokens'] = String(tokens.remaining);
    headers['x-ratelimit-reset-tokens'] = String(tokens.reset);
  }
  return headers;
}

/**
 * The 503 when the shared rate-limit counters cannot be reached and `on_error` is `deny` (or an
 * admin reset cannot reach them): the gateway, not the client, is at fault, so `provider_error`.
 */
export function rateLimitsUnavailable(err: Error): GatewayError {
  return new GatewayError({ status: 503, type: 'provider_error', message: err.message, code: 'rate_limits_unavailable' });
}

/** The 429 of a refused admission: exact message, Retry-After in seconds and milliseconds. */
export function rateLimitedError(refusal: Pick<AdmissionRefusal, 'message' | 'retryAfterSeconds' | 'headers'>): GatewayError {
  const headers: Record<string, string> = {
    ...rateLimitHeaders(refusal.headers),
    'retry-after': String(refusal.retryAfterSeconds),
    'retry-after-ms': String(refusal.retryAfterSeconds * 1000),
  };
  return new GatewayError({ status: 429, type: 'rate_limit_error', message: refusal.message, code: 'rate_limit_exceeded', headers });
}

/**
 * The 429 of a reached budget: Retry-After until the budget's period ends (its exact wait in
 * retry-after-ms, never under a second, like the rate limits', whose Retry-After is at least 1).
 */
export function budgetExceededError(breach: BudgetBreach): GatewayError {
  return new GatewayError({
    status: 429,
    type: 'rate_limit_error',
    message: breach.message,
    code: 'budget_exceeded',
    headers: { 'retry-after': String(Math.ceil(breach.retryAfterMs / 1000)), 'retry-after-ms': String(Math.max(1000, breach.retryAfterMs)) },
  });
}

/** Past rate_limits.queue.max_depth: a request that would wait is refused a place at once. */
export function queueFullError(waiting: number): GatewayError {
  return new GatewayError({ status: 429, type: 'rate_limit_error', message: `queue full: ${waiting} requests already waiting`, code: 'queue_full', headers: { 'retry-after': '1', 'retry-after-ms': '1000' } });
}

/** The client left while its request waited: nothing was counted and nothing is sent. */
export function clientGone(): GatewayError {
  return new GatewayError({ status: 499, type: 'invalid_request_error', message: 'the client closed the request while it waited for capacity', code: 'client_closed_request' });
}
