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
  /** Where reservations are shared with other replicas (Redis counters); absent: this replica's alone. */
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

/** A budget in its current period, as a shared ledger of reservations checks it. */
export interface SharedBudget {
  /** The budget's identity (lowercase path, NUL, period). */
  readonly id: string;
  readonly startMs: number;
  readonly endMs: number;
  readonly maxUsd: number;
  /** The spend this gateway knows of. */
  readonly spentUsd: number;
}

export type SharedBudgetAnswer = { readonly ok: true; settle(costUsd: number): void } | { readonly ok: false; readonly index: number };

/**
 * Dollar reservations shared by every replica (the Redis counters): budgets hold across replicas,
 * as each one's settled costs are seen by the others before their storage refresh does.
 */
export interface SharedBudgetLedger {
  /** Reserves on every budget, or answers which is reached; undefined when the ledger cannot answer (then this replica's count decides). */
  reserveBudgets(budgets: readonly SharedBudget[], costUsd: number): Promise<SharedBudgetAnswer | undefined>;
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
   * The admission check with budget reservations on: a budget governing `userPath` refuses when
   * its spend, what is reserved on it and `costUsd` exceed its cap; if none does, `costUsd` is
   * reserved on every one until the hold is released.
   */
  reserve(userPath: string, costUsd: number): BudgetReservation | Promise<BudgetReservation> {
    if (this.#byPath.size === 0) return NOTHING_HELD;
    const now = this.#now();
    const states: BudgetState[] = [];
    let breach: BudgetBreach | undefined;
    this.#forGoverning(userPath.toLowerCase(), (state) => {
      this.#roll(state, now);
      states.push(state);
      if (!fits(state, costUsd)) breach = longest(breach, breachOf(state, costUsd, now));
    });
    if (breach !== undefined) return { ok: false, breach };
    if (states.length === 0 || !(costUsd > 0)) return NOTHING_HELD;
    // Held here too: this replica's statuses show it, and it decides alone while the ledger is away.
    for (const state of states) state.reserved += costUsd;
    const local = (): void => {
      // A budget replaced since (deleted, re-added) starts from nothing reserved.
      for (const state of states) state.reserved = Math.max(0, state.reserved - costUsd);
    };
    if (this.#ledger === undefined) return { ok: true, hold: once(local) };
    const shared = states.map((state): SharedBudget => ({ id: state.id, startMs: state.startMs, endMs: state.endMs, maxUsd: state.definition.maxUsd, spentUsd: spentOf(state) }));
    return this.#ledger.reserveBudgets(shared, costUsd).then((answer): BudgetReservation => {
      if (answer === undefined) return { ok: true, hold: once(local) };
      if (!answer.ok) {
        local();
        return { ok: false, breach: breachOf(states[answer.index]!, costUsd, this.#now()) };
      }
      return {
        ok: true,
        hold: once((cost) => {
          local();
          answer.settle(cost ?? 0);
        }),
      };
    });
  }

  /**
   * What reserve() would answer now, from this replica's counts, reserving nothing: the breach of
   * a governing budget without room for `costUsd`, else undefined (the explain dry run).
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

  /** Every budget's status, sorted by user path, then period length. */
  status(): BudgetStatus[] {
    return this.#statusOf([...this.#byId.values()]);
  }

  /** The budgets governing `userPath`, root first. */
  statusFor(userPath: string): BudgetStatus[] {
    const states: BudgetState[] = [];
    this.#forGoverning(userPath.toLowerCase(), (state) => states.push(state));
    return this.#statusOf(states);
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

  #statusOf(states: readonly BudgetState[]): BudgetStatus[] {
    const now = this.#now();
    for (const state of states) this.#roll(state, now);
    const sorted = [...states].sort(
      (a, b) => compareText(a.lowerPath, b.lowerPath) || (a.endMs - a.startMs) - (b.endMs - b.startMs) || compareText(a.definition.period, b.definition.period),
    );
    return sorted.map((state) => {
      const { definition } = state;
      const spent = spentOf(state);
      return {
        user_path: definition.userPath,
        source: definition.source,
        period_label: definition.period,
        period_seconds: (state.endMs - state.startMs) / 1000,
        max_usd: definition.maxUsd,
        spent_usd: spent,
        ...(this.#reservations && { reserved_usd: roundUsd(state.reserved) }),
        remaining_usd: Math.max(0, roundUsd(definition.maxUsd - spent - state.reserved)),
        period_start: formatTime(state.startMs),
        period_end: formatTime(state.endMs),
        created_at: formatTime(definition.createdAt.getTime()),
        updated_at: formatTime(definition.updatedAt.getTime()),
      };
    });
  }
}

const NOTHING_HELD: BudgetReservation = Object.freeze({ ok: true as const, hold: Object.freeze({ release(): void {} }) });

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
