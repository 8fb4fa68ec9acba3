/**
 * A hostile client's view (CONTRACT §3–§5): every spelling of every route keeps its key check,
 * passthrough never leaves its provider's base path, numbers and nesting are bounded, and no
 * input makes the gateway answer 5xx.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { openStorage } from '../../src/storage/index.ts';
import { openaiProvider } from '../support/e2e.ts';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';
import { rawRequest } from '../support/raw-http.ts';

const MASTER = 'sec-master-key';
const bearer = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` });
const chatBody = JSON.stringify({ model: 'mock-1', messages: [{ role: 'user', content: 'hi' }] });

interface RouteCase {
  method: string;
  path: string;
  admin: boolean;
  body?: string;
}

/** Every route the gateway serves, with a body its master-key call would accept. */
const ROUTES: RouteCase[] = [
  { method: 'GET', path: '/admin/api-keys', admin: true },
  { method: 'POST', path: '/admin/api-keys', admin: true, body: JSON.stringify({ name: 'spelled', user_path: '/x' }) },
  { method: 'DELETE', path: '/admin/api-keys/key-that-does-not-exist', admin: true },
  { method: 'GET', path: '/admin/rate-limits', admin: true },
  { method: 'PUT', path: '/admin/rate-limits', admin: true, body: JSON.stringify({ user_path: '/spelled', limit_key: { period: 'minute' }, max_requests: 5 }) },
  { method: 'DELETE', path: '/admin/rate-limits', admin: true, body: JSON.stringify({ user_path: '/spelled', limit_key: { period: 'minute' } }) },
  { method: 'POST', path: '/admin/rate-limits/reset-one', admin: true, body: JSON.stringify({ user_path: '/guarded', period: 'minute' }) },
  { method: 'POST', path: '/admin/rate-limits/reset', admin: true, body: JSON.stringify({ confirmation: 'reset' }) },
  { method: 'GET', path: '/admin/rate-limits/explain', admin: true },
  { method: 'GET', path: '/admin/usage', admin: true },
  { method: 'GET', path: '/admin/budgets', admin: true },
  { method: 'PUT', path: '/admin/budgets', admin: true, body: JSON.stringify({ user_path: '/spelled', limit_key: { period: 'day' }, max_usd: 5 }) },
  { method: 'DELETE', path: '/admin/budgets', admin: true, body: JSON.stringify({ user_path: '/spelled', limit_key: { period: 'day' } }) },
  { method: 'POST', path: '/v1/chat/completions', admin: false, body: chatBody },
  { method: 'POST', path: '/v1/responses', admin: false, body: JSON.stringify({ model: 'mock-1', input: 'hi' }) },
  { method: 'POST', path: '/v1/embeddings', admin: false, body: JSON.stringify({ model: 'mock-1', input: 'hi' }) },
  { method: 'POST', path: '/v1/audio/speech', admin: false, body: JSON.stringify({ model: 'mock-1', input: 'hi' }) },
  { method: 'POST', path: '/v1/messages', admin: false, body: JSON.stringify({ model: 'mock-1', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }) },
  { method: 'POST', path: '/v1/audio/transcriptions', admin: false },
  { method: 'GET', path: '/v1/models', admin: false },
  { method: 'GET', path: '/v1/usage', admin: false },
  { method: 'GET', path: '/v1/realtime', admin: false },
  { method: 'GET', path: '/v1/files/file-x', admin: false },
  { method: 'GET', path: '/v1/batches', admin: false },
  { method: 'POST', path: '/v1/batches', admin: false, body: JSON.stringify({ input_file_id: 'file-x', endpoint: '/v1/chat/completions', completion_window: '24h' }) },
  { method: 'GET', path: '/p/mock/models', admin: false },
];

/** The ways one path can be spelled: each either reaches the same route (and its checks) or no route. */
function spellings(path: string, port: number): string[] {
  const segments = path.split('/').slice(1);
  const [first = '', ...rest] = segments;
  const tail = rest.join('/');
  const hex = (c: string): string => `%${c.charCodeAt(0).toString(16).padStart(2, '0')}`;
  const last = segments.at(-1) ?? '';
  return [
    path,
    `/${hex(first[0]!)}${first.slice(1)}/${tail}`,
    `/${hex(first[0]!).toUpperCase()}${first.slice(1)}/${tail}`,
    `/${segments.slice(0, -1).join('/')}/${[...last].map(hex).join('')}`,
    `/%25${hex(first[0]!).slice(1)}${first.slice(1)}/${tail}`,
    `/${first}%2F${tail}`,
    `/${first}%2f${tail}`,
    `/${path}`,
    `/${first}//${tail}`,
    `${path}//`,
    `http://127.0.0.1:${port}${path}`,
    `http://evil.example${path}`,
    `HTTP://127.0.0.1:${port}${path}`,
    path.toUpperCase(),
    `/${first[0]!.toUpperCase()}${first.slice(1)}/${tail}`,
    `${path}/`,
    `${path}?`,
    `${path}?x=1`,
    `${path}#frag`,
    `${path};x`,
    `${path}%20`,
    `${path}%00`,
    `${path}%2F`,
    `/x/..${path}`,
    `/x/%2e%2e${path}`,
    `/x/%2E%2E/${first}/${tail}`,
    `/${first}/./${tail}`,
    `/${first}/%2e/${tail}`,
    `/${first}\\${tail}`,
  ];
}

