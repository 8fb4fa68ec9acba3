/**
 * Gateway processes started as a user starts them: the `floodgate` command with a YAML file and
 * environment variables (several of them sharing their counters in Redis and their storage in a
 * throwaway PostgreSQL database: see test/support/postgres.ts).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { listeningUrl, logLines, runCli, type Run } from './cli.ts';
import { request, type TestResponse } from './gateway.ts';

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

/**
 * Starts `count` replicas at once. If one fails to start, those that did are stopped before the
 * error is thrown, so a failed setup never leaves processes (and the test run) hanging.
 */
export async function startReplicas(count: number, yaml: string, env: Record<string, string>): Promise<Replica[]> {
  const started = await Promise.allSettled(Array.from({ length: count }, () => startReplica(yaml, env)));
  const failure = started.find((result) => result.status === 'rejected');
  const replicas = started.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
  if (failure !== undefined) {
    await Promise.all(replicas.map((replica) => replica.stop()));
    throw failure.reason;
  }
  return replicas;
}
