/**
 * Opens the configured storage and brings its schema up to date before anyone uses it.
 */

import { PostgresStorage } from './postgres.ts';
import { SqliteStorage } from './sqlite.ts';
import type { Storage } from './types.ts';

export interface StorageConfig {
  type: 'sqlite' | 'postgres';
  sqlite: { path: string };
  postgres?: { url?: string };
}

export interface OpenStorageOptions {
  /** Background errors of the PostgreSQL pool (idle connection lost); ignored when absent. */
  onError?: (err: Error) => void;
}

export async function openStorage(
  config: StorageConfig,
  options: OpenStorageOptions = {},
): Promise<Storage> {
  let storage: SqliteStorage | PostgresStorage;
  if (config.type === 'postgres') {
    const url = config.postgres?.url;
    if (!url) {
      throw new Error('storage.postgres.url (POSTGRES_URL) is required when storage.type is postgres');
    }
    storage = new PostgresStorage(options.onError ? { url, onError: options.onError } : { url });
  } else {
    storage = new SqliteStorage({ path: config.sqlite.path });
  }
  try {
    await storage.migrate();
  } catch (err) {
    // Don't leak the pool or file handle when the schema cannot be brought up to date.
    await storage.close().catch(() => {});
    throw err;
  }
  return storage;
}
