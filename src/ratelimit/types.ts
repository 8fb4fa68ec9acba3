/**
 * Shared vocabulary of the rate-limit engine. Everything here is plain data so the
 * config parser, the admin API and the HTTP layer can use it without pulling in the
 * engine itself.
 */

/** What a rule protects: a consumer (user path), a provider instance or a model. */
export type Scope = 'user_path' | 'provider' | 'model';

/** `manual`: created through the admin API or dashboard; `config`: seeded from YAML/env. */
export type RuleSource = 'manual' | 'config';

/**
 * Which cap a breach hit. `children`: a per-child rule already keeps counters for as many active
 * children as it may (rate_limits.max_children), so a new child cannot be counted yet. `learned`:
 * no rule, but the provider's own limit as learned from its answers (see learned.ts).
 */
export type LimitKind = 'requests' | 'tokens' | 'concurrent' | 'children' | 'learned';

export const SCOPES: readonly Scope[] = ['user_path', 'provider', 'model'];

/** How urgent a request is. `high` may use every cap whole; lower ones only their share (headroom). */
export type Priority = 'high' | 'normal' | 'low';

export const PRIORITIES: readonly Priority[] = ['high', 'normal', 'low'];

/**
 * The part of every cap kept free of each lower priority: a request of that priority is admitted
 * by a rule only while, after counting it, the rule stays within floor((1 - fraction) * cap).
 * Fractions from 0 (the whole cap) to 0.9.
 */
export interface Headroom {
  readonly normal: number;
  readonly low: number;
}

/**
 * A rate-limit rule as stored and shown. Subjects are stored with the spelling of their
 * latest write; matching and identity are case-insensitive.
 */
export interface RuleDefinition {
  readonly scope: Scope;
  /** user_path: a normalised path (`/team/a`); provider: instance name; model: `<provider>/<model>` or `<model>`. */
  readonly subject: string;
  /** Window length in seconds; 0 means a concurrency (in-flight) rule. */
  readonly periodSeconds: number;
  /** Request cap per window, or the in-flight cap for a concurrency rule. */
  readonly maxRequests?: number | undefined;
  /** Token cap per window (windowed rules only). */
  readonly maxTokens?: number | undefined;
  /**
   * User-path rules only: every direct child of the path (`/team/alice` under `/team`, with all
   * below it) gets a counter of its own with these caps; the path itself keeps its own counter.
   * Part of the rule, not of its key. Present only when true.
   */
  readonly perChild?: true | undefined;
  readonly source: RuleSource;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

/** A rule's identity. The subject is compared case-insensitively. */
export interface RuleKey {
  readonly scope: Scope;
  readonly subject: string;
  readonly periodSeconds: number;
}

export { fail, ok, type Result } from '../shared/result.ts';

/** Wall clock in milliseconds since the Unix epoch. The engine floors it to whole seconds. */
export interface Clock {
  now(): number;
}
