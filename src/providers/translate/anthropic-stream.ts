import type { Transform } from 'node:stream';
import type { Usage } from '../types.ts';
import { formatSse, parseEventJson, sseTransform, type SseLimit } from '../sse.ts';
import { normalizeUsage } from '../usage.ts';
import { anthropicStopToFinish, anthropicUsageToChat, finishToAnthropicStop } from './anthropic-response.ts';
import { arr, nowSeconds, num, obj, str } from './json.ts';
import { isRecord } from '../../shared/json.ts';
import { sumCounts, tokenCount } from '../../shared/values.ts';
import type { Json } from './json.ts';

/**
 * Anthropic Messages SSE events -> OpenAI `chat.completion.chunk` SSE text.
 * Feed each parsed event to `push`; the returned text goes to the client as is.
 * `[DONE]` (and the usage chunk when asked for) is only written on `message_stop`, so a
 * stream that breaks off upstream stays visibly incomplete for the client.
 */
export class MessagesToChatStream {
  private id = '';
  private model: string;
  private readonly created: number;
  private readonly includeUsage: boolean;
  private promptTokens = 0;
  private completionTokens = 0;
  private sawUsage = false;
  private readonly toolIndexByBlock = new Map<number, number>();
  private nextToolIndex = 0;
  private finished = false;

  constructor(opts: { model: string; includeUsage: boolean; created?: number }) {
    this.model = opts.model;
    this.includeUsage = opts.includeUsage;
    this.created = opts.created ?? nowSeconds();
  }

  usage(): Usage | undefined {
    if (!this.sawUsage) return undefined;
    return { promptTokens: this.promptTokens, completionTokens: this.completionTokens, totalTokens: sumCounts(this.promptTokens, this.completionTokens) };
  }

  get done(): boolean {
    return this.finished;
  }

  push(ev: Json): string {
    switch (ev.type) {
      case 'message_start': {
        const m = obj(ev.message);
        this.id = str(m?.id) ?? this.id;
        this.model = str(m?.model) ?? this.model;
        const u = normalizeUsage(m?.usage);
        if (u) {
          this.sawUsage = true;
          this.promptTokens = u.promptTokens;
          this.completionTokens = u.completionTokens;
        }
        return this.chunk({ role: 'assistant', content: '' }, null);
      }
      case 'content_block_start': {
        const b = obj(ev.content_block);
        if (b?.type === 'tool_use') {
          const idx = this.nextToolIndex++;
          this.toolIndexByBlock.set(num(ev.index) ?? 0, idx);
          return this.chunk({ tool_calls: [{ index: idx, id: b.id, type: 'function', function: { name: b.name, arguments: '' } }] }, null);
        }
        const t = str(b?.text);
        return b?.type === 'text' && t ? this.chunk({ content: t }, null) : '';
      }
      case 'content_block_delta': {
        const d = obj(ev.delta);
        if (d?.type === 'text_delta') return this.chunk({ content: str(d.text) ?? '' }, null);
        if (d?.type === 'input_json_delta') {
          const idx = this.toolIndexByBlock.get(num(ev.index) ?? 0) ?? 0;
          return this.chunk({ tool_calls: [{ index: idx, function: { arguments: str(d.partial_json) ?? '' } }] }, null);
        }
        return ''; // thinking / signature deltas have no chat equivalent
      }
      case 'message_delta': {
        const u = obj(ev.usage);
        if (u) {
          this.sawUsage = true;
          const n = normalizeUsage(u);
          if (num(u.output_tokens) !== undefined && n) this.completionTokens = n.completionTokens;
          // Newer API versions repeat the (final) input counts here.
          if (num(u.input_tokens) !== undefined && n) this.promptTokens = n.promptTokens;
        }
        const stop = obj(ev.delta)?.stop_reason;
        return stop === undefined || stop === null ? '' : this.chunk({}, anthropicStopToFinish(stop));
      }
      case 'message_stop':
        return this.finish();
      case 'error': {
        const e = obj(ev.error);
        return formatSse(JSON.stringify({ error: { message: str(e?.message) ?? 'upstream error', type: str(e?.type) ?? 'api_error', param: null, code: null } }));
      }
      default:
        return ''; // ping, content_block_stop
    }
  }

  /** The closing usage chunk (when asked for) and `[DONE]`; idempotent. */
  finish(): string {
    if (this.finished) return '';
    this.finished = true;
    let out = '';
    if (this.includeUsage) {
      const usage = anthropicUsageToChat({ input_tokens: this.promptTokens, output_tokens: this.completionTokens });
      out += formatSse(JSON.stringify({ id: this.id, object: 'chat.completion.chunk', created: this.created, model: this.model, choices: [], usage }));
    }
    return out + 'data: [DONE]\n\n';
  }

  private chunk(delta: Json, finish: string | null): string {
    const c: Json = {
      id: this.id,
      object: 'chat.completion.chunk',
      created: this.created,
      model: this.model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    };
    if (this.includeUsage) c.usage = null; // as OpenAI does on every non-final chunk
    return formatSse(JSON.stringify(c));
  }
}

/**
 * OpenAI `chat.completion.chunk` events -> Anthropic Messages SSE text
 * (message_start, content_block_start/delta/stop, message_delta, message_stop).
 * The chat dialect reports usage only at the end, so message_start carries zero counts
 * and message_delta carries the final input and output tokens.
 */
