/**
 * Credential extraction and constant-time comparison for the master key.
 */

import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * Constant-time string equality. Both sides are hashed first: timingSafeEqual needs equal
 * lengths, and comparing fixed-size digests means neither the content nor the length of the
 * secret leaks through timing.
 */
export function safeEqual(a: string, b: string): boolean {
  const da = createHash('sha256').update(a, 'utf8').digest();
  const db = createHash('sha256').update(b, 'utf8').digest();
  return timingSafeEqual(da, db);
}

/** Request headers as Node delivers them (names lower-cased). */
export type HeaderBag = Readonly<Record<string, string | string[] | undefined>>;

const BEARER = /^bearer\s+(.+)$/i;

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/**
 * The caller's key from `Authorization: Bearer <key>` (scheme case-insensitive) or, as the
 * Anthropic SDK sends it, `x-api-key: <key>`. Bearer wins when both are present. Returns
 * undefined when neither carries a non-empty key.
 */
export function extractCredential(headers: HeaderBag): string | undefined {
  const authorization = first(headers['authorization'])?.trim();
  if (authorization) {
    const match = BEARER.exec(authorization);
    const key = match?.[1]?.trim();
    if (key) return key;
  }
  const apiKey = first(headers['x-api-key'])?.trim();
  return apiKey ? apiKey : undefined;
}
