/**
 * Counters in Redis, shared by every gateway that uses the same Redis and prefix: a cap of 50 admits 50 in all, however many replicas serve the traffic.
 *
 * One round trip per admission (one script run over every matching rule) and one per completed
 * request for its tokens; releases and the lease renewal are off the request path. The operations
 * of one event-loop turn travel together in one script call (batch.ts).
 *
 * When Redis fails or does not answer within `timeoutMs`, the store degrades at once and stays
 * degraded until a probe gets an answer (see availability.ts); meanwhile `onError` decides:
 * `local` counts in this process's memory, `allow` admits uncounted, `deny` refuses. No call ever
 * waits longer than `timeoutMs`, and none rejects except the admin resets, which cannot pretend.
 */
import { MemoryCounterStore } from '../memory.ts';
import {
  childCounterKey,
  concurrencyRow,
  CounterStoreUnavailableError,
  rowMatters,
  windowedRow,
  type AdmitOutcome,
  type ChildReading,
  type ChildrenFull,
  type CounterHandle,
  type CounterReading,
  type CounterRow,
  type CounterRule,
  type CounterStore,
  type MaybePromise,
  type SlotLease,
} from '../../ratelimit/index.ts';
import { RedisAvailability, type CountersLogger } from './availability.ts';
import { ADD_TOKENS, ADMIT, READ, RELEASE, ScriptBatch, type BatchAnswer } from './batch.ts';
import { within, type CountersClient } from './client.ts';
import type { RedisNames } from './keys.ts';
import type { RedisDiagnosis } from './diagnosis.ts';
import { LeaseBook, RedisLease } from './leases.ts';

export type RedisOnError = 'local' | 'allow' | 'deny';

export interface RedisCounterStoreOptions {
  client: CountersClient;
  names: RedisNames;
  /** How long a concurrency slot stays held without renewal. */
  leaseSeconds: number;
  /** Most children per per-child rule in the local fallback counters (rate_limits.max_children). */
  maxChildren?: number;
  /** The longest any call waits for Redis. */
  timeoutMs: number;
  onError: RedisOnError;
  logger: CountersLogger;
  /** Time between probes of a Redis that is down; default 500 ms. */
  probeIntervalMs?: number;
  /** What is known of the connection's trouble (names the cause in the log; refuses a connection on the wrong database). */
  diagnosis?: Pick<RedisDiagnosis, 'explain' | 'wrongDatabase'>;
  /** Tells the other gateways sharing the counters of slots given back here (see RedisSlotReleases). */
  announceReleased?: (keys: readonly string[]) => void;
}

/**
 * A rule's counter: its Redis key, and its counter in the local fallback store. A child's counter
 * of a per-child rule finds its local counter when the fallback first needs it (the fallback store
 * drops idle children, so it may find another one later).
 */
class RedisCounter implements CounterHandle {
  readonly key: string;
  readonly redisKey: string;
  local: CounterHandle | undefined;
  /** The local counter is its rule's overflow counter (see #localRules). */
  overflowed = false;
  readonly child: { readonly ownKey: string; readonly periodSeconds: number; readonly child: string } | undefined;

  constructor(key: string, redisKey: string, local: CounterHandle | undefined, child?: RedisCounter['child']) {
    this.key = key;
    this.redisKey = redisKey;
    this.local = local;
    this.child = child;
  }
}

/** What the scripts need for one list of rules, computed once per list (the engine reuses its lists). */
class ScriptPlan {
  /**
   * The rules' keys and packed parameters, encoded once: ioredis writes Buffer arguments with a
   * copy, where it would build and encode one long string per pipeline from string arguments.
   */
  readonly keys: Buffer[];
  /** The same keys as text, as leases record them. */
  readonly keyNames: string[];
  readonly periods: number[];
  /** The periods, as a batch operation's parameters. */
  readonly periodNumbers: Float64Array;
  /** Per rule: period, request cap, token cap, as an admission's parameters. */
  readonly capNumbers: Float64Array;
  readonly slotKeys: string[] = [];
  readonly hasSlots: boolean;
  /** How many numbers an admission or read of these rules answers. */
  readonly width: number;
  /** The same rules over the fallback store's counters (children's counters found when needed). */
  readonly local: CounterRule[];
  /** Indexes of children's counters among the rules. */
  readonly children: number[] = [];
  readonly rules: readonly CounterRule[];

