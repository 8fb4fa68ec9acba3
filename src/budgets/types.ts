/**
 * Plain data of the budgets feature, shared by storage, configuration, the admin API and the
 * tracker without pulling in the tracker itself.
 */
import { normalizeUserPath } from '../user-path/user-path.ts';
import type { RuleSource } from '../ratelimit/types.ts';
import { fail, ok, type Result } from '../shared/result.ts';
import { isBudgetPeriod } from './periods.ts';

/** A spend cap in US dollars on a user path and its subtree, over one period. */
export interface BudgetDefinition {
  /** Normalised user path, with the spelling of its latest write; compared case-insensitively. */
  readonly userPath: string;
  /** `day`, `week`, `month` or `<n>s` (see periods.ts). */
  readonly period: string;
  readonly maxUsd: number;
  readonly source: RuleSource;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

/** A budget's identity: (user path, case-insensitive; period). */
export interface BudgetKey {
  readonly userPath: string;
  readonly period: string;
}

/** The largest cap accepted: a trillion dollars keeps every amount printable as plain digits. */
export const MAX_USD = 1e12;

export function budgetIdentity(key: BudgetKey): string {
  return `${key.userPath.toLowerCase()}\u0000${key.period}`;
}

/** A cap: a finite number > 0 and at most MAX_USD. */
export function parseMaxUsd(raw: unknown, field = 'max_usd'): Result<number> {
  if (typeof raw === 'number' && Number.isFinite(raw) && raw > 0 && raw <= MAX_USD) return ok(raw);
  return fail(`${field} must be a number of US dollars greater than 0 and at most ${MAX_USD}`);
}

/** Checks a budget read back from storage (or built by the admin API) before it is enforced. */
export function validateBudget(budget: BudgetDefinition): Result<BudgetDefinition> {
  const path = normalizeUserPath(budget.userPath, 'user_path');
  if (!path.ok) return path;
  if (!isBudgetPeriod(budget.period)) return fail(`period "${budget.period}" is not day, week, month or <n>s`);
  const max = parseMaxUsd(budget.maxUsd);
  if (!max.ok) return max;
  return ok({ ...budget, userPath: path.value });
}

/** A budget's status as the admin API and `/v1/usage` show it. */
export interface BudgetStatus {
  user_path: string;
  source: RuleSource;
  period_label: string;
  /** Length of the current period (a month's varies). */
  period_seconds: number;
  max_usd: number;
  spent_usd: number;
  /** Budget reservations on: dollars reserved by requests still running, not in spent_usd. */
  reserved_usd?: number;
  /** max_usd − spent_usd − reserved_usd, never below 0. */
  remaining_usd: number;
  period_start: string;
  period_end: string;
  created_at: string;
  updated_at: string;
}
