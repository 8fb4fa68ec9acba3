import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { startGateway, type Gateway } from '../../src/app.ts';
import { loadConfig } from '../../src/config/load.ts';
import { secretsOf } from '../../src/config/secrets.ts';
import { SecretScrubber, createLogger } from '../../src/logging/logger.ts';

export interface TestGateway {
  gateway: Gateway;
  url: string;
  dir: string;
  /** With `logs: true`, every line the gateway logged (at info and above), parsed, as the command writes them. */
  logs: Array<Record<string, unknown>>;
  /** With `logs: true`, the log's text as written, line by line. */
  logText(): string;
  /** POST/GET JSON helper against the gateway. */
  request(method: string, path: string, options?: { body?: unknown; headers?: Record<string, string> }): Promise<TestResponse>;
  close(): Promise<void>;
}

export interface TestResponse {
  status: number;
  headers: Headers;
  text: string;
  json(): any;
}

/**
 * Starts a real gateway on a random loopback port with its own SQLite file, configured by a
 * YAML text and environment variables exactly as a user would configure it. `now` replaces its
 * clock (milliseconds since the epoch) for tests that need exact times. `logs`: its log is kept
 * (`logs`, `logText()`), written by the command's own logger (secrets cleared).
 */
export async function startTestGateway(options: { yaml?: string; env?: Record<string, string>; dir?: string; now?: () => number; logs?: boolean } = {}): Promise<TestGateway> {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'floodgate-test-'));
  const file = join(dir, 'floodgate.yaml');
  writeFileSync(file, options.yaml ?? '');
  const env = { SQLITE_PATH: join(dir, 'floodgate.db'), PORT: '0', ...options.env };
  const loaded = loadConfig({ file, env, cwd: dir });
  const written: string[] = [];
  const logs: Array<Record<string, unknown>> = [];
  let logger;
  if (options.logs === true) {
    const scrubber = new SecretScrubber();
    scrubber.add(secretsOf(loaded.config));
    logger = createLogger({
      level: 'info',
      scrubber,
      destination: {
        write(text: string) {
          written.push(text);
          for (const line of text.split('\n')) if (line !== '') logs.push(JSON.parse(line) as Record<string, unknown>);
        },
      },
    });
  } else {
    logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  }
  const gateway = await startGateway({ config: loaded.config, rateLimitSeeds: loaded.rateLimitSeeds, budgetSeeds: loaded.budgetSeeds, warnings: loaded.warnings, logger, shutdownGraceMs: 2000, now: options.now });
  let closed = false;
  return {
    gateway,
    url: gateway.url,
    dir,
    logs,
    logText: () => written.join(''),
    request: (method, path, opts = {}) => request(gateway.url, method, path, opts),
    async close() {
      if (closed) return;
      closed = true;
      await gateway.close();
      if (!options.dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function request(
  base: string,
  method: string,
  path: string,
  options: { body?: unknown; headers?: Record<string, string> } = {},
): Promise<TestResponse> {
  const headers: Record<string, string> = { ...options.headers };
  let body: string | undefined;
  if (options.body !== undefined) {
    body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const response = await fetch(base + path, { method, headers, body });
  const text = await response.text();
  return { status: response.status, headers: response.headers, text, json: () => JSON.parse(text) };
}
