/**
 * PostgreSQL storage: a pool, its migrations, the aggregates' PostgreSQL repositories over it,
 * and one connection LISTENing for the changes other replicas announce. Same schema and semantics
 * as the SQLite implementation; times are `timestamptz`, counters `bigint`.
 */
import { PostgresBatches, PostgresFiles } from './batch-files/postgres.ts';
import { PostgresBudgets } from './budgets/postgres.ts';
import { PostgresCounters } from './counters/postgres.ts';
import { PostgresKeys } from './keys/postgres.ts';
import { MIGRATIONS } from './postgres-migrations.ts';
import { PostgresRefusals } from './refusals/postgres.ts';
import { PostgresRules } from './rules/postgres.ts';
import type { ChangeListener, WatchedAggregate } from './shared/watch.ts';
import { ChannelListener } from './sql/pg-listener.ts';
import { PG_CHANNELS, PgDb, type PgDbOptions } from './sql/postgres.ts';
import type { Storage } from './types.ts';
import { PostgresUsage } from './usage/postgres.ts';

export type PostgresStorageOptions = PgDbOptions;

/** Arbitrary constant for pg_advisory_xact_lock: serialises migrations across processes. */
const MIGRATION_LOCK_ID = 7_301_944_021;

export class PostgresStorage implements Storage {
  readonly #db: PgDb;
  readonly keys: PostgresKeys;
  readonly rules: PostgresRules;
  readonly budgets: PostgresBudgets;
  readonly usage: PostgresUsage;
  readonly counters: PostgresCounters;
  readonly files: PostgresFiles;
  readonly batches: PostgresBatches;
  readonly refusals: PostgresRefusals;
  /** Every watcher, by the channel of its aggregate. */
  readonly #watchers = new Map<string, Set<ChangeListener>>();
  /** The one LISTEN connection, opened with the first watch and closed with the last. */
  #listening: Promise<ChannelListener> | undefined;
  #closed = false;

  constructor(options: PostgresStorageOptions) {
    const db = new PgDb(options);
    this.#db = db;
    this.keys = new PostgresKeys(db);
    this.rules = new PostgresRules(db);
    this.budgets = new PostgresBudgets(db);
    this.usage = new PostgresUsage(db);
    this.counters = new PostgresCounters(db);
    this.files = new PostgresFiles(db);
    this.batches = new PostgresBatches(db);
    this.refusals = new PostgresRefusals(db);
  }

  async migrate(): Promise<void> {
    for (const migration of MIGRATIONS) {
      await this.#db.transaction(async (client) => {
        // The lock is held to the end of this transaction, so concurrent starters queue here
        // instead of racing on CREATE TABLE.
        await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_ID]);
        await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
          version integer PRIMARY KEY,
          applied_at timestamptz NOT NULL DEFAULT now()
        )`);
        const done = await client.query('SELECT 1 FROM schema_migrations WHERE version = $1', [migration.version]);
        if (done.rowCount) return;
        await client.query(migration.sql);
        await client.query('INSERT INTO schema_migrations (version) VALUES ($1)', [migration.version]);
      });
    }
  }

  /** Highest applied migration version (0 before `migrate()`). */
  async schemaVersion(): Promise<number> {
    const exists = await this.#db.pool.query<{ t: string | null }>("SELECT to_regclass('schema_migrations')::text AS t");
    if (!exists.rows[0]?.t) return 0;
    const res = await this.#db.pool.query<{ v: number | null }>('SELECT MAX(version) AS v FROM schema_migrations');
    return res.rows[0]?.v ?? 0;
  }

  /** Number of applied migrations; lets tests prove that re-running applies nothing twice. */
  async appliedMigrationCount(): Promise<number> {
    const res = await this.#db.pool.query<{ n: string }>('SELECT COUNT(*) AS n FROM schema_migrations');
    return Number(res.rows[0]?.n ?? 0);
  }

  /** LISTEN on the channel every change of `aggregate` is announced on (see PG_CHANNELS). */
  async watch(aggregate: WatchedAggregate, listener: ChangeListener): Promise<() => Promise<void>> {
    const channel = PG_CHANNELS[aggregate];
    // A listener of its own, so one function watching twice is stopped twice.
    const watcher = (): void => listener();
    let watchers = this.#watchers.get(channel);
    if (watchers === undefined) this.#watchers.set(channel, (watchers = new Set()));
    watchers.add(watcher);
    this.#listening ??= this.#listen();
    await this.#listening;
    let stopped = false;
    return async () => {
      if (stopped) return;
      stopped = true;
      watchers.delete(watcher);
      if ([...this.#watchers.values()].every((set) => set.size === 0)) await this.#unlisten();
    };
  }

  async ping(): Promise<void> {
    await this.#db.pool.query('SELECT 1');
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#watchers.clear();
    await this.#unlisten();
    await this.#db.pool.end();
  }

  async #listen(): Promise<ChannelListener> {
    const listener = new ChannelListener({
      url: this.#db.url,
      channels: Object.values(PG_CHANNELS),
      onNotify: (channel) => {
        for (const watcher of this.#watchers.get(channel) ?? []) watcher();
      },
      onError: this.#db.onError,
    });
    await listener.start();
    return listener;
  }

  async #unlisten(): Promise<void> {
    const listening = this.#listening;
    this.#listening = undefined;
    if (listening !== undefined) await (await listening).stop();
  }
}
