/**
 * The one decision of the gateway: may this request go now, to which target, at what cost. Every
 * route that admits against rate limits and budgets asks here (model endpoints, passthrough,
 * realtime sessions, batch submissions), and the explain dry run walks the same way. It knows
 * nothing of HTTP: routes hand it the caller, the route and a function that calls one target, and
 * send what it answers.
 */
import type { BudgetBreach, BudgetClaim, BudgetHold, BudgetReservation, BudgetTracker } from '../budgets/tracker.ts';
import { upstreamError } from '../errors/from-provider.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import type { Cancellation } from '../providers/cancellation.ts';
import { readBody } from '../providers/results.ts';
import type { ProviderResult, Usage } from '../providers/types.ts';
import type { BudgetStatus } from '../budgets/types.ts';
import { saturationOf, type AdmissionRefusal, type AdmissionResult, type AdmissionTarget, type AdmissionTicket, type AdmitOptions, type BreachedLimit, type LearnedCause, type LearnedVerdict, type Priority, type RateLimiter, type MaybePromise, type RuleStatus, type Scope, type SpendRefusal } from '../ratelimit/index.ts';
import type { Route, Target } from '../routing/types.ts';
import type { UsageRecord } from '../storage/usage/types.ts';
import { directChild } from '../user-path/user-path.ts';
import { primeStream } from './prime.ts';
import type { Blocker, WaitQueue } from './queue.ts';
import { budgetExceededError, clientGone, queueFullError, rateLimitedError, rateLimitHeaders } from './refusals.ts';
import { TargetWalk, type Admitter } from './walk.ts';

/** Who is asking: the user path its rules and budgets are counted on, and its managed key. */
export interface Caller {
  readonly userPath: string;
  /** Managed key id, or null for the master key / open mode. */
  readonly keyId: string | null;
  /** Its share of each cap (see Headroom); the whole of every cap when absent. */
  readonly priority?: Priority | undefined;
  /** How long it may wait for capacity when the rate limits refuse it, in ms; absent or 0: a 429 at once. */
  readonly maxWaitMs?: number | undefined;
}

/**
 * The life of one request as the core needs it: a way to stop its upstream work, and the
 * promise to give admitted slots back when it ends, whichever way it ends (answered, failed,
 * client gone).
 */
export interface Lifetime {
  readonly cancel: Cancellation;
  /** Gives the ticket's slots back when the request ends (at once if it already has). Idempotent. */
  hold(ticket: AdmissionTicket): void;
}

/** Calls one target; the core decides what its answer means (success, failover, error). */
export type TargetCall = (target: Target) => Promise<ProviderResult>;

/**
 * What a request reserves at admission (reservations on): its estimated tokens on every matching
 * token window, and its estimated cost on the budgets governing its user path.
 */
export interface ReservationEstimate {
  /** Tokens reserved on each matching rule with a token cap; 0: none. */
  readonly tokens: number;
  /** The estimated cost at a target's prices (budget reservations on); absent: no dollars reserved. */
  readonly costUsd?: ((target: PricedTarget) => number) | undefined;
}

/** Where a request is sent, as its price is looked up: the provider instance and the model. */
export interface PricedTarget {
  readonly provider: { readonly name: string };
  readonly model: string;
}

/**
 * A request's reservations, settled once when it ends: each token reservation is replaced by the
 * tokens it used, its budget reservation goes (its cost reaches the budgets with its usage record).
 */
export interface Settlement {
  /** Whether it holds tokens reserved on token windows: settling charges its tokens there, instead of a charge afresh. */
  readonly holdsTokens: boolean;
  /** Idempotent: only the first call counts. `costUsd`: what the request cost (its usage record's). */
  settle(tokens: number, costUsd?: number): void;
}

export interface Dispatched {
  /** Settles the request's reservations (see complete()); undefined when it holds none (its tokens are charged afresh). */
  readonly settlement: Settlement | undefined;
  readonly result: ProviderResult;
  /** The target that answered (whose provider and model rules counted the attempt, and are charged its tokens). */
  readonly target: Target;
  /** `x-ratelimit-*` headers of the request's admission; undefined when no windowed rule matched. */
  readonly headers: Record<string, string> | undefined;
}

/** A request at its end, as its usage record will say. */
export interface Completion {
  readonly provider: string;
  readonly model: string;
  readonly endpoint: string;
  readonly usage: Usage | undefined;
  readonly status: number;
  /** When the request started, epoch milliseconds. */
  readonly startedAt: number;
  /** Answered from the response cache: counts nothing. */
  readonly cached: boolean;
  /** The request's id (fastify's `request.id`, sent back as `x-request-id`; a batch line's `request_id`). */
  readonly requestId: string;
  /** True when `usage` is the gateway's estimate (src/tokens/estimate.ts), not the provider's report. */
  readonly estimated?: boolean;
  /**
   * Default true: its tokens count on the matching token windows. False for a batch line, which
   * the gateway runs in the background long after the submission was admitted.
   */
  readonly windows?: boolean;
  /** The request's reservations: settled with its tokens instead of charging them afresh. */
  readonly settlement?: Settlement | undefined;
}

