import type { Statement } from 'better-sqlite3';
import { subtreeMatch } from '../../user-path/user-path.ts';
import { SQLITE_SUBTREE, sqliteMarks, sqliteParams, type SqliteDb } from '../sql/sqlite.ts';
import { USAGE_COLUMNS, USAGE_GROUP_KEY_SQL, USAGE_SUMS, bucketFromRow, summaryFromRow, usageParams, type BucketRow, type SummaryRow } from './rows.ts';
import { UsageRejectedError, type UsageBucket, type UsageBucketQuery, type UsageQuery, type UsageRecord, type UsageRepository, type UsageSummaryRow } from './types.ts';

/** Rows per INSERT statement: a multi-row statement is bound and stepped once for many rows. */
const ROWS_PER_STATEMENT = 32;

const SUMMARY_COLUMNS = `
  provider, model, ${USAGE_SUMS},
  SUM(cached) AS cached_requests,
  SUM(estimated) AS estimated_requests`;

export class SqliteUsage implements UsageRepository {
  readonly #db: SqliteDb;

  constructor(db: SqliteDb) {
    this.#db = db;
  }

  async insert(records: readonly UsageRecord[]): Promise<void> {
    this.#db.assertReady();
    if (records.length === 0) return;
    try {
      // One transaction per batch: one commit instead of one per record.
      this.#db.transaction(() => {
        for (let first = 0; first < records.length; first += ROWS_PER_STATEMENT) {
          const end = Math.min(records.length, first + ROWS_PER_STATEMENT);
          const values: unknown[] = [];
          for (let i = first; i < end; i++) values.push(...usageParams(records[i]!));
          // One array bound whole: spread into arguments, a full statement's 512 values are copied twice.
          this.#insertStatement(end - first).run(sqliteParams(values));
        }
      });
    } catch (err) {
      throw refusedValues(err) ? new UsageRejectedError(err) : err;
    }
  }

  async summarize(query: UsageQuery): Promise<UsageSummaryRow[]> {
    const subtree = subtreeMatch(query.userPathPrefix);
    const window = [query.from.getTime(), query.to.getTime()];
    const rows = (
      subtree === undefined
        ? this.#db.stmt(`SELECT ${SUMMARY_COLUMNS} FROM usage_records WHERE ts >= ? AND ts < ? GROUP BY provider, model ORDER BY provider, model`).all(...window)
        : this.#db
            .stmt(`SELECT ${SUMMARY_COLUMNS} FROM usage_records WHERE ${SQLITE_SUBTREE} AND ts >= ? AND ts < ? GROUP BY provider, model ORDER BY provider, model`)
            .all(subtree.exact, subtree.below, ...window)
    ) as SummaryRow[];
    return rows.map(summaryFromRow);
  }

  async buckets(query: UsageBucketQuery): Promise<UsageBucket[]> {
    const bucketMs = query.bucketSeconds * 1000;
    const rows = this.#db.stmt(
      `SELECT CAST(ts / ? AS INTEGER) * ? AS start_ms, ${USAGE_GROUP_KEY_SQL[query.groupBy]} AS key,
         COUNT(*) AS requests, SUM(prompt_tokens) AS prompt_tokens,
         SUM(completion_tokens) AS completion_tokens, SUM(cost_usd) AS cost_usd, SUM(cached) AS cache_hits
       FROM usage_records WHERE ts >= ? AND ts < ?
       GROUP BY start_ms, key ORDER BY start_ms, key`,
    ).all(bucketMs, bucketMs, query.from.getTime(), query.to.getTime()) as Array<BucketRow & { start_ms: number }>;
    return rows.map((row) => bucketFromRow(new Date(row.start_ms), row));
  }

  async sumCost(queries: readonly UsageQuery[]): Promise<number[]> {
    const all = this.#db.stmt('SELECT COALESCE(SUM(cost_usd), 0) AS cost FROM usage_records WHERE ts >= ? AND ts < ?');
    const underPath = this.#db.stmt(`SELECT COALESCE(SUM(cost_usd), 0) AS cost FROM usage_records WHERE ts >= ? AND ts < ? AND ${SQLITE_SUBTREE}`);
    // One read transaction: every sum sees the same snapshot.
    return this.#db.transaction(() =>
      queries.map((query) => {
        const subtree = subtreeMatch(query.userPathPrefix);
        const window = [query.from.getTime(), query.to.getTime()];
        const row = (subtree === undefined ? all.get(...window) : underPath.get(...window, subtree.exact, subtree.below)) as { cost: number };
        return row.cost;
      }),
    );
  }

  /** Prepared once per number of rows: SqliteDb.stmt keeps each statement by its text. */
  #insertStatement(rows: number): Statement {
    const row = `(${sqliteMarks(USAGE_COLUMNS)})`;
    return this.#db.stmt(`INSERT INTO usage_records (${USAGE_COLUMNS}) VALUES ${new Array(rows).fill(row).join(', ')}`);
  }
}

/**
 * Whether a failed usage insert was refused for the values it carried (a constraint, a value
 * too big, a type the driver cannot bind), rather than for the database's state (busy, full, I/O).
 */
function refusedValues(err: unknown): boolean {
  if (err instanceof TypeError || err instanceof RangeError) return true;
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code.startsWith('SQLITE_CONSTRAINT') || code === 'SQLITE_MISMATCH' || code === 'SQLITE_TOOBIG');
}
