/**
 * Three gateway processes sharing their counters in Redis (a prefix of their own) and their storage
 * in PostgreSQL, with reservations on: token windows and budgets hold the same caps with requests
 * spread over the three as with one gateway, and a replica killed while holding reservations frees
 * them within the lease time.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import OpenAI from 'openai';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startFixedUsageUpstream, type FixedUsageUpstream } from '../support/fixed-usage-upstream.ts';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';
import { dropPrefix, testPrefix } from '../support/redis.ts';
import { startReplicas, type Replica } from '../support/replicas.ts';

const LEASE_SECONDS = 2;
const USER_PATH = 'x-floodgate-user-path';

function client(replica: Replica, userPath: string): OpenAI {
  return new OpenAI({ baseURL: `${replica.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: { [USER_PATH]: userPath } });
}

/** Ten requests sent together, spread over the replicas; answers how many were admitted. */
async function tenOver(replicas: readonly Replica[], userPath: string, model: string): Promise<number> {
  const results = await Promise.allSettled(
    Array.from({ length: 10 }, (_, i) => client(replicas[i % replicas.length]!, userPath).chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 300 })),
  );
  for (const result of results) {
    if (result.status === 'rejected') assert.ok(result.reason instanceof OpenAI.APIError && result.reason.status === 429, String(result.reason));
  }
  return results.filter((r) => r.status === 'fulfilled').length;
}

async function tokenRule(replica: Replica, userPath: string): Promise<{ tokens_used: number; tokens_reserved: number }> {
  const res = await replica.request('GET', '/admin/rate-limits');
  assert.equal(res.status, 200, res.text);
  const found = (res.json().rate_limits as Array<{ user_path: string; tokens_used: number; tokens_reserved: number }>).find((r) => r.user_path === userPath);
  assert.ok(found, `no rule on ${userPath}`);
  return found;
}

async function until(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await sleep(50);
  }
}

