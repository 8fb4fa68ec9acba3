import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { calcPrice } from '@pydantic/genai-prices';
import WebSocket from 'ws';
import { anthropicProvider, assertAnthropicError, assertOpenAiError, openaiProvider } from '../support/e2e.ts';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startFixedUsageUpstream, type FixedUsageUpstream } from '../support/fixed-usage-upstream.ts';
import { startTestGateway, type TestGateway, type TestResponse } from '../support/gateway.ts';

const MASTER = 'budget-master';
const master = { authorization: `Bearer ${MASTER}` };
const as = (userPath: string) => ({ ...master, 'x-floodgate-user-path': userPath });
const chat = (model = 'up/gpt-x', content = 'hi') => ({ model, messages: [{ role: 'user', content }] });

/** A clock the test moves; the gateway reads it for windows, periods and record times. */
function clockAt(iso: string): { now: () => number; set(iso: string): void } {
  let ms = Date.parse(iso);
  return { now: () => ms, set: (next) => { ms = Date.parse(next); } };
}

/** Pricing `up/gpt-x` at $1000 per million tokens, in and out: a request costs its total tokens in thousandths of a dollar. */
const THOUSANDTH_PER_TOKEN = 'pricing:\n  up/gpt-x: { input_per_mtok: 1000, output_per_mtok: 1000 }\n';

const round = (usd: number): number => Math.round(usd * 1e9) / 1e9;

function assertBudgetRefusal(res: TestResponse, message: string, retryAfterMs: number): void {
  assert.equal(res.status, 429, res.text);
  assert.deepEqual(res.json(), { error: { type: 'rate_limit_error', message, param: null, code: 'budget_exceeded' } });
  assert.equal(res.headers.get('retry-after'), String(Math.ceil(retryAfterMs / 1000)));
  assert.equal(res.headers.get('retry-after-ms'), String(retryAfterMs));
}

/** `/v1/usage` for a caller; `day` (YYYY-MM-DD) selects that day's records (by default, up to the frozen clock's now, exclusive). */
async function usageOf(gw: TestGateway, userPath: string, day?: string): Promise<any> {
  const res = await gw.request('GET', `/v1/usage${day === undefined ? '' : `?from=${day}&to=${day}`}`, { headers: as(userPath) });
  assert.equal(res.status, 200, res.text);
  return res.json();
}

/**
 * For one describe block: a fake upstream `up` serving `gpt-x` (priced at a thousandth of a dollar
 * a token) and `emb`, and a gateway in front of it with the master key. `providers` adds provider
 * entries; `yaml` comes right after the `pricing:` section, so indented lines continue it.
 */
function fixture(options: { providers?: string; yaml?: string; env?: Record<string, string>; now?: () => number }): { readonly up: FakeUpstream; readonly gw: TestGateway } {
  let up: FakeUpstream | undefined;
  let gw: TestGateway | undefined;
  before(async () => {
    up = await startFakeUpstream({ name: 'up' });
    gw = await startTestGateway({
      yaml: `providers:\n${openaiProvider('up', up.url, ['gpt-x', 'emb'])}${options.providers ?? ''}${THOUSANDTH_PER_TOKEN}${options.yaml ?? ''}`,
      env: { MASTER_KEY: MASTER, ...options.env },
      now: options.now,
    });
  });
  after(async () => {
    await gw?.close();
    await up?.close();
  });
  return {
    get up() {
      return up!;
    },
    get gw() {
      return gw!;
    },
  };
}

