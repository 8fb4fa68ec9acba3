import type { BudgetDefinition, BudgetKey } from '../../budgets/types.ts';
import { sqliteMarks, sqliteParams, type SqliteDb } from '../sql/sqlite.ts';
import { BUDGET_COLUMNS, BUDGET_UPSERT, BUDGET_WRITE_COLUMNS, budgetFromRow, budgetParams, planBudgetReseed, type BudgetRow } from './rows.ts';
import type { BudgetRepository } from './types.ts';

const UPSERT = `INSERT INTO budgets (${BUDGET_WRITE_COLUMNS}) VALUES (${sqliteMarks(BUDGET_WRITE_COLUMNS)}) ${BUDGET_UPSERT}`;

export class SqliteBudgets implements BudgetRepository {
  readonly #db: SqliteDb;

  constructor(db: SqliteDb) {
    this.#db = db;
  }

  async list(): Promise<BudgetDefinition[]> {
    return this.#list();
  }

  async upsert(budget: BudgetDefinition): Promise<void> {
    this.#db.stmt(UPSERT).run(...sqliteParams(budgetParams(budget)));
  }

  async delete(key: BudgetKey): Promise<boolean> {
    return this.#db.stmt('DELETE FROM budgets WHERE path_key = ? AND period = ?').run(key.userPath.toLowerCase(), key.period).changes > 0;
  }

  async replaceConfig(budgets: readonly BudgetDefinition[]): Promise<BudgetKey[]> {
    return this.#db.transaction(() => {
      const plan = planBudgetReseed(this.#list(), budgets);
      this.#db.stmt("DELETE FROM budgets WHERE source = 'config'").run();
      for (const budget of plan.inserts) this.#db.stmt(UPSERT).run(...sqliteParams(budgetParams(budget)));
      return plan.skipped;
    }, 'immediate');
  }

  #list(): BudgetDefinition[] {
    return (this.#db.stmt(`SELECT ${BUDGET_COLUMNS} FROM budgets ORDER BY path_key, period`).all() as BudgetRow[]).map(budgetFromRow);
  }
}
