/**
 * Rate-limit rules declared by configuration (YAML and env), flattened into one seed per rule key.
 * The rate-limit engine re-seeds these at every start with source `config`.
 */
import type { Scope } from '../ratelimit/types.ts';
import { periodLabel } from '../ratelimit/normalize.ts';
import { ruleIdentity } from '../ratelimit/rules.ts';
import { limitPeriodSeconds, type LimitConfig } from './schema.ts';

export interface RuleSeed {
  scope: Scope;
  subject: string;
  /** 0 = concurrent; minute 60, hour 3600, day 86400, anything else a custom window. */
  periodSeconds: number;
  maxRequests?: number;
  maxTokens?: number;
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
  const seeds: RuleSeed[] = [];
  const errors: string[] = [];
  const byKey = new Map<string, RuleSeed>();
  for (const entry of entries) {
    entry.limits.forEach((limit, i) => {
      const seed: RuleSeed = {
        scope: entry.scope,
        subject: entry.subject,
        periodSeconds: limitPeriodSeconds(limit),
        origin: entry.indexLimits ? `${entry.origin}.limits[${i}]` : entry.origin,
      };
      if (limit.max_requests !== undefined) seed.maxRequests = limit.max_requests;
      if (limit.max_tokens !== undefined) seed.maxTokens = limit.max_tokens;
      const key = ruleIdentity(seed);
      const earlier = byKey.get(key);
      if (earlier) {
        const where = earlier.origin === seed.origin ? `twice in ${seed.origin}` : `in ${earlier.origin} and in ${seed.origin}`;
        errors.push(
          `duplicate ${periodLabel(seed.periodSeconds)} rate limit for ${entry.scope} ${entry.subject}: declared ${where}`,
        );
        return;
      }
      byKey.set(key, seed);
      seeds.push(seed);
    });
  }
  return { seeds, errors };
}
