/**
 * OpenAI Responses API ⇄ chat completions, for providers that speak (or are translated from)
 * chat: the request down to a chat request, the chat answer back up to a Response object, and
 * streamed chat chunks to Responses SSE events. Stateless: nothing is stored, so what needs a
 * stored response (`previous_response_id`, `store: true`, background runs) is refused.
 */
import { randomBytes } from 'node:crypto';
import type { Usage } from '../types.ts';
import { formatSse } from '../sse.ts';
import { normalizeUsage } from '../usage.ts';
import type { ChatChunkSink } from './chat-sse.ts';
import { arr, nowSeconds, num, obj, str } from './json.ts';
import type { Json } from './json.ts';
import type { UnsupportedPolicy } from './unsupported.ts';

// ---------------------------------------------------------------------------
// Responses request -> chat request
// ---------------------------------------------------------------------------

/** Request fields that only identify or label a request: carried where chat has them, never refused. */
const HARMLESS = new Set(['model', 'stream', 'stream_options', 'metadata', 'user', 'safety_identifier', 'prompt_cache_key']);

/** Refused unless dropped: each needs state or a feature the chat dialect does not carry back. */
const NOT_CARRIED: Readonly<Record<string, string>> = {
  previous_response_id: 'the gateway keeps no responses; send the whole conversation as input',
  conversation: 'the gateway keeps no conversations; send the whole conversation as input',
  background: 'background responses need a stored response',
  prompt: 'stored prompt templates are not available through this provider',
  include: 'no extra output can be included',
  top_logprobs: 'log probabilities are not carried back',
  max_tool_calls: 'the number of tool calls cannot be capped',
  context_management: 'not carried by the translation',
};

export function responsesToChatRequest(req: Json, policy: UnsupportedPolicy): Json {
  const out: Json = { model: req.model, messages: inputMessages(req, policy) };
  for (const [key, value] of Object.entries(req)) {
    if (value === undefined || value === null || HARMLESS.has(key)) continue;
    switch (key) {
      case 'input':
      case 'instructions':
        break; // in messages
      case 'temperature':
      case 'top_p':
      case 'parallel_tool_calls':
        out[key] = value;
        break;
      case 'max_output_tokens':
        out.max_completion_tokens = value;
        break;
      case 'tools':
        translateTools(value, out, policy);
        break;
      case 'tool_choice':
        translateToolChoice(value, out, policy);
        break;
      case 'text':
        translateText(value, out, policy);
        break;
      case 'reasoning':
        translateReasoning(value, out, policy);
        break;
      case 'store':
        if (value === true) policy.unsupported('store', 'the gateway keeps no responses');
        break;
      case 'truncation':
        if (value !== 'disabled') policy.unsupported('truncation', 'only "disabled" is supported');
        break;
      case 'service_tier':
        if (value !== 'auto' && value !== 'default') policy.unsupported('service_tier');
        break;
      default:
        if (key === 'include' && Array.isArray(value) && value.length === 0) break;
        if (key === 'background' && value === false) break;
        policy.unsupported(key, NOT_CARRIED[key]);
    }
  }
  if (req.stream === true) {
    out.stream = true;
    out.stream_options = { include_usage: true };
  }
  if (typeof req.user === 'string') out.user = req.user;
  return out;
}

function inputMessages(req: Json, policy: UnsupportedPolicy): Json[] {
  const messages: Json[] = [];
  if (typeof req.instructions === 'string' && req.instructions.length > 0) messages.push({ role: 'system', content: req.instructions });
  else if (Array.isArray(req.instructions)) addItems(req.instructions, 'instructions', messages, policy);
  if (typeof req.input === 'string') messages.push({ role: 'user', content: req.input });
  else addItems(arr(req.input), 'input', messages, policy);
  return messages;
}

