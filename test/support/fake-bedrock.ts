/**
 * A fake Amazon Bedrock runtime for tests. Like the real service it first checks the request's
 * SigV4 `Authorization` header: it signs the received request again with the same signing
 * library (@smithy/signature-v4) for the configured credentials, region and service `bedrock`, and
 * refuses anything that does not match. Then it checks the Converse request's shape (roles that
 * alternate starting with the user, one member per content block, a toolConfig whenever tool
 * blocks are used, image formats and bytes, inference settings) and answers deterministically:
 * the last user text is echoed (cut by maxTokens and stopSequences), a request whose last user
 * text mentions "tool" gets a tool call, a tool result is answered with its text, and JSON
 * output asks get a JSON object. `converse-stream` answers in the AWS event-stream binary framing
 * (@smithy/eventstream-codec). InvokeModel serves Titan text embeddings.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { EventStreamCodec } from '@smithy/eventstream-codec';
import { Hash } from '@smithy/hash-node';
import { SignatureV4 } from '@smithy/signature-v4';
import { fromUtf8, toUtf8 } from '@smithy/util-utf8';
import { startLoopbackServer } from './loopback-server.ts';

export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

export interface FakeBedrockOptions {
  region: string;
  /** Every key pair the fake accepts. */
  credentials: AwsCredentials[];
  /** Model ids it serves (others: 404 ResourceNotFoundException... as Bedrock answers a wrong id: a 400 ValidationException). */
  models: string[];
  name?: string;
}

export interface BedrockCall {
  path: string;
  operation: 'converse' | 'converse-stream' | 'invoke' | string;
  modelId: string;
  headers: IncomingMessage['headers'];
  body: Record<string, unknown> | undefined;
  /** The access key id the request was signed with (undefined when the signature was refused). */
  signedBy: string | undefined;
  status: number;
  /** True once the whole answer was written. */
  ended: boolean;
}

export interface BedrockFailure {
  status: number;
  /** The exception's name, e.g. ThrottlingException. */
  type: string;
  message?: string;
}

export interface FakeBedrock {
  readonly url: string;
  readonly calls: BedrockCall[];
  /** The next `n` model calls fail with this exception. */
  failNext(n: number, failure: BedrockFailure): void;
  /** Every call for `model` fails so until cleared with undefined. */
  failModel(model: string, failure: BedrockFailure | undefined): void;
  /** The next stream sends `events` events, then this exception event (e.g. modelStreamErrorException). */
  breakStreamNext(events: number, exception: string): void;
  /** Reported as cacheReadInputTokens (part of the prompt, outside inputTokens). */
  setCacheRead(tokens: number): void;
  setChunkDelay(ms: number): void;
  reset(): void;
  close(): Promise<void>;
}

type Json = Record<string, unknown>;

const tokens = (text: string): number => (text.length === 0 ? 0 : Math.max(1, Math.ceil(text.length / 4)));
const words = (text: string): string[] => text.match(/\S+\s*/g) ?? [];

const codec = new EventStreamCodec(toUtf8, fromUtf8);

/** One event-stream message, as Bedrock frames each `converse-stream` event. */
function frame(eventType: string, payload: unknown, messageType: 'event' | 'exception' = 'event'): Uint8Array {
  const typeHeader = messageType === 'event' ? ':event-type' : ':exception-type';
  return codec.encode({
    headers: {
      [typeHeader]: { type: 'string', value: eventType },
      ':content-type': { type: 'string', value: 'application/json' },
      ':message-type': { type: 'string', value: messageType },
    },
    body: fromUtf8(JSON.stringify(payload)),
  });
}

class Refusal extends Error {
  readonly status: number;
  readonly type: string;
  constructor(status: number, type: string, message: string) {
    super(message);
    this.status = status;
    this.type = type;
  }
}

const validation = (message: string): Refusal => new Refusal(400, 'ValidationException', message);

