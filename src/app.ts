// First of all: it must run before start-up's first full garbage collection (see the module).
import './runtime/tick-shape.ts';
import type { AddressInfo } from 'node:net';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { AdmissionCore } from './admission/core.ts';
import { ReservationEstimator } from './admission/reservations.ts';
import { BatchService } from './batch/service.ts';
import { WaitQueue } from './admission/queue.ts';
import { SaturationLog } from './admission/saturation-log.ts';
import { KeyRing } from './auth/keys.ts';
import { loadStoredBudgets, startBudgetManager, type BudgetManager } from './admin/budgets.ts';
import { mergeFeeds, storageFeed } from './admin/definitions.ts';
import { startRuleManager, type RuleManager } from './admin/rate-limit-rules.ts';
import { BudgetTracker, type SharedBudgetLedger } from './budgets/tracker.ts';
import { BUDGETS_WITHOUT_USAGE_WARNING, TOKEN_RULES_WITHOUT_USAGE_WARNING, isLoopbackHost, nonLoopbackMessage, type BudgetSeed, type RuleSeed } from './config/load.ts';
import { openCounters, type Counters } from './counters/index.ts';
import { RateLimiter, type LearnedSettings } from './ratelimit/index.ts';
import type { GatewayConfig, LearnedConfig } from './config/schema.ts';
import type { HttpServices } from './http/context.ts';
import { GatewayError } from './errors/gateway-error.ts';
import { StartupError } from './errors/startup-error.ts';
import { InFlightRequests } from './http/in-flight.ts';
import { GatewayHealth } from './health/readiness.ts';
import { GatewayMetrics } from './metrics/index.ts';
import { buildServer } from './http/server.ts';
import { PriceTable, type PriceOverride } from './pricing/price-table.ts';
import { createProviders, pricesProviderOf, type ProviderConfig } from './providers/registry.ts';
import type { Provider } from './providers/types.ts';
import { Resolver, RoutingError } from './routing/resolver.ts';
import { ResponseCache } from './cache/response-cache.ts';
import { openStorage } from './storage/index.ts';
import type { Storage } from './storage/types.ts';
import { UsageRecorder, UsageRecordsLostError } from './usage/recorder.ts';
import { RefusalCountsDroppedError, RefusalLog } from './usage/refusals.ts';
import { GATEWAY_VERSION } from './shared/version.ts';
import { describeCounters, describeStorage } from './config/describe.ts';

export interface GatewayOptions {
  config: GatewayConfig;
  /** Rate-limit rules declared in the config file and environment. */
  rateLimitSeeds?: readonly RuleSeed[];
  /** Budgets declared in the config file and environment. */
  budgetSeeds?: readonly BudgetSeed[];
  /** Warnings found while loading the config; logged once at start-up. */
  warnings?: readonly string[];
  logger: FastifyBaseLogger;
  /** Milliseconds since the epoch; injectable for tests. */
  now?: () => number;
  /** How long shutdown waits for in-flight requests before cutting them; default `server.shutdown_grace_seconds`. */
  shutdownGraceMs?: number;
}

export interface Gateway {
  readonly server: FastifyInstance;
  readonly url: string;
  readonly port: number;
  /** Stops accepting, lets in-flight requests finish (bounded), flushes usage, closes storage. */
  close(): Promise<void>;
}

export { StartupError };

const BUILT_IN_MOCK = { mock: { type: 'mock' as const } };

