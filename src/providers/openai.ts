import { urlSetting } from '../shared/config-fields.ts';
import { readCapacity, withCapacity } from './capacity.ts';
import { isRecord } from '../shared/json.ts';
import { Cancellation } from './cancellation.ts';
import { connectRealtimeUpstream } from './realtime-socket.ts';
import { SseUsageTap } from './stream-usage.ts';
import { messagesToChatRequest } from './translate/anthropic-request.ts';
import { chatToMessagesResponse, errorToAnthropic } from './translate/anthropic-response.ts';
import { ChatToMessagesStream, chatToMessagesTransform } from './translate/anthropic-stream.ts';
import { parseJsonObject } from './translate/json.ts';
import type { Json } from './translate/json.ts';
import { buffered, jsonResult, JSON_HEADERS, passthroughRequestHeaders, passthroughResult, SSE_HEADERS } from './results.ts';
import type { BatchAbility, Endpoint, PassthroughCall, Provider, ProviderCall, ProviderResult, RealtimeAbility } from './types.ts';
import { defineProviderType, UpstreamUnavailableError, type HttpProviderSettings } from './types.ts';
import { clientOptions, isEventStream, isJson, pickHeaders, relay, UpstreamClient } from './upstream.ts';
import type { UpstreamResponse } from './upstream.ts';
import { usageFromJsonBuffer } from './usage.ts';


const OPENAI_DEFAULT_BASE_URL = 'https://api.openai.com/v1';

/** The endpoints an OpenAI-shaped upstream serves natively (`messages` is translated to chat). */
export type OpenAIEndpoint = Exclude<Endpoint, 'messages'>;

/** Each endpoint's path below an OpenAI-style base URL (Azure's below a deployment). */
export const OPENAI_PATHS: Readonly<Record<OpenAIEndpoint, string>> = {
  chat: '/chat/completions',
  responses: '/responses',
  embeddings: '/embeddings',
  speech: '/audio/speech',
  transcriptions: '/audio/transcriptions',
};

/** `type: openai`: `base_url` is required and includes `/v1` (endpoint paths are appended). */
export const openaiProviderType = defineProviderType({
  type: 'openai',
  configFields: { base_url: urlSetting() },
  create: (name, settings) => new OpenAIProvider(name, settings),
  // An OpenAI-compatible server serving `gpt-4o-mini` is priced as OpenAI's `gpt-4o-mini`.
  pricesProvider: 'openai',
});

/** A provider's credentials as request headers; a promise when they must be fetched (a token). */
export type Credentials = Readonly<Record<string, string>> | Promise<Readonly<Record<string, string>>>;

/**
 * Any OpenAI-compatible upstream (OpenAI, vLLM, Ollama, LiteLLM, ...), and the base of the
 * OpenAI-shaped provider types that differ only in where an endpoint lives and how they
 * authenticate (`azure`): they override `endpointPath`, `credentials` and `realtimeEndpoint`.
 */
export class OpenAIProvider implements Provider {
  readonly name: string;
  readonly type: string = 'openai';
  /** Sessions on the provider's realtime WebSocket (`<base_url as ws(s)>/realtime?model=`). */
  readonly realtime: RealtimeAbility = {
    connect: async (model) => {
      const { url, headers } = await this.realtimeEndpoint(model);
      return connectRealtimeUpstream(url, headers);
    },
  };
  /** OpenAI's Files and Batches API lives below the same base URL. */
  readonly batch: BatchAbility = { mode: 'forward' };
  protected readonly client: UpstreamClient;
  private readonly apiKey: string | undefined;
  protected readonly configuredModels: string[] | undefined;
  /** The headers of every JSON call when the credentials are fixed: built once, undici only reads them. */
  private jsonHeaders: Readonly<Record<string, string>> | undefined;
  private discovered: Promise<string[]> | undefined;

  constructor(name: string, settings: HttpProviderSettings) {
    this.name = name;
    this.apiKey = settings.api_key || undefined;
    this.configuredModels = settings.models && settings.models.length > 0 ? [...settings.models] : undefined;
    this.client = new UpstreamClient(clientOptions(name, settings.base_url ?? OPENAI_DEFAULT_BASE_URL, settings));
  }

