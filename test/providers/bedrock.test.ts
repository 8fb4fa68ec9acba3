import { after, beforeEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusedPort } from '../support/processes.ts';
import { bedrockProviderType } from '../../src/providers/bedrock.ts';
import { UnsupportedParameterError, UpstreamUnavailableError, type ProviderCall } from '../../src/providers/types.ts';
import { startFakeBedrock } from '../support/fake-bedrock.ts';
import { bodyOf, jsonOf, never, sseData, sseEvents, streamOf } from './helpers.ts';
import { Cancellation } from '../../src/providers/cancellation.ts';

const MODEL = 'anthropic.claude-3-haiku-20240307-v1:0';
const EMBED = 'amazon.titan-embed-text-v2:0';
const KEYS = { accessKeyId: 'AKIDFAKE', secretAccessKey: 'fake-secret' };
const fake = await startFakeBedrock({ region: 'eu-west-1', credentials: [KEYS, { accessKeyId: 'ASIATEMP', secretAccessKey: 'temp-secret', sessionToken: 'temp-token' }], models: [MODEL, EMBED] });
const settings = {
  region: 'eu-west-1', endpoint: fake.url, access_key_id: KEYS.accessKeyId, secret_access_key: KEYS.secretAccessKey,
  models: [MODEL, EMBED], drop_unsupported: false, timeout_ms: 3000,
};
const provider = bedrockProviderType.create('br', settings);
after(async () => {
  await provider.close();
  await fake.close();
});
beforeEach(() => fake.reset());

const chat = (extra: Record<string, unknown> = {}): ProviderCall => ({
  endpoint: 'chat', model: MODEL, stream: extra.stream === true, cancel: never(),
  json: { model: MODEL, messages: [{ role: 'user', content: 'hello bedrock' }], ...extra },
});

const WEATHER_TOOL = { type: 'function', function: { name: 'get_weather', description: 'Weather of a city', parameters: { type: 'object', properties: { query: { type: 'string' } } } } };

test('chat goes through Converse, signed with SigV4 for the region and service', async () => {
  const r = await provider.call(chat({ messages: [{ role: 'system', content: 'be kind' }, { role: 'user', content: 'hello bedrock' }], temperature: 0.2, top_p: 0.9, max_tokens: 50, stop: ['zzz'] }));
  assert.equal(r.status, 200, (await bodyOf(r)).toString());
  const body = await jsonOf(r);
  assert.equal(body.object, 'chat.completion');
  assert.equal(body.model, MODEL);
  assert.deepEqual((body.choices as unknown[])[0], { index: 0, message: { role: 'assistant', content: 'hello bedrock', refusal: null }, logprobs: null, finish_reason: 'stop' });
  assert.deepEqual(body.usage, { prompt_tokens: 5, completion_tokens: 4, total_tokens: 9 });
  assert.deepEqual(r.usage(), { promptTokens: 5, completionTokens: 4, totalTokens: 9 });
  const call = fake.calls[0]!;
  assert.equal(call.operation, 'converse');
  assert.equal(call.modelId, MODEL);
  assert.equal(call.signedBy, KEYS.accessKeyId);
  assert.match(String(call.headers.authorization), /Credential=AKIDFAKE\/\d{8}\/eu-west-1\/bedrock\/aws4_request/);
  assert.deepEqual(call.body, {
    messages: [{ role: 'user', content: [{ text: 'hello bedrock' }] }],
    system: [{ text: 'be kind' }],
    inferenceConfig: { maxTokens: 50, temperature: 0.2, topP: 0.9, stopSequences: ['zzz'] },
  });
});

test('a signature the fake cannot reproduce is refused: wrong secret, wrong region', async () => {
  const wrongSecret = bedrockProviderType.create('bad', { ...settings, secret_access_key: 'not-the-secret' });
  const wrongRegion = bedrockProviderType.create('elsewhere', { ...settings, region: 'us-east-1' });
  try {
    const a = await wrongSecret.call(chat());
    assert.equal(a.status, 403);
    assert.deepEqual(JSON.parse((await bodyOf(a)).toString()).error.code, 'InvalidSignatureException');
    const b = await wrongRegion.call(chat());
    assert.equal(b.status, 403);
    assert.match(JSON.parse((await bodyOf(b)).toString()).error.message, /scoped to a valid region/);
  } finally {
    await wrongSecret.close();
    await wrongRegion.close();
  }
});

