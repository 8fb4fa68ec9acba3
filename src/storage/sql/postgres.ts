/**
 * One PostgreSQL database (pg Pool) as the aggregates' PostgreSQL repositories use it. Every query
 * is parameterised. pg reads and writes timestamptz as Dates and bigints as text (converted by
 * the row mappers, see ../shared/values.ts).
 */
import pg from 'pg';
import type { PoolClient } from 'pg';
import type { WatchedAggregate } from '../shared/watch.ts';

/** A pool or one of its clients inside a transaction. */
export type Queryable = Pick<pg.Pool, 'query'> | PoolClient;

/**
 * Where changes to each watched aggregate are announced. Every write announces in the same
 * statement or transaction, so the announcement is sent exactly when the change commits.
 */
export const PG_CHANNELS: Readonly<Record<WatchedAggregate, string>> = {
  keys: 'floodgate_api_keys',
  rules: 'floodgate_rules',
  budgets: 'floodgate_budgets',
};

export interface PgDbOptions {
  /** Connection string, e.g. postgres://user@host:5432/db. */
  url: string;
  /** Pool size; storage is off the hot path, so a few connections suffice. */
  maxConnections?: number;
  /**
   * Errors raised by idle pooled connections (server restart, network drop). pg emits them as
   * 'error' events, which would crash the process if nobody listened.
   */
  onError?: (err: Error) => void;
}

export class PgDb {
  readonly pool: pg.Pool;
  readonly url: string;
  readonly onError: (err: Error) => void;

  constructor(options: PgDbOptions) {
    this.url = options.url;
    this.pool = new pg.Pool({ connectionString: options.url, max: options.maxConnections ?? 5 });
    this.onError = options.onError ?? (() => {});
    this.pool.on('error', (err) => this.onError(err));
  }

  async transaction<T>(work: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }
}

/** The SQL that announces a change of `aggregate`, sent when the transaction it runs in commits. */
export function pgNotify(aggregate: WatchedAggregate): string {
  return `SELECT pg_notify('${PG_CHANNELS[aggregate]}', '')`;
}

/**
 * A statement that runs `write` (an INSERT, UPDATE or DELETE … RETURNING 1) and announces a change
 * of `aggregate` once per row it touched; its rowCount is the write's.
 */
export function pgNotifying(aggregate: WatchedAggregate, write: string): string {
  return `WITH written AS (${write}) SELECT pg_notify('${PG_CHANNELS[aggregate]}', '') FROM written`;
}

/** `$1, $2, …` for a comma-separated column list. */
export function pgMarks(columns: string, first = 1): string {
  return columns.split(',').map((_, i) => `$${first + i}`).join(', ');
}

/** The subtree test of a user path (case-insensitive, like rule matching); binds subtreeMatch's exact, below. */
export function pgSubtree(exact: number, below: number): string {
  return `(lower(user_path) = lower($${exact}) OR user_path ILIKE $${below} ESCAPE '\\')`;
}
