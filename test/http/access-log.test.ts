/**
 * End-to-end: the gateway's log as an operator reads it. With `logging.access` (ACCESS_LOG=true)
 * one JSON line per request, with who asked, what for, what served it, how long it took, what it
 * used and cost, how long it waited, the cache and the upstream attempts; without it only failed
 * requests, with their upstream's error text; each failover attempt in a line of its own.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway, type TestResponse } from '../support/gateway.ts';
import { openaiProvider, waitFor } from '../support/e2e.ts';

const MASTER = 'sk-master-access-log-0123456789';
const AUTH = { authorization: `Bearer ${MASTER}` };
const USER_PATH = 'x-floodgate-user-path';
const CHAT = '/v1/chat/completions';
/** Dollars per million tokens, so that each token costs a visible amount. */
const INPUT_PER_MTOK = 1000;
const OUTPUT_PER_MTOK = 3000;
/** The fields every request line carries, in this order (pino's own come first, `msg` last). */
const FIELDS = [
  'request_id', 'user_path', 'key_id', 'method', 'endpoint', 'model', 'provider', 'executed_model', 'status', 'duration_ms', 'ttfb_ms',
  'prompt_tokens', 'completion_tokens', 'cost_usd', 'wait_ms', 'cache', 'attempts',
];

type Line = Record<string, unknown>;

function chat(model: string, content: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { model, messages: [{ role: 'user', content }], ...extra };
}

/** The line of the request answered with this id, once written (after its usage is recorded). */
async function lineOf(gw: TestGateway, requestId: string): Promise<Line> {
  let found: Line | undefined;
  await waitFor(() => (found = gw.logs.find((l) => l.request_id === requestId && (l.msg === 'request' || l.msg === 'request failed'))) !== undefined, 5000, `the log line of ${requestId}`);
  return found!;
}

function fieldsOf(line: Line): string[] {
  return Object.keys(line).filter((k) => !['level', 'time', 'service', 'reqId', 'msg', 'error'].includes(k));
}

function usageOf(res: TestResponse): { prompt: number; completion: number } {
  const usage = res.json().usage as { prompt_tokens: number; completion_tokens: number };
  return { prompt: usage.prompt_tokens, completion: usage.completion_tokens };
}

function priced(prompt: number, completion: number): number {
  return (prompt * INPUT_PER_MTOK + completion * OUTPUT_PER_MTOK) / 1_000_000;
}

function gatewayYaml(a: FakeUpstream, b: FakeUpstream, c: FakeUpstream, s: FakeUpstream): string {
  return 'providers:\n' + openaiProvider('a', a.url, ['m1']) + openaiProvider('b', b.url, ['m1']) + openaiProvider('c', c.url, ['m1']) + openaiProvider('s', s.url, ['m1']) + [
    'failover:',
    '  a/m1: [b/m1, c/m1]',
    'pricing:',
    ...['a', 'b', 'c', 's'].map((p) => `  "${p}/m1": { input_per_mtok: ${INPUT_PER_MTOK}, output_per_mtok: ${OUTPUT_PER_MTOK} }`),
    'cache:',
    '  response: { enabled: true, ttl_seconds: 600, max_entries: 100 }',
    'rate_limits:',
    '  user_paths:',
    '    - { path: /capped, limits: [ { period: minute, max_requests: 1 } ] }',
    '    - { path: /one-at-a-time, limits: [ { period: concurrent, max_requests: 1 } ] }',
    '',
  ].join('\n');
}

/** Upstreams a, b and c (a fails over to b, then c) and s, and a gateway in front of them that keeps its log. */
interface World {
  a: FakeUpstream;
  b: FakeUpstream;
  c: FakeUpstream;
  s: FakeUpstream;
  gw: TestGateway;
  close(): Promise<void>;
}

