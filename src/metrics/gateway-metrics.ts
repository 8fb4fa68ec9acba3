import { performance } from 'node:perf_hooks';
import { Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { BudgetStatus } from '../budgets/types.ts';
import type { CacheMode } from '../cache/response-cache.ts';
import type { Usage } from '../providers/types.ts';
import { PRIORITIES, type AdmissionResult, type BreachedLimit, type LearnedReading, type MaybePromise, type Priority, type RuleStatus, type Scope, type StatusOptions } from '../ratelimit/index.ts';
import type { ModelListing } from '../routing/resolver.ts';
import { LabelledChildren } from './children.ts';
import { TallyCounter, TallyHistogram, type Observer, type Tally } from './tally.ts';

/**
 * Where the scrape-time rule gauges come from: the limiter (its status may be read
 * asynchronously). Read with each per-child rule's `active_children` and none of its children.
 */
export interface RuleStatusSource {
  status(options?: StatusOptions): readonly RuleStatus[] | Promise<readonly RuleStatus[]>;
}

/** A failover's end: the provider instance and the model it was asked for. */
export interface FailoverTarget {
  readonly provider: string;
  readonly model: string;
}

/** Where the scrape-time learned capacity gauges come from: the limiter. */
export interface LearnedCapacitySource {
  learnedCapacity(): MaybePromise<LearnedReading>;
}

/** Where the scrape-time budget gauges come from: the budget tracker. */
export interface BudgetStatusSource {
  status(): readonly BudgetStatus[];
}

export interface GatewayMetricsOptions {
  /** Absent when rate limits are disabled: no rule gauges then. */
  readonly rules?: RuleStatusSource | undefined;
  /** Absent when rate limits are disabled: no learned capacity gauges then. */
  readonly learned?: LearnedCapacitySource | undefined;
  /** Absent when budgets are disabled: no budget gauges then. */
  readonly budgets?: BudgetStatusSource | undefined;
  /** `floodgate_build_info`'s version label. */
  readonly version?: string | undefined;
  /** The models each provider lists: the only model names that become label values. */
  readonly models: readonly ModelListing[];
  /** Milliseconds on a monotonic clock, for upstream latency. Default: performance.now. */
  readonly clock?: () => number;
  /** A scrape could not read the rule statuses (the gauges are left out of that scrape). */
  readonly onRuleStatusError?: (err: unknown) => void;
  /** Requests waiting for capacity, by priority, read at scrape time; absent when waiting is off. */
  readonly queue?: { depthOf(priority: Priority): number } | undefined;
}

/** The `endpoint` of a response no route matched (a 404): never the raw URL. */
export const UNMATCHED_ENDPOINT = 'unmatched';
/** The `model` label of a model no provider lists (an open provider's, a passthrough body's). */
export const OTHER_MODEL = 'other';
/** The `status` label of an upstream call that got no HTTP answer (unreachable, timed out, cancelled). */
export const NO_UPSTREAM_ANSWER = 'error';

// Upstream latency of LLM calls runs from tens of milliseconds (embeddings, cached prompts) to
// minutes (long completions, until headers on a stream arrive).
const UPSTREAM_BUCKETS = [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
// A whole request lasts from a millisecond (an admin read, a cache hit, a refusal) to minutes (a
// long stream); its first byte comes as soon as it is refused or a stream's first event arrives.
const REQUEST_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const FIRST_BYTE_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
// A wait for capacity lasts from a few milliseconds (a slot freed at once) to rate_limits.queue.max_wait_seconds.
const QUEUE_WAIT_BUCKETS = [0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** The rules for the gauges: each per-child rule with its count of active children, none of the children themselves. */
const ACTIVE_CHILDREN_ONLY: StatusOptions = Object.freeze({ expandChildren: true, childrenLimit: 0 });

interface TokenChildren {
  readonly prompt: Tally;
  readonly completion: Tally;
}

/**
 * The gateway's Prometheus metrics, in a registry of its own (several gateways may share a
 * process). The HTTP layer reports events through the methods below; a counted event is a map
 * lookup and an addition (see TallyCounter), an observed duration a bucket search and two
 * additions (see TallyHistogram). Every label value is bounded: route patterns,
 * status codes, configured providers, listed models, configured rules' subjects.
 */
export class GatewayMetrics {
  readonly registry = new Registry();
  readonly #rules: RuleStatusSource | undefined;
  readonly #learned: LearnedCapacitySource | undefined;
  readonly #budgets: BudgetStatusSource | undefined;
  readonly #clock: () => number;
  readonly #onRuleStatusError: (err: unknown) => void;
  /** provider → the models it lists. */
  readonly #served = new Map<string, Set<string>>();

  readonly #responses: LabelledChildren<Tally>;
  readonly #upstreamDuration: TallyHistogram<'provider'>;
  readonly #upstreamDurationByProvider = new Map<string, Observer>();
  readonly #upstreamResponses: LabelledChildren<Tally>;
  readonly #requestDuration: TallyHistogram<'endpoint'>;
  readonly #firstByte: TallyHistogram<'endpoint'>;
  /** endpoint → its duration and first-byte series, made once. */
  readonly #requestTimings = new Map<string, { duration: Observer; firstByte: Observer }>();
  readonly #failovers: LabelledChildren<Tally>;
  readonly #ruleRefusals: TallyCounter<'scope' | 'subject' | 'period'>;
  /** scope, rule subject and period → its refusal series; and each breach record's series, found without building a key. */
  readonly #ruleRefusalsByKey = new Map<string, Tally>();
  readonly #ruleRefusalsByBreach = new WeakMap<BreachedLimit, Tally>();
  readonly #activeChildren: Gauge<'scope' | 'subject' | 'period'>;
  readonly #tokens: LabelledChildren<TokenChildren>;
  readonly #admitted: Readonly<Record<Scope, Tally>>;
  readonly #refused: Readonly<Record<Scope, Tally>>;
  readonly #cacheLookups: Readonly<Record<'hit' | 'miss' | 'bypass', Tally>>;
  readonly #usageRecordsFailed: Tally;
  readonly #inFlight: Gauge<'scope' | 'subject'>;
  readonly #remaining: Gauge<'scope' | 'subject' | 'period' | 'kind'>;
  readonly #limit: Gauge<'scope' | 'subject' | 'period' | 'kind'>;
  readonly #queueWait: TallyHistogram<'outcome'>;
  readonly #queueWaitByOutcome = new Map<string, Observer>();
  readonly #budgetSpent: Gauge<'user_path' | 'period'>;
  readonly #budgetLimit: Gauge<'user_path' | 'period'>;
  readonly #providerThrottled: LabelledChildren<Tally>;
  readonly #providerSkipped: LabelledChildren<Tally>;
  readonly #unreadableHeaders: LabelledChildren<Tally>;
  readonly #providerRemaining: Gauge<'provider' | 'model' | 'kind'>;

  constructor(options: GatewayMetricsOptions) {
    this.#rules = options.rules;
    this.#learned = options.learned;
    this.#budgets = options.budgets;
    this.#clock = options.clock ?? (() => performance.now());
    this.#onRuleStatusError = options.onRuleStatusError ?? (() => {});
    for (const { id, ownedBy } of options.models) {
      // Aliases are listed too (owned by the gateway); a provider's models are `provider/model`.
      if (!id.startsWith(`${ownedBy}/`)) continue;
      let models = this.#served.get(ownedBy);
      if (models === undefined) this.#served.set(ownedBy, (models = new Set()));
      models.add(id.slice(ownedBy.length + 1));
    }
    const registers = [this.registry];
    // Process and Node.js metrics (CPU, memory, heap spaces, event-loop lag, GC, handles), read at
    // scrape time except GC durations and event-loop lag, which Node samples on its own.
    collectDefaultMetrics({ register: this.registry, prefix: 'floodgate_' });
    new Gauge({
      name: 'floodgate_build_info',
      help: 'Always 1: the gateway\'s version and the Node.js version it runs on, as labels.',
      labelNames: ['version', 'node'] as const,
      registers,
    }).labels(options.version ?? 'unknown', process.version).set(1);

    const responses = new TallyCounter({
      name: 'floodgate_requests_total',
      help: 'Responses sent, by matched route pattern ("unmatched" for a 404) and HTTP status.',
      labelNames: ['endpoint', 'status'] as const,
      registers,
    });
    this.#responses = new LabelledChildren((endpoint, status) => responses.series({ endpoint, status }));

    this.#upstreamDuration = new TallyHistogram({
      name: 'floodgate_upstream_duration_seconds',
      help: 'Time from sending a request upstream to its answer\'s status and headers (a stream\'s body is not included), by provider.',
      labelNames: ['provider'] as const,
      buckets: UPSTREAM_BUCKETS,
      registers,
    });

    this.#requestDuration = new TallyHistogram({
      name: 'floodgate_request_duration_seconds',
      help: 'Time from a request\'s arrival to the end of its answer (a stream\'s last byte, or the client leaving), by matched route pattern ("unmatched" for a 404).',
      labelNames: ['endpoint'] as const,
      buckets: REQUEST_BUCKETS,
      registers,
    });
    this.#firstByte = new TallyHistogram({
      name: 'floodgate_time_to_first_byte_seconds',
      help: 'Time from a request\'s arrival to the first byte of its answer\'s body handed to the connection (a stream\'s first event), by matched route pattern.',
      labelNames: ['endpoint'] as const,
      buckets: FIRST_BYTE_BUCKETS,
      registers,
    });

    const failovers = new TallyCounter({
      name: 'floodgate_failovers_total',
      help: 'Requests passed from a failed upstream attempt to the next failover candidate, by provider/model of each ("other" for a model its provider does not list).',
      labelNames: ['from', 'to'] as const,
      registers,
    });
    this.#failovers = new LabelledChildren((from, to) => failovers.series({ from, to }));

    this.#ruleRefusals = new TallyCounter({
      name: 'floodgate_rate_limit_refusals_total',
      help: 'Refused admission checks by the rule that refused: its scope, its subject (a per-child rule\'s own path, never the child\'s) and its period.',
      labelNames: ['scope', 'subject', 'period'] as const,
      registers,
    });

    this.#activeChildren = new Gauge({
      name: 'floodgate_rate_limit_active_children',
      help: 'Children of each per-child rule with a counter that still matters (a count in a window still weighed, or a slot in flight), read at scrape time.',
      labelNames: ['scope', 'subject', 'period'] as const,
      registers,
    });

    const upstreamResponses = new TallyCounter({
      name: 'floodgate_upstream_responses_total',
      help: 'Upstream answers by provider and HTTP status ("error" when none came: unreachable, timed out, cancelled).',
      labelNames: ['provider', 'status'] as const,
      registers,
    });
    this.#upstreamResponses = new LabelledChildren((provider, status) => upstreamResponses.series({ provider, status }));

    const tokens = new TallyCounter({
      name: 'floodgate_tokens_total',
      help: 'Tokens of completed requests (cache hits excluded), by the provider and model that executed them ("other": a model the provider does not list) and kind.',
      labelNames: ['provider', 'model', 'kind'] as const,
      registers,
    });
    this.#tokens = new LabelledChildren((provider, model) => ({
      prompt: tokens.series({ provider, model, kind: 'prompt' }),
      completion: tokens.series({ provider, model, kind: 'completion' }),
    }));

    const decisions = new TallyCounter({
      name: 'floodgate_rate_limit_decisions_total',
      help: 'Rate-limit admission checks: refused ones under the scope of the rule that refused, admitted ones under every scope the check covered.',
      labelNames: ['scope', 'decision'] as const,
      registers,
    });
    // Every scope and decision is exposed from the start at 0, so rate() and ratios work before its first event.
    const byScope = (decision: string): Record<Scope, Tally> => ({
      user_path: decisions.series({ scope: 'user_path', decision }),
      provider: decisions.series({ scope: 'provider', decision }),
      model: decisions.series({ scope: 'model', decision }),
    });
    this.#admitted = byScope('admitted');
    this.#refused = byScope('refused');

    const cacheLookups = new TallyCounter({
      name: 'floodgate_cache_lookups_total',
      help: 'Response-cache lookups of cacheable requests: hit, miss, or bypass (skipped on the client\'s Cache-Control).',
      labelNames: ['result'] as const,
      registers,
    });
    this.#cacheLookups = { hit: cacheLookups.series({ result: 'hit' }), miss: cacheLookups.series({ result: 'miss' }), bypass: cacheLookups.series({ result: 'bypass' }) };

    this.#usageRecordsFailed = new TallyCounter({
      name: 'floodgate_usage_records_failed_total',
      help: 'Usage records set aside because the database could not store them (each logged with its request id); the other records are written.',
      labelNames: [] as const,
      registers,
    }).series({});

    this.#queueWait = new TallyHistogram({
      name: 'floodgate_queue_wait_seconds',
      help: 'How long requests waited for capacity, by how the wait ended: admitted, timed_out (answered its 429), cancelled (the client left) or full (refused a place: max_depth).',
      labelNames: ['outcome'] as const,
      buckets: QUEUE_WAIT_BUCKETS,
      registers,
    });
    const queue = options.queue;
    new Gauge({
      name: 'floodgate_queue_depth',
      help: 'Requests waiting for capacity in this gateway, by priority, read at scrape time.',
      labelNames: ['priority'] as const,
      registers,
      collect() {
        for (const priority of PRIORITIES) this.labels(priority).set(queue?.depthOf(priority) ?? 0);
      },
    });

    this.#inFlight = new Gauge({
      name: 'floodgate_rate_limit_in_flight',
      help: 'Requests holding a slot of each concurrent rule, read at scrape time.',
      labelNames: ['scope', 'subject'] as const,
      registers,
    });
    this.#remaining = new Gauge({
      name: 'floodgate_rate_limit_remaining',
      help: 'What remains of each rule\'s cap (requests or tokens) in its current window, or of its concurrency slots, read at scrape time.',
      labelNames: ['scope', 'subject', 'period', 'kind'] as const,
      registers,
    });
    this.#limit = new Gauge({
      name: 'floodgate_rate_limit_limit',
      help: 'Each rule\'s cap (requests or tokens per period, or concurrency slots).',
      labelNames: ['scope', 'subject', 'period', 'kind'] as const,
      registers,
    });
    this.#budgetSpent = new Gauge({
      name: 'floodgate_budget_spent_usd',
      help: 'What each budget\'s user path (and everything below it) spent in the budget\'s current period, in US dollars, read at scrape time.',
      labelNames: ['user_path', 'period'] as const,
      registers,
    });
    this.#budgetLimit = new Gauge({
      name: 'floodgate_budget_limit_usd',
      help: 'Each budget\'s cap for its period, in US dollars.',
      labelNames: ['user_path', 'period'] as const,
      registers,
    });

    const throttled = new TallyCounter({
      name: 'floodgate_provider_throttled_total',
      help: 'Upstream answers with status 429, by provider and model ("other": a model the provider does not list, or none named).',
      labelNames: ['provider', 'model'] as const,
      registers,
    });
    this.#providerThrottled = new LabelledChildren((provider, model) => throttled.series({ provider, model }));
    const skipped = new TallyCounter({
      name: 'floodgate_provider_skipped_total',
      help: 'Targets not called because what was learned from the provider\'s answers says it has no capacity now (routed around, or refused when none was left), by provider and model.',
      labelNames: ['provider', 'model'] as const,
      registers,
    });
    this.#providerSkipped = new LabelledChildren((provider, model) => skipped.series({ provider, model }));
    const unreadable = new TallyCounter({
      name: 'floodgate_provider_unreadable_headers_total',
      help: 'Rate-limit headers of upstream answers whose values could not be read (they were ignored), by provider and header name.',
      labelNames: ['provider', 'header'] as const,
      registers,
    });
    this.#unreadableHeaders = new LabelledChildren((provider, header) => unreadable.series({ provider, header }));
    this.#providerRemaining = new Gauge({
      name: 'floodgate_provider_remaining',
      help: 'What the provider\'s last answers said remains of its own request or token limit before its reset (the limit again once the reset passed), by provider and model, read at scrape time.',
      labelNames: ['provider', 'model', 'kind'] as const,
      registers,
    });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** A response was sent on the route `endpoint` (the router's pattern; undefined when none matched). */
  responded(endpoint: string | undefined, status: number): void {
    this.#responses.get(endpoint ?? UNMATCHED_ENDPOINT, status).inc();
  }

  /**
   * A request ended (its answer complete, or its client gone): how long it took and, when its
   * answer's body had begun, how long until its first byte; on the route `endpoint`.
   */
  requestEnded(endpoint: string | undefined, durationSeconds: number, firstByteSeconds: number | undefined): void {
    const label = endpoint ?? UNMATCHED_ENDPOINT;
    let timings = this.#requestTimings.get(label);
    if (timings === undefined) this.#requestTimings.set(label, (timings = { duration: this.#requestDuration.series({ endpoint: label }), firstByte: this.#firstByte.series({ endpoint: label }) }));
    timings.duration.observe(durationSeconds);
    if (firstByteSeconds !== undefined) timings.firstByte.observe(firstByteSeconds);
  }

  /** A failed upstream attempt passed its request on to the next failover candidate. */
  failover(from: FailoverTarget, to: FailoverTarget): void {
    this.#failovers.get(this.#targetLabel(from), this.#targetLabel(to)).inc();
  }

  /** Runs one upstream call, timing it until its answer's status and counting that status. */
  async upstream<T extends { readonly status: number }>(provider: string, call: () => Promise<T>): Promise<T> {
    const startedAt = this.#clock();
    let status: number | string = NO_UPSTREAM_ANSWER;
    try {
      const result = await call();
      status = result.status;
      return result;
    } finally {
      let duration = this.#upstreamDurationByProvider.get(provider);
      if (duration === undefined) this.#upstreamDurationByProvider.set(provider, (duration = this.#upstreamDuration.series({ provider })));
      duration.observe((this.#clock() - startedAt) / 1000);
      this.#upstreamResponses.get(provider, status).inc();
    }
  }

  /**
   * One admission check of the limiter. `userPath`, `provider` and `model` are what the check
   * was given: undefined for a scope it did not cover (a failover attempt skips user-path rules,
   * a batch submission provider and model rules).
   */
  admission(result: AdmissionResult, userPath: string | undefined, provider: string | undefined, model: string | undefined): void {
    if (!result.ok) {
      this.#refused[result.breach.scope].inc();
      if (result.breach.kind === 'learned') {
        if (provider !== undefined) this.#providerSkipped.get(provider, this.#modelLabel(provider, model)).inc();
      } else {
        this.#ruleRefusalsOf(result.breach).inc();
      }
      return;
    }
    if (userPath !== undefined) this.#admitted.user_path.inc();
    if (provider === undefined) return;
    this.#admitted.provider.inc();
    if (model !== undefined) this.#admitted.model.inc();
  }

  /** A request that waited for capacity: how its wait ended and how long it lasted. */
  queueWait(outcome: 'admitted' | 'timed_out' | 'cancelled' | 'full', seconds: number): void {
    let wait = this.#queueWaitByOutcome.get(outcome);
    if (wait === undefined) this.#queueWaitByOutcome.set(outcome, (wait = this.#queueWait.series({ outcome })));
    wait.observe(seconds);
  }

  /** A completed request's tokens, charged to the provider and model that executed it. */
  tokens(provider: string, model: string, usage: Usage | undefined): void {
    if (usage === undefined) return;
    const served = this.#served.get(provider)?.has(model) === true;
    const children = this.#tokens.get(provider, served ? model : OTHER_MODEL);
    if (usage.promptTokens > 0) children.prompt.inc(usage.promptTokens);
    if (usage.completionTokens > 0) children.completion.inc(usage.completionTokens);
  }

  /** An upstream answered 429. */
  throttled(provider: string, model: string): void {
    this.#providerThrottled.get(provider, this.#modelLabel(provider, model)).inc();
  }

  /** An upstream answer's rate-limit headers that could not be read. */
  malformedHeaders(provider: string, names: readonly string[]): void {
    for (const name of names) this.#unreadableHeaders.get(provider, name).inc();
  }

  /** A model's label: as listed by its provider, else `other`. */
  #modelLabel(provider: string, model: string | undefined): string {
    return model !== undefined && this.#served.get(provider)?.has(model) === true ? model : OTHER_MODEL;
  }

  /** `provider/model`, the model as "other" when the provider does not list it: callers may name any model of an open provider. */
  #targetLabel(target: FailoverTarget): string {
    return `${target.provider}/${this.#served.get(target.provider)?.has(target.model) === true ? target.model : OTHER_MODEL}`;
  }

  /** The refusal series of the rule a breach belongs to: one per rule, whichever child or priority it refused. */
  #ruleRefusalsOf(breach: BreachedLimit): Tally {
    let tally = this.#ruleRefusalsByBreach.get(breach);
    if (tally !== undefined) return tally;
    const key = [breach.scope, breach.ruleSubject, breach.label].join('\u0000');
    tally = this.#ruleRefusalsByKey.get(key);
    if (tally === undefined) {
      tally = this.#ruleRefusals.series({ scope: breach.scope, subject: breach.ruleSubject, period: breach.label });
      this.#ruleRefusalsByKey.set(key, tally);
    }
    this.#ruleRefusalsByBreach.set(breach, tally);
    return tally;
  }

  /** A cacheable request met the cache: `mode` as the client's Cache-Control set it, and whether it hit. */
  cacheLookup(mode: CacheMode, hit: boolean): void {
    (mode !== 'use' ? this.#cacheLookups.bypass : hit ? this.#cacheLookups.hit : this.#cacheLookups.miss).inc();
  }

  /** A usage record was set aside: the database could not store it. */
  usageRecordFailed(): void {
    this.#usageRecordsFailed.inc();
  }

  /** The text exposition, with the rule and budget gauges read now. */
  async exposition(): Promise<string> {
    await this.#readRuleGauges();
    await this.#readLearnedGauges();
    this.#readBudgetGauges();
    return this.registry.metrics();
  }

  /** One series per budget: as many as there are budgets, whoever spends. */
  #readBudgetGauges(): void {
    this.#budgetSpent.reset();
    this.#budgetLimit.reset();
    for (const budget of this.#budgets?.status() ?? []) {
      this.#budgetSpent.labels(budget.user_path, budget.period_label).set(budget.spent_usd);
      this.#budgetLimit.labels(budget.user_path, budget.period_label).set(budget.max_usd);
    }
  }

  /**
   * One series per provider, listed model and dimension learned (unlisted models share `other`,
   * with the least remaining among them).
   */
  async #readLearnedGauges(): Promise<void> {
    let reading: LearnedReading = { nowMs: 0, records: [] };
    if (this.#learned !== undefined) {
      try {
        reading = await this.#learned.learnedCapacity();
      } catch (err) {
        this.#onRuleStatusError(err);
      }
    }
    const values = new Map<string, { provider: string; model: string; kind: string; value: number }>();
    for (const { provider, model, record } of reading.records) {
      const label = this.#modelLabel(provider, model);
      for (const [kind, dimension] of [['requests', record.requests], ['tokens', record.tokens]] as const) {
        if (dimension === undefined) continue;
        const reset = dimension.resetAtMs !== undefined && dimension.resetAtMs <= reading.nowMs;
        const value = reset ? dimension.limit : dimension.remaining;
        if (value === undefined) continue;
        const key = `${provider}\u0000${label}\u0000${kind}`;
        const seen = values.get(key);
        if (seen === undefined || value < seen.value) values.set(key, { provider, model: label, kind, value });
      }
    }
    this.#providerRemaining.reset();
    for (const { provider, model, kind, value } of values.values()) this.#providerRemaining.labels(provider, model, kind).set(value);
  }

  async #readRuleGauges(): Promise<void> {
    let rules: readonly RuleStatus[] = [];
    if (this.#rules !== undefined) {
      try {
        rules = await this.#rules.status(ACTIVE_CHILDREN_ONLY);
      } catch (err) {
        this.#onRuleStatusError(err);
      }
    }
    // Reset after the read, so a concurrent scrape never sees the gauges half set; deleted rules drop out.
    this.#inFlight.reset();
    this.#remaining.reset();
    this.#limit.reset();
    this.#activeChildren.reset();
    for (const rule of rules) {
      const { scope, subject, period_label: period } = rule;
      if (rule.active_children !== undefined) this.#activeChildren.labels(scope, subject, period).set(rule.active_children);
      if (rule.period_seconds === 0) this.#inFlight.labels(scope, subject).set(rule.in_flight);
      if (rule.max_requests !== undefined) {
        this.#limit.labels(scope, subject, period, 'requests').set(rule.max_requests);
        this.#remaining.labels(scope, subject, period, 'requests').set(rule.requests_remaining ?? 0);
      }
      if (rule.max_tokens !== undefined) {
        this.#limit.labels(scope, subject, period, 'tokens').set(rule.max_tokens);
        this.#remaining.labels(scope, subject, period, 'tokens').set(rule.tokens_remaining ?? 0);
      }
    }
  }
}
