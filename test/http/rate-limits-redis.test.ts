/**
 * One gateway with its counters in Redis (127.0.0.1:6379, a prefix of its own): every kind of
 * admission (chat, stream, passthrough, realtime session, file upload, batch submission) counts in the shared
 * counters, with the same answers as the memory store, and the status list and /v1/usage read them.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI, { toFile } from 'openai';
import WebSocket from 'ws';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';
import { assertRateLimited, USER_PATH_HEADER } from '../support/rate-limits.ts';
import { dropPrefix, testPrefix } from '../support/redis.ts';

const PATH = '/every';

describe('a gateway counting in Redis', () => {
  let upstream: FakeUpstream;
  let gw: TestGateway;
  const prefix = testPrefix();

  before(async () => {
    upstream = await startFakeUpstream({ models: ['gpt-x'] });
    gw = await startTestGateway({
      env: { RATE_LIMITS_BACKEND: 'redis', RATE_LIMITS_REDIS_PREFIX: prefix },
      yaml: `providers:
  mock: { type: mock }
  up: { type: openai, base_url: ${upstream.url}/v1, api_key: k, models: [gpt-x] }
rate_limits:
  user_paths: [ { path: ${PATH}, limits: [ { period: hour, max_requests: 7 }, { period: concurrent, max_requests: 1 } ] } ]
`,
    });
  });

  after(async () => {
    await gw.close();
    await upstream.close();
    await dropPrefix(prefix);
  });

  const headers = { [USER_PATH_HEADER]: PATH };
  const chatBody = { model: 'mock/mock-1', messages: [{ role: 'user', content: 'hi' }] };

  it('counts every kind of admission in the shared counters', async () => {
    const first = await gw.request('POST', '/v1/chat/completions', { body: chatBody, headers });
    assert.equal(first.status, 200, first.text);
    assert.equal(first.headers.get('x-ratelimit-limit-requests'), '7');
    assert.equal(first.headers.get('x-ratelimit-remaining-requests'), '6');

    const streamed = await gw.request('POST', '/v1/chat/completions', { body: { ...chatBody, stream: true }, headers });
    assert.equal(streamed.status, 200);
    assert.match(streamed.text, /data: \[DONE\]/);

    const passthrough = await gw.request('POST', '/p/up/chat/completions', { body: { model: 'gpt-x', messages: [{ role: 'user', content: 'raw' }] }, headers });
    assert.equal(passthrough.status, 200, passthrough.text);
    assert.equal(passthrough.headers.get('x-ratelimit-remaining-requests'), '4');

    // A realtime session holds the one slot for its whole life.
    const session = new WebSocket(`${gw.url.replace('http', 'ws')}/v1/realtime?model=mock/mock-1`, ['realtime'], { headers });
    await new Promise<void>((resolve, reject) => {
      session.once('open', () => resolve());
      session.once('error', reject);
    });
    const busy = await gw.request('POST', '/v1/chat/completions', { body: chatBody, headers });
    assertRateLimited(busy, `rate limit exceeded for ${PATH}: concurrent request limit of 1 reached`);
    assert.equal(busy.headers.get('retry-after'), '1');
    await new Promise<void>((resolve) => {
      session.once('close', () => resolve());
      session.close();
    });
    let afterSession = await gw.request('POST', '/v1/chat/completions', { body: chatBody, headers });
    // The session's slot goes back when its socket has closed on the gateway's side too.
    for (let i = 0; i < 100 && afterSession.status === 429; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      afterSession = await gw.request('POST', '/v1/chat/completions', { body: chatBody, headers });
    }
    assert.equal(afterSession.status, 200, afterSession.text);

    // A file upload and a batch submission count one request each and hold no slot.
    const sdk = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: headers });
    const line = JSON.stringify({ custom_id: 'a', method: 'POST', url: '/v1/chat/completions', body: chatBody });
    const file = await sdk.files.create({ file: await toFile(Buffer.from(`${line}\n`), 'input.jsonl'), purpose: 'batch' });
    const batch = await sdk.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    assert.equal(typeof batch.id, 'string');

    const over = await gw.request('POST', '/v1/chat/completions', { body: chatBody, headers });
    const retryAfter = assertRateLimited(over, `rate limit exceeded for ${PATH}: hour request limit of 7 reached`);
    assert.equal(over.headers.get('x-ratelimit-remaining-requests'), '0');
    assert.equal(over.headers.get('x-ratelimit-reset-requests'), String(retryAfter));

    const list = await gw.request('GET', '/admin/rate-limits');
    const hour = list.json().rate_limits.find((r: { period_seconds: number }) => r.period_seconds === 3600);
    assert.equal(hour.requests_used, 7);
    assert.equal(hour.requests_remaining, 0);
    const usage = await gw.request('GET', '/v1/usage', { headers });
    const own = usage.json().rate_limits.find((r: { period_seconds: number }) => r.period_seconds === 3600);
    assert.equal(own.requests_used, 7);
    assert.equal(own.exhausted, true);
    assert.deepEqual((await gw.request('GET', '/health')).json(), { status: 'ok' });
  });
});
