/**
 * The long-stream benchmark: many slow streams open at once, as a gateway in front of an LLM
 * sees them. A slow SSE upstream (N events at a fixed interval, then usage and [DONE]), C
 * concurrent client loops in a process of their own (bench/stream-client.ts), each server
 * alone on the server core with its own accounting read through bench/servers/stats.ts.
 * Part of `npm run bench`; alone:
 *
 *   node bench/long-stream.bench.ts                          # both shapes, 5 rounds (~12 min)
 *   node bench/long-stream.bench.ts --quick --shapes c1000   # one shape, 1 round (~1 min)
 *   node bench/long-stream.bench.ts --rows floor,none --concurrency 200 --duration 5
 *   node bench/long-stream.bench.ts --shapes c500 --rows floor,none --concurrency 200 --events 2000 --interval-ms 20 --rounds 1
 *   flags: --shapes c500,c1000 --rows upstream,floor,none,ten,redisTen --rounds N --duration N
 *          --warmup N --concurrency N --events N --interval-ms N (each for every shape) --quick
 *          --out FILE (the result as JSON)
 *   (or BENCH_LONG_SHAPES, BENCH_LONG_ROWS, BENCH_LONG_ROUNDS, BENCH_LONG_DURATION,
 *   BENCH_LONG_WARMUP, BENCH_LONG_CONCURRENCY, BENCH_LONG_EVENTS, BENCH_LONG_INTERVAL_MS)
 *
 * Rounds run every configuration once each, in turn (forwards, then backwards), so the two
 * configurations a target compares run next to each other, minutes apart at most, in every
 * round; a target's value is the median over the rounds of the ratio of their figures.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  BENCH_DIR, CHAT_PATH, LOAD_CPU, REQUEST_HEADERS, SERVER_CPU, STATS_PRELOAD, canPin, longStreamBody, median, pin, startFloorProxy, startGateway,
  startUpstream, type ChildServer,
} from './lib.ts';
import type { ServerStats } from './servers/stats.ts';
import type { StreamLoadOptions, StreamLoadResult } from './stream-client.ts';

// ---- what is run ----------------------------------------------------------------------------

export interface LongStreamShape {
  id: string;
  concurrency: number;
  /** Content events per stream; each stream also carries a usage chunk and [DONE]. */
  events: number;
  intervalMs: number;
}

export const LONG_STREAM_SHAPES: readonly LongStreamShape[] = [
  { id: 'c500', concurrency: 500, events: 40, intervalMs: 25 },
  { id: 'c1000', concurrency: 1000, events: 40, intervalMs: 50 },
];

export type LongRowKey = 'upstream' | 'floor' | 'none' | 'ten' | 'redisTen';

export const LONG_ROWS: ReadonlyArray<{ key: LongRowKey; label: string }> = [
  { key: 'upstream', label: 'L1. upstream directly' },
  { key: 'floor', label: 'L2. minimal proxy (floor)' },
  { key: 'none', label: 'L3. Floodgate, no rules' },
  { key: 'ten', label: 'L4. Floodgate, 10 matching rules' },
  { key: 'redisTen', label: 'L4r. Floodgate, 10 matching rules, Redis' },
];

export interface LongStreamSettings {
  shapes: LongStreamShape[];
  rows: LongRowKey[];
  rounds: number;
  /** Measured seconds of each run (after a ramp of one stream's length). */
  windowSeconds: number;
  /** Seconds of unmeasured load per server and shape before the rounds. */
  warmupSeconds: number;
}

/**
 * Settings from flags (`--shapes` ...) or environment variables (`BENCH_LONG_SHAPES` ...), with
 * the defaults of a full or a quick run.
 */
