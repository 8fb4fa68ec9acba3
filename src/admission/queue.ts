/**
 * Requests waiting for capacity in this gateway. A request refused by the rate limits may wait
 * here, holding nothing and counted nowhere, until capacity can have freed on a rule that refused
 * it: when a breached window's estimate drops below its cap (a timer), or when a slot of a breached
 * concurrency rule is released (in this gateway, or on any replica sharing the counters). It is then
 * woken to try its whole admission again.
 *
 * Order, per breached rule: higher priority first; within a priority, round-robin over the direct
 * children of the rule's user path (one consumer's hundred waiting requests do not starve a
 * sibling's one), first come, first served within a child. One freed slot wakes one waiter; a
 * window that frees wakes its first waiter, and the next only once that one was admitted.
 */
import type { Priority, Scope } from '../ratelimit/index.ts';

/** A rule that refused a waiting request, as the queue needs it. */
export interface Blocker {
  /** The breached counter's key, as slot releases name it. */
  readonly key: string;
  readonly concurrent: boolean;
  /** When capacity can have freed by time alone, in epoch milliseconds (Infinity: never). */
  readonly retryAtMs: number;
  /** Round-robin group: the caller's direct child under the rule's user path ('' for other scopes, or the path itself). */
  readonly child: string;
  /** For `GET /admin/queue`. */
  readonly scope: Scope;
  readonly subject: string;
  readonly periodLabel: string;
}

/** Why a wait ended. */
export type WaitEnd = 'woken' | 'timed_out' | 'cancelled' | 'shutdown';

