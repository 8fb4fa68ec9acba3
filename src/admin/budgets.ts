/**
 * Budgets as definitions (see definitions.ts): stored, seeded from the configuration, followed by
 * every replica, enforced by the budget tracker. What is particular to budgets: a new budget's
 * spend is read from the usage records before it is enforced.
 */
import type { BudgetTracker } from '../budgets/tracker.ts';
import { budgetIdentity, validateBudget, type BudgetDefinition, type BudgetKey } from '../budgets/types.ts';
import type { BudgetSeed } from '../config/seeds.ts';
import type { BudgetRepository } from '../storage/budgets/types.ts';
import { DefinitionManager, type DefinitionKind, type InvalidStored } from './definitions.ts';

export interface BudgetWrite extends BudgetKey {
  maxUsd: number;
}

export type BudgetManager = DefinitionManager<BudgetDefinition, BudgetWrite, BudgetKey>;

const BUDGETS: DefinitionKind<BudgetDefinition, BudgetWrite, BudgetKey> = {
  identity: (key) => budgetIdentity(key),
  build: (write, source, createdAt, updatedAt) => validateBudget({ userPath: write.userPath, period: write.period, maxUsd: write.maxUsd, source, createdAt, updatedAt }),
  check: (row) => validateBudget(row),
  label: (row) => `${row.userPath} ${row.period}`,
  notFoundMessage: (key) => `no ${key.period} budget for ${key.userPath}`,
  managedByConfigMessage: (key, origin) => `${key.period} budget for ${key.userPath} is managed by config (${origin}); change it there`,
};

/**
 * Re-seeds the config budgets, loads every stored budget into the tracker and reads their spend;
 * answers the manager, the seeds shadowed by a manual budget and the invalid stored budgets.
 */
export function startBudgetManager(
  stored: BudgetRepository,
  tracker: BudgetTracker,
  seeds: readonly BudgetSeed[],
  now: () => number,
): Promise<{ manager: BudgetManager; shadowed: BudgetSeed[]; invalid: InvalidStored[] }> {
  return DefinitionManager.start({
    kind: BUDGETS,
    store: stored,
    live: {
      get: (key) => tracker.get(key),
      async replaceAll(budgets) {
        tracker.replaceAll(budgets);
        await tracker.refresh();
      },
      async put(budget, existing) {
        tracker.upsert(budget);
        // A new budget's spend so far, before it is enforced on more than this replica's records.
        if (existing === undefined) await tracker.refresh();
      },
      remove(key) {
        tracker.delete(key);
      },
    },
    seeds,
    now,
  });
}

/**
 * Every stored budget, the valid ones apart: a row out of today's bounds (or written by hand) stays
 * in storage but is not enforced, so it cannot take the admin API down with it. The tracker reads
 * them on each refresh.
 */
export async function loadStoredBudgets(stored: Pick<BudgetRepository, 'list'>): Promise<{ valid: BudgetDefinition[]; invalid: InvalidStored[] }> {
  const valid: BudgetDefinition[] = [];
  const invalid: InvalidStored[] = [];
  for (const row of await stored.list()) {
    const checked = validateBudget(row);
    if (checked.ok) valid.push(checked.value);
    else invalid.push({ item: BUDGETS.label(row), error: checked.error });
  }
  return { valid, invalid };
}
