/**
 * Gemini `generateContent` answers -> OpenAI chat completions: candidates to choices, finish
 * reasons, usage, and Google's error bodies (with a `RetryInfo` delay as retry-after headers).
 */
import { randomBytes } from 'node:crypto';
import { arr, nowSeconds, num, obj, parseJsonObject, str } from './json.ts';
import type { Json } from './json.ts';
import { toolCallId } from './gemini-request.ts';
import { openaiErrorBody } from './chat-dialect.ts';

const CONTENT_FILTERED = new Set([
  'SAFETY', 'RECITATION', 'BLOCKLIST', 'PROHIBITED_CONTENT', 'SPII', 'IMAGE_SAFETY', 'IMAGE_PROHIBITED_CONTENT', 'IMAGE_RECITATION',
]);

/**
 * A Gemini finish reason as a chat one: MAX_TOKENS -> length, the safety and recitation stops ->
 * content_filter, a stop after function calls -> tool_calls, anything else (STOP, OTHER,
 * MALFORMED_FUNCTION_CALL, LANGUAGE, ...) -> stop.
 */
export function geminiFinishToChat(reason: unknown, calledTools: boolean): string {
  if (reason === 'MAX_TOKENS') return 'length';
  if (typeof reason === 'string' && CONTENT_FILTERED.has(reason)) return 'content_filter';
  return calledTools ? 'tool_calls' : 'stop';
}

/**
 * `usageMetadata` as chat usage. The prompt count includes the cached tokens and the tokens of
 * tool-use prompts; thinking tokens are output the request paid for, so they count as completion
 * tokens (and are reported as reasoning tokens).
 */
export function geminiUsageToChat(meta: unknown): Json | undefined {
  const u = obj(meta);
  if (!u) return undefined;
  const prompt = (num(u.promptTokenCount) ?? 0) + (num(u.toolUsePromptTokenCount) ?? 0);
  const thoughts = num(u.thoughtsTokenCount) ?? 0;
  const completion = (num(u.candidatesTokenCount) ?? 0) + thoughts;
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: num(u.cachedContentTokenCount) ?? 0 },
    completion_tokens_details: { reasoning_tokens: thoughts },
  };
}

export const newCallId = (): string => `call_${randomBytes(12).toString('hex')}`;

/** What one candidate's parts say: its text (thoughts left out) and its function calls as chat tool calls. */
export function readParts(parts: unknown): { text: string; calls: Json[] } {
  let text = '';
  const calls: Json[] = [];
  for (const raw of arr(parts)) {
    const p = obj(raw);
    if (!p || p.thought === true) continue;
    if (typeof p.text === 'string') text += p.text;
    const fc = obj(p.functionCall);
    if (fc) {
      const id = toolCallId(str(fc.id) ?? newCallId(), str(p.thoughtSignature));
      calls.push({ id, type: 'function', function: { name: str(fc.name) ?? '', arguments: JSON.stringify(fc.args ?? {}) } });
    }
  }
  return { text, calls };
}

export function chatIdOf(res: Json): string {
  return `chatcmpl-${str(res.responseId) ?? randomBytes(12).toString('hex')}`;
}

/** A whole `generateContent` answer as a chat completion. */
export function generateContentToChat(res: Json, model: string, created = nowSeconds()): Json {
  const candidates = arr(res.candidates).map(obj).filter((c): c is Json => c !== undefined);
  const choices = candidates.map((c, i) => {
    const { text, calls } = readParts(obj(c.content)?.parts);
    const message: Json = { role: 'assistant', content: text.length > 0 || calls.length === 0 ? text : null, refusal: null };
    if (calls.length > 0) message.tool_calls = calls;
    return { index: num(c.index) ?? i, message, logprobs: null, finish_reason: geminiFinishToChat(c.finishReason, calls.length > 0) };
  });
  // A prompt blocked before any candidate was made.
  if (choices.length === 0) {
    choices.push({ index: 0, message: { role: 'assistant', content: '', refusal: null }, logprobs: null, finish_reason: 'content_filter' });
  }
  const out: Json = { id: chatIdOf(res), object: 'chat.completion', created, model: str(res.modelVersion) ?? model, choices };
  const usage = geminiUsageToChat(res.usageMetadata);
  if (usage) out.usage = usage;
  return out;
}

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/** A protobuf Duration in its JSON form (`"30s"`, `"0.250s"`) in milliseconds. */
function durationMs(value: unknown): number | undefined {
  const m = typeof value === 'string' ? /^(\d+(?:\.\d+)?)s$/.exec(value.trim()) : null;
  return m ? Math.ceil(Number(m[1]) * 1000) : undefined;
}

/**
 * A Google error answer (`{"error": {"code", "message", "status", "details"}}`) in the OpenAI
 * shape, with its Google status (`RESOURCE_EXHAUSTED`, `INVALID_ARGUMENT`, ...) as the code. The
 * `retryDelay` of a `google.rpc.RetryInfo` detail becomes `retry-after` (seconds, rounded up) and
 * `retry-after-ms` headers, the form every client and the learned provider capacity read.
 */
export function googleErrorToOpenAI(body: Buffer, status: number): { body: Buffer; headers: Record<string, string> } {
  const text = body.toString('utf8');
  const err = obj(parseJsonObject(text)?.error);
  const headers: Record<string, string> = {};
  for (const d of arr(err?.details)) {
    const detail = obj(d);
    if (!str(detail?.['@type'])?.endsWith('google.rpc.RetryInfo')) continue;
    const ms = durationMs(detail?.retryDelay);
    if (ms !== undefined) {
      headers['retry-after'] = String(Math.ceil(ms / 1000));
      headers['retry-after-ms'] = String(ms);
    }
  }
  const message = str(err?.message) ?? (text.trim().length > 0 ? text.trim().slice(0, 2000) : `upstream returned HTTP ${status}`);
  return { body: openaiErrorBody(status, message, str(err?.status) ?? null), headers };
}