const BLOCK_MEMBERS = ['text', 'image', 'document', 'video', 'toolUse', 'toolResult', 'guardContent', 'cachePoint', 'reasoningContent', 'citationsContent'];

/** The checks Bedrock makes of a Converse request that the translation could get wrong. */
function checkConverse(body: Json): void {
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) throw validation('messages: at least one message is required');
  let expected = 'user';
  const toolUseIds = new Set<string>();
  let usesTools = false;
  messages.forEach((m: Json, i) => {
    if (m.role !== expected) {
      throw validation(`A conversation must start with a user message and alternate between user and assistant roles (messages.${i}.role is ${String(m.role)})`);
    }
    expected = expected === 'user' ? 'assistant' : 'user';
    if (!Array.isArray(m.content) || m.content.length === 0) throw validation(`messages.${i}.content: must not be empty`);
    for (const block of m.content as Json[]) {
      const members = Object.keys(block).filter((k) => BLOCK_MEMBERS.includes(k));
      if (members.length !== 1 || Object.keys(block).length !== 1) throw validation(`messages.${i}.content: each content block must have exactly one member (got ${Object.keys(block).join(', ')})`);
      const image = block.image as Json | undefined;
      if (image) {
        if (!['png', 'jpeg', 'gif', 'webp'].includes(String(image.format))) throw validation(`messages.${i}: image format ${String(image.format)}`);
        const bytes = (image.source as Json | undefined)?.bytes;
        if (typeof bytes !== 'string' || Buffer.from(bytes, 'base64').length === 0) throw validation(`messages.${i}: image bytes missing`);
      }
      const toolUse = block.toolUse as Json | undefined;
      if (toolUse) {
        usesTools = true;
        if (m.role !== 'assistant' || typeof toolUse.toolUseId !== 'string' || typeof toolUse.name !== 'string' || typeof toolUse.input !== 'object') {
          throw validation(`messages.${i}: malformed toolUse`);
        }
        toolUseIds.add(toolUse.toolUseId);
      }
      const toolResult = block.toolResult as Json | undefined;
      if (toolResult) {
        usesTools = true;
        if (m.role !== 'user' || !toolUseIds.has(String(toolResult.toolUseId))) throw validation(`messages.${i}: toolResult for an unknown toolUseId ${String(toolResult.toolUseId)}`);
      }
    }
  });
  const tools = (body.toolConfig as Json | undefined)?.tools;
  if (usesTools && !Array.isArray(tools)) throw validation('The toolConfig field must be defined when using toolUse and toolResult content blocks.');
  for (const t of (Array.isArray(tools) ? tools : []) as Json[]) {
    const spec = t.toolSpec as Json | undefined;
    if (typeof spec?.name !== 'string' || typeof (spec.inputSchema as Json | undefined)?.json !== 'object') throw validation('toolConfig.tools: toolSpec needs a name and inputSchema.json');
  }
  const inference = (body.inferenceConfig ?? {}) as Json;
  if (inference.maxTokens !== undefined && !(Number.isInteger(inference.maxTokens) && (inference.maxTokens as number) >= 1)) throw validation('inferenceConfig.maxTokens: must be an integer >= 1');
  if (inference.temperature !== undefined && !(typeof inference.temperature === 'number' && inference.temperature >= 0 && inference.temperature <= 1)) throw validation('inferenceConfig.temperature: must be between 0 and 1');
  if (inference.topP !== undefined && !(typeof inference.topP === 'number' && inference.topP >= 0 && inference.topP <= 1)) throw validation('inferenceConfig.topP: must be between 0 and 1');
  const stop = inference.stopSequences;
  if (stop !== undefined && !(Array.isArray(stop) && stop.every((s) => typeof s === 'string'))) throw validation('inferenceConfig.stopSequences: must be a list of strings');
}

function textOfBlocks(content: unknown): string {
  return (Array.isArray(content) ? content : []).map((b: Json) => (typeof b.text === 'string' ? b.text : '')).join('');
}

