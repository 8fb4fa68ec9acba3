import type { Cancellation } from './cancellation.ts';
import type { IncomingHttpHeaders } from 'node:http';

/** The model endpoints a provider adapter can serve, named after the gateway's routes. */
export type Endpoint =
  | 'chat'            // POST /v1/chat/completions
  | 'responses'       // POST /v1/responses
  | 'embeddings'      // POST /v1/embeddings
  | 'speech'          // POST /v1/audio/speech (binary audio out)
  | 'transcriptions'  // POST /v1/audio/transcriptions (multipart in)
  | 'messages';       // POST /v1/messages (Anthropic dialect in and out)

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

/** One call to one provider instance, already resolved to the provider's own model id. */
export interface ProviderCall {
  endpoint: Endpoint;
  /** The provider's own model id (no `provider/` prefix). */
  model: string;
  /** Parsed JSON body for JSON endpoints; its `model` field is already the provider's model id. */
  json?: Record<string, unknown>;
  /**
   * The client's JSON bytes, present only when they encode `json` exactly (the model id needed no
   * rewrite): an adapter that would send `json` unchanged sends these instead of serializing it again.
   */
  jsonBytes?: Buffer;
  /** Raw body for non-JSON endpoints (multipart transcriptions), forwarded byte for byte. */
  raw?: Buffer;
  /** Content type of `raw`. */
  contentType?: string;
  /** True when the client asked for a stream (SSE). */
  stream: boolean;
  /** Cancelled when the client goes away or the gateway gives up on the attempt. */
  cancel: Cancellation;
  /**
   * The client's request headers (optional). Adapters forward only the few that belong to
   * their dialect: `anthropic-version` and `anthropic-beta` for Anthropic upstreams.
   */
  headers?: IncomingHttpHeaders;
}

/** A generic request forwarded to the provider's base URL with the provider's credentials (`/p/{provider}/{path}`). */
export interface PassthroughCall {
  method: string;
  /** Path and query below the provider's base URL, beginning with `/`. */
  path: string;
  headers: IncomingHttpHeaders;
  body?: Buffer;
  cancel: Cancellation;
}

/**
 * What came back. `body` is a Buffer for buffered answers and an async iterable of chunks
 * for streams (SSE or binary); the caller writes it to the client as it arrives.
 * `usage()` is final once the body was fully consumed (for streams: after the last chunk).
 */
export interface ProviderResult {
  status: number;
  /** Headers to pass on to the client (at least content-type). Lower-case names. */
  headers: Record<string, string>;
  body: Buffer | AsyncIterable<Buffer>;
  usage(): Usage | undefined;
}

/** Connection failures and timeouts; upstream HTTP errors are results with status >= 400 instead. */
export class UpstreamUnavailableError extends Error {
  readonly status: number;
  readonly provider: string;
  constructor(provider: string, message: string, status = 502, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'UpstreamUnavailableError';
    this.provider = provider;
    this.status = status;
  }
}

export interface Provider {
  /** Instance name from the config (the key under `providers`). */
  readonly name: string;
  readonly type: 'openai' | 'anthropic' | 'mock';
  /** Models this instance serves: from config, else discovered once at start-up. */
  listModels(): Promise<string[]>;
  call(call: ProviderCall): Promise<ProviderResult>;
  passthrough(call: PassthroughCall): Promise<ProviderResult>;
  close(): Promise<void>;
}
