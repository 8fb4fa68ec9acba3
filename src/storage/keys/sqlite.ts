import { sqliteMarks, sqliteParams, type SqliteDb } from '../sql/sqlite.ts';
import { KEY_COLUMNS, keyFromRow, keyParams, type KeyRow } from './rows.ts';
import type { ApiKeyRecord, KeyRepository } from './types.ts';

/** SQLite announces nothing: watchers see other connections' writes through `PRAGMA data_version`. */
export class SqliteKeys implements KeyRepository {
  readonly #db: SqliteDb;

  constructor(db: SqliteDb) {
    this.#db = db;
  }

  async insert(key: ApiKeyRecord): Promise<void> {
    this.#db.stmt(`INSERT INTO api_keys (${KEY_COLUMNS}) VALUES (${sqliteMarks(KEY_COLUMNS)})`).run(...sqliteParams(keyParams(key)));
  }

  async list(): Promise<ApiKeyRecord[]> {
    return (this.#db.stmt(`SELECT ${KEY_COLUMNS} FROM api_keys ORDER BY created_at, id`).all() as KeyRow[]).map(keyFromRow);
  }

  async delete(id: string): Promise<boolean> {
    return this.#db.stmt('DELETE FROM api_keys WHERE id = ?').run(id).changes > 0;
  }
}
