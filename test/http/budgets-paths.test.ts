/**
 * Budgets on every path a request can spend through, not only at a request's admission: before
 * each line of a batch the gateway runs, before each response of a realtime session (the ones
 * the client asks for and the ones the upstream starts by itself), on streams cut before their
 * usage report (charged an estimate), and on passthrough bodies whatever their content type.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import WebSocket from 'ws';
import { openaiProvider } from '../support/e2e.ts';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startFixedUsageUpstream, type FixedUsageUpstream } from '../support/fixed-usage-upstream.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';
import { eventually } from '../support/rate-limits.ts';

const MASTER = 'budget-paths-master';
const as = (userPath: string) => ({ authorization: `Bearer ${MASTER}`, 'x-floodgate-user-path': userPath });
/** $0.10 a token, in and out. */
const DIME_PER_TOKEN = '{ input_per_mtok: 100000, output_per_mtok: 100000 }';
const budget = (path: string, maxUsd: number) => `  - { path: ${path}, limits: [ { period: day, max_usd: ${maxUsd} } ] }\n`;

async function usageOf(gw: TestGateway, userPath: string): Promise<any> {
  const res = await gw.request('GET', '/v1/usage', { headers: as(userPath) });
  assert.equal(res.status, 200, res.text);
  return res.json();
}

type Event = { type: string; [k: string]: unknown };

/** A realtime session on the gateway; its events are collected from the start. */
async function session(gw: TestGateway, model: string, userPath: string): Promise<{ ws: WebSocket; events: Event[] }> {
  const ws = new WebSocket(`${gw.url.replace('http', 'ws')}/v1/realtime?model=${model}`, ['realtime'], { headers: as(userPath) });
  const events: Event[] = [];
  ws.on('message', (d) => events.push(JSON.parse(d.toString()) as Event));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  return { ws, events };
}

const closed = (ws: WebSocket): Promise<void> => new Promise((r) => (ws.readyState === WebSocket.CLOSED ? r() : (ws.once('close', () => r()), ws.close())));

describe('budgets: each line of a batch the gateway runs', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({
      env: { MASTER_KEY: MASTER },
      yaml: `pricing:\n  mock/mock-1: ${DIME_PER_TOKEN}\nbudgets:\n  user_paths:\n${budget('/b', 50)}`,
    });
  });
  after(async () => gw?.close());

  it('runs lines until the budget is reached, then fails each further line with 429 budget_exceeded', async () => {
    // 400 characters in and echoed out: 100 + 100 tokens, $20 a line.
    const line = (i: number) => JSON.stringify({ custom_id: `line-${i}`, method: 'POST', url: '/v1/chat/completions', body: { model: 'mock-1', messages: [{ role: 'user', content: 'x'.repeat(400) }] } });
    const form = new FormData();
    form.append('purpose', 'batch');
    form.append('file', new Blob([Array.from({ length: 100 }, (_, i) => line(i)).join('\n') + '\n']), 'input.jsonl');
    const uploaded = await fetch(`${gw.url}/v1/files`, { method: 'POST', body: form, headers: as('/b') });
    assert.equal(uploaded.status, 200);
    const { id } = (await uploaded.json()) as { id: string };
    const created = await gw.request('POST', '/v1/batches', { body: { input_file_id: id, endpoint: '/v1/chat/completions', completion_window: '24h' }, headers: as('/b') });
    assert.equal(created.status, 200, created.text);
    let batch: any;
    await eventually(async () => {
      batch = (await gw.request('GET', `/v1/batches/${created.json().id}`, { headers: as('/b') })).json();
      return batch.status === 'completed';
    }, 10_000, 'the batch to complete');

    // $20, $40, then $60 (one line overshoots, like one request does): the fourth line is refused.
    assert.deepEqual(batch.request_counts, { total: 100, completed: 3, failed: 97 });
    const errors = (await gw.request('GET', `/v1/files/${batch.error_file_id}/content`, { headers: as('/b') })).text.trim().split('\n').map((l) => JSON.parse(l));
    assert.equal(errors.length, 97);
    assert.deepEqual(errors[0].response.status_code, 429);
    assert.deepEqual(errors[0].response.body.error, { message: 'budget exceeded for /b: day budget of $50.00 reached', type: 'rate_limit_error', param: null, code: 'budget_exceeded' });
    assert.equal(errors[0].custom_id, 'line-3');
    const usage = await usageOf(gw, '/b');
    assert.equal(usage.totals.requests, 3, 'refused lines ran nothing and record nothing');
    assert.equal(usage.budgets[0].spent_usd, 60);
  });
});