export function longStreamSettings(flags: Partial<Record<'shapes' | 'rows' | 'rounds' | 'duration' | 'warmup' | 'concurrency' | 'events' | 'interval-ms', string>>, quick: boolean): LongStreamSettings {
  const raw = (name: keyof typeof flags): string | undefined => flags[name] ?? process.env[`BENCH_LONG_${name.toUpperCase().replace('-', '_')}`];
  const count = (name: keyof typeof flags, normal: number, quickValue: number, min: number): number => {
    const text = raw(name);
    const value = text === undefined ? (quick ? quickValue : normal) : Number(text);
    if (!Number.isInteger(value) || value < min) throw new Error(`long streams, ${name}: expected a whole number >= ${min}, got ${text}`);
    return value;
  };
  const list = <T extends string>(name: keyof typeof flags, known: readonly T[]): T[] => {
    const text = raw(name);
    if (text === undefined) return [...known];
    const picked = text.split(',').map((s) => s.trim()).filter((s) => s !== '');
    for (const p of picked) if (!known.includes(p as T)) throw new Error(`long streams, ${name}: unknown "${p}" (one of ${known.join(', ')})`);
    return known.filter((k) => picked.includes(k));
  };
  // Overrides of every shape: how many streams at once, and how long an answer (events, interval).
  const override = (name: 'concurrency' | 'events' | 'interval-ms', min: number): number | undefined => (raw(name) === undefined ? undefined : count(name, 0, 0, min));
  const concurrency = override('concurrency', 1);
  const events = override('events', 1);
  const intervalMs = override('interval-ms', 0);
  const shapes = list('shapes', LONG_STREAM_SHAPES.map((s) => s.id)).map((id) => {
    const shape = LONG_STREAM_SHAPES.find((s) => s.id === id)!;
    return { ...shape, concurrency: concurrency ?? shape.concurrency, events: events ?? shape.events, intervalMs: intervalMs ?? shape.intervalMs };
  });
  return {
    shapes,
    rows: list('rows', LONG_ROWS.map((r) => r.key)),
    rounds: count('rounds', 5, 1, 1),
    windowSeconds: count('duration', 8, 4, 1),
    warmupSeconds: count('warmup', 10, 4, 0),
  };
}

// ---- figures --------------------------------------------------------------------------------

/** One run of one configuration: the load's figures and the server's own accounting. */
export interface LongRunFigures {
  streamsPerSecond: number;
  eventsPerSecond: number;
  /** Server CPU time (all its threads) per 1,000 events delivered, ms. */
  cpuMsPer1000Events: number;
  /** (median RSS during the window - RSS idle before the server's first load) / concurrency. */
  memoryKbPerStream: number;
  ttfbMs: { p50: number; p99: number };
  worstGapMs: { p50: number; p99: number };
  /** The server's event-loop delay during the window (beyond the 10 ms sampling interval). */
  loopDelayMs: { p99: number; max: number };
  /** GC pauses of the server's main thread, share of the window. */
  gcPausePct: number;
  faultsPer1000Events: number;
  errors: number;
  /** The load generator's CPU share and loop delay: high values mean the client, not the server, limited the run. */
  client: { cpuShare: number; loopDelayP99Ms: number };
}

export interface LongRowResult extends LongRunFigures {
  key: LongRowKey;
  label: string;
  /** Over the upstream directly, same round: the server's own share of the latency. */
  ttfbAddedMs: { p50: number; p99: number };
  worstGapAddedMs: { p50: number; p99: number };
  errorSamples: string[];
  rounds: LongRunFigures[];
}

export interface LongTarget {
  target: string;
  value: number;
  goal: string;
  pass: boolean;
  /** The ratio of every round (the two configurations run one after the other in it). */
  roundRatios: number[];
}

export interface LongStreamResult {
  method: Record<string, unknown>;
  shapes: Array<LongStreamShape & { rows: LongRowResult[] }>;
  targets: LongTarget[];
  ok: boolean;
}

const r2 = (x: number): number => Math.round(x * 100) / 100;
const r3 = (x: number): number => Math.round(x * 1000) / 1000;