describe('security: every spelling of every route keeps its key check', () => {
  let gw: TestGateway;
  let managedKey: string;

  before(async () => {
    gw = await startTestGateway({
      env: { MASTER_KEY: MASTER },
      yaml: 'rate_limits:\n  user_paths: [ { path: /guarded, limits: [ { period: minute, max_requests: 1000 } ] } ]\n',
    });
    const created = await gw.request('POST', '/admin/api-keys', { body: { name: 'bound', user_path: '/team/a' }, headers: bearer(MASTER) });
    assert.equal(created.status, 201, created.text);
    managedKey = created.json().key;
    const put = await gw.request('PUT', '/admin/rate-limits', { body: { user_path: '/manual', limit_key: { period: 'hour' }, max_requests: 7 }, headers: bearer(MASTER) });
    assert.equal(put.status, 200, put.text);
  });
  after(async () => {
    await gw?.close();
  });

  const stateWithMaster = async (): Promise<{ keys: string; rules: string }> => {
    const keys = await gw.request('GET', '/admin/api-keys', { headers: bearer(MASTER) });
    const rules = await gw.request('GET', '/admin/rate-limits', { headers: bearer(MASTER) });
    const strip = (r: Record<string, unknown>) => ({ subject: r.subject, period_seconds: r.period_seconds, max_requests: r.max_requests, source: r.source });
    return { keys: JSON.stringify(keys.json().api_keys.map((k: { id: string }) => k.id).sort()), rules: JSON.stringify(rules.json().rate_limits.map(strip)) };
  };

  it('without a key or with a managed key: never a 2xx where that key is not enough, never a 5xx, nothing changes', async () => {
    const before = await stateWithMaster();
    const seen: string[] = [];
    for (const route of ROUTES) {
      for (const target of spellings(route.path, gw.gateway.port)) {
        for (const [who, headers] of [['no key', {}], ['managed key', bearer(managedKey)]] as const) {
          const res = await rawRequest(gw.url, route.method, target, { headers, body: route.body });
          const what = `${route.method} ${target} with ${who} → ${res.status} ${res.text.slice(0, 200)}`;
          assert.ok(res.status < 500, what);
          const allowed = who === 'managed key' && !route.admin;
          if (!allowed) assert.ok(res.status < 200 || res.status >= 300, what);
          seen.push(`${res.status}`);
        }
      }
    }
    assert.ok(seen.includes('401'), 'the key checks were reached');
    assert.deepEqual(await stateWithMaster(), before, 'no key was created or revoked, no rule changed');
  });

  it('with the master key: every spelling reaches the same route or none, never a 5xx', async () => {
    for (const route of ROUTES) {
      for (const target of spellings(route.path, gw.gateway.port)) {
        const res = await rawRequest(gw.url, route.method, target, { headers: bearer(MASTER), body: route.body });
        assert.ok(res.status < 500, `${route.method} ${target} → ${res.status} ${res.text.slice(0, 200)}`);
      }
    }
  });

  it('a percent-encoded admin path with the master key reaches the admin route itself', async () => {
    const res = await rawRequest(gw.url, 'GET', '/%61dmin/rate-limits', { headers: bearer(MASTER) });
    assert.equal(res.status, 200, res.text);
    assert.ok(Array.isArray(JSON.parse(res.text).rate_limits));
    const absolute = await rawRequest(gw.url, 'GET', `http://127.0.0.1:${gw.gateway.port}/admin/api-keys`);
    assert.equal(absolute.status, 401, absolute.text);
  });

  it('a spelling no route matches is a 404 like any other', async () => {
    const res = await rawRequest(gw.url, 'GET', '/admin%2Fapi-keys');
    assert.equal(res.status, 404, res.text);
    assert.equal(JSON.parse(res.text).error.type, 'not_found_error');
  });
});

