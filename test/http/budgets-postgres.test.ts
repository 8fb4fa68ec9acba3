/**
 * Two gateways sharing one PostgreSQL database: each sees the other's spend and budgets within
 * the refresh interval (`budgets.refresh_seconds`, 1 s here), as docs/budgets.md states.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { assertOpenAiError, openaiProvider } from '../support/e2e.ts';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';
import { eventually } from '../support/rate-limits.ts';

const MASTER = 'budget-pg-master';
const as = (userPath: string) => ({ authorization: `Bearer ${MASTER}`, 'x-floodgate-user-path': userPath });
const chat = { model: 'up/gpt-x', messages: [{ role: 'user', content: 'hi' }] };
/** Well above the 1 s refresh interval plus the 1 s usage flush: only a broken refresh misses it. */
const WITHIN_MS = 10_000;

describe('budgets: two gateways on one PostgreSQL', () => {
  let up: FakeUpstream;
  let db: TestDatabase;
  let a: TestGateway;
  let b: TestGateway;
  before(async () => {
    up = await startFakeUpstream({ name: 'up' });
    db = await createTestDatabase();
    const options = {
      yaml: `providers:\n${openaiProvider('up', up.url, ['gpt-x'])}pricing:\n  up/gpt-x: { input_per_mtok: 1000, output_per_mtok: 1000 }\n`,
      env: { MASTER_KEY: MASTER, STORAGE_TYPE: 'postgres', POSTGRES_URL: db.url, BUDGETS_REFRESH_SECONDS: '1', SET_BUDGET_SHARED: 'month=0.004' },
    };
    a = await startTestGateway(options);
    b = await startTestGateway(options);
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await up?.close();
    await db?.drop();
  });

  const send = (gw: TestGateway, userPath: string) => gw.request('POST', '/v1/chat/completions', { body: chat, headers: as(userPath) });
  const budgetsOf = async (gw: TestGateway, userPath: string) => (await gw.request('GET', '/v1/usage', { headers: as(userPath) })).json().budgets;

  it('spend through one gateway is enforced by the other', async () => {
    // $0.002 a request: two reach the budget on gateway A.
    assert.equal((await send(a, '/shared/x')).status, 200);
    assert.equal((await send(a, '/shared/y')).status, 200);
    const refused = assertOpenAiError(await send(a, '/shared'), 429, 'rate_limit_error');
    assert.equal(refused.message, 'budget exceeded for /shared: month budget of $0.004 reached');

    // B admits its own requests (each overshooting) until its refresh has read A's spend.
    await eventually(async () => (await send(b, '/shared/z')).status === 429, WITHIN_MS, 'gateway B to refuse');
    const calls = up.calls.length;
    assert.equal(assertOpenAiError(await send(b, '/shared'), 429, 'rate_limit_error').message, refused.message);
    assert.equal(up.calls.length, calls, 'nothing more reaches the upstream');
    // Both end up with the same total: every admitted request at $0.002.
    const total = Math.round(calls * 0.002 * 1e9) / 1e9;
    for (const gw of [a, b]) {
      await eventually(async () => (await budgetsOf(gw, '/shared'))[0].spent_usd === total, WITHIN_MS, `${gw === a ? 'A' : 'B'} to show $${total} spent`);
    }
  });

  it('a budget written through one gateway\'s admin API is enforced by the other', async () => {
    const put = await a.request('PUT', '/admin/budgets', { body: { user_path: '/late', limit_key: { period: 'day' }, max_usd: 0.002 }, headers: as('/') });
    assert.equal(put.status, 200, put.text);
    await eventually(async () => (await budgetsOf(b, '/late')).length === 1, WITHIN_MS, 'gateway B to know the budget');
    assert.equal((await send(b, '/late')).status, 200);
    assertOpenAiError(await send(b, '/late'), 429, 'rate_limit_error');
    const deleted = await a.request('DELETE', '/admin/budgets', { body: { user_path: '/late', limit_key: { period: 'day' } }, headers: as('/') });
    assert.equal(deleted.status, 200);
    await eventually(async () => (await send(b, '/late')).status === 200, WITHIN_MS, 'gateway B to drop the budget');
  });
});
