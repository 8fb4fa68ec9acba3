import type { BudgetDefinition, BudgetKey } from '../../budgets/types.ts';
import { pgMarks, pgNotify, pgNotifying, type PgDb, type Queryable } from '../sql/postgres.ts';
import { BUDGET_COLUMNS, BUDGET_UPSERT, BUDGET_WRITE_COLUMNS, budgetFromRow, budgetParams, planBudgetReseed, type BudgetRow } from './rows.ts';
import type { BudgetRepository } from './types.ts';

const UPSERT = `INSERT INTO budgets (${BUDGET_WRITE_COLUMNS}) VALUES (${pgMarks(BUDGET_WRITE_COLUMNS)}) ${BUDGET_UPSERT}`;

export class PostgresBudgets implements BudgetRepository {
  readonly #db: PgDb;

  constructor(db: PgDb) {
    this.#db = db;
  }

  list(): Promise<BudgetDefinition[]> {
    return listBudgets(this.#db.pool);
  }

  async upsert(budget: BudgetDefinition): Promise<void> {
    await this.#db.pool.query(pgNotifying('budgets', `${UPSERT} RETURNING 1`), budgetParams(budget));
  }

  async delete(key: BudgetKey): Promise<boolean> {
    const res = await this.#db.pool.query(pgNotifying('budgets', 'DELETE FROM budgets WHERE path_key = $1 AND period = $2 RETURNING 1'), [key.userPath.toLowerCase(), key.period]);
    return (res.rowCount ?? 0) > 0;
  }

  replaceConfig(budgets: readonly BudgetDefinition[]): Promise<BudgetKey[]> {
    return this.#db.transaction(async (client) => {
      // As for rules: no admin write may slip between the read and the writes.
      await client.query('LOCK TABLE budgets IN SHARE ROW EXCLUSIVE MODE');
      const plan = planBudgetReseed(await listBudgets(client), budgets);
      await client.query("DELETE FROM budgets WHERE source = 'config'");
      for (const budget of plan.inserts) await client.query(UPSERT, budgetParams(budget));
      await client.query(pgNotify('budgets'));
      return plan.skipped;
    });
  }
}

async function listBudgets(db: Queryable): Promise<BudgetDefinition[]> {
  const res = await db.query<BudgetRow>(`SELECT ${BUDGET_COLUMNS} FROM budgets ORDER BY path_key COLLATE "C", period COLLATE "C"`);
  return res.rows.map(budgetFromRow);
}