export async function startGateway(options: GatewayOptions): Promise<Gateway> {
  const { config, logger } = options;
  const now = options.now ?? Date.now;
  // Closures made here must not capture `options` or `config`: they live as long as the gateway,
  // and the parsed config with its rate-limit seeds (large with many rules) would live with them.
  const shutdownGraceMs = options.shutdownGraceMs ?? config.server.shutdown_grace_seconds * 1000;
  const masterKey = config.server.master_key || undefined;
  assertSafeListen(config.server.host, masterKey);
  if (!masterKey) logger.warn('MASTER_KEY is not set: every route is open (allowed on a loopback host only)');

  const storage = await openStorage(config.storage, { onError: (err) => logger.error({ err }, 'storage connection error') });
  const cleanup: Array<() => Promise<void>> = [() => storage.close()];
  try {
    const providerConfigs = Object.keys(config.providers).length > 0 ? config.providers : BUILT_IN_MOCK;
    if (providerConfigs === BUILT_IN_MOCK) logger.info('no provider configured: serving the built-in mock provider (instance "mock")');
    const providers = createProviders(providerConfigs, { warn: (fields, message) => logger.warn(fields, message) });
    cleanup.push(() => Promise.all(providers.map((p) => p.close())).then(() => undefined));
    const resolver = buildResolver(providers, await discoverModels(providers, logger), config);

    const keys = await KeyRing.load(storage);
    const stopFollowingKeys = await keys.follow({
      intervalMs: KEYS_RELOAD_INTERVAL_MS,
      onError: (err) => logger.warn({ err }, 'reloading the API keys from storage failed; the next change or periodic reload tries again'),
    });
    cleanup.unshift(stopFollowingKeys);
    const pricing = buildPriceTable(providerConfigs, config.pricing, logger);
    const usage = new UsageRecorder(storage.usage, {
      enabled: config.usage.enabled,
      onError: (err) => {
        if (err instanceof UsageRecordsLostError) logger.error({ requestIds: err.requestIds }, err.message);
        else logger.error({ err }, 'writing usage records failed; will retry');
      },
      price: (entry) => pricing.cost(entry),
      onSetAside: (record, reason) => {
        // The whole record is logged: an operator can still insert it by hand.
        logger.error({ err: reason, requestId: record.requestId, record }, `usage record of request ${record.requestId ?? '(no id)'} set aside: the database cannot store it`);
      },
    });
    cleanup.unshift(() => usage.close());
    const refusals = new RefusalLog(storage.refusals, {
      now,
      onError: (err) => {
        if (err instanceof RefusalCountsDroppedError) logger.error(err.message);
        else logger.error({ err }, 'writing refusal counts failed; they are kept for the next write');
      },
    });
    cleanup.unshift(() => refusals.close());

    const learned = learnedSettings(providerConfigs);
    const { limiter, rules, counters, stopFollowing } = await startRateLimits(config, storage, options.rateLimitSeeds ?? [], now, logger, options.warnings ?? [], learned);
    if (counters !== undefined) {
      cleanup.unshift(async () => {
        await stopFollowing();
        await counters.close();
      });
    }
    const { tracker, manager: budgetManager, stopFollowing: stopFollowingBudgets } = await startBudgets(config, storage, usage, options.budgetSeeds ?? [], now, logger, options.warnings ?? [], counters?.budgetLedger);
    if (tracker !== undefined) {
      // Spend reaches the budgets as each usage record is queued.
      usage.listen({ record: (record) => tracker.observe(record.userPath, record.timestampMs, record.costUsd) });
      // Before the usage recorder closes: a running refresh flushes it.
      cleanup.unshift(async () => {
        await stopFollowingBudgets();
        await tracker.close();
      });
    }

    const inFlight = new InFlightRequests();
    const saturation = new SaturationLog(logger, now);
    cleanup.unshift(async () => saturation.close());
    const queue = limiter === undefined ? undefined : new WaitQueue({ maxDepth: config.rate_limits.queue.max_depth });
    if (queue !== undefined) counters?.onSlotsReleased((keys) => queue.released(keys));
    const metrics = new GatewayMetrics({
      rules: limiter,
      learned: limiter,
      budgets: tracker,
      queue,
      version: GATEWAY_VERSION,
      models: resolver.listModels(),
      onRuleStatusError: (err) => logger.warn({ err }, 'metrics: reading the rate-limit rules failed'),
    });
    usage.listen({ setAside: () => metrics.usageRecordFailed() });
    const health = new GatewayHealth({
      counters: () => counters?.problem(),
      checkCounters: counters === undefined ? undefined : () => counters.check(),
      refusedWithoutCounters: config.rate_limits.redis.on_error === 'deny',
      pingStorage: () => storage.ping(),
    });
    const admission = new AdmissionCore({ limiter, budgets: tracker, usage, metrics, refusals, queue, saturation, now });
    const batches = new BatchService({
      storage,
      resolver,
      admission,
      logger,
      files: { ttlSeconds: config.files.ttl_seconds, maxBytesPerUserPath: config.files.max_bytes_per_user_path, maxFilesPerUserPath: config.files.max_files_per_user_path },
      now,
    });
    // Background batch runs stop before the usage recorder and storage close.
    cleanup.unshift(() => batches.close());
    const reservations = new ReservationEstimator(
      { tokens: config.rate_limits.enabled && config.rate_limits.reservations.enabled, budgets: config.budgets.enabled && config.budgets.reservations.enabled, defaultCompletionTokens: config.rate_limits.reservations.default_completion_tokens },
      pricing,
      now,
    );
    // With reservations on every request is counted: the tokenizer loads before the first one.
    await reservations.ready();
    const services: HttpServices = {
      options: {
        masterKey,
        userPathHeader: config.server.user_path_header.toLowerCase(),
        bodyLimitBytes: config.server.body_limit,
        connections: {
          headersTimeoutMs: config.server.headers_timeout_seconds * 1000,
          requestTimeoutMs: config.server.request_timeout_seconds * 1000,
          keepAliveTimeoutMs: config.server.keep_alive_timeout_seconds * 1000,
          maxConnections: config.server.max_connections,
        },
        cacheShared: config.cache.response.shared,
        patience: { defaultWaitMs: Math.round(config.rate_limits.queue.default_wait_seconds * 1000), maxWaitMs: Math.round(config.rate_limits.queue.max_wait_seconds * 1000) },
        logger,
        accessLog: config.logging.access,
      },
      resolver,
      keys,
      storage,
      usage,
      admission,
      reservations,
      refusals,
      batches,
      limiter,
      rules,
      budgets: tracker,
      budgetManager,
      cache: config.cache.response.enabled
        ? new ResponseCache({ ttlSeconds: config.cache.response.ttl_seconds, maxEntries: config.cache.response.max_entries, now })
        : undefined,
      inFlight,
      metrics,
      now,
      health,
    };
    const server = buildServer(services);
    await server.listen({ host: config.server.host, port: config.server.port });
    const port = (server.server.address() as AddressInfo).port;
    const host = config.server.host.includes(':') ? `[${config.server.host}]` : config.server.host;
    const url = `http://${host}:${port}`;
    // One line that says what this replica runs on: where its data and counters are, what it serves, how many rules and budgets it enforces.
    logger.info({
      url,
      version: GATEWAY_VERSION,
      node: process.version,
      storage: describeStorage(config.storage),
      counters: describeCounters(config.rate_limits),
      providers: providers.map((p) => ({ name: p.name, type: p.type })),
      rate_limit_rules: limiter?.ruleCount ?? 0,
      budgets: tracker?.size ?? 0,
    }, 'floodgate listening');
    return {
      server,
      url,
      port,
      close: () => {
        // Waiting requests are answered their 429 at once: nothing they could wait for comes now.
        queue?.close();
        return shutdown(server, inFlight, health, cleanup, shutdownGraceMs, logger);
      },
    };
  } catch (err) {
    await runAll(cleanup, logger);
    throw err;
  }
}

