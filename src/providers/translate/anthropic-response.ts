import { normalizeUsage } from '../usage.ts';
import { arr, nowSeconds, num, obj, parseJsonObject, str } from './json.ts';
import { isRecord } from '../../shared/json.ts';
import type { Json } from './json.ts';

export function anthropicStopToFinish(stop: unknown): string {
  switch (stop) {
    case 'max_tokens': return 'length';
    case 'tool_use': return 'tool_calls';
    case 'refusal': return 'content_filter';
    default: return 'stop'; // end_turn, stop_sequence, pause_turn
  }
}

export function finishToAnthropicStop(finish: unknown): string {
  switch (finish) {
    case 'length': return 'max_tokens';
    case 'tool_calls':
    case 'function_call': return 'tool_use';
    case 'content_filter': return 'refusal';
    default: return 'end_turn';
  }
}

/** Anthropic usage -> OpenAI chat usage (cache tokens count as prompt tokens). */
export function anthropicUsageToChat(u: unknown): Json {
  const n = normalizeUsage(u) ?? { promptTokens: 0, completionTokens: 0, totalTokens: 0 };
  return { prompt_tokens: n.promptTokens, completion_tokens: n.completionTokens, total_tokens: n.totalTokens };
}

/** Anthropic Messages response -> OpenAI chat completion. */
export function messagesToChatResponse(msg: Json, created = nowSeconds()): Json {
  let text = '';
  const toolCalls: Json[] = [];
  for (const b of arr(msg.content)) {
    if (!isRecord(b)) continue;
    if (b.type === 'text') text += str(b.text) ?? '';
    else if (b.type === 'tool_use') {
      toolCalls.push({ id: b.id, type: 'function', function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } });
    }
  }
  const message: Json = { role: 'assistant', content: text.length > 0 || toolCalls.length === 0 ? text : null, refusal: null };
  if (toolCalls.length > 0) message.tool_calls = toolCalls;
  return {
    id: msg.id,
    object: 'chat.completion',
    created,
    model: msg.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: anthropicStopToFinish(msg.stop_reason) }],
    usage: anthropicUsageToChat(msg.usage),
  };
}

/** OpenAI chat completion -> Anthropic Messages response. */
export function chatToMessagesResponse(chat: Json): Json {
  const choice = obj(arr(chat.choices)[0]);
  const message = obj(choice?.message);
  const content: Json[] = [];
  const text = typeof message?.content === 'string'
    ? message.content
    : arr(message?.content).map((p) => str(obj(p)?.text) ?? '').join('');
  if (text.length > 0) content.push({ type: 'text', text });
  for (const tc of arr(message?.tool_calls)) {
    const fn = obj(obj(tc)?.function);
    if (!fn) continue;
    content.push({ type: 'tool_use', id: str(obj(tc)?.id) ?? '', name: str(fn.name) ?? '', input: parseJsonObject(str(fn.arguments) ?? '') ?? {} });
  }
  const usage = obj(chat.usage);
  return {
    id: chat.id,
    type: 'message',
    role: 'assistant',
    model: chat.model,
    content,
    stop_reason: finishToAnthropicStop(choice?.finish_reason),
    stop_sequence: null,
    usage: { input_tokens: num(usage?.prompt_tokens) ?? 0, output_tokens: num(usage?.completion_tokens) ?? 0 },
  };
}

// ---------------------------------------------------------------------------
// Error bodies. The HTTP layer re-wraps upstream errors anyway; translating them keeps a
// translated endpoint's answers in its own dialect for callers that use results directly.
// ---------------------------------------------------------------------------

const ANTHROPIC_ERROR_TYPES = new Set([
  'invalid_request_error', 'authentication_error', 'permission_error', 'not_found_error',
  'request_too_large', 'rate_limit_error', 'api_error', 'overloaded_error',
]);

function anthropicErrorTypeForStatus(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 413) return 'request_too_large';
  if (status === 429) return 'rate_limit_error';
  if (status === 529) return 'overloaded_error';
  if (status >= 500) return 'api_error';
  return 'invalid_request_error';
}

function errorMessage(body: Buffer): { message: string; type?: string; code?: unknown; param?: unknown } {
  const text = body.toString('utf8');
  const parsed = parseJsonObject(text);
  const err = obj(parsed?.error);
  if (err) return { message: str(err.message) ?? text, type: str(err.type), code: err.code, param: err.param };
  return { message: text.length > 0 ? text : 'upstream error' };
}

/** Anthropic (or any) error body -> OpenAI `{error:{message,type,param,code}}`. */
export function errorToOpenAI(body: Buffer, status: number): Buffer {
  const e = errorMessage(body);
  return Buffer.from(JSON.stringify({
    error: { message: e.message, type: e.type ?? (status >= 500 ? 'api_error' : 'invalid_request_error'), param: e.param ?? null, code: e.code ?? null },
  }));
}

/** OpenAI (or any) error body -> Anthropic `{type:'error',error:{type,message}}`. */
export function errorToAnthropic(body: Buffer, status: number): Buffer {
  const e = errorMessage(body);
  const type = e.type && ANTHROPIC_ERROR_TYPES.has(e.type) ? e.type : anthropicErrorTypeForStatus(status);
  return Buffer.from(JSON.stringify({ type: 'error', error: { type, message: e.message } }));
}
