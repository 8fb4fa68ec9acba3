/**
 * Small helpers both storage implementations share, so the two cannot drift apart on the
 * semantics the contract tests pin down.
 */

import { budgetIdentity, type BudgetDefinition, type BudgetKey } from '../budgets/types.ts';
import { ruleIdentity } from '../ratelimit/rules.ts';
import type { RuleDefinition, RuleKey } from '../ratelimit/types.ts';
import type { UsageGroupBy } from './types.ts';

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

/**
 * Counter keys separate their parts with NUL, which PostgreSQL text cannot hold: both databases
 * store U+001F (the unit separator) in its place, a control character no subject may contain.
 */
export function storedCounterKey(key: string): string {
  return key.replaceAll('\u0000', '\u001f');
}

/** The columns of `rate_limit_counters`, in the order both implementations write them. */
export const COUNTER_COLUMNS = 'counter_key, period_seconds, window_start, requests_previous, requests_current, tokens_previous, tokens_current';

/** A saved counter written again replaces its windows (both databases speak this ON CONFLICT). */
export const COUNTER_REPLACE = `ON CONFLICT (counter_key) DO UPDATE SET
  period_seconds = excluded.period_seconds,
  window_start = excluded.window_start,
  requests_previous = excluded.requests_previous,
  requests_current = excluded.requests_current,
  tokens_previous = excluded.tokens_previous,
  tokens_current = excluded.tokens_current`;

export function counterKeyFromStored(stored: string): string {
  return stored.replaceAll('\u001f', '\u0000');
}

function toRuleKey(rule: RuleDefinition): RuleKey {
  return { scope: rule.scope, subject: rule.subject, periodSeconds: rule.periodSeconds };
}

/** True when re-seeding `next` over `prev` would change nothing an operator can see. */
function sameRuleContent(prev: RuleDefinition, next: RuleDefinition): boolean {
  return (
    prev.subject === next.subject &&
    prev.maxRequests === next.maxRequests &&
    prev.maxTokens === next.maxTokens &&
    prev.perChild === next.perChild
  );
}

function toBudgetKey(budget: BudgetDefinition): BudgetKey {
  return { userPath: budget.userPath, period: budget.period };
}

function sameBudgetContent(prev: BudgetDefinition, next: BudgetDefinition): boolean {
  return prev.userPath === next.userPath && prev.maxUsd === next.maxUsd;
}

/** What a config re-seed writes: stored rows and seeds share these fields. */
interface Seeded {
  readonly source: 'manual' | 'config';
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

export interface ReseedPlan<T, K> {
  /** Config rows to insert after every existing config row has been deleted. */
  inserts: T[];
  /** Keys that were not written because a manual row holds them. */
  skipped: K[];
}

interface ReseedKind<T, K> {
  identity(row: T): string;
  key(row: T): K;
  sameContent(prev: T, next: T): boolean;
}

/**
 * Decides what a config re-seed writes, given the rows currently stored. Pure, so every
 * implementation runs it inside its own transaction and they agree exactly.
 */
function planReseed<T extends Seeded, K>(kind: ReseedKind<T, K>, existing: readonly T[], seeds: readonly T[]): ReseedPlan<T, K> {
  const manual = new Set<string>();
  const oldConfig = new Map<string, T>();
  for (const row of existing) {
    const key = kind.identity(row);
    if (row.source === 'manual') manual.add(key);
    else oldConfig.set(key, row);
  }
  // Last declaration of a key wins, mirroring an upsert applied in order.
  const wanted = new Map<string, T>();
  for (const seed of seeds) wanted.set(kind.identity(seed), seed);

  const inserts: T[] = [];
  const skipped: K[] = [];
  for (const [key, seed] of wanted) {
    if (manual.has(key)) {
      skipped.push(kind.key(seed));
      continue;
    }
    const prev = oldConfig.get(key);
    inserts.push({
      ...seed,
      source: 'config',
      createdAt: prev ? prev.createdAt : seed.createdAt,
      updatedAt: prev && kind.sameContent(prev, seed) ? prev.updatedAt : seed.updatedAt,
    });
  }
  return { inserts, skipped };
}

const RULES: ReseedKind<RuleDefinition, RuleKey> = { identity: ruleIdentity, key: toRuleKey, sameContent: sameRuleContent };
const BUDGETS: ReseedKind<BudgetDefinition, BudgetKey> = { identity: budgetIdentity, key: toBudgetKey, sameContent: sameBudgetContent };

/** What `replaceConfigRules` writes. */
export function planConfigReseed(existing: readonly RuleDefinition[], rules: readonly RuleDefinition[]): ReseedPlan<RuleDefinition, RuleKey> {
  return planReseed(RULES, existing, rules);
}

/** What `replaceConfigBudgets` writes. */
export function planBudgetReseed(existing: readonly BudgetDefinition[], budgets: readonly BudgetDefinition[]): ReseedPlan<BudgetDefinition, BudgetKey> {
  return planReseed(BUDGETS, existing, budgets);
}

/** Sort order of budget listings: lower(user path), then period label (byte order). */
export function compareBudgets(a: BudgetDefinition, b: BudgetDefinition): number {
  const pa = a.userPath.toLowerCase();
  const pb = b.userPath.toLowerCase();
  if (pa !== pb) return pa < pb ? -1 : 1;
  return a.period < b.period ? -1 : a.period > b.period ? 1 : 0;
}
