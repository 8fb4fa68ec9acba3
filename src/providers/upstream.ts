import { Pool } from 'undici';
import type { Dispatcher } from 'undici';
import type { Cancellation } from './cancellation.ts';
import { UpstreamUnavailableError } from './types.ts';

export interface UpstreamClientOptions {
  /** Provider instance name, used in error messages. */
  provider: string;
  baseUrl: string;
  connectTimeoutMs: number;
  /** Headers timeout and body idle timeout. */
  timeoutMs: number;
}

export interface UpstreamRequest {
  method: string;
  /** Appended to the base URL's path. */
  path: string;
  headers: Readonly<Record<string, string>>;
  body?: Buffer | string;
  cancel: Cancellation;
}

export type UpstreamBody = Dispatcher.ResponseData['body'];

export interface UpstreamResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: UpstreamBody;
}

export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
export const DEFAULT_TIMEOUT_MS = 600_000;

const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/** One keep-alive connection pool per provider instance, with the provider's timeouts. */
export class UpstreamClient {
  readonly provider: string;
  readonly baseUrl: string;
  private readonly basePath: string;
  private readonly pool: Pool;
  private readonly connectTimeoutMs: number;
  private readonly timeoutMs: number;

  constructor(opts: UpstreamClientOptions) {
    this.provider = opts.provider;
    const url = new URL(opts.baseUrl);
    this.baseUrl = opts.baseUrl;
    this.basePath = url.pathname.replace(/\/+$/, '');
    this.connectTimeoutMs = opts.connectTimeoutMs;
    this.timeoutMs = opts.timeoutMs;
    this.pool = new Pool(url.origin, {
      connectTimeout: opts.connectTimeoutMs,
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
      keepAliveTimeout: 30_000,
    });
  }

  async request(req: UpstreamRequest): Promise<UpstreamResponse> {
    try {
      const res = await this.pool.request({
        method: req.method as Dispatcher.HttpMethod,
        path: this.basePath + req.path,
        headers: req.headers,
        body: req.body ?? null,
        signal: req.cancel,
      });
      return { status: res.statusCode, headers: res.headers, body: res.body };
    } catch (err) {
      throw this.mapError(err, req.cancel);
    }
  }

  /**
   * Connection failures become UpstreamUnavailableError (502; 504 for timeouts). An abort
   * by the caller's cancellation is not the upstream's fault and is rethrown unchanged.
   */
  mapError(err: unknown, cancel?: Cancellation): unknown {
    if (cancel?.cancelled) return err;
    if (err instanceof UpstreamUnavailableError) return err;
    const code = (err as { code?: unknown } | null)?.code;
    const detail = err instanceof Error ? err.message : String(err);
    if (typeof code === 'string' && TIMEOUT_CODES.has(code)) {
      const what = code === 'UND_ERR_CONNECT_TIMEOUT'
        ? `connecting (connect_timeout_ms ${this.connectTimeoutMs})`
        : code === 'UND_ERR_HEADERS_TIMEOUT' ? `waiting for the response (timeout_ms ${this.timeoutMs})` : `waiting for response data (timeout_ms ${this.timeoutMs})`;
      return new UpstreamUnavailableError(this.provider, `provider ${this.provider} timed out ${what}`, 504, { cause: err });
    }
    const reason = code === 'ECONNREFUSED' ? 'connection refused' : detail;
    return new UpstreamUnavailableError(this.provider, `provider ${this.provider} is unreachable: ${reason}`, 502, { cause: err });
  }

  /** Reads a whole body; failures are mapped like request failures. */
  async readAll(body: UpstreamBody, cancel: Cancellation): Promise<Buffer> {
    try {
      return await collectBody(body);
    } catch (err) {
      throw this.mapError(err, cancel);
    }
  }

  async close(): Promise<void> {
    // Called at shutdown after in-flight requests were drained; anything left is abandoned.
    await this.pool.destroy();
  }
}

