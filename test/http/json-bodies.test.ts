/**
 * Prototype poisoning (CONTRACT §4): a JSON body carrying a `__proto__` key or a
 * `constructor.prototype` pair, however its key is spelled, is a 400 on every route that parses
 * JSON, and nothing is forwarded or stored.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { anthropicProvider, assertAnthropicError, assertOpenAiError, openaiProvider } from '../support/e2e.ts';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';

const MASTER = 'json-bodies-master-key';
const headers = { authorization: `Bearer ${MASTER}`, 'content-type': 'application/json' };
const MESSAGES = '[{"role":"user","content":"hi"}]';

/** Hostile members, as raw JSON text: JSON.stringify cannot write a `__proto__` key. */
const POISONS: Array<[string, string]> = [
  ['__proto__', '"__proto__": {"polluted": true}'],
  ['__proto__ before a space and the colon', '"__proto__" : {"polluted": true}'],
  ['escaped \\u005f_proto__', '"\\u005f_proto__": {"polluted": true}'],
  ['escaped \\u005F\\u005Fproto\\u005F\\u005F', '"\\u005F\\u005Fproto\\u005F\\u005F": {"polluted": true}'],
  ['every letter escaped', `"${[...'__proto__'].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('')}": {"polluted": true}`],
  ['constructor.prototype', '"constructor": {"prototype": {"polluted": true}}'],
  ['escaped \\u0063onstructor.prototype', '"\\u0063onstructor": {"prototype": {"polluted": true}}'],
];

/** Each JSON route with a valid body; `%s` is where the hostile member goes (top level, then nested). */
const ROUTES: Array<{ method: string; path: string; anthropic?: boolean; bodies: string[] }> = [
  {
    method: 'POST',
    path: '/v1/chat/completions',
    bodies: [`{"model": "up/gpt-x", "messages": ${MESSAGES}, %s}`, '{"model": "up/gpt-x", "messages": [{"role": "user", "content": "hi", %s}]}'],
  },
  {
    method: 'POST',
    path: '/v1/messages',
    anthropic: true,
    bodies: [`{"model": "an/claude-x", "max_tokens": 5, "messages": ${MESSAGES}, %s}`, `{"model": "an/claude-x", "max_tokens": 5, "metadata": {%s}, "messages": ${MESSAGES}}`],
  },
  { method: 'POST', path: '/v1/responses', bodies: ['{"model": "up/gpt-x", "input": "hi", %s}'] },
  { method: 'POST', path: '/v1/embeddings', bodies: ['{"model": "up/gpt-x", "input": ["hi", {%s}]}'] },
  {
    method: 'PUT',
    path: '/admin/rate-limits',
    bodies: ['{"user_path": "/poisoned", "limit_key": {"period": "minute"}, "max_requests": 1, %s}', '{"user_path": "/poisoned", "limit_key": {"period": "minute", %s}, "max_requests": 1}'],
  },
  { method: 'POST', path: '/admin/rate-limits/reset-one', bodies: ['{"user_path": "/poisoned", "period": "minute", %s}'] },
  { method: 'POST', path: '/admin/rate-limits/reset', bodies: ['{"confirmation": "reset", %s}'] },
  { method: 'POST', path: '/admin/api-keys', bodies: ['{"name": "poisoned", %s}'] },
  { method: 'POST', path: '/v1/batches', bodies: ['{"input_file_id": "file-x", "endpoint": "/v1/chat/completions", "completion_window": "24h", "metadata": {%s}}'] },
];

describe('JSON bodies: prototype poisoning', { timeout: 30_000 }, () => {
  let up: FakeUpstream;
  let gw: TestGateway;

  before(async () => {
    up = await startFakeUpstream({ name: 'up' });
    gw = await startTestGateway({
      yaml: 'providers:\n' + openaiProvider('up', up.url, ['gpt-x']) + anthropicProvider('an', up.url, ['claude-x']),
      env: { MASTER_KEY: MASTER },
    });
  });
  after(async () => {
    await gw?.close();
    await up?.close();
  });

  it('every spelling, top level and nested, on every JSON route: 400 invalid_request_error, nothing forwarded or stored', async () => {
    up.reset();
    for (const route of ROUTES) {
      for (const template of route.bodies) {
        for (const [what, member] of POISONS) {
          const body = template.replace('%s', member);
          const res = await gw.request(route.method, route.path, { body, headers });
          const label = `${route.method} ${route.path} ${what}: ${body}`;
          assert.equal(res.status, 400, `${label} → ${res.status} ${res.text}`);
          if (route.anthropic) assertAnthropicError(res, 400, 'invalid_request_error');
          else assert.match(assertOpenAiError(res, 400, 'invalid_request_error').message, /forbidden "__proto__" or "constructor.prototype" key/);
        }
      }
    }
    assert.equal(up.calls.length, 0, `forwarded: ${up.calls.map((c) => c.path).join(', ')}`);
    const rules = await gw.request('GET', '/admin/rate-limits', { headers });
    assert.deepEqual(rules.json().rate_limits, [], 'no rule written');
    const keys = await gw.request('GET', '/admin/api-keys', { headers });
    assert.deepEqual(keys.json().api_keys, [], 'no key created');
    assert.equal(({} as Record<string, unknown>).polluted, undefined, 'Object.prototype untouched');
  });

  it('the same words as values, or a constructor key without prototype, are ordinary JSON and forwarded', async () => {
    up.reset();
    const bodies = [
      `{"model": "up/gpt-x", "messages": [{"role": "user", "content": "__proto__"}]}`,
      `{"model": "up/gpt-x", "messages": ${MESSAGES}, "constructor": {"name": "x"}}`,
      `{"model": "up/gpt-x", "messages": ${MESSAGES}, "metadata": {"proto": "constructor"}}`,
    ];
    for (const body of bodies) {
      const res = await gw.request('POST', '/v1/chat/completions', { body, headers });
      assert.equal(res.status, 200, `${body} → ${res.text}`);
    }
    assert.equal(up.calls.length, bodies.length);
    assert.deepEqual((up.calls[1]!.body as Record<string, unknown>).constructor, { name: 'x' }, 'forwarded as sent');
  });
});

describe('JSON bodies: forwarded as the client sent them', { timeout: 30_000 }, () => {
  let up: FakeUpstream;
  let gw: TestGateway;

  before(async () => {
    up = await startFakeUpstream({ name: 'up' });
    gw = await startTestGateway({ yaml: 'providers:\n' + openaiProvider('up', up.url, ['gpt-x']), env: { MASTER_KEY: MASTER } });
  });
  after(async () => {
    await gw?.close();
    await up?.close();
  });

  it('byte for byte when the provider takes the model as it is; unknown fields kept when the model is rewritten', async () => {
    up.reset();
    const exact = `{ "messages" : ${MESSAGES},\n  "model": "gpt-x", "x_vendor": {"n": 1.50, "s": "\\u00e9"}, "temperature": 0 }`;
    assert.equal((await gw.request('POST', '/v1/chat/completions', { body: exact, headers })).status, 200);
    assert.equal(up.calls[0]!.raw.toString('utf8'), exact);

    const rewritten = { model: 'up/gpt-x', messages: [{ role: 'user', content: 'hi' }], x_vendor: { n: 1.5 }, temperature: 0 };
    assert.equal((await gw.request('POST', '/v1/chat/completions', { body: rewritten, headers })).status, 200);
    assert.deepEqual(up.calls[1]!.body, { ...rewritten, model: 'gpt-x' });
  });
});
