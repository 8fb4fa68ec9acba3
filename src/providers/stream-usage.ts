import { SseParser, parseEventJson } from './sse.ts';
import type { SseEvent } from './sse.ts';
import type { Usage } from './types.ts';
import type { ChunkTransform } from './upstream.ts';
import { normalizeUsage, usageAtKey, usageFromBody } from './usage.ts';

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

  /** Replaces what was seen so far: a usage report is cumulative. */
  set(u: Usage): void {
    this.prompt = u.promptTokens;
    this.completion = u.completionTokens;
    this.total = u.totalTokens;
  }
}

const USAGE_KEY = Buffer.from('"usage"');
const USAGE_OBJECT_RE = /"usage"\s*:\s*\{/;
const CHOICES_KEY = Buffer.from('"choices"');
const LF = 0x0a;
const CR = 0x0d;

/**
 * Relays SSE bytes while reading the usage out of them.
 *
 * Most events are content deltas that carry no usage, so bytes are only split at event ends and
 * searched for a `"usage": {` key; only a run of events containing one is decoded and parsed.
 * Without `stripChatUsageChunk`, every network chunk is passed on unchanged the moment it
 * arrives. With it (the gateway itself asked a chat upstream for `include_usage`), the
 * usage-only chunk (`choices: []`) is removed: complete events are passed on as soon as they are
 * complete and only a trailing partial event is held back, so the output stays valid SSE.
 */
export class SseUsageTap implements ChunkTransform {
  private readonly acc = new UsageAccumulator();
  private readonly strip: boolean;
  /** Bytes after the last complete event: the start of an event still arriving. */
  private carry: Buffer | undefined;

  constructor(opts: { stripChatUsageChunk?: boolean } = {}) {
    this.strip = opts.stripChatUsageChunk === true;
  }

  usage(): Usage | undefined {
    return this.acc.usage();
  }

  step(chunk: Buffer): Buffer | undefined {
    const data = this.carry === undefined ? chunk : Buffer.concat([this.carry, chunk]);
    const cut = endOfLastEvent(data);
    this.carry = cut < data.length ? data.subarray(cut) : undefined;
    if (cut === 0) return this.strip ? undefined : chunk;
    const complete = cut === data.length ? data : data.subarray(0, cut);
    const out = this.scan(complete);
    return this.strip ? out : chunk;
  }

  finish(): Buffer | undefined {
    const rest = this.carry;
    this.carry = undefined;
    // An unterminated last event: the spec discards it, but usage is read leniently and a relay must not lose bytes.
    if (rest === undefined) return undefined;
    const out = this.scan(rest);
    return this.strip ? out : undefined;
  }

  /**
   * Reads the usage of each event in `events` carrying a usage object, decoding only those
   * events. Returns the bytes to pass on: `events` itself, unless a usage-only chunk is stripped.
   */
  private scan(events: Buffer): Buffer | undefined {
    let kept: Buffer[] | undefined;
    let from = 0;
    for (let at = usageObjectAt(events, 0); at >= 0;) {
      const start = eventStart(events, at);
      const end = eventEnd(events, at);
      if (this.observeEvent(events, start, end, at) && this.strip) {
        (kept ??= []).push(events.subarray(from, start));
        from = end;
      }
      at = usageObjectAt(events, end);
    }
    if (kept === undefined) return events;
    kept.push(events.subarray(from));
    const out = Buffer.concat(kept);
    return out.length > 0 ? out : undefined;
  }

  /**
   * Reads the usage of the event in `events[start, end)` whose usage key is at `at`; true when
   * it is a chat usage-only chunk. A chat chunk (it has `choices`) has its usage at the top
   * level: that object alone is parsed. Other dialects' events are parsed whole.
   */
  private observeEvent(events: Buffer, start: number, end: number, at: number): boolean {
    const choices = events.indexOf(CHOICES_KEY, start);
    if (choices >= 0 && choices < end) {
      const usage = usageAtKey(events, at, end);
      if (usage !== undefined) {
        this.acc.set(usage);
        return isEmptyList(events, choices + CHOICES_KEY.length, end);
      }
    }
    return this.observeEvents(events.subarray(start, end));
  }

  /** Returns true when one of the events is a chat usage-only chunk. */
  private observeEvents(bytes: Buffer): boolean {
    const parser = new SseParser();
    let usageOnly = false;
    for (const ev of [...parser.push(bytes), ...parser.end()]) usageOnly = this.observe(ev) || usageOnly;
    return usageOnly;
  }

  /** Returns true when the event is a chat usage-only chunk. */
  private observe(ev: SseEvent): boolean {
    if (ev.data === undefined || !USAGE_OBJECT_RE.test(ev.data)) return false;
    const o = parseEventJson(ev);
    if (!o) return false;
    this.acc.observe(o);
    return Array.isArray(o.choices) && o.choices.length === 0 && isRecord(o.usage);
  }
}

// Event ends are found by scanning bytes here rather than with Buffer#indexOf per separator:
// events are a few hundred bytes, and each native call costs more than the scan.

/** Where the event around `at` starts: just after the blank line before it, or 0. */
function eventStart(data: Buffer, at: number): number {
  for (let e = at; e >= 2; e--) if (blankLineEndsAt(data, e)) return e;
  return 0;
}

/** Where the event around `at` ends: just after the blank line after it, or the end of `data`. */
function eventEnd(data: Buffer, at: number): number {
  for (let e = at + 2; e <= data.length; e++) if (blankLineEndsAt(data, e)) return e;
  return data.length;
}

/** The offset just after the last blank line in `data`, 0 when there is none. */
function endOfLastEvent(data: Buffer): number {
  // Upstreams flush whole events: the usual chunk ends exactly at a blank line, found at once.
  return eventStart(data, data.length);
}

/**
 * Whether a blank line (an event end) ends just before `end`: `\n\n`, `\r\n\r\n`,
 * `\n\r\n` or `\r\r`, the line-ending styles servers use.
 */
function blankLineEndsAt(data: Buffer, end: number): boolean {
  const last = data[end - 1];
  if (last === LF) {
    const before = data[end - 2];
    return before === LF || (before === CR && data[end - 3] === LF);
  }
  return last === CR && data[end - 2] === CR;
}

/** The offset of the next `"usage"` key with an object value from `from`, or -1: chat chunks carry `"usage":null` on every delta. */
function usageObjectAt(data: Buffer, from: number): number {
  for (let at = data.indexOf(USAGE_KEY, from); at >= 0; at = data.indexOf(USAGE_KEY, at + USAGE_KEY.length)) {
    let i = at + USAGE_KEY.length;
    while (i < data.length && isSpace(data[i]!)) i++;
    if (data[i] !== 0x3a) continue; // ':'
    i++;
    while (i < data.length && isSpace(data[i]!)) i++;
    if (data[i] === 0x7b) return at; // '{'
  }
  return -1;
}

/** True when the value after a key ending at `from` is `[]`. */
function isEmptyList(data: Buffer, from: number, end: number): boolean {
  let i = from;
  while (i < end && isSpace(data[i]!)) i++;
  if (data[i] !== 0x3a) return false; // ':'
  i++;
  while (i < end && isSpace(data[i]!)) i++;
  if (data[i] !== 0x5b) return false; // '['
  i++;
  while (i < end && isSpace(data[i]!)) i++;
  return data[i] === 0x5d; // ']'
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x09;
}
