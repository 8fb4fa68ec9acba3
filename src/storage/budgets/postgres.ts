import type { BudgetDefinition, BudgetKey } from '../../budgets/types.ts';
import { PostgresDefinitions } from '../sql/definitions.ts';
import type { PgDb } from '../sql/postgres.ts';
import { BUDGET_TABLE, type BudgetRow } from './rows.ts';
import type { BudgetRepository } from './types.ts';

/** Every write announced on PG_CHANNELS.budgets. */
export class PostgresBudgets extends PostgresDefinitions<BudgetDefinition, BudgetKey, BudgetRow> implements BudgetRepository {
  constructor(db: PgDb) {
    super(db, BUDGET_TABLE);
  }
}
