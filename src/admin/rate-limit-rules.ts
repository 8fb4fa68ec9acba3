/**
 * Rate-limit rules as definitions (see definitions.ts): stored, seeded from the configuration,
 * followed by every replica, enforced by the rate limiter. What is particular to rules: a change of
 * `per_child` moves the rule (its counters restart, for every gateway sharing them), and a rule's
 * counters can be reset, config rule or not.
 */
import type { RuleSeed } from '../config/seeds.ts';
import { buildRule, canonicalKey, periodLabel, type RateLimiter, type RuleDefinition, type RuleKey } from '../ratelimit/index.ts';
import type { RuleRepository } from '../storage/rules/types.ts';
import { DefinitionChangeError, DefinitionManager, type DefinitionKind, type InvalidStored } from './definitions.ts';

export interface RuleWrite extends RuleKey {
  maxRequests?: number;
  maxTokens?: number;
  /** A per-child rule (user-path rules only); absent: a plain rule. */
  perChild?: boolean;
}

export type RuleManager = DefinitionManager<RuleDefinition, RuleWrite, RuleKey>;

const RULES: DefinitionKind<RuleDefinition, RuleWrite, RuleKey> = {
  // Keys of valid rules always canonicalise; an invalid subject simply matches no rule.
  identity: (key) => canonicalKey(key) ?? '',
  build: (write, source, createdAt, updatedAt) =>
    buildRule({
      scope: write.scope,
      subject: write.subject,
      periodSeconds: write.periodSeconds,
      maxRequests: write.maxRequests,
      maxTokens: write.maxTokens,
      perChild: write.perChild,
      source,
      createdAt,
      updatedAt,
    }),
  check: (row) => buildRule(row),
  label: (row) => `${row.scope} ${row.subject} period_seconds=${row.periodSeconds}`,
  notFoundMessage: (key) => `no rate limit ${describe(key)}`,
  managedByConfigMessage: (key, origin) =>
    `rate limit ${describe(key)} is managed by config (${origin}); change it there, or reset its counters with /admin/rate-limits/reset-one`,
};

/**
 * Re-seeds the config rules, loads every stored rule into the limiter (counters of rules that stay
 * are kept), and answers the manager, the seeds shadowed by a manual rule and the invalid stored rules.
 */
export function startRuleManager(
  stored: RuleRepository,
  limiter: RateLimiter,
  seeds: readonly RuleSeed[],
  now: () => number,
): Promise<{ manager: RuleManager; shadowed: RuleSeed[]; invalid: InvalidStored[] }> {
  return DefinitionManager.start({
    kind: RULES,
    store: stored,
    live: {
      get: (key) => limiter.getRule(key),
      replaceAll: (rules) => limiter.replaceRules(rules),
      async put(rule, existing) {
        // Changing per_child moves the rule: its counters restart, for every gateway sharing them.
        if (existing !== undefined && (existing.perChild === true) !== (rule.perChild === true)) await limiter.deleteRule(rule);
        limiter.upsertRule(rule);
      },
      async remove(key) {
        await limiter.deleteRule(key);
      },
    },
    seeds,
    now,
  });
}

/** Zeroes one rule's counters; config rules too (counters are not configuration). */
export async function resetRuleCounters(limiter: RateLimiter, key: RuleKey): Promise<void> {
  if (!(await limiter.resetRule(key))) throw new DefinitionChangeError('not_found', RULES.notFoundMessage(key));
}

function describe(key: RuleKey): string {
  return `${key.scope} ${key.subject} ${periodLabel(key.periodSeconds)}`;
}
