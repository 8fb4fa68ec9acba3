/**
 * The rate-limit engine's facade: rule management, admission, token charging and
 * status. Pure: no I/O, no timers, no logging. Time comes from a Clock, counters
 * live in a CounterStore.
 */
import type { RateLimitHeaderData } from './headers.ts';
import { successHeaders } from './headers.ts';
import { buildRule, normalizeUserPath } from './normalize.ts';
import { RuleIndex } from './rule-index.ts';
import type { BreachedLimit } from './rules.ts';
import { canonicalKey, compareRules, CompiledRule, ruleKeyString } from './rules.ts';
import type { RuleStatus, UserPathUsage } from './status.ts';
import { ruleStatus, userPathUsage } from './status.ts';
import type { CounterRow, CounterStore } from './store.ts';
import { CounterSnapshot, MemoryCounterStore } from './store.ts';
import type { Clock, RuleDefinition, RuleKey } from './types.ts';
import { retryAfterSeconds } from './window.ts';

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
}

export interface RateLimiterOptions {
  /** Default: the system clock. */
  readonly clock?: Clock;
  /** Where counters live. Default: in this process's memory (MemoryCounterStore). */
  readonly store?: CounterStore;
  /** Enforce token caps at admission. False when usage tracking is off (token rules are then inert). Default true. */
  readonly enforceTokens?: boolean;
}

/** An admitted request. Call release() once the response is fully sent or the client is gone. */
export interface AdmissionTicket {
  readonly ok: true;
  /** Values for the x-ratelimit-* success headers; undefined when no windowed rule matched. */
  readonly headers: RateLimitHeaderData | undefined;
  /** True when release() has slots to give back (callers can skip arranging a release otherwise). */
  readonly holdsSlots: boolean;
  /** Give back the concurrency slots. Idempotent; safe after the rule was reset or deleted. */
  release(): void;
  /**
   * Give back only the provider and model slots, keeping the user-path ones: a failover
   * attempt ended but the request goes on. Idempotent; release() later frees the rest.
   */
  releaseTargetSlots(): void;
}

/** A refused request: nothing was counted. */
export interface AdmissionRefusal {
  readonly ok: false;
  /** The breached limit with the longest Retry-After. */
  readonly breach: BreachedLimit;
  /** Seconds until a retry would be admitted with no other traffic (>= 1). */
  readonly retryAfterSeconds: number;
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

/** What admit() would decide now, read without counting anything (see RateLimiter.explain). */
export interface AdmissionPreview {
  /** Every rule admit() would check, with its live counters, in matching order (user path root first). */
  readonly rules: RuleStatus[];
  /** The refusal admit() would answer; undefined when it would admit. */
  readonly refusal: AdmissionRefusal | undefined;
}

/** Returned whenever no rule applies: nothing to release, no headers, no allocation. */
const NO_OP_TICKET: AdmissionTicket = Object.freeze({ ok: true as const, headers: undefined, holdsSlots: false, release(): void {}, releaseTargetSlots(): void {} });

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
  /** Position of the first slot rule in `rules`, to read the slots' generation from the snapshot; -1 if none. */
  readonly firstSlot: number;

  constructor(rules: readonly CompiledRule[]) {
    this.rules = rules;
    this.slots = rules.filter((rule) => rule.concurrent);
    this.firstSlot = rules.findIndex((rule) => rule.concurrent);
  }
}

/** Everything precomputed for one distinct (user path, provider, model) lookup. */
class MatchSet {
  readonly admission: MatchPlan;
  /** Same without concurrency rules (holdSlot: false). */
  readonly withoutSlots: MatchPlan;
  readonly tokenRules: readonly CompiledRule[];

  constructor(rules: readonly CompiledRule[]) {
    this.admission = new MatchPlan(rules);
    this.withoutSlots =
      this.admission.slots.length === 0 ? this.admission : new MatchPlan(rules.filter((rule) => !rule.concurrent));
    this.tokenRules = rules.filter((rule) => rule.configuredMaxTokens > 0);
  }
}