  async listModels(): Promise<string[]> {
    if (this.configuredModels) return [...this.configuredModels];
    this.discovered ??= this.discover().catch((err: unknown) => {
      this.discovered = undefined; // let a later call retry
      throw err;
    });
    return [...(await this.discovered)];
  }

  async call(call: ProviderCall): Promise<ProviderResult> {
    if (call.endpoint === 'messages') return this.messages(call);
    let body: Buffer | string;
    let contentType: string;
    let stripUsage = false;
    if (call.endpoint === 'transcriptions') {
      if (!call.raw) return jsonResult(400, { error: { message: 'transcriptions need a multipart body', type: 'invalid_request_error', param: null, code: null } });
      body = call.raw;
      contentType = call.contentType ?? 'application/octet-stream';
    } else {
      const json = call.json ?? { model: call.model };
      const so = call.endpoint === 'chat' && call.stream ? (isRecord(json.stream_options) ? json.stream_options : {}) : undefined;
      if (so !== undefined && so.include_usage !== true) {
        // Ask for the usage (token accounting needs it) and hide it again from the client.
        body = (call.jsonBytes !== undefined && json.stream_options === undefined ? withIncludeUsage(call.jsonBytes) : undefined)
          ?? JSON.stringify({ ...json, stream_options: { ...so, include_usage: true } });
        stripUsage = true;
      } else {
        body = call.jsonBytes ?? JSON.stringify(json);
      }
      contentType = 'application/json';
    }
    let headers = this.headers(contentType);
    if (headers instanceof Promise) headers = await headers;
    const res = await this.client.request({ method: 'POST', path: this.endpointPath(call.endpoint, call.model), headers, body, cancel: call.cancel });
    return this.result(res, call.cancel, stripUsage);
  }

  async passthrough(call: PassthroughCall): Promise<ProviderResult> {
    const res = await this.client.request({
      method: call.method,
      path: call.path,
      headers: passthroughRequestHeaders(call.headers, await this.credentials()),
      body: call.body,
      cancel: call.cancel,
    });
    return passthroughResult(this.client, res, call.cancel, call.buffered);
  }

  async close(): Promise<void> {
    await this.client.close();
  }

  /** Where an endpoint of `model` lives, below the base URL (path and query). */
  protected endpointPath(endpoint: OpenAIEndpoint, _model: string): string {
    return OPENAI_PATHS[endpoint];
  }

  protected credentials(): Credentials {
    return this.apiKey ? { authorization: `Bearer ${this.apiKey}` } : {};
  }

  protected async realtimeEndpoint(model: string): Promise<{ url: string; headers: Record<string, string> }> {
    const url = new URL(this.client.baseUrl.replace(/\/+$/, '') + '/realtime');
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    url.searchParams.set('model', model);
    return { url: url.toString(), headers: { ...(await this.credentials()), 'openai-beta': 'realtime=v1' } };
  }

  /** The headers of a request with a body; for JSON with fixed credentials built once and kept. */
  private headers(contentType: string): Credentials {
    if (contentType === 'application/json' && this.jsonHeaders !== undefined) return this.jsonHeaders;
    const credentials = this.credentials();
    if (credentials instanceof Promise) return credentials.then((c) => ({ 'content-type': contentType, ...c }));
    const headers = Object.freeze({ 'content-type': contentType, ...credentials });
    if (contentType === 'application/json') this.jsonHeaders = headers;
    return headers;
  }

