import type { AdmissionRefusal, RateLimitHeaderData, RateLimitTriple } from '../ratelimit/index.ts';
import { GatewayError } from './errors.ts';

/**
 * `x-ratelimit-*` headers from the engine's numbers as a flat name/value list, the form
 * `writeHead` takes fastest (see respond.ts); undefined when no windowed rule matched.
 */
export function rateLimitHeaderList(data: RateLimitHeaderData | undefined): string[] | undefined {
  if (data === undefined) return undefined;
  const { requests, tokens } = data;
  if (requests === undefined && tokens === undefined) return undefined;
  // Allocated at its final size, not grown by pushes.
  const list: string[] = new Array((requests === undefined ? 0 : 6) + (tokens === undefined ? 0 : 6));
  const at = requests === undefined ? 0 : putTriple(list, 0, REQUEST_NAMES, requests);
  if (tokens !== undefined) putTriple(list, at, TOKEN_NAMES, tokens);
  return list;
}

const REQUEST_NAMES = ['x-ratelimit-limit-requests', 'x-ratelimit-remaining-requests', 'x-ratelimit-reset-requests'] as const;
const TOKEN_NAMES = ['x-ratelimit-limit-tokens', 'x-ratelimit-remaining-tokens', 'x-ratelimit-reset-tokens'] as const;

function putTriple(list: string[], at: number, names: readonly [string, string, string], t: RateLimitTriple): number {
  list[at] = names[0];
  list[at + 1] = String(t.limit);
  list[at + 2] = names[1];
  list[at + 3] = String(t.remaining);
  list[at + 4] = names[2];
  list[at + 5] = String(t.reset);
  return at + 6;
}

/** The same headers as an object (error answers go through fastify). */
export function rateLimitHeaders(data: RateLimitHeaderData | undefined): Record<string, string> | undefined {
  const list = rateLimitHeaderList(data);
  if (list === undefined) return undefined;
  const headers: Record<string, string> = {};
  for (let i = 0; i < list.length; i += 2) headers[list[i]!] = list[i + 1]!;
  return headers;
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
