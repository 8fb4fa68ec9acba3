import { Readable } from 'node:stream';
import type {
  BedrockRuntimeClient, BedrockRuntimeClientConfig, ConverseCommandInput, ConverseCommandOutput, ConverseStreamCommandInput,
  ConverseStreamCommandOutput, ConverseStreamOutput, InvokeModelCommandInput, InvokeModelCommandOutput,
} from '@aws-sdk/client-bedrock-runtime';
import { z } from 'zod';
import { booleanSetting, coerceString, optionalUrlSetting, str } from '../shared/config-fields.ts';
import type { Cancellation } from './cancellation.ts';
import { buffered, JSON_HEADERS, jsonResult, SSE_HEADERS, unsupportedEndpoint } from './results.ts';
import { formatSse } from './sse.ts';
import { checkMessagesParams, messagesToChatRequest } from './translate/anthropic-request.ts';
import { chatToMessagesResponse, errorToAnthropic } from './translate/anthropic-response.ts';
import { ChatToMessagesStream } from './translate/anthropic-stream.ts';
import { chatToConverse, converseToChat, converseUsage, ConverseToChatStream } from './translate/converse.ts';
import { arr, obj } from './translate/json.ts';
import type { Json } from './translate/json.ts';
import { unsupportedPolicy, type UnsupportedPolicy } from './translate/unsupported.ts';
import type { PassthroughCall, Provider, ProviderCall, ProviderContext, ProviderResult, ProviderSettings, Usage } from './types.ts';
import { defineProviderType, UnsupportedParameterError, UpstreamUnavailableError } from './types.ts';
import { DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_TIMEOUT_MS } from './upstream.ts';

const optionalText = () => z.preprocess(coerceString, str().optional());

const bedrockFields = {
  region: z.preprocess(coerceString, str().min(1, { error: 'must not be empty' })),
  endpoint: optionalUrlSetting(),
  access_key_id: optionalText(),
  secret_access_key: optionalText(),
  session_token: optionalText(),
  drop_unsupported: booleanSetting(false),
};

export type BedrockSettings = ProviderSettings<typeof bedrockFields>;

/**
 * `type: bedrock`: Amazon Bedrock's Converse API (chat and messages, translated) and InvokeModel
 * (Titan text embeddings), through the AWS SDK: SigV4 signing, the standard credential chain
 * (unless keys are configured) and the event-stream framing of `converse-stream`.
 */
export const bedrockProviderType = defineProviderType({
  type: 'bedrock',
  configFields: bedrockFields,
  create: (name, settings, context) => new BedrockProvider(name, settings, context),
  check: (settings) => {
    const problems: Array<{ key: string; message: string }> = [];
    if (settings.api_key) problems.push({ key: 'api_key', message: 'not used by bedrock: give access_key_id and secret_access_key, or leave both out for the AWS credential chain' });
    if (settings.access_key_id && !settings.secret_access_key) problems.push({ key: 'secret_access_key', message: 'required with access_key_id' });
    if (settings.secret_access_key && !settings.access_key_id) problems.push({ key: 'access_key_id', message: 'required with secret_access_key' });
    if (settings.session_token && !settings.access_key_id) problems.push({ key: 'session_token', message: 'only with access_key_id and secret_access_key' });
    if ((settings.models ?? []).length === 0) problems.push({ key: 'models', message: 'required: the Bedrock model ids this instance serves (the runtime API lists none)' });
    return problems;
  },
  // Bedrock's models are priced under the AWS provider of the price table.
  pricesProvider: 'aws',
});

/** Titan text embedding models: one text a call (`inputText`), `dimensions` on v2. */
const TITAN_EMBED = /^(?:[a-z]{2}\.)?amazon\.titan-embed-text-v(\d)/;
/** Titan embedding calls in flight at once for one embeddings request with many inputs. */
const EMBED_CONCURRENCY = 8;

/** What the AWS SDK puts on a service's error answer. */
interface ServiceError extends Error {
  $metadata?: { httpStatusCode?: number; requestId?: string };
  $fault?: string;
}

/**
 * The AWS SDK's Bedrock runtime client, loaded on the first call: a gateway without a Bedrock
 * instance never loads the SDK, and one with it starts as fast. Requests go over HTTP/1.1 with
 * keep-alive (the SDK's default handler is HTTP/2, which has no connect timeout) with the
 * instance's timeouts: connecting, and the longest silence while an answer comes.
 */
class BedrockRuntime {
  private readonly config: BedrockRuntimeClientConfig;
  private readonly timeouts: { connectionTimeout: number; socketTimeout: number };
  private loaded: Promise<{ sdk: typeof import('@aws-sdk/client-bedrock-runtime'); client: BedrockRuntimeClient }> | undefined;

