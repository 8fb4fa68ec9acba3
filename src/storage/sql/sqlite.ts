/**
 * One SQLite database file (better-sqlite3) as the aggregates' SQLite repositories use it:
 * statements prepared on first use and cached by their text, refused before the schema exists.
 * The driver is synchronous; the repositories still answer promises, as the one Storage interface
 * says. Times are stored as epoch milliseconds (INTEGER): compact, sortable, and exactly what a
 * JS Date holds.
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import type { Database as Db, Statement } from 'better-sqlite3';

// SQLite's = is case-sensitive but LIKE folds ASCII case; lower() on both sides of = keeps
// the two halves consistent (rule matching is case-insensitive too). Binds subtreeMatch's exact, below.
export const SQLITE_SUBTREE = `(lower(user_path) = lower(?) OR user_path LIKE ? ESCAPE '\\')`;

export class SqliteDb {
  readonly db: Db;
  #ready = false;
  readonly #statements = new Map<string, Statement>();

  /** `path` is the database file (its directory is created); `:memory:` gives a private in-memory database. */
  constructor(path: string) {
    const inMemory = path === ':memory:' || path === '';
    if (!inMemory) mkdirSync(dirname(path), { recursive: true });
    this.db = new Database(path);
    // WAL lets readers run beside the single writer; NORMAL is durable across process crashes
    // in WAL mode (only an OS crash can lose the last commits), which fits usage records.
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = NORMAL');
    // Another process may hold the write lock on the same file for a moment: wait, don't fail.
    this.db.pragma('busy_timeout = 5000');
    this.db.pragma('foreign_keys = ON');
  }

  /** The schema is up to date: statements may be prepared (preparing needs the tables). */
  ready(): void {
    this.#ready = true;
  }

  /** Throws before `ready()`: the tables may not exist yet. */
  assertReady(): void {
    if (!this.#ready) throw new Error('SqliteStorage: call migrate() before using the storage');
  }

  /** The statement of `sql`, prepared once. */
  stmt(sql: string): Statement {
    this.assertReady();
    let stmt = this.#statements.get(sql);
    if (stmt === undefined) {
      stmt = this.db.prepare(sql);
      this.#statements.set(sql, stmt);
    }
    return stmt;
  }

  /** Runs `work` in one transaction; IMMEDIATE takes the write lock first, for a read-then-write. */
  transaction<T>(work: () => T, mode: 'deferred' | 'immediate' = 'deferred'): T {
    const run = this.db.transaction(work);
    return mode === 'immediate' ? run.immediate() : run();
  }
}

/** Parameters as SQLite binds them: Dates as epoch milliseconds, booleans as 0/1. */
export function sqliteParams(values: readonly unknown[]): unknown[] {
  return values.map((v) => (v instanceof Date ? v.getTime() : typeof v === 'boolean' ? (v ? 1 : 0) : v));
}

/** `?, ?, ?` for a comma-separated column list. */
export function sqliteMarks(columns: string): string {
  return columns.split(',').map(() => '?').join(', ');
}
