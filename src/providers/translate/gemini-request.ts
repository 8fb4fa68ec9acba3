/**
 * OpenAI chat completions request -> Gemini `generateContent` request (the Gemini API and Vertex
 * AI take the same body). What Gemini cannot honour goes to the instance's unsupported policy;
 * content it cannot take (an image URL of unknown type, a tool result without its call) is a 400.
 */
import { isRecord } from '../../shared/json.ts';
import { arr, obj, parseJsonObject, str } from './json.ts';
import type { Json } from './json.ts';
import { UnsupportedParameterError } from '../types.ts';
import type { UnsupportedPolicy } from './unsupported.ts';

/** Fields that only identify or label a request; Gemini has no use for them and nothing changes without them. */
const IGNORED = new Set(['model', 'messages', 'stream', 'stream_options', 'user', 'metadata', 'safety_identifier', 'prompt_cache_key']);

/** Why a chat parameter has no Gemini counterpart, for the 400's message. */
const NOT_SUPPORTED: Readonly<Record<string, string>> = {
  logprobs: 'log probabilities are not carried back',
  top_logprobs: 'log probabilities are not carried back',
  logit_bias: 'Gemini has no token biases',
  parallel_tool_calls: 'Gemini cannot limit a turn to one tool call',
  audio: 'audio output is not translated',
  modalities: 'only text output is translated',
  prediction: 'Gemini has no predicted outputs',
  web_search_options: 'use Gemini grounding through the passthrough route instead',
  functions: 'use tools',
  function_call: 'use tool_choice',
  store: 'Gemini stores no completions',
  service_tier: 'Gemini has no service tiers here',
  verbosity: 'Gemini has no verbosity setting',
};

/**
 * `reasoning_effort` as a Gemini thinking budget (tokens), as Google's own OpenAI-compatible
 * endpoint maps it; `none` turns thinking off.
 */
const THINKING_BUDGET: Readonly<Record<string, number>> = { none: 0, minimal: 1024, low: 1024, medium: 8192, high: 24576 };

/** Image types Gemini reads, by file extension, for images given by URL. */
const MIME_BY_EXTENSION: Readonly<Record<string, string>> = {
  png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif', webp: 'image/webp', heic: 'image/heic', heif: 'image/heif',
  pdf: 'application/pdf', wav: 'audio/wav', mp3: 'audio/mp3',
};

const AUDIO_MIME: Readonly<Record<string, string>> = { wav: 'audio/wav', mp3: 'audio/mp3' };

const TOOL_SIGNATURE_MARK = '_ts_';

/**
 * Gemini 3 models sign their function calls (`thoughtSignature`) and want the signature back with
 * the call in the next turn. The gateway keeps no state, so the signature rides in the tool call
 * id the client echoes back: `<id>_ts_<signature as base64url>` (letters, digits, `_` and `-`,
 * which every client and Anthropic's id pattern accept).
 */
export function toolCallId(id: string, signature: string | undefined): string {
  return signature === undefined ? id : `${id}${TOOL_SIGNATURE_MARK}${Buffer.from(signature, 'base64').toString('base64url')}`;
}

/** The thought signature carried in a tool call id made by `toolCallId`, if any. */
export function signatureOfToolCallId(id: string): string | undefined {
  const at = id.indexOf(TOOL_SIGNATURE_MARK);
  return at < 0 ? undefined : Buffer.from(id.slice(at + TOOL_SIGNATURE_MARK.length), 'base64url').toString('base64');
}

export function chatToGenerateContent(chat: Json, policy: UnsupportedPolicy): Json {
  const out: Json = { ...translateMessages(arr(chat.messages)) };
  const config: Json = {};
  for (const [key, value] of Object.entries(chat)) {
    if (value === undefined || value === null || IGNORED.has(key)) continue;
    switch (key) {
      case 'temperature':
        config.temperature = value;
        break;
      case 'top_p':
        config.topP = value;
        break;
      case 'top_k': // not OpenAI's, but Anthropic's top_k arrives under this name
        config.topK = value;
        break;
      case 'max_tokens':
      case 'max_completion_tokens':
        config.maxOutputTokens = chat.max_completion_tokens ?? chat.max_tokens;
        break;
      case 'stop': {
        const stops = typeof value === 'string' ? [value] : arr(value).filter((s): s is string => typeof s === 'string');
        if (stops.length > 0) config.stopSequences = stops;
        break;
      }
      case 'n':
        if (value !== 1) config.candidateCount = value;
        break;
      case 'presence_penalty':
        config.presencePenalty = value;
        break;
      case 'frequency_penalty':
        config.frequencyPenalty = value;
        break;
      case 'seed':
        config.seed = value;
        break;
      case 'response_format':
        responseFormat(value, config, policy);
        break;
      case 'reasoning_effort': {
        const budget = typeof value === 'string' ? THINKING_BUDGET[value] : undefined;
        if (budget === undefined) policy.unsupported('reasoning_effort', `must be one of ${Object.keys(THINKING_BUDGET).join(', ')}`);
        else config.thinkingConfig = { thinkingBudget: budget };
        break;
      }
      case 'tools':
        tools(value, out, policy);
        break;
      case 'tool_choice':
        break; // with the tools, below
      default:
        if (isHarmlessDefault(key, value)) break;
        policy.unsupported(key, NOT_SUPPORTED[key] ?? 'not translated for Gemini');
    }
  }
  if (out.tools !== undefined && chat.tool_choice !== undefined && chat.tool_choice !== null) toolChoice(chat.tool_choice, out, policy);
  if (Object.keys(config).length > 0) out.generationConfig = config;
  return out;
}

