/** Runs the `floodgate` command as a child process, as a user would. */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { waitFor } from './e2e.ts';

const CLI = fileURLToPath(new URL('../../src/cli.ts', import.meta.url));

export interface Run {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Runs the CLI in `cwd` with a clean environment (no MASTER_KEY, HOST, PORT... from the caller). */
export function runCli(args: string[], cwd: string, env: Record<string, string> = {}): Run {
  const base: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? cwd, LOG_LEVEL: 'info' };
  const child = spawn(process.execPath, [CLI, ...args], { cwd, env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => { out += d.toString('utf8'); });
  child.stderr!.on('data', (d: Buffer) => { err += d.toString('utf8'); });
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return { child, stdout: () => out, stderr: () => err, exit };
}

export function logLines(text: string): Array<Record<string, unknown>> {
  return text.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
}

export async function listeningUrl(run: Run): Promise<string> {
  let url: string | undefined;
  await waitFor(() => {
    url = logLines(run.stdout()).find((l) => l.msg === 'floodgate listening')?.url as string | undefined;
    if (!url && run.child.exitCode !== null) throw new Error(`the gateway exited: ${run.stderr()} ${run.stdout()}`);
    return url !== undefined;
    // A process starts in about 2 s; a machine busy with other test processes may take many times that.
  }, 30_000, 'the "floodgate listening" log line');
  return url!;
}

export async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`timed out: ${what}`)), ms); })]);
  } finally {
    clearTimeout(timer);
  }
}