describe('budgets: a $0.01 day budget', () => {
  const clock = clockAt('2025-03-10T23:00:00.250Z');
  const fx = fixture({ yaml: 'budgets:\n  user_paths: [ { path: /team, limits: [ { period: day, max_usd: 0.01 } ] } ]\n', now: clock.now });

  it('refuses the request after the one that crosses it, with the exact body and Retry-After until the day ends', async () => {
    let spent = 0;
    let admitted = 0;
    for (;;) {
      const res = await fx.gw.request('POST', '/v1/chat/completions', { body: chat(), headers: as(admitted % 2 === 0 ? '/team/a' : '/TEAM/b') });
      if (spent >= 0.01) {
        // 3599.75 s to midnight: Retry-After rounds up, retry-after-ms is exact.
        assertBudgetRefusal(res, 'budget exceeded for /team: day budget of $0.01 reached', 3_599_750);
        break;
      }
      assert.equal(res.status, 200, `spent $${spent} of $0.01 so far: ${res.text}`);
      spent = round(spent + res.json().usage.total_tokens * 0.001);
      admitted++;
    }
    assert.ok(admitted >= 2, 'the budget took several requests to reach');
    assert.equal(fx.up.callCount('/v1/chat/completions'), admitted, 'the refused request never went upstream');
    // Other paths are not governed by /team's budget.
    assert.equal((await fx.gw.request('POST', '/v1/chat/completions', { body: chat(), headers: as('/teams') })).status, 200);
  });

  it('the explain dry run gives the refusal a request gets, with the budgets governing the path', async () => {
    const res = await fx.gw.request('GET', '/admin/rate-limits/explain?model=up/gpt-x&user_path=/team/a', { headers: master });
    assert.equal(res.status, 200, res.text);
    const explained = res.json();
    assert.equal(explained.decision, 'refused');
    assert.equal(explained.target, undefined);
    assert.deepEqual(explained.breach, { scope: 'user_path', subject: '/team', period_label: 'day', retry_after_seconds: 3600, message: 'budget exceeded for /team: day budget of $0.01 reached' });
    assert.deepEqual(explained.budgets.map((b: any) => [b.user_path, b.period_label, b.remaining_usd]), [['/team', 'day', 0]]);
    const other = (await fx.gw.request('GET', '/admin/rate-limits/explain?model=up/gpt-x&user_path=/teams', { headers: master })).json();
    assert.deepEqual([other.decision, other.budgets], ['admitted', []]);
  });

  it('GET /v1/usage shows costs per model and in total, and the budgets governing the caller', async () => {
    const team = await usageOf(fx.gw, '/team', '2025-03-10');
    const spent = round(team.totals.total_tokens * 0.001);
    assert.ok(spent >= 0.01);
    assert.equal(team.totals.cost_usd, spent);
    assert.deepEqual(team.by_model.map((m: any) => [m.provider, m.model, m.cost_usd, m.cached_prompt_tokens]), [['up', 'gpt-x', spent, 0]]);
    assert.deepEqual(team.budgets, [
      {
        user_path: '/team', source: 'config', period_label: 'day', period_seconds: 86400, max_usd: 0.01, spent_usd: spent, remaining_usd: 0,
        period_start: '2025-03-10T00:00:00Z', period_end: '2025-03-11T00:00:00Z', created_at: '2025-03-10T23:00:00Z', updated_at: '2025-03-10T23:00:00Z',
      },
    ]);
    // A caller below /team is governed by it too; a caller beside it is not.
    assert.deepEqual((await usageOf(fx.gw, '/team/a/x')).budgets.map((b: any) => b.user_path), ['/team']);
    assert.deepEqual((await usageOf(fx.gw, '/teams')).budgets, []);
  });

  it('admits again once the day is over', async () => {
    // In the last second of the day: retry in a second.
    clock.set('2025-03-10T23:59:59.600Z');
    const refused = await fx.gw.request('POST', '/v1/chat/completions', { body: chat(), headers: as('/team') });
    assert.equal(refused.status, 429);
    assert.deepEqual([refused.headers.get('retry-after'), refused.headers.get('retry-after-ms')], ['1', '1000']);
    clock.set('2025-03-11T00:00:00.000Z');
    const res = await fx.gw.request('POST', '/v1/chat/completions', { body: chat(), headers: as('/team') });
    assert.equal(res.status, 200, res.text);
    const [budget] = (await usageOf(fx.gw, '/team')).budgets;
    assert.equal(budget.period_start, '2025-03-11T00:00:00Z');
    assert.equal(budget.spent_usd, round(res.json().usage.total_tokens * 0.001));
  });
});

