/**
 * A fake of Google's generative APIs on 127.0.0.1: the Gemini API (`/v1beta/models/...`, key in
 * `x-goog-api-key`) or Vertex AI (`/v1/projects/{p}/locations/{l}/publishers/google/models/...`,
 * an OAuth bearer token). It checks requests the way the real APIs do (unknown fields, roles,
 * one datum per part, function responses matching the calls of the turn before, schema fields,
 * thought signatures) and answers as they do: `generateContent`, `streamGenerateContent?alt=sse`,
 * embeddings, the model list, and `google.rpc.Status` errors.
 *
 * Answers are deterministic: the text of the last user turn is echoed; with function
 * declarations (and a mode other than NONE) the first allowed function is called with
 * `{"query": <that text>}` (the first two when the text says "both"); after function responses
 * the answer is `tool said: <their JSON>`; JSON mode answers `{"echo": <text>}`. Tokens are a
 * quarter of the characters, rounded up.
 */
import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { startLoopbackServer } from './loopback-server.ts';

type Json = Record<string, unknown>;

export interface FakeGoogleOptions {
  api: 'gemini' | 'vertex';
  /** Gemini: the key every call must carry in `x-goog-api-key`. Vertex: a key accepted instead of a token. */
  apiKey?: string;
  /** Vertex: whether a bearer token is valid (ask the fake token server). */
  acceptsToken?: (token: string) => boolean;
  project?: string;
  location?: string;
  /** Gemini: the models listed and served (others are 404). */
  models?: string[];
  /** Gemini: the most models a page of the listing holds (the real API's cap is 1000). */
  pageSize?: number;
}

export interface GoogleCall {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  body: Json | undefined;
  model: string;
  /** `generateContent`, `streamGenerateContent`, `embedContent`, `batchEmbedContents`, `predict`, `list`. */
  action: string;
  status: number | undefined;
}

export interface FakeGoogle {
  readonly url: string;
  readonly calls: GoogleCall[];
  /** Generation calls only. */
  generations(): GoogleCall[];
  /** The next `n` calls fail with this status and `google.rpc.Status` body. */
  failNext(n: number, status: number, googleStatus: string, message?: string, details?: Json[]): void;
  /** The next `n` calls answer 429 RESOURCE_EXHAUSTED with a RetryInfo detail of `retryDelay`. */
  exhaustNext(n: number, retryDelay: string): void;
  /** Usage extras reported from now on. */
  setUsageExtras(extras: { cached?: number; thoughts?: number }): void;
  /** Function calls carry this thought signature, and requests must send it back with them. */
  setThoughtSignature(signature: string | undefined): void;
  /** The finish reason of the next answers instead of STOP/MAX_TOKENS. */
  setFinishReason(reason: string | undefined): void;
  /** The next stream is cut after its second event (no finish reason sent). */
  dropStreamNext(): void;
  reset(): void;
  close(): Promise<void>;
}

const tokens = (text: string): number => (text.length === 0 ? 0 : Math.ceil(text.length / 4));

const TOP_LEVEL = new Set(['contents', 'systemInstruction', 'tools', 'toolConfig', 'generationConfig', 'safetySettings', 'cachedContent', 'labels']);
const GENERATION_CONFIG = new Set([
  'stopSequences', 'responseMimeType', 'responseSchema', 'responseJsonSchema', 'responseModalities', 'candidateCount', 'maxOutputTokens',
  'temperature', 'topP', 'topK', 'seed', 'presencePenalty', 'frequencyPenalty', 'responseLogprobs', 'logprobs', 'thinkingConfig',
  'speechConfig', 'mediaResolution',
]);
const PART_DATA = ['text', 'inlineData', 'fileData', 'functionCall', 'functionResponse', 'executableCode', 'codeExecutionResult'];
const PART_FIELDS = new Set([...PART_DATA, 'thought', 'thoughtSignature', 'videoMetadata']);
const FUNCTION_NAME = /^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$/;

class Invalid extends Error {}

