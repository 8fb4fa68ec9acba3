import { budgetIdentity, type BudgetDefinition, type BudgetKey } from '../../budgets/types.ts';
import { MemoryDefinitions } from '../shared/memory-definitions.ts';
import type { MemoryWatchers } from '../shared/watch.ts';
import { compareBudgets, planBudgetReseed } from './rows.ts';
import type { BudgetRepository } from './types.ts';

export class MemoryBudgets extends MemoryDefinitions<BudgetDefinition, BudgetKey> implements BudgetRepository {
  constructor(watchers: MemoryWatchers) {
    super(
      {
        aggregate: 'budgets',
        identity: budgetIdentity,
        copy: (b) => ({ userPath: b.userPath, period: b.period, maxUsd: b.maxUsd, source: b.source, createdAt: b.createdAt, updatedAt: b.updatedAt }),
        compare: compareBudgets,
        plan: planBudgetReseed,
      },
      watchers,
    );
  }
}
