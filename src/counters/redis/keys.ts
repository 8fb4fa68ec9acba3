/**
 * Names in Redis. Every counter key starts with the configured prefix in braces, a Redis Cluster
 * hash tag: all the keys one admission touches (user path, provider and model rules alike) hash
 * to the same slot, which a multi-key script on a cluster requires. Gateways sharing one Redis
 * and one prefix share every counter; another prefix is another, independent set of counters.
 *
 *   {floodgate:}rl:user_path:/team/a:60     a windowed rule (a packed string, see scripts.ts)
 *   {floodgate:}rl:provider:openai:0        a concurrency rule (sorted set of leases)
 *   {floodgate:}rl:user_path:/team:60:/     a per-child rule's counter for /team itself
 *   {floodgate:}rl:user_path:/team:60:/bob  its counter for the child /team/bob (and all below it)
 *   {floodgate:}rs:user_path:/team/a:60     the token reservations held on a rule's counter (sorted set of leases)
 *   {floodgate:}br:/team\0day              the dollar reservations held on a budget (sorted set of leases)
 *   {floodgate:}bs:/team\0day:1767225600    a budget's spend settled in Redis for the period starting then (ms)
 *   {floodgate:}lc:openai/gpt-4o            the learned capacity of a provider's model (see scripts.ts)
 *   {floodgate:}lc                          the index of the learned capacity records (sorted set)
 *   {floodgate:}lc:saturated                the pub/sub channel of targets saturated by learned capacity
 *   floodgate:events                        the pub/sub channel of rule changes and resets
 *   floodgate:released                      the pub/sub channel of concurrency slots given back
 */
export class RedisNames {
  /** `{prefix}`: the hash tag every counter key starts with. */
  readonly tag: string;
  /** The pub/sub channel the gateways sharing this prefix talk on. */
  readonly channel: string;
  /** The pub/sub channel of slots given back (busy; kept apart so rule followers never parse it). */
  readonly releaseChannel: string;

  constructor(prefix: string) {
    this.tag = `{${prefix}}`;
    this.channel = `${prefix}events`;
    this.releaseChannel = `${prefix}released`;
  }

  /**
   * The key of a rule's counter, from the engine's rule key (scope, lowercase subject and period,
   * NUL-separated). The scope comes first and the period last, and neither holds a `:`, so the
   * name is unambiguous whatever the subject contains.
   */
  counterKey(ruleKey: string): string {
    const [scope, subject, period, child] = ruleKey.split('\u0000');
    const name = `${this.tag}rl:${scope}:${subject}:${period}`;
    // A per-child rule's counters (see counterKeyOf): the child after a `:/`, empty for the path's own.
    return child === undefined ? name : `${name}:/${child}`;
  }

  /** The set of token reservations held on a rule's counter (same naming as counterKey, under `rs:`). */
  reservationKey(ruleKey: string): string {
    return `${this.tag}rs:${this.counterKey(ruleKey).slice(this.tag.length + 3)}`;
  }

  /** The set of dollar reservations held on a budget (its identity: lowercase path, NUL, period). */
  budgetReservationKey(budget: string): string {
    return `${this.tag}br:${budget}`;
  }

  /** A budget's spend settled in Redis during the period that started at `startMs`. */
  budgetSettledKey(budget: string, startMs: number): string {
    return `${this.tag}bs:${budget}:${startMs}`;
  }

  /** The key of a provider's model's learned capacity. A provider name has no `/`: the first one ends it. */
  learnedKey(provider: string, model: string): string {
    return `${this.tag}lc:${provider}/${model}`;
  }

  /** The index of the learned capacity records. */
  get learnedIndex(): string {
    return `${this.tag}lc`;
  }

  /** The pub/sub channel of targets saturated by learned capacity, and of saturations over (named by the script after the index). */
  get learnedChannel(): string {
    return `${this.learnedIndex}:saturated`;
  }

  /** The provider and model of a learned capacity key; undefined for a key that is none. */
  learnedTarget(key: string): { provider: string; model: string } | undefined {
    const prefix = `${this.tag}lc:`;
    const slash = key.indexOf('/', prefix.length);
    if (!key.startsWith(prefix) || slash === -1) return undefined;
    return { provider: key.slice(prefix.length, slash), model: key.slice(slash + 1) };
  }

  /** A SCAN pattern matching every key of this prefix (counters and learned capacity). */
  get everyKeyPattern(): string {
    return `${globEscape(this.tag)}*`;
  }

  /** A SCAN pattern matching every counter key of this prefix (glob characters in it escaped). */
  get counterPattern(): string {
    return `${globEscape(this.tag)}rl:*`;
  }

  /** A SCAN pattern matching every token reservation set of this prefix. */
  get reservationPattern(): string {
    return `${globEscape(this.tag)}rs:*`;
  }

  /** A SCAN pattern matching the children's counters of the per-child rule whose own counter is `ownKey`. */
  childPattern(ownKey: string): string {
    return `${globEscape(this.counterKey(ownKey))}?*`;
  }

  /** The child segment of a child's counter key, given its rule's own counter key. */
  childOf(ownKey: string, redisKey: string): string {
    return redisKey.slice(this.counterKey(ownKey).length);
  }
}

function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}