const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/** Checks a GenerateContentRequest as the real API does; throws `Invalid` with its message. */
function validateGenerate(body: Json, signature: string | undefined): void {
  for (const key of Object.keys(body)) if (!TOP_LEVEL.has(key)) throw new Invalid(`Invalid JSON payload received. Unknown name "${key}": Cannot find field.`);
  const contents = body.contents;
  if (!Array.isArray(contents) || contents.length === 0) throw new Invalid('* GenerateContentRequest.contents: contents is not specified');
  let previousCalls = 0;
  contents.forEach((c, i) => {
    if (!isObj(c) || (c.role !== 'user' && c.role !== 'model')) throw new Invalid(`Please use a valid role: user, model. (contents[${i}])`);
    const parts = c.parts;
    if (!Array.isArray(parts) || parts.length === 0) throw new Invalid(`* GenerateContentRequest.contents[${i}].parts: contents.parts must not be empty.`);
    let calls = 0;
    let responses = 0;
    parts.forEach((p, j) => {
      if (!isObj(p)) throw new Invalid(`contents[${i}].parts[${j}]: not an object`);
      for (const key of Object.keys(p)) if (!PART_FIELDS.has(key)) throw new Invalid(`Invalid JSON payload received. Unknown name "${key}" at 'contents[${i}].parts[${j}]': Cannot find field.`);
      const data = PART_DATA.filter((k) => p[k] !== undefined);
      if (data.length !== 1) throw new Invalid(`* GenerateContentRequest.contents[${i}].parts[${j}].data: required oneof field 'data' must have one initialized field`);
      if (p.functionCall !== undefined) {
        if (c.role !== 'model') throw new Invalid(`contents[${i}]: function calls belong to model turns`);
        const fc = p.functionCall as Json;
        if (typeof fc.name !== 'string' || !isObj(fc.args ?? {})) throw new Invalid(`contents[${i}].parts[${j}].functionCall: name and object args required`);
        if (signature !== undefined && calls === 0 && p.thoughtSignature !== signature) {
          throw new Invalid(`Function call is missing a thought_signature in functionCall parts. (contents[${i}].parts[${j}])`);
        }
        calls++;
      }
      if (p.functionResponse !== undefined) {
        if (c.role !== 'user') throw new Invalid(`contents[${i}]: function responses belong to user turns`);
        const fr = p.functionResponse as Json;
        if (typeof fr.name !== 'string' || !isObj(fr.response)) throw new Invalid(`contents[${i}].parts[${j}].functionResponse: name and object response required`);
        responses++;
      }
      if (p.inlineData !== undefined) {
        const d = p.inlineData as Json;
        if (typeof d.mimeType !== 'string' || typeof d.data !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(d.data)) {
          throw new Invalid(`contents[${i}].parts[${j}].inlineData: mimeType and base64 data required`);
        }
      }
      if (p.fileData !== undefined) {
        const d = p.fileData as Json;
        if (typeof d.mimeType !== 'string' || typeof d.fileUri !== 'string') throw new Invalid(`contents[${i}].parts[${j}].fileData: mimeType and fileUri required`);
      }
    });
    if (previousCalls > 0 && responses !== previousCalls) {
      throw new Invalid('Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.');
    }
    previousCalls = c.role === 'model' ? calls : 0;
  });
  if (body.systemInstruction !== undefined) {
    const si = body.systemInstruction;
    if (!isObj(si) || !Array.isArray(si.parts) || !si.parts.every((p) => isObj(p) && typeof p.text === 'string')) throw new Invalid('systemInstruction: text parts required');
  }
  list(body.tools).forEach((t, i) => {
    if (!isObj(t)) throw new Invalid(`tools[${i}]: not an object`);
    list(t.functionDeclarations).forEach((d, k) => {
      if (!isObj(d) || typeof d.name !== 'string' || !FUNCTION_NAME.test(d.name)) throw new Invalid(`* GenerateContentRequest.tools[${i}].function_declarations[${k}].name: Invalid function name.`);
      if (d.parameters !== undefined && d.parametersJsonSchema !== undefined) throw new Invalid(`tools[${i}].function_declarations[${k}]: parameters and parameters_json_schema are mutually exclusive`);
    });
  });
  const fcc = isObj(body.toolConfig) ? body.toolConfig.functionCallingConfig : undefined;
  if (isObj(fcc)) {
    if (!['AUTO', 'ANY', 'NONE', 'VALIDATED'].includes(String(fcc.mode))) throw new Invalid('toolConfig.functionCallingConfig.mode: invalid value');
    if (fcc.allowedFunctionNames !== undefined && fcc.mode !== 'ANY') throw new Invalid('allowed_function_names may only be set when mode is ANY');
  }
  const gc = body.generationConfig;
  if (gc !== undefined) {
    if (!isObj(gc)) throw new Invalid('generationConfig: not an object');
    for (const key of Object.keys(gc)) if (!GENERATION_CONFIG.has(key)) throw new Invalid(`Invalid JSON payload received. Unknown name "${key}" at 'generation_config': Cannot find field.`);
    if ((gc.responseJsonSchema !== undefined || gc.responseSchema !== undefined) && gc.responseMimeType !== 'application/json') {
      throw new Invalid('responseMimeType must be application/json when a response schema is set');
    }
    if (Array.isArray(gc.stopSequences) && gc.stopSequences.length > 5) throw new Invalid('generation_config.stop_sequences: at most 5');
    if (typeof gc.temperature === 'number' && (gc.temperature < 0 || gc.temperature > 2)) throw new Invalid('generation_config.temperature: must be in [0, 2]');
    if (typeof gc.topP === 'number' && (gc.topP < 0 || gc.topP > 1)) throw new Invalid('generation_config.top_p: must be in [0, 1]');
  }
}

