import { DEFAULT_MAX_EVENT_BYTES, SseParser, parseEventJson, type SseEvent, type SseLimit } from './sse.ts';
import type { Usage } from './types.ts';
import type { ChunkStage } from './upstream.ts';
import { normalizeUsage, usageFromBody } from './usage.ts';
import { isRecord } from '../shared/json.ts';
import { sumCounts } from '../shared/values.ts';

/**
 * Collects the usage reported anywhere in an SSE stream of any supported dialect:
 * chat (final usage chunk), Responses (`response.completed`), Anthropic (input tokens in
 * `message_start`, output tokens in `message_delta`). Later reports replace earlier ones.
 */
export class UsageAccumulator {
  /** The model named by the events seen (chat chunks, `response`, Anthropic's `message`). */
  model: string | undefined;
  private prompt: number | undefined;
  private completion: number | undefined;
  private total: number | undefined;
  private cached: number | undefined;

  observe(o: Record<string, unknown>): void {
    this.model = modelOf(o) ?? modelOf(o.response) ?? modelOf(o.message) ?? this.model;
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
    const usage: Usage = { promptTokens, completionTokens, totalTokens: this.total ?? sumCounts(promptTokens, completionTokens) };
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

function modelOf(o: unknown): string | undefined {
  return isRecord(o) && typeof o.model === 'string' && o.model !== '' ? o.model : undefined;
}

/**
 * The usage tap of a relayed SSE answer: the relay's stage (a ChunkStage) that passes the answer
 * on and reads the usage reported in it. Events come from the one SSE parser; only an event whose
 * data holds a `"usage"` object is parsed (JSON.parse of that event alone), the content deltas
 * are not.
 *
 * A network chunk made of whole events is passed on unchanged the moment it arrives; of a chunk
 * that ends inside an event, the whole events go on at once and the partial one when its end
 * arrives. So the client never holds half an event: when the stream fails (the upstream breaks
 * off, or an event grows beyond `limit`), the error event that follows is read on its own.
 * With `stripChatUsageChunk` (the gateway itself asked a chat upstream for `include_usage`), the
 * usage-only chunk (`choices: []`) is removed as well.
 */
export class SseUsageTap implements ChunkStage {
  private readonly parser: SseParser;
  private readonly acc = new UsageAccumulator();
  private readonly strip: boolean;
  private readonly maxEventBytes: number;
  /** The last event dropped ended in a CR whose LF may still come. */
  private droppedCr = false;
  /** Everything passed so far ended with a whole event: the parser holds nothing, not even a byte. */
  private atEventEnd = false;

  constructor(opts: { stripChatUsageChunk?: boolean; limit?: SseLimit } = {}) {
    this.strip = opts.stripChatUsageChunk === true;
    this.parser = new SseParser(opts.limit);
    this.maxEventBytes = opts.limit?.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES;
  }

  usage(): Usage | undefined {
    return this.acc.usage();
  }

  /** The model named by the events that reported usage. */
  model(): string | undefined {
    return this.acc.model;
  }

  /** What to pass on for `chunk`; throws the limit's error when an event grows beyond it. */
  chunk(chunk: Buffer): Buffer | string | undefined {
    // Whole events that report no usage (the content deltas) pass on unread: the parser would
    // only find nothing in them. The first chunk is always read (the parser's start, a BOM).
    if (this.atEventEnd && !this.droppedCr && chunk.length <= this.maxEventBytes && endsAnEvent(chunk) && !namesUsageObject(chunk)) return chunk;
    const heldNothing = this.parser.idle;
    const events = this.parser.push(chunk);
    // Ending in a line break, the chunk left nothing in the UTF-8 decoder either.
    const wholeEvents = heldNothing && this.parser.idle && isLineBreak(chunk[chunk.length - 1]);
    this.atEventEnd = this.parser.idle && endsAnEvent(chunk);
    return this.pass(events, wholeEvents ? chunk : undefined);
  }

  /** What to pass on at the end: an unterminated last event (the spec discards it, but usage is read leniently and a relay must not lose bytes). */
  end(): Buffer | string | undefined {
    return this.pass(this.parser.end(), undefined);
  }

  /** Reads the events' usage; returns what to pass on: `chunk` when it holds exactly these events and none is dropped. */
  private pass(events: SseEvent[], chunk: Buffer | undefined): Buffer | string | undefined {
    // Events before `seen - 1` were read and kept; the one at `seen - 1` was read and is dropped.
    let seen = 0;
    if (chunk !== undefined && !this.droppedCr) {
      while (seen < events.length && this.keep(events[seen]!)) seen++;
      if (seen === events.length) return chunk;
      seen++;
    }
    // An event's raw text starts with a LF when that LF ends the previous event's CRLF, split
    // across network chunks: it goes (or stays) with the previous event, so the output is
    // byte for byte the input without the dropped events.
    let out = '';
    for (let i = 0; i < events.length; i++) {
      const ev = events[i]!;
      let raw = ev.raw;
      if (this.droppedCr && raw.charCodeAt(0) === LF) raw = raw.slice(1);
      this.droppedCr = false;
      if (i < seen - 1 || (i >= seen && this.keep(ev))) {
        out += raw;
        continue;
      }
      if (raw.charCodeAt(0) === LF) out += '\n';
      this.droppedCr = raw.charCodeAt(raw.length - 1) === CR;
    }
    return out === '' ? undefined : out;
  }

  /** Reads the event's usage; false when it is to be dropped. */
  private keep(ev: SseEvent): boolean {
    return !(this.observe(ev) && this.strip);
  }

  /** Returns true when the event is a chat usage-only chunk. */
  private observe(ev: SseEvent): boolean {
    if (ev.data === undefined || !USAGE_OBJECT.test(ev.data)) return false;
    const o = parseEventJson(ev);
    if (!o) return false;
    this.acc.observe(o);
    return Array.isArray(o.choices) && o.choices.length === 0 && isRecord(o.usage);
  }
}

const LF = 0x0a;
const CR = 0x0d;

function isLineBreak(byte: number | undefined): boolean {
  return byte === LF || byte === CR;
}
/** Chat deltas carry `"usage":null`; only an object is worth parsing the event for. */
const USAGE_OBJECT = /"usage"\s*:\s*\{/;
const USAGE_KEY = Buffer.from('"usage"');

/** Whether the bytes hold `"usage"` followed by an object (as USAGE_OBJECT, without decoding them). */
function namesUsageObject(chunk: Buffer): boolean {
  for (let at = chunk.indexOf(USAGE_KEY); at !== -1; at = chunk.indexOf(USAGE_KEY, at + USAGE_KEY.length)) {
    let i = at + USAGE_KEY.length;
    while (isJsonSpace(chunk[i])) i++;
    if (chunk[i] !== COLON) continue;
    i++;
    while (isJsonSpace(chunk[i])) i++;
    if (chunk[i] === OPEN_BRACE) return true;
  }
  return false;
}

/**
 * Whether the bytes end with a blank line ending in LF: the end of an event, after which the
 * parser holds nothing (a final CR could still be followed by its LF).
 */
function endsAnEvent(chunk: Buffer): boolean {
  const n = chunk.length;
  if (n < 2 || chunk[n - 1] !== LF) return false;
  if (chunk[n - 2] === LF) return true;
  return chunk[n - 2] === CR && n >= 3 && isLineBreak(chunk[n - 3]);
}

function isJsonSpace(byte: number | undefined): boolean {
  return byte === 0x20 || byte === LF || byte === CR || byte === 0x09;
}

const COLON = 0x3a;
const OPEN_BRACE = 0x7b;
