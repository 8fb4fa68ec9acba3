import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';
import { anthropicProvider, assertOpenAiError, openaiProvider } from '../support/e2e.ts';

const MASTER = 'pt-master';
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

describe('passthrough /p/{provider}/{path}', () => {
  let up: FakeUpstream;
  let ant: FakeUpstream;
  let gw: TestGateway;

  before(async () => {
    up = await startFakeUpstream({ apiKey: 'k-up', name: 'up', models: ['gpt-x', 'gpt-y'] });
    ant = await startFakeUpstream({ apiKey: 'k-ant', name: 'ant' });
    gw = await startTestGateway({
      yaml: 'providers:\n' + openaiProvider('up', up.url, ['gpt-x']) + anthropicProvider('ant', ant.url, ['claude-x']),
      env: { MASTER_KEY: MASTER },
    });
  });
  after(async () => {
    await gw?.close();
    await up?.close();
    await ant?.close();
  });

  it('POST /p/up/chat/completions reaches the upstream with the provider credentials, not the client key', async () => {
    up.reset();
    const body = { model: 'gpt-x', messages: [{ role: 'user', content: 'raw passthrough' }] };
    const res = await gw.request('POST', '/p/up/chat/completions', { body, headers: bearer(MASTER) });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json().choices[0].message.content, 'raw passthrough');
    assert.equal(up.calls.length, 1);
    const call = up.calls[0]!;
    assert.equal(call.method, 'POST');
    assert.equal(call.path, '/v1/chat/completions');
    assert.equal(call.headers.authorization, 'Bearer k-up');
    assert.ok(!JSON.stringify(call.headers).includes(MASTER), 'the client key never reaches the upstream');
    assert.deepEqual(call.body, body, 'the body is forwarded untouched (model not rewritten)');
  });

  it('GET /p/up/models works and forwards the query string', async () => {
    up.reset();
    const res = await gw.request('GET', '/p/up/models?limit=5', { headers: bearer(MASTER) });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json().data.map((m: { id: string }) => m.id), ['gpt-x', 'gpt-y']);
    assert.equal(up.calls[0]?.method, 'GET');
    assert.equal(up.calls[0]?.path, '/v1/models');
    assert.equal(up.calls[0]?.query, '?limit=5');
    assert.equal(up.calls[0]?.headers.authorization, 'Bearer k-up');
  });

  it('streams through the passthrough too', async () => {
    up.reset();
    const res = await gw.request('POST', '/p/up/chat/completions', {
      body: { model: 'gpt-x', stream: true, messages: [{ role: 'user', content: 'a b c' }] },
      headers: bearer(MASTER),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
    assert.match(res.text, /data: \[DONE\]/);
  });

  it('an anthropic provider gets its x-api-key on passthrough', async () => {
    ant.reset();
    const res = await gw.request('POST', '/p/ant/v1/messages', {
      body: { model: 'claude-x', max_tokens: 10, messages: [{ role: 'user', content: 'hi ant' }] },
      headers: { ...bearer(MASTER), 'anthropic-version': '2023-06-01' },
    });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json().content[0].text, 'hi ant');
    assert.equal(ant.calls[0]?.path, '/v1/messages');
    assert.equal(ant.calls[0]?.headers['x-api-key'], 'k-ant');
    assert.ok(!JSON.stringify(ant.calls[0]?.headers).includes(MASTER));
  });

  it('upstream errors are passed on', async () => {
    up.reset();
    up.failNext(1, { status: 500 });
    const res = await gw.request('POST', '/p/up/chat/completions', { body: { model: 'gpt-x', messages: [{ role: 'user', content: 'x' }] }, headers: bearer(MASTER) });
    assertOpenAiError(res, 500, 'provider_error');
  });

  it('an unknown provider → 404 not_found_error', async () => {
    assertOpenAiError(await gw.request('POST', '/p/nobody/chat/completions', { body: {}, headers: bearer(MASTER) }), 404, 'not_found_error');
    assertOpenAiError(await gw.request('GET', '/p/nobody/models', { headers: bearer(MASTER) }), 404, 'not_found_error');
  });

  it('requires a key', async () => {
    up.reset();
    assertOpenAiError(await gw.request('GET', '/p/up/models'), 401, 'authentication_error');
    assert.equal(up.callCount(), 0);
  });

  it('takes an upload sent with Expect: 100-continue (curl, over 1 MB): the body is forwarded, the header is not', async () => {
    up.reset();
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-expect-'));
    try {
      const content = 'x'.repeat(2 * 1024 * 1024);
      const file = join(dir, 'body.json');
      writeFileSync(file, JSON.stringify({ model: 'gpt-x', messages: [{ role: 'user', content }] }));
      const { stdout, stderr } = await promisify(execFile)('curl', [
        '-sS', '-v', '--max-time', '20', '-H', `authorization: Bearer ${MASTER}`, '-H', 'content-type: application/json',
        '-H', 'expect: 100-continue', '--data-binary', `@${file}`, '-w', '\n%{http_code}', `${gw.url}/p/up/chat/completions`,
      ], { maxBuffer: 16 * 1024 * 1024 });
      assert.match(stderr, /< HTTP\/1\.1 100 Continue/);
      const status = stdout.slice(stdout.lastIndexOf('\n') + 1);
      assert.equal(status, '200', stdout.slice(0, 500));
      assert.equal(JSON.parse(stdout.slice(0, stdout.lastIndexOf('\n'))).choices[0].message.content, content);
      assert.equal(up.callCount(), 1);
      assert.equal(up.calls[0]?.headers.expect, undefined);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  for (const method of ['TRACE', 'OPTIONS', 'HEAD']) {
    it(`refuses ${method} with a 405 naming the methods it forwards, and sends nothing upstream`, async () => {
      up.reset();
      const res = await new Promise<{ status: number; allow: string | undefined; body: string }>((resolve, reject) => {
        const url = new URL(`${gw.url}/p/up/models`);
        const req = httpRequest({ host: url.hostname, port: url.port, path: url.pathname, method, headers: bearer(MASTER), agent: false }, (r) => {
          let body = '';
          r.on('data', (c: Buffer) => (body += c.toString()));
          r.on('end', () => resolve({ status: r.statusCode ?? 0, allow: r.headers.allow, body }));
        });
        req.on('error', reject);
        req.end();
      });
      assert.equal(res.status, 405);
      assert.equal(res.allow, 'GET, POST, PUT, PATCH, DELETE');
      if (method !== 'HEAD') {
        const error = JSON.parse(res.body).error;
        assert.equal(error.code, 'method_not_allowed');
        assert.match(error.message, new RegExp(`method ${method} is not forwarded`));
        assert.ok(!res.body.includes('k-up'), 'the provider key is never echoed');
      }
      assert.equal(up.callCount(), 0);
    });
  }

  it('forwards PUT, PATCH and DELETE; a method the router does not know matches no route', async () => {
    up.reset();
    const unknown = await gw.request('PROPFIND', '/p/up/models', { headers: bearer(MASTER) });
    assertOpenAiError(unknown, 404, 'not_found_error');
    for (const method of ['PUT', 'PATCH', 'DELETE']) {
      const res = await gw.request(method, '/p/up/files/file-none', { headers: bearer(MASTER) });
      assert.equal(res.status, 404, `${method}: the upstream's own answer`);
    }
    assert.deepEqual(up.calls.map((c) => c.method), ['PUT', 'PATCH', 'DELETE']);
  });
});

describe('passthrough answers under rate limits', () => {
  let up: FakeUpstream;
  let gw: TestGateway;

  before(async () => {
    up = await startFakeUpstream({ apiKey: 'k-up', name: 'up', models: ['gpt-x'] });
    gw = await startTestGateway({
      yaml: 'providers:\n' + openaiProvider('up', up.url, ['gpt-x']) +
        'rate_limits:\n  providers: [ { name: up, limits: [ { period: minute, max_requests: 7 } ] } ]\n',
    });
  });
  after(async () => {
    await gw?.close();
    await up?.close();
  });

  it("carries the gateway's x-ratelimit headers, not the upstream's own", async () => {
    up.failNext(1, { status: 200, body: { object: 'list', data: [] }, headers: { 'x-ratelimit-limit-requests': '5000', 'x-upstream-extra': 'kept' } });
    const res = await fetch(`${gw.url}/p/up/models`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-ratelimit-limit-requests'), '7');
    assert.equal(res.headers.get('x-ratelimit-remaining-requests'), '6');
    assert.equal(res.headers.get('x-upstream-extra'), 'kept');
  });
});