export function figuresOf(load: StreamLoadResult, shape: LongStreamShape, idleRss: number): LongRunFigures {
  const seconds = load.windowMs / 1000;
  const { start, end } = load.server;
  const events = Math.max(1, load.eventsInWindow);
  const rssUnderLoad = load.server.rssSamples.length > 0 ? median(load.server.rssSamples) : end.rssBytes;
  return {
    streamsPerSecond: r2(load.streamsInWindow / seconds),
    eventsPerSecond: Math.round(load.eventsInWindow / seconds),
    cpuMsPer1000Events: r2((end.cpuUs - start.cpuUs) / events),
    memoryKbPerStream: r2((rssUnderLoad - idleRss) / shape.concurrency / 1024),
    ttfbMs: { p50: load.ttfbMs.p50, p99: load.ttfbMs.p99 },
    worstGapMs: { p50: load.worstGapMs.p50, p99: load.worstGapMs.p99 },
    loopDelayMs: { p99: end.loopDelay.p99Ms, max: end.loopDelay.maxMs },
    gcPausePct: r2((end.gc.pauseMs / Math.max(1, end.nowMs - start.nowMs)) * 100),
    faultsPer1000Events: r2(((end.faults - start.faults) / events) * 1000),
    errors: load.errors,
    client: load.client,
  };
}

/** Per field, the median over the rounds. */
function medianFigures(runs: LongRunFigures[]): LongRunFigures {
  const m = (pick: (f: LongRunFigures) => number): number => r2(median(runs.map(pick)));
  return {
    streamsPerSecond: m((f) => f.streamsPerSecond),
    eventsPerSecond: Math.round(median(runs.map((f) => f.eventsPerSecond))),
    cpuMsPer1000Events: m((f) => f.cpuMsPer1000Events),
    memoryKbPerStream: m((f) => f.memoryKbPerStream),
    ttfbMs: { p50: m((f) => f.ttfbMs.p50), p99: m((f) => f.ttfbMs.p99) },
    worstGapMs: { p50: m((f) => f.worstGapMs.p50), p99: m((f) => f.worstGapMs.p99) },
    loopDelayMs: { p99: m((f) => f.loopDelayMs.p99), max: m((f) => f.loopDelayMs.max) },
    gcPausePct: m((f) => f.gcPausePct),
    faultsPer1000Events: m((f) => f.faultsPer1000Events),
    errors: runs.reduce((s, f) => s + f.errors, 0),
    client: { cpuShare: m((f) => f.client.cpuShare), loopDelayP99Ms: m((f) => f.client.loopDelayP99Ms) },
  };
}

// ---- targets --------------------------------------------------------------------------------

/**
 * Latency added over the upstream directly, for a ratio: below 1 ms it counts as 1 ms. A timer
 * tick is about that long, and a ratio of two fractions of a millisecond would say nothing.
 */
const ADDED_FLOOR_MS = 1;
const added = (value: number, direct: number): number => Math.max(ADDED_FLOOR_MS, value - direct);

interface LongTargetSpec {
  shape: string;
  /** Without the shape's concurrency and stream: those are added from the shape run. */
  what: string;
  a: LongRowKey;
  b: LongRowKey;
  /** The figure compared; `direct` is the upstream's run of the same round. */
  figure: (f: LongRunFigures, direct: LongRunFigures | undefined) => number;
  needsDirect?: boolean;
  /** a/b must be at most this (costs) or at least it (throughput). */
  goal: number;
  atMost: boolean;
}

const TARGETS: LongTargetSpec[] = [
  { shape: 'c500', what: 'no rules <= 1.3x the minimal proxy, server CPU per 1,000 events', a: 'none', b: 'floor', figure: (f) => f.cpuMsPer1000Events, goal: 1.3, atMost: true },
  { shape: 'c500', what: '10 rules <= 1.05x no rules, server CPU per 1,000 events', a: 'ten', b: 'none', figure: (f) => f.cpuMsPer1000Events, goal: 1.05, atMost: true },
  { shape: 'c1000', what: 'no rules >= 0.95x the minimal proxy, streams/s', a: 'none', b: 'floor', figure: (f) => f.streamsPerSecond, goal: 0.95, atMost: false },
  {
    shape: 'c1000', what: `no rules <= 2x the minimal proxy, time to first byte p99 added over the upstream (>= ${ADDED_FLOOR_MS} ms)`, a: 'none', b: 'floor',
    figure: (f, d) => added(f.ttfbMs.p99, d!.ttfbMs.p99), needsDirect: true, goal: 2, atMost: true,
  },
  {
    shape: 'c1000', what: `no rules <= 2x the minimal proxy, worst gap between events p99 added over the upstream (>= ${ADDED_FLOOR_MS} ms)`, a: 'none', b: 'floor',
    figure: (f, d) => added(f.worstGapMs.p99, d!.worstGapMs.p99), needsDirect: true, goal: 2, atMost: true,
  },
  { shape: 'c1000', what: 'no rules <= 1.5x the minimal proxy, memory per concurrent stream', a: 'none', b: 'floor', figure: (f) => f.memoryKbPerStream, goal: 1.5, atMost: true },
];