  constructor(rules: readonly CounterRule[]) {
    this.rules = rules;
    this.keyNames = rules.map((rule) => (rule.counter as RedisCounter).redisKey);
    this.keys = this.keyNames.map((name) => Buffer.from(name));
    this.periods = rules.map((rule) => rule.periodSeconds);
    this.periodNumbers = Float64Array.from(this.periods);
    this.capNumbers = Float64Array.from(rules.flatMap((rule) => [rule.periodSeconds, rule.maxRequests, rule.maxTokens]));
    for (const rule of rules) {
      if (rule.periodSeconds === 0) this.slotKeys.push((rule.counter as RedisCounter).redisKey);
    }
    this.hasSlots = this.slotKeys.length > 0;
    this.width = 2 + ROW_WIDTH * rules.length;
    this.local = rules.map((rule, i) => {
      const counter = rule.counter as RedisCounter;
      if (counter.child !== undefined) this.children.push(i);
      return { counter: counter.local ?? counter, periodSeconds: rule.periodSeconds, maxRequests: rule.maxRequests, maxTokens: rule.maxTokens };
    });
  }
}

/** Slots taken in the local fallback store while Redis was down. */
class LocalLease {
  readonly inner: SlotLease;
  constructor(inner: SlotLease) {
    this.inner = inner;
  }
}

const ROW_WIDTH = 6;
const RENEW_BATCH = 500;
/** Children's counters read per script call when listing them (Lua unpacks at most a few thousand values). */
const CHILD_READ_BATCH = 500;

export class RedisCounterStore implements CounterStore {
  readonly #client: CountersClient;
  readonly #names: RedisNames;
  readonly #leaseMs: number;
  readonly #timeoutMs: number;
  readonly #onError: RedisOnError;
  readonly #logger: CountersLogger;
  readonly #availability: RedisAvailability;
  /** Counts while Redis is down (on_error: local); emptied when it answers again. */
  readonly #local: MemoryCounterStore;
  readonly #counters = new Map<string, RedisCounter>();
  readonly #plans = new WeakMap<readonly CounterRule[], ScriptPlan>();
  readonly #leases = new LeaseBook();
  readonly #batch: ScriptBatch;
  readonly #renewal: NodeJS.Timeout;
  readonly #diagnosis: RedisCounterStoreOptions['diagnosis'];
  readonly #releaseListeners: Array<(keys: readonly string[]) => void> = [];
  readonly #announceReleased: ((keys: readonly string[]) => void) | undefined;

