/**
 * End-to-end: the bounds on client connections, tried with raw sockets against a real gateway.
 * A connection that does not complete its headers (idle, or a slow-loris trickle) within
 * `server.headers_timeout_seconds`, or its body within `server.request_timeout_seconds`, gets a
 * 408 and is closed; an idle keep-alive connection is closed after
 * `server.keep_alive_timeout_seconds`; connections beyond `server.max_connections` are closed at
 * once. None of them cuts an answer: a stream or a realtime session longer than every timeout
 * runs to its end.
 */
import assert from 'node:assert/strict';
import { connect as tcpConnect, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import { openaiProvider } from '../support/e2e.ts';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';

interface RawConnection {
  socket: Socket;
  /** Everything the gateway wrote on it. */
  received(): string;
  /** Resolves with the milliseconds from opening to the gateway's close. */
  closed: Promise<number>;
}

async function open(url: string): Promise<RawConnection> {
  const { hostname, port } = new URL(url);
  const started = performance.now();
  const socket = tcpConnect(Number(port), hostname);
  let text = '';
  socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
  socket.on('error', () => {});
  const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(performance.now() - started)));
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  return { socket, received: () => text, closed };
}

/** Writes `pieces` one at a time, `everyMs` apart, while the socket is open; returns a stop function. */
function trickle(socket: Socket, pieces: string[], everyMs: number): () => void {
  let i = 0;
  const timer = setInterval(() => {
    if (socket.destroyed || i >= pieces.length) return;
    socket.write(pieces[i++]!);
  }, everyMs);
  return () => clearInterval(timer);
}

/** Fails when `p` has not settled within `ms`. */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`${what}: still open after ${ms} ms`)), ms); })]);
  } finally {
    clearTimeout(timer);
  }
}

describe('connection timeouts', () => {
  let up: FakeUpstream;
  let gw: TestGateway;
  before(async () => {
    up = await startFakeUpstream({ models: ['gpt-x'], name: 'up' });
    gw = await startTestGateway({
      yaml: 'server: { headers_timeout_seconds: 1, request_timeout_seconds: 2, keep_alive_timeout_seconds: 1 }\n'
        + `providers:\n${openaiProvider('up', up.url, ['gpt-x'])}`,
    });
  });
  after(async () => {
    await gw.close();
    await up.close();
  });

  it('closes idle connections and slow-loris headers with a 408 after headers_timeout_seconds, serving others meanwhile', async () => {
    const idle = await Promise.all(Array.from({ length: 10 }, () => open(gw.url)));
    const slow = await Promise.all(Array.from({ length: 10 }, () => open(gw.url)));
    const headerLines = ['GET /health HTTP/1.1\r\n', 'Host: localhost\r\n', ...Array.from({ length: 1000 }, (_, i) => `X-Slow-${i}: y\r\n`)];
    const stops = slow.map((c) => trickle(c.socket, headerLines, 150));
    try {
      // The server keeps answering while they wait.
      const res = await fetch(`${gw.url}/health`);
      assert.equal(res.status, 200);
      const times = await within(Promise.all([...idle, ...slow].map((c) => c.closed)), 5000, 'a connection without complete headers');
      for (const ms of times) assert.ok(ms >= 900, `closed after ${Math.round(ms)} ms, before the timeout`);
      for (const c of [...idle, ...slow]) assert.match(c.received(), /^HTTP\/1\.1 408 /);
    } finally {
      for (const stop of stops) stop();
      for (const c of [...idle, ...slow]) c.socket.destroy();
    }
  });

  it('closes a request whose body trickles in with a 408 after request_timeout_seconds; nothing is sent upstream', async () => {
    up.reset();
    const c = await open(gw.url);
    const body = JSON.stringify({ model: 'up/gpt-x', messages: [{ role: 'user', content: 'hello' }] });
    c.socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
    const stop = trickle(c.socket, [...body], 200);
    try {
      const ms = await within(c.closed, 5000, 'a request with a slow body');
      assert.ok(ms >= 1900, `closed after ${Math.round(ms)} ms`);
      assert.match(c.received(), /^HTTP\/1\.1 408 /);
      assert.equal(up.callCount(), 0);
    } finally {
      stop();
      c.socket.destroy();
    }
  });

  it('closes an idle keep-alive connection after keep_alive_timeout_seconds', async () => {
    const c = await open(gw.url);
    c.socket.write('GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n');
    const ms = await within(c.closed, 4000, 'an idle keep-alive connection');
    assert.match(c.received(), /^HTTP\/1\.1 200 /);
    assert.ok(ms >= 900, `closed after ${Math.round(ms)} ms`);
  });

  it('does not cut a stream that lasts longer than every timeout', async () => {
    up.reset();
    up.setChunkDelay(100);
    try {
      const words = Array.from({ length: 40 }, (_, i) => `w${i}`).join(' ');
      const started = performance.now();
      const res = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'up/gpt-x', stream: true, messages: [{ role: 'user', content: words }] }),
      });
      assert.equal(res.status, 200);
      const text = await res.text();
      assert.ok(performance.now() - started > 3000, 'the stream outlasted the request, headers and keep-alive timeouts');
      assert.match(text, /w39/);
      assert.match(text, /data: \[DONE\]\n\n$/);
    } finally {
      up.setChunkDelay(0);
    }
  });

  it('does not cut a realtime session that lasts longer than every timeout', async () => {
    const ws = new WebSocket(`${gw.url.replace('http', 'ws')}/v1/realtime?model=up/gpt-x`);
    const seen: string[] = [];
    ws.on('message', (d) => seen.push((JSON.parse(d.toString()) as { type: string }).type));
    await new Promise<void>((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    try {
      await new Promise((r) => setTimeout(r, 3000));
      assert.equal(ws.readyState, WebSocket.OPEN);
      ws.send(JSON.stringify({ type: 'response.create' }));
      await within(new Promise<void>((resolve) => {
        const check = setInterval(() => {
          if (seen.includes('response.done')) {
            clearInterval(check);
            resolve();
          }
        }, 10);
      }), 3000, 'the session');
    } finally {
      ws.close();
    }
  });
});

describe('max_connections', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ yaml: 'server: { max_connections: 3 }\n' });
  });
  after(async () => gw.close());

  it('closes connections beyond the cap at once, and serves again once one is gone', async () => {
    const held = await Promise.all([open(gw.url), open(gw.url), open(gw.url)]);
    const extra = await open(gw.url);
    try {
      const ms = await within(extra.closed, 2000, 'a connection beyond max_connections');
      assert.equal(extra.received(), '');
      assert.ok(ms < 1000);
      // The held ones still work.
      held[0]!.socket.write('GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
      await within(held[0]!.closed, 2000, 'a request on a held connection');
      assert.match(held[0]!.received(), /^HTTP\/1\.1 200 /);
      const res = await fetch(`${gw.url}/health`, { headers: { connection: 'close' } });
      assert.equal(res.status, 200);
    } finally {
      for (const c of [...held, extra]) c.socket.destroy();
    }
  });
});
