import type { PgDb } from '../sql/postgres.ts';
import { COUNTER_COLUMNS, COUNTER_REPLACE, counterFromRow, counterParams, storedCounterKey, type CounterRow } from './rows.ts';
import type { CounterRemovals, CounterRepository, SavedCounter } from './types.ts';

/** The unnest() casts of COUNTER_COLUMNS. */
const COUNTER_PG_TYPES = ['text', 'integer', 'bigint', 'bigint', 'bigint', 'bigint', 'bigint'] as const;

export class PostgresCounters implements CounterRepository {
  readonly #db: PgDb;

  constructor(db: PgDb) {
    this.#db = db;
  }

  async list(): Promise<SavedCounter[]> {
    const res = await this.#db.pool.query<CounterRow>(`SELECT ${COUNTER_COLUMNS} FROM rate_limit_counters ORDER BY window_start, counter_key COLLATE "C"`);
    return res.rows.map(counterFromRow);
  }

  async write(counters: readonly SavedCounter[], removals: CounterRemovals = {}): Promise<void> {
    await this.#db.transaction(async (client) => {
      if (removals.all) await client.query('DELETE FROM rate_limit_counters');
      const keys = (removals.keys ?? []).map(storedCounterKey);
      if (keys.length > 0) await client.query('DELETE FROM rate_limit_counters WHERE counter_key = ANY($1::text[])', [keys]);
      for (const prefix of removals.prefixes ?? []) {
        await client.query('DELETE FROM rate_limit_counters WHERE left(counter_key, length($1)) = $1', [storedCounterKey(prefix)]);
      }
      if (counters.length === 0) return;
      const rows = counters.map(counterParams);
      await client.query(
        `INSERT INTO rate_limit_counters (${COUNTER_COLUMNS})
         SELECT * FROM unnest(${COUNTER_PG_TYPES.map((type, i) => `$${i + 1}::${type}[]`).join(', ')})
         ${COUNTER_REPLACE}`,
        COUNTER_PG_TYPES.map((_, i) => rows.map((row) => row[i])),
      );
    });
  }
}
