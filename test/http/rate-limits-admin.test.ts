/**
 * End-to-end: the rate-limit admin API (`/admin/rate-limits*`), master key only.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway, type TestResponse } from '../support/gateway.ts';
import { assertOpenAiError } from '../support/e2e.ts';
import {
  MASTER,
  USER_PATH_HEADER,
  admin,
  assertRateLimited,
  chat,
  eventually,
  fakeChatTokens,
  findRule,
  listRules,
  type StatusRecord,
  upProvider,
} from '../support/rate-limits.ts';

const RFC3339_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
const ROUTES: Array<[string, string, unknown]> = [
  ['GET', '/admin/rate-limits', undefined],
  ['PUT', '/admin/rate-limits', { user_path: '/x', limit_key: { period: 'minute' }, max_requests: 1 }],
  ['DELETE', '/admin/rate-limits', { user_path: '/x', limit_key: { period: 'minute' } }],
  ['POST', '/admin/rate-limits/reset-one', { user_path: '/x', period: 'minute' }],
  ['POST', '/admin/rate-limits/reset', { confirmation: 'reset' }],
];

/** A chat request as a user path, authenticated with the master key. */
function chatAs(gw: TestGateway, userPath: string, model = 'up/gpt-x'): Promise<TestResponse> {
  return gw.request('POST', '/v1/chat/completions', { body: chat(model, 'x'.repeat(20)), headers: { authorization: `Bearer ${MASTER}`, [USER_PATH_HEADER]: userPath } });
}

function assertList(res: TestResponse): StatusRecord[] {
  assert.equal(res.status, 200, res.text);
  const body = res.json();
  assert.deepEqual(Object.keys(body).sort(), ['rate_limits', 'server_time']);
  assert.ok(Array.isArray(body.rate_limits));
  assert.match(body.server_time, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/, 'server_time is RFC 3339 UTC with milliseconds');
  return body.rate_limits;
}

function assert400(res: TestResponse, field: string, what: string): void {
  assert.ok(res.status < 500, `${what}: never a 5xx, got ${res.status} ${res.text}`);
  const error = assertOpenAiError(res, 400, 'invalid_request_error');
  assert.ok(error.message.includes(field), `${what}: message should name ${field}: ${error.message}`);
}

