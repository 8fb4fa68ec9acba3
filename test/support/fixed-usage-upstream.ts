/**
 * An upstream whose answers report exactly the usage a test sets, in the OpenAI chat and
 * Anthropic Messages dialects, so that costs can be asserted to the last digit (including
 * cached prompt tokens, which the general fake upstream does not report). A chat request with
 * `"stream": true` is answered as SSE, its usage in a last chunk. Any path other than
 * `/v1/messages` answers in the chat dialect (passthrough requests land anywhere); the body is
 * read as JSON whatever its declared content type, and the answer names the request's model
 * (or `answerModel` when the request names none).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FixedUsageUpstream {
  readonly url: string;
  /**
   * The `usage` object of the next answers, in the dialect of the route asked; a string is sent as
   * it is (JSON text such as `{"prompt_tokens":1e400}` that JSON.stringify cannot write).
   */
  setUsage(usage: Record<string, unknown> | string): void;
  /** The model an answer names when its request names none (default `answer-model`). */
  answerModel: string;
  /** How long every answer waits before it is sent, in ms (default 0): requests sent together overlap. */
  delayMs: number;
  /** Bodies received, as text, in order. */
  readonly received: string[];
  close(): Promise<void>;
}

export async function startFixedUsageUpstream(): Promise<FixedUsageUpstream> {
  let usage: Record<string, unknown> | string = {};
  const USAGE = '"__usage__"';
  /** JSON text of `value`, its usage placeholder replaced by the usage set. */
  const withUsage = (value: unknown): string => JSON.stringify(value).replace(USAGE, typeof usage === 'string' ? usage : JSON.stringify(usage));
  const received: string[] = [];
  const state = { answerModel: 'answer-model', delayMs: 0 };
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk: Buffer) => (raw += chunk.toString()));
    req.on('end', () => {
      if (state.delayMs > 0) setTimeout(answer, state.delayMs);
      else answer();
    });
    const answer = (): void => {
      received.push(raw);
      let request: { model?: unknown; stream?: unknown } = {};
      try {
        request = JSON.parse(raw || '{}') as typeof request;
      } catch {
        // not JSON: answered all the same
      }
      const model = typeof request.model === 'string' ? request.model : state.answerModel;
      if (req.url !== '/v1/messages' && request.stream === true) {
        const base = { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 0, model };
        const events = [
          { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: 'ok' }, finish_reason: null }] },
          { ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] },
          { ...base, choices: [], usage: '__usage__' },
        ];
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(`${events.map((e) => `data: ${withUsage(e)}\n\n`).join('')}data: [DONE]\n\n`);
        return;
      }
      const body =
        req.url === '/v1/messages'
          ? { id: 'msg_1', type: 'message', role: 'assistant', model, content: [{ type: 'text', text: 'ok' }], stop_reason: 'end_turn', stop_sequence: null, usage: '__usage__' }
          : { id: 'chatcmpl-1', object: 'chat.completion', created: 0, model, choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }], usage: '__usage__' };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(withUsage(body));
    };
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    setUsage: (next) => {
      usage = next;
    },
    get answerModel() {
      return state.answerModel;
    },
    set answerModel(model: string) {
      state.answerModel = model;
    },
    get delayMs() {
      return state.delayMs;
    },
    set delayMs(ms: number) {
      state.delayMs = ms;
    },
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
