/**
 * Counter state, behind an interface shaped for one atomic round trip per admission.
 *
 * The engine hands the store the whole list of rules matching a request; the store
 * rolls their windows, checks every cap and, only if none is breached, counts the
 * request in every window and takes every concurrency slot — all in one step. It then
 * reports the (rolled) raw counter state so the engine can compute Retry-After and
 * header values itself; the store never needs to know about messages or headers.
 *
 * The in-memory store is synchronous so the hot path never awaits. A shared store
 * (e.g. Redis) would implement the same steps as one server-side script per call
 * (EVALSHA over the rules' keys, with periods and caps as arguments, returning the
 * snapshot numbers). It would plug in behind an async twin of this interface
 * (`tryAdmit(...): Promise<boolean>`) with the engine's `admit` awaiting it; everything
 * else in the engine — matching, breach selection, Retry-After, headers — stays as is,
 * because it works purely from the snapshot.
 */
import { slidingEstimate, windowStart } from './window.ts';

/** Opaque handle for one rule's counter, obtained once when a rule is compiled. */
export interface CounterHandle {
  /** The rule key; a shared store would use it as the storage key. */
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

/** One rule's counters in a snapshot. Only the fields of the rule's kind are filled. */
export class CounterRow {
  /** Windowed rules: start of the current fixed window, in seconds. */
  windowStart = 0;
  requestsPrevious = 0;
  requestsCurrent = 0;
  tokensPrevious = 0;
  tokensCurrent = 0;
  /** The sliding-window estimates of the counts above (see window.ts): what the caps are checked against. */
  requestsUsed = 0;
  tokensUsed = 0;
  /** Concurrency rules: requests in flight. */
  inFlight = 0;
  /**
   * Concurrency rules: the store's generation when the slot was taken. Every reset or drop starts
   * a new generation, and a slot is given back only to a counter not reset since it was taken.
   */
  generation = 0;
}

/**
 * The counters of the rules matching one request, as a store read them: windows rolled to
 * `now` and, after a successful admission, this request counted. Rule i of the list given to
 * the store is row i. The engine reuses one snapshot from request to request, so admission
 * allocates nothing for it.
 */
export class CounterSnapshot {
  readonly rows: readonly CounterRow[];

  constructor(capacity: number) {
    const rows: CounterRow[] = [];
    for (let i = 0; i < capacity; i++) rows.push(new CounterRow());
    this.rows = rows;
  }

  /** How many rules it holds. */
  get capacity(): number {
    return this.rows.length;
  }
}

export interface CounterStore {
  /** The handle for a rule key, created on first use. Called when rules change, never per request. */
  counter(key: string): CounterHandle;
  /** Forget a rule's counters (rule deleted). Live slots on it become no-ops to release. */
  drop(key: string): void;
  /** Zero one rule's counters. Live slots on it become no-ops to release. */
  reset(key: string): void;
  /** Zero every counter. */
  resetAll(): void;
  /**
   * Atomically: check every rule; if none is breached, increment every windowed rule's
   * request count and take every concurrency slot. Fills `snapshot` for each rule either
   * way. Returns whether the request was admitted (and counted).
   */
  tryAdmit(rules: readonly CounterRule[], nowSeconds: number, snapshot: CounterSnapshot): boolean;
  /** Give back one concurrency slot taken at `generation`; ignored if the counter was reset since. */
  release(counter: CounterHandle, generation: number): void;
  /** Add tokens to each rule's current token window. */
  addTokens(rules: readonly CounterRule[], tokens: number, nowSeconds: number): void;
  /** Fill `snapshot` without changing anything observable. */
  read(rules: readonly CounterRule[], nowSeconds: number, snapshot: CounterSnapshot): void;
}

/** One rule's counters. A rule has both a request and a token window on the same clock. */
class MemoryCounter implements CounterHandle {
  readonly key: string;
  windowStart = 0;
  requestsPrevious = 0;
  requestsCurrent = 0;
  tokensPrevious = 0;
  tokensCurrent = 0;
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

  constructor(key: string) {
    this.key = key;
  }

  clear(generation: number): void {
    this.windowStart = 0;
    this.requestsPrevious = 0;
    this.requestsCurrent = 0;
    this.tokensPrevious = 0;
    this.tokensCurrent = 0;
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
}

export class MemoryCounterStore implements CounterStore {
  private readonly counters = new Map<string, MemoryCounter>();
  /** Bumped by every reset and drop (see CounterRow.generation). */
  private generation = 0;

