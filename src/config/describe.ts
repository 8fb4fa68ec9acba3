/**
 * How the start-up log names where the gateway keeps its data and counters: enough to see which
 * database and Redis a replica uses, never a password or token from their URLs.
 */
import type { GatewayConfig } from './schema.ts';

export function describeStorage(storage: GatewayConfig['storage']): Record<string, string> {
  if (storage.type === 'sqlite') return { type: 'sqlite', path: storage.sqlite.path };
  return { type: 'postgres', server: withoutCredentials(storage.postgres.url ?? '') };
}

export function describeCounters(rateLimits: GatewayConfig['rate_limits']): Record<string, string | boolean> {
  if (!rateLimits.enabled) return { backend: 'none (rate limits disabled)' };
  if (rateLimits.backend === 'memory') return { backend: 'memory', persisted: rateLimits.persist_counters };
  return { backend: 'redis', server: withoutCredentials(rateLimits.redis.url), prefix: rateLimits.redis.prefix, on_error: rateLimits.redis.on_error };
}

/** `scheme://host:port/path`: a URL's user name, password and query (which may carry either) left out. */
export function withoutCredentials(raw: string): string {
  try {
    const url = new URL(raw);
    return `${url.protocol}//${url.host}${url.pathname === '/' ? '' : url.pathname}`;
  } catch {
    return '(unparsable URL)';
  }
}