/** What the core reports to the gateway's metrics. */
export interface AdmissionMetrics {
  admission(result: AdmissionResult, userPath: string | undefined, provider: string | undefined, model: string | undefined): void;
  /** A failed upstream attempt passed its request on to the next failover candidate. */
  failover(from: { provider: string; model: string }, to: { provider: string; model: string }): void;
  /** A request that waited for capacity (or was refused a place): how its wait ended, and how long it was. */
  queueWait(outcome: QueueOutcome, seconds: number): void;
  upstream<T extends { readonly status: number }>(provider: string, call: () => Promise<T>): Promise<T>;
  tokens(provider: string, model: string, usage: Usage | undefined): void;
  /** An upstream answered 429 (`model` '' when the request named none). */
  throttled(provider: string, model: string): void;
  /** An upstream answer carried rate-limit headers that could not be read (they were ignored). */
  malformedHeaders(provider: string, names: readonly string[]): void;
}

/**
 * Told when an answer makes a target saturated by what was learned (see src/ratelimit/learned.ts):
 * the gateway logs when it enters and when it leaves.
 */
export interface SaturationListener {
  saturated(provider: string, model: string, untilMs: number, cause: LearnedCause): void;
}

/** Where usage records go (the usage recorder: priced, shown to budgets, written off the request path). */
export interface UsageSink {
  /** Answers the record as queued, priced; undefined when usage is not recorded. */
  record(entry: Omit<UsageRecord, 'costUsd'>): UsageRecord | undefined;
}

/**
 * Hears what happens to one request's upstream calls inside `dispatch`: the HTTP layer's access
 * and failure log lines (src/http/access-log.ts). Called on the request's path: must not throw.
 */
export interface RequestTrace {
  /** A call to `target` starts: the request's first, or a failover attempt. */
  attempt(target: Target): void;
  /** The call to `from` failed with `failure` (what its client would have got) and the request goes on to `to`. */
  failedOver(from: Target, to: Target, failure: GatewayError): void;
}

/** A request answered 429 by a rate limit or a budget, as the usage view counts it (see src/usage/refusals.ts). */
export interface Refusal {
  readonly userPath: string;
  /** What it asked for: the route's first target (an alias's first), or a passthrough's provider and model; '' when none. */
  readonly provider: string;
  readonly model: string;
  /** The rule that refused: a rate-limit rule's scope, its own subject and its period label, or a budget's path and period. */
  readonly scope: Scope | 'budget';
  readonly subject: string;
  readonly period: string;
}

/** Where refusals are counted. Called on the request's path: must not throw or do I/O. */
export interface RefusalSink {
  refused(refusal: Refusal): void;
}

export interface AdmissionCoreOptions {
  /** Absent when rate limits are disabled. */
  readonly limiter: RateLimiter | undefined;
  /** Absent when budgets are disabled. */
  readonly budgets: BudgetTracker | undefined;
  readonly usage: UsageSink;
  readonly metrics: AdmissionMetrics;
  /** Where requests refused with a 429 are counted; absent: nowhere. */
  readonly refusals?: RefusalSink | undefined;
  /** Where refused requests wait for capacity; absent: every refusal is answered at once. */
  readonly queue?: WaitQueue | undefined;
  /** Told when an upstream answer saturates its target. */
  readonly saturation?: SaturationListener | undefined;
  now(): number;
}

export interface AdmitOneOptions {
  /** Holds the request's slots until it ends; without one, no slot is taken (user-path rules only). */
  readonly lifetime?: Lifetime | undefined;
  /** The client is gone: a waiting request leaves (a lifetime brings its own). */
  readonly cancel?: Cancellation | undefined;
  /** Default true; false for what costs nothing (a file upload). */
  readonly budgets?: boolean;
}

/** How a wait for capacity ended, as the metrics count it. */
export type QueueOutcome = 'admitted' | 'timed_out' | 'cancelled' | 'full';

export const QUEUE_WAIT_HEADER = 'x-floodgate-queue-wait-ms';

/** The admission options of each priority, with and without slots: made once, not per request. */
const OPTIONS: Readonly<Record<Priority, { slots: AdmitOptions; noSlots: AdmitOptions }>> = Object.freeze({
  high: { slots: Object.freeze({ priority: 'high' }), noSlots: Object.freeze({ holdSlot: false, priority: 'high' }) },
  normal: { slots: Object.freeze({ priority: 'normal' }), noSlots: Object.freeze({ holdSlot: false, priority: 'normal' }) },
  low: { slots: Object.freeze({ priority: 'low' }), noSlots: Object.freeze({ holdSlot: false, priority: 'low' }) },
});
const NO_SLOTS = OPTIONS.high.noSlots;

