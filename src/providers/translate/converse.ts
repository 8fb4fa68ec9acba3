/**
 * OpenAI chat completions ⇄ Amazon Bedrock Converse: the request (system prompts, turns, tools
 * and tool results, images, JSON mode, sampling and stop parameters), the answer, finish reasons,
 * usage, and the stream events of `converse-stream` as chat chunks. Pure functions over the
 * shapes of the AWS SDK's Converse commands; the bedrock provider does the calling.
 */
import type {
  ContentBlock, ConverseRequest, ConverseResponse, ConverseStreamOutput, ImageFormat, Message, SystemContentBlock, Tool,
  ToolChoice, TokenUsage, ToolUseBlock,
} from '@aws-sdk/client-bedrock-runtime';
import type { Usage } from '../types.ts';
import { UnsupportedParameterError } from '../types.ts';
import { arr, nowSeconds, num, obj, parseJsonObject, str } from './json.ts';
import type { Json } from './json.ts';
import type { UnsupportedPolicy } from './unsupported.ts';

/** A JSON value as the SDK types it (tool inputs and schemas). */
type Document = NonNullable<ToolUseBlock['input']>;

/** The Converse request of a chat request, without the model id (the caller adds it). */
export type ConverseInput = Omit<ConverseRequest, 'modelId'>;

const IMAGE_FORMATS: Readonly<Record<string, ImageFormat>> = {
  'image/png': 'png', 'image/jpeg': 'jpeg', 'image/jpg': 'jpeg', 'image/gif': 'gif', 'image/webp': 'webp',
};

/**
 * Chat parameters the translation carries, and those it leaves out because their value asks for
 * nothing beyond the default (`n: 1`, `logprobs: false`, ...). Anything else, or another value,
 * is unsupported.
 */
const CARRIED = new Set([
  'model', 'messages', 'stream', 'stream_options', 'max_tokens', 'max_completion_tokens', 'temperature', 'top_p', 'stop',
  'tools', 'tool_choice', 'response_format', 'user', 'service_tier',
]);
const NEUTRAL: Readonly<Record<string, (v: unknown) => boolean>> = {
  n: (v) => v === 1,
  logprobs: (v) => v === false,
  presence_penalty: (v) => v === 0,
  frequency_penalty: (v) => v === 0,
  parallel_tool_calls: (v) => v === true,
  store: (v) => v === false,
  logit_bias: (v) => obj(v) !== undefined && Object.keys(v as Json).length === 0,
  modalities: (v) => Array.isArray(v) && v.every((m) => m === 'text'),
};
const WHY: Readonly<Record<string, string>> = {
  parallel_tool_calls: 'Converse cannot forbid parallel tool calls',
  n: 'Converse returns one choice',
  logprobs: 'Converse returns no log probabilities',
  top_logprobs: 'Converse returns no log probabilities',
  seed: 'Converse has no seed',
};

