/**
 * End-to-end: the response cache. Hits are served before rate limiting and count nothing,
 * entries are scoped by user path (unless shared) and by the model as routing resolved it,
 * expire after their TTL, follow Cache-Control (no-cache / no-store), and only non-streaming
 * chat, responses and embeddings are cached. `x-floodgate-cache: hit|miss|bypass` tells which.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import OpenAI from 'openai';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway, type TestResponse } from '../support/gateway.ts';
import { openaiProvider } from '../support/e2e.ts';
import { USER_PATH_HEADER, assertRateLimited, findRule, listRules } from '../routing/http-helpers.ts';

interface World {
  a: FakeUpstream;
  b: FakeUpstream;
  gw: TestGateway;
  close(): Promise<void>;
}

function cacheYaml(opts: { ttl?: number; shared?: boolean; enabled?: boolean } = {}): string {
  return `cache:\n  response: { enabled: ${opts.enabled ?? true}, ttl_seconds: ${opts.ttl ?? 60}, max_entries: 100, shared: ${opts.shared ?? false} }\n`;
}

async function withWorld(rest: string, fn: (w: World) => Promise<void>): Promise<void> {
  const [a, b] = await Promise.all(['a', 'b'].map((name) => startFakeUpstream({ name, models: ['m1', 'emb'] })));
  const yaml = 'providers:\n' + openaiProvider('a', a!.url, ['m1', 'emb']) + openaiProvider('b', b!.url, ['m1']) + rest;
  let gw: TestGateway | undefined;
  try {
    gw = await startTestGateway({ yaml });
    await fn({ a: a!, b: b!, gw, close: async () => {} });
  } finally {
    await gw?.close();
    await Promise.all([a!.close(), b!.close()]);
  }
}

const body = (content = 'hello cache', model = 'a/m1', extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  model,
  messages: [{ role: 'user', content }],
  ...extra,
});

function chat(w: World, b: Record<string, unknown> = body(), headers: Record<string, string> = {}): Promise<TestResponse> {
  return w.gw.request('POST', '/v1/chat/completions', { body: b, headers });
}

const cacheHeader = (res: { headers: Headers }): string | null => res.headers.get('x-floodgate-cache');

function ok(res: TestResponse, cache: string | null): TestResponse {
  assert.equal(res.status, 200, res.text);
  assert.equal(cacheHeader(res), cache, `x-floodgate-cache of ${res.text.slice(0, 80)}`);
  return res;
}

describe('response cache', { concurrency: true }, () => {
  it('a second identical non-stream chat is a hit: same body, no upstream call', async () => {
    await withWorld(cacheYaml(), async (w) => {
      const first = ok(await chat(w), 'miss');
      const second = ok(await chat(w), 'hit');
      assert.equal(second.text, first.text, 'the hit replays the stored body byte for byte');
      assert.match(second.headers.get('content-type') ?? '', /application\/json/);
      assert.equal(w.a.callCount(), 1);
      // key order in the request body does not matter
      ok(await chat(w, { messages: [{ content: 'hello cache', role: 'user' }], model: 'a/m1' }), 'hit');
      // any other parameter does
      ok(await chat(w, body('hello cache', 'a/m1', { temperature: 0.5 })), 'miss');
      ok(await chat(w, body('hello other')), 'miss');
      assert.equal(w.a.callCount(), 3);
    });
  });

  it('through the SDK too', async () => {
    await withWorld(cacheYaml(), async (w) => {
      const sdk = new OpenAI({ baseURL: `${w.gw.url}/v1`, apiKey: 'unused', maxRetries: 0 });
      const one = await sdk.chat.completions.create({ model: 'a/m1', messages: [{ role: 'user', content: 'sdk' }] }).withResponse();
      const two = await sdk.chat.completions.create({ model: 'a/m1', messages: [{ role: 'user', content: 'sdk' }] }).withResponse();
      assert.equal(one.response.headers.get('x-floodgate-cache'), 'miss');
      assert.equal(two.response.headers.get('x-floodgate-cache'), 'hit');
      assert.deepEqual(two.data, one.data);
      assert.equal(w.a.callCount(), 1);
    });
  });

  it('a hit is served even when the user is over its rate limit, and counts nothing', async () => {
    const rest = cacheYaml() + 'rate_limits:\n' +
      '  user_paths: [ { path: /u, limits: [ { period: minute, max_requests: 1 } ] } ]\n' +
      '  providers: [ { name: a, limits: [ { period: minute, max_requests: 100 } ] } ]\n';
    await withWorld(rest, async (w) => {
      const as = { [USER_PATH_HEADER]: '/u' };
      const first = ok(await chat(w, body(), as), 'miss');
      assert.equal(first.headers.get('x-ratelimit-remaining-requests'), '0');
      const used = async (): Promise<[number | undefined, number | undefined]> => {
        const rules = await listRules(w.gw);
        return [findRule(rules, 'user_path', '/u', 60)?.requests_used, findRule(rules, 'provider', 'a', 60)?.requests_used];
      };
      assert.deepEqual(await used(), [1, 1]);
      for (let i = 0; i < 3; i++) {
        const hit = ok(await chat(w, body(), as), 'hit');
        assert.equal(hit.text, first.text);
        assert.equal(hit.headers.get('x-ratelimit-remaining-requests'), null, 'a hit carries no (stale) rate-limit headers');
      }
      assert.deepEqual(await used(), [1, 1], 'hits counted nothing');
      // a request that is not in the cache is refused
      assertRateLimited(await chat(w, body('not cached'), as), 'rate limit exceeded for /u: minute request limit of 1 reached');
      // no-cache skips the lookup, so it is rate limited too
      assert.equal((await chat(w, body(), { ...as, 'cache-control': 'no-cache' })).status, 429);
      assert.equal(w.a.callCount(), 1);
    });
  });

  it('different user paths do not share entries', async () => {
    await withWorld(cacheYaml(), async (w) => {
      ok(await chat(w, body(), { [USER_PATH_HEADER]: '/u1' }), 'miss');
      ok(await chat(w, body(), { [USER_PATH_HEADER]: '/u2' }), 'miss');
      ok(await chat(w, body()), 'miss');
      ok(await chat(w, body(), { [USER_PATH_HEADER]: '/u1' }), 'hit');
      ok(await chat(w, body(), { [USER_PATH_HEADER]: '/u1/child' }), 'miss');
      assert.equal(w.a.callCount(), 4);
    });
  });

  it('with shared: true, different user paths share entries', async () => {
    await withWorld(cacheYaml({ shared: true }), async (w) => {
      const first = ok(await chat(w, body(), { [USER_PATH_HEADER]: '/u1' }), 'miss');
      assert.equal(ok(await chat(w, body(), { [USER_PATH_HEADER]: '/u2' }), 'hit').text, first.text);
      ok(await chat(w, body()), 'hit');
      assert.equal(w.a.callCount(), 1);
    });
  });

  it('an entry expires after ttl_seconds', async () => {
    await withWorld(cacheYaml({ ttl: 1 }), async (w) => {
      ok(await chat(w), 'miss');
      ok(await chat(w), 'hit');
      await sleep(1100);
      ok(await chat(w), 'miss');
      ok(await chat(w), 'hit');
      assert.equal(w.a.callCount(), 2);
    });
  });

  it('Cache-Control: no-store bypasses the cache and stores nothing', async () => {
    await withWorld(cacheYaml(), async (w) => {
      ok(await chat(w, body(), { 'cache-control': 'no-store' }), 'bypass');
      ok(await chat(w), 'miss');
      ok(await chat(w, body(), { 'cache-control': 'no-store' }), 'bypass');
      assert.equal(w.a.callCount(), 3, 'no-store never reads an entry either');
      ok(await chat(w), 'hit');
    });
  });

  it('Cache-Control: no-cache skips the lookup but stores the fresh answer', async () => {
    await withWorld(cacheYaml(), async (w) => {
      const old = ok(await chat(w), 'miss');
      const fresh = ok(await chat(w, body(), { 'cache-control': 'no-cache' }), 'miss');
      assert.equal(w.a.callCount(), 2, 'no-cache went upstream although an entry existed');
      assert.notEqual(fresh.json().id, old.json().id);
      const hit = ok(await chat(w), 'hit');
      assert.equal(hit.text, fresh.text, 'the refreshed answer replaced the old entry');
      // a first request with no-cache is stored too
      ok(await chat(w, body('new'), { 'cache-control': 'no-cache' }), 'miss');
      ok(await chat(w, body('new')), 'hit');
      assert.equal(w.a.callCount(), 3);
    });
  });

  it('streaming requests are never cached nor served from the cache', async () => {
    await withWorld(cacheYaml(), async (w) => {
      const stream = async (): Promise<Response> => {
        const res = await fetch(`${w.gw.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body('hello cache', 'a/m1', { stream: true })),
        });
        assert.equal(res.status, 200);
        assert.match(await res.text(), /\[DONE\]/);
        return res;
      };
      const s1 = await stream();
      assert.notEqual(cacheHeader(s1), 'hit');
      await stream();
      assert.equal(w.a.callCount(), 2, 'both streams went upstream');
      ok(await chat(w), 'miss');
      const s3 = await stream();
      assert.notEqual(cacheHeader(s3), 'hit', 'a stored non-stream answer is not replayed to a stream');
      assert.equal(w.a.callCount(), 4);
    });
  });

  it('upstream errors are not cached', async () => {
    await withWorld(cacheYaml(), async (w) => {
      w.a.failNext(1, { status: 500 });
      assert.equal((await chat(w)).status, 500);
      ok(await chat(w), 'miss');
      ok(await chat(w), 'hit');
      assert.equal(w.a.callCount(), 2);
    });
  });

  it('embeddings and responses are cached', async () => {
    await withWorld(cacheYaml(), async (w) => {
      const sdk = new OpenAI({ baseURL: `${w.gw.url}/v1`, apiKey: 'unused', maxRetries: 0 });
      const e1 = await sdk.embeddings.create({ model: 'a/emb', input: ['alpha', 'beta'] }).withResponse();
      const e2 = await sdk.embeddings.create({ model: 'a/emb', input: ['alpha', 'beta'] }).withResponse();
      assert.equal(e1.response.headers.get('x-floodgate-cache'), 'miss');
      assert.equal(e2.response.headers.get('x-floodgate-cache'), 'hit');
      assert.deepEqual(e2.data, e1.data);
      assert.equal(w.a.callCount('/v1/embeddings'), 1);
      const e3 = await sdk.embeddings.create({ model: 'a/emb', input: ['alpha'] }).withResponse();
      assert.equal(e3.response.headers.get('x-floodgate-cache'), 'miss');

      const r1 = await sdk.responses.create({ model: 'a/m1', input: 'respond please' }).withResponse();
      const r2 = await sdk.responses.create({ model: 'a/m1', input: 'respond please' }).withResponse();
      assert.equal(r1.response.headers.get('x-floodgate-cache'), 'miss');
      assert.equal(r2.response.headers.get('x-floodgate-cache'), 'hit');
      assert.equal(r2.data.id, r1.data.id);
      assert.equal(r2.data.output_text, 'respond please');
      assert.equal(w.a.callCount('/v1/responses'), 1);
      // the same parameters on another endpoint are another entry
      const c1 = await chat(w, { model: 'a/m1', input: 'respond please' });
      assert.notEqual(cacheHeader(c1), 'hit');
    });
  });

  it('GET /v1/usage counts cached requests', async () => {
    await withWorld(cacheYaml(), async (w) => {
      const as = { [USER_PATH_HEADER]: '/usage-team' };
      ok(await chat(w, body(), as), 'miss');
      ok(await chat(w, body(), as), 'hit');
      ok(await chat(w, body(), as), 'hit');
      const res = await w.gw.request('GET', '/v1/usage', { headers: as });
      assert.equal(res.status, 200, res.text);
      const usage = res.json();
      assert.equal(usage.totals.requests, 3);
      assert.equal(usage.totals.cached_requests, 2);
      const row = usage.by_model.find((r: { provider: string; model: string }) => r.provider === 'a' && r.model === 'm1');
      assert.ok(row, res.text);
      assert.equal(row.requests, 3);
      assert.equal(row.cached_requests, 2);
      assert.ok(row.total_tokens > 0);
    });
  });

  it('the bare name and provider/model of the same target share an entry; another provider does not', async () => {
    await withWorld(cacheYaml(), async (w) => {
      const first = ok(await chat(w, body('shared', 'm1')), 'miss');
      assert.equal(ok(await chat(w, body('shared', 'a/m1')), 'hit').text, first.text);
      ok(await chat(w, body('shared', 'b/m1')), 'miss');
      assert.equal(w.a.callCount(), 1);
      assert.equal(w.b.callCount(), 1);
    });
  });

  it('an alias has its own entries, whichever target served', async () => {
    await withWorld(cacheYaml() + 'aliases:\n  fast: { strategy: round_robin, targets: [a/m1, b/m1] }\n', async (w) => {
      ok(await chat(w, body('via alias', 'fast')), 'miss');
      ok(await chat(w, body('via alias', 'fast')), 'hit');
      assert.equal(w.a.callCount() + w.b.callCount(), 1);
      ok(await chat(w, body('via alias', 'a/m1')), 'miss');
    });
  });

  it('a cache hit takes no round-robin turn from the alias', async () => {
    await withWorld(cacheYaml() + 'aliases:\n  fast: { strategy: round_robin, targets: [a/m1, b/m1] }\n', async (w) => {
      ok(await chat(w, body('one', 'fast')), 'miss'); // turn 1: a
      for (let i = 0; i < 3; i++) ok(await chat(w, body('one', 'fast')), 'hit');
      ok(await chat(w, body('two', 'fast')), 'miss'); // turn 2: b, whatever the hits in between
      assert.equal(w.a.callCount(), 1);
      assert.equal(w.b.callCount(), 1);
    });
  });

  it('cache disabled: no x-floodgate-cache header, every request goes upstream', async () => {
    await withWorld(cacheYaml({ enabled: false }), async (w) => {
      for (let i = 0; i < 2; i++) assert.equal(cacheHeader(await chat(w)), null);
      assert.equal(w.a.callCount(), 2);
    });
  });
});