  constructor(config: BedrockRuntimeClientConfig, timeouts: { connectionTimeout: number; socketTimeout: number }) {
    this.config = config;
    this.timeouts = timeouts;
  }

  async converse(input: ConverseCommandInput, signal: AbortSignal): Promise<ConverseCommandOutput> {
    const { sdk, client } = await this.load();
    return client.send(new sdk.ConverseCommand(input), { abortSignal: signal });
  }

  async converseStream(input: ConverseStreamCommandInput, signal: AbortSignal): Promise<ConverseStreamCommandOutput> {
    const { sdk, client } = await this.load();
    return client.send(new sdk.ConverseStreamCommand(input), { abortSignal: signal });
  }

  async invoke(input: InvokeModelCommandInput, signal: AbortSignal): Promise<InvokeModelCommandOutput> {
    const { sdk, client } = await this.load();
    return client.send(new sdk.InvokeModelCommand(input), { abortSignal: signal });
  }

  async destroy(): Promise<void> {
    if (this.loaded !== undefined) (await this.loaded).client.destroy();
  }

  private load(): NonNullable<BedrockRuntime['loaded']> {
    this.loaded ??= Promise.all([import('@aws-sdk/client-bedrock-runtime'), import('@smithy/node-http-handler')]).then(([sdk, http]) => ({
      sdk,
      client: new sdk.BedrockRuntimeClient({ ...this.config, requestHandler: new http.NodeHttpHandler(this.timeouts) }),
    }));
    return this.loaded;
  }
}

class BedrockProvider implements Provider {
  readonly name: string;
  readonly type = 'bedrock';
  private readonly client: BedrockRuntime;
  private readonly models: string[];
  private readonly policy: UnsupportedPolicy;
  private readonly timeoutMs: number;

  constructor(name: string, settings: BedrockSettings, context?: ProviderContext) {
    this.name = name;
    this.models = [...(settings.models ?? [])];
    this.policy = unsupportedPolicy({ provider: name, type: 'bedrock', drop: settings.drop_unsupported, context });
    this.timeoutMs = settings.timeout_ms ?? DEFAULT_TIMEOUT_MS;
    const credentials = settings.access_key_id && settings.secret_access_key
      ? { accessKeyId: settings.access_key_id, secretAccessKey: settings.secret_access_key, ...(settings.session_token ? { sessionToken: settings.session_token } : {}) }
      : undefined; // the SDK's default chain: environment, shared files, SSO, container and instance roles
    this.client = new BedrockRuntime({
      region: settings.region,
      ...(settings.endpoint ? { endpoint: settings.endpoint } : {}),
      ...(credentials ? { credentials } : {}),
      // The gateway fails over and answers 429s itself; the SDK's own retries would hide both.
      maxAttempts: 1,
    }, { connectionTimeout: settings.connect_timeout_ms ?? DEFAULT_CONNECT_TIMEOUT_MS, socketTimeout: this.timeoutMs });
  }

  async listModels(): Promise<string[]> {
    return [...this.models];
  }

  async call(call: ProviderCall): Promise<ProviderResult> {
    switch (call.endpoint) {
      case 'chat': return this.chat(call);
      case 'messages': return this.messages(call);
      case 'embeddings': return this.embeddings(call);
      default: return unsupportedEndpoint(this.name, this.type, call.endpoint);
    }
  }

  /** Bedrock signs each request for its operation; there is no generic upstream to forward to. */
  async passthrough(_call: PassthroughCall): Promise<ProviderResult> {
    return jsonResult(400, {
      error: {
        message: `provider ${this.name} (type bedrock) has no passthrough: Bedrock requests are signed per operation; use the model endpoints`,
        type: 'invalid_request_error', param: null, code: 'unsupported_endpoint',
      },
    });
  }

  async close(): Promise<void> {
    await this.client.destroy();
  }

  private async chat(call: ProviderCall): Promise<ProviderResult> {
    const json = call.json ?? {};
    const input = { modelId: call.model, ...chatToConverse(json, this.policy) };
    if (!call.stream) {
      return this.attempt(call.cancel, 'openai', async (signal) => {
        const res = await this.client.converse(input, signal);
        return jsonResult(200, converseToChat(res, { id: chatId(res.$metadata.requestId), model: call.model }), converseUsage(res.usage));
      });
    }
    const includeUsage = obj(json.stream_options)?.include_usage === true;
    return this.attempt(call.cancel, 'openai', async (signal, abort) => {
      const res = await this.client.converseStream(input, signal);
      const translator = new ConverseToChatStream({ id: chatId(res.$metadata.requestId), model: call.model, includeUsage });
      const body = this.sse(res.stream, call.cancel, abort, function* (event) {
        if (event === 'end') {
          if (!translator.done) return;
          for (const chunk of translator.end()) yield formatSse(JSON.stringify(chunk));
          yield 'data: [DONE]\n\n';
          return;
        }
        for (const chunk of translator.push(event)) yield formatSse(JSON.stringify(chunk));
      });
      return { status: 200, headers: { ...SSE_HEADERS }, body, usage: () => translator.usage() };
    });
  }