describe('security: passthrough stays inside its provider', () => {
  let up: FakeUpstream;
  let gw: TestGateway;

  before(async () => {
    up = await startFakeUpstream({ apiKey: 'k-up', name: 'up', models: ['gpt-x'] });
    gw = await startTestGateway({ yaml: 'providers:\n' + openaiProvider('up', up.url, ['gpt-x']), env: { MASTER_KEY: MASTER } });
  });
  after(async () => {
    await gw?.close();
    await up?.close();
  });

  const ESCAPES = [
    '/p/up/../../secret',
    '/p/up/../secret',
    '/p/up/models/../../../secret',
    '/p/up/%2e%2e/secret',
    '/p/up/%2E%2E/%2E%2E/secret',
    '/p/up/.%2e/secret',
    '/p/up/%2e%2e%2f%2e%2e%2fsecret',
    '/p/up/a%2F..%2F..%2Fsecret',
    '/p/up/..%5C..%5Csecret',
    '/p/up/x/..\\..\\secret',
    '/p/up/%00/models',
  ];

  it('a path that would climb above the base path is a 400 and nothing is sent upstream', async () => {
    for (const target of ESCAPES) {
      up.reset();
      const res = await rawRequest(gw.url, 'GET', target, { headers: bearer(MASTER) });
      assert.equal(res.status, 400, `${target} → ${res.status} ${res.text}`);
      assert.equal(JSON.parse(res.text).error.param, 'path', res.text);
      assert.equal(up.calls.length, 0, `${target} reached the upstream as ${up.calls[0]?.target}`);
    }
  });

  it('every other spelling reaches the upstream below its base path, re-encoded', async () => {
    const cases: Array<[string, string]> = [
      ['/p/%75p/models', '/v1/models'],
      ['/p/up/a/../models', '/v1/models'],
      ['/p/up/./models', '/v1/models'],
      ['/p/up//models', '/v1/models'],
      ['/p/up//evil.example/x', '/v1/evil.example/x'],
      ['/p/up/http://evil.example/x', '/v1/http:/evil.example/x'],
      ['/p/up/%2F%2Fevil.example/x', '/v1/evil.example/x'],
      ['/p/up/a%20b', '/v1/a%20b'],
      ['/p/up/%252e%252e/x', '/v1/%252e%252e/x'],
      ['/p/up/models:list?x=1', '/v1/models:list?x=1'],
    ];
    for (const [target, expected] of cases) {
      up.reset();
      const res = await rawRequest(gw.url, 'GET', target, { headers: bearer(MASTER) });
      assert.ok(res.status < 500, `${target} → ${res.status} ${res.text}`);
      assert.equal(up.calls.length, 1, `${target} → ${res.status} ${res.text}`);
      assert.equal(up.calls[0]!.target, expected, target);
      assert.equal(up.calls[0]!.headers.authorization, 'Bearer k-up');
    }
  });

  it('an unknown provider, however spelled, is a 404 with nothing sent', async () => {
    up.reset();
    for (const target of ['/p/nope/models', '/p/%6eope/models', '/p/..%2Fup/models']) {
      const res = await rawRequest(gw.url, 'GET', target, { headers: bearer(MASTER) });
      assert.equal(res.status, 404, `${target} → ${res.text}`);
    }
    assert.equal(up.calls.length, 0);
  });
});

