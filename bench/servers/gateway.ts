/**
 * Bench-only launcher: starts Floodgate as the CLI does (loadConfig + startGateway, pino at
 * LOG_LEVEL) and prints `{"port":N}` on stdout, so the parent need not parse logs.
 *   node bench/servers/gateway.ts <config.yaml>   (env: SQLITE_PATH, RATE_LIMITS_ENABLED, ...)
 */
import pino from 'pino';
import { startGateway } from '../../src/app.ts';
import { loadConfig } from '../../src/config/load.ts';

const file = process.argv[2];
// Logs go to stderr: stdout carries only the port line.
const logger = pino({ level: process.env['LOG_LEVEL'] ?? 'warn', base: { service: 'floodgate' } }, pino.destination(2));
const loaded = loadConfig({ file, env: process.env, portOverride: 0 });
const gateway = await startGateway({ config: loaded.config, rateLimitSeeds: loaded.rateLimitSeeds, warnings: loaded.warnings, logger, shutdownGraceMs: 2000 });
process.stdout.write(`${JSON.stringify({ port: gateway.port })}\n`);
const stop = (): void => {
  // Exit through process.exit so --cpu-prof writes its profile.
  void gateway.close().finally(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
