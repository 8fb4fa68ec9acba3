/** The rate_limit_counters table, as both SQL repositories read and write it. */
import { toNumber } from '../shared/values.ts';
import type { SavedCounter } from './types.ts';

/**
 * Counter keys separate their parts with NUL, which PostgreSQL text cannot hold: both databases
 * store U+001F (the unit separator) in its place, a control character no subject may contain.
 */
export function storedCounterKey(key: string): string {
  return key.replaceAll('\u0000', '\u001f');
}

export function counterKeyFromStored(stored: string): string {
  return stored.replaceAll('\u001f', '\u0000');
}

/** The columns of `rate_limit_counters`, in counterParams order. */
export const COUNTER_COLUMNS = 'counter_key, period_seconds, window_start, requests_previous, requests_current, tokens_previous, tokens_current';

/** A saved counter written again replaces its windows (both databases speak this ON CONFLICT). */
export const COUNTER_REPLACE = `ON CONFLICT (counter_key) DO UPDATE SET
  period_seconds = excluded.period_seconds,
  window_start = excluded.window_start,
  requests_previous = excluded.requests_previous,
  requests_current = excluded.requests_current,
  tokens_previous = excluded.tokens_previous,
  tokens_current = excluded.tokens_current`;

/** Windows are numbers (SQLite) or bigint text (PostgreSQL). */
export interface CounterRow {
  counter_key: string;
  period_seconds: number;
  window_start: number | string;
  requests_previous: number | string;
  requests_current: number | string;
  tokens_previous: number | string;
  tokens_current: number | string;
}

/** Parameters in COUNTER_COLUMNS order. */
export function counterParams(c: SavedCounter): unknown[] {
  return [storedCounterKey(c.key), c.periodSeconds, c.windowStart, c.requestsPrevious, c.requestsCurrent, c.tokensPrevious, c.tokensCurrent];
}

export function counterFromRow(row: CounterRow): SavedCounter {
  return {
    key: counterKeyFromStored(row.counter_key),
    periodSeconds: row.period_seconds,
    windowStart: toNumber(row.window_start),
    requestsPrevious: toNumber(row.requests_previous),
    requestsCurrent: toNumber(row.requests_current),
    tokensPrevious: toNumber(row.tokens_previous),
    tokensCurrent: toNumber(row.tokens_current),
  };
}