describe('security: bounded numbers and nesting', () => {
  let gw: TestGateway;

  before(async () => {
    gw = await startTestGateway({ env: { MASTER_KEY: MASTER } });
  });
  after(async () => {
    await gw?.close();
  });

  const put = (body: unknown) => gw.request('PUT', '/admin/rate-limits', { body, headers: bearer(MASTER) });

  it('period_seconds beyond 366 days and caps beyond 2^53 - 1 are a 400 naming the field', async () => {
    const cases: Array<[unknown, string]> = [
      [{ user_path: '/a', limit_key: { period_seconds: 31_622_401 }, max_requests: 1 }, 'limit_key.period_seconds'],
      [{ user_path: '/a', limit_key: { period_seconds: 1e300 }, max_requests: 1 }, 'limit_key.period_seconds'],
      [{ user_path: '/a', limit_key: { period: '99999999999' }, max_requests: 1 }, 'limit_key.period'],
      [{ user_path: '/a', limit_key: { period: 'minute' }, max_requests: 2 ** 53 }, 'max_requests'],
      [{ user_path: '/a', limit_key: { period: 'minute' }, max_tokens: 1e308 }, 'max_tokens'],
    ];
    for (const [body, field] of cases) {
      const res = await put(body);
      assert.equal(res.status, 400, `${JSON.stringify(body)} → ${res.text}`);
      assert.equal(res.json().error.param, field, res.text);
      assert.match(res.json().error.message, new RegExp(`^${field.replace('.', '\\.')}`), res.text);
    }
    const ok = await put({ user_path: '/a', limit_key: { period_seconds: 31_622_400 }, max_requests: Number.MAX_SAFE_INTEGER });
    assert.equal(ok.status, 200, ok.text);
    const reset = await gw.request('POST', '/admin/rate-limits/reset-one', { body: { user_path: '/a', period_seconds: 1e12 }, headers: bearer(MASTER) });
    assert.equal(reset.status, 400, reset.text);
  });

  it('a JSON body nested deeper than 64 levels is a 400 on every endpoint that parses one; 64 is fine', async () => {
    const nested = (depth: number): unknown => (depth === 1 ? { leaf: true } : { n: nested(depth - 1) });
    const deep = nested(65);
    const bodies: Array<[string, string, unknown]> = [
      ['POST', '/v1/chat/completions', { model: 'mock/mock-1', messages: [{ role: 'user', content: 'x' }], extra: deep }],
      ['POST', '/v1/messages', { model: 'mock/mock-1', max_tokens: 5, messages: [{ role: 'user', content: 'x' }], extra: deep }],
      ['PUT', '/admin/rate-limits', { user_path: '/a', limit_key: { period: 'minute' }, max_requests: 1, extra: deep }],
      ['POST', '/admin/api-keys', { name: 'deep', extra: deep }],
      ['POST', '/p/mock/chat/completions', { model: 'mock-1', extra: deep }],
    ];
    for (const [method, path, body] of bodies) {
      const res = await gw.request(method, path, { body, headers: bearer(MASTER) });
      assert.equal(res.status, 400, `${method} ${path} → ${res.text}`);
      assert.match(res.text, /nested deeper than 64 levels/);
    }
    const array = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    const res = await gw.request('POST', '/v1/chat/completions', { body: array, headers: bearer(MASTER) });
    assert.equal(res.status, 400, res.text);
    const fine = await gw.request('POST', '/v1/chat/completions', {
      body: { model: 'mock/mock-1', messages: [{ role: 'user', content: 'x' }], extra: nested(62) },
      headers: bearer(MASTER),
    });
    assert.equal(fine.status, 200, fine.text);
  });
});

describe('security: a stored rule beyond the bounds never makes the admin API answer 500', () => {
  it('is skipped with a warning, across restarts, and the API keeps working', async () => {
    const first = await startTestGateway({ env: { MASTER_KEY: MASTER } });
    const dir = first.dir;
    await first.gateway.close();
    // A rule written before the bounds existed.
    const storage = await openStorage({ type: 'sqlite', sqlite: { path: `${dir}/floodgate.db` }, postgres: {} });
    const at = new Date('2026-01-01T00:00:00Z');
    await storage.rules.upsert({ scope: 'user_path', subject: '/huge', periodSeconds: 1e15, maxRequests: 5, source: 'manual', createdAt: at, updatedAt: at });
    await storage.rules.upsert({ scope: 'user_path', subject: '/fine', periodSeconds: 60, maxRequests: 5, source: 'manual', createdAt: at, updatedAt: at });
    await storage.close();
    for (let restart = 0; restart < 2; restart++) {
      const gw = await startTestGateway({ env: { MASTER_KEY: MASTER }, dir });
      try {
        const list = await gw.request('GET', '/admin/rate-limits', { headers: bearer(MASTER) });
        assert.equal(list.status, 200, list.text);
        assert.deepEqual(list.json().rate_limits.map((r: { subject: string }) => r.subject), ['/fine']);
        const put = await gw.request('PUT', '/admin/rate-limits', { body: { user_path: '/b', limit_key: { period: 'minute' }, max_requests: 3 }, headers: bearer(MASTER) });
        assert.equal(put.status, 200, put.text);
        const reset = await gw.request('POST', '/admin/rate-limits/reset', { body: { confirmation: 'reset' }, headers: bearer(MASTER) });
        assert.equal(reset.status, 200, reset.text);
        const usage = await gw.request('GET', '/v1/usage', { headers: { ...bearer(MASTER), 'x-floodgate-user-path': '/huge/x' } });
        assert.equal(usage.status, 200, usage.text);
        const deleted = await gw.request('DELETE', '/admin/rate-limits', { body: { user_path: '/b', limit_key: { period: 'minute' } }, headers: bearer(MASTER) });
        assert.equal(deleted.status, 200, deleted.text);
      } finally {
        await gw.close();
      }
    }
  });
});