  counter(key: string): CounterHandle {
    let counter = this.counters.get(key);
    if (counter === undefined) {
      counter = new MemoryCounter(key);
      this.counters.set(key, counter);
    }
    return counter;
  }

  drop(key: string): void {
    const counter = this.counters.get(key);
    if (counter === undefined) return;
    counter.clear(++this.generation); // tickets still holding it took their slots earlier and release nothing
    this.counters.delete(key);
  }

  reset(key: string): void {
    this.counters.get(key)?.clear(++this.generation);
  }

  resetAll(): void {
    const generation = ++this.generation;
    for (const counter of this.counters.values()) counter.clear(generation);
  }

  tryAdmit(rules: readonly CounterRule[], nowSeconds: number, snapshot: CounterSnapshot): boolean {
    let breached = false;
    const count = rules.length;
    const rows = snapshot.rows;
    for (let i = 0; i < count; i++) {
      const rule = rules[i]!;
      const counter = rule.counter as MemoryCounter;
      const period = rule.periodSeconds;
      const row = rows[i]!;
      if (period === 0) {
        row.inFlight = counter.inFlight;
        row.generation = this.generation;
        if (counter.inFlight >= rule.maxRequests) breached = true;
        continue;
      }
      counter.roll(nowSeconds, period);
      writeWindowed(row, counter);
      if (rule.maxRequests > 0 && row.requestsUsed >= rule.maxRequests) breached = true;
      else if (rule.maxTokens > 0 && row.tokensUsed >= rule.maxTokens) breached = true;
    }
    if (breached) return false;
    for (let i = 0; i < count; i++) {
      const rule = rules[i]!;
      const counter = rule.counter as MemoryCounter;
      const row = rows[i]!;
      if (rule.periodSeconds === 0) {
        row.inFlight = ++counter.inFlight;
      } else {
        row.requestsCurrent = ++counter.requestsCurrent;
        row.requestsUsed++; // the estimate moves with the current window's count
      }
    }
    return true;
  }

  release(handle: CounterHandle, generation: number): void {
    const counter = handle as MemoryCounter;
    if (counter.resetGeneration <= generation && counter.inFlight > 0) counter.inFlight--;
  }

  addTokens(rules: readonly CounterRule[], tokens: number, nowSeconds: number): void {
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i]!;
      if (rule.periodSeconds === 0) continue;
      const counter = rule.counter as MemoryCounter;
      counter.roll(nowSeconds, rule.periodSeconds);
      counter.tokensCurrent += tokens;
    }
  }

  read(rules: readonly CounterRule[], nowSeconds: number, snapshot: CounterSnapshot): void {
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i]!;
      const counter = rule.counter as MemoryCounter;
      const row = snapshot.rows[i]!;
      if (rule.periodSeconds === 0) {
        row.inFlight = counter.inFlight;
        row.generation = this.generation;
        continue;
      }
      // Compute the rolled view without touching the counter.
      const period = rule.periodSeconds;
      const start = windowStart(nowSeconds, period);
      const shift = start - counter.windowStart;
      row.windowStart = start;
      if (shift <= 0) {
        row.requestsPrevious = counter.requestsPrevious;
        row.requestsCurrent = counter.requestsCurrent;
        row.tokensPrevious = counter.tokensPrevious;
        row.tokensCurrent = counter.tokensCurrent;
      } else if (shift === period) {
        row.requestsPrevious = counter.requestsCurrent;
        row.requestsCurrent = 0;
        row.tokensPrevious = counter.tokensCurrent;
        row.tokensCurrent = 0;
      } else {
        row.requestsPrevious = 0;
        row.requestsCurrent = 0;
        row.tokensPrevious = 0;
        row.tokensCurrent = 0;
      }
      const elapsed = nowSeconds - start;
      row.requestsUsed = slidingEstimate(row.requestsPrevious, row.requestsCurrent, period, elapsed);
      row.tokensUsed = slidingEstimate(row.tokensPrevious, row.tokensCurrent, period, elapsed);
    }
  }
}

function writeWindowed(row: CounterRow, counter: MemoryCounter): void {
  row.windowStart = counter.rolledStart;
  row.requestsPrevious = counter.requestsPrevious;
  row.requestsCurrent = counter.requestsCurrent;
  row.tokensPrevious = counter.tokensPrevious;
  row.tokensCurrent = counter.tokensCurrent;
  row.requestsUsed = counter.requestsCarried + counter.requestsCurrent;
  row.tokensUsed = counter.tokensCarried + counter.tokensCurrent;
}
