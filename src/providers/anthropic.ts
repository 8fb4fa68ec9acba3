import type { IncomingHttpHeaders } from 'node:http';
import { defaultUrlSetting } from '../shared/config-fields.ts';
import { isRecord } from '../shared/json.ts';
import { Cancellation } from './cancellation.ts';
import { readCapacity, withCapacity } from './capacity.ts';
import { SseUsageTap } from './stream-usage.ts';
import { chatToMessagesRequest } from './translate/anthropic-request.ts';
import { errorToOpenAI, messagesToChatResponse } from './translate/anthropic-response.ts';
import { MessagesToChatStream, messagesToChatTransform } from './translate/anthropic-stream.ts';
import { parseJsonObject } from './translate/json.ts';
import { buffered, jsonResult, JSON_HEADERS, passthroughRequestHeaders, passthroughResult, SSE_HEADERS, unsupportedEndpoint } from './results.ts';
import type { PassthroughCall, Provider, ProviderCall, ProviderResult } from './types.ts';
import { defineProviderType, UpstreamUnavailableError, type HttpProviderSettings } from './types.ts';
import { clientOptions, isEventStream, pickHeaders, relay, UpstreamClient } from './upstream.ts';
import type { UpstreamResponse } from './upstream.ts';
import { usageFromJsonBuffer } from './usage.ts';


const ANTHROPIC_DEFAULT_BASE_URL = 'https://api.anthropic.com';
const ANTHROPIC_VERSION = '2023-06-01';

/** `https://api.anthropic.com/v1/` -> `https://api.anthropic.com`: paths below carry `/v1`. */
function normalizeAnthropicBaseUrl(url: string): string {
  return url.replace(/\/+$/, '').replace(/\/v1$/, '');
}

/**
 * `type: anthropic`: `base_url` defaults to Anthropic's API; the SDK convention is the host
 * without `/v1`, and either spelling is accepted so that copy-paste works. No realtime, no batches.
 */
export const anthropicProviderType = defineProviderType({
  type: 'anthropic',
  configFields: { base_url: defaultUrlSetting(ANTHROPIC_DEFAULT_BASE_URL, normalizeAnthropicBaseUrl) },
  create: (name, settings) => new AnthropicProvider(name, settings),
  pricesProvider: 'anthropic',
});

function headerValue(h: IncomingHttpHeaders | undefined, name: string): string | undefined {
  const v = h?.[name];
  return Array.isArray(v) ? v.join(',') : v;
}

class AnthropicProvider implements Provider {
  readonly name: string;
  readonly type = 'anthropic';
  private readonly client: UpstreamClient;
  private readonly apiKey: string | undefined;
  private readonly configuredModels: string[] | undefined;
  private discovered: Promise<string[]> | undefined;

  constructor(name: string, settings: HttpProviderSettings) {
    this.name = name;
    this.apiKey = settings.api_key || undefined;
    this.configuredModels = settings.models && settings.models.length > 0 ? [...settings.models] : undefined;
    this.client = new UpstreamClient(clientOptions(name, normalizeAnthropicBaseUrl(settings.base_url ?? ANTHROPIC_DEFAULT_BASE_URL), settings));
  }

  async listModels(): Promise<string[]> {
    if (this.configuredModels) return [...this.configuredModels];
    this.discovered ??= this.discover().catch((err: unknown) => {
      this.discovered = undefined;
      throw err;
    });
    return [...(await this.discovered)];
  }

  async call(call: ProviderCall): Promise<ProviderResult> {
    if (call.endpoint === 'messages') return this.messages(call);
    if (call.endpoint === 'chat') return this.chat(call);
    return unsupportedEndpoint(this.name, this.type, call.endpoint);
  }

  async passthrough(call: PassthroughCall): Promise<ProviderResult> {
    const headers = passthroughRequestHeaders(call.headers, this.auth());
    headers['anthropic-version'] ??= ANTHROPIC_VERSION;
    const res = await this.client.request({ method: call.method, path: call.path, headers, body: call.body, cancel: call.cancel });
    return passthroughResult(this.client, res, call.cancel, call.buffered);
  }

  async close(): Promise<void> {
    await this.client.close();
  }

