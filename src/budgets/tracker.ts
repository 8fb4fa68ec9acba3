/**
 * The spend of every budget, kept in memory so that admission is one lookup and never waits for
 * storage. A budget's spend is the sum its usage records had in storage at the last refresh plus
 * what this replica has recorded since: the durable records are the truth (they survive restarts
 * and are shared by replicas on one database), the local part keeps this replica exact between
 * refreshes. Refreshes run every few seconds, when a budget's period rolls over and when a budget
 * is added; their reads are batched into one `sumCost` call.
 */
import { formatUsd, roundUsd } from '../shared/money.ts';
import { forEachAncestor } from '../user-path/user-path.ts';
import { periodWindow } from './periods.ts';
import type { SharedSpendAnswer, SpendBudget, SpendClaim } from '../ratelimit/index.ts';
import { budgetIdentity, type BudgetDefinition, type BudgetKey, type BudgetStatus } from './types.ts';

export interface SpendQuery {
  /** This user path and its subtree (case-insensitive). */
  userPathPrefix: string;
  from: Date;
  /** Exclusive. */
  to: Date;
}

/** Where spend is read from: the usage records in storage. */
export interface SpendSource {
  /**
   * Makes every usage record this replica recorded so far durable; false when that failed
   * (storage down), and then the refresh keeps the numbers it has.
   */
  settle(): Promise<boolean>;
  /** The summed cost of the usage records each query selects, in query order. */
  sumCost(queries: readonly SpendQuery[]): Promise<number[]>;
  /** Every valid stored budget (another replica may have written some). */
  budgets(): Promise<BudgetDefinition[]>;
}

export interface BudgetTrackerOptions {
  now: () => number;
  source: SpendSource;
  /** A failed refresh (the numbers it would have replaced stay). */
  onError?: (err: unknown) => void;
  /** Budget reservations are on: statuses show `reserved_usd`. */
  reservations?: boolean;
  /** Where reservations are shared with other replicas (Redis counters): statuses show theirs too. Absent: this replica's alone. */
  ledger?: SharedBudgetLedger | undefined;
}

/** A refusal: the governing budget with the longest wait until its period ends. */
export interface BudgetBreach {
  /** The breached budget's user path and period. */
  userPath: string;
  period: string;
  message: string;
  /** Milliseconds until the breached period ends (at least 1). */
  retryAfterMs: number;
}

/** A request's dollars reserved on the budgets governing it; release() once, when it ends, with what it cost. */
export interface BudgetHold {
  release(costUsd?: number): void;
}

/**
 * The dollar reservations shared by every replica (the Redis counters), as statuses read them. The
 * reservations themselves are made by the counter store, in the step that admits a request (see
 * BudgetClaim).
 */
export interface SharedBudgetLedger {
  /** What every replica holds reserved on each budget (by identity), in dollars, in order; undefined when the ledger cannot answer. */
  reservedOnBudgets(ids: readonly string[]): Promise<number[] | undefined>;
}

export type BudgetReservation = { readonly ok: true; readonly hold: BudgetHold } | { readonly ok: false; readonly breach: BudgetBreach };

interface BudgetState {
  definition: BudgetDefinition;
  /** Dollars reserved by requests admitted and not yet ended (budget reservations on). */
  reserved: number;
  readonly id: string;
  readonly lowerPath: string;
  startMs: number;
  endMs: number;
  /** Spend in storage for the current window at the last refresh. */
  stored: number;
  /** Spend this replica recorded in the current window since that refresh read storage. */
  local: number;
}

/** A cost this replica recorded, kept until a refresh has read it back from storage. */
interface LocalSpend {
  seq: number;
  lowerPath: string;
  timestampMs: number;
  costUsd: number;
}

/** Local spend remembered at most (storage down for long): the oldest goes first. */
const MAX_LOCAL_ENTRIES = 100_000;

export class BudgetTracker {
  readonly #now: () => number;
  readonly #source: SpendSource;
  readonly #onError: (err: unknown) => void;
  readonly #reservations: boolean;
  readonly #ledger: SharedBudgetLedger | undefined;
  readonly #byId = new Map<string, BudgetState>();
  /** Budgets by lowercase user path. */
  readonly #byPath = new Map<string, BudgetState[]>();
  #local: LocalSpend[] = [];
  #seq = 0;
  #refreshing: Promise<void> | undefined;
  #refreshAgain = false;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  /** Counts this replica's budget changes, so a refresh does not undo one with an older listing. */
  #version = 0;

