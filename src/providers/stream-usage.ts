import { SseParser, parseEventJson } from './sse.ts';
import type { SseEvent } from './sse.ts';
import type { Usage } from './types.ts';
import type { ChunkTransform } from './upstream.ts';
import { normalizeUsage, skipSpaces, usageAtKey, usageFromBody, valueAfterKey } from './usage.ts';
import { isRecord } from '../shared/json.ts';

/**
 * Collects the usage reported anywhere in an SSE stream of any supported dialect:
 * chat (final usage chunk), Responses (`response.completed`), Anthropic (input tokens in
 * `message_start`, output tokens in `message_delta`). Later reports replace earlier ones.
 */
export class UsageAccumulator {
  private prompt: number | undefined;
  private completion: number | undefined;
  private total: number | undefined;
  private cached: number | undefined;

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
    const usage: Usage = { promptTokens, completionTokens, totalTokens: this.total ?? promptTokens + completionTokens };
    if (this.cached !== undefined) usage.cachedPromptTokens = this.cached;
    return usage;
  }

  /** Replaces what was seen so far: a usage report is cumulative. */
  set(u: Usage): void {
    this.prompt = u.promptTokens;
    this.completion = u.completionTokens;
    this.total = u.totalTokens;
    this.cached = u.cachedPromptTokens;
  }
}

const LF = 0x0a;
const CR = 0x0d;
const QUOTE = 0x22;
/** Keys without their opening quote (see keyAt). */
const USAGE_NEEDLE = 'usage"';
const CHOICES_NEEDLE = 'choices"';

