import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';
import { anthropicProvider, assertAnthropicError, assertNoStack, assertOpenAiError, openaiProvider } from '../support/e2e.ts';
import { refusedPort } from '../support/processes.ts';

const chat = (content = 'hi', model = 'up/gpt-x') => ({ model, messages: [{ role: 'user', content }] });

describe('error responses (CONTRACT §4)', () => {
  let up: FakeUpstream;
  let ant: FakeUpstream;
  let deadUrl: string;
  let gw: TestGateway;

  before(async () => {
    up = await startFakeUpstream({ apiKey: 'k-up', name: 'up' });
    ant = await startFakeUpstream({ apiKey: 'k-ant', name: 'ant' });
    deadUrl = `http://127.0.0.1:${await refusedPort()}`;
    gw = await startTestGateway({
      yaml:
        'server: { body_limit: 1kb }\n' +
        'providers:\n' +
        openaiProvider('up', up.url, ['gpt-x']) +
        `  refusing: { type: openai, base_url: ${up.url}/v1, api_key: k-up, models: [gpt-r] }\n` +
        openaiProvider('slow', up.url, ['gpt-slow'], 'timeout_ms: 300') +
        openaiProvider('dead', deadUrl, ['gpt-dead'], 'connect_timeout_ms: 1000') +
        anthropicProvider('ant', ant.url, ['claude-x']) +
        '',
    });
  });
  after(async () => {
    await gw?.close();
    await up?.close();
    await ant?.close();
  });

  it('malformed JSON → 400 invalid_request_error with param and code keys', async () => {
    const res = await gw.request('POST', '/v1/chat/completions', { body: '{"model": "up/gpt-x", "messages": [', headers: { 'content-type': 'application/json' } });
    const err = assertOpenAiError(res, 400, 'invalid_request_error');
    assert.ok('param' in err && 'code' in err);
    assert.match(err.message, /^malformed JSON body: /);
    assert.equal(err.code, 'invalid_json');
  });

  it('a body that is not an object → 400', async () => {
    const res = await gw.request('POST', '/v1/chat/completions', { body: '[1,2]' });
    assertOpenAiError(res, 400, 'invalid_request_error');
  });

  for (const [field, body] of [
    ['messages', { model: 'up/gpt-x', messages: 'x' }],
    ['model', { model: 5, messages: [{ role: 'user', content: 'x' }] }],
    ['stream', { model: 'up/gpt-x', messages: [{ role: 'user', content: 'x' }], stream: 'yes' }],
  ] as const) {
    it(`wrong type for ${field} → 400 naming the field`, async () => {
      const res = await gw.request('POST', '/v1/chat/completions', { body });
      const err = assertOpenAiError(res, 400, 'invalid_request_error');
      assert.ok(err.message.includes(field), err.message);
      assert.equal(err.param, field);
      // The field is present, just wrong: the message says what it must be, not that it is missing.
      assert.match(err.message, /must be/, err.message);
      assert.doesNotMatch(err.message, /required/, err.message);
    });
  }

  for (const [field, endpoint, body] of [
    ['model', '/v1/chat/completions', { model: '  ', messages: [{ role: 'user', content: 'x' }] }],
    ['messages', '/v1/chat/completions', { model: 'up/gpt-x', messages: [] }],
    ['messages', '/v1/messages', { model: 'ant/claude-x', messages: [], max_tokens: 5 }],
  ] as const) {
    it(`empty ${field} on ${endpoint} → 400 naming the field`, async () => {
      const res = await gw.request('POST', endpoint, { body });
      const err = endpoint === '/v1/messages' ? assertAnthropicError(res, 400, 'invalid_request_error') : assertOpenAiError(res, 400, 'invalid_request_error');
      assert.equal(err.message, `${field}: must not be empty`);
    });
  }

  it('a model name with spaces around it is routed as the name itself', async () => {
    const res = await gw.request('POST', '/v1/chat/completions', { body: chat('hi', '  up/gpt-x ') });
    assert.equal(res.status, 200, res.text);
  });

  it('missing model → 400 naming model', async () => {
    const res = await gw.request('POST', '/v1/chat/completions', { body: { messages: [{ role: 'user', content: 'x' }] } });
    const err = assertOpenAiError(res, 400, 'invalid_request_error');
    assert.match(err.message, /model/);
    assert.match(err.message, /required/);
    assert.equal(err.param, 'model');
  });

  it('validates the other endpoints too (embeddings without input)', async () => {
    const res = await gw.request('POST', '/v1/embeddings', { body: { model: 'up/gpt-x' } });
    const err = assertOpenAiError(res, 400, 'invalid_request_error');
    assert.match(err.message, /input/);
  });

  it('a body above server.body_limit → 413', async () => {
    const res = await gw.request('POST', '/v1/chat/completions', { body: chat('x'.repeat(2000)) });
    assertOpenAiError(res, 413, 'invalid_request_error');
    assert.equal(up.calls.filter((c) => c.path === '/v1/chat/completions' && (c.raw?.length ?? 0) > 1000).length, 0);
  });

  it('an unknown model → 404 not_found_error', async () => {
    const res = await gw.request('POST', '/v1/chat/completions', { body: chat('x', 'no-such-model') });
    const err = assertOpenAiError(res, 404, 'not_found_error');
    assert.match(err.message, /no-such-model/);
    const res2 = await gw.request('POST', '/v1/chat/completions', { body: chat('x', 'nobody/gpt-x') });
    assertOpenAiError(res2, 404, 'not_found_error');
  });

  it('an unknown route → 404 in the error shape', async () => {
    const res = await gw.request('GET', '/v1/nothing-here');
    assertOpenAiError(res, 404, 'not_found_error');
    const res2 = await gw.request('POST', '/totally/unknown', { body: {} });
    assertOpenAiError(res2, 404, 'not_found_error');
  });

  it('upstream 500 → 500 provider_error with the upstream message', async () => {
    up.reset();
    up.failNext(1, { status: 500 });
    const res = await gw.request('POST', '/v1/chat/completions', { body: chat() });
    const err = assertOpenAiError(res, 500, 'provider_error');
    assert.match(err.message, /forced error 500/);
  });

  it('upstream 429 → 429 provider_error, Retry-After passed on; then the gateway\'s own 429 while it runs', async () => {
    up.reset();
    up.failNext(1, { status: 429, headers: { 'retry-after': '7' } });
    // A model of its own: the refusal cools it down (learned capacity) for the tests after this one.
    const res = await gw.request('POST', '/v1/chat/completions', { body: chat('hi', 'refusing/gpt-r') });
    assertOpenAiError(res, 429, 'provider_error');
    assert.equal(res.headers.get('retry-after'), '7');
    const cooling = await gw.request('POST', '/v1/chat/completions', { body: chat('hi', 'refusing/gpt-r') });
    assertOpenAiError(cooling, 429, 'rate_limit_error');
    assert.equal(up.callCount('/v1/chat/completions'), 1);
  });

  it('upstream error with a non-JSON body is still a clean provider_error', async () => {
    up.reset();
    up.failNext(1, { status: 503, body: '<html>Service Unavailable</html>' });
    const res = await gw.request('POST', '/v1/chat/completions', { body: chat() });
    assertOpenAiError(res, 503, 'provider_error');
  });

  it('upstream connection refused → 502 provider_error', async () => {
    const res = await gw.request('POST', '/v1/chat/completions', { body: chat('x', 'dead/gpt-dead') });
    assertOpenAiError(res, 502, 'provider_error');
  });

  it('upstream that never answers, with a short timeout_ms → 504 provider_error', async () => {
    up.reset();
    up.hangNext(1);
    const started = Date.now();
    const res = await gw.request('POST', '/v1/chat/completions', { body: chat('x', 'slow/gpt-slow') });
    assertOpenAiError(res, 504, 'provider_error');
    assert.ok(Date.now() - started < 3000, 'the timeout fired promptly');
  });

  describe('/v1/messages answers in the Anthropic shape', () => {
    it('malformed JSON', async () => {
      const res = await gw.request('POST', '/v1/messages', { body: '{nope', headers: { 'content-type': 'application/json' } });
      assertAnthropicError(res, 400, 'invalid_request_error');
      assert.equal(res.json().error.param, undefined);
    });

    it('a wrong type for stream names the field and what it must be', async () => {
      const res = await gw.request('POST', '/v1/messages', { body: { model: 'ant/claude-x', max_tokens: 5, stream: 'yes', messages: [{ role: 'user', content: 'x' }] } });
      const err = assertAnthropicError(res, 400, 'invalid_request_error');
      assert.match(err.message, /stream: must be a boolean/);
    });

    it('missing max_tokens names the field', async () => {
      const res = await gw.request('POST', '/v1/messages', { body: { model: 'ant/claude-x', messages: [{ role: 'user', content: 'x' }] } });
      const err = assertAnthropicError(res, 400, 'invalid_request_error');
      assert.match(err.message, /max_tokens/);
    });

    it('unknown model', async () => {
      const res = await gw.request('POST', '/v1/messages', { body: { model: 'zzz', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] } });
      assertAnthropicError(res, 404, 'not_found_error');
    });

    it('upstream failure', async () => {
      ant.reset();
      ant.failNext(1, { status: 529 });
      const res = await gw.request('POST', '/v1/messages', { body: { model: 'ant/claude-x', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] } });
      assertAnthropicError(res, 529, 'provider_error');
    });

    it('oversized body', async () => {
      const res = await gw.request('POST', '/v1/messages', { body: { model: 'ant/claude-x', max_tokens: 5, messages: [{ role: 'user', content: 'y'.repeat(3000) }] } });
      assertAnthropicError(res, 413, 'invalid_request_error');
    });
  });

  it('hostile inputs never produce a stack trace nor crash the gateway', async () => {
    const bodies: Array<[string, string, string | undefined]> = [
      ['/v1/chat/completions', '{"model":"up/gpt-x","messages":[{"role":"user","content":"x"}],"__proto__":{"x":1}}', 'application/json'],
      ['/v1/chat/completions', '{"model":"up/gpt-x","messages":[{"role":"user","content":"x"}],"\\u005f_proto__":{"x":1}}', 'application/json'],
      ['/v1/chat/completions', '{"model":"up/gpt-x","messages":[{"role":"user","content":"x"}],"constructor":{"prototype":{"x":1}}}', 'application/json'],
      ['/v1/chat/completions', '{"model":"up/gpt-x","messages":[{"role":"user","content":"x"}],', 'application/json'],
      ['/v1/chat/completions', 'null', 'application/json'],
      ['/v1/chat/completions', '"string"', 'application/json'],
      ['/v1/chat/completions', '', 'application/json'],
      ['/v1/chat/completions', 'model=x', 'application/x-www-form-urlencoded'],
      ['/v1/chat/completions', '{"model":"up/gpt-x","messages":[]}', 'application/json'],
      ['/v1/embeddings', '{"model":{},"input":"x"}', 'application/json'],
      ['/v1/audio/transcriptions', 'not multipart', 'text/plain'],
      ['/v1/audio/transcriptions', '--b\r\nbroken', 'multipart/form-data; boundary=b'],
      ['/v1/audio/speech', '{"model":"up/gpt-x","input":7}', 'application/json'],
      ['/v1/messages', '{"model":"ant/claude-x","max_tokens":-1,"messages":[{"role":"user","content":"x"}]}', 'application/json'],
      ['/v1/responses', '{"model":"up/gpt-x","stream":1}', 'application/json'],
    ];
    for (const [path, body, contentType] of bodies) {
      const res = await gw.request('POST', path, { body, headers: contentType ? { 'content-type': contentType } : {} });
      assert.ok(res.status >= 400 && res.status < 500, `${path} ${body} → ${res.status} ${res.text}`);
      assertNoStack(res.text);
      if (path === '/v1/messages') assert.equal(res.json().type, 'error');
      else assert.ok(res.json().error?.type, res.text);
    }
    const health = await gw.request('GET', '/health');
    assert.equal(health.status, 200);
    assert.deepEqual(health.json(), { status: 'ok' });
  });
});
