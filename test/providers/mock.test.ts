import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mockProviderType } from '../../src/providers/mock.ts';
import { createProviders, type ProviderConfig } from '../../src/providers/registry.ts';
import { bodyOf, jsonOf, never, sseData, sseEvents, streamOf } from './helpers.ts';
import { Cancellation } from '../../src/providers/cancellation.ts';

const mock = mockProviderType.create('mock', {});
const json = { model: 'mock-1', messages: [{ role: 'user', content: 'echo this please' }] };

test('models and chat echo with usage', async () => {
  assert.deepEqual(await mock.listModels(), ['mock-1', 'mock-embed']);
  const r = await mock.call({ endpoint: 'chat', model: 'mock-1', stream: false, cancel: never(), json });
  const body = await jsonOf(r);
  assert.equal((body.choices as Array<{ message: { content: string } }>)[0]?.message.content, 'echo this please');
  assert.deepEqual(r.usage(), { promptTokens: 4, completionTokens: 4, totalTokens: 8 });
});

test('chat stream: several chunks, usage chunk only when asked, usage always reported', async () => {
  const r = await mock.call({ endpoint: 'chat', model: 'mock-1', stream: true, cancel: never(), json: { ...json, stream: true } });
  let n = 0;
  let text = '';
  for await (const c of streamOf(r)) {
    n++;
    text += c.toString();
  }
  assert.ok(n >= 4);
  const data = sseData(text);
  assert.equal(data.at(-1), '[DONE]');
  assert.ok(data.slice(0, -1).every((c) => typeof c !== 'string' && (c.choices as unknown[]).length === 1));
  assert.equal(r.usage()?.totalTokens, 8);
  const u = await mock.call({ endpoint: 'chat', model: 'mock-1', stream: true, cancel: never(), json: { ...json, stream: true, stream_options: { include_usage: true } } });
  assert.deepEqual((sseData((await bodyOf(u)).toString()).at(-2) as Record<string, unknown>).choices, []);
});

test('messages (json and stream) in the Anthropic shape', async () => {
  const m = await jsonOf(await mock.call({ endpoint: 'messages', model: 'mock-1', stream: false, cancel: never(), json }));
  assert.equal(m.type, 'message');
  assert.deepEqual(m.content, [{ type: 'text', text: 'echo this please' }]);
  const s = await mock.call({ endpoint: 'messages', model: 'mock-1', stream: true, cancel: never(), json });
  const events = sseEvents((await bodyOf(s)).toString());
  assert.equal(events[0]?.event, 'message_start');
  assert.equal(events.at(-1)?.event, 'message_stop');
  assert.deepEqual(events.at(-2)?.data.usage, { input_tokens: 4, output_tokens: 4 });
});

test('responses, embeddings, speech, transcriptions', async () => {
  const r = await jsonOf(await mock.call({ endpoint: 'responses', model: 'mock-1', stream: false, cancel: never(), json: { model: 'mock-1', input: 'hi' } }));
  assert.deepEqual(r.usage, { input_tokens: 1, output_tokens: 1, total_tokens: 2 });
  const rs = await mock.call({ endpoint: 'responses', model: 'mock-1', stream: true, cancel: never(), json: { model: 'mock-1', input: 'hi' } });
  assert.equal(sseEvents((await bodyOf(rs)).toString()).at(-1)?.event, 'response.completed');
  const e = await mock.call({ endpoint: 'embeddings', model: 'mock-embed', stream: false, cancel: never(), json: { model: 'mock-embed', input: ['a', 'b'] } });
  const data = (await jsonOf(e)).data as Array<{ embedding: number[] }>;
  assert.equal(data[0]?.embedding.length, 16);
  assert.notDeepEqual(data[0]?.embedding, data[1]?.embedding);
  // Deterministic, unit length.
  const again = await mock.call({ endpoint: 'embeddings', model: 'mock-embed', stream: false, cancel: never(), json: { model: 'mock-embed', input: 'a' } });
  assert.deepEqual(((await jsonOf(again)).data as Array<{ embedding: number[] }>)[0]?.embedding, data[0]?.embedding);
  assert.ok(Math.abs(Math.hypot(...data[0]!.embedding) - 1) < 1e-4);
  assert.equal(e.usage()?.promptTokens, 2);
  const sp = await mock.call({ endpoint: 'speech', model: 'mock-1', stream: false, cancel: never(), json: { model: 'mock-1', input: 'x', voice: 'a' } });
  assert.equal(sp.headers['content-type'], 'audio/mpeg');
  assert.ok((await bodyOf(sp)).length > 0);
  assert.ok(sp.usage());
  const tr = await mock.call({ endpoint: 'transcriptions', model: 'mock-1', stream: false, cancel: never(), raw: Buffer.from('x'), contentType: 'multipart/form-data; boundary=x' });
  assert.equal((await jsonOf(tr)).text, 'This is a mock transcription.');
  assert.ok(tr.usage());
});

test('a cancelled call rejects', async () => {
  const ac = new Cancellation();
  ac.cancel();
  await assert.rejects(mock.call({ endpoint: 'chat', model: 'mock-1', stream: false, cancel: ac, json }));
});

test('registry builds providers from config entries, in order', async () => {
  const list = createProviders({
    a: { type: 'openai', base_url: 'http://127.0.0.1:1/v1', api_key: 'k' },
    b: { type: 'anthropic', base_url: 'http://127.0.0.1:1' },
    mock: { type: 'mock', models: ['x'] },
  });
  assert.deepEqual(list.map((p) => [p.name, p.type]), [['a', 'openai'], ['b', 'anthropic'], ['mock', 'mock']]);
  // Abilities: realtime on openai and mock; batches forwarded by openai, run in the gateway for mock.
  assert.deepEqual(list.map((p) => [p.realtime !== undefined, p.batch?.mode]), [[true, 'forward'], [false, undefined], [true, 'lines']]);
  assert.deepEqual(await list[2]?.listModels(), ['x']);
  assert.throws(() => createProviders({ z: { type: 'nope' } as unknown as ProviderConfig }), /providers\.z\.type/);
  await Promise.all(list.map((p) => p.close()));
});
