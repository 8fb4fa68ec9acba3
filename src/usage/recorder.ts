/**
 * Takes usage records off the request hot path: `record()` only appends to memory; a timer (or
 * a full batch) writes them to storage in batches. A failed write keeps its records for the next
 * flush, so a storage outage loses nothing until the bounded buffer overflows.
 *
 * One record the database cannot store must not hold back the others: a batch that fails is
 * written again row by row, and a row the database refuses (see UsageRejectedError), or that
 * keeps failing while the rows after it are written, is set aside (`onSetAside`) instead of
 * being retried for ever.
 */

import { UsageRejectedError, type UsageRecord, type UsageRepository } from '../storage/usage/types.ts';
import { cleanRecord, storableCost } from './clean.ts';

/** A usage record as its producer knows it: the recorder prices it unless it carries a cost. */
export type UsageEntry = Omit<UsageRecord, 'costUsd'> & { costUsd?: number };

export interface UsageRecorderOptions {
  /** False (USAGE_ENABLED=false): `record` is a no-op and nothing is written. Default true. */
  enabled?: boolean;
  /** Interval between background flushes. Default 1000 ms. */
  flushIntervalMs?: number;
  /** Records per `UsageRepository.insert` batch; a full batch also triggers a flush early. Default 500. */
  batchSize?: number;
  /** Records held in memory at most; beyond it the oldest are dropped. Default 100 000. */
  maxBuffered?: number;
  /** Write failures and overflow drops; the recorder never logs by itself. */
  onError?: (err: Error) => void;
  /** The cost of an entry in US dollars; default 0. Must not throw. */
  price?: (entry: UsageEntry) => number;
  /** Sees every record as it is queued (budgets count spend from it). Must not throw. */
  onRecord?: (record: UsageRecord) => void;
  /**
   * A record that cannot be written, given up on (the caller logs it, with its request id, and
   * counts it). `reason` is the database's refusal or the last error of its failed attempts.
   */
  onSetAside?: (record: UsageRecord, reason: Error) => void;
}

/**
 * Failed single-row writes, each followed in the same pass by a row that was written (so the
 * database works, and this row is the problem), before a row whose error the database did not
 * mark as a refusal is set aside.
 */
const MAX_ROW_FAILURES = 3;
/** Consecutive failed single-row writes after which a pass stops: the database itself is failing. */
const FAILING_STREAK = 3;

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

/** Reported through `onError` when the recorder closes with records it could not write. */
export class UsageRecordsLostError extends Error {
  /** The request ids of the lost records that have one, at most the first 100. */
  readonly requestIds: string[];

  constructor(records: readonly UsageRecord[]) {
    super(`${records.length} usage record(s) could not be written before shutdown and are lost`);
    this.name = 'UsageRecordsLostError';
    this.requestIds = records.flatMap((r) => (r.requestId === null ? [] : [r.requestId])).slice(0, 100);
  }
}

type UsageSink = Pick<UsageRepository, 'insert'>;

export class UsageRecorder {
  readonly enabled: boolean;
  private readonly storage: UsageSink;
  private readonly batchSize: number;
  private readonly maxBuffered: number;
  private readonly onError: (err: Error) => void;
  private readonly price: (entry: UsageEntry) => number;
  private readonly recordListeners: Array<(record: UsageRecord) => void> = [];
  private readonly setAsideListeners: Array<(record: UsageRecord, reason: Error) => void> = [];
  /** Failed single-row writes of each record still queued (see MAX_ROW_FAILURES). */
  private readonly rowFailures = new WeakMap<UsageRecord, number>();
  private setAsideTotal = 0;
  /** Records not yet taken by a flush, oldest first. */
  private buffer: UsageRecord[] = [];
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
  private isFailing = false;