/** OpenAI chat completions request → Converse request; unsupported parameters go to `policy`. */
export function chatToConverse(chat: Json, policy: UnsupportedPolicy): ConverseInput {
  for (const [key, value] of Object.entries(chat)) {
    if (value === undefined || value === null || CARRIED.has(key)) continue;
    if (NEUTRAL[key]?.(value) === true) continue;
    policy.unsupported(key, WHY[key]);
  }
  const system: SystemContentBlock[] = [];
  const messages: Message[] = [];
  arr(chat.messages).forEach((m, i) => {
    const message = obj(m);
    if (!message) return;
    const role = message.role;
    if (role === 'system' || role === 'developer') {
      const text = textOf(message.content);
      if (text) system.push({ text });
    } else if (role === 'user') {
      pushTurn(messages, 'user', userContent(message.content, `messages[${i}].content`, policy));
    } else if (role === 'assistant') {
      const content: ContentBlock[] = [];
      const text = textOf(message.content);
      if (text) content.push({ text });
      for (const tc of arr(message.tool_calls)) {
        const fn = obj(obj(tc)?.function);
        if (!fn) continue;
        content.push({ toolUse: { toolUseId: str(obj(tc)?.id) ?? '', name: str(fn.name) ?? '', input: toolInput(fn.arguments) } });
      }
      // Converse refuses an empty turn; it carries nothing anyway.
      if (content.length > 0) pushTurn(messages, 'assistant', content);
    } else if (role === 'tool') {
      pushTurn(messages, 'user', [{ toolResult: { toolUseId: str(message.tool_call_id) ?? '', content: [{ text: textOf(message.content) }] } }]);
    }
  });
  const out: ConverseInput = { messages };
  if (system.length > 0) out.system = system;
  const inference: NonNullable<ConverseInput['inferenceConfig']> = {};
  const maxTokens = num(chat.max_completion_tokens) ?? num(chat.max_tokens);
  if (maxTokens !== undefined) inference.maxTokens = maxTokens;
  if (num(chat.temperature) !== undefined) inference.temperature = num(chat.temperature);
  if (num(chat.top_p) !== undefined) inference.topP = num(chat.top_p);
  const stop = typeof chat.stop === 'string' ? [chat.stop] : arr(chat.stop).filter((s): s is string => typeof s === 'string');
  if (stop.length > 0) inference.stopSequences = stop;
  if (Object.keys(inference).length > 0) out.inferenceConfig = inference;
  const toolConfig = toolsOf(chat, policy);
  if (toolConfig) out.toolConfig = toolConfig;
  const format = obj(chat.response_format);
  if (format?.type === 'json_schema') {
    const schema = obj(format.json_schema);
    out.outputConfig = { textFormat: { type: 'json_schema', structure: { jsonSchema: {
      schema: JSON.stringify(schema?.schema ?? { type: 'object' }), name: str(schema?.name) ?? 'response', ...(str(schema?.description) ? { description: str(schema?.description) } : {}),
    } } } };
  } else if (format?.type === 'json_object') {
    // JSON mode asks for a JSON object, any object: the schema of every object.
    out.outputConfig = { textFormat: { type: 'json_schema', structure: { jsonSchema: { schema: '{"type":"object"}', name: 'json_object' } } } };
  } else if (format !== undefined && format.type !== 'text') {
    policy.unsupported('response_format', `type ${String(format.type)} has no Converse equivalent`);
  }
  if (typeof chat.user === 'string' && chat.user !== '') out.requestMetadata = { user: chat.user };
  const tier = chat.service_tier;
  if (tier === 'default' || tier === 'flex' || tier === 'priority') out.serviceTier = { type: tier };
  else if (tier !== undefined && tier !== null && tier !== 'auto') policy.unsupported('service_tier', `Converse has no ${String(tier)} tier`);
  return out;
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  return arr(content)
    .map((p) => (obj(p)?.type === 'text' ? (str(obj(p)?.text) ?? '') : ''))
    .filter((s) => s.length > 0)
    .join('\n\n');
}

function userContent(content: unknown, where: string, policy: UnsupportedPolicy): ContentBlock[] {
  if (typeof content === 'string') return [{ text: content }];
  const blocks: ContentBlock[] = [];
  arr(content).forEach((p, j) => {
    const part = obj(p);
    if (!part) return;
    if (part.type === 'text') blocks.push({ text: str(part.text) ?? '' });
    else if (part.type === 'image_url') blocks.push(imageBlock(str(obj(part.image_url)?.url) ?? str(part.image_url) ?? '', `${where}[${j}].image_url`));
    else policy.unsupported(`${where}[${j}]`, `content parts of type ${String(part.type)} are not translated to Converse`);
  });
  return blocks;
}

