/**
 * Capacity learned from the upstream, shared by gateway processes on one Redis: a 429 one replica
 * got steers the others from their very next request; what any replica learned is listed by all.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { chat, eventually } from '../support/rate-limits.ts';
import { dropPrefix, testPrefix } from '../support/redis.ts';
import { startReplicas, type Replica } from '../support/replicas.ts';

const CHAT = '/v1/chat/completions';

describe('learned capacity across replicas sharing Redis', () => {
  let primary: FakeUpstream;
  let backup: FakeUpstream;
  let prefix: string;
  let replicas: [Replica, Replica] | undefined;

  before(async () => {
    primary = await startFakeUpstream({ name: 'primary' });
    backup = await startFakeUpstream({ name: 'backup' });
    prefix = testPrefix();
    const yaml = [
      'providers:',
      `  primary: { type: openai, base_url: ${primary.url}/v1, api_key: k, models: [m] }`,
      `  backup: { type: openai, base_url: ${backup.url}/v1, api_key: k, models: [m] }`,
      'failover:',
      '  primary/m: [backup/m]',
      'rate_limits:',
      '  backend: redis',
      '',
    ].join('\n');
    replicas = (await startReplicas(2, yaml, { RATE_LIMITS_REDIS_PREFIX: prefix })) as [Replica, Replica];
  });

  after(async () => {
    // A replica that never started (a loaded machine) must not keep the upstreams, and the run, alive.
    await Promise.all((replicas ?? []).map((replica) => replica.stop()));
    await Promise.all([primary?.close(), backup?.close()]);
    await dropPrefix(prefix);
  });

  const chatOn = (replica: Replica) => replica.request('POST', CHAT, { body: chat('primary/m') });

  it('makes B skip the primary on its very next request after A got a 429', async () => {
    const [a, b] = replicas!;
    primary.failNext(1, { status: 429, headers: { 'retry-after': '30' } });
    const onA = await chatOn(a);
    assert.equal(onA.status, 200, onA.text);
    assert.deepEqual([primary.callCount(CHAT), backup.callCount(CHAT)], [1, 1], 'A failed over');
    const onB = await chatOn(b);
    assert.equal(onB.status, 200, onB.text);
    assert.deepEqual([primary.callCount(CHAT), backup.callCount(CHAT)], [1, 2], 'B never called the primary');

    for (const replica of replicas!) {
      const listed = (await replica.request('GET', '/admin/providers')).json().providers;
      assert.deepEqual(listed.map((p: { provider: string; model: string; cause: string; saturated: boolean }) => [p.provider, p.model, p.cause, p.saturated]), [['primary', 'm', 'cooldown', true]]);
    }
    await eventually(async () => a.logs().some((line) => line.msg === 'primary/m enters cooldown: the provider refused (429, or 503 with a retry-after)'), 3000, 'A logs the cooldown');
  });
});
