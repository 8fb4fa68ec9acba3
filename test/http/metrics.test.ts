/**
 * End-to-end: `GET /metrics` read with a Prometheus text parser after known traffic. Counts
 * match the traffic exactly, label values stay bounded (route patterns, configured providers,
 * listed models, configured rules' subjects: never a raw URL or a caller's user path), and the
 * endpoint needs the master key when one is set.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway, type TestResponse } from '../support/gateway.ts';
import { assertOpenAiError, openaiProvider } from '../support/e2e.ts';
import { scrape } from '../support/prometheus.ts';
import { USER_PATH_HEADER, chat, chatAs } from '../support/rate-limits.ts';
import { eventually } from '../routing/http-helpers.ts';

/** Inside a minute window, so the user-path rule's sliding estimate is exactly what was counted. */
const NOW = Date.UTC(2030, 0, 1, 0, 0, 10);
const CHAT = '/v1/chat/completions';

function tokensOf(responses: readonly TestResponse[]): { prompt: number; completion: number } {
  let prompt = 0;
  let completion = 0;
  for (const res of responses) {
    const usage = res.json().usage as { prompt_tokens: number; completion_tokens: number };
    prompt += usage.prompt_tokens;
    completion += usage.completion_tokens;
  }
  return { prompt, completion };
}

