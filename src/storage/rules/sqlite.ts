import type { RuleDefinition, RuleKey } from '../../ratelimit/types.ts';
import { SqliteDefinitions } from '../sql/definitions.ts';
import type { SqliteDb } from '../sql/sqlite.ts';
import { RULE_TABLE, type RuleRow } from './rows.ts';
import type { RuleRepository } from './types.ts';

export class SqliteRules extends SqliteDefinitions<RuleDefinition, RuleKey, RuleRow> implements RuleRepository {
  constructor(db: SqliteDb) {
    super(db, RULE_TABLE);
  }
}
