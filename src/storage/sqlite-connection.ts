/**
 * Opens a better-sqlite3 connection with the gateway's pragmas. Shared by the main thread and
 * the usage writer thread so both connections to one file behave the same under contention.
 */

import Database from 'better-sqlite3';
import type { Database as Db } from 'better-sqlite3';

export const DEFAULT_BUSY_TIMEOUT_MS = 5000;

export function openSqlite(path: string, busyTimeoutMs: number = DEFAULT_BUSY_TIMEOUT_MS): Db {
  const db = new Database(path);
  // WAL lets readers run beside the single writer; NORMAL is durable across process crashes
  // in WAL mode (only an OS crash can lose the last commits), which fits usage records.
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  // Two connections (main thread and usage writer) now write the same file: the busy timeout
  // is what makes one wait for the other's write lock instead of failing.
  db.pragma(`busy_timeout = ${Math.max(0, Math.trunc(busyTimeoutMs))}`);
  db.pragma('foreign_keys = ON');
  return db;
}

/** Databases no other connection can open, so their usage cannot be written by another thread. */
export function isPrivateSqlitePath(path: string): boolean {
  return path === ':memory:' || path === '';
}
