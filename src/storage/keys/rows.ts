/** The api_keys table, as both SQL repositories read and write it. */
import type { Priority } from '../../ratelimit/types.ts';
import { toDate, type StoredTime } from '../shared/values.ts';
import type { ApiKeyRecord } from './types.ts';

export const KEY_COLUMNS = 'id, name, user_path, key_hash, max_priority, created_at';

export interface KeyRow {
  id: string;
  name: string;
  user_path: string | null;
  key_hash: string;
  max_priority: Priority;
  created_at: StoredTime;
}

/** Parameters in KEY_COLUMNS order. */
export function keyParams(key: ApiKeyRecord): unknown[] {
  return [key.id, key.name, key.userPath, key.keyHash, key.maxPriority, key.createdAt];
}

export function keyFromRow(row: KeyRow): ApiKeyRecord {
  return { id: row.id, name: row.name, userPath: row.user_path, keyHash: row.key_hash, maxPriority: row.max_priority, createdAt: toDate(row.created_at) };
}
