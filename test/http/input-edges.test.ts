/**
 * Input at the edges, against a gateway process started as a user starts it: user paths are
 * UTF-8 wherever they enter (header, key binding, admin API), a NUL in an id or a name is a 400
 * (on PostgreSQL, which cannot hold one), and a malformed percent-encoding gets the gateway's own
 * error shape (CONTRACT §3, §4).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { assertOpenAiError } from '../support/e2e.ts';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';
import { rawRequest } from '../support/raw-http.ts';
import { startReplica, type Replica } from '../support/replicas.ts';

const MASTER = 'edges-master-key';
const HEADER = 'x-floodgate-user-path';
const bearer = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` });
const chat = { model: 'mock/mock-1', messages: [{ role: 'user', content: 'hi' }] };

/** The header as a client writes it on the wire: these bytes, whatever they are (fetch sends a ByteString byte for byte). */
function headerBytes(bytes: Buffer): string {
  return bytes.toString('latin1');
}

describe('user paths are UTF-8 on every way in', () => {
  let gw: Replica;

  before(async () => {
    gw = await startReplica('', { MASTER_KEY: MASTER });
  });
  after(async () => {
    await gw?.stop();
  });

  const put = async (userPath: string): Promise<void> => {
    const res = await gw.request('PUT', '/admin/rate-limits', { body: { user_path: userPath, limit_key: { period: 'hour' }, max_requests: 1 }, headers: bearer(MASTER) });
    assert.equal(res.status, 200, res.text);
  };
  const chatAs = (headers: Record<string, string>) => gw.request('POST', '/v1/chat/completions', { body: chat, headers: { ...bearer(MASTER), ...headers } });

  it('a rule on /équipe written through the admin API governs a request whose header carries /équipe in UTF-8', async () => {
    await put('/équipe');
    const first = await chatAs({ [HEADER]: headerBytes(Buffer.from('/équipe/alice', 'utf8')) });
    assert.equal(first.status, 200, first.text);
    assert.equal(first.headers.get('x-ratelimit-limit-requests'), '1');
    const second = await chatAs({ [HEADER]: headerBytes(Buffer.from('/équipe', 'utf8')) });
    assertOpenAiError(second, 429, 'rate_limit_error');
    assert.equal(second.json().error.message, 'rate limit exceeded for /équipe: hour request limit of 1 reached');
  });

  it('characters beyond latin1 too, and the two Unicode spellings of é are one path', async () => {
    await put('/東京');
    assert.equal((await chatAs({ [HEADER]: headerBytes(Buffer.from('/東京/a', 'utf8')) })).status, 200);
    assert.equal((await chatAs({ [HEADER]: headerBytes(Buffer.from('/東京/b', 'utf8')) })).status, 429);

    await put('/caf\u00e9'); // é as one code point (NFC)
    assert.equal((await chatAs({ [HEADER]: headerBytes(Buffer.from('/cafe\u0301', 'utf8')) })).status, 200); // e + combining accent
    const refused = await chatAs({ [HEADER]: headerBytes(Buffer.from('/caf\u00e9', 'utf8')) });
    assert.equal(refused.status, 429);
    assert.equal(refused.json().error.message, 'rate limit exceeded for /caf\u00e9: hour request limit of 1 reached');
  });

  it('a key bound to a non-ASCII path is charged to that path, and lists it as written', async () => {
    await put('/ünits');
    const created = await gw.request('POST', '/admin/api-keys', { body: { name: 'units', user_path: '/u\u0308nits/bot' }, headers: bearer(MASTER) });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.json().user_path, '/ünits/bot');
    const asKey = (key: string) => gw.request('POST', '/v1/chat/completions', { body: chat, headers: bearer(key) });
    assert.equal((await asKey(created.json().key)).status, 200);
    assert.equal((await chatAs({ [HEADER]: headerBytes(Buffer.from('/ünits', 'utf8')) })).status, 429);
  });

  it('a header that is not valid UTF-8 is a 400 naming the header', async () => {
    for (const bytes of [Buffer.from([0x2f, 0xe9, 0x71]), Buffer.from([0x2f, 0xc3]), Buffer.from([0x2f, 0xff, 0xfe])]) {
      const error = assertOpenAiError(await chatAs({ [HEADER]: headerBytes(bytes) }), 400, 'invalid_request_error');
      assert.equal(error.param, HEADER);
      assert.equal(error.message, `${HEADER} header is not valid UTF-8`);
    }
  });
});

