/**
 * The usage of a streamed answer that ended before its provider reported it (the client left,
 * the upstream broke, the gateway shut down), or whose provider never reports it: estimated by
 * the gateway so that token windows and budgets still count the request. Prompt tokens are
 * counted from the request (its texts, tool definitions and a small per-message overhead);
 * completion tokens from the content the gateway already relayed to the client. Whatever the
 * provider did report (Anthropic sends the prompt tokens first) is kept where it is larger. The
 * usage record of such a request is marked `estimated`.
 *
 * The counts come from countTokens (src/tokens/count.ts): exact tokenizers for OpenAI models, an
 * approximation for others. Images, audio and files in a request are not counted.
 */
import { SseParser, parseEventJson, type SseEvent } from '../providers/sse.ts';
import type { Usage } from '../providers/types.ts';
import { isRecord } from '../shared/json.ts';
import { sumCounts } from '../shared/values.ts';
import { countTokens } from './count.ts';

/** OpenAI's chat format: every message is wrapped in a few tokens, and the reply is primed with a few more. */
const TOKENS_PER_MESSAGE = 3;
const REPLY_PRIMING = 3;

/** Request fields that are not shown to the model (or are counted by the per-message overhead). */
const NOT_PROMPT = new Set([
  'model', 'stream', 'stream_options', 'user', 'metadata', 'store', 'service_tier', 'modalities', 'tool_choice',
  'parallel_tool_calls', 'reasoning', 'reasoning_effort', 'include', 'previous_response_id', 'background', 'truncation',
  'prompt_cache_key', 'safety_identifier', 'seed', 'stop', 'logit_bias', 'voice', 'encoding_format', 'dimensions',
]);
/** Top-level fields the model reads as JSON (tool and output schemas): counted as their JSON text. */
const AS_JSON = new Set(['tools', 'functions', 'response_format', 'text']);
/**
 * Keys whose values are not text the model reads as such: identifiers and roles (the per-message
 * overhead stands for them), and media (base64 images or audio would be counted as huge texts).
 */
const NOT_TEXT = new Set([
  'role', 'type', 'id', 'call_id', 'tool_call_id', 'tool_use_id', 'cache_control', 'image_url', 'input_audio', 'audio',
  'image', 'file', 'file_data', 'file_id', 'file_url', 'source', 'url', 'data', 'detail', 'format', 'mime_type', 'media_type',
]);

/** The texts of a request's prompt, and how many messages (or input items) carry them. */
export function promptParts(body: unknown): { texts: string[]; messages: number } {
  const texts: string[] = [];
  let messages = 0;
  if (!isRecord(body)) return { texts, messages };
  for (const [key, value] of Object.entries(body)) {
    if (NOT_PROMPT.has(key) || value === null || value === undefined) continue;
    if (AS_JSON.has(key) && typeof value === 'object') {
      texts.push(JSON.stringify(value));
      continue;
    }
    // Chat messages, Responses input items (an embeddings input of plain strings has no messages).
    if ((key === 'messages' || key === 'input') && Array.isArray(value)) messages += value.filter(isRecord).length;
    collectTexts(value, texts);
  }
  return { texts, messages };
}

function collectTexts(value: unknown, into: string[], depth = 0): void {
  // A prompt nests a few levels (messages, parts, tool results); the body was bounded before.
  if (depth > 32) return;
  if (typeof value === 'string') {
    into.push(value);
  } else if (Array.isArray(value)) {
    for (const item of value) collectTexts(item, into, depth + 1);
  } else if (isRecord(value)) {
    for (const [key, item] of Object.entries(value)) {
      if (NOT_TEXT.has(key)) continue;
      // Tool-call arguments and tool inputs the model wrote are JSON it reads back.
      if (key === 'input' && isRecord(item)) into.push(JSON.stringify(item));
      else collectTexts(item, into, depth + 1);
    }
  }
}