class HeldTicket implements AdmissionTicket {
  readonly ok = true as const;
  readonly headers: RateLimitHeaderData | undefined;
  private readonly store: CounterStore;
  /** The concurrency slots taken; empty for a ticket that only carries headers. */
  private readonly slots: readonly CompiledRule[];
  /** Store generation the slots were taken in; a reset since makes their release a no-op. */
  private readonly generation: number;
  private releasedUserSlots = false;
  private releasedTargetSlots = false;

  constructor(store: CounterStore, slots: readonly CompiledRule[], generation: number, headers: RateLimitHeaderData | undefined) {
    this.store = store;
    this.slots = slots;
    this.generation = generation;
    this.headers = headers;
  }

  get holdsSlots(): boolean {
    return this.slots.length > 0;
  }

  release(): void {
    this.releaseTargetSlots();
    if (this.releasedUserSlots) return;
    this.releasedUserSlots = true;
    this.releaseWhere(true);
  }

  releaseTargetSlots(): void {
    if (this.releasedTargetSlots) return;
    this.releasedTargetSlots = true;
    this.releaseWhere(false);
  }

  private releaseWhere(userPath: boolean): void {
    const slots = this.slots;
    for (let i = 0; i < slots.length; i++) {
      const slot = slots[i]!;
      if ((slot.scope === 'user_path') === userPath) this.store.release(slot.counter, this.generation);
    }
  }
}

interface FoundBreach {
  readonly breach: BreachedLimit;
  readonly retryAfterSeconds: number;
  readonly userPathBreached: boolean;
}

export class RateLimiter {
  private readonly clock: Clock;
  private readonly store: CounterStore;
  private readonly enforceTokens: boolean;
  private readonly index = new RuleIndex();
  /**
   * Resolved match sets by user path → provider → model (NONE for an absent part).
   * Nested maps rather than one concatenated key: no string building per request.
   */
  private readonly matchCache = new Map<string, Map<string, Map<string, MatchSet>>>();
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
  /** Reused scratch space for store snapshots; sized to the largest match set seen. */
  private snapshot = new CounterSnapshot(16);

