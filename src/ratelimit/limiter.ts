/**
 * The rate-limit engine's facade: rule management, admission, token charging and
 * status. Pure: no I/O, no timers, no logging. Time comes from a Clock, counters
 * live in a CounterStore (src/counters), which may answer synchronously or not: every
 * method that reads or changes counters answers a value when the store did, a promise
 * when it did not, so the in-memory hot path never awaits.
 */
import type { Capacity } from '../shared/capacity.ts';
import type { RateLimitHeaderData } from './headers.ts';
import { successHeaders } from './headers.ts';
import { updateFrom, verdictOf, type LearnedCause, type LearnedHandle, type LearnedReading, type LearnedSettings, type LearnedUpdate, type LearnedVerdict } from './learned.ts';
import { directChild, normalizeUserPath } from '../user-path/user-path.ts';
import { buildRule } from './normalize.ts';
import { RuleIndex } from './rule-index.ts';
import type { BreachedLimit } from './rules.ts';
import { canonicalKey, compareRules, CompiledRule, counterKeyOf, ruleKeyString } from './rules.ts';
import type { RuleStatus, UserPathUsage } from './status.ts';
import { ruleStatus, userPathUsage } from './status.ts';
import type { AdmitOutcome, ChildReading, ChildrenFull, CounterHandle, CounterReading, CounterRow, CounterStore, MaybePromise, SlotLease, SpendClaim } from './store.ts';
import { concurrencyRow, CounterStoreUnavailableError, windowedRow } from './store.ts';
import type { Clock, Headroom, Priority, RuleDefinition, RuleKey } from './types.ts';
import { retryAfterSeconds, windowStart } from './window.ts';

/** What a request is: any of its user path, the provider instance called and the model executed. */
export interface AdmissionTarget {
  /** A normalised user path (see normalizeUserPath). Given → user-path rules apply. */
  readonly userPath?: string | undefined;
  /** Provider instance name. Given → provider rules apply. */
  readonly provider?: string | undefined;
  /** Model id as the provider knows it (without the provider prefix). With provider → model rules apply. */
  readonly model?: string | undefined;
}

export interface AdmitOptions {
  /**
   * Default true. False for batch submissions: the request is counted in request
   * windows but takes (and checks) no concurrency slot.
   */
  readonly holdSlot?: boolean;
  /** Default `high`: the whole of every cap. A lower priority meets its share of each (see Headroom). */
  readonly priority?: Priority;
  /**
   * Tokens to reserve on every matching rule with a token cap (reservations on): the rule refuses
   * when its tokens used, those reserved and these exceed its cap. The ticket holds them until
   * `settle()`. Absent or 0: tokens are counted after the response only.
   */
  readonly reserveTokens?: number;
}

export interface RateLimiterOptions {
  /** Default: the system clock. */
  readonly clock?: Clock;
  /** Where counters live (src/counters: in this process's memory, or Redis). */
  readonly store: CounterStore;
  /** Enforce token caps at admission. False when usage tracking is off (token rules are then inert). Default true. */
  readonly enforceTokens?: boolean;
  /** The part of each cap kept free of lower priorities; none when absent. */
  readonly headroom?: Headroom;
  /**
   * Provider instance name → its `learned` settings, for every provider whose capacity is learned
   * from its answers (see learned.ts); a provider left out learns nothing and is never saturated by it.
   */
  readonly learned?: ReadonlyMap<string, LearnedSettings>;
  /** Token reservations are on (rate_limits.reservations): status records show `tokens_reserved`. */
  readonly reservations?: boolean;
}

/** An admitted request. Call release() once the response is fully sent or the client is gone. */
export interface AdmissionTicket {
  readonly ok: true;
  /** Values for the x-ratelimit-* success headers; undefined when no windowed rule matched. */
  readonly headers: RateLimitHeaderData | undefined;
  /** True when release() has slots to give back (callers can skip arranging a release otherwise). */
  readonly holdsSlots: boolean;
  /** Tokens this admission reserved on each matching token rule (0: none). */
  readonly reservedTokens: number;
  /** Give back the concurrency slots. Idempotent; safe after the rule was reset or deleted. */
  release(): void;
  /**
   * Give back only the provider and model slots, keeping the user-path ones: a failover
   * attempt ended but the request goes on. Idempotent; release() later frees the rest.
   * The provider and model token reservations go too (the attempt used nothing).
   */
  releaseTargetSlots(): void;
  /**
   * The request ended having used `tokens`: the reservation still held is replaced by them, on
   * the same rules. Once: later calls do nothing. A no-op for a ticket that reserved nothing.
   */
  settle(tokens: number): MaybePromise<void>;
}

/** A refused request: nothing was counted. */
export interface AdmissionRefusal {
  readonly ok: false;
  /** The breached limit with the longest Retry-After. */
  readonly breach: BreachedLimit;
  /** Seconds until a retry would be admitted with no other traffic (>= 1). */
  readonly retryAfterSeconds: number;
  /**
   * The moment, in seconds of the counters' clock, when capacity can have freed (the breached
   * window's estimate drops below its cap; for concurrency, a second on, though a release may come
   * sooner; for learned capacity, the reset or cooldown end, to the millisecond); Infinity when this
   * request's priority is never admitted by the rule.
   */
  readonly retryAtSeconds: number;
  /** The breached counter's key: slot releases name it. */
  readonly counterKey: string;
  /** The exact client message (same as breach.message). */
  readonly message: string;
  /** For a request/token breach: that dimension's triple with remaining 0 and reset = Retry-After. */
  readonly headers: RateLimitHeaderData | undefined;
  /**
   * Whether any breached rule is a user-path rule. Routing needs it: a consumer over its limit
   * gets its 429 at once, while a saturated provider or model is only a target to skip.
   */
  readonly userPathBreached: boolean;
}

export type AdmissionResult = AdmissionTicket | AdmissionRefusal;

/**
 * The rules admitted a request but a budget of its SpendClaim had no room: refused, nothing
 * counted, nothing reserved. The claim knows which budget (the store told it).
 */
export interface SpendRefusal {
  readonly ok: false;
  readonly spendRefused: true;
}