/** A whole body, gathered with stream events (cheaper than async iteration for a few chunks). */
function collectBody(body: UpstreamBody): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    body.on('data', (chunk: Buffer) => chunks.push(chunk));
    body.on('error', reject);
    body.once('end', () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
  });
}

export interface ChunkTransform {
  /** Bytes to pass on for one upstream chunk (undefined or empty: nothing yet). */
  step(chunk: Buffer): Buffer | undefined;
  /** Bytes to pass on after the last upstream chunk. */
  finish(): Buffer | undefined;
}

export const IDENTITY: ChunkTransform = { step: (c) => c, finish: () => undefined };

/** Where a relayed body can be written directly: an HTTP response. */
export interface ChunkSink {
  write(chunk: Buffer): boolean;
  end(): unknown;
  readonly destroyed: boolean;
  on(event: 'close', listener: () => void): unknown;
  once(event: 'drain', listener: () => void): unknown;
  removeListener(event: 'drain' | 'close', listener: () => void): unknown;
}

/** An upstream body on its way to the client: iterable, or written straight into a sink. */
export interface RelayedBody extends AsyncIterable<Buffer> {
  /**
   * Writes every transformed chunk into `sink` as it arrives, pausing the upstream while the
   * sink is full; with `end`, ends the sink after the last chunk. Resolves at the upstream's end
   * or when the sink closed first (the upstream is then destroyed); rejects with the mapped read
   * error (the sink is then not ended).
   */
  pipeTo(sink: ChunkSink, options?: { end?: boolean }): Promise<void>;
}

export function isRelayedBody(body: unknown): body is RelayedBody {
  return typeof (body as Partial<RelayedBody> | null)?.pipeTo === 'function';
}

/**
 * Relays an upstream body chunk by chunk: nothing is buffered beyond what `transform`
 * holds back. Stopping early (`return()`, e.g. a `break` in for-await) destroys the upstream
 * body so the socket is freed; read errors are mapped by `mapError`. `pipeTo` does the same
 * with stream events instead of a promise per chunk, for the common case of writing to the client.
 */
export function relay(body: UpstreamBody, transform: ChunkTransform, mapError: (err: unknown) => unknown): RelayedBody {
  return new Relay(body, transform, mapError);
}

/** A class rather than an object literal per answer: its methods, the symbol-keyed one too, are built once. */
class Relay implements RelayedBody {
  private readonly body: UpstreamBody;
  private readonly transform: ChunkTransform;
  private readonly mapError: (err: unknown) => unknown;

  constructor(body: UpstreamBody, transform: ChunkTransform, mapError: (err: unknown) => unknown) {
    this.body = body;
    this.transform = transform;
    this.mapError = mapError;
  }

