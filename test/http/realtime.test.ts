import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { connect as tcpConnect } from 'node:net';
import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import WebSocket from 'ws';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';

interface Refusal { status: number; headers: Record<string, string | string[] | undefined>; body: string }

type Event = { type: string; [k: string]: unknown };
const received = new WeakMap<WebSocket, Event[]>();

/**
 * Opens a session; resolves with the open socket or the HTTP refusal read from `unexpected-response`.
 * Events are collected from the start: the first ones can arrive in the same read as the upgrade.
 */
function connect(url: string, options: { protocols?: string[]; headers?: Record<string, string> } = {}): Promise<WebSocket | Refusal> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, options.protocols ?? [], { headers: options.headers });
    const seen: Event[] = [];
    received.set(ws, seen);
    ws.on('message', (d) => seen.push(JSON.parse(d.toString()) as Event));
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => { body += c.toString(); });
      res.on('end', () => {
        req.destroy();
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
      });
    });
    ws.once('error', (err) => { if (ws.readyState !== WebSocket.CLOSED) reject(err); });
  });
}

function events(ws: WebSocket): Event[] {
  return received.get(ws)!;
}

async function waitFor(check: () => boolean): Promise<void> {
  for (let i = 0; i < 300 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(check(), 'condition never became true');
}

const closed = (ws: WebSocket): Promise<void> => new Promise((r) => (ws.readyState === WebSocket.CLOSED ? r() : ws.once('close', () => r())));

describe('realtime on the mock provider', () => {
  let gw: TestGateway;
  let url: string;
  before(async () => {
    gw = await startTestGateway({
      env: { MASTER_KEY: 'master' },
      yaml: 'rate_limits:\n  user_paths: [ { path: /, limits: [ { period: concurrent, max_requests: 1 }, { period: hour, max_tokens: 30 } ] } ]\n',
    });
    url = `${gw.url.replace('http', 'ws')}/v1/realtime?model=mock-1`;
  });
  after(async () => gw.close());

  it('refuses without a key, and for an unknown model, before the upgrade', async () => {
    assert.equal(((await connect(url)) as Refusal).status, 401);
    const r = (await connect(url.replace('mock-1', 'nope'), { headers: { authorization: 'Bearer master' } })) as Refusal;
    assert.equal(r.status, 404);
    assert.equal(JSON.parse(r.body).error.type, 'not_found_error');
  });

  it('proxies a session, refuses a second with 429 while the first holds the slot, charges usage', async () => {
    // Subprotocol auth, as the SDKs send it from browsers.
    const first = (await connect(url, { protocols: ['realtime', 'openai-insecure-api-key.master', 'openai-beta.realtime-v1'] })) as WebSocket;
    assert.equal(first.protocol, 'realtime');

    const second = (await connect(url, { headers: { authorization: 'Bearer master' } })) as Refusal;
    assert.equal(second.status, 429);
    assert.equal(second.headers['retry-after'], '1');
    assert.equal(second.headers['retry-after-ms'], '1000');
    assert.match(JSON.parse(second.body).error.message, /concurrent request limit of 1/);

    const seen = events(first);
    first.send(JSON.stringify({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'word '.repeat(100) }] } }));
    first.send(JSON.stringify({ type: 'response.create' }));
    await waitFor(() => seen.some((e) => e.type === 'response.done'));
    assert.equal(seen[0]?.type, 'session.created');
    assert.ok(seen.some((e) => e.type === 'response.text.delta'));
    first.close();
    await closed(first);

    // The slot is back, but the tokens of response.done were charged: the token rule now refuses.
    const third = await connect(url, { headers: { authorization: 'Bearer master' } });
    if (third instanceof WebSocket) {
      third.close();
      assert.fail('a third session was admitted although its tokens were spent');
    }
    assert.equal(third.status, 429);
    assert.match(JSON.parse(third.body).error.message, /token limit of 30/);
    assert.ok(third.headers['x-ratelimit-limit-tokens']);
    const done = seen.find((e) => e.type === 'response.done') as unknown as { response: { usage: { total_tokens: number } } };
    const usage = await fetch(`${gw.url}/v1/usage`, { headers: { authorization: 'Bearer master' } }).then((r) => r.json()) as { totals: { requests: number; total_tokens: number } };
    assert.equal(usage.totals.requests, 1, 'the session is one usage record');
    assert.equal(usage.totals.total_tokens, done.response.usage.total_tokens);
  });
});

