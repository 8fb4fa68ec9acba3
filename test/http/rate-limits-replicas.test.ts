/**
 * Three gateway processes behind no load balancer but the test itself, sharing their counters
 * in Redis (127.0.0.1:6379, a prefix of their own) and their rules in PostgreSQL (a throwaway
 * database): a cap means the same with one replica or three (CONTRACT §7).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { chat, USER_PATH_HEADER } from '../support/rate-limits.ts';
import { dropPrefix, testPrefix } from '../support/redis.ts';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';
import { startReplica, startReplicas, type Replica } from '../support/replicas.ts';
import type { TestResponse } from '../support/gateway.ts';

/** The contract's bound for a rule written through one replica to be enforced by all. */
const RULE_PROPAGATION_MS = 2000;
const LEASE_SECONDS = 2;

interface RuleRecord {
  user_path: string;
  period_seconds: number;
  max_requests?: number;
  max_tokens?: number;
  requests_used: number;
  tokens_used: number;
  in_flight: number;
}

function chatOn(replica: Replica, userPath: string, content = 'hi'): Promise<TestResponse> {
  return replica.request('POST', '/v1/chat/completions', { body: chat('up/gpt-x', content), headers: { [USER_PATH_HEADER]: userPath } });
}

/** A streamed chat: resolves when the stream has ended. */
function streamOn(replica: Replica, userPath: string): Promise<TestResponse> {
  return replica.request('POST', '/v1/chat/completions', { body: chat('up/gpt-x', 'hi', { stream: true }), headers: { [USER_PATH_HEADER]: userPath } });
}

async function rules(replica: Replica): Promise<RuleRecord[]> {
  const res = await replica.request('GET', '/admin/rate-limits');
  assert.equal(res.status, 200, res.text);
  return res.json().rate_limits as RuleRecord[];
}

async function ruleOn(replica: Replica, userPath: string, periodSeconds: number): Promise<RuleRecord | undefined> {
  return (await rules(replica)).find((r) => r.user_path === userPath && r.period_seconds === periodSeconds);
}

async function putRule(replica: Replica, body: Record<string, unknown>): Promise<void> {
  const res = await replica.request('PUT', '/admin/rate-limits', { body });
  assert.equal(res.status, 200, res.text);
}

/** Waits (at most the contract's 2 s) until every replica lists the rule as `check` wants it. */
async function untilAll(replicas: readonly Replica[], userPath: string, periodSeconds: number, check: (rule: RuleRecord | undefined) => boolean): Promise<void> {
  const deadline = Date.now() + RULE_PROPAGATION_MS;
  for (const replica of replicas) {
    for (;;) {
      if (check(await ruleOn(replica, userPath, periodSeconds))) break;
      assert.ok(Date.now() < deadline, `${replica.url} did not pick up the change to ${userPath} within ${RULE_PROPAGATION_MS} ms`);
      await sleep(20);
    }
  }
}

/** Polls `check` until it holds; fails after `ms`. */
async function until(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await sleep(20);
  }
}

