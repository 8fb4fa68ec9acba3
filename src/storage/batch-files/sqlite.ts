import { subtreeMatch } from '../../user-path/user-path.ts';
import { SQLITE_SUBTREE, sqliteMarks, sqliteParams, type SqliteDb } from '../sql/sqlite.ts';
import { BATCH_COLUMNS, FILE_COLUMNS, batchFromRow, batchParams, fileFromRow, fileParams, type BatchRow, type FileRow } from './rows.ts';
import type { BatchListQuery, BatchRecord, BatchRepository, FileRepository, FileUsage, StoredFile } from './types.ts';

export class SqliteFiles implements FileRepository {
  readonly #db: SqliteDb;

  constructor(db: SqliteDb) {
    this.#db = db;
  }

  async insert(file: StoredFile): Promise<void> {
    this.#db.stmt(`INSERT INTO files (${FILE_COLUMNS}) VALUES (${sqliteMarks(FILE_COLUMNS)})`).run(...sqliteParams(fileParams(file)));
  }

  async get(id: string): Promise<StoredFile | undefined> {
    const row = this.#db.stmt(`SELECT ${FILE_COLUMNS} FROM files WHERE id = ?`).get(id) as FileRow | undefined;
    return row === undefined ? undefined : fileFromRow(row);
  }

  async delete(id: string): Promise<boolean> {
    return this.#db.stmt('DELETE FROM files WHERE id = ?').run(id).changes > 0;
  }

  async usage(userPath: string, at: Date): Promise<FileUsage> {
    const row = this.#db.stmt(
      'SELECT COUNT(*) AS files, COALESCE(SUM(bytes), 0) AS bytes FROM files WHERE lower(user_path) = lower(?) AND (expires_at IS NULL OR expires_at > ?)',
    ).get(userPath, at.getTime()) as { files: number; bytes: number };
    return { files: row.files, bytes: row.bytes };
  }

  async deleteExpired(at: Date): Promise<number> {
    return this.#db.stmt('DELETE FROM files WHERE expires_at <= ?').run(at.getTime()).changes;
  }
}

export class SqliteBatches implements BatchRepository {
  readonly #db: SqliteDb;

  constructor(db: SqliteDb) {
    this.#db = db;
  }

  async insert(batch: BatchRecord): Promise<void> {
    this.#db.stmt(`INSERT INTO batches (${BATCH_COLUMNS}) VALUES (${sqliteMarks(BATCH_COLUMNS)})`).run(...sqliteParams(batchParams(batch)));
  }

  async update(batch: BatchRecord): Promise<boolean> {
    const [id, ...rest] = sqliteParams(batchParams(batch));
    const set = BATCH_COLUMNS.split(',').slice(1).map((c) => `${c.trim()} = ?`).join(', ');
    return this.#db.stmt(`UPDATE batches SET ${set} WHERE id = ?`).run(...rest, id).changes > 0;
  }

  async get(id: string): Promise<BatchRecord | undefined> {
    const row = this.#db.stmt(`SELECT ${BATCH_COLUMNS} FROM batches WHERE id = ?`).get(id) as BatchRow | undefined;
    return row === undefined ? undefined : batchFromRow(row);
  }

  async list(query: BatchListQuery): Promise<BatchRecord[]> {
    const subtree = subtreeMatch(query.userPathPrefix);
    const where: string[] = [];
    const params: unknown[] = [];
    if (subtree !== undefined) {
      where.push(SQLITE_SUBTREE);
      params.push(subtree.exact, subtree.below);
    }
    if (query.after !== undefined) {
      // An unknown cursor pages from nothing rather than from the start.
      where.push('seq < COALESCE((SELECT seq FROM batches WHERE id = ?), 0)');
      params.push(query.after);
    }
    const sql = `SELECT ${BATCH_COLUMNS} FROM batches ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY seq DESC LIMIT ?`;
    return (this.#db.stmt(sql).all(...params, query.limit) as BatchRow[]).map(batchFromRow);
  }
}