test('without keys in the config the standard AWS chain is used (here: the environment), session token included', async () => {
  const saved = { ...process.env };
  Object.assign(process.env, { AWS_ACCESS_KEY_ID: 'ASIATEMP', AWS_SECRET_ACCESS_KEY: 'temp-secret', AWS_SESSION_TOKEN: 'temp-token' });
  const { access_key_id: _a, secret_access_key: _s, ...rest } = settings;
  const chained = bedrockProviderType.create('chain', rest);
  try {
    const r = await chained.call(chat());
    assert.equal(r.status, 200, (await bodyOf(r)).toString());
    assert.equal(fake.calls[0]?.signedBy, 'ASIATEMP');
    assert.equal(fake.calls[0]?.headers['x-amz-security-token'], 'temp-token');
  } finally {
    process.env = saved;
    await chained.close();
  }
});

test('chat streams are translated event by event from the event-stream framing', async () => {
  const r = await provider.call(chat({ stream: true, messages: [{ role: 'user', content: 'one two three' }] }));
  assert.equal(r.status, 200);
  assert.match(r.headers['content-type'] ?? '', /text\/event-stream/);
  const data = sseData((await bodyOf(r)).toString());
  assert.equal(data.at(-1), '[DONE]');
  const chunks = data.slice(0, -1) as Array<{ choices: Array<{ delta: { content?: string; role?: string }; finish_reason: string | null }>; usage?: unknown }>;
  assert.equal(chunks[0]?.choices[0]?.delta.role, 'assistant');
  assert.equal(chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''), 'one two three');
  assert.ok(chunks.length >= 5, 'a chunk per Converse event');
  assert.equal(chunks.at(-1)?.choices[0]?.finish_reason, 'stop');
  assert.ok(chunks.every((c) => c.choices.length === 1 && !('usage' in c)), 'no usage chunk unless asked for');
  assert.deepEqual(r.usage(), { promptTokens: 4, completionTokens: 4, totalTokens: 8 });

  const withUsage = await provider.call(chat({ stream: true, stream_options: { include_usage: true } }));
  const all = sseData((await bodyOf(withUsage)).toString());
  assert.deepEqual((all.at(-2) as { choices: unknown[]; usage: unknown }).choices, []);
  assert.deepEqual((all.at(-2) as { usage: unknown }).usage, { prompt_tokens: 4, completion_tokens: 4, total_tokens: 8 });
  assert.equal((all[1] as { usage: unknown }).usage, null);
});

test('stream chunks reach the consumer while the upstream is still sending', async () => {
  fake.setChunkDelay(150);
  const r = await provider.call(chat({ stream: true, messages: [{ role: 'user', content: 'a b c d' }] }));
  const it = streamOf(r)[Symbol.asyncIterator]();
  const first = await it.next();
  assert.match(first.value.toString(), /"role":"assistant"/);
  assert.equal(fake.calls[0]?.ended, false, 'the first chunk came before the upstream finished');
  let rest = '';
  for (let n = await it.next(); !n.done; n = await it.next()) rest += n.value.toString();
  assert.match(rest, /\[DONE\]/);
});