/**
 * The `learned` settings of every provider that learns its capacity from its answers (all but
 * those with `learned.enabled: false`); the built-in mock, configured by no file, takes the defaults.
 */
function learnedSettings(providers: Readonly<Record<string, { type: string; learned?: LearnedConfig }>>): Map<string, LearnedSettings> {
  const settings = new Map<string, LearnedSettings>();
  for (const [name, { learned }] of Object.entries(providers)) {
    if (learned?.enabled === false) continue;
    settings.set(name, { reserve: learned?.reserve ?? 0, cooldownMs: Math.round((learned?.cooldown_seconds ?? 5) * 1000) });
  }
  return settings;
}

/** The safety net under the rule-change announcements between replicas (the storage's, and Redis's). */
const RULES_RELOAD_INTERVAL_MS = 30_000;
/** The safety net under the storage's announcements of key changes (a revoked key must not linger). */
const KEYS_RELOAD_INTERVAL_MS = 10_000;

/**
 * The engine starts empty, then holds the stored rules: config seeds re-applied, manual rules
 * as they were. Counters in memory start at zero (or as saved, with persist_counters); counters in
 * Redis are as the replicas left them.
 */
async function startRateLimits(
  config: GatewayConfig,
  storage: Storage,
  seeds: readonly RuleSeed[],
  now: () => number,
  logger: FastifyBaseLogger,
  warnings: readonly string[],
  learned: ReadonlyMap<string, LearnedSettings>,
): Promise<{ limiter: RateLimiter | undefined; rules: RuleManager | undefined; counters: Counters | undefined; stopFollowing: () => Promise<void> }> {
  for (const warning of warnings) logger.warn(warning);
  if (!config.rate_limits.enabled) {
    logger.info('rate limits are disabled (RATE_LIMITS_ENABLED=false)');
    return { limiter: undefined, rules: undefined, counters: undefined, stopFollowing: async () => {} };
  }
  const counters = await openCounters(config.rate_limits, logger, { storage: storage.counters, now });
  const limiter = new RateLimiter({ clock: { now }, store: counters.store, enforceTokens: config.usage.enabled, headroom: config.rate_limits.queue.headroom, learned, reservations: config.rate_limits.reservations.enabled });
  let started: Awaited<ReturnType<typeof startRuleManager>>;
  try {
    started = await startRuleManager(storage.rules, limiter, seeds, now);
    // Saved counters go back into the rules just loaded (persist_counters).
    await counters.start();
  } catch (err) {
    await counters.close();
    throw err;
  }
  const { manager, shadowed, invalid } = started;
  for (const { item: rule, error } of invalid) {
    logger.warn({ rule, error }, `stored rate limit ${rule} is invalid and is not enforced (${error}); delete it from storage or write it again within bounds`);
  }
  for (const seed of shadowed) {
    logger.warn({ origin: seed.origin }, `config rate limit ${seed.scope} ${seed.subject} is shadowed by a manual rule with the same key; the manual rule stays`);
  }
  if (!config.usage.enabled && limiter.hasTokenRules && !warnings.includes(TOKEN_RULES_WITHOUT_USAGE_WARNING)) {
    logger.warn(TOKEN_RULES_WITHOUT_USAGE_WARNING);
  }
  // Replicas sharing the storage follow each other's rule changes: through the storage's own
  // announcements (with or without Redis), and through Redis when they share their counters.
  let watched: Awaited<ReturnType<typeof storageFeed>>;
  try {
    watched = await storageFeed(storage, 'rules');
  } catch (err) {
    await counters.close();
    throw err;
  }
  const stopReloads = manager.follow(counters.ruleChanges === undefined ? watched.feed : mergeFeeds([counters.ruleChanges, watched.feed]), {
    intervalMs: RULES_RELOAD_INTERVAL_MS,
    onError: (err) => logger.warn({ err }, 'reloading the rate-limit rules from storage failed; the next change or periodic reload tries again'),
  });
  const stopFollowing = async (): Promise<void> => {
    stopReloads();
    await watched.stop();
  };
  logger.info({ rules: limiter.ruleCount }, 'rate limits enabled');
  return { limiter, rules: manager, counters, stopFollowing };
}

