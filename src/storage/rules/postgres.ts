import type { RuleDefinition, RuleKey } from '../../ratelimit/types.ts';
import { pgMarks, pgNotify, pgNotifying, type PgDb, type Queryable } from '../sql/postgres.ts';
import { RULE_COLUMNS, RULE_UPSERT, RULE_WRITE_COLUMNS, planRuleReseed, ruleFromRow, ruleParams, type RuleRow } from './rows.ts';
import type { RuleRepository } from './types.ts';

const UPSERT = `INSERT INTO rate_limit_rules (${RULE_WRITE_COLUMNS}) VALUES (${pgMarks(RULE_WRITE_COLUMNS)}) ${RULE_UPSERT}`;

export class PostgresRules implements RuleRepository {
  readonly #db: PgDb;

  constructor(db: PgDb) {
    this.#db = db;
  }

  list(): Promise<RuleDefinition[]> {
    return listRules(this.#db.pool);
  }

  async upsert(rule: RuleDefinition): Promise<void> {
    await this.#db.pool.query(pgNotifying('rules', `${UPSERT} RETURNING 1`), ruleParams(rule));
  }

  async delete(key: RuleKey): Promise<boolean> {
    const res = await this.#db.pool.query(
      pgNotifying('rules', 'DELETE FROM rate_limit_rules WHERE scope = $1 AND subject_key = $2 AND period_seconds = $3 RETURNING 1'),
      [key.scope, key.subject.toLowerCase(), key.periodSeconds],
    );
    return (res.rowCount ?? 0) > 0;
  }

  replaceConfig(rules: readonly RuleDefinition[]): Promise<RuleKey[]> {
    return this.#db.transaction(async (client) => {
      // Lock the table so a concurrent admin write cannot slip between the read and the writes
      // (readers are not blocked by this mode).
      await client.query('LOCK TABLE rate_limit_rules IN SHARE ROW EXCLUSIVE MODE');
      const plan = planRuleReseed(await listRules(client), rules);
      await client.query("DELETE FROM rate_limit_rules WHERE source = 'config'");
      for (const rule of plan.inserts) await client.query(UPSERT, ruleParams(rule));
      await client.query(pgNotify('rules'));
      return plan.skipped;
    });
  }
}

async function listRules(db: Queryable): Promise<RuleDefinition[]> {
  const res = await db.query<RuleRow>(`SELECT ${RULE_COLUMNS} FROM rate_limit_rules ORDER BY scope, subject_key COLLATE "C", period_seconds`);
  return res.rows.map(ruleFromRow);
}
