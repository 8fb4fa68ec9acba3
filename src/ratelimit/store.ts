/**
 * The counter store: the one interface between the engine and wherever counters live (this
 * process's memory, or Redis shared by several gateways; the adapters are in `src/counters`).
 *
 * The engine hands the store the whole list of rules matching a request; the store rolls their
 * windows, checks every cap and, only if none is breached, counts the request in every window
 * and takes every concurrency slot, as one atomic step (for a shared store, one server-side
 * script). It reports the rolled raw counters and the clock it used, so the engine computes
 * Retry-After, headers and messages itself: the store never needs to know about them.
 *
 * Every call that reads or changes counters may answer synchronously or with a promise
 * (`MaybePromise`): the memory store answers at once, so a caller that awaits only when it got a
 * promise never yields on the in-memory hot path. Every answer is fresh: callers may keep it.
 */
import type { LearnedHandle, LearnedReading, LearnedUpdate, LearnedVerdict } from './learned.ts';
import { slidingEstimate } from './window.ts';

/** A value now, or later. Callers should await only when they got a promise. */
export type MaybePromise<T> = T | Promise<T>;

/** Opaque handle for one rule's counter, obtained once when a rule is compiled. */
export interface CounterHandle {
  /** The rule key (see ruleKeyString): scope, lowercase subject and period, NUL-separated. */
  readonly key: string;
}

/** What a store needs to know about one matching rule to check and count it. */
export interface CounterRule {
  readonly counter: CounterHandle;
  /** 0 for a concurrency rule. */
  readonly periodSeconds: number;
  /** Request cap (in-flight cap when concurrent); 0 = none. */
  readonly maxRequests: number;
  /** Token cap to enforce; 0 = none or not enforced. */
  readonly maxTokens: number;
}

/** One rule's counters as a store read them. Only the fields of the rule's kind are filled. */
export interface CounterRow {
  /** Windowed rules: start of the fixed window containing the reading's time, in seconds. */
  readonly windowStart: number;
  readonly requestsPrevious: number;
  readonly requestsCurrent: number;
  readonly tokensPrevious: number;
  readonly tokensCurrent: number;
  /** The sliding-window estimates of the counts above (see window.ts): what the caps are checked against. */
  readonly requestsUsed: number;
  readonly tokensUsed: number;
  /**
   * Windowed rules: tokens reserved by requests admitted and not yet ended (reservations on), on
   * top of `tokensUsed`; 0 otherwise.
   */
  readonly tokensReserved: number;
  /** Concurrency rules: requests in flight. */
  readonly inFlight: number;
}

/** The counters of a list of rules at one moment: row i belongs to rule i. */
export interface CounterReading {
  /** The store's clock, in whole seconds: the windows are rolled to it. */
  readonly nowSeconds: number;
  readonly rows: readonly CounterRow[];
}

/**
 * The slots one admission took, as the store that took them identifies them (a generation, a
 * lease id). The engine only hands it back to `release`.
 */
export type SlotLease = object;

/** A store's answer to an admission. */
export type AdmitOutcome = CounterAdmission | StoreUnavailable;

export interface CounterAdmission extends CounterReading {
  /** Admitted: counted in every window, every slot taken. Refused: nothing counted. */
  readonly status: 'admitted' | 'refused';
  /** Set when admitted with concurrency rules among the rules, or with tokens reserved: what release() and settle() take. */
  readonly lease: SlotLease | undefined;
  /** Set when the admission's learned capacity saturates its target (the admission is then refused). */
  readonly learned?: LearnedVerdict | undefined;
  /** True when the rules admitted but a budget of the admission's SpendClaim had no room (the admission is then refused). */
  readonly spendRefused?: boolean | undefined;
}

/** A budget in its current period, as the gateway asking knows it. */
export interface SpendBudget {
  /** The budget's identity (lowercase user path, NUL, period label). */
  readonly id: string;
  readonly startMs: number;
  readonly endMs: number;
  readonly maxUsd: number;
  /** The spend the gateway knows of in the period. */
  readonly spentUsd: number;
}

/**
 * Dollars an admission reserves on the budgets governing it (budget reservations on), checked and
 * reserved by the store in the same atomic step as the rules: after the rules' verdict and before
 * anything is counted, so a budget without room refuses the admission and nothing is written (a
 * breached rule wins: the budgets are then not looked at). The budget tracker makes it
 * (src/budgets/tracker.ts); the engine only hands it to the store, and the store tells it what it
 * decided through one of the two methods below.
 */
