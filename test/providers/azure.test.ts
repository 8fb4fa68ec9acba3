import { after, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { azureProviderType } from '../../src/providers/azure.ts';
import { UnsupportedParameterError, UpstreamUnavailableError, type ProviderCall } from '../../src/providers/types.ts';
import { startFakeAzure } from '../support/fake-azure.ts';
import { startFakeEntra } from '../support/fake-entra.ts';
import { bodyOf, jsonOf, never, sseData, sseEvents, waitFor } from './helpers.ts';

const API_VERSION = '2024-10-21';
const entra = await startFakeEntra({ tenantId: 'tenant-1', clientId: 'client-1', clientSecret: 'secret-1' });
const fake = await startFakeAzure({
  deployments: { 'prod-4o': 'gpt-4o', 'gpt-4o-mini': 'gpt-4o-mini', 'embed-dep': 'text-embedding-3-small' },
  apiVersion: API_VERSION,
  realtimeApiVersion: '2024-10-01-preview',
  apiKey: 'az-key',
  acceptsToken: (t) => entra.isValid(t),
});
const warnings: Array<{ fields: Record<string, unknown>; message: string }> = [];
const context = { warn: (fields: Record<string, unknown>, message: string) => warnings.push({ fields, message }) };
const settings = {
  base_url: fake.url, api_key: 'az-key', api_version: API_VERSION, realtime_api_version: '2024-10-01-preview',
  deployments: { 'gpt-4o': 'prod-4o', 'text-embedding-3-small': 'embed-dep' }, models: ['gpt-4o-mini'], drop_unsupported: false, timeout_ms: 3000,
};
const provider = azureProviderType.create('az', settings, context);
after(async () => {
  await provider.close();
  await fake.close();
  await entra.close();
});
beforeEach(() => fake.reset());

const chat = (extra: Record<string, unknown> = {}, model = 'gpt-4o'): ProviderCall => ({
  endpoint: 'chat', model, stream: extra.stream === true, cancel: never(),
  json: { model, messages: [{ role: 'user', content: 'hello azure' }], ...extra },
});

test('lists the configured models and the deployments\' models', async () => {
  assert.deepEqual(await provider.listModels(), ['gpt-4o-mini', 'gpt-4o', 'text-embedding-3-small']);
  assert.deepEqual([provider.realtime !== undefined, provider.batch?.mode], [true, 'lines']);
});

test('chat goes to the model\'s deployment with the api-version and the api-key header', async () => {
  const r = await provider.call(chat());
  assert.equal(r.status, 200, (await bodyOf(r)).toString());
  const body = await jsonOf(r);
  assert.equal((body.choices as Array<{ message: { content: string } }>)[0]?.message.content, 'hello azure');
  assert.equal(body.model, 'gpt-4o');
  assert.deepEqual(r.usage(), { promptTokens: 3, completionTokens: 3, totalTokens: 6 });
  const call = fake.calls[0]!;
  assert.equal(call.path, '/openai/deployments/prod-4o/chat/completions');
  assert.equal(call.query.get('api-version'), API_VERSION);
  assert.equal(call.headers['api-key'], 'az-key');
  assert.equal(call.headers.authorization, undefined);
  // A model without a deployment entry is its own deployment.
  await bodyOf(await provider.call(chat({}, 'gpt-4o-mini')));
  assert.equal(fake.calls[1]?.path, '/openai/deployments/gpt-4o-mini/chat/completions');
});

test('chat streams chunk by chunk; usage is recorded whether or not the client asked for it', async () => {
  const hidden = await provider.call(chat({ stream: true }));
  const data = sseData((await bodyOf(hidden)).toString());
  assert.equal(data.at(-1), '[DONE]');
  assert.ok(data.slice(0, -1).every((c) => typeof c !== 'string' && (c.choices as unknown[]).length === 1), 'no usage chunk the client did not ask for');
  assert.deepEqual((fake.calls[0]?.body as { stream_options: unknown }).stream_options, { include_usage: true });
  assert.equal(hidden.usage()?.totalTokens, 6);

  const shown = await provider.call(chat({ stream: true, stream_options: { include_usage: true } }));
  const chunks = sseData((await bodyOf(shown)).toString());
  assert.deepEqual((chunks.at(-2) as { usage: unknown }).usage, { prompt_tokens: 3, completion_tokens: 3, total_tokens: 6 });
});

test('embeddings go to the embedding deployment', async () => {
  const r = await provider.call({ endpoint: 'embeddings', model: 'text-embedding-3-small', stream: false, cancel: never(), json: { model: 'text-embedding-3-small', input: ['a', 'b'] } });
  assert.equal(r.status, 200);
  assert.equal(((await jsonOf(r)).data as unknown[]).length, 2);
  assert.equal(fake.calls[0]?.path, '/openai/deployments/embed-dep/embeddings');
  assert.equal(r.usage()?.promptTokens, 2);
});

test('speech goes to the deployment\'s audio path and comes back as audio', async () => {
  const r = await provider.call({ endpoint: 'speech', model: 'gpt-4o', stream: false, cancel: never(), json: { model: 'gpt-4o', input: 'say it', voice: 'alloy' } });
  assert.equal(r.status, 200);
  assert.equal(r.headers['content-type'], 'audio/mpeg');
  assert.equal((await bodyOf(r)).subarray(0, 3).toString(), 'ID3');
  assert.equal(fake.calls[0]?.path, '/openai/deployments/prod-4o/audio/speech');
});

test('responses name the deployment in the body, at /openai/responses', async () => {
  const r = await provider.call({ endpoint: 'responses', model: 'gpt-4o', stream: false, cancel: never(), json: { model: 'gpt-4o', input: 'abcdefgh' } });
  assert.equal(r.status, 200, (await bodyOf(r)).toString());
  assert.equal(fake.calls[0]?.path, '/openai/responses');
  assert.equal(fake.calls[0]?.body?.model, 'prod-4o');
  assert.deepEqual(r.usage(), { promptTokens: 2, completionTokens: 2, totalTokens: 4 });
});

test('messages are translated to chat on the deployment and back, plain and streamed', async () => {
  const plain = await provider.call({
    endpoint: 'messages', model: 'gpt-4o', stream: false, cancel: never(),
    json: { model: 'gpt-4o', max_tokens: 50, system: 'be brief', messages: [{ role: 'user', content: 'bonjour' }] },
  });
  const msg = await jsonOf(plain);
  assert.equal(msg.type, 'message');
  assert.deepEqual(msg.content, [{ type: 'text', text: 'bonjour' }]);
  assert.equal(fake.calls[0]?.path, '/openai/deployments/prod-4o/chat/completions');
  assert.deepEqual((fake.calls[0]?.body as { messages: unknown }).messages, [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'bonjour' }]);

  const streamed = await provider.call({
    endpoint: 'messages', model: 'gpt-4o', stream: true, cancel: never(),
    json: { model: 'gpt-4o', max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'one two' }] },
  });
  const events = sseEvents((await bodyOf(streamed)).toString());
  assert.deepEqual(events.map((e) => e.event).filter((e, i, a) => a.indexOf(e) === i), ['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop']);
  assert.equal(streamed.usage()?.completionTokens, 2);
});