/** Converse takes an image's bytes, never its address: only data URLs can be sent. */
function imageBlock(url: string, param: string): ContentBlock {
  const m = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  if (!m) {
    throw new UnsupportedParameterError(`${param}: Bedrock takes images as bytes; send the image as a data URL (data:image/png;base64,...), not a link`, param, 'invalid_value');
  }
  const format = IMAGE_FORMATS[m[1]!.toLowerCase()];
  if (format === undefined) throw new UnsupportedParameterError(`${param}: Bedrock takes png, jpeg, gif or webp images, not ${m[1]}`, param, 'invalid_value');
  return { image: { format, source: { bytes: Buffer.from(m[2]!, 'base64') } } };
}

function toolInput(args: unknown): Document {
  if (obj(args)) return args as Document;
  return ((typeof args === 'string' && parseJsonObject(args)) || {}) as Document;
}

/** Converse wants alternating roles; consecutive same-role turns (a user turn after tool results) are merged. */
function pushTurn(out: Message[], role: 'user' | 'assistant', content: ContentBlock[]): void {
  const last = out[out.length - 1];
  if (last && last.role === role) last.content = [...(last.content ?? []), ...content];
  else out.push({ role, content });
}

function toolsOf(chat: Json, policy: UnsupportedPolicy): ConverseInput['toolConfig'] {
  const tools: Tool[] = [];
  for (const t of arr(chat.tools)) {
    const fn = obj(obj(t)?.function);
    if (!fn) continue;
    const spec = { name: str(fn.name) ?? '', inputSchema: { json: (obj(fn.parameters) ?? { type: 'object', properties: {} }) as Document } };
    tools.push({ toolSpec: str(fn.description) ? { ...spec, description: str(fn.description) } : spec });
  }
  if (tools.length === 0) return undefined;
  const choice = chat.tool_choice;
  let toolChoice: ToolChoice | undefined;
  if (choice === 'auto') toolChoice = { auto: {} };
  else if (choice === 'required') toolChoice = { any: {} };
  else if (choice === 'none') policy.unsupported('tool_choice', 'Converse cannot forbid tool use while tools are given ("none")');
  else if (obj(choice)) {
    const name = str(obj(obj(choice)?.function)?.name);
    if (name) toolChoice = { tool: { name } };
  }
  return toolChoice ? { tools, toolChoice } : { tools };
}

// ---------------------------------------------------------------------------
// Answers
// ---------------------------------------------------------------------------

export function converseStopToFinish(stop: unknown): string {
  switch (stop) {
    case 'max_tokens':
    case 'model_context_window_exceeded': return 'length';
    case 'tool_use': return 'tool_calls';
    case 'content_filtered':
    case 'guardrail_intervened': return 'content_filter';
    default: return 'stop'; // end_turn, stop_sequence, malformed_*
  }
}

/**
 * Converse usage → gateway usage. As with Anthropic's, Converse's `inputTokens` leaves out the
 * tokens read from and written to the prompt cache; they were consumed all the same.
 */
export function converseUsage(u: TokenUsage | undefined): Usage | undefined {
  if (!u) return undefined;
  const cacheRead = u.cacheReadInputTokens;
  const promptTokens = (u.inputTokens ?? 0) + (cacheRead ?? 0) + (u.cacheWriteInputTokens ?? 0);
  const completionTokens = u.outputTokens ?? 0;
  const usage: Usage = { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens };
  if (cacheRead !== undefined) usage.cachedPromptTokens = cacheRead;
  return usage;
}

/** Gateway usage → the chat `usage` object. */
export function chatUsage(u: Usage): Json {
  const out: Json = { prompt_tokens: u.promptTokens, completion_tokens: u.completionTokens, total_tokens: u.totalTokens };
  if (u.cachedPromptTokens !== undefined) out.prompt_tokens_details = { cached_tokens: u.cachedPromptTokens };
  return out;
}