/** One admission step, as the waiting loop sees it. */
type Attempt<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly refusal: AdmissionRefusal; readonly blockers: readonly AdmissionRefusal[] };

/** What a request asked for, as its refusal is counted: a provider instance and a model ('' when it named none). */
interface Asked {
  readonly provider: string;
  readonly model: string;
}

const NOTHING_ASKED: Asked = Object.freeze({ provider: '', model: '' });

/** Every request is admitted when rate limits are disabled: nothing to count or give back. */
const UNLIMITED: AdmissionTicket = Object.freeze({ ok: true as const, headers: undefined, holdsSlots: false, reservedTokens: 0, release(): void {}, releaseTargetSlots(): void {}, settle(): void {} });

export class AdmissionCore {
  readonly #limiter: RateLimiter | undefined;
  readonly #budgets: BudgetTracker | undefined;
  readonly #usage: UsageSink;
  readonly #metrics: AdmissionMetrics;
  readonly #refusals: RefusalSink | undefined;
  readonly #now: () => number;
  readonly #queue: WaitQueue | undefined;
  readonly #saturation: SaturationListener | undefined;
  /** Real admission at each priority: counts, and reports each check to the metrics. */
  readonly #admit: Readonly<Record<Priority, Admitter>>;

  constructor(options: AdmissionCoreOptions) {
    this.#limiter = options.limiter;
    this.#budgets = options.budgets;
    this.#usage = options.usage;
    this.#metrics = options.metrics;
    this.#refusals = options.refusals;
    this.#now = options.now;
    this.#queue = options.queue;
    this.#saturation = options.saturation;
    this.#admit = { high: this.#admitter(OPTIONS.high.slots), normal: this.#admitter(OPTIONS.normal.slots), low: this.#admitter(OPTIONS.low.slots) };
  }

  /** Where refused requests wait; undefined when waiting is off. */
  get queue(): WaitQueue | undefined {
    return this.#queue;
  }

  /** The rate limiter, for the explain dry run and status reads; undefined when rate limits are disabled. */
  get limiter(): RateLimiter | undefined {
    return this.#limiter;
  }

  get budgets(): BudgetTracker | undefined {
    return this.#budgets;
  }

  now(): number {
    return this.#now();
  }

