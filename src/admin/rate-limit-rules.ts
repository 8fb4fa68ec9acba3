import type { RuleSeed } from '../config/seeds.ts';
import { buildRule, canonicalKey, periodLabel, type RateLimiter, type RuleDefinition, type RuleKey } from '../ratelimit/index.ts';
import type { Storage } from '../storage/types.ts';

/** Why a rule change was refused; the HTTP layer maps these to 400/404/409. */
export class RuleChangeError extends Error {
  readonly reason: 'invalid' | 'not_found' | 'managed_by_config';
  constructor(reason: RuleChangeError['reason'], message: string) {
    super(message);
    this.name = 'RuleChangeError';
    this.reason = reason;
  }
}

/** A stored rule that no longer passes validation, and why; it is left in storage and not enforced. */
export interface InvalidStoredRule {
  rule: string;
  error: string;
}

/**
 * How gateways that share their storage tell each other that the stored rules changed (Redis
 * pub/sub in src/counters/redis/notifications.ts).
 */
export interface RuleChangeFeed {
  /** Tell the other gateways. Never rejects. */
  announce(): Promise<void>;
  /** Call `listener` when another gateway changed the rules, or when changes may have been missed. */
  onChange(listener: () => void): void;
}

export interface RuleWrite {
  scope: RuleKey['scope'];
  subject: string;
  periodSeconds: number;
  maxRequests?: number;
  maxTokens?: number;
  /** A per-child rule (user-path rules only); absent: a plain rule. */
  perChild?: boolean;
}

/**
 * Keeps the stored rules and the live engine in step. Storage is written first, so a rule
 * the engine enforces is always one that survives a restart; the engine is only ever
 * touched here and on start-up, never on the request path.
 *
 * Gateways sharing their storage (PostgreSQL) and counters (Redis) follow each other's rule
 * changes: a write is announced on the feed, and every other gateway reloads the rules from
 * storage (see follow()). Writes and reloads run one at a time, so a reload that read storage
 * before a write can never undo it.
 */
export class RuleManager {
  readonly #storage: Storage;
  readonly #limiter: RateLimiter;
  readonly #now: () => number;
  /** canonical key → where a config rule was declared, for the 409 message. */
  readonly #configOrigins = new Map<string, string>();
  #feed: RuleChangeFeed | undefined;
  /** The last write or reload queued: the next one starts after it. */
  #queue: Promise<unknown> = Promise.resolve();
  /** A reload is queued and has not started yet: further requests for one join it. */
  #reloadQueued = false;

  private constructor(storage: Storage, limiter: RateLimiter, now: () => number) {
    this.#storage = storage;
    this.#limiter = limiter;
    this.#now = now;
  }

  /**
   * Re-seeds the config rules (stale ones removed, manual ones untouched) and loads every
   * stored rule into the engine. Returns the manager and the seeds that lost to a manual rule.
   */
  static async start(
    storage: Storage,
    limiter: RateLimiter,
    seeds: readonly RuleSeed[],
    now: () => number,
  ): Promise<{ manager: RuleManager; shadowed: RuleSeed[]; invalid: InvalidStoredRule[] }> {
    const manager = new RuleManager(storage, limiter, now);
    const at = new Date(now());
    const rows: RuleDefinition[] = [];
    const bySeedKey = new Map<string, RuleSeed>();
    for (const seed of seeds) {
      const definition = manager.#validate({ ...seed }, 'config', at);
      const key = canonicalRuleKey(definition);
      manager.#configOrigins.set(key, seed.origin);
      bySeedKey.set(key, seed);
      rows.push(definition);
    }
    const skipped = await storage.replaceConfigRules(rows);
    const shadowed = skipped.map((key) => bySeedKey.get(canonicalRuleKey(key))).filter((seed): seed is RuleSeed => seed !== undefined);
    for (const seed of shadowed) manager.#configOrigins.delete(canonicalRuleKey(seed));
    const invalid = await manager.#load();
    return { manager, shadowed, invalid };
  }