function addItems(items: unknown[], where: string, messages: Json[], policy: UnsupportedPolicy): void {
  items.forEach((raw, i) => {
    const item = obj(raw);
    const at = `${where}[${i}]`;
    if (!item) return;
    const type = item.type ?? 'message';
    if (type === 'message') {
      const role = item.role === 'assistant' || item.role === 'system' || item.role === 'developer' ? item.role : 'user';
      messages.push({ role, content: contentParts(item.content, `${at}.content`, role === 'assistant', policy) });
    } else if (type === 'function_call') {
      const call = { id: str(item.call_id) ?? str(item.id) ?? '', type: 'function', function: { name: str(item.name) ?? '', arguments: str(item.arguments) ?? '{}' } };
      // A function call continues the assistant turn just before it (its text, or earlier calls).
      const last = messages[messages.length - 1];
      if (last?.role === 'assistant') last.tool_calls = [...arr(last.tool_calls), call];
      else messages.push({ role: 'assistant', content: null, tool_calls: [call] });
    } else if (type === 'function_call_output') {
      messages.push({ role: 'tool', tool_call_id: str(item.call_id) ?? '', content: outputText(item.output, `${at}.output`, policy) });
    } else if (type === 'reasoning') {
      // A model's own reasoning from an earlier turn: state of another provider, not input.
    } else {
      policy.unsupported(`${at}.type`, `input items of type ${JSON.stringify(type)} are not carried by the translation`);
    }
  });
}

/** An input message's content as chat content: a string stays one, parts become chat parts. */
function contentParts(content: unknown, at: string, assistant: boolean, policy: UnsupportedPolicy): string | Json[] {
  if (typeof content === 'string') return content;
  const parts: Json[] = [];
  arr(content).forEach((raw, j) => {
    const p = obj(raw);
    if (!p) return;
    const here = `${at}[${j}]`;
    switch (p.type) {
      case 'input_text':
      case 'output_text':
      case 'text':
        parts.push({ type: 'text', text: str(p.text) ?? '' });
        break;
      case 'refusal':
        parts.push({ type: 'text', text: str(p.refusal) ?? '' });
        break;
      case 'input_image': {
        const url = str(p.image_url);
        if (url === undefined) {
          policy.unsupported(`${here}.file_id`, 'uploaded files are not available through this provider; send the image as a data URL or an http(s) URL');
          break;
        }
        const image: Json = { url };
        if (typeof p.detail === 'string') image.detail = p.detail;
        parts.push({ type: 'image_url', image_url: image });
        break;
      }
      case 'input_file': {
        const data = str(p.file_data);
        if (data === undefined) {
          policy.unsupported(`${here}.file_id`, 'only files sent inline as file_data are carried');
          break;
        }
        const file: Json = { file_data: data };
        if (typeof p.filename === 'string') file.filename = p.filename;
        parts.push({ type: 'file', file });
        break;
      }
      case 'input_audio':
        parts.push({ type: 'input_audio', input_audio: p.input_audio });
        break;
      default:
        policy.unsupported(`${here}.type`, `content of type ${JSON.stringify(p.type)} is not carried by the translation`);
    }
  });
  // Assistant history is text in chat; a plain string keeps it simple for every provider.
  if (assistant || parts.every((p) => p.type === 'text')) return parts.map((p) => String(p.text ?? '')).join('');
  return parts;
}

function outputText(output: unknown, at: string, policy: UnsupportedPolicy): string {
  if (typeof output === 'string') return output;
  const texts: string[] = [];
  arr(output).forEach((raw, j) => {
    const p = obj(raw);
    if (p?.type === 'input_text' || p?.type === 'output_text') texts.push(str(p.text) ?? '');
    else policy.unsupported(`${at}[${j}].type`, 'only text tool output is carried by the translation');
  });
  return texts.join('');
}

function translateTools(value: unknown, out: Json, policy: UnsupportedPolicy): void {
  const tools: Json[] = [];
  arr(value).forEach((raw, i) => {
    const t = obj(raw);
    if (!t) return;
    if (t.type !== 'function') {
      policy.unsupported(`tools[${i}].type`, `only function tools are carried (got ${JSON.stringify(t.type)})`);
      return;
    }
    const fn: Json = { name: t.name };
    if (t.description !== undefined && t.description !== null) fn.description = t.description;
    if (t.parameters !== undefined && t.parameters !== null) fn.parameters = t.parameters;
    if (typeof t.strict === 'boolean') fn.strict = t.strict;
    tools.push({ type: 'function', function: fn });
  });
  if (tools.length > 0) out.tools = tools;
}

