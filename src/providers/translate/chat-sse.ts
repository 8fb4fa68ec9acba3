import { formatSse } from '../sse.ts';
import { arr, obj } from './json.ts';
import type { Json } from './json.ts';

/**
 * Where translated chat completion chunks go: each `push` returns the text for the client in
 * that sink's dialect; `finish` closes the answer (only called for a stream that completed, so a
 * stream broken off upstream stays visibly incomplete). `ChatToMessagesStream` (Anthropic) and
 * `ChatToResponsesStream` (Responses) are sinks too.
 */
export interface ChatChunkSink {
  push(chunk: Json): string;
  finish(): string;
}

/**
 * Chat chunks written as OpenAI chat SSE. The usage-only chunk (`choices: []`) goes out only when
 * the client asked for it (`stream_options.include_usage`); then, as OpenAI does, every other
 * chunk carries `"usage": null`.
 */
export class ChatSseWriter implements ChatChunkSink {
  private readonly includeUsage: boolean;

  constructor(opts: { includeUsage: boolean }) {
    this.includeUsage = opts.includeUsage;
  }

  push(chunk: Json): string {
    if (obj(chunk.error)) return formatSse(JSON.stringify(chunk));
    const usageOnly = arr(chunk.choices).length === 0 && obj(chunk.usage) !== undefined;
    if (usageOnly) return this.includeUsage ? formatSse(JSON.stringify(chunk)) : '';
    return formatSse(JSON.stringify(this.includeUsage ? { ...chunk, usage: null } : chunk));
  }

  finish(): string {
    return 'data: [DONE]\n\n';
  }
}
