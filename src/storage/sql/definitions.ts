/**
 * Rules and budgets are stored alike: rows upserted and deleted by a case-insensitive key,
 * config rows re-seeded in one transaction (manual ones kept and winning), every write announced
 * to the watchers of the aggregate. Each aggregate describes its table (rules/rows.ts,
 * budgets/rows.ts); these classes are that storage once per database (the in-memory one:
 * ../shared/memory-definitions.ts).
 */
import type { ReseedPlan } from '../shared/reseed.ts';
import { pgMarks, pgNotify, pgNotifying, type PgDb, type Queryable } from './postgres.ts';
import { sqliteMarks, sqliteParams, type SqliteDb } from './sqlite.ts';

/** One definition table, as both SQL databases hold it. */
export interface DefinitionTable<D, K, Row> {
  aggregate: 'rules' | 'budgets';
  table: string;
  /** What a listing reads, in fromRow's shape. */
  columns: string;
  /** What a write sets, in params order. */
  writeColumns: string;
  /** The upsert's ON CONFLICT clause (both databases speak it). */
  upsert: string;
  /** A listing's ORDER BY, in byte order: SQLite's BINARY collation, PostgreSQL's COLLATE "C". */
  sqliteOrder: string;
  postgresOrder: string;
  /** The key columns a delete matches, and the key's values for them. */
  keyColumns: readonly string[];
  keyParams(key: K): unknown[];
  params(definition: D): unknown[];
  fromRow(row: Row): D;
  plan(existing: readonly D[], seeds: readonly D[]): ReseedPlan<D, K>;
}

export class SqliteDefinitions<D, K, Row> {
  readonly #db: SqliteDb;
  readonly #table: DefinitionTable<D, K, Row>;
  readonly #upsert: string;

  constructor(db: SqliteDb, table: DefinitionTable<D, K, Row>) {
    this.#db = db;
    this.#table = table;
    this.#upsert = `INSERT INTO ${table.table} (${table.writeColumns}) VALUES (${sqliteMarks(table.writeColumns)}) ${table.upsert}`;
  }

  async list(): Promise<D[]> {
    return this.#list();
  }

  async upsert(definition: D): Promise<void> {
    this.#db.stmt(this.#upsert).run(...sqliteParams(this.#table.params(definition)));
  }

  async delete(key: K): Promise<boolean> {
    const where = this.#table.keyColumns.map((c) => `${c} = ?`).join(' AND ');
    return this.#db.stmt(`DELETE FROM ${this.#table.table} WHERE ${where}`).run(...this.#table.keyParams(key)).changes > 0;
  }

  async replaceConfig(definitions: readonly D[]): Promise<K[]> {
    return this.#db.transaction(() => {
      const plan = this.#table.plan(this.#list(), definitions);
      this.#db.stmt(`DELETE FROM ${this.#table.table} WHERE source = 'config'`).run();
      for (const definition of plan.inserts) this.#db.stmt(this.#upsert).run(...sqliteParams(this.#table.params(definition)));
      return plan.skipped;
    }, 'immediate');
  }

  #list(): D[] {
    const rows = this.#db.stmt(`SELECT ${this.#table.columns} FROM ${this.#table.table} ORDER BY ${this.#table.sqliteOrder}`).all() as Row[];
    return rows.map((row) => this.#table.fromRow(row));
  }
}

export class PostgresDefinitions<D, K, Row> {
  readonly #db: PgDb;
  readonly #table: DefinitionTable<D, K, Row>;
  readonly #upsert: string;

  constructor(db: PgDb, table: DefinitionTable<D, K, Row>) {
    this.#db = db;
    this.#table = table;
    this.#upsert = `INSERT INTO ${table.table} (${table.writeColumns}) VALUES (${pgMarks(table.writeColumns)}) ${table.upsert}`;
  }

  list(): Promise<D[]> {
    return this.#list(this.#db.pool);
  }

  async upsert(definition: D): Promise<void> {
    await this.#db.pool.query(pgNotifying(this.#table.aggregate, `${this.#upsert} RETURNING 1`), this.#table.params(definition));
  }

  async delete(key: K): Promise<boolean> {
    const where = this.#table.keyColumns.map((c, i) => `${c} = $${i + 1}`).join(' AND ');
    const res = await this.#db.pool.query(pgNotifying(this.#table.aggregate, `DELETE FROM ${this.#table.table} WHERE ${where} RETURNING 1`), this.#table.keyParams(key));
    return (res.rowCount ?? 0) > 0;
  }

  replaceConfig(definitions: readonly D[]): Promise<K[]> {
    return this.#db.transaction(async (client) => {
      // Lock the table so a concurrent admin write cannot slip between the read and the writes
      // (readers are not blocked by this mode).
      await client.query(`LOCK TABLE ${this.#table.table} IN SHARE ROW EXCLUSIVE MODE`);
      const plan = this.#table.plan(await this.#list(client), definitions);
      await client.query(`DELETE FROM ${this.#table.table} WHERE source = 'config'`);
      for (const definition of plan.inserts) await client.query(this.#upsert, this.#table.params(definition));
      await client.query(pgNotify(this.#table.aggregate));
      return plan.skipped;
    });
  }

  async #list(db: Queryable): Promise<D[]> {
    const res = await db.query(`SELECT ${this.#table.columns} FROM ${this.#table.table} ORDER BY ${this.#table.postgresOrder}`);
    return (res.rows as Row[]).map((row) => this.#table.fromRow(row));
  }
}
