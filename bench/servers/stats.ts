/**
 * Bench-only preload: the process's own accounting on a loopback port of its own, for the
 * long-stream rows (bench/long-stream.bench.ts) and bench/tools/stream-profile.ts. Loaded with
 * `node --import ./bench/servers/stats.ts` into a server the benchmark starts (the fake upstream, the
 * floor proxy, the gateway launcher); it exists in no other process, and it needs nothing of
 * the server it rides in. Prints `{"statsPort":N}` on stdout before the server prints its port.
 *
 *   GET  /stats         CPU time (all threads), RSS, page faults, heap, now
 *   POST /window/start  the same, and starts a measurement window: the event-loop delay
 *                       histogram and the GC totals start again (and the profilers below)
 *   POST /window/end    the same, with the window's event-loop delay and GC figures
 *
 * BENCH_PROFILE_DIR=DIR: the window also takes a CPU profile (inspector, 1 ms samples) and a
 * v8.GCProfiler trace (every collection with the heap spaces before and after), written at its
 * end as DIR/cpu-PID-N.cpuprofile and DIR/gc-PID-N.json.
 */
import { writeFileSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import { Session, type Profiler } from 'node:inspector/promises';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { PerformanceObserver, constants, monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { GCProfiler, getHeapStatistics } from 'node:v8';

/** What every answer carries; `loopDelay` and `gc` cover the window (since /window/start). */
export interface ServerStats {
  pid: number;
  /** performance.now() of the process, ms. */
  nowMs: number;
  /** process.cpuUsage(): user + system of all the process's threads, microseconds. */
  cpuUs: number;
  /** process.threadCpuUsage(): the same of the main thread (the event loop) alone. */
  mainThreadCpuUs: number;
  rssBytes: number;
  heapUsedBytes: number;
  /** Minor + major page faults so far. */
  faults: number;
  /** Event-loop delay beyond the sampling interval, ms. */
  loopDelay: { p50Ms: number; p99Ms: number; maxMs: number };
  /** Collections seen by a PerformanceObserver: main-thread pause time by kind. */
  gc: { count: number; pauseMs: number; maxPauseMs: number; byKind: Record<string, { count: number; pauseMs: number }> };
  /** Files written at the end of a profiled window (BENCH_PROFILE_DIR). */
  files?: { cpuProfile: string; gcTrace: string };
}

/** The delay histogram's timer interval; a sample is the whole interval, so this is taken off. */
const RESOLUTION_MS = 10;
const loop = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
loop.enable();

const KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weak callbacks',
};
let gc: ServerStats['gc'] = { count: 0, pauseMs: 0, maxPauseMs: 0, byKind: {} };
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    const kind = KINDS[((entry as { detail?: unknown }).detail as { kind?: number } | undefined)?.kind ?? -1] ?? 'other';
    const k = (gc.byKind[kind] ??= { count: 0, pauseMs: 0 });
    k.count++;
    k.pauseMs += entry.duration;
    gc.count++;
    gc.pauseMs += entry.duration;
    gc.maxPauseMs = Math.max(gc.maxPauseMs, entry.duration);
  }
}).observe({ entryTypes: ['gc'] });

const profileDir = process.env['BENCH_PROFILE_DIR'];
let windows = 0;
let profiling: { session: Session; gcProfiler: GCProfiler } | undefined;

const ms = (ns: number): number => Math.round(Math.max(0, ns / 1e6 - RESOLUTION_MS) * 100) / 100;

function stats(): ServerStats {
  const cpu = process.cpuUsage();
  const main = process.threadCpuUsage();
  const usage = process.resourceUsage();
  return {
    pid: process.pid,
    nowMs: performance.now(),
    cpuUs: cpu.user + cpu.system,
    mainThreadCpuUs: main.user + main.system,
    rssBytes: process.memoryUsage.rss(),
    heapUsedBytes: getHeapStatistics().used_heap_size,
    faults: usage.minorPageFault + usage.majorPageFault,
    loopDelay: loop.count === 0 ? { p50Ms: 0, p99Ms: 0, maxMs: 0 } : { p50Ms: ms(loop.percentile(50)), p99Ms: ms(loop.percentile(99)), maxMs: ms(loop.max) },
    gc: { ...gc, pauseMs: Math.round(gc.pauseMs * 100) / 100, maxPauseMs: Math.round(gc.maxPauseMs * 100) / 100 },
  };
}

async function startWindow(): Promise<ServerStats> {
  if (profileDir !== undefined && profiling === undefined) {
    const session = new Session();
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 1000 });
    await session.post('Profiler.start');
    const gcProfiler = new GCProfiler();
    gcProfiler.start();
    profiling = { session, gcProfiler };
  }
  const s = stats();
  loop.reset();
  gc = { count: 0, pauseMs: 0, maxPauseMs: 0, byKind: {} };
  return s;
}

async function endWindow(): Promise<ServerStats> {
  const s = stats();
  if (profiling !== undefined) {
    const { session, gcProfiler } = profiling;
    profiling = undefined;
    const trace = gcProfiler.stop();
    const { profile } = await session.post('Profiler.stop');
    session.disconnect();
    dropProfilerSamples(profile);
    const n = ++windows;
    const files = { cpuProfile: join(profileDir!, `cpu-${process.pid}-${n}.cpuprofile`), gcTrace: join(profileDir!, `gc-${process.pid}-${n}.json`) };
    writeFileSync(files.cpuProfile, JSON.stringify(profile));
    writeFileSync(files.gcTrace, JSON.stringify(trace));
    s.files = files;
  }
  return s;
}

/**
 * Drops the samples taken while Profiler.start and Profiler.stop ran (the first logs every
 * compiled function, the second builds the profile, both on this thread): they are the tool's
 * cost, not the server's, and can be a tenth of a short window.
 */
function dropProfilerSamples(profile: Profiler.Profile): void {
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const frames = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));
  const inProfiler = (id: number): boolean => {
    for (let up: number | undefined = id; up !== undefined; up = parent.get(up)) {
      const f = frames.get(up)!;
      if (f.url === 'node:inspector' && f.functionName === 'post') return true;
    }
    return false;
  };
  let [from, to] = [0, samples.length];
  while (from < to && inProfiler(samples[from]!)) from++;
  while (to > from && inProfiler(samples[to - 1]!)) to--;
  const sum = (xs: number[]): number => xs.reduce((total, d) => total + d, 0);
  // A sample's delta is the time since the one before: the first kept sample's is dropped too.
  profile.startTime += sum(deltas.slice(0, from + 1));
  profile.endTime -= sum(deltas.slice(to));
  profile.samples = samples.slice(from, to);
  profile.timeDeltas = [0, ...deltas.slice(from + 1, to)].slice(0, to - from);
}

function answer(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

const server = createServer((req, res) => {
  const route = `${req.method} ${req.url}`;
  const work = route === 'GET /stats' ? Promise.resolve(stats())

    : route === 'POST /window/start' ? startWindow()
      : route === 'POST /window/end' ? endWindow()
        : undefined;
  req.resume();
  if (work === undefined) answer(res, 404, { error: `no route ${route}` });
  else work.then((s) => answer(res, 200, s), (err: unknown) => answer(res, 500, { error: String(err) }));
});
// The server this rides in decides when the process ends.
server.unref();
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
process.stdout.write(`${JSON.stringify({ statsPort: (server.address() as AddressInfo).port })}\n`);
