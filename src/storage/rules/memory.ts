import { ruleIdentity } from '../../ratelimit/rules.ts';
import type { RuleDefinition, RuleKey } from '../../ratelimit/types.ts';
import { MemoryDefinitions } from '../shared/memory-definitions.ts';
import { byText } from '../shared/values.ts';
import type { MemoryWatchers } from '../shared/watch.ts';
import { planRuleReseed } from './rows.ts';
import type { RuleRepository } from './types.ts';

export class MemoryRules extends MemoryDefinitions<RuleDefinition, RuleKey> implements RuleRepository {
  constructor(watchers: MemoryWatchers) {
    super(
      {
        aggregate: 'rules',
        identity: ruleIdentity,
        copy: (rule) => ({
          scope: rule.scope,
          subject: rule.subject,
          periodSeconds: rule.periodSeconds,
          maxRequests: rule.maxRequests,
          maxTokens: rule.maxTokens,
          ...(rule.perChild && { perChild: true as const }),
          source: rule.source,
          createdAt: rule.createdAt,
          updatedAt: rule.updatedAt,
        }),
        compare: (a, b) => byText(a.scope, b.scope) || byText(a.subject.toLowerCase(), b.subject.toLowerCase()) || a.periodSeconds - b.periodSeconds,
        plan: planRuleReseed,
      },
      watchers,
    );
  }
}