  constructor(storage: UsageSink, options: UsageRecorderOptions = {}) {
    this.storage = storage;
    this.enabled = options.enabled ?? true;
    this.batchSize = Math.max(1, Math.trunc(options.batchSize ?? 500));
    this.maxBuffered = Math.max(this.batchSize, Math.trunc(options.maxBuffered ?? 100_000));
    this.onError = options.onError ?? (() => {});
    this.price = options.price ?? (() => 0);
    if (options.onRecord !== undefined) this.recordListeners.push(options.onRecord);
    if (options.onSetAside !== undefined) this.setAsideListeners.push(options.onSetAside);
    if (this.enabled) {
      this.timer = setInterval(() => this.backgroundFlush(true), options.flushIntervalMs ?? 1000);
      // A pending flush must not keep the process alive; shutdown calls close() explicitly.
      this.timer.unref();
    }
  }

  /**
   * Adds listeners besides the options' own: `record` sees every record as it is queued (budgets
   * count spend from it), `setAside` every record given up on. Neither may throw.
   */
  listen(listeners: { record?: (record: UsageRecord) => void; setAside?: (record: UsageRecord, reason: Error) => void }): void {
    if (listeners.record !== undefined) this.recordListeners.push(listeners.record);
    if (listeners.setAside !== undefined) this.setAsideListeners.push(listeners.setAside);
  }

  private setAsideTo(record: UsageRecord, reason: Error): void {
    for (const listener of this.setAsideListeners) listener(record, reason);
  }

  /**
   * Cleans (see cleanRecord), prices and queues a record, and answers it as queued (undefined
   * when recording is off). Never awaits, never throws, does no I/O.
   */
  record(entry: UsageEntry): UsageRecord | undefined {
    if (!this.enabled) return undefined;
    const r = cleanRecord(entry);
    // Priced from the cleaned token counts.
    if (entry.costUsd === undefined) r.costUsd = storableCost(this.price(r));
    this.buffer.push(r);
    for (const listener of this.recordListeners) listener(r);
    if (this.pending > this.maxBuffered) this.enforceBound();
    if (this.buffer.length >= this.batchSize && !this.isFailing) this.backgroundFlush(false);
    return r;
  }

  /** Records waiting to be written (including those being written right now). */
  get pending(): number {
    return this.buffer.length + this.inFlight;
  }

  /** True from a failed write until the next successful one. */
  get failing(): boolean {
    return this.isFailing;
  }

  /** Records dropped because the buffer overflowed. */
  get dropped(): number {
    return this.droppedTotal;
  }

  /** Records given up on because they could not be written (see `onSetAside`). */
  get setAside(): number {
    return this.setAsideTotal;
  }

  /**
   * Writes every record queued before the call. Resolves even when the write fails (the error
   * goes to `onError` and the records stay queued for the next attempt); check `pending`.
   */
  flush(): Promise<void> {
    return this.enqueueFlush(true);
  }

