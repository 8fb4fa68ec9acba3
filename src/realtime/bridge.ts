import WebSocket from 'ws';
import type { RealtimeUpstream, Usage } from '../providers/types.ts';
import { clientEventOf, isResponseCreate, responseCreatedOf, usageOfServerEvent } from './usage.ts';

export interface BridgeHooks {
  /** A `response.done` with usage passed from the upstream to the client; `startedAt` is when its response.create was sent. */
  onUsage(usage: Usage, startedAt: number): void;
  /** Called exactly once, when either side closed or failed. */
  onEnd(): void;
  now(): number;
  /**
   * Asked before each response runs (a reached budget): the reason it must not, or undefined.
   * Absent: every response runs.
   */
  refusal?(): string | undefined;
}

/**
 * Proxies one session both ways, frame for frame (text stays text, binary stays binary), and
 * ends both sides together: whichever side closes or fails first, the other is closed too.
 *
 * Each response is admitted before it runs: a client's `response.create` that `hooks.refusal`
 * refuses is answered with an `error` event (code `budget_exceeded`) and never reaches the
 * upstream; a response the upstream starts by itself (server voice detection) while refused is
 * cancelled (`response.cancel`) as soon as its `response.created` arrives.
 */
export function bridge(client: WebSocket, upstream: RealtimeUpstream, hooks: BridgeHooks): void {
  let ended = false;
  let responseStartedAt = hooks.now();
  /** Responses the client asked for and this bridge admitted, whose `response.created` is still to come. */
  let admitted = 0;
  const end = (): void => {
    if (ended) return;
    ended = true;
    hooks.onEnd();
  };

  client.on('message', (data, isBinary) => {
    const payload = isBinary ? (data as Buffer) : data.toString();
    // The substring test keeps audio appends from being parsed; the parse tells a real
    // response.create from text that merely mentions one.
    const event = !isBinary && isResponseCreate(payload as string) ? clientEventOf(payload as string) : undefined;
    if (event?.type === 'response.create') {
      const refused = hooks.refusal?.();
      if (refused !== undefined) {
        sendError(client, refused, event.eventId);
        return;
      }
      responseStartedAt = hooks.now();
      admitted++;
    }
    upstream.send(payload, isBinary);
  });
  client.on('close', (code) => {
    end();
    upstream.close(sendableCode(code), '');
  });
  client.on('error', () => {
    end();
    upstream.close(1011, 'client error');
  });

  upstream.onMessage((data, isBinary) => {
    let cancel: { responseId: string; reason: string } | undefined;
    if (!isBinary && typeof data === 'string') {
      const usage = usageOfServerEvent(data);
      if (usage !== undefined) hooks.onUsage(usage, responseStartedAt);
      const created = responseCreatedOf(data);
      if (created !== undefined) {
        const reason = admitted > 0 ? undefined : hooks.refusal?.();
        if (admitted > 0) admitted--;
        if (reason !== undefined) cancel = { responseId: created.responseId, reason };
      }
    }
    if (client.readyState === WebSocket.OPEN) client.send(data, { binary: isBinary });
    if (cancel !== undefined) {
      upstream.send(JSON.stringify({ type: 'response.cancel', response_id: cancel.responseId }), false);
      sendError(client, cancel.reason, null);
    }
  });
  upstream.onClose((code, reason) => {
    end();
    if (client.readyState === WebSocket.OPEN || client.readyState === WebSocket.CONNECTING) {
      // 1006 (dropped) and 1005 (no code) may not be sent in a close frame.
      client.close(sendableCode(code, 1011), code === 1006 ? 'upstream connection lost' : reason.slice(0, 120));
    }
  });
}

let errorEvents = 0;

/** An `error` server event, as the realtime API sends them, about the client event `eventId`. */
function sendError(client: WebSocket, message: string, eventId: string | null): void {
  if (client.readyState !== WebSocket.OPEN) return;
  client.send(JSON.stringify({
    type: 'error',
    event_id: `event_floodgate_${++errorEvents}`,
    error: { type: 'rate_limit_error', code: 'budget_exceeded', message, param: null, event_id: eventId },
  }));
}

/** A close code that may travel in a close frame; reserved ones become `fallback`. */
function sendableCode(code: number, fallback = 1000): number {
  if (code === 1000 || (code >= 1001 && code <= 1003) || (code >= 1007 && code <= 1014 && code !== 1010) || (code >= 3000 && code <= 4999)) return code;
  return fallback;
}