  constructor(options: BudgetTrackerOptions) {
    this.#now = options.now;
    this.#source = options.source;
    this.#onError = options.onError ?? (() => {});
    this.#reservations = options.reservations === true;
    this.#ledger = options.ledger;
  }

  get size(): number {
    return this.#byId.size;
  }

  get(key: BudgetKey): BudgetDefinition | undefined {
    return this.#byId.get(budgetIdentity(key))?.definition;
  }

  /** Replaces every budget; the spend of budgets kept under the same key stays. */
  replaceAll(definitions: readonly BudgetDefinition[]): void {
    this.#version++;
    this.#replaceAll(definitions, true);
  }

  /**
   * Adds a budget or changes its cap (its spend stays). A new budget starts from the local spend
   * this replica knows of and asks for a refresh to learn the rest.
   */
  upsert(definition: BudgetDefinition): void {
    this.#version++;
    this.#put(definition, true);
  }

  /** False when there is no such budget. */
  delete(key: BudgetKey): boolean {
    this.#version++;
    return this.#remove(budgetIdentity(key));
  }

  /**
   * The admission check: a budget governing `userPath` (on it or an ancestor) whose spend has
   * reached its cap refuses the request. With no budget this is one comparison.
   */
  check(userPath: string): BudgetBreach | undefined {
    if (this.#byPath.size === 0) return undefined;
    const now = this.#now();
    let breach: BudgetBreach | undefined;
    this.#forGoverning(userPath.toLowerCase(), (state) => {
      this.#roll(state, now);
      const max = state.definition.maxUsd;
      if (spentOf(state) < max) return;
      const retryAfterMs = Math.max(1, state.endMs - now);
      if (breach !== undefined && breach.retryAfterMs >= retryAfterMs) return;
      const { userPath: path, period } = state.definition;
      breach = { userPath: path, period, message: `budget exceeded for ${path}: ${period} budget of ${formatUsd(max)} reached`, retryAfterMs };
    });
    return breach;
  }

  /**
   * The budget part of an admission with budget reservations on: a claim of `costUsd` on every
   * budget governing `userPath`, for the counter store to check and reserve in the step that
   * admits the request (see BudgetClaim); undefined when no budget governs the path.
   */
  claim(userPath: string, costUsd: number): BudgetClaim | undefined {
    if (this.#byPath.size === 0) return undefined;
    const now = this.#now();
    const states: BudgetState[] = [];
    this.#forGoverning(userPath.toLowerCase(), (state) => {
      this.#roll(state, now);
      states.push(state);
    });
    return states.length === 0 ? undefined : new BudgetClaim(states, costUsd > 0 ? costUsd : 0, this.#now);
  }

  /**
   * What a claim would meet now, from this replica's counts, reserving nothing: the breach of a
   * governing budget without room for `costUsd`, else undefined (the explain dry run).
   */
  wouldReserve(userPath: string, costUsd: number): BudgetBreach | undefined {
    if (this.#byPath.size === 0) return undefined;
    const now = this.#now();
    let breach: BudgetBreach | undefined;
    this.#forGoverning(userPath.toLowerCase(), (state) => {
      this.#roll(state, now);
      if (!fits(state, costUsd)) breach = longest(breach, breachOf(state, costUsd, now));
    });
    return breach;
  }

  /** Adds the cost of a usage record this replica just recorded to the budgets governing it. */
  observe(userPath: string, timestampMs: number, costUsd: number): void {
    if (this.#byPath.size === 0 || !(costUsd > 0)) return;
    const lowerPath = userPath.toLowerCase();
    const now = this.#now();
    let counted = false;
    this.#forGoverning(lowerPath, (state) => {
      this.#roll(state, now);
      if (timestampMs < state.startMs || timestampMs >= state.endMs) return;
      state.local += costUsd;
      counted = true;
    });
    if (!counted) return;
    this.#local.push({ seq: ++this.#seq, lowerPath, timestampMs, costUsd });
    if (this.#local.length > MAX_LOCAL_ENTRIES) this.#local.splice(0, this.#local.length - MAX_LOCAL_ENTRIES);
  }

  /** Every budget's status, sorted by user path, then period length; `reserved_usd` is what this replica holds. */
  status(): BudgetStatus[] {
    return this.#statusOf([...this.#byId.values()]);
  }

  /** The budgets governing `userPath`, root first; `reserved_usd` is what this replica holds. */
  statusFor(userPath: string): BudgetStatus[] {
    return this.#statusOf(this.#governing(userPath));
  }

  /**
   * status() as the admission check sees it: with reservations shared in Redis, `reserved_usd`
   * (and `remaining_usd`) count every replica's, read there; this replica's when Redis cannot
   * answer, or without it.
   */
  sharedStatus(): Promise<BudgetStatus[]> {
    return this.#sharedStatusOf([...this.#byId.values()]);
  }

  /** statusFor() with every replica's reservations, as sharedStatus(). */
  sharedStatusFor(userPath: string): Promise<BudgetStatus[]> {
    return this.#sharedStatusOf(this.#governing(userPath));
  }

  /** Re-reads every budget's spend from storage; resolves when done (never rejects). */
  refresh(): Promise<void> {
    this.requestRefresh();
    return this.#refreshing ?? Promise.resolve();
  }

  /** Starts a refresh, or queues one more after the refresh running now. */
  requestRefresh(): void {
    if (this.#byId.size === 0 || this.#closed) return;
    if (this.#refreshing !== undefined) {
      this.#refreshAgain = true;
      return;
    }
    this.#refreshing = this.#refreshLoop().finally(() => {
      this.#refreshing = undefined;
    });
  }

  /** Refreshes every `intervalMs` until `close()`. */
  startRefreshing(intervalMs: number): void {
    this.#timer = setInterval(() => this.requestRefresh(), intervalMs);
    // The refresh timer must not keep the process alive; shutdown calls close().
    this.#timer.unref();
  }

  /** Stops the timer and waits for a running refresh, so storage can close after. */
  async close(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#closed = true;
    this.#refreshAgain = false;
    await this.#refreshing;
  }

  async #refreshLoop(): Promise<void> {
    do {
      this.#refreshAgain = false;
      try {
        await this.#refreshOnce();
      } catch (err) {
        this.#onError(err);
      }
    } while (this.#refreshAgain);
  }

  async #refreshOnce(): Promise<void> {
    // Local spend recorded up to here is in storage once settle() succeeds; anything recorded
    // later may or may not be in the sums, and stays counted locally until the next refresh (so a
    // replica can briefly count a cost twice, never miss one).
    const mark = this.#seq;
    if (!(await this.#source.settle())) return;
    // Budgets written through other replicas arrive here. A change made on this replica while
    // storage was being read wins: the listing may predate it, and the next refresh sees both.
    const version = this.#version;
    const stored = await this.#source.budgets();
    if (version === this.#version) this.#replaceAll(stored, false);
    const now = this.#now();
    const states = [...this.#byId.values()];
    const starts = states.map((state) => {
      this.#roll(state, now, false);
      return state.startMs;
    });
    const sums = await this.#source.sumCost(
      states.map((s) => ({ userPathPrefix: s.definition.userPath, from: new Date(s.startMs), to: new Date(s.endMs) })),
    );
    this.#local = this.#local.filter((entry) => entry.seq > mark);
    states.forEach((state, i) => {
      // A budget deleted meanwhile, or whose period rolled over while storage answered, waits
      // for the next refresh (a rollover asks for one).
      if (this.#byId.get(state.id) !== state || state.startMs !== starts[i]) return;
      state.stored = sums[i] ?? 0;
      state.local = this.#localSpendOf(state);
    });
  }

  /**
   * Moves a budget into the window containing `now`, its spend starting over; unless the caller
   * is a refresh about to read the new window, a refresh is asked for, as other replicas may
   * already have spent in it.
   */
  #roll(state: BudgetState, now: number, refresh = true): void {
    if (now >= state.startMs && now < state.endMs) return;
    const window = periodWindow(state.definition.period, now);
    state.startMs = window.startMs;
    state.endMs = window.endMs;
    state.stored = 0;
    state.local = this.#localSpendOf(state);
    if (refresh) this.requestRefresh();
  }

  #replaceAll(definitions: readonly BudgetDefinition[], refresh: boolean): void {
    const wanted = new Set(definitions.map(budgetIdentity));
    for (const id of [...this.#byId.keys()]) if (!wanted.has(id)) this.#remove(id);
    for (const definition of definitions) this.#put(definition, refresh);
  }

  #put(definition: BudgetDefinition, refresh: boolean): void {
    const id = budgetIdentity(definition);
    const existing = this.#byId.get(id);
    if (existing !== undefined) {
      existing.definition = definition;
      return;
    }
    const window = periodWindow(definition.period, this.#now());
    const state: BudgetState = { definition, reserved: 0, id, lowerPath: definition.userPath.toLowerCase(), startMs: window.startMs, endMs: window.endMs, stored: 0, local: 0 };
    state.local = this.#localSpendOf(state);
    this.#byId.set(id, state);
    const bucket = this.#byPath.get(state.lowerPath);
    if (bucket === undefined) this.#byPath.set(state.lowerPath, [state]);
    else bucket.push(state);
    if (refresh) this.requestRefresh();
  }

  #localSpendOf(state: BudgetState): number {
    let sum = 0;
    for (const entry of this.#local) {
      if (entry.timestampMs >= state.startMs && entry.timestampMs < state.endMs && governs(state.lowerPath, entry.lowerPath)) sum += entry.costUsd;
    }
    return sum;
  }

  #remove(id: string): boolean {
    const state = this.#byId.get(id);
    if (state === undefined) return false;
    this.#byId.delete(id);
    const bucket = this.#byPath.get(state.lowerPath);
    if (bucket !== undefined) {
      bucket.splice(bucket.indexOf(state), 1);
      if (bucket.length === 0) this.#byPath.delete(state.lowerPath);
    }
    return true;
  }

  /** Calls `fn` for the budgets on `lowerPath` and each of its ancestors, root first. */
  #forGoverning(lowerPath: string, fn: (state: BudgetState) => void): void {
    if (this.#byPath.size === 0) return;
    forEachAncestor(lowerPath, (path) => {
      const bucket = this.#byPath.get(path);
      if (bucket !== undefined) for (const state of bucket) fn(state);
    });
  }

  #governing(userPath: string): BudgetState[] {
    const states: BudgetState[] = [];
    this.#forGoverning(userPath.toLowerCase(), (state) => states.push(state));
    return states;
  }

  async #sharedStatusOf(states: readonly BudgetState[]): Promise<BudgetStatus[]> {
    const ledger = this.#ledger;
    if (ledger === undefined || !this.#reservations || states.length === 0) return this.#statusOf(states);
    const reserved = await ledger.reservedOnBudgets(states.map((state) => state.id));
    if (reserved === undefined) return this.#statusOf(states);
    const shared = new Map(states.map((state, i) => [state, reserved[i] ?? 0]));
    return this.#statusOf(states, (state) => shared.get(state) ?? state.reserved);
  }

  /** `reservedOf`: what is reserved on a budget, this replica's count by default. */
  #statusOf(states: readonly BudgetState[], reservedOf: (state: BudgetState) => number = (state) => state.reserved): BudgetStatus[] {
    const now = this.#now();
    for (const state of states) this.#roll(state, now);
    const sorted = [...states].sort(
      (a, b) => compareText(a.lowerPath, b.lowerPath) || (a.endMs - a.startMs) - (b.endMs - b.startMs) || compareText(a.definition.period, b.definition.period),
    );
    return sorted.map((state) => {
      const { definition } = state;
      const spent = spentOf(state);
      const reserved = reservedOf(state);
      return {
        user_path: definition.userPath,
        source: definition.source,
        period_label: definition.period,
        period_seconds: (state.endMs - state.startMs) / 1000,
        max_usd: definition.maxUsd,
        spent_usd: spent,
        ...(this.#reservations && { reserved_usd: roundUsd(reserved) }),
        remaining_usd: Math.max(0, roundUsd(definition.maxUsd - spent - reserved)),
        period_start: formatTime(state.startMs),
        period_end: formatTime(state.endMs),
        created_at: formatTime(definition.createdAt.getTime()),
        updated_at: formatTime(definition.updatedAt.getTime()),
      };
    });
  }
}