  private auth(): Record<string, string> {
    return this.apiKey ? { 'x-api-key': this.apiKey } : {};
  }

  /** The client's anthropic-version / anthropic-beta win over the defaults. */
  private headers(client?: IncomingHttpHeaders): Record<string, string> {
    const h: Record<string, string> = {
      'content-type': 'application/json',
      'anthropic-version': headerValue(client, 'anthropic-version') ?? ANTHROPIC_VERSION,
      ...this.auth(),
    };
    const beta = headerValue(client, 'anthropic-beta');
    if (beta) h['anthropic-beta'] = beta;
    return h;
  }

  private send(body: Record<string, unknown>, call: ProviderCall): Promise<UpstreamResponse> {
    return this.client.request({ method: 'POST', path: '/v1/messages', headers: this.headers(call.headers), body: JSON.stringify(body), cancel: call.cancel });
  }

  private async messages(call: ProviderCall): Promise<ProviderResult> {
    const res = await this.send(call.json ?? { model: call.model }, call);
    const headers = pickHeaders(res.headers);
    const capacity = readCapacity(res.headers, res.status);
    if (res.status < 400 && isEventStream(res.headers)) {
      const tap = new SseUsageTap({ limit: this.client.sseLimit });
      const mapError = (err: unknown): unknown => this.client.mapError(err, call.cancel);
      return { status: res.status, headers, body: relay(res.body, mapError, tap), usage: () => tap.usage(), capacity };
    }
    const buf = await this.client.readAll(res.body, call.cancel);
    return buffered(res.status, headers, buf, res.status < 400 ? usageFromJsonBuffer(buf) : undefined, capacity);
  }

  /** OpenAI chat completions served by the Messages API. */
  private async chat(call: ProviderCall): Promise<ProviderResult> {
    const json = call.json ?? {};
    const req = chatToMessagesRequest({ ...json, model: call.model, stream: call.stream });
    const res = await this.send(req, call);
    const capacity = readCapacity(res.headers, res.status);
    if (res.status >= 400) {
      const buf = await this.client.readAll(res.body, call.cancel);
      return buffered(res.status, { ...pickHeaders(res.headers), ...JSON_HEADERS }, errorToOpenAI(buf, res.status), undefined, capacity);
    }
    if (isEventStream(res.headers)) {
      const so = isRecord(json.stream_options) ? json.stream_options : undefined;
      const translator = new MessagesToChatStream({ model: call.model, includeUsage: so?.include_usage === true });
      const mapError = (err: unknown): unknown => this.client.mapError(err, call.cancel);
      return { status: res.status, headers: { ...SSE_HEADERS }, body: relay(res.body, mapError, messagesToChatTransform(translator, this.client.sseLimit)), usage: () => translator.usage(), capacity };
    }
    const buf = await this.client.readAll(res.body, call.cancel);
    const parsed = parseJsonObject(buf.toString('utf8'));
    if (!parsed) throw new UpstreamUnavailableError(this.name, `provider ${this.name} answered with a body that is not JSON`, 502);
    return withCapacity(jsonResult(res.status, messagesToChatResponse(parsed), usageFromJsonBuffer(buf)), capacity);
  }

  private async discover(): Promise<string[]> {
    const cancel = Cancellation.never();
    const ids: string[] = [];
    let after: string | undefined;
    // The models API pages; a handful of pages covers every real account.
    for (let page = 0; page < 20; page++) {
      const path = `/v1/models?limit=1000${after ? `&after_id=${encodeURIComponent(after)}` : ''}`;
      const res = await this.client.request({ method: 'GET', path, headers: this.headers(), cancel });
      const buf = await this.client.readAll(res.body, cancel);
      if (res.status >= 400) {
        throw new UpstreamUnavailableError(this.name, `provider ${this.name}: model discovery (GET /v1/models) failed with status ${res.status}`, 502);
      }
      const body = parseJsonObject(buf.toString('utf8'));
      const data = Array.isArray(body?.data) ? body.data : [];
      for (const m of data) if (isRecord(m) && typeof m.id === 'string') ids.push(m.id);
      if (body?.has_more !== true || typeof body.last_id !== 'string') break;
      after = body.last_id;
    }
    return ids;
  }
}
