/**
 * SQLite storage: one database file, its migrations, and the aggregates' SQLite repositories over
 * it. The one write on a steady request path, usage, comes from the usage recorder in batches off
 * the request path, one transaction each.
 */
import { SqliteBatches, SqliteFiles } from './batch-files/sqlite.ts';
import { SqliteBudgets } from './budgets/sqlite.ts';
import { SqliteCounters } from './counters/sqlite.ts';
import { SqliteKeys } from './keys/sqlite.ts';
import { SqliteRefusals } from './refusals/sqlite.ts';
import { SqliteRules } from './rules/sqlite.ts';
import type { ChangeListener, WatchedAggregate } from './shared/watch.ts';
import { SqliteDb } from './sql/sqlite.ts';
import { MIGRATIONS } from './sqlite-migrations.ts';
import type { Storage } from './types.ts';
import { SqliteUsage } from './usage/sqlite.ts';

export interface SqliteStorageOptions {
  /** Database file; its directory is created. `:memory:` gives a private in-memory database. */
  path: string;
}

/** How often another process's changes are looked for (see watch). */
const SQLITE_WATCH_INTERVAL_MS = 1000;

export class SqliteStorage implements Storage {
  readonly #db: SqliteDb;
  readonly keys: SqliteKeys;
  readonly rules: SqliteRules;
  readonly budgets: SqliteBudgets;
  readonly usage: SqliteUsage;
  readonly counters: SqliteCounters;
  readonly files: SqliteFiles;
  readonly batches: SqliteBatches;
  readonly refusals: SqliteRefusals;
  readonly #timers = new Set<NodeJS.Timeout>();

  constructor(options: SqliteStorageOptions) {
    const db = new SqliteDb(options.path);
    this.#db = db;
    this.keys = new SqliteKeys(db);
    this.rules = new SqliteRules(db);
    this.budgets = new SqliteBudgets(db);
    this.usage = new SqliteUsage(db);
    this.counters = new SqliteCounters(db);
    this.files = new SqliteFiles(db);
    this.batches = new SqliteBatches(db);
    this.refusals = new SqliteRefusals(db);
  }

  async migrate(): Promise<void> {
    const db = this.#db.db;
    db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version INTEGER PRIMARY KEY,
      applied_at INTEGER NOT NULL
    )`);
    const applied = db.prepare<[number], { version: number }>('SELECT version FROM schema_migrations WHERE version = ?');
    const record = db.prepare<[number, number]>('INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)');
    for (const migration of MIGRATIONS) {
      // IMMEDIATE takes the write lock before the check, so two processes starting together
      // cannot both apply the same migration.
      db.transaction(() => {
        if (applied.get(migration.version)) return;
        db.exec(migration.sql);
        record.run(migration.version, Date.now());
      }).immediate();
    }
    this.#db.ready();
  }

  /** Highest applied migration version (0 before `migrate()`). */
  async schemaVersion(): Promise<number> {
    const db = this.#db.db;
    const exists = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get();
    if (!exists) return 0;
    return db.prepare<[], { v: number | null }>('SELECT MAX(version) AS v FROM schema_migrations').get()?.v ?? 0;
  }

  /** Number of applied migrations; lets tests prove that re-running applies nothing twice. */
  async appliedMigrationCount(): Promise<number> {
    return this.#db.db.prepare<[], { n: number }>('SELECT COUNT(*) AS n FROM schema_migrations').get()?.n ?? 0;
  }

  /**
   * SQLite has no notifications. `PRAGMA data_version` changes when another connection (another
   * process sharing the file) has committed anything; it costs no I/O, so it is read every second
   * and the listener called when it moved. It cannot tell which table changed: every watcher is
   * told of every change, whatever aggregate it watches.
   */
  async watch(_aggregate: WatchedAggregate, listener: ChangeListener): Promise<() => Promise<void>> {
    const db = this.#db.db;
    const version = (): number => db.pragma('data_version', { simple: true }) as number;
    let seen = version();
    const timer = setInterval(() => {
      if (!db.open) return;
      const now = version();
      if (now === seen) return;
      seen = now;
      listener();
    }, SQLITE_WATCH_INTERVAL_MS);
    timer.unref();
    this.#timers.add(timer);
    return async () => {
      clearInterval(timer);
      this.#timers.delete(timer);
    };
  }

  /** A local file: it answers as long as it is open. */
  async ping(): Promise<void> {
    this.#db.stmt('SELECT 1').get();
  }

  async close(): Promise<void> {
    for (const timer of this.#timers) clearInterval(timer);
    this.#timers.clear();
    if (this.#db.db.open) this.#db.db.close();
  }
}
