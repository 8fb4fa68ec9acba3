import { arr, copyKeys, obj, parseJsonObject, str } from './json.ts';
import { isRecord } from '../../shared/json.ts';
import type { Json } from './json.ts';

/** Anthropic requires max_tokens; OpenAI callers often omit it. */
const DEFAULT_MAX_TOKENS = 4096;

// ---------------------------------------------------------------------------
// OpenAI chat completions request -> Anthropic Messages request (anthropic adapter)
// ---------------------------------------------------------------------------

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  return arr(content)
    .map((p) => (isRecord(p) && (p.type === 'text' || p.type === 'input_text' || p.type === 'refusal') ? (str(p.text) ?? str(p.refusal) ?? '') : ''))
    .filter((s) => s.length > 0)
    .join('\n\n');
}

function imageBlock(url: string): Json {
  const m = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  if (m) return { type: 'image', source: { type: 'base64', media_type: m[1], data: m[2] } };
  return { type: 'image', source: { type: 'url', url } };
}

function userBlocks(content: unknown): Json[] | string {
  if (typeof content === 'string') return content;
  const blocks: Json[] = [];
  for (const p of arr(content)) {
    if (!isRecord(p)) continue;
    if (p.type === 'text') blocks.push({ type: 'text', text: str(p.text) ?? '' });
    else if (p.type === 'image_url') {
      const url = str(obj(p.image_url)?.url) ?? str(p.image_url);
      if (url) blocks.push(imageBlock(url));
    }
    // input_audio and file parts have no Anthropic equivalent here; they are dropped.
  }
  return blocks;
}

function toolInput(args: unknown): Json {
  if (isRecord(args)) return args;
  return (typeof args === 'string' && parseJsonObject(args)) || {};
}

function asBlocks(content: Json[] | string): Json[] {
  return typeof content === 'string' ? (content.length > 0 ? [{ type: 'text', text: content }] : []) : content;
}

/** Anthropic wants alternating roles; consecutive same-role turns are merged. */
function pushTurn(out: Json[], role: 'user' | 'assistant', content: Json[] | string): void {
  const last = out[out.length - 1];
  if (last && last.role === role) {
    last.content = [...asBlocks(last.content as Json[] | string), ...asBlocks(content)];
    return;
  }
  out.push({ role, content });
}

function mapToolChoice(choice: unknown, parallel: unknown): Json | undefined {
  let out: Json | undefined;
  if (choice === 'auto') out = { type: 'auto' };
  else if (choice === 'required') out = { type: 'any' };
  else if (choice === 'none') out = { type: 'none' };
  else if (isRecord(choice)) {
    const name = str(obj(choice.function)?.name);
    if (name) out = { type: 'tool', name };
  }
  if (parallel === false) out = { ...(out ?? { type: 'auto' }), disable_parallel_tool_use: true };
  return out;
}

export function chatToMessagesRequest(chat: Json): Json {
  const system: string[] = [];
  const messages: Json[] = [];
  for (const m of arr(chat.messages)) {
    if (!isRecord(m)) continue;
    const role = m.role;
    if (role === 'system' || role === 'developer') {
      const t = textOf(m.content);
      if (t) system.push(t);
    } else if (role === 'user') {
      pushTurn(messages, 'user', userBlocks(m.content));
    } else if (role === 'assistant') {
      const blocks: Json[] = [];
      const t = textOf(m.content);
      if (t) blocks.push({ type: 'text', text: t });
      for (const tc of arr(m.tool_calls)) {
        if (!isRecord(tc)) continue;
        const fn = obj(tc.function);
        blocks.push({ type: 'tool_use', id: str(tc.id) ?? '', name: str(fn?.name) ?? '', input: toolInput(fn?.arguments) });
      }
      // An empty assistant turn is rejected by Anthropic; it carries nothing, so drop it.
      if (blocks.length > 0) pushTurn(messages, 'assistant', blocks);
    } else if (role === 'tool') {
      pushTurn(messages, 'user', [{ type: 'tool_result', tool_use_id: str(m.tool_call_id) ?? '', content: textOf(m.content) }]);
    }
  }
  const out: Json = { model: chat.model, messages };
  if (system.length > 0) out.system = system.join('\n\n');
  out.max_tokens = chat.max_completion_tokens ?? chat.max_tokens ?? DEFAULT_MAX_TOKENS;
  copyKeys(chat, out, ['temperature', 'top_p']);
  if (typeof chat.stop === 'string') out.stop_sequences = [chat.stop];
  else if (Array.isArray(chat.stop) && chat.stop.length > 0) out.stop_sequences = chat.stop;
  if (chat.stream === true) out.stream = true;
  const tools = arr(chat.tools)
    .map((t) => obj(obj(t)?.function))
    .filter((f): f is Json => f !== undefined)
    .map((f) => {
      const tool: Json = { name: f.name, input_schema: obj(f.parameters) ?? { type: 'object', properties: {} } };
      if (f.description !== undefined) tool.description = f.description;
      return tool;
    });
  if (tools.length > 0) out.tools = tools;
  const tc = mapToolChoice(chat.tool_choice, chat.parallel_tool_calls);
  if (tc && tools.length > 0) out.tool_choice = tc;
  if (typeof chat.user === 'string') out.metadata = { user_id: chat.user };
  return out;
}