  /**
   * A model request: for each of the route's targets in order, admission against the rate limits
   * (user-path rules once, with the first target admitted; provider and model rules per attempt),
   * the budgets once, then the call. A retryable failure (429, 5xx, timeout, unreachable, a stream
   * broken before its first byte) passes the request to the next failover candidate. Slots are held
   * by `lifetime` until the request ends; a failed attempt's provider and model slots go back at once.
   * Throws the 429 when the consumer is over its limit or every candidate is saturated, or the last
   * upstream failure when candidates were tried and failed. A request that may wait does so before
   * its first call (see `#whenAdmitted`). `trace` hears of every call and failover.
   */
  async dispatch(caller: Caller, route: Route, lifetime: Lifetime, call: TargetCall, trace?: RequestTrace, estimate?: ReservationEstimate): Promise<Dispatched> {
    const priority = caller.priority ?? 'high';
    const tokens = estimate !== undefined && estimate.tokens > 0 && this.#limiter !== undefined ? estimate.tokens : 0;
    // With budget reservations on, each admission of the walk claims the cost at its target's price.
    const spending = estimate?.costUsd !== undefined && this.#budgets !== undefined ? new Spending(this.#budgets, caller.userPath, estimate.costUsd) : undefined;
    const admit = tokens > 0 || spending !== undefined ? this.#admitter(tokens > 0 ? { priority, reserveTokens: tokens } : OPTIONS[priority].slots, spending) : this.#admit[priority];
    const asked = askedOf(route.first);
    const { value: first, waitedMs } = await this.#whenAdmitted(caller, asked, lifetime.cancel, async () => {
      const walk = new TargetWalk(route, caller.userPath, admit);
      const step = await walk.next(0);
      return step.ok ? { ok: true, value: { walk, step } } : step;
    });
    let { walk, step } = first;
    const own = step.ticket;
    const headers = withWaited(rateLimitHeaders(own.headers), waitedMs);
    const held = new HeldReservations(own);
    // Held from here: a budget refusal ends the request, and its slots must come back with it.
    if (own.holdsSlots) lifetime.hold(own);
    try {
      // Budgets after the rate limits; they never wait. Reserving, the admission that let the
      // request through has checked and reserved them already, in its own step.
      if (spending === undefined) this.#checkBudget(caller.userPath, asked);
      else held.budget = this.#budgetHold(spending, caller.userPath, asked);
      const total = walk.targets.length;
      let failure: GatewayError | undefined;
      for (;;) {
        const { target, ticket } = step;
        if (ticket.holdsSlots && ticket !== own) lifetime.hold(ticket);
        const attempt = ticket === own ? undefined : ticket;
        held.attempt = attempt;
        const next = walk.afterFailure(step.index);
        const canFailOver = next < total;
        trace?.attempt(target);
        try {
          const result = await this.#metrics.upstream(target.provider.name, () => call(target));
          this.observe({ provider: target.provider.name, model: target.model }, result);
          if (!canFailOver) return { result, target, headers, settlement: held.settlement() };
          if (isRetryable(result.status)) {
            failure = upstreamError(result.status, await readBody(result.body), result.headers);
          } else {
            // A stream fails over only before its first byte reached the client: wait for it here.
            if (!Buffer.isBuffer(result.body) && result.status < 400) await primeStream(result.body, target.provider.name);
            return { result, target, headers, settlement: held.settlement() };
          }
        } catch (err) {
          if (!canFailOver || lifetime.cancel.cancelled || !(err instanceof GatewayError && err.status >= 500)) {
            endAttempt(own, attempt);
            throw err;
          }
          failure = err;
        }
        endAttempt(own, attempt);
        // The dollars reserved move to the price of the target that executes: given back here, and
        // claimed again by the next candidate's admission, at its price (with Redis, both in the
        // same script call: this turn's). A candidate whose budget has no room ends the request
        // with the budget's 429.
        held.releaseBudget();
        const found = await walk.next(next);
        // Tried and failed upstream beats saturated: the client learns what actually happened.
        if (!found.ok) throw failure;
        if (spending !== undefined) held.budget = this.#budgetHold(spending, caller.userPath, asked);
        this.#metrics.failover({ provider: target.provider.name, model: target.model }, { provider: found.target.provider.name, model: found.target.model });
        trace?.failedOver(target, found.target, failure);
        step = found;
      }
    } catch (err) {
      // Refused by a budget, or failed: the request used nothing it reserved.
      held.settle(0);
      throw withWaitedError(err, waitedMs);
    }
  }

  /**
   * A realtime session: one request and one slot for its whole life, checked against user-path,
   * provider and model rules on the route's primary targets (a session has nothing to fail over
   * from), then the budgets. The slot is held by `lifetime`.
   */
  async admitSession(caller: Caller, route: Route, lifetime: Lifetime): Promise<{ target: Target; headers: Record<string, string> | undefined }> {
    const admit = this.#admit[caller.priority ?? 'high'];
    const asked = askedOf(route.first);
    const { value: step, waitedMs } = await this.#whenAdmitted(caller, asked, lifetime.cancel, async () => {
      const found = await new TargetWalk(route, caller.userPath, admit, false).next(0);
      return found.ok ? { ok: true, value: found } : found;
    });
    if (step.ticket.holdsSlots) lifetime.hold(step.ticket);
    try {
      this.#checkBudget(caller.userPath, asked);
    } catch (err) {
      throw withWaitedError(err, waitedMs);
    }
    return { target: step.target, headers: withWaited(rateLimitHeaders(step.ticket.headers), waitedMs) };
  }

  /**
   * One request to one provider, with the model its body named when it named one (passthrough):
   * user-path, provider and model rules, slots held by `options.lifetime`, then the budgets. Without
   * a lifetime (a batch submission, a file upload) only user-path rules apply and no slot is taken.
   * Answers the `x-ratelimit-*` headers; throws the 429 of a refusal.
   */
  async admitOne(caller: Caller, target: { provider?: string; model?: string | undefined }, options: AdmitOneOptions = {}): Promise<Record<string, string> | undefined> {
    return (await this.admitOneReserving(caller, target, options)).headers;
  }

  /**
   * admitOne() for a request that may reserve (a passthrough with a lifetime): with `estimate`,
   * its tokens on the matching token windows and its cost (at `target`'s prices) on the budgets.
   * Answers the headers and the settlement to hand to complete() (undefined when nothing is held).
   */
  async admitOneReserving(
    caller: Caller,
    target: { provider?: string; model?: string | undefined },
    options: AdmitOneOptions & { estimate?: { tokens: number; costUsd?: number | undefined } | undefined } = {},
  ): Promise<{ headers: Record<string, string> | undefined; settlement: Settlement | undefined }> {
    const { lifetime, estimate } = options;
    const cancel = lifetime?.cancel ?? options.cancel;
    const priority = caller.priority ?? 'high';
    const admitOptions = OPTIONS[priority];
    const reserveTokens = lifetime !== undefined && estimate !== undefined && this.#limiter !== undefined ? estimate.tokens : 0;
    const slots: AdmitOptions = reserveTokens > 0 ? { priority, reserveTokens } : admitOptions.slots;
    const costUsd = lifetime === undefined || options.budgets === false ? undefined : estimate?.costUsd;
    const spending = costUsd !== undefined && this.#budgets !== undefined ? new Spending(this.#budgets, caller.userPath, () => costUsd) : undefined;
    const admit = this.#admitter(lifetime === undefined ? admitOptions.noSlots : slots, spending);
    const scope: AdmissionTarget = { userPath: caller.userPath, provider: target.provider, model: target.model };
    const asked: Asked = target.provider === undefined && target.model === undefined ? NOTHING_ASKED : { provider: target.provider ?? '', model: target.model ?? '' };
    const { value: ticket, waitedMs } = await this.#whenAdmitted(caller, asked, cancel, async () => {
      let result = admit(scope);
      if (result instanceof Promise) result = await result;
      return result.ok ? { ok: true, value: result } : { ok: false, refusal: result, blockers: [result] };
    });
    if (ticket.holdsSlots) lifetime?.hold(ticket);
    const held = new HeldReservations(ticket);
    try {
      if (spending !== undefined) held.budget = this.#budgetHold(spending, caller.userPath, asked);
      else if (options.budgets !== false) this.#checkBudget(caller.userPath, asked);
    } catch (err) {
      held.settle(0);
      throw withWaitedError(err, waitedMs);
    }
    return { headers: withWaited(rateLimitHeaders(ticket.headers), waitedMs), settlement: held.settlement() };
  }

  /**
   * Runs `attempt` until it admits. A refusal is the 429 at once unless the caller may wait and the
   * refusal's wait (its Retry-After, in ms) fits in what is left of its wait; then the request
   * waits in the queue, counting nothing and holding nothing, until capacity can have freed on a
   * rule that refused it, and tries its whole admission again. It leaves at once when the client
   * goes (`cancel`), and gets the 429 of its last refusal when its wait is used up. Every 429 is
   * counted as a refusal of what the request `asked` for.
   */
  async #whenAdmitted<T>(caller: Caller, asked: Asked, cancel: Cancellation | undefined, attempt: () => Promise<Attempt<T>>): Promise<{ value: T; waitedMs: number | undefined }> {
    let step = await attempt();
    if (step.ok) return { value: step.value, waitedMs: undefined };
    const queue = this.#queue;
    const maxWaitMs = caller.maxWaitMs ?? 0;
    if (queue === undefined || maxWaitMs <= 0) throw this.#refused(caller.userPath, asked, step.refusal.breach, rateLimitedError(step.refusal));
    const startedAt = this.#now();
    const deadline = startedAt + maxWaitMs;
    const waiter = queue.waiter(caller.priority ?? 'high');
    for (;;) {
      const refusal: AdmissionRefusal = step.refusal;
      const waitedMs = this.#now() - startedAt;
      if (!mayWaitFor(refusal, deadline - this.#now())) {
        if (waitedMs > 0) this.#metrics.queueWait('timed_out', waitedMs / 1000);
        throw this.#refused(caller.userPath, asked, refusal.breach, withWaitedError(rateLimitedError(refusal), waitedMs > 0 ? waitedMs : undefined));
      }
      const blockers = step.blockers.map((blocker) => blockerOf(blocker, caller.userPath));
      const ended = queue.wait(waiter, blockers, deadline, (leave) => listenFor(cancel, leave));
      if (ended === 'full') {
        this.#metrics.queueWait('full', 0);
        throw this.#refused(caller.userPath, asked, refusal.breach, withWaitedError(queueFullError(queue.depth), waitedMs > 0 ? waitedMs : undefined));
      }
      const end = await ended;
      const after = this.#now() - startedAt;
      if (end === 'cancelled') {
        this.#metrics.queueWait('cancelled', after / 1000);
        throw clientGone();
      }
      if (end !== 'woken') {
        this.#metrics.queueWait('timed_out', after / 1000);
        throw this.#refused(caller.userPath, asked, refusal.breach, withWaitedError(rateLimitedError(refusal), after));
      }
      step = await attempt();
      queue.retried(waiter, step.ok, blockers.map((blocker) => blocker.key));
      if (step.ok) {
        const waited = this.#now() - startedAt;
        this.#metrics.queueWait('admitted', waited / 1000);
        return { value: step.value, waitedMs: waited };
      }
    }
  }

  /**
   * An upstream answer of `target` (its model undefined when the request named none): what it says
   * about the provider's own rate limits is learned (see src/ratelimit/learned.ts) and counted.
   * Every upstream answer comes through here; it never waits and never throws.
   */
  observe(target: { readonly provider: string; readonly model: string | undefined }, result: ProviderResult): void {
    const { provider, model } = target;
    if (result.status === 429) this.#metrics.throttled(provider, model ?? '');
    const capacity = result.capacity;
    if (capacity === undefined) return;
    if (capacity.malformed.length > 0) this.#metrics.malformedHeaders(provider, capacity.malformed);
    if (model === undefined || this.#limiter === undefined) return;
    const update = this.#limiter.learn({ provider, model }, capacity);
    const saturation = update && saturationOf(update);
    if (saturation !== undefined) this.#saturation?.saturated(provider, model, saturation.untilMs, saturation.cause);
  }

  /** The budgets governing a user path: throws the 429 `budget_exceeded` when one is reached (a refusal of what was `asked`). One in-memory lookup. */
  #checkBudget(userPath: string, asked: Asked): void {
    const breach = this.budgetBreach(userPath);
    if (breach !== undefined) throw this.#refused(userPath, asked, breach, budgetExceededError(breach));
  }

  /**
   * What the admission that let a request through decided about its budgets (reservations on): the
   * hold to release when the request ends, or (throws) the 429 of the budget without room;
   * undefined when no budget governs the request.
   */
  #budgetHold(spending: Spending, userPath: string, asked: Asked): BudgetHold | undefined {
    const reserved = spending.result();
    if (reserved === undefined) return undefined;
    if (!reserved.ok) throw this.#refused(userPath, asked, reserved.breach, budgetExceededError(reserved.breach));
    return reserved.hold;
  }

  /** Counts a refusal (see RefusalSink) and answers the 429 to throw. */
  #refused(userPath: string, asked: Asked, by: BreachedLimit | BudgetBreach, error: unknown): unknown {
    const sink = this.#refusals;
    if (sink === undefined) return error;
    const rule = 'ruleSubject' in by
      ? { scope: by.scope, subject: by.ruleSubject, period: by.label }
      : { scope: 'budget' as const, subject: by.userPath, period: by.period };
    sink.refused({ userPath, provider: asked.provider, model: asked.model, ...rule });
    return error;
  }

  /**
   * The reached budget governing a user path, if any, for what is refused in its own way rather
   * than with a 429 (a batch line, a realtime `response.create`).
   */
  budgetBreach(userPath: string): BudgetBreach | undefined {
    return this.#budgets?.check(userPath);
  }

  /**
   * A request at its end (streams at their last byte or the client gone): its tokens go to every
   * matching token window (the user path, and the provider and model that executed it), and its
   * usage record is queued. Neither touches storage on this path. Answers the record, priced
   * (undefined when usage is not recorded).
   */
  complete(caller: Caller, done: Completion): UsageRecord | undefined {
    const usage = done.usage;
    const settlement = done.settlement;
    if (!done.cached) {
      // With tokens reserved, they are settled below (with the record's cost): the reservation becomes what it used.
      if (usage !== undefined && this.#limiter !== undefined && done.windows !== false && settlement?.holdsTokens !== true) {
        // A shared store answers later and never rejects: nothing here waits for the charge to land.
        void this.#limiter.chargeTokens({ userPath: caller.userPath, provider: done.provider, model: done.model }, usage.totalTokens);
      }
      this.#metrics.tokens(done.provider, done.model, usage);
    }
    const record = this.#usage.record({
      timestampMs: done.startedAt,
      userPath: caller.userPath,
      provider: done.provider,
      model: done.model,
      endpoint: done.endpoint,
      promptTokens: usage?.promptTokens ?? 0,
      completionTokens: usage?.completionTokens ?? 0,
      totalTokens: usage?.totalTokens ?? 0,
      cachedPromptTokens: usage?.cachedPromptTokens ?? 0,
      cached: done.cached,
      status: done.status,
      latencyMs: this.#now() - done.startedAt,
      apiKeyId: caller.keyId,
      requestId: done.requestId,
      estimated: done.estimated === true,
    });
    // After the record: its cost reaches the budgets as the dollars reserved for it leave them.
    settlement?.settle(usage?.totalTokens ?? 0, record?.costUsd ?? 0);
    return record;
  }

  /**
   * What a request would meet right now, walked exactly as `dispatch` (`kind` 'dispatch'),
   * `admitSession` ('session') or a batch submission ('submission') walk it, reading the counters
   * instead of counting: the decision with its breach and target, each target's own capacity
   * (its provider and model rules alone), every rule read, and the budgets governing the path.
   * Counts nothing, takes no slot. Rate limits must be enabled.
   */
  async explain(userPath: string, route: Route, kind: ExplainKind, priority: Priority = 'high', estimate?: ReservationEstimate): Promise<Explanation> {
    const limiter = this.#limiter;
    if (limiter === undefined) throw new Error('explain needs rate limits enabled');
    const rules = new Map<string, RuleStatus>();
    const collect = (found: readonly RuleStatus[]): void => {
      for (const rule of found) rules.set(`${rule.scope}\u0000${rule.subject.toLowerCase()}\u0000${rule.period_seconds}`, rule);
    };
    const options = OPTIONS[priority];
    // With reservations on, the rules are judged as a request reserving the estimate would be.
    const reserveTokens = kind === 'dispatch' && estimate !== undefined ? estimate.tokens : 0;
    const slots: AdmitOptions = reserveTokens > 0 ? { ...options.slots, reserveTokens } : options.slots;
    const read: Admitter = (target) => limiter.explain(target, slots).then((preview) => {
      collect(preview.rules);
      return preview.refusal ?? UNLIMITED;
    });
    let breach: Breach | undefined;
    let target: Target | undefined;
    let refusal: AdmissionRefusal | undefined;
    if (kind === 'submission') {
      const preview = await limiter.explain({ userPath }, options.noSlots);
      collect(preview.rules);
      refusal = preview.refusal;
    } else {
      const step = await new TargetWalk(route, userPath, read, kind === 'dispatch').next(0);
      if (step.ok) target = step.target;
      else refusal = step.refusal;
    }
    if (refusal !== undefined) breach = breachOf(refusal);
    // Budgets come after the rate limits, on every endpoint.
    const cost = kind === 'dispatch' && target !== undefined ? estimate?.costUsd?.(target) : undefined;
    const budget = breach === undefined ? (cost === undefined ? this.#budgets?.check(userPath) : this.#budgets?.wouldReserve(userPath, cost)) : undefined;
    if (budget !== undefined) {
      breach = { scope: 'user_path', subject: budget.userPath, periodLabel: budget.period, retryAfterSeconds: Math.ceil(budget.retryAfterMs / 1000), message: budget.message };
      target = undefined;
    }
    const candidates = kind === 'session' ? route.primary : [...route.primary, ...route.failover];
    const targets: TargetCapacity[] = [];
    for (const [i, candidate] of candidates.entries()) {
      const own = await limiter.explain({ provider: candidate.provider.name, model: candidate.model }, reserveTokens > 0 ? { reserveTokens } : undefined);
      collect(own.rules);
      targets.push({ target: candidate, failover: i >= route.primary.length, breach: own.refusal && breachOf(own.refusal), learned: own.learned });
    }
    const budgets = (await this.#budgets?.sharedStatusFor(userPath)) ?? [];
    return { breach, target, targets, rules: [...rules.values()], budgets, refusal: budget === undefined ? refusal : undefined };
  }

  /**
   * Real admission: counts the request when no rule is breached, and reports each check to the
   * metrics. With `spending`, each admission also claims the request's cost at its target's price,
   * checked and reserved by the counter store in the same step as the rules.
   */
  #admitter(options: AdmitOptions, spending?: Spending): Admitter {
    const limiter = this.#limiter;
    if (limiter === undefined) {
      if (spending === undefined) return () => UNLIMITED;
      // No counter store to ask: the claim is decided on this replica's counts when the walk is over.
      return (target) => {
        spending.claimFor(target);
        return UNLIMITED;
      };
    }
    return (target) => {
      const claim = spending?.claimFor(target);
      const admitted: MaybePromise<AdmissionResult | SpendRefusal> = claim === undefined ? limiter.admit(target, options) : limiter.admit(target, options, claim);
      if (admitted instanceof Promise) return admitted.then((result) => this.#reported(result, target));
      return this.#reported(admitted, target);
    };
  }

  #reported(result: AdmissionResult | SpendRefusal, target: AdmissionTarget): AdmissionResult {
    // A budget's refusal ends the walk as an admission holding nothing (the store counted nothing):
    // the claim knows the budget, whose 429 the request gets once the walk is over.
    if ('spendRefused' in result) return UNLIMITED;
    this.#metrics.admission(result, target.userPath, target.provider, target.model);
    return result;
  }
}

