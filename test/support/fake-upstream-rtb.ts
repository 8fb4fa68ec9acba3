/**
 * Realtime WebSocket and Files/Batches routes of the fake upstream (see fake-upstream.ts):
 * `/v1/realtime` checks Authorization, records sessions, answers `response.create` with
 * events ending in `response.done` with usage, and can drop a session; `/v1/files` and
 * `/v1/batches` keep uploaded files (which can be deleted) and create batches that complete at once with an output file.
 */
import type { IncomingHttpHeaders, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';

export interface FakeRealtimeSession {
  url: string;
  headers: IncomingHttpHeaders;
  received: unknown[];
  closed: boolean;
  socket: WebSocket;
}

export interface FakeRealtime {
  readonly sessions: FakeRealtimeSession[];
  /** Usage reported by each response.done. */
  usage: { input_tokens: number; output_tokens: number; total_tokens: number };
  /** Destroys the TCP connection of the latest (or given) session without a close frame. */
  drop(index?: number): void;
  /**
   * Starts a response on the latest session without a `response.create`, as server voice
   * detection does: `response.created` now, `response.done` (with usage) after `doneAfterMs`
   * unless the client cancelled it meanwhile (then it is done as cancelled, without usage).
   */
  respondUnprompted(doneAfterMs?: number): void;
}

export interface FakeBatchApi {
  readonly files: Map<string, { filename: string; purpose: string; content: Buffer }>;
  readonly batches: Map<string, Record<string, unknown>>;
  /** Handles `/v1/files*` and `/v1/batches*`; false for other paths. */
  handle(method: string, path: string, raw: Buffer, contentType: string, res: ServerResponse): boolean;
}

/**
 * `accepts` says whether an upgrade request is for this fake's realtime route with valid
 * credentials; given an API key instead, that is `/v1/realtime` with `Authorization: Bearer <key>`.
 */
export function attachFakeRealtime(server: Server, accepts: string | undefined | ((req: IncomingMessage) => boolean)): FakeRealtime {
  const apiKey = typeof accepts === 'function' ? undefined : accepts;
  const isFor = typeof accepts === 'function'
    ? accepts
    : (req: IncomingMessage): boolean => new URL(req.url ?? '/', 'http://x').pathname === '/v1/realtime' && (apiKey === undefined || req.headers.authorization === `Bearer ${apiKey}`);
  const wss = new WebSocketServer({ noServer: true });
  const state: FakeRealtime = {
    sessions: [],
    usage: { input_tokens: 7, output_tokens: 5, total_tokens: 12 },
    drop(index) {
      const s = state.sessions[index ?? state.sessions.length - 1];
      s?.socket.terminate();
    },
    respondUnprompted(doneAfterMs = 100) {
      const session = state.sessions.at(-1);
      if (session === undefined) return;
      const id = `resp_vad_${session.received.length}`;
      session.socket.send(JSON.stringify({ type: 'response.created', response: { id, status: 'in_progress' } }));
      setTimeout(() => {
        const cancelled = session.received.some((e) => (e as { type?: string; response_id?: string }).type === 'response.cancel' && (e as { response_id?: string }).response_id === id);
        if (session.closed) return;
        session.socket.send(JSON.stringify({ type: 'response.done', response: { id, status: cancelled ? 'cancelled' : 'completed', usage: cancelled ? null : state.usage } }));
      }, doneAfterMs);
    },
  };
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (!isFor(req)) {
      socket.end('HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{"error":{"message":"bad key","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const session: FakeRealtimeSession = { url: req.url ?? '', headers: req.headers, received: [], closed: false, socket: ws };
      state.sessions.push(session);
      ws.on('close', () => { session.closed = true; });
      ws.send(JSON.stringify({ type: 'session.created', session: { id: `sess_${state.sessions.length}` } }));
      ws.on('message', (data) => {
        const event = JSON.parse(data.toString()) as { type?: string };
        session.received.push(event);
        if (event.type !== 'response.create') return;
        const id = `resp_${state.sessions.length}_${session.received.length}`;
        ws.send(JSON.stringify({ type: 'response.created', response: { id, status: 'in_progress' } }));
        ws.send(JSON.stringify({ type: 'response.text.delta', response_id: id, delta: 'fake' }));
        ws.send(JSON.stringify({ type: 'response.done', response: { id, status: 'completed', usage: state.usage } }));
      });
    });
  });
  return state;
}