/** What admit() would decide now, read without counting anything (see RateLimiter.explain). */
export interface AdmissionPreview {
  /** Every rule admit() would check, with its live counters, in matching order (user path root first). */
  readonly rules: RuleStatus[];
  /** The refusal admit() would answer; undefined when it would admit. */
  readonly refusal: AdmissionRefusal | undefined;
  /** The target's learned capacity saturates it (whatever refusal wins): until when and why. */
  readonly learned: LearnedVerdict | undefined;
}

/** How `RateLimiter.status` lists the rules. */
export interface StatusOptions {
  /** Each per-child rule's active children after it, one record each (`expand=children`). */
  readonly expandChildren?: boolean;
  /** With `expandChildren`: at most this many children per rule, the busiest first. Default: all, by child. */
  readonly childrenLimit?: number | undefined;
}

/** Returned whenever no rule applies: nothing to release, no headers, no allocation. */
const NO_OP_TICKET: AdmissionTicket = Object.freeze({ ok: true as const, headers: undefined, holdsSlots: false, reservedTokens: 0, release(): void {}, releaseTargetSlots(): void {}, settle(): void {} });

const SPEND_REFUSED: SpendRefusal = Object.freeze({ ok: false as const, spendRefused: true as const });

/** Most distinct lookups cached before the cache starts over. */
const MATCH_CACHE_LIMIT = 10_000;
/**
 * Stands for an absent path/provider/model in the match cache. Control characters are
 * refused in every valid path and subject, so no real value collides with it.
 */
const NONE = '\u0000';

/** Rules to check and count for one kind of admission, and its concurrency rules among them. */
class MatchPlan {
  readonly rules: readonly CompiledRule[];
  readonly slots: readonly CompiledRule[];
  /** The slots split for a failover attempt's end: provider and model ones go back first. */
  readonly userSlots: readonly CompiledRule[];
  readonly targetSlots: readonly CompiledRule[];
  /**
   * A per-child rule of this plan had no room for the path's child: the rule is left out, and an
   * admission is refused with this. A set with one is never cached.
   */
  readonly blocked: FoundBreach | undefined;
  /** A rule whose cap this plan's priority has no share of: it refuses every admission. */
  readonly closed: CompiledRule | undefined;
  /** The target's learned capacity, checked with the rules; undefined when none is learned for it. */
  readonly learned: LearnedHandle | undefined;
  /** The rules a reservation is held on (those with a token cap), and split like the slots. */
  readonly reserving: readonly CompiledRule[];
  readonly userReserving: readonly CompiledRule[];
  readonly targetReserving: readonly CompiledRule[];

  constructor(rules: readonly CompiledRule[], blocked: FoundBreach | undefined, learned: LearnedHandle | undefined) {
    this.rules = rules;
    this.blocked = blocked;
    this.learned = learned;
    this.closed = rules.find((rule) => rule.closed);
    this.slots = rules.filter((rule) => rule.concurrent);
    this.userSlots = this.slots.filter((rule) => rule.scope === 'user_path');
    this.targetSlots = this.slots.filter((rule) => rule.scope !== 'user_path');
    this.reserving = rules.filter((rule) => !rule.concurrent && rule.maxTokens > 0);
    this.userReserving = this.reserving.filter((rule) => rule.scope === 'user_path');
    this.targetReserving = this.reserving.filter((rule) => rule.scope !== 'user_path');
  }
}

/**
 * Everything precomputed for one distinct (user path, provider, model) lookup. It is the plan of
 * a regular admission itself: one object less to reach per request.
 */
class MatchSet extends MatchPlan {
  /** Same without concurrency rules (holdSlot: false). */
  readonly withoutSlots: MatchPlan;
  /** The plans of lower priorities (normal with and without slots, low with and without), made on first use. */
  private shares: Array<MatchPlan | undefined> | undefined;
  private readonly blockedChildren: BlockedChildren;
  readonly tokenRules: readonly CompiledRule[];
  /**
   * The child counters of per-child rules among the rules, each admission checks they are still
   * kept; undefined when there are none (nothing more to read for most sets).
   */
  readonly children: readonly CompiledRule[] | undefined;
  /** The provider and model this set was resolved for (its user path is its key in the cache). */
  readonly provider: string | undefined;
  readonly model: string | undefined;
  /**
   * On the set cached first for a user path, the path's sets for other providers and models. A
   * consumer mostly calls the same target: that one is found by the path alone.
   */
  others: Map<string, Map<string, MatchSet>> | undefined;

  constructor(rules: readonly CompiledRule[], provider: string | undefined, model: string | undefined, learned: LearnedHandle | undefined, blocked: BlockedChildren = NOT_BLOCKED) {
    super(rules, blocked.any, learned);
    this.provider = provider;
    this.model = model;
    this.blockedChildren = blocked;
    this.withoutSlots = this.slots.length === 0 && blocked.any === blocked.windowed ? this : new MatchPlan(rules.filter((rule) => !rule.concurrent), blocked.windowed, learned);
    this.tokenRules = rules.filter((rule) => rule.configuredMaxTokens > 0);
    const children = rules.filter((rule) => rule.parent !== undefined);
    this.children = children.length > 0 ? children : undefined;
  }

  /** The plan of an admission of `priority`, with or without slots. */
  planFor(withSlots: boolean, priority: Priority | undefined, headroom: Headroom | undefined): MatchPlan {
    const whole = withSlots ? this : this.withoutSlots;
    if (priority === undefined || priority === 'high' || headroom === undefined || headroom[priority] === 0) return whole;
    const at = (priority === 'normal' ? 0 : 2) + (withSlots ? 0 : 1);
    const shares = (this.shares ??= [undefined, undefined, undefined, undefined]);
    return (shares[at] ??= new MatchPlan(whole.rules.map((rule) => rule.forPriority(priority, headroom)), withSlots ? this.blockedChildren.any : this.blockedChildren.windowed, this.learned));
  }
}

/** An admission that only carries headers: no slots to give back. */
class HeadersTicket implements AdmissionTicket {
  readonly ok = true as const;
  readonly headers: RateLimitHeaderData | undefined;
  readonly holdsSlots = false;
  readonly reservedTokens = 0;

