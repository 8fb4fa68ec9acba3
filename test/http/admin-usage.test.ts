/**
 * End-to-end: `GET /admin/usage`, every consumer's usage in hour or day buckets, grouped by user
 * path, provider or provider/model, for the dashboard's charts. The gateway's clock is injected,
 * so records land in known buckets.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import type { z } from 'zod';
import type { usageBuckets } from '../../src/http/openapi/responses.ts';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';
import { assertOpenAiError, openaiProvider } from '../support/e2e.ts';
import { MASTER, USER_PATH_HEADER } from '../support/rate-limits.ts';

/** One bucket as the OpenAPI document describes it. */
type Bucket = z.infer<typeof usageBuckets>['buckets'][number];

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

describe('GET /admin/usage', () => {
  let up: FakeUpstream;
  let gw: TestGateway;
  let clock = Date.parse('2030-01-02T10:30:00Z');
  const tokens = new Map<string, { prompt: number; completion: number }>();

  const chatAt = async (at: string, userPath: string, model: string, content: string): Promise<void> => {
    clock = Date.parse(at);
    const res = await gw.request('POST', '/v1/chat/completions', {
      body: { model, messages: [{ role: 'user', content }] },
      headers: { ...bearer(MASTER), [USER_PATH_HEADER]: userPath },
    });
    assert.equal(res.status, 200, res.text);
    const usage = res.json().usage as { prompt_tokens: number; completion_tokens: number };
    tokens.set(`${at} ${userPath} ${content}`, { prompt: usage.prompt_tokens, completion: usage.completion_tokens });
  };
  const usageOf = (at: string, userPath: string, content: string) => tokens.get(`${at} ${userPath} ${content}`)!;
  const buckets = async (query: string): Promise<Bucket[]> => {
    const res = await gw.request('GET', `/admin/usage${query}`, { headers: bearer(MASTER) });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(Object.keys(res.json()), ['buckets']);
    return res.json().buckets;
  };

  before(async () => {
    up = await startFakeUpstream({ name: 'up', models: ['gpt-x', 'gpt-y'] });
    // gpt-x at $1 a prompt token and $2 a completion token; gpt-y has no price.
    const yaml = 'providers:\n' + openaiProvider('up', up.url, ['gpt-x', 'gpt-y']) + 'cache:\n  response: { enabled: true }\n' +
      'pricing:\n  up/gpt-x: { input_per_mtok: 1000000, output_per_mtok: 2000000 }\n';
    gw = await startTestGateway({ yaml, env: { MASTER_KEY: MASTER }, now: () => clock });
    await chatAt('2030-01-02T10:30:00Z', '/team/a', 'up/gpt-x', 'one two');
    await chatAt('2030-01-02T10:31:00Z', '/team/a', 'up/gpt-x', 'one two'); // a cache hit: same body, within the cache's TTL
    await chatAt('2030-01-02T10:50:00Z', '/team/b', 'up/gpt-y', 'three');
    await chatAt('2030-01-02T11:05:00Z', '/team/a', 'up/gpt-y', 'four five six');
    await chatAt('2030-01-04T09:00:00Z', '/team/b', 'up/gpt-x', 'seven');
  });
  after(async () => {
    await gw?.close();
    await up?.close();
  });

  it('buckets by hour and user path, with tokens, costs and cache hits, right after the requests (no wait for the recorder)', async () => {
    const first = usageOf('2030-01-02T10:30:00Z', '/team/a', 'one two');
    const b = usageOf('2030-01-02T10:50:00Z', '/team/b', 'three');
    const a2 = usageOf('2030-01-02T11:05:00Z', '/team/a', 'four five six');
    assert.deepEqual(await buckets('?from=2030-01-02&to=2030-01-02&group_by=user_path&bucket=hour'), [
      // The cache hit counts as a request and a cache hit, and adds no tokens and no cost.
      { start: '2030-01-02T10:00:00Z', key: '/team/a', requests: 2, prompt_tokens: first.prompt, completion_tokens: first.completion, cost_usd: first.prompt + 2 * first.completion, cache_hits: 1, refused: 0 },
      { start: '2030-01-02T10:00:00Z', key: '/team/b', requests: 1, prompt_tokens: b.prompt, completion_tokens: b.completion, cost_usd: 0, cache_hits: 0, refused: 0 },
      { start: '2030-01-02T11:00:00Z', key: '/team/a', requests: 1, prompt_tokens: a2.prompt, completion_tokens: a2.completion, cost_usd: 0, cache_hits: 0, refused: 0 },
    ]);
  });

  it('groups by provider/model and by provider, in day buckets; `to` includes its whole day', async () => {
    const byModel = await buckets('?from=2030-01-01&to=2030-01-04&group_by=model&bucket=day');
    assert.deepEqual(byModel.map((x) => [x.start, x.key, x.requests, x.cache_hits]), [
      ['2030-01-02T00:00:00Z', 'up/gpt-x', 2, 1],
      ['2030-01-02T00:00:00Z', 'up/gpt-y', 2, 0],
      ['2030-01-04T00:00:00Z', 'up/gpt-x', 1, 0],
    ]);
    const byProvider = await buckets('?from=2030-01-02&to=2030-01-03&group_by=provider&bucket=day');
    assert.deepEqual(byProvider.map((x) => [x.start, x.key, x.requests]), [['2030-01-02T00:00:00Z', 'up', 4]]);
  });

  it('defaults to day buckets by user path over the last seven days up to today', async () => {
    clock = Date.parse('2030-01-08T12:00:00Z');
    const week = await buckets('');
    assert.deepEqual(week.map((x) => [x.start, x.key, x.requests]), [
      ['2030-01-02T00:00:00Z', '/team/a', 3],
      ['2030-01-02T00:00:00Z', '/team/b', 1],
      ['2030-01-04T00:00:00Z', '/team/b', 1],
    ]);
    clock = Date.parse('2030-01-09T00:00:00Z'); // Jan 2 has left the seven days
    assert.deepEqual((await buckets('')).map((x) => x.start), ['2030-01-04T00:00:00Z']);
  });

  it('answers 400 naming the field for a bad query', async () => {
    const bad = async (query: string, param: string): Promise<void> => {
      const res = await gw.request('GET', `/admin/usage${query}`, { headers: bearer(MASTER) });
      const error = assertOpenAiError(res, 400, 'invalid_request_error');
      assert.equal(error.param, param, res.text);
      assert.match(error.message, new RegExp(`^${param}: `), res.text);
    };
    await bad('?group_by=team', 'group_by');
    await bad('?bucket=week', 'bucket');
    await bad('?from=2030-02-31', 'from');
    await bad('?to=yesterday', 'to');
    await bad('?from=2030-01-05&to=2030-01-04', 'from');
    await bad('?from=2030-01-01&to=2030-03-01&bucket=hour', 'from');
    await bad('?from=2029-01-01&to=2030-03-01', 'from');
    await bad('?user=me', 'user');
  });

  it('needs the master key', async () => {
    const res = await gw.request('POST', '/admin/api-keys', { body: { name: 'k', user_path: '/team/a' }, headers: bearer(MASTER) });
    const managed = res.json().key as string;
    assertOpenAiError(await gw.request('GET', '/admin/usage', { headers: bearer(managed) }), 401, 'authentication_error');
    assertOpenAiError(await gw.request('GET', '/admin/usage'), 401, 'authentication_error');
  });
});

