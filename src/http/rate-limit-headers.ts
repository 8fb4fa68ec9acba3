import type { AdmissionRefusal, RateLimitHeaderData } from '../ratelimit/index.ts';
import { GatewayError } from './errors.ts';

/**
 * `x-ratelimit-*` headers from the engine's numbers as a flat name/value list, the form
 * `writeHead` takes fastest (see respond.ts); undefined when no windowed rule matched.
 */
export function rateLimitHeaderList(data: RateLimitHeaderData | undefined): string[] | undefined {
  if (data === undefined) return undefined;
  const { requests, tokens } = data;
  // Array literals of their final size: one allocation, no growth.
  if (tokens === undefined) {
    if (requests === undefined) return [];
    return [
      'x-ratelimit-limit-requests', String(requests.limit),
      'x-ratelimit-remaining-requests', String(requests.remaining),
      'x-ratelimit-reset-requests', String(requests.reset),
    ];
  }
  if (requests === undefined) {
    return [
      'x-ratelimit-limit-tokens', String(tokens.limit),
      'x-ratelimit-remaining-tokens', String(tokens.remaining),
      'x-ratelimit-reset-tokens', String(tokens.reset),
    ];
  }
  return [
    'x-ratelimit-limit-requests', String(requests.limit),
    'x-ratelimit-remaining-requests', String(requests.remaining),
    'x-ratelimit-reset-requests', String(requests.reset),
    'x-ratelimit-limit-tokens', String(tokens.limit),
    'x-ratelimit-remaining-tokens', String(tokens.remaining),
    'x-ratelimit-reset-tokens', String(tokens.reset),
  ];
}

/** The same headers as an object (error answers go through fastify). */
export function rateLimitHeaders(data: RateLimitHeaderData | undefined): Record<string, string> | undefined {
  const list = rateLimitHeaderList(data);
  if (list === undefined) return undefined;
  const headers: Record<string, string> = {};
  for (let i = 0; i < list.length; i += 2) headers[list[i]!] = list[i + 1]!;
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