describe('realtime on a provider type without realtime sessions', () => {
  let gw: TestGateway;
  before(async () => {
    // Nothing listens on port 1: a refusal must come before any upstream contact.
    gw = await startTestGateway({
      yaml: 'providers:\n  claude: { type: anthropic, base_url: "http://127.0.0.1:1", models: [claude-x] }\n  mock: { type: mock }\n' +
        'aliases:\n  mixed: { strategy: first, targets: [mock/mock-1, claude/claude-x] }\n',
    });
  });
  after(async () => gw.close());

  it('refuses with 400 unsupported_endpoint naming the provider, also for an alias with such a target', async () => {
    const base = `${gw.url.replace('http', 'ws')}/v1/realtime?model=`;
    for (const [model, provider] of [['claude/claude-x', 'claude'], ['mixed', 'claude']] as const) {
      const r = (await connect(base + model)) as Refusal;
      assert.equal(r.status, 400, model);
      assert.deepEqual(JSON.parse(r.body).error, {
        type: 'invalid_request_error',
        message: `realtime sessions are not supported by provider ${provider} (type anthropic)`,
        param: 'model',
        code: 'unsupported_endpoint',
      });
    }
    const served = await connect(`${base}mock-1`);
    assert.ok(served instanceof WebSocket, 'the mock target alone is served');
    served.close();
    await closed(served);
  });
});

describe('realtime forwarded to an openai provider', () => {
  let up: FakeUpstream;
  let gw: TestGateway;
  let url: string;
  before(async () => {
    up = await startFakeUpstream({ apiKey: 'up-key', models: ['gpt-rt'], name: 'up' });
    gw = await startTestGateway({
      yaml: `providers:\n  up:\n    type: openai\n    base_url: ${up.url}/v1\n    api_key: up-key\n    models: [gpt-rt, gpt-once]\n` +
        `  wrong:\n    type: openai\n    base_url: ${up.url}/v1\n    api_key: not-the-key\n    models: [gpt-rt]\n` +
        'rate_limits:\n  user_paths: [ { path: /, limits: [ { period: concurrent, max_requests: 1 } ] } ]\n' +
        '  models: [ { model: up/gpt-once, limits: [ { period: hour, max_requests: 1 } ] } ]\n',
    });
    url = `${gw.url.replace('http', 'ws')}/v1/realtime?model=up/gpt-rt`;
  });
  after(async () => {
    await gw.close();
    await up.close();
  });

  it('connects upstream with the provider key and model, relays events both ways', async () => {
    const ws = (await connect(url, { protocols: ['realtime'] })) as WebSocket;
    const seen = events(ws);
    ws.send(JSON.stringify({ type: 'response.create' }));
    await waitFor(() => seen.some((e) => e.type === 'response.done'));
    const session = up.realtime.sessions.at(-1)!;
    assert.equal(session.headers.authorization, 'Bearer up-key');
    assert.equal(session.headers['openai-beta'], 'realtime=v1');
    assert.match(session.url, /model=gpt-rt/);
    assert.deepEqual(session.received, [{ type: 'response.create' }]);
    assert.equal(seen[0]?.type, 'session.created');
    ws.close();
    await closed(ws);
    await waitFor(() => session.closed);
  });

  it('releases the slot when the upstream drops the session', async () => {
    const ws = (await connect(url)) as WebSocket;
    await waitFor(() => up.realtime.sessions.length > 0 && !up.realtime.sessions.at(-1)!.closed);
    assert.equal(((await connect(url)) as Refusal).status, 429);
    up.realtime.drop();
    await closed(ws);
    const again = await connect(url);
    assert.ok(again instanceof WebSocket, 'a new session is admitted after the drop');
    again.close();
    await closed(again);
  });

  it('answers a provider that refuses the handshake with a plain HTTP error, and frees the slot', async () => {
    const wrong = url.replace('up/gpt-rt', 'wrong/gpt-rt');
    for (let i = 0; i < 2; i++) {
      // Twice: the first refusal must not keep the only concurrency slot.
      const refusal = (await connect(wrong)) as Refusal;
      assert.equal(refusal.status, 401, refusal.body);
      const error = JSON.parse(refusal.body).error;
      assert.equal(error.type, 'provider_error');
      assert.equal(error.message, 'bad key');
    }
  });

  it('counts a session as one request against model rules', async () => {
    const once = url.replace('up/gpt-rt', 'up/gpt-once');
    const first = await connect(once);
    assert.ok(first instanceof WebSocket);
    first.close();
    await closed(first);
    const second = (await connect(once)) as Refusal;
    assert.equal(second.status, 429);
    assert.match(JSON.parse(second.body).error.message, /request limit of 1/);
    const other = await connect(url);
    assert.ok(other instanceof WebSocket, 'another model is not affected');
    other.close();
    await closed(other);
  });
});