async function startWorld(env: Record<string, string>, streamChunkDelayMs = 0): Promise<World> {
  const [a, b, c, s] = await Promise.all([
    startFakeUpstream({ name: 'a', models: ['m1'] }),
    startFakeUpstream({ name: 'b', models: ['m1'] }),
    startFakeUpstream({ name: 'c', models: ['m1'] }),
    startFakeUpstream({ name: 's', models: ['m1'], chunkDelayMs: streamChunkDelayMs }),
  ]);
  const gw = await startTestGateway({ yaml: gatewayYaml(a, b, c, s), env: { MASTER_KEY: MASTER, ...env }, logs: true });
  return {
    a, b, c, s, gw,
    async close() {
      await gw.close();
      await Promise.all([a, b, c, s].map((u) => u.close()));
    },
  };
}

describe('the access log (ACCESS_LOG=true)', () => {
  let world: World;
  let a: FakeUpstream;
  let b: FakeUpstream;
  /** Streams slowly: its first event comes well before its last. */
  let s: FakeUpstream;
  let gw: TestGateway;

  before(async () => {
    world = await startWorld({ ACCESS_LOG: 'true' }, 60);
    ({ a, b, s, gw } = world);
  });
  after(() => world?.close());

  it('one line per request: who, what, what served it, timings, tokens, cost, wait, cache and attempts', async () => {
    const created = await gw.request('POST', '/admin/api-keys', { body: { name: 'alice', user_path: '/team/alice' }, headers: AUTH });
    assert.equal(created.status, 201, created.text);
    const { id: keyId, key: secret } = created.json() as { id: string; key: string };
    const res = await gw.request('POST', CHAT, { body: chat('a/m1', 'one line per request'), headers: { authorization: `Bearer ${secret}`, 'x-request-id': 'acc-buffered' } });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.headers.get('x-request-id'), 'acc-buffered');
    const line = await lineOf(gw, 'acc-buffered');
    assert.deepEqual(fieldsOf(line), FIELDS);
    assert.equal(line.msg, 'request');
    assert.equal(line.level, 30, 'info');
    const { prompt, completion } = usageOf(res);
    assert.deepEqual(
      { ...line, duration_ms: undefined, ttfb_ms: undefined, time: undefined, reqId: undefined },
      {
        level: 30, service: 'floodgate', msg: 'request', time: undefined, reqId: undefined,
        request_id: 'acc-buffered', user_path: '/team/alice', key_id: keyId, method: 'POST', endpoint: CHAT,
        model: 'a/m1', provider: 'a', executed_model: 'm1', status: 200, duration_ms: undefined, ttfb_ms: undefined,
        prompt_tokens: prompt, completion_tokens: completion, cost_usd: priced(prompt, completion), wait_ms: 0, cache: 'miss', attempts: 1,
      },
    );
    assert.equal(typeof line.duration_ms, 'number');
    assert.equal(typeof line.ttfb_ms, 'number');
    assert.ok((line.ttfb_ms as number) >= 0 && (line.ttfb_ms as number) <= (line.duration_ms as number), JSON.stringify(line));
    // The cost is the usage record's, as the usage view sums it.
    const usage = await gw.request('GET', '/admin/usage?group_by=user_path', { headers: AUTH });
    const bucket = (usage.json().buckets as Array<{ key: string; cost_usd: number }>).find((row) => row.key === '/team/alice');
    assert.equal(bucket?.cost_usd, line.cost_usd);
  });

  it('a stream\'s time to first byte is its first event; its duration runs to its last', async () => {
    const res = await gw.request('POST', CHAT, { body: chat('s/m1', 'a slow stream of several words', { stream: true, stream_options: { include_usage: true } }), headers: { ...AUTH, 'x-request-id': 'acc-stream' } });
    assert.equal(res.status, 200, res.text);
    assert.match(res.text, /data: \[DONE\]/);
    const events = res.text.split('\n\n').filter((e) => e.startsWith('data: {')).length;
    assert.ok(events >= 4, res.text);
    const line = await lineOf(gw, 'acc-stream');
    assert.equal(line.status, 200);
    assert.equal(typeof line.ttfb_ms, 'number');
    assert.equal(line.provider, 's');
    assert.equal(line.cache, null, 'a stream is not cacheable');
    // Every event after the first comes at least 60 ms after the one before it.
    assert.ok((line.duration_ms as number) - (line.ttfb_ms as number) >= 60 * (events - 2), JSON.stringify(line));
    assert.ok((line.prompt_tokens as number) > 0 && (line.completion_tokens as number) > 0, JSON.stringify(line));
  });

  it('a cache hit: cache "hit", no upstream attempt, the provider and model that made the cached answer, no tokens', async () => {
    const body = chat('a/m1', 'cache me');
    assert.equal((await gw.request('POST', CHAT, { body, headers: { ...AUTH, 'x-request-id': 'acc-miss' } })).status, 200);
    const hit = await gw.request('POST', CHAT, { body, headers: { ...AUTH, 'x-request-id': 'acc-hit' } });
    assert.equal(hit.headers.get('x-floodgate-cache'), 'hit');
    const line = await lineOf(gw, 'acc-hit');
    assert.deepEqual(
      [line.cache, line.attempts, line.provider, line.executed_model, line.prompt_tokens, line.completion_tokens, line.cost_usd],
      ['hit', 0, 'a', 'm1', null, null, 0],
    );
    assert.equal((await lineOf(gw, 'acc-miss')).cache, 'miss');
  });

  it('failover: a line per failed attempt as it happens, and the request\'s line counts the attempts', async () => {
    a.failNext(1, { status: 500, body: { error: { message: 'a is down', type: 'server_error' } } });
    b.failNext(1, { status: 503, body: { error: { message: 'b is overloaded', type: 'server_error' } } });
    const res = await gw.request('POST', CHAT, { body: chat('a/m1', 'fail over twice'), headers: { ...AUTH, [USER_PATH]: '/team/bob', 'x-request-id': 'acc-failover' } });
    assert.equal(res.status, 200, res.text);
    const line = await lineOf(gw, 'acc-failover');
    assert.deepEqual([line.status, line.provider, line.executed_model, line.attempts], [200, 'c', 'm1', 3]);
    const attempts = gw.logs.filter((l) => l.request_id === 'acc-failover' && l.msg === 'upstream attempt failed: failing over');
    assert.deepEqual(
      attempts.map((l) => ({ level: l.level, user_path: l.user_path, model: l.model, from: l.from, to: l.to, status: l.status, error: l.error })),
      [
        { level: 30, user_path: '/team/bob', model: 'a/m1', from: 'a/m1', to: 'b/m1', status: 500, error: 'a is down' },
        { level: 30, user_path: '/team/bob', model: 'a/m1', from: 'b/m1', to: 'c/m1', status: 503, error: 'b is overloaded' },
      ],
    );
  });

  it('a refusal: status 429, the refusal\'s message, no attempt', async () => {
    assert.equal((await gw.request('POST', CHAT, { body: chat('a/m1', 'first'), headers: { ...AUTH, [USER_PATH]: '/capped' } })).status, 200);
    const res = await gw.request('POST', CHAT, { body: chat('a/m1', 'second'), headers: { ...AUTH, [USER_PATH]: '/capped', 'x-request-id': 'acc-429' } });
    assert.equal(res.status, 429);
    const line = await lineOf(gw, 'acc-429');
    assert.equal(line.msg, 'request failed');
    assert.deepEqual(
      [line.status, line.user_path, line.model, line.provider, line.executed_model, line.attempts, line.prompt_tokens, line.error],
      [429, '/capped', 'a/m1', null, null, 0, null, 'rate limit exceeded for /capped: minute request limit of 1 reached'],
    );
  });

  it('a request that waited for capacity says how long, as its answer\'s header does', async () => {
    const release = s.holdStreamNext();
    // Its headers come with its first event: from then on it holds the one slot.
    const holder = await fetch(gw.url + CHAT, { method: 'POST', headers: { ...AUTH, [USER_PATH]: '/one-at-a-time', 'content-type': 'application/json' }, body: JSON.stringify(chat('s/m1', 'hold', { stream: true })) });
    assert.equal(holder.status, 200);
    const waiting = gw.request('POST', CHAT, { body: chat('a/m1', 'wait for it'), headers: { ...AUTH, [USER_PATH]: '/one-at-a-time', 'x-floodgate-max-wait': '10', 'x-request-id': 'acc-wait' } });
    await new Promise((resolve) => setTimeout(resolve, 100));
    release();
    await holder.text();
    const res = await waiting;
    assert.equal(res.status, 200, res.text);
    const header = Number(res.headers.get('x-floodgate-queue-wait-ms'));
    assert.ok(header >= 100, `waited ${header} ms`);
    assert.equal((await lineOf(gw, 'acc-wait')).wait_ms, header);
  });

  it('every request has its line: an admin read, a 404, a health probe', async () => {
    await gw.request('GET', '/admin/rate-limits', { headers: { ...AUTH, 'x-request-id': 'acc-admin' } });
    await gw.request('GET', '/nowhere', { headers: { 'x-request-id': 'acc-404' } });
    await gw.request('GET', '/health', { headers: { 'x-request-id': 'acc-health' } });
    const admin = await lineOf(gw, 'acc-admin');
    assert.deepEqual([admin.msg, admin.endpoint, admin.status, admin.user_path, admin.model, admin.attempts], ['request', '/admin/rate-limits', 200, '/', null, 0]);
    const missing = await lineOf(gw, 'acc-404');
    assert.deepEqual([missing.msg, missing.endpoint, missing.status, missing.user_path, missing.error], ['request failed', 'unmatched', 404, null, 'no route for GET /nowhere']);
    assert.equal((await lineOf(gw, 'acc-health')).endpoint, '/health');
  });

  it('a client that leaves mid-stream: status 499', async () => {
    const release = s.holdStreamNext();
    const abort = new AbortController();
    const res = await fetch(gw.url + CHAT, { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json', 'x-request-id': 'acc-gone' }, body: JSON.stringify(chat('s/m1', 'leave', { stream: true })), signal: abort.signal });
    const reader = res.body!.getReader();
    await reader.read();
    abort.abort();
    const line = await lineOf(gw, 'acc-gone');
    release();
    assert.deepEqual([line.msg, line.status, line.provider, line.attempts], ['request failed', 499, 's', 1]);
    assert.equal(typeof line.ttfb_ms, 'number', 'its first byte went out');
  });
});

describe('without the access log: failed requests only', () => {
  let world: World;
  let a: FakeUpstream;
  let b: FakeUpstream;
  let c: FakeUpstream;
  let s: FakeUpstream;
  let gw: TestGateway;

  before(async () => {
    world = await startWorld({});
    ({ a, b, c, s, gw } = world);
  });
  after(() => world?.close());

  it('a successful request writes no line', async () => {
    const res = await gw.request('POST', CHAT, { body: chat('a/m1', 'quiet'), headers: { ...AUTH, 'x-request-id': 'quiet-1' } });
    assert.equal(res.status, 200);
    // A failed request after it: once its line is there, the successful one's would have been too.
    await gw.request('POST', CHAT, { body: chat('a/nope', 'x'), headers: { ...AUTH, 'x-request-id': 'quiet-2' } });
    await lineOf(gw, 'quiet-2');
    assert.deepEqual(gw.logs.filter((l) => l.request_id === 'quiet-1'), []);
  });

  it('three upstream 500s: a line per failover and the failure with user path, model, provider, upstream status and error text', async () => {
    a.failNext(1, { status: 500, body: { error: { message: 'a failed', type: 'server_error' } } });
    b.failNext(1, { status: 500, body: { error: { message: 'b failed', type: 'server_error' } } });
    c.failNext(1, { status: 500, body: { error: { message: 'c failed: upstream exploded', type: 'server_error' } } });
    const res = await gw.request('POST', CHAT, { body: chat('a/m1', 'all fail'), headers: { ...AUTH, [USER_PATH]: '/team/carol', 'x-request-id': 'fail-3' } });
    assert.equal(res.status, 500);
    const lines = gw.logs.filter((l) => l.request_id === 'fail-3');
    await lineOf(gw, 'fail-3');
    const failed = gw.logs.filter((l) => l.request_id === 'fail-3');
    assert.deepEqual(failed.map((l) => l.msg), ['upstream attempt failed: failing over', 'upstream attempt failed: failing over', 'request failed'], JSON.stringify(lines));
    const last = failed[2]!;
    assert.equal(last.level, 40, 'a 5xx is a warning');
    assert.deepEqual(
      [last.user_path, last.model, last.provider, last.executed_model, last.status, last.attempts, last.error],
      ['/team/carol', 'a/m1', 'c', 'm1', 500, 3, 'c failed: upstream exploded'],
    );
    assert.deepEqual(failed.slice(0, 2).map((l) => [l.from, l.to, l.error]), [['a/m1', 'b/m1', 'a failed'], ['b/m1', 'c/m1', 'b failed']]);
  });

  it('an upstream 4xx relayed to the client is logged with its text', async () => {
    a.failNext(1, { status: 400, body: { error: { message: 'messages: too long for this model', type: 'invalid_request_error' } } });
    const res = await gw.request('POST', CHAT, { body: chat('a/m1', 'too long'), headers: { ...AUTH, 'x-request-id': 'fail-400' } });
    assert.equal(res.status, 400);
    const line = await lineOf(gw, 'fail-400');
    assert.deepEqual([line.msg, line.level, line.provider, line.status, line.error], ['request failed', 30, 'a', 400, 'messages: too long for this model']);
  });

  it('a stream that breaks after its headers: its line says so', async () => {
    s.dropStreamNext(1);
    const res = await gw.request('POST', CHAT, { body: chat('s/m1', 'one two three four five six', { stream: true }), headers: { ...AUTH, 'x-request-id': 'fail-stream' } });
    assert.equal(res.status, 200, 'the headers had gone out');
    const line = await lineOf(gw, 'fail-stream');
    assert.equal(line.msg, 'request failed');
    assert.equal(line.provider, 's');
    assert.ok((line.status as number) >= 500, JSON.stringify(line));
    assert.match(String(line.error), /^upstream stream failed: /);
  });
});

describe('the access line of a realtime session', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ env: { MASTER_KEY: MASTER, ACCESS_LOG: 'true' }, logs: true });
  });
  after(() => gw?.close());

  it('is written when the session ends, with status 101 and every response\'s tokens', async () => {
    const ws = new WebSocket(`${gw.url.replace('http', 'ws')}/v1/realtime?model=mock-1`, [], { headers: { ...AUTH, [USER_PATH]: '/voice', 'x-request-id': 'acc-realtime' } });
    const events: Array<{ type: string; response?: { usage?: { input_tokens: number; output_tokens: number } } }> = [];
    ws.on('message', (data) => events.push(JSON.parse(data.toString()) as (typeof events)[number]));
    await new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    for (const text of ['hello there', 'and once more']) {
      ws.send(JSON.stringify({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } }));
      ws.send(JSON.stringify({ type: 'response.create' }));
      const done = events.filter((e) => e.type === 'response.done').length + 1;
      await waitFor(() => events.filter((e) => e.type === 'response.done').length === done, 5000, 'the response');
    }
    assert.equal(gw.logs.some((l) => l.request_id === 'acc-realtime' && l.msg === 'request'), false, 'not before the session ends');
    ws.close();
    const line = await lineOf(gw, 'acc-realtime');
    const usage = events.filter((e) => e.type === 'response.done').map((e) => e.response!.usage!);
    assert.deepEqual(
      [line.msg, line.status, line.endpoint, line.user_path, line.model, line.provider, line.executed_model, line.attempts, line.ttfb_ms],
      ['request', 101, '/v1/realtime', '/voice', 'mock-1', 'mock', 'mock-1', 1, null],
    );
    assert.equal(line.prompt_tokens, usage.reduce((sum, u) => sum + u.input_tokens, 0));
    assert.equal(line.completion_tokens, usage.reduce((sum, u) => sum + u.output_tokens, 0));
  });
});