describe('budgets: each response of a realtime session', () => {
  let gw: TestGateway;
  let up: FakeUpstream;
  before(async () => {
    up = await startFakeUpstream({ apiKey: 'k-up', name: 'up', models: ['gpt-rt'] });
    gw = await startTestGateway({
      env: { MASTER_KEY: MASTER },
      yaml: `providers:\n${openaiProvider('up', up.url, ['gpt-rt'])}  mock: { type: mock }\npricing:\n  mock/mock-1: ${DIME_PER_TOKEN}\n  up/gpt-rt: ${DIME_PER_TOKEN}\nbudgets:\n  user_paths:\n${budget('/rt', 5)}${budget('/vad', 1)}`,
    });
  });
  after(async () => {
    await gw?.close();
    await up?.close();
  });

  it('refuses a response.create once the budget is reached, with an error event, and keeps the session open', async () => {
    const { ws, events } = await session(gw, 'mock/mock-1', '/rt');
    // 200 characters in and echoed out: 50 + 50 tokens, $10 a response.
    ws.send(JSON.stringify({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'word '.repeat(40) }] } }));
    ws.send(JSON.stringify({ type: 'response.create', event_id: 'evt-1' }));
    await eventually(async () => events.some((e) => e.type === 'response.done'), 5000, 'the first response');
    ws.send(JSON.stringify({ type: 'response.create', event_id: 'evt-2' }));
    await eventually(async () => events.some((e) => e.type === 'error'), 5000, 'the refusal');
    const refusal = events.find((e) => e.type === 'error')!;
    assert.deepEqual(refusal.error, { type: 'rate_limit_error', code: 'budget_exceeded', message: 'budget exceeded for /rt: day budget of $5.00 reached', param: null, event_id: 'evt-2' });
    // The session stays open; nothing more runs or is spent.
    ws.send(JSON.stringify({ type: 'session.update', session: {} }));
    await eventually(async () => events.some((e) => e.type === 'session.updated'), 5000, 'the session to answer');
    assert.equal(events.filter((e) => e.type === 'response.done').length, 1);
    await closed(ws);
    const usage = await usageOf(gw, '/rt');
    assert.equal(usage.totals.requests, 1);
    assert.equal(usage.budgets[0].spent_usd, 10);
  });

  it('cancels a response the upstream starts by itself once the budget is reached', async () => {
    const { ws, events } = await session(gw, 'up/gpt-rt', '/vad');
    // 12 tokens at $0.10: $1.20 against a $1 budget.
    ws.send(JSON.stringify({ type: 'response.create' }));
    await eventually(async () => events.some((e) => e.type === 'response.done'), 5000, 'the first response');
    up.realtime.respondUnprompted(200);
    await eventually(async () => events.filter((e) => e.type === 'response.done').length === 2, 5000, 'the second response to end');
    const upstream = up.realtime.sessions.at(-1)!;
    assert.ok(upstream.received.some((e) => (e as Event).type === 'response.cancel' && (e as Event).response_id === 'resp_vad_1'), JSON.stringify(upstream.received));
    assert.ok(events.some((e) => e.type === 'error' && (e.error as Event).code === 'budget_exceeded'));
    await closed(ws);
    const usage = await usageOf(gw, '/vad');
    assert.equal(usage.totals.requests, 1, 'the cancelled response reported no usage');
    assert.equal(usage.budgets[0].spent_usd, 1.2);
  });
});