describe('budgets: week and month boundaries', () => {
  // Sunday 30 March 2025; the ISO week began on Monday 24 March.
  const clock = clockAt('2025-03-30T23:30:00.000Z');
  const fx = fixture({ env: { SET_BUDGET_W: 'week=0.004,month=0.006' }, now: clock.now });

  const send = () => fx.gw.request('POST', '/v1/chat/completions', { body: chat(), headers: as('/w') });

  it('a week budget ends on Monday 00:00 UTC, a month budget on the first of the month', async () => {
    // Each request costs $0.002 (2 tokens).
    assert.equal((await send()).status, 200);
    assert.equal((await send()).status, 200);
    assertBudgetRefusal(await send(), 'budget exceeded for /w: week budget of $0.004 reached', 30 * 60_000);

    clock.set('2025-03-31T00:00:00.000Z'); // Monday: a new week, the same month
    assert.equal((await send()).status, 200);
    assertBudgetRefusal(await send(), 'budget exceeded for /w: month budget of $0.006 reached', 86_400_000);
    assert.deepEqual(
      (await usageOf(fx.gw, '/w')).budgets.map((b: any) => [b.period_label, b.period_seconds, b.period_start, b.period_end, b.spent_usd, b.remaining_usd]),
      [
        ['week', 604800, '2025-03-31T00:00:00Z', '2025-04-07T00:00:00Z', 0.002, 0.002],
        ['month', 31 * 86400, '2025-03-01T00:00:00Z', '2025-04-01T00:00:00Z', 0.006, 0],
      ],
    );

    clock.set('2025-04-01T00:00:00.000Z'); // a new month, the same week
    assert.equal((await send()).status, 200);
    assertBudgetRefusal(await send(), 'budget exceeded for /w: week budget of $0.004 reached', 6 * 86_400_000);
    assert.deepEqual(
      (await usageOf(fx.gw, '/w')).budgets.map((b: any) => [b.period_label, b.period_seconds, b.period_start, b.spent_usd]),
      [
        ['week', 604800, '2025-03-31T00:00:00Z', 0.004],
        ['month', 30 * 86400, '2025-04-01T00:00:00Z', 0.002],
      ],
    );
    clock.set('2025-04-07T00:00:00.000Z');
    assert.equal((await send()).status, 200);
  });
});