/**
 * Budgets: stored and config budgets loaded, their spend read from the usage records, then
 * re-read every `budgets.refresh_seconds`.
 */
async function startBudgets(
  config: GatewayConfig,
  storage: Storage,
  usage: UsageRecorder,
  seeds: readonly BudgetSeed[],
  now: () => number,
  logger: FastifyBaseLogger,
  warnings: readonly string[],
  ledger: SharedBudgetLedger | undefined,
): Promise<{ tracker: BudgetTracker | undefined; manager: BudgetManager | undefined; stopFollowing: () => Promise<void> }> {
  if (!config.budgets.enabled) {
    logger.info('budgets are disabled (BUDGETS_ENABLED=false)');
    return { tracker: undefined, manager: undefined, stopFollowing: async () => {} };
  }
  const tracker = new BudgetTracker({
    now,
    source: {
      settle: async () => {
        await usage.flush();
        return !usage.failing;
      },
      sumCost: (queries) => storage.usage.sumCost(queries),
      budgets: async () => (await loadStoredBudgets(storage.budgets)).valid,
    },
    onError: (err) => logger.warn({ err }, 'reading budget spend from storage failed; the last known spend stays in force'),
    reservations: config.budgets.reservations.enabled,
    // Shared by the replicas with Redis counters: each sees the others' reservations and settled costs at once.
    ledger: config.budgets.reservations.enabled ? ledger : undefined,
  });
  const { manager, shadowed, invalid } = await startBudgetManager(storage.budgets, tracker, seeds, now);
  for (const { item: budget, error } of invalid) {
    logger.warn({ budget, error }, `stored budget ${budget} is invalid and is not enforced (${error}); delete it from storage or write it again within bounds`);
  }
  for (const seed of shadowed) {
    logger.warn({ origin: seed.origin }, `config budget ${seed.period} for ${seed.userPath} is shadowed by a manual budget with the same key; the manual budget stays`);
  }
  if (!config.usage.enabled && tracker.size > 0 && !warnings.includes(BUDGETS_WITHOUT_USAGE_WARNING)) logger.warn(BUDGETS_WITHOUT_USAGE_WARNING);
  // Replicas sharing the storage follow each other's budget changes as the storage announces them;
  // the tracker's refresh, which reads every budget again, is the safety net under a lost announcement.
  const watched = await storageFeed(storage, 'budgets');
  const stopReloads = manager.follow(watched.feed, {
    onError: (err) => logger.warn({ err }, 'reloading the budgets from storage failed; the next change or refresh tries again'),
  });
  tracker.startRefreshing(config.budgets.refresh_seconds * 1000);
  logger.info({ budgets: tracker.size }, 'budgets enabled');
  const stopFollowing = async (): Promise<void> => {
    stopReloads();
    await watched.stop();
  };
  return { tracker, manager, stopFollowing };
}

