/**
 * Small helpers both storage implementations share, so the two cannot drift apart on the
 * semantics the contract tests pin down.
 */

import { ruleIdentity } from '../ratelimit/rules.ts';
import type { RuleDefinition, RuleKey } from '../ratelimit/types.ts';
import type { UsageGroupBy } from './types.ts';

/** Escape character used in every LIKE pattern we build (declared with `ESCAPE '\'`). */
const LIKE_ESCAPE = '\\';

/** Escapes LIKE metacharacters so a user path is matched literally (`_` and `%` are legal in paths). */
export function escapeLike(value: string): string {
  return value.replace(/[\\%_]/g, (ch) => LIKE_ESCAPE + ch);
}

/**
 * Reduces a user-path prefix to the form used for subtree matching, or null when it covers
 * every path. A trailing slash is dropped so `/a/` behaves as `/a` rather than matching nothing.
 */
export function subtreePrefix(prefix: string): string | null {
  const trimmed = prefix.trim().replace(/\/+$/, '');
  return trimmed === '' ? null : trimmed;
}

/**
 * The SQL expression of a usage group's key in `usage_records`. A fixed whitelist: the group
 * names the caller passes never reach the SQL text.
 */
export const USAGE_GROUP_KEY_SQL: Readonly<Record<UsageGroupBy, string>> = {
  user_path: 'user_path',
  provider: 'provider',
  // Qualified: the same model id on two providers is two different things to an operator.
  model: "provider || '/' || model",
};

/** The group key of one record, as USAGE_GROUP_KEY_SQL computes it. */
export function usageGroupKey(groupBy: UsageGroupBy, record: { userPath: string; provider: string; model: string }): string {
  switch (groupBy) {
    case 'user_path':
      return record.userPath;
    case 'provider':
      return record.provider;
    case 'model':
      return `${record.provider}/${record.model}`;
  }
}

function toRuleKey(rule: RuleDefinition): RuleKey {
  return { scope: rule.scope, subject: rule.subject, periodSeconds: rule.periodSeconds };
}

/** True when re-seeding `next` over `prev` would change nothing an operator can see. */
function sameRuleContent(prev: RuleDefinition, next: RuleDefinition): boolean {
  return (
    prev.subject === next.subject &&
    prev.maxRequests === next.maxRequests &&
    prev.maxTokens === next.maxTokens
  );
}

export interface ReseedPlan {
  /** Config rules to insert after every existing config rule has been deleted. */
  inserts: RuleDefinition[];
  /** Keys that were not written because a manual rule holds them. */
  skipped: RuleKey[];
}

/**
 * Decides what `replaceConfigRules` writes, given the rules currently stored. Pure, so both
 * implementations run it inside their own transaction and agree exactly.
 */
export function planConfigReseed(existing: readonly RuleDefinition[], rules: readonly RuleDefinition[]): ReseedPlan {
  const manual = new Set<string>();
  const oldConfig = new Map<string, RuleDefinition>();
  for (const rule of existing) {
    const key = ruleIdentity(rule);
    if (rule.source === 'manual') manual.add(key);
    else oldConfig.set(key, rule);
  }
  // Last declaration of a key wins, mirroring an upsert applied in order.
  const wanted = new Map<string, RuleDefinition>();
  for (const rule of rules) wanted.set(ruleIdentity(rule), rule);

  const inserts: RuleDefinition[] = [];
  const skipped: RuleKey[] = [];
  for (const [key, rule] of wanted) {
    if (manual.has(key)) {
      skipped.push(toRuleKey(rule));
      continue;
    }
    const prev = oldConfig.get(key);
    inserts.push({
      ...rule,
      source: 'config',
      createdAt: prev ? prev.createdAt : rule.createdAt,
      updatedAt: prev && sameRuleContent(prev, rule) ? prev.updatedAt : rule.updatedAt,
    });
  }
  return { inserts, skipped };
}