describe('budgets: every model endpoint is refused once the budget is reached', () => {
  const fx = fixture({
    providers: '  mock: { type: mock }\n',
    yaml: '  mock/mock-1: { input_per_mtok: 1000, output_per_mtok: 1000 }\nrate_limits:\n  user_paths: [ { path: /both, limits: [ { period: minute, max_requests: 1 } ] } ]\n',
    env: { SET_BUDGET_SPENT: 'month=0.000001', SET_BUDGET_BOTH: 'month=0.000001' },
  });
  before(async () => {
    const first = await fx.gw.request('POST', '/v1/chat/completions', { body: chat(), headers: as('/spent') });
    assert.equal(first.status, 200, first.text);
  });

  const MESSAGE = 'budget exceeded for /spent: month budget of $0.000001 reached';

  it('chat, embeddings, messages and passthrough', async () => {
    const calls = fx.up.calls.length;
    for (const [path, body] of [
      ['/v1/chat/completions', chat('mock/mock-1')],
      ['/v1/embeddings', { model: 'up/emb', input: 'x' }],
      ['/p/up/v1/chat/completions', chat('gpt-x')],
    ] as const) {
      const error = assertOpenAiError(await fx.gw.request('POST', path, { body, headers: as('/spent/x') }), 429, 'rate_limit_error');
      assert.equal(error.message, MESSAGE, path);
      assert.equal(error.code, 'budget_exceeded', path);
    }
    const messages = await fx.gw.request('POST', '/v1/messages', { body: { model: 'mock/mock-1', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }, headers: as('/spent') });
    assert.equal(assertAnthropicError(messages, 429, 'rate_limit_error').message, MESSAGE);
    assert.ok(Number(messages.headers.get('retry-after')) >= 1);
    assert.equal(fx.up.calls.length, calls, 'nothing was sent upstream');
  });

  it('batch submission', async () => {
    const form = new FormData();
    form.append('purpose', 'batch');
    form.append('file', new Blob([JSON.stringify({ custom_id: 'a', method: 'POST', url: '/v1/chat/completions', body: chat('mock-1') }) + '\n']), 'in.jsonl');
    const file = await fetch(`${fx.gw.url}/v1/files`, { method: 'POST', body: form, headers: as('/spent') });
    assert.equal(file.status, 200);
    const { id } = (await file.json()) as { id: string };
    const res = await fx.gw.request('POST', '/v1/batches', { body: { input_file_id: id, endpoint: '/v1/chat/completions', completion_window: '24h' }, headers: as('/spent') });
    assert.equal(assertOpenAiError(res, 429, 'rate_limit_error').message, MESSAGE);
  });

  it('realtime sessions, before the upgrade', async () => {
    const refusal = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const ws = new WebSocket(`${fx.gw.url.replace('http', 'ws')}/v1/realtime?model=mock-1`, ['realtime'], { headers: as('/spent') });
      ws.once('open', () => reject(new Error('the session was accepted')));
      ws.once('unexpected-response', (req, res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => {
          req.destroy();
          resolve({ status: res.statusCode ?? 0, body });
        });
      });
      ws.once('error', reject);
    });
    assert.equal(refusal.status, 429);
    assert.equal(JSON.parse(refusal.body).error.code, 'budget_exceeded');
  });

  it('a rate-limit breach is reported before a budget breach', async () => {
    assert.equal((await fx.gw.request('POST', '/v1/chat/completions', { body: chat(), headers: as('/both') })).status, 200);
    const error = assertOpenAiError(await fx.gw.request('POST', '/v1/chat/completions', { body: chat(), headers: as('/both') }), 429, 'rate_limit_error');
    assert.equal(error.code, 'rate_limit_exceeded');
  });
});