test('tools: the tool call, streamed as deltas, and the tool result in the next turn', async () => {
  const ask = { messages: [{ role: 'user', content: 'use the tool for Paris' }], tools: [WEATHER_TOOL], tool_choice: 'required' };
  const plain = await jsonOf(await provider.call(chat(ask)));
  const choice = (plain.choices as Array<{ message: { content: unknown; tool_calls: Array<{ id: string; function: { name: string; arguments: string } }> }; finish_reason: string }>)[0]!;
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.equal(choice.message.content, null);
  assert.equal(choice.message.tool_calls[0]?.function.name, 'get_weather');
  assert.deepEqual(JSON.parse(choice.message.tool_calls[0]!.function.arguments), { query: 'use the tool for Paris' });
  assert.deepEqual((fake.calls[0]?.body as { toolConfig: unknown }).toolConfig, {
    tools: [{ toolSpec: { name: 'get_weather', description: 'Weather of a city', inputSchema: { json: WEATHER_TOOL.function.parameters } } }],
    toolChoice: { any: {} },
  });

  const streamed = await provider.call(chat({ ...ask, stream: true }));
  const chunks = sseData((await bodyOf(streamed)).toString()).slice(0, -1) as Array<{ choices: Array<{ delta: { tool_calls?: Array<{ index: number; id?: string; function: { name?: string; arguments: string } }> }; finish_reason: string | null }> }>;
  const deltas = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []);
  assert.ok(deltas.length >= 3, 'the start and argument deltas');
  assert.equal(deltas[0]?.id, choice.message.tool_calls[0]?.id.replace(/\d+$/, (n) => String(Number(n) + 1)));
  assert.equal(deltas[0]?.function.name, 'get_weather');
  assert.deepEqual(JSON.parse(deltas.map((d) => d.function.arguments).join('')), { query: 'use the tool for Paris' });
  assert.equal(chunks.at(-1)?.choices[0]?.finish_reason, 'tool_calls');

  const id = choice.message.tool_calls[0]!.id;
  const followUp = await jsonOf(await provider.call(chat({
    tools: [WEATHER_TOOL],
    messages: [
      { role: 'user', content: 'use the tool for Paris' },
      { role: 'assistant', content: null, tool_calls: [{ id, type: 'function', function: { name: 'get_weather', arguments: '{"query":"Paris"}' } }] },
      { role: 'tool', tool_call_id: id, content: 'sunny' },
    ],
  })));
  assert.equal((followUp.choices as Array<{ message: { content: string } }>)[0]?.message.content, 'tool said: sunny');
  assert.deepEqual((fake.calls.at(-1)?.body as { messages: unknown[] }).messages.slice(1), [
    { role: 'assistant', content: [{ toolUse: { toolUseId: id, name: 'get_weather', input: { query: 'Paris' } } }] },
    { role: 'user', content: [{ toolResult: { toolUseId: id, content: [{ text: 'sunny' }] } }] },
  ]);
});

