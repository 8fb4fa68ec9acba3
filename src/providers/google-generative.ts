/**
 * The Gemini models behind Google's two APIs (the Gemini API, `type: gemini`, and Vertex AI,
 * `type: vertex`): one translation, two ways to address a model and two kinds of credentials.
 * Chat completions, Anthropic Messages and Responses all become `generateContent` (streamed:
 * `streamGenerateContent?alt=sse`); embeddings go to the API's own embedding call.
 */
import type { Cancellation } from './cancellation.ts';
import { readCapacity } from './capacity.ts';
import { buffered, jsonResult, JSON_HEADERS, passthroughRequestHeaders, passthroughResult, SSE_HEADERS, unsupportedEndpoint } from './results.ts';
import { asOpenAIError, chatDialect, type ChatDialect } from './translate/chat-dialect.ts';
import { embeddingsResponse, readEmbeddingsRequest, type Embeddings, type EmbeddingsInput } from './translate/embeddings.ts';
import { chatToGenerateContent } from './translate/gemini-request.ts';
import { generateContentToChat, googleErrorToOpenAI } from './translate/gemini-response.ts';
import { GeminiToChatStream, geminiStreamTransform } from './translate/gemini-stream.ts';
import { parseJsonObject } from './translate/json.ts';
import type { Json } from './translate/json.ts';
import type { ChatTarget } from './translate/messages-to-chat.ts';
import { unsupportedPolicy, type UnsupportedPolicy } from './translate/unsupported.ts';
import type { CommonProviderSettings, PassthroughCall, Provider, ProviderCall, ProviderContext, ProviderResult } from './types.ts';
import { UpstreamUnavailableError } from './types.ts';
import { clientOptions, isEventStream, pickHeaders, relay, UpstreamClient, type UpstreamResponse } from './upstream.ts';
import { normalizeUsage } from './usage.ts';

/** What differs between the Gemini API and Vertex AI. */
export interface GoogleApi {
  /** Path (below the base URL) of `generateContent`, or of `streamGenerateContent?alt=sse`. */
  generatePath(model: string, stream: boolean): string;
  /** The embeddings call for these inputs: its path, body, and how to read its answer. */
  embed(model: string, input: EmbeddingsInput): { path: string; body: Json; read(res: Json): Embeddings };
  /** The headers that carry the credentials (an API key, or a fresh OAuth access token). */
  credentials(): Promise<Record<string, string>>;
  /** The models to serve when none are configured; absent: any model is accepted. */
  discover?(client: UpstreamClient, headers: Record<string, string>): Promise<string[]>;
}

export interface GoogleGenerativeOptions {
  name: string;
  type: string;
  baseUrl: string;
  api: GoogleApi;
  settings: CommonProviderSettings & { drop_unsupported: boolean };
  context?: ProviderContext | undefined;
}

/**
 * The path of a model's method below `prefix`: `gemini-2.5-flash` is a model of `collection`
 * (`models`, `publishers/google/models`); a qualified name (`tunedModels/x`) keeps its own.
 */
export function modelMethodPath(prefix: string, collection: string, model: string, method: string): string {
  const name = model.includes('/') ? model : `${collection}/${model}`;
  return `${prefix}/${name.split('/').map(encodeURIComponent).join('/')}:${method}`;
}

/** `chatToGenerateContent` takes `top_k` (as `topK`) and a reasoning effort (as a thinking budget). */
const GEMINI_CHAT: ChatTarget = { topK: true, reasoningEffort: true };

export class GoogleGenerativeProvider implements Provider {
  readonly name: string;
  readonly type: string;
  private readonly client: UpstreamClient;
  private readonly api: GoogleApi;
  private readonly policy: UnsupportedPolicy;
  private readonly configuredModels: string[] | undefined;
  private discovered: Promise<string[]> | undefined;

  constructor(opts: GoogleGenerativeOptions) {
    const { name, type, settings } = opts;
    this.name = name;
    this.type = type;
    this.client = new UpstreamClient(clientOptions(name, opts.baseUrl, settings));
    this.api = opts.api;
    this.policy = unsupportedPolicy({ provider: name, type, drop: settings.drop_unsupported, context: opts.context });
    this.configuredModels = settings.models && settings.models.length > 0 ? [...settings.models] : undefined;
  }

  async listModels(): Promise<string[]> {
    if (this.configuredModels) return [...this.configuredModels];
    const discover = this.api.discover;
    if (discover === undefined) return [];
    this.discovered ??= this.credentials()
      .then((headers) => discover(this.client, headers))
      .catch((err: unknown) => {
        this.discovered = undefined; // let a later call retry
        throw err;
      });
    return [...(await this.discovered)];
  }