/**
 * A request's dollars to reserve on the budgets governing it, at the price of the target one
 * admission sends it to. The counter store checks and reserves them in the same step as that
 * admission's rules (SpendClaim, src/ratelimit/store.ts) and tells the claim what it decided:
 * reserved here (memory, or Redis unreachable) or in Redis for every replica, or refused by a
 * budget. result() then answers the hold to release when the request ends, or the breach.
 */
export class BudgetClaim implements SpendClaim {
  readonly costUsd: number;
  readonly budgets: readonly SpendBudget[];
  readonly #states: readonly BudgetState[];
  readonly #now: () => number;
  /** What the store decided: the budget that refused (its index), or the hold; undefined: not yet. */
  #decided: { readonly refused: number } | { readonly settle: ((costUsd: number) => void) | undefined } | undefined;

  constructor(states: readonly BudgetState[], costUsd: number, now: () => number) {
    this.#states = states;
    this.#now = now;
    this.costUsd = costUsd;
    this.budgets = states.map((state) => ({ id: state.id, startMs: state.startMs, endMs: state.endMs, maxUsd: state.definition.maxUsd, spentUsd: spentOf(state) }));
  }

  reserveHere(): number {
    if (this.#decided !== undefined) return 'refused' in this.#decided ? this.#decided.refused : -1;
    // Of the budgets without room, the one with the longest wait refuses (the first on a tie).
    let refused = -1;
    this.#states.forEach((state, i) => {
      if (!fits(state, this.costUsd) && (refused < 0 || state.endMs > this.#states[refused]!.endMs)) refused = i;
    });
    if (refused >= 0) this.#decided = { refused };
    else this.#hold(undefined);
    return refused;
  }

  sharedAnswer(answer: SharedSpendAnswer): void {
    if (this.#decided !== undefined) return;
    if (answer.ok) this.#hold(answer.settle);
    else this.#decided = { refused: answer.index };
  }

  /**
   * The hold, or the breach of the budget that refused. A claim no store was asked about (rate
   * limits off) or that no store could answer (the shared counters unreachable, under `allow`) is
   * decided now, on this replica's counts.
   */
  result(): BudgetReservation {
    if (this.#decided === undefined) this.reserveHere();
    const decided = this.#decided!;
    if ('refused' in decided) return { ok: false, breach: breachOf(this.#states[decided.refused]!, this.costUsd, this.#now()) };
    const { settle } = decided;
    const cost = this.costUsd;
    const states = this.#states;
    return {
      ok: true,
      hold: once((actualUsd) => {
        // A budget replaced since (deleted, re-added) starts from nothing reserved.
        for (const state of states) state.reserved = Math.max(0, state.reserved - cost);
        settle?.(actualUsd ?? 0);
      }),
    };
  }

  /** Held on this replica's counts too, shared or not: its statuses show it, and it decides alone while Redis is away. */
  #hold(settle: ((costUsd: number) => void) | undefined): void {
    for (const state of this.#states) state.reserved += this.costUsd;
    this.#decided = { settle };
  }
}

/** Whether a budget has room for `costUsd` beside its spend and what is reserved on it. */
function fits(state: BudgetState, costUsd: number): boolean {
  const max = state.definition.maxUsd;
  const spent = spentOf(state);
  return spent < max && roundUsd(spent + state.reserved + costUsd) <= max;
}

/** The refusal of a budget without room for `costUsd`; its message says so when the cost alone exceeds the cap. */
function breachOf(state: BudgetState, costUsd: number, now: number): BudgetBreach {
  const { userPath, period, maxUsd } = state.definition;
  const needs = costUsd > maxUsd ? ` (this request needs an estimated ${formatUsd(costUsd)})` : '';
  return { userPath, period, message: `budget exceeded for ${userPath}: ${period} budget of ${formatUsd(maxUsd)} reached${needs}`, retryAfterMs: Math.max(1, state.endMs - now) };
}

/** Of two breaches, the one with the longer wait (the first on a tie). */
function longest(a: BudgetBreach | undefined, b: BudgetBreach): BudgetBreach {
  return a !== undefined && a.retryAfterMs >= b.retryAfterMs ? a : b;
}

/** A hold released once, whatever calls it after. */
function once(release: (costUsd?: number) => void): BudgetHold {
  let released = false;
  return {
    release: (costUsd) => {
      if (released) return;
      released = true;
      release(costUsd);
    },
  };
}

function spentOf(state: BudgetState): number {
  return roundUsd(state.stored + state.local);
}

/** A budget on `budgetPath` governs `path` when it is the path or an ancestor (segment-wise). */
function governs(budgetPath: string, path: string): boolean {
  return budgetPath === '/' || path === budgetPath || path.startsWith(`${budgetPath}/`);
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** RFC 3339 UTC with whole seconds, like the rate-limit status records. */
function formatTime(epochMs: number): string {
  return new Date(epochMs).toISOString().slice(0, 19) + 'Z';
}