/** The prompt tokens of a request, as `model`'s tokenizer counts them (see count.ts): at once when its encoding is loaded. */
export function estimatePromptTokens(model: string, body: unknown): number | Promise<number> {
  const { texts, messages } = promptParts(body);
  const tokens = countTokens(model, texts);
  return typeof tokens === 'number' ? withMessageOverhead(tokens, messages) : tokens.then((counted) => withMessageOverhead(counted, messages));
}

function withMessageOverhead(tokens: number, messages: number): number {
  return messages === 0 ? tokens : sumCounts(tokens, messages * TOKENS_PER_MESSAGE, REPLY_PRIMING);
}

/**
 * Bytes of a relayed stream kept as the sample an estimate is counted from; past them the count is
 * extrapolated by size. A sample of a few hundred events gives the rate as well as the whole
 * stream would, and keeps a thousand long answers at once from holding a megabyte each.
 */
const SAMPLE_BYTES = 64 * 1024;

/** How far the sample may grow to hold its first whole event, when that event is larger than the sample. */
const MAX_KEPT_BYTES = 1024 * 1024;

/** The first room taken for a relayed stream's bytes; it doubles as they come, up to the sample's size. */
const FIRST_ROOM = 1024;

/**
 * The first bytes of a streamed answer as they were relayed to the client (the sample), kept until
 * the stream is over in case its usage report never comes. Keeping a chunk is a copy into one buffer
 * of the stream's own (not a reference to the chunk: a long stream would otherwise hold an object
 * per event for its whole length); nothing is parsed unless an estimate is asked for.
 */
export class RelayedStream {
  #kept: Buffer | undefined;
  #keptBytes = 0;
  #total = 0;
  /** The sample holds at least one whole event (then it stops at SAMPLE_BYTES). */
  #wholeEvent = false;