describe('realtime with the official openai SDK', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({
      env: { MASTER_KEY: 'master' },
      yaml: 'rate_limits:\n  user_paths: [ { path: /, limits: [ { period: concurrent, max_requests: 1 } ] } ]\n',
    });
  });
  after(async () => gw.close());

  /** The SDK insists on wss: URLs; the gateway speaks plain HTTP here, so the TLS dial is replaced by a TCP one. */
  function sdkSession(): OpenAIRealtimeWS {
    const { hostname, port } = new URL(gw.url);
    const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'master' });
    return new OpenAIRealtimeWS({ model: 'mock-1', options: { createConnection: () => tcpConnect(Number(port), hostname) } }, client);
  }

  it('runs a text exchange through OpenAIRealtimeWS', async () => {
    const rt = sdkSession();
    const deltas: string[] = [];
    // The mock speaks the beta event names (response.text.delta); `event` sees every server event.
    rt.on('event', (e) => {
      const event = e as { type: string; delta?: string };
      if (event.type.endsWith('text.delta')) deltas.push(event.delta ?? '');
    });
    const done = new Promise<{ usage?: { total_tokens?: number } | null }>((resolve) => rt.on('response.done', (e) => resolve(e.response as { usage?: { total_tokens?: number } | null })));
    await new Promise<void>((resolve, reject) => {
      rt.socket.once('open', () => resolve());
      rt.on('error', reject);
    });
    rt.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hello from the sdk' }] } });
    rt.send({ type: 'response.create' });
    const response = await done;
    assert.equal(deltas.join(''), 'hello from the sdk');
    assert.ok((response.usage?.total_tokens ?? 0) > 0);
    rt.close();
    await closed(rt.socket as unknown as WebSocket);
  });

  it('refuses a second session while the first holds the only slot, and admits it once the first closed', async () => {
    const url = `${gw.url.replace('http', 'ws')}/v1/realtime?model=mock-1`;
    const auth = { headers: { authorization: 'Bearer master' } };
    const first = (await connect(url, auth)) as WebSocket;
    assert.ok(first instanceof WebSocket);
    const refused = (await connect(url, auth)) as Refusal;
    assert.equal(refused.status, 429);
    assert.equal(JSON.parse(refused.body).error.code, 'rate_limit_exceeded');
    first.close();
    await closed(first);
    let second: WebSocket | Refusal | undefined;
    // The gateway learns of the close a moment after the client does.
    for (let i = 0; i < 50 && !(second instanceof WebSocket); i++) {
      second = await connect(url, auth);
      if (!(second instanceof WebSocket)) await new Promise((r) => setTimeout(r, 20));
    }
    assert.ok(second instanceof WebSocket, 'the second session is admitted once the first closed');
    second.close();
    await closed(second);
  });

  it('frees the slot when the client vanishes without a close frame', async () => {
    const url = `${gw.url.replace('http', 'ws')}/v1/realtime?model=mock-1`;
    const auth = { headers: { authorization: 'Bearer master' } };
    const ws = (await connect(url, auth)) as WebSocket;
    assert.equal(((await connect(url, auth)) as Refusal).status, 429);
    ws.terminate();
    await closed(ws);
    let again: WebSocket | Refusal | undefined;
    for (let i = 0; i < 50; i++) {
      again = await connect(url, auth);
      if (again instanceof WebSocket) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.ok(again instanceof WebSocket, 'a new session is admitted once the dead one is noticed');
    again.close();
    await closed(again);
  });

  it('closes open sessions with 1001 when the gateway shuts down', async () => {
    const url = `${gw.url.replace('http', 'ws')}/v1/realtime?model=mock-1`;
    const ws = (await connect(url, { headers: { authorization: 'Bearer master' } })) as WebSocket;
    const code = new Promise<number>((resolve) => ws.once('close', (c) => resolve(c)));
    await gw.close();
    assert.equal(await code, 1001);
  });
});
