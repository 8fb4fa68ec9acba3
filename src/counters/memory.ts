/**
 * Counters in this process's memory: the default store, and the fallback of the Redis store
 * while Redis is unreachable. Every call answers synchronously, so the hot path never awaits.
 */
import {
  concurrencyRow,
  slidingEstimate,
  windowedRow,
  windowStart,
  type AdmitOutcome,
  type CounterHandle,
  type CounterReading,
  type CounterRow,
  type CounterRule,
  type CounterStore,
  type SlotLease,
} from '../ratelimit/index.ts';

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
      inFlight: 0,
    };
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
  /** Bumped by every reset and drop; a lease of an earlier generation gives back nothing to a counter reset since. */
  private generation = 0;
  /** The lease of the current generation, shared by every admission until the next reset. */
  private lease = new GenerationLease(0);

  counter(key: string): CounterHandle {
    let counter = this.counters.get(key);
    if (counter === undefined) {
      counter = new MemoryCounter(key);
      this.counters.set(key, counter);
    }
    return counter;
  }

  retire(key: string): void {
    const counter = this.counters.get(key);
    if (counter === undefined) return;
    counter.clear(this.nextGeneration()); // tickets still holding it took their slots earlier and release nothing
    this.counters.delete(key);
  }

  clear(key: string): void {
    this.retire(key);
  }

  reset(key: string): void {
    this.counters.get(key)?.clear(this.nextGeneration());
  }

  resetAll(): void {
    const generation = this.nextGeneration();
    for (const counter of this.counters.values()) counter.clear(generation);
  }

  tryAdmit(rules: readonly CounterRule[], nowSeconds: number): AdmitOutcome {
    let breached = false;
    let slots = false;
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
      else if (rule.maxTokens > 0 && counter.tokensCarried + counter.tokensCurrent >= rule.maxTokens) breached = true;
    }
    if (!breached) {
      for (let i = 0; i < count; i++) {
        const rule = rules[i]!;
        const counter = rule.counter as MemoryCounter;
        if (rule.periodSeconds === 0) counter.inFlight++;
        else counter.requestsCurrent++;
      }
    }
    const rows: CounterRow[] = new Array<CounterRow>(count);
    for (let i = 0; i < count; i++) {
      const rule = rules[i]!;
      const counter = rule.counter as MemoryCounter;
      rows[i] = rule.periodSeconds === 0 ? concurrencyRow(counter.inFlight) : counter.windowedRow();
    }
    return { status: breached ? 'refused' : 'admitted', nowSeconds, rows, lease: !breached && slots ? this.lease : undefined };
  }

  release(rules: readonly CounterRule[], lease: SlotLease): void {
    const generation = (lease as GenerationLease).generation;
    for (let i = 0; i < rules.length; i++) {
      const counter = rules[i]!.counter as MemoryCounter;
      if (counter.resetGeneration <= generation && counter.inFlight > 0) counter.inFlight--;
    }
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

  read(rules: readonly CounterRule[], nowSeconds: number): CounterReading {
    const rows = rules.map((rule): CounterRow => {
      const counter = rule.counter as MemoryCounter;
      const period = rule.periodSeconds;
      if (period === 0) return concurrencyRow(counter.inFlight);
      // The rolled view, computed without touching the counter.
      const start = windowStart(nowSeconds, period);
      const shift = start - counter.windowStart;
      if (shift <= 0) {
        return windowedRow(start, counter.requestsPrevious, counter.requestsCurrent, counter.tokensPrevious, counter.tokensCurrent, period, nowSeconds);
      }
      if (shift === period) return windowedRow(start, counter.requestsCurrent, 0, counter.tokensCurrent, 0, period, nowSeconds);
      return windowedRow(start, 0, 0, 0, 0, period, nowSeconds);
    });
    return { nowSeconds, rows };
  }

  private nextGeneration(): number {
    this.generation++;
    this.lease = new GenerationLease(this.generation);
    return this.generation;
  }
}
