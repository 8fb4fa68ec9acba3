/**
 * A fake LLM upstream for tests: OpenAI- and Anthropic-compatible routes on 127.0.0.1
 * with deterministic answers (the reply echoes the last user message; token counts are
 * derived from text length), request recording, and knobs for latency, forced errors,
 * hangs, dropped streams and held streams.
 */
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { attachFakeRealtime, createFakeBatchApi, type FakeBatchApi, type FakeRealtime } from './fake-upstream-rtb.ts';

export interface FakeUpstreamOptions {
  /** When set, OpenAI routes require `Authorization: Bearer <apiKey>`, Anthropic routes `x-api-key` + `anthropic-version`. */
  apiKey?: string;
  /** When set, requests for other models get a 404 model_not_found; also the `GET /v1/models` list. */
  models?: string[];
  /** Delay before the response headers, in ms. */
  latencyMs?: number;
  /** Delay between stream events, in ms. */
  chunkDelayMs?: number;
  /** Used in response ids (`chatcmpl-<name>-<n>`) and the `x-fake-upstream` header. */
  name?: string;
}

export interface RecordedCall {
  method: string;
  /** Path without the query string, e.g. `/v1/chat/completions`. */
  path: string;
  query: string;
  /** The request target exactly as it arrived, before any URL normalisation. */
  target: string;
  headers: IncomingHttpHeaders;
  /** Parsed JSON body; for multipart bodies the simple form fields. */
  body: unknown;
  raw: Buffer;
  model: string | undefined;
  stream: boolean;
  /** The status answered (undefined while pending, for hangs and dropped streams). */
  status: number | undefined;
  /** True when the connection closed before the answer was complete (client abort, drop). */
  aborted: boolean;
  at: number;
}

export interface FailSpec {
  status: number;
  /** An object is sent as JSON, a string as is; default: an error body in the route's dialect. */
  body?: unknown;
  /** Added to the answer's headers; undefined leaves one out (a 429's default `retry-after: 1`). */
  headers?: Record<string, string | undefined>;
}

export interface FakeUpstream {
  readonly url: string;
  readonly name: string;
  readonly port: number;
  readonly calls: RecordedCall[];
  /** The most requests it was answering at one time since it started (or since reset()). */
  readonly maxConcurrent: number;
  /** Number of recorded requests, optionally only those for one path (e.g. `/v1/chat/completions`). */
  callCount(path?: string): number;
  /** The next `n` requests answer with this error. */
  failNext(n: number, spec: FailSpec): void;
  /** Every request for `model` answers with this error until cleared with `undefined`. */
  failModel(model: string, spec: FailSpec | undefined): void;
  setLatency(ms: number): void;
  /**
   * Headers added to every answer (rate-limit headers, say) for requests naming `model`, or for
   * every request without one; undefined clears them.
   */
  setAnswerHeaders(headers: Record<string, string> | undefined, model?: string): void;
  setChunkDelay(ms: number): void;
  /** The next `n` requests are never answered (the connection stays open). */
  hangNext(n: number): void;
  /** The next `n` streams are cut (socket destroyed) after their second event. */
  dropStreamNext(n: number): void;
  /** The next `n` streams send their 200 headers, then close the connection before any event. */
  dropStreamBeforeFirstByteNext(n: number): void;
  /** The next stream sends its first event, then waits until the returned function is called. */
  holdStreamNext(): () => void;
  /** The realtime WebSocket at `/v1/realtime` (sessions, usage, drop). */
  readonly realtime: FakeRealtime;
  /** The OpenAI `/v1/files` and `/v1/batches` routes' state. */
  readonly batchApi: FakeBatchApi;
  /** Clears recorded calls and every knob back to the constructor's options. */
  reset(): void;
  close(): Promise<void>;
}

type Json = Record<string, unknown>;

const tokens = (text: string): number => Math.max(1, Math.ceil(text.length / 4));

function textOf(c: unknown): string {
  if (typeof c === 'string') return c;
  if (!Array.isArray(c)) return '';
  return c.map((p) => (p && typeof p === 'object' && typeof (p as Json).text === 'string' ? (p as Json).text as string : '')).join('');
}

/** Last user text and all prompt text of a chat, Messages or Responses body. */
function promptOf(body: Json): { last: string; all: string } {
  if (typeof body.input === 'string') return { last: body.input, all: body.input };
  const items = Array.isArray(body.messages) ? body.messages : Array.isArray(body.input) ? body.input : [];
  let last = '';
  let all = textOf(body.system) + textOf(body.instructions);
  for (const m of items as Json[]) {
    if (!m || typeof m !== 'object') continue;
    const t = textOf(m.content);
    all += t;
    if (m.role === 'user' || m.role === undefined) last = t;
  }
  return { last, all };
}

function pieces(text: string): string[] {
  return text.match(/\S+\s*|\s+/g) ?? [''];
}