describe('rate limits: admin API', { timeout: 40_000 }, () => {
  let up: FakeUpstream;
  let gw: TestGateway;

  before(async () => {
    up = await startFakeUpstream({ name: 'up' });
    gw = await startTestGateway({
      yaml:
        upProvider(up.url) +
        'rate_limits:\n' +
        '  user_paths: [ { path: /cfg, limits: [ { period: minute, max_requests: 2 } ] } ]\n' +
        '  providers: [ { name: up, limits: [ { period: day, max_requests: 100000 } ] } ]\n',
      env: { MASTER_KEY: MASTER, SET_RATE_LIMIT_ENVPATH: 'rph=50' },
    });
  });
  after(async () => {
    await gw?.close();
    await up?.close();
  });

  it('401 without a key, with a wrong key and with a managed key, on every route', async () => {
    const created = await admin(gw, 'POST', '/admin/api-keys', { name: 'k1', user_path: '/keyed' });
    assert.equal(created.status, 201, created.text);
    const managed = created.json().key as string;
    assert.equal((await gw.request('POST', '/v1/chat/completions', { body: chat(), headers: { authorization: `Bearer ${managed}` } })).status, 200, 'the managed key works on model routes');
    for (const [method, path, body] of ROUTES) {
      for (const key of ['', 'wrong-key', managed]) {
        const res = await admin(gw, method, path, body, key);
        assertOpenAiError(res, 401, 'authentication_error');
      }
      const viaXApiKey = await gw.request(method, path, { body, headers: { 'x-api-key': 'wrong' } });
      assertOpenAiError(viaXApiKey, 401, 'authentication_error');
    }
    const rules = await listRules(gw);
    assert.equal(findRule(rules, 'user_path', '/x', 60), undefined, 'refused writes changed nothing');
  });

  it('a managed key bound to a user path is limited by that path\'s rules, whatever header it sends', async () => {
    assertList(await admin(gw, 'PUT', '/admin/rate-limits', { user_path: '/bound', limit_key: { period: 'minute' }, max_requests: 1 }));
    const created = await admin(gw, 'POST', '/admin/api-keys', { name: 'bound', user_path: '/bound/key1' });
    assert.equal(created.status, 201, created.text);
    const key = created.json().key as string;
    const call = (header: string) =>
      gw.request('POST', '/v1/chat/completions', { body: chat(), headers: { authorization: `Bearer ${key}`, [USER_PATH_HEADER]: header } });
    assert.equal((await call('/elsewhere')).status, 200);
    assertRateLimited(await call('/elsewhere'), 'rate limit exceeded for /bound: minute request limit of 1 reached');
    assert.equal((await chatAs(gw, '/elsewhere')).status, 200, 'the master key with that header is not under /bound');
  });

  it('GET: list shape, every field of windowed and concurrent rules, sorted by scope, subject, period_seconds', async () => {
    for (const body of [
      { user_path: '/shape/b', limit_key: { period: 'minute' }, max_requests: 5 },
      { user_path: '/shape/a', limit_key: { period: 'hour' }, max_requests: 5, max_tokens: 1000 },
      { user_path: '/shape/a', limit_key: { period: 'concurrent' }, max_requests: 3 },
      { user_path: '/Shape/A', limit_key: { period_seconds: 30 }, max_requests: 5, max_tokens: 700 },
      { scope: 'model', subject: 'gpt-x', limit_key: { period: 'minute' }, max_requests: 1000 },
      { scope: 'provider', subject: 'zz-prov', limit_key: { period: 'minute' }, max_requests: 1000 },
    ]) {
      assertList(await admin(gw, 'PUT', '/admin/rate-limits', body));
    }
    assert.equal((await chatAs(gw, '/shape/a/x')).status, 200);
    const res = await admin(gw, 'GET', '/admin/rate-limits');
    const rules = assertList(res);
    const serverTime = Date.parse(res.json().server_time);

    const sorted = [...rules].sort((a, b) =>
      a.scope !== b.scope ? (a.scope < b.scope ? -1 : 1)
        : a.subject.toLowerCase() !== b.subject.toLowerCase() ? (a.subject.toLowerCase() < b.subject.toLowerCase() ? -1 : 1)
          : a.period_seconds - b.period_seconds);
    assert.deepEqual(rules.map((r) => `${r.scope} ${r.subject} ${r.period_seconds}`), sorted.map((r) => `${r.scope} ${r.subject} ${r.period_seconds}`));
    const shape = rules.filter((r) => r.subject.toLowerCase().startsWith('/shape/'));
    assert.deepEqual(shape.map((r) => `${r.subject.toLowerCase()} ${r.period_seconds}`), ['/shape/a 0', '/shape/a 30', '/shape/a 3600', '/shape/b 60']);
    assert.deepEqual(rules.slice(0, 1).map((r) => r.scope), ['model']);

    const hour = findRule(rules, 'user_path', '/shape/a', 3600)!;
    assert.deepEqual(Object.keys(hour).sort(), [
      'created_at', 'in_flight', 'max_requests', 'max_tokens', 'period_label', 'period_seconds', 'requests_remaining', 'requests_used',
      'scope', 'source', 'subject', 'tokens_remaining', 'tokens_used', 'updated_at', 'user_path', 'window_end', 'window_start',
    ]);
    assert.equal(hour.scope, 'user_path');
    assert.equal(hour.subject, '/shape/a');
    assert.equal(hour.user_path, '/shape/a');
    assert.equal(hour.source, 'manual');
    assert.equal(hour.period_label, 'hour');
    assert.equal(hour.period_seconds, 3600);
    assert.equal(hour.max_requests, 5);
    assert.equal(hour.max_tokens, 1000);
    assert.equal(hour.requests_used, 1);
    assert.equal(hour.requests_remaining, 4);
    assert.equal(hour.tokens_used, 10, 'a 20-char prompt echoed back: 5 + 5 tokens');
    assert.equal(hour.tokens_remaining, 990);
    assert.equal(hour.in_flight, 0, 'a windowed rule holds no slots');
    for (const field of ['window_start', 'window_end', 'created_at', 'updated_at'] as const) assert.match(hour[field]!, RFC3339_UTC, field);
    const start = Date.parse(hour.window_start!);
    const end = Date.parse(hour.window_end!);
    assert.equal(end - start, 3600 * 1000);
    assert.equal(start % (3600 * 1000), 0, 'windows are aligned to the epoch');
    assert.ok(start <= serverTime && serverTime <= end, 'the current window');

    const custom = findRule(rules, 'user_path', '/shape/a', 30)!;
    assert.equal(custom.subject, '/Shape/A', 'shown with the spelling of its latest write');
    assert.equal(custom.period_label, '30s');
    assert.equal(Date.parse(custom.window_end!) - Date.parse(custom.window_start!), 30_000);
    assert.equal(custom.tokens_remaining, 690);

    const conc = findRule(rules, 'user_path', '/shape/a', 0)!;
    assert.equal(conc.period_label, 'concurrent');
    assert.equal(conc.in_flight, 0);
    assert.equal(conc.max_requests, 3);
    assert.equal(conc.tokens_used, 0, 'a concurrent rule counts no tokens');
    for (const absent of ['window_start', 'window_end', 'max_tokens', 'tokens_remaining'] as const) {
      assert.equal(absent in conc, false, `${absent} absent for a concurrent rule`);
    }
    for (const field of ['scope', 'subject', 'user_path', 'source', 'period_label', 'period_seconds', 'created_at', 'updated_at'] as const) {
      assert.ok(field in conc, `${field} present for a concurrent rule`);
    }
    const provider = findRule(rules, 'provider', 'zz-prov', 60)!;
    assert.equal(provider.source, 'manual');
    assert.equal(provider.period_label, 'minute');
  });

  it('PUT creates user-path, provider and model rules and custom windows; editing caps keeps counters', async () => {
    let rules = assertList(await admin(gw, 'PUT', '/admin/rate-limits', { user_path: '/put/a', limit_key: { period: 'minute' }, max_requests: 3 }));
    let rule = findRule(rules, 'user_path', '/put/a', 60)!;
    assert.equal(rule.source, 'manual');
    assert.equal(rule.period_label, 'minute');
    assert.equal(rule.max_requests, 3);
    assert.equal(rule.requests_used, 0);

    rules = assertList(await admin(gw, 'PUT', '/admin/rate-limits', { scope: 'provider', subject: 'up', limit_key: { period: 'hour' }, max_tokens: 1_000_000 }));
    assert.equal(findRule(rules, 'provider', 'up', 3600)?.user_path, '');
    assert.equal(findRule(rules, 'provider', 'up', 3600)?.max_tokens, 1_000_000);
    rules = assertList(await admin(gw, 'PUT', '/admin/rate-limits', { scope: 'model', subject: 'up/gpt-x', limit_key: { period: 'day' }, max_requests: 100000 }));
    assert.equal(findRule(rules, 'model', 'up/gpt-x', 86400)?.period_label, 'day');
    rules = assertList(await admin(gw, 'PUT', '/admin/rate-limits', { user_path: '/put/custom', limit_key: { period_seconds: 300 }, max_requests: 9 }));
    assert.equal(findRule(rules, 'user_path', '/put/custom', 300)?.period_label, '300s');
    rules = assertList(await admin(gw, 'PUT', '/admin/rate-limits', { user_path: '/put/custom2', limit_key: { period: '300' }, max_requests: 9 }));
    assert.equal(findRule(rules, 'user_path', '/put/custom2', 300)?.period_label, '300s');
    rules = assertList(await admin(gw, 'PUT', '/admin/rate-limits', { user_path: '  put//norm/ ', limit_key: { period: 'minute' }, max_requests: 9 }));
    assert.ok(findRule(rules, 'user_path', '/put/norm', 60), 'user paths are normalised');

    // the new rule is enforced at once
    assert.equal((await chatAs(gw, '/put/a/1')).status, 200);
    assert.equal((await chatAs(gw, '/put/a/2')).status, 200);
    rule = findRule(await listRules(gw), 'user_path', '/put/a', 60)!;
    assert.equal(rule.requests_used, 2);
    const createdAt = rule.created_at;

    // editing only the caps keeps the counters (and created_at)
    rules = assertList(await admin(gw, 'PUT', '/admin/rate-limits', { user_path: '/PUT/A', limit_key: { period: 'minute' }, max_requests: 2 }));
    rule = findRule(rules, 'user_path', '/put/a', 60)!;
    assert.equal(rules.filter((r) => r.subject.toLowerCase() === '/put/a').length, 1, 'same key, case-insensitively');
    assert.equal(rule.max_requests, 2);
    assert.equal(rule.requests_used, 2);
    assert.equal(rule.requests_remaining, 0);
    assert.equal(rule.created_at, createdAt);
    assertRateLimited(await chatAs(gw, '/put/a'), 'rate limit exceeded for /PUT/A: minute request limit of 2 reached');
    rules = assertList(await admin(gw, 'PUT', '/admin/rate-limits', { user_path: '/put/a', limit_key: { period: 'minute' }, max_requests: 5 }));
    assert.equal(findRule(rules, 'user_path', '/put/a', 60)?.requests_used, 2);
    assert.equal((await chatAs(gw, '/put/a')).status, 200);
  });

  it('DELETE removes a rule and its counters; a missing rule is 404 rate_limit_not_found', async () => {
    assertList(await admin(gw, 'PUT', '/admin/rate-limits', { user_path: '/del', limit_key: { period: 'minute' }, max_requests: 1 }));
    assert.equal((await chatAs(gw, '/del')).status, 200);
    assertRateLimited(await chatAs(gw, '/del'), 'rate limit exceeded for /del: minute request limit of 1 reached');
    let rules = assertList(await admin(gw, 'DELETE', '/admin/rate-limits', { user_path: '/del', limit_key: { period: 'minute' } }));
    assert.equal(findRule(rules, 'user_path', '/del', 60), undefined);
    assert.equal((await chatAs(gw, '/del')).status, 200, 'no longer limited');
    assert.equal((await chatAs(gw, '/del')).status, 200);
    // re-created: counters start from zero
    rules = assertList(await admin(gw, 'PUT', '/admin/rate-limits', { user_path: '/del', limit_key: { period: 'minute' }, max_requests: 1 }));
    assert.equal(findRule(rules, 'user_path', '/del', 60)?.requests_used, 0);

    assertList(await admin(gw, 'PUT', '/admin/rate-limits', { scope: 'model', subject: 'del-model', limit_key: { period_seconds: 120 }, max_requests: 1 }));
    rules = assertList(await admin(gw, 'DELETE', '/admin/rate-limits', { scope: 'model', subject: 'DEL-MODEL', limit_key: { period_seconds: 120 } }));
    assert.equal(findRule(rules, 'model', 'del-model', 120), undefined);

    const missing = await admin(gw, 'DELETE', '/admin/rate-limits', { user_path: '/nope', limit_key: { period: 'minute' } });
    assert.equal(assertOpenAiError(missing, 404, 'not_found_error').code, 'rate_limit_not_found');
    const wrongPeriod = await admin(gw, 'DELETE', '/admin/rate-limits', { user_path: '/del', limit_key: { period: 'hour' } });
    assert.equal(assertOpenAiError(wrongPeriod, 404, 'not_found_error').code, 'rate_limit_not_found');
  });

  it('reset-one zeroes one rule (by period, period_seconds, or the limit_key PUT and DELETE take); reset with confirmation zeroes all', async () => {
    assertList(await admin(gw, 'PUT', '/admin/rate-limits', { user_path: '/rs/a', limit_key: { period: 'minute' }, max_requests: 1 }));
    assertList(await admin(gw, 'PUT', '/admin/rate-limits', { user_path: '/rs/b', limit_key: { period_seconds: 45 }, max_requests: 1 }));
    assert.equal((await chatAs(gw, '/rs/a')).status, 200);
    assert.equal((await chatAs(gw, '/rs/b')).status, 200);
    assertRateLimited(await chatAs(gw, '/rs/a'), 'rate limit exceeded for /rs/a: minute request limit of 1 reached');

    let rules = assertList(await admin(gw, 'POST', '/admin/rate-limits/reset-one', { user_path: '/rs/a', period: 'minute' }));
    assert.equal(findRule(rules, 'user_path', '/rs/a', 60)?.requests_used, 0);
    assert.equal(findRule(rules, 'user_path', '/rs/b', 45)?.requests_used, 1, 'only that rule');
    assert.equal((await chatAs(gw, '/rs/a')).status, 200);

    rules = assertList(await admin(gw, 'POST', '/admin/rate-limits/reset-one', { scope: 'user_path', subject: '/rs/b', period_seconds: 45 }));
    assert.equal(findRule(rules, 'user_path', '/rs/b', 45)?.requests_used, 0);
    assert.equal((await chatAs(gw, '/rs/b')).status, 200);
    rules = assertList(await admin(gw, 'POST', '/admin/rate-limits/reset-one', { user_path: '/rs/b', limit_key: { period_seconds: 45 } }));
    assert.equal(findRule(rules, 'user_path', '/rs/b', 45)?.requests_used, 0, 'reset through limit_key');
    assert.equal(findRule(rules, 'user_path', '/rs/a', 60)?.requests_used, 1, 'only that rule');
    const missing = await admin(gw, 'POST', '/admin/rate-limits/reset-one', { user_path: '/rs/none', period: 'minute' });
    assert.equal(assertOpenAiError(missing, 404, 'not_found_error').code, 'rate_limit_not_found');

    for (const bad of [{}, { confirmation: 'yes' }, { confirmation: 'RESET' }, { confirmation: true }, 'reset', []]) {
      const res = await admin(gw, 'POST', '/admin/rate-limits/reset', bad);
      assertOpenAiError(res, 400, 'invalid_request_error');
    }
    assert.equal(findRule(await listRules(gw), 'user_path', '/rs/a', 60)?.requests_used, 1, 'a refused reset changed nothing');

    const ok = await admin(gw, 'POST', '/admin/rate-limits/reset', { confirmation: 'reset' });
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(ok.json(), { status: 'ok' });
    for (const r of await listRules(gw)) {
      assert.equal(r.requests_used, 0, `${r.scope} ${r.subject} ${r.period_label} requests_used`);
      assert.equal(r.tokens_used, 0, `${r.scope} ${r.subject} ${r.period_label} tokens_used`);
      assert.equal(r.in_flight, 0, `${r.scope} ${r.subject} ${r.period_label} in_flight`);
    }
  });

  it('config rules (YAML and env) cannot be changed or deleted: 409 naming the origin; their counters can be reset', async () => {
    const rules = await listRules(gw);
    assert.equal(findRule(rules, 'user_path', '/cfg', 60)?.source, 'config');
    assert.equal(findRule(rules, 'user_path', '/envpath', 3600)?.source, 'config');
    assert.equal(findRule(rules, 'provider', 'up', 86400)?.source, 'config');

    const cases: Array<[string, unknown, RegExp]> = [
      ['PUT', { user_path: '/cfg', limit_key: { period: 'minute' }, max_requests: 50 }, /rate_limits\.user_paths/],
      ['PUT', { user_path: '/CFG', limit_key: { period_seconds: 60 }, max_requests: 50 }, /rate_limits\.user_paths/],
      ['DELETE', { user_path: '/cfg', limit_key: { period: 'minute' } }, /rate_limits\.user_paths/],
      ['PUT', { user_path: '/envpath', limit_key: { period: 'hour' }, max_requests: 1 }, /SET_RATE_LIMIT_ENVPATH/],
      ['DELETE', { user_path: '/envpath', limit_key: { period: 'hour' } }, /SET_RATE_LIMIT_ENVPATH/],
      ['PUT', { scope: 'provider', subject: 'up', limit_key: { period: 'day' }, max_requests: 1 }, /rate_limits\.providers/],
      ['DELETE', { scope: 'provider', subject: 'UP', limit_key: { period: 'day' } }, /rate_limits\.providers/],
    ];
    for (const [method, body, origin] of cases) {
      const res = await admin(gw, method, '/admin/rate-limits', body);
      assert.equal(res.status, 409, `${method} ${JSON.stringify(body)}: ${res.text}`);
      const error = res.json().error;
      assert.equal(error.code, 'rule_managed_by_config');
      assert.match(error.message, origin);
    }
    const after = await listRules(gw);
    assert.equal(findRule(after, 'user_path', '/cfg', 60)?.max_requests, 2, 'unchanged');
    assert.equal(findRule(after, 'user_path', '/envpath', 3600)?.max_requests, 50, 'unchanged');

    assert.equal((await chatAs(gw, '/cfg')).status, 200);
    assert.equal((await chatAs(gw, '/cfg')).status, 200);
    assertRateLimited(await chatAs(gw, '/cfg'), 'rate limit exceeded for /cfg: minute request limit of 2 reached');
    const reset = assertList(await admin(gw, 'POST', '/admin/rate-limits/reset-one', { user_path: '/cfg', period: 'minute' }));
    assert.equal(findRule(reset, 'user_path', '/cfg', 60)?.requests_used, 0);
    assert.equal((await chatAs(gw, '/cfg')).status, 200);
  });

  it('validation: every malformed write is a 400 invalid_request_error naming the field, never a 5xx', async () => {
    const ok = { user_path: '/v', limit_key: { period: 'minute' }, max_requests: 1 };
    const cases: Array<[string, unknown, string]> = [
      ['missing limit_key', { user_path: '/v', max_requests: 1 }, 'limit_key'],
      ['limit_key a string', { ...ok, limit_key: 'minute' }, 'limit_key'],
      ['limit_key an array', { ...ok, limit_key: ['minute'] }, 'limit_key'],
      ['limit_key null', { ...ok, limit_key: null }, 'limit_key'],
      ['both period and period_seconds', { ...ok, limit_key: { period: 'minute', period_seconds: 60 } }, 'period'],
      ['empty limit_key', { ...ok, limit_key: {} }, 'period'],
      ['unknown period', { ...ok, limit_key: { period: 'fortnight' } }, 'period'],
      ['period_seconds 0', { ...ok, limit_key: { period_seconds: 0 } }, 'period_seconds'],
      ['period_seconds -1', { ...ok, limit_key: { period_seconds: -1 } }, 'period_seconds'],
      ['period_seconds 1.5', { ...ok, limit_key: { period_seconds: 1.5 } }, 'period_seconds'],
      ['period_seconds "x"', { ...ok, limit_key: { period_seconds: 'x' } }, 'period_seconds'],
      ['max_requests 0', { ...ok, max_requests: 0 }, 'max_requests'],
      ['max_requests -1', { ...ok, max_requests: -1 }, 'max_requests'],
      ['max_requests 1.5', { ...ok, max_requests: 1.5 }, 'max_requests'],
      ['max_requests "10"', { ...ok, max_requests: '10' }, 'max_requests'],
      ['max_requests null', { ...ok, max_requests: null }, 'max_requests'],
      ['max_tokens 0', { ...ok, max_tokens: 0 }, 'max_tokens'],
      ['concurrent with max_tokens', { user_path: '/v', limit_key: { period: 'concurrent' }, max_requests: 1, max_tokens: 10 }, 'max_tokens'],
      ['concurrent without max_requests', { user_path: '/v', limit_key: { period: 'concurrent' } }, 'max_requests'],
      ['windowed without caps', { user_path: '/v', limit_key: { period: 'minute' } }, 'max_'],
      ['scope provider with user_path', { scope: 'provider', subject: 'up', user_path: '/v', limit_key: { period: 'minute' }, max_requests: 1 }, 'user_path'],
      ['scope without subject', { scope: 'provider', limit_key: { period: 'minute' }, max_requests: 1 }, 'subject'],
      ['neither scope nor user_path', { limit_key: { period: 'minute' }, max_requests: 1 }, 'scope'],
      ['unknown scope', { scope: 'team', subject: 'x', limit_key: { period: 'minute' }, max_requests: 1 }, 'scope'],
      ['user path with ..', { ...ok, user_path: '/a/../b' }, 'user_path'],
      ['user path with .', { ...ok, user_path: '/a/./b' }, 'user_path'],
      ['user path with :', { ...ok, user_path: 'a:b' }, 'user_path'],
      ['user path not a string', { ...ok, user_path: 7 }, 'user_path'],
      ['provider subject with /', { scope: 'provider', subject: 'up/x', limit_key: { period: 'minute' }, max_requests: 1 }, 'subject'],
      ['provider subject with whitespace', { scope: 'provider', subject: 'u p', limit_key: { period: 'minute' }, max_requests: 1 }, 'subject'],
      ['model subject beginning with /', { scope: 'model', subject: '/gpt-x', limit_key: { period: 'minute' }, max_requests: 1 }, 'subject'],
      ['model subject ending with /', { scope: 'model', subject: 'up/', limit_key: { period: 'minute' }, max_requests: 1 }, 'subject'],
      ['unknown field', { ...ok, burst: 3 }, 'burst'],
      ['unknown limit_key field', { ...ok, limit_key: { period: 'minute', window: 1 } }, 'window'],
      ['body an array', [ok], 'body'],
      ['body a number', 42, 'body'],
      ['body null', null, 'body'],
    ];
    for (const [what, body, field] of cases) {
      assert400(await admin(gw, 'PUT', '/admin/rate-limits', body), field, `PUT ${what}`);
    }
    for (const [what, body, field] of [
      ['missing limit_key', { user_path: '/v' }, 'limit_key'],
      ['unknown period', { user_path: '/v', limit_key: { period: 'week' } }, 'period'],
      ['max_requests on delete', { user_path: '/v', limit_key: { period: 'minute' }, max_requests: 1 }, 'max_requests'],
      ['bad user path', { user_path: '/a/../b', limit_key: { period: 'minute' } }, 'user_path'],
    ] as Array<[string, unknown, string]>) {
      assert400(await admin(gw, 'DELETE', '/admin/rate-limits', body), field, `DELETE ${what}`);
    }
    for (const [what, body, field] of [
      ['no period', { user_path: '/cfg' }, 'period'],
      ['both periods', { user_path: '/cfg', period: 'minute', period_seconds: 60 }, 'period'],
      ['period_seconds 0', { user_path: '/cfg', period_seconds: 0 }, 'period_seconds'],
      ['limit_key and period', { user_path: '/cfg', limit_key: { period: 'minute' }, period: 'minute' }, 'limit_key'],
    ] as Array<[string, unknown, string]>) {
      assert400(await admin(gw, 'POST', '/admin/rate-limits/reset-one', body), field, `reset-one ${what}`);
    }
    for (const [method, path] of [['PUT', '/admin/rate-limits'], ['DELETE', '/admin/rate-limits'], ['POST', '/admin/rate-limits/reset-one'], ['POST', '/admin/rate-limits/reset']]) {
      const malformed = await gw.request(method!, path!, { body: '{"user_path": "/v", ', headers: { authorization: `Bearer ${MASTER}`, 'content-type': 'application/json' } });
      assert.ok(malformed.status < 500, `${method} ${path} malformed JSON: ${malformed.status}`);
      assertOpenAiError(malformed, 400, 'invalid_request_error');
    }
    const rules = await listRules(gw);
    assert.equal(rules.filter((r) => r.subject.toLowerCase() === '/v' || r.subject === '/b' || r.subject.includes('gpt-x/')).length, 0, 'nothing was written');
    assert.equal((await gw.request('GET', '/health')).status, 200);
  });
});