  add(chunk: Buffer): void {
    this.#total += chunk.length;
    if (!this.#wholeEvent && this.#keptBytes >= SAMPLE_BYTES && this.#keptBytes < MAX_KEPT_BYTES) {
      this.#wholeEvent = wholeEventsEnd(this.#kept!, this.#keptBytes) > 0;
    }
    const room = (this.#wholeEvent ? SAMPLE_BYTES : MAX_KEPT_BYTES) - this.#keptBytes;
    if (room <= 0) return;
    const length = Math.min(chunk.length, room);
    const needed = this.#keptBytes + length;
    if (this.#kept === undefined || this.#kept.length < needed) {
      let size = Math.max(this.#kept?.length ?? 0, FIRST_ROOM);
      while (size < needed) size *= 2;
      const grown = Buffer.allocUnsafe(Math.min(size, needed <= SAMPLE_BYTES ? SAMPLE_BYTES : MAX_KEPT_BYTES));
      this.#kept?.copy(grown, 0, 0, this.#keptBytes);
      this.#kept = grown;
    }
    chunk.copy(this.#kept, this.#keptBytes, 0, length);
    this.#keptBytes = needed;
  }

  /** Bytes relayed so far. */
  get bytes(): number {
    return this.#total;
  }

  /** The completion tokens of the content relayed, as `model`'s tokenizer counts them. */
  async completionTokens(model: string): Promise<number> {
    const parser = new SseParser();
    const texts: string[] = [];
    const cut = this.#total > this.#keptBytes;
    // A sample cut short ends inside an event: it is counted up to its last whole one, and the
    // rate extrapolated from exactly those bytes.
    const sampleEnd = cut && this.#kept !== undefined ? wholeEventsEnd(this.#kept, this.#keptBytes) : this.#keptBytes;
    try {
      if (this.#kept !== undefined) for (const event of parser.push(this.#kept.subarray(0, sampleEnd))) contentOf(event, texts);
      if (!cut) for (const event of parser.end()) contentOf(event, texts);
    } catch {
      // An event past the parser's size limit: the content read before it is what counts.
    }
    const tokens = await countTokens(model, texts);
    // Past the sample, the rest of the stream is assumed to carry content at the same rate.
    return cut && sampleEnd > 0 ? Math.ceil((tokens * this.#total) / sampleEnd) : tokens;
  }
}

/** Where the last whole SSE event in `buffer`'s first `length` bytes ends (after its blank line); 0 when none does. */
function wholeEventsEnd(buffer: Buffer, length: number): number {
  const bytes = buffer.subarray(0, length);
  const lf = bytes.lastIndexOf('\n\n');
  const crlf = bytes.lastIndexOf('\r\n\r\n');
  const cr = bytes.lastIndexOf('\r\r');
  return Math.max(lf < 0 ? 0 : lf + 2, crlf < 0 ? 0 : crlf + 4, cr < 0 ? 0 : cr + 2);
}

/**
 * The content texts of one relayed SSE event, in any dialect the gateway relays: chat chunks
 * (content, refusal, reasoning, tool-call names and arguments, legacy `text`), Responses events
 * (`*.delta` strings; audio deltas are base64 and left out), Anthropic events (`text_delta`,
 * `input_json_delta`, `thinking_delta`).
 */
function contentOf(event: SseEvent, into: string[]): void {
  const o = parseEventJson(event);
  if (o === undefined) return;
  if (Array.isArray(o.choices)) {
    for (const choice of o.choices) {
      if (!isRecord(choice)) continue;
      pushStrings(into, choice.text);
      const delta = choice.delta;
      if (!isRecord(delta)) continue;
      pushStrings(into, delta.content, delta.refusal, delta.reasoning_content, delta.reasoning);
      if (!Array.isArray(delta.tool_calls)) continue;
      for (const call of delta.tool_calls) if (isRecord(call) && isRecord(call.function)) pushStrings(into, call.function.name, call.function.arguments);
    }
    return;
  }
  const delta = o.delta;
  if (typeof delta === 'string') {
    if (!(typeof o.type === 'string' && o.type.includes('audio.delta'))) into.push(delta);
  } else if (isRecord(delta)) {
    pushStrings(into, delta.text, delta.partial_json, delta.thinking);
  }
}

function pushStrings(into: string[], ...values: unknown[]): void {
  for (const value of values) if (typeof value === 'string' && value !== '') into.push(value);
}

export interface StreamEstimate {
  /** The model the request ran on (its tokenizer counts). */
  model: string;
  /** The request body (JSON), or undefined when it had none the gateway could read. */
  request: unknown;
  relayed: RelayedStream;
  /** What the provider reported before the stream ended, if anything. */
  reported: Usage | undefined;
}

/**
 * The usage of a stream that ended without its final report: each count the larger of what the
 * provider reported and the gateway's estimate.
 */
export async function estimateStreamUsage(input: StreamEstimate): Promise<Usage> {
  const { reported } = input;
  const [prompt, completion] = await Promise.all([
    estimatePromptTokens(input.model, input.request),
    input.relayed.completionTokens(input.model),
  ]);
  const promptTokens = Math.max(prompt, reported?.promptTokens ?? 0);
  const completionTokens = Math.max(completion, reported?.completionTokens ?? 0);
  const usage: Usage = { promptTokens, completionTokens, totalTokens: sumCounts(promptTokens, completionTokens) };
  if (reported?.cachedPromptTokens !== undefined) usage.cachedPromptTokens = reported.cachedPromptTokens;
  return usage;
}

export interface StreamCharge {
  /** The model the request ran on. */
  model: string;
  /** The request body (JSON), or undefined. */
  request: unknown;
  /** What the provider reported. */
  reported: Usage | undefined;
  /** The stream as relayed; undefined for an answer whose usage is never estimated. */
  relayed: RelayedStream | undefined;
  /** The stream did not end normally: the client left, the upstream broke, or it was cut. */
  cut: boolean;
}

/**
 * The usage an answer is charged: the provider's report; for a relayed stream that was cut, or
 * whose provider reported nothing, the estimate (`estimated` then true).
 */
export async function chargedUsage(input: StreamCharge): Promise<{ usage: Usage | undefined; estimated: boolean }> {
  const { relayed, reported } = input;
  if (relayed === undefined || (!input.cut && reported !== undefined)) return { usage: reported, estimated: false };
  return { usage: await estimateStreamUsage({ model: input.model, request: input.request, relayed, reported }), estimated: true };
}
