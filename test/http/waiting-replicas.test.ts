/**
 * Waiting for capacity across gateway processes sharing their counters in Redis: a slot released
 * on one replica wakes a request waiting on another, and waiting requests spread over three
 * replicas never push the upstream past the shared cap.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { chat, eventually, USER_PATH_HEADER } from '../support/rate-limits.ts';
import { dropPrefix, testPrefix } from '../support/redis.ts';
import { startReplicas, type Replica } from '../support/replicas.ts';

const CAP = 10;

describe('waiting for capacity across replicas sharing Redis', () => {
  let up: FakeUpstream;
  let prefix: string;
  let replicas: Replica[];

  before(async () => {
    up = await startFakeUpstream({ name: 'up' });
    prefix = testPrefix();
    const yaml = [
      `providers:\n  up: { type: openai, base_url: ${up.url}/v1, api_key: k, models: [gpt-x] }`,
      'rate_limits:',
      '  backend: redis',
      // A loaded machine must not make a replica give up on Redis and count alone (on_error: local).
      '  redis: { timeout_ms: 2000 }',
      `  providers: [ { name: up, limits: [ { period: concurrent, max_requests: ${CAP} } ] } ]`,
      '',
    ].join('\n');
    replicas = await startReplicas(3, yaml, { RATE_LIMITS_REDIS_PREFIX: prefix });
  });

  after(async () => {
    await Promise.all((replicas ?? []).map((replica) => replica.stop()));
    await up.close();
    await dropPrefix(prefix);
  });

  function chatOn(replica: Replica, wait: string, stream = false) {
    return replica.request('POST', '/v1/chat/completions', {
      body: chat('up/gpt-x', 'hi', stream ? { stream: true } : {}),
      headers: { [USER_PATH_HEADER]: '/w', 'x-floodgate-max-wait': wait },
    });
  }

  it('wakes a request waiting on A when B releases a slot, well within its deadline', async () => {
    const [a, b] = replicas as [Replica, Replica];
    up.reset();
    // B takes every slot and holds one of them.
    const releases: Array<() => void> = [];
    const held: Array<Promise<unknown>> = [];
    for (let i = 0; i < CAP; i++) {
      releases.push(up.holdStreamNext());
      held.push(chatOn(b, '0', true));
      await eventually(async () => up.callCount('/v1/chat/completions') === i + 1, 3000, `slot ${i + 1} taken`);
    }
    const started = Date.now();
    const waiting = chatOn(a, '10');
    await eventually(async () => (await a.request('GET', '/admin/queue')).json().waiting === 1, 3000, 'A has a waiter');
    const releasedAt = Date.now();
    releases[0]!();
    const res = await waiting;
    const woke = Date.now() - releasedAt;
    assert.equal(res.status, 200, res.text);
    assert.ok(woke < 900, `woken ${woke} ms after B released the slot (the periodic re-check alone would take up to 1000 ms)`);
    assert.ok(Number(res.headers.get('x-floodgate-queue-wait-ms')) <= Date.now() - started);
    for (const release of releases.slice(1)) release();
    await Promise.all(held);
  });

  it('never lets 200 waiting requests over three replicas put more than the cap in flight upstream', async () => {
    up.reset();
    up.setLatency(50);
    const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => chatOn(replicas[i % 3]!, '30')));
    up.setLatency(0);
    const statuses = answers.map((res) => res.status);
    assert.deepEqual([...new Set(statuses)], [200], `every request was served in time (${statuses.filter((s) => s !== 200).length} were not)`);
    assert.equal(up.callCount('/v1/chat/completions'), 200);
    assert.ok(up.maxConcurrent <= CAP, `at most ${CAP} in flight at the upstream, saw ${up.maxConcurrent}`);
    assert.ok(up.maxConcurrent >= CAP - 2, `the cap was used (${up.maxConcurrent} at once)`);
    await sleep(50);
  });
});