describe('GET /metrics after known traffic', () => {
  let up: FakeUpstream;
  /** Answers any model, so a passthrough body can name one the gateway does not list. */
  let open: FakeUpstream;
  let gw: TestGateway;

  before(async () => {
    up = await startFakeUpstream({ name: 'up', models: ['gpt-x'] });
    open = await startFakeUpstream({ name: 'open' });
    // The provider's 429 below would cool gpt-x down (learned capacity, tested on its own).
    const yaml = 'providers:\n' + openaiProvider('up', up.url, ['gpt-x'], 'learned: { enabled: false }') + openaiProvider('open', open.url, ['fake-model']) + [
      'rate_limits:',
      '  user_paths: [ { path: /capped, limits: [ { period: minute, max_requests: 2 } ] } ]',
      '  providers: [ { name: up, limits: [ { period: concurrent, max_requests: 5 } ] } ]',
      'cache:',
      '  response: { enabled: true, ttl_seconds: 600, max_entries: 100 }',
      '',
    ].join('\n');
    gw = await startTestGateway({ yaml, now: () => NOW });
  });
  after(async () => {
    await gw.close();
    await Promise.all([up.close(), open.close()]);
  });

  it('counts responses, upstream answers, decisions, tokens and cache lookups exactly', async () => {
    const N = 3; // distinct chats by /team: admitted, answered upstream
    const K = 2; // repeats of the first: cache hits
    const M = 3; // over /capped's 2 a minute: refused by the gateway
    const served: TestResponse[] = [];
    for (let i = 0; i < N; i++) served.push(await chatAs(gw, '/team', chat('up/gpt-x', `question number ${i} ${'x'.repeat(i * 9)}`)));
    for (let i = 0; i < K; i++) {
      const hit = await chatAs(gw, '/team', chat('up/gpt-x', 'question number 0 '));
      assert.equal(hit.headers.get('x-floodgate-cache'), 'hit');
    }
    for (let i = 0; i < 2; i++) served.push(await chatAs(gw, '/capped', chat('up/gpt-x', `capped ${i}`)));
    for (let i = 0; i < M; i++) assert.equal((await chatAs(gw, '/capped', chat('up/gpt-x', `refused ${i}`))).status, 429);
    // The provider's own 429, passed on: told apart from the gateway's by the upstream series.
    up.failNext(1, { status: 429 });
    assert.equal((await chatAs(gw, '/team', chat('up/gpt-x', 'provider says no'))).status, 429);
    // Cache-Control: no-store skips the lookup.
    served.push(await chatAs(gw, '/team', chat('up/gpt-x', 'not cached'), { 'cache-control': 'no-store' }));
    for (const res of served) assert.equal(res.status, 200, res.text);
    assert.equal((await gw.request('GET', '/v1/models')).status, 200);

    const m = await scrape(gw);
    const upstreamCalls = served.length + 1;
    assert.equal(m.value('floodgate_requests_total', { endpoint: CHAT, status: '200' }), served.length + K);
    assert.equal(m.value('floodgate_requests_total', { endpoint: CHAT, status: '429' }), M + 1);
    assert.equal(m.value('floodgate_requests_total', { endpoint: '/v1/models', status: '200' }), 1);

    assert.equal(m.value('floodgate_upstream_responses_total', { provider: 'up', status: '200' }), served.length);
    assert.equal(m.value('floodgate_upstream_responses_total', { provider: 'up', status: '429' }), 1);
    assert.equal(m.value('floodgate_provider_throttled_total', { provider: 'up', model: 'gpt-x' }), 1, 'counted with learning off too');
    assert.equal(m.families.get('floodgate_upstream_duration_seconds')?.type, 'HISTOGRAM');
    assert.equal(m.value('floodgate_upstream_duration_seconds_count', { provider: 'up' }), upstreamCalls);
    assert.equal(m.value('floodgate_upstream_duration_seconds_bucket', { provider: 'up', le: '+Inf' }), upstreamCalls);

    // Every request that reached admission covered the user path, the provider and the model.
    const admitted = upstreamCalls;
    assert.equal(m.value('floodgate_rate_limit_decisions_total', { scope: 'user_path', decision: 'admitted' }), admitted);
    assert.equal(m.value('floodgate_rate_limit_decisions_total', { scope: 'provider', decision: 'admitted' }), admitted);
    assert.equal(m.value('floodgate_rate_limit_decisions_total', { scope: 'model', decision: 'admitted' }), admitted);
    assert.equal(m.value('floodgate_rate_limit_decisions_total', { scope: 'user_path', decision: 'refused' }), M);
    assert.equal(m.value('floodgate_rate_limit_decisions_total', { scope: 'provider', decision: 'refused' }), 0);
    // Which rule refused them.
    assert.deepEqual(m.samples('floodgate_rate_limit_refusals_total').map((s) => [s.labels, Number(s.value)]), [[{ scope: 'user_path', subject: '/capped', period: 'minute' }, M]]);

    const tokens = tokensOf(served);
    assert.equal(m.value('floodgate_tokens_total', { provider: 'up', model: 'gpt-x', kind: 'prompt' }), tokens.prompt);
    assert.equal(m.value('floodgate_tokens_total', { provider: 'up', model: 'gpt-x', kind: 'completion' }), tokens.completion);

    assert.equal(m.value('floodgate_cache_lookups_total', { result: 'hit' }), K);
    assert.equal(m.value('floodgate_cache_lookups_total', { result: 'miss' }), N + 2 + M + 1);
    assert.equal(m.value('floodgate_cache_lookups_total', { result: 'bypass' }), 1);

    // What remains of each rule, read at scrape time.
    assert.equal(m.value('floodgate_rate_limit_remaining', { scope: 'user_path', subject: '/capped', period: 'minute', kind: 'requests' }), 0);
    assert.equal(m.value('floodgate_rate_limit_limit', { scope: 'user_path', subject: '/capped', period: 'minute', kind: 'requests' }), 2);
    assert.equal(m.value('floodgate_rate_limit_remaining', { scope: 'provider', subject: 'up', period: 'concurrent', kind: 'requests' }), 5);
    assert.ok(m.sample('floodgate_rate_limit_in_flight', { scope: 'provider', subject: 'up' }), 'the concurrent rule has its in-flight series');
    assert.equal(m.value('floodgate_rate_limit_in_flight', { scope: 'provider', subject: 'up' }), 0);
  });

  it('shows a held stream in its concurrent rule, and the slot back once it ends', async () => {
    const release = up.holdStreamNext();
    const streaming = await fetch(`${gw.url}${CHAT}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', [USER_PATH_HEADER]: '/team' },
      body: JSON.stringify(chat('up/gpt-x', 'a held stream', { stream: true })),
    });
    assert.equal(streaming.status, 200);
    const during = await scrape(gw);
    assert.equal(during.value('floodgate_rate_limit_in_flight', { scope: 'provider', subject: 'up' }), 1);
    assert.equal(during.value('floodgate_rate_limit_remaining', { scope: 'provider', subject: 'up', period: 'concurrent', kind: 'requests' }), 4);
    release();
    await streaming.text();
    // The slot goes back when the response closes, just after the client read its end.
    await eventually(async () => (await scrape(gw)).value('floodgate_rate_limit_in_flight', { scope: 'provider', subject: 'up' }) === 0, 3000, 'the slot released');
  });

  it('a rule deleted through the admin API leaves the gauges', async () => {
    const put = await gw.request('PUT', '/admin/rate-limits', { body: { user_path: '/short-lived', limit_key: { period: 'hour' }, max_requests: 7, max_tokens: 900 } });
    assert.equal(put.status, 200, put.text);
    const present = await scrape(gw);
    assert.equal(present.value('floodgate_rate_limit_remaining', { scope: 'user_path', subject: '/short-lived', period: 'hour', kind: 'requests' }), 7);
    assert.equal(present.value('floodgate_rate_limit_remaining', { scope: 'user_path', subject: '/short-lived', period: 'hour', kind: 'tokens' }), 900);
    const del = await gw.request('DELETE', '/admin/rate-limits', { body: { user_path: '/short-lived', limit_key: { period: 'hour' } } });
    assert.equal(del.status, 200, del.text);
    const gone = await scrape(gw);
    assert.ok(!gone.labelValues().includes('/short-lived'), 'no series of the deleted rule');
  });

  it('label values stay bounded: no raw URL, no caller user path, route patterns for parameters', async () => {
    const secret = randomUUID();
    assert.equal((await chatAs(gw, `/team/${secret}`, chat('up/gpt-x', `hello ${secret}`))).status, 200);
    assert.equal((await gw.request('GET', `/no/such/route/${secret}?q=${secret}`)).status, 404);
    assert.equal((await gw.request('DELETE', `/admin/api-keys/${secret}`)).status, 404);
    assert.equal((await chatAs(gw, '/team', chat(`up/${secret}`))).status, 404);
    // A passthrough body may name any model: its tokens count under "other".
    const passthrough = await gw.request('POST', '/p/open/chat/completions', { body: chat(secret, 'tokens of an unlisted model') });
    assert.equal(passthrough.status, 200, passthrough.text);
    const m = await scrape(gw);
    assert.ok(!m.text.includes(secret), 'the random value appears nowhere in the exposition');
    assert.ok(m.value('floodgate_requests_total', { endpoint: 'unmatched', status: '404' }) >= 1);
    assert.ok(m.value('floodgate_requests_total', { endpoint: '/admin/api-keys/:id', status: '404' }) >= 1);
    for (const value of m.samples('floodgate_requests_total').map((s) => s.labels?.endpoint ?? '')) {
      assert.ok(value === 'unmatched' || value.startsWith('/'), value);
      assert.ok(!value.includes('?'), value);
    }
    const { prompt_tokens: prompt } = passthrough.json().usage as { prompt_tokens: number };
    assert.equal(m.value('floodgate_tokens_total', { provider: 'open', model: 'other', kind: 'prompt' }), prompt);
    const subjects = new Set(m.samples('floodgate_rate_limit_remaining').map((s) => s.labels?.subject));
    assert.deepEqual([...subjects].sort(), ['/capped', 'up']);
  });
});

describe('GET /metrics access', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ env: { MASTER_KEY: 'sk-master-metrics' } });
  });
  after(() => gw.close());

  it('needs the master key: 401 without it or with a managed key', async () => {
    assertOpenAiError(await gw.request('GET', '/metrics'), 401, 'authentication_error');
    const created = await gw.request('POST', '/admin/api-keys', { body: { name: 'reader', user_path: '/team' }, headers: { authorization: 'Bearer sk-master-metrics' } });
    assert.equal(created.status, 201, created.text);
    assertOpenAiError(await gw.request('GET', '/metrics', { headers: { authorization: `Bearer ${created.json().key}` } }), 401, 'authentication_error');
    const m = await scrape(gw, { authorization: 'Bearer sk-master-metrics' });
    assert.equal(m.value('floodgate_requests_total', { endpoint: '/metrics', status: '401' }), 2);
  });
});

describe('GET /metrics with rate limits disabled and a realtime session', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ env: { RATE_LIMITS_ENABLED: 'false' } });
  });
  after(() => gw.close());

  it('has no rule series and counts no decisions; an upgraded session counts as a 101', async () => {
    assert.equal((await gw.request('POST', CHAT, { body: chat('mock-1') })).status, 200);
    const ws = new WebSocket(`${gw.url.replace('http', 'ws')}/v1/realtime?model=mock-1`, ['realtime']);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    ws.close();
    await new Promise((r) => ws.once('close', r));
    const m = await scrape(gw);
    assert.equal(m.value('floodgate_requests_total', { endpoint: CHAT, status: '200' }), 1);
    assert.equal(m.value('floodgate_requests_total', { endpoint: '/v1/realtime', status: '101' }), 1);
    assert.equal(m.value('floodgate_tokens_total', { provider: 'mock', model: 'mock-1', kind: 'prompt' }) > 0, true);
    assert.deepEqual(m.samples('floodgate_rate_limit_remaining'), []);
    assert.deepEqual(m.samples('floodgate_rate_limit_in_flight'), []);
    for (const sample of m.samples('floodgate_rate_limit_decisions_total')) assert.equal(Number(sample.value), 0);
  });
});

describe('GET /metrics: the process, the build and the budgets', () => {
  const MASTER = 'sk-master-budget-metrics';
  const auth = { authorization: `Bearer ${MASTER}` };
  let up: FakeUpstream;
  let gw: TestGateway;
  before(async () => {
    up = await startFakeUpstream({ name: 'up', models: ['gpt-x'] });
    const yaml = `providers:\n${openaiProvider('up', up.url, ['gpt-x'])}pricing:\n  up/gpt-x: { input_per_mtok: 1000, output_per_mtok: 1000 }\nbudgets:\n  user_paths: [ { path: /team, limits: [ { period: day, max_usd: 5 } ] } ]\n`;
    gw = await startTestGateway({ yaml, env: { MASTER_KEY: MASTER } });
  });
  after(async () => {
    await gw.close();
    await up.close();
  });

  it('has prom-client\'s process and Node.js metrics, every family prefixed floodgate_', async () => {
    const m = await scrape(gw, auth);
    for (const name of [
      'floodgate_process_cpu_user_seconds_total',
      'floodgate_process_resident_memory_bytes',
      'floodgate_nodejs_heap_size_used_bytes',
      'floodgate_nodejs_eventloop_lag_seconds',
      'floodgate_nodejs_eventloop_lag_p99_seconds',
      'floodgate_nodejs_gc_duration_seconds',
      'floodgate_nodejs_active_handles_total',
    ]) assert.ok(m.families.has(name), `${name} is exposed`);
    assert.ok(m.value('floodgate_process_resident_memory_bytes', {}) > 0);
    assert.ok(m.value('floodgate_nodejs_heap_size_used_bytes', {}) > 0);
    for (const name of m.families.keys()) assert.match(name, /^floodgate_/);
  });

  it('floodgate_build_info is 1, labelled with the gateway\'s and Node\'s versions', async () => {
    const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    const m = await scrape(gw, auth);
    assert.deepEqual(m.samples('floodgate_build_info').map((s) => [s.labels, Number(s.value)]), [[{ version, node: process.version }, 1]]);
  });

  it('one spent and one limit gauge per budget, read at scrape time, whatever the number of callers', async () => {
    const put = await gw.request('PUT', '/admin/budgets', { body: { user_path: '/ops', limit_key: { period: 'month' }, max_usd: 200 }, headers: auth });
    assert.equal(put.status, 200, put.text);
    // Many distinct callers below the budgets' paths.
    for (let i = 0; i < 25; i++) {
      const path = i % 5 === 0 ? `/ops/${randomUUID()}` : `/team/${randomUUID()}`;
      const res = await gw.request('POST', CHAT, { body: chat('up/gpt-x', `caller ${i}`), headers: { ...auth, [USER_PATH_HEADER]: path } });
      assert.equal(res.status, 200, res.text);
    }
    let budgets: Array<{ user_path: string; period_label: string; spent_usd: number; max_usd: number }> = [];
    let m = await scrape(gw, auth);
    // Spend reaches the budgets as the usage records are written.
    await eventually(async () => {
      budgets = (await gw.request('GET', '/admin/budgets', { headers: auth })).json().budgets;
      m = await scrape(gw, auth);
      return budgets.every((b) => b.spent_usd > 0 && m.value('floodgate_budget_spent_usd', { user_path: b.user_path, period: b.period_label }) === b.spent_usd);
    }, 5000, 'the spend in the gauges');
    assert.equal(budgets.length, 2);
    for (const b of budgets) {
      assert.equal(m.value('floodgate_budget_limit_usd', { user_path: b.user_path, period: b.period_label }), b.max_usd);
    }
    assert.equal(m.samples('floodgate_budget_spent_usd').length, 2);
    assert.equal(m.samples('floodgate_budget_limit_usd').length, 2);
    assert.deepEqual(m.samples('floodgate_budget_limit_usd').map((s) => s.labels?.user_path).sort(), ['/ops', '/team']);

    const deleted = await gw.request('DELETE', '/admin/budgets', { body: { user_path: '/ops', limit_key: { period: 'month' } }, headers: auth });
    assert.equal(deleted.status, 200, deleted.text);
    m = await scrape(gw, auth);
    assert.deepEqual(m.samples('floodgate_budget_limit_usd').map((s) => s.labels), [{ user_path: '/team', period: 'day' }]);
  });
});

describe('GET /metrics: request timings, failovers, and which rule refused', () => {
  let a: FakeUpstream;
  let b: FakeUpstream;
  let gw: TestGateway;
  before(async () => {
    a = await startFakeUpstream({ name: 'a', models: ['gpt-x'] });
    b = await startFakeUpstream({ name: 'b', models: ['gpt-x'] });
    const yaml = 'providers:\n' + openaiProvider('a', a.url, ['gpt-x']) + openaiProvider('b', b.url, ['gpt-x']) + [
      'failover:',
      '  a/gpt-x: [b/gpt-x]',
      'rate_limits:',
      '  user_paths: [ { path: /research, limits: [ { period: minute, max_requests: 1, per_child: true } ] } ]',
      '  providers: [ { name: b, limits: [ { period: hour, max_requests: 100 } ] } ]',
      '',
    ].join('\n');
    gw = await startTestGateway({ yaml, now: () => NOW });
  });
  after(async () => {
    await gw.close();
    await Promise.all([a.close(), b.close()]);
  });

  it('times every request end to end and to its first byte, by route pattern', async () => {
    const before = await scrape(gw);
    const chats = 3;
    for (let i = 0; i < chats; i++) assert.equal((await chatAs(gw, '/ops', chat('a/gpt-x', `timed ${i}`))).status, 200);
    const stream = await chatAs(gw, '/ops', chat('a/gpt-x', 'timed stream', { stream: true }));
    assert.equal(stream.status, 200);
    assert.equal((await gw.request('DELETE', `/admin/api-keys/${randomUUID()}`)).status, 404);
    let m = before;
    const count = (name: string, endpoint: string) => m.value(name, { endpoint }) - before.value(name, { endpoint });
    // A request's timings are observed once its usage is recorded, just after its answer.
    await eventually(async () => {
      m = await scrape(gw);
      return count('floodgate_request_duration_seconds_count', CHAT) === chats + 1;
    }, 5000, 'the chats\' durations');
    assert.equal(m.families.get('floodgate_request_duration_seconds')?.type, 'HISTOGRAM');
    assert.equal(m.families.get('floodgate_time_to_first_byte_seconds')?.type, 'HISTOGRAM');
    assert.equal(count('floodgate_time_to_first_byte_seconds_count', CHAT), chats + 1);
    assert.equal(count('floodgate_request_duration_seconds_count', '/admin/api-keys/:id'), 1);
    assert.ok(count('floodgate_request_duration_seconds_sum', CHAT) >= count('floodgate_time_to_first_byte_seconds_sum', CHAT));
    assert.ok(m.value('floodgate_request_duration_seconds_count', { endpoint: '/metrics' }) >= 1, 'scrapes are requests too');
  });

  it('counts failovers by provider/model, and refusals by the rule, never by the child it refused', async () => {
    a.failNext(2, { status: 503 });
    for (let i = 0; i < 2; i++) assert.equal((await chatAs(gw, '/ops', chat('a/gpt-x', `fail over ${i}`))).status, 200);
    for (const child of ['x', 'y', 'z']) {
      assert.equal((await chatAs(gw, `/research/${child}`, chat('a/gpt-x', `first of ${child}`))).status, 200);
      const refused = await chatAs(gw, `/research/${child}`, chat('a/gpt-x', `second of ${child}`));
      assert.equal(refused.status, 429);
      assert.match(refused.json().error.message, new RegExp(`/research/${child}: minute request limit of 1`));
    }
    const m = await scrape(gw);
    assert.deepEqual(m.samples('floodgate_failovers_total').map((s) => [s.labels, Number(s.value)]), [[{ from: 'a/gpt-x', to: 'b/gpt-x' }, 2]]);
    assert.deepEqual(m.samples('floodgate_rate_limit_refusals_total').map((s) => [s.labels, Number(s.value)]), [[{ scope: 'user_path', subject: '/research', period: 'minute' }, 3]]);
    assert.equal(m.value('floodgate_rate_limit_decisions_total', { scope: 'user_path', decision: 'refused' }), 3);
    // The per-child rule's active children, read at scrape time; its own counter counts nothing.
    assert.deepEqual(m.samples('floodgate_rate_limit_active_children').map((s) => [s.labels, Number(s.value)]), [[{ scope: 'user_path', subject: '/research', period: 'minute' }, 3]]);
    for (const value of m.labelValues()) assert.ok(!value.startsWith('/research/'), `no child in a label: ${value}`);
  });
});
