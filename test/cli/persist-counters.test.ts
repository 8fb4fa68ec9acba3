/**
 * rate_limits.persist_counters through the floodgate command, killed with SIGKILL as a crash
 * would: what was saved (at most a second before) comes back, and a reset is never undone.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { listeningUrl, runCli, withTimeout, type Run } from '../support/cli.ts';
import { eventually } from '../support/rate-limits.ts';

const USER_PATH_HEADER = 'X-Floodgate-User-Path';

describe('floodgate CLI: counters saved across a kill -9', { timeout: 60_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-persist-cli-'));
  const db = join(dir, 'floodgate.db');
  const config = join(dir, 'floodgate.yaml');
  writeFileSync(
    config,
    `storage: { type: sqlite, sqlite: { path: ${db} } }
rate_limits:
  persist_counters: true
  user_paths: [ { path: /team, limits: [ { period: day, max_requests: 100, per_child: true } ] } ]
`,
  );
  let run: Run | undefined;
  after(() => {
    if (run !== undefined && run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  const start = async (): Promise<string> => {
    run = runCli(['--config', config, '--port', '0'], dir);
    return listeningUrl(run);
  };
  const crash = async (): Promise<void> => {
    const running = run!;
    running.child.kill('SIGKILL');
    assert.equal((await withTimeout(running.exit, 10_000, 'the gateway to die')).signal, 'SIGKILL');
  };
  const chat = async (url: string, userPath: string): Promise<void> => {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', [USER_PATH_HEADER]: userPath },
      body: JSON.stringify({ model: 'mock/mock-1', messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(res.status, 200, await res.text());
  };
  const children = async (url: string): Promise<Array<[string, number]>> => {
    const res = await fetch(`${url}/admin/rate-limits?expand=children`);
    assert.equal(res.status, 200);
    const { rate_limits: records } = (await res.json()) as { rate_limits: Array<{ user_path: string; requests_used: number }> };
    return records.map((r) => [r.user_path, r.requests_used]);
  };
  /** What the gateway has saved for alice so far, read from its SQLite file as another process would. */
  const savedForAlice = (): number => {
    const reader = new Database(db, { readonly: true });
    try {
      const row = reader.prepare("SELECT requests_current AS n FROM rate_limit_counters WHERE counter_key LIKE '%alice'").get() as { n: number } | undefined;
      return row?.n ?? 0;
    } finally {
      reader.close();
    }
  };

  it('loses at most what changed since the last save, and never undoes a reset', async () => {
    let url = await start();
    for (let i = 0; i < 4; i++) await chat(url, '/team/alice');
    // Saved off the request path, within about a second.
    await eventually(async () => savedForAlice() === 4, 10_000, 'the four requests to be saved');
    for (let i = 0; i < 2; i++) await chat(url, '/team/alice/x');
    await crash();

    url = await start();
    const [own, alice] = await children(url);
    assert.deepEqual(own, ['/team', 0]);
    assert.equal(alice?.[0], '/team/alice');
    assert.ok(alice![1] >= 4 && alice![1] <= 6, `the saved four, and at most the two of the last second: got ${alice![1]}`);

    const reset = await fetch(`${url}/admin/rate-limits/reset-one`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user_path: '/team', period: 'day' }) });
    assert.equal(reset.status, 200);
    await crash(); // right after the reset answered: no save ran in between
    url = await start();
    assert.deepEqual(await children(url), [['/team', 0]]);
    await crash();
  });
});
