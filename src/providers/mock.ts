import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { setImmediate as tick } from 'node:timers/promises';
import { optionalUrlSetting } from '../shared/config-fields.ts';
import { Cancellation } from './cancellation.ts';
import { MockRealtimeSession } from './mock-realtime.ts';
import { formatSse } from './sse.ts';
import { chatToMessagesResponse } from './translate/anthropic-response.ts';
import { ChatToMessagesStream } from './translate/anthropic-stream.ts';
import { arr, nowSeconds, obj, str } from './translate/json.ts';
import { isRecord } from '../shared/json.ts';
import type { Json } from './translate/json.ts';
import { jsonResult, SSE_HEADERS } from './results.ts';
import type { BatchAbility, PassthroughCall, Provider, ProviderCall, ProviderResult, RealtimeAbility, Usage } from './types.ts';
import { defineProviderType } from './types.ts';
import { estimateTokens } from './usage.ts';

const MOCK_DEFAULT_MODELS = ['mock-1', 'mock-embed'];
const MOCK_EMBEDDING_DIMENSIONS = 16;
const MOCK_TRANSCRIPTION = 'This is a mock transcription.';
const FALLBACK_REPLY = 'Hello from the mock provider.';

/** Text of a chat/Anthropic content value (string or parts). */
function contentText(c: unknown): string {
  if (typeof c === 'string') return c;
  return arr(c).map((p) => (isRecord(p) ? (str(p.text) ?? '') : '')).join('');
}

/** The last user message of chat, Anthropic or Responses input, and all prompt text. */
function promptOf(json: Json): { last: string; all: string } {
  const input = json.input;
  if (typeof input === 'string') return { last: input, all: input };
  const items = json.messages !== undefined ? arr(json.messages) : arr(input);
  let last = '';
  let all = contentText(json.system) + contentText(json.instructions);
  for (const m of items) {
    if (!isRecord(m)) continue;
    const t = contentText(m.content);
    all += t;
    if (m.role === 'user' || m.role === undefined) last = t;
  }
  return { last, all };
}

function usageOf(prompt: string, completion: string): Usage {
  const promptTokens = Math.max(1, estimateTokens(prompt));
  const completionTokens = estimateTokens(completion);
  return { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens };
}

/** Splits a reply into word-sized stream pieces. */
function pieces(text: string): string[] {
  return text.match(/\S+\s*|\s+/g) ?? [text];
}

function sseStream(events: string[]): Readable {
  return Readable.from(oneByOne(events), { objectMode: false });
}

async function* oneByOne(events: string[]): AsyncGenerator<Buffer> {
  for (const e of events) {
    await tick(); // one event per turn of the event loop, like a real stream
    yield Buffer.from(e);
  }
}

/** Deterministic vector from the text's hash, unit length. */
function mockEmbedding(text: string, dimensions = MOCK_EMBEDDING_DIMENSIONS): number[] {
  const v: number[] = [];
  let seed = createHash('sha256').update(text).digest();
  while (v.length < dimensions) {
    for (const b of seed) if (v.length < dimensions) v.push(b / 127.5 - 1);
    seed = createHash('sha256').update(seed).digest();
  }
  const norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0)) || 1;
  return v.map((x) => Math.round((x / norm) * 1e6) / 1e6);
}

/**
 * `type: mock`: the offline provider; its other settings are accepted (a config can switch a
 * provider's type back and forth) but only `models` is used.
 */
export const mockProviderType = defineProviderType({
  type: 'mock',
  configFields: { base_url: optionalUrlSetting() },
  create: (name, settings) => new MockProvider({ name, models: settings.models }),
  pricesProvider: null,
});

/** The built-in offline provider: deterministic echo answers, always with usage, no network. */
class MockProvider implements Provider {
  readonly name: string;
  readonly type = 'mock';
  /** A built-in session speaking a text-only subset of the OpenAI realtime protocol. */
  readonly realtime: RealtimeAbility = { connect: async (model) => new MockRealtimeSession(model) };
  /** The gateway runs a mock batch's lines itself. */
  readonly batch: BatchAbility = { mode: 'lines' };
  private readonly models: string[];
  private seq = 0;

  constructor(opts: { name?: string; models?: readonly string[] | undefined } = {}) {
    this.name = opts.name ?? 'mock';
    this.models = opts.models && opts.models.length > 0 ? [...opts.models] : [...MOCK_DEFAULT_MODELS];
  }

  async listModels(): Promise<string[]> {
    return [...this.models];
  }

  async call(call: ProviderCall): Promise<ProviderResult> {
    if (call.cancel.cancelled) throw Cancellation.error();
    const json = call.json ?? {};
    switch (call.endpoint) {
      case 'chat': return this.chat(call.model, json, call.stream);
      case 'messages': return this.messages(call.model, json, call.stream);
      case 'responses': return this.responses(call.model, json, call.stream);
      case 'embeddings': return this.embeddings(call.model, json);
      case 'speech': {
        const text = str(json.input) ?? '';
        // An MPEG frame header followed by a few bytes derived from the text.
        const audio = Buffer.concat([Buffer.from([0xff, 0xfb, 0x90, 0x64]), createHash('sha256').update(text).digest().subarray(0, 12)]);
        const usage = usageOf(text, '');
        return { status: 200, headers: { 'content-type': 'audio/mpeg' }, body: audio, usage: () => usage };
      }
      case 'transcriptions': {
        const usage: Usage = { promptTokens: 1, completionTokens: estimateTokens(MOCK_TRANSCRIPTION), totalTokens: 1 + estimateTokens(MOCK_TRANSCRIPTION) };
        return jsonResult(200, { text: MOCK_TRANSCRIPTION }, usage);
      }
    }
  }