describe('budgets and token windows: streams cut before their usage report', () => {
  let gw: TestGateway;
  let up: FakeUpstream;
  const words = Array.from({ length: 60 }, (_, i) => `word${i}`).join(' ');
  before(async () => {
    up = await startFakeUpstream({ name: 'up', chunkDelayMs: 30 });
    gw = await startTestGateway({
      env: { MASTER_KEY: MASTER },
      yaml: `providers:\n${openaiProvider('up', up.url, ['gpt-x'])}pricing:\n  up/gpt-x: { input_per_mtok: 1000, output_per_mtok: 1000 }\nbudgets:\n  user_paths:\n${budget('/ab', 1000)}rate_limits:\n  user_paths: [ { path: /ab, limits: [ { period: hour, max_tokens: 1000000 } ] } ]\n`,
    });
  });
  after(async () => {
    await gw?.close();
    await up?.close();
  });

  /** Starts a stream, reads until some content arrived, then leaves; resolves with the text read. */
  async function abortedStream(userPath: string): Promise<string> {
    const controller = new AbortController();
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...as(userPath), 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'up/gpt-x', stream: true, messages: [{ role: 'user', content: words }] }),
      signal: controller.signal,
    });
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    let text = '';
    while (!/word3/.test(text)) text += new TextDecoder().decode((await reader.read()).value);
    controller.abort();
    await reader.cancel().catch(() => {});
    return text;
  }

  it('charges each an estimate: the prompt counted from the request, the completion from the content relayed', async () => {
    for (let i = 0; i < 6; i++) await abortedStream('/ab');
    let usage: any;
    await eventually(async () => (usage = await usageOf(gw, '/ab')).totals.requests === 6, 5000, 'six usage records');
    assert.equal(usage.totals.estimated_requests, 6);
    // Six times the chat's prompt: its text, 3 tokens for the message, 3 priming the reply.
    assert.equal(usage.totals.prompt_tokens, 6 * (countTokens(words) + 3 + 3));
    // Some of the reply was relayed before each abort, never all of it.
    assert.ok(usage.totals.completion_tokens >= 6 * countTokens('word0 word1 word2 word3'), JSON.stringify(usage.totals));
    assert.ok(usage.totals.completion_tokens < 6 * countTokens(words), JSON.stringify(usage.totals));
    const total = usage.totals.prompt_tokens + usage.totals.completion_tokens;
    assert.equal(usage.budgets[0].spent_usd, Math.round(total * 0.001 * 1e9) / 1e9);
    const window = usage.rate_limits.find((r: any) => r.max_tokens !== undefined);
    assert.equal(window.tokens_used, total);
  });
});

describe('budgets and model rules: passthrough bodies whatever their content type', () => {
  let gw: TestGateway;
  let up: FixedUsageUpstream;
  before(async () => {
    up = await startFixedUsageUpstream();
    up.setUsage({ prompt_tokens: 1000, completion_tokens: 1000, total_tokens: 2000 });
    up.answerModel = 'gpt-x';
    gw = await startTestGateway({
      env: { MASTER_KEY: MASTER },
      yaml: `providers:\n${openaiProvider('up', up.url, ['gpt-x', 'gpt-y'])}pricing:\n  up/gpt-x: { input_per_mtok: 1000, output_per_mtok: 1000 }\n  up/gpt-y: { input_per_mtok: 1000, output_per_mtok: 1000 }\nrate_limits:\n  models: [ { model: up/gpt-y, limits: [ { period: minute, max_requests: 1 } ] } ]\n`,
    });
  });
  after(async () => {
    await gw?.close();
    await up?.close();
  });

  it('reads the model of a JSON body sent as text/plain: its model rule applies and it is priced', async () => {
    const send = () => gw.request('POST', '/p/up/chat/completions', {
      body: JSON.stringify({ model: 'gpt-y', messages: [{ role: 'user', content: 'hi' }] }),
      headers: { ...as('/plain'), 'content-type': 'text/plain' },
    });
    assert.equal((await send()).status, 200);
    const second = await send();
    assert.equal(second.status, 429, second.text);
    assert.match(second.json().error.message, /gpt-y/);
    const usage = await usageOf(gw, '/plain');
    assert.deepEqual(usage.by_model.map((r: any) => [r.model, r.requests, r.cost_usd]), [['gpt-y', 1, 2]]);
  });

  it('reads the model of a multipart form', async () => {
    const form = new FormData();
    form.append('model', 'gpt-y');
    form.append('file', new Blob(['audio']), 'a.wav');
    const res = await fetch(`${gw.url}/p/up/audio/transcriptions`, { method: 'POST', body: form, headers: as('/form') });
    assert.equal(res.status, 429, 'the model rule of gpt-y, used up by the test before, refuses it');
  });

  it('prices a request without a model by the model its answer names', async () => {
    const res = await gw.request('GET', '/p/up/some/thing', { headers: as('/answer') });
    assert.equal(res.status, 200, res.text);
    const usage = await usageOf(gw, '/answer');
    assert.deepEqual(usage.by_model.map((r: any) => [r.model, r.requests, r.cost_usd]), [['gpt-x', 1, 2]]);
  });
});