  constructor(headers: RateLimitHeaderData | undefined) {
    this.headers = headers;
  }

  release(): void {}
  releaseTargetSlots(): void {}
  settle(): void {}
}

/** An admission holding concurrency slots, or reserved tokens, under the store's lease. */
class HeldTicket implements AdmissionTicket {
  readonly ok = true as const;
  readonly headers: RateLimitHeaderData | undefined;
  readonly holdsSlots: boolean;
  readonly reservedTokens: number;
  private readonly store: CounterStore;
  private readonly clock: Clock;
  private readonly plan: MatchPlan;
  /** What the store took the slots under; a reset since makes their release a no-op. */
  private readonly lease: SlotLease;
  private releasedUserSlots = false;
  private releasedTargetSlots = false;
  private settledUser = false;
  private settledTarget = false;

  constructor(store: CounterStore, clock: Clock, plan: MatchPlan, lease: SlotLease, headers: RateLimitHeaderData | undefined, reserved: number) {
    this.store = store;
    this.clock = clock;
    this.plan = plan;
    this.lease = lease;
    this.headers = headers;
    this.holdsSlots = plan.slots.length > 0;
    this.reservedTokens = reserved > 0 && plan.reserving.length > 0 ? reserved : 0;
  }

  settle(tokens: number): MaybePromise<void> {
    if (this.settledUser || this.reservedTokens === 0) return;
    this.settledUser = true;
    const rules = this.settledTarget ? this.plan.userReserving : this.plan.reserving;
    this.settledTarget = true;
    if (rules.length === 0) return;
    return this.store.settle(rules, this.lease, this.reservedTokens, tokens > 0 ? Math.ceil(tokens) : 0, Math.floor(this.clock.now() / 1000));
  }

  release(): void {
    if (this.releasedUserSlots) return;
    this.releasedUserSlots = true;
    // Everything still held goes back in one store call.
    if (this.releasedTargetSlots) this.giveBack(this.plan.userSlots);
    else {
      this.releasedTargetSlots = true;
      this.giveBack(this.plan.slots);
    }
  }

  releaseTargetSlots(): void {
    if (!this.settledTarget && this.reservedTokens > 0) {
      this.settledTarget = true;
      // The attempt failed: what it reserved on its provider and model goes, nothing is charged.
      if (this.plan.targetReserving.length > 0) void this.store.settle(this.plan.targetReserving, this.lease, this.reservedTokens, 0, Math.floor(this.clock.now() / 1000));
    }
    if (this.releasedTargetSlots) return;
    this.releasedTargetSlots = true;
    this.giveBack(this.plan.targetSlots);
  }

  private giveBack(slots: readonly CompiledRule[]): void {
    if (slots.length > 0) this.store.release(slots, this.lease);
  }
}

/**
 * The per-child rules of a set with no room for the path's child: the first of them, and the
 * first windowed one (an admission without slots does not count concurrency rules).
 */
interface BlockedChildren {
  readonly any: FoundBreach | undefined;
  readonly windowed: FoundBreach | undefined;
}

const NOT_BLOCKED: BlockedChildren = { any: undefined, windowed: undefined };

/** The plan of an admission no rule governs, taken for its budgets alone (see admit's `spend`). */
const NO_RULES = new MatchPlan([], undefined, undefined);

interface FoundBreach {
  readonly breach: BreachedLimit;
  readonly retryAfterSeconds: number;
  /** When capacity can have freed, in the store's seconds; Infinity when it never will for this request. */
  readonly retryAtSeconds: number;
  /** The breached counter (a concurrency rule's slots are released under it). */
  readonly counterKey: string;
  readonly userPathBreached: boolean;
}

export class RateLimiter {
  private readonly clock: Clock;
  private readonly store: CounterStore;
  private readonly enforceTokens: boolean;
  private readonly headroom: Headroom | undefined;
  private readonly learnedSettings: ReadonlyMap<string, LearnedSettings>;
  private readonly reservations: boolean;
  /** The refusal of each learned cause, per target: made at its first refusal, then kept. */
  private readonly learnedBreaches = new WeakMap<LearnedHandle, Partial<Record<LearnedCause, BreachedLimit>>>();
  private readonly index = new RuleIndex();
  /**
   * Resolved match sets by user path (NONE for an absent one), then provider and model (see
   * MatchSet.others). Keyed in steps rather than by one concatenated key: no string building per request.
   */
  private readonly matchCache = new Map<string, MatchSet>();
  private matchCacheSize = 0;
  /**
   * The last lookup and its set, checked before the maps: a request's token charge repeats its
   * admission's lookup, and traffic often repeats the one before. Comparing three strings costs
   * less than hashing a fresh path string for the map.
   */
  private lastSet: MatchSet | undefined;
  private lastUserPath: string | undefined;
  private lastProvider: string | undefined;
  private lastModel: string | undefined;

  constructor(options: RateLimiterOptions) {
    this.clock = options.clock ?? { now: Date.now };
    this.store = options.store;
    this.enforceTokens = options.enforceTokens ?? true;
    this.headroom = options.headroom;
    this.learnedSettings = options.learned ?? new Map();
    this.reservations = options.reservations === true;
  }

  get ruleCount(): number {
    return this.index.size;
  }

  /** Whether any rule has a token cap (for the "token rules without usage tracking" warning). */
  get hasTokenRules(): boolean {
    return this.index.hasTokenRules;
  }

  // ---------------------------------------------------------------- admission