export interface Timers {
  now(): number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const SYSTEM_TIMERS: Timers = {
  now: Date.now,
  setTimeout: (callback, ms) => {
    const timer = setTimeout(callback, ms);
    timer.unref();
    return timer;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/**
 * How often a concurrency rule's first waiter tries again with no release seen: the safety net
 * under release notifications, which another replica may fail to deliver.
 */
export const RECHECK_MS = 1000;

const PRIORITY_RANK: Readonly<Record<Priority, 0 | 1 | 2>> = { high: 0, normal: 1, low: 2 };

/** One waiting request, across its waits: its place in line is kept from its first arrival. */
export class Waiter {
  readonly priority: Priority;
  /** Arrival order: a waiter woken and refused again goes back to where it stood. */
  readonly seq: number;
  #resolve: ((end: WaitEnd) => void) | undefined;
  #lines: Line[] = [];
  #deadline: unknown;
  #onCancel: (() => void) | undefined;

  constructor(priority: Priority, seq: number) {
    this.priority = priority;
    this.seq = seq;
  }

  get waiting(): boolean {
    return this.#resolve !== undefined;
  }

  /** Starts one wait; the queue ends it. */
  begin(lines: Line[], resolve: (end: WaitEnd) => void, deadline: unknown, onCancel: () => void): void {
    this.#lines = lines;
    this.#resolve = resolve;
    this.#deadline = deadline;
    this.#onCancel = onCancel;
  }

  /** Ends the wait (once), leaving every line it stood in; answers the lines it left. */
  end(end: WaitEnd, timers: Timers): Line[] {
    const resolve = this.#resolve;
    if (resolve === undefined) return [];
    this.#resolve = undefined;
    timers.clearTimeout(this.#deadline);
    this.#onCancel?.();
    this.#onCancel = undefined;
    const lines = this.#lines;
    this.#lines = [];
    for (const line of lines) line.remove(this);
    resolve(end);
    return lines;
  }
}

/** The waiters of one breached rule (one counter), in the order they are to be woken. */
class Line {
  readonly key: string;
  readonly scope: Scope;
  readonly subject: string;
  readonly periodLabel: string;
  readonly concurrent: boolean;
  /** Per priority: the round-robin over children, each child's waiters in arrival order. */
  readonly #lanes: [Lane, Lane, Lane] = [new Lane(), new Lane(), new Lane()];
  #size = 0;
  /** When the timer fires (ms), and the timer. */
  #timerAt = Infinity;
  #timer: unknown;

  constructor(blocker: Blocker) {
    this.key = blocker.key;
    this.scope = blocker.scope;
    this.subject = blocker.subject;
    this.periodLabel = blocker.periodLabel;
    this.concurrent = blocker.concurrent;
  }

  get size(): number {
    return this.#size;
  }

  add(waiter: Waiter, child: string): void {
    this.#lanes[PRIORITY_RANK[waiter.priority]].add(waiter, child);
    this.#size++;
  }

  remove(waiter: Waiter): void {
    if (this.#lanes[PRIORITY_RANK[waiter.priority]].remove(waiter)) this.#size--;
  }

  /** The next waiter to wake: highest priority, the next child in turn, its earliest. */
  next(): Waiter | undefined {
    for (const lane of this.#lanes) {
      const waiter = lane.next();
      if (waiter !== undefined) return waiter;
    }
    return undefined;
  }

  /** Fires `wake` at `at` (or sooner if already set sooner); the earliest time wins. */
  arm(at: number, timers: Timers, wake: () => void): void {
    if (at >= this.#timerAt || at === Infinity) return;
    if (this.#timer !== undefined) timers.clearTimeout(this.#timer);
    this.#timerAt = at;
    this.#timer = timers.setTimeout(() => {
      this.#timer = undefined;
      this.#timerAt = Infinity;
      wake();
    }, Math.max(0, at - timers.now()));
  }

  disarm(timers: Timers): void {
    if (this.#timer !== undefined) timers.clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = Infinity;
  }
}

/** One priority's waiters of a line: children take turns, each child's waiters in arrival order. */
class Lane {
  readonly #byChild = new Map<string, Waiter[]>();
  /** Children with waiters, in the order of their turns. */
  #turns: string[] = [];
  readonly #childOf = new Map<Waiter, string>();

  add(waiter: Waiter, child: string): void {
    let waiters = this.#byChild.get(child);
    if (waiters === undefined) {
      waiters = [];
      this.#byChild.set(child, waiters);
      this.#turns.push(child);
    }
    // Mostly an append; a waiter back after a failed retry goes back to its place.
    let at = waiters.length;
    while (at > 0 && waiters[at - 1]!.seq > waiter.seq) at--;
    waiters.splice(at, 0, waiter);
    this.#childOf.set(waiter, child);
  }

  remove(waiter: Waiter): boolean {
    const child = this.#childOf.get(waiter);
    if (child === undefined) return false;
    this.#childOf.delete(waiter);
    const waiters = this.#byChild.get(child)!;
    waiters.splice(waiters.indexOf(waiter), 1);
    if (waiters.length === 0) {
      this.#byChild.delete(child);
      this.#turns.splice(this.#turns.indexOf(child), 1);
    }
    return true;
  }

  /** The first waiter of the child whose turn it is; that child's turn passes to the next. */
  next(): Waiter | undefined {
    const child = this.#turns[0];
    if (child === undefined) return undefined;
    if (this.#turns.length > 1) this.#turns.push(this.#turns.shift()!);
    return this.#byChild.get(child)![0];
  }
}

export interface WaitQueueOptions {
  /** Waiting requests this gateway holds at most (rate_limits.queue.max_depth). */
  readonly maxDepth: number;
  readonly timers?: Timers;
}

export interface QueueSnapshot {
  readonly waiting: number;
  readonly byPriority: Readonly<Record<Priority, number>>;
  readonly rules: ReadonlyArray<{ scope: Scope; subject: string; periodLabel: string; waiting: number }>;
}

export class WaitQueue {
  readonly #maxDepth: number;
  readonly #timers: Timers;
  readonly #lines = new Map<string, Line>();
  readonly #depth: Record<Priority, number> = { high: 0, normal: 0, low: 0 };
  #waiting = 0;
  #seq = 0;
  #closed = false;

  constructor(options: WaitQueueOptions) {
    this.#maxDepth = options.maxDepth;
    this.#timers = options.timers ?? SYSTEM_TIMERS;
  }

  get depth(): number {
    return this.#waiting;
  }

  get maxDepth(): number {
    return this.#maxDepth;
  }

  depthOf(priority: Priority): number {
    return this.#depth[priority];
  }

  /** A request that may wait: its place in line, kept across its waits. */
  waiter(priority: Priority): Waiter {
    return new Waiter(priority, ++this.#seq);
  }

  /**
   * Waits until a blocker may have freed, `deadlineMs` passes, `cancelled` fires or the queue
   * closes. 'full' when the gateway already holds max_depth waiting requests.
   */
  wait(waiter: Waiter, blockers: readonly Blocker[], deadlineMs: number, onCancel: (cancel: () => void) => () => void): Promise<WaitEnd> | 'full' {
    if (this.#closed) return Promise.resolve('shutdown');
    if (this.#waiting >= this.#maxDepth) return 'full';
    const timers = this.#timers;
    return new Promise<WaitEnd>((resolve) => {
      const lines: Line[] = [];
      for (const blocker of blockers) {
        let line = this.#lines.get(blocker.key);
        if (line === undefined) {
          line = new Line(blocker);
          this.#lines.set(blocker.key, line);
        }
        if (lines.includes(line)) continue;
        line.add(waiter, blocker.child);
        lines.push(line);
        // A window frees at its own time; a concurrency rule is checked again now and then in
        // case a release is never heard of.
        const at = blocker.concurrent ? timers.now() + RECHECK_MS : blocker.retryAtMs;
        line.arm(at, timers, () => this.#wakeNext(line));
      }
      this.#waiting++;
      this.#depth[waiter.priority]++;
      const deadline = timers.setTimeout(() => this.#end(waiter, 'timed_out'), Math.max(0, deadlineMs - timers.now()));
      const stopListening = onCancel(() => this.#end(waiter, 'cancelled'));
      waiter.begin(lines, resolve, deadline, stopListening);
    });
  }

  /**
   * A woken waiter tried again. Admitted: the windows it waited on may have room for more, so the
   * next in each line is woken (a refused one re-entered the line and set its timer again).
   */
  retried(waiter: Waiter, admitted: boolean, lines: readonly string[]): void {
    if (!admitted) return;
    for (const key of lines) {
      const line = this.#lines.get(key);
      if (line !== undefined && !line.concurrent) this.#wakeNext(line);
    }
  }

  /** Slots were released on these counters (one key per slot): one waiter wakes per slot. */
  released(keys: readonly string[]): void {
    for (const key of keys) {
      const line = this.#lines.get(key);
      if (line !== undefined) this.#wakeNext(line);
    }
  }

  /** Shutdown: every waiter is answered now. */
  close(): void {
    this.#closed = true;
    for (const line of [...this.#lines.values()]) {
      for (let waiter = line.next(); waiter !== undefined; waiter = line.next()) this.#end(waiter, 'shutdown');
    }
  }

  snapshot(): QueueSnapshot {
    const rules = [...this.#lines.values()]
      .filter((line) => line.size > 0)
      .map((line) => ({ scope: line.scope, subject: line.subject, periodLabel: line.periodLabel, waiting: line.size }));
    return { waiting: this.#waiting, byPriority: { ...this.#depth }, rules };
  }

  #wakeNext(line: Line): void {
    const waiter = line.next();
    if (waiter === undefined) return;
    this.#end(waiter, 'woken');
    // Whatever becomes of the woken one (admitted, refused again, gone), the rest of the line is
    // never left without a timer.
    if (line.size > 0) line.arm(this.#timers.now() + RECHECK_MS, this.#timers, () => this.#wakeNext(line));
  }

  #end(waiter: Waiter, end: WaitEnd): void {
    if (!waiter.waiting) return;
    this.#waiting--;
    this.#depth[waiter.priority]--;
    for (const line of waiter.end(end, this.#timers)) {
      if (line.size > 0) continue;
      line.disarm(this.#timers);
      this.#lines.delete(line.key);
    }
  }
}