test('images go as bytes from data URLs; a link is a 400 naming where it is', async () => {
  const png = Buffer.from('89504e470d0a1a0a', 'hex').toString('base64');
  const r = await provider.call(chat({ messages: [{ role: 'user', content: [{ type: 'text', text: 'what is this' }, { type: 'image_url', image_url: { url: `data:image/png;base64,${png}` } }] }] }));
  assert.equal(r.status, 200, (await bodyOf(r)).toString());
  assert.deepEqual((fake.calls[0]?.body as { messages: Array<{ content: unknown[] }> }).messages[0]?.content[1], { image: { format: 'png', source: { bytes: png } } });
  await assert.rejects(
    provider.call(chat({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/cat.png' } }] }] })),
    (err: unknown) => err instanceof UnsupportedParameterError && err.param === 'messages[0].content[0].image_url' && /as a data URL/.test(err.message),
  );
});

test('JSON mode and response formats become Converse output formats', async () => {
  const r = await jsonOf(await provider.call(chat({ response_format: { type: 'json_object' } })));
  assert.deepEqual(JSON.parse((r.choices as Array<{ message: { content: string } }>)[0]!.message.content), { echo: 'hello bedrock' });
  assert.deepEqual((fake.calls[0]?.body as { outputConfig: unknown }).outputConfig, { textFormat: { type: 'json_schema', structure: { jsonSchema: { schema: '{"type":"object"}', name: 'json_object' } } } });
  const schema = { type: 'object', properties: { echo: { type: 'string' } }, required: ['echo'] };
  await bodyOf(await provider.call(chat({ response_format: { type: 'json_schema', json_schema: { name: 'echoed', schema } } })));
  assert.deepEqual((fake.calls[1]?.body as { outputConfig: unknown }).outputConfig, { textFormat: { type: 'json_schema', structure: { jsonSchema: { schema: JSON.stringify(schema), name: 'echoed' } } } });
});

test('finish reasons: max tokens and stop sequences', async () => {
  const long = await jsonOf(await provider.call(chat({ messages: [{ role: 'user', content: 'a b c d e f' }], max_completion_tokens: 2 })));
  assert.deepEqual((long.choices as Array<{ message: { content: string }; finish_reason: string }>)[0], { index: 0, message: { role: 'assistant', content: 'a b ', refusal: null }, logprobs: null, finish_reason: 'length' });
  const stopped = await jsonOf(await provider.call(chat({ messages: [{ role: 'user', content: 'one STOP two' }], stop: 'STOP' })));
  assert.equal((stopped.choices as Array<{ message: { content: string }; finish_reason: string }>)[0]?.message.content, 'one ');
  assert.equal((stopped.choices as Array<{ finish_reason: string }>)[0]?.finish_reason, 'stop');
});

test('cached prompt tokens count in the prompt and are reported as cached', async () => {
  fake.setCacheRead(100);
  const r = await provider.call(chat());
  const body = await jsonOf(r);
  assert.deepEqual(body.usage, { prompt_tokens: 104, completion_tokens: 4, total_tokens: 108, prompt_tokens_details: { cached_tokens: 100 } });
  assert.deepEqual(r.usage(), { promptTokens: 104, completionTokens: 4, totalTokens: 108, cachedPromptTokens: 100 });
});

test('a parameter Converse cannot honour is a 400 naming it; neutral values pass; drop_unsupported drops and logs once', async () => {
  for (const [param, value] of [['logprobs', true], ['seed', 7], ['n', 2], ['presence_penalty', 0.5], ['parallel_tool_calls', false]] as const) {
    await assert.rejects(provider.call(chat({ [param]: value })), (err: unknown) => {
      assert.ok(err instanceof UnsupportedParameterError, String(err));
      assert.equal(err.param, param);
      assert.match(err.message, new RegExp(`^provider br \\(type bedrock\\) does not support ${param}\\b.*providers\\.br\\.drop_unsupported: true`));
      return true;
    });
  }
  assert.equal(fake.calls.length, 0);
  assert.equal((await provider.call(chat({ n: 1, logprobs: false, presence_penalty: 0, frequency_penalty: 0, parallel_tool_calls: true }))).status, 200);

  const warnings: Array<Record<string, unknown>> = [];
  const lenient = bedrockProviderType.create('lenient', { ...settings, drop_unsupported: true }, { warn: (fields) => warnings.push(fields) });
  try {
    for (let i = 0; i < 2; i++) assert.equal((await lenient.call(chat({ seed: 7, logprobs: true }))).status, 200);
    assert.deepEqual(warnings, [{ provider: 'lenient', param: 'seed' }, { provider: 'lenient', param: 'logprobs' }]);
  } finally {
    await lenient.close();
  }
});

test('messages (Anthropic) through Converse and back, plain and streamed, tools included', async () => {
  const plain = await provider.call({
    endpoint: 'messages', model: MODEL, stream: false, cancel: never(),
    json: { model: MODEL, max_tokens: 100, system: 'sys', messages: [{ role: 'user', content: 'hi there' }] },
  });
  const msg = await jsonOf(plain);
  assert.equal(msg.type, 'message');
  assert.deepEqual(msg.content, [{ type: 'text', text: 'hi there' }]);
  assert.equal(msg.stop_reason, 'end_turn');
  assert.deepEqual(msg.usage, { input_tokens: 3, output_tokens: 2 });
  assert.deepEqual(fake.calls[0]?.body, { messages: [{ role: 'user', content: [{ text: 'hi there' }] }], system: [{ text: 'sys' }], inferenceConfig: { maxTokens: 100 } });

  const streamed = await provider.call({
    endpoint: 'messages', model: MODEL, stream: true, cancel: never(),
    json: {
      model: MODEL, max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'call the tool' }],
      tools: [{ name: 'lookup', description: 'Looks up', input_schema: { type: 'object', properties: { query: { type: 'string' } } } }],
    },
  });
  const events = sseEvents((await bodyOf(streamed)).toString());
  assert.equal(events[0]?.event, 'message_start');
  const start = events.find((e) => e.event === 'content_block_start')?.data as { content_block: { type: string; name: string } };
  assert.deepEqual([start.content_block.type, start.content_block.name], ['tool_use', 'lookup']);
  const json = events.filter((e) => e.event === 'content_block_delta').map((e) => (e.data.delta as { partial_json: string }).partial_json).join('');
  assert.deepEqual(JSON.parse(json), { query: 'call the tool' });
  const delta = events.find((e) => e.event === 'message_delta')?.data as { delta: { stop_reason: string }; usage: { input_tokens: number; output_tokens: number } };
  assert.equal(delta.delta.stop_reason, 'tool_use');
  assert.ok(delta.usage.input_tokens > 0 && delta.usage.output_tokens > 0);
  assert.equal(events.at(-1)?.event, 'message_stop');
  assert.deepEqual(streamed.usage(), { promptTokens: delta.usage.input_tokens, completionTokens: delta.usage.output_tokens, totalTokens: delta.usage.input_tokens + delta.usage.output_tokens });
});

test('messages: output_config\'s JSON schema reaches Converse as structured output; what cannot be carried is refused before anything is sent', async () => {
  const r = await provider.call({
    endpoint: 'messages', model: MODEL, stream: false, cancel: never(),
    json: { model: MODEL, max_tokens: 20, messages: [{ role: 'user', content: 'hi' }], output_config: { format: { type: 'json_schema', schema: { type: 'object' } } } },
  });
  assert.equal(r.status, 200, (await bodyOf(r)).toString());
  assert.deepEqual(fake.calls[0]?.body?.outputConfig, { textFormat: { type: 'json_schema', structure: { jsonSchema: { schema: '{"type":"object"}', name: 'output' } } } });
  fake.reset();
  const cases: Array<[Record<string, unknown>, string]> = [
    [{ top_k: 5 }, 'top_k'],
    [{ output_config: { effort: 'high' } }, 'output_config.effort'],
    [{ messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBE' } }] }] }, 'messages[0].content[0].type'],
  ];
  for (const [extra, param] of cases) {
    await assert.rejects(
      provider.call({ endpoint: 'messages', model: MODEL, stream: false, cancel: never(), json: { model: MODEL, max_tokens: 20, messages: [{ role: 'user', content: 'hi' }], ...extra } }),
      (err: unknown) => err instanceof UnsupportedParameterError && err.param === param && /^provider br \(type bedrock\) does not support /.test(err.message),
      param,
    );
  }
  assert.equal(fake.calls.length, 0, 'nothing was sent');
});

test('ThrottlingException is a 429 result; other exceptions keep their status, in the endpoint\'s dialect', async () => {
  fake.failNext(1, { status: 429, type: 'ThrottlingException', message: 'Too many requests, please wait before trying again.' });
  const r = await provider.call(chat());
  assert.equal(r.status, 429);
  assert.deepEqual(JSON.parse((await bodyOf(r)).toString()), { error: { message: 'Too many requests, please wait before trying again.', type: 'rate_limit_error', param: null, code: 'ThrottlingException' } });
  fake.failNext(1, { status: 503, type: 'ServiceUnavailableException', message: 'busy' });
  const s = await provider.call(chat({ stream: true }));
  assert.equal(s.status, 503);
  fake.failNext(1, { status: 429, type: 'ThrottlingException', message: 'slow down' });
  const m = await provider.call({ endpoint: 'messages', model: MODEL, stream: false, cancel: never(), json: { model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'x' }] } });
  assert.equal(m.status, 429);
  assert.deepEqual(JSON.parse((await bodyOf(m)).toString()), { type: 'error', error: { type: 'rate_limit_error', message: 'slow down' } });
  // Converse's own validation answers (here: roles that do not alternate) pass on as 400s.
  const bad = await provider.call(chat({ messages: [{ role: 'assistant', content: 'I start' }] }));
  assert.equal(bad.status, 400);
  assert.match(JSON.parse((await bodyOf(bad)).toString()).error.message, /must start with a user message/);
});

test('an exception event mid-stream fails the stream with an error naming the provider', async () => {
  fake.breakStreamNext(2, 'modelStreamErrorException');
  const r = await provider.call(chat({ stream: true, messages: [{ role: 'user', content: 'a b c d e' }] }));
  let text = '';
  await assert.rejects(async () => {
    for await (const chunk of streamOf(r)) text += chunk.toString();
  }, (err: unknown) => err instanceof UpstreamUnavailableError && /provider br stream failed: .*modelStreamErrorException/.test(err.message));
  assert.match(text, /"role":"assistant"/);
  assert.doesNotMatch(text, /\[DONE\]/, 'a broken stream stays visibly incomplete');
});

test('cancelling a streamed call aborts the upstream request', async () => {
  fake.setChunkDelay(200);
  const cancel = new Cancellation();
  const r = await provider.call({ ...chat({ stream: true, messages: [{ role: 'user', content: 'a b c d e f g' }] }), cancel });
  const it = streamOf(r)[Symbol.asyncIterator]();
  await it.next();
  cancel.cancel();
  await assert.rejects(async () => {
    for (let n = await it.next(); !n.done; n = await it.next());
  });
});

test('embeddings through InvokeModel for Titan, one call a text; base64 on request; other models refused', async () => {
  const r = await provider.call({ endpoint: 'embeddings', model: EMBED, stream: false, cancel: never(), json: { model: EMBED, input: ['alpha', 'beta gamma'], dimensions: 256 } });
  assert.equal(r.status, 200, (await bodyOf(r)).toString());
  const body = await jsonOf(r);
  const data = body.data as Array<{ index: number; embedding: number[] }>;
  assert.deepEqual(data.map((d) => [d.index, d.embedding.length]), [[0, 256], [1, 256]]);
  assert.deepEqual(body.usage, { prompt_tokens: 5, total_tokens: 5 });
  assert.deepEqual(r.usage(), { promptTokens: 5, completionTokens: 0, totalTokens: 5 });
  assert.deepEqual(fake.calls.map((c) => [c.operation, c.body]), [['invoke', { inputText: 'alpha', dimensions: 256 }], ['invoke', { inputText: 'beta gamma', dimensions: 256 }]]);

  const b64 = await jsonOf(await provider.call({ endpoint: 'embeddings', model: EMBED, stream: false, cancel: never(), json: { model: EMBED, input: 'alpha', encoding_format: 'base64', dimensions: 256 } }));
  const decoded = new Float32Array(Uint8Array.from(Buffer.from((b64.data as Array<{ embedding: string }>)[0]!.embedding, 'base64')).buffer);
  assert.equal(decoded.length, 256);
  assert.ok(Math.abs(decoded[0]! - data[0]!.embedding[0]!) < 1e-6);

  const refused = await provider.call({ endpoint: 'embeddings', model: MODEL, stream: false, cancel: never(), json: { model: MODEL, input: 'x' } });
  assert.equal(refused.status, 400);
  assert.match(JSON.parse((await bodyOf(refused)).toString()).error.message, /Titan text embedding models/);
});

test('embeddings Titan cannot take are refused before anything is sent: token arrays, a size for v1, an unknown format', async () => {
  fake.reset();
  const embed = (model: string, json: Record<string, unknown>): Promise<unknown> =>
    provider.call({ endpoint: 'embeddings', model, stream: false, cancel: never(), json: { model, ...json } });
  const cases: Array<[string, Record<string, unknown>, string, string]> = [
    [EMBED, { input: ['ok', [1, 2]] }, 'input[1]', 'invalid_value'],
    [EMBED, { input: [] }, 'input', 'invalid_value'],
    [EMBED, { input: 'x', encoding_format: 'int8' }, 'encoding_format', 'invalid_value'],
    [EMBED, { input: 'x', task_type: 'query' }, 'task_type', 'unsupported_parameter'],
    ['amazon.titan-embed-text-v1', { input: 'x', dimensions: 256 }, 'dimensions', 'unsupported_parameter'],
  ];
  for (const [model, json, param, code] of cases) {
    await assert.rejects(embed(model, json), (err: unknown) => err instanceof UnsupportedParameterError && err.param === param && err.code === code, param);
  }
  assert.equal(fake.calls.length, 0);
});

test('responses through Converse and back, plain and streamed; a broken stream stays incomplete', async () => {
  const request = { model: MODEL, instructions: 'sys', input: 'hi responses', max_output_tokens: 50 };
  const plain = await provider.call({ endpoint: 'responses', model: MODEL, stream: false, cancel: never(), json: request });
  const res = await jsonOf(plain);
  assert.equal(res.object, 'response');
  assert.equal(res.status, 'completed');
  assert.deepEqual((res.output as Array<{ content: unknown }>)[0]?.content, [{ type: 'output_text', text: 'hi responses', annotations: [], logprobs: [] }]);
  assert.deepEqual(res.usage, { input_tokens: 4, input_tokens_details: { cached_tokens: 0 }, output_tokens: 3, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 7 });
  assert.deepEqual(plain.usage(), { promptTokens: 4, completionTokens: 3, totalTokens: 7 });
  assert.deepEqual(fake.calls[0]?.body, { messages: [{ role: 'user', content: [{ text: 'hi responses' }] }], system: [{ text: 'sys' }], inferenceConfig: { maxTokens: 50 } });

  const streamed = await provider.call({ endpoint: 'responses', model: MODEL, stream: true, cancel: never(), json: { ...request, stream: true } });
  const events = sseEvents((await bodyOf(streamed)).toString());
  assert.equal(events[0]?.event, 'response.created');
  assert.equal(events.filter((e) => e.event === 'response.output_text.delta').map((e) => e.data.delta).join(''), 'hi responses');
  const last = events.at(-1)!;
  assert.equal(last.event, 'response.completed');
  assert.equal(((last.data.response as { usage: unknown }).usage as { total_tokens: number }).total_tokens, 7);
  assert.deepEqual(streamed.usage(), { promptTokens: 4, completionTokens: 3, totalTokens: 7 });

  fake.breakStreamNext(2, 'modelStreamErrorException');
  const broken = await provider.call({ endpoint: 'responses', model: MODEL, stream: true, cancel: never(), json: { ...request, stream: true } });
  let text = '';
  await assert.rejects(async () => {
    for await (const chunk of streamOf(broken)) text += chunk.toString();
  }, UpstreamUnavailableError);
  assert.doesNotMatch(text, /response\.completed/, 'no closing event for a broken stream');
});

test('endpoints Converse does not serve are 400 unsupported_endpoint; passthrough too', async () => {
  for (const endpoint of ['speech', 'transcriptions'] as const) {
    const r = await provider.call({ endpoint, model: MODEL, stream: false, cancel: never(), json: { model: MODEL } });
    assert.equal(r.status, 400);
    assert.equal(JSON.parse((await bodyOf(r)).toString()).error.code, 'unsupported_endpoint');
  }
  const p = await provider.passthrough({ method: 'GET', path: '/x', headers: {}, cancel: never() });
  assert.equal(p.status, 400);
  assert.deepEqual(await provider.listModels(), [MODEL, EMBED]);
});

test('connection refused is a 502 naming the provider', async () => {
  const port = await refusedPort();
  const dead = bedrockProviderType.create('deadend', { ...settings, endpoint: `http://127.0.0.1:${port}` });
  try {
    await assert.rejects(dead.call(chat()), (err: unknown) => err instanceof UpstreamUnavailableError && err.status === 502 && /provider deadend/.test(err.message));
  } finally {
    await dead.close();
  }
});
