/**
 * The Redis connection of the counter store (ioredis), tuned so that nothing waits on a Redis that
 * is down or slow: no offline queue (a command fails at once while disconnected), no retry of
 * commands across reconnects (an admission is never counted twice), a reply deadline per command,
 * and auto-pipelining, so that concurrent admissions share round trips.
 */
import { Redis } from 'ioredis';
import { ADD_TOKENS, ADMIT, READ, RELEASE, RENEW } from './scripts.ts';

type Arg = string | number;
type Args = ReadonlyArray<Arg | readonly Arg[]>;

/** The scripts, as commands (EVALSHA, with a fallback to EVAL when Redis lost the script cache). */
export interface CounterScripts {
  floodgateAdmit(numKeys: number, ...args: Args): Promise<string[]>;
  floodgateAddTokens(numKeys: number, ...args: Args): Promise<string>;
  floodgateRead(numKeys: number, ...args: Args): Promise<string[]>;
  floodgateRelease(numKeys: number, ...args: Args): Promise<string>;
  floodgateRenew(numKeys: number, ...args: Args): Promise<string>;
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
    // Counts go up to 2^53 - 1, where ioredis' integer decoding loses the last digit: take them
    // as strings and convert them exactly.
    stringNumbers: true,
    enableAutoPipelining: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    commandTimeout: options.timeoutMs,
    connectTimeout: Math.max(options.timeoutMs, 1000),
    // Reconnect quickly: while Redis is away the gateway runs degraded.
    retryStrategy: (attempt) => Math.min(attempt * 100, 1000),
  });
  client.defineCommand('floodgateAdmit', { lua: ADMIT });
  client.defineCommand('floodgateAddTokens', { lua: ADD_TOKENS });
  client.defineCommand('floodgateRead', { lua: READ });
  client.defineCommand('floodgateRelease', { lua: RELEASE });
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
