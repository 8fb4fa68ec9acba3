/**
 * `GET /ready` apart from `GET /health` (CONTRACT §14): readiness follows storage (PostgreSQL
 * behind a proxy the test cuts and hangs) and Redis (a server of the test's own, stopped), while
 * liveness stays 200 throughout.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestGateway, type TestGateway, type TestResponse } from '../support/gateway.ts';
import { eventually } from '../support/processes.ts';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';
import { ownRedis, testPrefix, type OwnRedis } from '../support/redis.ts';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.ts';

async function waitForReady(gw: TestGateway, expected: { status: number; body: Record<string, unknown> }, what: string): Promise<void> {
  let last: TestResponse | undefined;
  const reached = await eventually(async () => {
    last = await gw.request('GET', '/ready');
    return last.status === expected.status && JSON.stringify(last.json()) === JSON.stringify(expected.body);
  }, 10_000);
  assert.ok(reached, `${what}: last answer ${last?.status} ${last?.text}`);
}

describe('GET /ready and GET /health', () => {
  it('with SQLite: ready, alive, and neither needs a key', async () => {
    const gw = await startTestGateway({ env: { MASTER_KEY: 'sk-master-ready' } });
    try {
      const ready = await gw.request('GET', '/ready');
      assert.equal(ready.status, 200);
      assert.deepEqual(ready.json(), { status: 'ready' });
      const health = await gw.request('GET', '/health');
      assert.equal(health.status, 200);
      assert.deepEqual(health.json(), { status: 'ok' });
    } finally {
      await gw.close();
    }
  });

  describe('with PostgreSQL', () => {
    let db: TestDatabase;
    let proxy: TcpProxy;
    let gw: TestGateway;

    before(async () => {
      db = await createTestDatabase();
      const url = new URL(db.url);
      proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port || 5432) });
      url.host = `127.0.0.1:${proxy.port}`;
      gw = await startTestGateway({ env: { STORAGE_TYPE: 'postgres', POSTGRES_URL: url.toString() } });
    });
    after(async () => {
      await gw?.close();
      await proxy?.close();
      await db?.drop();
    });

    it('is unavailable while PostgreSQL refuses connections, alive all along, and ready again when it is back', async () => {
      await waitForReady(gw, { status: 200, body: { status: 'ready' } }, 'ready at start');
      await proxy.cut();
      let last: TestResponse | undefined;
      assert.ok(await eventually(async () => {
        last = await gw.request('GET', '/ready');
        return last.status === 503;
      }, 10_000), `unavailable once storage is cut: ${last?.text}`);
      assert.equal(last!.json().status, 'unavailable');
      assert.match(last!.json().reason, /^storage unreachable: /);
      assert.deepEqual(Object.keys(last!.json()).sort(), ['reason', 'status']);
      const health = await gw.request('GET', '/health');
      assert.equal(health.status, 200);
      assert.deepEqual(health.json(), { status: 'ok' });

      await proxy.restore();
      await waitForReady(gw, { status: 200, body: { status: 'ready' } }, 'ready once storage is back');
    });

    it('is unavailable while PostgreSQL accepts connections and answers nothing, with the time it waited', async () => {
      await proxy.hang();
      let last: TestResponse | undefined;
      assert.ok(await eventually(async () => {
        last = await gw.request('GET', '/ready');
        return last.status === 503;
      }, 10_000), `unavailable while storage hangs: ${last?.text}`);
      assert.deepEqual(last!.json(), { status: 'unavailable', reason: 'storage unreachable: no answer within 1000 ms' });
      assert.equal((await gw.request('GET', '/health')).status, 200);

      await proxy.restore();
      await waitForReady(gw, { status: 200, body: { status: 'ready' } }, 'ready once storage answers again');
    });
  });

  describe('with the counters in a Redis that stops', () => {
    let redis: OwnRedis;
    const gateways: TestGateway[] = [];
    const start = async (onError: string): Promise<TestGateway> => {
      const gw = await startTestGateway({
        yaml: `rate_limits:\n  backend: redis\n  redis: { url: "${redis.url}", prefix: "${testPrefix()}", timeout_ms: 200, on_error: ${onError} }\n`,
      });
      gateways.push(gw);
      return gw;
    };

    before(async () => {
      redis = await ownRedis();
    });
    after(async () => {
      await Promise.all(gateways.map((gw) => gw.close()));
      await redis?.stop();
    });

    it('on_error deny: unavailable while Redis is down (noticed without any request), degraded but alive, ready when it returns; on_error local: ready and degraded', async () => {
      const deny = await start('deny');
      const local = await start('local');
      for (const gw of [deny, local]) await waitForReady(gw, { status: 200, body: { status: 'ready' } }, 'ready with Redis up');

      await redis.stop();
      await waitForReady(deny, { status: 503, body: { status: 'unavailable', reason: 'redis unreachable' } }, 'deny: unavailable');
      await waitForReady(local, { status: 200, body: { status: 'ready', degraded: 'redis unreachable' } }, 'local: ready, degraded');
      for (const gw of [deny, local]) {
        const health = await gw.request('GET', '/health');
        assert.equal(health.status, 200);
        assert.deepEqual(health.json(), { status: 'degraded', rate_limits: 'redis unreachable' });
      }

      await redis.start();
      for (const gw of [deny, local]) await waitForReady(gw, { status: 200, body: { status: 'ready' } }, 'ready once Redis is back');
    });
  });
});
