import WebSocket from 'ws';
import type { RealtimeUpstream, Usage } from '../providers/types.ts';
import { isResponseCreate, usageOfServerEvent } from './usage.ts';

export interface BridgeHooks {
  /** A `response.done` with usage passed from the upstream to the client; `startedAt` is when its response.create was sent. */
  onUsage(usage: Usage, startedAt: number): void;
  /** Called exactly once, when either side closed or failed. */
  onEnd(): void;
  now(): number;
}

/**
 * Proxies one session both ways, frame for frame (text stays text, binary stays binary), and
 * ends both sides together: whichever side closes or fails first, the other is closed too.
 */
export function bridge(client: WebSocket, upstream: RealtimeUpstream, hooks: BridgeHooks): void {
  let ended = false;
  let responseStartedAt = hooks.now();
  const end = (): void => {
    if (ended) return;
    ended = true;
    hooks.onEnd();
  };

  client.on('message', (data, isBinary) => {
    const payload = isBinary ? (data as Buffer) : data.toString();
    if (!isBinary && isResponseCreate(payload as string)) responseStartedAt = hooks.now();
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
    if (!isBinary && typeof data === 'string') {
      const usage = usageOfServerEvent(data);
      if (usage !== undefined) hooks.onUsage(usage, responseStartedAt);
    }
    if (client.readyState === WebSocket.OPEN) client.send(data, { binary: isBinary });
  });
  upstream.onClose((code, reason) => {
    end();
    if (client.readyState === WebSocket.OPEN || client.readyState === WebSocket.CONNECTING) {
      // 1006 (dropped) and 1005 (no code) may not be sent in a close frame.
      client.close(sendableCode(code, 1011), code === 1006 ? 'upstream connection lost' : reason.slice(0, 120));
    }
  });
}

/** A close code that may travel in a close frame; reserved ones become `fallback`. */
function sendableCode(code: number, fallback = 1000): number {
  if (code === 1000 || (code >= 1001 && code <= 1003) || (code >= 1007 && code <= 1014 && code !== 1010) || (code >= 3000 && code <= 4999)) return code;
  return fallback;
}
