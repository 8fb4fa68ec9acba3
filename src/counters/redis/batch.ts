/**
 * The counter operations of one event-loop turn, sent to Redis as one BATCH script call (see
 * scripts.ts). Requests that arrive together (the HTTP callbacks of one turn) share one command,
 * one round trip and one reply, instead of paying the client's and the server's per-command work
 * each; operations keep their order, and each is still atomic.
 */
import { within } from './client.ts';

/** Operation codes of the BATCH script. */
export const ADMIT = 1;
export const ADD_TOKENS = 2;
export const RELEASE = 3;
export const READ = 4;
export const LEARN = 5;
export const READ_LEARNED = 6;
export const READ_BUDGETS = 7;
export const SETTLE_BUDGETS = 8;
export const PUBLISH = 9;

/** One operation's part of the batch reply: the doubles from index `at` on. */
export interface BatchAnswer {
  readonly reply: Buffer;
  readonly at: number;
}

interface Operation {
  readonly code: number;
  readonly keyCount: number;
  /** The operation's first parameter (lease length, tokens), NaN when it has none. */
  readonly first: number;
  /** Its further parameters (per-rule caps or periods). */
  readonly rest: Float64Array | undefined;
  /** How many doubles it answers. */
  readonly width: number;
  resolve(answer: BatchAnswer): void;
  reject(err: Error): void;
}

export type SendBatch = (keys: ReadonlyArray<Buffer | string>, numbers: Buffer, leases: readonly string[]) => Promise<Buffer>;

/** A string parameter of an operation, or how to make it when the batch is sent (what the turn gathered). */
export type Text = string | (() => string);

export class ScriptBatch {
  readonly #send: SendBatch;
  readonly #timeoutMs: number;
  #keys: Array<Buffer | string> = [];
  #leases: Text[] = [];
  #operations: Operation[] = [];
  #scheduled = false;

  constructor(send: SendBatch, timeoutMs: number) {
    this.#send = send;
    this.#timeoutMs = timeoutMs;
  }

  /**
   * Adds an operation to the batch sent at the end of this turn. Settles with its part of the
   * reply, or rejects when Redis fails or does not answer within the timeout.
   */
  add(code: number, keys: ReadonlyArray<Buffer | string>, first: number, rest: Float64Array | undefined, lease: Text | readonly Text[] | undefined, width: number): Promise<BatchAnswer> {
    for (const key of keys) this.#keys.push(key);
    if (typeof lease === 'string' || typeof lease === 'function') this.#leases.push(lease);
    else if (lease !== undefined) for (const text of lease) this.#leases.push(text);
    if (!this.#scheduled) {
      this.#scheduled = true;
      // After the I/O callbacks of this turn: every request that arrived in it joins.
      setImmediate(() => this.flush());
    }
    return new Promise<BatchAnswer>((resolve, reject) => {
      this.#operations.push({ code, keyCount: keys.length, first, rest, width, resolve, reject });
    });
  }

  /** Sends what is queued now (so that a command sent next reaches Redis after it). */
  flush(): void {
    this.#scheduled = false;
    const operations = this.#operations;
    if (operations.length === 0) return;
    const sent = this.#send(this.#keys, encode(operations), this.#leases.map((text) => (typeof text === 'string' ? text : text())));
    this.#keys = [];
    this.#leases = [];
    this.#operations = [];
    within(sent, this.#timeoutMs).then(
      (reply) => {
        let at = 0;
        for (const operation of operations) {
          operation.resolve({ reply, at });
          at += operation.width;
        }
      },
      (err: Error) => {
        for (const operation of operations) operation.reject(err);
      },
    );
  }
}

/** Every operation's numbers, in order: code, key count, first parameter (if any), the rest. */
function encode(operations: readonly Operation[]): Buffer {
  let count = 0;
  for (const operation of operations) count += 2 + (Number.isNaN(operation.first) ? 0 : 1) + (operation.rest?.length ?? 0);
  const numbers = Buffer.allocUnsafe(count * 8);
  let offset = 0;
  for (const operation of operations) {
    offset = numbers.writeDoubleLE(operation.code, offset);
    offset = numbers.writeDoubleLE(operation.keyCount, offset);
    if (!Number.isNaN(operation.first)) offset = numbers.writeDoubleLE(operation.first, offset);
    const rest = operation.rest;
    if (rest !== undefined) for (let i = 0; i < rest.length; i++) offset = numbers.writeDoubleLE(rest[i]!, offset);
  }
  return numbers;
}
