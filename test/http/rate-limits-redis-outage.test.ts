/**
 * Redis stopped, and hung, under running gateways (CONTRACT §7): one gateway process per
 * `rate_limits.redis.on_error` mode, on a redis-server of the test's own (a free port, no
 * persistence), so the shared one stays up. No request waits for the dead Redis, none crashes a
 * gateway, `/health` says degraded, the log says when it degrades and when it recovers, and the
 * shared counters come back on their own.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TestResponse } from '../support/gateway.ts';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { assertRateLimited, chat, USER_PATH_HEADER } from '../support/rate-limits.ts';
import { eventually } from '../support/processes.ts';
import { ownRedis, testPrefix, type OwnRedis } from '../support/redis.ts';
import { startReplica, type Replica } from '../support/replicas.ts';

const MODES = ['local', 'allow', 'deny'] as const;
type Mode = (typeof MODES)[number];

const DEGRADED = { status: 'degraded', rate_limits: 'redis unreachable' };

function chatOn(replica: Replica, userPath: string): Promise<TestResponse> {
  return replica.request('POST', '/v1/chat/completions', { body: chat('up/gpt-x'), headers: { [USER_PATH_HEADER]: userPath } });
}

async function health(replica: Replica): Promise<unknown> {
  const res = await replica.request('GET', '/health');
  assert.equal(res.status, 200);
  return res.json();
}

async function statuses(replica: Replica, userPath: string, count: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < count; i++) out.push((await chatOn(replica, userPath)).status);
  return out;
}

function logged(replica: Replica, fragment: string): number {
  return replica.logs().filter((line) => String(line.msg).includes(fragment)).length;
}

describe('gateways whose Redis stops mid-traffic', () => {
  let redis: OwnRedis;
  let upstream: FakeUpstream;
  const gateways = new Map<Mode, Replica>();
  // Each gateway counts under a prefix of its own: the modes do not share counts.
  const yamlFor = (mode: Mode): string => `providers:
  up: { type: openai, base_url: ${upstream.url}/v1, api_key: k, models: [gpt-x] }
rate_limits:
  backend: redis
  redis: { url: "${redis.url}", prefix: "${testPrefix()}", timeout_ms: 200, on_error: ${mode} }
  user_paths: [ { path: /capped, limits: [ { period: hour, max_requests: 4 } ] } ]
`;

  before(async () => {
    redis = await ownRedis();
    upstream = await startFakeUpstream({ models: ['gpt-x'] });
    await Promise.all(MODES.map(async (mode) => gateways.set(mode, await startReplica(yamlFor(mode), {}))));
  });

  after(async () => {
    await Promise.all([...gateways.values()].map((g) => g.stop()));
    await upstream.close();
    await redis.stop();
  });

  it('behave as on_error says while Redis is down, and go back to the shared counters when it returns', async () => {
    for (const gateway of gateways.values()) {
      assert.deepEqual(await health(gateway), { status: 'ok' });
      const first = await chatOn(gateway, '/capped');
      assert.equal(first.status, 200);
      assert.equal(first.headers.get('x-ratelimit-remaining-requests'), '3');
    }

    await redis.stop();

    // local: a fresh count in this process, with the same cap, messages and headers.
    const local = gateways.get('local')!;
    assert.deepEqual(await statuses(local, '/capped', 4), [200, 200, 200, 200]);
    const refused = await chatOn(local, '/capped');
    assertRateLimited(refused, 'rate limit exceeded for /capped: hour request limit of 4 reached');
    assert.equal(refused.headers.get('x-ratelimit-limit-requests'), '4');

    // allow: admitted without counting (so without x-ratelimit headers), past the cap.
    const allow = gateways.get('allow')!;
    for (let i = 0; i < 6; i++) {
      const res = await chatOn(allow, '/capped');
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-ratelimit-limit-requests'), null);
    }

    // deny: a 503 for every request a rule governs; requests no rule governs go through.
    const deny = gateways.get('deny')!;
    const denied = await chatOn(deny, '/capped');
    assert.equal(denied.status, 503, denied.text);
    assert.deepEqual(denied.json(), {
      error: { type: 'provider_error', message: 'the rate-limit counters (Redis) cannot be reached; try again shortly', param: null, code: 'rate_limits_unavailable' },
    });
    assert.equal((await chatOn(deny, '/free')).status, 200);

    for (const gateway of gateways.values()) {
      assert.deepEqual(await health(gateway), DEGRADED);
      assert.equal(logged(gateway, 'rate-limit counters: Redis unreachable'), 1, 'one log line when degrading');
      assert.equal(gateway.run.child.exitCode, null, 'the gateway is still running');
    }

    // A gateway started while Redis is down starts degraded, and serves.
    const late = await startReplica(yamlFor('local'), {});
    try {
      assert.deepEqual(await health(late), DEGRADED);
      assert.equal((await chatOn(late, '/capped')).status, 200);

      await redis.start();
      while (JSON.stringify(await health(late)) !== JSON.stringify({ status: 'ok' })) await sleep(50);
      assert.equal((await chatOn(late, '/capped')).headers.get('x-ratelimit-remaining-requests'), '3');
    } finally {
      await late.stop();
    }
    for (const gateway of gateways.values()) {
      while (JSON.stringify(await health(gateway)) !== JSON.stringify({ status: 'ok' })) await sleep(50);
      // The log line comes on stdout, which may reach this process after the /health answer.
      await eventually(() => logged(gateway, 'Redis answers again; back to the shared counters') > 0, 5000);
      assert.equal(logged(gateway, 'Redis answers again; back to the shared counters'), 1, 'one log line when recovering');
      // This Redis kept nothing: the shared count starts again from the first request.
      const again = await chatOn(gateway, '/capped');
      assert.equal(again.status, 200);
      assert.equal(again.headers.get('x-ratelimit-remaining-requests'), '3');
    }
  });

  it('answer without waiting for a Redis that hangs', async () => {
    redis.pause();
    try {
      // Answered while Redis still answers nothing: by the fallback, after at most timeout_ms.
      assert.equal((await chatOn(gateways.get('local')!, '/capped')).status, 200);
      assert.equal((await chatOn(gateways.get('allow')!, '/capped')).status, 200);
      assert.equal((await chatOn(gateways.get('deny')!, '/capped')).status, 503);
      for (const gateway of gateways.values()) assert.deepEqual(await health(gateway), DEGRADED);
    } finally {
      redis.resume();
    }
    for (const gateway of gateways.values()) {
      while (JSON.stringify(await health(gateway)) !== JSON.stringify({ status: 'ok' })) await sleep(50);
      assert.equal((await chatOn(gateway, '/capped')).status, 200);
    }
  });
});