export interface SpendClaim {
  /** Dollars reserved on every budget; 0 checks the budgets and reserves nothing. */
  readonly costUsd: number;
  /** At least one. */
  readonly budgets: readonly SpendBudget[];
  /**
   * Checks and reserves on the asking gateway's own counts, at once: what a store without shared
   * budgets does (memory, and Redis while it cannot be reached). Answers the index of a budget
   * without room (nothing reserved), or -1 when reserved.
   */
  reserveHere(): number;
  /**
   * A shared store checked the budgets against every gateway's reservations: reserved there
   * (`settle` ends the reservation with what the request cost), or refused by budget `index`.
   */
  sharedAnswer(answer: SharedSpendAnswer): void;
}

export type SharedSpendAnswer = { readonly ok: true; settle(costUsd: number): void } | { readonly ok: false; readonly index: number };

/**
 * The learned capacity an admission checks besides its rules (see learned.ts): the record of the
 * target's (provider, model), judged at `nowMs` on the engine's clock (a shared store uses its own).
 */
export interface LearnedCheck {
  readonly handle: LearnedHandle;
  readonly nowMs: number;
}

/**
 * The store could not answer (a shared store unreachable or too slow). `fallback` is what the
 * operator chose for that case: admit uncounted, or refuse.
 */
export interface StoreUnavailable {
  readonly status: 'unavailable';
  readonly fallback: 'allow' | 'deny';
  /** Why, for the client (a `deny` answer carries it). */
  readonly reason: string;
}

/**
 * A per-child rule keeps counters for at most `limit` children (rate_limits.max_children) and
 * every one it keeps is active (counts in a window that still matters, or slots in flight): a new
 * child cannot be counted until one goes idle.
 */
export interface ChildrenFull {
  readonly full: true;
  readonly limit: number;
  /** Whole seconds (>= 1) until the least recently used child goes idle with no new traffic. */
  readonly retryAfterSeconds: number;
}

/** One child's counter of a per-child rule, as listed for `expand=children`. */
export interface ChildReading {
  /** The lowercase child segment (`alice` for `/team/alice` under `/team`). */
  readonly child: string;
  readonly row: CounterRow;
}

/** Raised when the counters cannot be reached: an admission under `deny`, or a reset. */
export class CounterStoreUnavailableError extends Error {
  constructor(message = 'rate-limit counters are unavailable') {
    super(message);
    this.name = 'CounterStoreUnavailableError';
  }
}

/**
 * Keys are the engine's counter keys (see counterKeyOf in rules.ts). The key of a per-child
 * rule's own counter ends with the separator; its children's keys are that key followed by the
 * child segment, and `retire`, `clear` and `reset` of the own key act on every child too.
 */
