/**
 * The waiting rows: requests that wait for capacity (X-Floodgate-Max-Wait) behind a saturated
 * concurrency cap, and what a waiting request costs in memory. Part of `npm run bench`; alone:
 *
 *   node bench/waiting.bench.ts                 # memory and Redis, 3 rounds of 8 s; 5,000 waiters (~2 min)
 *   node bench/waiting.bench.ts --quick         # 1 round of 4 s (~1 min)
 *   flags: --rounds N --duration N --clients N --waiters N --quick --out FILE (the result as JSON)
 *   (or BENCH_WAITING_ROUNDS, BENCH_WAITING_DURATION, BENCH_WAITING_CLIENTS, BENCH_WAITING_WAITERS)
 *
 * Wake-up: a gateway whose provider has a concurrency cap of CAP, an upstream that answers each
 * request UPSTREAM_MS after it arrived, and C clients sending back to back with
 * `X-Floodgate-Max-Wait: 30`, so that C - CAP requests wait at any moment. The upstream keeps a
 * timeline on its own clock: when each request arrived and when each answer was written out. With
 * a cap of CAP, the k-th arrival after the first CAP took the slot freed by the (k - CAP)-th
 * completion, so its wake-up latency is arrival_k - completion_(k - CAP): the gateway relaying the
 * answer and releasing the slot, waking a waiter, admitting it again and sending its upstream
 * request. Admissions/s: arrivals per second. Counters in memory and in Redis (REDIS_URL).
 *
 * Memory: a gateway with a cap of 1 holds one request on an upstream that does not answer, and
 * WAITERS - 1 more wait behind it. Heap (after full collections) and RSS with them waiting, minus
 * the same process idle after a warm-up, divided by the waiters: a waiting request's whole cost,
 * its connection and HTTP request included.
 */
import { writeFileSync } from 'node:fs';
import { Agent, request, type ClientRequest } from 'node:http';
import { parseArgs } from 'node:util';
import {
  JSON_BODY, LOAD_CPU, SERVER_CPU, STATS_PRELOAD, canPin, load, median, pin, startGateway, startUpstream, type ChildServer, type GatewayVariant,
} from './lib.ts';
import type { ServerStats } from './servers/stats.ts';

// ---- what is run ----------------------------------------------------------------------------

/** The provider's concurrency cap in the wake-up rows (the `queue10` gateway variants). */
const CAP = 10;
/** How long the upstream takes over each request of the wake-up rows. */
const UPSTREAM_MS = 20;
/** Unmeasured seconds at the start of each run, while the queue fills. */
const RAMP_SECONDS = 2;
const WAIT_HEADERS = { 'x-floodgate-max-wait': '30' };
const messages = [{ role: 'user', content: 'Say hello in one short sentence.' }];
/** A chat request the bench upstream answers `ms` after it arrived, putting it on its timeline. */
const delayedBody = (ms: number): string => JSON.stringify({ model: 'gpt-4o', messages, max_tokens: 32, metadata: { answer_after_ms: String(ms) } });

export type WaitingStore = 'memory' | 'redis';
const VARIANTS: Record<WaitingStore, GatewayVariant> = { memory: 'queue10', redis: 'redisQueue10' };

export interface WaitingSettings {
  rounds: number;
  /** Measured seconds of each run (after RAMP_SECONDS). */
  durationSeconds: number;
  /** Clients sending back to back; all but CAP wait at any moment. */
  clients: number;
  /** Requests held open for the memory figure (one in flight, the rest waiting). */
  waiters: number;
}