  async call(call: ProviderCall): Promise<ProviderResult> {
    const json = call.json ?? { model: call.model };
    if (call.endpoint === 'embeddings') return this.embeddings(call, json);
    const dialect = chatDialect({ ...call, json }, this.policy, GEMINI_CHAT);
    if (dialect === undefined) return unsupportedEndpoint(this.name, this.type, call.endpoint);
    return this.generate(call, chatToGenerateContent(dialect.chat, this.policy), dialect);
  }

  async passthrough(call: PassthroughCall): Promise<ProviderResult> {
    const incoming = { ...call.headers };
    delete incoming['x-goog-api-key']; // the client's own key never reaches Google; the provider's does
    const headers = passthroughRequestHeaders(incoming, await this.credentials());
    const res = await this.client.request({ method: call.method, path: call.path, headers, body: call.body, cancel: call.cancel });
    return passthroughResult(this.client, res, call.cancel, call.buffered);
  }

  async close(): Promise<void> {
    await this.client.close();
  }

  private async credentials(): Promise<Record<string, string>> {
    try {
      return await this.api.credentials();
    } catch (err) {
      if (err instanceof UpstreamUnavailableError) throw err;
      const detail = err instanceof Error ? err.message : String(err);
      throw new UpstreamUnavailableError(this.name, `provider ${this.name} (type ${this.type}) could not get credentials: ${detail}`, 502, { cause: err });
    }
  }

  private async post(path: string, body: Json, cancel: Cancellation): Promise<UpstreamResponse> {
    const headers = { 'content-type': 'application/json', ...(await this.credentials()) };
    return this.client.request({ method: 'POST', path, headers, body: JSON.stringify(body), cancel });
  }

  /** An error answer: Google's body in the dialect's shape, its retry delay as retry-after headers. */
  private async failed(res: UpstreamResponse, cancel: Cancellation, dialect: Pick<ChatDialect, 'error'>): Promise<ProviderResult> {
    const buf = await this.client.readAll(res.body, cancel);
    const translated = googleErrorToOpenAI(buf, res.status);
    const headers = { ...translated.headers, ...pickHeaders(res.headers), ...JSON_HEADERS };
    // Google's retry delay lives in the body: read from the headers it became.
    return buffered(res.status, headers, dialect.error(translated.body, res.status), undefined, readCapacity({ ...res.headers, ...headers }, res.status));
  }

  private async json(res: UpstreamResponse, cancel: Cancellation): Promise<Json> {
    const buf = await this.client.readAll(res.body, cancel);
    const parsed = parseJsonObject(buf.toString('utf8'));
    if (!parsed) throw new UpstreamUnavailableError(this.name, `provider ${this.name} answered with a body that is not JSON`, 502);
    return parsed;
  }

  private async generate(call: ProviderCall, body: Json, dialect: ChatDialect): Promise<ProviderResult> {
    const res = await this.post(this.api.generatePath(call.model, call.stream), body, call.cancel);
    if (res.status >= 400) return this.failed(res, call.cancel, dialect);
    if (call.stream) {
      if (!isEventStream(res.headers)) {
        res.body.destroy();
        throw new UpstreamUnavailableError(this.name, `provider ${this.name} answered a streamed request without an event stream`, 502);
      }
      const translator = new GeminiToChatStream({ model: call.model });
      const mapError = (err: unknown): unknown => this.client.mapError(err, call.cancel);
      const body = relay(res.body, mapError, geminiStreamTransform(translator, dialect.sink(), this.client.sseLimit));
      return { status: 200, headers: { ...SSE_HEADERS }, body, usage: () => translator.usage() };
    }
    const chat = generateContentToChat(await this.json(res, call.cancel), call.model);
    return jsonResult(200, dialect.answer(chat), normalizeUsage(chat.usage));
  }

  private async embeddings(call: ProviderCall, json: Json): Promise<ProviderResult> {
    const input = readEmbeddingsRequest(json, this.policy);
    const request = this.api.embed(call.model, input);
    const res = await this.post(request.path, request.body, call.cancel);
    if (res.status >= 400) return this.failed(res, call.cancel, { error: asOpenAIError });
    const answer = embeddingsResponse(call.model, input, request.read(await this.json(res, call.cancel)));
    return jsonResult(200, answer, normalizeUsage(answer.usage));
  }
}
