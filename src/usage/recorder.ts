/**
 * Takes usage records off the request hot path: `record()` only appends to memory; a timer (or
 * a full batch) writes them to storage in batches. A failed write keeps its records for the next
 * flush, so a storage outage loses nothing until the bounded buffer overflows.
 */

import type { Storage, UsageRecord } from '../storage/types.ts';
import { UsageBatch } from '../storage/usage-batch.ts';

export interface UsageRecorderOptions {
  /** False (USAGE_ENABLED=false): `record` is a no-op and nothing is written. Default true. */
  enabled?: boolean;
  /** Interval between background flushes. Default 1000 ms. */
  flushIntervalMs?: number;
  /** Records per `insertUsage` batch; a full batch also triggers a flush early. Default 500. */
  batchSize?: number;
  /** Records held in memory at most; beyond it the oldest are dropped. Default 100 000. */
  maxBuffered?: number;
  /** Write failures and overflow drops; the recorder never logs by itself. */
  onError?: (err: Error) => void;
}

/** Reported through `onError` when the buffer overflowed and the oldest records were dropped. */
export class UsageBufferOverflowError extends Error {
  /** Records dropped by this overflow. */
  readonly dropped: number;
  /** Records dropped since the recorder was created. */
  readonly totalDropped: number;

  constructor(dropped: number, totalDropped: number, limit: number) {
    super(
      `usage buffer full (${limit} records): dropped ${dropped} oldest record(s), ${totalDropped} in total`,
    );
    this.name = 'UsageBufferOverflowError';
    this.dropped = dropped;
    this.totalDropped = totalDropped;
  }
}

type UsageSink = Pick<Storage, 'insertUsage'>;

export class UsageRecorder {
  readonly enabled: boolean;
  private readonly storage: UsageSink;
  private readonly batchSize: number;
  private readonly maxBuffered: number;
  private readonly onError: (err: Error) => void;
  /** Full batches waiting to be written, oldest first. */
  private queue: UsageBatch[] = [];
  /** Records in `queue`. */
  private queued = 0;
  /** The batch that `record()` fills; it joins the queue when full or when a flush takes it. */
  private filling: UsageBatch;
  /** Records taken by the flush in progress (counted against the bound). */
  private inFlight = 0;
  /** Flushes run one after another; this is the tail of that chain. */
  private tail: Promise<void> = Promise.resolve();
  private flushQueued = false;
  private timer: NodeJS.Timeout | undefined;
  private droppedTotal = 0;
  /** Drops not yet reported: reported once per flush, not once per record, to bound log noise. */
  private unreportedDrops = 0;
  /** Set while storage is failing: then only the timer retries, not every record() call. */
  private failing = false;

  constructor(storage: UsageSink, options: UsageRecorderOptions = {}) {
    this.storage = storage;
    this.enabled = options.enabled ?? true;
    this.batchSize = Math.max(1, Math.trunc(options.batchSize ?? 500));
    this.maxBuffered = Math.max(this.batchSize, Math.trunc(options.maxBuffered ?? 100_000));
    this.onError = options.onError ?? (() => {});
    this.filling = new UsageBatch(this.batchSize);
    if (this.enabled) {
      this.timer = setInterval(() => this.backgroundFlush(true), options.flushIntervalMs ?? 1000);
      // A pending flush must not keep the process alive; shutdown calls close() explicitly.
      this.timer.unref();
    }
  }

  /** Queues a record: its fields are copied, the object is not kept. Never awaits, never throws, does no I/O. */
  record(r: UsageRecord): void {
    if (!this.enabled) return;
    this.filling.add(r);
    if (this.filling.size < this.batchSize) {
      if (this.queued + this.filling.size + this.inFlight > this.maxBuffered) this.enforceBound();
      return;
    }
    this.enqueueFilling();
    this.enforceBound();
    if (!this.failing) this.backgroundFlush(false);
  }

  /** Records waiting to be written (including a batch being written right now). */
  get pending(): number {
    return this.queued + this.filling.size + this.inFlight;
  }

  /** Records dropped because the buffer overflowed. */
  get dropped(): number {
    return this.droppedTotal;
  }

  /**
   * Writes every record queued before the call. Resolves even when the write fails (the error
   * goes to `onError` and the records stay queued for the next attempt); check `pending`.
   */
  flush(): Promise<void> {
    return this.enqueueFlush(true);
  }

  /**
   * `partial`: also write the batch still being filled. A flush triggered by a full batch does
   * not: under load that batch holds a record or two, and writing it would double the number of
   * messages to the writer thread and of commits.
   */
  private enqueueFlush(partial: boolean): Promise<void> {
    const run = this.tail.then(() => this.drain(partial));
    this.tail = run.catch(() => {});
    return run;
  }

  /** Stops the timer and flushes. Records recorded later are kept until an explicit flush(). */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.flush();
  }

  /** Timer / full-batch trigger: at most one queued flush, so retries do not pile up. */
  private backgroundFlush(partial: boolean): void {
    if (this.flushQueued || this.pending === this.inFlight) return;
    this.flushQueued = true;
    void this.enqueueFlush(partial).finally(() => {
      this.flushQueued = false;
    });
  }

  private enqueueFilling(): void {
    if (this.filling.size === 0) return;
    this.queue.push(this.filling);
    this.queued += this.filling.size;
    this.filling = new UsageBatch(this.batchSize);
  }

  private async drain(partial: boolean): Promise<void> {
    this.reportDrops();
    // Take everything queued so far; records arriving meanwhile go to a fresh batch.
    if (partial) this.enqueueFilling();
    const batches = this.queue;
    this.queue = [];
    this.inFlight = this.queued;
    this.queued = 0;
    let done = 0;
    try {
      for (; done < batches.length; done++) {
        const batch = batches[done]!;
        await this.storage.insertUsage(batch);
        this.inFlight -= batch.size;
      }
      this.failing = false;
    } catch (err) {
      this.failing = true;
      // Put the unwritten rest back in front of newer records, preserving order.
      const rest = batches.slice(done);
      this.queue = rest.concat(this.queue);
      for (const batch of rest) this.queued += batch.size;
      this.report(toError(err, 'usage write failed; records kept for retry'));
    } finally {
      this.inFlight = 0;
    }
    this.enforceBound();
    this.reportDrops();
  }

  /**
   * Drops the oldest whole batches while over the bound: at least a batch at a time, so a long
   * storage outage costs one drop per batch of records, not work on every record().
   */
  private enforceBound(): void {
    while (this.queued + this.filling.size + this.inFlight > this.maxBuffered) {
      const oldest = this.queue.shift();
      let dropped: number;
      if (oldest !== undefined) {
        dropped = oldest.size;
        this.queued -= dropped;
      } else {
        dropped = this.filling.size;
        if (dropped === 0) return;
        this.filling = new UsageBatch(this.batchSize);
      }
      this.droppedTotal += dropped;
      this.unreportedDrops += dropped;
    }
  }

  private reportDrops(): void {
    if (this.unreportedDrops === 0) return;
    const dropped = this.unreportedDrops;
    this.unreportedDrops = 0;
    this.report(new UsageBufferOverflowError(dropped, this.droppedTotal, this.maxBuffered));
  }

  /** A throwing callback must not break the flush chain or surface as an unhandled rejection. */
  private report(err: Error): void {
    try {
      this.onError(err);
    } catch {
      // Nothing sensible left to do with an error about reporting an error.
    }
  }
}

function toError(err: unknown, context: string): Error {
  if (err instanceof Error) return err;
  return new Error(`${context}: ${String(err)}`);
}