  /** Anthropic Messages: translated to chat (the same translation as for chat upstreams), then to Converse. */
  private async messages(call: ProviderCall): Promise<ProviderResult> {
    const json = call.json ?? {};
    checkMessagesParams(json, this.policy);
    const chat = messagesToChatRequest({ ...json, model: call.model, stream: call.stream });
    const input = { modelId: call.model, ...chatToConverse(chat, this.policy) };
    if (!call.stream) {
      return this.attempt(call.cancel, 'anthropic', async (signal) => {
        const res = await this.client.converse(input, signal);
        const answer = converseToChat(res, { id: messageId(res.$metadata.requestId), model: call.model });
        return jsonResult(200, chatToMessagesResponse(answer), converseUsage(res.usage));
      });
    }
    return this.attempt(call.cancel, 'anthropic', async (signal, abort) => {
      const res = await this.client.converseStream(input, signal);
      // The chat chunks carry the usage to the Anthropic translation, which puts it in message_delta.
      const chunks = new ConverseToChatStream({ id: messageId(res.$metadata.requestId), model: call.model, includeUsage: true });
      const translator = new ChatToMessagesStream({ model: call.model });
      const body = this.sse(res.stream, call.cancel, abort, function* (event) {
        if (event === 'end') {
          if (!chunks.done) return;
          for (const chunk of chunks.end()) yield translator.push(chunk);
          yield translator.finish();
          return;
        }
        for (const chunk of chunks.push(event)) yield translator.push(chunk);
      });
      return { status: 200, headers: { ...SSE_HEADERS }, body, usage: () => chunks.usage() };
    });
  }

  private async embeddings(call: ProviderCall): Promise<ProviderResult> {
    const json = call.json ?? {};
    const titan = TITAN_EMBED.exec(call.model);
    if (!titan) {
      return jsonResult(400, {
        error: {
          message: `provider ${this.name} (type bedrock) serves embeddings for Titan text embedding models (amazon.titan-embed-text-*), not ${call.model}`,
          type: 'invalid_request_error', param: 'model', code: 'unsupported_model',
        },
      });
    }
    for (const [key, value] of Object.entries(json)) {
      if (value === undefined || value === null || ['model', 'input', 'encoding_format', 'user'].includes(key)) continue;
      if (key === 'dimensions' && titan[1] !== '1') continue;
      this.policy.unsupported(key);
    }
    const inputs = typeof json.input === 'string' ? [json.input] : arr(json.input);
    if (inputs.length === 0 || !inputs.every((t): t is string => typeof t === 'string')) {
      throw new UnsupportedParameterError('input', `input: provider ${this.name} (type bedrock) embeds text: a string or a list of strings`);
    }
    const dimensions = typeof json.dimensions === 'number' && titan[1] !== '1' ? json.dimensions : undefined;
    const base64 = json.encoding_format === 'base64';
    return this.attempt(call.cancel, 'openai', async (signal) => {
      const vectors: Array<{ embedding: number[]; tokens: number }> = [];
      for (let i = 0; i < inputs.length; i += EMBED_CONCURRENCY) {
        const batch = inputs.slice(i, i + EMBED_CONCURRENCY).map(async (text) => {
          const body = JSON.stringify({ inputText: text, ...(dimensions !== undefined ? { dimensions } : {}) });
          const res = await this.client.invoke({ modelId: call.model, contentType: 'application/json', accept: 'application/json', body: Buffer.from(body) }, signal);
          const parsed = JSON.parse(Buffer.from(res.body ?? new Uint8Array()).toString('utf8')) as Json;
          const embedding = arr(parsed.embedding).filter((x): x is number => typeof x === 'number');
          return { embedding, tokens: typeof parsed.inputTextTokenCount === 'number' ? parsed.inputTextTokenCount : 0 };
        });
        vectors.push(...(await Promise.all(batch)));
      }
      const prompt = vectors.reduce((s, v) => s + v.tokens, 0);
      const usage: Usage = { promptTokens: prompt, completionTokens: 0, totalTokens: prompt };
      return jsonResult(200, {
        object: 'list',
        data: vectors.map((v, index) => ({ object: 'embedding', index, embedding: base64 ? Buffer.from(new Float32Array(v.embedding).buffer).toString('base64') : v.embedding })),
        model: call.model,
        usage: { prompt_tokens: prompt, total_tokens: prompt },
      }, usage);
    });
  }

