import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { assertAnthropicError, assertOpenAiError, openaiProvider } from '../support/e2e.ts';
import { startFakeGoogle, type FakeGoogle } from '../support/fake-google.ts';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';

const WEATHER_TOOL = {
  type: 'function' as const,
  function: {
    name: 'get_weather',
    description: 'Weather of a city',
    parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'], additionalProperties: false },
  },
};

const geminiProvider = (name: string, url: string, extra = ''): string =>
  `  ${name}: { type: gemini, base_url: ${url}, api_key: k-${name}${extra ? `, ${extra}` : ''} }\n`;

describe('type gemini: the official SDKs through the gateway', () => {
  let google: FakeGoogle;
  let backup: FakeUpstream;
  let gw: TestGateway;
  let openai: OpenAI;
  let anthropic: Anthropic;

  before(async () => {
    google = await startFakeGoogle({ api: 'gemini', apiKey: 'k-gem', models: ['gemini-flash', 'gemini-pro', 'text-embedding-004'], pageSize: 2 });
    backup = await startFakeUpstream({ apiKey: 'k-backup', name: 'backup' });
    gw = await startTestGateway({
      yaml:
        'providers:\n' +
        geminiProvider('gem', google.url) +
        openaiProvider('backup', backup.url, ['gpt-x']) +
        'failover:\n  gem/gemini-pro: [backup/gpt-x]\n' +
        'rate_limits:\n  user_paths: [ { path: /tok, limits: [ { period_seconds: 60, max_tokens: 15 } ] } ]\n',
    });
    openai = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    anthropic = new Anthropic({ baseURL: gw.url, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => {
    await gw?.close();
    await google?.close();
    await backup?.close();
  });

  it('discovers the models that generate or embed, page by page, and lists them', async () => {
    const listed = (await openai.models.list()).data.map((m) => m.id).filter((id) => id.startsWith('gem/'));
    assert.deepEqual(listed.sort(), ['gem/gemini-flash', 'gem/gemini-pro', 'gem/text-embedding-004']);
    const pages = google.calls.filter((c) => c.action === 'list');
    assert.equal(pages.length, 2, 'two pages of two models');
    assert.equal(pages[0]?.headers['x-goog-api-key'], 'k-gem');
    assert.equal(pages[1]?.query.get('pageToken'), '2');
  });

  it('answers a chat completion through generateContent, with the key and the translated body', async () => {
    google.reset();
    const res = await openai.chat.completions.create({
      model: 'gem/gemini-flash',
      messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hello gemini' }],
      temperature: 0.3,
      top_p: 0.9,
      max_tokens: 100,
      stop: ['zzz'],
    });
    assert.equal(res.choices[0]?.message.content, 'hello gemini');
    assert.equal(res.choices[0]?.finish_reason, 'stop');
    assert.equal(res.object, 'chat.completion');
    assert.deepEqual(res.usage && [res.usage.prompt_tokens, res.usage.completion_tokens, res.usage.total_tokens], [5, 3, 8], 'tokens of the system and user text, and of the answer');
    const call = google.calls[0]!;
    assert.equal(call.path, '/v1beta/models/gemini-flash:generateContent');
    assert.equal(call.headers['x-goog-api-key'], 'k-gem');
    assert.equal(call.headers.authorization, undefined);
    assert.deepEqual(call.body, {
      contents: [{ role: 'user', parts: [{ text: 'hello gemini' }] }],
      systemInstruction: { parts: [{ text: 'be brief' }] },
      generationConfig: { temperature: 0.3, topP: 0.9, maxOutputTokens: 100, stopSequences: ['zzz'] },
    });
  });

  it('streams chat chunk by chunk from streamGenerateContent?alt=sse, usage only when asked for', async () => {
    google.reset();
    const stream = await openai.chat.completions.create({
      model: 'gem/gemini-flash',
      messages: [{ role: 'user', content: 'one two three four' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let chunks = 0;
    let finish: string | null | undefined;
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      chunks++;
      text += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal(text, 'one two three four');
    assert.ok(chunks >= 6, `several chunks, got ${chunks}`);
    assert.equal(finish, 'stop');
    assert.deepEqual(usage && [usage.prompt_tokens, usage.completion_tokens], [5, 5]);
    assert.equal(google.calls[0]?.path, '/v1beta/models/gemini-flash:streamGenerateContent');
    assert.equal(google.calls[0]?.query.get('alt'), 'sse');

    const plain = await gw.request('POST', '/v1/chat/completions', { body: { model: 'gem/gemini-flash', stream: true, messages: [{ role: 'user', content: 'a b' }] } });
    assert.equal(plain.status, 200);
    assert.match(plain.headers.get('content-type') ?? '', /text\/event-stream/);
    assert.ok(!plain.text.includes('"usage"'), 'no usage chunk (nor usage fields) without include_usage');
    assert.ok(plain.text.trimEnd().endsWith('data: [DONE]'));
  });

  it('runs a tool loop with the openai SDK: tool calls out, tool results back as function responses', async () => {
    google.reset();
    const first = await openai.chat.completions.create({
      model: 'gem/gemini-flash',
      messages: [{ role: 'user', content: 'weather in Paris' }],
      tools: [WEATHER_TOOL],
      tool_choice: 'required',
    });
    const choice = first.choices[0]!;
    assert.equal(choice.finish_reason, 'tool_calls');
    assert.equal(choice.message.content, null);
    const call = choice.message.tool_calls?.[0];
    assert.ok(call && call.type === 'function');
    assert.equal(call.function.name, 'get_weather');
    assert.deepEqual(JSON.parse(call.function.arguments), { query: 'weather in Paris' });
    assert.deepEqual(google.calls[0]?.body?.tools, [{ functionDeclarations: [{ name: 'get_weather', description: 'Weather of a city', parametersJsonSchema: WEATHER_TOOL.function.parameters }] }]);
    assert.deepEqual(google.calls[0]?.body?.toolConfig, { functionCallingConfig: { mode: 'ANY' } });

    const second = await openai.chat.completions.create({
      model: 'gem/gemini-flash',
      messages: [
        { role: 'user', content: 'weather in Paris' },
        choice.message,
        { role: 'tool', tool_call_id: call.id, content: '{"celsius": 21}' },
      ],
      tools: [WEATHER_TOOL],
      tool_choice: 'auto',
    });
    assert.equal(second.choices[0]?.message.content, 'tool said: [{"name":"get_weather","response":{"celsius":21}}]');
    assert.equal(second.choices[0]?.finish_reason, 'stop');
    const contents = google.calls[1]?.body?.contents as unknown[];
    assert.deepEqual(contents.slice(1), [
      { role: 'model', parts: [{ functionCall: { name: 'get_weather', args: { query: 'weather in Paris' } } }] },
      { role: 'user', parts: [{ functionResponse: { name: 'get_weather', response: { celsius: 21 } } }] },
    ]);
  });

  it('streams parallel tool calls as tool-call deltas, and merges their results into one turn', async () => {
    google.reset();
    const tools = [WEATHER_TOOL, { type: 'function' as const, function: { name: 'get_time', parameters: { type: 'object', properties: {} } } }];
    const stream = await openai.chat.completions.create({ model: 'gem/gemini-flash', messages: [{ role: 'user', content: 'both please' }], tools, stream: true });
    const calls: Array<{ id: string; name: string; args: string }> = [];
    let finish: string | null | undefined;
    for await (const chunk of stream) {
      for (const tc of chunk.choices[0]?.delta.tool_calls ?? []) {
        calls[tc.index] ??= { id: '', name: '', args: '' };
        const c = calls[tc.index]!;
        c.id += tc.id ?? '';
        c.name += tc.function?.name ?? '';
        c.args += tc.function?.arguments ?? '';
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(finish, 'tool_calls');
    assert.deepEqual(calls.map((c) => [c.name, JSON.parse(c.args)]), [['get_weather', { query: 'both please' }], ['get_time', { query: 'both please' }]]);
    assert.notEqual(calls[0]!.id, calls[1]!.id);

    const res = await openai.chat.completions.create({
      model: 'gem/gemini-flash',
      tools,
      messages: [
        { role: 'user', content: 'both please' },
        { role: 'assistant', content: null, tool_calls: calls.map((c) => ({ id: c.id, type: 'function' as const, function: { name: c.name, arguments: c.args } })) },
        { role: 'tool', tool_call_id: calls[1]!.id, content: 'noon' },
        { role: 'tool', tool_call_id: calls[0]!.id, content: 'sunny' },
      ],
    });
    assert.equal(res.choices[0]?.message.content, 'tool said: [{"name":"get_time","response":{"result":"noon"}},{"name":"get_weather","response":{"result":"sunny"}}]');
  });

  it('gives Gemini its thought signatures back through the tool call id', async () => {
    google.reset();
    google.setThoughtSignature(Buffer.from('signed thoughts +/=').toString('base64'));
    const first = await openai.chat.completions.create({ model: 'gem/gemini-flash', messages: [{ role: 'user', content: 'go' }], tools: [WEATHER_TOOL] });
    const call = first.choices[0]!.message.tool_calls![0]!;
    assert.match(call.id, /^[A-Za-z0-9_-]+$/, 'a plain id every client accepts');
    const followUp = (id: string) => openai.chat.completions.create({
      model: 'gem/gemini-flash',
      tools: [WEATHER_TOOL],
      messages: [{ role: 'user', content: 'go' }, { role: 'assistant', content: null, tool_calls: [{ ...call, id }] }, { role: 'tool', tool_call_id: id, content: 'ok' }],
    });
    assert.match((await followUp(call.id)).choices[0]?.message.content ?? '', /^tool said/);
    await assert.rejects(followUp('call_without_signature'), (err: unknown) => err instanceof OpenAI.APIError && err.status === 400 && /thought_signature/.test(err.message));
  });

  it('sends images as inline data or file data, and refuses an image URL of unknown type', async () => {
    google.reset();
    const png = Buffer.from('fake png bytes').toString('base64');
    await openai.chat.completions.create({
      model: 'gem/gemini-flash',
      messages: [{ role: 'user', content: [
        { type: 'text', text: 'what is this' },
        { type: 'image_url', image_url: { url: `data:image/png;base64,${png}` } },
        { type: 'image_url', image_url: { url: 'https://example.com/cat.JPG?size=2' } },
      ] }],
    });
    assert.deepEqual((google.calls[0]?.body?.contents as Array<{ parts: unknown }>)[0]?.parts, [
      { text: 'what is this' },
      { inlineData: { mimeType: 'image/png', data: png } },
      { fileData: { mimeType: 'image/jpeg', fileUri: 'https://example.com/cat.JPG?size=2' } },
    ]);

    const res = await gw.request('POST', '/v1/chat/completions', { body: { model: 'gem/gemini-flash', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/image' } }] }] } });
    const err = assertOpenAiError(res, 400, 'invalid_request_error');
    assert.equal(err.param, 'messages[0].content[0].image_url');
    assert.match(err.message, /does not end in a known image extension/);
  });

  it('JSON mode and structured output go to responseMimeType and responseJsonSchema', async () => {
    google.reset();
    const schema = { type: 'object', properties: { echo: { type: 'string' } }, required: ['echo'] };
    const res = await openai.chat.completions.create({
      model: 'gem/gemini-flash',
      messages: [{ role: 'user', content: 'structured' }],
      response_format: { type: 'json_schema', json_schema: { name: 'echo', schema } },
    });
    assert.deepEqual(JSON.parse(res.choices[0]?.message.content ?? ''), { echo: 'structured' });
    assert.deepEqual(google.calls[0]?.body?.generationConfig, { responseMimeType: 'application/json', responseJsonSchema: schema });
  });

  it('refuses a parameter Gemini cannot honour with a 400 naming it, before calling Google', async () => {
    google.reset();
    for (const [extra, param] of [[{ logprobs: true }, 'logprobs'], [{ logit_bias: { '50256': -100 } }, 'logit_bias'], [{ parallel_tool_calls: false, tools: [WEATHER_TOOL] }, 'parallel_tool_calls']] as const) {
      const res = await gw.request('POST', '/v1/chat/completions', { body: { model: 'gem/gemini-flash', messages: [{ role: 'user', content: 'x' }], ...extra } });
      const err = assertOpenAiError(res, 400, 'invalid_request_error');
      assert.equal(err.param, param);
      assert.equal(err.code, 'unsupported_parameter');
      assert.match(err.message, new RegExp(`provider gem \\(type gemini\\) does not support ${param}`));
      assert.match(err.message, /drop_unsupported/);
    }
    const messages = await gw.request('POST', '/v1/messages', { body: { model: 'gem/gemini-flash', max_tokens: 10, messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'x' } }] }] } });
    assert.match(assertAnthropicError(messages, 400, 'invalid_request_error').message, /messages\[0\]\.content\[0\]\.type/);
    assert.equal(google.calls.length, 0);
  });

  it('maps finish reasons: MAX_TOKENS to length, SAFETY to content_filter', async () => {
    google.reset();
    const cut = await openai.chat.completions.create({ model: 'gem/gemini-flash', messages: [{ role: 'user', content: 'a rather long sentence to cut' }], max_completion_tokens: 2 });
    assert.equal(cut.choices[0]?.finish_reason, 'length');
    assert.equal(cut.choices[0]?.message.content, 'a rather');
    google.setFinishReason('SAFETY');
    const filtered = await openai.chat.completions.create({ model: 'gem/gemini-flash', messages: [{ role: 'user', content: 'x' }] });
    assert.equal(filtered.choices[0]?.finish_reason, 'content_filter');
    google.setFinishReason(undefined);
  });

  it('reports cached and thinking tokens in the usage', async () => {
    google.reset();
    google.setUsageExtras({ cached: 4, thoughts: 7 });
    const res = await openai.chat.completions.create({ model: 'gem/gemini-flash', messages: [{ role: 'user', content: 'count my tokens please' }] });
    assert.equal(res.usage?.prompt_tokens, 6);
    assert.equal(res.usage?.prompt_tokens_details?.cached_tokens, 4);
    assert.equal(res.usage?.completion_tokens, 6 + 7);
    assert.equal(res.usage?.completion_tokens_details?.reasoning_tokens, 7);
    google.setUsageExtras({});
  });

  it('@anthropic-ai/sdk: a message and a streamed message, with a tool', async () => {
    google.reset();
    const msg = await anthropic.messages.create({
      model: 'gem/gemini-flash', max_tokens: 50, system: 'be brief', stop_sequences: ['qq'],
      output_config: { effort: 'low' },
      messages: [{ role: 'user', content: 'hello from claude land' }],
    });
    assert.equal(msg.type, 'message');
    assert.deepEqual(msg.content, [{ type: 'text', text: 'hello from claude land' }]);
    assert.equal(msg.stop_reason, 'end_turn');
    assert.deepEqual([msg.usage.input_tokens, msg.usage.output_tokens], [8, 6]);
    assert.deepEqual(google.calls[0]?.body?.generationConfig, { maxOutputTokens: 50, stopSequences: ['qq'], thinkingConfig: { thinkingBudget: 1024 } });
    // Older Messages parameters the SDK no longer types still arrive from other clients.
    const sampled = await gw.request('POST', '/v1/messages', { body: { model: 'gem/gemini-flash', max_tokens: 9, top_k: 5, temperature: 0.5, top_p: 0.5, messages: [{ role: 'user', content: 'x' }] } });
    assert.equal(sampled.status, 200, sampled.text);
    assert.deepEqual(google.calls[1]?.body?.generationConfig, { maxOutputTokens: 9, temperature: 0.5, topP: 0.5, topK: 5 });

    google.reset();
    const tool = { name: 'get_weather', description: 'Weather of a city', input_schema: { type: 'object' as const, properties: { query: { type: 'string' } } } };
    const stream = anthropic.messages.stream({ model: 'gem/gemini-flash', max_tokens: 50, tools: [tool], messages: [{ role: 'user', content: 'weather in Rome' }] });
    const final = await stream.finalMessage();
    assert.equal(final.stop_reason, 'tool_use');
    const use = final.content.find((b) => b.type === 'tool_use');
    assert.ok(use && use.type === 'tool_use');
    assert.equal(use.name, 'get_weather');
    assert.deepEqual(use.input, { query: 'weather in Rome' });

    const answer = await anthropic.messages.create({
      model: 'gem/gemini-flash', max_tokens: 50, tools: [tool],
      messages: [
        { role: 'user', content: 'weather in Rome' },
        { role: 'assistant', content: final.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'warm' }] },
      ],
    });
    assert.deepEqual(answer.content, [{ type: 'text', text: 'tool said: [{"name":"get_weather","response":{"result":"warm"}}]' }]);
  });

  it('openai SDK Responses API: plain, streamed, and a function call', async () => {
    google.reset();
    const res = await openai.responses.create({ model: 'gem/gemini-flash', instructions: 'be brief', input: 'responses hello', max_output_tokens: 64 });
    assert.equal(res.object, 'response');
    assert.equal(res.status, 'completed');
    assert.equal(res.output_text, 'responses hello');
    assert.deepEqual([res.usage?.input_tokens, res.usage?.output_tokens], [6, 4]);
    assert.deepEqual(google.calls[0]?.body?.generationConfig, { maxOutputTokens: 64 });
    assert.deepEqual(google.calls[0]?.body?.systemInstruction, { parts: [{ text: 'be brief' }] });

    const stream = openai.responses.stream({ model: 'gem/gemini-flash', input: 'streamed responses here' });
    let deltas = '';
    for await (const ev of stream) if (ev.type === 'response.output_text.delta') deltas += ev.delta;
    const final = await stream.finalResponse();
    assert.equal(deltas, 'streamed responses here');
    assert.equal(final.output_text, 'streamed responses here');
    assert.ok((final.usage?.total_tokens ?? 0) > 0);

    const tools = [{ type: 'function' as const, name: 'get_weather', parameters: WEATHER_TOOL.function.parameters, strict: false }];
    const called = await openai.responses.create({ model: 'gem/gemini-flash', input: 'weather in Oslo', tools });
    const fc = called.output.find((o) => o.type === 'function_call');
    assert.ok(fc && fc.type === 'function_call');
    assert.equal(fc.name, 'get_weather');
    const done = await openai.responses.create({
      model: 'gem/gemini-flash', tools,
      input: [{ role: 'user', content: 'weather in Oslo' }, fc, { type: 'function_call_output', call_id: fc.call_id, output: 'cold' }],
    });
    assert.equal(done.output_text, 'tool said: [{"name":"get_weather","response":{"result":"cold"}}]');

    const refused = await gw.request('POST', '/v1/responses', { body: { model: 'gem/gemini-flash', input: 'x', previous_response_id: 'resp_1' } });
    assert.equal(assertOpenAiError(refused, 400, 'invalid_request_error').param, 'previous_response_id');
  });

  it('embeddings: one string through embedContent, a list through batchEmbedContents, floats or base64', async () => {
    google.reset();
    const one = await openai.embeddings.create({ model: 'gem/text-embedding-004', input: 'embed me', dimensions: 4, encoding_format: 'float' });
    assert.equal(one.data.length, 1);
    assert.equal(one.data[0]?.embedding.length, 4);
    assert.equal(one.usage.prompt_tokens, 2, 'estimated: the API reports no token count');
    assert.equal(google.calls[0]?.path, '/v1beta/models/text-embedding-004:embedContent');
    assert.deepEqual(google.calls[0]?.body, { content: { parts: [{ text: 'embed me' }] }, outputDimensionality: 4 });

    // The SDK asks for base64 by default and decodes it: the values must survive the trip.
    const many = await openai.embeddings.create({ model: 'gem/text-embedding-004', input: ['first', 'second'] });
    assert.equal(many.data.length, 2);
    assert.equal(google.calls[1]?.path, '/v1beta/models/text-embedding-004:batchEmbedContents');
    const floats = await openai.embeddings.create({ model: 'gem/text-embedding-004', input: ['first', 'second'], encoding_format: 'float' });
    for (const i of [0, 1]) {
      assert.deepEqual(many.data[i]?.embedding, floats.data[i]?.embedding.map((v) => Math.fround(v)));
    }
  });

  it('an endpoint Gemini cannot serve is a 400 naming it; an unknown model is Google\'s 404', async () => {
    const speech = await gw.request('POST', '/v1/audio/speech', { body: { model: 'gem/gemini-flash', input: 'hi', voice: 'alloy' } });
    assert.match(assertOpenAiError(speech, 400, 'provider_error').message, /does not support the speech endpoint/);
    const missing = await gw.request('POST', '/v1/chat/completions', { body: { model: 'gem/no-such-model', messages: [{ role: 'user', content: 'x' }] } });
    assert.equal(missing.status, 404);
  });

  it('a streamed answer charges its translated usage to token windows, asked for or not', async () => {
    const headers = { 'x-floodgate-user-path': '/tok' };
    const streamed = await gw.request('POST', '/v1/chat/completions', { headers, body: { model: 'gem/gemini-flash', stream: true, messages: [{ role: 'user', content: 'z'.repeat(40) }] } });
    assert.equal(streamed.status, 200);
    assert.ok(!streamed.text.includes('"usage"'));
    let used: unknown;
    for (let i = 0; i < 100 && used !== 20; i++) {
      used = (await gw.request('GET', '/v1/usage', { headers })).json().rate_limits[0]?.tokens_used;
      if (used !== 20) await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(used, 20, 'ten prompt and ten completion tokens, as Gemini counted them');
    const refused = await gw.request('POST', '/v1/chat/completions', { headers, body: { model: 'gem/gemini-flash', messages: [{ role: 'user', content: 'z' }] } });
    assert.equal(assertOpenAiError(refused, 429, 'rate_limit_error').message, 'rate limit exceeded for /tok: minute token limit of 15 reached');
  });

  it('passthrough reaches the native API with the provider\'s key, never the client\'s', async () => {
    google.reset();
    const res = await gw.request('POST', '/p/gem/v1beta/models/gemini-flash:generateContent', {
      headers: { 'x-goog-api-key': 'client-key' },
      body: { contents: [{ role: 'user', parts: [{ text: 'native' }] }] },
    });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json().candidates[0].content.parts[0].text, 'native');
    assert.equal(google.calls[0]?.headers['x-goog-api-key'], 'k-gem');
  });

  it('a stream broken off upstream stays visibly incomplete', async () => {
    google.reset();
    google.dropStreamNext();
    const res = await gw.request('POST', '/v1/chat/completions', { body: { model: 'gem/gemini-flash', stream: true, messages: [{ role: 'user', content: 'one two three four five' }] } });
    assert.ok(!res.text.includes('[DONE]'), res.text);
  });

  // Last: the 429s cool their models down for their retryDelay (learned capacity), which the tests above would meet.
  it('a 429 RESOURCE_EXHAUSTED fails over, and without failover carries its retryDelay as retry-after, which then cools the model down', async () => {
    google.reset();
    backup.reset();
    google.failNext(1, 400, 'INVALID_ARGUMENT', 'Request contains an invalid argument.');
    const bad = await gw.request('POST', '/v1/messages', { body: { model: 'gem/gemini-flash', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] } });
    assert.match(assertAnthropicError(bad, 400, 'provider_error').message, /invalid argument/);

    google.exhaustNext(1, '7.5s');
    const res = await openai.chat.completions.create({ model: 'gem/gemini-pro', messages: [{ role: 'user', content: 'fail me over' }] });
    assert.equal(res.choices[0]?.message.content, 'fail me over');
    assert.equal(backup.callCount('/v1/chat/completions'), 1);

    google.exhaustNext(1, '7.5s');
    const direct = await gw.request('POST', '/v1/chat/completions', { body: { model: 'gem/gemini-flash', messages: [{ role: 'user', content: 'x' }] } });
    const err = assertOpenAiError(direct, 429, 'provider_error');
    assert.equal(err.code, 'RESOURCE_EXHAUSTED');
    assert.match(err.message, /quota/);
    assert.equal(direct.headers.get('retry-after'), '8');
    assert.equal(direct.headers.get('retry-after-ms'), '7500');

    const calls = google.calls.length;
    const cooling = await gw.request('POST', '/v1/chat/completions', { body: { model: 'gem/gemini-flash', messages: [{ role: 'user', content: 'x' }] } });
    assert.equal(assertOpenAiError(cooling, 429, 'rate_limit_error').message, 'rate limit exceeded for model gem/gemini-flash: the provider refused and asked to retry later (learned from its answers)');
    assert.ok(Number(cooling.headers.get('retry-after')) >= 7, 'until its retryDelay ends');
    assert.equal(google.calls.length, calls, 'Google was not asked again');
    assert.equal((await openai.chat.completions.create({ model: 'gem/gemini-pro', messages: [{ role: 'user', content: 'again' }] })).choices[0]?.message.content, 'again');
    assert.equal(backup.callCount('/v1/chat/completions'), 2, 'the cooling model goes straight to its failover');
    assert.equal(google.calls.length, calls);
  });
});

describe('type gemini with drop_unsupported', () => {
  let google: FakeGoogle;
  let gw: TestGateway;

  before(async () => {
    google = await startFakeGoogle({ api: 'gemini', apiKey: 'k-lax' });
    gw = await startTestGateway({ yaml: 'providers:\n' + geminiProvider('lax', google.url, 'models: [gemini-flash], drop_unsupported: true') });
  });
  after(async () => {
    await gw?.close();
    await google?.close();
  });

  it('drops what Gemini cannot honour and answers', async () => {
    const openai = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const res = await openai.chat.completions.create({ model: 'lax/gemini-flash', messages: [{ role: 'user', content: 'lenient' }], logprobs: true, top_logprobs: 2, temperature: 0.5 });
    assert.equal(res.choices[0]?.message.content, 'lenient');
    assert.deepEqual(google.calls[0]?.body?.generationConfig, { temperature: 0.5 });
  });
});
