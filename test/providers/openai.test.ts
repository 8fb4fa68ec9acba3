import { test, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { refusedPort } from '../support/processes.ts';
import { openaiProviderType } from '../../src/providers/openai.ts';
import { UpstreamUnavailableError } from '../../src/providers/types.ts';
import type { ProviderCall } from '../../src/providers/types.ts';
import { startFakeUpstream } from '../support/fake-upstream.ts';
import { bodyOf, jsonOf, never, sseData, sseEvents, streamOf, waitFor } from './helpers.ts';
import { Cancellation } from '../../src/providers/cancellation.ts';

const fake = await startFakeUpstream({ apiKey: 'sk-test', name: 'oa' });
const provider = openaiProviderType.create('oa', { base_url: `${fake.url}/v1`, api_key: 'sk-test', timeout_ms: 2000 });
after(async () => {
  await provider.close();
  await fake.close();
});
beforeEach(() => fake.reset());

const chat = (extra: Record<string, unknown> = {}, cancel = never()): ProviderCall => ({
  endpoint: 'chat', model: 'gpt-x', stream: extra.stream === true, cancel,
  json: { model: 'gpt-x', messages: [{ role: 'user', content: 'hello world again' }], ...extra },
});

test('chat non-stream: original bytes, usage, bearer auth, body serialised as given', async () => {
  const r = await provider.call(chat());
  assert.equal(r.status, 200);
  assert.ok(Buffer.isBuffer(r.body));
  assert.equal(r.headers['content-type'], 'application/json');
  const body = await jsonOf(r);
  assert.equal((body.choices as Array<{ message: { content: string } }>)[0]?.message.content, 'hello world again');
  assert.deepEqual(r.usage(), { promptTokens: 5, completionTokens: 5, totalTokens: 10 });
  const call = fake.calls[0];
  assert.equal(call?.headers.authorization, 'Bearer sk-test');
  assert.equal(call?.path, '/v1/chat/completions');
  assert.deepEqual(call?.body, chat().json);
});

test('chat stream: include_usage injected, usage chunk stripped, valid SSE, usage reported', async () => {
  const r = await provider.call(chat({ stream: true }));
  assert.deepEqual((fake.calls[0]?.body as { stream_options: unknown }).stream_options, { include_usage: true });
  assert.equal(r.usage(), undefined, 'not final before the body is consumed');
  const text = (await bodyOf(r)).toString();
  const data = sseData(text);
  assert.equal(data.at(-1), '[DONE]');
  assert.ok(data.slice(0, -1).every((c) => typeof c !== 'string' && (c.choices as unknown[]).length === 1), 'no usage-only chunk');
  assert.match(text, /^(data: .*\n\n)+$/, 'still valid SSE');
  assert.deepEqual(r.usage(), { promptTokens: 5, completionTokens: 5, totalTokens: 10 });
});

test('chat stream: client-requested usage chunk is kept and bytes pass unchanged', async () => {
  const r = await provider.call(chat({ stream: true, stream_options: { include_usage: true } }));
  const data = sseData((await bodyOf(r)).toString());
  const usageChunk = data.at(-2) as Record<string, unknown>;
  assert.deepEqual(usageChunk.choices, []);
  assert.equal(r.usage()?.totalTokens, 10);
});

test('stream chunks reach the consumer before the upstream sends the rest', async () => {
  const release = fake.holdStreamNext();
  const r = await provider.call(chat({ stream: true }));
  const it = streamOf(r)[Symbol.asyncIterator]();
  const first = await Promise.race([it.next(), new Promise<'timeout'>((res) => setTimeout(() => res('timeout'), 1000))]);
  assert.notEqual(first, 'timeout', 'first chunk arrived while upstream was holding the rest');
  assert.match((first as IteratorResult<Buffer>).value.toString(), /"role":"assistant"/);
  release();
  let rest = '';
  for (let n = await it.next(); !n.done; n = await it.next()) rest += n.value.toString();
  assert.match(rest, /\[DONE\]/);
  assert.equal(r.usage()?.totalTokens, 10);
});

test('responses: JSON usage and stream usage from response.completed', async () => {
  const json = await provider.call({ endpoint: 'responses', model: 'gpt-x', stream: false, cancel: never(), json: { model: 'gpt-x', input: 'abcdefgh' } });
  assert.deepEqual(json.usage(), { promptTokens: 2, completionTokens: 2, totalTokens: 4 });
  const s = await provider.call({ endpoint: 'responses', model: 'gpt-x', stream: true, cancel: never(), json: { model: 'gpt-x', input: 'abcdefgh', stream: true } });
  const events = sseEvents((await bodyOf(s)).toString());
  assert.equal(events.at(-1)?.event, 'response.completed');
  assert.deepEqual(s.usage(), { promptTokens: 2, completionTokens: 2, totalTokens: 4 });
});

test('embeddings, speech (binary stream), transcriptions (multipart bytes)', async () => {
  const e = await provider.call({ endpoint: 'embeddings', model: 'emb', stream: false, cancel: never(), json: { model: 'emb', input: 'abcd' } });
  assert.deepEqual(e.usage(), { promptTokens: 1, completionTokens: 0, totalTokens: 1 });
  const sp = await provider.call({ endpoint: 'speech', model: 'tts', stream: false, cancel: never(), json: { model: 'tts', input: 'hi', voice: 'alloy' } });
  assert.equal(sp.headers['content-type'], 'audio/mpeg');
  assert.equal((await bodyOf(sp)).subarray(0, 3).toString(), 'ID3');
  const boundary = 'XyZ';
  const raw = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\nRIFF\r\n--${boundary}--\r\n`);
  const tr = await provider.call({ endpoint: 'transcriptions', model: 'whisper-1', stream: false, cancel: never(), raw, contentType: `multipart/form-data; boundary=${boundary}` });
  assert.equal(tr.status, 200);
  assert.match(String((await jsonOf(tr)).text), /fake transcription of \d+ bytes/);
  assert.deepEqual(fake.calls.at(-1)?.raw, raw, 'forwarded byte for byte');
});

test('upstream HTTP errors come back as results with status, headers and body', async () => {
  fake.failNext(1, { status: 429, headers: { 'retry-after': '7' } });
  const r = await provider.call(chat());
  assert.equal(r.status, 429);
  assert.equal(r.headers['retry-after'], '7');
  assert.match(String(((await jsonOf(r)).error as { message: string }).message), /forced error 429/);
  assert.equal(r.usage(), undefined);
  fake.failNext(1, { status: 500, body: 'boom' });
  const s = await provider.call(chat({ stream: true }));
  assert.deepEqual([s.status, (await bodyOf(s)).toString()], [500, 'boom']);
});

test('timeout -> 504 naming the provider; connection refused -> 502', async () => {
  const slow = openaiProviderType.create('slowpoke', { base_url: `${fake.url}/v1`, api_key: 'sk-test', timeout_ms: 150 });
  fake.hangNext(1);
  await assert.rejects(slow.call(chat()), (err: unknown) => {
    assert.ok(err instanceof UpstreamUnavailableError);
    assert.equal(err.status, 504);
    assert.match(err.message, /slowpoke/);
    return true;
  });
  // Body idle timeout mid-stream surfaces while iterating (undici's timers tick at ~0.5 s).
  fake.setChunkDelay(1500);
  const r = await slow.call(chat({ stream: true }));
  await assert.rejects(bodyOf(r), (err: unknown) => err instanceof UpstreamUnavailableError && err.status === 504);
  await slow.close();

  const port = await refusedPort();
  const dead = openaiProviderType.create('deadend', { base_url: `http://127.0.0.1:${port}/v1` });
  await assert.rejects(dead.call(chat()), (err: unknown) => {
    assert.ok(err instanceof UpstreamUnavailableError);
    assert.equal(err.status, 502);
    assert.match(err.message, /deadend.*refused/);
    return true;
  });
  await dead.close();
});

test('dropped stream surfaces as an error while iterating', async () => {
  fake.dropStreamNext(1);
  const r = await provider.call(chat({ stream: true }));
  await assert.rejects(bodyOf(r), (err: unknown) => err instanceof UpstreamUnavailableError && err.status === 502);
});

test('abort cancels the upstream request, before headers and mid-stream', async () => {
  fake.setLatency(500);
  const ac = new Cancellation();
  const p = provider.call(chat({}, ac));
  await waitFor(() => fake.calls.length === 1);
  ac.cancel();
  await assert.rejects(p, (err: unknown) => !(err instanceof UpstreamUnavailableError));
  await waitFor(() => fake.calls[0]?.aborted === true);

  fake.reset();
  fake.setChunkDelay(50);
  const ac2 = new Cancellation();
  const r = await provider.call(chat({ stream: true }, ac2));
  const it = streamOf(r)[Symbol.asyncIterator]();
  await it.next();
  ac2.cancel();
  await assert.rejects(async () => {
    for (let n = await it.next(); !n.done; n = await it.next());
  });
  await waitFor(() => fake.calls[0]?.aborted === true);
});

test('stopping iteration early frees the upstream', async () => {
  fake.setChunkDelay(50);
  const r = await provider.call(chat({ stream: true }));
  for await (const _ of streamOf(r)) break;
  await waitFor(() => fake.calls[0]?.aborted === true);
});

test('messages endpoint translated to chat and back, stream included', async () => {
  const json = { model: 'gpt-x', max_tokens: 50, system: 'be brief', messages: [{ role: 'user', content: 'hi there' }] };
  const r = await provider.call({ endpoint: 'messages', model: 'gpt-x', stream: false, cancel: never(), json });
  const body = await jsonOf(r);
  assert.equal(body.type, 'message');
  assert.deepEqual(body.content, [{ type: 'text', text: 'hi there' }]);
  assert.equal(body.stop_reason, 'end_turn');
  const sent = fake.calls[0]?.body as { messages: unknown[] };
  assert.deepEqual(sent.messages[0], { role: 'system', content: 'be brief' });
  assert.equal(r.usage()?.completionTokens, 2);

  const s = await provider.call({ endpoint: 'messages', model: 'gpt-x', stream: true, cancel: never(), json: { ...json, stream: true } });
  const events = sseEvents((await bodyOf(s)).toString());
  assert.deepEqual(events.map((e) => e.event), ['message_start', 'content_block_start', 'content_block_delta', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop']);
  assert.deepEqual(events.at(-2)?.data.usage, { input_tokens: 4, output_tokens: 2 });
  assert.deepEqual(s.usage(), { promptTokens: 4, completionTokens: 2, totalTokens: 6 });

  fake.failNext(1, { status: 400 });
  const err = await provider.call({ endpoint: 'messages', model: 'gpt-x', stream: false, cancel: never(), json });
  assert.equal(err.status, 400);
  assert.equal((await jsonOf(err)).type, 'error');
});

test('passthrough: path, headers filtered, credentials swapped, usage read', async () => {
  const body = Buffer.from(JSON.stringify({ model: 'gpt-x', messages: [{ role: 'user', content: 'pass' }] }));
  const r = await provider.passthrough({
    method: 'POST', path: '/chat/completions?x=1', body, cancel: never(),
    headers: { 'content-type': 'application/json', authorization: 'Bearer gateway', 'x-floodgate-user-path': '/t', host: 'gw', 'x-custom': 'yes', 'content-length': String(body.length) },
  });
  assert.equal(r.status, 200);
  const out = JSON.parse((await bodyOf(r)).toString());
  assert.equal(out.choices[0].message.content, 'pass');
  assert.equal(r.usage()?.totalTokens, 2);
  const c = fake.calls[0];
  assert.equal(c?.path, '/v1/chat/completions');
  assert.equal(c?.query, '?x=1');
  assert.equal(c?.headers.authorization, 'Bearer sk-test');
  assert.equal(c?.headers['x-custom'], 'yes');
  assert.equal(c?.headers['x-floodgate-user-path'], undefined);
  assert.notEqual(c?.headers.host, 'gw');
  const models = await provider.passthrough({ method: 'GET', path: '/models', headers: {}, cancel: never() });
  assert.equal(models.status, 200);
  assert.match((await bodyOf(models)).toString(), /fake-model/);
});

test('listModels: configured list, else discovered once', async () => {
  const configured = openaiProviderType.create('c', { base_url: `${fake.url}/v1`, models: ['a', 'b'] });
  assert.deepEqual(await configured.listModels(), ['a', 'b']);
  await configured.close();
  assert.equal(fake.callCount(), 0);
  assert.deepEqual(await provider.listModels(), ['fake-model']);
  assert.deepEqual(await provider.listModels(), ['fake-model']);
  assert.equal(fake.callCount('/v1/models'), 1);
});

test('no api key: no authorization header', async () => {
  const open = await startFakeUpstream();
  const p = openaiProviderType.create('open', { base_url: `${open.url}/v1` });
  await bodyOf(await p.call(chat()));
  assert.equal(open.calls[0]?.headers.authorization, undefined);
  await p.close();
  await open.close();
});
