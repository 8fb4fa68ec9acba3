/**
 * Counters in this process's memory: the default store, and the fallback of the Redis store
 * while Redis is unreachable. Every call answers synchronously, so the hot path never awaits.
 *
 * Per-child rules keep one counter per child in a table of their own (ChildTable), bounded by
 * `maxChildren`: children whose counts no longer matter are dropped, least recently used first.
 * With a journal (persistence.ts), the store also notes which windows changed and which counters
 * were reset or dropped, so that they can be saved off the request path.
 */
import {
  childCounterKey,
  concurrencyRow,
  learnedKey,
  mergeLearned,
  rowMatters,
  slidingEstimate,
  verdictOf,
  windowedRow,
  windowStart,
  type AdmitOutcome,
  type ChildReading,
  type ChildrenFull,
  type CounterHandle,
  type CounterReading,
  type CounterRow,
  type CounterRule,
  type CounterStore,
  type LearnedCheck,
  type LearnedHandle,
  type LearnedReading,
  type LearnedRecord,
  type LearnedUpdate,
  type LearnedVerdict,
  type MaybePromise,
  type SlotLease,
  type SpendClaim,
} from '../ratelimit/index.ts';

/** The request and token windows of one counter, as saved and restored (never its slots). */
export interface CounterWindows {
  /** The engine's counter key. */
  readonly key: string;
  readonly periodSeconds: number;
  readonly windowStart: number;
  readonly requestsPrevious: number;
  readonly requestsCurrent: number;
  readonly tokensPrevious: number;
  readonly tokensCurrent: number;
}

/**
 * Counters that were reset, deleted or dropped: their saved windows must go. `withChildren`: the
 * key is a per-child rule's own counter, and every child's goes too.
 */
export type CounterRemoval = { readonly all: true } | { readonly all: false; readonly key: string; readonly withChildren: boolean };

/** Where the store reports removals (persistence.ts). */
export interface CounterJournal {
  /**
   * Counters were reset or deleted. The store answers the reset or delete with the journal's
   * answer, so an admin operation waits until the saved windows are gone too.
   */
  removed(removal: CounterRemoval): MaybePromise<void>;
  /** Counters were dropped (idle children, rules no longer enforced here): their saved windows go with the next save. */
  dropped(removal: CounterRemoval): void;
}

export interface MemoryCounterStoreOptions {
  /** Most children a per-child rule keeps counters for (rate_limits.max_children). Default 100,000. */
  maxChildren?: number;
  /** Set to keep track of changed windows and removals, for saving them. */
  journal?: CounterJournal;
}

export const DEFAULT_MAX_CHILDREN = 100_000;

/**
 * Most (provider, model) records of learned capacity kept; past it the least recently written one
 * goes. Targets are the configured models, but a passthrough body may name any model.
 */
export const MAX_LEARNED = 10_000;

/** One target's learned capacity, with whose it is. */
interface LearnedEntry {
  readonly provider: string;
  readonly model: string;
  readonly record: LearnedRecord;
}

/** One rule's counters. A rule has both a request and a token window on the same clock. */
class MemoryCounter implements CounterHandle {
  readonly key: string;
  windowStart = 0;
  requestsPrevious = 0;
  requestsCurrent = 0;
  tokensPrevious = 0;
  tokensCurrent = 0;
  /** Tokens reserved by admitted requests not yet settled (reservations on). */
  tokensReserved = 0;
  inFlight = 0;
  /** The store generation of the last reset: slots taken in earlier generations are not given back. */
  resetGeneration = 0;
  /**
   * The second the three fields below were computed for. Within a second only the current
   * counts move, so the window arithmetic (two divisions) runs once a second, not per request.
   */
  private rolledAt = -1;
  /** Start of the window containing rolledAt (older than windowStart if the clock stepped back). */
  rolledStart = 0;
  /** The previous window's share of the sliding estimates at rolledAt (see window.ts). */
  requestsCarried = 0;
  tokensCarried = 0;
  /** A child's counter: the table keeping it, and its neighbours in the table's use order. */
  table: ChildTable | undefined = undefined;
  older: MemoryCounter | undefined = undefined;
  newer: MemoryCounter | undefined = undefined;
  /** In the table's use order (a child with slots in flight is not: it cannot be dropped). */
  listed = false;
  /** The second of its last move in the use order. */
  touchedAt = -1;
  /** No longer kept by the store (reset, deleted, or dropped while idle): handles to it are stale. */
  dropped = false;
  /** With a journal: the windows changed since they were last taken, and their period. */
  dirty = false;
  periodSeconds = 0;

