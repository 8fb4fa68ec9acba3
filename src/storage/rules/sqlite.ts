import type { RuleDefinition, RuleKey } from '../../ratelimit/types.ts';
import { sqliteMarks, sqliteParams, type SqliteDb } from '../sql/sqlite.ts';
import { RULE_COLUMNS, RULE_UPSERT, RULE_WRITE_COLUMNS, planRuleReseed, ruleFromRow, ruleParams, type RuleRow } from './rows.ts';
import type { RuleRepository } from './types.ts';

const UPSERT = `INSERT INTO rate_limit_rules (${RULE_WRITE_COLUMNS}) VALUES (${sqliteMarks(RULE_WRITE_COLUMNS)}) ${RULE_UPSERT}`;

export class SqliteRules implements RuleRepository {
  readonly #db: SqliteDb;

  constructor(db: SqliteDb) {
    this.#db = db;
  }

  async list(): Promise<RuleDefinition[]> {
    return this.#list();
  }

  async upsert(rule: RuleDefinition): Promise<void> {
    this.#db.stmt(UPSERT).run(...sqliteParams(ruleParams(rule)));
  }

  async delete(key: RuleKey): Promise<boolean> {
    return this.#db.stmt('DELETE FROM rate_limit_rules WHERE scope = ? AND subject_key = ? AND period_seconds = ?').run(key.scope, key.subject.toLowerCase(), key.periodSeconds).changes > 0;
  }

  async replaceConfig(rules: readonly RuleDefinition[]): Promise<RuleKey[]> {
    return this.#db.transaction(() => {
      const plan = planRuleReseed(this.#list(), rules);
      this.#db.stmt("DELETE FROM rate_limit_rules WHERE source = 'config'").run();
      for (const rule of plan.inserts) this.#db.stmt(UPSERT).run(...sqliteParams(ruleParams(rule)));
      return plan.skipped;
    }, 'immediate');
  }

  #list(): RuleDefinition[] {
    const rows = this.#db.stmt(`SELECT ${RULE_COLUMNS} FROM rate_limit_rules ORDER BY scope, subject_key, period_seconds`).all() as RuleRow[];
    return rows.map(ruleFromRow);
  }
}