/** Request costs: the package's price table for each instance, the operator's `pricing:` first. */
function buildPriceTable(providers: Readonly<Record<string, ProviderConfig>>, pricing: GatewayConfig['pricing'], logger: FastifyBaseLogger): PriceTable {
  const overrides: Record<string, PriceOverride> = {};
  for (const [model, price] of Object.entries(pricing)) {
    overrides[model] = { inputPerMtok: price.input_per_mtok, outputPerMtok: price.output_per_mtok, cachedInputPerMtok: price.cached_input_per_mtok };
  }
  return new PriceTable({
    instances: Object.entries(providers).map(([name, c]) => ({ name, pricesProvider: pricesProviderOf(c.type), baseUrl: (c as { base_url?: string }).base_url })),
    overrides,
    onUnknown: (provider, model) => logger.warn({ provider, model }, `no price known for ${provider}/${model}: its requests cost $0 (set one under pricing: "${provider}/${model}")`),
    onUnknownLimit: (limit) => logger.warn(`no price known for ${limit} models: further models without a price are not logged (their requests cost $0)`),
  });
}

function buildResolver(providers: readonly Provider[], models: ReadonlyMap<string, readonly string[]>, config: GatewayConfig): Resolver {
  try {
    return new Resolver(providers, models, { aliases: config.aliases, failover: config.failover });
  } catch (err) {
    if (err instanceof RoutingError) throw new StartupError(err.message);
    throw err;
  }
}