  constructor(key: string) {
    this.key = key;
  }

  clear(generation: number): void {
    this.windowStart = 0;
    this.requestsPrevious = 0;
    this.requestsCurrent = 0;
    this.tokensPrevious = 0;
    this.tokensCurrent = 0;
    this.tokensReserved = 0;
    this.inFlight = 0;
    this.resetGeneration = generation;
    this.rolledAt = -1;
  }

  /**
   * Advance to the window containing now: one period on shifts current to previous, more clears
   * both. The estimates are then requestsCarried + requestsCurrent, tokensCarried + tokensCurrent.
   */
  roll(nowSeconds: number, periodSeconds: number): void {
    if (nowSeconds === this.rolledAt) return;
    const start = windowStart(nowSeconds, periodSeconds);
    if (start > this.windowStart) {
      if (start - this.windowStart === periodSeconds) {
        this.requestsPrevious = this.requestsCurrent;
        this.tokensPrevious = this.tokensCurrent;
      } else {
        this.requestsPrevious = 0;
        this.tokensPrevious = 0;
      }
      this.requestsCurrent = 0;
      this.tokensCurrent = 0;
      this.windowStart = start;
    }
    // If the wall clock stepped back, keep the newer window's counts rather than un-rolling.
    const elapsed = nowSeconds - start;
    this.rolledAt = nowSeconds;
    this.rolledStart = start;
    this.requestsCarried = slidingEstimate(this.requestsPrevious, 0, periodSeconds, elapsed);
    this.tokensCarried = slidingEstimate(this.tokensPrevious, 0, periodSeconds, elapsed);
  }

  /** Saved windows back in place (persistence.ts); the next use rolls them to its time. */
  restore(saved: CounterWindows): void {
    this.windowStart = saved.windowStart;
    this.requestsPrevious = saved.requestsPrevious;
    this.requestsCurrent = saved.requestsCurrent;
    this.tokensPrevious = saved.tokensPrevious;
    this.tokensCurrent = saved.tokensCurrent;
    this.periodSeconds = saved.periodSeconds;
    this.rolledAt = -1;
  }

  /** The row of a windowed counter just rolled to now. */
  windowedRow(): CounterRow {
    return {
      windowStart: this.rolledStart,
      requestsPrevious: this.requestsPrevious,
      requestsCurrent: this.requestsCurrent,
      tokensPrevious: this.tokensPrevious,
      tokensCurrent: this.tokensCurrent,
      requestsUsed: this.requestsCarried + this.requestsCurrent,
      tokensUsed: this.tokensCarried + this.tokensCurrent,
      tokensReserved: this.tokensReserved,
      inFlight: 0,
    };
  }
}

/**
 * The children of one per-child rule, at most `limit`. A child's counter is dropped once it is
 * idle: its windows are over (two periods after the window of its last request, when the sliding
 * estimate no longer weighs it) and it holds no slot. Children are kept in the order of their last
 * use; as the least recently used one is the first whose windows end, checking the oldest one
 * finds any idle child in O(1). Children holding slots (concurrent rules) leave that order until
 * their last slot comes back.
 */
class ChildTable {
  readonly ownKey: string;
  readonly periodSeconds: number;
  readonly limit: number;
  readonly byChild = new Map<string, MemoryCounter>();
  /** Least and most recently used of the children in use order. */
  oldest: MemoryCounter | undefined = undefined;
  newest: MemoryCounter | undefined = undefined;

  constructor(ownKey: string, periodSeconds: number, limit: number) {
    this.ownKey = ownKey;
    this.periodSeconds = periodSeconds;
    this.limit = limit;
  }

  /**
   * A new child's counter as the most recently used. `generation`: the store's now, so that no
   * lease taken before (on a counter this one replaces) gives back a slot of this one.
   */
  add(child: string, generation: number, nowSeconds: number): MemoryCounter {
    const counter = new MemoryCounter(childCounterKey(this.ownKey, child));
    counter.resetGeneration = generation;
    counter.touchedAt = nowSeconds;
    // In use from now: empty windows, but not over (else the child would be idle before its first count).
    if (this.periodSeconds > 0) counter.windowStart = windowStart(nowSeconds, this.periodSeconds);
    counter.table = this;
    this.byChild.set(child, counter);
    this.link(counter);
    return counter;
  }

