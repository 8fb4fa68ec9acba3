import { Transform } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';

/** One server-sent event block (the lines up to a blank line). */
export interface SseEvent {
  /** The `event:` field; undefined when absent (the spec's default type "message"). */
  event?: string;
  /** The `data:` lines joined with `\n`; undefined for blocks without data (comments, keep-alives). */
  data?: string;
  id?: string;
  /** The block's text exactly as received, terminators included, so it can be re-emitted unchanged. */
  raw: string;
}

/** The largest event a parser assembles, and the error it throws beyond it. */
export interface SseLimit {
  maxEventBytes: number;
  tooLarge(): Error;
}

export const DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024;

const DEFAULT_LIMIT: SseLimit = {
  maxEventBytes: DEFAULT_MAX_EVENT_BYTES,
  tooLarge: () => new Error(`an SSE event exceeded ${DEFAULT_MAX_EVENT_BYTES} bytes`),
};

/**
 * Incremental SSE parser (WHATWG event-stream rules): lines end in `\r\n`, `\n` or `\r`,
 * a blank line dispatches, `data:` lines accumulate, `:` lines are comments. Feed it
 * network chunks in any split (even inside a UTF-8 sequence or between `\r` and `\n`).
 *
 * Each character is scanned once, however many chunks a line spans: the start of a line is kept
 * in pieces and joined once, when its end arrives. An event (its raw text) larger than the
 * limit's `maxEventBytes` makes `push` throw the limit's error.
 */
export class SseParser {
  private readonly decoder = new StringDecoder('utf8');
  private readonly limit: SseLimit;
  /** The start of the line being read (no terminator seen yet), in the pieces it arrived in. */
  private partial: string[] = [];
  /** Raw text of the block being assembled (complete lines only). */
  private blockRaw = '';
  /** Bytes of the block being assembled, the partial line included. */
  private blockBytes = 0;
  private event: string | undefined;
  private data: string[] = [];
  private id: string | undefined;
  /** The previous chunk ended in `\r`: a `\n` starting the next one belongs to it. */
  private skipLeadingLf = false;
  private started = false;

  constructor(limit: SseLimit = DEFAULT_LIMIT) {
    this.limit = limit;
  }

  /** True when no part of an event is held: everything pushed so far was returned as events. */
  get idle(): boolean {
    return this.partial.length === 0 && this.blockRaw.length === 0;
  }

  push(chunk: Buffer | string): SseEvent[] {
    let text = typeof chunk === 'string' ? chunk : this.decoder.write(chunk);
    if (!this.started && text.length > 0) {
      this.started = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    const out: SseEvent[] = [];
    let start = 0;
    if (this.skipLeadingLf && text.length > 0) {
      this.skipLeadingLf = false;
      if (text.charCodeAt(0) === 10) {
        this.blockRaw += '\n';
        start = 1;
      }
    }
    const len = text.length;
    /** Where the text after the last event dispatched in this chunk begins; -1: none dispatched. */
    let afterLastEvent = -1;
    for (let i = start; i < len; i++) {
      const c = text.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      let end = i + 1;
      if (c === 13) {
        if (i + 1 < len) {
          if (text.charCodeAt(i + 1) === 10) end = i + 2;
        } else {
          this.skipLeadingLf = true;
        }
      }
      let line = text.slice(start, i);
      if (this.partial.length > 0) {
        this.partial.push(line);
        line = this.partial.join('');
        this.partial = [];
      }
      if (this.line(line, text.slice(i, end), out)) afterLastEvent = end;
      start = end;
      i = end - 1;
    }
    if (start < len) this.partial.push(start === 0 ? text : text.slice(start));
    if (afterLastEvent === -1) {
      this.blockBytes += typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length;
    } else {
      this.blockBytes = afterLastEvent === len ? 0 : Buffer.byteLength(text.slice(afterLastEvent));
    }
    if (this.blockBytes > this.limit.maxEventBytes) throw this.limit.tooLarge();
    return out;
  }

  /**
   * End of stream. Returns what is left, including an unterminated last block: the spec discards it, but
   * callers looking for usage want a lenient reading, and relays must not lose its bytes.
   */
  end(): SseEvent[] {
    const tail = this.decoder.end();
    const out = tail ? this.push(tail) : [];
    if (this.partial.length > 0) {
      const rest = this.partial.join('');
      this.partial = [];
      this.line(rest, '', out);
    }
    if (this.blockRaw.length > 0) {
      out.push(this.build());
      this.resetBlock();
    }
    return out;
  }

  /** Takes one line in; returns true when it ended an event (a blank line). */
  private line(line: string, terminator: string, out: SseEvent[]): boolean {
    this.blockRaw += line + terminator;
    if (line.length === 0) {
      out.push(this.build());
      this.resetBlock();
      return true;
    }
    if (line.charCodeAt(0) === 58) return false; // ':' comment
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.event = value;
    else if (field === 'id') this.id = value;
    return false;
  }

  private build(): SseEvent {
    const ev: SseEvent = { raw: this.blockRaw };
    if (this.event !== undefined) ev.event = this.event;
    if (this.data.length > 0) ev.data = this.data.join('\n');
    if (this.id !== undefined) ev.id = this.id;
    return ev;
  }

  private resetBlock(): void {
    this.blockRaw = '';
    this.event = undefined;
    this.data = [];
    this.id = undefined;
  }
}

/** Serialises one event; `data` may contain newlines (split into several `data:` lines). */
export function formatSse(data: string, event?: string): string {
  const head = event === undefined ? '' : `event: ${event}\n`;
  if (data.indexOf('\n') === -1) return `${head}data: ${data}\n\n`;
  return `${head}${data.split('\n').map((l) => `data: ${l}`).join('\n')}\n\n`;
}

/** Parses an event's data as a JSON object; undefined for `[DONE]`, non-objects and bad JSON. */
export function parseEventJson(ev: SseEvent): Record<string, unknown> | undefined {
  if (ev.data === undefined || ev.data === '[DONE]') return undefined;
  try {
    const v: unknown = JSON.parse(ev.data);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A stream stage that rewrites SSE bytes event by event: each complete event goes to `onEvent`,
 * whose text is passed on; at the end, the unterminated last event (if any) goes to `onEvent`
 * and then `onEnd` adds its text. Used by the dialect translations. An event beyond `limit` fails
 * the stream with the limit's error.
 */
export function sseTransform(onEvent: (ev: SseEvent) => string, onEnd: () => string = () => '', limit?: SseLimit): Transform {
  const parser = new SseParser(limit);
  const rewrite = (events: SseEvent[]): string => {
    let out = '';
    for (const ev of events) out += onEvent(ev);
    return out;
  };
  return new Transform({
    // A translation that throws (or an event too large) fails this stream only, not the process.
    transform(chunk: Buffer, _encoding, callback) {
      let out: string;
      try {
        out = rewrite(parser.push(chunk));
      } catch (err) {
        callback(err as Error);
        return;
      }
      callback(null, out === '' ? undefined : out);
    },
    flush(callback) {
      let out: string;
      try {
        out = rewrite(parser.end()) + onEnd();
      } catch (err) {
        callback(err as Error);
        return;
      }
      callback(null, out === '' ? undefined : out);
    },
  });
}
