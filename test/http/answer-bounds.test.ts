/**
 * End-to-end: the size bounds on what a provider sends back. A large SSE event is relayed in
 * linear time (the gateway stays responsive meanwhile); an event beyond
 * `providers.<name>.max_event_bytes` ends the stream with an in-band error event; a JSON answer
 * beyond `providers.<name>.max_response_bytes` is a 502, and so is a passthrough error answer.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import OpenAI, { APIError } from 'openai';
import { SseParser } from '../../src/providers/sse.ts';
import { anthropicProvider, assertOpenAiError, openaiProvider } from '../support/e2e.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';

const MIB = 1024 * 1024;
const CHUNK = 16 * 1024;

/** A chat chunk whose content is `text`. */
const chatChunk = (text: string): string => `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 0, model: 'm', choices: [{ index: 0, delta: { content: text }, finish_reason: null }] })}\n\n`;

/**
 * An upstream whose answer is chosen by the model name: `big-<MiB>` streams one chat event of that
 * size, in 16 KiB writes; `json-<MiB>` answers a JSON chat completion of that size; on the
 * Messages route, `big-<MiB>` streams one Anthropic text delta of that size.
 */
async function startSizedUpstream(): Promise<{ url: string; server: Server; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk: Buffer) => (raw += chunk.toString()));
    req.on('end', () => {
      if (req.url?.startsWith('/v1/error')) {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: 'x'.repeat(2 * MIB) } }));
        return;
      }
      const model = (JSON.parse(raw || '{}') as { model?: string }).model ?? '';
      const [kind, size] = model.split('-');
      const bytes = Number(size) * MIB;
      if (kind === 'json') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ id: 'c1', object: 'chat.completion', created: 0, model, choices: [{ index: 0, message: { role: 'assistant', content: 'x'.repeat(bytes) }, finish_reason: 'stop' }] }));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const messages = req.url === '/v1/messages';
      const head = messages
        ? 'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","model":"m","usage":{"input_tokens":3,"output_tokens":0}}}\n\n'
          + 'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"'
        : chatChunk('first') + 'data: {"choices":[{"index":0,"delta":{"content":"';
      const tail = messages
        ? '"}}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n'
        : `"}}]}\n\n${chatChunk('last')}data: [DONE]\n\n`;
      const body = Buffer.from(head + 'x'.repeat(bytes) + tail);
      let at = 0;
      const writeSome = (): void => {
        while (at < body.length) {
          const piece = body.subarray(at, at + CHUNK);
          at += piece.length;
          if (!res.write(piece)) return void res.once('drain', writeSome);
        }
        res.end();
      };
      writeSome();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    server,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

/** The data of every event of an SSE text (`[DONE]` as is, the rest parsed). */
function eventData(text: string): unknown[] {
  const parser = new SseParser({ maxEventBytes: Number.MAX_SAFE_INTEGER, tooLarge: () => new Error('unbounded') });
  return [...parser.push(text), ...parser.end()].filter((e) => e.data !== undefined).map((e) => (e.data === '[DONE]' ? e.data : JSON.parse(e.data!)));
}

