/** The rate_limit_rules table, as both SQL repositories read and write it, and the re-seed plan every repository shares. */
import { ruleIdentity } from '../../ratelimit/rules.ts';
import type { RuleDefinition, RuleKey, Scope } from '../../ratelimit/types.ts';
import type { DefinitionTable } from '../sql/definitions.ts';
import { planReseed, type ReseedKind, type ReseedPlan } from '../shared/reseed.ts';
import { toBool, toDate, toNumber, type StoredTime } from '../shared/values.ts';

export interface RuleRow {
  scope: Scope;
  subject: string;
  period_seconds: number;
  max_requests: number | string | null;
  max_tokens: number | string | null;
  per_child: number | boolean;
  source: 'manual' | 'config';
  created_at: StoredTime;
  updated_at: StoredTime;
}

export function ruleFromRow(row: RuleRow): RuleDefinition {
  return {
    scope: row.scope,
    subject: row.subject,
    periodSeconds: row.period_seconds,
    maxRequests: row.max_requests === null ? undefined : toNumber(row.max_requests),
    maxTokens: row.max_tokens === null ? undefined : toNumber(row.max_tokens),
    ...(toBool(row.per_child) && { perChild: true as const }),
    source: row.source,
    createdAt: toDate(row.created_at),
    updatedAt: toDate(row.updated_at),
  };
}

const RULES: ReseedKind<RuleDefinition, RuleKey> = {
  identity: ruleIdentity,
  key: (rule) => ({ scope: rule.scope, subject: rule.subject, periodSeconds: rule.periodSeconds }),
  sameContent: (prev, next) =>
    prev.subject === next.subject && prev.maxRequests === next.maxRequests && prev.maxTokens === next.maxTokens && prev.perChild === next.perChild,
};

/** What `replaceConfig` writes. */
export function planRuleReseed(existing: readonly RuleDefinition[], rules: readonly RuleDefinition[]): ReseedPlan<RuleDefinition, RuleKey> {
  return planReseed(RULES, existing, rules);
}

export const RULE_TABLE: DefinitionTable<RuleDefinition, RuleKey, RuleRow> = {
  aggregate: 'rules',
  table: 'rate_limit_rules',
  columns: 'scope, subject, period_seconds, max_requests, max_tokens, per_child, source, created_at, updated_at',
  writeColumns: 'scope, subject, subject_key, period_seconds, max_requests, max_tokens, per_child, source, created_at, updated_at',
  // created_at is left alone: the rule's history starts at its first write.
  upsert: `ON CONFLICT (scope, subject_key, period_seconds) DO UPDATE SET
    subject = excluded.subject,
    max_requests = excluded.max_requests,
    max_tokens = excluded.max_tokens,
    per_child = excluded.per_child,
    source = excluded.source,
    updated_at = excluded.updated_at`,
  sqliteOrder: 'scope, subject_key, period_seconds',
  postgresOrder: 'scope, subject_key COLLATE "C", period_seconds',
  keyColumns: ['scope', 'subject_key', 'period_seconds'],
  // Folded in JS, not with SQL lower(), so both implementations derive the same key.
  keyParams: (key) => [key.scope, key.subject.toLowerCase(), key.periodSeconds],
  params: (rule) => [
    rule.scope,
    rule.subject,
    rule.subject.toLowerCase(),
    rule.periodSeconds,
    rule.maxRequests ?? null,
    rule.maxTokens ?? null,
    rule.perChild === true,
    rule.source,
    rule.createdAt,
    rule.updatedAt,
  ],
  fromRow: ruleFromRow,
  plan: planRuleReseed,
};
