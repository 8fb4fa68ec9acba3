import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { missingStartupFlags, STARTUP_V8_FLAGS } from '../../src/runtime/v8-tuning.ts';
import { openaiProvider, waitFor } from '../support/e2e.ts';
import { startFakeUpstream } from '../support/fake-upstream.ts';

const TUNING = new URL('../../src/runtime/v8-tuning.ts', import.meta.url).href;
const CLI = fileURLToPath(new URL('../../src/cli.ts', import.meta.url));

/**
 * A child process (`node ...nodeFlags`) that, tuned or not, first builds a burst of objects which
 * all survive (as a server's objects do when traffic starts), then makes a million short-lived
 * objects at the same allocation site. Reports how many MiB of old generation the short-lived
 * ones took, and the flags the tuning applied.
 */
function burstThenGarbage(tuned: boolean, nodeFlags: string[] = []): { oldMiB: number; applied: string[] } {
  const script = `
    import { getHeapSpaceStatistics } from 'node:v8';
    const applied = ${tuned ? `(await import(${JSON.stringify(TUNING)})).tuneV8ForServing()` : '[]'};
    const oldUsed = () => getHeapSpaceStatistics().find((s) => s.space_name === 'old_space').space_used_size;
    const make = (i) => ({ i, tag: 'x' });
    let burst = [];
    for (let i = 0; i < 3_000_000; i++) burst.push(make(i));
    burst = undefined;
    const before = oldUsed();
    let last;
    for (let i = 0; i < 1_000_000; i++) last = make(i);
    process.stdout.write(JSON.stringify({ oldMiB: (oldUsed() - before) / 2 ** 20, applied, last: last.i }));
  `;
  const out = execFileSync(process.execPath, [...nodeFlags, '--input-type=module', '-e', script], { encoding: 'utf8' });
  return JSON.parse(out) as { oldMiB: number; applied: string[] };
}

/**
 * Whether V8 pretenured in one of up to `tries` runs. Its decision depends on timing: when the
 * optimizing compiler (a background thread) installs its code before the first scavenges, the
 * site's objects carry no allocation feedback and V8 never pretenures; on a loaded machine that
 * happened in about half of the runs. A run that pretenures shows the measurement can see it.
 */
function pretenuresWithin(tries: number, run: () => { oldMiB: number }): number[] {
  const seen: number[] = [];
  while (seen.length < tries) {
    seen.push(run().oldMiB);
    if (seen.at(-1)! > 10) break;
  }
  return seen;
}

describe('tuneV8ForServing', () => {
  it('keeps short-lived objects out of the old generation after a burst of survivors', () => {
    // The control shows this V8 still pretenures, so the tuned figure means something; the tuned
    // run must stay young every time.
    const control = pretenuresWithin(10, () => burstThenGarbage(false));
    assert.ok(control.at(-1)! > 10, `without tuning, the short-lived objects should land in the old generation (MiB: ${control.join(', ')})`);
    for (let run = 0; run < 3; run++) {
      const tuned = burstThenGarbage(true);
      assert.deepEqual(tuned.applied, ['--no-allocation-site-pretenuring']);
      assert.ok(tuned.oldMiB < 1, `with tuning, the short-lived objects should stay young (run ${run + 1}: ${tuned.oldMiB} MiB)`);
    }
  });

  it('leaves alone what the operator set on the node command line, either way', () => {
    const kept = pretenuresWithin(10, () => {
      const run = burstThenGarbage(true, ['--allocation-site-pretenuring', '--memory_reducer']);
      assert.deepEqual(run.applied, []);
      return run;
    });
    assert.ok(kept.at(-1)! > 10, `pretenuring asked for on the command line should stay on (MiB: ${kept.join(', ')})`);
    assert.deepEqual(burstThenGarbage(true, ['--no-memory-reducer']).applied, ['--no-allocation-site-pretenuring']);
  });
});