export interface CounterStore {
  /** The handle for a rule's counter key, created on first use. Called when rules change, never per request. */
  counter(key: string): CounterHandle;
  /**
   * The counter of direct child `child` (a lowercase path segment) of the per-child rule whose
   * own counter is `ownKey`, created on first use; or, when the rule already keeps as many
   * children as it may and all of them are active, why not. `held` is the handle this call
   * answered before for the same child: while the store still keeps that counter it answers
   * `held` itself, so the caller can keep what it derived from it. A store that drops idle
   * children may answer a new handle for a child it dropped.
   */
  childCounter(ownKey: string, periodSeconds: number, child: string, nowSeconds: number, held: CounterHandle | undefined): CounterHandle | ChildrenFull;
  /**
   * The counter of a child to read, without creating or touching it; undefined when the store
   * keeps none yet; when it keeps none and `childCounter` would refuse to make one now (no room),
   * why not.
   */
  findChild(ownKey: string, periodSeconds: number, child: string, nowSeconds: number): CounterHandle | ChildrenFull | undefined;
  /**
   * The children of the per-child rule `ownKey` whose counters hold anything that still matters
   * now (a count in a window the sliding estimate weighs, or a slot in flight), read without
   * changing anything, sorted by child. A shared store lists every gateway's. Never rejects.
   */
  readChildren(ownKey: string, periodSeconds: number, nowSeconds: number): MaybePromise<ChildReading[]>;
  /**
   * This gateway no longer enforces the rule (its rules were replaced). A store forgets what it
   * keeps for the rule locally; counters shared with other gateways are left as they are.
   */
  retire(key: string): void;
  /**
   * The rule was deleted or moved: its counters restart, for every gateway sharing them. Live
   * slots on it become no-ops to release.
   */
  clear(key: string): MaybePromise<void>;
  /** Zero one rule's counters. Live slots on it become no-ops to release. Rejects with CounterStoreUnavailableError when it cannot. */
  reset(key: string): MaybePromise<void>;
  /** Zero every counter. Rejects with CounterStoreUnavailableError when it cannot. */
  resetAll(): MaybePromise<void>;
  /**
   * Atomically: check every rule and, with `learned`, the target's learned capacity; if no rule is
   * breached and the target is not saturated, increment every windowed rule's request count and
   * take every concurrency slot. Either way, report each rule's counters (after this request was
   * counted, when it was) and the learned verdict when it saturates. With `reserve` (> 0 tokens),
   * a rule with a token cap is breached when its tokens used, plus those reserved, plus `reserve`
   * exceed the cap, and an admission reserves `reserve` tokens on each such rule under its lease
   * until `settle` (or the lease expires, for a shared store whose gateway died). With `spend`, the
   * rules' admission is also the budgets': see SpendClaim (`rules` may then be empty, and the step
   * is still taken for the budgets). `nowSeconds` is the engine's clock; a shared store uses its own
   * and says which in the answer. Never rejects: an unreachable store answers `unavailable`, having
   * told `spend` nothing.
   */
  tryAdmit(rules: readonly CounterRule[], nowSeconds: number, learned?: LearnedCheck, reserve?: number, spend?: SpendClaim): MaybePromise<AdmitOutcome>;
  /** Give back the slots `lease` holds on these (concurrency) rules; ignored where the counter was reset since. */
  release(rules: readonly CounterRule[], lease: SlotLease): void;
  /**
   * The request that reserved `reserved` tokens under `lease` on these (token) rules ended having
   * used `tokens`: in one atomic step, the reservation leaves each rule and `tokens` are added to
   * its current window. A reservation on a counter reset since is gone already; the tokens still
   * count. Never rejects.
   */
  settle(rules: readonly CounterRule[], lease: SlotLease, reserved: number, tokens: number, nowSeconds: number): MaybePromise<void>;
  /**
   * Calls `listener` with the counter keys of slots given back through this store, one key per
   * slot (requests waiting for capacity are woken by it).
   */
  onReleased(listener: (keys: readonly string[]) => void): void;
  /** Add tokens to each rule's current token window. Never rejects. */
  addTokens(rules: readonly CounterRule[], tokens: number, nowSeconds: number): MaybePromise<void>;
  /** The rules' counters, without changing anything observable. Never rejects. */
  read(rules: readonly CounterRule[], nowSeconds: number): MaybePromise<CounterReading>;
  /** The handle of a (provider, model)'s learned capacity. Called when match sets are made, never per request. */
  learnedCounter(provider: string, model: string): LearnedHandle;
  /**
   * Merges what an answer taught into the target's record (see mergeLearned), which expires at its
   * last reset or cooldown end. A shared store may coalesce the updates of a burst into one write,
   * but writes one that saturates the target at once. Never throws.
   */
  learn(handle: LearnedHandle, update: LearnedUpdate): void;
  /**
   * The learned records of these targets (those it has), or of every target when `handles` is
   * undefined, read without changing them. `nowMs` is the engine's clock. Never rejects.
   */
  readLearned(handles: readonly LearnedHandle[] | undefined, nowMs: number): MaybePromise<LearnedReading>;
}

/** A windowed rule's row from its window (already rolled to `nowSeconds`), with the sliding estimates. */
export function windowedRow(
  windowStart: number,
  requestsPrevious: number,
  requestsCurrent: number,
  tokensPrevious: number,
  tokensCurrent: number,
  periodSeconds: number,
  nowSeconds: number,
  tokensReserved = 0,
): CounterRow {
  const elapsed = nowSeconds - windowStart;
  return {
    windowStart,
    requestsPrevious,
    requestsCurrent,
    tokensPrevious,
    tokensCurrent,
    requestsUsed: slidingEstimate(requestsPrevious, requestsCurrent, periodSeconds, elapsed),
    tokensUsed: slidingEstimate(tokensPrevious, tokensCurrent, periodSeconds, elapsed),
    tokensReserved,
    inFlight: 0,
  };
}

/** Whether a row holds anything the rule still weighs: a count in a window that matters, or a slot. */
export function rowMatters(row: CounterRow): boolean {
  return row.inFlight > 0 || row.tokensReserved > 0 || row.requestsPrevious + row.requestsCurrent + row.tokensPrevious + row.tokensCurrent > 0;
}

/** A concurrency rule's row. */
export function concurrencyRow(inFlight: number): CounterRow {
  return { windowStart: 0, requestsPrevious: 0, requestsCurrent: 0, tokensPrevious: 0, tokensCurrent: 0, requestsUsed: 0, tokensUsed: 0, tokensReserved: 0, inFlight };
}
