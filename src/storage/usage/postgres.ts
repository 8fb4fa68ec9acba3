import { subtreeMatch } from '../../user-path/user-path.ts';
import { pgSubtree, type PgDb } from '../sql/postgres.ts';
import { USAGE_COLUMNS, USAGE_GROUP_KEY_SQL, USAGE_PG_TYPES, USAGE_SUMS, bucketFromRow, summaryFromRow, usageParams, type BucketRow, type SummaryRow } from './rows.ts';
import { UsageRejectedError, type UsageBucket, type UsageBucketQuery, type UsageQuery, type UsageRecord, type UsageRepository, type UsageSummaryRow } from './types.ts';

// ORDER BY ... COLLATE "C" everywhere: byte order, the same as SQLite's BINARY collation, so
// both implementations list in the same order whatever the database locale.
const SUMMARY_SELECT = `
  SELECT provider, model, ${USAGE_SUMS},
    COUNT(*) FILTER (WHERE cached) AS cached_requests,
    COUNT(*) FILTER (WHERE estimated) AS estimated_requests
  FROM usage_records`;

// ILIKE/lower(): case-insensitive like rule matching and like the SQLite implementation. A null
// prefix covers every path.
const SUM_COST = `
  SELECT q.i, COALESCE(SUM(u.cost_usd), 0) AS cost
  FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[]) WITH ORDINALITY AS q(prefix, pattern, from_ts, to_ts, i)
  LEFT JOIN usage_records u
    ON u.ts >= q.from_ts AND u.ts < q.to_ts
   AND (q.prefix IS NULL OR lower(u.user_path) = lower(q.prefix) OR u.user_path ILIKE q.pattern ESCAPE '\\')
  GROUP BY q.i ORDER BY q.i`;

// unnest() over one array per column: a single parameterised statement for any batch size,
// without hitting the 65535-parameter limit of a multi-row VALUES list.
const INSERT = `INSERT INTO usage_records (${USAGE_COLUMNS})
  SELECT * FROM unnest(${USAGE_PG_TYPES.map((type, i) => `$${i + 1}::${type}[]`).join(', ')})`;

export class PostgresUsage implements UsageRepository {
  readonly #db: PgDb;

  constructor(db: PgDb) {
    this.#db = db;
  }

  async insert(records: readonly UsageRecord[]): Promise<void> {
    if (records.length === 0) return;
    const rows = records.map(usageParams);
    const columns = USAGE_PG_TYPES.map((_, i) => rows.map((row) => row[i]));
    await this.#db.pool.query(INSERT, columns).catch((err: unknown) => {
      throw refusedValues(err) ? new UsageRejectedError(err) : err;
    });
  }

  async summarize(query: UsageQuery): Promise<UsageSummaryRow[]> {
    const subtree = subtreeMatch(query.userPathPrefix);
    const res =
      subtree === undefined
        ? await this.#db.pool.query<SummaryRow>(
            `${SUMMARY_SELECT} WHERE ts >= $1 AND ts < $2
             GROUP BY provider, model ORDER BY provider COLLATE "C", model COLLATE "C"`,
            [query.from, query.to],
          )
        : await this.#db.pool.query<SummaryRow>(
            `${SUMMARY_SELECT} WHERE ${pgSubtree(1, 2)} AND ts >= $3 AND ts < $4
             GROUP BY provider, model ORDER BY provider COLLATE "C", model COLLATE "C"`,
            [subtree.exact, subtree.below, query.from, query.to],
          );
    return res.rows.map(summaryFromRow);
  }

  async buckets(query: UsageBucketQuery): Promise<UsageBucket[]> {
    // The key carries COLLATE "C" itself: ordering by it is then byte order, as in SQLite.
    const res = await this.#db.pool.query<BucketRow & { start_s: string }>(
      `SELECT (floor(extract(epoch FROM ts) / $1::integer) * $1::integer)::bigint AS start_s,
         (${USAGE_GROUP_KEY_SQL[query.groupBy]}) COLLATE "C" AS key,
         COUNT(*) AS requests, SUM(prompt_tokens) AS prompt_tokens,
         SUM(completion_tokens) AS completion_tokens, SUM(cost_usd) AS cost_usd, COUNT(*) FILTER (WHERE cached) AS cache_hits
       FROM usage_records WHERE ts >= $2 AND ts < $3
       GROUP BY 1, 2 ORDER BY 1, 2`,
      [query.bucketSeconds, query.from, query.to],
    );
    return res.rows.map((row) => bucketFromRow(new Date(Number(row.start_s) * 1000), row));
  }

  async sumCost(queries: readonly UsageQuery[]): Promise<number[]> {
    if (queries.length === 0) return [];
    const subtrees = queries.map((q) => subtreeMatch(q.userPathPrefix));
    const res = await this.#db.pool.query<{ cost: number }>(SUM_COST, [
      subtrees.map((s) => s?.exact ?? null),
      subtrees.map((s) => s?.below ?? null),
      queries.map((q) => q.from),
      queries.map((q) => q.to),
    ]);
    return res.rows.map((row) => row.cost);
  }
}

/**
 * Whether a failed usage insert was refused for the values it carried: SQLSTATE class 22 (data
 * exception: a NUL in text, a fraction for a bigint), 23 (a constraint) or 54000 (a value too
 * large for an index), rather than for the server's state (connection, locks, shutdown).
 */
function refusedValues(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code.startsWith('22') || code.startsWith('23') || code === '54000');
}
