/**
 * Open mode (no MASTER_KEY, loopback only): requests addressed to another name than a loopback one
 * (DNS rebinding) and browser requests from another origin (a cross-site form post or fetch) are
 * refused; the gateway's own clients and pages keep working. With a master key none of this
 * applies: the key guards every route.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { rawRequest, type RawResponse } from '../support/raw-http.ts';
import { startReplica, type Replica } from '../support/replicas.ts';

const keyBody = JSON.stringify({ name: 'planted', user_path: '/evil' });

function errorOf(res: RawResponse): { type: string; message: string; code: string } {
  return (JSON.parse(res.text) as { error: { type: string; message: string; code: string } }).error;
}

describe('open mode keeps web pages out', () => {
  let gw: Replica;
  let port: string;

  before(async () => {
    gw = await startReplica('', {});
    port = new URL(gw.url).port;
  });
  after(async () => {
    await gw?.stop();
  });

  const keyNames = async (): Promise<string[]> => {
    const res = await gw.request('GET', '/admin/api-keys');
    assert.equal(res.status, 200, res.text);
    return (res.json().api_keys as Array<{ name: string }>).map((k) => k.name);
  };

  it('refuses a request addressed to a name that is not loopback (DNS rebinding), on every route, creating nothing', async () => {
    for (const host of ['evil.example', `evil.example:${port}`, `192.168.1.20:${port}`, `127.0.0.1.evil.example:${port}`, `localhost.evil.example`, `[::2]:${port}`, `user@127.0.0.1:${port}`]) {
      for (const [method, target, body] of [['POST', '/admin/api-keys', keyBody], ['GET', '/v1/models', undefined], ['GET', '/health', undefined], ['GET', '/dashboard', undefined], ['GET', '/nowhere', undefined]] as const) {
        const res = await rawRequest(gw.url, method, target, { headers: { host }, body });
        const what = `${method} ${target} with Host ${host} → ${res.status} ${res.text}`;
        assert.equal(res.status, 403, what);
        const error = errorOf(res);
        assert.equal(error.code, 'host_not_allowed', what);
        assert.match(error.message, /^Host ".*" is not a loopback name: without MASTER_KEY/, what);
      }
    }
    assert.deepEqual(await keyNames(), []);
  });

  it('answers every loopback spelling of its host, with any port', async () => {
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, 'LOCALHOST', `127.1.2.3:${port}`, '127.1', `[::1]:${port}`, '[0:0:0:0:0:0:0:1]']) {
      const res = await rawRequest(gw.url, 'GET', '/v1/models', { headers: { host } });
      assert.equal(res.status, 200, `Host ${host} → ${res.status} ${res.text}`);
    }
  });

  it('refuses a cross-origin browser request (a form post, a fetch from another page), creating nothing', async () => {
    const cases: Array<Record<string, string>> = [
      { origin: 'http://evil.example', 'content-type': 'application/x-www-form-urlencoded' },
      { origin: 'https://evil.example', 'content-type': 'text/plain' },
      { origin: 'null' },
      { origin: `http://localhost:${port}` }, // another origin than the one the request is addressed to
      { origin: `http://127.0.0.1:${Number(port) + 1}` },
      { 'sec-fetch-site': 'cross-site' },
      { 'sec-fetch-site': 'same-site' },
    ];
    for (const headers of cases) {
      for (const [method, target, body] of [['POST', '/admin/api-keys', keyBody], ['GET', '/admin/api-keys', undefined], ['POST', '/v1/chat/completions', JSON.stringify({ model: 'mock-1', messages: [{ role: 'user', content: 'hi' }] })]] as const) {
        const res = await rawRequest(gw.url, method, target, { headers: { 'content-type': 'application/json', ...headers }, body });
        const what = `${method} ${target} with ${JSON.stringify(headers)} → ${res.status} ${res.text}`;
        assert.equal(res.status, 403, what);
        const error = errorOf(res);
        assert.equal(error.code, 'cross_origin_request', what);
        assert.match(error.message, /^cross-origin request refused: (Origin .* is not this gateway's origin http:\/\/127\.0\.0\.1:\d+|Sec-Fetch-Site: [a-z-]+); without MASTER_KEY/, what);
      }
    }
    assert.deepEqual(await keyNames(), []);
  });

  it('answers in the Anthropic shape on /v1/messages', async () => {
    const res = await rawRequest(gw.url, 'POST', '/v1/messages', { headers: { origin: 'http://evil.example' }, body: JSON.stringify({ model: 'mock-1', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }) });
    assert.equal(res.status, 403, res.text);
    const body = JSON.parse(res.text) as { type: string; error: { type: string; message: string } };
    assert.equal(body.type, 'error');
    assert.match(body.error.message, /^cross-origin request refused/);
  });

  it('serves its own pages and their calls, and any client that is no browser', async () => {
    const own = { origin: `http://127.0.0.1:${port}`, 'sec-fetch-site': 'same-origin' };
    const created = await rawRequest(gw.url, 'POST', '/admin/api-keys', { headers: own, body: JSON.stringify({ name: 'from-dashboard' }) });
    assert.equal(created.status, 201, created.text);
    assert.equal((await rawRequest(gw.url, 'GET', '/admin/api-keys', { headers: { 'sec-fetch-site': 'none' } })).status, 200, 'typed in the address bar');
    assert.equal((await rawRequest(gw.url, 'GET', '/admin/api-keys', { headers: { origin: `http://localhost:${port}`, host: `localhost:${port}` } })).status, 200);
    // A link from elsewhere to the dashboard's page or the health check: they hold nothing.
    for (const target of ['/health', '/dashboard']) {
      const res = await rawRequest(gw.url, 'GET', target, { headers: { 'sec-fetch-site': 'cross-site' } });
      assert.ok(res.status === 200 || res.status === 503, `${target} → ${res.status}`);
    }
    assert.deepEqual(await keyNames(), ['from-dashboard']);
  });
});

describe('with a master key, Host and Origin are left to the key', () => {
  let gw: Replica;

  before(async () => {
    gw = await startReplica('', { MASTER_KEY: 'open-mode-master' });
  });
  after(async () => {
    await gw?.stop();
  });

  it('a request through a proxy under another name, or from a page that holds the key, is served', async () => {
    const headers = { host: 'gateway.internal.example', origin: 'https://console.example', authorization: 'Bearer open-mode-master' };
    const res = await rawRequest(gw.url, 'GET', '/admin/api-keys', { headers });
    assert.equal(res.status, 200, res.text);
    const anonymous = await rawRequest(gw.url, 'GET', '/admin/api-keys', { headers: { host: 'gateway.internal.example' } });
    assert.equal(anonymous.status, 401, anonymous.text);
  });
});
