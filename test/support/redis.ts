/**
 * Redis for tests: the shared server on 127.0.0.1:6379 (REDIS_TEST_URL) with a key prefix per
 * test, and throwaway servers on free ports for the tests that stop Redis mid-traffic.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { createCountersClient, type CountersClient } from '../../src/counters/redis/client.ts';
import { RedisNames } from '../../src/counters/redis/keys.ts';
import { RedisCounterStore, type RedisOnError } from '../../src/counters/redis/store.ts';
import { freePort } from './processes.ts';

export const REDIS_URL = process.env.REDIS_TEST_URL ?? 'redis://127.0.0.1:6379';

/** A prefix no other test uses, so tests sharing the Redis server never see each other's counters. */
export function testPrefix(): string {
  return `fgtest-${randomBytes(5).toString('hex')}:`;
}

/** Deletes every key of a prefix (counters and learned capacity). */
export async function dropPrefix(prefix: string, url = REDIS_URL): Promise<void> {
  const client = new Redis(url, { lazyConnect: true, protocol: 2 });
  try {
    await client.connect();
    const pattern = new RedisNames(prefix).everyKeyPattern;
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      if (keys.length > 0) await client.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    client.disconnect();
  }
}

export interface TestRedisStore {
  store: RedisCounterStore;
  client: CountersClient;
  prefix: string;
  names: RedisNames;
  close(): Promise<void>;
}

/** A connected Redis counter store on a fresh prefix; close() removes its keys. */
export async function openRedisStore(options: { url?: string; leaseSeconds?: number; timeoutMs?: number; onError?: RedisOnError; prefix?: string; maxChildren?: number; reservations?: boolean } = {}): Promise<TestRedisStore> {
  const url = options.url ?? REDIS_URL;
  const prefix = options.prefix ?? testPrefix();
  const client = createCountersClient({ url, timeoutMs: options.timeoutMs ?? 2000, name: 'floodgate-test' });
  await client.connect();
  const names = new RedisNames(prefix);
  const logger = { info: () => {}, warn: () => {} };
  const store = new RedisCounterStore({ client, names, leaseSeconds: options.leaseSeconds ?? 30, timeoutMs: options.timeoutMs ?? 2000, onError: options.onError ?? 'local', logger, probeIntervalMs: 50, maxChildren: options.maxChildren, reservations: options.reservations ?? true });
  return {
    store,
    client,
    prefix,
    names,
    async close() {
      store.close();
      client.disconnect();
      await dropPrefix(prefix, url);
    },
  };
}

/** The Redis server's clock at the start of a second: waits until at least half a second is left in it. */
export async function freshSecond(client: Redis): Promise<number> {
  for (;;) {
    const [seconds, micros] = await client.time();
    if (Number(micros) < 500_000) return Number(seconds);
    await sleep(Math.ceil((1_000_000 - Number(micros)) / 1000) + 5);
  }
}

/** A redis-server of the test's own on a free port, without persistence, that the test can stop and start again. */
export interface OwnRedis {
  readonly url: string;
  readonly port: number;
  /** `args`: more redis-server options for this run (e.g. `['--databases', '2']`). */
  start(args?: readonly string[]): Promise<void>;
  /** SIGKILL: the server is gone at once, as in a crash. */
  stop(): Promise<void>;
  /** SIGSTOP / SIGCONT: the server keeps its connections but answers nothing meanwhile (a hung Redis). */
  pause(): void;
  resume(): void;
}

/** `password`: the server requires it (`requirepass`); `url` then carries it. */
export async function ownRedis(options: { password?: string } = {}): Promise<OwnRedis> {
  const port = await freePort();
  let child: ChildProcess | undefined;
  const auth = options.password === undefined ? [] : ['--requirepass', options.password];
  const own: OwnRedis = {
    url: options.password === undefined ? `redis://127.0.0.1:${port}` : `redis://:${encodeURIComponent(options.password)}@127.0.0.1:${port}`,
    port,
    async start(args = []) {
      if (child !== undefined && child.exitCode === null) return;
      child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...auth, ...args], { stdio: 'ignore' });
      const probe = new Redis(own.url, { lazyConnect: true, retryStrategy: () => null, protocol: 2 });
      probe.on('error', () => {});
      try {
        for (let attempt = 0; ; attempt++) {
          try {
            await probe.connect();
            await probe.ping();
            return;
          } catch (err) {
            if (attempt > 200) throw err;
            await sleep(25);
          }
        }
      } finally {
        probe.disconnect();
      }
    },
    async stop() {
      const running = child;
      child = undefined;
      if (running === undefined || running.exitCode !== null) return;
      const exited = new Promise((resolve) => running.once('exit', resolve));
      running.kill('SIGKILL');
      await exited;
    },
    pause() {
      child?.kill('SIGSTOP');
    },
    resume() {
      child?.kill('SIGCONT');
    },
  };
  await own.start();
  return own;
}