  constructor(options: RateLimiterOptions = {}) {
    this.clock = options.clock ?? { now: Date.now };
    this.store = options.store ?? new MemoryCounterStore();
    this.enforceTokens = options.enforceTokens ?? true;
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
   * every matching window and take every matching concurrency slot, atomically.
   * Throws RangeError if `userPath` is not a valid user path (validate it first).
   */
  admit(target: AdmissionTarget, options?: AdmitOptions): AdmissionResult {
    if (this.index.size === 0) return NO_OP_TICKET;
    const set = this.matchSet(target.userPath, target.provider, target.model);
    const plan = options !== undefined && options.holdSlot === false ? set.withoutSlots : set.admission;
    const rules = plan.rules;
    if (rules.length === 0) return NO_OP_TICKET;
    const now = this.nowSeconds();
    const snapshot = this.snapshot;
    if (!this.store.tryAdmit(rules, now, snapshot)) return this.refusal(rules, snapshot, now);

    const headers = successHeaders(rules, snapshot, now);
    if (plan.firstSlot < 0) return headers === undefined ? NO_OP_TICKET : new HeldTicket(this.store, plan.slots, 0, headers);
    return new HeldTicket(this.store, plan.slots, snapshot.rows[plan.firstSlot]!.generation, headers);
  }

  /**
   * A dry run of admit(): the rules it would check with their counters, and the refusal it
   * would answer. Counts nothing and takes no slot. Async because a shared counter store
   * reads over the network.
   */
  async explain(target: AdmissionTarget, options?: AdmitOptions): Promise<AdmissionPreview> {
    if (this.index.size === 0) return { rules: [], refusal: undefined };
    const set = this.matchSet(target.userPath, target.provider, target.model);
    const rules = (options !== undefined && options.holdSlot === false ? set.withoutSlots : set.admission).rules;
    const now = this.nowSeconds();
    // A snapshot of its own: admissions reuse this.snapshot while the read may be awaited.
    const snapshot = new CounterSnapshot(rules.length);
    await this.store.read(rules, now, snapshot);
    const found = this.findBreach(rules, snapshot, now);
    return { rules: rules.map((rule, i) => ruleStatus(rule, snapshot.rows[i]!)), refusal: found === undefined ? undefined : refusalOf(found) };
  }

  /**
   * After a response completes: add its total tokens to every matching token window —
   * the user path (`/` when none) and the provider and model that actually executed it.
   */
  chargeTokens(target: AdmissionTarget, tokens: number): void {
    if (!(tokens > 0) || !this.index.hasTokenRules) return;
    const set = this.matchSet(target.userPath ?? '/', target.provider, target.model);
    if (set.tokenRules.length === 0) return;
    this.store.addTokens(set.tokenRules, Math.ceil(tokens), this.nowSeconds());
  }

  // ---------------------------------------------------------------- rules

  /** Replace the whole rule set. Counters of keys present before and after are kept; others are dropped. */
  replaceRules(rules: readonly RuleDefinition[]): void {
    const compiled = new Map<string, RuleDefinition>();
    for (const rule of rules) {
      const valid = validated(rule);
      compiled.set(keyOf(valid), valid);
    }
    for (const key of [...this.index.byKey.keys()]) {
      if (!compiled.has(key)) this.store.drop(key);
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
    this.index.put(this.compile(valid, key));
    this.invalidate();
    return valid;
  }

  /** Delete a rule and its counters. Returns false when no such rule exists. */
  deleteRule(key: RuleKey): boolean {
    const canonical = canonicalKey(key);
    if (canonical === undefined || this.index.remove(canonical) === undefined) return false;
    this.store.drop(canonical);
    this.invalidate();
    return true;
  }

  /** Zero one rule's counters (live tickets' later releases become no-ops). False when no such rule. */
  resetRule(key: RuleKey): boolean {
    const canonical = canonicalKey(key);
    if (canonical === undefined || !this.index.byKey.has(canonical)) return false;
    this.store.reset(canonical);
    return true;
  }

  resetAll(): void {
    this.store.resetAll();
  }

  getRule(key: RuleKey): RuleDefinition | undefined {
    const canonical = canonicalKey(key);
    return canonical === undefined ? undefined : this.index.byKey.get(canonical)?.definition;
  }

  // ---------------------------------------------------------------- status

  /** Every rule with its live counters, sorted by scope, subject, period_seconds. */
  status(): RuleStatus[] {
    const rules = [...this.index.byKey.values()].sort((a, b) => compareRules(a.definition, b.definition));
    const rows = this.read(rules, this.nowSeconds());
    return rules.map((rule, i) => ruleStatus(rule, rows[i]!));
  }

  /**
   * The user-path rules governing `userPath` (its own and its ancestors', root first),
   * with their counters, how much of each cap is used, when each window resets and
   * whether each would refuse a request now. Throws RangeError if the path is invalid.
   */
  usageFor(userPath: string): UserPathUsage[] {
    const rules: CompiledRule[] = [];
    this.index.collectUserPath(normalizedLowerPath(userPath), rules);
    const now = this.nowSeconds();
    const rows = this.read(rules, now);
    return rules.map((rule, i) => userPathUsage(rule, rows[i]!, now, this.enforceTokens));
  }

  // ---------------------------------------------------------------- internals

  private nowSeconds(): number {
    return Math.floor(this.clock.now() / 1000);
  }

  private compile(rule: RuleDefinition, key: string): CompiledRule {
    return new CompiledRule(rule, key, this.store.counter(key), this.enforceTokens);
  }

  /** The rules' counters at `nowSeconds`, read without changing them (row i is rule i). */
  private read(rules: readonly CompiledRule[], nowSeconds: number): readonly CounterRow[] {
    const snapshot = new CounterSnapshot(rules.length);
    this.store.read(rules, nowSeconds, snapshot);
    return snapshot.rows;
  }

  private invalidate(): void {
    this.matchCache.clear();
    this.matchCacheSize = 0;
    this.lastSet = undefined;
  }

  /** Matching rules for a lookup, cached per distinct (path, provider, model) until rules change. */
  private matchSet(userPath: string | undefined, provider: string | undefined, model: string | undefined): MatchSet {
    const last = this.lastSet;
    if (last !== undefined && userPath === this.lastUserPath && provider === this.lastProvider && model === this.lastModel) return last;
    const set = this.cachedMatchSet(userPath, provider, model) ?? this.resolveMatchSet(userPath, provider, model);
    this.lastSet = set;
    this.lastUserPath = userPath;
    this.lastProvider = provider;
    this.lastModel = model;
    return set;
  }

  private cachedMatchSet(userPath: string | undefined, provider: string | undefined, model: string | undefined): MatchSet | undefined {
    return this.matchCache.get(userPath ?? NONE)?.get(provider ?? NONE)?.get(model ?? NONE);
  }

  private resolveMatchSet(userPath: string | undefined, provider: string | undefined, model: string | undefined): MatchSet {
    const rules: CompiledRule[] = [];
    if (userPath !== undefined) this.index.collectUserPath(normalizedLowerPath(userPath), rules);
    if (provider !== undefined) {
      const lowerProvider = provider.toLowerCase();
      this.index.collectProvider(lowerProvider, rules);
      if (model !== undefined) this.index.collectModel(lowerProvider, model.toLowerCase(), rules);
    }
    const set = new MatchSet(rules);
    if (this.snapshot.capacity < rules.length) {
      this.snapshot = new CounterSnapshot(rules.length * 2);
    }
    // A flood of distinct paths must not grow memory without bound: start over past the limit.
    if (this.matchCacheSize >= MATCH_CACHE_LIMIT) this.invalidate();
    let byProvider = this.matchCache.get(userPath ?? NONE);
    if (byProvider === undefined) {
      byProvider = new Map();
      this.matchCache.set(userPath ?? NONE, byProvider);
    }
    let byModel = byProvider.get(provider ?? NONE);
    if (byModel === undefined) {
      byModel = new Map();
      byProvider.set(provider ?? NONE, byModel);
    }
    byModel.set(model ?? NONE, set);
    this.matchCacheSize++;
    return set;
  }

  private refusal(rules: readonly CompiledRule[], snapshot: CounterSnapshot, now: number): AdmissionRefusal {
    const found = this.findBreach(rules, snapshot, now);
    if (found === undefined) {
      // The store refused but the engine sees no breach: the two disagree on the arithmetic.
      throw new Error('rate-limit store refused a request without a breached rule');
    }
    return refusalOf(found);
  }

  /** Every breached limit in the snapshot; the one with the longest Retry-After wins (first on a tie). */
  private findBreach(rules: readonly CompiledRule[], snapshot: CounterSnapshot, now: number): FoundBreach | undefined {
    let worst: BreachedLimit | undefined;
    let worstRetry = 0;
    let userPathBreached = false;
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i]!;
      const row = snapshot.rows[i]!;
      if (rule.concurrent) {
        if (row.inFlight >= rule.maxRequests) {
          userPathBreached ||= rule.scope === 'user_path';
          if (1 > worstRetry) {
            worst = rule.requestBreach;
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
          if (retry > worstRetry) {
            worst = rule.requestBreach;
            worstRetry = retry;
          }
        }
      }
      if (rule.maxTokens > 0) {
        const previous = row.tokensPrevious;
        const current = row.tokensCurrent;
        if (row.tokensUsed >= rule.maxTokens) {
          userPathBreached ||= rule.scope === 'user_path';
          const retry = retryAfterSeconds(previous, current, rule.maxTokens, period, elapsed);
          if (retry > worstRetry) {
            worst = rule.tokenBreach;
            worstRetry = retry;
          }
        }
      }
    }
    return worst === undefined ? undefined : { breach: worst, retryAfterSeconds: worstRetry, userPathBreached };
  }
}

function refusalOf(found: FoundBreach): AdmissionRefusal {
  const { breach, retryAfterSeconds: retryAfter, userPathBreached } = found;
  const triple = { limit: breach.cap, remaining: 0, reset: retryAfter };
  const headers: RateLimitHeaderData | undefined =
    breach.kind === 'requests' ? { requests: triple } : breach.kind === 'tokens' ? { tokens: triple } : undefined;
  return { ok: false, breach, retryAfterSeconds: retryAfter, message: breach.message, headers, userPathBreached };
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