const sse = (data: unknown, event?: string): string =>
  `${event ? `event: ${event}\n` : ''}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;

function anthropicErrorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  if (status === 529) return 'overloaded_error';
  return status >= 500 ? 'api_error' : 'invalid_request_error';
}

function openaiErrorType(status: number): string {
  if (status === 401) return 'invalid_request_error';
  if (status === 429) return 'rate_limit_exceeded';
  return status >= 500 ? 'server_error' : 'invalid_request_error';
}

/** Simple multipart/form-data field reader (text fields only; file parts are skipped). */
function multipartFields(raw: Buffer, contentType: string): Json {
  const m = /boundary=(?:"([^"]+)"|([^;]+))/i.exec(contentType);
  const boundary = m?.[1] ?? m?.[2];
  const out: Json = {};
  if (!boundary) return out;
  for (const part of raw.toString('latin1').split(`--${boundary}`)) {
    const head = /^\r\nContent-Disposition: form-data; name="([^"]+)"(; filename="[^"]*")?[^]*?\r\n\r\n/i.exec(part);
    if (!head || !head[1]) continue;
    const value = part.slice(head[0].length).replace(/\r\n$/, '');
    out[head[1]] = head[2] ? { filename: head[2].slice(12, -1), bytes: value.length } : value;
  }
  return out;
}

export async function startFakeUpstream(options: FakeUpstreamOptions = {}): Promise<FakeUpstream> {
  const name = options.name ?? 'fake';
  const calls: RecordedCall[] = [];
  let latencyMs = options.latencyMs ?? 0;
  let chunkDelayMs = options.chunkDelayMs ?? 0;
  let failQueue: FailSpec[] = [];
  let modelFailures = new Map<string, FailSpec>();
  let answerHeaders = new Map<string | undefined, Record<string, string>>();
  const extraHeaders = (call: RecordedCall): Record<string, string> => answerHeaders.get(call.model) ?? answerHeaders.get(undefined) ?? {};
  let hangs = 0;
  let drops = 0;
  let earlyDrops = 0;
  let holds: Array<Promise<void>> = [];
  let seq = 0;
  let concurrent = 0;
  let maxConcurrent = 0;
  const batchApi = createFakeBatchApi(name);

  const send = (res: ServerResponse, call: RecordedCall, status: number, body: unknown, headers: Record<string, string | undefined> = {}): void => {
    call.status = status;
    const isBuf = Buffer.isBuffer(body);
    const payload = isBuf ? body : typeof body === 'string' ? body : JSON.stringify(body);
    const all: Record<string, string | undefined> = { 'content-type': isBuf ? 'application/octet-stream' : 'application/json', 'x-fake-upstream': name, ...extraHeaders(call), ...headers };
    res.writeHead(status, Object.fromEntries(Object.entries(all).filter(([, value]) => value !== undefined)) as Record<string, string>);
    res.end(payload);
  };

  const stream = async (res: ServerResponse, call: RecordedCall, events: string[]): Promise<void> => {
    if (earlyDrops > 0) {
      earlyDrops--;
      call.status = 200;
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'x-fake-upstream': name });
      res.flushHeaders();
      // The headers are out, the (chunked) body never starts.
      res.socket?.end();
      return;
    }
    const drop = drops > 0 ? (drops--, true) : false;
    const hold = holds.shift();
    call.status = 200;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'x-fake-upstream': name, ...extraHeaders(call) });
    for (let i = 0; i < events.length; i++) {
      if (res.destroyed) return;
      if (i > 0 && chunkDelayMs > 0) await sleep(chunkDelayMs);
      if (drop && i === 2) {
        // end() flushes what was written, then closes mid-body (the chunked body never terminates).
        res.socket?.end();
        return;
      }
      res.write(events[i]);
      if (i === 0 && hold) await hold;
    }
    res.end();
  };

  const authError = (call: RecordedCall, anthropic: boolean): { status: number; body: unknown } | undefined => {
    if (!options.apiKey) return undefined;
    const h = call.headers;
    const bearerOk = h.authorization === `Bearer ${options.apiKey}`;
    const keyOk = h['x-api-key'] === options.apiKey;
    if (call.path === '/v1/models' ? bearerOk || keyOk : anthropic ? keyOk : bearerOk) {
      if (anthropic && !h['anthropic-version']) {
        return { status: 400, body: { type: 'error', error: { type: 'invalid_request_error', message: 'anthropic-version: header is required' } } };
      }
      return undefined;
    }
    return anthropic
      ? { status: 401, body: { type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } } }
      : { status: 401, body: { error: { message: 'Incorrect API key provided', type: 'invalid_request_error', param: null, code: 'invalid_api_key' } } };
  };

  const errorBody = (status: number, anthropic: boolean): unknown => anthropic
    ? { type: 'error', error: { type: anthropicErrorType(status), message: `fake ${name}: forced error ${status}` } }
    : { error: { message: `fake ${name}: forced error ${status}`, type: openaiErrorType(status), param: null, code: null } };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks);
    const url = new URL(req.url ?? '/', 'http://x');
    const ct = String(req.headers['content-type'] ?? '');
    let body: unknown;
    if (ct.includes('json') && raw.length > 0) {
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        body = undefined;
      }
    } else if (ct.startsWith('multipart/form-data')) body = multipartFields(raw, ct);
    const b = (body && typeof body === 'object' ? body : {}) as Json;
    const call: RecordedCall = {
      method: req.method ?? 'GET', path: url.pathname, query: url.search, target: req.url ?? '', headers: req.headers, body, raw,
      model: typeof b.model === 'string' ? b.model : undefined, stream: b.stream === true || b.stream === 'true',
      status: undefined, aborted: false, at: Date.now(),
    };
    calls.push(call);
    res.on('close', () => {
      if (!res.writableFinished) call.aborted = true;
    });
    if (hangs > 0) {
      hangs--;
      return; // never answered; close() or the client ends it
    }
    if (latencyMs > 0) await sleep(latencyMs);
    const anthropic = call.path === '/v1/messages';
    const authErr = authError(call, anthropic);
    if (authErr) return send(res, call, authErr.status, authErr.body);
    if (batchApi.handle(call.method, url.pathname, raw, ct, res)) return;
    const forced = failQueue.shift() ?? (call.model !== undefined ? modelFailures.get(call.model) : undefined);
    if (forced) {
      const headers = { ...(forced.status === 429 ? { 'retry-after': '1' } : {}), ...forced.headers };
      return send(res, call, forced.status, forced.body ?? errorBody(forced.status, anthropic), headers);
    }
    if (call.method === 'POST' && url.pathname !== '/v1/audio/transcriptions' && body === undefined) {
      return send(res, call, 400, anthropic
        ? { type: 'error', error: { type: 'invalid_request_error', message: 'body must be JSON' } }
        : { error: { message: 'body must be JSON', type: 'invalid_request_error', param: null, code: null } });
    }
    if (options.models && call.model !== undefined && !options.models.includes(call.model)) {
      return send(res, call, 404, anthropic
        ? { type: 'error', error: { type: 'not_found_error', message: `model: ${call.model}` } }
        : { error: { message: `The model \`${call.model}\` does not exist`, type: 'invalid_request_error', param: 'model', code: 'model_not_found' } });
    }
    const route = `${call.method} ${url.pathname}`;
    const model = call.model ?? 'unknown';
    const id = `${name}-${++seq}`;
    const created = Math.floor(Date.now() / 1000);
    switch (route) {
      case 'GET /v1/models': {
        const ids = options.models ?? ['fake-model'];
        return send(res, call, 200, {
          object: 'list',
          data: ids.map((m) => ({ id: m, object: 'model', type: 'model', created: 0, owned_by: name, display_name: m })),
          has_more: false, first_id: ids[0] ?? null, last_id: ids[ids.length - 1] ?? null,
        });
      }
      case 'POST /v1/chat/completions': {
        const p = promptOf(b);
        const reply = p.last;
        const usage = { prompt_tokens: tokens(p.all), completion_tokens: tokens(reply), total_tokens: tokens(p.all) + tokens(reply) };
        if (!call.stream) {
          return send(res, call, 200, {
            id: `chatcmpl-${id}`, object: 'chat.completion', created, model, system_fingerprint: name,
            choices: [{ index: 0, message: { role: 'assistant', content: reply, refusal: null }, logprobs: null, finish_reason: 'stop' }],
            usage,
          });
        }
        const includeUsage = (b.stream_options as Json | undefined)?.include_usage === true;
        const base = { id: `chatcmpl-${id}`, object: 'chat.completion.chunk', created, model, system_fingerprint: name };
        const chunk = (delta: Json, finish: string | null): string =>
          sse({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], ...(includeUsage ? { usage: null } : {}) });
        const events = [chunk({ role: 'assistant', content: '' }, null), ...pieces(reply).map((t) => chunk({ content: t }, null)), chunk({}, 'stop')];
        if (includeUsage) events.push(sse({ ...base, choices: [], usage }));
        events.push('data: [DONE]\n\n');
        return stream(res, call, events);
      }
      case 'POST /v1/responses': {
        const p = promptOf(b);
        const reply = p.last;
        const usage = { input_tokens: tokens(p.all), output_tokens: tokens(reply), total_tokens: tokens(p.all) + tokens(reply) };
        const item = { type: 'message', id: `msg_${id}`, status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: reply, annotations: [] }] };
        const done = { id: `resp_${id}`, object: 'response', created_at: created, status: 'completed', model, output: [item], usage };
        if (!call.stream) return send(res, call, 200, done);
        let n = 0;
        const ev = (type: string, data: Json): string => sse({ type, sequence_number: n++, ...data }, type);
        return stream(res, call, [
          ev('response.created', { response: { ...done, status: 'in_progress', output: [], usage: null } }),
          ...pieces(reply).map((t) => ev('response.output_text.delta', { item_id: item.id, output_index: 0, content_index: 0, delta: t })),
          ev('response.completed', { response: done }),
        ]);
      }
      case 'POST /v1/embeddings': {
        const inputs = typeof b.input === 'string' ? [b.input] : Array.isArray(b.input) ? b.input.map(String) : [''];
        const data = inputs.map((text, index) => ({
          object: 'embedding', index,
          embedding: [...createHash('sha256').update(text).digest().subarray(0, 8)].map((x) => x / 255),
        }));
        const prompt = inputs.reduce((s, t) => s + tokens(t), 0);
        return send(res, call, 200, { object: 'list', data, model, usage: { prompt_tokens: prompt, total_tokens: prompt } });
      }
      case 'POST /v1/audio/speech': {
        const audio = Buffer.concat([Buffer.from('ID3'), createHash('sha256').update(String(b.input ?? '')).digest()]);
        call.status = 200;
        res.writeHead(200, { 'content-type': 'audio/mpeg', 'x-fake-upstream': name });
        return void res.end(audio);
      }
      case 'POST /v1/audio/transcriptions': {
        if (!ct.startsWith('multipart/form-data')) return send(res, call, 400, { error: { message: 'expected multipart/form-data', type: 'invalid_request_error', param: null, code: null } });
        call.model = typeof b.model === 'string' ? b.model : undefined;
        return send(res, call, 200, { text: `fake transcription of ${raw.length} bytes` });
      }
      case 'POST /v1/messages': {
        const p = promptOf(b);
        const reply = p.last;
        const input = tokens(p.all);
        const output = tokens(reply);
        const msg = { id: `msg_${id}`, type: 'message', role: 'assistant', model, content: [{ type: 'text', text: reply }], stop_reason: 'end_turn', stop_sequence: null, usage: { input_tokens: input, output_tokens: output } };
        if (!call.stream) return send(res, call, 200, msg);
        return stream(res, call, [
          sse({ type: 'message_start', message: { ...msg, content: [], stop_reason: null, usage: { input_tokens: input, output_tokens: 1 } } }, 'message_start'),
          sse({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }, 'content_block_start'),
          sse({ type: 'ping' }, 'ping'),
          ...pieces(reply).map((t) => sse({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: t } }, 'content_block_delta')),
          sse({ type: 'content_block_stop', index: 0 }, 'content_block_stop'),
          sse({ type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: output } }, 'message_delta'),
          sse({ type: 'message_stop' }, 'message_stop'),
        ]);
      }
      default:
        return send(res, call, 404, { error: { message: `fake ${name}: no route ${route}`, type: 'invalid_request_error', param: null, code: null } });
    }
  };

  const server = createServer((req, res) => {
    maxConcurrent = Math.max(maxConcurrent, ++concurrent);
    res.once('close', () => concurrent--);
    handle(req, res).catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const realtime = attachFakeRealtime(server, options.apiKey);

  return {
    url: `http://127.0.0.1:${port}`,
    name,
    port,
    calls,
    realtime,
    batchApi,
    callCount: (path) => (path === undefined ? calls.length : calls.filter((c) => c.path === path).length),
    failNext: (n, spec) => {
      for (let i = 0; i < n; i++) failQueue.push(spec);
    },
    failModel: (model, spec) => {
      if (spec) modelFailures.set(model, spec);
      else modelFailures.delete(model);
    },
    setLatency: (ms) => { latencyMs = ms; },
    setAnswerHeaders: (headers, model) => {
      if (headers === undefined) answerHeaders.delete(model);
      else answerHeaders.set(model, headers);
    },
    setChunkDelay: (ms) => { chunkDelayMs = ms; },
    hangNext: (n) => { hangs += n; },
    dropStreamNext: (n) => { drops += n; },
    dropStreamBeforeFirstByteNext: (n) => { earlyDrops += n; },
    holdStreamNext: () => {
      let release!: () => void;
      holds.push(new Promise<void>((resolve) => { release = resolve; }));
      return () => release();
    },
    get maxConcurrent() {
      return maxConcurrent;
    },
    reset: () => {
      maxConcurrent = concurrent;
      calls.length = 0;
      latencyMs = options.latencyMs ?? 0;
      chunkDelayMs = options.chunkDelayMs ?? 0;
      failQueue = [];
      modelFailures = new Map();
      answerHeaders = new Map();
      hangs = 0;
      drops = 0;
      earlyDrops = 0;
      holds = [];
      seq = 0;
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
