/**
 * Budget periods and their windows, in UTC. A period is named by its label: `day`, `week` (ISO,
 * starting Monday), `month` (calendar), or `<n>s` for a custom window of n seconds aligned to the
 * Unix epoch like rate-limit windows. A custom window of exactly one day is the same window as
 * `day`, so it is the same period; a custom 604800 s window is not an ISO week (the epoch was a
 * Thursday), so it stays `604800s`.
 */
import { MAX_PERIOD_SECONDS } from '../ratelimit/normalize.ts';
import { fail, ok, type Result } from '../shared/result.ts';

export const BUDGET_PERIOD_NAMES = ['day', 'week', 'month'] as const;
export type BudgetPeriodName = (typeof BUDGET_PERIOD_NAMES)[number];

const DAY_MS = 86_400_000;
const WEEK_MS = 7 * DAY_MS;
/** 1970-01-01 was a Thursday: the first ISO week began on Monday 1970-01-05, day 4 of the epoch. */
const FIRST_MONDAY_MS = 4 * DAY_MS;

export interface PeriodWindow {
  /** Inclusive, epoch milliseconds. */
  startMs: number;
  /** Exclusive, epoch milliseconds. */
  endMs: number;
}

/** The label of a custom window: one of exactly a day is `day`. */
export function periodFromSeconds(seconds: number): string {
  return seconds === 86_400 ? 'day' : `${seconds}s`;
}

/**
 * A period from an admin or config item: exactly one of a name (`day`, `week`, `month`; a
 * number or numeric string means seconds) or `period_seconds` (1 s to 366 days). Errors name the field.
 */
export function parseBudgetPeriod(named: unknown, seconds: unknown, prefix = ''): Result<string> {
  const has = (v: unknown): boolean => v !== undefined && v !== null;
  if (has(named) && has(seconds)) return fail(`${prefix}period: give either period or period_seconds, not both`);
  if (has(named)) {
    if (typeof named === 'number') return parseSeconds(named, `${prefix}period`);
    const text = typeof named === 'string' ? named.trim().toLowerCase() : undefined;
    if (text !== undefined && (BUDGET_PERIOD_NAMES as readonly string[]).includes(text)) return ok(text);
    if (text !== undefined && /^\d+$/.test(text)) return parseSeconds(Number(text), `${prefix}period`);
    return fail(`${prefix}period must be one of day, week, month, or a number of seconds from 1 to ${MAX_PERIOD_SECONDS}`);
  }
  if (has(seconds)) return parseSeconds(seconds, `${prefix}period_seconds`);
  return fail(`${prefix}period: required (day, week, month) or ${prefix}period_seconds`);
}

function parseSeconds(raw: unknown, field: string): Result<string> {
  if (typeof raw === 'number' && Number.isInteger(raw) && raw >= 1 && raw <= MAX_PERIOD_SECONDS) return ok(periodFromSeconds(raw));
  return fail(`${field} must be an integer from 1 to ${MAX_PERIOD_SECONDS} (366 days)`);
}

/** True for a label this module produced (a stored row written by hand may not be). */
export function isBudgetPeriod(label: string): boolean {
  if ((BUDGET_PERIOD_NAMES as readonly string[]).includes(label)) return true;
  const m = /^([1-9]\d*)s$/.exec(label);
  return m !== null && Number(m[1]) <= MAX_PERIOD_SECONDS && label !== '86400s';
}

/** The window of `period` that contains `nowMs`. */
export function periodWindow(period: string, nowMs: number): PeriodWindow {
  switch (period) {
    case 'day': {
      const startMs = nowMs - mod(nowMs, DAY_MS);
      return { startMs, endMs: startMs + DAY_MS };
    }
    case 'week': {
      const startMs = nowMs - mod(nowMs - FIRST_MONDAY_MS, WEEK_MS);
      return { startMs, endMs: startMs + WEEK_MS };
    }
    case 'month': {
      const at = new Date(nowMs);
      const y = at.getUTCFullYear();
      const m = at.getUTCMonth();
      return { startMs: Date.UTC(y, m, 1), endMs: Date.UTC(y, m + 1, 1) };
    }
    default: {
      const lengthMs = Number(period.slice(0, -1)) * 1000;
      const startMs = nowMs - mod(nowMs, lengthMs);
      return { startMs, endMs: startMs + lengthMs };
    }
  }
}

/** A modulo that stays non-negative for instants before the epoch. */
function mod(a: number, b: number): number {
  return ((a % b) + b) % b;
}