/** Converse answer → chat completion. */
export function converseToChat(res: ConverseResponse, opts: { id: string; model: string; created?: number }): Json {
  let text = '';
  const toolCalls: Json[] = [];
  for (const block of res.output?.message?.content ?? []) {
    if (block.text !== undefined) text += block.text;
    else if (block.toolUse !== undefined) {
      toolCalls.push({ id: block.toolUse.toolUseId, type: 'function', function: { name: block.toolUse.name, arguments: JSON.stringify(block.toolUse.input ?? {}) } });
    }
  }
  const message: Json = { role: 'assistant', content: text.length > 0 || toolCalls.length === 0 ? text : null, refusal: null };
  if (toolCalls.length > 0) message.tool_calls = toolCalls;
  const usage = converseUsage(res.usage);
  return {
    id: opts.id,
    object: 'chat.completion',
    created: opts.created ?? nowSeconds(),
    model: opts.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: converseStopToFinish(res.stopReason) }],
    usage: usage ? chatUsage(usage) : null,
  };
}

/**
 * `converse-stream` events → chat completion chunks, event by event; the chunks then go to a
 * `ChatChunkSink` of the client's dialect (chat SSE, Anthropic Messages, Responses). `complete`
 * once the message stopped: the closing chunk (`end()`) is only written then, so a stream broken
 * off upstream stays visibly incomplete. The usage arrives in the last event (`metadata`), after
 * the stop, and goes out in that closing usage-only chunk.
 */
export class ConverseToChatStream {
  private readonly id: string;
  private readonly model: string;
  private readonly created: number;
  /** Converse content block index → the chat tool call index. */
  private readonly toolIndex = new Map<number, number>();
  private stopped = false;
  private seen: Usage | undefined;

  constructor(opts: { id: string; model: string; created?: number }) {
    this.id = opts.id;
    this.model = opts.model;
    this.created = opts.created ?? nowSeconds();
  }

  /** True once the message stopped (a finish reason was sent). */
  get complete(): boolean {
    return this.stopped;
  }

  usage(): Usage | undefined {
    return this.seen;
  }

  /** The chunks of one event (none for events chat has no word for). */
  push(event: ConverseStreamOutput): Json[] {
    if (event.messageStart) return [this.chunk({ role: 'assistant', content: '' }, null)];
    if (event.contentBlockStart) {
      const toolUse = event.contentBlockStart.start?.toolUse;
      if (!toolUse) return [];
      const index = this.toolIndex.size;
      this.toolIndex.set(event.contentBlockStart.contentBlockIndex ?? 0, index);
      return [this.chunk({ tool_calls: [{ index, id: toolUse.toolUseId, type: 'function', function: { name: toolUse.name, arguments: '' } }] }, null)];
    }
    if (event.contentBlockDelta) {
      const delta = event.contentBlockDelta.delta;
      if (delta?.text !== undefined) return [this.chunk({ content: delta.text }, null)];
      if (delta?.toolUse !== undefined) {
        const index = this.toolIndex.get(event.contentBlockDelta.contentBlockIndex ?? 0) ?? 0;
        return [this.chunk({ tool_calls: [{ index, function: { arguments: delta.toolUse.input ?? '' } }] }, null)];
      }
      return []; // reasoning and citations have no chat equivalent
    }
    if (event.messageStop) {
      this.stopped = true;
      return [this.chunk({}, converseStopToFinish(event.messageStop.stopReason))];
    }
    if (event.metadata) {
      this.seen = converseUsage(event.metadata.usage) ?? this.seen;
      return [];
    }
    return [];
  }

  /** The closing usage-only chunk of a finished answer (the sink decides whether the client sees it). */
  end(): Json[] {
    if (!this.stopped || this.seen === undefined) return [];
    return [{ id: this.id, object: 'chat.completion.chunk', created: this.created, model: this.model, choices: [], usage: chatUsage(this.seen) }];
  }

  private chunk(delta: Json, finish: string | null): Json {
    return {
      id: this.id, object: 'chat.completion.chunk', created: this.created, model: this.model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    };
  }
}