describe('budgets: admin API', () => {
  const fx = fixture({ env: { SET_BUDGET_CONFIGURED: 'day=5' }, now: () => Date.parse('2025-05-20T08:00:00.000Z') });
  const admin = (method: string, body?: unknown, key = MASTER) => fx.gw.request(method, '/admin/budgets', { body, headers: { authorization: `Bearer ${key}` } });
  const configured = {
    user_path: '/configured', source: 'config', period_label: 'day', period_seconds: 86400, max_usd: 5, spent_usd: 0, remaining_usd: 5,
    period_start: '2025-05-20T00:00:00Z', period_end: '2025-05-21T00:00:00Z', created_at: '2025-05-20T08:00:00Z', updated_at: '2025-05-20T08:00:00Z',
  };

  it('lists, creates, changes and deletes budgets; a new budget shows what its path already spent', async () => {
    const listed = await admin('GET');
    assert.equal(listed.status, 200);
    assert.deepEqual(listed.json(), { budgets: [configured], server_time: '2025-05-20T08:00:00.000Z' });

    const spentRes = await fx.gw.request('POST', '/v1/chat/completions', { body: chat(), headers: as('/ops/x') });
    const spent = round(spentRes.json().usage.total_tokens * 0.001);
    const created = await admin('PUT', { user_path: 'Ops/', limit_key: { period: 'month' }, max_usd: 200 });
    assert.equal(created.status, 200, created.text);
    const ops = {
      user_path: '/Ops', source: 'manual', period_label: 'month', period_seconds: 31 * 86400, max_usd: 200, spent_usd: spent, remaining_usd: round(200 - spent),
      period_start: '2025-05-01T00:00:00Z', period_end: '2025-06-01T00:00:00Z', created_at: '2025-05-20T08:00:00Z', updated_at: '2025-05-20T08:00:00Z',
    };
    assert.deepEqual(created.json().budgets, [configured, ops]);

    const changed = await admin('PUT', { user_path: '/ops', limit_key: { period_seconds: 86400 * 1 }, max_usd: spent });
    assert.deepEqual(changed.json().budgets.map((b: any) => [b.user_path, b.period_label, b.max_usd]), [['/configured', 'day', 5], ['/ops', 'day', spent], ['/Ops', 'month', 200]]);
    assertOpenAiError(await fx.gw.request('POST', '/v1/chat/completions', { body: chat(), headers: as('/ops') }), 429, 'rate_limit_error');

    const deleted = await admin('DELETE', { user_path: '/OPS', limit_key: { period: 'day' } });
    assert.equal(deleted.status, 200);
    assert.deepEqual(deleted.json().budgets.map((b: any) => [b.user_path, b.period_label]), [['/configured', 'day'], ['/Ops', 'month']]);
    assert.equal((await fx.gw.request('POST', '/v1/chat/completions', { body: chat(), headers: as('/ops') })).status, 200);
    const missing = assertOpenAiError(await admin('DELETE', { user_path: '/ops', limit_key: { period: 'day' } }), 404, 'not_found_error');
    assert.equal(missing.code, 'budget_not_found');
  });

  it('refuses to change or delete a config budget: 409 naming where it is declared', async () => {
    for (const [method, body, path] of [
      ['PUT', { user_path: '/Configured', limit_key: { period: 'day' }, max_usd: 1 }, '/Configured'],
      ['DELETE', { user_path: '/configured', limit_key: { period_seconds: 86400 } }, '/configured'],
    ] as const) {
      const error = assertOpenAiError(await admin(method, body), 409, 'invalid_request_error');
      assert.equal(error.code, 'budget_managed_by_config');
      assert.equal(error.message, `day budget for ${path} is managed by config (env SET_BUDGET_CONFIGURED); change it there`);
    }
    assert.deepEqual((await admin('GET')).json().budgets[0], configured);
    // Another period on the same path is not managed by config.
    assert.equal((await admin('PUT', { user_path: '/configured', limit_key: { period: 'week' }, max_usd: 1 })).status, 200);
  });

  it('answers 400 naming the field', async () => {
    const cases: Array<[unknown, string, RegExp]> = [
      [[1], '', /request body must be a JSON object/],
      [{ limit_key: { period: 'day' }, max_usd: 1 }, 'user_path', /^user_path: is required$/],
      [{ user_path: '/a/../b', limit_key: { period: 'day' }, max_usd: 1 }, 'user_path', /user_path must not contain '\.' or '\.\.' segments/],
      [{ user_path: 5, limit_key: { period: 'day' }, max_usd: 1 }, 'user_path', /^user_path: must be a string$/],
      [{ user_path: '/a', max_usd: 1 }, 'limit_key', /^limit_key: is required$/],
      [{ user_path: '/a', limit_key: 'day', max_usd: 1 }, 'limit_key', /limit_key: must be an object/],
      [{ user_path: '/a', limit_key: { period: 'year' }, max_usd: 1 }, 'limit_key.period', /limit_key\.period must be one of day, week, month/],
      [{ user_path: '/a', limit_key: { period_seconds: 0 }, max_usd: 1 }, 'limit_key.period_seconds', /limit_key\.period_seconds must be an integer from 1 to 31622400/],
      [{ user_path: '/a', limit_key: { period: 0.5 }, max_usd: 1 }, 'limit_key.period', /limit_key\.period must be an integer from 1 to 31622400/],
      [{ user_path: '/a', limit_key: {}, max_usd: 1 }, 'limit_key.period', /limit_key\.period: required \(day, week, month\) or limit_key\.period_seconds/],
      [{ user_path: '/a', limit_key: { period: 'day', period_seconds: 60 }, max_usd: 1 }, 'limit_key.period', /give either period or period_seconds/],
      [{ user_path: '/a', limit_key: { period: 'day', extra: 1 }, max_usd: 1 }, 'limit_key.extra', /^limit_key\.extra: unknown field \(expected one of period, period_seconds\)$/],
      [{ user_path: '/a', limit_key: { period: 'day' } }, 'max_usd', /^max_usd: is required$/],
      [{ user_path: '/a', limit_key: { period: 'day' }, max_usd: 0 }, 'max_usd', /max_usd must be a number of US dollars greater than 0/],
      [{ user_path: '/a', limit_key: { period: 'day' }, max_usd: '5' }, 'max_usd', /^max_usd: must be a number$/],
      [{ user_path: '/a', limit_key: { period: 'day' }, max_usd: 1e13 }, 'max_usd', /at most 1000000000000/],
      [{ user_path: '/a', limit_key: { period: 'day' }, max_usd: 1, max_requests: 1 }, 'max_requests', /max_requests: unknown field \(expected one of user_path, limit_key, max_usd\)/],
    ];
    for (const [body, param, message] of cases) {
      const error = assertOpenAiError(await admin('PUT', body), 400, 'invalid_request_error');
      assert.equal(error.param, param === '' ? null : param, JSON.stringify(body));
      assert.match(error.message, message, JSON.stringify(body));
    }
    const error = assertOpenAiError(await admin('DELETE', { user_path: '/a', limit_key: { period: 'day' }, max_usd: 1 }), 400, 'invalid_request_error');
    assert.equal(error.param, 'max_usd');
  });

  it('needs the master key', async () => {
    const key = await fx.gw.request('POST', '/admin/api-keys', { body: { name: 'k' }, headers: master });
    for (const credential of ['', 'wrong', key.json().key as string]) {
      assertOpenAiError(await admin('GET', undefined, credential), 401, 'authentication_error');
      assertOpenAiError(await admin('PUT', { user_path: '/x', limit_key: { period: 'day' }, max_usd: 1 }, credential), 401, 'authentication_error');
    }
  });
});