  /**
   * Marks a use at `now`. The order is kept to the second, as idleness is decided: a child used
   * again within the second it last moved is already behind every child used before that second.
   */
  touch(counter: MemoryCounter, now: number): void {
    if (counter.touchedAt === now) return;
    counter.touchedAt = now;
    if (!counter.listed || counter === this.newest) return;
    this.unlink(counter);
    this.link(counter);
  }

  /** Its first slot is taken: out of the use order until the last one comes back. */
  pin(counter: MemoryCounter): void {
    if (counter.listed) this.unlink(counter);
  }

  unpin(counter: MemoryCounter): void {
    if (!counter.listed) this.link(counter);
  }

  /** Whether the oldest child in use order is idle at `now`; for concurrent rules every listed child is. */
  oldestIdle(now: number): boolean {
    const oldest = this.oldest;
    return oldest !== undefined && (this.periodSeconds === 0 || oldest.windowStart + 2 * this.periodSeconds <= now);
  }

  /** The answer when no child is idle: how long until the oldest one is. */
  full(now: number): ChildrenFull {
    const oldest = this.oldest;
    const retryAfterSeconds = this.periodSeconds === 0 || oldest === undefined ? 1 : Math.max(1, oldest.windowStart + 2 * this.periodSeconds - now);
    return { full: true, limit: this.limit, retryAfterSeconds };
  }

  /** Takes a child out of the table; its counter is marked stale. */
  remove(counter: MemoryCounter): void {
    if (counter.listed) this.unlink(counter);
    this.byChild.delete(counter.key.slice(this.ownKey.length));
    counter.table = undefined;
    counter.dropped = true;
  }

  private link(counter: MemoryCounter): void {
    counter.older = this.newest;
    counter.newer = undefined;
    if (this.newest !== undefined) this.newest.newer = counter;
    else this.oldest = counter;
    this.newest = counter;
    counter.listed = true;
  }

  private unlink(counter: MemoryCounter): void {
    if (counter.older !== undefined) counter.older.newer = counter.newer;
    else this.oldest = counter.newer;
    if (counter.newer !== undefined) counter.newer.older = counter.older;
    else this.newest = counter.older;
    counter.older = undefined;
    counter.newer = undefined;
    counter.listed = false;
  }
}

/** The generation an admission took its slots in (see MemoryCounter.resetGeneration). */
class GenerationLease {
  readonly generation: number;
  constructor(generation: number) {
    this.generation = generation;
  }
}

export class MemoryCounterStore implements CounterStore {
  private readonly counters = new Map<string, MemoryCounter>();
  /** The children of each per-child rule, by the key of the rule's own counter. */
  private readonly tables = new Map<string, ChildTable>();
  private readonly maxChildren: number;
  private readonly journal: CounterJournal | undefined;
  /** With a journal: the counters whose windows changed since takeChangedWindows(). */
  private changed: MemoryCounter[] = [];
  /** Bumped by every reset and drop; a lease of an earlier generation gives back nothing to a counter reset since. */
  private generation = 0;
  /** The lease of the current generation, shared by every admission until the next reset. */
  private lease = new GenerationLease(0);
  private readonly releaseListeners: Array<(keys: readonly string[]) => void> = [];
  /** Learned capacity by learned key, in the order of their last write (oldest first). */
  private readonly learned = new Map<string, LearnedEntry>();

  constructor(options: MemoryCounterStoreOptions = {}) {
    this.maxChildren = options.maxChildren ?? DEFAULT_MAX_CHILDREN;
    this.journal = options.journal;
  }

  counter(key: string): CounterHandle {
    let counter = this.counters.get(key);
    if (counter === undefined) {
      counter = new MemoryCounter(key);
      this.counters.set(key, counter);
    }
    return counter;
  }

  childCounter(ownKey: string, periodSeconds: number, child: string, nowSeconds: number, held: CounterHandle | undefined): CounterHandle | ChildrenFull {
    const heldCounter = held as MemoryCounter | undefined;
    // The common case: the caller's counter is still kept and was used already this second.
    if (heldCounter !== undefined && !heldCounter.dropped) {
      if (heldCounter.touchedAt !== nowSeconds) this.use(heldCounter.table!, heldCounter, nowSeconds);
      return heldCounter;
    }
    let table = this.tables.get(ownKey);
    if (table === undefined) {
      table = new ChildTable(ownKey, periodSeconds, this.maxChildren);
      this.tables.set(ownKey, table);
    }
    const counter = table.byChild.get(child);
    if (counter !== undefined) {
      this.use(table, counter, nowSeconds);
      return counter;
    }
    if (table.periodSeconds > 0 && table.oldestIdle(nowSeconds)) this.drop(table, table.oldest!);
    if (table.byChild.size >= table.limit) {
      if (!table.oldestIdle(nowSeconds)) return table.full(nowSeconds);
      this.drop(table, table.oldest!);
    }
    return table.add(child, this.generation, nowSeconds);
  }