describe('reservations: three gateways sharing Redis counters', { timeout: 90_000 }, () => {
  let upstream: FakeUpstream;
  let fixed: FixedUsageUpstream;
  let database: TestDatabase;
  let prefix: string;
  let replicas: Replica[] = [];

  before(async () => {
    upstream = await startFakeUpstream({ models: ['gpt-x'] });
    fixed = await startFixedUsageUpstream();
    // The ten requests of a test are in flight together; each answer uses 280 tokens, 260 of them completion.
    fixed.delayMs = 1000;
    fixed.setUsage({ prompt_tokens: 20, completion_tokens: 260, total_tokens: 280 });
    database = await createTestDatabase();
    prefix = testPrefix();
    const yaml = `providers:
  up: { type: openai, base_url: ${fixed.url}/v1, api_key: k, models: [gpt-x, gpt-y] }
  hold: { type: openai, base_url: ${upstream.url}/v1, api_key: k, models: [gpt-x] }
pricing:
  up/gpt-y: { input_per_mtok: 0, output_per_mtok: 1000 }
  hold/gpt-x: { input_per_mtok: 0, output_per_mtok: 1000 }
rate_limits:
  backend: redis
  redis: { prefix: "${prefix}", lease_seconds: ${LEASE_SECONDS} }
  user_paths:
    - { path: /tokens, limits: [ { period: hour, max_tokens: 1000 } ] }
    - { path: /held, limits: [ { period: hour, max_tokens: 100000 } ] }
budgets:
  user_paths:
    - { path: /dollars, limits: [ { period: day, max_usd: 1 } ] }
    - { path: /shown, limits: [ { period: day, max_usd: 5 } ] }
`;
    // Storage is not re-read during the tests: what holds the budget across replicas is Redis.
    replicas = await startReplicas(3, yaml, { STORAGE_TYPE: 'postgres', POSTGRES_URL: database.url, RATE_LIMITS_RESERVATIONS: 'true', BUDGETS_RESERVATIONS: 'true', BUDGETS_REFRESH_SECONDS: '3600' });
    // Each replica loads its tokenizer on its first count: done here, not in the middle of a test.
    fixed.delayMs = 0;
    for (const replica of replicas) await client(replica, '/warm').chat.completions.create({ model: 'up/gpt-x', messages: [{ role: 'user', content: 'hi' }] });
    fixed.delayMs = 1000;
  });

  after(async () => {
    await Promise.all((replicas ?? []).map((r) => r.stop()));
    await upstream?.close();
    await fixed?.close();
    await database?.drop();
    await dropPrefix(prefix);
  });

  it('a 1,000-token cap admits three of ten requests allowed 300 tokens each, whichever replica they reach', async () => {
    assert.equal(await tenOver(replicas, '/tokens', 'up/gpt-x'), 3);
    await until(async () => (await tokenRule(replicas[2]!, '/tokens')).tokens_reserved === 0, 3000, 'every reservation settled');
    assert.equal((await tokenRule(replicas[1]!, '/tokens')).tokens_used, 3 * 280, 'the window ends within the cap');
  });

  it('a $1 budget admits three of ten requests estimated at $0.30, whichever replica they reach', async () => {
    assert.equal(await tenOver(replicas, '/dollars', 'up/gpt-y'), 3);
    // $0.78 spent: the costs settled in Redis hold every replica before its storage is re-read.
    assert.equal(await tenOver(replicas, '/dollars', 'up/gpt-y'), 0, '$0.30 more would pass $1');
  });

  it("every replica's budget statuses show the dollars reserved by requests running on another", async () => {
    const [a, b] = replicas as [Replica, Replica, Replica];
    const releases = [upstream.holdStreamNext(), upstream.holdStreamNext()];
    // Two streams held on replica a, allowing 100 completion tokens each: $0.10 each.
    const held = [0, 1].map(() =>
      client(a, '/shown').chat.completions.create({ model: 'hold/gpt-x', messages: [{ role: 'user', content: 'hi' }], max_tokens: 100, stream: true }).then(async (stream) => {
        for await (const _ of stream) {
          // drained once released
        }
      }),
    );
    const shownOn = async (replica: Replica): Promise<{ reserved_usd: number; remaining_usd: number }> => {
      const res = await replica.request('GET', '/admin/budgets');
      assert.equal(res.status, 200, res.text);
      return (res.json().budgets as Array<{ user_path: string; reserved_usd: number; remaining_usd: number }>).find((budget) => budget.user_path === '/shown')!;
    };
    try {
      await until(async () => (await shownOn(a)).reserved_usd === 0.2, 5000, 'both streams hold their reservations');
      const onB = await shownOn(b);
      assert.deepEqual([onB.reserved_usd, onB.remaining_usd], [0.2, 4.8], 'replica b holds none of them, and shows them');
      const usage = await b.request('GET', '/v1/usage', { headers: { [USER_PATH]: '/shown' } });
      assert.equal(usage.status, 200, usage.text);
      assert.deepEqual(usage.json().budgets.map((budget: { reserved_usd: number }) => budget.reserved_usd), [0.2]);
    } finally {
      for (const release of releases) release();
      await Promise.all(held);
    }
    await until(async () => (await shownOn(b)).reserved_usd === 0, 5000, 'the streams settled');
  });

  it('a replica killed holding reservations frees them within the lease time', async () => {
    const [doomed, a] = replicas as [Replica, Replica, Replica];
    const release = upstream.holdStreamNext();
    const held = client(doomed, '/held').chat.completions.create({ model: 'hold/gpt-x', messages: [{ role: 'user', content: 'hi' }], max_tokens: 500, stream: true })
      .then(async (stream) => {
        for await (const _ of stream) {
          // drained until the replica dies
        }
      })
      // The replica dies mid-stream: the stream breaks, as expected.
      .catch(() => undefined);
    try {
      await until(async () => (await tokenRule(a, '/held')).tokens_reserved > 500, 5000, 'the stream holds its reservation');
      await doomed.kill();
      replicas = replicas.filter((r) => r !== doomed);
      await until(async () => (await tokenRule(a, '/held')).tokens_reserved === 0, LEASE_SECONDS * 1000 + 1500, "the dead replica's reservation freed within the lease time");
    } finally {
      release();
      await held;
    }
  });
});
