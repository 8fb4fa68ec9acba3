import { createHash } from 'node:crypto';

export interface CachedResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
  /** Who produced it, for the usage record of a hit. */
  readonly provider: string;
  readonly model: string;
}

export interface ResponseCacheOptions {
  ttlSeconds: number;
  maxEntries: number;
  /** Milliseconds since the epoch; injectable for tests. */
  now: () => number;
}

interface Entry {
  readonly value: CachedResponse;
  readonly expiresAt: number;
}

/**
 * Exact-match response cache: bounded (least recently used entries go first) and with a TTL.
 * A Map keeps insertion order, so re-inserting on a hit makes its first key the LRU one.
 */
export class ResponseCache {
  readonly #entries = new Map<string, Entry>();
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  readonly #now: () => number;

  constructor(options: ResponseCacheOptions) {
    this.#ttlMs = options.ttlSeconds * 1000;
    this.#maxEntries = options.maxEntries;
    this.#now = options.now;
  }

  get size(): number {
    return this.#entries.size;
  }

  get(key: string): CachedResponse | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    this.#entries.delete(key);
    if (entry.expiresAt <= this.#now()) return undefined;
    this.#entries.set(key, entry);
    return entry.value;
  }

  set(key: string, value: CachedResponse): void {
    this.#entries.delete(key);
    this.#entries.set(key, { value, expiresAt: this.#now() + this.#ttlMs });
    while (this.#entries.size > this.#maxEntries) {
      const oldest = this.#entries.keys().next().value;
      if (oldest === undefined) break;
      this.#entries.delete(oldest);
    }
  }
}

/**
 * The key of a request: endpoint, the model as routing resolved it, every other parameter in
 * a canonical order, and the caller's user path unless entries are shared. `stream` is not part
 * of it (only non-streaming requests are cached).
 */
export function cacheKey(endpoint: string, model: string, body: Readonly<Record<string, unknown>>, userPath: string | null): string {
  const hash = createHash('sha256');
  hash.update(endpoint).update('\0').update(model).update('\0').update(userPath ?? '*').update('\0');
  const params: Record<string, unknown> = {};
  for (const name of Object.keys(body)) {
    if (name !== 'model' && name !== 'stream') params[name] = body[name];
  }
  hash.update(canonicalJson(params));
  return hash.digest('base64url');
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record).filter((k) => record[k] !== undefined).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(record[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

export type CacheMode = 'use' | 'refresh' | 'bypass';

/** `Cache-Control: no-cache` skips the lookup but stores the fresh answer; `no-store` skips both. */
export function cacheMode(cacheControl: string | undefined): CacheMode {
  if (cacheControl === undefined) return 'use';
  const value = cacheControl.toLowerCase();
  if (value.includes('no-store')) return 'bypass';
  if (value.includes('no-cache')) return 'refresh';
  return 'use';
}
