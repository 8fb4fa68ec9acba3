/** Rate-limit rules as storage holds them (the definitions themselves live in src/ratelimit). */
import type { RuleDefinition, RuleKey } from '../../ratelimit/types.ts';

/** Every write is announced to the watchers of `rules` (Storage.watch). */
export interface RuleRepository {
  /** Sorted by scope, lower(subject), period. */
  list(): Promise<RuleDefinition[]>;
  /** Inserts or updates by key (scope, lower(subject), periodSeconds); keeps createdAt on update. */
  upsert(rule: RuleDefinition): Promise<void>;
  /** Returns false when no such rule exists. */
  delete(key: RuleKey): Promise<boolean>;
  /**
   * Replaces every `config` rule with `rules` in one transaction; manual rules are untouched.
   * A config rule whose key matches an existing `manual` rule is not written (the operator's
   * manual rule wins); those keys are returned so the caller can warn. A config rule re-seeded
   * under an existing key keeps its createdAt (and its updatedAt when nothing changed), so
   * restarts do not rewrite history.
   */
  replaceConfig(rules: readonly RuleDefinition[]): Promise<RuleKey[]>;
}