function translateToolChoice(value: unknown, out: Json, policy: UnsupportedPolicy): void {
  if (value === 'auto' || value === 'none' || value === 'required') {
    out.tool_choice = value;
    return;
  }
  const choice = obj(value);
  if (choice?.type === 'function' && typeof choice.name === 'string') {
    out.tool_choice = { type: 'function', function: { name: choice.name } };
    return;
  }
  policy.unsupported('tool_choice', 'only auto, none, required and a function tool are carried');
}

function translateText(value: unknown, out: Json, policy: UnsupportedPolicy): void {
  const text = obj(value);
  if (!text) return;
  const format = obj(text.format);
  if (format?.type === 'json_object') out.response_format = { type: 'json_object' };
  else if (format?.type === 'json_schema') {
    const schema: Json = { name: format.name ?? 'response', schema: format.schema };
    if (format.description !== undefined) schema.description = format.description;
    if (typeof format.strict === 'boolean') schema.strict = format.strict;
    out.response_format = { type: 'json_schema', json_schema: schema };
  } else if (format !== undefined && format.type !== 'text') {
    policy.unsupported('text.format.type', `format ${JSON.stringify(format.type)} is not carried`);
  }
  if (text.verbosity !== undefined && text.verbosity !== null) policy.unsupported('text.verbosity', 'not carried by the translation');
}

function translateReasoning(value: unknown, out: Json, policy: UnsupportedPolicy): void {
  const reasoning = obj(value);
  if (!reasoning) return;
  if (typeof reasoning.effort === 'string') out.reasoning_effort = reasoning.effort;
  const summary = reasoning.summary ?? reasoning.generate_summary;
  if (summary !== undefined && summary !== null) policy.unsupported('reasoning.summary', 'reasoning summaries are not carried back');
}

// ---------------------------------------------------------------------------
// chat completion -> Response object
// ---------------------------------------------------------------------------

const newId = (prefix: string): string => `${prefix}_${randomBytes(12).toString('hex')}`;

/** A chat usage object as Responses usage. */
export function chatUsageToResponses(u: unknown): Json {
  const usage = obj(u);
  const n = normalizeUsage(usage) ?? { promptTokens: 0, completionTokens: 0, totalTokens: 0 };
  return {
    input_tokens: n.promptTokens,
    input_tokens_details: { cached_tokens: n.cachedPromptTokens ?? 0 },
    output_tokens: n.completionTokens,
    output_tokens_details: { reasoning_tokens: num(obj(usage?.completion_tokens_details)?.reasoning_tokens) ?? 0 },
    total_tokens: n.totalTokens,
  };
}

/** Status and incomplete details of a response ending with this chat finish reason. */
function ending(finish: unknown): { status: string; incomplete_details: Json | null } {
  if (finish === 'length') return { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } };
  if (finish === 'content_filter') return { status: 'incomplete', incomplete_details: { reason: 'content_filter' } };
  return { status: 'completed', incomplete_details: null };
}

/** The Response object around `output`, echoing the request's settings as OpenAI does. */
function responseObject(req: Json, fields: { id: string; created: number; model: unknown; status: string; incomplete_details: Json | null; output: Json[]; usage: Json | null }): Json {
  return {
    id: fields.id,
    object: 'response',
    created_at: fields.created,
    status: fields.status,
    error: null,
    incomplete_details: fields.incomplete_details,
    instructions: req.instructions ?? null,
    max_output_tokens: req.max_output_tokens ?? null,
    model: fields.model,
    output: fields.output,
    parallel_tool_calls: req.parallel_tool_calls ?? true,
    previous_response_id: null,
    reasoning: { effort: obj(req.reasoning)?.effort ?? null, summary: null },
    store: false,
    temperature: req.temperature ?? null,
    text: req.text ?? { format: { type: 'text' } },
    tool_choice: req.tool_choice ?? 'auto',
    tools: req.tools ?? [],
    top_p: req.top_p ?? null,
    truncation: 'disabled',
    usage: fields.usage,
    user: req.user ?? null,
    metadata: req.metadata ?? {},
  };
}

