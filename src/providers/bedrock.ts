import { Readable } from 'node:stream';
import type {
  BedrockRuntimeClient, BedrockRuntimeClientConfig, ConverseCommandInput, ConverseCommandOutput, ConverseStreamCommandInput,
  ConverseStreamCommandOutput, ConverseStreamOutput, InvokeModelCommandInput, InvokeModelCommandOutput,
} from '@aws-sdk/client-bedrock-runtime';
import { z } from 'zod';
import { booleanSetting, coerceString, optionalUrlSetting, str } from '../shared/config-fields.ts';
import type { Cancellation } from './cancellation.ts';
import { refusalCapacity } from './capacity.ts';
import { buffered, JSON_HEADERS, jsonResult, SSE_HEADERS, unsupportedEndpoint } from './results.ts';
import { asOpenAIError, chatDialect, openaiErrorBody, type ChatDialect } from './translate/chat-dialect.ts';
import { chatToConverse, converseToChat, converseUsage, ConverseToChatStream } from './translate/converse.ts';
import { embeddingsResponse, readEmbeddingsRequest, type Embeddings } from './translate/embeddings.ts';
import { arr, num } from './translate/json.ts';
import type { Json } from './translate/json.ts';
import type { ChatTarget } from './translate/messages-to-chat.ts';
import { unsupportedPolicy, type UnsupportedPolicy } from './translate/unsupported.ts';
import type { PassthroughCall, Provider, ProviderCall, ProviderContext, ProviderResult, ProviderSettings } from './types.ts';
import { defineProviderType, UnsupportedParameterError, UpstreamUnavailableError } from './types.ts';
import { DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_TIMEOUT_MS } from './upstream.ts';
import { normalizeUsage } from './usage.ts';

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

/** What `chatToConverse` takes of a translated Messages request: neither `top_k` nor a reasoning effort. */
const CONVERSE_CHAT: ChatTarget = { topK: false, reasoningEffort: false };

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
    const json = call.json ?? {};
    if (call.endpoint === 'embeddings') return this.embeddings(call);
    const dialect = chatDialect({ ...call, json }, this.policy, CONVERSE_CHAT);
    if (dialect === undefined) return unsupportedEndpoint(this.name, this.type, call.endpoint);
    return this.converse(call, dialect);
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

  /**
   * Chat, Anthropic Messages and Responses: the dialect's chat request → Converse
   * (`converse-stream` when streamed), the answer back as a chat completion (or chat chunks,
   * event by event) in the client's dialect.
   */
  private async converse(call: ProviderCall, dialect: ChatDialect): Promise<ProviderResult> {
    const input = { modelId: call.model, ...chatToConverse(dialect.chat, this.policy) };
    if (!call.stream) {
      return this.attempt(call.cancel, dialect, async (signal) => {
        const res = await this.client.converse(input, signal);
        const completion = converseToChat(res, { id: chatId(res.$metadata.requestId), model: call.model });
        return jsonResult(200, dialect.answer(completion), converseUsage(res.usage));
      });
    }
    return this.attempt(call.cancel, dialect, async (signal, abort) => {
      const res = await this.client.converseStream(input, signal);
      const translator = new ConverseToChatStream({ id: chatId(res.$metadata.requestId), model: call.model });
      const sink = dialect.sink();
      const body = this.sse(res.stream, call.cancel, abort, function* (event) {
        if (event === 'end') {
          if (!translator.complete) return;
          for (const chunk of translator.end()) yield sink.push(chunk);
          yield sink.finish();
          return;
        }
        for (const chunk of translator.push(event)) yield sink.push(chunk);
      });
      return { status: 200, headers: { ...SSE_HEADERS }, body, usage: () => translator.usage() };
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
    // Titan v1 vectors have a fixed size; v2 takes `dimensions`.
    const input = readEmbeddingsRequest(json, this.policy, { dimensions: titan[1] !== '1' });
    return this.attempt(call.cancel, { error: asOpenAIError }, async (signal) => {
      const answers: Array<{ vector: number[]; tokens: number | undefined }> = [];
      for (let i = 0; i < input.texts.length; i += EMBED_CONCURRENCY) {
        const batch = input.texts.slice(i, i + EMBED_CONCURRENCY).map(async (text) => {
          const body = JSON.stringify({ inputText: text, ...(input.dimensions !== undefined ? { dimensions: input.dimensions } : {}) });
          const res = await this.client.invoke({ modelId: call.model, contentType: 'application/json', accept: 'application/json', body: Buffer.from(body) }, signal);
          const parsed = JSON.parse(Buffer.from(res.body ?? new Uint8Array()).toString('utf8')) as Json;
          return { vector: arr(parsed.embedding).filter((x): x is number => typeof x === 'number'), tokens: num(parsed.inputTextTokenCount) };
        });
        answers.push(...(await Promise.all(batch)));
      }
      const counted = answers.every((a) => a.tokens !== undefined);
      const result: Embeddings = { vectors: answers.map((a) => a.vector), promptTokens: counted ? answers.reduce((n, a) => n + a.tokens!, 0) : undefined };
      const answer = embeddingsResponse(call.model, input, result);
      return jsonResult(200, answer, normalizeUsage(answer.usage));
    });
  }

  /**
   * Runs SDK calls under the call's cancellation. A service's error answer becomes a result with
   * its status (a `ThrottlingException` is a 429 like any other), in the dialect of the endpoint;
   * a connection failure or timeout is an `UpstreamUnavailableError`; a cancellation is rethrown.
   */
  private async attempt(
    cancel: Cancellation,
    dialect: Pick<ChatDialect, 'error'>,
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

/** A Bedrock error answer in the endpoint's dialect; `code` is the exception's name (e.g. `ThrottlingException`). */
function errorResult(err: ServiceError, status: number, dialect: Pick<ChatDialect, 'error'>): ProviderResult {
  const openai = openaiErrorBody(status, err.message || `Bedrock answered ${status}`, err.name);
  // A throttled call says no more than its status: the gateway cools the model down for a while.
  return buffered(status, { ...JSON_HEADERS }, dialect.error(openai, status), undefined, refusalCapacity(status));
}
