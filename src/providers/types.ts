import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { z } from 'zod';
import type { Capacity } from '../shared/capacity.ts';
import type { Cancellation } from './cancellation.ts';

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
  /** Prompt tokens read from the provider's prompt cache (included in `promptTokens`), when reported. */
  cachedPromptTokens?: number;
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
  /** The caller reads the whole answer: it is bounded by `max_response_bytes` whatever its status. */
  buffered?: boolean;
}

/**
 * What came back. `body` is a Buffer for buffered answers and a readable byte stream for
 * streamed ones (SSE or binary), which the caller hands on to the client as it arrives; the
 * provider never writes to the client itself. A stream fails with the provider's mapped error
 * when the upstream breaks mid-way, and destroying it (the client left) frees the upstream.
 * `usage()` is final once the body was fully consumed (for streams: after the last chunk).
 */
export interface ProviderResult {
  status: number;
  /** Headers to pass on to the client (at least content-type). Lower-case names. */
  headers: Record<string, string>;
  body: Buffer | Readable;
  usage(): Usage | undefined;
  /**
   * The model the answer names (its `model` field), read on the way like the usage; offered by
   * passthrough answers, whose requests need not name one.
   */
  model?(): string | undefined;
  /**
   * What the upstream's answer said about the provider's rate limits (read from its raw headers
   * by `capacity.ts`, which the client never sees), for the gateway to learn from; absent when
   * it said nothing.
   */
  capacity?: Capacity | undefined;
}

/**
 * Connection failures, timeouts and answers beyond the gateway's bounds; upstream HTTP errors are
 * results with status >= 400 instead. `code` names the failure for the client when it is not
 * the usual one (`upstream_unavailable`, `upstream_timeout` for a 504).
 */
export class UpstreamUnavailableError extends Error {
  readonly status: number;
  readonly provider: string;
  readonly code: string | undefined;
  constructor(provider: string, message: string, status = 502, options?: { cause?: unknown; code?: string }) {
    super(message, options);
    this.name = 'UpstreamUnavailableError';
    this.provider = provider;
    this.status = status;
    this.code = options?.code;
  }
}

/**
 * Why a request cannot be carried out as asked: `unsupported_parameter`, the provider type has no
 * such parameter (or the translation cannot carry it); `invalid_value`, it has the parameter but
 * cannot take this value (an image by link where only bytes go, a role it has no word for).
 */
export type UnsupportedCode = 'unsupported_parameter' | 'invalid_value';

/**
 * A request the provider type cannot carry out as asked, found before anything was sent: the
 * client's 400 `invalid_request_error` naming the parameter, with `code` saying whether the
 * parameter itself or its value is the problem. Never a reason to fail over: the request, not the
 * provider, is at fault. Thrown by translations directly (a value) or through the
 * `drop_unsupported` policy of `translate/unsupported.ts` (a parameter).
 */
export class UnsupportedParameterError extends Error {
  /** Where the parameter is in the request body, e.g. `logprobs` or `messages[1].content[0].image_url`. */
  readonly param: string;
  readonly code: UnsupportedCode;
  constructor(message: string, param: string, code: UnsupportedCode = 'unsupported_parameter') {
    super(message);
    this.name = 'UnsupportedParameterError';
    this.param = param;
    this.code = code;
  }
}

/** What the gateway gives every provider instance besides its settings. */
export interface ProviderContext {
  /**
   * The gateway's log at warning level, for what an operator should see once (a parameter
   * dropped under `drop_unsupported`): structured fields (pino's first argument) and a message.
   */
  warn(fields: Record<string, unknown>, message: string): void;
}

/** A context that logs nothing (tests, and instances made outside a gateway). */
export const SILENT_CONTEXT: ProviderContext = { warn: () => {} };

export interface Provider {
  /** Instance name from the config (the key under `providers`). */
  readonly name: string;
  /** The name of its provider type (`providers.<name>.type`), for messages. */
  readonly type: string;
  /** Models this instance serves: from config, else discovered once at start-up. */
  listModels(): Promise<string[]>;
  call(call: ProviderCall): Promise<ProviderResult>;
  passthrough(call: PassthroughCall): Promise<ProviderResult>;
  close(): Promise<void>;
  /** Present when the provider serves realtime sessions (`GET /v1/realtime`). */
  readonly realtime?: RealtimeAbility;
  /** Present when the provider serves batches (`POST /v1/batches`). */
  readonly batch?: BatchAbility;
}

