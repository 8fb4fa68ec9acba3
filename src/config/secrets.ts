import type { GatewayConfig } from './schema.ts';

/** A provider setting holding a credential, by its name: `api_key`, `client_secret`, `secret_access_key`, `session_token`... */
const SECRET_SETTING = /(^|_)(key|secret|token|password)$/;

/**
 * Every credential the configuration holds, for the logs to keep out: the master key, each
 * provider's credentials (whatever its type calls them), and the passwords of the storage and
 * Redis URLs.
 */
export function secretsOf(config: GatewayConfig): string[] {
  const secrets: string[] = [];
  if (config.server.master_key) secrets.push(config.server.master_key);
  for (const provider of Object.values(config.providers)) collect(provider, secrets);
  for (const url of [config.storage.postgres.url, config.rate_limits.redis.url]) {
    const password = passwordOf(url);
    if (password !== undefined) secrets.push(password);
  }
  return secrets;
}

function collect(settings: object, into: string[]): void {
  for (const [name, value] of Object.entries(settings)) {
    if (typeof value === 'string' && SECRET_SETTING.test(name)) into.push(value);
    else if (value !== null && typeof value === 'object' && !Array.isArray(value)) collect(value, into);
  }
}

function passwordOf(url: string | undefined): string | undefined {
  if (url === undefined) return undefined;
  try {
    const password = new URL(url).password;
    return password === '' ? undefined : decodeURIComponent(password);
  } catch {
    return undefined;
  }
}