  constructor(options: RedisCounterStoreOptions) {
    this.#client = options.client;
    this.#names = options.names;
    this.#leaseMs = options.leaseSeconds * 1000;
    this.#timeoutMs = options.timeoutMs;
    this.#onError = options.onError;
    this.#logger = options.logger;
    this.#local = new MemoryCounterStore({ maxChildren: options.maxChildren });
    this.#announceReleased = options.announceReleased;
    const client = options.client;
    this.#batch = new ScriptBatch((keys, numbers, leases) => client.floodgateBatchBuffer(keys.length, keys, numbers, leases), options.timeoutMs);
    this.#availability = new RedisAvailability({
      probe: () => this.#probe(),
      probeIntervalMs: options.probeIntervalMs ?? 500,
      logger: options.logger,
      fallback: FALLBACK_DESCRIPTIONS[options.onError],
      // Local counts stood in for the shared ones during the outage only.
      onRecover: () => this.#local.resetAll(),
      explain: (err) => options.diagnosis?.explain(err) ?? err,
    });
    this.#diagnosis = options.diagnosis;
    // Three renewals per lease period: a lease survives two missed ones.
    this.#renewal = setInterval(() => this.#renew(), Math.max(100, Math.floor(this.#leaseMs / 3)));
    this.#renewal.unref();
  }

  /** False while Redis is unreachable and the fallback answers. */
  get available(): boolean {
    return this.#availability.up;
  }

  /** Record a failure seen outside the store's own calls (e.g. the first connection). */
  markUnavailable(err: unknown): void {
    this.#availability.down(err);
  }

  /**
   * Asks Redis now, for a readiness check: a gateway without traffic would otherwise learn of an
   * outage only from its next request. While Redis is known down, the probe is at work already.
   */
  async check(): Promise<void> {
    if (!this.#availability.up) return;
    try {
      await within(this.#client.ping(), this.#timeoutMs);
    } catch (err) {
      this.#availability.down(err);
    }
  }

  counter(key: string): CounterHandle {
    let counter = this.#counters.get(key);
    if (counter === undefined) {
      counter = new RedisCounter(key, this.#names.counterKey(key), this.#local.counter(key));
      this.#counters.set(key, counter);
    }
    return counter;
  }

  /**
   * Redis keeps every child's counter (its keys expire with their windows), so a child is never
   * refused for room here and nothing is tracked: a handle is the child's key, made once per caller.
   */
  childCounter(ownKey: string, periodSeconds: number, child: string, _nowSeconds: number, held: CounterHandle | undefined): CounterHandle | ChildrenFull {
    return held ?? this.#childHandle(ownKey, periodSeconds, child);
  }

  findChild(ownKey: string, periodSeconds: number, child: string, _nowSeconds: number): CounterHandle | ChildrenFull | undefined {
    return this.#childHandle(ownKey, periodSeconds, child);
  }

  /** Every gateway's children of the rule: the keys Redis holds under it (SCAN), read in batches. */
  readChildren(ownKey: string, periodSeconds: number, nowSeconds: number): MaybePromise<ChildReading[]> {
    if (!this.#availability.up) return this.#local.readChildren(ownKey, periodSeconds, nowSeconds);
    return this.#readChildren(ownKey, periodSeconds).catch((err: unknown) => {
      this.#availability.down(err);
      return this.#local.readChildren(ownKey, periodSeconds, nowSeconds);
    });
  }

  retire(key: string): void {
    this.#counters.delete(key);
    this.#local.retire(key);
    if (key.endsWith('\u0000')) this.#local.retire(overflowKey(key));
  }

  clear(key: string): MaybePromise<void> {
    const redisKey = this.#names.counterKey(key);
    this.retire(key);
    if (!this.#availability.up) return;
    this.#batch.flush();
    // A failure leaves the old counts in Redis until their windows expire; the rule is gone anyway.
    return within(this.#deleteCounters(key), this.#timeoutMs * 4).then(noop, (err: unknown) => {
      this.#availability.down(err);
      this.#logger.warn({ key: redisKey }, 'rate-limit counters: could not clear the counters of a deleted rule in Redis; they expire with their windows');
    });
  }

  async reset(key: string): Promise<void> {
    this.#local.reset(key);
    await this.#shared(() => this.#deleteCounters(key));
  }

  async resetAll(): Promise<void> {
    this.#local.resetAll();
    await this.#shared(async () => {
      for await (const keys of this.#scan(this.#names.counterPattern)) await within(this.#client.unlink(...keys), this.#timeoutMs);
    });
  }

  tryAdmit(rules: readonly CounterRule[], nowSeconds: number): MaybePromise<AdmitOutcome> {
    const plan = this.#plan(rules);
    if (!this.#availability.up) return this.#fallbackAdmit(plan, nowSeconds);
    const leaseId = plan.hasSlots ? this.#leases.nextId() : '';
    return this.#batch.add(ADMIT, plan.keys, this.#leaseMs, plan.capNumbers, leaseId, plan.width).then(
      (answer) => {
        const admitted = answer.reply.readDoubleLE((answer.at + 1) * 8) === 1;
        const lease = admitted && plan.hasSlots ? this.#leases.hold(leaseId, plan.slotKeys) : undefined;
        return { status: admitted ? 'admitted' : 'refused', ...readingOf(plan.periods, answer), lease };
      },
      (err: unknown) => {
        this.#availability.down(err);
        return this.#fallbackAdmit(plan, nowSeconds);
      },
    );
  }

  release(rules: readonly CounterRule[], lease: SlotLease): void {
    if (lease instanceof LocalLease) {
      // The local counters the slots were taken on: a child's is the one it found then.
      this.#local.release(this.#plan(rules).local, lease.inner);
      this.#released(rules, false);
      return;
    }
    const plan = this.#plan(rules);
    const keys = this.#leases.giveBack(lease as RedisLease, plan.keyNames);
    // While Redis is down the lease cannot be removed; it expires on its own.
    if (keys.length === 0 || !this.#availability.up) return;
    const given = keys.length === rules.length ? rules : rules.filter((_, i) => keys.includes(plan.keyNames[i]!));
    this.#batch.add(RELEASE, keys, Number.NaN, undefined, (lease as RedisLease).id, 0).then(
      () => this.#released(given, true),
      (err: unknown) => this.#availability.down(err),
    );
  }

  onReleased(listener: (keys: readonly string[]) => void): void {
    this.#releaseListeners.push(listener);
  }

  /** Slots are back (in Redis once the release landed, for every gateway to see): whoever waits for them is told. */
  #released(rules: readonly CounterRule[], shared: boolean): void {
    const keys = rules.map((rule) => rule.counter.key);
    for (const listener of this.#releaseListeners) listener(keys);
    if (shared) this.#announceReleased?.(keys);
  }

  addTokens(rules: readonly CounterRule[], tokens: number, nowSeconds: number): MaybePromise<void> {
    const plan = this.#plan(rules);
    if (!this.#availability.up) {
      this.#fallbackTokens(plan, tokens, nowSeconds);
      return;
    }
    return this.#batch.add(ADD_TOKENS, plan.keys, tokens, plan.periodNumbers, undefined, 0).then(noop, (err: unknown) => {
      this.#availability.down(err);
      this.#fallbackTokens(plan, tokens, nowSeconds);
    });
  }

  read(rules: readonly CounterRule[], nowSeconds: number): MaybePromise<CounterReading> {
    const plan = this.#plan(rules);
    // Without Redis, the counters this gateway can see are its local ones (none under allow/deny).
    if (!this.#availability.up) return this.#local.read(this.#localRules(plan, nowSeconds), nowSeconds);
    return this.#batch.add(READ, plan.keys, Number.NaN, plan.periodNumbers, undefined, plan.width).then(
      (answer) => readingOf(plan.periods, answer),
      (err: unknown) => {
        this.#availability.down(err);
        return this.#local.read(this.#localRules(plan, nowSeconds), nowSeconds);
      },
    );
  }

  /** Stops renewing leases and probing. The client is closed by its owner. */
  close(): void {
    clearInterval(this.#renewal);
    this.#availability.close();
  }

  #plan(rules: readonly CounterRule[]): ScriptPlan {
    let plan = this.#plans.get(rules);
    if (plan === undefined) {
      plan = new ScriptPlan(rules);
      this.#plans.set(rules, plan);
    }
    return plan;
  }

  #childHandle(ownKey: string, periodSeconds: number, child: string): RedisCounter {
    const key = childCounterKey(ownKey, child);
    return new RedisCounter(key, this.#names.counterKey(key), undefined, { ownKey, periodSeconds, child });
  }

  /** A rule's counter in Redis, and a per-child rule's own counter with every child's. */
  async #deleteCounters(key: string): Promise<void> {
    await this.#client.del(this.#names.counterKey(key));
    if (!key.endsWith('\u0000')) return;
    for await (const keys of this.#scan(this.#names.childPattern(key))) await this.#client.unlink(...keys);
  }

  async *#scan(pattern: string): AsyncGenerator<string[]> {
    let cursor = '0';
    do {
      const [next, keys] = await within(this.#client.scan(cursor, 'MATCH', pattern, 'COUNT', 1000), this.#timeoutMs);
      if (keys.length > 0) yield keys;
      cursor = next;
    } while (cursor !== '0');
  }

  async #readChildren(ownKey: string, periodSeconds: number): Promise<ChildReading[]> {
    const found: ChildReading[] = [];
    for await (const names of this.#scan(this.#names.childPattern(ownKey))) {
      // SCAN may answer a key twice; a read changes nothing, so a duplicate is only skipped.
      for (let at = 0; at < names.length; at += CHILD_READ_BATCH) {
        const batch = names.slice(at, at + CHILD_READ_BATCH);
        const periods = new Float64Array(batch.length).fill(periodSeconds);
        const answer = await this.#batch.add(READ, batch, Number.NaN, periods, undefined, 2 + ROW_WIDTH * batch.length);
        const { rows } = readingOf(Array.from(periods), answer);
        batch.forEach((name, i) => {
          if (rowMatters(rows[i]!)) found.push({ child: this.#names.childOf(ownKey, name), row: rows[i]! });
        });
      }
    }
    const unique = new Map(found.map((entry) => [entry.child, entry]));
    return [...unique.values()].sort((a, b) => (a.child < b.child ? -1 : a.child > b.child ? 1 : 0));
  }

  /**
   * The plan's rules over the local counters, each child's found (or made) in the fallback store
   * now. A child the fallback store has no room for counts on its rule's overflow counter, shared by
   * every such child while Redis is away.
   */
  #localRules(plan: ScriptPlan, nowSeconds: number): CounterRule[] {
    for (const i of plan.children) {
      const rule = plan.local[i]!;
      const counter = plan.rules[i]!.counter as RedisCounter;
      const { ownKey, periodSeconds, child } = counter.child!;
      const answer = this.#local.childCounter(ownKey, periodSeconds, child, nowSeconds, counter.overflowed ? undefined : counter.local);
      counter.overflowed = 'full' in answer;
      counter.local = 'full' in answer ? this.#local.counter(overflowKey(ownKey)) : answer;
      plan.local[i] = { ...rule, counter: counter.local };
    }
    return plan.local;
  }

  #fallbackAdmit(plan: ScriptPlan, nowSeconds: number): AdmitOutcome {
    if (this.#onError !== 'local') return { status: 'unavailable', fallback: this.#onError, reason: UNREACHABLE };
    const outcome = this.#local.tryAdmit(this.#localRules(plan, nowSeconds), nowSeconds);
    if (outcome.status !== 'admitted' || outcome.lease === undefined) return outcome;
    return { ...outcome, lease: new LocalLease(outcome.lease) };
  }

  #fallbackTokens(plan: ScriptPlan, tokens: number, nowSeconds: number): void {
    if (this.#onError === 'local') this.#local.addTokens(this.#localRules(plan, nowSeconds), tokens, nowSeconds);
  }

  /** Runs an admin change on the shared counters; a failure is a CounterStoreUnavailableError. */
  async #shared(change: () => Promise<unknown>): Promise<void> {
    if (!this.#availability.up) throw new CounterStoreUnavailableError(UNREACHABLE);
    // Operations queued before the change reach Redis before it.
    this.#batch.flush();
    try {
      await within(change(), this.#timeoutMs * 4);
    } catch (err) {
      this.#availability.down(err);
      throw new CounterStoreUnavailableError(UNREACHABLE);
    }
  }

  #renew(): void {
    if (this.#leases.size === 0 || !this.#availability.up) return;
    const { keys, ids } = this.#leases.pairs();
    for (let at = 0; at < keys.length; at += RENEW_BATCH) {
      const batch = keys.slice(at, at + RENEW_BATCH);
      within(this.#client.floodgateRenew(batch.length, batch, this.#leaseMs, ids.slice(at, at + RENEW_BATCH)), this.#timeoutMs).catch((err: unknown) =>
        this.#availability.down(err),
      );
    }
  }

  async #probe(): Promise<void> {
    const client = this.#client;
    if (client.status === 'wait' || client.status === 'end') await within(client.connect(), this.#timeoutMs);
    await within(client.ping(), this.#timeoutMs);
    // The server answers, but on database 0: the counters must not go there.
    const wrong = this.#diagnosis?.wrongDatabase();
    if (wrong !== undefined) throw wrong;
  }
}

const UNREACHABLE = 'the rate-limit counters (Redis) cannot be reached; try again shortly';

const FALLBACK_DESCRIPTIONS: Readonly<Record<RedisOnError, string>> = {
  local: "counting in this process's memory (on_error: local)",
  allow: 'admitting requests without counting them (on_error: allow)',
  deny: 'refusing rate-limited requests with 503 rate_limits_unavailable (on_error: deny)',
};

/** The local counter the children of a per-child rule share when the fallback store has no room for one. */
function overflowKey(ownKey: string): string {
  // A control character is never part of a path segment: no child has this key.
  return childCounterKey(ownKey, '\u0001');
}

/** An admission's or read's answer as rows: the server's time, a flag, then six numbers per rule (see BATCH). */
function readingOf(periods: readonly number[], { reply, at }: BatchAnswer): CounterReading {
  const number = (index: number): number => reply.readDoubleLE(index * 8);
  const nowSeconds = number(at);
  const rows: CounterRow[] = new Array<CounterRow>(periods.length);
  for (let i = 0, row = at + 2; i < periods.length; i++, row += ROW_WIDTH) {
    const period = periods[i]!;
    rows[i] =
      period === 0
        ? concurrencyRow(number(row + 5))
        : windowedRow(number(row), number(row + 1), number(row + 2), number(row + 3), number(row + 4), period, nowSeconds);
  }
  return { nowSeconds, rows };
}

function noop(): void {}
