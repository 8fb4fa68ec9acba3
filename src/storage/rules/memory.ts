import { ruleIdentity } from '../../ratelimit/rules.ts';
import type { RuleDefinition, RuleKey } from '../../ratelimit/types.ts';
import { byText } from '../shared/values.ts';
import type { MemoryWatchers } from '../shared/watch.ts';
import { planRuleReseed } from './rows.ts';
import type { RuleRepository } from './types.ts';

export class MemoryRules implements RuleRepository {
  readonly #rules = new Map<string, RuleDefinition>();
  readonly #watchers: MemoryWatchers;

  constructor(watchers: MemoryWatchers) {
    this.#watchers = watchers;
  }

  async list(): Promise<RuleDefinition[]> {
    return [...this.#rules.values()]
      .map(copyRule)
      .sort((a, b) => byText(a.scope, b.scope) || byText(a.subject.toLowerCase(), b.subject.toLowerCase()) || a.periodSeconds - b.periodSeconds);
  }

  async upsert(rule: RuleDefinition): Promise<void> {
    const key = ruleIdentity(rule);
    const prev = this.#rules.get(key);
    this.#rules.set(key, { ...copyRule(rule), createdAt: prev ? prev.createdAt : rule.createdAt });
    this.#watchers.changed('rules');
  }

  async delete(key: RuleKey): Promise<boolean> {
    const deleted = this.#rules.delete(ruleIdentity(key));
    if (deleted) this.#watchers.changed('rules');
    return deleted;
  }

  async replaceConfig(rules: readonly RuleDefinition[]): Promise<RuleKey[]> {
    const plan = planRuleReseed([...this.#rules.values()], rules);
    for (const [key, rule] of this.#rules) {
      if (rule.source === 'config') this.#rules.delete(key);
    }
    for (const rule of plan.inserts) this.#rules.set(ruleIdentity(rule), copyRule(rule));
    this.#watchers.changed('rules');
    return plan.skipped;
  }
}

/** Every field present, as a database row gives it back (an absent cap is `undefined`). */
function copyRule(rule: RuleDefinition): RuleDefinition {
  return {
    scope: rule.scope,
    subject: rule.subject,
    periodSeconds: rule.periodSeconds,
    maxRequests: rule.maxRequests,
    maxTokens: rule.maxTokens,
    ...(rule.perChild && { perChild: true as const }),
    source: rule.source,
    createdAt: rule.createdAt,
    updatedAt: rule.updatedAt,
  };
}