  /**
   * Runs SDK calls under the call's cancellation. A service's error answer becomes a result with
   * its status (a `ThrottlingException` is a 429 like any other), in the dialect of the endpoint;
   * a connection failure or timeout is an `UpstreamUnavailableError`; a cancellation is rethrown.
   */
  private async attempt(
    cancel: Cancellation,
    dialect: 'openai' | 'anthropic',
    run: (signal: AbortSignal, abort: () => void) => Promise<ProviderResult>,
  ): Promise<ProviderResult> {
    const controller = new AbortController();
    const abort = (): void => controller.abort(cancel.reason);
    if (cancel.cancelled) abort();
    else cancel.once('abort', abort);
    try {
      return await run(controller.signal, abort);
    } catch (err) {
      const status = (err as ServiceError).$metadata?.httpStatusCode;
      if (!cancel.cancelled && typeof status === 'number' && status >= 400) return errorResult(err as ServiceError, status, dialect);
      throw this.mapError(err, cancel);
    } finally {
      cancel.off('abort', abort);
    }
  }

  /**
   * A `converse-stream` answer as a byte stream: each event translated as it arrives (`translate`
   * gives the SSE text of an event, and of the end with 'end'). Destroying the stream (the client
   * left) or cancelling the call aborts the upstream request; a failure mid-stream (an exception
   * event, a broken connection) fails the stream with the provider's error.
   */
  private sse(
    events: AsyncIterable<ConverseStreamOutput> | undefined,
    cancel: Cancellation,
    abort: () => void,
    translate: (event: ConverseStreamOutput | 'end') => Iterable<string>,
  ): Readable {
    const mapError = (err: unknown): unknown => this.mapError(err, cancel, true);
    async function* run(): AsyncGenerator<string> {
      try {
        for await (const event of events ?? []) {
          for (const text of translate(event)) if (text !== '') yield text;
        }
      } catch (err) {
        throw mapError(err);
      }
      for (const text of translate('end')) if (text !== '') yield text;
    }
    const body = Readable.from(run(), { objectMode: false });
    cancel.once('abort', abort);
    body.once('close', () => {
      cancel.off('abort', abort);
      abort();
    });
    return body;
  }

  /** Connection failures become UpstreamUnavailableError (504 for timeouts); a cancellation stays as it is. */
  private mapError(err: unknown, cancel: Cancellation, midStream = false): unknown {
    if (cancel.cancelled || err instanceof UpstreamUnavailableError || err instanceof UnsupportedParameterError) return err;
    const e = err as ServiceError & { code?: unknown };
    if (e?.name === 'TimeoutError') {
      return new UpstreamUnavailableError(this.name, `provider ${this.name} timed out waiting for the response (timeout_ms ${this.timeoutMs})`, 504, { cause: err });
    }
    const detail = e instanceof Error ? `${e.name === 'Error' ? '' : `${e.name}: `}${e.message}` : String(err);
    const what = midStream ? 'stream failed' : e?.code === 'ECONNREFUSED' ? 'is unreachable' : 'failed';
    return new UpstreamUnavailableError(this.name, `provider ${this.name} ${what}: ${e?.code === 'ECONNREFUSED' ? 'connection refused' : detail}`, 502, { cause: err });
  }
}

function chatId(requestId: string | undefined): string {
  return `chatcmpl-${requestId ?? Date.now().toString(36)}`;
}

function messageId(requestId: string | undefined): string {
  return `msg_${requestId ?? Date.now().toString(36)}`;
}

/** A Bedrock error answer in the endpoint's dialect; `code` is the exception's name (e.g. `ThrottlingException`). */
function errorResult(err: ServiceError, status: number, dialect: 'openai' | 'anthropic'): ProviderResult {
  const openai = Buffer.from(JSON.stringify({
    error: { message: err.message || `Bedrock answered ${status}`, type: errorType(status), param: null, code: err.name },
  }));
  return buffered(status, { ...JSON_HEADERS }, dialect === 'openai' ? openai : errorToAnthropic(openai, status));
}

function errorType(status: number): string {
  if (status === 429) return 'rate_limit_error';
  return status >= 500 ? 'api_error' : 'invalid_request_error';
}
