import { Readable, Transform } from 'node:stream';
import { Pool } from 'undici';
import type { Dispatcher } from 'undici';
import type { Cancellation } from './cancellation.ts';
import { DEFAULT_MAX_EVENT_BYTES, type SseLimit } from './sse.ts';
import { UpstreamUnavailableError, type CommonProviderSettings } from './types.ts';

export interface UpstreamClientOptions {
  /** Provider instance name, used in error messages. */
  provider: string;
  baseUrl: string;
  connectTimeoutMs: number;
  /** Headers timeout and body idle timeout. */
  timeoutMs: number;
  /** The largest answer read whole (JSON, errors); beyond it the read fails with a 502. */
  maxResponseBytes: number;
  /** The largest SSE event of a relayed stream; beyond it the stream fails. */
  maxEventBytes: number;
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
export const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

/** The client options of a provider instance, from its settings (defaults for those left out). */
export function clientOptions(provider: string, baseUrl: string, settings: CommonProviderSettings): UpstreamClientOptions {
  return {
    provider,
    baseUrl,
    connectTimeoutMs: settings.connect_timeout_ms ?? DEFAULT_CONNECT_TIMEOUT_MS,
    timeoutMs: settings.timeout_ms ?? DEFAULT_TIMEOUT_MS,
    maxResponseBytes: settings.max_response_bytes ?? DEFAULT_MAX_RESPONSE_BYTES,
    maxEventBytes: settings.max_event_bytes ?? DEFAULT_MAX_EVENT_BYTES,
  };
}

const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/** One keep-alive connection pool per provider instance, with the provider's timeouts. */
export class UpstreamClient {
  readonly provider: string;
  readonly baseUrl: string;
  private readonly basePath: string;
  private readonly pool: Pool;
  private readonly connectTimeoutMs: number;
  private readonly timeoutMs: number;
  readonly maxResponseBytes: number;
  /** The bound of every SSE stream relayed from this provider. */
  readonly sseLimit: SseLimit;

  constructor(opts: UpstreamClientOptions) {
    this.provider = opts.provider;
    this.maxResponseBytes = opts.maxResponseBytes;
    const maxEventBytes = opts.maxEventBytes;
    this.sseLimit = {
      maxEventBytes,
      tooLarge: () => new UpstreamUnavailableError(
        opts.provider,
        `provider ${opts.provider} sent a stream event larger than ${maxEventBytes} bytes (providers.${opts.provider}.max_event_bytes)`,
        502,
        { code: 'upstream_event_too_large' },
      ),
    };
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
      releaseWhenClosed(res.body);
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

  /** Reads a whole body, at most `maxResponseBytes` of it; failures are mapped like request failures. */
  async readAll(body: UpstreamBody, cancel: Cancellation): Promise<Buffer> {
    try {
      return await collectBody(body, this.maxResponseBytes, () => this.tooLarge());
    } catch (err) {
      throw this.mapError(err, cancel);
    }
  }

  /** A relay stage passing on at most `maxResponseBytes`, for answers that will be read whole downstream. */
  bounded(): ChunkStage {
    return new ByteLimit(this.maxResponseBytes, () => this.tooLarge());
  }

  private tooLarge(): UpstreamUnavailableError {
    return new UpstreamUnavailableError(
      this.provider,
      `provider ${this.provider} answered with more than ${this.maxResponseBytes} bytes (providers.${this.provider}.max_response_bytes)`,
      502,
      { code: 'upstream_response_too_large' },
    );
  }

  async close(): Promise<void> {
    // Called at shutdown after in-flight requests were drained; anything left is abandoned.
    await this.pool.destroy();
  }
}

/**
 * undici keeps a finished request's handler, and with it the response body, until its connection
 * has served a few hundred more requests. Whatever still hangs on the body (pipes into a stage,
 * fastify's end-of-stream listeners, and through them the whole request) would live that long
 * and be copied into the old generation. Once the body is closed nothing needs them.
 */
function releaseWhenClosed(body: UpstreamBody): void {
  body.once('close', () => {
    body.unpipe();
    body.removeAllListeners();
  });
}

/**
 * A whole body, gathered with stream events (cheaper than async iteration for a few chunks). Past
 * `limit` bytes the body is destroyed (its connection is not reused) and the read fails.
 */
function collectBody(body: UpstreamBody, limit: number, tooLarge: () => Error): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    body.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        chunks.length = 0;
        reject(tooLarge());
        body.destroy();
        return;
      }
      chunks.push(chunk);
    });
    body.on('error', reject);
    body.once('end', () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
  });
}

