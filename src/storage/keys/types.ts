/** Managed API keys as storage holds them: hashes only, never a secret. */
import type { Priority } from '../../ratelimit/types.ts';

export interface ApiKeyRecord {
  id: string;
  name: string;
  /** Normalised user path the key is bound to, or null when unbound. */
  userPath: string | null;
  /** Hex SHA-256 of the secret; the secret itself is never stored. */
  keyHash: string;
  /** The highest priority its requests are served at (X-Floodgate-Priority above it is lowered to it). */
  maxPriority: Priority;
  createdAt: Date;
}

/** Every write is announced to the watchers of `keys` (Storage.watch). */
export interface KeyRepository {
  /** Throws on a duplicate id or key hash. */
  insert(key: ApiKeyRecord): Promise<void>;
  /** Oldest first (then by id). */
  list(): Promise<ApiKeyRecord[]>;
  /** Returns false when no such key exists. */
  delete(id: string): Promise<boolean>;
}
