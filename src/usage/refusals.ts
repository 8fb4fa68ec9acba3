/**
 * Requests refused with a 429 (by a rate limit or a budget), counted for the usage view
 * (`/admin/usage`'s `refused`): in memory per minute, user path, asked-for provider and model,
 * and rule, and added to storage at most once a minute (and at shutdown), never a row per
 * refusal. Counting a refusal is a map lookup and an addition; nothing on the request path waits
 * for storage.
 */
import type { Refusal, RefusalSink } from '../admission/core.ts';
import { bucketCounts, refusalKey } from '../storage/refusals/rows.ts';
import type { RefusalBucket, RefusalCount, RefusalRepository } from '../storage/refusals/types.ts';
import type { UsageBucketQuery } from '../storage/usage/types.ts';

const MINUTE_MS = 60_000;

export interface RefusalLogOptions {
  /** Milliseconds since the epoch: which minute a refusal falls in. */
  now(): number;
  /** Between two writes to storage. Default: a minute. */
  flushIntervalMs?: number;
  /** Distinct counts kept in memory at most (while storage cannot take them); refusals that would add one more are dropped. Default 100 000. */
  maxPending?: number;
  /** Write failures (the counts are kept for the next write) and drops; the log never logs by itself. */
  onError?: (err: Error) => void;
}

/** Reported through `onError`, at the next write, when refusals were dropped to stay within `maxPending`. */
export class RefusalCountsDroppedError extends Error {
  readonly refusals: number;

  constructor(refusals: number, limit: number) {
    super(`refusal counts full (${limit} kept in memory): ${refusals} refusal(s) were not counted`);
    this.name = 'RefusalCountsDroppedError';
    this.refusals = refusals;
  }
}

export class RefusalLog implements RefusalSink {
  readonly #storage: Pick<RefusalRepository, 'add'>;
  readonly #now: () => number;
  readonly #maxPending: number;
  readonly #onError: (err: Error) => void;
  /** Counts not yet written, by key. */
  #pending = new Map<string, RefusalCount>();
  /** The write in progress, if any. */
  #writing: Promise<void> | undefined;
  #timer: NodeJS.Timeout | undefined;
  /** Refusals not counted since the last report (see maxPending). */
  #dropped = 0;

  constructor(storage: Pick<RefusalRepository, 'add'>, options: RefusalLogOptions) {
    this.#storage = storage;
    this.#now = options.now;
    this.#maxPending = options.maxPending ?? 100_000;
    this.#onError = options.onError ?? (() => {});
    this.#timer = setInterval(() => void this.flush(), options.flushIntervalMs ?? MINUTE_MS);
    // A pending write must not keep the process alive; shutdown calls close().
    this.#timer.unref();
  }

  refused(refusal: Refusal): void {
    const minuteMs = Math.floor(this.#now() / MINUTE_MS) * MINUTE_MS;
    const count: RefusalCount = { minuteMs, userPath: refusal.userPath, provider: refusal.provider, model: refusal.model, scope: refusal.scope, subject: refusal.subject, period: refusal.period, count: 1 };
    const key = refusalKey(count);
    const known = this.#pending.get(key);
    if (known !== undefined) {
      known.count++;
      return;
    }
    if (this.#pending.size >= this.#maxPending) this.#dropped++;
    else this.#pending.set(key, count);
  }

  /** The counts not written yet, in the buckets of `query`: what storage does not know yet. Wait for `settled()` first. */
  pending(query: UsageBucketQuery): RefusalBucket[] {
    return bucketCounts(this.#pending.values(), query);
  }

  /** Resolves once no write is in progress (so every count is either in storage or pending). */
  async settled(): Promise<void> {
    await this.#writing;
  }

  /** Writes every pending count (one call to storage). A failed write keeps them for the next one. */
  flush(): Promise<void> {
    this.#writing ??= this.#write().finally(() => {
      this.#writing = undefined;
    });
    return this.#writing;
  }

  /** Stops the timer and writes what is pending. */
  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.settled();
    await this.flush();
  }

  async #write(): Promise<void> {
    if (this.#dropped > 0) {
      this.#report(new RefusalCountsDroppedError(this.#dropped, this.#maxPending));
      this.#dropped = 0;
    }
    if (this.#pending.size === 0) return;
    const taken = this.#pending;
    this.#pending = new Map();
    try {
      await this.#storage.add([...taken.values()]);
    } catch (err) {
      // Back in front of what came meanwhile, merged with it: a key is written once per call.
      for (const [key, count] of this.#pending) {
        const known = taken.get(key);
        if (known === undefined) taken.set(key, count);
        else known.count += count.count;
      }
      this.#pending = taken;
      this.#report(err instanceof Error ? err : new Error(`writing refusal counts failed: ${String(err)}`));
    }
  }

  #report(err: Error): void {
    try {
      this.#onError(err);
    } catch {
      // Nothing sensible left to do with an error about reporting an error.
    }
  }
}
