/** Budgets as storage holds them (the definitions themselves live in src/budgets). */
import type { BudgetDefinition, BudgetKey } from '../../budgets/types.ts';

/** Every write is announced to the watchers of `budgets` (Storage.watch). */
export interface BudgetRepository {
  /** Sorted by lower(user path), then period. */
  list(): Promise<BudgetDefinition[]>;
  /** Inserts or updates by key (lower(userPath), period); keeps createdAt on update. */
  upsert(budget: BudgetDefinition): Promise<void>;
  /** Returns false when no such budget exists. */
  delete(key: BudgetKey): Promise<boolean>;
  /** RuleRepository.replaceConfig for budgets: config budgets replaced, manual ones kept and winning. */
  replaceConfig(budgets: readonly BudgetDefinition[]): Promise<BudgetKey[]>;
}
