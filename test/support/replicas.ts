/**
 * Several gateway processes sharing their counters (Redis) and their storage (a throwaway
 * PostgreSQL database), started as a user starts them: the `floodgate` command with a YAML file
 * and environment variables.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { listeningUrl, logLines, runCli, type Run } from './cli.ts';
import { request, type TestResponse } from './gateway.ts';

const ADMIN_URL = process.env.POSTGRES_TEST_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export interface TestDatabase {
  readonly url: string;
  drop(): Promise<void>;
}

async function asAdmin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** A fresh PostgreSQL database on the test server, dropped by drop(). */
export async function createTestDatabase(): Promise<TestDatabase> {
  // Hex digits only: safe to put into DDL.
  const name = `floodgate_replicas_${randomBytes(6).toString('hex')}`;
  await asAdmin(`CREATE DATABASE ${name}`);
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => asAdmin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}

export interface Replica {
  readonly url: string;
  readonly run: Run;
  request(method: string, path: string, options?: { body?: unknown; headers?: Record<string, string> }): Promise<TestResponse>;
  /** Its JSON log lines so far. */
  logs(): Array<Record<string, unknown>>;
  /** SIGTERM, then waits for the exit. */
  stop(): Promise<void>;
  /** SIGKILL: dies at once, holding whatever it held. */
  kill(): Promise<void>;
}

/** Starts one gateway process with this YAML and environment; its SQLite file (if any) and YAML live in a temp dir. */
export async function startReplica(yaml: string, env: Record<string, string>): Promise<Replica> {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-replica-'));
  const file = join(dir, 'floodgate.yaml');
  writeFileSync(file, yaml);
  const run = runCli(['--config', file], dir, { PORT: '0', ...env });
  let url: string;
  try {
    url = await listeningUrl(run);
  } catch (err) {
    run.child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const exit = async (signal: NodeJS.Signals): Promise<void> => {
    if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill(signal);
    await run.exit;
    rmSync(dir, { recursive: true, force: true });
  };
  return {
    url,
    run,
    request: (method, path, options = {}) => request(url, method, path, options),
    logs: () => logLines(run.stdout()),
    stop: () => exit('SIGTERM'),
    kill: () => exit('SIGKILL'),
  };
}
