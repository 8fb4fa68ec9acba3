/**
 * What holds the event loop under many long streams: a CPU profile and a GC trace of one server
 * under the long-stream load of bench/long-stream.bench.ts, over one measured window (not its
 * start-up nor its warm-up). The server runs with bench/servers/stats.ts and BENCH_PROFILE_DIR:
 * the window takes an inspector CPU profile (main thread, 1 ms samples) and a v8.GCProfiler
 * trace, summarized per 1,000 events by bench/tools/cpuprofile.ts and bench/tools/gctrace.ts.
 *
 *   node bench/tools/stream-profile.ts                                  # gateway, 10 rules, C=1000, 40 events every 50 ms
 *   node bench/tools/stream-profile.ts --targets floor,none,ten --duration 15 --keep
 *   node bench/tools/stream-profile.ts --concurrency 500 --interval-ms 25 --top 40
 *   flags: --targets (ten) --concurrency N (1000) --events N (40) --interval-ms N (50)
 *          --duration N (10, the profiled window) --warmup N (6) --top N (25) --keep (keep the files)
 *
 * A target is `floor` (the minimal proxy) or a gateway configuration of bench/lib.ts (none, ten,
 * tenThousand, disabled, redisNone, redisTen). The profiler's own cost makes the figures a few
 * percent higher than the benchmark's.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { printSummary, summarize } from './cpuprofile.ts';
import { printGcSummary, summarizeGc, type GcTrace } from './gctrace.ts';
import { describeLongRun, figuresOf, probeLong, readStats, shapeName, streamLoad, type LongStreamShape } from '../long-stream.bench.ts';
import { LOAD_CPU, SERVER_CPU, STATS_PRELOAD, canPin, pin, startUpstream, type ChildServer } from '../lib.ts';
import { parseTargets, startTarget, targetTitle, wholeNumber } from './targets.ts';

const { values } = parseArgs({
  options: {
    targets: { type: 'string', default: 'ten' },
    concurrency: { type: 'string', default: '1000' },
    events: { type: 'string', default: '40' },
    'interval-ms': { type: 'string', default: '50' },
    duration: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '6' },
    top: { type: 'string', default: '25' },
    keep: { type: 'boolean', default: false },
  },
  strict: true,
});

const shape: LongStreamShape = {
  id: 'profile',
  concurrency: wholeNumber('concurrency', values.concurrency, 1),
  events: wholeNumber('events', values.events, 1),
  intervalMs: wholeNumber('interval-ms', values['interval-ms'], 0),
};
const seconds = wholeNumber('duration', values.duration, 1);
const warmup = wholeNumber('warmup', values.warmup, 0);
const top = wholeNumber('top', values.top, 1);
const targets = parseTargets(values.targets);

if (canPin()) pin(process.pid, LOAD_CPU);
const upstream = await startUpstream(STATS_PRELOAD);
try {
  for (const target of targets) {
    const dir = mkdtempSync(join(tmpdir(), `floodgate-stream-prof-${target.name}-`));
    // The target inherits this process's environment (lib.ts startChild); the upstream, started before, does not profile.
    process.env['BENCH_PROFILE_DIR'] = dir;
    let server: ChildServer;
    try {
      server = await startTarget(target, upstream.url, STATS_PRELOAD);
    } finally {
      delete process.env['BENCH_PROFILE_DIR'];
    }
    const title = `${targetTitle(target)}, ${shapeName(shape)}`;
    try {
      pin(server.pid, SERVER_CPU);
      await probeLong(server, undefined);
      const idleRss = (await readStats(server)).rssBytes;
      if (warmup > 0) console.log(`warm-up   ${describeLongRun(figuresOf(await streamLoad(server, shape, warmup), shape, idleRss))}`);
      const load = await streamLoad(server, shape, seconds);
      const figures = figuresOf(load, shape, idleRss);
      console.log(`profiled  ${describeLongRun(figures)}`);
      const files = load.server.end.files;
      if (files === undefined) throw new Error(`${server.name} wrote no profile (is BENCH_PROFILE_DIR reaching it?)`);
      const events = load.eventsInWindow;
      const { start, end } = load.server;
      const cpuMs = (end.cpuUs - start.cpuUs) / 1000;
      const mainMs = (end.mainThreadCpuUs - start.mainThreadCpuUs) / 1000;
      const windowMs = end.nowMs - start.nowMs;
      const profile = summarize(JSON.parse(readFileSync(files.cpuProfile, 'utf8')), top);
      console.log(`\n##### ${title}`);
      console.log(`window ${Math.round(windowMs)} ms: ${events} events, ${load.streamsInWindow} streams; CPU ${Math.round(cpuMs)} ms = ${figures.cpuMsPer1000Events} ms/1k events, ` +
        `of which the main thread ${Math.round(mainMs)} ms (${Math.round((mainMs / cpuMs) * 100)}%), other threads (GC helpers, libuv) ${Math.round(cpuMs - mainMs)} ms; ` +
        `event-loop delay p99 ${figures.loopDelayMs.p99} ms, max ${figures.loopDelayMs.max} ms`);
      printGcSummary('GC (v8.GCProfiler)', summarizeGc(JSON.parse(readFileSync(files.gcTrace, 'utf8')) as GcTrace), events, windowMs);
      // Profile samples are wall time: a thread descheduled by another process on its core is
      // sampled busy where it stopped. Per-event figures are scaled to the main thread's CPU time.
      const scale = mainMs / Math.max(1, profile.totalMs);
      console.log(`\nprofile: ${profile.totalMs} ms sampled busy against ${Math.round(mainMs)} ms of main-thread CPU${scale < 0.9 ? ' (the core was shared: the shares are less sure)' : ''}; us/1k events below are scaled to the CPU time`);
      printSummary('CPU profile of the main thread', profile, events / 1000, '1k events', scale);
      if (values.keep) console.log(`\nkept: ${files.cpuProfile} ${files.gcTrace}`);
    } finally {
      await server.stop();
      if (!values.keep) rmSync(dir, { recursive: true, force: true });
    }
  }
} finally {
  await upstream.stop();
}
