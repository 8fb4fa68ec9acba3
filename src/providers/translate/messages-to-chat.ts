/**
 * An Anthropic Messages request as a chat request for a provider with a `drop_unsupported`
 * policy (`azure`, `bedrock`, `gemini`, `vertex`), refusing what the translation cannot carry:
 * each such parameter or content block goes to the instance's unsupported policy first, so
 * nothing is dropped silently. Beyond `messagesToChatRequest` (which the plain `openai` type uses
 * as is) it carries `output_config` (structured output and, where the target takes it, effort)
 * and, where the target takes it, `top_k`.
 */
import { messagesToChatRequest } from './anthropic-request.ts';
import { arr, obj, str } from './json.ts';
import type { Json } from './json.ts';
import type { UnsupportedPolicy } from './unsupported.ts';

/** What the chat dialect behind a provider takes beyond the parameters every chat upstream has. */
export interface ChatTarget {
  /** `top_k`, under that name (not OpenAI's; Gemini's translation takes it). */
  topK: boolean;
  /** `reasoning_effort` low, medium or high (OpenAI's reasoning models; Gemini's thinking budget). */
  reasoningEffort: boolean;
}

/** Translated, or only labels the request (a cache hint, the service tier). */
const CARRIED = new Set([
  'model', 'messages', 'max_tokens', 'system', 'stop_sequences', 'stream', 'temperature', 'top_p', 'top_k', 'tools', 'tool_choice',
  'metadata', 'service_tier', 'cache_control', 'output_config',
]);

const EFFORTS = new Set(['low', 'medium', 'high']);

/** Earlier turns' reasoning: the model's own state, which the chat dialect has no place for. */
const DROPPED_BLOCKS = new Set(['thinking', 'redacted_thinking']);

export function messagesToChat(msg: Json, policy: UnsupportedPolicy, target: ChatTarget): Json {
  check(msg, policy);
  const chat = messagesToChatRequest(msg);
  if (msg.top_k !== undefined && msg.top_k !== null) {
    if (target.topK) chat.top_k = msg.top_k;
    else policy.unsupported('top_k', 'not carried by the translation to chat completions');
  }
  const output = obj(msg.output_config);
  const format = obj(output?.format);
  if (format?.type === 'json_schema') chat.response_format = { type: 'json_schema', json_schema: { name: 'output', schema: format.schema } };
  else if (format !== undefined) policy.unsupported('output_config.format.type', `format ${JSON.stringify(format.type)} is not carried`);
  const effort = output?.effort;
  if (effort !== undefined && effort !== null) {
    if (!target.reasoningEffort) policy.unsupported('output_config.effort', 'not carried by the translation');
    else if (typeof effort === 'string' && EFFORTS.has(effort)) chat.reasoning_effort = effort;
    else policy.unsupported('output_config.effort', 'only low, medium and high are carried');
  }
  return chat;
}

function check(msg: Json, policy: UnsupportedPolicy): void {
  for (const [key, value] of Object.entries(msg)) {
    if (value === undefined || value === null || CARRIED.has(key)) continue;
    if (key === 'thinking' && obj(value)?.type === 'disabled') continue;
    if (key === 'speed' && value === 'standard') continue;
    policy.unsupported(key, 'not carried by the translation');
  }
  arr(msg.tools).forEach((raw, i) => {
    const type = obj(raw)?.type;
    if (type !== undefined && type !== 'custom') policy.unsupported(`tools[${i}].type`, `only custom tools are carried (got ${JSON.stringify(type)})`);
  });
  arr(msg.messages).forEach((raw, i) => {
    const m = obj(raw);
    if (!m || typeof m.content === 'string') return;
    arr(m.content).forEach((b, j) => checkBlock(obj(b), `messages[${i}].content[${j}]`, policy));
  });
}

function checkBlock(block: Json | undefined, at: string, policy: UnsupportedPolicy): void {
  const type = str(block?.type);
  if (!block || type === undefined || type === 'text' || type === 'tool_use' || DROPPED_BLOCKS.has(type)) return;
  if (type === 'image') {
    const source = str(obj(block.source)?.type);
    if (source !== 'base64' && source !== 'url') policy.unsupported(`${at}.source.type`, `image sources of type ${JSON.stringify(source)} are not carried`);
    return;
  }
  if (type === 'tool_result') {
    if (typeof block.content === 'string') return;
    arr(block.content).forEach((c, k) => {
      const inner = str(obj(c)?.type);
      if (inner !== 'text') policy.unsupported(`${at}.content[${k}].type`, 'only text tool results are carried');
    });
    return;
  }
  policy.unsupported(`${at}.type`, `content blocks of type ${JSON.stringify(type)} are not carried`);
}
