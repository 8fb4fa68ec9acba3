import { SseParser, parseEventJson } from './sse.ts';
import type { SseEvent } from './sse.ts';
import type { Usage } from './types.ts';
import type { ChunkTransform } from './upstream.ts';
import { normalizeUsage, usageFromBody } from './usage.ts';

function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/**
 * Collects the usage reported anywhere in an SSE stream of any supported dialect:
 * chat (final usage chunk), Responses (`response.completed`), Anthropic (input tokens in
 * `message_start`, output tokens in `message_delta`). Later reports replace earlier ones.
 */
export class UsageAccumulator {
  private prompt: number | undefined;
  private completion: number | undefined;
  private total: number | undefined;

  observe(o: Record<string, unknown>): void {
    if (o.type === 'message_start') {
      const u = normalizeUsage(isRecord(o.message) ? o.message.usage : undefined);
      if (u) this.set(u);
      return;
    }
    if (o.type === 'message_delta') {
      const raw = o.usage;
      const u = normalizeUsage(raw);
      if (!u || !isRecord(raw)) return;
      if (typeof raw.output_tokens === 'number') this.completion = u.completionTokens;
      if (typeof raw.input_tokens === 'number') this.prompt = u.promptTokens;
      this.total = undefined;
      return;
    }
    const u = usageFromBody(o);
    if (u) this.set(u);
  }

  usage(): Usage | undefined {
    if (this.prompt === undefined && this.completion === undefined) return undefined;
    const promptTokens = this.prompt ?? 0;
    const completionTokens = this.completion ?? 0;
    return { promptTokens, completionTokens, totalTokens: this.total ?? promptTokens + completionTokens };
  }

  private set(u: Usage): void {
    this.prompt = u.promptTokens;
    this.completion = u.completionTokens;
    this.total = u.totalTokens;
  }
}

// Only events that carry a usage object are worth a JSON.parse; most chunks are content.
const USAGE_RE = /"usage"\s*:\s*\{/;

/**
 * Relays SSE bytes while reading the usage out of them.
 *
 * Without `stripChatUsageChunk`, every network chunk is passed on unchanged the moment it
 * arrives. With it (the gateway itself asked a chat upstream for `include_usage`), the
 * usage-only chunk (`choices: []`) is removed: complete events are passed on as soon as
 * they are complete and only a trailing partial event is held back, so the output
 * stays valid SSE.
 */
export class SseUsageTap implements ChunkTransform {
  private readonly parser = new SseParser();
  private readonly acc = new UsageAccumulator();
  private readonly strip: boolean;

  constructor(opts: { stripChatUsageChunk?: boolean } = {}) {
    this.strip = opts.stripChatUsageChunk === true;
  }

  usage(): Usage | undefined {
    return this.acc.usage();
  }

  step(chunk: Buffer): Buffer | undefined {
    const events = this.parser.push(chunk);
    if (!this.strip) {
      for (const ev of events) this.observe(ev);
      return chunk;
    }
    return this.keep(events);
  }

  finish(): Buffer | undefined {
    const events = this.parser.end();
    if (!this.strip) {
      for (const ev of events) this.observe(ev);
      return undefined;
    }
    return this.keep(events);
  }

  private keep(events: SseEvent[]): Buffer | undefined {
    let out = '';
    for (const ev of events) if (!this.observe(ev)) out += ev.raw;
    return out.length > 0 ? Buffer.from(out) : undefined;
  }

  /** Returns true when the event is a chat usage-only chunk. */
  private observe(ev: SseEvent): boolean {
    if (ev.data === undefined || !USAGE_RE.test(ev.data)) return false;
    const o = parseEventJson(ev);
    if (!o) return false;
    this.acc.observe(o);
    return Array.isArray(o.choices) && o.choices.length === 0 && isRecord(o.usage);
  }
}
