/**
 * The counter store adapters of the rate-limit engine (its `CounterStore` port): this process's
 * memory, or Redis shared by every replica. The composition root opens one here and hands the
 * store to the RateLimiter; src/ratelimit never imports this folder.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { SharedBudgetLedger } from '../budgets/tracker.ts';
import type { RateLimitsConfig } from '../config/schema.ts';
import type { CounterStore } from '../ratelimit/index.ts';
import { StartupError } from '../errors/startup-error.ts';
import type { CounterRepository } from '../storage/counters/types.ts';
import { MemoryCounterStore } from './memory.ts';
import { CounterPersistence } from './persistence.ts';
import type { CountersLogger } from './redis/availability.ts';
import { createCountersClient, within } from './redis/client.ts';
import { RedisDiagnosis } from './redis/diagnosis.ts';
import { RedisNames } from './redis/keys.ts';
import { RedisRuleChanges } from './redis/notifications.ts';
import { RedisSlotReleases } from './redis/releases.ts';
import { listenForSaturations } from './redis/saturations.ts';
import { RedisCounterStore } from './redis/store.ts';

export type { CountersLogger } from './redis/availability.ts';

export interface Counters {
  readonly store: CounterStore;
  /** What is wrong with the counters, for `GET /health`; undefined while all is well. */
  problem(): string | undefined;
  /** Asks a shared store whether it answers now (readiness); `problem()` then tells. */
  check(): Promise<void>;
  /** Rule changes between gateways sharing the counters; undefined for the memory store. */
  readonly ruleChanges: RedisRuleChanges | undefined;
  /**
   * Calls `listener` with the counter keys of concurrency slots given back, one key per slot: in
   * this gateway, and in every gateway sharing the counters.
   */
  onSlotsReleased(listener: (keys: readonly string[]) => void): void;
  /** Dollar reservations of budgets shared by the replicas (Redis); undefined for the memory store. */
  readonly budgetLedger: SharedBudgetLedger | undefined;
  /** Call once the engine holds its rules: puts saved counters back (persist_counters) and starts saving. */
  start(): Promise<void>;
  close(): Promise<void>;
}

export interface OpenCountersOptions {
  /** Where saved counters live (persist_counters). */
  storage: CounterRepository;
  /** The engine's clock, in milliseconds. */
  now: () => number;
}

/** Opens the configured store. Never fails because Redis is unreachable: the gateway then starts degraded. */
export async function openCounters(config: RateLimitsConfig, logger: CountersLogger, options: OpenCountersOptions): Promise<Counters> {
  const maxChildren = config.max_children;
  if (config.backend === 'memory') {
    if (!config.persist_counters) {
      const store = new MemoryCounterStore({ maxChildren });
      return { store, problem: () => undefined, check: async () => {}, ruleChanges: undefined, budgetLedger: undefined, onSlotsReleased: (listener) => store.onReleased(listener), start: async () => {}, close: async () => {} };
    }
    const persistence = new CounterPersistence({ storage: options.storage, now: options.now, logger, maxChildren });
    const store = persistence.store;
    return { store, problem: () => undefined, check: async () => {}, ruleChanges: undefined, budgetLedger: undefined, onSlotsReleased: (listener) => store.onReleased(listener), start: () => persistence.start(), close: () => persistence.close() };
  }
  if (config.persist_counters) {
    logger.info({}, 'rate_limits.persist_counters is ignored with the redis backend: counters in Redis survive a gateway restart on their own');
  }
  const { url, prefix, lease_seconds: leaseSeconds, timeout_ms: timeoutMs, on_error: onError } = config.redis;
  const names = new RedisNames(prefix);
  const client = createCountersClient({ url, timeoutMs, name: 'floodgate-counters' });
  const connectMs = Math.max(timeoutMs, 1000);
  const database = client.options.db ?? 0;
  const diagnosis = new RedisDiagnosis(client, { host: client.options.host ?? '127.0.0.1', port: client.options.port ?? 6379, database, tls: client.options.tls !== undefined, connectTimeoutMs: connectMs });
  // Set once the subscriber exists; no slot is released before the store answers its first admission.
  let releases: RedisSlotReleases | undefined;
  const store = new RedisCounterStore({ client, names, leaseSeconds, timeoutMs, onError, logger, maxChildren, diagnosis, announceReleased: (keys) => releases?.announce(keys), reservations: config.reservations.enabled });
  try {
    await within(client.connect(), connectMs);
  } catch (err) {
    store.markUnavailable(await diagnosis.examine(err));
  }
  if (diagnosis.badDatabase) {
    store.close();
    client.disconnect();
    throw new StartupError(
      `rate_limits.redis.url (REDIS_URL) selects database ${database}, which the Redis server at ${client.options.host}:${client.options.port} does not have ` +
        `(${diagnosis.trouble?.detail ?? 'its SELECT failed'}); its databases are numbered from 0 to its \`databases\` setting minus one (16 by default)`,
    );
  }
  // A server that lost the database later (restarted with fewer) must not get the counters in database 0.
  client.on('ready', () => {
    const wrong = diagnosis.wrongDatabase();
    if (wrong !== undefined) store.markUnavailable(wrong);
  });
  // Subscriptions wait for their connection: this client may queue while Redis is away.
  const subscriber = client.duplicate({ enableOfflineQueue: true, maxRetriesPerRequest: null, commandTimeout: undefined, connectionName: 'floodgate-rule-changes' });
  subscriber.on('error', () => {});
  const self = randomBytes(6).toString('base64url');
  const ruleChanges = new RedisRuleChanges({ publisher: client, subscriber, channel: names.channel, self, timeoutMs, logger });
  releases = new RedisSlotReleases({ publish: (channel, message) => store.publish(channel, message), subscriber, channel: names.releaseChannel, self, logger });
  await ruleChanges.start();
  await subscribe(subscriber, names.releaseChannel, connectMs, logger);
  listenForSaturations(subscriber, names.learnedChannel, (saturation) => store.heardSaturation(saturation));
  await subscribe(subscriber, names.learnedChannel, connectMs, logger);
  logger.info({ prefix, leaseSeconds, timeoutMs, onError }, 'rate-limit counters: shared in Redis');
  return {
    store,
    problem: () => (store.available ? undefined : diagnosis.describe()),
    check: () => store.check(),
    ruleChanges,
    budgetLedger: store,
    onSlotsReleased(listener) {
      store.onReleased(listener);
      releases?.onReleased(listener);
    },
    start: async () => {},
    async close() {
      store.close();
      await Promise.all([quit(client, connectMs), quit(subscriber, connectMs)]);
    },
  };
}

/** Subscribes to a channel; resolves once subscribed or, if Redis does not answer, at once (the subscriber keeps trying). */
async function subscribe(subscriber: Redis, channel: string, ms: number, logger: CountersLogger): Promise<void> {
  try {
    await within(subscriber.subscribe(channel), ms);
  } catch (err) {
    logger.warn({ err: String(err), channel }, 'could not subscribe yet; the subscriber keeps trying');
  }
}

/** Closes a connection after its pending replies (releases sent at shutdown), or drops it if Redis is gone. */
async function quit(client: Redis, ms: number): Promise<void> {
  try {
    await within(client.quit(), ms);
  } catch {
    client.disconnect();
  }
}
