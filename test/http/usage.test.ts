import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';
import { assertOpenAiError, openaiProvider } from '../support/e2e.ts';
import { eventually } from '../support/rate-limits.ts';

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

describe('GET /v1/usage: the rate limits governing the caller', () => {
  // The gateway's clock, moved by the test: 15.5 s into 2030-01-01 (aligned to every window used here).
  let nowMs = Date.UTC(2030, 0, 1, 0, 0, 15, 500);
  const CONTENT = 'x'.repeat(20); // the fake upstream's total_tokens for it: 5 + 5
  const CREATED = '2030-01-01T00:00:15Z';
  let up: FakeUpstream;
  let gw: TestGateway;

  before(async () => {
    up = await startFakeUpstream({ name: 'up' });
    gw = await startTestGateway({
      yaml:
        'providers:\n' +
        openaiProvider('up', up.url, ['gpt-x']) +
        'rate_limits:\n' +
        '  user_paths:\n' +
        '    - { path: /, limits: [ { period: day, max_requests: 100 } ] }\n' +
        '    - { path: /team, limits: [ { period: minute, max_requests: 2, max_tokens: 15 } ] }\n' +
        '    - { path: /team/a, limits: [ { period: concurrent, max_requests: 4 }, { period_seconds: 300, max_requests: 10 }, { period: hour, max_tokens: 1000 } ] }\n' +
        '    - { path: /other, limits: [ { period: minute, max_requests: 1 } ] }\n',
      now: () => nowMs,
    });
  });
  after(async () => {
    await gw?.close();
    await up?.close();
  });

  const asTeamA = { 'x-floodgate-user-path': '/team/a' };
  const rateLimits = async (): Promise<Array<Record<string, unknown>>> => {
    const res = await gw.request('GET', '/v1/usage', { headers: asTeamA });
    assert.equal(res.status, 200, res.text);
    return res.json().rate_limits;
  };
  /** Per rule: subject, period, requests_usage_ratio, tokens_usage_ratio, resets_in_seconds, exhausted. */
  const summary = async () =>
    (await rateLimits()).map((r) => [r.subject, r.period_label, r.requests_usage_ratio, r.tokens_usage_ratio, r.resets_in_seconds, r.exhausted]);
  const base = (subject: string, period_label: string, period_seconds: number) => ({
    scope: 'user_path', subject, user_path: subject, source: 'config', period_label, period_seconds, created_at: CREATED, updated_at: CREATED,
  });

  it('carries usage ratios (used / cap, unclamped; in_flight on a concurrent rule) and resets_in_seconds (windowed rules)', async () => {
    const first = await gw.request('POST', '/v1/chat/completions', { body: chat(CONTENT), headers: asTeamA });
    assert.equal(first.status, 200, first.text);
    const release = up.holdStreamNext();
    const held = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...asTeamA },
      body: JSON.stringify({ ...chat(CONTENT), stream: true }),
    });
    assert.equal(held.status, 200);

    // Two requests counted, one of them in flight; the first one's 10 tokens charged. /other does not govern /team/a.
    assert.deepEqual(await rateLimits(), [
      {
        ...base('/', 'day', 86400),
        max_requests: 100, requests_used: 2, requests_remaining: 98, tokens_used: 0, in_flight: 0,
        window_start: '2030-01-01T00:00:00Z', window_end: '2030-01-02T00:00:00Z',
        requests_usage_ratio: 0.02, resets_in_seconds: 86385, exhausted: false,
      },
      {
        ...base('/team', 'minute', 60),
        max_requests: 2, max_tokens: 15, requests_used: 2, requests_remaining: 0, tokens_used: 10, tokens_remaining: 5, in_flight: 0,
        window_start: '2030-01-01T00:00:00Z', window_end: '2030-01-01T00:01:00Z',
        requests_usage_ratio: 1, tokens_usage_ratio: 10 / 15, resets_in_seconds: 45, exhausted: true,
      },
      {
        ...base('/team/a', 'concurrent', 0),
        max_requests: 4, requests_used: 1, requests_remaining: 3, tokens_used: 0, in_flight: 1,
        requests_usage_ratio: 0.25, exhausted: false,
      },
      {
        ...base('/team/a', '300s', 300),
        max_requests: 10, requests_used: 2, requests_remaining: 8, tokens_used: 0, in_flight: 0,
        window_start: '2030-01-01T00:00:00Z', window_end: '2030-01-01T00:05:00Z',
        requests_usage_ratio: 0.2, resets_in_seconds: 285, exhausted: false,
      },
      {
        ...base('/team/a', 'hour', 3600),
        max_tokens: 1000, requests_used: 2, tokens_used: 10, tokens_remaining: 990, in_flight: 0,
        window_start: '2030-01-01T00:00:00Z', window_end: '2030-01-01T01:00:00Z',
        tokens_usage_ratio: 0.01, resets_in_seconds: 3585, exhausted: false,
      },
    ]);

    // The stream's tokens overshoot the minute's token cap: the ratio goes past 1.
    release();
    await held.text();
    await eventually(async () => {
      const [, minute, concurrent] = await rateLimits();
      return minute!.tokens_used === 20 && concurrent!.in_flight === 0;
    }, 3000, 'the stream accounted for');
    assert.deepEqual(await summary(), [
      ['/', 'day', 0.02, undefined, 86385, false],
      ['/team', 'minute', 1, 20 / 15, 45, true],
      ['/team/a', 'concurrent', 0, undefined, undefined, false],
      ['/team/a', '300s', 0.2, undefined, 285, false],
      ['/team/a', 'hour', undefined, 0.02, 3585, false],
    ]);

    // 30 s into the next minute the previous window weighs half: floor(2 × 30/60) = 1 request, floor(20 × 30/60) = 10 tokens.
    nowMs = Date.UTC(2030, 0, 1, 0, 1, 30);
    assert.deepEqual(await summary(), [
      ['/', 'day', 0.02, undefined, 86310, false],
      ['/team', 'minute', 0.5, 10 / 15, 30, false],
      ['/team/a', 'concurrent', 0, undefined, undefined, false],
      ['/team/a', '300s', 0.2, undefined, 210, false],
      ['/team/a', 'hour', undefined, 0.02, 3510, false],
    ]);
  });
});