  private async result(res: UpstreamResponse, cancel: Cancellation, stripUsage: boolean): Promise<ProviderResult> {
    const headers = pickHeaders(res.headers);
    const capacity = readCapacity(res.headers, res.status);
    const mapError = (err: unknown): unknown => this.client.mapError(err, cancel);
    if (res.status < 400 && isEventStream(res.headers)) {
      const tap = new SseUsageTap({ stripChatUsageChunk: stripUsage, limit: this.client.sseLimit });
      return { status: res.status, headers, body: relay(res.body, mapError, tap), usage: () => tap.usage(), capacity };
    }
    if (res.status >= 400 || isJson(res.headers) || (headers['content-type'] ?? '').startsWith('text/')) {
      const buf = await this.client.readAll(res.body, cancel);
      return buffered(res.status, headers, buf, res.status < 400 ? usageFromJsonBuffer(buf) : undefined, capacity);
    }
    // Binary (speech audio): relayed as it arrives; these answers carry no usage.
    return { status: res.status, headers, body: relay(res.body, mapError), usage: () => undefined, capacity };
  }

  /** The chat request an Anthropic Messages request becomes (`azure` adds its unsupported policy). */
  protected messagesToChat(msg: Json): Json {
    return messagesToChatRequest(msg);
  }

  /** Anthropic Messages request served by a chat completions upstream. */
  private async messages(call: ProviderCall): Promise<ProviderResult> {
    const chat = this.messagesToChat({ ...call.json, model: call.model, stream: call.stream });
    const res = await this.client.request({
      method: 'POST', path: this.endpointPath('chat', call.model), headers: await this.headers('application/json'), body: JSON.stringify(chat), cancel: call.cancel,
    });
    const capacity = readCapacity(res.headers, res.status);
    if (res.status >= 400) {
      const buf = await this.client.readAll(res.body, call.cancel);
      return buffered(res.status, { ...pickHeaders(res.headers), ...JSON_HEADERS }, errorToAnthropic(buf, res.status), undefined, capacity);
    }
    if (isEventStream(res.headers)) {
      const translator = new ChatToMessagesStream({ model: call.model });
      const mapError = (err: unknown): unknown => this.client.mapError(err, call.cancel);
      return { status: res.status, headers: { ...SSE_HEADERS }, body: relay(res.body, mapError, chatToMessagesTransform(translator, this.client.sseLimit)), usage: () => translator.usage(), capacity };
    }
    const buf = await this.client.readAll(res.body, call.cancel);
    const parsed = parseJsonObject(buf.toString('utf8'));
    if (!parsed) {
      throw new UpstreamUnavailableError(this.name, `provider ${this.name} answered the chat request with a body that is not JSON`, 502);
    }
    return withCapacity(jsonResult(res.status, chatToMessagesResponse(parsed), usageFromJsonBuffer(buf)), capacity);
  }

  private async discover(): Promise<string[]> {
    const cancel = Cancellation.never();
    const res = await this.client.request({ method: 'GET', path: '/models', headers: await this.credentials(), cancel });
    const buf = await this.client.readAll(res.body, cancel);
    if (res.status >= 400) {
      throw new UpstreamUnavailableError(this.name, `provider ${this.name}: model discovery (GET /models) failed with status ${res.status}`, 502);
    }
    const data = parseJsonObject(buf.toString('utf8'))?.data;
    if (!Array.isArray(data)) throw new UpstreamUnavailableError(this.name, `provider ${this.name}: GET /models returned no data list`, 502);
    return data.map((m) => (isRecord(m) && typeof m.id === 'string' ? m.id : undefined)).filter((id): id is string => id !== undefined);
  }
}

const INCLUDE_USAGE = Buffer.from('{"stream_options":{"include_usage":true},');

/**
 * The client's bytes with `stream_options.include_usage` added as the first member, for a body
 * without `stream_options`: the rest is forwarded as received, not serialized again. Undefined
 * when the bytes are not a non-empty JSON object.
 */
function withIncludeUsage(bytes: Buffer): Buffer | undefined {
  let open = 0;
  while (open < bytes.length && isJsonSpace(bytes[open]!)) open++;
  if (bytes[open] !== 0x7b) return undefined; // '{'
  let next = open + 1;
  while (next < bytes.length && isJsonSpace(bytes[next]!)) next++;
  if (next >= bytes.length || bytes[next] === 0x7d) return undefined; // '}': no member to put a comma before
  return Buffer.concat([INCLUDE_USAGE, bytes.subarray(open + 1)]);
}

function isJsonSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}