interface Answer {
  text: string;
  toolUse?: { toolUseId: string; name: string; input: Json };
  stopReason: string;
  usage: Json;
}

function answer(body: Json, cacheRead: number, seq: number): Answer {
  const messages = body.messages as Json[];
  const last = messages[messages.length - 1]!;
  const lastBlocks = last.content as Json[];
  const toolResult = lastBlocks.map((b) => b.toolResult as Json | undefined).find((r) => r !== undefined);
  const prompt = textOfBlocks(body.system) + messages.map((m) => textOfBlocks(m.content)).join('');
  const userText = textOfBlocks(lastBlocks);
  const toolConfig = body.toolConfig as Json | undefined;
  const usage = (output: number): Json => {
    const input = tokens(prompt);
    return { inputTokens: input, outputTokens: output, totalTokens: input + output + cacheRead, ...(cacheRead > 0 ? { cacheReadInputTokens: cacheRead } : {}) };
  };
  if (toolResult === undefined && toolConfig !== undefined && /\btool\b/i.test(userText)) {
    const tools = toolConfig.tools as Array<{ toolSpec: { name: string } }>;
    const chosen = ((toolConfig.toolChoice as Json | undefined)?.tool as Json | undefined)?.name;
    const input = { query: userText };
    return { text: '', toolUse: { toolUseId: `tooluse_${seq}`, name: typeof chosen === 'string' ? chosen : tools[0]!.toolSpec.name, input }, stopReason: 'tool_use', usage: usage(tokens(JSON.stringify(input))) };
  }
  let text = toolResult !== undefined ? `tool said: ${textOfBlocks(toolResult.content)}` : userText;
  if (body.outputConfig !== undefined) text = JSON.stringify({ echo: text });
  let stopReason = 'end_turn';
  const inference = (body.inferenceConfig ?? {}) as Json;
  for (const s of (inference.stopSequences ?? []) as string[]) {
    const at = text.indexOf(s);
    if (at >= 0) {
      text = text.slice(0, at);
      stopReason = 'stop_sequence';
    }
  }
  const max = inference.maxTokens as number | undefined;
  if (max !== undefined && words(text).length > max) {
    text = words(text).slice(0, max).join('');
    stopReason = 'max_tokens';
  }
  return { text, stopReason, usage: usage(tokens(text)) };
}

/** The streamed events of an answer, as Bedrock sends them. */
function streamEvents(a: Answer): Array<[string, Json]> {
  const events: Array<[string, Json]> = [['messageStart', { role: 'assistant' }]];
  if (a.toolUse) {
    const json = JSON.stringify(a.toolUse.input);
    const half = Math.ceil(json.length / 2);
    events.push(
      ['contentBlockStart', { contentBlockIndex: 0, start: { toolUse: { toolUseId: a.toolUse.toolUseId, name: a.toolUse.name } } }],
      ['contentBlockDelta', { contentBlockIndex: 0, delta: { toolUse: { input: json.slice(0, half) } } }],
      ['contentBlockDelta', { contentBlockIndex: 0, delta: { toolUse: { input: json.slice(half) } } }],
      ['contentBlockStop', { contentBlockIndex: 0 }],
    );
  } else {
    for (const piece of words(a.text)) events.push(['contentBlockDelta', { contentBlockIndex: 0, delta: { text: piece } }]);
    events.push(['contentBlockStop', { contentBlockIndex: 0 }]);
  }
  events.push(['messageStop', { stopReason: a.stopReason }], ['metadata', { usage: a.usage, metrics: { latencyMs: 1 } }]);
  return events;
}

function titanEmbedding(text: string, dimensions: number): number[] {
  const out: number[] = [];
  let seed = createHash('sha256').update(text).digest();
  while (out.length < dimensions) {
    for (const b of seed) if (out.length < dimensions) out.push(b / 255 - 0.5);
    seed = createHash('sha256').update(seed).digest();
  }
  return out;
}

