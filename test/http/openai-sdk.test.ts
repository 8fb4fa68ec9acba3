import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI, { APIError, toFile } from 'openai';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';
import { openaiProvider } from '../support/e2e.ts';

const client = (gw: TestGateway, apiKey = 'unused'): OpenAI => new OpenAI({ baseURL: `${gw.url}/v1`, apiKey, maxRetries: 0 });

describe('openai SDK against an OpenAI-compatible upstream', () => {
  let up: FakeUpstream;
  let second: FakeUpstream;
  let gw: TestGateway;
  let sdk: OpenAI;

  before(async () => {
    up = await startFakeUpstream({ apiKey: 'k-up', name: 'up' });
    second = await startFakeUpstream({ apiKey: 'k-second', name: 'second' });
    gw = await startTestGateway({
      yaml:
        'providers:\n' +
        openaiProvider('up', up.url, ['gpt-x', 'shared-model', 'embed-x', 'tts-x', 'whisper-x']) +
        openaiProvider('second', second.url, ['shared-model', 'only-second']),
    });
    sdk = client(gw);
  });
  after(async () => {
    await gw?.close();
    await up?.close();
    await second?.close();
  });

  it('answers a non-streamed chat completion and the upstream receives its own model id', async () => {
    up.reset();
    const res = await sdk.chat.completions.create({ model: 'up/gpt-x', messages: [{ role: 'user', content: 'hello gateway' }] });
    assert.equal(res.choices[0]?.message.content, 'hello gateway');
    assert.equal(res.object, 'chat.completion');
    assert.ok(res.usage && res.usage.total_tokens > 0);
    assert.equal(up.callCount('/v1/chat/completions'), 1);
    assert.equal(up.calls[0]?.model, 'gpt-x');
    assert.equal(up.calls[0]?.headers.authorization, 'Bearer k-up');
  });

  it('forwards the request bytes unchanged when the model id needs no rewrite', async () => {
    // Numbers JSON.parse cannot round-trip (a 2^64-scale seed, 1.0) show whether the body was re-serialized.
    const body = '{ "model": "gpt-x",\n  "messages": [{"role": "user", "content": "exact"}], "seed": 18446744073709551615, "temperature": 1.0 }';
    up.reset();
    const exact = await gw.request('POST', '/v1/chat/completions', { body, headers: { 'content-type': 'application/json' } });
    assert.equal(exact.status, 200, exact.text);
    assert.equal(up.calls[0]?.raw.toString(), body);

    up.reset();
    const rewritten = await gw.request('POST', '/v1/chat/completions', { body: body.replace('"gpt-x"', '"up/gpt-x"'), headers: { 'content-type': 'application/json' } });
    assert.equal(rewritten.status, 200, rewritten.text);
    assert.equal(up.calls[0]?.model, 'gpt-x', 'the provider prefix is removed, so the body is serialized again');

    // Text that merely mentions the words, or uses \u escapes, takes the careful parser and is accepted.
    up.reset();
    const wordy = '{"model":"gpt-x","messages":[{"role":"user","content":"the constructor of a prototype, caf\\u00e9"}]}';
    const accepted = await gw.request('POST', '/v1/chat/completions', { body: wordy, headers: { 'content-type': 'application/json' } });
    assert.equal(accepted.status, 200, accepted.text);
    assert.equal(up.calls[0]?.raw.toString(), wordy);

    // A stream: the gateway asks for usage by adding stream_options in front of the client's own bytes.
    up.reset();
    const streamed = ' {"model":"gpt-x", "stream": true, "messages":[{"role":"user","content":"a b c"}], "seed": 18446744073709551615}';
    const sse = await gw.request('POST', '/v1/chat/completions', { body: streamed, headers: { 'content-type': 'application/json' } });
    assert.equal(sse.status, 200, sse.text);
    assert.equal(up.calls[0]?.raw.toString(), '{"stream_options":{"include_usage":true},"model":"gpt-x", "stream": true, "messages":[{"role":"user","content":"a b c"}], "seed": 18446744073709551615}');
    assert.ok(!sse.text.includes('"usage":{'), 'the usage chunk the client did not ask for is removed');
    assert.ok(sse.text.trimEnd().endsWith('data: [DONE]'));

    // stream_options already present (without include_usage): merged, so the body is serialized again.
    up.reset();
    const merged = await gw.request('POST', '/v1/chat/completions', { body: { model: 'gpt-x', stream: true, stream_options: { x: 1 }, messages: [{ role: 'user', content: 'a' }] } });
    assert.equal(merged.status, 200, merged.text);
    assert.deepEqual((up.calls[0]?.body as { stream_options: unknown }).stream_options, { x: 1, include_usage: true });
  });

  it('streams a chat completion chunk by chunk, with usage when asked for', async () => {
    up.reset();
    const stream = await sdk.chat.completions.create({
      model: 'up/gpt-x',
      messages: [{ role: 'user', content: 'one two three four' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let chunks = 0;
    let usage: OpenAI.CompletionUsage | undefined | null;
    for await (const chunk of stream) {
      chunks++;
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal(text, 'one two three four');
    assert.ok(chunks >= 5, `expected several chunks, got ${chunks}`);
    assert.ok(usage, 'usage chunk present');
    assert.ok(usage.total_tokens > 0);
    assert.equal(up.calls[0]?.stream, true);
    assert.equal(up.calls[0]?.model, 'gpt-x');
  });

  it('resolves a bare model name to the provider that serves it', async () => {
    up.reset();
    second.reset();
    const res = await sdk.chat.completions.create({ model: 'only-second', messages: [{ role: 'user', content: 'x' }] });
    assert.equal(res.choices[0]?.message.content, 'x');
    assert.equal(second.callCount('/v1/chat/completions'), 1);
    assert.equal(second.calls[0]?.model, 'only-second');
    assert.equal(up.callCount(), 0);

    await sdk.chat.completions.create({ model: 'gpt-x', messages: [{ role: 'user', content: 'y' }] });
    assert.equal(up.callCount('/v1/chat/completions'), 1);
    assert.equal(up.calls[0]?.model, 'gpt-x');
  });

  it('sends a bare model served by two providers to the first configured one', async () => {
    up.reset();
    second.reset();
    await sdk.chat.completions.create({ model: 'shared-model', messages: [{ role: 'user', content: 'z' }] });
    assert.equal(up.callCount('/v1/chat/completions'), 1);
    assert.equal(second.callCount(), 0);
    // The prefixed name still reaches the second provider.
    await sdk.chat.completions.create({ model: 'second/shared-model', messages: [{ role: 'user', content: 'z' }] });
    assert.equal(second.callCount('/v1/chat/completions'), 1);
    assert.equal(second.calls[0]?.model, 'shared-model');
    assert.equal(second.calls[0]?.headers.authorization, 'Bearer k-second');
  });

  it('creates embeddings', async () => {
    up.reset();
    const res = await sdk.embeddings.create({ model: 'up/embed-x', input: ['alpha', 'beta'], encoding_format: 'float' });
    assert.equal(res.data.length, 2);
    assert.ok(Array.isArray(res.data[0]?.embedding) && res.data[0].embedding.length > 0);
    assert.notDeepEqual(res.data[0]?.embedding, res.data[1]?.embedding);
    assert.equal(up.calls[0]?.path, '/v1/embeddings');
    assert.equal(up.calls[0]?.model, 'embed-x');
  });

  it('answers the Responses API, non-streamed and streamed', async () => {
    up.reset();
    const res = await sdk.responses.create({ model: 'up/gpt-x', input: 'respond please' });
    assert.equal(res.output_text, 'respond please');
    assert.equal(up.calls[0]?.path, '/v1/responses');
    assert.equal(up.calls[0]?.model, 'gpt-x');

    const stream = await sdk.responses.create({ model: 'up/gpt-x', input: 'stream this text', stream: true });
    let deltas = '';
    const types: string[] = [];
    for await (const ev of stream) {
      types.push(ev.type);
      if (ev.type === 'response.output_text.delta') deltas += ev.delta;
    }
    assert.equal(deltas, 'stream this text');
    assert.equal(types[0], 'response.created');
    assert.equal(types.at(-1), 'response.completed');
  });

  it('returns speech audio bytes', async () => {
    up.reset();
    const res = await sdk.audio.speech.create({ model: 'up/tts-x', voice: 'alloy', input: 'say this' });
    const bytes = Buffer.from(await res.arrayBuffer());
    assert.equal(bytes.subarray(0, 3).toString('latin1'), 'ID3');
    assert.equal(bytes.length, 3 + 32);
    assert.match(res.headers.get('content-type') ?? '', /audio\/mpeg/);
    assert.equal(up.calls[0]?.model, 'tts-x');
  });

  it('uploads a transcription as multipart and the upstream sees its own model id', async () => {
    up.reset();
    const audio = Buffer.alloc(1000, 7);
    const res = await sdk.audio.transcriptions.create({ model: 'up/whisper-x', file: await toFile(audio, 'clip.mp3', { type: 'audio/mpeg' }) });
    assert.match(res.text, /^fake transcription of \d+ bytes$/);
    const call = up.calls[0];
    assert.equal(call?.path, '/v1/audio/transcriptions');
    assert.match(String(call?.headers['content-type']), /^multipart\/form-data/);
    const fields = call?.body as Record<string, unknown>;
    assert.equal(fields.model, 'whisper-x');
    assert.deepEqual(fields.file, { filename: 'clip.mp3', bytes: 1000 });
  });

  it('lists models, including provider-prefixed names', async () => {
    const ids: string[] = [];
    for await (const m of sdk.models.list()) ids.push(m.id);
    assert.ok(ids.includes('up/gpt-x'), ids.join(','));
    assert.ok(ids.includes('second/only-second'), ids.join(','));
  });

  it('throws APIError with the upstream status for an upstream 500 and 429', async () => {
    up.reset();
    up.failNext(1, { status: 500 });
    await assert.rejects(sdk.chat.completions.create({ model: 'up/gpt-x', messages: [{ role: 'user', content: 'x' }] }), (err: unknown) => {
      assert.ok(err instanceof APIError);
      assert.equal(err.status, 500);
      assert.equal((err.error as { type?: string }).type, 'provider_error');
      return true;
    });
    up.failNext(1, { status: 429 });
    await assert.rejects(sdk.chat.completions.create({ model: 'up/gpt-x', messages: [{ role: 'user', content: 'x' }] }), (err: unknown) => {
      assert.ok(err instanceof APIError);
      assert.equal(err.status, 429);
      assert.equal((err.error as { type?: string }).type, 'provider_error');
      return true;
    });
    assert.equal(up.callCount(), 2, 'the SDK did not retry');
  });
});

describe('openai SDK against the built-in mock provider (no providers configured)', () => {
  let gw: TestGateway;
  let sdk: OpenAI;
  before(async () => {
    gw = await startTestGateway({ yaml: '' });
    sdk = client(gw);
  });
  after(async () => {
    await gw?.close();
  });

  for (const model of ['mock/mock-1', 'mock-1']) {
    it(`answers a chat completion for ${model}`, async () => {
      const res = await sdk.chat.completions.create({ model, messages: [{ role: 'user', content: 'echo me' }] });
      assert.equal(typeof res.choices[0]?.message.content, 'string');
      assert.ok((res.choices[0]?.message.content ?? '').length > 0);
      assert.ok(res.usage && res.usage.total_tokens > 0);
    });

    it(`streams a chat completion for ${model} with usage`, async () => {
      const stream = await sdk.chat.completions.create({ model, messages: [{ role: 'user', content: 'echo me please' }], stream: true, stream_options: { include_usage: true } });
      let text = '';
      let usage: OpenAI.CompletionUsage | null | undefined;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? '';
        if (chunk.usage) usage = chunk.usage;
      }
      assert.ok(text.length > 0);
      assert.ok(usage && usage.total_tokens > 0);
    });
  }

  it('lists the mock models', async () => {
    const ids: string[] = [];
    for await (const m of sdk.models.list()) ids.push(m.id);
    assert.ok(ids.includes('mock/mock-1'), ids.join(','));
  });

  it('answers embeddings and responses from the mock', async () => {
    const emb = await sdk.embeddings.create({ model: 'mock/mock-embed', input: 'hi', encoding_format: 'float' });
    assert.ok(emb.data[0] && emb.data[0].embedding.length > 0);
    const resp = await sdk.responses.create({ model: 'mock-1', input: 'hi there' });
    assert.ok(resp.output_text.length > 0);
  });
});
