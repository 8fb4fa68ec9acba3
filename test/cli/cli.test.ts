import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { openaiProvider, waitFor } from '../support/e2e.ts';
import { listeningUrl, logLines, runCli, withTimeout } from '../support/cli.ts';
import { createTestDatabase } from '../support/postgres.ts';
import { dropPrefix, REDIS_URL, testPrefix } from '../support/redis.ts';

describe('floodgate CLI', () => {
  let dir: string;
  let fake: FakeUpstream;
  const running: ChildProcess[] = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'floodgate-cli-'));
    fake = await startFakeUpstream({ apiKey: 'k-up', name: 'up' });
  });
  after(async () => {
    for (const child of running) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await fake?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves on --port 0, and on SIGTERM lets the in-flight request finish, keeps its usage record and exits 0', async () => {
    const config = join(dir, 'serve.yaml');
    const db = join(dir, 'serve.db');
    writeFileSync(config, `storage: { type: sqlite, sqlite: { path: ${db} } }\nproviders:\n${openaiProvider('up', fake.url, ['gpt-x'])}`);
    const run = runCli(['--config', config, '--port', '0'], dir);
    running.push(run.child);
    const url = await listeningUrl(run);
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.notEqual(url, 'http://127.0.0.1:0');

    const health = await fetch(`${url}/health`);
    assert.equal(health.status, 200);

    fake.reset();
    fake.setLatency(600);
    const inflight = fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'up/gpt-x', messages: [{ role: 'user', content: 'finish me' }] }),
    });
    await waitFor(() => fake.callCount() === 1, 5000, 'the upstream to receive the request').catch((err: Error) => {
      throw new Error(`${err.message}\ngateway stdout:\n${run.stdout()}\nstderr:\n${run.stderr()}`);
    });
    const killedAt = Date.now();
    run.child.kill('SIGTERM');
    const res = await inflight;
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]?.message.content, 'finish me');
    const { code, signal } = await withTimeout(run.exit, 10_000, 'the gateway to exit');
    const shutdownMs = Date.now() - killedAt;
    fake.setLatency(0);
    assert.equal(signal, null);
    // The in-flight request's keep-alive connection must not hold the exit until the 10 s grace timeout.
    assert.ok(shutdownMs < 5000, `exit took ${shutdownMs} ms after SIGTERM`);
    assert.equal(code, 0, run.stderr());
    assert.ok(logLines(run.stdout()).some((l) => l.msg === 'shutting down'));

    const sqlite = new Database(db, { readonly: true });
    try {
      const row = sqlite.prepare('SELECT COUNT(*) AS n, SUM(total_tokens) AS t FROM usage_records').get() as { n: number; t: number };
      assert.equal(row.n, 1, 'the in-flight request was recorded before exit');
      assert.ok(row.t > 0);
    } finally {
      sqlite.close();
    }
  });

  it('on SIGTERM cuts a stream that outlives the grace period with an error event, and keeps its usage record', async () => {
    const config = join(dir, 'cut.yaml');
    const db = join(dir, 'cut.db');
    writeFileSync(config, `storage: { type: sqlite, sqlite: { path: ${db} } }\nproviders:\n${openaiProvider('up', fake.url, ['gpt-x'])}`);
    const run = runCli(['--config', config, '--port', '0'], dir, { SHUTDOWN_GRACE_SECONDS: '1' });
    running.push(run.child);
    const url = await listeningUrl(run);

    fake.reset();
    const release = fake.holdStreamNext();
    try {
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-floodgate-user-path': '/team/long' },
        body: JSON.stringify({ model: 'up/gpt-x', stream: true, messages: [{ role: 'user', content: 'a stream that never ends' }] }),
      });
      assert.equal(res.status, 200);
      const reader = res.body!.getReader();
      const first = await reader.read();
      assert.match(new TextDecoder().decode(first.value), /^data: /);

      run.child.kill('SIGTERM');
      let rest = '';
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) rest += new TextDecoder().decode(chunk.value);
      const events = rest.split('\n\n').filter((e) => e.startsWith('data: '));
      const last = JSON.parse(events.at(-1)!.slice('data: '.length)) as { error: { type: string; code: string; message: string } };
      assert.equal(last.error.code, 'gateway_shutdown', rest);
      assert.match(last.error.message, /shutting down/);

      const { code } = await withTimeout(run.exit, 10_000, 'the gateway to exit');
      assert.equal(code, 0, run.stderr());
      assert.ok(logLines(run.stdout()).some((l) => /cutting them/.test(String(l.msg))), run.stdout());
    } finally {
      release();
    }

    const sqlite = new Database(db, { readonly: true });
    try {
      const rows = sqlite.prepare('SELECT user_path, endpoint, status FROM usage_records').all();
      assert.deepEqual(rows, [{ user_path: '/team/long', endpoint: 'chat', status: 503 }], 'the cut stream was recorded before storage closed');
    } finally {
      sqlite.close();
    }
  });

  it('with no config at all, serves the built-in mock provider and says so in the log', async () => {
    const empty = mkdtempSync(join(dir, 'empty-'));
    const run = runCli(['--port', '0'], empty, { SQLITE_PATH: join(empty, 'x.db') });
    running.push(run.child);
    const url = await listeningUrl(run);
    const lines = logLines(run.stdout());
    assert.ok(lines.some((l) => /mock/i.test(String(l.msg))), run.stdout());
    assert.ok(lines.some((l) => /MASTER_KEY/.test(String(l.msg)) && l.level === 40), 'warns that routes are open');
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'mock/mock-1', messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(res.status, 200);
    run.child.kill('SIGINT');
    assert.equal((await withTimeout(run.exit, 10_000, 'exit')).code, 0);
  });

  it('says at start-up where its data and counters are, what it serves and how many rules and budgets it enforces, without passwords', async () => {
    const db = await createTestDatabase();
    const prefix = testPrefix();
    try {
      const withPassword = new URL(db.url);
      withPassword.password = 'pg-secret-pw';
      const config = join(dir, 'summary.yaml');
      writeFileSync(config, `providers:\n${openaiProvider('up', fake.url, ['gpt-x'])}rate_limits:
  backend: redis
  redis: { url: "${REDIS_URL}", prefix: "${prefix}", on_error: deny }
  user_paths: [ { path: /team, limits: [ { period: minute, max_requests: 5 }, { period: concurrent, max_requests: 2 } ] } ]
  providers: [ { name: up, limits: [ { period: hour, max_tokens: 1000 } ] } ]
budgets:
  user_paths: [ { path: /team, limits: [ { period: day, max_usd: 5 } ] } ]
`);
      const run = runCli(['--config', config, '--port', '0'], dir, { STORAGE_TYPE: 'postgres', POSTGRES_URL: withPassword.toString() });
      running.push(run.child);
      await listeningUrl(run);
      const line = logLines(run.stdout()).find((l) => l.msg === 'floodgate listening')!;
      const { hostname, port, pathname } = new URL(db.url);
      assert.deepEqual(line.storage, { type: 'postgres', server: `postgres://${hostname}:${port}${pathname}` });
      const redis = new URL(REDIS_URL);
      assert.deepEqual(line.counters, { backend: 'redis', server: `redis://${redis.host}`, prefix, on_error: 'deny' });
      assert.deepEqual(line.providers, [{ name: 'up', type: 'openai' }]);
      assert.equal(line.rate_limit_rules, 3);
      assert.equal(line.budgets, 1);
      assert.equal(line.version, JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version);
      assert.ok(!run.stdout().includes('pg-secret-pw') && !run.stderr().includes('pg-secret-pw'), 'no password in the log');
      run.child.kill('SIGTERM');
      assert.equal((await withTimeout(run.exit, 10_000, 'exit')).code, 0, run.stderr());
    } finally {
      await db.drop();
      await dropPrefix(prefix);
    }
  });

  it('HOST=0.0.0.0 without MASTER_KEY refuses to start, naming HOST and MASTER_KEY', async () => {
    const run = runCli(['--port', '0'], dir, { HOST: '0.0.0.0', SQLITE_PATH: join(dir, 'host.db') });
    running.push(run.child);
    const { code } = await withTimeout(run.exit, 10_000, 'exit');
    assert.notEqual(code, 0);
    const all = run.stderr() + run.stdout();
    assert.match(all, /HOST/);
    assert.match(all, /MASTER_KEY/);
    assert.ok(!logLines(run.stdout()).some((l) => l.msg === 'floodgate listening'));
  });

  it('check-config on a file with two errors prints both and exits non-zero', async () => {
    const file = join(dir, 'bad.yaml');
    writeFileSync(file, 'server:\n  port: not-a-port\nproviders:\n  x: { type: openai, base_url: http://127.0.0.1:1/v1, frobnicate: true }\n');
    const run = runCli(['check-config', file], dir);
    const { code } = await withTimeout(run.exit, 10_000, 'exit');
    assert.notEqual(code, 0);
    const out = run.stderr() + run.stdout();
    assert.match(out, /server\.port/);
    assert.match(out, /providers\.x\.frobnicate/);
  });

  it('check-config reports what start-up refuses (a public host without a master key), every unset variable, and schema errors at file:line:column', async () => {
    const file = join(dir, 'public.yaml');
    writeFileSync(file, 'server:\n  host: 0.0.0.0\n  master_key: ${MASTER_KEY}\n  prot: 8080\nproviders:\n  up: { type: openai, base_url: "http://127.0.0.1:9/v1", api_key: "${UP_KEY}" }\n');
    const check = runCli(['check-config', 'public.yaml'], dir);
    assert.equal((await withTimeout(check.exit, 10_000, 'exit')).code, 1);
    assert.deepEqual(check.stderr().trimEnd().split('\n'), [
      'public.yaml: 2 errors, 1 warning',
      'public.yaml:4:3: server.prot: unknown key (did you mean "port"?)',
      'public.yaml:3:15: server.master_key: refusing to listen on non-loopback HOST 0.0.0.0 without MASTER_KEY: set MASTER_KEY, or HOST=127.0.0.1 (${MASTER_KEY} is not set)',
      'warning: public.yaml:6:67: providers.up.api_key: ${UP_KEY} is not set; the key counts as absent',
    ]);

    // Start-up refuses the same file, once its other mistake is gone, with the same line.
    writeFileSync(file, 'server:\n  host: 0.0.0.0\n  master_key: ${MASTER_KEY}\n');
    const start = runCli(['--config', 'public.yaml', '--port', '0'], dir, { SQLITE_PATH: join(dir, 'public.db') });
    running.push(start.child);
    assert.equal((await withTimeout(start.exit, 10_000, 'exit')).code, 1);
    assert.match(start.stderr(), /public\.yaml:3:15: server\.master_key: refusing to listen on non-loopback HOST 0\.0\.0\.0 without MASTER_KEY/);
  });

  it('check-config on a good file exits 0', async () => {
    const file = join(dir, 'good.yaml');
    writeFileSync(file, `providers:\n${openaiProvider('up', 'http://127.0.0.1:9', ['gpt-x'])}`);
    const run = runCli(['check-config', file], dir);
    const { code } = await withTimeout(run.exit, 10_000, 'exit');
    assert.equal(code, 0, run.stderr());
  });

  it('invalid YAML reports line:column (check-config and at start-up)', async () => {
    const file = join(dir, 'broken.yaml');
    writeFileSync(file, 'server:\n  port: 8080\nproviders:\n  up: { type: openai\n  other: [\n');
    const check = runCli(['check-config', file], dir);
    assert.notEqual((await withTimeout(check.exit, 10_000, 'exit')).code, 0);
    assert.match(check.stderr() + check.stdout(), /:\d+:\d+/);

    const start = runCli(['--config', file, '--port', '0'], dir, { SQLITE_PATH: join(dir, 'broken.db') });
    running.push(start.child);
    assert.notEqual((await withTimeout(start.exit, 10_000, 'exit')).code, 0);
    assert.match(start.stderr(), /broken\.yaml:\d+:\d+/);
  });

  it('an invalid configuration aborts start-up with every error named', async () => {
    const file = join(dir, 'bad-start.yaml');
    writeFileSync(file, 'server:\n  bogus: 1\nusage:\n  enabled: maybe\n');
    const run = runCli(['--config', file, '--port', '0'], dir, { SQLITE_PATH: join(dir, 'bad-start.db') });
    running.push(run.child);
    assert.notEqual((await withTimeout(run.exit, 10_000, 'exit')).code, 0);
    assert.match(run.stderr(), /server\.bogus/);
    assert.match(run.stderr(), /usage\.enabled/);
  });
});
