/**
 * Admission latency by counter store: what Redis adds to each request's admission.
 *
 *   node bench/admission.bench.ts            # prints a table (Redis on REDIS_URL, default 127.0.0.1:6379)
 *   import { runAdmissionBench } from './admission.bench.ts'
 *
 * Each simulated request plays the rate-limit part of a gateway request: admit (timed), then the
 * token charge and the release of its slots, with the 10 rules of the engine micro-benchmark (all
 * matching, caps never reached). Three loads:
 * - one request at a time: the round trip alone;
 * - requests arriving at a steady rate (default 5,000/s) whatever the answers: the latency a
 *   gateway under that load adds to each request;
 * - `connections` loops each sending its next request as soon as the last one is done: the most
 *   admissions one process gets through (the loops then queue, so their latency is mostly waiting).
 * Redis keys live under a prefix of their own, removed at the end.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { MemoryCounterStore } from '../src/counters/memory.ts';
import { createCountersClient } from '../src/counters/redis/client.ts';
import { RedisNames } from '../src/counters/redis/keys.ts';
import { RedisCounterStore } from '../src/counters/redis/store.ts';
import { RateLimiter, type CounterStore } from '../src/ratelimit/index.ts';
import { BENCH_TARGET, matchingRules } from './engine.bench.ts';

export interface AdmissionFigure {
  readonly store: 'memory' | 'redis';
  readonly load: string;
  readonly admissionsPerSecond: number;
  readonly p50Us: number;
  readonly p99Us: number;
}

export interface AdmissionBenchResult {
  readonly figures: readonly AdmissionFigure[];
  /** Arrivals per second of the steady load. */
  readonly rate: number;
  /** Redis p50 and p99 minus memory's under the steady load. */
  readonly addedP50Us: number;
  readonly addedP99Us: number;
}

/** Latencies in tenths of a microsecond, up to 100 ms. */
class Histogram {
  readonly #counts = new Uint32Array(1_000_001);
  #total = 0;

  add(ms: number): void {
    this.#counts[Math.min(this.#counts.length - 1, Math.round(ms * 10_000))]!++;
    this.#total++;
  }

  get total(): number {
    return this.#total;
  }

  /** The q-quantile in microseconds. */
  quantile(q: number): number {
    const rank = Math.ceil(q * this.#total);
    let seen = 0;
    for (let i = 0; i < this.#counts.length; i++) {
      seen += this.#counts[i]!;
      if (seen >= rank) return i / 10;
    }
    return Infinity;
  }
}

interface Run {
  histogram: Histogram;
  seconds: number;
}

function limiterOn(store: CounterStore): RateLimiter {
  const limiter = new RateLimiter({ store });
  limiter.replaceRules(matchingRules());
  return limiter;
}

/** One request's rate-limit work; resolves with its admission latency in ms. */
async function request(limiter: RateLimiter): Promise<number> {
  const t0 = performance.now();
  let result = limiter.admit(BENCH_TARGET);
  if (result instanceof Promise) result = await result;
  const latency = performance.now() - t0;
  if (!result.ok) throw new Error(`the benchmark request was refused: ${result.message}`);
  const charged = limiter.chargeTokens(BENCH_TARGET, 42);
  if (charged instanceof Promise) await charged;
  result.release();
  return latency;
}

/** `loops` loops, each sending its next request when the last one is done. */
async function closedLoop(store: CounterStore, loops: number, seconds: number): Promise<Run> {
  const limiter = limiterOn(store);
  const histogram = new Histogram();
  const started = performance.now();
  const end = started + seconds * 1000;
  const loop = async (): Promise<void> => {
    while (performance.now() < end) {
      histogram.add(await request(limiter));
      // The memory store never yields by itself: let the other loops in, as requests would.
      await Promise.resolve();
    }
  };
  await Promise.all(Array.from({ length: loops }, loop));
  return { histogram, seconds: (performance.now() - started) / 1000 };
}

/** Requests arriving at `rate` per second, each on its own, for `seconds`. */
async function steady(store: CounterStore, rate: number, seconds: number): Promise<Run> {
  const limiter = limiterOn(store);
  const histogram = new Histogram();
  const started = performance.now();
  const running: Array<Promise<void>> = [];
  let sent = 0;
  const total = Math.round(rate * seconds);
  await new Promise<void>((resolve) => {
    const tick = (): void => {
      const due = Math.min(total, Math.floor(((performance.now() - started) / 1000) * rate));
      for (; sent < due; sent++) running.push(request(limiter).then((latency) => histogram.add(latency)));
      if (sent < total) setTimeout(tick, 1);
      else resolve();
    };
    tick();
  });
  await Promise.all(running);
  return { histogram, seconds: (performance.now() - started) / 1000 };
}

export async function runAdmissionBench(options: { connections?: number; seconds?: number; rate?: number; redisUrl?: string } = {}): Promise<AdmissionBenchResult> {
  const connections = options.connections ?? 50;
  const seconds = options.seconds ?? 4;
  const rate = options.rate ?? 5000;
  const figures: AdmissionFigure[] = [];
  const record = (store: AdmissionFigure['store'], load: string, run: Run): AdmissionFigure => {
    const figure = { store, load, admissionsPerSecond: Math.round(run.histogram.total / run.seconds), p50Us: run.histogram.quantile(0.5), p99Us: run.histogram.quantile(0.99) };
    figures.push(figure);
    return figure;
  };
  const steadyLoad = `steady ${rate}/s`;
  const memory = new MemoryCounterStore();
  record('memory', 'one at a time', await closedLoop(memory, 1, seconds));
  const memorySteady = record('memory', steadyLoad, await steady(memory, rate, seconds));
  record('memory', `${connections} loops`, await closedLoop(memory, connections, seconds));

  const names = new RedisNames(`floodgate-bench-${randomBytes(4).toString('hex')}:`);
  const client = createCountersClient({ url: options.redisUrl ?? process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379', timeoutMs: 1000, name: 'floodgate-bench' });
  await client.connect();
  const redis = new RedisCounterStore({ client, names, leaseSeconds: 30, timeoutMs: 1000, onError: 'deny', logger: { info: () => {}, warn: () => {} } });
  try {
    await closedLoop(redis, connections, 1); // warm-up: JIT, the script loaded
    record('redis', 'one at a time', await closedLoop(redis, 1, seconds));
    const redisSteady = record('redis', steadyLoad, await steady(redis, rate, seconds));
    record('redis', `${connections} loops`, await closedLoop(redis, connections, seconds));
    if (!redis.available) throw new Error('Redis did not answer within 1 s during the benchmark');
    return { figures, rate, addedP50Us: round1(redisSteady.p50Us - memorySteady.p50Us), addedP99Us: round1(redisSteady.p99Us - memorySteady.p99Us) };
  } finally {
    redis.close();
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', names.counterPattern, 'COUNT', 1000);
      if (keys.length > 0) await client.del(...keys);
      cursor = next;
    } while (cursor !== '0');
    client.disconnect();
  }
}

const round1 = (x: number): number => Math.round(x * 10) / 10;

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const result = await runAdmissionBench();
  console.table(result.figures);
  console.log(`added by Redis at a steady ${result.rate} requests/s: p50 ${result.addedP50Us} us, p99 ${result.addedP99Us} us (target p50 <= 500 us)`);
}
