import { parseArgs } from 'node:util';
import { startGateway, StartupError, type Gateway } from './app.ts';
import { checkConfigFile } from './config/check.ts';
import { ConfigError } from './config/errors.ts';
import { loadConfig } from './config/load.ts';
import { secretsOf } from './config/secrets.ts';
import { SecretScrubber, createLogger } from './logging/logger.ts';

const USAGE = `Usage:
  floodgate [--config FILE] [--port N]   start the gateway
  floodgate check-config FILE            validate a config file, print every error
  floodgate --help

Config file: --config, else $FLOODGATE_CONFIG, else ./floodgate.yaml when present, else built-in defaults.`;

export async function main(argv: string[]): Promise<number> {
  if (argv[0] === 'check-config') {
    const file = argv[1];
    if (!file || argv.length > 2) {
      process.stderr.write(`${USAGE}\n`);
      return 2;
    }
    const result = checkConfigFile(file, process.env);
    (result.ok ? process.stdout : process.stderr).write(`${result.lines.join('\n')}\n`);
    return result.ok ? 0 : 1;
  }

  let args;
  try {
    args = parseArgs({ args: argv, options: { config: { type: 'string', short: 'c' }, port: { type: 'string', short: 'p' }, help: { type: 'boolean', short: 'h' } }, strict: true });
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  if (args.values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  let portOverride: number | undefined;
  if (args.values.port !== undefined) {
    portOverride = Number(args.values.port);
    if (!Number.isInteger(portOverride) || portOverride < 0 || portOverride > 65535) {
      process.stderr.write(`--port: expected an integer from 0 to 65535, got "${args.values.port}"\n`);
      return 2;
    }
  }

  const scrubber = new SecretScrubber();
  const logger = createLogger({ level: process.env.LOG_LEVEL ?? 'info', scrubber });
  let gateway: Gateway;
  try {
    const loaded = loadConfig({ file: args.values.config, env: process.env, portOverride });
    scrubber.add(secretsOf(loaded.config));
    logger.info({ config: loaded.source }, 'configuration loaded');
    gateway = await startGateway({ config: loaded.config, rateLimitSeeds: loaded.rateLimitSeeds, budgetSeeds: loaded.budgetSeeds, warnings: loaded.warnings, logger });
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`floodgate: invalid configuration\n${err.errors.map((e) => `  - ${e}`).join('\n')}\n`);
      return 1;
    }
    if (err instanceof StartupError) {
      process.stderr.write(`floodgate: ${err.message}\n`);
      return 1;
    }
    logger.fatal({ err }, 'start-up failed');
    return 1;
  }
  await new Promise<void>((resolve) => {
    const stop = (signal: string): void => {
      logger.info({ signal }, 'shutting down');
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
      resolve();
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
  await gateway.close();
  logger.info('stopped');
  return 0;
}

process.exitCode = await main(process.argv.slice(2));
