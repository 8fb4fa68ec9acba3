import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI, { RateLimitError } from 'openai';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';
import { anthropicProvider, openaiProvider, waitFor } from '../support/e2e.ts';

const CHUNK_DELAY = 80;
const words = 'one two three four five six';

describe('streaming pass-through and client disconnects', () => {
  let up: FakeUpstream;
  let ant: FakeUpstream;
  let gw: TestGateway;

  before(async () => {
    up = await startFakeUpstream({ apiKey: 'k-up', name: 'up', chunkDelayMs: CHUNK_DELAY });
    ant = await startFakeUpstream({ apiKey: 'k-ant', name: 'ant', chunkDelayMs: CHUNK_DELAY });
    gw = await startTestGateway({
      yaml: 'providers:\n' + openaiProvider('up', up.url, ['gpt-x']) + anthropicProvider('ant', ant.url, ['claude-x']) + `  stall: { type: openai, base_url: ${up.url}/v1, api_key: k-up, models: [gpt-stall], timeout_ms: 300 }\n`
        // Its own instance: a 429 cools its model down for a while (learned capacity).
        + `  refusing: { type: openai, base_url: ${up.url}/v1, api_key: k-up, models: [gpt-r] }\n`,
    });
  });
  after(async () => {
    await gw?.close();
    await up?.close();
    await ant?.close();
  });

  async function timedStream(path: string, body: unknown): Promise<{ first: number; total: number; chunks: number; text: string }> {
    const started = Date.now();
    const res = await fetch(gw.url + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
    const reader = res.body!.getReader();
    let first = -1;
    let chunks = 0;
    let text = '';
    const decoder = new TextDecoder();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (first < 0) first = Date.now() - started;
      chunks++;
      text += decoder.decode(value, { stream: true });
    }
    return { first, total: Date.now() - started, chunks, text };
  }

  it('chat completion chunks reach the client before the upstream has finished', async () => {
    up.reset();
    const t = await timedStream('/v1/chat/completions', { model: 'up/gpt-x', stream: true, messages: [{ role: 'user', content: words }] });
    // 9 events, 8 gaps of CHUNK_DELAY: the whole stream takes >= 640 ms.
    assert.ok(t.total >= CHUNK_DELAY * 6, `total ${t.total}`);
    assert.ok(t.first < t.total / 3, `first chunk at ${t.first} ms of ${t.total} ms: buffered?`);
    assert.ok(t.chunks >= 4, `client saw ${t.chunks} reads; expected the events to arrive separately`);
    assert.match(t.text, /data: \[DONE\]/);
  });

  it('Anthropic message stream chunks pass through as they come', async () => {
    ant.reset();
    const t = await timedStream('/v1/messages', { model: 'ant/claude-x', max_tokens: 20, stream: true, messages: [{ role: 'user', content: words }] });
    assert.ok(t.first < t.total / 3, `first chunk at ${t.first} ms of ${t.total} ms`);
    assert.ok(t.chunks >= 4);
    assert.match(t.text, /event: message_stop/);
  });

  it('a translated stream (chat completions → anthropic provider) is not buffered either', async () => {
    ant.reset();
    const t = await timedStream('/v1/chat/completions', { model: 'ant/claude-x', stream: true, messages: [{ role: 'user', content: words }] });
    assert.ok(t.first < t.total / 3, `first chunk at ${t.first} ms of ${t.total} ms`);
    assert.ok(t.chunks >= 4);
  });

  it('aborting the client (fetch AbortController) closes the upstream connection', async () => {
    up.reset();
    up.setChunkDelay(200);
    const controller = new AbortController();
    const res = await fetch(gw.url + '/v1/chat/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'up/gpt-x', stream: true, messages: [{ role: 'user', content: words + ' seven eight nine ten' }] }),
      signal: controller.signal,
    });
    const reader = res.body!.getReader();
    await reader.read(); // first chunk is there: the upstream stream is in progress
    assert.equal(up.calls.length, 1);
    assert.equal(up.calls[0]?.aborted, false);
    controller.abort();
    await waitFor(() => up.calls[0]?.aborted === true, 2000, 'the upstream connection to close');
    up.setChunkDelay(CHUNK_DELAY);
  });

  it('a client that leaves before the upstream answered cancels the upstream request', async () => {
    up.reset();
    up.hangNext(1); // the upstream never answers this one: only the client leaving can end it
    const controller = new AbortController();
    const pending = fetch(gw.url + '/v1/chat/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'up/gpt-x', messages: [{ role: 'user', content: words }] }),
      signal: controller.signal,
    });
    await waitFor(() => up.calls.length === 1, 2000, 'the upstream call to start');
    controller.abort();
    await assert.rejects(pending);
    await waitFor(() => up.calls[0]?.aborted === true, 2000, 'the upstream request to be cancelled');
    const ok = await gw.request('POST', '/v1/chat/completions', { body: { model: 'up/gpt-x', messages: [{ role: 'user', content: 'still serving' }] } });
    assert.equal(ok.status, 200);
  });

  it('aborting an openai SDK stream closes the upstream connection (anthropic provider)', async () => {
    ant.reset();
    ant.setChunkDelay(200);
    const sdk = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'x', maxRetries: 0 });
    const stream = await sdk.chat.completions.create({ model: 'ant/claude-x', stream: true, messages: [{ role: 'user', content: words }] });
    for await (const _chunk of stream) {
      stream.controller.abort();
      break;
    }
    await waitFor(() => ant.calls[0]?.aborted === true, 2000, 'the upstream connection to close');
    ant.setChunkDelay(CHUNK_DELAY);
    // The gateway still serves afterwards.
    const ok = await gw.request('POST', '/v1/chat/completions', { body: { model: 'ant/claude-x', messages: [{ role: 'user', content: 'still alive' }] } });
    assert.equal(ok.status, 200);
  });

  it('an upstream error before the first byte of a stream is a plain HTTP error (SDK RateLimitError)', async () => {
    up.reset();
    up.failNext(1, { status: 429 });
    const sdk = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'x', maxRetries: 0 });
    await assert.rejects(async () => {
      const stream = await sdk.chat.completions.create({ model: 'refusing/gpt-r', stream: true, messages: [{ role: 'user', content: 'x' }] });
      for await (const _chunk of stream) { /* drain */ }
    }, (err: unknown) => {
      assert.ok(err instanceof RateLimitError);
      assert.equal((err.error as { type?: string }).type, 'provider_error');
      return true;
    });
  });

  it('an upstream stream that goes silent longer than timeout_ms ends with an in-band error', async () => {
    up.reset();
    const release = up.holdStreamNext();
    try {
      const started = Date.now();
      const res = await gw.request('POST', '/v1/chat/completions', { body: { model: 'stall/gpt-stall', stream: true, messages: [{ role: 'user', content: words }] } });
      assert.equal(res.status, 200);
      assert.match(res.text, /"type":"provider_error"/);
      assert.ok(Date.now() - started < 3000, 'the silence timeout fired');
    } finally {
      release();
    }
  });

  it('an upstream stream cut mid-way ends the client stream with an in-band error, not a hang', async () => {
    up.reset();
    up.dropStreamNext(1);
    const t = await timedStream('/v1/chat/completions', { model: 'up/gpt-x', stream: true, messages: [{ role: 'user', content: words }] });
    assert.match(t.text, /"type":"provider_error"/);
    assert.doesNotMatch(t.text, /\[DONE\]/);
  });
});
