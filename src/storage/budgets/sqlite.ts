import type { BudgetDefinition, BudgetKey } from '../../budgets/types.ts';
import { SqliteDefinitions } from '../sql/definitions.ts';
import type { SqliteDb } from '../sql/sqlite.ts';
import { BUDGET_TABLE, type BudgetRow } from './rows.ts';
import type { BudgetRepository } from './types.ts';

export class SqliteBudgets extends SqliteDefinitions<BudgetDefinition, BudgetKey, BudgetRow> implements BudgetRepository {
  constructor(db: SqliteDb) {
    super(db, BUDGET_TABLE);
  }
}
