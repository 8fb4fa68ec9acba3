/**
 * One usage record must never stop the others being written: the floodgate command on
 * PostgreSQL (the strictest database here: its text refuses NUL, its bigint refuses fractions),
 * fed a passthrough model with a NUL and an upstream's fractional token count, goes on recording
 * every user's usage, writes its backlog on SIGTERM, and sets aside (logged, counted) a record
 * the database refuses instead of retrying it for ever.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { logLines, listeningUrl, runCli, withTimeout, type Run } from '../support/cli.ts';
import { openaiProvider } from '../support/e2e.ts';
import { startFixedUsageUpstream, type FixedUsageUpstream } from '../support/fixed-usage-upstream.ts';
import { request } from '../support/gateway.ts';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';
import { Scrape } from '../support/prometheus.ts';
import { eventually } from '../support/rate-limits.ts';

const MASTER = 'usage-integrity-master';
const as = (userPath: string, requestId?: string): Record<string, string> => ({
  authorization: `Bearer ${MASTER}`,
  'x-floodgate-user-path': userPath,
  ...(requestId === undefined ? {} : { 'x-request-id': requestId }),
});
const USAGE = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
/** A passthrough chat body whose model holds a NUL, as JSON text (the escape is the point). */
const NUL_MODEL_BODY = '{"model":"a\\u0000b","messages":[{"role":"user","content":"hi"}]}';

interface Row {
  user_path: string;
  model: string;
  prompt_tokens: string;
  total_tokens: string;
  request_id: string | null;
}