export function waitingSettings(flags: Partial<Record<'rounds' | 'duration' | 'clients' | 'waiters', string>>, quick: boolean): WaitingSettings {
  const count = (name: keyof typeof flags, normal: number, quickValue: number, min: number): number => {
    const text = flags[name] ?? process.env[`BENCH_WAITING_${name.toUpperCase()}`];
    const value = text === undefined ? (quick ? quickValue : normal) : Number(text);
    if (!Number.isInteger(value) || value < min) throw new Error(`waiting, ${name}: expected a whole number >= ${min}, got ${text}`);
    return value;
  };
  return {
    rounds: count('rounds', 3, 1, 1),
    durationSeconds: count('duration', 8, 4, 1),
    clients: count('clients', 200, 200, CAP + 1),
    waiters: count('waiters', 5000, 5000, 2),
  };
}

// ---- figures --------------------------------------------------------------------------------

export interface WakeUpFigures {
  admissionsPerSecond: number;
  /** Slot released (the upstream's answer written out) to the next request arriving at the upstream. */
  wakeUpMs: { p50: number; p99: number };
  /** Wake-ups measured. */
  wakeUps: number;
  errors: number;
  non2xx: number;
}

export interface WaitingRow extends WakeUpFigures {
  store: WaitingStore;
  rounds: WakeUpFigures[];
}

export interface WaitingMemory {
  waiters: number;
  heapBytesPerWaiter: number;
  rssBytesPerWaiter: number;
  idle: { heapBytes: number; rssBytes: number };
  loaded: { heapBytes: number; rssBytes: number };
  /** How long opening every request took until the last one waited. */
  fillSeconds: number;
}

export interface WaitingTarget {
  target: string;
  value: number;
  goal: string;
  pass: boolean;
  /** The figure of every round; `value` is their median. */
  roundValues: number[];
}

export interface WaitingResult {
  method: Record<string, unknown>;
  rows: WaitingRow[];
  memory: WaitingMemory;
  targets: WaitingTarget[];
  ok: boolean;
}

const r2 = (x: number): number => Math.round(x * 100) / 100;

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

interface Timeline {
  arrivals: number[];
  completions: number[];
}

/**
 * Wake-up latencies and admissions per second from the upstream's timeline of one run, taken from
 * the arrivals after the ramp. Throws when an arrival would come before the completion whose slot
 * it took: the pairing (and so the run) is not what it assumes.
 */
export function wakeUpsOf(timeline: Timeline, cap: number, rampMs: number): { latencies: number[]; admissionsPerSecond: number } {
  // Arrivals are noted when a body is whole, stamped with when its headers came: sorted by the stamp.
  const byTime = (a: number, b: number): number => a - b;
  const [arrivals, completions] = [[...timeline.arrivals].sort(byTime), [...timeline.completions].sort(byTime)];
  if (arrivals.length <= cap) throw new Error(`waiting: only ${arrivals.length} requests reached the upstream`);
  const from = arrivals[0]! + rampMs;
  const latencies: number[] = [];
  let first: number | undefined;
  let last = from;
  for (let k = cap; k < arrivals.length && k - cap < completions.length; k++) {
    const arrival = arrivals[k]!;
    if (arrival < from) continue;
    const latency = arrival - completions[k - cap]!;
    if (latency < 0) throw new Error(`waiting: arrival ${k} came ${-latency} ms before completion ${k - cap}: more than ${cap} requests were in flight`);
    latencies.push(latency);
    first ??= arrival;
    last = arrival;
  }
  if (first === undefined || latencies.length < 2) throw new Error('waiting: no wake-up after the ramp');
  return { latencies: latencies.sort((a, b) => a - b), admissionsPerSecond: Math.round(((latencies.length - 1) / (last - first)) * 1000) };
}