export async function startFakeBedrock(options: FakeBedrockOptions): Promise<FakeBedrock> {
  const calls: BedrockCall[] = [];
  let failures: BedrockFailure[] = [];
  let modelFailures = new Map<string, BedrockFailure>();
  let streamBreaks: Array<{ events: number; exception: string }> = [];
  let cacheRead = 0;
  let chunkDelayMs = 0;
  let seq = 0;

  /** The access key id of a request whose signature checks out; a Refusal otherwise. */
  const verify = async (req: IncomingMessage, raw: Buffer): Promise<string> => {
    const auth = req.headers.authorization ?? '';
    const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(auth);
    if (!m) throw new Refusal(403, 'MissingAuthenticationTokenException', 'Missing Authentication Token');
    const [, keyId, , region, service, signedHeaders] = m;
    const creds = options.credentials.find((c) => c.accessKeyId === keyId);
    if (!creds) throw new Refusal(403, 'UnrecognizedClientException', 'The security token included in the request is invalid.');
    if (region !== options.region || service !== 'bedrock') {
      throw new Refusal(403, 'InvalidSignatureException', `Credential should be scoped to a valid region and service bedrock (got ${region}/${service}).`);
    }
    const amzDate = String(req.headers['x-amz-date'] ?? '');
    const d = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(amzDate);
    if (!d) throw new Refusal(403, 'IncompleteSignatureException', 'x-amz-date is missing or malformed');
    const signingDate = new Date(Date.UTC(+d[1]!, +d[2]! - 1, +d[3]!, +d[4]!, +d[5]!, +d[6]!));
    if (Math.abs(Date.now() - signingDate.getTime()) > 5 * 60_000) throw new Refusal(403, 'InvalidSignatureException', 'Signature expired');
    const names = signedHeaders!.split(';');
    for (const required of ['host', 'x-amz-date']) {
      if (!names.includes(required)) throw new Refusal(403, 'InvalidSignatureException', `${required} must be signed`);
    }
    if (creds.sessionToken !== undefined && req.headers['x-amz-security-token'] !== creds.sessionToken) {
      throw new Refusal(403, 'UnrecognizedClientException', 'The security token included in the request is invalid.');
    }
    const headers: Record<string, string> = {};
    for (const name of names) headers[name] = String(req.headers[name] ?? '');
    const url = new URL(req.url ?? '/', 'http://x');
    const [hostname, port] = (req.headers.host ?? '').split(':');
    const signer = new SignatureV4({ credentials: creds, region: options.region, service: 'bedrock', sha256: Hash.bind(null, 'sha256') });
    const signed = await signer.sign(
      {
        method: req.method ?? 'GET', protocol: 'http:', hostname: hostname ?? '', port: port ? Number(port) : undefined,
        path: url.pathname, query: Object.fromEntries(url.searchParams), headers, body: raw,
      },
      { signingDate },
    );
    if (signed.headers.authorization !== auth) {
      throw new Refusal(403, 'InvalidSignatureException', 'The request signature we calculated does not match the signature you provided.');
    }
    return keyId!;
  };

  const sendError = (res: ServerResponse, call: BedrockCall | undefined, status: number, type: string, message: string): void => {
    if (call) call.status = status;
    res.writeHead(status, { 'content-type': 'application/json', 'x-amzn-errortype': `${type}:http://internal.amazon.com/coral/com.amazon.bedrock/`, 'x-amzn-requestid': `req-${++seq}` });
    res.end(JSON.stringify({ message }));
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks);
    const url = new URL(req.url ?? '/', 'http://x');
    const route = /^\/model\/([^/]+)\/([a-z-]+)$/.exec(url.pathname);
    let body: Json | undefined;
    try {
      body = raw.length > 0 ? (JSON.parse(raw.toString('utf8')) as Json) : undefined;
    } catch {
      body = undefined;
    }
    const call: BedrockCall = {
      path: url.pathname, operation: route?.[2] ?? '', modelId: route ? decodeURIComponent(route[1]!) : '', headers: req.headers, body, signedBy: undefined, status: 0, ended: false,
    };
    res.once('finish', () => { call.ended = true; });
    calls.push(call);
    try {
      call.signedBy = await verify(req, raw);
      if (req.method !== 'POST' || !route) throw new Refusal(404, 'UnknownOperationException', `no route ${req.method} ${url.pathname}`);
      if (!options.models.includes(call.modelId)) throw validation(`The provided model identifier is invalid: ${call.modelId}`);
      const failure = failures.shift() ?? modelFailures.get(call.modelId);
      if (failure) throw new Refusal(failure.status, failure.type, failure.message ?? `fake bedrock: ${failure.type}`);
      if (body === undefined) throw new Refusal(400, 'SerializationException', 'body must be JSON');
      const id = ++seq;
      if (call.operation === 'invoke') {
        if (!/amazon\.titan-embed-text/.test(call.modelId)) throw validation(`Malformed input request: model ${call.modelId} takes another body`);
        if (typeof body.inputText !== 'string') throw validation('Malformed input request: #: required key [inputText] not found');
        const dimensions = body.dimensions === undefined ? 1024 : body.dimensions;
        if (![256, 512, 1024].includes(dimensions as number)) throw validation('Malformed input request: dimensions must be 256, 512 or 1024');
        call.status = 200;
        res.writeHead(200, { 'content-type': 'application/json', 'x-amzn-requestid': `req-${id}` });
        return void res.end(JSON.stringify({ embedding: titanEmbedding(body.inputText, dimensions as number), inputTextTokenCount: tokens(body.inputText) }));
      }
      checkConverse(body);
      const a = answer(body, cacheRead, id);
      if (call.operation === 'converse') {
        const content = a.toolUse ? [{ toolUse: a.toolUse }] : [{ text: a.text }];
        call.status = 200;
        res.writeHead(200, { 'content-type': 'application/json', 'x-amzn-requestid': `req-${id}` });
        return void res.end(JSON.stringify({ output: { message: { role: 'assistant', content } }, stopReason: a.stopReason, usage: a.usage, metrics: { latencyMs: 1 } }));
      }
      if (call.operation !== 'converse-stream') throw new Refusal(404, 'UnknownOperationException', `no operation ${call.operation}`);
      call.status = 200;
      res.writeHead(200, { 'content-type': 'application/vnd.amazon.eventstream', 'x-amzn-requestid': `req-${id}` });
      const broken = streamBreaks.shift();
      const events = streamEvents(a);
      for (let i = 0; i < events.length; i++) {
        if (res.destroyed) return;
        if (broken !== undefined && i === broken.events) {
          res.write(frame(broken.exception, { message: `fake bedrock: ${broken.exception}` }, 'exception'));
          return void res.end();
        }
        if (i > 0 && chunkDelayMs > 0) await sleep(chunkDelayMs);
        res.write(frame(events[i]![0], events[i]![1]));
      }
      res.end();
    } catch (err) {
      if (err instanceof Refusal) return sendError(res, call, err.status, err.type, err.message);
      throw err;
    }
  };

  const http = await startLoopbackServer(handle);
  return {
    url: http.url,
    calls,
    failNext: (n, failure) => {
      for (let i = 0; i < n; i++) failures.push(failure);
    },
    failModel: (model, failure) => {
      if (failure) modelFailures.set(model, failure);
      else modelFailures.delete(model);
    },
    breakStreamNext: (events, exception) => { streamBreaks.push({ events, exception }); },
    setCacheRead: (n) => { cacheRead = n; },
    setChunkDelay: (ms) => { chunkDelayMs = ms; },
    reset: () => {
      calls.length = 0;
      failures = [];
      modelFailures = new Map();
      streamBreaks = [];
      cacheRead = 0;
      chunkDelayMs = 0;
    },
    close: http.close,
  };
}
