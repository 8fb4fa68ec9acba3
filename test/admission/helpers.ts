/**
 * The admission core on its own: a rate limiter over the memory store on a clock that moves only
 * when told to, fake providers whose calls the test decides, a lifetime the test ends, and sinks
 * that keep what the core recorded.
 */
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { AdmissionCore, type AdmissionMetrics, type Lifetime, type QueueOutcome, type Refusal } from '../../src/admission/core.ts';
import { WaitQueue, type Timers } from '../../src/admission/queue.ts';
import { BudgetTracker } from '../../src/budgets/tracker.ts';
import type { BudgetDefinition } from '../../src/budgets/types.ts';
import { MemoryCounterStore } from '../../src/counters/memory.ts';
import { GatewayError } from '../../src/errors/gateway-error.ts';
import { Cancellation } from '../../src/providers/cancellation.ts';
import type { Provider, ProviderResult, Usage } from '../../src/providers/types.ts';
import { RateLimiter, type AdmissionTicket, type Headroom, type LearnedCause, type LearnedSettings, type RuleDefinition } from '../../src/ratelimit/index.ts';
import { Resolver, type RoutingConfig } from '../../src/routing/resolver.ts';
import type { Target } from '../../src/routing/types.ts';
import type { UsageEntry } from '../../src/usage/recorder.ts';

export const T0_MS = 1_700_000_040_000;

function provider(name: string, models: readonly string[]): Provider {
  const refuse = async (): Promise<ProviderResult> => {
    throw new Error(`provider ${name} is only called through the test's call function`);
  };
  return { name, type: 'fake', listModels: async () => [...models], call: refuse, passthrough: refuse, close: async () => {} };
}

/** The 429 (or other gateway error) a dispatch threw; fails the test when it was admitted. */
export async function refusal(promise: Promise<unknown>): Promise<GatewayError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof GatewayError, `not a gateway error: ${String(err)}`);
    return err;
  }
  assert.fail('the request was admitted');
}

/** A buffered answer with the usage a real provider would report. */
export function answer(status: number, usage?: Usage): ProviderResult {
  const body = Buffer.from(status < 400 ? '{"ok":true}' : '{"error":{"message":"upstream said no","type":"server_error"}}');
  return { status, headers: { 'content-type': 'application/json' }, body, usage: () => usage };
}

/** A streamed answer whose stream fails before its first byte. */
export function brokenStream(): ProviderResult {
  const body = new Readable({ read() {} });
  setImmediate(() => body.destroy(new Error('connection reset')));
  return { status: 200, headers: { 'content-type': 'text/event-stream' }, body, usage: () => undefined };
}

/** A request's lifetime as a test holds it: `end()` gives the slots back, as a response's close does. */
export class TestLifetime implements Lifetime {
  readonly cancel = new Cancellation();
  readonly held: AdmissionTicket[] = [];
  #ended = false;

  hold(ticket: AdmissionTicket): void {
    if (this.#ended) ticket.release();
    else this.held.push(ticket);
  }

  end(): void {
    this.#ended = true;
    for (const ticket of this.held) ticket.release();
  }
}

/**
 * A clock and timers that move only when told to: `advance(ms)` fires every timer due on the way,
 * in time order, letting the promises each one settles run before the next.
 */
export class FakeTimers implements Timers {
  #now: number;
  #timers: Array<{ at: number; seq: number; callback: () => void }> = [];
  #seq = 0;

  constructor(startMs: number) {
    this.#now = startMs;
  }

  now = (): number => this.#now;

