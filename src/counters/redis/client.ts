/**
 * The Redis connection of the counter store (ioredis), tuned so that nothing waits on a Redis that
 * is down or slow: no offline queue (a command fails at once while disconnected), no retry of
 * commands across reconnects (an admission is never counted twice), and a reply deadline per
 * command. Concurrent operations share round trips through the store's own batch (batch.ts), one
 * script call per event-loop turn; ioredis' auto-pipelining is off because it holds a batch back
 * until the previous one's reply has arrived, which only adds latency on top.
 */
import { Redis } from 'ioredis';
import { BATCH, RENEW } from './scripts.ts';

type Arg = string | number | Buffer;
type Args = ReadonlyArray<Arg | readonly Arg[]>;

/** The scripts, as commands (EVALSHA, with a fallback to EVAL when Redis lost the script cache). */
export interface CounterScripts {
  /** Answers the operations' numbers as little-endian doubles (see BATCH). */
  floodgateBatchBuffer(numKeys: number, ...args: Args): Promise<Buffer>;
  floodgateRenew(numKeys: number, ...args: Args): Promise<number>;
}

export type CountersClient = Redis & CounterScripts;

export interface ClientOptions {
  url: string;
  /** The longest a command waits for its reply. */
  timeoutMs: number;
  /** Shown in CLIENT LIST. */
  name: string;
}

export function createCountersClient(options: ClientOptions): CountersClient {
  const client = new Redis(options.url, {
    lazyConnect: true,
    connectionName: options.name,
    // RESP2 works with every Redis version; the scripts' replies are the same in both protocols.
    protocol: 2,
    enableAutoPipelining: false,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    commandTimeout: options.timeoutMs,
    connectTimeout: Math.max(options.timeoutMs, 1000),
    // Reconnect quickly: while Redis is away the gateway runs degraded.
    retryStrategy: (attempt) => Math.min(attempt * 100, 1000),
  });
  client.defineCommand('floodgateBatch', { lua: BATCH });
  client.defineCommand('floodgateRenew', { lua: RENEW });
  // Connection errors surface as failed commands and in the availability log; without a listener
  // ioredis would print each reconnection attempt's error.
  client.on('error', () => {});
  return client as CountersClient;
}

/**
 * Settles like `promise`, or rejects with a timeout error after `ms`. When the event loop was busy
 * past the deadline, the timer runs before the loop reads the sockets, where the reply may be
 * waiting already: the verdict waits for that read (setImmediate runs after it), so a busy gateway
 * does not mistake its own delay for a slow Redis.
 */
export function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(() => {
      setImmediate(() => {
        if (!settled) reject(new Error(`Redis did not answer within ${ms} ms`));
      });
    }, ms);
    promise.then(
      (value) => {
        settled = true;
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        settled = true;
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}