function askedOf(target: Target): Asked {
  return { provider: target.provider.name, model: target.model };
}

/**
 * The provider and model slots of a finished attempt go back, with the tokens it reserved there;
 * the user-path slot and reservation stay with the request.
 */
function endAttempt(own: AdmissionTicket | undefined, attempt: AdmissionTicket | undefined): void {
  if (attempt !== undefined) {
    attempt.release();
    void attempt.settle(0);
  } else own?.releaseTargetSlots();
}

/**
 * What one request holds reserved: its own ticket's tokens (user path, and its first target's
 * until that attempt ends), those of the attempt executing it after a failover, and its budget
 * reservation.
 */
class HeldReservations implements Settlement {
  readonly #own: AdmissionTicket;
  attempt: AdmissionTicket | undefined;
  budget: BudgetHold | undefined;
  #settled = false;

  constructor(own: AdmissionTicket) {
    this.#own = own;
  }

  get holdsTokens(): boolean {
    return this.#own.reservedTokens > 0 || (this.attempt?.reservedTokens ?? 0) > 0;
  }

  /** Itself when it holds a reservation; undefined when there is nothing to settle (reservations off). */
  settlement(): Settlement | undefined {
    return this.holdsTokens || this.budget !== undefined ? this : undefined;
  }

  settle(tokens: number, costUsd = 0): void {
    if (this.#settled) return;
    this.#settled = true;
    void this.#own.settle(tokens);
    if (this.attempt !== undefined) void this.attempt.settle(tokens);
    this.budget?.release(costUsd);
  }

  /** A failed attempt gives its dollars back: the next one claims its own, at its target's price. */
  releaseBudget(): void {
    this.budget?.release(0);
    this.budget = undefined;
  }
}

/**
 * A request's budget reservation (budget reservations on) as the admissions of its walk make it:
 * each claims the request's cost at the price of its target, and the last one is the admission
 * that let the request through (the walk stops there).
 */
class Spending {
  readonly #budgets: BudgetTracker;
  readonly #userPath: string;
  readonly #price: (target: PricedTarget) => number;
  #claim: BudgetClaim | undefined;