  /**
   * Creates the rule or replaces its caps (its counters are kept). A change of per_child moves
   * the rule: it is made anew and its counters restart, for every gateway sharing them.
   */
  async put(write: RuleWrite): Promise<void> {
    await this.#serially(async () => {
      this.#assertManual(write);
      const existing = this.#limiter.getRule(write);
      const moved = existing !== undefined && (existing.perChild === true) !== (write.perChild === true);
      const now = new Date(this.#now());
      const definition = this.#validate(write, 'manual', existing?.createdAt ?? now, now);
      await this.#storage.upsertRule(definition);
      if (moved) await this.#limiter.deleteRule(write);
      this.#limiter.upsertRule(definition);
    });
    await this.#feed?.announce();
  }

  /** Deletes the rule and clears its counters (for every gateway sharing them). */
  async delete(key: RuleKey): Promise<void> {
    await this.#serially(async () => {
      this.#assertManual(key);
      if (!this.#limiter.getRule(key)) throw notFound(key);
      await this.#storage.deleteRule(key);
      await this.#limiter.deleteRule(key);
    });
    await this.#feed?.announce();
  }

  /**
   * Re-reads the rules from storage into the engine, keeping the counters of rules that stay.
   * Returns the stored rules that are invalid (not enforced).
   */
  reload(): Promise<InvalidStoredRule[]> {
    return this.#serially(() => this.#load());
  }

  /**
   * Follows the rule changes of the other gateways sharing this storage: a reload on every
   * announcement, and one every `intervalMs` in case announcements were lost. Returns a stop function.
   */
  follow(feed: RuleChangeFeed, options: { intervalMs: number; onError: (err: unknown) => void }): () => void {
    this.#feed = feed;
    const reload = (): void => {
      if (this.#reloadQueued) return;
      this.#reloadQueued = true;
      this.#serially(() => {
        this.#reloadQueued = false;
        return this.#load();
      }).catch(options.onError);
    };
    feed.onChange(reload);
    const timer = setInterval(reload, options.intervalMs);
    timer.unref();
    return () => {
      clearInterval(timer);
      this.#feed = undefined;
    };
  }

  /** Config rules can be reset too: counters are not configuration. */
  async resetOne(key: RuleKey): Promise<void> {
    if (!(await this.#limiter.resetRule(key))) throw notFound(key);
  }

  async resetAll(): Promise<void> {
    await this.#limiter.resetAll();
  }

  /** Every valid stored rule into the engine; the invalid ones are returned, not enforced. */
  async #load(): Promise<InvalidStoredRule[]> {
    const valid: RuleDefinition[] = [];
    const invalid: InvalidStoredRule[] = [];
    for (const row of await this.#storage.listRules()) {
      // A row written before today's bounds (or by hand) must not take the engine, and with it
      // every admin answer, down: it stays in storage untouched but is not enforced.
      const built = buildRule(row);
      if (built.ok) valid.push(built.value);
      else invalid.push({ rule: `${row.scope} ${row.subject} period_seconds=${row.periodSeconds}`, error: built.error });
    }
    this.#limiter.replaceRules(valid);
    return invalid;
  }

  #serially<T>(step: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(step);
    this.#queue = run.catch(() => {});
    return run;
  }

  #assertManual(key: RuleKey): void {
    const origin = this.#configOrigins.get(canonicalRuleKey(key));
    if (origin !== undefined) {
      throw new RuleChangeError(
        'managed_by_config',
        `rate limit ${describe(key)} is managed by config (${origin}); change it there, or reset its counters with /admin/rate-limits/reset-one`,
      );
    }
  }

  #validate(write: RuleWrite, source: 'manual' | 'config', createdAt: Date, updatedAt: Date = createdAt): RuleDefinition {
    const built = buildRule({
      scope: write.scope,
      subject: write.subject,
      periodSeconds: write.periodSeconds,
      maxRequests: write.maxRequests,
      maxTokens: write.maxTokens,
      perChild: write.perChild,
      source,
      createdAt,
      updatedAt,
    });
    if (!built.ok) throw new RuleChangeError('invalid', built.error);
    return built.value;
  }
}

function describe(key: RuleKey): string {
  return `${key.scope} ${key.subject} ${periodLabel(key.periodSeconds)}`;
}

function notFound(key: RuleKey): RuleChangeError {
  return new RuleChangeError('not_found', `no rate limit ${describe(key)}`);
}

/** Keys of valid rules always canonicalise; an invalid subject simply matches no rule. */
function canonicalRuleKey(key: RuleKey): string {
  return canonicalKey(key) ?? '';
}