  [Symbol.asyncIterator](): AsyncIterator<Buffer> {
    const { body, transform, mapError } = this;
    const it = body[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
    let done = false;
    const end = (): IteratorResult<Buffer> => ({ done: true, value: undefined });
    return {
      async next(): Promise<IteratorResult<Buffer>> {
        if (done) return end();
        try {
          for (;;) {
            const r = await it.next();
            if (r.done === true) {
              done = true;
              const tail = transform.finish();
              return tail && tail.length > 0 ? { done: false, value: tail } : end();
            }
            const out = transform.step(r.value);
            if (out && out.length > 0) return { done: false, value: out };
          }
        } catch (err) {
          done = true;
          body.destroy();
          throw mapError(err);
        }
      },
      async return(): Promise<IteratorResult<Buffer>> {
        done = true;
        body.destroy();
        return end();
      },
    };
  }

  pipeTo(sink: ChunkSink, options?: { end?: boolean }): Promise<void> {
    const { body, transform, mapError } = this;
    return new Promise<void>((resolve, reject) => {
      // Every listener comes off when the relay settles. Left on, they kept the relay's closures,
      // and through them the response and the tap, reachable from the body and the response
      // until those were collected: with listeners left on, garbage collection rose from ~38,000
      // to ~156,000 instructions per streamed request. 'drain' is only listened for when a write
      // found the response full.
      let settled = false;
      let waitingForDrain = false;
      /**
       * The latest chunk, written in a microtask or as soon as a newer one arrives. Node runs a
       * tick's pending process.nextTick callbacks before its microtasks, and a stream's 'end' is
       * one of them: when the upstream's end arrives with its last chunk (the usual case for a
       * stream's last event), that chunk and the end of the answer leave in one socket write
       * instead of two. No chunk waits longer than the tick it arrived in.
       */
      let held: Buffer | undefined;
      const onDrain = (): void => {
        waitingForDrain = false;
        if (!settled) body.resume();
      };
      const write = (chunk: Buffer): void => {
        if (sink.write(chunk)) return;
        body.pause();
        if (!waitingForDrain) {
          waitingForDrain = true;
          sink.once('drain', onDrain);
        }
      };
      const flush = (): void => {
        const chunk = held;
        held = undefined;
        if (chunk !== undefined && !settled && !sink.destroyed) write(chunk);
      };
      const settle = (err?: unknown): void => {
        if (settled) return;
        settled = true;
        held = undefined;
        body.removeListener('data', onData);
        body.removeListener('end', onEnd);
        body.removeListener('error', onError);
        // A late error from a body already given up on must not become an uncaught exception.
        body.on('error', ignore);
        if (waitingForDrain) sink.removeListener('drain', onDrain);
        sink.removeListener('close', onClose);
        if (err === undefined) resolve();
        else reject(err);
      };
      const fail = (err: unknown): void => {
        body.destroy();
        settle(mapError(err));
      };
      const onData = (chunk: Buffer): void => {
        let out: Buffer | undefined;
        try {
          out = transform.step(chunk);
        } catch (err) {
          fail(err);
          return;
        }
        if (out === undefined || out.length === 0) return;
        const previous = held;
        held = out;
        if (previous === undefined) queueMicrotask(flush);
        else write(previous);
      };
      const onEnd = (): void => {
        let tail: Buffer | undefined;
        try {
          tail = transform.finish();
        } catch (err) {
          fail(err);
          return;
        }
        flush();
        if (!sink.destroyed) {
          if (tail !== undefined && tail.length > 0) sink.write(tail);
          if (options?.end === true) sink.end();
        }
        settle();
      };
      const onError = (err: unknown): void => fail(err);
      const onClose = (): void => {
        // The client went away: free the upstream connection.
        body.destroy();
        settle();
      };
      if (sink.destroyed) {
        onClose();
        return;
      }
      body.on('error', onError);
      body.on('end', onEnd);
      sink.on('close', onClose);
      body.on('data', onData);
    });
  }
}

function ignore(): void {}

/** Keeps the response headers worth passing on to the client of a model call. */
const PASS_HEADERS = ['content-type', 'content-disposition', 'retry-after', 'retry-after-ms', 'x-request-id', 'request-id', 'openai-processing-ms'];

export function pickHeaders(h: UpstreamResponse['headers'], names: readonly string[] = PASS_HEADERS): Record<string, string> {
  const out: Record<string, string> = {};
  for (const n of names) {
    const v = h[n];
    if (v !== undefined) out[n] = Array.isArray(v) ? v.join(', ') : v;
  }
  return out;
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'upgrade', 'proxy-connection', 'te', 'trailer']);

/** Passthrough answers keep every upstream header except hop-by-hop ones. */
export function passthroughResponseHeaders(h: UpstreamResponse['headers']): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) {
    if (v === undefined || HOP_BY_HOP.has(k)) continue;
    out[k] = Array.isArray(v) ? v.join(', ') : v;
  }
  return out;
}

export function contentTypeOf(h: UpstreamResponse['headers']): string {
  const v = h['content-type'];
  return (Array.isArray(v) ? v[0] ?? '' : v ?? '').toLowerCase();
}

export function isEventStream(h: UpstreamResponse['headers']): boolean {
  return contentTypeOf(h).startsWith('text/event-stream');
}

export function isJson(h: UpstreamResponse['headers']): boolean {
  const ct = contentTypeOf(h);
  return ct.includes('json');
}