  constructor(budgets: BudgetTracker, userPath: string, price: (target: PricedTarget) => number) {
    this.#budgets = budgets;
    this.#userPath = userPath;
    this.#price = price;
  }

  /** The claim of an admission to `target`; undefined when no budget governs the request. */
  claimFor(target: AdmissionTarget): BudgetClaim | undefined {
    this.#claim = this.#budgets.claim(this.#userPath, this.#price({ provider: { name: target.provider ?? '' }, model: target.model ?? '' }));
    return this.#claim;
  }

  /** What the last admission's claim came to (see BudgetClaim.result); undefined when no budget governs the request. */
  result(): BudgetReservation | undefined {
    return this.#claim?.result();
  }
}

function isRetryable(status: number): boolean {
  return status === 429 || status >= 500;
}

/** How an endpoint admits: model endpoints, a realtime session, a batch submission (user-path rules, no slot). */
export type ExplainKind = 'dispatch' | 'session' | 'submission';

/** A refusal as the explain dry run shows it. */
export interface Breach {
  readonly scope: Scope;
  readonly subject: string;
  readonly periodLabel: string;
  readonly retryAfterSeconds: number;
  readonly message: string;
}

export interface TargetCapacity {
  readonly target: Target;
  /** A failover candidate rather than one of the route's primary targets. */
  readonly failover: boolean;
  /** Why its own provider and model rules (or its learned capacity) would skip it now; undefined when it has capacity. */
  readonly breach: Breach | undefined;
  /** Its learned capacity saturates it: until when, and why. */
  readonly learned: LearnedVerdict | undefined;
}

export interface Explanation {
  /** What a request would be refused with now; undefined when it would be admitted. */
  readonly breach: Breach | undefined;
  /** Where an admitted request would be sent (undefined for a submission, which calls no target). */
  readonly target: Target | undefined;
  readonly targets: readonly TargetCapacity[];
  /** Every rule the walk read, with its live counters. */
  readonly rules: readonly RuleStatus[];
  readonly budgets: readonly BudgetStatus[];
  /** The rate limits' refusal (not a budget's), which a request may wait on. */
  readonly refusal: AdmissionRefusal | undefined;
}

function breachOf(refusal: AdmissionRefusal): Breach {
  const { breach } = refusal;
  return { scope: breach.scope, subject: breach.subject, periodLabel: breach.label, retryAfterSeconds: refusal.retryAfterSeconds, message: refusal.message };
}

/**
 * A refusal as the queue waits on it: its counter, when it frees by time, and the caller's place
 * among the rule's consumers (the direct child of a user-path rule's path it lies in).
 */
function blockerOf(refusal: AdmissionRefusal, userPath: string): Blocker {
  const { breach } = refusal;
  return {
    key: refusal.counterKey,
    concurrent: breach.kind === 'concurrent',
    retryAtMs: refusal.retryAtSeconds * 1000,
    child: breach.scope === 'user_path' ? (directChild(breach.subject.toLowerCase(), userPath.toLowerCase()) ?? '') : '',
    scope: breach.scope,
    subject: breach.subject,
    periodLabel: breach.label,
  };
}

/** Calls `leave` when `cancel` fires; answers how to stop listening. */
function listenFor(cancel: Cancellation | undefined, leave: () => void): () => void {
  if (cancel === undefined) return () => {};
  if (cancel.cancelled) {
    queueMicrotask(leave);
    return () => {};
  }
  cancel.once('abort', leave);
  return () => cancel.off('abort', leave);
}

function withWaited(headers: Record<string, string> | undefined, waitedMs: number | undefined): Record<string, string> | undefined {
  if (waitedMs === undefined) return headers;
  return { ...headers, [QUEUE_WAIT_HEADER]: String(Math.round(waitedMs)) };
}

/** An error answered to a request that waited carries how long it waited. */
function withWaitedError(err: unknown, waitedMs: number | undefined): unknown {
  if (waitedMs === undefined || !(err instanceof GatewayError)) return err;
  return new GatewayError({ status: err.status, type: err.type, message: err.message, param: err.param, code: err.code, headers: withWaited(err.headers, waitedMs) });
}

/**
 * Whether a request with `leftMs` of its wait may wait on a refusal: only when the refusal's wait
 * (its Retry-After, as `retry-after-ms` says it) fits, and it is not one that time never lifts.
 */
export function mayWaitFor(refusal: AdmissionRefusal, leftMs: number): boolean {
  return refusal.retryAtSeconds !== Infinity && refusal.retryAfterSeconds * 1000 <= leftMs;
}