describe('three gateways sharing Redis counters and PostgreSQL rules', () => {
  let upstream: FakeUpstream;
  let database: TestDatabase;
  let prefix: string;
  let replicas: Replica[] = [];
  let yaml: string;
  let env: Record<string, string>;

  before(async () => {
    upstream = await startFakeUpstream({ models: ['gpt-x'] });
    database = await createTestDatabase();
    prefix = testPrefix();
    yaml = `providers:
  up: { type: openai, base_url: ${upstream.url}/v1, api_key: k, models: [gpt-x] }
rate_limits:
  backend: redis
  redis: { prefix: "${prefix}", lease_seconds: ${LEASE_SECONDS} }
`;
    env = { STORAGE_TYPE: 'postgres', POSTGRES_URL: database.url };
    replicas = await startReplicas(3, yaml, env);
  });

  after(async () => {
    await Promise.all((replicas ?? []).map((r) => r.stop()));
    await upstream.close();
    await database.drop();
    await dropPrefix(prefix);
  });

  it('enforce a rule PUT through one of them on all of them within 2 s', async () => {
    const [a, b, c] = replicas as [Replica, Replica, Replica];
    await putRule(a, { user_path: '/put', limit_key: { period: 'hour' }, max_requests: 2 });
    await untilAll([b, c], '/put', 3600, (rule) => rule?.max_requests === 2);
    assert.equal((await chatOn(b, '/put/x')).status, 200);
    assert.equal((await chatOn(c, '/put/y')).status, 200);
    const refused = await chatOn(a, '/put');
    assert.equal(refused.status, 429);
    assert.equal(refused.json().error.message, 'rate limit exceeded for /put: hour request limit of 2 reached');
  });

  it('admit exactly 50 of 200 parallel requests spread over them against a cap of 50', async () => {
    await putRule(replicas[0]!, { user_path: '/burst', limit_key: { period: 'hour' }, max_requests: 50 });
    await untilAll(replicas, '/burst', 3600, (rule) => rule?.max_requests === 50);
    const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => chatOn(replicas[i % 3]!, `/burst/u${i % 7}`)));
    const statuses = answers.map((res) => res.status);
    assert.equal(statuses.filter((s) => s === 200).length, 50);
    assert.equal(statuses.filter((s) => s === 429).length, 150);
    for (const replica of replicas) assert.equal((await ruleOn(replica, '/burst', 3600))?.requests_used, 50);
  });

  it('never let more than 5 requests reach the upstream at once under a concurrency cap of 5', async () => {
    await putRule(replicas[1]!, { user_path: '/slots', limit_key: { period: 'concurrent' }, max_requests: 5 });
    await untilAll(replicas, '/slots', 0, (rule) => rule?.max_requests === 5);
    upstream.reset();
    upstream.setLatency(150);
    try {
      const answers = await Promise.all(Array.from({ length: 60 }, (_, i) => chatOn(replicas[i % 3]!, '/slots')));
      const admitted = answers.filter((res) => res.status === 200).length;
      assert.ok(upstream.maxConcurrent <= 5, `the upstream saw ${upstream.maxConcurrent} requests at once`);
      assert.ok(admitted >= 5, `${admitted} admitted`);
      assert.ok(answers.some((res) => res.status === 429), 'the cap refused some');
    } finally {
      upstream.setLatency(0);
    }
    // Each slot goes back when its response has been sent, which a client may see first.
    await until(async () => (await ruleOn(replicas[2]!, '/slots', 0))?.in_flight === 0, 5000, 'every slot given back');
  });

  it('refuse on one replica the tokens charged on another', async () => {
    const [a, b, c] = replicas as [Replica, Replica, Replica];
    await putRule(c, { user_path: '/tokens', limit_key: { period: 'hour' }, max_tokens: 10 });
    await untilAll(replicas, '/tokens', 3600, (rule) => rule?.max_tokens === 10);
    assert.equal((await chatOn(a, '/tokens', 'x'.repeat(40))).status, 200); // 10 + 10 tokens
    // The charge lands after the answer, in one round trip: wait until the shared counter has it.
    await until(async () => (await ruleOn(b, '/tokens', 3600))?.tokens_used === 20, 5000, 'the token charge in the shared counter');
    for (const replica of [b, c]) {
      const refused = await chatOn(replica, '/tokens');
      assert.equal(refused.status, 429);
      assert.equal(refused.json().error.message, 'rate limit exceeded for /tokens: hour token limit of 10 reached');
      assert.equal(refused.headers.get('x-ratelimit-limit-tokens'), '10');
    }
  });

  it('see a reset, a caps edit and a delete made through any of them', async () => {
    const [a, b, c] = replicas as [Replica, Replica, Replica];
    await putRule(a, { user_path: '/admin', limit_key: { period: 'hour' }, max_requests: 2 });
    await untilAll(replicas, '/admin', 3600, (rule) => rule?.max_requests === 2);
    assert.deepEqual([(await chatOn(a, '/admin')).status, (await chatOn(b, '/admin')).status, (await chatOn(c, '/admin')).status], [200, 200, 429]);

    const reset = await b.request('POST', '/admin/rate-limits/reset-one', { body: { user_path: '/admin', period: 'hour' } });
    assert.equal(reset.status, 200, reset.text);
    assert.deepEqual([(await chatOn(c, '/admin')).status, (await chatOn(a, '/admin')).status, (await chatOn(b, '/admin')).status], [200, 200, 429]);

    // Only the caps change: the counters stay (2 used of now 3).
    await putRule(c, { user_path: '/admin', limit_key: { period: 'hour' }, max_requests: 3 });
    await untilAll(replicas, '/admin', 3600, (rule) => rule?.max_requests === 3);
    assert.deepEqual([(await chatOn(a, '/admin')).status, (await chatOn(b, '/admin')).status], [200, 429]);

    const all = await a.request('POST', '/admin/rate-limits/reset', { body: { confirmation: 'reset' } });
    assert.equal(all.status, 200, all.text);
    for (const replica of replicas) assert.equal((await ruleOn(replica, '/admin', 3600))?.requests_used, 0);

    // A delete clears the counters: the rule written again starts from zero everywhere.
    assert.equal((await chatOn(b, '/admin')).status, 200);
    const deleted = await b.request('DELETE', '/admin/rate-limits', { body: { user_path: '/admin', limit_key: { period: 'hour' } } });
    assert.equal(deleted.status, 200, deleted.text);
    await untilAll(replicas, '/admin', 3600, (rule) => rule === undefined);
    await putRule(c, { user_path: '/admin', limit_key: { period: 'hour' }, max_requests: 3 });
    await untilAll(replicas, '/admin', 3600, (rule) => rule?.max_requests === 3);
    for (const replica of replicas) assert.equal((await ruleOn(replica, '/admin', 3600))?.requests_used, 0);
  });

  it('free the slots of a replica killed with -9 within the lease time, while a live one keeps its own', async () => {
    const doomed = await startReplica(yaml, env);
    const [a, b] = replicas as [Replica, Replica, Replica];
    await putRule(a, { user_path: '/held', limit_key: { period: 'concurrent' }, max_requests: 2 });
    await untilAll([...replicas, doomed], '/held', 0, (rule) => rule?.max_requests === 2);
    // Two streams that stay open until the test lets them finish, each holding its slot.
    const finish = [upstream.holdStreamNext(), upstream.holdStreamNext()];
    const held = [streamOn(doomed, '/held'), streamOn(b, '/held')].map((p) => p.catch(() => undefined));
    try {
      await until(async () => (await ruleOn(a, '/held', 0))?.in_flight === 2, 5000, 'both slots taken');
      assert.equal((await chatOn(a, '/held')).status, 429);
      await doomed.kill();
      // Nothing renews the dead replica's lease any more; the live one's is renewed.
      await until(async () => (await ruleOn(a, '/held', 0))?.in_flight === 1, LEASE_SECONDS * 1000 + 1000, "the dead replica's slot freed within the lease time");
      assert.equal((await ruleOn(b, '/held', 0))?.in_flight, 1, 'the live replica still holds its slot, older than a lease');
      assert.equal((await chatOn(a, '/held')).status, 200);
    } finally {
      for (const release of finish) release();
      await Promise.all(held);
    }
  });
});