describe('budgets: disabled', () => {
  const fx = fixture({ env: { BUDGETS_ENABLED: 'false', SET_BUDGET_T: 'day=0.000001' } });

  it('answers 503 feature_unavailable on the admin API and enforces nothing, while costs are still recorded', async () => {
    for (const [method, body] of [['GET', undefined], ['PUT', { user_path: '/t', limit_key: { period: 'day' }, max_usd: 1 }], ['DELETE', {}]] as const) {
      const error = assertOpenAiError(await fx.gw.request(method, '/admin/budgets', { body, headers: master }), 503, 'invalid_request_error');
      assert.equal(error.code, 'feature_unavailable');
      assert.equal(error.message, 'budgets are disabled on this gateway (BUDGETS_ENABLED=false)');
    }
    for (let i = 0; i < 2; i++) assert.equal((await fx.gw.request('POST', '/v1/chat/completions', { body: chat(), headers: as('/t') })).status, 200);
    const usage = await usageOf(fx.gw, '/t');
    assert.deepEqual(usage.budgets, []);
    assert.ok(usage.totals.cost_usd > 0);
  });
});

describe('budgets: a restart keeps the spend', () => {
  let up: FakeUpstream;
  let dir: string;
  before(async () => {
    up = await startFakeUpstream({ name: 'up' });
    dir = mkdtempSync(join(tmpdir(), 'floodgate-budget-restart-'));
  });
  after(async () => {
    await up?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a gateway started on the same SQLite file refuses from its first request, showing the same spend', async () => {
    const options = {
      yaml: `providers:\n${openaiProvider('up', up.url, ['gpt-x'])}${THOUSANDTH_PER_TOKEN}`,
      env: { MASTER_KEY: MASTER, SET_BUDGET_R: 'month=0.001' },
      dir,
      now: () => Date.parse('2025-07-15T12:00:00.000Z'),
    };
    const first = await startTestGateway(options);
    let spent: number;
    try {
      assert.equal((await first.request('POST', '/v1/chat/completions', { body: chat(), headers: as('/r') })).status, 200);
      assertOpenAiError(await first.request('POST', '/v1/chat/completions', { body: chat(), headers: as('/r') }), 429, 'rate_limit_error');
      spent = (await usageOf(first, '/r')).budgets[0].spent_usd;
    } finally {
      await first.close();
    }
    const second = await startTestGateway(options);
    try {
      const calls = up.calls.length;
      assertBudgetRefusal(
        await second.request('POST', '/v1/chat/completions', { body: chat(), headers: as('/r/x') }),
        'budget exceeded for /r: month budget of $0.001 reached',
        Date.parse('2025-08-01T00:00:00Z') - Date.parse('2025-07-15T12:00:00Z'),
      );
      assert.equal(up.calls.length, calls);
      assert.equal((await usageOf(second, '/r')).budgets[0].spent_usd, spent);
    } finally {
      await second.close();
    }
  });
});