export class ChatToMessagesStream {
  private started = false;
  private finished = false;
  private id = '';
  private model: string;
  private blockIndex = -1;
  private openBlock: 'text' | 'tool' | undefined;
  private readonly toolBlocks = new Map<number, number>();
  private stopReason: string | undefined;
  private promptTokens = 0;
  private completionTokens = 0;
  private sawUsage = false;

  constructor(opts: { model: string }) {
    this.model = opts.model;
  }

  usage(): Usage | undefined {
    if (!this.sawUsage) return undefined;
    return { promptTokens: this.promptTokens, completionTokens: this.completionTokens, totalTokens: sumCounts(this.promptTokens, this.completionTokens) };
  }

  /** True once a finish_reason was seen: the answer is complete even if `[DONE]` never comes. */
  get complete(): boolean {
    return this.stopReason !== undefined;
  }

  get done(): boolean {
    return this.finished;
  }

  push(chunk: Json): string {
    if (isRecord(chunk.error)) {
      const e = chunk.error;
      return formatSse(JSON.stringify({ type: 'error', error: { type: str(e.type) ?? 'api_error', message: str(e.message) ?? 'upstream error' } }), 'error');
    }
    let out = '';
    if (!this.started) out += this.start(chunk);
    const u = obj(chunk.usage);
    if (u) {
      this.sawUsage = true;
      this.promptTokens = tokenCount(u.prompt_tokens) ?? this.promptTokens;
      this.completionTokens = tokenCount(u.completion_tokens) ?? this.completionTokens;
    }
    const choice = obj(arr(chunk.choices)[0]);
    if (!choice) return out;
    const delta = obj(choice.delta);
    const text = str(delta?.content);
    if (text) {
      if (this.openBlock !== 'text') {
        out += this.closeBlock();
        this.blockIndex++;
        this.openBlock = 'text';
        out += ev('content_block_start', { type: 'content_block_start', index: this.blockIndex, content_block: { type: 'text', text: '' } });
      }
      out += ev('content_block_delta', { type: 'content_block_delta', index: this.blockIndex, delta: { type: 'text_delta', text } });
    }
    for (const tc of arr(delta?.tool_calls)) {
      if (!isRecord(tc)) continue;
      const tcIndex = num(tc.index) ?? 0;
      const fn = obj(tc.function);
      let block = this.toolBlocks.get(tcIndex);
      if (block === undefined) {
        out += this.closeBlock();
        block = ++this.blockIndex;
        this.toolBlocks.set(tcIndex, block);
        this.openBlock = 'tool';
        out += ev('content_block_start', {
          type: 'content_block_start', index: block,
          content_block: { type: 'tool_use', id: str(tc.id) ?? `toolu_${tcIndex}`, name: str(fn?.name) ?? '', input: {} },
        });
      }
      const args = str(fn?.arguments);
      if (args) out += ev('content_block_delta', { type: 'content_block_delta', index: block, delta: { type: 'input_json_delta', partial_json: args } });
    }
    if (choice.finish_reason !== undefined && choice.finish_reason !== null) this.stopReason = finishToAnthropicStop(choice.finish_reason);
    return out;
  }

  /** Closes the message (on `[DONE]`, or at the end of a stream that finished); idempotent. */
  finish(): string {
    if (this.finished) return '';
    this.finished = true;
    let out = this.started ? '' : this.start({});
    out += this.closeBlock();
    out += ev('message_delta', {
      type: 'message_delta',
      delta: { stop_reason: this.stopReason ?? 'end_turn', stop_sequence: null },
      usage: { input_tokens: this.promptTokens, output_tokens: this.completionTokens },
    });
    return out + ev('message_stop', { type: 'message_stop' });
  }

  private start(chunk: Json): string {
    this.started = true;
    this.id = str(chunk.id) ?? this.id;
    this.model = str(chunk.model) ?? this.model;
    return ev('message_start', {
      type: 'message_start',
      message: {
        id: this.id, type: 'message', role: 'assistant', model: this.model, content: [],
        stop_reason: null, stop_sequence: null, usage: { input_tokens: 0, output_tokens: 0 },
      },
    });
  }

  private closeBlock(): string {
    if (this.openBlock === undefined) return '';
    this.openBlock = undefined;
    return ev('content_block_stop', { type: 'content_block_stop', index: this.blockIndex });
  }
}

/** Anthropic SSE bytes -> chat chunk SSE bytes, event by event, as a stream stage. */
export function messagesToChatTransform(translator: MessagesToChatStream, limit?: SseLimit): Transform {
  return sseTransform((event) => {
    const o = parseEventJson(event);
    return o ? translator.push(o) : '';
  }, undefined, limit);
}

/** Chat SSE bytes -> Anthropic SSE bytes, event by event, as a stream stage. */
export function chatToMessagesTransform(translator: ChatToMessagesStream, limit?: SseLimit): Transform {
  return sseTransform(
    (event) => {
      if (event.data === '[DONE]') return translator.finish();
      const o = parseEventJson(event);
      return o ? translator.push(o) : '';
    },
    // Some compatible servers omit [DONE]; a stream that reported its finish_reason is complete.
    () => (translator.complete ? translator.finish() : ''),
    limit,
  );
}

function ev(name: string, data: Json): string {
  return formatSse(JSON.stringify(data), name);
}
