import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { calcPrice } from '@pydantic/genai-prices';
import OpenAI from 'openai';
import { assertOpenAiError } from '../support/e2e.ts';
import { startFakeGoogle, type FakeGoogle } from '../support/fake-google.ts';
import { CLOUD_PLATFORM_SCOPE, makeServiceAccount, startFakeGoogleToken, type FakeGoogleToken, type ServiceAccount } from '../support/fake-google-token.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';

const PUBLISHER = '/v1/projects/test-project/locations/europe-west4/publishers/google/models';
const USER_PATH = 'x-floodgate-user-path';

const TOOL = {
  type: 'function' as const,
  function: { name: 'lookup', description: 'Looks a thing up', parameters: { type: 'object', properties: { query: { type: 'string' } } } },
};

const vertexProvider = (name: string, google: FakeGoogle, extra: string): string =>
  `  ${name}: { type: vertex, project: test-project, location: europe-west4, base_url: ${google.url}, ${extra} }\n`;

describe('type vertex: OAuth from a service-account key, the publisher path, the official SDKs', () => {
  let tokens: FakeGoogleToken;
  let account: ServiceAccount;
  let google: FakeGoogle;
  let gw: TestGateway;
  let openai: OpenAI;

  before(async () => {
    tokens = await startFakeGoogleToken();
    account = makeServiceAccount(tokens.tokenUri);
    tokens.trust(account);
    google = await startFakeGoogle({ api: 'vertex', acceptsToken: (t) => tokens.accepts(t), project: 'test-project', location: 'europe-west4', apiKey: 'vertex-express-key' });
    const file = `credentials_file: ${account.file}`;
    gw = await startTestGateway({
      yaml:
        'providers:\n' +
        vertexProvider('vx', google, `${file}, models: [gemini-2.0-flash, text-embedding-005]`) +
        vertexProvider('vx_short', google, `${file}, models: [gemini-short]`) +
        vertexProvider('vx_refused', google, `${file}, models: [gemini-refused]`) +
        vertexProvider('vx_key', google, 'api_key: vertex-express-key, models: [gemini-keyed]') +
        'rate_limits:\n  user_paths: [ { path: /tok, limits: [ { period_seconds: 60, max_tokens: 15 } ] } ]\n' +
        'budgets:\n  user_paths: [ { path: /spend, limits: [ { period: day, max_usd: 0.000001 } ] } ]\n',
    });
    openai = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => {
    await gw?.close();
    await google?.close();
    await tokens?.close();
  });

  it('lists the configured models', async () => {
    const ids = (await openai.models.list()).data.map((m) => m.id).filter((id) => id.startsWith('vx/'));
    assert.deepEqual(ids.sort(), ['vx/gemini-2.0-flash', 'vx/text-embedding-005']);
  });

  it('gets a token from the key file\'s token_uri with a signed JWT grant, and calls the publisher path with it', async () => {
    google.reset();
    const before = tokens.grants.length;
    const res = await openai.chat.completions.create({ model: 'vx/gemini-2.0-flash', messages: [{ role: 'user', content: 'hello vertex' }] });
    assert.equal(res.choices[0]?.message.content, 'hello vertex');
    assert.equal(tokens.grants.length, before + 1, `one grant (refused: ${tokens.refused.join('; ')})`);
    const grant = tokens.grants.at(-1)!;
    assert.equal(grant.iss, account.clientEmail);
    assert.equal(grant.aud, tokens.tokenUri);
    assert.equal(grant.scope, CLOUD_PLATFORM_SCOPE);
    const call = google.calls[0]!;
    assert.equal(call.path, `${PUBLISHER}/gemini-2.0-flash:generateContent`);
    assert.match(String(call.headers.authorization), /^Bearer ya29\.fake-/);
    assert.equal(call.headers['x-goog-api-key'], undefined);

    // The token is cached: a second call asks for none.
    await openai.chat.completions.create({ model: 'vx/gemini-2.0-flash', messages: [{ role: 'user', content: 'again' }] });
    assert.equal(tokens.grants.length, before + 1);
    assert.equal(google.calls[1]?.headers.authorization, call.headers.authorization);
  });

  it('refreshes a token before it expires', async () => {
    google.reset();
    tokens.setExpiresIn(60); // inside the library's five-minute refresh margin: stale at once
    try {
      const before = tokens.grants.length;
      await openai.chat.completions.create({ model: 'vx_short/gemini-short', messages: [{ role: 'user', content: 'one' }] });
      await openai.chat.completions.create({ model: 'vx_short/gemini-short', messages: [{ role: 'user', content: 'two' }] });
      assert.equal(tokens.grants.length, before + 2, 'a new token for the second call');
      assert.notEqual(google.calls[0]?.headers.authorization, google.calls[1]?.headers.authorization);
    } finally {
      tokens.setExpiresIn(3600);
    }
  });

  it('a token endpoint that refuses the grant is a 502 naming the provider; Vertex is not called', async () => {
    google.reset();
    tokens.failNext(1, 400);
    const res = await gw.request('POST', '/v1/chat/completions', { body: { model: 'vx_refused/gemini-refused', messages: [{ role: 'user', content: 'x' }] } });
    const err = assertOpenAiError(res, 502, 'provider_error');
    assert.match(err.message, /provider vx_refused \(type vertex\) could not get credentials: invalid_grant/);
    assert.equal(google.calls.length, 0);
  });

  it('an api_key is sent as x-goog-api-key instead of a token', async () => {
    google.reset();
    const res = await openai.chat.completions.create({ model: 'vx_key/gemini-keyed', messages: [{ role: 'user', content: 'keyed' }] });
    assert.equal(res.choices[0]?.message.content, 'keyed');
    assert.equal(google.calls[0]?.headers['x-goog-api-key'], 'vertex-express-key');
    assert.equal(google.calls[0]?.headers.authorization, undefined);
  });

  it('openai SDK: a streamed tool call, and the tool result answered', async () => {
    google.reset();
    const stream = await openai.chat.completions.create({ model: 'vx/gemini-2.0-flash', messages: [{ role: 'user', content: 'look it up' }], tools: [TOOL], stream: true, stream_options: { include_usage: true } });
    let id = '';
    let args = '';
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      const tc = chunk.choices[0]?.delta.tool_calls?.[0];
      id += tc?.id ?? '';
      args += tc?.function?.arguments ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    assert.deepEqual(JSON.parse(args), { query: 'look it up' });
    assert.ok(usage && usage.completion_tokens > 0);
    assert.equal(google.calls[0]?.path, `${PUBLISHER}/gemini-2.0-flash:streamGenerateContent`);
    const res = await openai.chat.completions.create({
      model: 'vx/gemini-2.0-flash', tools: [TOOL],
      messages: [{ role: 'user', content: 'look it up' }, { role: 'assistant', content: null, tool_calls: [{ id, type: 'function', function: { name: 'lookup', arguments: args } }] }, { role: 'tool', tool_call_id: id, content: 'found' }],
    });
    assert.equal(res.choices[0]?.message.content, 'tool said: [{"name":"lookup","response":{"result":"found"}}]');
  });

  it('@anthropic-ai/sdk: plain and streamed messages', async () => {
    const anthropic = new Anthropic({ baseURL: gw.url, apiKey: 'unused', maxRetries: 0 });
    const msg = await anthropic.messages.create({ model: 'vx/gemini-2.0-flash', max_tokens: 20, messages: [{ role: 'user', content: 'anthropic on vertex' }] });
    assert.deepEqual(msg.content, [{ type: 'text', text: 'anthropic on vertex' }]);
    const stream = anthropic.messages.stream({ model: 'vx/gemini-2.0-flash', max_tokens: 20, tools: [{ name: 'lookup', input_schema: { type: 'object' } }], messages: [{ role: 'user', content: 'tool please' }] });
    const final = await stream.finalMessage();
    assert.equal(final.stop_reason, 'tool_use');
    assert.ok(final.usage.output_tokens > 0);
  });

  it('embeddings through predict, with the token counts Vertex reports', async () => {
    google.reset();
    const res = await openai.embeddings.create({ model: 'vx/text-embedding-005', input: ['alpha', 'beta gamma delta'], dimensions: 3, encoding_format: 'float' });
    assert.deepEqual(res.data.map((d) => d.embedding.length), [3, 3]);
    assert.equal(res.usage.prompt_tokens, 2 + 4);
    assert.equal(google.calls[0]?.path, `${PUBLISHER}/text-embedding-005:predict`);
    assert.deepEqual(google.calls[0]?.body, { instances: [{ content: 'alpha' }, { content: 'beta gamma delta' }], parameters: { outputDimensionality: 3 } });
  });

  it('token windows are charged from the translated usage, and the next request is refused', async () => {
    const content = 'z'.repeat(40);
    const first = await gw.request('POST', '/v1/chat/completions', { headers: { [USER_PATH]: '/tok' }, body: { model: 'vx/gemini-2.0-flash', messages: [{ role: 'user', content }] } });
    assert.equal(first.status, 200, first.text);
    assert.equal(first.json().usage.total_tokens, 20);
    const usage = await gw.request('GET', '/v1/usage', { headers: { [USER_PATH]: '/tok' } });
    assert.equal(usage.json().rate_limits[0]?.tokens_used, 20);
    const refused = await gw.request('POST', '/v1/chat/completions', { headers: { [USER_PATH]: '/tok' }, body: { model: 'vx/gemini-2.0-flash', messages: [{ role: 'user', content: 'z' }] } });
    assert.equal(refused.status, 429);
    assert.match(refused.json().error.message, /token limit of 15 reached/);
  });

  it('costs come from Google\'s prices, and a spent budget refuses the next request', async () => {
    const first = await gw.request('POST', '/v1/chat/completions', { headers: { [USER_PATH]: '/spend' }, body: { model: 'vx/gemini-2.0-flash', messages: [{ role: 'user', content: 'spend a little money' }] } });
    assert.equal(first.status, 200, first.text);
    const u = first.json().usage;
    const price = calcPrice({ input_tokens: u.prompt_tokens, output_tokens: u.completion_tokens }, 'gemini-2.0-flash', { providerId: 'google' });
    assert.ok(price && price.total_price > 0);
    const usage = (await gw.request('GET', '/v1/usage', { headers: { [USER_PATH]: '/spend' } })).json();
    assert.equal(usage.by_model[0]?.provider, 'vx');
    assert.ok(Math.abs(usage.totals.cost_usd - price.total_price) < 1e-9, `${usage.totals.cost_usd} vs ${price.total_price}`);
    const refused = await gw.request('POST', '/v1/chat/completions', { headers: { [USER_PATH]: '/spend' }, body: { model: 'vx/gemini-2.0-flash', messages: [{ role: 'user', content: 'more' }] } });
    assert.equal(refused.status, 429);
    assert.equal(refused.json().error.code, 'budget_exceeded');
  });
});
