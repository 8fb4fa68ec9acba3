/**
 * Rate-limit rules and budgets declared by configuration (YAML and env), flattened into one seed
 * per key. They are re-seeded at every start with source `config`.
 */
import type { Scope } from '../ratelimit/types.ts';
import { periodLabel } from '../ratelimit/normalize.ts';
import { ruleIdentity } from '../ratelimit/rules.ts';
import { budgetIdentity } from '../budgets/types.ts';
import { budgetLimitPeriod, limitPeriodSeconds, type BudgetLimitConfig, type LimitConfig } from './schema.ts';

export interface RuleSeed {
  scope: Scope;
  subject: string;
  /** 0 = concurrent; minute 60, hour 3600, day 86400, anything else a custom window. */
  periodSeconds: number;
  maxRequests?: number;
  maxTokens?: number;
  /** A per-child rule (user-path rules only). */
  perChild?: boolean;
  /** Where it was declared, e.g. `floodgate.yaml rate_limits.user_paths[0].limits[1]` or `env SET_RATE_LIMIT_TEAM`. */
  origin: string;
}

/** One declaration of rules for a subject, before flattening. */
export interface RuleEntry {
  scope: Scope;
  subject: string;
  limits: readonly LimitConfig[];
  /** Origin of the entry; per-limit origins append `.limits[i]` when `indexLimits` is set. */
  origin: string;
  indexLimits: boolean;
}


/** Flattens entries into seeds; two seeds with one key is an error naming both declarations. */
export function buildSeeds(entries: readonly RuleEntry[]): { seeds: RuleSeed[]; errors: string[] } {
  return flatten<RuleEntry, LimitConfig, RuleSeed>(
    entries,
    (entry, limit, origin) => {
      const seed: RuleSeed = { scope: entry.scope, subject: entry.subject, periodSeconds: limitPeriodSeconds(limit), origin };
      if (limit.max_requests !== undefined) seed.maxRequests = limit.max_requests;
      if (limit.max_tokens !== undefined) seed.maxTokens = limit.max_tokens;
      // The schema refuses per_child on provider and model limits.
      if (limit.per_child === true) seed.perChild = true;
      return seed;
    },
    ruleIdentity,
    (seed) => `duplicate ${periodLabel(seed.periodSeconds)} rate limit for ${seed.scope} ${seed.subject}`,
  );
}

interface Declared<Limit> {
  limits: readonly Limit[];
  origin: string;
  indexLimits: boolean;
}

/** One seed per limit of each entry; a key declared twice is reported with both origins. */
function flatten<Entry extends Declared<Limit>, Limit, Seed extends { origin: string }>(
  entries: readonly Entry[],
  make: (entry: Entry, limit: Limit, origin: string) => Seed,
  identity: (seed: Seed) => string,
  duplicate: (seed: Seed) => string,
): { seeds: Seed[]; errors: string[] } {
  const seeds: Seed[] = [];
  const errors: string[] = [];
  const byKey = new Map<string, Seed>();
  for (const entry of entries) {
    entry.limits.forEach((limit, i) => {
      const seed = make(entry, limit, entry.indexLimits ? `${entry.origin}.limits[${i}]` : entry.origin);
      const key = identity(seed);
      const earlier = byKey.get(key);
      if (earlier) {
        const where = earlier.origin === seed.origin ? `twice in ${seed.origin}` : `in ${earlier.origin} and in ${seed.origin}`;
        errors.push(`${duplicate(seed)}: declared ${where}`);
        return;
      }
      byKey.set(key, seed);
      seeds.push(seed);
    });
  }
  return { seeds, errors };
}

/** A budget declared by configuration. */
export interface BudgetSeed {
  userPath: string;
  /** `day`, `week`, `month` or `<n>s`. */
  period: string;
  maxUsd: number;
  /** Where it was declared, e.g. `floodgate.yaml budgets.user_paths[0].limits[1]` or `env SET_BUDGET_TEAM`. */
  origin: string;
}

/** One declaration of budgets for a user path, before flattening. */
export interface BudgetEntry {
  userPath: string;
  limits: readonly BudgetLimitConfig[];
  origin: string;
  /** Per-limit origins append `.limits[i]` (YAML items, not env variables). */
  indexLimits: boolean;
}

/** Flattens entries into seeds; two seeds with one key is an error naming both declarations. */
export function buildBudgetSeeds(entries: readonly BudgetEntry[]): { seeds: BudgetSeed[]; errors: string[] } {
  return flatten<BudgetEntry, BudgetLimitConfig, BudgetSeed>(
    entries,
    (entry, limit, origin) => ({ userPath: entry.userPath, period: budgetLimitPeriod(limit), maxUsd: limit.max_usd, origin }),
    budgetIdentity,
    (seed) => `duplicate ${seed.period} budget for ${seed.userPath}`,
  );
}