describe('floodgate CLI on PostgreSQL: no usage record stops the others', { timeout: 90_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-usage-integrity-'));
  const config = join(dir, 'floodgate.yaml');
  let db: TestDatabase;
  let up: FixedUsageUpstream;
  let run: Run | undefined;

  before(async () => {
    db = await createTestDatabase();
    up = await startFixedUsageUpstream();
    up.setUsage(USAGE);
    writeFileSync(config, `storage: { type: postgres, postgres: { url: "${db.url}" } }\nproviders:\n${openaiProvider('up', up.url, ['gpt-x'])}pricing:\n  up/gpt-x: { input_per_mtok: 1, output_per_mtok: 2 }\n`);
  });
  after(async () => {
    if (run !== undefined && run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGKILL');
    await up?.close();
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  const start = async (): Promise<string> => {
    run = runCli(['--config', config, '--port', '0'], dir, { MASTER_KEY: MASTER });
    return listeningUrl(run);
  };
  const stop = async (): Promise<void> => {
    const running = run!;
    running.child.kill('SIGTERM');
    const exit = await withTimeout(running.exit, 15_000, 'the gateway to exit after SIGTERM');
    assert.equal(exit.code, 0, running.stderr());
  };
  const query = async <T extends pg.QueryResultRow>(sql: string): Promise<T[]> => {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      return (await client.query<T>(sql)).rows;
    } finally {
      await client.end();
    }
  };
  const chat = (url: string, userPath: string, requestId?: string) =>
    request(url, 'POST', '/v1/chat/completions', { body: { model: 'up/gpt-x', messages: [{ role: 'user', content: 'hi' }] }, headers: as(userPath, requestId) });
  const nulPassthrough = (url: string, userPath: string) =>
    request(url, 'POST', '/p/up/chat/completions', { body: NUL_MODEL_BODY, headers: as(userPath) });

  it('stores a NUL model and a fractional token count cleaned, and goes on writing every user\'s usage', async () => {
    const url = await start();
    try {
      assert.equal((await nulPassthrough(url, '/mallory')).status, 200);
      up.setUsage({ prompt_tokens: 10.5, completion_tokens: 2, total_tokens: 12.5 });
      assert.equal((await chat(url, '/fraction', 'req-fraction')).status, 200);
      up.setUsage(USAGE);
      // Past the first flush, so the bad records were in a batch of their own before.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      for (let i = 0; i < 5; i++) assert.equal((await chat(url, `/good/${i}`)).status, 200);

      // /v1/usage flushes before it reads: everyone's records are there.
      const usage = (await request(url, 'GET', '/v1/usage', { headers: as('/') })).json();
      assert.equal(usage.totals.requests, 7, JSON.stringify(usage));
      const rows = await query<Row>('SELECT user_path, model, prompt_tokens, total_tokens, request_id FROM usage_records ORDER BY id');
      assert.deepEqual(rows.map((r) => r.user_path), ['/mallory', '/fraction', '/good/0', '/good/1', '/good/2', '/good/3', '/good/4']);
      assert.equal(rows[0]?.model, 'a\ufffdb');
      assert.deepEqual([rows[1]?.prompt_tokens, rows[1]?.total_tokens, rows[1]?.request_id], ['11', '13', 'req-fraction']);
      // The budgets' source of truth sees the spend again.
      assert.ok(usage.totals.cost_usd > 0);
    } finally {
      await stop();
    }
  });

  it('writes the backlog on SIGTERM, a NUL record among it', async () => {
    await query('DELETE FROM usage_records');
    const url = await start();
    let sent = 0;
    try {
      // Well within the one-second flush interval: all of it is still in memory at SIGTERM.
      const answers = await Promise.all([
        nulPassthrough(url, '/backlog/mallory'),
        ...Array.from({ length: 19 }, (_, i) => chat(url, `/backlog/${i}`)),
      ]);
      sent = answers.filter((a) => a.status === 200).length;
      assert.equal(sent, 20);
    } finally {
      await stop();
    }
    const [count] = await query<{ n: string }>("SELECT COUNT(*) AS n FROM usage_records WHERE user_path LIKE '/backlog/%'");
    assert.equal(Number(count?.n), sent);
  });

  it('sets aside a record the database refuses, logged with its request id and counted, and writes the rest', async () => {
    await query('DELETE FROM usage_records');
    // A constraint only this test's database has: the record of model "poison" cannot be stored.
    await query("ALTER TABLE usage_records ADD CONSTRAINT no_poison CHECK (model <> 'poison')");
    const url = await start();
    try {
      const poison = await request(url, 'POST', '/p/up/chat/completions', { body: { model: 'poison', messages: [] }, headers: as('/poisoner', 'req-poison') });
      assert.equal(poison.status, 200);
      for (let i = 0; i < 4; i++) assert.equal((await chat(url, `/after/${i}`)).status, 200);
      const usage = (await request(url, 'GET', '/v1/usage', { headers: as('/') })).json();
      assert.equal(usage.totals.requests, 4, JSON.stringify(usage));
      const metrics = (await request(url, 'GET', '/metrics', { headers: as('/') })).text;
      assert.equal(new Scrape(metrics).value('floodgate_usage_records_failed_total', {}), 1);
      await eventually(async () => logLines(run!.stdout()).some((l) => l.requestId === 'req-poison' && /set aside/.test(String(l.msg))), 5000, 'the set-aside log line');
      // Not retried: later records keep being written.
      assert.equal((await chat(url, '/after/late')).status, 200);
      const later = (await request(url, 'GET', '/v1/usage', { headers: as('/') })).json();
      assert.equal(later.totals.requests, 5);
    } finally {
      await stop();
      await query('ALTER TABLE usage_records DROP CONSTRAINT no_poison');
    }
  });

  it('logs at most 100 passthrough models without a price, however many distinct ones arrive', async () => {
    const url = await start();
    try {
      for (let i = 0; i < 150; i++) {
        const res = await request(url, 'POST', '/p/up/chat/completions', { body: { model: `made-up-${i}`, messages: [] }, headers: as('/many') });
        assert.equal(res.status, 200);
      }
      await eventually(async () => logLines(run!.stdout()).some((l) => /further models without a price are not logged/.test(String(l.msg))), 5000, 'the last no-price line');
      const unknown = logLines(run!.stdout()).filter((l) => /^no price known for up\/made-up-/.test(String(l.msg)));
      assert.equal(unknown.length, 100);
    } finally {
      await stop();
    }
  });
});