export const shapeName = (s: LongStreamShape): string => `C=${s.concurrency}, ${s.events} events every ${s.intervalMs} ms`;

function decideTargets(shapes: LongStreamResult['shapes']): LongTarget[] {
  const out: LongTarget[] = [];
  for (const spec of TARGETS) {
    const shape = shapes.find((s) => s.id === spec.shape);
    const row = (key: LongRowKey): LongRowResult | undefined => shape?.rows.find((r) => r.key === key);
    const [a, b, direct] = [row(spec.a), row(spec.b), row('upstream')];
    if (shape === undefined || a === undefined || b === undefined || (spec.needsDirect && direct === undefined)) continue;
    const ratios = a.rounds.map((fa, i) => spec.figure(fa, direct?.rounds[i]) / spec.figure(b.rounds[i]!, direct?.rounds[i]));
    const value = r3(median(ratios));
    out.push({
      target: `long streams ${shapeName(shape)}: ${spec.what}`,
      value,
      goal: `${spec.atMost ? '<=' : '>='} ${spec.goal}`,
      pass: spec.atMost ? value <= spec.goal : value >= spec.goal,
      roundRatios: ratios.map(r3),
    });
  }
  return out;
}

// ---- running --------------------------------------------------------------------------------

/** The server of a row, and its RSS before any load. */
interface LongServer {
  server: ChildServer;
  idleRss: number;
}

export async function readStats(server: ChildServer): Promise<ServerStats> {
  const res = await fetch(`${server.statsUrl}/stats`);
  return (await res.json()) as ServerStats;
}

/** One load of `shape` on `server` in a client process of its own. */
export function streamLoad(server: ChildServer, shape: LongStreamShape, windowSeconds: number): Promise<StreamLoadResult> {
  const streamMs = shape.events * shape.intervalMs;
  const options: StreamLoadOptions = {
    url: server.url + CHAT_PATH,
    headers: REQUEST_HEADERS,
    body: longStreamBody(shape.events, shape.intervalMs),
    concurrency: shape.concurrency,
    // One stream's length and a little: every loop runs before the window starts.
    rampMs: streamMs + 500,
    windowMs: windowSeconds * 1000,
    statsUrl: server.statsUrl!,
    expectedEvents: shape.events + 2,
    tailTimeoutMs: 4 * streamMs + 10_000,
  };
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(BENCH_DIR, 'stream-client.ts'), JSON.stringify(options)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) reject(new Error(`stream client exited with code ${code}`));
      else resolve(JSON.parse(out) as StreamLoadResult);
    });
  });
}

/** A short stream through `server`, checked: 200, every event, [DONE], the rate-limit header where rules match. */
export async function probeLong(server: ChildServer, expectHeader: string | undefined): Promise<void> {
  const res = await fetch(server.url + CHAT_PATH, { method: 'POST', headers: REQUEST_HEADERS, body: longStreamBody(3, 1) });
  const text = await res.text();
  const events = text.split('\n\n').length - 1;
  if (res.status !== 200 || events !== 5 || !text.includes('data: [DONE]') || !text.includes('"usage"')) {
    throw new Error(`long-stream probe of ${server.name}: HTTP ${res.status}, ${events} events (expected 5): ${text.slice(0, 300)}`);
  }
  if (expectHeader !== undefined && res.headers.get(expectHeader) === null) throw new Error(`long-stream probe of ${server.name}: header ${expectHeader} missing`);
}