  findChild(ownKey: string, _periodSeconds: number, child: string, nowSeconds: number): CounterHandle | ChildrenFull | undefined {
    const table = this.tables.get(ownKey);
    if (table === undefined) return undefined;
    const counter = table.byChild.get(child);
    if (counter !== undefined) return counter;
    // As childCounter() would decide, without dropping anything.
    return table.byChild.size >= table.limit && !table.oldestIdle(nowSeconds) ? table.full(nowSeconds) : undefined;
  }

  readChildren(ownKey: string, periodSeconds: number, nowSeconds: number): ChildReading[] {
    const table = this.tables.get(ownKey);
    if (table === undefined) return [];
    const found: ChildReading[] = [];
    for (const [child, counter] of table.byChild) {
      const row = readRow(counter, periodSeconds, nowSeconds);
      if (rowMatters(row)) found.push({ child, row });
    }
    return found.sort((a, b) => (a.child < b.child ? -1 : a.child > b.child ? 1 : 0));
  }

  retire(key: string): void {
    const removal = this.remove(key, false);
    this.journal?.dropped(removal);
  }

  clear(key: string): MaybePromise<void> {
    const removal = this.remove(key, false);
    return this.journal?.removed(removal);
  }

  reset(key: string): MaybePromise<void> {
    const removal = this.remove(key, true);
    return this.journal?.removed(removal);
  }

  resetAll(): MaybePromise<void> {
    const generation = this.nextGeneration();
    for (const counter of this.counters.values()) counter.clear(generation);
    for (const table of this.tables.values()) this.dropTable(table, generation);
    this.tables.clear();
    return this.journal?.removed({ all: true });
  }

  tryAdmit(rules: readonly CounterRule[], nowSeconds: number, learned?: LearnedCheck, reserve = 0, spend?: SpendClaim): AdmitOutcome {
    // A saturated target refuses like a breached rule: nothing is counted.
    const verdict = learned === undefined ? undefined : this.verdict(learned.handle, learned.nowMs);
    let breached = verdict !== undefined;
    let slots = reserve > 0;
    const count = rules.length;
    for (let i = 0; i < count; i++) {
      const rule = rules[i]!;
      const counter = rule.counter as MemoryCounter;
      const period = rule.periodSeconds;
      if (period === 0) {
        slots = true;
        if (counter.inFlight >= rule.maxRequests) breached = true;
        continue;
      }
      counter.roll(nowSeconds, period);
      if (rule.maxRequests > 0 && counter.requestsCarried + counter.requestsCurrent >= rule.maxRequests) breached = true;
      else if (rule.maxTokens > 0) {
        const used = counter.tokensCarried + counter.tokensCurrent;
        if (reserve > 0 ? used + counter.tokensReserved + reserve > rule.maxTokens : used >= rule.maxTokens) breached = true;
      }
    }
    // The budgets once the rules admit, in this same synchronous step: no other request comes between.
    const spendRefused = !breached && spend !== undefined && spend.reserveHere() >= 0;
    if (spendRefused) breached = true;
    if (!breached) {
      const journaling = this.journal !== undefined;
      for (let i = 0; i < count; i++) {
        const rule = rules[i]!;
        const counter = rule.counter as MemoryCounter;
        if (rule.periodSeconds === 0) {
          if (counter.inFlight++ === 0 && counter.table !== undefined) counter.table.pin(counter);
        } else {
          counter.requestsCurrent++;
          if (reserve > 0 && rule.maxTokens > 0) counter.tokensReserved += reserve;
          if (journaling && !counter.dirty) this.markChanged(counter, rule.periodSeconds);
        }
      }
    }
    const rows: CounterRow[] = new Array<CounterRow>(count);
    for (let i = 0; i < count; i++) {
      const rule = rules[i]!;
      const counter = rule.counter as MemoryCounter;
      rows[i] = rule.periodSeconds === 0 ? concurrencyRow(counter.inFlight) : counter.windowedRow();
    }
    return { status: breached ? 'refused' : 'admitted', nowSeconds, rows, lease: !breached && slots ? this.lease : undefined, learned: verdict, spendRefused };
  }

