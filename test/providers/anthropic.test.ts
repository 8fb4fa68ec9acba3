import { test, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { anthropicProviderType } from '../../src/providers/anthropic.ts';
import { UpstreamUnavailableError } from '../../src/providers/types.ts';
import type { ProviderCall } from '../../src/providers/types.ts';
import { startFakeUpstream } from '../support/fake-upstream.ts';
import { bodyOf, jsonOf, never, sseData, sseEvents, streamOf, waitFor } from './helpers.ts';
import { Cancellation } from '../../src/providers/cancellation.ts';

const fake = await startFakeUpstream({ apiKey: 'ant-key', name: 'ant' });
// A trailing /v1 in base_url is accepted.
const provider = anthropicProviderType.create('ant', { base_url: `${fake.url}/v1/`, api_key: 'ant-key', timeout_ms: 2000 });
after(async () => {
  await provider.close();
  await fake.close();
});
beforeEach(() => fake.reset());

const messages = (extra: Record<string, unknown> = {}, headers?: Record<string, string>): ProviderCall => ({
  endpoint: 'messages', model: 'claude-x', stream: extra.stream === true, cancel: never(), headers,
  json: { model: 'claude-x', max_tokens: 100, messages: [{ role: 'user', content: 'hello claude' }], ...extra },
});

test('base_url with or without a trailing /v1 reaches the same paths', async () => {
  const bare = anthropicProviderType.create('ant', { base_url: fake.url, api_key: 'ant-key', timeout_ms: 2000 });
  try {
    await bodyOf(await bare.call(messages()));
    await bodyOf(await provider.call(messages()));
    assert.deepEqual(fake.calls.map((c) => c.path), ['/v1/messages', '/v1/messages']);
  } finally {
    await bare.close();
  }
});

test('native messages: headers, original bytes, usage', async () => {
  const r = await provider.call(messages());
  assert.equal(r.status, 200);
  const body = await jsonOf(r);
  assert.deepEqual(body.content, [{ type: 'text', text: 'hello claude' }]);
  assert.deepEqual(r.usage(), { promptTokens: 3, completionTokens: 3, totalTokens: 6 });
  const c = fake.calls[0];
  assert.equal(c?.path, '/v1/messages');
  assert.equal(c?.headers['x-api-key'], 'ant-key');
  assert.equal(c?.headers['anthropic-version'], '2023-06-01');
  assert.equal(c?.headers.authorization, undefined);
});

test('client anthropic-version and anthropic-beta are kept', async () => {
  await bodyOf(await provider.call(messages({}, { 'anthropic-version': '2024-01-01', 'anthropic-beta': 'tools-2024' })));
  assert.equal(fake.calls[0]?.headers['anthropic-version'], '2024-01-01');
  assert.equal(fake.calls[0]?.headers['anthropic-beta'], 'tools-2024');
});

test('native stream: passed through chunk by chunk, usage from message_start + message_delta', async () => {
  const release = fake.holdStreamNext();
  const r = await provider.call(messages({ stream: true }));
  const it = streamOf(r)[Symbol.asyncIterator]();
  const first = await it.next();
  assert.match(first.value?.toString() ?? '', /message_start/);
  release();
  let text = first.value?.toString() ?? '';
  for (let n = await it.next(); !n.done; n = await it.next()) text += n.value.toString();
  assert.deepEqual(sseEvents(text).map((e) => e.event).at(-1), 'message_stop');
  assert.deepEqual(r.usage(), { promptTokens: 3, completionTokens: 3, totalTokens: 6 });
});

test('errors pass through as results', async () => {
  fake.failNext(1, { status: 529 });
  const r = await provider.call(messages());
  assert.equal(r.status, 529);
  assert.equal(((await jsonOf(r)).error as { type: string }).type, 'overloaded_error');
});

test('chat completions translated to Messages and back', async () => {
  const r = await provider.call({
    endpoint: 'chat', model: 'claude-x', stream: false, cancel: never(),
    json: { model: 'claude-x', messages: [{ role: 'system', content: 'sys' }, { role: 'user', content: 'abcd efgh' }], stop: 'END', temperature: 0.5 },
  });
  const sent = fake.calls[0]?.body as Record<string, unknown>;
  assert.equal(sent.system, 'sys');
  assert.equal(sent.max_tokens, 4096);
  assert.deepEqual(sent.stop_sequences, ['END']);
  assert.equal(sent.temperature, 0.5);
  const body = await jsonOf(r);
  assert.equal(body.object, 'chat.completion');
  const choice = (body.choices as Array<Record<string, unknown>>)[0];
  assert.deepEqual(choice?.message, { role: 'assistant', content: 'abcd efgh', refusal: null });
  assert.equal(choice?.finish_reason, 'stop');
  assert.deepEqual(body.usage, { prompt_tokens: 3, completion_tokens: 3, total_tokens: 6 });
  assert.deepEqual(r.usage(), { promptTokens: 3, completionTokens: 3, totalTokens: 6 });
});

test('chat stream translated, usage chunk only when asked', async () => {
  const base = { endpoint: 'chat' as const, model: 'claude-x', stream: true, cancel: never() };
  const json = { model: 'claude-x', stream: true, messages: [{ role: 'user', content: 'one two' }] };
  const plain = await provider.call({ ...base, json });
  const data = sseData((await bodyOf(plain)).toString());
  assert.equal(data.at(-1), '[DONE]');
  const chunks = data.slice(0, -1) as Array<Record<string, unknown>>;
  assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk' && (c.choices as unknown[]).length === 1));
  const text = chunks.map((c) => ((c.choices as Array<{ delta: { content?: string } }>)[0]?.delta.content ?? '')).join('');
  assert.equal(text, 'one two');
  assert.equal((chunks.at(-1)?.choices as Array<{ finish_reason: string }>)[0]?.finish_reason, 'stop');
  assert.deepEqual(plain.usage(), { promptTokens: 2, completionTokens: 2, totalTokens: 4 });

  const withUsage = await provider.call({ ...base, json: { ...json, stream_options: { include_usage: true } } });
  const d2 = sseData((await bodyOf(withUsage)).toString());
  assert.deepEqual((d2.at(-2) as Record<string, unknown>).usage, { prompt_tokens: 2, completion_tokens: 2, total_tokens: 4 });
});

test('chat error translated to the OpenAI shape', async () => {
  fake.failNext(1, { status: 429 });
  const r = await provider.call({ endpoint: 'chat', model: 'claude-x', stream: false, cancel: never(), json: { model: 'claude-x', messages: [] } });
  assert.equal(r.status, 429);
  assert.equal(r.headers['retry-after'], '1');
  const err = (await jsonOf(r)).error as Record<string, unknown>;
  assert.equal(err.type, 'rate_limit_error');
  assert.equal(err.code, null);
});

test('unsupported endpoints answer 400 without calling upstream', async () => {
  for (const endpoint of ['embeddings', 'speech', 'transcriptions', 'responses'] as const) {
    const r = await provider.call({ endpoint, model: 'claude-x', stream: false, cancel: never(), json: { model: 'claude-x' } });
    assert.equal(r.status, 400);
    assert.match(String(((await jsonOf(r)).error as { message: string }).message), new RegExp(`does not support the ${endpoint} endpoint`));
  }
  assert.equal(fake.callCount(), 0);
});

test('passthrough and discovery use Anthropic credentials', async () => {
  const r = await provider.passthrough({ method: 'POST', path: '/v1/messages', cancel: never(), headers: { 'content-type': 'application/json', 'x-api-key': 'client-key' }, body: Buffer.from(JSON.stringify({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'yo' }] })) });
  assert.equal(r.status, 200);
  await bodyOf(r);
  assert.deepEqual(r.usage(), { promptTokens: 1, completionTokens: 1, totalTokens: 2 });
  assert.equal(fake.calls[0]?.headers['x-api-key'], 'ant-key');
  assert.deepEqual(await provider.listModels(), ['fake-model']);
  assert.equal(fake.calls[1]?.path, '/v1/models');
});

test('timeout and abort', async () => {
  const slow = anthropicProviderType.create('slow-ant', { base_url: fake.url, api_key: 'ant-key', timeout_ms: 100 });
  fake.hangNext(1);
  await assert.rejects(slow.call(messages()), (e: unknown) => e instanceof UpstreamUnavailableError && e.status === 504 && /slow-ant/.test(e.message));
  await slow.close();
  fake.reset();
  fake.setLatency(300);
  const ac = new Cancellation();
  const p = provider.call({ ...messages(), cancel: ac });
  await waitFor(() => fake.calls.length === 1);
  ac.cancel();
  await assert.rejects(p);
  await waitFor(() => fake.calls[0]?.aborted === true);
});