function textOfParts(parts: unknown): string {
  return list(parts).map((p) => (isObj(p) && typeof p.text === 'string' ? p.text : '')).join('');
}

function promptText(body: Json): string {
  let all = isObj(body.systemInstruction) ? textOfParts(body.systemInstruction.parts) : '';
  for (const c of list(body.contents)) {
    if (!isObj(c)) continue;
    all += textOfParts(c.parts);
    for (const p of list(c.parts)) if (isObj(p) && p.functionResponse !== undefined) all += JSON.stringify(p.functionResponse);
  }
  return all;
}

interface Answer {
  text: string;
  calls: Json[];
  finish: string;
}

function answerOf(body: Json, finishOverride: string | undefined): Answer {
  const contents = list(body.contents).filter(isObj);
  const last = contents[contents.length - 1];
  const gc = isObj(body.generationConfig) ? body.generationConfig : {};
  const responses = list(last?.parts).filter((p): p is Json => isObj(p) && p.functionResponse !== undefined);
  const lastText = textOfParts(last?.parts);
  const declarations = list(body.tools).flatMap((t) => list(isObj(t) ? t.functionDeclarations : undefined)).filter(isObj);
  const fcc = isObj(body.toolConfig) && isObj(body.toolConfig.functionCallingConfig) ? body.toolConfig.functionCallingConfig : {};
  if (responses.length > 0) return { text: `tool said: ${JSON.stringify(responses.map((r) => r.functionResponse))}`, calls: [], finish: finishOverride ?? 'STOP' };
  if (declarations.length > 0 && fcc.mode !== 'NONE') {
    const allowed = list(fcc.allowedFunctionNames).filter((n): n is string => typeof n === 'string');
    const names = allowed.length > 0 ? allowed : declarations.map((d) => String(d.name));
    const chosen = lastText.includes('both') ? names.slice(0, 2) : names.slice(0, 1);
    return { text: '', calls: chosen.map((name) => ({ name, args: { query: lastText } })), finish: finishOverride ?? 'STOP' };
  }
  let text = gc.responseMimeType === 'application/json' ? JSON.stringify({ echo: lastText }) : lastText;
  let finish = 'STOP';
  for (const stop of list(gc.stopSequences)) {
    const at = typeof stop === 'string' ? text.indexOf(stop) : -1;
    if (at >= 0) text = text.slice(0, at);
  }
  if (typeof gc.maxOutputTokens === 'number' && tokens(text) > gc.maxOutputTokens) {
    text = text.slice(0, gc.maxOutputTokens * 4);
    finish = 'MAX_TOKENS';
  }
  return { text, calls: [], finish: finishOverride ?? finish };
}

