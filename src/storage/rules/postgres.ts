import type { RuleDefinition, RuleKey } from '../../ratelimit/types.ts';
import { PostgresDefinitions } from '../sql/definitions.ts';
import type { PgDb } from '../sql/postgres.ts';
import { RULE_TABLE, type RuleRow } from './rows.ts';
import type { RuleRepository } from './types.ts';

/** Every write announced on PG_CHANNELS.rules. */
export class PostgresRules extends PostgresDefinitions<RuleDefinition, RuleKey, RuleRow> implements RuleRepository {
  constructor(db: PgDb) {
    super(db, RULE_TABLE);
  }
}
