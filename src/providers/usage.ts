import { sumCounts, tokenCount as num } from '../shared/values.ts';
import type { Usage } from './types.ts';

/** `details.cached_tokens` of an OpenAI usage object (`prompt_tokens_details`, `input_tokens_details`). */
function cachedOf(details: unknown): number | undefined {
  return details !== null && typeof details === 'object' ? num((details as Record<string, unknown>).cached_tokens) : undefined;
}

/** Sets `cachedPromptTokens` only when the provider reported it. */
function withCached(usage: Usage, cached: number | undefined): Usage {
  if (cached !== undefined) usage.cachedPromptTokens = cached;
  return usage;
}

/**
 * Normalises any usage object the supported dialects produce:
 * chat/embeddings (`prompt_tokens`, `completion_tokens`, `total_tokens`),
 * Responses and Anthropic (`input_tokens`, `output_tokens`, optional `total_tokens`).
 * Anthropic's cache read/creation tokens are not part of `input_tokens`, but they are
 * tokens the request consumed, so they are counted as prompt tokens. Cached prompt tokens (priced
 * lower) come from OpenAI's `*_tokens_details.cached_tokens` and Anthropic's `cache_read_input_tokens`.
 * Every count is a whole number from 0 to MAX_TOKEN_COUNT (see tokenCount), whatever was reported.
 */
export function normalizeUsage(u: unknown): Usage | undefined {
  if (u === null || typeof u !== 'object') return undefined;
  const o = u as Record<string, unknown>;
  // The chat shape, even when one of its counts is not a number (the other still counts).
  if (o.prompt_tokens !== undefined || o.completion_tokens !== undefined) {
    const prompt = num(o.prompt_tokens) ?? 0;
    const completion = num(o.completion_tokens) ?? 0;
    const usage = { promptTokens: prompt, completionTokens: completion, totalTokens: num(o.total_tokens) ?? sumCounts(prompt, completion) };
    return withCached(usage, cachedOf(o.prompt_tokens_details));
  }
  const input = num(o.input_tokens);
  const output = num(o.output_tokens);
  if (input === undefined && output === undefined) {
    const total = num(o.total_tokens);
    return total === undefined ? undefined : { promptTokens: total, completionTokens: 0, totalTokens: total };
  }
  const cacheRead = num(o.cache_read_input_tokens);
  const promptTokens = sumCounts(input ?? 0, num(o.cache_creation_input_tokens) ?? 0, cacheRead ?? 0);
  const completionTokens = output ?? 0;
  const usage = { promptTokens, completionTokens, totalTokens: num(o.total_tokens) ?? sumCounts(promptTokens, completionTokens) };
  return withCached(usage, cacheRead ?? cachedOf(o.input_tokens_details));
}

/** Usage of a whole JSON response body (chat, responses, embeddings, messages, transcriptions). */
export function usageFromBody(body: unknown): Usage | undefined {
  if (body === null || typeof body !== 'object') return undefined;
  const o = body as Record<string, unknown>;
  if (o.usage !== undefined) return normalizeUsage(o.usage);
  // Responses API events and bodies nest the response object.
  const r = o.response;
  if (r !== null && typeof r === 'object') return normalizeUsage((r as Record<string, unknown>).usage);
  return undefined;
}

const USAGE_KEY = Buffer.from('"usage"');
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * The usage of a buffered JSON body (chat, responses, embeddings, messages, transcriptions);
 * undefined for non-JSON or usage-less bodies.
 *
 * Parsing a whole answer only to read its usage costs more than anything else the gateway does
 * with it, and grows with the answer. Every supported dialect puts `usage` last or near the end,
 * and inside JSON strings quotes are escaped, so a raw `"usage"` is a key: the object after the
 * last one is sliced out and parsed alone. Anything unexpected falls back to the full parse.
 */
export function usageFromJsonBuffer(buf: Buffer): Usage | undefined {
  if (buf.length === 0) return undefined;
  const key = buf.lastIndexOf(USAGE_KEY);
  if (key < 0) return undefined;
  const usage = usageAtKey(buf.toString('latin1', key), 0, buf.length - key);
  if (usage !== undefined) return usage;
  try {
    return usageFromBody(JSON.parse(buf.toString('utf8')));
  } catch {
    return undefined;
  }
}