  release(rules: readonly CounterRule[], lease: SlotLease): void {
    const generation = (lease as GenerationLease).generation;
    let released: string[] | undefined;
    for (let i = 0; i < rules.length; i++) {
      const counter = rules[i]!.counter as MemoryCounter;
      if (counter.resetGeneration <= generation && counter.inFlight > 0) {
        if (--counter.inFlight === 0 && counter.table !== undefined) counter.table.unpin(counter);
        if (this.releaseListeners.length > 0) (released ??= []).push(counter.key);
      }
    }
    if (released !== undefined) for (const listener of this.releaseListeners) listener(released);
  }

  onReleased(listener: (keys: readonly string[]) => void): void {
    this.releaseListeners.push(listener);
  }

  settle(rules: readonly CounterRule[], lease: SlotLease, reserved: number, tokens: number, nowSeconds: number): void {
    const generation = (lease as GenerationLease).generation;
    for (let i = 0; i < rules.length; i++) {
      const counter = rules[i]!.counter as MemoryCounter;
      // A counter reset since holds none of this reservation any more.
      if (counter.resetGeneration <= generation) counter.tokensReserved = Math.max(0, counter.tokensReserved - reserved);
    }
    if (tokens > 0) this.addTokens(rules, tokens, nowSeconds);
  }