describe('rate limits: status records are always whole', { timeout: 20_000 }, () => {
  // A fixed clock (2030-01-01T00:00:30Z) so no window rolls between a request and the list that shows it.
  const NOW = Date.UTC(2030, 0, 1, 0, 0, 30);
  const CONTENT = 'x'.repeat(20);
  const COUNTERS = ['requests_used', 'tokens_used', 'in_flight'] as const;
  const ALWAYS = ['scope', 'subject', 'user_path', 'source', 'period_label', 'period_seconds', ...COUNTERS, 'created_at', 'updated_at'];
  const WINDOW = ['window_start', 'window_end'];
  /** The keys of each /whole rule's record, by period_seconds: request-only, token-only, both caps, concurrent. */
  const KEYS: Record<number, string[]> = {
    60: [...ALWAYS, 'max_requests', 'requests_remaining', ...WINDOW],
    3600: [...ALWAYS, 'max_tokens', 'tokens_remaining', ...WINDOW],
    120: [...ALWAYS, 'max_requests', 'max_tokens', 'requests_remaining', 'tokens_remaining', ...WINDOW],
    0: [...ALWAYS, 'max_requests', 'requests_remaining'],
  };
  let up: FakeUpstream;
  let gw: TestGateway;

  before(async () => {
    up = await startFakeUpstream({ name: 'up' });
    gw = await startTestGateway({ yaml: upProvider(up.url), env: { MASTER_KEY: MASTER }, now: () => NOW });
  });
  after(async () => {
    await gw?.close();
    await up?.close();
  });

  /**
   * Asserts every record of a list answer carries the three counters as integers and each /whole rule
   * exactly its kind's fields; returns the /whole records by period_seconds.
   */
  function whole(res: TestResponse): Map<number, StatusRecord> {
    const rules = assertList(res);
    for (const rule of rules) {
      for (const field of COUNTERS) assert.ok(Number.isInteger(rule[field]), `${rule.subject} ${rule.period_label}: ${field} is an integer, got ${rule[field]}`);
    }
    const mine = new Map(rules.filter((r) => r.subject === '/whole').map((r) => [r.period_seconds, r]));
    for (const [period, rule] of mine) assert.deepEqual(Object.keys(rule).sort(), [...KEYS[period]!].sort(), `fields of the ${rule.period_label} rule`);
    return mine;
  }

  const counters = (rule: StatusRecord | undefined) => rule && [rule.requests_used, rule.tokens_used, rule.in_flight];

  it('on windowed (request-only, token-only, both caps) and concurrent rules, in GET, PUT, reset-one and DELETE answers', async () => {
    for (const body of [
      { user_path: '/whole', limit_key: { period: 'minute' }, max_requests: 50 },
      { user_path: '/whole', limit_key: { period: 'hour' }, max_tokens: 5000 },
      { user_path: '/whole', limit_key: { period_seconds: 120 }, max_requests: 50, max_tokens: 5000 },
      { user_path: '/whole', limit_key: { period: 'concurrent' }, max_requests: 5 },
    ]) {
      whole(await admin(gw, 'PUT', '/admin/rate-limits', body));
    }

    // A streamed request held open: counted in every window and holding the concurrency slot, no tokens yet.
    const release = up.holdStreamNext();
    const held = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${MASTER}`, [USER_PATH_HEADER]: '/whole/a' },
      body: JSON.stringify(chat('up/gpt-x', CONTENT, { stream: true })),
    });
    assert.equal(held.status, 200);
    let mine = whole(await admin(gw, 'GET', '/admin/rate-limits'));
    assert.deepEqual(counters(mine.get(60)), [1, 0, 0]);
    assert.deepEqual(counters(mine.get(3600)), [1, 0, 0]);
    assert.deepEqual(counters(mine.get(120)), [1, 0, 0]);
    assert.deepEqual(counters(mine.get(0)), [1, 0, 1], 'a concurrent rule: requests_used is its in_flight, tokens_used 0');
    assert.equal(mine.get(0)!.requests_remaining, 4);
    assert.deepEqual([mine.get(60)!.window_start, mine.get(60)!.window_end], ['2030-01-01T00:00:00Z', '2030-01-01T00:01:00Z']);
    assert.deepEqual([mine.get(120)!.window_start, mine.get(120)!.window_end], ['2030-01-01T00:00:00Z', '2030-01-01T00:02:00Z']);

    // Once the stream ends its tokens are charged to the token rules, and the slot is free.
    release();
    await held.text();
    const tokens = fakeChatTokens(CONTENT);
    await eventually(async () => (await listRules(gw)).some((r) => r.subject === '/whole' && r.period_seconds === 3600 && r.tokens_used === tokens), 3000, 'tokens charged');
    await eventually(async () => findRule(await listRules(gw), 'user_path', '/whole', 0)?.in_flight === 0, 3000, 'slot released');
    mine = whole(await admin(gw, 'GET', '/admin/rate-limits'));
    assert.deepEqual(counters(mine.get(60)), [1, 0, 0], 'a rule without a token cap counts no tokens');
    assert.deepEqual(counters(mine.get(3600)), [1, tokens, 0]);
    assert.equal(mine.get(3600)!.tokens_remaining, 5000 - tokens);
    assert.deepEqual(counters(mine.get(120)), [1, tokens, 0]);
    assert.deepEqual(counters(mine.get(0)), [0, 0, 0]);

    mine = whole(await admin(gw, 'POST', '/admin/rate-limits/reset-one', { user_path: '/whole', period_seconds: 120 }));
    assert.deepEqual(counters(mine.get(120)), [0, 0, 0]);
    assert.deepEqual(counters(mine.get(3600)), [1, tokens, 0], 'only that rule');

    mine = whole(await admin(gw, 'DELETE', '/admin/rate-limits', { user_path: '/whole', limit_key: { period: 'hour' } }));
    assert.deepEqual([...mine.keys()].sort((a, b) => a - b), [0, 60, 120]);
  });
});

describe('rate limits: disabled', { timeout: 20_000 }, () => {
  it('RATE_LIMITS_ENABLED=false: every rate-limit admin route is 503 feature_unavailable and nothing is limited', async () => {
    const up = await startFakeUpstream({ name: 'up' });
    const gw = await startTestGateway({
      yaml: upProvider(up.url) + 'rate_limits:\n  user_paths: [ { path: /, limits: [ { period: minute, max_requests: 1 }, { period: concurrent, max_requests: 1 } ] } ]\n',
      env: { MASTER_KEY: MASTER, RATE_LIMITS_ENABLED: 'false', SET_PROVIDER_RATE_LIMIT_UP: 'rpm=1' },
    });
    try {
      for (const [method, path, body] of ROUTES) {
        const res = await admin(gw, method, path, body);
        assert.equal(assertOpenAiError(res, 503, res.json().error.type).code, 'feature_unavailable', `${method} ${path}`);
      }
      for (let i = 0; i < 4; i++) {
        const res = await chatAs(gw, '/any');
        assert.equal(res.status, 200, res.text);
        assert.equal(res.headers.get('x-ratelimit-limit-requests'), null);
      }
      // still 401 before 503 without the key
      assertOpenAiError(await admin(gw, 'GET', '/admin/rate-limits', undefined, ''), 401, 'authentication_error');
    } finally {
      await gw.close();
      await up.close();
    }
  });
});
