/**
 * Gemini `streamGenerateContent?alt=sse` events -> OpenAI chat completion chunks, event by event.
 * The chunks then go to a `ChatChunkSink`: chat SSE, Anthropic Messages SSE or Responses SSE.
 */
import type { Transform } from 'node:stream';
import type { Usage } from '../types.ts';
import { parseEventJson, sseTransform, type SseLimit } from '../sse.ts';
import { normalizeUsage } from '../usage.ts';
import type { ChatChunkSink } from './chat-sse.ts';
import { chatIdOf, geminiFinishToChat, geminiUsageToChat, readParts } from './gemini-response.ts';
import { arr, nowSeconds, num, obj, str } from './json.ts';
import type { Json } from './json.ts';

interface CandidateState {
  started: boolean;
  /** Tool calls sent so far: the next one's chat index. */
  calls: number;
}

export class GeminiToChatStream {
  private id: string | undefined;
  private model: string;
  private readonly created: number;
  private readonly candidates = new Map<number, CandidateState>();
  private usageSeen: Json | undefined;
  private finished = false;

  constructor(opts: { model: string; created?: number }) {
    this.model = opts.model;
    this.created = opts.created ?? nowSeconds();
  }

  /** True once the answer said it is finished (a finish reason, or a blocked prompt). */
  get complete(): boolean {
    return this.finished;
  }

  /** The latest usage reported (Gemini repeats the running totals in its events). */
  usage(): Usage | undefined {
    return normalizeUsage(this.usageSeen);
  }

  /** The chat chunks one Gemini event makes. */
  push(ev: Json): Json[] {
    const error = obj(ev.error);
    if (error) {
      return [{ error: { message: str(error.message) ?? 'upstream error', type: 'api_error', param: null, code: str(error.status) ?? null } }];
    }
    this.id ??= chatIdOf(ev);
    this.model = str(ev.modelVersion) ?? this.model;
    const usage = geminiUsageToChat(ev.usageMetadata);
    if (usage) this.usageSeen = usage;
    const out: Json[] = [];
    const candidates = arr(ev.candidates);
    candidates.forEach((raw, i) => {
      const c = obj(raw);
      if (!c) return;
      const index = num(c.index) ?? i;
      const state = this.stateOf(index, out);
      const { text, calls } = readParts(obj(c.content)?.parts);
      if (text.length > 0) out.push(this.chunk(index, { content: text }, null));
      for (const call of calls) out.push(this.chunk(index, { tool_calls: [{ index: state.calls++, ...call }] }, null));
      if (c.finishReason !== undefined && c.finishReason !== null) {
        this.finished = true;
        out.push(this.chunk(index, {}, geminiFinishToChat(c.finishReason, state.calls > 0)));
      }
    });
    if (candidates.length === 0 && str(obj(ev.promptFeedback)?.blockReason) !== undefined) {
      // The prompt was blocked: no candidate will come.
      this.stateOf(0, out);
      this.finished = true;
      out.push(this.chunk(0, {}, 'content_filter'));
    }
    return out;
  }

  /** The closing usage-only chunk of a finished answer. */
  end(): Json[] {
    if (!this.finished) return [];
    return [{ id: this.id ?? chatIdOf({}), object: 'chat.completion.chunk', created: this.created, model: this.model, choices: [], usage: this.usageSeen ?? geminiUsageToChat({}) }];
  }

  private stateOf(index: number, out: Json[]): CandidateState {
    let state = this.candidates.get(index);
    if (state === undefined) {
      state = { started: false, calls: 0 };
      this.candidates.set(index, state);
    }
    if (!state.started) {
      state.started = true;
      out.push(this.chunk(index, { role: 'assistant', content: '' }, null));
    }
    return state;
  }

  private chunk(index: number, delta: Json, finish: string | null): Json {
    return {
      id: this.id,
      object: 'chat.completion.chunk',
      created: this.created,
      model: this.model,
      choices: [{ index, delta, logprobs: null, finish_reason: finish }],
    };
  }
}

/**
 * Gemini SSE bytes -> the sink's SSE bytes, as a stream stage. The sink is closed only when the
 * answer finished: a stream broken off upstream stays visibly incomplete to the client.
 */
export function geminiStreamTransform(translator: GeminiToChatStream, sink: ChatChunkSink, limit?: SseLimit): Transform {
  const write = (chunks: Json[]): string => chunks.map((c) => sink.push(c)).join('');
  return sseTransform(
    (event) => {
      const ev = parseEventJson(event);
      return ev ? write(translator.push(ev)) : '';
    },
    () => (translator.complete ? write(translator.end()) + sink.finish() : ''),
    limit,
  );
}
