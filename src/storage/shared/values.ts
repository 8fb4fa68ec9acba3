/**
 * Values as the two databases hand them back, made one: SQLite gives epoch milliseconds, 0/1 and
 * numbers; PostgreSQL gives Dates, booleans and bigints as strings. The aggregates' row mappers
 * read through these, so one mapper serves both.
 */

/** A stored time: epoch milliseconds (SQLite) or a Date (PostgreSQL). */
export type StoredTime = number | Date;

export function toDate(value: StoredTime): Date {
  return value instanceof Date ? value : new Date(value);
}

/** A stored integer: a number (SQLite) or a bigint's text (PostgreSQL). */
export function toNumber(value: number | string): number {
  return Number(value);
}

export function toBool(value: number | boolean): boolean {
  return value === true || value === 1;
}

/** Byte order, as both databases sort text (SQLite BINARY, PostgreSQL COLLATE "C"). */
export const byText = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
