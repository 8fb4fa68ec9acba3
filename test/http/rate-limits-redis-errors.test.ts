/**
 * A Redis the gateway cannot use, said plainly (CONTRACT §7): a wrong or missing password, a
 * `rediss://` URL pointed at a plain server and a database the server does not have are named at
 * start-up and in `/health`'s degraded reason, instead of "Connection is closed.", a timeout or a
 * silent database 0. Gateway processes started as a user starts them, on a redis-server of the
 * test's own that requires a password.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { runCli, withTimeout } from '../support/cli.ts';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { chat, USER_PATH_HEADER } from '../support/rate-limits.ts';
import { ownRedis, testPrefix, type OwnRedis } from '../support/redis.ts';
import { startReplica, type Replica } from '../support/replicas.ts';

const PASSWORD = 's3cret-pass';

/** Polls `check` until it holds; fails after `ms`. */
async function until(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await sleep(50);
  }
}

async function health(replica: Replica): Promise<unknown> {
  const res = await replica.request('GET', '/health');
  assert.equal(res.status, 200);
  return res.json();
}

/**
 * The gateway's log line that says it runs degraded. Its stdout and its HTTP answers reach this
 * process on different pipes, so the line may arrive after the /health answer that follows it.
 */
async function degradedLine(replica: Replica): Promise<string> {
  const find = () => replica.logs().find((l) => String(l.msg).startsWith('rate-limit counters: Redis unreachable'));
  await until(async () => find() !== undefined, 5000, 'the degraded log line');
  return String(find()?.msg);
}

describe('a Redis the gateway cannot use, named', () => {
  let redis: OwnRedis;
  let upstream: FakeUpstream;
  const running: Replica[] = [];

  const yamlFor = (url: string): string => `providers:
  up: { type: openai, base_url: ${upstream.url}/v1, api_key: k, models: [gpt-x] }
rate_limits:
  backend: redis
  redis: { url: "${url}", prefix: "${testPrefix()}", timeout_ms: 200 }
  user_paths: [ { path: /capped, limits: [ { period: hour, max_requests: 4 } ] } ]
`;
  const start = async (url: string): Promise<Replica> => {
    const replica = await startReplica(yamlFor(url), {});
    running.push(replica);
    return replica;
  };

  before(async () => {
    redis = await ownRedis({ password: PASSWORD });
    upstream = await startFakeUpstream({ models: ['gpt-x'] });
  });
  after(async () => {
    await Promise.all(running.map((r) => r.stop()));
    await upstream.close();
    await redis.stop();
  });

  it('the right password: healthy, counting in Redis', async () => {
    const gw = await start(redis.url);
    assert.deepEqual(await health(gw), { status: 'ok' });
    const res = await gw.request('POST', '/v1/chat/completions', { body: chat('up/gpt-x'), headers: { [USER_PATH_HEADER]: '/capped' } });
    assert.equal(res.headers.get('x-ratelimit-remaining-requests'), '3');
  });

  it('a wrong password, or none: "authentication failed", at start-up and in /health, and the gateway serves', async () => {
    for (const url of [`redis://:wrong-pass@127.0.0.1:${redis.port}`, `redis://127.0.0.1:${redis.port}`]) {
      const gw = await start(url);
      assert.deepEqual(await health(gw), { status: 'degraded', rate_limits: 'redis unreachable: authentication failed' }, url);
      const line = await degradedLine(gw);
      assert.match(line, /^rate-limit counters: Redis unreachable \(authentication failed: (WRONGPASS|NOAUTH) /, url);
      assert.equal(line.includes(PASSWORD), false);
      const res = await gw.request('POST', '/v1/chat/completions', { body: chat('up/gpt-x'), headers: { [USER_PATH_HEADER]: '/capped' } });
      assert.equal(res.status, 200, res.text);
    }
  });

  it('rediss:// against a plain server: "TLS handshake failed", at start-up and in /health', async () => {
    const gw = await start(`rediss://:${PASSWORD}@127.0.0.1:${redis.port}`);
    assert.deepEqual(await health(gw), { status: 'degraded', rate_limits: 'redis unreachable: TLS handshake failed' });
    assert.match(await degradedLine(gw), /^rate-limit counters: Redis unreachable \(TLS handshake failed: the server answers plain Redis commands .*use a redis:\/\/ URL/);
    // It stays named while the gateway keeps trying.
    await sleep(2500);
    assert.deepEqual(await health(gw), { status: 'degraded', rate_limits: 'redis unreachable: TLS handshake failed' });
  });

  it('a server that is simply not there stays "redis unreachable"', async () => {
    const gone = await ownRedis();
    await gone.stop();
    const gw = await start(gone.url);
    assert.deepEqual(await health(gw), { status: 'degraded', rate_limits: 'redis unreachable' });
  });

  it('a server restarted without the database: degraded, naming it, never counting in database 0, until it has it again', async () => {
    const own = await ownRedis();
    try {
      const gw = await start(`${own.url}/3`);
      const send = () => gw.request('POST', '/v1/chat/completions', { body: chat('up/gpt-x'), headers: { [USER_PATH_HEADER]: '/capped' } });
      assert.equal((await send()).headers.get('x-ratelimit-remaining-requests'), '3');

      await own.stop();
      await own.start(['--databases', '2']);
      const lost = { status: 'degraded', rate_limits: 'redis unreachable: database 3 does not exist' };
      await until(async () => JSON.stringify(await health(gw)) === JSON.stringify(lost), 10_000, 'the lost database named in /health');
      assert.match(await degradedLine(gw), /^rate-limit counters: Redis unreachable \(database 3 does not exist: ERR DB index is out of range/);
      assert.equal((await send()).status, 200, 'served meanwhile (on_error: local)');
      await sleep(1500);
      assert.deepEqual(await health(gw), lost, 'the probe does not take database 0 for the real one');
      const zero = new Redis(own.url, { lazyConnect: true, protocol: 2 });
      try {
        await zero.connect();
        assert.equal(await zero.dbsize(), 0, 'nothing was counted in database 0');
      } finally {
        zero.disconnect();
      }

      await own.stop();
      await own.start();
      await until(async () => JSON.stringify(await health(gw)) === JSON.stringify({ status: 'ok' }), 10_000, 'healthy again');
      assert.equal((await send()).headers.get('x-ratelimit-remaining-requests'), '3', 'counting in database 3 again (a restart without persistence forgot the first count)');
    } finally {
      await own.stop();
    }
  });

  it('a database the server does not have: start-up fails, naming it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-redis-db-'));
    try {
      writeFileSync(join(dir, 'floodgate.yaml'), yamlFor(`redis://:${PASSWORD}@127.0.0.1:${redis.port}/99`));
      const run = runCli(['--config', join(dir, 'floodgate.yaml')], dir, { PORT: '0' });
      try {
        const exit = await withTimeout(run.exit, 15_000, 'the gateway to exit');
        assert.equal(exit.code, 1, run.stdout());
        assert.match(run.stderr(), /^floodgate: rate_limits\.redis\.url \(REDIS_URL\) selects database 99, which the Redis server at 127\.0\.0\.1:\d+ does not have \(ERR DB index is out of range\)/);
        assert.equal(run.stdout().includes('floodgate listening'), false);
      } finally {
        if (run.child.exitCode === null) run.child.kill('SIGKILL');
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