test('messages: output_config goes as response_format and reasoning_effort; a document block is refused before anything is sent', async () => {
  const r = await provider.call({
    endpoint: 'messages', model: 'gpt-4o', stream: false, cancel: never(),
    json: { model: 'gpt-4o', max_tokens: 50, messages: [{ role: 'user', content: 'x' }], output_config: { effort: 'low', format: { type: 'json_schema', schema: { type: 'object' } } } },
  });
  assert.equal(r.status, 200, (await bodyOf(r)).toString());
  const sent = fake.calls[0]?.body as Record<string, unknown>;
  assert.equal(sent.reasoning_effort, 'low');
  assert.deepEqual(sent.response_format, { type: 'json_schema', json_schema: { name: 'output', schema: { type: 'object' } } });
  fake.reset();
  await assert.rejects(
    provider.call({
      endpoint: 'messages', model: 'gpt-4o', stream: false, cancel: never(),
      json: { model: 'gpt-4o', max_tokens: 50, messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'doc' } }] }] },
    }),
    (err: unknown) => err instanceof UnsupportedParameterError && err.param === 'messages[0].content[0].type',
  );
  assert.equal(fake.calls.length, 0, 'nothing was sent');
});

test('a Messages parameter chat cannot carry is a 400 naming it, or dropped and logged once with drop_unsupported', async () => {
  const call = (): ProviderCall => ({
    endpoint: 'messages', model: 'gpt-4o', stream: false, cancel: never(),
    json: { model: 'gpt-4o', max_tokens: 50, top_k: 5, messages: [{ role: 'user', content: 'x' }] },
  });
  await assert.rejects(provider.call(call()), (err: unknown) => {
    assert.ok(err instanceof UnsupportedParameterError);
    assert.equal(err.param, 'top_k');
    assert.match(err.message, /^provider az \(type azure\) does not support top_k: .*providers\.az\.drop_unsupported: true/);
    return true;
  });
  assert.equal(fake.calls.length, 0, 'nothing was sent');

  const lenient = azureProviderType.create('lenient', { ...settings, drop_unsupported: true }, context);
  try {
    for (let i = 0; i < 2; i++) assert.equal((await lenient.call(call())).status, 200);
    assert.equal((fake.calls[0]?.body as Record<string, unknown>).top_k, undefined);
    const logged = warnings.filter((w) => w.fields.provider === 'lenient');
    assert.equal(logged.length, 1, 'logged once per parameter name');
    assert.equal(logged[0]?.fields.param, 'top_k');
  } finally {
    await lenient.close();
  }
});

test('a 429 passes on its status and retry hints', async () => {
  fake.inner.failNext(1, { status: 429, headers: { 'retry-after': '7', 'retry-after-ms': '6500' } });
  const r = await provider.call(chat());
  assert.equal(r.status, 429);
  assert.equal(r.headers['retry-after'], '7');
  assert.equal(r.headers['retry-after-ms'], '6500');
  await bodyOf(r);
});

