import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';
import { assertOpenAiError, openaiProvider } from '../support/e2e.ts';

const MASTER = 'usage-master';
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
const chat = (content: string) => ({ model: 'up/gpt-x', messages: [{ role: 'user' as const, content }] });

interface UsageBody {
  user_path: string;
  from: string;
  to: string;
  totals: { requests: number; prompt_tokens: number; completion_tokens: number; total_tokens: number; cached_requests: number };
  by_model: Array<{ provider: string; model: string; requests: number; total_tokens: number }>;
}

describe('usage tracking and user paths', () => {
  let up: FakeUpstream;
  let gw: TestGateway;
  let keyA: string;
  let keyB: string;
  let keyUnbound: string;

  const usage = async (headers: Record<string, string>, query = ''): Promise<UsageBody> => {
    const res = await gw.request('GET', `/v1/usage${query}`, { headers });
    assert.equal(res.status, 200, res.text);
    return res.json();
  };

  before(async () => {
    up = await startFakeUpstream({ apiKey: 'k-up', name: 'up' });
    gw = await startTestGateway({ yaml: 'providers:\n' + openaiProvider('up', up.url, ['gpt-x']), env: { MASTER_KEY: MASTER } });
    const mk = async (name: string, user_path?: string): Promise<string> => {
      const res = await gw.request('POST', '/admin/api-keys', { body: { name, ...(user_path ? { user_path } : {}) }, headers: bearer(MASTER) });
      assert.equal(res.status, 201, res.text);
      return res.json().key;
    };
    keyA = await mk('a', '/team/a');
    keyB = await mk('b', '/team/b');
    keyUnbound = await mk('unbound');
  });
  after(async () => {
    await gw?.close();
    await up?.close();
  });

  it('records non-streamed and streamed requests with their tokens, per subtree', async () => {
    // /team/a: one plain request and one streamed (via the SDK, no include_usage asked by the client).
    const r1 = await gw.request('POST', '/v1/chat/completions', { body: chat('alpha beta gamma delta'), headers: bearer(keyA) });
    assert.equal(r1.status, 200);
    const expectedA1 = r1.json().usage.total_tokens as number;
    const sdkA = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: keyA, maxRetries: 0 });
    const stream = await sdkA.chat.completions.create({ ...chat('streamed words here'), stream: true });
    for await (const _ of stream) { /* drain */ }

    // /team/b: one request.
    const r2 = await gw.request('POST', '/v1/chat/completions', { body: chat('bee'), headers: bearer(keyB) });
    assert.equal(r2.status, 200);
    const expectedB = r2.json().usage.total_tokens as number;

    const a = await usage(bearer(keyA));
    assert.equal(a.user_path, '/team/a');
    assert.equal(a.totals.requests, 2);
    assert.ok(a.totals.total_tokens > expectedA1, `the streamed request's tokens are counted too: ${JSON.stringify(a.totals)}`);
    assert.ok(a.totals.prompt_tokens > 0 && a.totals.completion_tokens > 0);
    assert.equal(a.totals.prompt_tokens + a.totals.completion_tokens, a.totals.total_tokens);
    assert.deepEqual(a.by_model.map((m) => [m.provider, m.model]), [['up', 'gpt-x']]);

    const b = await usage(bearer(keyB));
    assert.equal(b.user_path, '/team/b');
    assert.equal(b.totals.requests, 1, '/team/b does not see /team/a');
    assert.equal(b.totals.total_tokens, expectedB);

    // The master key at root sees everything (at least both teams).
    const root = await usage(bearer(MASTER));
    assert.equal(root.user_path, '/');
    assert.ok(root.totals.requests >= 3);
    assert.equal(root.totals.total_tokens >= a.totals.total_tokens + b.totals.total_tokens, true);

    // The master key narrowed to /team by header sees both teams, and nothing else.
    const team = await usage({ ...bearer(MASTER), 'x-floodgate-user-path': '/team' });
    assert.equal(team.user_path, '/team');
    assert.equal(team.totals.requests, 3);
    assert.equal(team.totals.total_tokens, a.totals.total_tokens + b.totals.total_tokens);
  });

  it('the X-Floodgate-User-Path header sets the recorded path; a bound key ignores it', async () => {
    const r = await gw.request('POST', '/v1/chat/completions', { body: chat('by header'), headers: { ...bearer(keyUnbound), 'x-floodgate-user-path': 'org//c/' } });
    assert.equal(r.status, 200);
    const c = await usage({ ...bearer(MASTER), 'x-floodgate-user-path': '/org/c' });
    assert.equal(c.user_path, '/org/c');
    assert.equal(c.totals.requests, 1);

    // A key bound to /team/a sending a header for /org/c is still charged to /team/a.
    const before = (await usage(bearer(keyA))).totals.requests;
    const r2 = await gw.request('POST', '/v1/chat/completions', { body: chat('spoof'), headers: { ...bearer(keyA), 'x-floodgate-user-path': '/org/c' } });
    assert.equal(r2.status, 200);
    assert.equal((await usage(bearer(keyA))).totals.requests, before + 1);
    assert.equal((await usage({ ...bearer(MASTER), 'x-floodgate-user-path': '/org/c' })).totals.requests, 1);
    // And the bound key cannot widen its usage view with the header either.
    assert.equal((await usage({ ...bearer(keyA), 'x-floodgate-user-path': '/' })).user_path, '/team/a');
  });

  it('a bad from/to → 400 naming the field', async () => {
    const err = assertOpenAiError(await gw.request('GET', '/v1/usage?from=yesterday', { headers: bearer(MASTER) }), 400, 'invalid_request_error');
    assert.match(err.message, /from/);
    const err2 = assertOpenAiError(await gw.request('GET', '/v1/usage?to=2024-13-45', { headers: bearer(MASTER) }), 400, 'invalid_request_error');
    assert.match(err2.message, /to/);
    assertOpenAiError(await gw.request('GET', '/v1/usage?from=2030-01-02&to=2030-01-01', { headers: bearer(MASTER) }), 400, 'invalid_request_error');
    const err3 = assertOpenAiError(await gw.request('GET', '/v1/usage?from=2024-02-31', { headers: bearer(MASTER) }), 400, 'invalid_request_error');
    assert.match(err3.message, /from/, 'an impossible day is not rolled over into the next month');
  });

  it('from/to bound the window', async () => {
    const old = await usage(bearer(MASTER), '?from=2001-01-01&to=2001-01-31');
    assert.equal(old.totals.requests, 0);
    const today = new Date().toISOString().slice(0, 10);
    const now = await usage(bearer(MASTER), `?from=${today}&to=${today}`);
    assert.ok(now.totals.requests >= 3);
  });
});

describe('USAGE_ENABLED=false', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ env: { USAGE_ENABLED: 'false' } });
  });
  after(async () => {
    await gw?.close();
  });
  it('records nothing', async () => {
    for (let i = 0; i < 3; i++) {
      const res = await gw.request('POST', '/v1/chat/completions', { body: { model: 'mock-1', messages: [{ role: 'user', content: 'x' }] } });
      assert.equal(res.status, 200);
    }
    const res = await gw.request('GET', '/v1/usage');
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json().totals.requests, 0);
    assert.equal(res.json().totals.total_tokens, 0);
  });
});