describe('GET /admin/usage: refused requests', () => {
  let up: FakeUpstream;
  let gw: TestGateway;
  let clock = Date.parse('2030-01-02T10:30:00Z');
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-refused-'));
  // /capped: each child one request an hour. /broke: a budget its first request spends.
  const yaml = () => 'providers:\n' + openaiProvider('up', up.url, ['gpt-x']) + [
    'pricing:',
    '  up/gpt-x: { input_per_mtok: 1000000, output_per_mtok: 1000000 }',
    'rate_limits:',
    '  user_paths: [ { path: /capped, limits: [ { period: hour, max_requests: 1, per_child: true } ] } ]',
    'budgets:',
    '  user_paths: [ { path: /broke, limits: [ { period: day, max_usd: 1 } ] } ]',
    '',
  ].join('\n');
  const start = () => startTestGateway({ yaml: yaml(), env: { MASTER_KEY: MASTER }, now: () => clock, dir });
  const ask = async (at: string, userPath: string, status: number): Promise<void> => {
    clock = Date.parse(at);
    const res = await gw.request('POST', '/v1/chat/completions', { body: { model: 'up/gpt-x', messages: [{ role: 'user', content: `from ${userPath}` }] }, headers: { ...bearer(MASTER), [USER_PATH_HEADER]: userPath } });
    assert.equal(res.status, status, res.text);
  };
  const refused = async (query: string) => {
    const res = await gw.request('GET', `/admin/usage${query}`, { headers: bearer(MASTER) });
    assert.equal(res.status, 200, res.text);
    return (res.json().buckets as Bucket[]).map((b) => [b.start, b.key, b.requests, b.refused]);
  };

  before(async () => {
    up = await startFakeUpstream({ name: 'up', models: ['gpt-x'] });
    gw = await start();
    await ask('2030-01-02T10:30:00Z', '/capped/x', 200);
    for (let i = 0; i < 3; i++) await ask('2030-01-02T10:30:00Z', '/capped/x', 429);
    await ask('2030-01-02T10:31:00Z', '/capped/y', 200);
    await ask('2030-01-02T10:31:30Z', '/capped/y', 429);
    await ask('2030-01-02T10:40:00Z', '/broke', 200);
    await ask('2030-01-02T10:41:00Z', '/broke', 429);
    // A refusal in an hour with no request served.
    await ask('2030-01-02T11:10:00Z', '/capped/x', 200);
    await ask('2030-01-02T11:10:00Z', '/capped/x', 429);
    await ask('2030-01-02T12:10:00Z', '/capped/z', 200);
  });
  after(async () => {
    await gw?.close();
    await up?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('each bucket counts the requests refused with a 429, at once (before they are written)', async () => {
    clock = Date.parse('2030-01-02T12:30:00Z');
    assert.deepEqual(await refused('?from=2030-01-02&to=2030-01-02&group_by=user_path&bucket=hour'), [
      ['2030-01-02T10:00:00Z', '/broke', 1, 1],
      ['2030-01-02T10:00:00Z', '/capped/x', 1, 3],
      ['2030-01-02T10:00:00Z', '/capped/y', 1, 1],
      ['2030-01-02T11:00:00Z', '/capped/x', 1, 1],
      ['2030-01-02T12:00:00Z', '/capped/z', 1, 0],
    ]);
    // By what they asked for.
    assert.deepEqual(await refused('?from=2030-01-02&to=2030-01-02&group_by=model&bucket=day'), [['2030-01-02T00:00:00Z', 'up/gpt-x', 5, 6]]);
    assert.deepEqual(await refused('?from=2030-01-02&to=2030-01-02&group_by=provider&bucket=day'), [['2030-01-02T00:00:00Z', 'up', 5, 6]]);
  });

  it('are written as one row per minute, user path and rule (never one per refusal), and kept across a restart', async () => {
    await gw.close();
    const db = new Database(join(dir, 'floodgate.db'), { readonly: true });
    try {
      const rows = db.prepare('SELECT minute, user_path, scope, subject, period, count FROM refusals ORDER BY minute, user_path').all() as Array<Record<string, unknown>>;
      assert.deepEqual(rows.map((r) => [new Date(r.minute as number).toISOString(), r.user_path, r.scope, r.subject, r.period, r.count]), [
        ['2030-01-02T10:30:00.000Z', '/capped/x', 'user_path', '/capped', 'hour', 3],
        ['2030-01-02T10:31:00.000Z', '/capped/y', 'user_path', '/capped', 'hour', 1],
        ['2030-01-02T10:41:00.000Z', '/broke', 'budget', '/broke', 'day', 1],
        ['2030-01-02T11:10:00.000Z', '/capped/x', 'user_path', '/capped', 'hour', 1],
      ]);
    } finally {
      db.close();
    }
    gw = await start();
    assert.deepEqual((await refused('?from=2030-01-02&to=2030-01-02&group_by=user_path&bucket=day')).map(([, key, , count]) => [key, count]), [
      ['/broke', 1],
      ['/capped/x', 4],
      ['/capped/y', 1],
      ['/capped/z', 0],
    ]);
  });
});
