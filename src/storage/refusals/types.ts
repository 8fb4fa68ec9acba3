/**
 * Requests refused with a 429, counted per minute (migration 8). Requests refused are counted in
 * memory (src/usage/refusals.ts) and added here at most once a minute: one row per minute, user
 * path, asked-for provider and model, and rule, never one per refusal.
 */
import type { UsageBucketQuery } from '../usage/types.ts';

/**
 * Requests refused with a 429 (by a rate limit or a budget) in one UTC minute, by who was
 * refused, what it asked for and what refused it (see src/usage/refusals.ts).
 */
export interface RefusalCount {
  /** Start of the minute, epoch milliseconds. */
  minuteMs: number;
  /** The refused caller's user path, as it was given. */
  userPath: string;
  /** The provider instance and model it asked for; '' when it named none. */
  provider: string;
  model: string;
  /** A rate-limit rule's scope, or `budget`. */
  scope: 'user_path' | 'provider' | 'model' | 'budget';
  /** The rule's own subject (a per-child rule's path, not its child's), or the budget's user path. */
  subject: string;
  /** The rule's period label, or the budget's period. */
  period: string;
  count: number;
}

/** The refusals of one group in one time bucket (grouped as UsageBucket is). */
export interface RefusalBucket {
  start: Date;
  /** A user path as given, a provider instance name, or `provider/model` ('' for a refusal that named none). */
  key: string;
  refused: number;
}

export interface RefusalRepository {
  /**
   * Adds each count to the stored count with the same minute, user path, provider, model and
   * rule (creating it when there is none), in one transaction. The counts carry distinct keys.
   */
  add(counts: readonly RefusalCount[]): Promise<void>;
  /** Refusals in time buckets, one row per bucket and group that has any, by start then key (byte order). */
  buckets(query: UsageBucketQuery): Promise<RefusalBucket[]>;
}