async function discoverModels(providers: readonly Provider[], logger: FastifyBaseLogger): Promise<Map<string, string[]>> {
  const entries = await Promise.all(
    providers.map(async (provider): Promise<[string, string[]]> => {
      try {
        return [provider.name, await provider.listModels()];
      } catch (err) {
        logger.warn({ err, provider: provider.name }, 'model discovery failed: the provider accepts any provider/model name');
        return [provider.name, []];
      }
    }),
  );
  return new Map(entries);
}

/** A gateway reachable from other machines must not run open (loadConfig finds it first; a config built in code meets it here). */
function assertSafeListen(host: string, masterKey: string | undefined): void {
  if (masterKey || isLoopbackHost(host)) return;
  throw new StartupError(nonLoopbackMessage(host));
}

/** How long requests cut at the end of the grace period get to record their usage. */
const CUT_SETTLE_MS = 2_000;

/**
 * Drains, then closes. From the start `GET /ready` answers 503 draining and new model requests get
 * a 503, while the listener stays open for the probes and the requests running; once those end
 * (or the grace period is over) the listener closes. Requests still running at the end of the
 * grace period are cut with an error their client sees.
 */
async function shutdown(
  server: FastifyInstance,
  inFlight: InFlightRequests,
  health: GatewayHealth,
  cleanup: Array<() => Promise<void>>,
  graceMs: number,
  logger: FastifyBaseLogger,
): Promise<void> {
  const deadline = performance.now() + graceMs;
  health.startDraining();
  if (inFlight.size > 0) logger.info({ requests: inFlight.size }, 'draining: waiting for the requests in flight');
  await inFlight.settled(graceMs);
  const closing = server.close();
  // server.close() drops only the connections idle at that moment; a keep-alive connection whose
  // in-flight request finishes later would otherwise hold the shutdown until the grace timeout.
  const idle = setInterval(() => server.server.closeIdleConnections(), 50);
  idle.unref();
  let graceTimer: NodeJS.Timeout | undefined;
  const graceOver = new Promise<false>((resolve) => {
    graceTimer = setTimeout(() => resolve(false), Math.max(0, deadline - performance.now()));
  });
  try {
    const closedInTime = await Promise.race([closing.then(() => true), graceOver]);
    if (!closedInTime) {
      if (inFlight.size > 0) {
        logger.warn({ requests: inFlight.size }, 'requests still running at the end of the shutdown grace period: cutting them');
        inFlight.cutAll(new GatewayError({ status: 503, type: 'provider_error', message: 'the gateway is shutting down: the answer was cut short', code: 'gateway_shutdown' }));
        await inFlight.settled(CUT_SETTLE_MS);
      }
      logger.warn('connections still open at the end of the shutdown grace period: closing them');
      server.server.closeAllConnections();
      await closing;
    }
    // A request whose client left may still be recording its usage.
    await inFlight.settled(CUT_SETTLE_MS);
  } finally {
    clearInterval(idle);
    clearTimeout(graceTimer);
    await runAll(cleanup, logger);
  }
}

async function runAll(steps: Array<() => Promise<void>>, logger: FastifyBaseLogger): Promise<void> {
  for (const step of steps) {
    try {
      await step();
    } catch (err) {
      logger.error({ err }, 'shutdown step failed');
    }
  }
}