function pieces(text: string): string[] {
  return text.match(/\S+\s*|\s+/g) ?? [text];
}

function embedding(text: string, dims: number): number[] {
  const digest = createHash('sha256').update(text).digest();
  return Array.from({ length: dims }, (_, i) => (digest[i % digest.length]! - 128) / 128);
}

function googleError(code: number, status: string, message: string, details: Json[] = []): Json {
  return { error: { code, message, status, details } };
}

export async function startFakeGoogle(options: FakeGoogleOptions): Promise<FakeGoogle> {
  const calls: GoogleCall[] = [];
  let failures: Array<{ status: number; body: Json }> = [];
  let extras: { cached?: number; thoughts?: number } = {};
  let signature: string | undefined;
  let finishOverride: string | undefined;
  let dropNext = false;
  let seq = 0;
  const project = options.project ?? 'test-project';
  const location = options.location ?? 'us-central1';

  const send = (res: ServerResponse, call: GoogleCall | undefined, status: number, body: unknown): void => {
    if (call) call.status = status;
    res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8' });
    res.end(JSON.stringify(body));
  };

  const authorized = (headers: IncomingHttpHeaders): Json | undefined => {
    const key = headers['x-goog-api-key'];
    if (options.api === 'gemini') {
      if (key === undefined) return googleError(403, 'PERMISSION_DENIED', "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.");
      if (key !== options.apiKey) return googleError(400, 'INVALID_ARGUMENT', 'API key not valid. Please pass a valid API key.', [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID', domain: 'googleapis.com' }]);
      return undefined;
    }
    if (options.apiKey !== undefined && key === options.apiKey) return undefined;
    const auth = String(headers.authorization ?? '');
    const token = auth.startsWith('Bearer ') ? auth.slice(7) : '';
    if (token === '' || !(options.acceptsToken?.(token) ?? false)) {
      return googleError(401, 'UNAUTHENTICATED', 'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.');
    }
    return undefined;
  };

  /** `{model, action}` of a model call's path, or an error body. */
  const route = (path: string): { model: string; action: string } | Json => {
    const m = options.api === 'gemini'
      ? /^\/v1beta\/models\/([^/:]+):([A-Za-z]+)$/.exec(path)
      : /^\/v1\/projects\/([^/]+)\/locations\/([^/]+)\/publishers\/google\/models\/([^/:]+):([A-Za-z]+)$/.exec(path);
    if (!m) return googleError(404, 'NOT_FOUND', `The requested URL ${path} was not found on this server.`);
    if (options.api === 'vertex') {
      if (m[1] !== project) return googleError(403, 'PERMISSION_DENIED', `Permission denied on resource project ${m[1]}.`);
      if (m[2] !== location) return googleError(400, 'INVALID_ARGUMENT', `Location ${m[2]} is not supported.`);
      return { model: m[3]!, action: m[4]! };
    }
    return { model: m[1]!, action: m[2]! };
  };

  const usage = (prompt: string, answer: Answer, candidates: number): Json => {
    const out = tokens(answer.text + answer.calls.map((c) => JSON.stringify(c)).join('')) * candidates;
    const u: Json = { promptTokenCount: tokens(prompt), candidatesTokenCount: out, totalTokenCount: tokens(prompt) + out + (extras.thoughts ?? 0) };
    if (extras.cached !== undefined) u.cachedContentTokenCount = extras.cached;
    if (extras.thoughts !== undefined) u.thoughtsTokenCount = extras.thoughts;
    return u;
  };

  const callParts = (answer: Answer): Json[] => answer.calls.map((fc, i) => ({ functionCall: fc, ...(signature !== undefined && i === 0 ? { thoughtSignature: signature } : {}) }));

  const generate = async (res: ServerResponse, call: GoogleCall, body: Json, stream: boolean): Promise<void> => {
    validateGenerate(body, signature);
    const gc = isObj(body.generationConfig) ? body.generationConfig : {};
    const candidates = typeof gc.candidateCount === 'number' ? gc.candidateCount : 1;
    const answer = answerOf(body, finishOverride);
    const prompt = promptText(body);
    const responseId = `fake-${++seq}`;
    const modelVersion = call.model;
    if (!stream) {
      const parts = [...(answer.text.length > 0 ? [{ text: answer.text }] : []), ...callParts(answer)];
      return send(res, call, 200, {
        candidates: Array.from({ length: candidates }, (_, index) => ({ content: { role: 'model', parts }, finishReason: answer.finish, index })),
        usageMetadata: usage(prompt, answer, candidates),
        modelVersion,
        responseId,
      });
    }
    if (call.query.get('alt') !== 'sse') {
      // Without alt=sse the real API streams one JSON array; the gateway must ask for SSE.
      return send(res, call, 200, [{ candidates: [{ content: { role: 'model', parts: [{ text: answer.text }] }, finishReason: answer.finish, index: 0 }] }]);
    }
    call.status = 200;
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const events: Json[] = [];
    const running = { promptTokenCount: tokens(prompt), totalTokenCount: tokens(prompt) };
    for (const piece of answer.text.length > 0 ? pieces(answer.text) : []) {
      events.push({ candidates: [{ content: { role: 'model', parts: [{ text: piece }] }, index: 0 }], usageMetadata: running, modelVersion, responseId });
    }
    const last: Json = { content: { role: 'model', parts: answer.calls.length > 0 ? callParts(answer) : [{ text: '' }] }, finishReason: answer.finish, index: 0 };
    events.push({ candidates: [last], usageMetadata: usage(prompt, answer, 1), modelVersion, responseId });
    const drop = dropNext;
    dropNext = false;
    for (let i = 0; i < events.length; i++) {
      if (drop && i === 2) {
        res.socket?.end();
        return;
      }
      res.write(`data: ${JSON.stringify(events[i])}\r\n\r\n`);
      await new Promise((r) => setImmediate(r));
    }
    res.end();
  };

  const embed = (res: ServerResponse, call: GoogleCall, body: Json): void => {
    const dimsOf = (b: Json): number => (typeof b.outputDimensionality === 'number' ? b.outputDimensionality : 8);
    const textOf = (content: unknown): string => {
      if (!isObj(content) || !Array.isArray(content.parts) || content.parts.length === 0) throw new Invalid('content: parts required');
      return textOfParts(content.parts);
    };
    if (call.action === 'embedContent') {
      return send(res, call, 200, { embedding: { values: embedding(textOf(body.content), dimsOf(body)) } });
    }
    if (call.action === 'batchEmbedContents') {
      const requests = list(body.requests).filter(isObj);
      if (requests.length === 0) throw new Invalid('requests: must not be empty');
      for (const [i, r] of requests.entries()) {
        if (r.model !== `models/${call.model}`) throw new Invalid(`requests[${i}].model: model in the request (${String(r.model)}) must match the model in the URL (models/${call.model})`);
      }
      return send(res, call, 200, { embeddings: requests.map((r) => ({ values: embedding(textOf(r.content), dimsOf(r)) })) });
    }
    const instances = list(body.instances).filter(isObj);
    if (instances.length === 0) throw new Invalid('instances: must not be empty');
    const params = isObj(body.parameters) ? body.parameters : {};
    return send(res, call, 200, {
      predictions: instances.map((inst) => {
        if (typeof inst.content !== 'string') throw new Invalid('instances[].content: required');
        return { embeddings: { values: embedding(inst.content, dimsOf(params)), statistics: { token_count: tokens(inst.content), truncated: false } } };
      }),
      metadata: { billableCharacterCount: instances.reduce((n, i) => n + String(i.content).length, 0) },
    });
  };

  const list_ = (res: ServerResponse, call: GoogleCall): void => {
    const served = options.models ?? ['gemini-test'];
    // A model that only answers questions over documents: listed, not served by the gateway.
    const all = [...served.map((m) => ({ name: `models/${m}`, supportedGenerationMethods: m.includes('embed') ? ['embedContent', 'countTokens'] : ['generateContent', 'countTokens'] })),
      { name: 'models/aqa', supportedGenerationMethods: ['generateAnswer'] }];
    const size = Math.min(Number(call.query.get('pageSize') ?? 50), options.pageSize ?? 1000);
    const start = Number(call.query.get('pageToken') ?? 0);
    const page = all.slice(start, start + size);
    return send(res, call, 200, { models: page, ...(start + size < all.length ? { nextPageToken: String(start + size) } : {}) });
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const url = new URL(req.url ?? '/', 'http://x');
    let body: Json | undefined;
    try {
      const parsed: unknown = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
      body = isObj(parsed) ? parsed : undefined;
    } catch {
      return send(res, undefined, 400, googleError(400, 'INVALID_ARGUMENT', 'Invalid JSON payload received.'));
    }
    const call: GoogleCall = { method: req.method ?? 'GET', path: url.pathname, query: url.searchParams, headers: req.headers, body, model: '', action: '', status: undefined };
    calls.push(call);
    const denied = authorized(req.headers);
    if (denied) return send(res, call, Number((denied.error as Json).code), denied);
    if (req.method === 'GET' && options.api === 'gemini' && url.pathname === '/v1beta/models') {
      call.action = 'list';
      return list_(res, call);
    }
    const r = route(url.pathname);
    if ('error' in r) return send(res, call, Number((r.error as Json).code), r);
    call.model = String(r.model);
    call.action = String(r.action);
    if (options.api === 'gemini' && options.models && !options.models.includes(call.model)) {
      return send(res, call, 404, googleError(404, 'NOT_FOUND', `models/${call.model} is not found for API version v1beta, or is not supported for ${call.action}.`));
    }
    const forced = failures.shift();
    if (forced) return send(res, call, forced.status, forced.body);
    if (req.method !== 'POST' || body === undefined) return send(res, call, 400, googleError(400, 'INVALID_ARGUMENT', 'Invalid JSON payload received.'));
    try {
      if (call.action === 'generateContent') return await generate(res, call, body, false);
      if (call.action === 'streamGenerateContent') return await generate(res, call, body, true);
      const embedAction = options.api === 'gemini' ? ['embedContent', 'batchEmbedContents'] : ['predict'];
      if (embedAction.includes(call.action)) return embed(res, call, body);
      return send(res, call, 404, googleError(404, 'NOT_FOUND', `Method ${call.action} not found.`));
    } catch (err) {
      if (err instanceof Invalid) return send(res, call, 400, googleError(400, 'INVALID_ARGUMENT', err.message));
      throw err;
    }
  };

  const http = await startLoopbackServer(handle);
  return {
    url: http.url,
    calls,
    generations: () => calls.filter((c) => c.action === 'generateContent' || c.action === 'streamGenerateContent'),
    failNext: (n, status, googleStatus, message = `fake: forced ${googleStatus}`, details = []) => {
      for (let i = 0; i < n; i++) failures.push({ status, body: googleError(status, googleStatus, message, details) });
    },
    exhaustNext: (n, retryDelay) => {
      for (let i = 0; i < n; i++) {
        failures.push({
          status: 429,
          body: googleError(429, 'RESOURCE_EXHAUSTED', 'You exceeded your current quota, please check your plan and billing details.', [
            { '@type': 'type.googleapis.com/google.rpc.QuotaFailure', violations: [{ quotaMetric: 'generativelanguage.googleapis.com/generate_content_free_tier_requests', quotaId: 'GenerateRequestsPerMinutePerProjectPerModel-FreeTier' }] },
            { '@type': 'type.googleapis.com/google.rpc.Help', links: [{ description: 'Learn more about Gemini API quotas', url: 'https://ai.google.dev/gemini-api/docs/rate-limits' }] },
            { '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay },
          ]),
        });
      }
    },
    setUsageExtras: (e) => { extras = e; },
    setThoughtSignature: (s) => { signature = s; },
    setFinishReason: (r) => { finishOverride = r; },
    dropStreamNext: () => { dropNext = true; },
    reset: () => {
      calls.length = 0;
      failures = [];
      extras = {};
      signature = undefined;
      finishOverride = undefined;
      dropNext = false;
    },
    close: http.close,
  };
}
