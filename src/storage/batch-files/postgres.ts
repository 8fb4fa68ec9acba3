import { subtreeMatch } from '../../user-path/user-path.ts';
import { pgMarks, pgSubtree, type PgDb } from '../sql/postgres.ts';
import { BATCH_COLUMNS, FILE_COLUMNS, batchFromRow, batchParams, fileFromRow, fileParams, type BatchRow, type FileRow } from './rows.ts';
import type { BatchListQuery, BatchRecord, BatchRepository, FileRepository, FileUsage, StoredFile } from './types.ts';

export class PostgresFiles implements FileRepository {
  readonly #db: PgDb;

  constructor(db: PgDb) {
    this.#db = db;
  }

  async insert(file: StoredFile): Promise<void> {
    await this.#db.pool.query(`INSERT INTO files (${FILE_COLUMNS}) VALUES (${pgMarks(FILE_COLUMNS)})`, fileParams(file));
  }

  async get(id: string): Promise<StoredFile | undefined> {
    const res = await this.#db.pool.query<FileRow>(`SELECT ${FILE_COLUMNS} FROM files WHERE id = $1`, [id]);
    const row = res.rows[0];
    return row === undefined ? undefined : fileFromRow(row);
  }

  async delete(id: string): Promise<boolean> {
    const res = await this.#db.pool.query('DELETE FROM files WHERE id = $1', [id]);
    return (res.rowCount ?? 0) > 0;
  }

  async usage(userPath: string, at: Date): Promise<FileUsage> {
    const res = await this.#db.pool.query<{ files: string; bytes: string }>(
      'SELECT COUNT(*) AS files, COALESCE(SUM(bytes), 0) AS bytes FROM files WHERE lower(user_path) = lower($1) AND (expires_at IS NULL OR expires_at > $2)',
      [userPath, at],
    );
    return { files: Number(res.rows[0]?.files ?? 0), bytes: Number(res.rows[0]?.bytes ?? 0) };
  }

  async deleteExpired(at: Date): Promise<number> {
    const res = await this.#db.pool.query('DELETE FROM files WHERE expires_at <= $1', [at]);
    return res.rowCount ?? 0;
  }
}

export class PostgresBatches implements BatchRepository {
  readonly #db: PgDb;

  constructor(db: PgDb) {
    this.#db = db;
  }

  async insert(batch: BatchRecord): Promise<void> {
    await this.#db.pool.query(`INSERT INTO batches (${BATCH_COLUMNS}) VALUES (${pgMarks(BATCH_COLUMNS)})`, batchParams(batch));
  }

  async update(batch: BatchRecord): Promise<boolean> {
    const [id, ...rest] = batchParams(batch);
    const set = BATCH_COLUMNS.split(',').slice(1).map((c, i) => `${c.trim()} = $${i + 1}`).join(', ');
    const res = await this.#db.pool.query(`UPDATE batches SET ${set} WHERE id = $${rest.length + 1}`, [...rest, id]);
    return (res.rowCount ?? 0) > 0;
  }

  async get(id: string): Promise<BatchRecord | undefined> {
    const res = await this.#db.pool.query<BatchRow>(`SELECT ${BATCH_COLUMNS} FROM batches WHERE id = $1`, [id]);
    const row = res.rows[0];
    return row === undefined ? undefined : batchFromRow(row);
  }

  async list(query: BatchListQuery): Promise<BatchRecord[]> {
    const subtree = subtreeMatch(query.userPathPrefix);
    const where: string[] = [];
    const params: unknown[] = [];
    if (subtree !== undefined) {
      params.push(subtree.exact, subtree.below);
      where.push(pgSubtree(params.length - 1, params.length));
    }
    if (query.after !== undefined) {
      // An unknown cursor pages from nothing rather than from the start.
      params.push(query.after);
      where.push(`seq < COALESCE((SELECT seq FROM batches WHERE id = $${params.length}), 0)`);
    }
    params.push(query.limit);
    const res = await this.#db.pool.query<BatchRow>(
      `SELECT ${BATCH_COLUMNS} FROM batches ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY seq DESC LIMIT $${params.length}`,
      params,
    );
    return res.rows.map(batchFromRow);
  }
}
