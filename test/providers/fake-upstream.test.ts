import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { startFakeUpstream } from '../support/fake-upstream.ts';
import { sseData, sseEvents } from './helpers.ts';

const fake = await startFakeUpstream({ apiKey: 'k', models: ['m1'], name: 'alpha' });
after(() => fake.close());

const post = async (path: string, body: unknown, headers: Record<string, string> = { authorization: 'Bearer k' }) => {
  const res = await request(`${fake.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
};

test('chat: echo, usage, auth, unknown model, recording', async () => {
  fake.reset();
  const ok = await post('/v1/chat/completions', { model: 'm1', messages: [{ role: 'user', content: 'hello there' }] });
  assert.equal(ok.status, 200);
  const body = JSON.parse(ok.text);
  assert.equal(body.choices[0].message.content, 'hello there');
  assert.deepEqual(body.usage, { prompt_tokens: 3, completion_tokens: 3, total_tokens: 6 });
  assert.equal((await post('/v1/chat/completions', { model: 'm1', messages: [] }, { authorization: 'Bearer nope' })).status, 401);
  assert.equal((await post('/v1/chat/completions', { model: 'other', messages: [] })).status, 404);
  assert.equal(fake.callCount('/v1/chat/completions'), 3);
  assert.equal(fake.calls[0]?.model, 'm1');
});

test('chat stream: chunks, usage chunk only with include_usage, [DONE]', async () => {
  fake.reset();
  const plain = sseData((await post('/v1/chat/completions', { model: 'm1', stream: true, messages: [{ role: 'user', content: 'a b' }] })).text);
  assert.equal(plain.at(-1), '[DONE]');
  assert.ok(plain.slice(0, -1).every((c) => typeof c !== 'string' && (c.choices as unknown[]).length === 1));
  const withUsage = sseData((await post('/v1/chat/completions', { model: 'm1', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'a b' }] })).text);
  const last = withUsage.at(-2) as Record<string, unknown>;
  assert.deepEqual(last.choices, []);
  assert.equal((last.usage as Record<string, number>).total_tokens, 2);
});

test('anthropic messages: auth headers, event sequence', async () => {
  fake.reset();
  assert.equal((await post('/v1/messages', { model: 'm1', max_tokens: 5, messages: [] }, { 'x-api-key': 'k' })).status, 400, 'anthropic-version required');
  const r = await post('/v1/messages', { model: 'm1', max_tokens: 5, stream: true, messages: [{ role: 'user', content: 'hi you' }] }, { 'x-api-key': 'k', 'anthropic-version': '2023-06-01' });
  assert.deepEqual(sseEvents(r.text).map((e) => e.event), [
    'message_start', 'content_block_start', 'ping', 'content_block_delta', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop',
  ]);
});

test('forced failures, per-model failures, latency and hang', async () => {
  fake.reset();
  fake.failNext(1, { status: 429 });
  const r = await post('/v1/chat/completions', { model: 'm1', messages: [] });
  assert.equal(r.status, 429);
  assert.equal(r.headers['retry-after'], '1');
  assert.equal((await post('/v1/chat/completions', { model: 'm1', messages: [] })).status, 200);
  fake.failModel('m1', { status: 503, body: 'down' });
  const down = await post('/v1/chat/completions', { model: 'm1', messages: [] });
  assert.deepEqual([down.status, down.text], [503, 'down']);
  fake.failModel('m1', undefined);
  fake.setLatency(60);
  const t0 = Date.now();
  await post('/v1/embeddings', { model: 'm1', input: 'x' });
  assert.ok(Date.now() - t0 >= 55);
  fake.setLatency(0);
  fake.hangNext(1);
  const hung = request(`${fake.url}/v1/models`, { headers: { authorization: 'Bearer k' }, headersTimeout: 100 });
  await assert.rejects(hung, { code: 'UND_ERR_HEADERS_TIMEOUT' });
});

test('responses, embeddings, speech, transcriptions', async () => {
  fake.reset();
  const resp = JSON.parse((await post('/v1/responses', { model: 'm1', input: 'abcd' })).text);
  assert.deepEqual(resp.usage, { input_tokens: 1, output_tokens: 1, total_tokens: 2 });
  const stream = sseEvents((await post('/v1/responses', { model: 'm1', input: 'abcd', stream: true })).text);
  assert.equal(stream.at(-1)?.event, 'response.completed');
  const emb = JSON.parse((await post('/v1/embeddings', { model: 'm1', input: ['a', 'b'] })).text);
  assert.equal(emb.data.length, 2);
  assert.equal(emb.usage.total_tokens, 2);
  const speech = await request(`${fake.url}/v1/audio/speech`, { method: 'POST', headers: { authorization: 'Bearer k', 'content-type': 'application/json' }, body: '{"model":"m1","input":"x"}' });
  assert.equal(speech.headers['content-type'], 'audio/mpeg');
  assert.equal((await speech.body.arrayBuffer()).byteLength, 35);
  const form = Buffer.from('--B\r\nContent-Disposition: form-data; name="model"\r\n\r\nm1\r\n--B\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\nRIFF\r\n--B--\r\n');
  const tr = await request(`${fake.url}/v1/audio/transcriptions`, { method: 'POST', headers: { authorization: 'Bearer k', 'content-type': 'multipart/form-data; boundary=B' }, body: form });
  assert.equal(tr.statusCode, 200);
  assert.match(((await tr.body.json()) as { text: string }).text, /fake transcription/);
  assert.equal(fake.calls.at(-1)?.model, 'm1');
  assert.deepEqual((fake.calls.at(-1)?.body as Record<string, unknown>).file, { filename: 'a.wav', bytes: 4 });
});