describe('a malformed percent-encoding in the path', () => {
  let gw: Replica;

  before(async () => {
    gw = await startReplica('', {});
  });
  after(async () => {
    await gw?.stop();
  });

  it('is the gateway’s own 400, on every route family, with a request id', async () => {
    for (const target of ['/v1/files/%zz', '/admin/api-keys/%E0%A4%A', '/p/mock/%', '/%zz', '/v1/chat/completions%']) {
      const res = await rawRequest(gw.url, 'GET', target);
      assert.equal(res.status, 400, `${target} → ${res.text}`);
      const body = JSON.parse(res.text) as { error: Record<string, unknown> };
      assert.deepEqual(Object.keys(body), ['error']);
      assert.equal(body.error.type, 'invalid_request_error');
      assert.equal(body.error.code, 'invalid_url');
      assert.match(String(body.error.message), /^malformed URL: the path .* is not valid percent-encoded UTF-8/);
      assert.ok(res.headers['x-request-id'], 'the answer names its request');
    }
  });
});

describe('a NUL in an id or a name, on PostgreSQL', () => {
  let database: TestDatabase;
  let gw: Replica;

  before(async () => {
    database = await createTestDatabase();
    gw = await startReplica('', { STORAGE_TYPE: 'postgres', POSTGRES_URL: database.url, MASTER_KEY: MASTER });
  });
  after(async () => {
    await gw?.stop();
    await database?.drop();
  });

  it('is a 400 naming the field on every route that stores or looks one up, and the gateway goes on serving', async () => {
    const NUL = '\u0000';
    const cases: Array<{ method: string; target: string; body?: unknown; param: string }> = [
      { method: 'DELETE', target: '/admin/api-keys/%00', param: 'id' },
      { method: 'DELETE', target: '/admin/api-keys/key%00x', param: 'id' },
      { method: 'POST', target: '/admin/api-keys', body: { name: `bot${NUL}` }, param: 'name' },
      { method: 'GET', target: '/v1/files/%00', param: 'id' },
      { method: 'GET', target: '/v1/files/file-a%00/content', param: 'id' },
      { method: 'GET', target: '/v1/batches/a%00', param: 'id' },
      { method: 'POST', target: '/v1/batches/a%00/cancel', param: 'id' },
      { method: 'GET', target: '/v1/batches?after=%00', param: 'after' },
      { method: 'POST', target: '/v1/batches', body: { input_file_id: `file-${NUL}`, endpoint: '/v1/chat/completions', completion_window: '24h' }, param: 'input_file_id' },
    ];
    for (const { method, target, body, param } of cases) {
      const res = await rawRequest(gw.url, method, target, { headers: bearer(MASTER), body: body === undefined ? undefined : JSON.stringify(body) });
      const what = `${method} ${target} → ${res.status} ${res.text}`;
      assert.equal(res.status, 400, what);
      const error = JSON.parse(res.text).error as { type: string; param: string; message: string };
      assert.equal(error.type, 'invalid_request_error', what);
      assert.equal(error.param, param, what);
      assert.equal(error.message, `${param}: must not contain a NUL character (U+0000)`, what);
    }

    const form = new FormData();
    form.set('purpose', 'batch');
    form.set('file', new File(['{}\n'], `in${NUL}.jsonl`));
    const upload = await fetch(`${gw.url}/v1/files`, { method: 'POST', body: form, headers: bearer(MASTER) });
    const text = await upload.text();
    assert.equal(upload.status, 400, text);
    assert.equal(JSON.parse(text).error.param, 'file');

    // Nothing broke: the same routes answer as usual.
    assert.equal((await gw.request('GET', '/v1/files/file-nope', { headers: bearer(MASTER) })).status, 404);
    assert.equal((await gw.request('DELETE', '/admin/api-keys/nope', { headers: bearer(MASTER) })).status, 404);
  });

  it('needs the key first: without one it is a 401, as for any other id', async () => {
    assertOpenAiError(await gw.request('DELETE', '/admin/api-keys/%00'), 401, 'authentication_error');
  });
});