/**
 * Relays SSE bytes while reading the usage out of them.
 *
 * Most events are content deltas that carry no usage, so bytes are only split at event ends and
 * searched for a `"usage": {` key; only a run of events containing one is decoded and parsed.
 * Without `stripChatUsageChunk`, every network chunk is passed on unchanged the moment it
 * arrives. With it (the gateway itself asked a chat upstream for `include_usage`), the
 * usage-only chunk (`choices: []`) is removed: complete events are passed on as soon as they are
 * complete and only a trailing partial event is held back, so the output stays valid SSE.
 *
 * The searching is done on the bytes decoded as latin1 (one character a byte, so offsets are
 * byte offsets): V8's own string search needs no call into C++ per search, as `Buffer#indexOf`
 * does, and keys are searched from their rarer letters (`usage"`, then the quote before), not from
 * the quote that starts every key and string of a JSON chunk. Bytes passed on are never decoded.
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
    const text = data.toString('latin1');
    const cut = eventStart(text, text.length);
    this.carry = cut < data.length ? data.subarray(cut) : undefined;
    if (cut === 0) return this.strip ? undefined : chunk;
    const out = this.scan(data, text, cut);
    return this.strip ? out : chunk;
  }

  finish(): Buffer | undefined {
    const rest = this.carry;
    this.carry = undefined;
    // An unterminated last event: the spec discards it, but usage is read leniently and a relay must not lose bytes.
    if (rest === undefined) return undefined;
    const out = this.scan(rest, rest.toString('latin1'), rest.length);
    return this.strip ? out : undefined;
  }

  /**
   * Reads the usage of each event in `data[0, limit)` carrying a usage object (`text` is `data`
   * decoded as latin1). Returns the bytes to pass on: those, unless a usage-only chunk is stripped.
   */
  private scan(data: Buffer, text: string, limit: number): Buffer | undefined {
    let kept: Buffer[] | undefined;
    let from = 0;
    // Without a CR anywhere, every blank line is `\n\n` and V8's indexOf finds it; otherwise
    // the character-by-character check handles every line-ending style.
    const lfOnly = text.indexOf('\r') < 0;
    let previousEnd = 0;
    for (let at = usageObjectAt(text, 0, limit); at >= 0;) {
      const start = lfOnly ? lfEventStart(text, previousEnd, at) : eventStart(text, at);
      const end = lfOnly ? lfEventEnd(text, at, limit) : eventEnd(text, at, limit);
      if (this.observeEvent(data, text, start, end, at) && this.strip) {
        (kept ??= []).push(data.subarray(from, start));
        from = end;
      }
      previousEnd = end;
      at = usageObjectAt(text, end, limit);
    }
    const events = limit === data.length ? data : data.subarray(0, limit);
    if (kept === undefined) return events;
    kept.push(data.subarray(from, limit));
    const out = Buffer.concat(kept);
    return out.length > 0 ? out : undefined;
  }

  /**
   * Reads the usage of the event in `[start, end)` whose usage key is at `at`; true when it is a
   * chat usage-only chunk. A chat chunk (it has `choices`) has its usage at the top level: that
   * object alone is parsed. Other dialects' events are parsed whole.
   */
  private observeEvent(data: Buffer, text: string, start: number, end: number, at: number): boolean {
    const choices = keyAt(text, CHOICES_NEEDLE, start, end);
    if (choices >= 0) {
      const usage = usageAtKey(text, at, end);
      if (usage !== undefined) {
        this.acc.set(usage);
        return isEmptyList(text, choices + 1 + CHOICES_NEEDLE.length, end);
      }
    }
    return this.observeEvents(data.subarray(start, end));
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

const USAGE_OBJECT_RE = /"usage"\s*:\s*\{/;

/** Where the event around `at` starts: just after the blank line before it, or 0. */
function eventStart(text: string, at: number): number {
  for (let e = at; e >= 2; e--) if (blankLineEndsAt(text, e)) return e;
  return 0;
}

/** Where the event around `at` ends: just after the blank line after it, or `limit`. */
function eventEnd(text: string, at: number, limit: number): number {
  for (let e = at + 2; e <= limit; e++) if (blankLineEndsAt(text, e)) return e;
  return limit;
}

/**
 * eventStart for text whose only blank lines are `\n\n`, given an event start `from` at or before
 * `at`. Searched forwards: V8's lastIndexOf is a call into its C++ runtime, indexOf is not.
 */
function lfEventStart(text: string, from: number, at: number): number {
  let start = from;
  for (let blank = text.indexOf('\n\n', start); blank >= 0 && blank + 2 <= at; blank = text.indexOf('\n\n', start)) start = blank + 2;
  return start;
}

/** eventEnd for text whose only blank lines are `\n\n`. */
function lfEventEnd(text: string, at: number, limit: number): number {
  const blank = text.indexOf('\n\n', at);
  return blank < 0 || blank + 2 > limit ? limit : blank + 2;
}

/**
 * Whether a blank line (an event end) ends just before `end`: `\n\n`, `\r\n\r\n`,
 * `\n\r\n` or `\r\r`, the line-ending styles servers use.
 */
function blankLineEndsAt(text: string, end: number): boolean {
  const last = text.charCodeAt(end - 1);
  if (last === LF) {
    const before = text.charCodeAt(end - 2);
    return before === LF || (before === CR && text.charCodeAt(end - 3) === LF);
  }
  return last === CR && text.charCodeAt(end - 2) === CR;
}

/**
 * The offset of the next key `"name"` in `[from, end)`, or -1; `needle` is `name"`. Searched
 * without its opening quote and then checked for it: the first letter of a name is rare in JSON
 * text, a quote is everywhere.
 */
function keyAt(text: string, needle: string, from: number, end: number): number {
  for (let at = text.indexOf(needle, from + 1); at >= 0 && at + needle.length <= end; at = text.indexOf(needle, at + needle.length)) {
    if (text.charCodeAt(at - 1) === QUOTE) return at - 1;
  }
  return -1;
}

/** The offset of the next `"usage"` key with an object value in `[from, limit)`, or -1: chat chunks carry `"usage":null` on every delta. */
function usageObjectAt(text: string, from: number, limit: number): number {
  for (let at = keyAt(text, USAGE_NEEDLE, from, limit); at >= 0; at = keyAt(text, USAGE_NEEDLE, at + 1, limit)) {
    if (text.charCodeAt(valueAfterKey(text, at + 1 + USAGE_NEEDLE.length, limit)) === 0x7b) return at; // '{'
  }
  return -1;
}

/** True when the value after a key ending at `from` is `[]`. */
function isEmptyList(text: string, from: number, end: number): boolean {
  const open = valueAfterKey(text, from, end);
  if (open < 0 || text.charCodeAt(open) !== 0x5b) return false; // '['
  return text.charCodeAt(skipSpaces(text, open + 1, end)) === 0x5d; // ']'
}