const MODEL_KEY = Buffer.from('"model"');
/** Bytes after a `"model"` key searched for its value: a model id is short. */
const MAX_MODEL_SLICE = 1024;

/**
 * The `model` a buffered JSON answer names (the first `"model"` key with a string value), read
 * without parsing the whole answer; undefined when there is none. A raw `"model"` is a key or the
 * string value "model" (quotes inside strings are escaped): only a key is followed by a colon.
 */
export function modelFromJsonBuffer(buf: Buffer): string | undefined {
  for (let key = buf.indexOf(MODEL_KEY); key >= 0; key = buf.indexOf(MODEL_KEY, key + 1)) {
    const from = key + MODEL_KEY.length;
    const text = buf.toString('latin1', from, Math.min(buf.length, from + MAX_MODEL_SLICE));
    const start = valueAfterKey(text, 0, text.length);
    if (start < 0) continue;
    if (text.charCodeAt(start) !== QUOTE) return undefined;
    const end = stringEnd(text, start);
    if (end < 0) return undefined;
    try {
      // latin1 offsets are byte offsets: the string's bytes are decoded as the UTF-8 they are.
      const model: unknown = JSON.parse(buf.toString('utf8', from + start, from + end));
      return typeof model === 'string' && model !== '' ? model : undefined;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** The offset just past the JSON string whose opening quote is at `start`, or -1. */
function stringEnd(text: string, start: number): number {
  for (let i = start + 1; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === BACKSLASH) i++;
    else if (c === QUOTE) return i + 1;
  }
  return -1;
}

/**
 * The usage object whose `"usage"` key starts at `key` in `text`, parsed alone; undefined when
 * the value is not an object with token counts or does not end before `end`. `text` is the
 * bytes decoded as latin1, one character a byte, so offsets are byte offsets; a usage object's
 * numbers read the same in any decoding.
 */
function usageAtKey(text: string, key: number, end: number): Usage | undefined {
  const start = objectStartAfter(text, key + USAGE_KEY.length, end);
  if (start < 0) return undefined;
  // A usage object is flat (token counts, a few nested details at most): when no `{` comes before
  // the first `}`, that `}` ends it unless it sits inside a string, and then the slice does not
  // parse. Two searches instead of a walk over every character; the walk is the fallback.
  const close = text.indexOf('}', start + 1);
  if (close < 0 || close >= end) return undefined;
  const nested = text.indexOf('{', start + 1);
  if (nested < 0 || nested > close) {
    const usage = parseUsage(text.slice(start, close + 1));
    if (usage !== undefined) return usage;
  }
  const object = objectEnd(text, start, end);
  return object < 0 ? undefined : parseUsage(text.slice(start, object));
}

function parseUsage(json: string): Usage | undefined {
  try {
    return normalizeUsage(JSON.parse(json));
  } catch {
    return undefined;
  }
}

/** Where the `{` of the value after a key ending at `from` is, or -1 when the value is not an object. */
function objectStartAfter(text: string, from: number, end: number): number {
  const value = valueAfterKey(text, from, end);
  return value >= 0 && text.charCodeAt(value) === OPEN_BRACE ? value : -1;
}

/** Where the value after a key ending at `from` starts (past the colon and spaces), or -1 without a colon. */
function valueAfterKey(text: string, from: number, end: number): number {
  const colon = skipSpaces(text, from, end);
  if (text.charCodeAt(colon) !== 0x3a) return -1; // ':'
  return skipSpaces(text, colon + 1, end);
}

/** The first offset at or after `from` (and before `end`) that is not JSON whitespace. */
function skipSpaces(text: string, from: number, end: number): number {
  let i = from;
  while (i < end && isSpace(text.charCodeAt(i))) i++;
  return i;
}

/** The offset just past the object whose `{` is at `start`, or -1 when it does not end before `end`. */
function objectEnd(text: string, start: number, end: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) {
      inString = true;
    } else if (c === OPEN_BRACE) {
      depth++;
    } else if (c === CLOSE_BRACE && --depth === 0) {
      return i + 1;
    }
  }
  return -1;
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** Rough token estimate for offline use (mock provider): about four characters a token. */
export function estimateTokens(text: string): number {
  return text.length === 0 ? 0 : Math.max(1, Math.ceil(text.length / 4));
}
