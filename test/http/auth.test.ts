import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import OpenAI, { AuthenticationError } from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';
import { assertOpenAiError } from '../support/e2e.ts';

const MASTER = 'master-secret-123';
const chat = { model: 'mock-1', messages: [{ role: 'user', content: 'hi' }] };
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

describe('authentication with MASTER_KEY (CONTRACT §3)', () => {
  let gw: TestGateway;

  before(async () => {
    gw = await startTestGateway({ env: { MASTER_KEY: MASTER } });
  });
  after(async () => {
    await gw?.close();
  });

  it('/health needs no key', async () => {
    const res = await gw.request('GET', '/health');
    assert.equal(res.status, 200);
    assert.deepEqual(res.json(), { status: 'ok' });
  });

  it('no key → 401 authentication_error on /v1, /p and /admin', async () => {
    assertOpenAiError(await gw.request('POST', '/v1/chat/completions', { body: chat }), 401, 'authentication_error');
    assertOpenAiError(await gw.request('GET', '/v1/models'), 401, 'authentication_error');
    assertOpenAiError(await gw.request('GET', '/p/mock/models'), 401, 'authentication_error');
    assertOpenAiError(await gw.request('GET', '/admin/api-keys'), 401, 'authentication_error');
  });

  it('a wrong key → 401 (Bearer and x-api-key)', async () => {
    assertOpenAiError(await gw.request('POST', '/v1/chat/completions', { body: chat, headers: bearer('wrong') }), 401, 'authentication_error');
    assertOpenAiError(await gw.request('POST', '/v1/chat/completions', { body: chat, headers: { 'x-api-key': 'wrong' } }), 401, 'authentication_error');
    assertOpenAiError(await gw.request('POST', '/v1/chat/completions', { body: chat, headers: bearer(MASTER + 'x') }), 401, 'authentication_error');
  });

  it('/v1/messages answers 401 in the Anthropic shape', async () => {
    const res = await gw.request('POST', '/v1/messages', { body: { model: 'mock-1', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] } });
    assert.equal(res.status, 401);
    assert.equal(res.json().type, 'error');
    assert.equal(res.json().error.type, 'authentication_error');
  });

  it('the master key works via Authorization: Bearer and via x-api-key', async () => {
    assert.equal((await gw.request('POST', '/v1/chat/completions', { body: chat, headers: bearer(MASTER) })).status, 200);
    assert.equal((await gw.request('POST', '/v1/chat/completions', { body: chat, headers: { 'x-api-key': MASTER } })).status, 200);
    assert.equal((await gw.request('GET', '/admin/api-keys', { headers: { 'x-api-key': MASTER } })).status, 200);
  });

  it('the SDKs authenticate with the master key, and get AuthenticationError with a wrong one', async () => {
    const good = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: MASTER, maxRetries: 0 });
    const res = await good.chat.completions.create({ model: 'mock-1', messages: [{ role: 'user', content: 'x' }] });
    assert.ok(res.choices[0]?.message.content);
    const bad = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'nope', maxRetries: 0 });
    await assert.rejects(bad.models.list(), AuthenticationError);
    const ant = new Anthropic({ baseURL: gw.url, apiKey: MASTER, maxRetries: 0 });
    const msg = await ant.messages.create({ model: 'mock-1', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] });
    assert.equal(msg.type, 'message');
  });

  describe('managed keys', () => {
    let created: { id: string; name: string; user_path: string | null; max_priority: string; created_at: string; key: string };

    it('POST /admin/api-keys → 201 with the record and its secret', async () => {
      const res = await gw.request('POST', '/admin/api-keys', { body: { name: 'team-a-bot', user_path: 'team/a/' }, headers: bearer(MASTER) });
      assert.equal(res.status, 201, res.text);
      created = res.json();
      assert.deepEqual(Object.keys(created).sort(), ['created_at', 'id', 'key', 'max_priority', 'name', 'user_path']);
      assert.equal(created.name, 'team-a-bot');
      assert.equal(created.max_priority, 'normal', 'max_priority defaults to normal');
      assert.equal(created.user_path, '/team/a', 'the path is normalized');
      assert.ok(!Number.isNaN(Date.parse(created.created_at)));
      assert.match(created.created_at, /Z$/);
      assert.equal(typeof created.key, 'string');
      assert.ok(created.key.length >= 20);
      assert.notEqual(created.key, MASTER);
    });

    it('the key works on /v1 routes (Bearer and x-api-key, SDK too)', async () => {
      assert.equal((await gw.request('POST', '/v1/chat/completions', { body: chat, headers: bearer(created.key) })).status, 200);
      assert.equal((await gw.request('GET', '/v1/models', { headers: { 'x-api-key': created.key } })).status, 200);
      const sdk = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: created.key, maxRetries: 0 });
      const ids: string[] = [];
      for await (const m of sdk.models.list()) ids.push(m.id);
      assert.ok(ids.includes('mock/mock-1'));
    });

    it('admin routes refuse a managed key (401)', async () => {
      assertOpenAiError(await gw.request('GET', '/admin/api-keys', { headers: bearer(created.key) }), 401, 'authentication_error');
      assertOpenAiError(await gw.request('POST', '/admin/api-keys', { body: { name: 'escalate', user_path: '/' }, headers: bearer(created.key) }), 401, 'authentication_error');
      assertOpenAiError(await gw.request('DELETE', `/admin/api-keys/${created.id}`, { headers: bearer(created.key) }), 401, 'authentication_error');
    });

    it('GET /admin/api-keys lists records without the secret', async () => {
      const res = await gw.request('GET', '/admin/api-keys', { headers: bearer(MASTER) });
      assert.equal(res.status, 200);
      assert.ok(!res.text.includes(created.key), 'the secret is never listed');
      const list = res.json().api_keys as Array<Record<string, unknown>>;
      const mine = list.find((k) => k.id === created.id);
      assert.ok(mine, res.text);
      assert.equal(mine.name, 'team-a-bot');
      assert.equal(mine.user_path, '/team/a');
      assert.equal(mine.max_priority, 'normal');
      assert.equal(mine.key, undefined);
      assert.equal(mine.key_hash, undefined);
    });

    it('the secret is stored hashed, never in plain text, in the SQLite file', async () => {
      const files = readdirSync(gw.dir).filter((f) => f.startsWith('floodgate.db'));
      assert.ok(files.length > 0, 'the SQLite file exists');
      const bytes = Buffer.concat(files.map((f) => readFileSync(join(gw.dir, f))));
      assert.ok(bytes.includes('team-a-bot'), 'the key record is in the files read (sanity check)');
      assert.ok(!bytes.includes(created.key), 'the secret is stored in plain text');
      assert.ok(!bytes.includes(created.key.slice(-24)), 'a tail of the secret is stored in plain text');
    });

    it('an invalid user_path → 400 naming user_path; missing name → 400 naming name', async () => {
      for (const user_path of ['/a/../b', 'a:b', '/./x', 5]) {
        const res = await gw.request('POST', '/admin/api-keys', { body: { name: 'bad', user_path }, headers: bearer(MASTER) });
        const err = assertOpenAiError(res, 400, 'invalid_request_error');
        assert.match(err.message, /user_path/, err.message);
        assert.equal(err.param, 'user_path');
      }
      const res = await gw.request('POST', '/admin/api-keys', { body: { user_path: '/x' }, headers: bearer(MASTER) });
      const err = assertOpenAiError(res, 400, 'invalid_request_error');
      assert.match(err.message, /name/);
      const malformed = await gw.request('POST', '/admin/api-keys', { body: '{"name":', headers: { ...bearer(MASTER), 'content-type': 'application/json' } });
      assertOpenAiError(malformed, 400, 'invalid_request_error');
    });

    it('takes max_priority high, normal or low, lists it with the key, and refuses anything else with a 400 naming it', async () => {
      const res = await gw.request('POST', '/admin/api-keys', { body: { name: 'chat tool', max_priority: 'high' }, headers: bearer(MASTER) });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.json().max_priority, 'high');
      const listed = (await gw.request('GET', '/admin/api-keys', { headers: bearer(MASTER) })).json().api_keys as Array<Record<string, unknown>>;
      assert.equal(listed.find((k) => k.id === res.json().id)?.max_priority, 'high');
      for (const max_priority of ['urgent', 'HIGH', '', 2, null]) {
        const bad = await gw.request('POST', '/admin/api-keys', { body: { name: 'bad', max_priority }, headers: bearer(MASTER) });
        const err = assertOpenAiError(bad, 400, 'invalid_request_error');
        assert.equal(err.param, 'max_priority', JSON.stringify(max_priority));
        assert.match(err.message, /max_priority: must be one of high, normal, low/, err.message);
      }
      assert.equal(await gw.request('DELETE', `/admin/api-keys/${res.json().id}`, { headers: bearer(MASTER) }).then((r) => r.status), 200);
    });

    it('DELETE /admin/api-keys/{id} revokes: the key is then refused; deleting again → 404', async () => {
      const del = await gw.request('DELETE', `/admin/api-keys/${created.id}`, { headers: bearer(MASTER) });
      assert.equal(del.status, 200, del.text);
      assertOpenAiError(await gw.request('POST', '/v1/chat/completions', { body: chat, headers: bearer(created.key) }), 401, 'authentication_error');
      const list = await gw.request('GET', '/admin/api-keys', { headers: bearer(MASTER) });
      assert.ok(!list.text.includes(created.id));
      assertOpenAiError(await gw.request('DELETE', `/admin/api-keys/${created.id}`, { headers: bearer(MASTER) }), 404, 'not_found_error');
    });
  });

  it('an invalid X-Floodgate-User-Path header → 400', async () => {
    for (const value of ['/a/../b', 'a:b', '/team/./x']) {
      const res = await gw.request('POST', '/v1/chat/completions', { body: chat, headers: { ...bearer(MASTER), 'x-floodgate-user-path': value } });
      const err = assertOpenAiError(res, 400, 'invalid_request_error');
      assert.match(err.message.toLowerCase(), /user-path|user path/, err.message);
    }
  });
  it('the same header value gives the same user path on every request, for the master key and a managed key', async () => {
    const made = await gw.request('POST', '/admin/api-keys', { body: { name: 'unbound-for-header' }, headers: bearer(MASTER) });
    assert.equal(made.status, 201, made.text);
    for (const credential of [MASTER, made.json().key as string, MASTER]) {
      for (let i = 0; i < 2; i++) {
        const res = await gw.request('GET', '/v1/usage', { headers: { ...bearer(credential), 'x-floodgate-user-path': ' team//a/ ' } });
        assert.equal(res.json().user_path, '/team/a');
        const bad = await gw.request('GET', '/v1/usage', { headers: { ...bearer(credential), 'x-floodgate-user-path': '/team/../a' } });
        assert.equal(bad.status, 400);
      }
    }
  });
  it('requests alternating between two header values each get their own user path', async () => {
    for (const [value, path] of [['/team/a', '/team/a'], ['team/b/', '/team/b'], ['/team/a', '/team/a'], ['/team/ä', '/team/ä'], ['team/b/', '/team/b']]) {
      const res = await gw.request('GET', '/v1/usage', { headers: { ...bearer(MASTER), 'x-floodgate-user-path': Buffer.from(value!, 'utf8').toString('latin1') } });
      assert.equal(res.json().user_path, path);
    }
  });
});

describe('managed keys survive a restart (same SQLite file)', () => {
  it('a key created before a restart still authenticates after it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-restart-'));
    try {
      const first = await startTestGateway({ env: { MASTER_KEY: MASTER }, dir });
      const res = await first.request('POST', '/admin/api-keys', { body: { name: 'durable' }, headers: bearer(MASTER) });
      assert.equal(res.status, 201);
      const { key } = res.json();
      await first.close();
      const second = await startTestGateway({ env: { MASTER_KEY: MASTER }, dir });
      try {
        assert.equal((await second.request('POST', '/v1/chat/completions', { body: chat, headers: bearer(key) })).status, 200);
      } finally {
        await second.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('open mode (no MASTER_KEY, loopback)', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({});
  });
  after(async () => {
    await gw?.close();
  });
  it('routes answer without a key', async () => {
    assert.equal((await gw.request('POST', '/v1/chat/completions', { body: chat })).status, 200);
    assert.equal((await gw.request('GET', '/admin/api-keys')).status, 200);
  });
});
