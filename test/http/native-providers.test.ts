/**
 * End-to-end: Azure OpenAI and Amazon Bedrock instances behind the gateway, used through the
 * official `openai` and `@anthropic-ai/sdk` clients (plain, streamed, with tools), with token
 * windows and costs charged from the translated usage, unsupported parameters refused, and a
 * throttled Bedrock model failing over to an Azure deployment.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { calcPrice } from '@pydantic/genai-prices';
import OpenAI, { APIError, toFile } from 'openai';
import WebSocket from 'ws';
import { startFakeAzure, type FakeAzure } from '../support/fake-azure.ts';
import { startFakeBedrock, type FakeBedrock } from '../support/fake-bedrock.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';

const CLAUDE = 'anthropic.claude-3-haiku-20240307-v1:0';
const TITAN = 'amazon.titan-embed-text-v2:0';
const USER_PATH = 'x-floodgate-user-path';

const WEATHER = {
  type: 'function' as const,
  function: { name: 'get_weather', description: 'Weather of a city', parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] } },
};

describe('native providers: azure and bedrock through the official clients', () => {
  let azure: FakeAzure;
  let bedrock: FakeBedrock;
  let gw: TestGateway;
  let openai: OpenAI;
  let anthropic: Anthropic;
  const as = (userPath: string) => ({ headers: { [USER_PATH]: userPath } });

  before(async () => {
    azure = await startFakeAzure({ deployments: { 'mini-prod': 'gpt-4o-mini' }, apiVersion: '2024-10-21', realtimeApiVersion: '2024-10-01-preview', apiKey: 'az-secret' });
    bedrock = await startFakeBedrock({ region: 'us-west-2', credentials: [{ accessKeyId: 'AKIDE2E', secretAccessKey: 'e2e-secret' }], models: [CLAUDE, TITAN] });
    gw = await startTestGateway({
      yaml:
        'providers:\n' +
        // What the throttling answers teach (learned capacity) has a test of its own, below.
        `  az: { type: azure, base_url: ${azure.url}, api_key: az-secret, deployments: { gpt-4o-mini: mini-prod }, learned: { enabled: false } }\n` +
        `  br: { type: bedrock, region: us-west-2, endpoint: ${bedrock.url}, access_key_id: AKIDE2E, secret_access_key: e2e-secret, models: ["${CLAUDE}", "${TITAN}"], learned: { enabled: false } }\n` +
        'failover:\n' +
        `  "br/${CLAUDE}": [az/gpt-4o-mini]\n` +
        'rate_limits:\n' +
        '  user_paths: [ { path: /tok, limits: [ { period: minute, max_tokens: 12 } ] } ]\n',
    });
    openai = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    anthropic = new Anthropic({ baseURL: gw.url, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => {
    await gw?.close();
    await azure?.close();
    await bedrock?.close();
  });
  beforeEach(() => {
    azure.reset();
    bedrock.reset();
  });

  it('lists both instances\' models', async () => {
    const ids = (await openai.models.list()).data.map((m) => m.id);
    assert.deepEqual(ids.filter((id) => id.startsWith('az/') || id.startsWith('br/')).sort(), ['az/gpt-4o-mini', `br/${TITAN}`, `br/${CLAUDE}`]);
  });

  for (const model of ['az/gpt-4o-mini', `br/${CLAUDE}`]) {
    it(`openai client on ${model}: plain, streamed with usage, and tools`, async () => {
      const plain = await openai.chat.completions.create({ model, messages: [{ role: 'system', content: 'terse' }, { role: 'user', content: 'hello there' }] });
      assert.equal(plain.choices[0]?.message.content, 'hello there');
      assert.equal(plain.choices[0]?.finish_reason, 'stop');
      assert.ok(plain.usage && plain.usage.prompt_tokens > 0 && plain.usage.completion_tokens > 0);

      const stream = await openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'one two three' }], stream: true, stream_options: { include_usage: true } });
      let text = '';
      let usage: OpenAI.CompletionUsage | null | undefined;
      let chunks = 0;
      for await (const chunk of stream) {
        chunks++;
        text += chunk.choices[0]?.delta.content ?? '';
        if (chunk.usage) usage = chunk.usage;
      }
      assert.equal(text, 'one two three');
      assert.ok(chunks >= 4, `several chunks, got ${chunks}`);
      assert.ok(usage && usage.total_tokens > 0);

      if (model.startsWith('br/')) {
        // The Bedrock fake calls a tool when asked to; the Azure fake (an OpenAI echo) does not, so only the request is checked there.
        const tool = await openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'use the tool for Oslo' }], tools: [WEATHER] });
        const call = tool.choices[0]?.message.tool_calls?.[0];
        assert.equal(tool.choices[0]?.finish_reason, 'tool_calls');
        assert.ok(call && call.type === 'function');
        assert.equal(call.function.name, 'get_weather');
        const streamedTool = await openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'use the tool for Oslo' }], tools: [WEATHER], stream: true });
        let args = '';
        let finish: string | null | undefined;
        for await (const chunk of streamedTool) {
          for (const tc of chunk.choices[0]?.delta.tool_calls ?? []) args += tc.function?.arguments ?? '';
          finish = chunk.choices[0]?.finish_reason ?? finish;
        }
        assert.deepEqual(JSON.parse(args), { query: 'use the tool for Oslo' });
        assert.equal(finish, 'tool_calls');
        const answered = await openai.chat.completions.create({
          model, tools: [WEATHER],
          messages: [{ role: 'user', content: 'use the tool for Oslo' }, tool.choices[0]!.message, { role: 'tool', tool_call_id: call.id, content: 'snow' }],
        });
        assert.equal(answered.choices[0]?.message.content, 'tool said: snow');
      } else {
        await openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'weather?' }], tools: [WEATHER], tool_choice: 'auto' });
        const sent = azure.calls.at(-1)!;
        assert.equal(sent.path, '/openai/deployments/mini-prod/chat/completions');
        assert.deepEqual((sent.body as { tools: unknown }).tools, [WEATHER]);
      }
    });

    it(`anthropic client on ${model}: plain, streamed and with tools`, async () => {
      const msg = await anthropic.messages.create({ model, max_tokens: 64, system: 'terse', messages: [{ role: 'user', content: 'bonjour tout le monde' }] });
      assert.deepEqual(msg.content, [{ type: 'text', text: 'bonjour tout le monde' }]);
      assert.equal(msg.stop_reason, 'end_turn');
      assert.ok(msg.usage.input_tokens > 0 && msg.usage.output_tokens > 0);

      const stream = anthropic.messages.stream({ model, max_tokens: 64, messages: [{ role: 'user', content: 'un deux trois' }] });
      let text = '';
      stream.on('text', (t) => { text += t; });
      const final = await stream.finalMessage();
      assert.equal(text, 'un deux trois');
      assert.ok(final.usage.output_tokens > 0);

      const tools: Anthropic.Tool[] = [{ name: 'lookup', description: 'Looks up', input_schema: { type: 'object', properties: { query: { type: 'string' } } } }];
      if (model.startsWith('br/')) {
        const toolMsg = await anthropic.messages.create({ model, max_tokens: 64, tools, messages: [{ role: 'user', content: 'call the tool please' }] });
        assert.equal(toolMsg.stop_reason, 'tool_use');
        const use = toolMsg.content.find((b) => b.type === 'tool_use');
        assert.ok(use && use.type === 'tool_use');
        assert.deepEqual([use.name, use.input], ['lookup', { query: 'call the tool please' }]);
        const streamed = await anthropic.messages.stream({ model, max_tokens: 64, tools, messages: [{ role: 'user', content: 'call the tool please' }] }).finalMessage();
        assert.deepEqual(streamed.content.map((b) => b.type), ['tool_use']);
        const result = await anthropic.messages.create({
          model, max_tokens: 64, tools,
          messages: [
            { role: 'user', content: 'call the tool please' },
            { role: 'assistant', content: toolMsg.content },
            { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'found it' }] },
          ],
        });
        assert.deepEqual(result.content, [{ type: 'text', text: 'tool said: found it' }]);
      } else {
        await anthropic.messages.create({ model, max_tokens: 64, tools, messages: [{ role: 'user', content: 'look it up' }] });
        assert.deepEqual((azure.calls.at(-1)!.body as { tools: Array<{ function: { name: string } }> }).tools.map((t) => t.function.name), ['lookup']);
      }
    });
  }

  it('embeddings on both', async () => {
    const az = await openai.embeddings.create({ model: 'az/gpt-4o-mini', input: 'vector me' });
    assert.ok(az.data[0]!.embedding.length > 0);
    // The openai client asks for base64 and decodes it.
    const br = await openai.embeddings.create({ model: `br/${TITAN}`, input: ['one', 'two'], dimensions: 256 });
    assert.deepEqual(br.data.map((d) => d.embedding.length), [256, 256]);
    assert.ok(br.usage.prompt_tokens > 0);
  });

  it('a parameter Bedrock cannot honour is a 400 invalid_request_error naming it, in every dialect', async () => {
    await assert.rejects(
      openai.chat.completions.create({ model: `br/${CLAUDE}`, messages: [{ role: 'user', content: 'x' }], logprobs: true }),
      (err: unknown) => {
        assert.ok(err instanceof APIError);
        assert.equal(err.status, 400);
        assert.equal(err.type, 'invalid_request_error');
        assert.equal(err.param, 'logprobs');
        assert.equal(err.code, 'unsupported_parameter');
        assert.match(err.message, /provider br \(type bedrock\) does not support logprobs: .*drop_unsupported/);
        return true;
      },
    );
    const res = await gw.request('POST', '/v1/messages', { body: { model: `br/${CLAUDE}`, max_tokens: 10, top_k: 3, messages: [{ role: 'user', content: 'x' }] } });
    assert.equal(res.status, 400);
    assert.deepEqual(res.json(), { type: 'error', error: { type: 'invalid_request_error', message: res.json().error.message } });
    assert.match(res.json().error.message, /provider br \(type bedrock\) does not support top_k/);
    const image = await gw.request('POST', '/v1/chat/completions', { body: { model: `br/${CLAUDE}`, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] }] } });
    assert.equal(image.status, 400);
    assert.equal(image.json().error.param, 'messages[0].content[0].image_url');
    assert.equal(image.json().error.code, 'invalid_value', 'the parameter exists; its value (a link) is what Bedrock cannot take');
    assert.equal(bedrock.calls.length, 0, 'nothing was sent upstream');
    const responses = await gw.request('POST', '/v1/responses', { body: { model: `br/${CLAUDE}`, input: 'x', previous_response_id: 'resp_1' } });
    assert.equal(responses.status, 400);
    assert.deepEqual([responses.json().error.type, responses.json().error.param, responses.json().error.code], ['invalid_request_error', 'previous_response_id', 'unsupported_parameter']);
    assert.match(responses.json().error.message, /provider br \(type bedrock\) does not support previous_response_id/);
    assert.equal(bedrock.calls.length, 0, 'nothing was sent upstream');
  });

  it('openai client responses on bedrock: plain, streamed and a tool round trip, through Converse', async () => {
    const model = `br/${CLAUDE}`;
    const res = await openai.responses.create({ model, instructions: 'be brief', input: 'responses hello', max_output_tokens: 64 });
    assert.equal(res.object, 'response');
    assert.equal(res.status, 'completed');
    assert.equal(res.output_text, 'responses hello');
    assert.ok(res.usage && res.usage.input_tokens > 0 && res.usage.output_tokens > 0);
    assert.equal(res.usage.total_tokens, res.usage.input_tokens + res.usage.output_tokens);
    assert.equal(bedrock.calls[0]?.operation, 'converse');
    assert.deepEqual(bedrock.calls[0]?.body?.system, [{ text: 'be brief' }]);
    assert.deepEqual(bedrock.calls[0]?.body?.inferenceConfig, { maxTokens: 64 });

    const stream = await openai.responses.create({ model, input: 'streamed responses here', stream: true });
    const types: string[] = [];
    let deltas = '';
    let completed: OpenAI.Responses.Response | undefined;
    for await (const ev of stream) {
      types.push(ev.type);
      if (ev.type === 'response.output_text.delta') deltas += ev.delta;
      if (ev.type === 'response.completed') completed = ev.response;
    }
    assert.equal(bedrock.calls[1]?.operation, 'converse-stream');
    assert.equal(deltas, 'streamed responses here');
    assert.deepEqual([types[0], types[1], types.at(-1)], ['response.created', 'response.in_progress', 'response.completed']);
    assert.ok(types.filter((t) => t === 'response.output_text.delta').length >= 3, 'delta by delta, as Converse sends them');
    const item = completed?.output[0];
    assert.ok(item?.type === 'message' && item.content[0]?.type === 'output_text');
    assert.equal(item.content[0].text, 'streamed responses here', 'the whole text in the closing event');
    assert.ok((completed?.usage?.input_tokens ?? 0) > 0 && (completed?.usage?.output_tokens ?? 0) > 0, 'the usage of the metadata event');

    const tools = [{ type: 'function' as const, name: 'get_weather', parameters: WEATHER.function.parameters, strict: false }];
    const called = await openai.responses.create({ model, input: 'use the tool for Oslo', tools });
    const fc = called.output.find((o) => o.type === 'function_call');
    assert.ok(fc && fc.type === 'function_call');
    assert.deepEqual([fc.name, JSON.parse(fc.arguments)], ['get_weather', { query: 'use the tool for Oslo' }]);
    const done = await openai.responses.create({
      model, tools,
      input: [{ role: 'user', content: 'use the tool for Oslo' }, fc, { type: 'function_call_output', call_id: fc.call_id, output: 'snow' }],
    });
    assert.equal(done.output_text, 'tool said: snow');
  });

  it('a throttled Bedrock model fails over to the Azure deployment', async () => {
    bedrock.failModel(CLAUDE, { status: 429, type: 'ThrottlingException', message: 'Too many requests' });
    try {
      const res = await openai.chat.completions.create({ model: `br/${CLAUDE}`, messages: [{ role: 'user', content: 'still served' }] });
      assert.equal(res.choices[0]?.message.content, 'still served');
      assert.equal(res.model, 'gpt-4o-mini');
      assert.deepEqual(bedrock.calls.map((c) => c.status), [429]);
      assert.deepEqual(azure.calls.map((c) => [c.path, c.status]), [['/openai/deployments/mini-prod/chat/completions', 200]]);
      // Streams fail over too (the throttling answer comes before the first byte).
      const stream = await openai.chat.completions.create({ model: `br/${CLAUDE}`, messages: [{ role: 'user', content: 'streamed anyway' }], stream: true });
      let text = '';
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
      assert.equal(text, 'streamed anyway');
    } finally {
      bedrock.failModel(CLAUDE, undefined);
    }
  });

  it('a throttled Azure deployment without failover is the client\'s 429 provider_error with the retry hints', async () => {
    azure.inner.failNext(1, { status: 429, headers: { 'retry-after': '3', 'retry-after-ms': '2500' } });
    const res = await gw.request('POST', '/v1/chat/completions', { body: { model: 'az/gpt-4o-mini', messages: [{ role: 'user', content: 'x' }] } });
    assert.equal(res.status, 429);
    assert.equal(res.json().error.type, 'provider_error');
    assert.equal(res.headers.get('retry-after'), '3');
    assert.equal(res.headers.get('retry-after-ms'), '2500');
    bedrock.failNext(1, { status: 429, type: 'ThrottlingException', message: 'slow' });
    const direct = await gw.request('POST', '/v1/chat/completions', { body: { model: 'br/amazon.titan-embed-text-v2:0', messages: [{ role: 'user', content: 'x' }] } });
    assert.equal(direct.status, 429);
    assert.deepEqual([direct.json().error.type, direct.json().error.code], ['provider_error', 'ThrottlingException']);
  });

  it('token windows are charged from the translated usage, streamed answers included', async () => {
    const stream = await openai.chat.completions.create(
      { model: `br/${CLAUDE}`, messages: [{ role: 'user', content: 'count these words please' }], stream: true },
      as('/tok'),
    );
    for await (const _ of stream);
    assert.equal(bedrock.calls[0]?.status, 200);
    // The charge lands once the gateway has finished the stream.
    let used = 0;
    for (let i = 0; i < 100 && used === 0; i++) {
      const usage = await gw.request('GET', '/v1/usage', { headers: { [USER_PATH]: '/tok' } });
      used = usage.json().rate_limits[0]?.tokens_used ?? 0;
      if (used === 0) await new Promise((r) => setTimeout(r, 20));
    }
    // "count these words please": 24 characters, 6 prompt tokens; 4 words echoed, 6 completion tokens.
    assert.equal(used, 12);
    const refused = await gw.request('POST', '/v1/messages', { body: { model: `br/${CLAUDE}`, max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }, headers: { [USER_PATH]: '/tok' } });
    assert.equal(refused.status, 429);
    assert.equal(refused.json().error.type, 'rate_limit_error');
  });

  it('costs come from the price table under AWS and Azure, cached tokens priced as such', async () => {
    bedrock.setCacheRead(1000);
    const br = await openai.chat.completions.create({ model: `br/${CLAUDE}`, messages: [{ role: 'user', content: 'priced' }] }, as('/cost/br'));
    const az = await openai.chat.completions.create({ model: 'az/gpt-4o-mini', messages: [{ role: 'user', content: 'priced' }] }, as('/cost/az'));
    assert.equal(br.usage?.prompt_tokens_details?.cached_tokens, 1000);
    const cost = async (userPath: string): Promise<{ cost_usd: number; cached_prompt_tokens: number }> => {
      const res = await gw.request('GET', '/v1/usage', { headers: { [USER_PATH]: userPath } });
      return res.json().by_model[0];
    };
    const brUsage = br.usage!;
    const brPrice = calcPrice({ input_tokens: brUsage.prompt_tokens, output_tokens: brUsage.completion_tokens, cache_read_tokens: 1000 }, CLAUDE, { providerId: 'aws' })!.total_price;
    const azPrice = calcPrice({ input_tokens: az.usage!.prompt_tokens, output_tokens: az.usage!.completion_tokens }, 'gpt-4o-mini', { providerId: 'azure' })!.total_price;
    let brCost = await cost('/cost/br');
    for (let i = 0; i < 100 && brCost === undefined; i++) {
      await new Promise((r) => setTimeout(r, 20));
      brCost = await cost('/cost/br');
    }
    assert.ok(brPrice > 0 && azPrice > 0);
    assert.ok(Math.abs(brCost.cost_usd - brPrice) < 1e-9, `${brCost.cost_usd} vs ${brPrice}`);
    assert.equal(brCost.cached_prompt_tokens, 1000);
    assert.ok(Math.abs((await cost('/cost/az')).cost_usd - azPrice) < 1e-9);
  });

  it('azure batches run line by line on the deployment; bedrock has none', async () => {
    const jsonl = [0, 1].map((i) => JSON.stringify({ custom_id: `r${i}`, method: 'POST', url: '/v1/chat/completions', body: { model: 'az/gpt-4o-mini', messages: [{ role: 'user', content: `line ${i}` }] } })).join('\n') + '\n';
    const file = await openai.files.create({ file: await toFile(Buffer.from(jsonl), 'in.jsonl'), purpose: 'batch' });
    const batch = await openai.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    let done = batch;
    for (let i = 0; i < 200 && done.status !== 'completed'; i++) {
      await new Promise((r) => setTimeout(r, 10));
      done = await openai.batches.retrieve(batch.id);
    }
    assert.equal(done.status, 'completed');
    const lines = (await (await openai.files.content(done.output_file_id!)).text()).trim().split('\n').map((l) => JSON.parse(l));
    assert.deepEqual(lines.map((l) => l.response.body.choices[0].message.content), ['line 0', 'line 1']);
    assert.deepEqual(azure.calls.map((c) => c.path), ['/openai/deployments/mini-prod/chat/completions', '/openai/deployments/mini-prod/chat/completions']);

    const brFile = await openai.files.create({ file: await toFile(Buffer.from(jsonl.replaceAll('az/gpt-4o-mini', `br/${CLAUDE}`)), 'in.jsonl'), purpose: 'batch' });
    await assert.rejects(openai.batches.create({ input_file_id: brFile.id, endpoint: '/v1/chat/completions', completion_window: '24h' }), (err: unknown) => {
      assert.ok(err instanceof APIError);
      assert.equal(err.status, 400);
      assert.equal(err.code, 'unsupported_endpoint');
      return true;
    });
  });

  it('azure realtime sessions go to the deployment with the api-key', async () => {
    const ws = new WebSocket(`${gw.url.replace('http', 'ws')}/v1/realtime?model=az/gpt-4o-mini`);
    const first = await new Promise<string>((resolve, reject) => {
      ws.once('message', (data) => resolve(String(data)));
      ws.once('error', reject);
    });
    ws.close();
    assert.equal(JSON.parse(first).type, 'session.created');
    const session = azure.realtime.sessions.at(-1)!;
    const url = new URL(session.url, 'http://x');
    assert.deepEqual([url.pathname, url.searchParams.get('deployment')], ['/openai/realtime', 'mini-prod']);
    assert.equal(session.headers['api-key'], 'az-secret');
    const refused = await new Promise<number>((resolve, reject) => {
      const other = new WebSocket(`${gw.url.replace('http', 'ws')}/v1/realtime?model=br/${CLAUDE}`);
      other.once('unexpected-response', (_req, res) => {
        resolve(res.statusCode ?? 0);
        other.terminate();
      });
      other.once('open', () => reject(new Error('bedrock has no realtime')));
      other.on('error', () => {}); // terminate() before the handshake completed
    });
    assert.equal(refused, 400);
  });

  it("learns from their throttling: Bedrock's bare ThrottlingException cools the model down, Azure's retry hints are followed", async () => {
    const learning = await startTestGateway({
      yaml:
        'providers:\n' +
        `  az: { type: azure, base_url: ${azure.url}, api_key: az-secret, deployments: { gpt-4o-mini: mini-prod } }\n` +
        `  br: { type: bedrock, region: us-west-2, endpoint: ${bedrock.url}, access_key_id: AKIDE2E, secret_access_key: e2e-secret, models: ["${CLAUDE}"], learned: { cooldown_seconds: 30 } }\n` +
        'failover:\n' +
        `  "br/${CLAUDE}": [az/gpt-4o-mini]\n`,
    });
    try {
      const chat = (model: string) => learning.request('POST', '/v1/chat/completions', { body: { model, messages: [{ role: 'user', content: 'x' }] } });
      bedrock.failNext(1, { status: 429, type: 'ThrottlingException', message: 'slow' });
      assert.equal((await chat(`br/${CLAUDE}`)).status, 200, 'failed over to Azure');
      assert.equal((await chat(`br/${CLAUDE}`)).status, 200);
      assert.deepEqual(bedrock.calls.map((c) => c.status), [429], 'Bedrock was left alone for its cooldown');
      assert.equal(azure.calls.length, 2);

      // A batch line the gateway runs is an answer like any other.
      azure.inner.failNext(1, { status: 429, headers: { 'retry-after': '3', 'retry-after-ms': '20000' } });
      const sdk = new OpenAI({ baseURL: `${learning.url}/v1`, apiKey: 'unused', maxRetries: 0 });
      const line = JSON.stringify({ custom_id: 'r0', method: 'POST', url: '/v1/chat/completions', body: { model: 'az/gpt-4o-mini', messages: [{ role: 'user', content: 'x' }] } });
      const file = await sdk.files.create({ file: await toFile(Buffer.from(line + '\n'), 'in.jsonl'), purpose: 'batch' });
      let batch = await sdk.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
      for (let i = 0; i < 200 && batch.status !== 'completed'; i++) {
        await new Promise((r) => setTimeout(r, 10));
        batch = await sdk.batches.retrieve(batch.id);
      }
      assert.deepEqual([batch.status, batch.request_counts?.failed], ['completed', 1], "the line got the deployment's 429");
      const cooling = await chat('az/gpt-4o-mini');
      assert.equal(cooling.json().error.message, 'rate limit exceeded for model az/gpt-4o-mini: the provider refused and asked to retry later (learned from its answers)');
      assert.equal(cooling.headers.get('retry-after'), '20', 'retry-after-ms wins over retry-after');
      assert.equal(azure.calls.length, 3);
      const listed = (await learning.request('GET', '/admin/providers')).json().providers;
      assert.deepEqual(listed.map((p: { provider: string; cause: string }) => [p.provider, p.cause]), [['az', 'cooldown'], ['br', 'cooldown']]);
    } finally {
      await learning.close();
    }
  });
});
