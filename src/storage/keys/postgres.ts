import { pgMarks, pgNotifying, type PgDb } from '../sql/postgres.ts';
import { KEY_COLUMNS, keyFromRow, keyParams, type KeyRow } from './rows.ts';
import type { ApiKeyRecord, KeyRepository } from './types.ts';

export class PostgresKeys implements KeyRepository {
  readonly #db: PgDb;

  constructor(db: PgDb) {
    this.#db = db;
  }

  async insert(key: ApiKeyRecord): Promise<void> {
    await this.#db.pool.query(pgNotifying('keys', `INSERT INTO api_keys (${KEY_COLUMNS}) VALUES (${pgMarks(KEY_COLUMNS)}) RETURNING 1`), keyParams(key));
  }

  async list(): Promise<ApiKeyRecord[]> {
    const res = await this.#db.pool.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys ORDER BY created_at, id COLLATE "C"`);
    return res.rows.map(keyFromRow);
  }

  async delete(id: string): Promise<boolean> {
    const res = await this.#db.pool.query(pgNotifying('keys', 'DELETE FROM api_keys WHERE id = $1 RETURNING 1'), [id]);
    return (res.rowCount ?? 0) > 0;
  }
}