  /**
   * Stops the timer and flushes. Records still unwritten then (storage unavailable) are reported
   * as a UsageRecordsLostError. Records recorded later are kept until an explicit flush().
   */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.flush();
    if (this.buffer.length > 0) this.report(new UsageRecordsLostError(this.buffer));
  }

  /**
   * `partial`: also write the last, incomplete batch. A flush triggered by a full batch does
   * not: under load that remainder holds a record or two, and writing it would double the
   * number of commits. The timer writes it within the flush interval.
   */
  private enqueueFlush(partial: boolean): Promise<void> {
    const run = this.tail.then(() => this.drain(partial));
    this.tail = run.catch(() => {});
    return run;
  }

  /** Timer / full-batch trigger: at most one queued flush, so retries do not pile up. */
  private backgroundFlush(partial: boolean): void {
    if (this.flushQueued || this.buffer.length === 0) return;
    this.flushQueued = true;
    void this.enqueueFlush(partial).finally(() => {
      this.flushQueued = false;
    });
  }

  private async drain(partial: boolean): Promise<void> {
    this.reportDrops();
    // Take what is queued so far; records arriving meanwhile wait for the next flush.
    const count = partial ? this.buffer.length : this.buffer.length - (this.buffer.length % this.batchSize);
    const taken = this.buffer.splice(0, count);
    this.inFlight = taken.length;
    const retry: UsageRecord[] = [];
    let error: unknown;
    let done = 0;
    try {
      while (done < taken.length) {
        const batch = taken.slice(done, done + this.batchSize);
        const outcome = await this.write(batch);
        done += batch.length;
        this.inFlight -= batch.length;
        if (outcome !== undefined) {
          retry.push(...outcome.unwritten);
          error = outcome.error;
          if (outcome.unavailable) {
            retry.push(...taken.slice(done));
            break;
          }
        }
        // A synchronous driver (SQLite) writes on this thread: let requests run between batches
        // when a backlog is written after an outage.
        if (done < taken.length) await new Promise<void>((resolve) => setImmediate(resolve));
      }
    } finally {
      this.inFlight = 0;
    }
    this.isFailing = retry.length > 0;
    if (retry.length > 0) {
      // Put the unwritten records back in front of newer ones, preserving order.
      this.buffer = retry.concat(this.buffer);
      this.report(toError(error, 'usage write failed; records kept for retry'));
    }
    this.enforceBound();
    this.reportDrops();
  }

  /**
   * Writes one batch, row by row when the batch as a whole fails. Resolves with the rows to try
   * again, if any, and whether the database looks unavailable (then the pass stopped early);
   * every other row is written or set aside.
   */
  private async write(batch: UsageRecord[]): Promise<{ unwritten: UsageRecord[]; error: unknown; unavailable: boolean } | undefined> {
    try {
      await this.storage.insert(batch);
      return undefined;
    } catch (err) {
      if (batch.length === 1) {
        if (!(err instanceof UsageRejectedError)) return { unwritten: batch, error: err, unavailable: true };
        this.setRecordAside(batch[0]!, err);
        return undefined;
      }
    }
    const unwritten: UsageRecord[] = [];
    /** Rows that failed since the last row written, with their errors. */
    let suspects: Array<{ record: UsageRecord; error: unknown }> = [];
    let written = false;
    let error: unknown;
    for (let i = 0; i < batch.length; i++) {
      if (suspects.length >= FAILING_STREAK) {
        unwritten.push(...suspects.map((s) => s.record), ...batch.slice(i));
        return { unwritten, error, unavailable: true };
      }
      const record = batch[i]!;
      try {
        await this.storage.insert([record]);
      } catch (err) {
        if (err instanceof UsageRejectedError) {
          this.setRecordAside(record, err);
        } else {
          error = err;
          suspects.push({ record, error: err });
        }
        continue;
      }
      written = true;
      // A row written after them: the database works, those rows are the problem.
      for (const suspect of suspects) {
        const failures = (this.rowFailures.get(suspect.record) ?? 0) + 1;
        this.rowFailures.set(suspect.record, failures);
        if (failures >= MAX_ROW_FAILURES) this.setRecordAside(suspect.record, toError(suspect.error, 'usage write failed'));
        else unwritten.push(suspect.record);
      }
      suspects = [];
    }
    unwritten.push(...suspects.map((s) => s.record));
    return unwritten.length === 0 ? undefined : { unwritten, error, unavailable: !written };
  }

  private setRecordAside(record: UsageRecord, reason: Error): void {
    this.setAsideTotal++;
    this.rowFailures.delete(record);
    try {
      this.setAsideTo(record, reason);
    } catch {
      // A failing callback must not stop the other rows from being written.
    }
  }

  /**
   * Drops the oldest records while over the bound, at least a batch at a time, so a long storage
   * outage costs one drop per batch of records, not work on every record().
   */
  private enforceBound(): void {
    const over = this.pending - this.maxBuffered;
    if (over <= 0) return;
    const dropped = Math.min(this.buffer.length, Math.max(over, this.batchSize));
    this.buffer.splice(0, dropped);
    this.droppedTotal += dropped;
    this.unreportedDrops += dropped;
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