test('a wrong key, an unknown deployment and a wrong api-version are the upstream\'s answers', async () => {
  const wrongKey = azureProviderType.create('wrong', { ...settings, api_key: 'nope' });
  const wrongVersion = azureProviderType.create('old', { ...settings, api_version: '2023-05-15' });
  try {
    assert.equal((await wrongKey.call(chat())).status, 401);
    assert.equal((await provider.call(chat({}, 'no-such-deployment'))).status, 404);
    const r = await wrongVersion.call(chat());
    assert.equal(r.status, 400);
    assert.match((await bodyOf(r)).toString(), /API version not supported: 2023-05-15/);
  } finally {
    await wrongKey.close();
    await wrongVersion.close();
  }
});

test('passthrough adds the api-key', async () => {
  const r = await provider.passthrough({
    method: 'POST', path: `/openai/deployments/prod-4o/chat/completions?api-version=${API_VERSION}`, cancel: never(),
    headers: { 'content-type': 'application/json', authorization: 'Bearer client-key' },
    body: Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: 'through' }] })),
  });
  assert.equal(r.status, 200);
  assert.equal(fake.calls[0]?.headers['api-key'], 'az-key');
  assert.equal(fake.calls[0]?.headers.authorization, undefined);
  await bodyOf(r);
});

test('realtime sessions open on the deployment with the realtime api-version', async () => {
  const session = await provider.realtime!.connect('gpt-4o');
  try {
    await waitFor(() => fake.realtime.sessions.length === 1);
    const url = new URL(fake.realtime.sessions[0]!.url, 'http://x');
    assert.equal(url.pathname, '/openai/realtime');
    assert.equal(url.searchParams.get('deployment'), 'prod-4o');
    assert.equal(url.searchParams.get('api-version'), '2024-10-01-preview');
    assert.equal(fake.realtime.sessions[0]!.headers['api-key'], 'az-key');
  } finally {
    session.close();
  }
});

describe('Microsoft Entra ID', () => {
  const entraSettings = (secret = 'secret-1') => {
    const { api_key: _key, ...rest } = settings;
    return { ...rest, entra: { tenant_id: 'tenant-1', client_id: 'client-1', client_secret: secret, authority_host: entra.url } };
  };

  test('a token from the authority host is sent as a bearer token and cached', async () => {
    entra.setExpiresIn(3600);
    const before = entra.tokenRequests.length;
    const p = azureProviderType.create('entra', entraSettings());
    try {
      for (let i = 0; i < 3; i++) {
        const r = await p.call(chat());
        assert.equal(r.status, 200, (await bodyOf(r)).toString());
      }
      assert.equal(entra.tokenRequests.length - before, 1, 'one token for three calls');
      const token = entra.issued.at(-1)!;
      assert.deepEqual(fake.calls.map((c) => c.headers.authorization), [`Bearer ${token}`, `Bearer ${token}`, `Bearer ${token}`]);
      assert.equal(fake.calls[0]?.headers['api-key'], undefined);
      const form = entra.tokenRequests.at(-1)!;
      assert.equal(form.scope, 'https://cognitiveservices.azure.com/.default');
      assert.equal(form.client_id, 'client-1');
    } finally {
      await p.close();
    }
  });

  test('a token close to its expiry is refreshed in the background, before it expires', async () => {
    // Ninety seconds: inside the library's refresh window (two minutes), far from expiring.
    entra.setExpiresIn(90);
    const p = azureProviderType.create('short', entraSettings());
    try {
      const before = entra.tokenRequests.length;
      await bodyOf(await p.call(chat()));
      const first = entra.issued.at(-1)!;
      assert.equal(fake.calls.at(-1)?.headers.authorization, `Bearer ${first}`);
      // The next call is served with the still-valid token while a new one is fetched.
      await bodyOf(await p.call(chat()));
      assert.equal(fake.calls.at(-1)?.headers.authorization, `Bearer ${first}`);
      await waitFor(() => entra.tokenRequests.length - before === 2, 5000);
      entra.setExpiresIn(3600);
      const second = entra.issued.at(-1)!;
      assert.notEqual(second, first);
      // Once the new token has arrived (its answer may still be on its way), calls carry it.
      let sent: string | undefined;
      for (let i = 0; i < 100 && sent !== `Bearer ${second}`; i++) {
        await new Promise((r) => setTimeout(r, 10));
        await bodyOf(await p.call(chat()));
        sent = fake.calls.at(-1)?.headers.authorization;
      }
      assert.equal(sent, `Bearer ${second}`);
    } finally {
      entra.setExpiresIn(3600);
      await p.close();
    }
  });

  test('a refused token request is a 502 naming the provider, and nothing is sent to Azure', async () => {
    const p = azureProviderType.create('badsecret', entraSettings('wrong-secret'));
    try {
      await assert.rejects(p.call(chat()), (err: unknown) => {
        assert.ok(err instanceof UpstreamUnavailableError);
        assert.equal(err.status, 502);
        assert.match(err.message, /provider badsecret: no Microsoft Entra ID token/);
        return true;
      });
      assert.equal(fake.calls.length, 0);
    } finally {
      await p.close();
    }
  });
});