  async passthrough(_call: PassthroughCall): Promise<ProviderResult> {
    return jsonResult(404, { error: { message: `provider ${this.name} (type mock) has no upstream to pass requests through to`, type: 'not_found_error', param: null, code: null } });
  }

  async close(): Promise<void> {}

  private nextId(prefix: string): string {
    this.seq += 1;
    return `${prefix}-mock-${this.seq}`;
  }

  private chatResponse(model: string, json: Json): { body: Json; reply: string; usage: Usage } {
    const p = promptOf(json);
    const reply = p.last || FALLBACK_REPLY;
    const usage = usageOf(p.all, reply);
    const body: Json = {
      id: this.nextId('chatcmpl'),
      object: 'chat.completion',
      created: nowSeconds(),
      model,
      choices: [{ index: 0, message: { role: 'assistant', content: reply, refusal: null }, logprobs: null, finish_reason: 'stop' }],
      usage: { prompt_tokens: usage.promptTokens, completion_tokens: usage.completionTokens, total_tokens: usage.totalTokens },
    };
    return { body, reply, usage };
  }

  /** The chat chunks of a streamed answer, as objects (the Anthropic stream is derived from them). */
  private chatChunks(model: string, json: Json): { chunks: Json[]; usage: Usage } {
    const { body, reply, usage } = this.chatResponse(model, json);
    const base = { id: body.id, object: 'chat.completion.chunk', created: body.created, model };
    const choice = (delta: Json, finish: string | null): Json => ({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] });
    const chunks = [choice({ role: 'assistant', content: '' }, null), ...pieces(reply).map((t) => choice({ content: t }, null)), choice({}, 'stop')];
    chunks.push({ ...base, choices: [], usage: body.usage });
    return { chunks, usage };
  }

  private chat(model: string, json: Json, stream: boolean): ProviderResult {
    if (!stream) {
      const { body, usage } = this.chatResponse(model, json);
      return jsonResult(200, body, usage);
    }
    const { chunks, usage } = this.chatChunks(model, json);
    // Like OpenAI: the usage-only chunk is sent only when the client asked for it.
    const includeUsage = obj(json.stream_options)?.include_usage === true;
    const events = (includeUsage ? chunks : chunks.slice(0, -1)).map((c) => formatSse(JSON.stringify(c)));
    events.push('data: [DONE]\n\n');
    return { status: 200, headers: { ...SSE_HEADERS }, body: sseStream(events), usage: () => usage };
  }

  private messages(model: string, json: Json, stream: boolean): ProviderResult {
    if (!stream) {
      const { body, usage } = this.chatResponse(model, json);
      return jsonResult(200, { ...chatToMessagesResponse(body), id: this.nextId('msg') }, usage);
    }
    const { chunks, usage } = this.chatChunks(model, json);
    const translator = new ChatToMessagesStream({ model });
    const events = chunks.map((c) => translator.push(c)).filter((s) => s.length > 0);
    events.push(translator.finish());
    return { status: 200, headers: { ...SSE_HEADERS }, body: sseStream(events), usage: () => usage };
  }

  private responses(model: string, json: Json, stream: boolean): ProviderResult {
    const p = promptOf(json);
    const reply = p.last || FALLBACK_REPLY;
    const usage = usageOf(p.all, reply);
    const id = this.nextId('resp');
    const msgId = this.nextId('msg');
    const created = nowSeconds();
    const output = [{ type: 'message', id: msgId, status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: reply, annotations: [] }] }];
    const u = { input_tokens: usage.promptTokens, output_tokens: usage.completionTokens, total_tokens: usage.totalTokens };
    const done: Json = { id, object: 'response', created_at: created, status: 'completed', model, output, usage: u };
    if (!stream) return jsonResult(200, done, usage);
    let seq = 0;
    const ev = (type: string, data: Json): string => formatSse(JSON.stringify({ type, sequence_number: seq++, ...data }), type);
    const events = [ev('response.created', { response: { ...done, status: 'in_progress', output: [], usage: null } })];
    for (const t of pieces(reply)) events.push(ev('response.output_text.delta', { item_id: msgId, output_index: 0, content_index: 0, delta: t }));
    events.push(ev('response.output_text.done', { item_id: msgId, output_index: 0, content_index: 0, text: reply }));
    events.push(ev('response.completed', { response: done }));
    return { status: 200, headers: { ...SSE_HEADERS }, body: sseStream(events), usage: () => usage };
  }

  private embeddings(model: string, json: Json): ProviderResult {
    const raw = json.input;
    const inputs: string[] = typeof raw === 'string' ? [raw]
      : Array.isArray(raw) && raw.every((x) => typeof x === 'number') ? [raw.join(' ')]
      : arr(raw).map((x) => (typeof x === 'string' ? x : Array.isArray(x) ? x.join(' ') : ''));
    const dims = typeof json.dimensions === 'number' && json.dimensions > 0 && json.dimensions <= 4096 ? Math.floor(json.dimensions) : MOCK_EMBEDDING_DIMENSIONS;
    const base64 = json.encoding_format === 'base64';
    const data = inputs.map((text, index) => {
      const v = mockEmbedding(text, dims);
      const embedding = base64 ? Buffer.from(new Float32Array(v).buffer).toString('base64') : v;
      return { object: 'embedding', index, embedding };
    });
    const prompt = inputs.reduce((n, t) => n + Math.max(1, estimateTokens(t)), 0);
    const usage: Usage = { promptTokens: prompt, completionTokens: 0, totalTokens: prompt };
    return jsonResult(200, { object: 'list', data, model, usage: { prompt_tokens: prompt, total_tokens: prompt } }, usage);
  }
}
