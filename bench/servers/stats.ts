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
 *   POST /gc            full collections first, then what GET /stats says (the process must run
 *                       with --expose-gc)
 *
 * BENCH_PROFILE_DIR=DIR: the window also takes a CPU profile (inspector, 1 ms samples, cut to
 * the window) and a v8.GCProfiler trace (every collection with the heap spaces before and
 * after), written at its end as DIR/cpu-PID-N.cpuprofile and DIR/gc-PID-N.json.
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
/** The CPU profiler runs from start-up on: starting it stops this thread for a few hundred ms. */
let cpuProfiler: Session | undefined;
let gcProfiler: GCProfiler | undefined;
/** When the window started, on the profiler's clock (CLOCK_MONOTONIC, microseconds). */
let windowStartUs = 0;
const monotonicUs = (): number => Number(process.hrtime.bigint() / 1000n);

async function startCpuProfiler(): Promise<void> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 1000 });
  await session.post('Profiler.start');
  cpuProfiler = session;
}
if (profileDir !== undefined) await startCpuProfiler();

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

function startWindow(): ServerStats {
  if (profileDir !== undefined) {
    windowStartUs = monotonicUs();
    gcProfiler = new GCProfiler();
    gcProfiler.start();
  }
  const s = stats();
  loop.reset();
  gc = { count: 0, pauseMs: 0, maxPauseMs: 0, byKind: {} };
  return s;
}

async function endWindow(): Promise<ServerStats> {
  const s = stats();
  if (cpuProfiler !== undefined && gcProfiler !== undefined) {
    const windowEndUs = monotonicUs();
    const trace = gcProfiler.stop();
    gcProfiler = undefined;
    const { profile } = await cpuProfiler.post('Profiler.stop');
    cpuProfiler.disconnect();
    const n = ++windows;
    const files = { cpuProfile: join(profileDir!, `cpu-${process.pid}-${n}.cpuprofile`), gcTrace: join(profileDir!, `gc-${process.pid}-${n}.json`) };
    writeFileSync(files.cpuProfile, JSON.stringify(cutToWindow(profile, windowStartUs, windowEndUs)));
    writeFileSync(files.gcTrace, JSON.stringify(trace));
    s.files = files;
    // For the next window: the start's pause falls in the end of this run, after its window.
    await startCpuProfiler();
  }
  return s;
}

/** The profile's samples taken from `fromUs` to `toUs` (the profiler's clock is CLOCK_MONOTONIC, as hrtime). */
function cutToWindow(profile: Profiler.Profile, fromUs: number, toUs: number): Profiler.Profile {
  const samples: number[] = [];
  const timeDeltas: number[] = [];
  let t = profile.startTime;
  let last = fromUs;
  for (const [i, id] of (profile.samples ?? []).entries()) {
    t += profile.timeDeltas?.[i] ?? 0;
    if (t < fromUs || t > toUs) continue;
    samples.push(id);
    timeDeltas.push(t - last);
    last = t;
  }
  return { ...profile, startTime: fromUs, endTime: toUs, samples, timeDeltas };
}

/** The stats after full collections, so that the heap holds only what is still referenced. */
async function collected(): Promise<ServerStats> {
  const collect = (globalThis as { gc?: () => void }).gc;
  if (collect === undefined) throw new Error('POST /gc needs the process started with --expose-gc');
  // Twice, a turn apart: what the first collection's finalizers let go is collected by the second.
  collect();
  await new Promise((resolve) => setImmediate(resolve));
  collect();
  return stats();
}

function answer(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

const server = createServer((req, res) => {
  const route = `${req.method} ${req.url}`;
  const work = route === 'GET /stats' ? Promise.resolve(stats())
    : route === 'POST /window/start' ? Promise.resolve(startWindow())
      : route === 'POST /window/end' ? endWindow()
        : route === 'POST /gc' ? collected()
          : undefined;
  req.resume();
  if (work === undefined) answer(res, 404, { error: `no route ${route}` });
  else work.then((s) => answer(res, 200, s), (err: unknown) => answer(res, 500, { error: String(err) }));
});
// The server this rides in decides when the process ends.
server.unref();
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
process.stdout.write(`${JSON.stringify({ statsPort: (server.address() as AddressInfo).port })}\n`);
