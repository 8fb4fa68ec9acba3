/**
 * Counters in Redis, shared by every gateway that uses the same Redis and prefix: a cap of 50 admits 50 in all, however many replicas serve the traffic.
 *
 * One round trip per admission (one script run over every matching rule, and the target's learned
 * capacity) and one per completed request for its tokens; releases, the lease renewal and the
 * writes of learned capacity are off the request path. The operations of one event-loop turn travel
 * together in one script call (batch.ts). An admission no rule governs takes no round trip: its
 * learned capacity is judged from the saturations this gateway learned or heard (saturations.ts).
 *
 * When Redis fails or does not answer within `timeoutMs`, the store degrades at once and stays
 * degraded until a probe gets an answer (see availability.ts); meanwhile `onError` decides:
 * `local` counts in this process's memory, `allow` admits uncounted, `deny` refuses. No call ever
 * waits longer than `timeoutMs`, and none rejects except the admin resets, which cannot pretend.
 */
import { MemoryCounterStore } from '../memory.ts';
import {
  CAUSES,
  childCounterKey,
  combineUpdates,
  concurrencyRow,
  CounterStoreUnavailableError,
  learnedKey,
  LINGER_MS,
  saturationOf,
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
  type LearnedCause,
  type LearnedCheck,
  type LearnedDimension,
  type LearnedHandle,
  type LearnedReading,
  type LearnedRecord,
  type LearnedUpdate,
  type LearnedVerdict,
  type MaybePromise,
  type SlotLease,
  type SpendClaim,
} from '../../ratelimit/index.ts';
import { RedisAvailability, type CountersLogger } from './availability.ts';
import { ADD_TOKENS, ADMIT, LEARN, PUBLISH, READ, READ_BUDGETS, READ_LEARNED, RELEASE, SETTLE_BUDGETS, ScriptBatch, type BatchAnswer } from './batch.ts';
import type { SharedBudgetLedger } from '../../budgets/tracker.ts';
import { within, type CountersClient } from './client.ts';
import type { RedisNames } from './keys.ts';
import type { RedisDiagnosis } from './diagnosis.ts';
import { LeaseBook, RedisLease } from './leases.ts';
import type { HeardSaturation } from './saturations.ts';

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
  /** Token reservations are on (rate_limits.reservations): reads report what each windowed rule holds reserved. */
  reservations?: boolean;
}

/**
 * A rule's counter: its Redis key, and its counter in the local fallback store. A child's counter
 * of a per-child rule finds its local counter when the fallback first needs it (the fallback store
 * drops idle children, so it may find another one later).
 */
class RedisCounter implements CounterHandle {
  readonly key: string;
  readonly redisKey: string;
  /** The set of token reservations held on it. */
  readonly reservationKey: string;
  local: CounterHandle | undefined;
  /** The local counter is its rule's overflow counter (see #localRules). */
  overflowed = false;
  readonly child: { readonly ownKey: string; readonly periodSeconds: number; readonly child: string } | undefined;

  constructor(key: string, redisKey: string, reservationKey: string, local: CounterHandle | undefined, child?: RedisCounter['child']) {
    this.key = key;
    this.redisKey = redisKey;
    this.reservationKey = reservationKey;
    this.local = local;
    this.child = child;
  }
}

/** A target's learned capacity: its record's key in Redis. */
class RedisLearned implements LearnedHandle {
  readonly key: string;
  readonly provider: string;
  readonly model: string;
  readonly redisKey: Buffer;
  /** The same key as text: what saturation messages name. */
  readonly redisKeyText: string;

  constructor(provider: string, model: string, redisKey: string) {
    this.key = learnedKey(provider, model);
    this.provider = provider;
    this.model = model;
    this.redisKey = Buffer.from(redisKey);
    this.redisKeyText = redisKey;
  }
}

/** Most targets whose saturation a gateway keeps from what it heard (their number is the saturated targets'). */
const MAX_HEARD = 10_000;

/**
 * What this gateway learned of one target and has yet to write. The first answer of a burst is
 * written at once (with the batch of its turn, so every admission after it sees it), then at most
 * one write per LEARN_INTERVAL_MS carries what the answers said meanwhile — except an answer that
 * saturates a target this gateway has not yet written as saturated, which goes out at once: every
 * gateway must route around it from its next request on.
 */