export const describeLongRun = (f: LongRunFigures): string =>
  `${String(f.streamsPerSecond).padStart(7)} streams/s ${String(f.eventsPerSecond).padStart(6)} events/s  CPU ${f.cpuMsPer1000Events} ms/1k events  ` +
  `${f.memoryKbPerStream} KB/stream  TTFB ${f.ttfbMs.p50}/${f.ttfbMs.p99} ms  gap ${f.worstGapMs.p50}/${f.worstGapMs.p99} ms  ` +
  `loop p99 ${f.loopDelayMs.p99} ms  GC ${f.gcPausePct}%  faults ${f.faultsPer1000Events}/1k  client ${f.client.cpuShare} CPU, loop ${f.client.loopDelayP99Ms} ms` +
  `${f.errors > 0 ? `  ERRORS ${f.errors}` : ''}`;

/**
 * Starts its own upstream and servers (one process each, the upstream with the load generator,
 * each server under test on the server core), runs the rounds and decides the targets.
 */
export async function runLongStreamBench(settings: LongStreamSettings, log: (line: string) => void = console.log): Promise<LongStreamResult> {
  const { shapes, rows, rounds, windowSeconds, warmupSeconds } = settings;
  const servers = new Map<LongRowKey, LongServer>();
  /** Every process started here, stopped at the end whatever happens. */
  const started: ChildServer[] = [];
  const runs = new Map<string, LongRunFigures[]>();
  const samples = new Map<string, string[]>();
  let ok = true;
  try {
    const upstream = await startUpstream(STATS_PRELOAD);
    started.push(upstream);
    for (const key of rows) {
      const server = key === 'upstream' ? upstream
        : key === 'floor' ? await startFloorProxy(upstream.url, STATS_PRELOAD)
          : await startGateway(key, upstream.url, STATS_PRELOAD);
      if (key !== 'upstream') {
        started.push(server);
        pin(server.pid, SERVER_CPU);
      }
      await probeLong(server, key === 'ten' || key === 'redisTen' ? 'x-ratelimit-limit-requests' : undefined);
      servers.set(key, { server, idleRss: (await readStats(server)).rssBytes });
    }
    log(`idle RSS: ${rows.map((key) => `${key} ${Math.round(servers.get(key)!.idleRss / 2 ** 20)} MB`).join(', ')}`);
    const label = (key: LongRowKey): string => LONG_ROWS.find((r) => r.key === key)!.label;
    const runOnce = async (shape: LongStreamShape, key: LongRowKey, seconds: number): Promise<LongRunFigures> => {
      const { server, idleRss } = servers.get(key)!;
      const load = await streamLoad(server, shape, seconds);
      if (load.errors > 0) {
        ok = false;
        samples.set(`${shape.id}:${key}`, [...(samples.get(`${shape.id}:${key}`) ?? []), ...load.errorSamples].slice(0, 5));
      }
      return figuresOf(load, shape, idleRss);
    };
    for (const shape of shapes) {
      log(`long streams, ${shapeName(shape)} (each stream ${(shape.events * shape.intervalMs) / 1000} s; runs of ${windowSeconds} s after a ramp of one stream):`);
      // One run per server, as long as a measured one or longer. Not until the page faults stop
      // as in the short rows: under this load they do not, the old generation grows until its
      // next full collection, which may be further away than a round.
      for (const key of warmupSeconds > 0 ? rows : []) log(`  warm-up  ${label(key).padEnd(44)} ${describeLongRun(await runOnce(shape, key, warmupSeconds))}`);
      for (let round = 0; round < rounds; round++) {
        // Forwards, then backwards: neighbours stay neighbours, and neither goes first every time.
        const order = round % 2 === 0 ? rows : [...rows].reverse();
        for (const key of order) {
          const figures = await runOnce(shape, key, windowSeconds);
          log(`  round ${round + 1}  ${label(key).padEnd(44)} ${describeLongRun(figures)}`);
          runs.set(`${shape.id}:${key}`, [...(runs.get(`${shape.id}:${key}`) ?? []), figures]);
        }
      }
    }
  } finally {
    await Promise.all(started.map((server) => server.stop()));
  }

  const results: LongStreamResult['shapes'] = shapes.map((shape) => {
    const direct = rows.includes('upstream') ? runs.get(`${shape.id}:upstream`)! : undefined;
    return {
      ...shape,
      rows: rows.map((key) => {
        const all = runs.get(`${shape.id}:${key}`)!;
        const addedOver = (pick: (f: LongRunFigures) => number): number => (direct === undefined ? Number.NaN : r2(median(all.map((f, i) => pick(f) - pick(direct[i]!)))));
        return {
          key,
          label: LONG_ROWS.find((r) => r.key === key)!.label,
          ...medianFigures(all),
          ttfbAddedMs: { p50: addedOver((f) => f.ttfbMs.p50), p99: addedOver((f) => f.ttfbMs.p99) },
          worstGapAddedMs: { p50: addedOver((f) => f.worstGapMs.p50), p99: addedOver((f) => f.worstGapMs.p99) },
          errorSamples: samples.get(`${shape.id}:${key}`) ?? [],
          rounds: all,
        };
      }),
    };
  });
  return {
    method: {
      rounds,
      windowSeconds,
      warmupSeconds,
      rows: 'each configuration alone on the server core (the upstream and the load generator on the other), one run of each per round, forwards then backwards; row figures are the medians over the rounds',
      targets: 'median over the rounds of the ratio of the two configurations\' figures in the same round',
      memory: 'RSS during the window (median of samples every 500 ms) minus the RSS of the same process idle before its first load, divided by the concurrency',
      added: 'a row\'s latency percentile minus the upstream-directly run\'s of the same round, median over the rounds',
    },
    shapes: results,
    targets: decideTargets(results),
    ok,
  };
}