  /**
   * Check every rule matching the target and, if none is breached, count the request in
   * every matching window and take every matching concurrency slot, atomically. Answers at
   * once when no rule matches or the store answered at once; else a promise.
   * Throws RangeError if `userPath` is not a valid user path (validate it first). When the
   * store is unavailable and its fallback is `deny`, throws (or rejects with)
   * CounterStoreUnavailableError; under `allow` the request is admitted uncounted.
   *
   * With `spend`, the store checks and reserves the claim's budgets in the same step, once the
   * rules admit (even when no rule matches): a budget without room answers a SpendRefusal, counting
   * nothing. A rule's refusal wins, and leaves the claim untold; so does a store that cannot answer
   * (the caller then decides the claim on its own counts).
   */
  admit(target: AdmissionTarget, options?: AdmitOptions): MaybePromise<AdmissionResult>;
  admit(target: AdmissionTarget, options: AdmitOptions | undefined, spend: SpendClaim): MaybePromise<AdmissionResult | SpendRefusal>;
  admit(target: AdmissionTarget, options?: AdmitOptions, spend?: SpendClaim): MaybePromise<AdmissionResult | SpendRefusal> {
    if (this.index.size === 0 && this.learnedSettings.size === 0) return spend === undefined ? NO_OP_TICKET : this.admitSpendAlone(spend);
    const nowMs = this.clock.now();
    const now = Math.floor(nowMs / 1000);
    const withSlots = options === undefined || options.holdSlot !== false;
    let set = this.matchSet(target.userPath, target.provider, target.model, now);
    if (set.children !== undefined) {
      const live = this.liveChildren(set, target, now, withSlots);
      if (!(live instanceof MatchSet)) return refusalOf(live);
      set = live;
    }
    const plan = set.planFor(withSlots, options?.priority, this.headroom);
    if (plan.blocked !== undefined) return refusalOf(plan.blocked);
    if (plan.closed !== undefined) return refusalOf(closedBreach(plan.closed, now));
    const learned = plan.learned;
    if (plan.rules.length === 0 && learned === undefined && spend === undefined) return NO_OP_TICKET;
    const reserve = reserveOf(options, plan.reserving);
    const outcome = this.store.tryAdmit(plan.rules, now, learned === undefined ? undefined : { handle: learned, nowMs }, reserve, spend);
    if (outcome instanceof Promise) return outcome.then((answer) => this.decide(plan, answer, reserve));
    return this.decide(plan, outcome, reserve);
  }

  /** No rule at all: the store's step is the budgets' alone. */
  private admitSpendAlone(spend: SpendClaim): MaybePromise<AdmissionResult | SpendRefusal> {
    const outcome = this.store.tryAdmit(NO_RULES.rules, this.nowSeconds(), undefined, 0, spend);
    if (outcome instanceof Promise) return outcome.then((answer) => this.decide(NO_RULES, answer, 0));
    return this.decide(NO_RULES, outcome, 0);
  }

  /**
   * Learns from an upstream answer of `target` what it said about the provider's own limits (see
   * learned.ts), when the provider learns at all. Answers what was learned (undefined: nothing),
   * so the caller can tell when the target became saturated. Never waits, never throws.
   */
  learn(target: { readonly provider: string; readonly model: string }, capacity: Capacity): LearnedUpdate | undefined {
    const settings = this.learnedSettings.get(target.provider);
    if (settings === undefined) return undefined;
    const nowMs = this.clock.now();
    const update = updateFrom(capacity, settings, nowMs);
    if (update === undefined) return undefined;
    const handle = this.matchSet(undefined, target.provider, target.model, Math.floor(nowMs / 1000)).learned!;
    this.store.learn(handle, update);
    return update;
  }

  /**
   * Every target's learned capacity the counters hold (every replica's, with shared counters), for
   * the providers that learn, sorted by provider and model. Never rejects.
   */
  learnedCapacity(): MaybePromise<LearnedReading> {
    const reading = this.store.readLearned(undefined, this.clock.now());
    const shown = ({ nowMs, records }: LearnedReading): LearnedReading => ({
      nowMs,
      records: records
        .filter((entry) => this.learnedSettings.has(entry.provider))
        .sort((a, b) => (a.provider === b.provider ? compareText(a.model, b.model) : compareText(a.provider, b.provider))),
    });
    return reading instanceof Promise ? reading.then(shown) : shown(reading);
  }

  /**
   * A dry run of admit(): the rules it would check with their counters, and the refusal it
   * would answer. Counts nothing and takes no slot. Async because a shared counter store
   * reads over the network.
   */
  async explain(target: AdmissionTarget, options?: AdmitOptions): Promise<AdmissionPreview> {
    const handle = target.provider !== undefined && target.model !== undefined && this.learnedSettings.has(target.provider)
      ? this.store.learnedCounter(target.provider, target.model)
      : undefined;
    const learned = handle === undefined ? undefined : await this.store.readLearned([handle], this.clock.now());
    const verdict = learned === undefined ? undefined : verdictOf(learned.records[0]?.record, learned.nowMs);
    if (this.index.size === 0) return { rules: [], refusal: verdict && refusalOf(this.learnedBreach(handle!, verdict)), learned: verdict };
    // Resolved like admit()'s set, without making counters for children not counted yet (they read as zero).
    const rules: CompiledRule[] = [];
    const lowerPath = target.userPath === undefined ? undefined : normalizedLowerPath(target.userPath);
    if (lowerPath !== undefined) this.index.collectUserPath(lowerPath, rules);
    if (target.provider !== undefined) {
      const lowerProvider = target.provider.toLowerCase();
      this.index.collectProvider(lowerProvider, rules);
      if (target.model !== undefined) this.index.collectModel(lowerProvider, target.model.toLowerCase(), rules);
    }
    const checked = options !== undefined && options.holdSlot === false ? rules.filter((rule) => !rule.concurrent) : rules;
    const now = this.nowSeconds();
    const shown = checked.map((rule) => (lowerPath !== undefined && rule.scope === 'user_path' ? this.counterShownFor(rule, lowerPath, now) : { rule, counted: true }));
    return this.readShown(shown, ({ nowSeconds, rows }) => {
      const counted = shown.map((entry) => entry.rule);
      const judged = counted.map((rule) => rule.forPriority(options?.priority ?? 'high', this.headroom));
      // A per-child rule with no room for the child, or a cap the priority has no share of, refuses
      // before any counter is read, as in admit().
      const blocked = shown.find((entry) => entry.full !== undefined);
      const closed = judged.find((rule) => rule.closed);
      const found = blocked !== undefined
        ? childrenFull(blocked.rule.parent ?? blocked.rule, blocked.rule.child!, blocked.full!, nowSeconds)
        : closed !== undefined ? closedBreach(closed, nowSeconds) : this.findBreach(judged, rows, nowSeconds, handle, verdict, reserveOf(options, judged));
      return { rules: counted.map((rule, i) => ruleStatus(rule, rows[i]!, this.reservations)), refusal: found === undefined ? undefined : refusalOf(found), learned: verdict };
    });
  }