  addTokens(rules: readonly CounterRule[], tokens: number, nowSeconds: number): void {
    const journaling = this.journal !== undefined;
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i]!;
      if (rule.periodSeconds === 0) continue;
      const counter = rule.counter as MemoryCounter;
      counter.roll(nowSeconds, rule.periodSeconds);
      counter.tokensCurrent += tokens;
      if (journaling && !counter.dirty) this.markChanged(counter, rule.periodSeconds);
    }
  }

  read(rules: readonly CounterRule[], nowSeconds: number): CounterReading {
    const rows = rules.map((rule): CounterRow => readRow(rule.counter as MemoryCounter, rule.periodSeconds, nowSeconds));
    return { nowSeconds, rows };
  }

  learnedCounter(provider: string, model: string): LearnedHandle {
    return { key: learnedKey(provider, model), provider, model };
  }

  learn(handle: LearnedHandle, update: LearnedUpdate): void {
    const nowMs = update.atMs;
    const entry = this.learned.get(handle.key);
    const record = mergeLearned(entry !== undefined && entry.record.expiresAtMs > nowMs ? entry.record : undefined, update, nowMs);
    // Written last, so listed last: the oldest write is the first to go for room.
    if (entry !== undefined) this.learned.delete(handle.key);
    else if (this.learned.size >= MAX_LEARNED) this.learned.delete(this.learned.keys().next().value!);
    this.learned.set(handle.key, { provider: handle.provider, model: handle.model, record });
  }

  readLearned(handles: readonly LearnedHandle[] | undefined, nowMs: number): LearnedReading {
    const records: Array<LearnedReading['records'][number]> = [];
    const keys = handles === undefined ? [...this.learned.keys()] : handles.map((handle) => handle.key);
    for (const key of keys) {
      const entry = this.learned.get(key);
      if (entry === undefined) continue;
      if (entry.record.expiresAtMs <= nowMs) this.learned.delete(key);
      else records.push(entry);
    }
    return { nowMs, records };
  }

  /** Forgets every learned record (the Redis store's fallback, once Redis answers again). */
  forgetLearned(): void {
    this.learned.clear();
  }

  /** How many children the per-child rule `ownKey` keeps counters for now (idle ones not yet dropped included). */
  childCount(ownKey: string): number {
    return this.tables.get(ownKey)?.byChild.size ?? 0;
  }

  /**
   * With a journal: the windows of every counter changed since the last call, still kept by the
   * store (the saved form; slots are never part of it).
   */
  takeChangedWindows(): CounterWindows[] {
    const changed = this.changed;
    this.changed = [];
    const windows: CounterWindows[] = [];
    for (const counter of changed) {
      counter.dirty = false;
      if (counter.dropped) continue;
      windows.push({
        key: counter.key,
        periodSeconds: counter.periodSeconds,
        windowStart: counter.windowStart,
        requestsPrevious: counter.requestsPrevious,
        requestsCurrent: counter.requestsCurrent,
        tokensPrevious: counter.tokensPrevious,
        tokensCurrent: counter.tokensCurrent,
      });
    }
    return windows;
  }

  /**
   * Puts saved windows back, into the counter of a rule the engine has compiled or, for a child
   * of a per-child rule, into a new child counter (as the most recently used: restore children
   * oldest first). False when no rule here has that counter: the windows are not restored.
   */
  restoreWindows(saved: CounterWindows): boolean {
    let counter = this.counters.get(saved.key);
    if (counter === undefined) {
      const cut = saved.key.lastIndexOf('\u0000') + 1;
      const ownKey = saved.key.slice(0, cut);
      const child = saved.key.slice(cut);
      if (child === '' || !this.counters.has(ownKey)) return false;
      let table = this.tables.get(ownKey);
      if (table === undefined) {
        table = new ChildTable(ownKey, saved.periodSeconds, this.maxChildren);
        this.tables.set(ownKey, table);
      }
      counter = table.byChild.get(child);
      if (counter === undefined) {
        // More saved than room (max_children was lowered): the least recently restored makes way.
        if (table.byChild.size >= table.limit) this.drop(table, table.oldest!);
        counter = table.add(child, this.generation, saved.windowStart);
      }
    }
    counter.restore(saved);
    return true;
  }

  /** Whether a target's learned capacity saturates it at `nowMs`; an expired record is dropped. */
  private verdict(handle: LearnedHandle, nowMs: number): LearnedVerdict | undefined {
    const entry = this.learned.get(handle.key);
    if (entry === undefined) return undefined;
    if (entry.record.expiresAtMs <= nowMs) {
      this.learned.delete(handle.key);
      return undefined;
    }
    return verdictOf(entry.record, nowMs);
  }

  /**
   * A kept child is used: it moves to the end of the use order. Children whose windows are over
   * are dropped as the rule is used, one per move at most; the children of a concurrent rule only
   * for room (one without slots in flight may take one again at any time).
   */
  private use(table: ChildTable, counter: MemoryCounter, nowSeconds: number): void {
    table.touch(counter, nowSeconds);
    if (table.periodSeconds > 0 && table.oldest !== counter && table.oldestIdle(nowSeconds)) this.drop(table, table.oldest!);
  }

  private markChanged(counter: MemoryCounter, periodSeconds: number): void {
    counter.dirty = true;
    counter.periodSeconds = periodSeconds;
    this.changed.push(counter);
  }

  /** Resets (`keep`) or forgets a counter, with its children when it is a per-child rule's own. */
  private remove(key: string, keep: boolean): CounterRemoval {
    const generation = this.nextGeneration();
    const counter = this.counters.get(key);
    if (counter !== undefined) {
      counter.clear(generation); // tickets still holding it took their slots earlier and release nothing
      if (!keep) {
        counter.dropped = true;
        this.counters.delete(key);
      }
    }
    const table = this.tables.get(key);
    if (table !== undefined) {
      this.dropTable(table, generation);
      this.tables.delete(key);
    }
    return { all: false, key, withChildren: key.endsWith('\u0000') };
  }

  /** Drops an idle child: its windows no longer matter, so nothing is lost. */
  private drop(table: ChildTable, counter: MemoryCounter): void {
    table.remove(counter);
    this.journal?.dropped({ all: false, key: counter.key, withChildren: false });
  }

  private dropTable(table: ChildTable, generation: number): void {
    for (const counter of table.byChild.values()) {
      counter.clear(generation);
      counter.table = undefined;
      counter.dropped = true;
    }
    table.byChild.clear();
    table.oldest = undefined;
    table.newest = undefined;
  }

  private nextGeneration(): number {
    this.generation++;
    this.lease = new GenerationLease(this.generation);
    return this.generation;
  }
}

/** A counter's row at `nowSeconds`, rolled in the reading only: the counter is not touched. */
function readRow(counter: MemoryCounter, period: number, nowSeconds: number): CounterRow {
  if (period === 0) return concurrencyRow(counter.inFlight);
  const start = windowStart(nowSeconds, period);
  const shift = start - counter.windowStart;
  const reserved = counter.tokensReserved;
  if (shift <= 0) {
    return windowedRow(start, counter.requestsPrevious, counter.requestsCurrent, counter.tokensPrevious, counter.tokensCurrent, period, nowSeconds, reserved);
  }
  if (shift === period) return windowedRow(start, counter.requestsCurrent, 0, counter.tokensCurrent, 0, period, nowSeconds, reserved);
  return windowedRow(start, 0, 0, 0, 0, period, nowSeconds, reserved);
}
