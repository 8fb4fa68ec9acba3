import type { BudgetTracker } from '../budgets/tracker.ts';
import { budgetIdentity, validateBudget, type BudgetDefinition, type BudgetKey } from '../budgets/types.ts';
import type { BudgetSeed } from '../config/seeds.ts';
import type { Storage } from '../storage/types.ts';

/** Why a budget change was refused; the HTTP layer maps these to 400/404/409. */
export class BudgetChangeError extends Error {
  readonly reason: 'invalid' | 'not_found' | 'managed_by_config';
  constructor(reason: BudgetChangeError['reason'], message: string) {
    super(message);
    this.name = 'BudgetChangeError';
    this.reason = reason;
  }
}

/** A stored budget that no longer passes validation, and why; it stays in storage, not enforced. */
export interface InvalidStoredBudget {
  budget: string;
  error: string;
}

export interface BudgetWrite extends BudgetKey {
  maxUsd: number;
}

/**
 * Keeps the stored budgets and the live tracker in step, as `RuleManager` does for rate-limit
 * rules: storage is written first, so an enforced budget always survives a restart, and config
 * budgets are re-seeded at start and read-only through the API.
 */
export class BudgetManager {
  readonly #storage: Storage;
  readonly #tracker: BudgetTracker;
  readonly #now: () => number;
  /** budget identity → where a config budget was declared, for the 409 message. */
  readonly #configOrigins = new Map<string, string>();

  private constructor(storage: Storage, tracker: BudgetTracker, now: () => number) {
    this.#storage = storage;
    this.#tracker = tracker;
    this.#now = now;
  }

  /**
   * Re-seeds the config budgets (stale ones removed, manual ones untouched), loads every stored
   * budget into the tracker and reads their spend. Returns the seeds that lost to a manual budget.
   */
  static async start(
    storage: Storage,
    tracker: BudgetTracker,
    seeds: readonly BudgetSeed[],
    now: () => number,
  ): Promise<{ manager: BudgetManager; shadowed: BudgetSeed[]; invalid: InvalidStoredBudget[] }> {
    const manager = new BudgetManager(storage, tracker, now);
    const at = new Date(now());
    const bySeedKey = new Map<string, BudgetSeed>();
    const rows = seeds.map((seed) => {
      const definition = manager.#validate(seed, 'config', at);
      manager.#configOrigins.set(budgetIdentity(definition), seed.origin);
      bySeedKey.set(budgetIdentity(definition), seed);
      return definition;
    });
    const skipped = await storage.replaceConfigBudgets(rows);
    const shadowed = skipped.map((key) => bySeedKey.get(budgetIdentity(key))).filter((seed): seed is BudgetSeed => seed !== undefined);
    for (const seed of shadowed) manager.#configOrigins.delete(budgetIdentity(seed));
    const { valid, invalid } = await loadStoredBudgets(storage);
    tracker.replaceAll(valid);
    await tracker.refresh();
    return { manager, shadowed, invalid };
  }

  /** Creates the budget or changes its cap (its spend stays); a new budget's spend is read first. */
  async put(write: BudgetWrite): Promise<void> {
    this.#assertManual(write);
    const existing = this.#tracker.get(write);
    const now = new Date(this.#now());
    const definition = this.#validate(write, 'manual', existing?.createdAt ?? now, now);
    await this.#storage.upsertBudget(definition);
    this.#tracker.upsert(definition);
    if (existing === undefined) await this.#tracker.refresh();
  }

  async delete(key: BudgetKey): Promise<void> {
    this.#assertManual(key);
    if (!this.#tracker.get(key)) throw new BudgetChangeError('not_found', `no ${key.period} budget for ${key.userPath}`);
    await this.#storage.deleteBudget(key);
    this.#tracker.delete(key);
  }

  #assertManual(key: BudgetKey): void {
    const origin = this.#configOrigins.get(budgetIdentity(key));
    if (origin !== undefined) {
      throw new BudgetChangeError('managed_by_config', `${key.period} budget for ${key.userPath} is managed by config (${origin}); change it there`);
    }
  }

  #validate(write: BudgetWrite, source: 'manual' | 'config', createdAt: Date, updatedAt: Date = createdAt): BudgetDefinition {
    const checked = validateBudget({ userPath: write.userPath, period: write.period, maxUsd: write.maxUsd, source, createdAt, updatedAt });
    if (!checked.ok) throw new BudgetChangeError('invalid', checked.error);
    return checked.value;
  }
}

/**
 * Every stored budget, the valid ones apart: a row out of today's bounds (or written by hand) stays
 * in storage but is not enforced, so it cannot take the admin API down with it.
 */
export async function loadStoredBudgets(storage: Pick<Storage, 'listBudgets'>): Promise<{ valid: BudgetDefinition[]; invalid: InvalidStoredBudget[] }> {
  const valid: BudgetDefinition[] = [];
  const invalid: InvalidStoredBudget[] = [];
  for (const row of await storage.listBudgets()) {
    const checked = validateBudget(row);
    if (checked.ok) valid.push(checked.value);
    else invalid.push({ budget: `${row.userPath} ${row.period}`, error: checked.error });
  }
  return { valid, invalid };
}