  /**
   * After a response completes: add its total tokens to every matching token window —
   * the user path (`/` when none) and the provider and model that actually executed it.
   * A promise only when the store answers later; it never rejects.
   */
  chargeTokens(target: AdmissionTarget, tokens: number): MaybePromise<void> {
    if (!(tokens > 0) || !this.index.hasTokenRules) return;
    const now = this.nowSeconds();
    const userPath = target.userPath ?? '/';
    let set = this.matchSet(userPath, target.provider, target.model, now);
    if (set.children !== undefined) {
      // A child with no room left is not charged: its counter was dropped, nothing reads it.
      const live = this.liveChildren(set, { userPath, provider: target.provider, model: target.model }, now, true);
      if (live instanceof MatchSet) set = live;
    }
    if (set.tokenRules.length === 0) return;
    return this.store.addTokens(set.tokenRules, Math.ceil(tokens), now);
  }

  // ---------------------------------------------------------------- rules

  /**
   * Replace the whole rule set (at start-up, and when another gateway changed the stored rules).
   * Counters of keys present before and after are kept; the store forgets the others here
   * (counters shared with other gateways are theirs to clear).
   */
  replaceRules(rules: readonly RuleDefinition[]): void {
    const compiled = new Map<string, RuleDefinition>();
    for (const rule of rules) {
      const valid = validated(rule);
      compiled.set(keyOf(valid), valid);
    }
    for (const [key, old] of [...this.index.byKey]) {
      // A rule that turned per-child or back counts on other counters: the old ones go.
      const next = compiled.get(key);
      if (next === undefined || (next.perChild === true) !== old.perChild) this.store.retire(old.counter.key);
    }
    this.index.clear();
    for (const [key, rule] of compiled) this.index.put(this.compile(rule, key));
    this.invalidate();
  }

  /**
   * Create or update the rule with this key (scope, subject case-insensitively, period).
   * Editing only caps keeps its counters. The subject's display spelling becomes this
   * write's. Throws RangeError with a field-naming message if the rule is invalid.
   */
  upsertRule(rule: RuleDefinition): RuleDefinition {
    const valid = validated(rule);
    const key = keyOf(valid);
    const existing = this.index.byKey.get(key);
    // Changing per_child moves the rule: its counters restart (deleteRule first clears them for every gateway).
    if (existing !== undefined && existing.perChild !== (valid.perChild === true)) this.store.retire(existing.counter.key);
    this.index.put(this.compile(valid, key));
    this.invalidate();
    return valid;
  }

  /**
   * Delete a rule and its counters (for every gateway sharing them). Returns false when no such
   * rule exists. The rule stops being enforced at once; a promise when clearing its counters takes
   * a round trip.
   */
  deleteRule(key: RuleKey): MaybePromise<boolean> {
    const canonical = canonicalKey(key);
    const removed = canonical === undefined ? undefined : this.index.remove(canonical);
    if (removed === undefined) return false;
    this.invalidate();
    return afterwards(this.store.clear(removed.counter.key), true);
  }

  /**
   * Zero one rule's counters (live tickets' later releases become no-ops). False when no such
   * rule. Rejects with CounterStoreUnavailableError when the counters cannot be reached.
   */
  resetRule(key: RuleKey): MaybePromise<boolean> {
    const canonical = canonicalKey(key);
    const rule = canonical === undefined ? undefined : this.index.byKey.get(canonical);
    if (rule === undefined) return false;
    // A per-child rule's own counter key covers its children: they are reset too.
    return afterwards(this.store.reset(rule.counter.key), true);
  }

  /** Zero every counter. Rejects with CounterStoreUnavailableError when the counters cannot be reached. */
  resetAll(): MaybePromise<void> {
    return this.store.resetAll();
  }

  getRule(key: RuleKey): RuleDefinition | undefined {
    const canonical = canonicalKey(key);
    return canonical === undefined ? undefined : this.index.byKey.get(canonical)?.definition;
  }

  // ---------------------------------------------------------------- status

  /**
   * Every rule with its live counters, sorted by scope, subject, period_seconds. With
   * `expandChildren`, each per-child rule's record carries `active_children` and is followed by
   * one record per active child (sorted by child), whose `user_path` is the child's path; with
   * `childrenLimit` too, by its `childrenLimit` busiest children only, busiest first.
   */
  status(options?: StatusOptions): MaybePromise<RuleStatus[]> {
    const rules = [...this.index.byKey.values()].sort((a, b) => compareRules(a.definition, b.definition));
    const records = this.read(rules, ({ rows }) => rules.map((rule, i) => ruleStatus(rule, rows[i]!, this.reservations)));
    if (options?.expandChildren !== true || !this.index.hasPerChildRules) return records;
    return this.withChildren(rules, records, options.childrenLimit);
  }

  /**
   * The user-path rules governing `userPath` (its own and its ancestors', root first),
   * with their counters, how much of each cap is used, when each window resets and
   * whether each would refuse a request now. A per-child rule above the path shows the counter
   * of the path's child under it, the one that governs the caller. Throws RangeError if the
   * path is invalid.
   */
  usageFor(userPath: string): MaybePromise<UserPathUsage[]> {
    const lowerPath = normalizedLowerPath(userPath);
    const rules: CompiledRule[] = [];
    this.index.collectUserPath(lowerPath, rules);
    const shown = rules.map((rule) => this.counterShownFor(rule, lowerPath, this.nowSeconds()));
    return this.readShown(shown, ({ nowSeconds, rows }) => shown.map((rule, i) => userPathUsage(rule.rule, rows[i]!, nowSeconds, this.enforceTokens, this.reservations)));
  }

  // ---------------------------------------------------------------- internals

