import { budgetIdentity, type BudgetDefinition, type BudgetKey } from '../../budgets/types.ts';
import type { MemoryWatchers } from '../shared/watch.ts';
import { compareBudgets, planBudgetReseed } from './rows.ts';
import type { BudgetRepository } from './types.ts';

export class MemoryBudgets implements BudgetRepository {
  readonly #budgets = new Map<string, BudgetDefinition>();
  readonly #watchers: MemoryWatchers;

  constructor(watchers: MemoryWatchers) {
    this.#watchers = watchers;
  }

  async list(): Promise<BudgetDefinition[]> {
    return [...this.#budgets.values()].map(copyBudget).sort(compareBudgets);
  }

  async upsert(budget: BudgetDefinition): Promise<void> {
    const key = budgetIdentity(budget);
    const prev = this.#budgets.get(key);
    this.#budgets.set(key, { ...copyBudget(budget), createdAt: prev ? prev.createdAt : budget.createdAt });
    this.#watchers.changed('budgets');
  }

  async delete(key: BudgetKey): Promise<boolean> {
    const deleted = this.#budgets.delete(budgetIdentity(key));
    if (deleted) this.#watchers.changed('budgets');
    return deleted;
  }

  async replaceConfig(budgets: readonly BudgetDefinition[]): Promise<BudgetKey[]> {
    const plan = planBudgetReseed([...this.#budgets.values()], budgets);
    for (const [key, budget] of this.#budgets) {
      if (budget.source === 'config') this.#budgets.delete(key);
    }
    for (const budget of plan.inserts) this.#budgets.set(budgetIdentity(budget), copyBudget(budget));
    this.#watchers.changed('budgets');
    return plan.skipped;
  }
}

/** Every field present, as a database row gives it back. */
function copyBudget(budget: BudgetDefinition): BudgetDefinition {
  return { userPath: budget.userPath, period: budget.period, maxUsd: budget.maxUsd, source: budget.source, createdAt: budget.createdAt, updatedAt: budget.updatedAt };
}