function messageItem(id: string, text: string, status: string, refusal?: string): Json {
  const content: Json[] = [];
  if (text.length > 0 || refusal === undefined) content.push({ type: 'output_text', text, annotations: [], logprobs: [] });
  if (refusal !== undefined) content.push({ type: 'refusal', refusal });
  return { id, type: 'message', status, role: 'assistant', content };
}

function functionCallItem(id: string, call: { callId: string; name: string; arguments: string }, status: string): Json {
  return { id, type: 'function_call', status, call_id: call.callId, name: call.name, arguments: call.arguments };
}

/** A chat completion (first choice) as a Response object answering `req`. */
export function chatToResponsesResponse(chat: Json, req: Json, created = nowSeconds()): Json {
  const choice = obj(arr(chat.choices)[0]);
  const message = obj(choice?.message);
  const output: Json[] = [];
  const text = typeof message?.content === 'string' ? message.content : arr(message?.content).map((p) => str(obj(p)?.text) ?? '').join('');
  const refusal = str(message?.refusal);
  const calls = arr(message?.tool_calls).map(obj).filter((c): c is Json => c !== undefined);
  if (text.length > 0 || refusal !== undefined || calls.length === 0) output.push(messageItem(newId('msg'), text, 'completed', refusal));
  for (const c of calls) {
    const fn = obj(c.function);
    output.push(functionCallItem(newId('fc'), { callId: str(c.id) ?? '', name: str(fn?.name) ?? '', arguments: str(fn?.arguments) ?? '' }, 'completed'));
  }
  return responseObject(req, { id: newId('resp'), created, model: chat.model, ...ending(choice?.finish_reason), output, usage: chatUsageToResponses(chat.usage) });
}

// ---------------------------------------------------------------------------
// chat completion chunks -> Responses SSE events
// ---------------------------------------------------------------------------

interface OpenItem {
  kind: 'message' | 'function_call';
  id: string;
  outputIndex: number;
  text: string;
  callId: string;
  name: string;
  done: boolean;
}

/**
 * Streamed chat chunks -> Responses events: `response.created`, `response.in_progress`, then per
 * output item `response.output_item.added`, its deltas (`response.output_text.delta`,
 * `response.function_call_arguments.delta`) and its `.done` events, and at the end
 * `response.completed` (or `response.incomplete`) carrying the whole response with its usage.
 */
export class ChatToResponsesStream implements ChatChunkSink {
  private readonly req: Json;
  private readonly id = newId('resp');
  private readonly created: number;
  private model: unknown;
  private started = false;
  private finished = false;
  private sequence = 0;
  private readonly items: OpenItem[] = [];
  private current: OpenItem | undefined;
  private readonly toolItems = new Map<number, OpenItem>();
  private finishReason: unknown;
  private usageSeen: Json | undefined;

  constructor(opts: { model: string; request: Json; created?: number }) {
    this.model = opts.model;
    this.req = opts.request;
    this.created = opts.created ?? nowSeconds();
  }

  /** True once a finish reason was seen: the answer is complete. */
  get complete(): boolean {
    return this.finishReason !== undefined;
  }

  usage(): Usage | undefined {
    return normalizeUsage(this.usageSeen);
  }