  private nowSeconds(): number {
    return Math.floor(this.clock.now() / 1000);
  }

  private compile(rule: RuleDefinition, key: string): CompiledRule {
    return new CompiledRule(rule, key, this.store.counter(counterKeyOf(key, rule.perChild === true)), this.enforceTokens);
  }

  /** The rule as it counts one child: the rule's caps on the child's counter. */
  private forChild(rule: CompiledRule, child: string, counter: CounterHandle): CompiledRule {
    return new CompiledRule(rule.definition, rule.key, counter, this.enforceTokens, { rule, child });
  }

  /**
   * For a read: the counter `rule` keeps for `lowerPath`: a per-child rule above the path shows
   * its child's, which is `counted` only when the store keeps one (else it reads as zero).
   */
  private counterShownFor(rule: CompiledRule, lowerPath: string, now: number): ShownCounter {
    const child = rule.perChild ? directChild(rule.lowerSubject, lowerPath) : undefined;
    if (child === undefined) return { rule, counted: true };
    const found = this.store.findChild(rule.counter.key, rule.periodSeconds, child, now);
    if (found === undefined || isFull(found)) return { rule: this.forChild(rule, child, rule.counter), counted: false, full: found };
    return { rule: this.forChild(rule, child, found), counted: true };
  }

  /** Reads the counted ones; a child the store keeps nothing for reads as an empty window. */
  private readShown<T>(shown: readonly ShownCounter[], use: (reading: CounterReading) => T): MaybePromise<T> {
    if (shown.every((entry) => entry.counted)) return this.read(shown.map((entry) => entry.rule), use);
    const counted = shown.filter((entry) => entry.counted).map((entry) => entry.rule);
    return this.read(counted, ({ nowSeconds, rows }) => {
      let next = 0;
      const all = shown.map((entry) => (entry.counted ? rows[next++]! : emptyRow(entry.rule, nowSeconds)));
      return use({ nowSeconds, rows: all });
    });
  }