async function takeTimeline(upstream: ChildServer): Promise<Timeline> {
  return (await (await fetch(`${upstream.url}/bench/timeline`, { method: 'POST' })).json()) as Timeline;
}

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** One run: `clients` clients back to back through `gateway` for the ramp and the measured seconds. */
async function wakeUpRun(gateway: ChildServer, upstream: ChildServer, settings: WaitingSettings): Promise<WakeUpFigures> {
  // The previous run's last requests are gone (their clients closed): the timeline starts empty.
  await pause(500);
  await takeTimeline(upstream);
  const figures = await load(gateway.url, delayedBody(UPSTREAM_MS), RAMP_SECONDS + settings.durationSeconds, settings.clients, { headers: WAIT_HEADERS, timeoutSeconds: 35 });
  const { latencies, admissionsPerSecond } = wakeUpsOf(await takeTimeline(upstream), CAP, RAMP_SECONDS * 1000);
  return {
    admissionsPerSecond,
    wakeUpMs: { p50: r2(percentile(latencies, 50)), p99: r2(percentile(latencies, 99)) },
    wakeUps: latencies.length,
    errors: figures.errors,
    non2xx: figures.non2xx,
  };
}

async function readStats(server: ChildServer, path: '/stats' | '/gc'): Promise<ServerStats> {
  const res = await fetch(`${server.statsUrl}${path}`, { method: path === '/gc' ? 'POST' : 'GET' });
  if (!res.ok) throw new Error(`stats ${path}: HTTP ${res.status} ${await res.text()}`);
  return (await res.json()) as ServerStats;
}

async function queueDepth(gateway: ChildServer): Promise<number> {
  return ((await (await fetch(`${gateway.url}/admin/queue`)).json()) as { waiting: number }).waiting;
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`waiting: timed out until ${what}`);
    await pause(50);
  }
}

