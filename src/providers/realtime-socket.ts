import WebSocket from 'ws';
import type { RealtimeUpstream } from './types.ts';

/**
 * Queueing and once-only close, shared by the implementations of `RealtimeUpstream` (a
 * provider's WebSocket here, the mock's built-in session in mock-realtime.ts).
 */
export abstract class QueuedUpstream implements RealtimeUpstream {
  private queue: Array<[Buffer | string, boolean]> | undefined = [];
  private messageListener: ((data: Buffer | string, isBinary: boolean) => void) | undefined;
  private closeListener: ((code: number, reason: string) => void) | undefined;
  private closedWith: [number, string] | undefined;

  abstract send(data: Buffer | string, isBinary: boolean): void;
  abstract close(code?: number, reason?: string): void;

  onMessage(listener: (data: Buffer | string, isBinary: boolean) => void): void {
    this.messageListener = listener;
    const queued = this.queue ?? [];
    this.queue = undefined;
    for (const [data, isBinary] of queued) listener(data, isBinary);
  }

  onClose(listener: (code: number, reason: string) => void): void {
    this.closeListener = listener;
    if (this.closedWith !== undefined) listener(...this.closedWith);
  }

  protected deliver(data: Buffer | string, isBinary: boolean): void {
    if (this.queue !== undefined) this.queue.push([data, isBinary]);
    else this.messageListener?.(data, isBinary);
  }

  protected closed(code: number, reason: string): void {
    if (this.closedWith !== undefined) return;
    this.closedWith = [code, reason];
    this.closeListener?.(code, reason);
  }
}

/** The upstream refused the WebSocket handshake (an HTTP answer instead of 101) or was unreachable. */
export class RealtimeConnectError extends Error {
  readonly status: number;
  readonly body: string;
  constructor(message: string, status: number, body = '') {
    super(message);
    this.name = 'RealtimeConnectError';
    this.status = status;
    this.body = body;
  }
}

class WsUpstream extends QueuedUpstream {
  private readonly socket: WebSocket;

  constructor(socket: WebSocket) {
    super();
    this.socket = socket;
    socket.on('message', (data, isBinary) => this.deliver(isBinary ? (data as Buffer) : data.toString(), isBinary));
    socket.on('close', (code, reason) => this.closed(code, reason.toString()));
    // An error is always followed by 'close'; listening keeps it from crashing the process.
    socket.on('error', () => {});
  }

  send(data: Buffer | string, isBinary: boolean): void {
    if (this.socket.readyState === WebSocket.OPEN) this.socket.send(data, { binary: isBinary });
  }

  close(code = 1000, reason = ''): void {
    if (this.socket.readyState === WebSocket.CONNECTING) this.socket.terminate();
    else if (this.socket.readyState === WebSocket.OPEN) this.socket.close(code, reason);
  }
}

/**
 * Opens the provider's realtime WebSocket and resolves once it is open, so a provider that refuses
 * can still be answered to the client as a plain HTTP error before its upgrade.
 */
export function connectRealtimeUpstream(url: string, headers: Record<string, string>, timeoutMs = 10_000): Promise<RealtimeUpstream> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { headers, perMessageDeflate: false, handshakeTimeout: timeoutMs, maxPayload: 0 });
    // Created now so messages sent right after the handshake are queued, not lost.
    const upstream = new WsUpstream(socket);
    let settled = false;
    socket.once('open', () => {
      settled = true;
      resolve(upstream);
    });
    socket.once('unexpected-response', (_req, res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        settled = true;
        reject(new RealtimeConnectError(`realtime upstream answered HTTP ${res.statusCode ?? 502}`, res.statusCode ?? 502, Buffer.concat(chunks).toString('utf8')));
      });
      res.on('error', () => {});
    });
    socket.once('close', () => {
      if (!settled) {
        settled = true;
        reject(new RealtimeConnectError('realtime upstream closed during the handshake', 502));
      }
    });
    socket.once('error', (err) => {
      if (settled) return;
      settled = true;
      socket.terminate();
      reject(new RealtimeConnectError(`realtime upstream is unreachable: ${err.message}`, 502));
    });
  });
}