/** Values of unsupported parameters that ask for nothing Gemini lacks. */
function isHarmlessDefault(key: string, value: unknown): boolean {
  switch (key) {
    case 'logprobs':
    case 'store':
      return value === false;
    case 'parallel_tool_calls':
      return value === true;
    case 'logit_bias':
      return isRecord(value) && Object.keys(value).length === 0;
    case 'modalities':
      return Array.isArray(value) && value.every((m) => m === 'text');
    case 'service_tier':
      return value === 'auto' || value === 'default';
    default:
      return false;
  }
}

function responseFormat(value: unknown, config: Json, policy: UnsupportedPolicy): void {
  const format = obj(value);
  if (format?.type === 'text') return;
  if (format?.type === 'json_object') {
    config.responseMimeType = 'application/json';
    return;
  }
  if (format?.type === 'json_schema') {
    config.responseMimeType = 'application/json';
    const schema = obj(obj(format.json_schema)?.schema);
    if (schema) config.responseJsonSchema = schema;
    return;
  }
  policy.unsupported('response_format.type', `format ${JSON.stringify(format?.type)} is not translated`);
}

function tools(value: unknown, out: Json, policy: UnsupportedPolicy): void {
  const declarations: Json[] = [];
  arr(value).forEach((raw, i) => {
    const t = obj(raw);
    if (!t) return;
    const fn = obj(t.function);
    if (t.type !== 'function' || !fn) {
      policy.unsupported(`tools[${i}].type`, `only function tools are translated (got ${JSON.stringify(t.type)})`);
      return;
    }
    const declaration: Json = { name: fn.name };
    if (typeof fn.description === 'string') declaration.description = fn.description;
    // JSON Schema as the client wrote it: Gemini takes it as is in parametersJsonSchema.
    const parameters = obj(fn.parameters);
    if (parameters) declaration.parametersJsonSchema = parameters;
    declarations.push(declaration);
  });
  if (declarations.length > 0) out.tools = [{ functionDeclarations: declarations }];
}

function toolChoice(value: unknown, out: Json, policy: UnsupportedPolicy): void {
  let config: Json | undefined;
  if (value === 'auto') config = { mode: 'AUTO' };
  else if (value === 'none') config = { mode: 'NONE' };
  else if (value === 'required') config = { mode: 'ANY' };
  else {
    const name = str(obj(obj(value)?.function)?.name);
    if (obj(value)?.type === 'function' && name !== undefined) config = { mode: 'ANY', allowedFunctionNames: [name] };
  }
  if (config) out.toolConfig = { functionCallingConfig: config };
  else policy.unsupported('tool_choice', 'only auto, none, required and one function are translated');
}

// ---------------------------------------------------------------------------
// messages -> systemInstruction and contents
// ---------------------------------------------------------------------------

function translateMessages(messages: unknown[]): Json {
  const system: Json[] = [];
  const contents: Json[] = [];
  /** Tool call id -> function name: a Gemini function response is matched by name. */
  const callNames = new Map<string, string>();
  messages.forEach((raw, i) => {
    const m = obj(raw);
    if (!m) return;
    const at = `messages[${i}]`;
    if (m.role === 'system' || m.role === 'developer') {
      const text = textOf(m.content);
      if (text.length > 0) system.push({ text });
    } else if (m.role === 'user') {
      push(contents, 'user', userParts(m.content, `${at}.content`));
    } else if (m.role === 'assistant') {
      push(contents, 'model', assistantParts(m, at, callNames));
    } else if (m.role === 'tool') {
      push(contents, 'user', [functionResponse(m, at, callNames)]);
    } else {
      throw new UnsupportedParameterError(`${at}.role: ${JSON.stringify(m.role)} is not a chat role Gemini can take`, `${at}.role`, 'invalid_value');
    }
  });
  const out: Json = { contents };
  if (system.length > 0) out.systemInstruction = { parts: system };
  return out;
}

/** Gemini turns alternate; consecutive turns of one role (parallel tool results) are merged. */
function push(contents: Json[], role: 'user' | 'model', parts: Json[]): void {
  if (parts.length === 0) return;
  const last = contents[contents.length - 1];
  if (last?.role === role) last.parts = [...arr(last.parts), ...parts];
  else contents.push({ role, parts });
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  return arr(content)
    .map((p) => obj(p))
    .map((p) => (p?.type === 'text' ? (str(p.text) ?? '') : p?.type === 'refusal' ? (str(p.refusal) ?? '') : ''))
    .filter((t) => t.length > 0)
    .join('\n\n');
}