interface PendingLearned {
  readonly handle: RedisLearned;
  /** Times on this process's clock (Date.now). */
  update: LearnedUpdate | undefined;
  /** Until when the last write said the target is saturated (Date.now clock; 0: not). */
  writtenUntil: number;
  /** Written less than LEARN_INTERVAL_MS ago: the timer writes what comes meanwhile. */
  cooling: NodeJS.Timeout | undefined;
}

/** At most one write a second per target carries what its answers say while it has capacity. */
const LEARN_INTERVAL_MS = 1000;
/** Learned records read per script call when listing them. */
const LEARNED_READ_BATCH = 500;
/** Numbers per learned record in a read's answer (see scripts.ts). */
const LEARNED_WIDTH = 12;

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
  /**
   * An admission's parameters after its lease length: the learned flag (0), the tokens reserved,
   * the reservation sets and the budgets (none), the cost (0), then per rule: period, request cap,
   * token cap.
   */
  readonly capNumbers: Float64Array;
  /** The same with the learned flag 1: the admission's last key is its target's learned capacity. */
  readonly learnedCapNumbers: Float64Array;
  readonly slotKeys: string[] = [];
  readonly hasSlots: boolean;
  /** How many numbers an admission or read of these rules answers. */
  readonly width: number;
  /** The same rules over the fallback store's counters (children's counters found when needed). */
  readonly local: CounterRule[];
  /** Indexes of children's counters among the rules. */
  readonly children: number[] = [];
  readonly rules: readonly CounterRule[];
  /** The reservation sets of the rules with a token cap, in order (an admission reserves there). */
  readonly reservationNames: string[];
  readonly reservationKeys: Buffer[];
  /** The rule count, then the periods, as a read's parameters. */
  readonly readNumbers: Float64Array;
  /** The rules' keys, then every windowed rule's reservation set: a read that reports reservations. */
  readonly readKeysWithReservations: Buffer[];

  constructor(rules: readonly CounterRule[]) {
    this.rules = rules;
    this.keyNames = rules.map((rule) => (rule.counter as RedisCounter).redisKey);
    this.keys = this.keyNames.map((name) => Buffer.from(name));
    this.periods = rules.map((rule) => rule.periodSeconds);
    this.periodNumbers = Float64Array.from(this.periods);
    this.readNumbers = Float64Array.from([rules.length, ...this.periods]);
    const caps = rules.flatMap((rule) => [rule.periodSeconds, rule.maxRequests, rule.maxTokens]);
    this.capNumbers = Float64Array.from([0, 0, 0, 0, 0, ...caps]);
    this.learnedCapNumbers = Float64Array.from([1, 0, 0, 0, 0, ...caps]);
    this.reservationNames = rules.filter((rule) => rule.periodSeconds > 0 && rule.maxTokens > 0).map((rule) => (rule.counter as RedisCounter).reservationKey);
    this.reservationKeys = this.reservationNames.map((name) => Buffer.from(name));
    this.readKeysWithReservations = [...this.keys, ...rules.filter((rule) => rule.periodSeconds > 0).map((rule) => Buffer.from((rule.counter as RedisCounter).reservationKey))];
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

  /** The rules' keys and then the learned capacity's (a plan's target is always the same one). */
  #withLearned: { handle: RedisLearned; keys: Buffer[] } | undefined;

  keysWith(handle: RedisLearned): Buffer[] {
    if (this.#withLearned?.handle !== handle) this.#withLearned = { handle, keys: [...this.keys, handle.redisKey] };
    return this.#withLearned.keys;
  }

  /**
   * An admission's keys reserving tokens or dollars: the rules', their reservation sets (reserving
   * tokens), the budgets' keys, then the learned capacity's when there is one.
   */
  reservingKeys(handle: RedisLearned | undefined, tokens: boolean, budgetKeys: readonly string[]): Array<Buffer | string> {
    const keys: Array<Buffer | string> = tokens ? [...this.keys, ...this.reservationKeys] : [...this.keys];
    for (const key of budgetKeys) keys.push(key);
    if (handle !== undefined) keys.push(handle.redisKey);
    return keys;
  }

  /** An admission's numbers reserving `reserve` tokens (0: none) and `cost` on budgets (cap and spent per budget, in millionths). */
  reservingNumbers(learned: boolean, reserve: number, cost: number, budgets: readonly number[]): Float64Array {
    const base = learned ? this.learnedCapNumbers : this.capNumbers;
    const numbers = new Float64Array(base.length + budgets.length);
    numbers.set(base);
    numbers.set(budgets, base.length);
    numbers[1] = reserve;
    numbers[2] = reserve > 0 ? this.reservationKeys.length : 0;
    numbers[3] = budgets.length / 2;
    numbers[4] = cost;
    return numbers;
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

/** A claim's budgets in an admission (see #budgetsOf). */
interface AdmittedBudgets {
  /** Per budget: its reservation set, then its settled spend. */
  readonly keys: readonly string[];
  readonly sets: readonly string[];
  /** Per budget: cap, then spent, in millionths of a dollar. */
  readonly numbers: readonly number[];
  /** In millionths of a dollar. */
  readonly cost: number;
  /** When each settled spend expires (seconds): its period's end and a little more. */
  readonly ends: Float64Array;
}

/** A budget's settled spend outlives its period a little: a replica whose clock runs behind still reads it. */
const SETTLED_LINGER_SECONDS = 60;

/** Dollars as whole millionths, as the budget scripts count them. */
function micros(usd: number): number {
  return Math.max(0, Math.round(usd * 1_000_000));
}
const RENEW_BATCH = 500;
/** Children's counters read per script call when listing them (Lua unpacks at most a few thousand values). */
const CHILD_READ_BATCH = 500;

export class RedisCounterStore implements CounterStore, SharedBudgetLedger {
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
  readonly #reservations: boolean;
  /** Learned capacity waiting to be written, by learned key. */
  readonly #learning = new Map<string, PendingLearned>();
  /**
   * Targets saturated by learned capacity as this gateway learned or heard it (see saturations.ts),
   * by Redis key: until when on this process's clock (Date.now), and why. Admissions no rule
   * governs are judged from it, without a round trip; the others in their script.
   */
  readonly #saturated = new Map<string, { untilMs: number; cause: LearnedCause }>();

  constructor(options: RedisCounterStoreOptions) {
    this.#client = options.client;
    this.#names = options.names;
    this.#leaseMs = options.leaseSeconds * 1000;
    this.#timeoutMs = options.timeoutMs;
    this.#onError = options.onError;
    this.#logger = options.logger;
    this.#local = new MemoryCounterStore({ maxChildren: options.maxChildren });
    this.#announceReleased = options.announceReleased;
    this.#reservations = options.reservations === true;
    const client = options.client;
    this.#batch = new ScriptBatch((keys, numbers, leases) => client.floodgateBatchBuffer(keys.length, keys, numbers, leases), options.timeoutMs);
    this.#availability = new RedisAvailability({
      probe: () => this.#probe(),
      probeIntervalMs: options.probeIntervalMs ?? 500,
      logger: options.logger,
      fallback: FALLBACK_DESCRIPTIONS[options.onError],
      // Local counts (and what was learned) stood in for the shared ones during the outage only.
      onRecover: () => {
        this.#local.resetAll();
        this.#local.forgetLearned();
        // What was heard before the outage may be over without this gateway hearing it.
        this.#saturated.clear();
      },
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
      counter = new RedisCounter(key, this.#names.counterKey(key), this.#names.reservationKey(key), this.#local.counter(key));
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
      for (const pattern of [this.#names.counterPattern, this.#names.reservationPattern]) {
        for await (const keys of this.#scan(pattern)) await within(this.#client.unlink(...keys), this.#timeoutMs);
      }
    });
  }

  tryAdmit(rules: readonly CounterRule[], nowSeconds: number, learned?: LearnedCheck, reserve = 0, spend?: SpendClaim): MaybePromise<AdmitOutcome> {
    const plan = this.#plan(rules);
    if (!this.#availability.up) return this.#fallbackAdmit(plan, nowSeconds, learned, reserve, spend);
    const handle = learned?.handle as RedisLearned | undefined;
    // Nothing to count and no budget to reserve: what this gateway heard decides, at once.
    if (rules.length === 0 && handle !== undefined && spend === undefined) return this.#heardAdmission(handle, nowSeconds);
    const reserving = reserve > 0 && plan.reservationKeys.length > 0;
    // The budgets travel in the admission's own operation: checked and reserved in the same script step as the rules.
    const budgets = spend === undefined ? undefined : this.#budgetsOf(spend);
    const base = reserving || plan.hasSlots || budgets !== undefined ? this.#leases.nextId() : '';
    // A reservation's lease id carries its tokens: the script sums them from the members alone.
    const leaseId = reserving ? `${base}|${reserve}` : base;
    let keys: ReadonlyArray<Buffer | string>;
    let numbers: Float64Array;
    if (budgets !== undefined || reserving) {
      keys = plan.reservingKeys(handle, reserving, budgets?.keys ?? []);
      numbers = plan.reservingNumbers(handle !== undefined, reserving ? reserve : 0, budgets?.cost ?? 0, budgets?.numbers ?? []);
    } else {
      keys = handle === undefined ? plan.keys : plan.keysWith(handle);
      numbers = handle === undefined ? plan.capNumbers : plan.learnedCapNumbers;
    }
    return this.#batch.add(ADMIT, keys, this.#leaseMs, numbers, leaseId, plan.width + (handle === undefined ? 0 : ROW_WIDTH)).then(
      (answer) => {
        const flag = answer.reply.readDoubleLE((answer.at + 1) * 8);
        const admitted = flag === 1;
        const held = reserving ? [...plan.slotKeys, ...plan.reservationNames] : plan.slotKeys;
        const lease = admitted && held.length > 0 ? this.#leases.hold(leaseId, held) : undefined;
        const verdict = handle === undefined ? undefined : verdictAt(answer, plan.width);
        if (budgets !== undefined && spend !== undefined) {
          if (flag < 0) spend.sharedAnswer({ ok: false, index: -flag - 1 });
          else if (admitted) spend.sharedAnswer({ ok: true, settle: this.#budgetSettlement(budgets, base) });
        }
        return { status: admitted ? 'admitted' : 'refused', ...readingOf(plan.periods, answer), lease, learned: verdict, spendRefused: flag < 0 };
      },
      (err: unknown) => {
        this.#availability.down(err);
        return this.#fallbackAdmit(plan, nowSeconds, learned, reserve, spend);
      },
    );
  }

  /** A claim's budgets as an admission sends them: their keys, the cost, and each one's cap and spend, in millionths of a dollar. */
  #budgetsOf(spend: SpendClaim): AdmittedBudgets {
    const keys: string[] = [];
    const sets: string[] = [];
    const numbers: number[] = [];
    for (const budget of spend.budgets) {
      const set = this.#names.budgetReservationKey(budget.id);
      sets.push(set);
      keys.push(set, this.#names.budgetSettledKey(budget.id, budget.startMs));
      numbers.push(micros(budget.maxUsd), micros(budget.spentUsd));
    }
    const ends = Float64Array.from(spend.budgets.map((budget) => Math.ceil(budget.endMs / 1000) + SETTLED_LINGER_SECONDS));
    return { keys, sets, numbers, cost: micros(spend.costUsd), ends };
  }

  /**
   * How an admitted claim ends: its member (`<lease id>|<cost>`, as the script wrote it) leaves every
   * budget's reservation set and what the request cost is added to each one's settled spend, in
   * one operation. Renewed with the other leases meanwhile.
   */
  #budgetSettlement(budgets: AdmittedBudgets, base: string): (costUsd: number) => void {
    const member = `${base}|${budgets.cost}`;
    // A claim of $0 reserved nothing: only what the request cost may still have to be settled.
    const lease = budgets.cost > 0 ? this.#leases.hold(member, budgets.sets) : undefined;
    let settled = false;
    return (actualUsd: number): void => {
      if (settled) return;
      settled = true;
      if (lease !== undefined) this.#leases.giveBack(lease, budgets.sets);
      const cost = micros(actualUsd);
      // While Redis is away the reservation expires with its lease.
      if ((lease === undefined && cost === 0) || !this.#availability.up) return;
      this.#batch.add(SETTLE_BUDGETS, budgets.keys, cost, budgets.ends, member, 0).then(noop, (err: unknown) => this.#availability.down(err));
    };
  }

  /** What every gateway holds reserved on each budget, in dollars (`ids`: budget identities); undefined when Redis cannot answer. */
  async reservedOnBudgets(ids: readonly string[]): Promise<number[] | undefined> {
    if (!this.#availability.up) return undefined;
    if (ids.length === 0) return [];
    try {
      const answer = await this.#batch.add(READ_BUDGETS, ids.map((id) => this.#names.budgetReservationKey(id)), Number.NaN, undefined, undefined, ids.length);
      return ids.map((_, i) => answer.reply.readDoubleLE((answer.at + i) * 8) / 1_000_000);
    } catch (err) {
      this.#availability.down(err);
      return undefined;
    }
  }

  settle(rules: readonly CounterRule[], lease: SlotLease, reserved: number, tokens: number, nowSeconds: number): MaybePromise<void> {
    if (lease instanceof LocalLease) {
      this.#local.settle(this.#plan(rules).local, lease.inner, reserved, tokens, nowSeconds);
      return;
    }
    const plan = this.#plan(rules);
    const keys = this.#leases.giveBack(lease as RedisLease, plan.reservationNames);
    if (!this.#availability.up) {
      // The reservation cannot be removed now: it expires with its lease.
      if (tokens > 0) this.#fallbackTokens(plan, tokens, nowSeconds);
      return;
    }
    // Both in this turn's batch, which the server runs as one script: the tokens land as the
    // reservation goes, never one without the other.
    const charged = tokens > 0 ? this.addTokens(rules, tokens, nowSeconds) : undefined;
    const released = keys.length === 0 ? undefined : this.#batch.add(RELEASE, keys, Number.NaN, undefined, (lease as RedisLease).id, 0).then(noop, (err: unknown) => this.#availability.down(err));
    if (charged instanceof Promise) return released === undefined ? charged : Promise.all([charged, released]).then(noop);
    return released;
  }

  learnedCounter(provider: string, model: string): LearnedHandle {
    return new RedisLearned(provider, model, this.#names.learnedKey(provider, model));
  }

  learn(handle: LearnedHandle, update: LearnedUpdate): void {
    if (!this.#availability.up) {
      this.#local.learn(handle, update);
      return;
    }
    // Onto this process's clock: the write, maybe later, sends times as delays from its moment.
    const shifted = shiftUpdate(update, Date.now() - update.atMs);
    const saturation = saturationOf(shifted);
    if (saturation !== undefined) this.#heard((handle as RedisLearned).redisKeyText, saturation.untilMs, saturation.cause);
    let pending = this.#learning.get(handle.key);
    if (pending === undefined) {
      pending = { handle: handle as RedisLearned, update: undefined, writtenUntil: 0, cooling: undefined };
      this.#learning.set(handle.key, pending);
    }
    pending.update = pending.update === undefined ? shifted : combineUpdates(pending.update, shifted);
    const newlySaturated = pending.writtenUntil <= Date.now() && saturation !== undefined;
    if (pending.cooling === undefined || newlySaturated) this.#writeLearned(pending);
  }

  readLearned(handles: readonly LearnedHandle[] | undefined, nowMs: number): MaybePromise<LearnedReading> {
    if (!this.#availability.up) return this.#local.readLearned(handles, nowMs);
    return this.#readLearned(handles).catch((err: unknown) => {
      this.#availability.down(err);
      return this.#local.readLearned(handles, nowMs);
    });
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

  /**
   * Publishes on `channel` with the counter operations of this turn, in their script call: no
   * command and reply of its own. `message` is made when the batch leaves, so what the rest of the
   * turn adds to it travels too. Rejects when Redis is down or fails.
   */
  publish(channel: string, message: () => string): Promise<void> {
    if (!this.#availability.up) return Promise.reject(new CounterStoreUnavailableError(UNREACHABLE));
    return this.#batch.add(PUBLISH, [], Number.NaN, undefined, [channel, message], 0).then(noop);
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
    const keys = this.#reservations ? plan.readKeysWithReservations : plan.keys;
    return this.#batch.add(READ, keys, Number.NaN, plan.readNumbers, undefined, plan.width).then(
      (answer) => readingOf(plan.periods, answer),
      (err: unknown) => {
        this.#availability.down(err);
        return this.#local.read(this.#localRules(plan, nowSeconds), nowSeconds);
      },
    );
  }

  /**
   * A target's saturation another gateway (or this one) wrote, as the script published it: kept
   * until it ends; a message saying it is over forgets it.
   */
  heardSaturation({ redisKey, forMs, cause }: HeardSaturation): void {
    if (forMs === 0 || cause === undefined) this.#saturated.delete(redisKey);
    else this.#heard(redisKey, Date.now() + forMs, cause, true);
  }

  #heard(redisKey: string, untilMs: number, cause: LearnedCause, replace = false): void {
    const known = this.#saturated.get(redisKey);
    if (known !== undefined && !replace && known.untilMs >= untilMs) return;
    if (known === undefined && this.#saturated.size >= MAX_HEARD) this.#saturated.delete(this.#saturated.keys().next().value!);
    this.#saturated.set(redisKey, { untilMs, cause });
  }

  /** An admission with no rule, judged from what this gateway heard. */
  #heardAdmission(handle: RedisLearned, nowSeconds: number): AdmitOutcome {
    const nowMs = Date.now();
    const known = this.#saturated.get(handle.redisKeyText);
    if (known !== undefined && known.untilMs <= nowMs) this.#saturated.delete(handle.redisKeyText);
    const saturated = known !== undefined && known.untilMs > nowMs;
    const verdict = saturated ? { untilMs: known.untilMs, cause: known.cause, nowMs } : undefined;
    return { status: saturated ? 'refused' : 'admitted', nowSeconds, rows: [], lease: undefined, learned: verdict };
  }

  /** Stops renewing leases, probing and writing what was learned. The client is closed by its owner. */
  close(): void {
    clearInterval(this.#renewal);
    this.#availability.close();
    for (const pending of this.#learning.values()) clearTimeout(pending.cooling);
    this.#learning.clear();
  }

  /** Writes what is pending for a target, then holds its next write back for LEARN_INTERVAL_MS. */
  #writeLearned(pending: PendingLearned): void {
    const { handle, update } = pending;
    if (update !== undefined && this.#learning.get(handle.key) === pending) {
      pending.update = undefined;
      pending.writtenUntil = saturationOf(update)?.untilMs ?? 0;
      if (!this.#availability.up) this.#local.learn(handle, update);
      else {
        this.#batch.add(LEARN, [handle.redisKey, this.#names.learnedIndex], Number.NaN, learnNumbers(update, Date.now()), undefined, 0).catch((err: unknown) => {
          this.#availability.down(err);
          this.#local.learn(handle, update);
        });
      }
    }
    if (pending.cooling !== undefined) return;
    pending.cooling = setTimeout(() => {
      pending.cooling = undefined;
      if (pending.update !== undefined) this.#writeLearned(pending);
      else this.#learning.delete(handle.key);
    }, LEARN_INTERVAL_MS);
    pending.cooling.unref();
  }

  /** The learned records of these targets, or of every target the index lists, in batches. */
  async #readLearned(handles: readonly LearnedHandle[] | undefined): Promise<LearnedReading> {
    let targets: Array<{ provider: string; model: string; key: Buffer | string }>;
    if (handles !== undefined) {
      targets = handles.map((handle) => ({ provider: handle.provider, model: handle.model, key: (handle as RedisLearned).redisKey }));
    } else {
      const names = await within(this.#client.zrange(this.#names.learnedIndex, '0', '-1'), this.#timeoutMs);
      targets = [];
      for (const name of new Set(names)) {
        const target = this.#names.learnedTarget(name);
        if (target !== undefined) targets.push({ ...target, key: name });
      }
    }
    const records: Array<LearnedReading['records'][number]> = [];
    let nowMs = Number.NaN;
    let at = 0;
    do {
      const batch = targets.slice(at, at + LEARNED_READ_BATCH);
      const { reply, at: from } = await this.#batch.add(READ_LEARNED, batch.map((target) => target.key), Number.NaN, undefined, undefined, 1 + LEARNED_WIDTH * batch.length);
      nowMs = reply.readDoubleLE(from * 8);
      batch.forEach((target, i) => {
        const record = learnedRecordAt(reply, from + 1 + LEARNED_WIDTH * i);
        if (record !== undefined) records.push({ provider: target.provider, model: target.model, record });
      });
      at += LEARNED_READ_BATCH;
    } while (at < targets.length);
    return { nowMs, records };
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
    return new RedisCounter(key, this.#names.counterKey(key), this.#names.reservationKey(key), undefined, { ownKey, periodSeconds, child });
  }

  /** A rule's counter in Redis, and a per-child rule's own counter with every child's. */
  async #deleteCounters(key: string): Promise<void> {
    // Its reservations go with it, as its slots do: the requests holding them settle to nothing there.
    await this.#client.del(this.#names.counterKey(key), this.#names.reservationKey(key));
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
        const answer = await this.#batch.add(READ, batch, batch.length, periods, undefined, 2 + ROW_WIDTH * batch.length);
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

  #fallbackAdmit(plan: ScriptPlan, nowSeconds: number, learned: LearnedCheck | undefined, reserve: number, spend: SpendClaim | undefined): AdmitOutcome {
    if (this.#onError !== 'local') return { status: 'unavailable', fallback: this.#onError, reason: UNREACHABLE };
    // The budgets too are decided on this gateway's counts there.
    const outcome = this.#local.tryAdmit(this.#localRules(plan, nowSeconds), nowSeconds, learned, reserve, spend);
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
        : windowedRow(number(row), number(row + 1), number(row + 2), number(row + 3), number(row + 4), period, nowSeconds, number(row + 5));
  }
  return { nowSeconds, rows };
}

/** The verdict an admission with a learned key answers after its rules' rows; undefined when the target is not saturated. */
function verdictAt({ reply, at }: BatchAnswer, width: number): LearnedVerdict | undefined {
  const from = (at + width) * 8;
  const untilMs = reply.readDoubleLE(from);
  const cause = CAUSES[reply.readDoubleLE(from + 8)];
  if (untilMs <= 0 || cause === undefined) return undefined;
  return { untilMs, cause, nowMs: reply.readDoubleLE(from + 16) };
}

/** A learned record of a read's answer (the twelve numbers from `at`); undefined for a missing one. */
function learnedRecordAt(reply: Buffer, at: number): LearnedRecord | undefined {
  const n = (i: number): number => reply.readDoubleLE((at + i) * 8);
  const updatedAtMs = n(10);
  if (updatedAtMs < 0) return undefined;
  const optional = (value: number): number | undefined => (value < 0 ? undefined : value);
  const dimension = (limit: number, remaining: number, reset: number): LearnedDimension | undefined =>
    remaining < 0 ? undefined : { limit: optional(limit), remaining, resetAtMs: optional(reset) };
  return {
    saturatedUntilMs: n(0),
    cause: CAUSES[n(1)],
    requests: dimension(n(2), n(3), n(4)),
    tokens: dimension(n(5), n(6), n(7)),
    cooldownUntilMs: optional(n(8)),
    throttledAtMs: optional(n(9)),
    updatedAtMs,
    expiresAtMs: n(11),
  };
}

/** An update with its times moved by `shiftMs` (onto another clock). */
function shiftUpdate(update: LearnedUpdate, shiftMs: number): LearnedUpdate {
  if (shiftMs === 0) return update;
  const moved = (at: number | undefined): number | undefined => (at === undefined ? undefined : at + shiftMs);
  const dimension = (d: LearnedDimension | undefined): LearnedDimension | undefined => d && { ...d, resetAtMs: moved(d.resetAtMs) };
  return { ...update, requests: dimension(update.requests), tokens: dimension(update.tokens), cooldownUntilMs: moved(update.cooldownUntilMs), atMs: update.atMs + shiftMs };
}

/** A learn operation's numbers (see scripts.ts): -1 for what was not said, times as delays from `nowMs`. */
function learnNumbers(update: LearnedUpdate, nowMs: number): Float64Array {
  const delay = (at: number | undefined): number => (at === undefined ? -1 : Math.max(0, at - nowMs));
  const dimension = (d: LearnedDimension | undefined): number[] => (d === undefined ? [-1, -1, -1] : [d.limit ?? -1, d.remaining, delay(d.resetAtMs)]);
  return Float64Array.from([update.reserve, LINGER_MS, ...dimension(update.requests), ...dimension(update.tokens), delay(update.cooldownUntilMs), update.throttled ? 1 : 0]);
}

function noop(): void {}