describe('start-up V8 flags', () => {
  it('names the ones node was started without, either way given counting as given', () => {
    assert.deepEqual(missingStartupFlags([]), ['--no-memory-reducer', '--min-semi-space-size=64']);
    assert.deepEqual(missingStartupFlags(['--no-memory-reducer', '--min-semi-space-size=64']), []);
    assert.deepEqual(missingStartupFlags(['--memory_reducer', '--min_semi_space_size=16']), []);
    assert.deepEqual(missingStartupFlags(['--max-old-space-size=512', '--no-memory-reducer']), ['--min-semi-space-size=64']);
  });

  it('start the young generation at the size load grows it to, so a quiet spell cannot shrink it', () => {
    // V8 shrinks the young generation after about a minute without allocation (too slow to wait
    // for here); the floor the flag sets is what keeps it, and it is visible from the start.
    const youngMiB = (flags: readonly string[]): number => {
      const script = 'const s = require("node:v8").getHeapSpaceStatistics().find((x) => x.space_name === "new_space"); process.stdout.write(String(s.space_size / 2 ** 20))';
      return Number(execFileSync(process.execPath, [...flags, '-e', script], { encoding: 'utf8' }));
    };
    const untuned = youngMiB([]);
    assert.ok(untuned <= 8, `without the flags V8 starts small and adapts (${untuned} MiB)`);
    assert.equal(youngMiB(STARTUP_V8_FLAGS), 64);
    assert.equal(youngMiB([...STARTUP_V8_FLAGS, '--max-semi-space-size=16']), 16, 'an operator cap still wins');
  });

  it('are on the command line of npm start and of bin/floodgate.js', () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> };
    const shebang = readFileSync(new URL('../../bin/floodgate.js', import.meta.url), 'utf8').split('\n')[0]!;
    for (const flag of STARTUP_V8_FLAGS) {
      assert.match(pkg.scripts['start']!, new RegExp(`^node .*${flag} .*src/cli\\.ts`), 'npm start');
      assert.match(shebang, new RegExp(`^#!/usr/bin/env -S node .*${flag}`), 'bin/floodgate.js');
    }
  });

  it('reach node through the shebang when bin/floodgate.js is run as a command', () => {
    // A preloaded module reports the process's execArgv: what node itself was given.
    const report = 'process.on("exit", () => process.stderr.write("execArgv=" + JSON.stringify(process.execArgv)))';
    const run = spawnSync(fileURLToPath(new URL('../../bin/floodgate.js', import.meta.url)), ['--help'], {
      encoding: 'utf8',
      env: { ...process.env, PATH: `${dirname(process.execPath)}:${process.env['PATH'] ?? ''}`, NODE_OPTIONS: `--import=data:text/javascript,${encodeURIComponent(report)}` },
    });
    assert.equal(run.status, 0, run.stderr);
    assert.match(run.stdout, /Usage/);
    const execArgv = JSON.parse(/execArgv=(.*)$/m.exec(run.stderr)?.[1] ?? 'null') as string[] | null;
    assert.ok(execArgv !== null, `no execArgv report in: ${run.stderr}`);
    for (const flag of STARTUP_V8_FLAGS) assert.ok(execArgv.includes(flag), `${flag} in ${JSON.stringify(execArgv)}`);
  });
});

