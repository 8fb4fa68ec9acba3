/** The saved windows of the in-memory rate-limit counters (rate_limits.persist_counters). */

/**
 * The request and token windows of one rate-limit counter, saved by the in-memory counter store
 * (rate_limits.persist_counters) so that they outlive a restart. Concurrency is never saved.
 */
export interface SavedCounter {
  /** The engine's counter key (NUL-separated parts; see counterKeyOf in src/ratelimit/rules.ts). */
  key: string;
  periodSeconds: number;
  /** Start of the window `requestsCurrent`/`tokensCurrent` belong to, in Unix seconds. */
  windowStart: number;
  requestsPrevious: number;
  requestsCurrent: number;
  tokensPrevious: number;
  tokensCurrent: number;
}

/** Saved counters to remove: every one, these keys, or every key beginning with one of the prefixes. */
export interface CounterRemovals {
  all?: boolean;
  keys?: readonly string[];
  prefixes?: readonly string[];
}

export interface CounterRepository {
  list(): Promise<SavedCounter[]>;
  /**
   * In one transaction: first removes `removals`, then inserts `counters` or replaces the saved
   * ones with the same key. Called off the request path (at most once a second, at shutdown, and
   * when an admin resets or deletes counters).
   */
  write(counters: readonly SavedCounter[], removals?: CounterRemovals): Promise<void>;
}
