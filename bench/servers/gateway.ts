/**
 * Bench-only launcher: starts Floodgate exactly as the CLI does (V8 tuning, loadConfig +
 * startGateway, the start-up garbage collection, pino at LOG_LEVEL) and prints `{"port":N}` on
 * stdout, so the parent need not parse logs.
 *   node bench/servers/gateway.ts <config.yaml>   (env: SQLITE_PATH, RATE_LIMITS_ENABLED, ...)
 * With BENCH_ALLOCATION_PROFILE=<file> (bench/allocations.ts), SIGUSR2 starts V8's sampling heap
 * profiler, garbage included, and the next SIGUSR2 writes its profile to that file.
 */
import { renameSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import pino from 'pino';
import { startGateway } from '../../src/app.ts';
import { loadConfig } from '../../src/config/load.ts';
import { collectStartupGarbage, tuneV8ForServing } from '../../src/runtime/v8-tuning.ts';

tuneV8ForServing();

const file = process.argv[2];
// Logs go to stderr: stdout carries only the port line.
const logger = pino({ level: process.env['LOG_LEVEL'] ?? 'warn', base: { service: 'floodgate' } }, pino.destination(2));
const loaded = loadConfig({ file, env: process.env, portOverride: 0 });
const gateway = await startGateway({ config: loaded.config, rateLimitSeeds: loaded.rateLimitSeeds, warnings: loaded.warnings, logger, shutdownGraceMs: 2000 });
await collectStartupGarbage();
process.stdout.write(`${JSON.stringify({ port: gateway.port })}\n`);
const stop = (): void => {
  // Exit through process.exit so --cpu-prof writes its profile.
  void gateway.close().finally(() => process.exit(0));
};
process.on('SIGTERM', stop);
const profileFile = process.env['BENCH_ALLOCATION_PROFILE'];
if (profileFile !== undefined) {
  const session = new Session();
  session.connect();
  let sampling = false;
  process.on('SIGUSR2', () => {
    sampling = !sampling;
    if (sampling) {
      // Every allocation site, not only what is still alive when the profile is taken.
      void session.post('HeapProfiler.startSampling', {
        samplingInterval: Number(process.env['BENCH_ALLOCATION_INTERVAL'] ?? 256),
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      });
      return;
    }
    // Written aside and renamed, so the reader never sees half a file.
    void session.post('HeapProfiler.stopSampling').then(({ profile }) => {
      writeFileSync(`${profileFile}.partial`, JSON.stringify(profile));
      renameSync(`${profileFile}.partial`, profileFile);
    });
  });
}
process.on('SIGINT', stop);