describe('bounds on what providers answer', () => {
  let up: Awaited<ReturnType<typeof startSizedUpstream>>;
  let gw: TestGateway;
  before(async () => {
    up = await startSizedUpstream();
    gw = await startTestGateway({
      yaml: 'providers:\n'
        + openaiProvider('roomy', up.url, ['big-12', 'json-1'], 'max_event_bytes: 32mb')
        + openaiProvider('tight', up.url, ['big-2', 'json-3'], 'max_event_bytes: 1mb, max_response_bytes: 2mb')
        + anthropicProvider('claude', up.url, ['big-2'], 'max_event_bytes: 1mb'),
    });
  });
  after(async () => {
    await gw.close();
    await up.close();
  });

  it('relays a 12 MiB event whole, and answers /health promptly all the while', async () => {
    let relaying = true;
    const healthMs: number[] = [];
    const probe = (async () => {
      while (relaying) {
        const started = performance.now();
        const res = await fetch(`${gw.url}/health`);
        assert.equal(res.status, 200);
        await res.text();
        healthMs.push(performance.now() - started);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    let text: string;
    try {
      const res = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'roomy/big-12', stream: true, messages: [{ role: 'user', content: 'x' }] }),
        signal: AbortSignal.timeout(20_000),
      });
      assert.equal(res.status, 200);
      text = await res.text();
    } finally {
      relaying = false;
      await probe;
    }
    const data = eventData(text) as Array<{ choices?: Array<{ delta: { content: string } }> } | string>;
    const contents = data.map((d) => (typeof d === 'string' ? d : d.choices?.[0]?.delta.content));
    assert.deepEqual([contents[0], contents[1]?.length, contents[2], contents.at(-1)], ['first', 12 * MIB, 'last', '[DONE]']);
    assert.ok(healthMs.length > 0);
    // Scanning each chunk's new bytes only, the relay never holds the event loop for long; rescanning
    // the whole event at every chunk held it for seconds.
    assert.ok(Math.max(...healthMs) < 2000, `/health took ${Math.round(Math.max(...healthMs))} ms during the relay`);
  });

  it('ends a stream whose event passes max_event_bytes with an in-band error event, after the whole events before it', async () => {
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tight/big-2', stream: true, messages: [{ role: 'user', content: 'x' }] }),
    });
    assert.equal(res.status, 200);
    const text = await res.text();
    assert.ok(text.length < 1.5 * MIB, `${text.length} bytes relayed`);
    const data = eventData(text) as Array<{ choices?: Array<{ delta: { content: string } }>; error?: { type: string; code: string; message: string } }>;
    assert.equal(data.length, 2, 'the first event and the error event, nothing of the large one');
    assert.equal(data[0]?.choices?.[0]?.delta.content, 'first');
    assert.equal(data[1]?.error?.type, 'provider_error');
    assert.equal(data[1]?.error?.code, 'upstream_event_too_large');
    assert.match(data[1]?.error?.message ?? '', /providers\.tight\.max_event_bytes/);
  });

  it('ends a translated stream (chat on an Anthropic provider) the same way', async () => {
    const sdk = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const stream = await sdk.chat.completions.create({ model: 'claude/big-2', stream: true, messages: [{ role: 'user', content: 'x' }] });
    const seen: unknown[] = [];
    await assert.rejects(
      (async () => {
        for await (const chunk of stream) seen.push(chunk);
      })(),
      (err: APIError) => {
        assert.match(err.message, /providers\.claude\.max_event_bytes/);
        return true;
      },
    );
    assert.equal(seen.length, 1, 'the role chunk of message_start came through before the error');
  });

  it('answers 502 for a JSON answer beyond max_response_bytes, and relays one within it', async () => {
    const body = { model: 'tight/json-3', messages: [{ role: 'user', content: 'x' }] };
    const res = await gw.request('POST', '/v1/chat/completions', { body });
    const error = assertOpenAiError(res, 502, 'provider_error');
    assert.equal(error.code, 'upstream_response_too_large');
    assert.match(error.message, /provider tight answered with more than 2097152 bytes \(providers\.tight\.max_response_bytes\)/);

    const fine = await gw.request('POST', '/v1/chat/completions', { body: { ...body, model: 'roomy/json-1' } });
    assert.equal(fine.status, 200);
    assert.equal(fine.json().choices[0].message.content.length, MIB);
  });

  it('answers 502 for a passthrough error answer beyond max_response_bytes (it is read whole)', async () => {
    const res = await gw.request('GET', '/p/tight/error');
    const error = assertOpenAiError(res, 502, 'provider_error');
    assert.equal(error.code, 'upstream_response_too_large');
    // Within the bound, the upstream's own error is passed on.
    const passed = await gw.request('GET', '/p/roomy/error');
    assert.equal(passed.status, 500);
  });
});
