/**
 * Main-thread side of the SQLite usage writer. The insert transaction costs milliseconds per
 * batch, spent on the event loop that serves requests; here it runs in a worker thread that owns
 * its own connection to the database file (WAL lets the main connection read meanwhile).
 *
 * Lifecycle: the thread starts with the first batch (callers create the writer only after the
 * migrations ran, so the thread never sees a half-built schema) and then stays; it is unref'd
 * whenever nothing is pending, so a forgotten close() cannot keep the process alive, while a
 * pending batch still holds it until answered.
 *
 * Failures: `insert` resolves once the thread committed the batch and rejects when the insert
 * failed, so the caller (UsageRecorder) keeps the records and retries. If the thread dies, each
 * batch it had not answered rejects and the next batch starts a new thread. A new thread rather
 * than falling back to an in-thread insert: a crash is most likely transient, and a silent
 * fallback would bring the latency cost back for the rest of the process's life. Retries are
 * paced by the caller (the recorder retries on its timer), so a thread that cannot start does not
 * respawn in a tight loop. A thread dying between its commit and its answer makes the caller
 * retry a committed batch: at-least-once, never lost.
 */

import { Worker } from 'node:worker_threads';
import type { UsageColumns } from './usage-batch.ts';

/** `workerData` of the thread. */
export interface WriterInit {
  path: string;
  busyTimeoutMs: number;
}

export interface WriterRequest {
  id: number;
  batch: UsageColumns;
}

export interface WriterReply {
  id: number;
  /** Absent when the batch was committed. */
  error?: { message: string; code?: string };
}

export interface SqliteUsageWriterOptions extends WriterInit {
  /** The thread's entry module; tests substitute their own. */
  workerUrl?: URL;
}

// The sources run as .ts (type stripping) and the build as .js: the entry is this module's sibling
// of the same kind. (A literal './x.ts' would not be rewritten by the compiler.)
const WORKER_URL = new URL(
  `./sqlite-usage-worker${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`,
  import.meta.url,
);

interface Pending {
  resolve: () => void;
  reject: (err: Error) => void;
}

/** One worker thread and the batches it has not answered yet. */
interface Thread {
  worker: Worker;
  pending: Map<number, Pending>;
}

export class SqliteUsageWriter {
  private readonly init: WriterInit;
  private readonly workerUrl: URL;
  private thread: Thread | undefined;
  private nextId = 1;
  /** Settles (never rejects) with each batch, for close() to wait on. */
  private readonly inflight = new Set<Promise<void>>();
  private closed = false;

  constructor(options: SqliteUsageWriterOptions) {
    this.init = { path: options.path, busyTimeoutMs: options.busyTimeoutMs };
    this.workerUrl = options.workerUrl ?? WORKER_URL;
  }

  /** Commits `batch` in the writer thread. Its typed array is transferred: pass a copy (UsageBatch.columns()). */
  insert(batch: UsageColumns): Promise<void> {
    if (this.closed) return Promise.reject(new Error('SQLite usage writer is closed'));
    let thread: Thread;
    try {
      thread = this.thread ?? this.spawn();
    } catch (err) {
      return Promise.reject(asError(err, 'cannot start the SQLite usage writer thread'));
    }
    const id = this.nextId++;
    const done = new Promise<void>((resolve, reject) => thread.pending.set(id, { resolve, reject }));
    try {
      const request: WriterRequest = { id, batch };
      thread.worker.postMessage(request, [batch.numbers.buffer]);
    } catch (err) {
      thread.pending.delete(id);
      updateRef(thread);
      return Promise.reject(asError(err, 'cannot send usage batch to the SQLite writer thread'));
    }
    updateRef(thread);
    const settled = done.then(noop, noop);
    this.inflight.add(settled);
    void settled.then(() => this.inflight.delete(settled));
    return done;
  }

  /** Waits for every batch sent so far to be answered, then ends the thread. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.inflight);
    const thread = this.thread;
    this.thread = undefined;
    if (thread) await thread.worker.terminate();
  }

  private spawn(): Thread {
    const worker = new Worker(this.workerUrl, { workerData: this.init });
    const thread: Thread = { worker, pending: new Map() };
    worker.on('message', (reply: WriterReply) => {
      const entry = thread.pending.get(reply.id);
      if (entry === undefined) return;
      thread.pending.delete(reply.id);
      updateRef(thread);
      if (reply.error === undefined) entry.resolve();
      else entry.reject(insertError(reply.error));
    });
    // A dead thread answers nothing more: fail what it still owes so the caller keeps those
    // records, and forget it so the next batch starts a fresh one. 'exit' follows 'error'.
    const die = (cause: Error): void => {
      if (this.thread === thread) this.thread = undefined;
      const owed = [...thread.pending.values()];
      thread.pending.clear();
      for (const entry of owed) entry.reject(cause);
    };
    worker.on('error', (err: unknown) => {
      const message = err instanceof Error ? err.message : String(err);
      die(new Error(`SQLite usage writer thread failed: ${message}`, { cause: err }));
    });
    worker.on('exit', (code) => {
      die(new Error(`SQLite usage writer thread exited (code ${code}) before confirming the batch`));
    });
    // An answer that cannot be read leaves its batch unanswered forever; end the thread instead.
    worker.on('messageerror', () => void worker.terminate());
    this.thread = thread;
    return thread;
  }
}

/** Only a thread with batches to answer may keep the process alive. */
function updateRef(thread: Thread): void {
  if (thread.pending.size > 0) thread.worker.ref();
  else thread.worker.unref();
}

function insertError(reply: { message: string; code?: string }): Error {
  const err = new Error(`SQLite usage insert failed: ${reply.message}`) as Error & { code?: string };
  if (reply.code !== undefined) err.code = reply.code;
  return err;
}

function asError(err: unknown, context: string): Error {
  return err instanceof Error ? err : new Error(`${context}: ${String(err)}`);
}

function noop(): void {}