/** The rows of one shape as a console table. */
export function printLongStreamTables(result: LongStreamResult): void {
  for (const shape of result.shapes) {
    console.log(`long streams, ${shapeName(shape)}, medians over ${result.method['rounds']} round(s):`);
    console.table(shape.rows.map((r) => ({
      row: r.label,
      'streams/s': r.streamsPerSecond,
      'events/s': r.eventsPerSecond,
      'CPU ms/1k ev': r.cpuMsPer1000Events,
      'KB/stream': r.memoryKbPerStream,
      'TTFB +p50/+p99 ms': `${r.ttfbAddedMs.p50} / ${r.ttfbAddedMs.p99}`,
      'gap +p50/+p99 ms': `${r.worstGapAddedMs.p50} / ${r.worstGapAddedMs.p99}`,
      'loop p99 ms': r.loopDelayMs.p99,
      'GC %': r.gcPausePct,
      errors: r.errors,
    })));
    for (const r of shape.rows) for (const e of r.errorSamples) console.error(`  ${r.label}: ${e}`);
  }
}

export function printLongTargets(targets: LongTarget[]): void {
  for (const t of targets) console.log(`  ${t.pass ? 'PASS' : 'FAIL'}  ${t.target}: ${t.value} (${t.goal}) [rounds ${t.roundRatios.join(', ')}]`);
}

if (import.meta.main) {
  const { values: flags } = parseArgs({
    options: {
      shapes: { type: 'string' },
      rows: { type: 'string' },
      rounds: { type: 'string' },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      concurrency: { type: 'string' },
      events: { type: 'string' },
      'interval-ms': { type: 'string' },
      quick: { type: 'boolean', default: false },
      out: { type: 'string' },
    },
    strict: true,
  });
  const settings = longStreamSettings(flags, flags.quick);
  if (canPin()) pin(process.pid, LOAD_CPU);
  console.log(`long-stream benchmark: ${settings.rows.join(', ')}; ${settings.rounds} round(s) of ${settings.windowSeconds} s; ${canPin() ? `servers on CPU ${SERVER_CPU}, upstream and load on CPU ${LOAD_CPU}` : 'not pinned'}`);
  const result = await runLongStreamBench(settings);
  printLongStreamTables(result);
  console.log('targets:');
  printLongTargets(result.targets);
  if (flags.out !== undefined) {
    writeFileSync(flags.out, `${JSON.stringify(result, null, 2)}\n`);
    console.log(`written: ${flags.out}`);
  }
  if (!result.ok) console.error('FAIL: some runs saw errors (see above)');
  process.exitCode = result.ok ? 0 : 1;
}
