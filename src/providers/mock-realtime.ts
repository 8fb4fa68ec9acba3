import { randomBytes } from 'node:crypto';
import { isRecord } from '../shared/json.ts';
import { QueuedUpstream } from './realtime-socket.ts';
import { estimateTokens } from './usage.ts';

const FALLBACK_REPLY = 'Hello from the mock realtime session.';

/**
 * The built-in realtime session of the `mock` provider, so realtime works offline: it speaks a
 * small text-only subset of the OpenAI realtime protocol. `response.create` answers with
 * `response.created`, text deltas and `response.done` carrying usage; the reply echoes the last
 * user text sent with `conversation.item.create` (or the response's own `instructions`).
 */
export class MockRealtimeSession extends QueuedUpstream {
  private readonly model: string;
  private lastUserText = '';
  private promptText = '';
  private ended = false;
  private seq = 0;

  constructor(model: string) {
    super();
    this.model = model;
    this.emit({ type: 'session.created', session: this.session() });
  }

  send(data: Buffer | string, isBinary: boolean): void {
    if (this.ended || isBinary) return;
    let event: unknown;
    try {
      event = JSON.parse(data.toString());
    } catch {
      // reported below
    }
    if (!isRecord(event)) {
      this.emit({ type: 'error', error: { type: 'invalid_request_error', code: 'invalid_json', message: 'client events must be JSON objects', param: null, event_id: null } });
      return;
    }
    switch (event.type) {
      case 'session.update':
        this.emit({ type: 'session.updated', session: this.session() });
        return;
      case 'conversation.item.create':
        this.addItem(event.item);
        return;
      case 'response.create':
        this.respond(event.response);
        return;
      default:
        return; // audio buffers and the rest: accepted and ignored by the mock
    }
  }

  close(code = 1000, reason = ''): void {
    if (this.ended) return;
    this.ended = true;
    // The bridge learns of the end asynchronously, like from a real socket.
    queueMicrotask(() => this.closed(code, reason));
  }

  private addItem(item: unknown): void {
    if (!isRecord(item)) return;
    const content = item.content;
    const text = Array.isArray(content)
      ? content.map((c) => (isRecord(c) && typeof c.text === 'string' ? c.text : '')).join('')
      : '';
    if (item.role === 'user' && text !== '') this.lastUserText = text;
    this.promptText += text;
    const id = `item_${this.nextId()}`;
    this.emit({ type: 'conversation.item.created', previous_item_id: null, item: { id, object: 'realtime.item', ...item } });
  }

  private respond(options: unknown): void {
    const instructions = isRecord(options) && typeof options.instructions === 'string' ? options.instructions : '';
    const reply = this.lastUserText || instructions || FALLBACK_REPLY;
    const input = Math.max(1, estimateTokens(this.promptText + instructions));
    const output = estimateTokens(reply);
    const id = `resp_${this.nextId()}`;
    const itemId = `item_${this.nextId()}`;
    const base = { id, object: 'realtime.response', status_details: null, metadata: null };
    this.emit({ type: 'response.created', response: { ...base, status: 'in_progress', output: [], usage: null } });
    for (const delta of reply.match(/\S+\s*|\s+/g) ?? [reply]) {
      this.emit({ type: 'response.text.delta', response_id: id, item_id: itemId, output_index: 0, content_index: 0, delta });
    }
    this.emit({ type: 'response.text.done', response_id: id, item_id: itemId, output_index: 0, content_index: 0, text: reply });
    const item = { id: itemId, object: 'realtime.item', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'text', text: reply }] };
    this.emit({
      type: 'response.done',
      response: { ...base, status: 'completed', output: [item], usage: { total_tokens: input + output, input_tokens: input, output_tokens: output } },
    });
  }

  private session(): Record<string, unknown> {
    return { id: `sess_mock_${randomBytes(6).toString('hex')}`, object: 'realtime.session', model: this.model, modalities: ['text'] };
  }

  private emit(event: Record<string, unknown>): void {
    if (this.ended) return;
    const data = JSON.stringify({ event_id: `event_${this.nextId()}`, ...event });
    // Each event on its own turn, like frames arriving from a socket.
    setImmediate(() => {
      if (!this.ended) this.deliver(data, false);
    });
  }

  private nextId(): string {
    this.seq += 1;
    return `mock${this.seq}`;
  }
}
