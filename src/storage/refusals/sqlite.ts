import type { UsageBucketQuery } from '../usage/types.ts';
import type { SqliteDb } from '../sql/sqlite.ts';
import { REFUSAL_GROUP_KEY_SQL, REFUSAL_KEY_COLUMNS } from './rows.ts';
import type { RefusalBucket, RefusalCount, RefusalRepository } from './types.ts';

export class SqliteRefusals implements RefusalRepository {
  readonly #db: SqliteDb;

  constructor(db: SqliteDb) {
    this.#db = db;
  }

  async add(counts: readonly RefusalCount[]): Promise<void> {
    if (counts.length === 0) return;
    const add = this.#db.stmt(
      `INSERT INTO refusals (${REFUSAL_KEY_COLUMNS}, count) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (${REFUSAL_KEY_COLUMNS}) DO UPDATE SET count = count + excluded.count`,
    );
    this.#db.transaction(() => {
      for (const c of counts) add.run(c.minuteMs, c.userPath, c.provider, c.model, c.scope, c.subject, c.period, c.count);
    });
  }

  async buckets(query: UsageBucketQuery): Promise<RefusalBucket[]> {
    const bucketMs = query.bucketSeconds * 1000;
    const rows = this.#db.stmt(
      `SELECT CAST(minute / ? AS INTEGER) * ? AS start_ms, ${REFUSAL_GROUP_KEY_SQL[query.groupBy]} AS key, SUM(count) AS refused
       FROM refusals WHERE minute >= ? AND minute < ?
       GROUP BY start_ms, key ORDER BY start_ms, key`,
    ).all(bucketMs, bucketMs, query.from.getTime(), query.to.getTime()) as Array<{ start_ms: number; key: string; refused: number }>;
    return rows.map((row) => ({ start: new Date(row.start_ms), key: row.key, refused: row.refused }));
  }
}
