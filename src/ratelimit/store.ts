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

/**
 * Per-rule snapshot layout (numbers per rule, rule i at offset i * SNAPSHOT_STRIDE).
 * Values are after rolling the windows to `now`; after a successful admission they
 * include this request's increments.
 */
export const SNAP_WINDOW_START = 0;
export const SNAP_REQ_PREV = 1;
export const SNAP_REQ_CUR = 2;
export const SNAP_TOK_PREV = 3;
export const SNAP_TOK_CUR = 4;
export const SNAP_IN_FLIGHT = 5;
/** Bumped whenever a counter is reset or dropped, so a slot taken before is never released after. */
export const SNAP_GENERATION = 6;
export const SNAPSHOT_STRIDE = 7;

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
  tryAdmit(rules: readonly CounterRule[], nowSeconds: number, snapshot: Float64Array): boolean;
  /** Give back one concurrency slot taken at `generation`; ignored if the counter was reset since. */
  release(counter: CounterHandle, generation: number): void;
  /** Add tokens to each rule's current token window. */
  addTokens(rules: readonly CounterRule[], tokens: number, nowSeconds: number): void;
  /** Fill `snapshot` without changing anything observable. */
  read(rules: readonly CounterRule[], nowSeconds: number, snapshot: Float64Array): void;
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
  generation = 0;

  constructor(key: string) {
    this.key = key;
  }

  clear(): void {
    this.windowStart = 0;
    this.requestsPrevious = 0;
    this.requestsCurrent = 0;
    this.tokensPrevious = 0;
    this.tokensCurrent = 0;
    this.inFlight = 0;
    this.generation++;
  }

  /** Advance to the window containing now: one period on shifts current to previous, more clears both. */
  roll(nowSeconds: number, periodSeconds: number): number {
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
    return start;
  }
}

export class MemoryCounterStore implements CounterStore {
  private readonly counters = new Map<string, MemoryCounter>();

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
    counter.clear(); // tickets still holding it see a new generation and release nothing
    this.counters.delete(key);
  }

  reset(key: string): void {
    this.counters.get(key)?.clear();
  }

  resetAll(): void {
    for (const counter of this.counters.values()) counter.clear();
  }

  tryAdmit(rules: readonly CounterRule[], nowSeconds: number, snapshot: Float64Array): boolean {
    let breached = false;
    const count = rules.length;
    for (let i = 0; i < count; i++) {
      const rule = rules[i]!;
      const counter = rule.counter as MemoryCounter;
      const at = i * SNAPSHOT_STRIDE;
      const period = rule.periodSeconds;
      if (period === 0) {
        writeConcurrent(snapshot, at, counter);
        if (counter.inFlight >= rule.maxRequests) breached = true;
        continue;
      }
      const start = counter.roll(nowSeconds, period);
      writeWindowed(snapshot, at, counter, start);
      const elapsed = nowSeconds - start;
      if (
        rule.maxRequests > 0 &&
        slidingEstimate(counter.requestsPrevious, counter.requestsCurrent, period, elapsed) >= rule.maxRequests
      ) {
        breached = true;
      } else if (
        rule.maxTokens > 0 &&
        slidingEstimate(counter.tokensPrevious, counter.tokensCurrent, period, elapsed) >= rule.maxTokens
      ) {
        breached = true;
      }
    }
    if (breached) return false;
    for (let i = 0; i < count; i++) {
      const rule = rules[i]!;
      const counter = rule.counter as MemoryCounter;
      const at = i * SNAPSHOT_STRIDE;
      if (rule.periodSeconds === 0) {
        snapshot[at + SNAP_IN_FLIGHT] = ++counter.inFlight;
      } else {
        snapshot[at + SNAP_REQ_CUR] = ++counter.requestsCurrent;
      }
    }
    return true;
  }

  release(handle: CounterHandle, generation: number): void {
    const counter = handle as MemoryCounter;
    if (counter.generation === generation && counter.inFlight > 0) counter.inFlight--;
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

  read(rules: readonly CounterRule[], nowSeconds: number, snapshot: Float64Array): void {
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i]!;
      const counter = rule.counter as MemoryCounter;
      const at = i * SNAPSHOT_STRIDE;
      if (rule.periodSeconds === 0) {
        writeConcurrent(snapshot, at, counter);
        continue;
      }
      // Compute the rolled view without touching the counter.
      const start = windowStart(nowSeconds, rule.periodSeconds);
      const shift = start - counter.windowStart;
      snapshot[at + SNAP_WINDOW_START] = start;
      snapshot[at + SNAP_IN_FLIGHT] = 0;
      snapshot[at + SNAP_GENERATION] = counter.generation;
      if (shift <= 0) {
        snapshot[at + SNAP_REQ_PREV] = counter.requestsPrevious;
        snapshot[at + SNAP_REQ_CUR] = counter.requestsCurrent;
        snapshot[at + SNAP_TOK_PREV] = counter.tokensPrevious;
        snapshot[at + SNAP_TOK_CUR] = counter.tokensCurrent;
      } else if (shift === rule.periodSeconds) {
        snapshot[at + SNAP_REQ_PREV] = counter.requestsCurrent;
        snapshot[at + SNAP_REQ_CUR] = 0;
        snapshot[at + SNAP_TOK_PREV] = counter.tokensCurrent;
        snapshot[at + SNAP_TOK_CUR] = 0;
      } else {
        snapshot[at + SNAP_REQ_PREV] = 0;
        snapshot[at + SNAP_REQ_CUR] = 0;
        snapshot[at + SNAP_TOK_PREV] = 0;
        snapshot[at + SNAP_TOK_CUR] = 0;
      }
    }
  }
}

function writeConcurrent(snapshot: Float64Array, at: number, counter: MemoryCounter): void {
  snapshot[at + SNAP_WINDOW_START] = 0;
  snapshot[at + SNAP_REQ_PREV] = 0;
  snapshot[at + SNAP_REQ_CUR] = 0;
  snapshot[at + SNAP_TOK_PREV] = 0;
  snapshot[at + SNAP_TOK_CUR] = 0;
  snapshot[at + SNAP_IN_FLIGHT] = counter.inFlight;
  snapshot[at + SNAP_GENERATION] = counter.generation;
}

function writeWindowed(snapshot: Float64Array, at: number, counter: MemoryCounter, start: number): void {
  snapshot[at + SNAP_WINDOW_START] = start;
  snapshot[at + SNAP_REQ_PREV] = counter.requestsPrevious;
  snapshot[at + SNAP_REQ_CUR] = counter.requestsCurrent;
  snapshot[at + SNAP_TOK_PREV] = counter.tokensPrevious;
  snapshot[at + SNAP_TOK_CUR] = counter.tokensCurrent;
  snapshot[at + SNAP_IN_FLIGHT] = 0;
  snapshot[at + SNAP_GENERATION] = counter.generation;
}
