/**
 * End-to-end: `GET /admin/rate-limits/explain`, the dry run. Every step asks explain first, then
 * sends the real request at the same instant (the gateway's clock is injected and frozen): the
 * decision, breach message and Retry-After explain gives must be what the request then gets,
 * and the target it names must be the one that answers.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { z } from 'zod';
import type { explanation } from '../../src/http/openapi/responses.ts';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';
import { assertOpenAiError, openaiProvider } from '../support/e2e.ts';
import { MASTER, USER_PATH_HEADER, admin, chat, listRules } from '../support/rate-limits.ts';

/** The answer as the OpenAPI document describes it. */
type Explanation = z.infer<typeof explanation>;

const CONFIG = `
aliases:
  fast: { strategy: round_robin, targets: [up/gpt-x, backup/gpt-x] }
rate_limits:
  user_paths: [ { path: /team, limits: [ { period: minute, max_requests: 1 } ] } ]
  providers:
    - { name: up, limits: [ { period: hour, max_requests: 1 } ] }
    - { name: backup, limits: [ { period: minute, max_requests: 3 } ] }
    - { name: spare, limits: [ { period: concurrent, max_requests: 1 } ] }
`;

describe('GET /admin/rate-limits/explain', () => {
  let fake: FakeUpstream;
  let gw: TestGateway;
  // Ten seconds into an hour: the minute and hour windows give different Retry-After values.
  const clock = Date.parse('2030-01-01T00:00:10Z');

  const explain = async (query: string): Promise<Explanation> => {
    const res = await admin(gw, 'GET', `/admin/rate-limits/explain?${query}`);
    assert.equal(res.status, 200, res.text);
    return res.json();
  };
  /** Which provider instance answered: each instance sends its own API key to the shared fake upstream. */
  const lastCaller = (): string => String(fake.calls.at(-1)?.headers.authorization).replace('Bearer k-', '');

  /** Explain, then the real request: the two must agree. */
  const explainThenSend = async (model: string, userPath: string): Promise<Explanation> => {
    const explained = await explain(`model=${encodeURIComponent(model)}&user_path=${encodeURIComponent(userPath)}`);
    const calls = fake.calls.length;
    const res = await gw.request('POST', '/v1/chat/completions', { body: chat(model), headers: { authorization: `Bearer ${MASTER}`, [USER_PATH_HEADER]: userPath } });
    if (explained.decision === 'admitted') {
      assert.equal(res.status, 200, `explain admitted, the request got ${res.status}: ${res.text}`);
      assert.equal(explained.breach, undefined);
      assert.equal(lastCaller(), explained.target?.provider, 'the target explain names is the one called');
    } else {
      const error = assertOpenAiError(res, 429, 'rate_limit_error');
      assert.equal(error.message, explained.breach?.message);
      assert.equal(res.headers.get('retry-after'), String(explained.breach?.retry_after_seconds));
      assert.equal(fake.calls.length, calls, 'nothing was sent upstream');
    }
    return explained;
  };

  before(async () => {
    fake = await startFakeUpstream({ name: 'fake', models: ['gpt-x'] });
    const providers = 'providers:\n' + ['up', 'backup', 'spare'].map((name) => openaiProvider(name, fake.url, ['gpt-x'])).join('');
    gw = await startTestGateway({ yaml: providers + CONFIG, env: { MASTER_KEY: MASTER }, now: () => clock });
  });
  after(async () => {
    await gw?.close();
    await fake?.close();
  });

  it('follows an alias round its targets, skips a saturated one, and when all are saturated gives the first target\'s breach with the earliest Retry-After', async () => {
    const steps: Array<[string, string | undefined]> = [];
    for (let i = 0; i < 5; i++) {
      const e = await explainThenSend('fast', '/ops');
      steps.push([e.decision, e.target?.provider ?? e.breach?.message]);
      assert.deepEqual(e.targets.map((t) => [t.provider, t.model, t.failover]), i % 2 === 0 ? [['up', 'gpt-x', false], ['backup', 'gpt-x', false]] : [['backup', 'gpt-x', false], ['up', 'gpt-x', false]]);
    }
    assert.deepEqual(steps, [
      ['admitted', 'up'],
      ['admitted', 'backup'],
      ['admitted', 'backup'], // up's turn, but up has used its hour: skipped
      ['admitted', 'backup'],
      ['refused', 'rate limit exceeded for provider up: hour request limit of 1 reached'],
    ]);
    // The refused request took its turn too: backup comes first now.
    const last = await explain('model=fast&user_path=/ops');
    assert.deepEqual(last.targets.map((t) => [t.provider, t.has_capacity, t.breach?.period_label]), [['backup', false, 'minute'], ['up', false, 'hour']]);
    const [backup, up] = last.targets.map((t) => t.breach!.retry_after_seconds);
    assert.ok(backup! < up!, `backup frees up first: ${backup} < ${up}`);
    // The message is up's (the alias's first listed target), the Retry-After backup's.
    assert.deepEqual(last.breach, { scope: 'provider', subject: 'up', period_label: 'hour', retry_after_seconds: backup, message: 'rate limit exceeded for provider up: hour request limit of 1 reached' });
    assert.deepEqual(last.rules.map((r) => [r.scope, r.subject, r.requests_used]), [['provider', 'backup', 3], ['provider', 'up', 1]]);
  });

  it('refuses a consumer over its user-path limit at once, with the same message and Retry-After as the 429', async () => {
    const first = await explainThenSend('spare/gpt-x', '/team/a');
    assert.equal(first.decision, 'admitted');
    const second = await explainThenSend('spare/gpt-x', '/team/b');
    assert.equal(second.decision, 'refused');
    assert.deepEqual({ ...second.breach, retry_after_seconds: undefined }, { scope: 'user_path', subject: '/team', period_label: 'minute', retry_after_seconds: undefined, message: 'rate limit exceeded for /team: minute request limit of 1 reached' });
    assert.deepEqual(second.targets.map((t) => [t.provider, t.has_capacity]), [['spare', true]], 'the target itself has capacity');
    assert.deepEqual(second.rules.map((r) => [r.scope, r.subject, r.period_seconds]), [['user_path', '/team', 60], ['provider', 'spare', 0]]);
  });

  it('sees a concurrency slot held by a streaming request', async () => {
    const release = fake.holdStreamNext();
    const controller = new AbortController();
    const streaming = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${MASTER}`, 'content-type': 'application/json' },
      body: JSON.stringify(chat('spare/gpt-x', 'hi', { stream: true })),
      signal: controller.signal,
    });
    assert.equal(streaming.status, 200);
    try {
      const busy = await explainThenSend('spare/gpt-x', '/ops');
      assert.equal(busy.breach?.message, 'rate limit exceeded for provider spare: concurrent request limit of 1 reached');
      assert.equal(busy.breach?.retry_after_seconds, 1);
      assert.equal(busy.rules.find((r) => r.subject === 'spare')?.in_flight, 1);
    } finally {
      release();
      await streaming.text();
    }
  });

  it('counts nothing and leaves the alias rotation alone', async () => {
    const before = await listRules(gw);
    const targets = [];
    for (let i = 0; i < 5; i++) targets.push((await explain('model=fast&user_path=/elsewhere')).targets[0]!.provider);
    assert.deepEqual(await listRules(gw), before);
    assert.equal(new Set(targets).size, 1, `the alias's next target stays the same: ${targets.join(', ')}`);
  });

  it('follows how each endpoint admits: a batch checks user-path rules only, without slots', async () => {
    const chatExplained = await explain('model=up/gpt-x&user_path=/ops');
    assert.equal(chatExplained.decision, 'refused');
    const batch = await explain('model=up/gpt-x&user_path=/ops&endpoint=batches');
    assert.equal(batch.decision, 'admitted');
    assert.equal(batch.target, undefined);
    assert.deepEqual(batch.rules.map((r) => r.subject), ['up'], 'the target rules are still listed, from the targets');
  });

  it('answers 400 naming the field, 404 for an unknown model, 401 without the master key', async () => {
    const bad = async (query: string, param: string): Promise<void> => {
      const error = assertOpenAiError(await admin(gw, 'GET', `/admin/rate-limits/explain${query}`), 400, 'invalid_request_error');
      assert.equal(error.param, param);
      assert.match(error.message, new RegExp(`^${param}\\b`));
    };
    await bad('', 'model');
    await bad('?model=', 'model');
    await bad('?model=fast&user_path=/a/../b', 'user_path');
    await bad('?model=fast&endpoint=fax', 'endpoint');
    await bad('?model=fast&tenant=x', 'tenant');
    const missing = assertOpenAiError(await admin(gw, 'GET', '/admin/rate-limits/explain?model=nope'), 404, 'not_found_error');
    assert.equal(missing.code, 'model_not_found');
    assertOpenAiError(await admin(gw, 'GET', '/admin/rate-limits/explain?model=fast', undefined, ''), 401, 'authentication_error');
  });

  it('answers 503 feature_unavailable when rate limits are disabled', async () => {
    const off = await startTestGateway({ env: { MASTER_KEY: MASTER, RATE_LIMITS_ENABLED: 'false' } });
    try {
      const error = assertOpenAiError(await admin(off, 'GET', '/admin/rate-limits/explain?model=mock/mock-1'), 503, 'invalid_request_error');
      assert.equal(error.code, 'feature_unavailable');
    } finally {
      await off.close();
    }
  });
});