/** Passes bytes on up to a limit; one more byte fails the stream. */
class ByteLimit implements ChunkStage {
  private left: number;
  private readonly tooLarge: () => Error;

  constructor(limit: number, tooLarge: () => Error) {
    this.left = limit;
    this.tooLarge = tooLarge;
  }

  chunk(chunk: Buffer): Buffer {
    this.left -= chunk.length;
    if (this.left < 0) throw this.tooLarge();
    return chunk;
  }

  end(): undefined {
    return undefined;
  }
}

/**
 * What a relay does to an upstream body's bytes, chunk by chunk, without a stream stage of its
 * own (a usage tap, a byte limit): `chunk` answers what to pass on for a chunk (undefined:
 * nothing yet), `end` what to pass on after the last one. Either may throw to fail the stream.
 */
export interface ChunkStage {
  chunk(chunk: Buffer): Buffer | string | undefined;
  end(): Buffer | string | undefined;
}

/**
 * An upstream body on its way to the client, as one readable stream: as it is, through a
 * ChunkStage, or piped into a Transform (a dialect translation). When the stream returned closes
 * (its end, the client left and destroyed it, or it failed) the upstream body is destroyed, so
 * its connection is freed. A read error of the upstream body (a timeout, a reset) fails it,
 * mapped like a request failure, naming the provider.
 *
 * Not `stream.pipeline`: for two streams it does the same, but also aborts an AbortController of
 * its own at the end of every stream, building a DOMException with a stack trace each time.
 */
export function relay(body: UpstreamBody, mapError: (err: unknown) => unknown, stage?: ChunkStage | Transform): Readable {
  if (!(stage instanceof Transform)) return new Relayed(body, mapError, stage);
  body.on('error', (err) => stage.destroy(mapError(err) as Error));
  stage.on('close', () => body.destroy());
  return body.pipe(stage);
}

/**
 * The relay of a body through a ChunkStage (or none): the body read with listeners, each chunk
 * handed on as the stage answers, the body paused while this stream's reader is behind. One
 * stream object per relay, not a Transform's two sides and a pipe between them.
 */
class Relayed extends Readable {
  readonly #body: UpstreamBody;

  constructor(body: UpstreamBody, mapError: (err: unknown) => unknown, stage: ChunkStage | undefined) {
    super();
    this.#body = body;
    body.on('data', (chunk: Buffer) => {
      let out: Buffer | string | undefined = chunk;
      if (stage !== undefined) {
        try {
          out = stage.chunk(chunk);
        } catch (err) {
          this.destroy(err as Error);
          return;
        }
      }
      if (out !== undefined && !this.push(out)) body.pause();
    });
    body.on('end', () => {
      if (stage !== undefined) {
        let out: Buffer | string | undefined;
        try {
          out = stage.end();
        } catch (err) {
          this.destroy(err as Error);
          return;
        }
        if (out !== undefined) this.push(out);
      }
      this.push(null);
    });
    body.on('error', (err) => this.destroy(mapError(err) as Error));
    this.on('close', () => body.destroy());
  }

  override _read(): void {
    this.#body.resume();
  }
}

/**
 * Keeps the response headers worth passing on to the client of a model call. Not `x-request-id`:
 * the gateway answers with its own request id, the one its log lines carry.
 */
const PASS_HEADERS = ['content-type', 'content-disposition', 'retry-after', 'retry-after-ms', 'request-id', 'openai-processing-ms'];

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