export interface RealtimeAbility {
  /**
   * Opens the provider side of one session for the provider's own model id. Rejects with a
   * `RealtimeConnectError` when the provider refuses the handshake or cannot be reached.
   */
  connect(model: string): Promise<RealtimeUpstream>;
}

/**
 * The provider side of one realtime session, whatever serves it (a provider's WebSocket or a
 * built-in session). Messages that arrive before a listener is attached are queued: OpenAI sends
 * `session.created` the moment the socket opens, while the client is still being upgraded.
 */
export interface RealtimeUpstream {
  send(data: Buffer | string, isBinary: boolean): void;
  /** Idempotent. */
  close(code?: number, reason?: string): void;
  /** Attaches the one message listener; queued messages are delivered first. */
  onMessage(listener: (data: Buffer | string, isBinary: boolean) => void): void;
  /** Called once when the upstream side is gone (closed by either side, or failed). */
  onClose(listener: (code: number, reason: string) => void): void;
}

export interface BatchAbility {
  /**
   * How a batch runs. `forward`: the provider serves OpenAI's Files and Batches API below its
   * base URL, reached through `passthrough`; the gateway uploads the input there and follows the
   * provider's batch. `lines`: the gateway runs the lines itself, one `call` each, in the background.
   */
  readonly mode: 'forward' | 'lines';
}

/**
 * The settings every provider type takes besides its own (the config schema validates them and
 * fills in their defaults; a provider made without them uses its own).
 */
export interface CommonProviderSettings {
  api_key?: string | undefined;
  /** Absent or empty: the models are discovered from the provider at start-up. */
  models?: readonly string[] | undefined;
  connect_timeout_ms?: number | undefined;
  /** Time allowed for response headers, and the longest silence while a body streams. */
  timeout_ms?: number | undefined;
  /** The largest answer the gateway reads whole (JSON answers, error answers). */
  max_response_bytes?: number | undefined;
  /** The largest event of a relayed SSE stream. */
  max_event_bytes?: number | undefined;
}

/** The settings of a provider reached over HTTP: the common ones and its base URL. */
export type HttpProviderSettings = CommonProviderSettings & { base_url?: string | undefined };

/** A provider type's settings as its factory receives them: its own fields plus the common ones. */
export type ProviderSettings<Fields extends z.ZodRawShape> = CommonProviderSettings & z.output<z.ZodObject<Fields>>;

/**
 * One provider type, as the registry lists it: the name written in `providers.<name>.type`, the
 * zod schema of the fields only this type has (the config schema adds `type` and the common
 * fields), and the factory of an instance.
 */
export interface ProviderType<Name extends string = string, Fields extends z.ZodRawShape = z.ZodRawShape> {
  readonly type: Name;
  readonly configFields: Fields;
  /** `context` is given by the registry; an instance made without one logs nothing. */
  create(name: string, settings: ProviderSettings<Fields>, context?: ProviderContext): Provider;
  /**
   * Checks across fields the zod fields alone cannot express (one of two keys required, both or
   * neither): each problem as the key it is about (relative to the entry; '' for the entry) and
   * a message. Run by the config schema, so start-up and `check-config` report them alike.
   */
  check?(settings: ProviderSettings<Fields>): Array<{ key: string; message: string }>;
  /**
   * Whose prices apply to this type's models (request costs, budgets): the id of a provider in
   * the `@pydantic/genai-prices` table, used when an instance's base URL does not point at another
   * provider it knows; `null` for a type whose requests cost nothing. Absent: the price is looked
   * up by model id alone.
   */
  readonly pricesProvider?: string | null;
}

/** Declares a provider type; only here to infer its name and fields for the registry's types. */
export function defineProviderType<Name extends string, Fields extends z.ZodRawShape>(entry: ProviderType<Name, Fields>): ProviderType<Name, Fields> {
  return entry;
}