// ---------------------------------------------------------------------------
// Anthropic Messages request -> OpenAI chat completions request (openai adapter)
// ---------------------------------------------------------------------------

function blockText(content: unknown): string {
  if (typeof content === 'string') return content;
  return arr(content)
    .map((b) => (isRecord(b) && b.type === 'text' ? (str(b.text) ?? '') : ''))
    .join('');
}

function imagePart(b: Json): Json | undefined {
  const src = obj(b.source);
  if (!src) return undefined;
  if (src.type === 'base64') return { type: 'image_url', image_url: { url: `data:${str(src.media_type) ?? 'image/png'};base64,${str(src.data) ?? ''}` } };
  if (src.type === 'url') return { type: 'image_url', image_url: { url: str(src.url) ?? '' } };
  return undefined;
}

export function messagesToChatRequest(msg: Json): Json {
  const messages: Json[] = [];
  const sys = blockText(msg.system);
  if (sys) messages.push({ role: 'system', content: sys });
  for (const m of arr(msg.messages)) {
    if (!isRecord(m)) continue;
    if (m.role === 'assistant') {
      if (typeof m.content === 'string') {
        messages.push({ role: 'assistant', content: m.content });
        continue;
      }
      let text = '';
      const toolCalls: Json[] = [];
      for (const b of arr(m.content)) {
        if (!isRecord(b)) continue;
        if (b.type === 'text') text += str(b.text) ?? '';
        else if (b.type === 'tool_use') {
          toolCalls.push({ id: b.id, type: 'function', function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } });
        }
        // thinking blocks are Anthropic-only and are dropped.
      }
      const out: Json = { role: 'assistant', content: text.length > 0 || toolCalls.length === 0 ? text : null };
      if (toolCalls.length > 0) out.tool_calls = toolCalls;
      messages.push(out);
    } else {
      if (typeof m.content === 'string') {
        messages.push({ role: 'user', content: m.content });
        continue;
      }
      const parts: Json[] = [];
      for (const b of arr(m.content)) {
        if (!isRecord(b)) continue;
        if (b.type === 'tool_result') {
          // Tool results must directly follow the assistant's tool calls in the chat dialect.
          messages.push({ role: 'tool', tool_call_id: b.tool_use_id, content: blockText(b.content) });
        } else if (b.type === 'text') parts.push({ type: 'text', text: str(b.text) ?? '' });
        else if (b.type === 'image') {
          const p = imagePart(b);
          if (p) parts.push(p);
        }
      }
      if (parts.length === 0) continue;
      const allText = parts.every((p) => p.type === 'text');
      messages.push({ role: 'user', content: allText ? parts.map((p) => p.text as string).join('\n\n') : parts });
    }
  }
  const out: Json = { model: msg.model, messages };
  copyKeys(msg, out, ['max_tokens', 'temperature', 'top_p']);
  if (Array.isArray(msg.stop_sequences) && msg.stop_sequences.length > 0) out.stop = msg.stop_sequences;
  if (msg.stream === true) {
    out.stream = true;
    // The translated stream needs the usage to fill Anthropic's message_delta.usage.
    out.stream_options = { include_usage: true };
  }
  const tools = arr(msg.tools)
    .filter(isRecord)
    .filter((t) => t.name !== undefined && (t.type === undefined || t.type === 'custom'))
    .map((t) => {
      const fn: Json = { name: t.name, parameters: obj(t.input_schema) ?? { type: 'object', properties: {} } };
      if (t.description !== undefined) fn.description = t.description;
      return { type: 'function', function: fn };
    });
  if (tools.length > 0) out.tools = tools;
  const tc = obj(msg.tool_choice);
  if (tc && tools.length > 0) {
    if (tc.type === 'auto') out.tool_choice = 'auto';
    else if (tc.type === 'any') out.tool_choice = 'required';
    else if (tc.type === 'none') out.tool_choice = 'none';
    else if (tc.type === 'tool') out.tool_choice = { type: 'function', function: { name: tc.name } };
    if (tc.disable_parallel_tool_use === true) out.parallel_tool_calls = false;
  }
  const user = str(obj(msg.metadata)?.user_id);
  if (user) out.user = user;
  return out;
}

