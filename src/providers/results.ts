import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import type { Cancellation } from './cancellation.ts';
import { readCapacity, type Capacity } from './capacity.ts';
import { SseUsageTap } from './stream-usage.ts';
import type { Endpoint, ProviderResult, Usage } from './types.ts';
import { isEventStream, isJson, passthroughResponseHeaders, relay } from './upstream.ts';
import type { ChunkStage, UpstreamClient, UpstreamResponse } from './upstream.ts';
import { modelFromJsonBuffer, usageFromJsonBuffer } from './usage.ts';

export const JSON_HEADERS: Readonly<Record<string, string>> = { 'content-type': 'application/json' };
export const SSE_HEADERS: Readonly<Record<string, string>> = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' };

export function buffered(status: number, headers: Record<string, string>, body: Buffer, usage?: Usage, capacity?: Capacity): ProviderResult {
  return { status, headers, body, usage: () => usage, capacity };
}

/** A result's whole body: a buffered answer as it is, a stream read to its end. */
export async function readBody(body: Buffer | Readable): Promise<Buffer> {
  return Buffer.isBuffer(body) ? body : buffer(body);
}

export function jsonResult(status: number, value: unknown, usage?: Usage): ProviderResult {
  return buffered(status, { ...JSON_HEADERS }, Buffer.from(JSON.stringify(value)), usage);
}

/** 400 in the OpenAI error shape for an endpoint the provider type cannot serve. */
export function unsupportedEndpoint(provider: string, type: string, endpoint: Endpoint): ProviderResult {
  return jsonResult(400, {
    error: {
      message: `provider ${provider} (type ${type}) does not support the ${endpoint} endpoint`,
      type: 'invalid_request_error',
      param: null,
      code: 'unsupported_endpoint',
    },
  });
}

// Never forwarded on passthrough: the gateway's own credentials and routing headers,
// hop-by-hop headers, accept-encoding (so answers stay readable for usage extraction), and
// `expect`: the gateway already answered the client's `100-continue` and has the whole body.
const DROP_REQUEST_HEADERS = new Set([
  'host', 'authorization', 'x-api-key', 'connection', 'keep-alive', 'content-length', 'transfer-encoding',
  'upgrade', 'te', 'trailer', 'proxy-authorization', 'proxy-connection', 'accept-encoding', 'cookie', 'expect',
]);

export function passthroughRequestHeaders(incoming: IncomingHttpHeaders, credentials: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(incoming)) {
    if (v === undefined) continue;
    const name = k.toLowerCase();
    if (DROP_REQUEST_HEADERS.has(name) || name.startsWith('x-floodgate-')) continue;
    out[name] = Array.isArray(v) ? v.join(', ') : v;
  }
  return Object.assign(out, credentials);
}

/** Keeps a copy of a JSON body while relaying it, to read its usage and model at the end (bounded). */
class JsonUsageTap implements ChunkStage {
  private static readonly LIMIT = 16 * 1024 * 1024;
  private chunks: Buffer[] | undefined = [];
  private size = 0;
  private found: Usage | undefined;
  private named: string | undefined;

  usage(): Usage | undefined {
    return this.found;
  }

  model(): string | undefined {
    return this.named;
  }

  chunk(chunk: Buffer): Buffer {
    if (this.chunks) {
      this.size += chunk.length;
      if (this.size > JsonUsageTap.LIMIT) this.chunks = undefined;
      else this.chunks.push(chunk);
    }
    return chunk;
  }

  end(): undefined {
    if (this.chunks) {
      const body = Buffer.concat(this.chunks);
      this.found = usageFromJsonBuffer(body);
      this.named = modelFromJsonBuffer(body);
    }
    this.chunks = undefined;
    return undefined;
  }
}

/**
 * A passthrough answer: every status streamed back as it arrives, usage read on the way. An error
 * answer, which the gateway reads whole, and any answer of a `buffered` call are bounded by the
 * provider's `max_response_bytes`.
 */
export function passthroughResult(client: UpstreamClient, res: UpstreamResponse, cancel: Cancellation, buffered = false): ProviderResult {
  const headers = passthroughResponseHeaders(res.headers);
  const capacity = readCapacity(res.headers, res.status);
  const mapError = (err: unknown): unknown => client.mapError(err, cancel);
  if (buffered || res.status >= 400) return { status: res.status, headers, body: relay(res.body, mapError, client.bounded()), usage: () => undefined, capacity };
  const tap = isEventStream(res.headers) ? new SseUsageTap({ limit: client.sseLimit }) : isJson(res.headers) ? new JsonUsageTap() : undefined;
  return {
    status: res.status,
    headers,
    body: relay(res.body, mapError, tap),
    usage: () => tap?.usage(),
    model: () => tap?.model(),
    capacity,
  };
}