  setTimeout(callback: () => void, ms: number): unknown {
    const timer = { at: this.#now + Math.max(0, ms), seq: ++this.#seq, callback };
    this.#timers.push(timer);
    return timer;
  }

  clearTimeout(handle: unknown): void {
    this.#timers = this.#timers.filter((timer) => timer !== handle);
  }

  set(ms: number): void {
    this.#now = ms;
  }

  async advance(ms: number): Promise<void> {
    const until = this.#now + ms;
    for (;;) {
      await settle();
      const due = this.#timers.filter((timer) => timer.at <= until).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (due === undefined) break;
      this.#timers = this.#timers.filter((timer) => timer !== due);
      this.#now = Math.max(this.#now, due.at);
      due.callback();
    }
    this.#now = until;
    await settle();
  }
}

/** Lets every promise that can settle now settle. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

export interface CoreWorld {
  core: AdmissionCore;
  queue: WaitQueue;
  timers: FakeTimers;
  waits: Array<{ outcome: QueueOutcome; seconds: number }>;
  limiter: RateLimiter;
  resolver: Resolver;
  budgets: BudgetTracker;
  records: UsageEntry[];
  admissions: Array<{ ok: boolean; userPath: string | undefined; provider: string | undefined; model: string | undefined }>;
  /** Failovers reported to the metrics, as `provider/model -> provider/model`. */
  failovers: string[];
  /** Requests answered 429, as reported to the refusal sink. */
  refusals: Refusal[];
  clock: { now(): number; set(ms: number): void };
  /** Upstream 429s and targets saturated by what was learned, as the core reported them. */
  throttled: string[];
  saturated: Array<{ target: string; untilMs: number; cause: LearnedCause }>;
  route(model: string): NonNullable<ReturnType<Resolver['resolve']>>;
}

/**
 * `providers`: instance name → models. `rules`: the rate-limit rules. `routing`: aliases and
 * failover. `budgets`: budget definitions, their spend given by `spent` (user path → dollars).
 */
export function coreWorld(options: {
  providers: Record<string, readonly string[]>;
  rules?: readonly RuleDefinition[];
  routing?: RoutingConfig;
  budgets?: readonly BudgetDefinition[];
  maxChildren?: number;
  headroom?: Headroom;
  maxDepth?: number;
  /** Provider → its learned-capacity settings (providers left out learn nothing). */
  learned?: Record<string, LearnedSettings>;
  /** budgets.reservations on: statuses show `reserved_usd`. */
  budgetReservations?: boolean;
}): CoreWorld {
  const timers = new FakeTimers(T0_MS);
  const clock = { now: timers.now, set: (ms: number) => timers.set(ms) };
  const providers = Object.entries(options.providers).map(([name, models]) => provider(name, models));
  const resolver = new Resolver(providers, new Map(Object.entries(options.providers).map(([name, models]) => [name, [...models]])), options.routing);
  const store = new MemoryCounterStore({ maxChildren: options.maxChildren });
  const limiter = new RateLimiter({ clock, store, headroom: options.headroom, learned: new Map(Object.entries(options.learned ?? {})) });
  const queue = new WaitQueue({ maxDepth: options.maxDepth ?? 10_000, timers });
  store.onReleased((keys) => queue.released(keys));
  const waits: CoreWorld['waits'] = [];
  limiter.replaceRules(options.rules ?? []);
  const budgets = new BudgetTracker({
    now: clock.now,
    source: { settle: async () => true, sumCost: async (queries) => queries.map(() => 0), budgets: async () => [...(options.budgets ?? [])] },
    reservations: options.budgetReservations,
  });
  budgets.replaceAll(options.budgets ?? []);
  const records: UsageEntry[] = [];
  const admissions: CoreWorld['admissions'] = [];
  const throttled: string[] = [];
  const saturated: CoreWorld['saturated'] = [];
  const failovers: string[] = [];
  const refusals: Refusal[] = [];
  const metrics: AdmissionMetrics = {
    admission: (result, userPath, providerName, model) => void admissions.push({ ok: result.ok, userPath, provider: providerName, model }),
    failover: (from, to) => void failovers.push(`${from.provider}/${from.model} -> ${to.provider}/${to.model}`),
    upstream: (_provider, call) => call(),
    tokens: () => {},
    throttled: (providerName, model) => void throttled.push(`${providerName}/${model}`),
    malformedHeaders: () => {},
    queueWait: (outcome, seconds) => void waits.push({ outcome, seconds }),
  };
  const saturation = { saturated: (providerName: string, model: string, untilMs: number, cause: LearnedCause) => void saturated.push({ target: `${providerName}/${model}`, untilMs, cause }) };
  const core = new AdmissionCore({
    limiter,
    budgets,
    usage: { record: (entry) => void records.push(entry) },
    metrics,
    refusals: { refused: (refusal) => void refusals.push(refusal) },
    queue,
    saturation,
    now: clock.now,
  });
  return {
    core,
    queue,
    timers,
    waits,
    limiter,
    resolver,
    budgets,
    records,
    admissions,
    failovers,
    refusals,
    clock,
    throttled,
    saturated,
    route(model) {
      const route = resolver.resolve(model);
      if (route === undefined) throw new Error(`${model} does not resolve`);
      return route;
    },
  };
}

/** A call function answering per target id, and the ids it was called with, in order. */
export function scriptedCalls(answers: Record<string, () => ProviderResult>): { call: (target: Target) => Promise<ProviderResult>; called: string[] } {
  const called: string[] = [];
  return {
    called,
    call: async (target) => {
      called.push(target.id);
      const make = answers[target.id];
      if (make === undefined) throw new Error(`no answer scripted for ${target.id}`);
      return make();
    },
  };
}