describe('costs of real models and cached prompt tokens', () => {
  let up: FixedUsageUpstream;
  let gw: TestGateway;
  before(async () => {
    up = await startFixedUsageUpstream();
    gw = await startTestGateway({
      yaml:
        `providers:\n${openaiProvider('oai', up.url, ['gpt-4o-mini', 'house-model'])}${anthropicProvider('claude', up.url, ['claude-sonnet-4-20250514'])}` +
        'pricing:\n  oai/house-model: { input_per_mtok: 3, output_per_mtok: 12, cached_input_per_mtok: 0.5 }\n',
      env: { MASTER_KEY: MASTER },
      now: () => Date.parse('2025-06-01T12:00:00.000Z'),
    });
  });
  after(async () => {
    await gw?.close();
    await up?.close();
  });

  /** The package's per-million prices for a model. */
  function published(model: string, providerId: string): { input: number; output: number; cacheRead: number } {
    const p = calcPrice({ input_tokens: 1 }, model, { providerId, timestamp: new Date('2025-06-01T12:00:00Z') })!.model_price;
    return { input: p.input_mtok as number, output: p.output_mtok as number, cacheRead: p.cache_read_mtok as number };
  }
  const cost = (p: { input: number; output: number; cacheRead: number }, prompt: number, cached: number, completion: number): number =>
    ((prompt - cached) * p.input + cached * p.cacheRead + completion * p.output) / 1e6;
  const exact = (usd: number): number => Math.round(usd * 1e9);

  it('prices each request from its usage record and shows it in /v1/usage', async () => {
    up.setUsage({ prompt_tokens: 12_000, completion_tokens: 800, total_tokens: 12_800, prompt_tokens_details: { cached_tokens: 4_096 } });
    assert.equal((await gw.request('POST', '/v1/chat/completions', { body: chat('oai/gpt-4o-mini'), headers: as('/c/openai') })).status, 200);
    assert.equal((await gw.request('POST', '/v1/chat/completions', { body: chat('oai/house-model'), headers: as('/c/house') })).status, 200);
    up.setUsage({ input_tokens: 1_000, cache_read_input_tokens: 2_000, cache_creation_input_tokens: 0, output_tokens: 1_500 });
    const messages = await gw.request('POST', '/v1/messages', { body: { model: 'claude/claude-sonnet-4-20250514', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }, headers: as('/c/claude') });
    assert.equal(messages.status, 200, messages.text);

    const mini = cost(published('gpt-4o-mini', 'openai'), 12_000, 4_096, 800);
    const house = (7_904 * 3 + 4_096 * 0.5 + 800 * 12) / 1e6;
    const sonnet = cost(published('claude-sonnet-4-20250514', 'anthropic'), 3_000, 2_000, 1_500);
    const byPath = async (path: string) => (await usageOf(gw, path, '2025-06-01')).by_model[0];
    const openai = await byPath('/c/openai');
    assert.deepEqual([openai.model, openai.cached_prompt_tokens, exact(openai.cost_usd)], ['gpt-4o-mini', 4_096, exact(mini)]);
    assert.equal(exact((await byPath('/c/house')).cost_usd), exact(house));
    const claude = await byPath('/c/claude');
    assert.deepEqual([claude.model, claude.prompt_tokens, claude.cached_prompt_tokens, exact(claude.cost_usd)], ['claude-sonnet-4-20250514', 3_000, 2_000, exact(sonnet)]);
    const all = await usageOf(gw, '/c', '2025-06-01');
    assert.equal(exact(all.totals.cost_usd), exact(mini + house + sonnet));
    assert.equal(all.totals.cached_prompt_tokens, 4_096 * 2 + 2_000);
  });
});