function multipart(raw: Buffer, contentType: string): { fields: Record<string, string>; file?: { filename: string; content: Buffer } } {
  const boundary = /boundary=(?:"([^"]+)"|([^;]+))/i.exec(contentType);
  const b = boundary?.[1] ?? boundary?.[2] ?? '';
  const out: { fields: Record<string, string>; file?: { filename: string; content: Buffer } } = { fields: {} };
  for (const part of raw.toString('latin1').split(`--${b}`)) {
    const head = /^\r\nContent-Disposition: form-data; name="([^"]+)"(?:; filename="([^"]*)")?[^]*?\r\n\r\n/i.exec(part);
    if (!head?.[1]) continue;
    const value = part.slice(head[0].length).replace(/\r\n$/, '');
    if (head[2] !== undefined) out.file = { filename: head[2], content: Buffer.from(value, 'latin1') };
    else out.fields[head[1]] = value;
  }
  return out;
}

export function createFakeBatchApi(name: string): FakeBatchApi {
  const files = new Map<string, { filename: string; purpose: string; content: Buffer }>();
  const batches = new Map<string, Record<string, unknown>>();
  let seq = 0;
  const json = (res: ServerResponse, status: number, body: unknown): void => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const notFound = (res: ServerResponse): void => json(res, 404, { error: { message: 'not found', type: 'invalid_request_error', param: null, code: null } });
  return {
    files,
    batches,
    handle(method, path, raw, contentType, res) {
      if (!path.startsWith('/v1/files') && !path.startsWith('/v1/batches')) return false;
      const now = Math.floor(Date.now() / 1000);
      let m: RegExpExecArray | null;
      if (method === 'POST' && path === '/v1/files') {
        const form = multipart(raw, contentType);
        if (!form.file) return json(res, 400, { error: { message: 'file missing', type: 'invalid_request_error', param: 'file', code: null } }), true;
        const id = `file-${name}-${++seq}`;
        files.set(id, { filename: form.file.filename, purpose: form.fields.purpose ?? '', content: form.file.content });
        json(res, 200, { id, object: 'file', bytes: form.file.content.length, created_at: now, filename: form.file.filename, purpose: form.fields.purpose });
      } else if (method === 'GET' && (m = /^\/v1\/files\/([^/]+)\/content$/.exec(path))) {
        const file = files.get(m[1]!);
        if (!file) return notFound(res), true;
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        res.end(file.content);
      } else if (method === 'DELETE' && (m = /^\/v1\/files\/([^/]+)$/.exec(path))) {
        if (!files.delete(m[1]!)) return notFound(res), true;
        json(res, 200, { id: m[1], object: 'file', deleted: true });
      } else if (method === 'POST' && path === '/v1/batches') {
        const body = JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
        const input = files.get(String(body.input_file_id));
        if (!input) return notFound(res), true;
        // Completes at once: one output line per input line, echoing the custom_id.
        const lines = input.content.toString('utf8').split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as { custom_id: string; body: { model: string } });
        const outId = `file-${name}-${++seq}`;
        files.set(outId, {
          filename: 'output.jsonl', purpose: 'batch_output',
          content: Buffer.from(lines.map((l, i) => JSON.stringify({ id: `batch_req_${i}`, custom_id: l.custom_id, response: { status_code: 200, request_id: `req_${i}`, body: { model: l.body.model, fake: name } }, error: null })).join('\n') + '\n'),
        });
        const id = `batch_${name}_${++seq}`;
        const batch = {
          id, object: 'batch', endpoint: body.endpoint, errors: null, input_file_id: body.input_file_id, completion_window: body.completion_window,
          status: 'in_progress', output_file_id: null, error_file_id: null, created_at: now, in_progress_at: now,
          request_counts: { total: lines.length, completed: 0, failed: 0 }, metadata: body.metadata ?? null, _output: outId,
        };
        batches.set(id, batch);
        const { _output, ...visible } = batch;
        json(res, 200, visible);
        // The next GET sees it completed.
        Object.assign(batch, { status: 'completed', output_file_id: outId, completed_at: now, request_counts: { total: lines.length, completed: lines.length, failed: 0 } });
      } else if (method === 'GET' && (m = /^\/v1\/batches\/([^/]+)$/.exec(path))) {
        const batch = batches.get(m[1]!);
        if (!batch) return notFound(res), true;
        const { _output, ...visible } = batch;
        json(res, 200, visible);
      } else if (method === 'POST' && (m = /^\/v1\/batches\/([^/]+)\/cancel$/.exec(path))) {
        const batch = batches.get(m[1]!);
        if (!batch) return notFound(res), true;
        if (batch.status !== 'completed') Object.assign(batch, { status: 'cancelled', cancelled_at: now });
        const { _output, ...visible } = batch;
        json(res, 200, visible);
      } else {
        notFound(res);
      }
      return true;
    },
  };
}