  /** The status records with each per-child rule's active children (all, or its `limit` busiest) after it. */
  private async withChildren(rules: readonly CompiledRule[], records: MaybePromise<RuleStatus[]>, limit: number | undefined): Promise<RuleStatus[]> {
    const listed = await records;
    const now = this.nowSeconds();
    const out: RuleStatus[] = [];
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i]!;
      if (!rule.perChild) {
        out.push(listed[i]!);
        continue;
      }
      let children: ChildReading[] = await this.store.readChildren(rule.counter.key, rule.periodSeconds, now);
      out.push({ ...listed[i]!, active_children: children.length });
      if (limit !== undefined) children = limit === 0 ? [] : [...children].sort(busiestFirst).slice(0, limit);
      for (const { child, row } of children) out.push(ruleStatus(this.forChild(rule, child, rule.counter), row, this.reservations));
    }
    return out;
  }

  /** The rules' counters now, read without changing them, handed to `use` (row i is rule i). */
  private read<T>(rules: readonly CompiledRule[], use: (reading: CounterReading) => T): MaybePromise<T> {
    if (rules.length === 0) return use({ nowSeconds: this.nowSeconds(), rows: [] });
    const reading = this.store.read(rules, this.nowSeconds());
    return reading instanceof Promise ? reading.then(use) : use(reading);
  }

  /** The engine's answer to a store's: a ticket, a refusal, or what the store's fallback says. */
  private decide(plan: MatchPlan, outcome: AdmitOutcome, reserve: number): AdmissionResult | SpendRefusal {
    if (outcome.status === 'unavailable') {
      // Only the learned capacity was asked (no rule governs the request): without an answer, the
      // target is not known to be saturated, and `deny` is for requests rules govern.
      if (outcome.fallback === 'allow' || plan.rules.length === 0) return NO_OP_TICKET;
      throw new CounterStoreUnavailableError(outcome.reason);
    }
    const { rules } = plan;
    const { rows, nowSeconds } = outcome;
    if (outcome.status === 'refused') return outcome.spendRefused === true ? SPEND_REFUSED : this.refusal(plan, rows, nowSeconds, outcome.learned, reserve);
    const headers = successHeaders(rules, rows, nowSeconds);
    if (outcome.lease !== undefined) return new HeldTicket(this.store, this.clock, plan, outcome.lease, headers, reserve);
    return headers === undefined ? NO_OP_TICKET : new HeadersTicket(headers);
  }

  private invalidate(): void {
    this.matchCache.clear();
    this.matchCacheSize = 0;
    this.lastSet = undefined;
  }

  /** Matching rules for a lookup, cached per distinct (path, provider, model) until rules change. */
  private matchSet(userPath: string | undefined, provider: string | undefined, model: string | undefined, now: number): MatchSet {
    const last = this.lastSet;
    if (last !== undefined && userPath === this.lastUserPath && provider === this.lastProvider && model === this.lastModel) return last;
    return this.cachedMatchSet(userPath, provider, model) ?? this.resolveMatchSet(userPath, provider, model, now);
  }

  /**
   * Keeps a set's child counters current: one store call per child counter, which answers the
   * counter the set holds while the store keeps it. A child dropped since (it went idle) has a new
   * counter: the set is resolved again. A child that cannot be counted gives its breach. Without
   * slots, concurrency rules are not counted, so their children are left as they are.
   */
  private liveChildren(set: MatchSet, target: AdmissionTarget, now: number, withSlots: boolean): MatchSet | FoundBreach {
    const children = set.children!;
    for (let i = 0; i < children.length; i++) {
      const rule = children[i]!;
      if (!withSlots && rule.concurrent) continue;
      const parent = rule.parent!;
      const counter = this.store.childCounter(parent.counter.key, parent.periodSeconds, rule.child!, now, rule.counter);
      if (counter === rule.counter) continue;
      if (isFull(counter)) return childrenFull(parent, rule.child!, counter, now);
      return this.resolveMatchSet(target.userPath, target.provider, target.model, now);
    }
    return set;
  }

  private cachedMatchSet(userPath: string | undefined, provider: string | undefined, model: string | undefined): MatchSet | undefined {
    const first = this.matchCache.get(userPath ?? NONE);
    if (first === undefined) return undefined;
    if (provider === first.provider && model === first.model) return first;
    return first.others?.get(provider ?? NONE)?.get(model ?? NONE);
  }

  private resolveMatchSet(userPath: string | undefined, provider: string | undefined, model: string | undefined, now: number): MatchSet {
    const rules: CompiledRule[] = [];
    let blocked: BlockedChildren | undefined;
    if (userPath !== undefined) {
      const lowerPath = normalizedLowerPath(userPath);
      this.index.collectUserPath(lowerPath, rules);
      if (this.index.hasPerChildRules) blocked = this.resolveChildren(rules, lowerPath, now);
    }
    if (provider !== undefined) {
      const lowerProvider = provider.toLowerCase();
      this.index.collectProvider(lowerProvider, rules);
      if (model !== undefined) this.index.collectModel(lowerProvider, model.toLowerCase(), rules);
    }
    const learned = provider !== undefined && model !== undefined && this.learnedSettings.has(provider) ? this.store.learnedCounter(provider, model) : undefined;
    const set = new MatchSet(rules, provider, model, learned, blocked);
    // Asked again next time: a child may have room by then.
    if (blocked !== undefined) return set;
    // A flood of distinct paths must not grow memory without bound: start over past the limit.
    if (this.matchCacheSize >= MATCH_CACHE_LIMIT) this.invalidate();
    const first = this.matchCache.get(userPath ?? NONE);
    if (first === undefined) {
      this.matchCache.set(userPath ?? NONE, set);
      this.matchCacheSize++;
    } else if (provider === first.provider && model === first.model) {
      // Resolved again (a child's counter was dropped): the new set takes the path's place.
      set.others = first.others;
      this.matchCache.set(userPath ?? NONE, set);
    } else {
      first.others ??= new Map();
      let byModel = first.others.get(provider ?? NONE);
      if (byModel === undefined) {
        byModel = new Map();
        first.others.set(provider ?? NONE, byModel);
      }
      if (!byModel.has(model ?? NONE)) this.matchCacheSize++;
      byModel.set(model ?? NONE, set);
    }
    this.lastSet = set;
    this.lastUserPath = userPath;
    this.lastProvider = provider;
    this.lastModel = model;
    return set;
  }

  /**
   * Replaces each per-child rule governing `lowerPath` from above by the rule on the counter of
   * the path's child under it. A child that cannot be counted (no room) leaves its rule out and
   * gives the breach of the set.
   */
  private resolveChildren(rules: CompiledRule[], lowerPath: string, now: number): BlockedChildren | undefined {
    let any: FoundBreach | undefined;
    let windowed: FoundBreach | undefined;
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i]!;
      const child = rule.perChild ? directChild(rule.lowerSubject, lowerPath) : undefined;
      if (child === undefined) continue;
      const counter = this.store.childCounter(rule.counter.key, rule.periodSeconds, child, now, undefined);
      if (isFull(counter)) {
        const breach = childrenFull(rule, child, counter, now);
        any ??= breach;
        if (!rule.concurrent) windowed ??= breach;
        rules.splice(i--, 1);
      } else {
        rules[i] = this.forChild(rule, child, counter);
      }
    }
    return any === undefined ? undefined : { any, windowed };
  }

  private refusal(plan: MatchPlan, rows: readonly CounterRow[], now: number, learned: LearnedVerdict | undefined, reserve: number): AdmissionRefusal {
    const found = this.findBreach(plan.rules, rows, now, plan.learned, learned, reserve);
    if (found === undefined) {
      // The store refused but the engine sees no breach: the two disagree on the arithmetic.
      throw new Error('rate-limit store refused a request without a breached rule');
    }
    return refusalOf(found);
  }

  /**
   * Every breached limit in the rows, and the target's learned capacity when it saturates it; the
   * one with the longest Retry-After wins (first on a tie, the learned capacity last).
   */
  private findBreach(rules: readonly CompiledRule[], rows: readonly CounterRow[], now: number, handle?: LearnedHandle, learned?: LearnedVerdict, reserve = 0): FoundBreach | undefined {
    let worst: BreachedLimit | undefined;
    let worstRule: CompiledRule | undefined;
    let worstRetry = 0;
    let userPathBreached = false;
    // A request larger than a cap is never admitted by it, whatever the wait: it wins.
    let never = false;
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i]!;
      const row = rows[i]!;
      if (rule.concurrent) {
        if (row.inFlight >= rule.maxRequests) {
          userPathBreached ||= rule.scope === 'user_path';
          if (1 > worstRetry && !never) {
            worst = rule.requestBreach;
            worstRule = rule;
            worstRetry = 1;
          }
        }
        continue;
      }
      const period = rule.periodSeconds;
      const elapsed = now - row.windowStart;
      if (rule.maxRequests > 0) {
        const previous = row.requestsPrevious;
        const current = row.requestsCurrent;
        if (row.requestsUsed >= rule.maxRequests) {
          userPathBreached ||= rule.scope === 'user_path';
          const retry = retryAfterSeconds(previous, current, rule.maxRequests, period, elapsed);
          if (retry > worstRetry && !never) {
            worst = rule.requestBreach;
            worstRule = rule;
            worstRetry = retry;
          }
        }
      }
      if (rule.maxTokens > 0) {
        const previous = row.tokensPrevious;
        const current = row.tokensCurrent;
        if (reserve > 0 ? row.tokensUsed + row.tokensReserved + reserve > rule.maxTokens : row.tokensUsed >= rule.maxTokens) {
          userPathBreached ||= rule.scope === 'user_path';
          // The window must make room for what is reserved and for this request's estimate: the
          // wait is until the estimate drops to the cap less both (reservations end on their own).
          const tooBig = reserve > rule.maxTokens;
          const room = rule.maxTokens - row.tokensReserved - reserve;
          const retry = tooBig ? Math.max(1, period) : reserve === 0 ? retryAfterSeconds(previous, current, rule.maxTokens, period, elapsed) : room < 0 ? 1 : retryAfterSeconds(previous, current, room + 1, period, elapsed);
          if ((retry > worstRetry && !never) || (tooBig && !never)) {
            worst = tooBig ? rule.tooLargeBreach(reserve) : rule.tokenBreach;
            worstRule = rule;
            worstRetry = retry;
            if (tooBig) never = true;
          }
        }
      }
    }
    if (learned !== undefined && handle !== undefined && !never) {
      const found = this.learnedBreach(handle, learned);
      if (found.retryAfterSeconds > worstRetry) return { ...found, userPathBreached };
    }
    if (worst === undefined) return undefined;
    return { breach: worst, retryAfterSeconds: worstRetry, retryAtSeconds: never ? Infinity : now + worstRetry, counterKey: worstRule!.counter.key, userPathBreached };
  }

  /**
   * A target saturated by what was learned, as a breach of a model rule: Retry-After until the
   * reset or cooldown end (at least a second), waited on to the millisecond under the target's key.
   */
  private learnedBreach(handle: LearnedHandle, verdict: LearnedVerdict): FoundBreach {
    let breaches = this.learnedBreaches.get(handle);
    if (breaches === undefined) this.learnedBreaches.set(handle, (breaches = {}));
    const breach = (breaches[verdict.cause] ??= learnedLimit(handle, verdict.cause));
    const retryAfterSeconds = Math.max(1, Math.ceil((verdict.untilMs - verdict.nowMs) / 1000));
    return { breach, retryAfterSeconds, retryAtSeconds: verdict.untilMs / 1000, counterKey: handle.key, userPathBreached: false };
  }
}

