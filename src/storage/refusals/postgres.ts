import type { UsageBucketQuery } from '../usage/types.ts';
import type { PgDb } from '../sql/postgres.ts';
import { REFUSAL_GROUP_KEY_SQL, REFUSAL_KEY_COLUMNS } from './rows.ts';
import type { RefusalBucket, RefusalCount, RefusalRepository } from './types.ts';

export class PostgresRefusals implements RefusalRepository {
  readonly #db: PgDb;

  constructor(db: PgDb) {
    this.#db = db;
  }

  async add(counts: readonly RefusalCount[]): Promise<void> {
    if (counts.length === 0) return;
    const column = <T>(field: (c: RefusalCount) => T): T[] => counts.map(field);
    await this.#db.pool.query(
      `INSERT INTO refusals (${REFUSAL_KEY_COLUMNS}, count)
       SELECT * FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[])
       ON CONFLICT (${REFUSAL_KEY_COLUMNS}) DO UPDATE SET count = refusals.count + EXCLUDED.count`,
      [
        column((c) => new Date(c.minuteMs)),
        column((c) => c.userPath),
        column((c) => c.provider),
        column((c) => c.model),
        column((c) => c.scope),
        column((c) => c.subject),
        column((c) => c.period),
        column((c) => c.count),
      ],
    );
  }

  async buckets(query: UsageBucketQuery): Promise<RefusalBucket[]> {
    // The key carries COLLATE "C" itself: ordering by it is then byte order, as in SQLite.
    const res = await this.#db.pool.query<{ start_s: string; key: string; refused: string }>(
      `SELECT (floor(extract(epoch FROM minute) / $1::integer) * $1::integer)::bigint AS start_s,
         (${REFUSAL_GROUP_KEY_SQL[query.groupBy]}) COLLATE "C" AS key, SUM(count) AS refused
       FROM refusals WHERE minute >= $2 AND minute < $3
       GROUP BY 1, 2 ORDER BY 1, 2`,
      [query.bucketSeconds, query.from, query.to],
    );
    return res.rows.map((row) => ({ start: new Date(Number(row.start_s) * 1000), key: row.key, refused: Number(row.refused) }));
  }
}