/** Opens `waiters` requests on a gateway with a cap of 1 whose first one the upstream never answers. */
async function memoryPerWaiter(upstream: ChildServer, waiters: number, log: (line: string) => void): Promise<WaitingMemory> {
  const gateway = await startGateway('queue1', upstream.url, [...STATS_PRELOAD, '--expose-gc']);
  const open: ClientRequest[] = [];
  const agent = new Agent({ keepAlive: false, maxSockets: Infinity });
  try {
    pin(gateway.pid, SERVER_CPU);
    // Warm: the waiting path itself, 49 of 50 clients waiting on the cap of 1 at any moment.
    const warm = await load(gateway.url, JSON_BODY, 3, 50, { headers: WAIT_HEADERS, timeoutSeconds: 35 });
    if (warm.errors + warm.non2xx > 0) throw new Error(`waiting, memory warm-up: ${warm.errors} errors, ${warm.non2xx} non-2xx`);
    await until('the warm-up left the queue', async () => (await queueDepth(gateway)) === 0, 10_000);
    const idle = await readStats(gateway, '/gc');
    const body = delayedBody(3_600_000);
    const send = (): void => {
      const req = request(`${gateway.url}/v1/chat/completions`, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-floodgate-user-path': '/org/team/alice', ...WAIT_HEADERS } });
      // Each is ended by destroying it below; nothing of its answer is awaited.
      req.on('error', () => {});
      req.end(body);
      open.push(req);
    };
    const startedAt = Date.now();
    // In batches, each waiting before the next starts: the listen backlog never overflows.
    const BATCH = 500;
    while (open.length < waiters) {
      const batch = Math.min(BATCH, waiters - open.length);
      for (let i = 0; i < batch; i++) send();
      const expected = open.length - 1;
      await until(`${expected} requests wait`, async () => (await queueDepth(gateway)) >= expected, 20_000);
    }
    const fillSeconds = r2((Date.now() - startedAt) / 1000);
    const loaded = await readStats(gateway, '/gc');
    const depth = await queueDepth(gateway);
    if (depth !== waiters - 1) throw new Error(`waiting, memory: ${depth} requests wait, expected ${waiters - 1} (their wait of 30 s ran out?)`);
    const per = (after: number, before: number): number => Math.round((after - before) / (waiters - 1));
    const memory: WaitingMemory = {
      waiters: waiters - 1,
      heapBytesPerWaiter: per(loaded.heapUsedBytes, idle.heapUsedBytes),
      rssBytesPerWaiter: per(loaded.rssBytes, idle.rssBytes),
      idle: { heapBytes: idle.heapUsedBytes, rssBytes: idle.rssBytes },
      loaded: { heapBytes: loaded.heapUsedBytes, rssBytes: loaded.rssBytes },
      fillSeconds,
    };
    log(`  memory: ${waiters - 1} waiting (opened in ${fillSeconds} s): heap ${Math.round(idle.heapUsedBytes / 2 ** 20)} -> ${Math.round(loaded.heapUsedBytes / 2 ** 20)} MB, RSS ${Math.round(idle.rssBytes / 2 ** 20)} -> ${Math.round(loaded.rssBytes / 2 ** 20)} MB: ${(memory.heapBytesPerWaiter / 1024).toFixed(1)} KB heap, ${(memory.rssBytesPerWaiter / 1024).toFixed(1)} KB RSS per waiting request`);
    return memory;
  } finally {
    for (const req of open) req.destroy();
    agent.destroy();
    await gateway.stop();
  }
}

// ---- targets --------------------------------------------------------------------------------

const settingsLabel = (): string => `cap ${CAP}, upstream ${UPSTREAM_MS} ms`;

const WAKE_UP_GOALS_MS: Record<WaitingStore, number> = { memory: 2, redis: 5 };

function decideTargets(rows: readonly WaitingRow[]): WaitingTarget[] {
  return rows.map((row) => {
    const goal = WAKE_UP_GOALS_MS[row.store];
    return {
      target: `waiting, ${settingsLabel()}, ${row.store === 'memory' ? 'in memory' : 'on Redis'}: wake-up p50 <= ${goal} ms`,
      value: row.wakeUpMs.p50,
      goal: `<= ${goal} ms`,
      pass: row.wakeUpMs.p50 <= goal,
      roundValues: row.rounds.map((r) => r.wakeUpMs.p50),
    };
  });
}

// ---- running --------------------------------------------------------------------------------

export const describeWakeUp = (f: WakeUpFigures): string =>
  `${String(f.admissionsPerSecond).padStart(5)} admissions/s  wake-up p50 ${f.wakeUpMs.p50} ms  p99 ${f.wakeUpMs.p99} ms  (${f.wakeUps} wake-ups)${f.errors + f.non2xx > 0 ? `  ERRORS ${f.errors} non2xx ${f.non2xx}` : ''}`;

/**
 * Starts its own upstream (with the load generator) and gateways (on the server core), runs the
 * wake-up rounds (memory and Redis in turn, forwards then backwards), then the memory figure.
 */
export async function runWaitingBench(settings: WaitingSettings, log: (line: string) => void = console.log): Promise<WaitingResult> {
  const stores: WaitingStore[] = ['memory', 'redis'];
  const started: ChildServer[] = [];
  const runs = new Map<WaitingStore, WakeUpFigures[]>();
  let ok = true;
  let memory: WaitingMemory;
  try {
    const upstream = await startUpstream();
    started.push(upstream);
    const gateways = new Map<WaitingStore, ChildServer>();
    for (const store of stores) {
      const gateway = await startGateway(VARIANTS[store], upstream.url);
      started.push(gateway);
      pin(gateway.pid, SERVER_CPU);
      gateways.set(store, gateway);
    }
    log(`waiting for capacity: ${settings.clients} clients with X-Floodgate-Max-Wait: 30 on a provider concurrency cap of ${CAP}, upstream answering in ${UPSTREAM_MS} ms; ${settings.rounds} round(s) of ${settings.durationSeconds} s after ${RAMP_SECONDS} s of ramp:`);
    for (const store of stores) log(`  warm-up  ${store.padEnd(6)} ${describeWakeUp(await wakeUpRun(gateways.get(store)!, upstream, { ...settings, durationSeconds: 2 }))}`);
    for (let round = 0; round < settings.rounds; round++) {
      for (const store of round % 2 === 0 ? stores : [...stores].reverse()) {
        const figures = await wakeUpRun(gateways.get(store)!, upstream, settings);
        if (figures.errors + figures.non2xx > 0) ok = false;
        log(`  round ${round + 1}  ${store.padEnd(6)} ${describeWakeUp(figures)}`);
        runs.set(store, [...(runs.get(store) ?? []), figures]);
      }
    }
    for (const store of stores) {
      const gateway = gateways.get(store)!;
      await gateway.stop();
      started.splice(started.indexOf(gateway), 1);
    }
    memory = await memoryPerWaiter(upstream, settings.waiters, log);
  } finally {
    await Promise.all(started.map((server) => server.stop()));
  }
  const rows: WaitingRow[] = stores.map((store) => {
    const all = runs.get(store)!;
    const m = (pick: (f: WakeUpFigures) => number): number => r2(median(all.map(pick)));
    return {
      store,
      admissionsPerSecond: Math.round(median(all.map((f) => f.admissionsPerSecond))),
      wakeUpMs: { p50: m((f) => f.wakeUpMs.p50), p99: m((f) => f.wakeUpMs.p99) },
      wakeUps: all.reduce((s, f) => s + f.wakeUps, 0),
      errors: all.reduce((s, f) => s + f.errors, 0),
      non2xx: all.reduce((s, f) => s + f.non2xx, 0),
      rounds: all,
    };
  });
  return {
    method: {
      cap: CAP,
      upstreamMs: UPSTREAM_MS,
      clients: settings.clients,
      rounds: settings.rounds,
      durationSeconds: settings.durationSeconds,
      rampSeconds: RAMP_SECONDS,
      wakeUp: 'on the upstream\'s clock: arrival of the k-th request after the first CAP minus the time the (k - CAP)-th answer was written out; medians over the rounds of each run\'s p50 and p99',
      memory: `a cap of 1 held by an upstream that does not answer, ${settings.waiters - 1} requests waiting behind it: heap after full collections and RSS, minus the same process idle after a 3 s warm-up, divided by the waiting requests`,
    },
    rows,
    memory,
    targets: decideTargets(rows),
    ok,
  };
}

export function printWaitingTables(result: WaitingResult): void {
  console.log(`waiting for capacity (${settingsLabel()}, ${result.method['clients']} clients), medians over ${result.method['rounds']} round(s):`);
  console.table(result.rows.map((r) => ({ store: r.store, 'admissions/s': r.admissionsPerSecond, 'wake-up p50 ms': r.wakeUpMs.p50, 'wake-up p99 ms': r.wakeUpMs.p99, 'wake-ups': r.wakeUps, 'errors+non2xx': r.errors + r.non2xx })));
  const m = result.memory;
  console.log(`memory per waiting request (${m.waiters} waiting): ${(m.heapBytesPerWaiter / 1024).toFixed(1)} KB heap, ${(m.rssBytesPerWaiter / 1024).toFixed(1)} KB RSS`);
}

if (import.meta.main) {
  const { values: flags } = parseArgs({
    options: {
      rounds: { type: 'string' },
      duration: { type: 'string' },
      clients: { type: 'string' },
      waiters: { type: 'string' },
      quick: { type: 'boolean', default: false },
      out: { type: 'string' },
    },
    strict: true,
  });
  const settings = waitingSettings(flags, flags.quick);
  if (canPin()) pin(process.pid, LOAD_CPU);
  const result = await runWaitingBench(settings);
  printWaitingTables(result);
  console.log('targets:');
  for (const t of result.targets) console.log(`  ${t.pass ? 'PASS' : 'FAIL'}  ${t.target}: ${t.value} (${t.goal}) [rounds ${t.roundValues.join(', ')}]`);
  if (flags.out !== undefined) {
    writeFileSync(flags.out, `${JSON.stringify(result, null, 2)}\n`);
    console.log(`written: ${flags.out}`);
  }
  if (!result.ok) console.error('FAIL: some runs saw errors or non-2xx answers (see above)');
  process.exitCode = result.ok ? 0 : 1;
}
