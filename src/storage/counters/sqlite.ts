import { sqliteMarks, type SqliteDb } from '../sql/sqlite.ts';
import { COUNTER_COLUMNS, COUNTER_REPLACE, counterFromRow, counterParams, storedCounterKey, type CounterRow } from './rows.ts';
import type { CounterRemovals, CounterRepository, SavedCounter } from './types.ts';

export class SqliteCounters implements CounterRepository {
  readonly #db: SqliteDb;

  constructor(db: SqliteDb) {
    this.#db = db;
  }

  async list(): Promise<SavedCounter[]> {
    return (this.#db.stmt(`SELECT ${COUNTER_COLUMNS} FROM rate_limit_counters ORDER BY window_start, counter_key`).all() as CounterRow[]).map(counterFromRow);
  }

  async write(counters: readonly SavedCounter[], removals: CounterRemovals = {}): Promise<void> {
    const db = this.#db;
    db.transaction(() => {
      if (removals.all) db.stmt('DELETE FROM rate_limit_counters').run();
      for (const key of removals.keys ?? []) db.stmt('DELETE FROM rate_limit_counters WHERE counter_key = ?').run(storedCounterKey(key));
      for (const prefix of removals.prefixes ?? []) {
        db.stmt('DELETE FROM rate_limit_counters WHERE substr(counter_key, 1, length(?)) = ?').run(storedCounterKey(prefix), storedCounterKey(prefix));
      }
      const save = db.stmt(`INSERT INTO rate_limit_counters (${COUNTER_COLUMNS}) VALUES (${sqliteMarks(COUNTER_COLUMNS)}) ${COUNTER_REPLACE}`);
      for (const c of counters) save.run(...counterParams(c));
    });
  }
}