/** A read of one rule: a child's counter the store keeps nothing for yet reads as zero. */
interface ShownCounter {
  readonly rule: CompiledRule;
  readonly counted: boolean;
  /** The store has no room for the child's counter: admit() would refuse the request for it. */
  readonly full?: ChildrenFull | undefined;
}

/** Most requests counted (or slots held, on a concurrent rule) first, then most tokens, then by child. */
function busiestFirst(a: ChildReading, b: ChildReading): number {
  return b.row.requestsUsed + b.row.inFlight - (a.row.requestsUsed + a.row.inFlight) || b.row.tokensUsed - a.row.tokensUsed || (a.child < b.child ? -1 : a.child > b.child ? 1 : 0);
}

function isFull(answer: CounterHandle | ChildrenFull): answer is ChildrenFull {
  return (answer as ChildrenFull).full === true;
}

function childrenFull(rule: CompiledRule, child: string, full: ChildrenFull, now: number): FoundBreach {
  return { breach: rule.childrenBreach(child, full.limit), retryAfterSeconds: full.retryAfterSeconds, retryAtSeconds: now + full.retryAfterSeconds, counterKey: rule.counter.key, userPathBreached: true };
}

/**
 * A rule whose cap a lower priority has no share of: it never admits that priority. Retry-After
 * is the rule's period (1 for concurrency), when its counters can at least have moved on.
 */
function closedBreach(rule: CompiledRule, now: number): FoundBreach {
  const breach = (rule.maxRequests === 0 && rule.requestBreach !== undefined ? rule.requestBreach : rule.tokenBreach)!;
  return { breach, retryAfterSeconds: Math.max(1, rule.periodSeconds), retryAtSeconds: Infinity, counterKey: rule.counter.key, userPathBreached: rule.scope === 'user_path' };
}

/** The row of a counter that holds nothing, at `now`. */
function emptyRow(rule: CompiledRule, now: number): CounterRow {
  return rule.concurrent ? concurrencyRow(0) : windowedRow(windowStart(now, rule.periodSeconds), 0, 0, 0, 0, rule.periodSeconds, now);
}

const LEARNED_REASONS: Readonly<Record<LearnedCause, string>> = {
  cooldown: 'the provider refused and asked to retry later',
  requests: "the provider's own request limit is spent until it resets",
  tokens: "the provider's own token limit is spent until it resets",
};

/** The refusal of a target its learned capacity saturates: scope model, subject `provider/model`. */
function learnedLimit(handle: LearnedHandle, cause: LearnedCause): BreachedLimit {
  const subject = `${handle.provider}/${handle.model}`;
  return { scope: 'model', subject, ruleSubject: subject, periodSeconds: 0, label: 'learned', kind: 'learned', cap: 0, message: `rate limit exceeded for model ${subject}: ${LEARNED_REASONS[cause]} (learned from its answers)` };
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function refusalOf(found: FoundBreach): AdmissionRefusal {
  const { breach, retryAfterSeconds: retryAfter, retryAtSeconds, counterKey, userPathBreached } = found;
  const triple = { limit: breach.cap, remaining: 0, reset: retryAfter };
  const headers: RateLimitHeaderData | undefined =
    breach.kind === 'requests' ? { requests: triple } : breach.kind === 'tokens' ? { tokens: triple } : undefined;
  return { ok: false, breach, retryAfterSeconds: retryAfter, retryAtSeconds, counterKey, message: breach.message, headers, userPathBreached };
}

/** The tokens an admission with these options reserves on these rules: 0 when none has a token cap. */
function reserveOf(options: AdmitOptions | undefined, rules: readonly CompiledRule[]): number {
  const tokens = options?.reserveTokens ?? 0;
  return tokens > 0 && rules.some((rule) => !rule.concurrent && rule.maxTokens > 0) ? Math.ceil(tokens) : 0;
}

/** `value` once `done` has happened: at once when it already has. */
function afterwards<T>(done: MaybePromise<void>, value: T): MaybePromise<T> {
  return done instanceof Promise ? done.then(() => value) : value;
}

function validated(rule: RuleDefinition): RuleDefinition {
  const result = buildRule(rule);
  if (!result.ok) throw new RangeError(result.error);
  return result.value;
}

function keyOf(rule: RuleDefinition): string {
  return ruleKeyString(rule.scope, rule.subject.toLowerCase(), rule.periodSeconds);
}

function normalizedLowerPath(userPath: string): string {
  const path = normalizeUserPath(userPath);
  if (!path.ok) throw new RangeError(path.error);
  return path.value.toLowerCase();
}
