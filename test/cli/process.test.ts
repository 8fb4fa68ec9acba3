/**
 * How the gateway runs as a process: `bin/floodgate.js` on a Node too old for it, and `npm start`
 * stopped with SIGTERM (npm runs the script through `sh -c`; the gateway must get the signal, not
 * be left running without its parent).
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { withTimeout } from '../support/cli.ts';
import { accepts, commandLine, descendants, eventually, freePort, isAlive, olderNode } from '../support/processes.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(ROOT, 'bin', 'floodgate.js');

describe('bin/floodgate.js on an older Node', () => {
  it('exits 1 with one line naming the Node it needs and the one it found, and no stack trace', () => {
    const old = olderNode();
    assert.ok(old, 'this machine has a Node older than 22.18 besides the pinned one (its system Node)');
    for (const args of [[], ['check-config', 'floodgate.yaml'], ['--help']]) {
      const run: SpawnSyncReturns<string> = spawnSync(old.path, [BIN, ...args], { cwd: ROOT, encoding: 'utf8', env: { PATH: process.env.PATH ?? '' } });
      assert.equal(run.status, 1, run.stderr);
      assert.equal(run.stderr, `Floodgate needs Node >= 22.18 (found ${old.version})\n`);
      assert.equal(run.stdout, '');
    }
  });

  it('runs on the pinned Node', () => {
    const run = spawnSync(process.execPath, [BIN, '--help'], { cwd: ROOT, encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    assert.match(run.stdout, /floodgate check-config FILE/);
  });
});

describe('npm start', () => {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-npm-start-'));
  const started: number[] = [];
  after(() => {
    // Whatever the test left running, by the pids it recorded.
    for (const pid of started) if (isAlive(pid)) process.kill(pid, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('SIGTERM to npm stops the gateway gracefully: its port closes and none of its processes remains', async () => {
    const port = await freePort();
    const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? dir, PORT: String(port), SQLITE_PATH: join(dir, 'npm.db'), LOG_LEVEL: 'info' };
    const npm = spawn('npm', ['start'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    started.push(npm.pid!);
    let out = '';
    npm.stdout!.on('data', (d: Buffer) => { out += d.toString('utf8'); });
    npm.stderr!.on('data', (d: Buffer) => { out += d.toString('utf8'); });
    const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => npm.on('exit', (code, signal) => resolve({ code, signal })));

    // Whatever runs below npm is recorded as it appears, so that nothing outlives the test.
    const record = (): void => {
      for (const pid of descendants(npm.pid!)) if (!started.includes(pid)) started.push(pid);
    };
    const up = await eventually(async () => {
      record();
      try {
        return (await fetch(`http://127.0.0.1:${port}/ready`)).status === 200;
      } catch {
        return false;
      }
    }, 30_000);
    assert.ok(up, `the gateway did not come up:\n${out}`);
    const tree = descendants(npm.pid!);
    record();
    assert.ok(tree.some((pid) => commandLine(pid).includes('bin/floodgate.js')), `the gateway runs below npm: ${tree.map(commandLine).join(' | ')}`);

    npm.kill('SIGTERM');
    const { code } = await withTimeout(exit, 15_000, 'npm to exit');
    assert.equal(code, 0, out);
    assert.ok(await eventually(async () => !(await accepts(port)), 5000), 'the gateway\'s port is closed');
    assert.ok(await eventually(() => tree.every((pid) => !isAlive(pid)), 5000), `still running: ${tree.filter(isAlive).map(commandLine).join(' | ')}`);
    assert.match(out, /"msg":"shutting down"/);
    assert.match(out, /"msg":"stopped"/);
  });
});