  push(chunk: Json): string {
    const error = obj(chunk.error);
    if (error) {
      return this.event('error', { code: str(error.code) ?? str(error.type) ?? null, message: str(error.message) ?? 'upstream error', param: null });
    }
    let out = this.started ? '' : this.start(chunk);
    const usage = obj(chunk.usage);
    if (usage) this.usageSeen = usage;
    const choice = obj(arr(chunk.choices)[0]);
    if (!choice) return out;
    const delta = obj(choice.delta);
    const text = str(delta?.content);
    if (text) {
      if (this.current?.kind !== 'message') out += this.open('message', '', '');
      const item = this.current!;
      item.text += text;
      out += this.event('response.output_text.delta', { item_id: item.id, output_index: item.outputIndex, content_index: 0, delta: text, logprobs: [] });
    }
    for (const raw of arr(delta?.tool_calls)) {
      const tc = obj(raw);
      if (!tc) continue;
      const index = num(tc.index) ?? 0;
      const fn = obj(tc.function);
      let item = this.toolItems.get(index);
      if (item === undefined) {
        out += this.open('function_call', str(tc.id) ?? newId('call'), str(fn?.name) ?? '');
        item = this.current!;
        this.toolItems.set(index, item);
      }
      const args = str(fn?.arguments);
      if (args) {
        item.text += args;
        out += this.event('response.function_call_arguments.delta', { item_id: item.id, output_index: item.outputIndex, delta: args });
      }
    }
    if (choice.finish_reason !== undefined && choice.finish_reason !== null) this.finishReason = choice.finish_reason;
    return out;
  }

  /** Closes every item and sends `response.completed` (or `response.incomplete`); idempotent. */
  finish(): string {
    if (this.finished) return '';
    this.finished = true;
    let out = this.started ? '' : this.start({});
    for (const item of this.items) out += this.close(item);
    const end = ending(this.finishReason);
    const response = this.response(end.status, end.incomplete_details, chatUsageToResponses(this.usageSeen));
    return out + this.event(end.status === 'completed' ? 'response.completed' : 'response.incomplete', { response });
  }

  private start(chunk: Json): string {
    this.started = true;
    this.model = str(chunk.model) ?? this.model;
    const response = this.response('in_progress', null, null);
    return this.event('response.created', { response }) + this.event('response.in_progress', { response });
  }

  private response(status: string, incomplete: Json | null, usage: Json | null): Json {
    const output = this.items.map((item) => this.itemJson(item));
    return responseObject(this.req, { id: this.id, created: this.created, model: this.model, status, incomplete_details: incomplete, output, usage });
  }

  private itemJson(item: OpenItem): Json {
    const status = item.done ? 'completed' : 'in_progress';
    if (item.kind === 'message') return messageItem(item.id, item.text, status);
    return functionCallItem(item.id, { callId: item.callId, name: item.name, arguments: item.text }, status);
  }

  private open(kind: OpenItem['kind'], callId: string, name: string): string {
    let out = this.current ? this.close(this.current) : '';
    const item: OpenItem = { kind, id: newId(kind === 'message' ? 'msg' : 'fc'), outputIndex: this.items.length, text: '', callId, name, done: false };
    this.items.push(item);
    this.current = item;
    const added = kind === 'message' ? { ...messageItem(item.id, '', 'in_progress'), content: [] } : this.itemJson(item);
    out += this.event('response.output_item.added', { output_index: item.outputIndex, item: added });
    if (kind === 'message') {
      out += this.event('response.content_part.added', { item_id: item.id, output_index: item.outputIndex, content_index: 0, part: { type: 'output_text', text: '', annotations: [], logprobs: [] } });
    }
    return out;
  }

  private close(item: OpenItem): string {
    if (item.done) return '';
    item.done = true;
    if (this.current === item) this.current = undefined;
    const at = { item_id: item.id, output_index: item.outputIndex };
    let out = '';
    if (item.kind === 'message') {
      out += this.event('response.output_text.done', { ...at, content_index: 0, text: item.text, logprobs: [] });
      out += this.event('response.content_part.done', { ...at, content_index: 0, part: { type: 'output_text', text: item.text, annotations: [], logprobs: [] } });
    } else {
      out += this.event('response.function_call_arguments.done', { ...at, name: item.name, arguments: item.text });
    }
    return out + this.event('response.output_item.done', { output_index: item.outputIndex, item: this.itemJson(item) });
  }

  private event(type: string, data: Json): string {
    return formatSse(JSON.stringify({ type, sequence_number: this.sequence++, ...data }), type);
  }
}