describe('collectStartupGarbage', () => {
  /**
   * A tuned child process that builds ~40 MiB of objects which outlive several scavenges (they
   * reach the old generation, as a parsed configuration does), drops them, and then reports the
   * heap in use before and after `collect` (or nothing), and whether its global gained `gc`.
   */
  function startupHeap(collect: boolean, nodeFlags: string[] = []): { beforeMiB: number; afterMiB: number; collected: boolean | null; globalGc: string } {
    const script = `
      const { collectStartupGarbage, tuneV8ForServing } = await import(${JSON.stringify(TUNING)});
      tuneV8ForServing();
      let parsed = [];
      for (let i = 0; i < 1_000_000; i++) parsed.push({ i, name: 'rule-' + i });
      parsed = undefined;
      const used = () => process.memoryUsage().heapUsed / 2 ** 20;
      const beforeMiB = used();
      const collected = ${collect ? 'await collectStartupGarbage()' : 'null'};
      process.stdout.write(JSON.stringify({ beforeMiB, afterMiB: used(), collected, globalGc: typeof globalThis.gc }));
    `;
    return JSON.parse(execFileSync(process.execPath, [...nodeFlags, '--input-type=module', '-e', script], { encoding: 'utf8' })) as ReturnType<typeof startupHeap>;
  }

  it('frees the garbage start-up left in the heap, and leaves the global as it was', () => {
    const untouched = startupHeap(false);
    assert.ok(untouched.afterMiB > 40, `without the collection the dropped objects should still fill the heap (${untouched.afterMiB} MiB)`);
    const run = startupHeap(true);
    assert.equal(run.collected, true);
    assert.ok(run.beforeMiB > 40, `the dropped objects should fill the heap before the collection (${run.beforeMiB} MiB)`);
    assert.ok(run.afterMiB < 20, `the collection should free them (${run.beforeMiB} -> ${run.afterMiB} MiB)`);
    assert.equal(run.globalGc, 'undefined');
  });

  it('uses the global gc where the operator exposed it', () => {
    const run = startupHeap(true, ['--expose-gc']);
    assert.equal(run.collected, true);
    assert.ok(run.afterMiB < 20, `${run.beforeMiB} -> ${run.afterMiB} MiB`);
    assert.equal(run.globalGc, 'function');
  });

  it('leaves process.nextTick building its tick objects inline in a started gateway', async () => {
    // process.nextTick builds each tick object with a literal with computed (symbol) keys. A
    // collection while no tick object is alive frees the maps V8's feedback for those keys
    // holds, and the sites go megamorphic for good: every tick object is then built in the
    // runtime. The CLI collects inside a tick callback; this reads the sites' state after traffic.
    const fake = await startFakeUpstream({ apiKey: 'k-up', name: 'up' });
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-ticks-'));
    const config = join(dir, 'floodgate.yaml');
    writeFileSync(config, `storage: { type: sqlite, sqlite: { path: ${join(dir, 'usage.db')} } }\nproviders:\n${openaiProvider('up', fake.url, ['gpt-x'])}`);
    const report = 'process.on("SIGUSR2", () => process.stderr.write("tickFeedback=" + JSON.stringify(%GetFeedback(process.nextTick).filter((s) => Array.isArray(s) && s[0] === "DefineKeyedOwnPropertyInLiteral").map((s) => s[1])) + "\\n"))';
    const child = spawn(process.execPath, ['--allow-natives-syntax', ...STARTUP_V8_FLAGS, `--import=data:text/javascript,${encodeURIComponent(report)}`, CLI, '--config', config, '--port', '0'], {
      cwd: dir,
      env: { PATH: process.env['PATH'] ?? '', LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout!.on('data', (d: Buffer) => { out += d.toString('utf8'); });
    child.stderr!.on('data', (d: Buffer) => { err += d.toString('utf8'); });
    try {
      await waitFor(() => out.includes('floodgate listening') || child.exitCode !== null, 10_000, 'the gateway to listen');
      const url = /"url":"([^"]+)"/.exec(out)?.[1];
      assert.ok(url, `no listening line: ${out} ${err}`);
      const chat = async (stream: boolean): Promise<void> => {
        const res = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'up/gpt-x', messages: [{ role: 'user', content: 'hi' }], stream }) });
        assert.equal(res.status, 200);
        await res.text();
      };
      for (let round = 0; round < 50; round++) await Promise.all([chat(false), chat(false), chat(true), chat(true)]);
      child.kill('SIGUSR2');
      await waitFor(() => err.includes('tickFeedback='), 5_000, 'the feedback report');
      const states = JSON.parse(/tickFeedback=(.*)$/m.exec(err)![1]!) as string[];
      assert.ok(states.length >= 3, `expected the literal's computed-key sites, got ${JSON.stringify(states)}`);
      assert.ok(!states.includes('MEGAMORPHIC'), `process.nextTick's literal sites: ${JSON.stringify(states)}`);
    } finally {
      child.kill('SIGTERM');
      if (child.exitCode === null) await once(child, 'exit');
      await fake.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
