/** The budgets table, as both SQL repositories read and write it, and the re-seed plan every repository shares. */
import { budgetIdentity, type BudgetDefinition, type BudgetKey } from '../../budgets/types.ts';
import type { DefinitionTable } from '../sql/definitions.ts';
import { planReseed, type ReseedKind, type ReseedPlan } from '../shared/reseed.ts';
import { byText, toDate, type StoredTime } from '../shared/values.ts';

export interface BudgetRow {
  user_path: string;
  period: string;
  max_usd: number;
  source: 'manual' | 'config';
  created_at: StoredTime;
  updated_at: StoredTime;
}

export function budgetFromRow(row: BudgetRow): BudgetDefinition {
  return {
    userPath: row.user_path,
    period: row.period,
    maxUsd: row.max_usd,
    source: row.source,
    createdAt: toDate(row.created_at),
    updatedAt: toDate(row.updated_at),
  };
}

const BUDGETS: ReseedKind<BudgetDefinition, BudgetKey> = {
  identity: budgetIdentity,
  key: (budget) => ({ userPath: budget.userPath, period: budget.period }),
  sameContent: (prev, next) => prev.userPath === next.userPath && prev.maxUsd === next.maxUsd,
};

/** What `replaceConfig` writes. */
export function planBudgetReseed(existing: readonly BudgetDefinition[], budgets: readonly BudgetDefinition[]): ReseedPlan<BudgetDefinition, BudgetKey> {
  return planReseed(BUDGETS, existing, budgets);
}

/** Sort order of budget listings: lower(user path), then period label (byte order). */
export function compareBudgets(a: BudgetDefinition, b: BudgetDefinition): number {
  return byText(a.userPath.toLowerCase(), b.userPath.toLowerCase()) || byText(a.period, b.period);
}

export const BUDGET_TABLE: DefinitionTable<BudgetDefinition, BudgetKey, BudgetRow> = {
  aggregate: 'budgets',
  table: 'budgets',
  columns: 'user_path, period, max_usd, source, created_at, updated_at',
  writeColumns: 'user_path, path_key, period, max_usd, source, created_at, updated_at',
  // created_at is left alone: the budget's history starts at its first write.
  upsert: `ON CONFLICT (path_key, period) DO UPDATE SET
    user_path = excluded.user_path,
    max_usd = excluded.max_usd,
    source = excluded.source,
    updated_at = excluded.updated_at`,
  sqliteOrder: 'path_key, period',
  postgresOrder: 'path_key COLLATE "C", period COLLATE "C"',
  keyColumns: ['path_key', 'period'],
  keyParams: (key) => [key.userPath.toLowerCase(), key.period],
  params: (b) => [b.userPath, b.userPath.toLowerCase(), b.period, b.maxUsd, b.source, b.createdAt, b.updatedAt],
  fromRow: budgetFromRow,
  plan: planBudgetReseed,
};
