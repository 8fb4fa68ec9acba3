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
 * Anthropic SDK sends it, `x-api-key: <key>`, or on a WebSocket upgrade the key subprotocol.
 * Bearer wins when both are present. Returns
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
  if (apiKey) return apiKey;
  return subprotocolCredential(headers);
}

const KEY_SUBPROTOCOL = 'openai-insecure-api-key.';

/**
 * Browsers cannot set headers on a WebSocket, so the official SDKs send the key as a subprotocol
 * (`Sec-WebSocket-Protocol: realtime, openai-insecure-api-key.<key>, ...`). Only read on
 * WebSocket upgrade requests.
 */
function subprotocolCredential(headers: HeaderBag): string | undefined {
  if (first(headers['upgrade'])?.toLowerCase() !== 'websocket') return undefined;
  const offered = first(headers['sec-websocket-protocol']);
  if (!offered) return undefined;
  for (const part of offered.split(',')) {
    const protocol = part.trim();
    if (protocol.startsWith(KEY_SUBPROTOCOL) && protocol.length > KEY_SUBPROTOCOL.length) return protocol.slice(KEY_SUBPROTOCOL.length);
  }
  return undefined;
}