function userParts(content: unknown, at: string): Json[] {
  if (typeof content === 'string') return content.length > 0 ? [{ text: content }] : [];
  const parts: Json[] = [];
  arr(content).forEach((raw, j) => {
    const p = obj(raw);
    if (!p) return;
    const here = `${at}[${j}]`;
    if (p.type === 'text') parts.push({ text: str(p.text) ?? '' });
    else if (p.type === 'image_url') parts.push(mediaPart(str(obj(p.image_url)?.url) ?? str(p.image_url) ?? '', `${here}.image_url`));
    else if (p.type === 'input_audio') {
      const audio = obj(p.input_audio);
      const mimeType = AUDIO_MIME[str(audio?.format) ?? ''];
      if (mimeType === undefined) throw new UnsupportedParameterError(`${here}.input_audio.format: Gemini takes wav or mp3 audio`, `${here}.input_audio.format`, 'invalid_value');
      parts.push({ inlineData: { mimeType, data: str(audio?.data) ?? '' } });
    } else if (p.type === 'file') {
      const file = obj(p.file);
      const data = str(file?.file_data);
      if (data === undefined) throw new UnsupportedParameterError(`${here}.file: Gemini takes files sent inline (file_data), not uploaded file ids`, `${here}.file.file_id`, 'invalid_value');
      parts.push(inlinePart(data, str(file?.filename), `${here}.file.file_data`));
    } else {
      throw new UnsupportedParameterError(`${here}.type: content of type ${JSON.stringify(p.type)} is not translated for Gemini`, `${here}.type`, 'invalid_value');
    }
  });
  return parts;
}

/** An image (or other file) by data URL -> inline data; by URL -> file data with its type. */
function mediaPart(url: string, param: string): Json {
  if (url.startsWith('data:')) return inlinePart(url, undefined, param);
  const mimeType = mimeOfName(url.split(/[?#]/)[0] ?? '');
  if (!/^(https?|gs):\/\//i.test(url) || mimeType === undefined) {
    throw new UnsupportedParameterError(
      `${param}: Gemini needs the type of an image given by URL, and ${JSON.stringify(url.slice(0, 200))} does not end in a known image extension (${Object.keys(MIME_BY_EXTENSION).join(', ')}); send it as a data URL instead`,
      param,
      'invalid_value',
    );
  }
  return { fileData: { mimeType, fileUri: url } };
}

function inlinePart(dataUrl: string, filename: string | undefined, param: string): Json {
  const m = /^data:([^;,]+)?(?:;[^;,]*)*;base64,(.*)$/s.exec(dataUrl);
  const mimeType = m?.[1] ?? (filename === undefined ? undefined : mimeOfName(filename));
  if (m === null || mimeType === undefined) {
    throw new UnsupportedParameterError(`${param}: expected a base64 data URL with a media type (data:<type>;base64,...)`, param, 'invalid_value');
  }
  return { inlineData: { mimeType, data: m[2] ?? '' } };
}

function mimeOfName(name: string): string | undefined {
  const ext = /\.([a-z0-9]+)$/i.exec(name)?.[1]?.toLowerCase();
  return ext === undefined ? undefined : MIME_BY_EXTENSION[ext];
}

function assistantParts(m: Json, at: string, callNames: Map<string, string>): Json[] {
  const parts: Json[] = [];
  const text = textOf(m.content);
  if (text.length > 0) parts.push({ text });
  arr(m.tool_calls).forEach((raw, k) => {
    const tc = obj(raw);
    const fn = obj(tc?.function);
    if (!tc || !fn) return;
    const name = str(fn.name) ?? '';
    const id = str(tc.id);
    if (id !== undefined) callNames.set(id, name);
    const argsText = str(fn.arguments) ?? '';
    const args = argsText.trim() === '' ? {} : parseJsonObject(argsText);
    if (args === undefined) {
      const param = `${at}.tool_calls[${k}].function.arguments`;
      throw new UnsupportedParameterError(`${param}: Gemini takes a function call's arguments as a JSON object`, param, 'invalid_value');
    }
    const part: Json = { functionCall: { name, args } };
    const signature = id === undefined ? undefined : signatureOfToolCallId(id);
    if (signature !== undefined) part.thoughtSignature = signature;
    parts.push(part);
  });
  return parts;
}

function functionResponse(m: Json, at: string, callNames: Map<string, string>): Json {
  const id = str(m.tool_call_id) ?? '';
  const name = callNames.get(id);
  if (name === undefined) {
    throw new UnsupportedParameterError(
      `${at}.tool_call_id: no earlier assistant message has a tool call with id ${JSON.stringify(id)} (Gemini matches a tool result to its call by the function's name)`,
      `${at}.tool_call_id`,
      'invalid_value',
    );
  }
  const text = textOf(m.content);
  // A JSON object result goes as it is; anything else as the text it is.
  return { functionResponse: { name, response: parseJsonObject(text) ?? { result: text } } };
}
