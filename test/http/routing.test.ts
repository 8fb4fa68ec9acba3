/**
 * End-to-end: routing around saturation — virtual models (aliases) and their balancing,
 * skipping targets saturated by provider/model rules, the all-saturated 429, and failover
 * on upstream failures (429, 5xx, connection refused, timeout, stream broken before its
 * first byte), with per-attempt provider/model accounting and once-per-request user paths.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import OpenAI, { APIError } from 'openai';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway, type TestResponse } from '../support/gateway.ts';
import { assertOpenAiError, openaiProvider, waitFor } from '../support/e2e.ts';
import { refusedPort } from '../support/processes.ts';
import {
  USER_PATH_HEADER,
  assertRateLimited,
  eventually,
  findRule,
  listRules,
  possibleRetryAfters,
  timed,
  type StatusRecord,
} from '../routing/http-helpers.ts';

type Name = 'a' | 'b' | 'c';
const NAMES: readonly Name[] = ['a', 'b', 'c'];

interface World {
  a: FakeUpstream;
  b: FakeUpstream;
  c: FakeUpstream;
  gw: TestGateway;
  sdk: OpenAI;
  /** Upstream call counts of a, b, c. */
  counts(): [number, number, number];
  close(): Promise<void>;
}

/**
 * Three fake upstreams a, b, c (each serving m1) behind one gateway. `rest` is appended
 * YAML (aliases, failover, rate_limits); `extra` adds keys to a provider's mapping;
 * `urls` points a provider elsewhere (e.g. at a closed port).
 */
async function start(
  rest = '',
  opts: { extra?: Partial<Record<Name, string>>; urls?: Partial<Record<Name, string>>; env?: Record<string, string> } = {},
): Promise<World> {
  const [a, b, c] = await Promise.all(NAMES.map((name) => startFakeUpstream({ name, models: ['m1'] })));
  const ups = { a: a!, b: b!, c: c! };
  let yaml = 'providers:\n';
  for (const name of NAMES) yaml += openaiProvider(name, opts.urls?.[name] ?? ups[name].url, ['m1'], opts.extra?.[name] ?? '');
  let gw: TestGateway;
  try {
    gw = await startTestGateway({ yaml: yaml + rest, ...(opts.env ? { env: opts.env } : {}) });
  } catch (err) {
    await Promise.all(NAMES.map((n) => ups[n].close()));
    throw err;
  }
  return {
    ...ups,
    gw,
    sdk: new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0 }),
    counts: () => [ups.a.callCount(), ups.b.callCount(), ups.c.callCount()],
    close: async () => {
      await gw.close();
      await Promise.all(NAMES.map((n) => ups[n].close()));
    },
  };
}

async function withWorld(rest: string, fn: (w: World) => Promise<void>, opts?: Parameters<typeof start>[1]): Promise<void> {
  const w = await start(rest, opts);
  try {
    await fn(w);
  } finally {
    await w.close();
  }
}

/** Which fake answered: its name is in the completion id (`chatcmpl-<name>-<n>`). */
function servedBy(id: string): string {
  const m = /^chatcmpl-([abc])-\d+$/.exec(id);
  assert.ok(m, `unexpected completion id ${id}`);
  return m[1]!;
}

async function sdkChat(w: World, model: string, content = 'hello there'): Promise<string> {
  const completion = await w.sdk.chat.completions.create({ model, messages: [{ role: 'user', content }] });
  assert.equal(completion.choices[0]?.message.content, content);
  return servedBy(completion.id);
}

function chat(w: World, model: string, headers: Record<string, string> = {}): Promise<TestResponse> {
  return w.gw.request('POST', '/v1/chat/completions', { body: { model, messages: [{ role: 'user', content: 'hi' }] }, headers });
}

/** A raw streaming chat; resolves once the gateway sent its response headers. */
function streamChat(w: World, model: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${w.gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model, stream: true, messages: [{ role: 'user', content: 'one two three' }] }),
  });
}

/** The concatenated delta contents of an SSE chat stream and whether it ended with [DONE]. */
function streamText(sse: string): { text: string; done: boolean; ids: string[] } {
  let text = '';
  const ids = new Set<string>();
  let done = false;
  for (const line of sse.split('\n')) {
    if (!line.startsWith('data: ')) continue;
    const data = line.slice(6);
    if (data === '[DONE]') {
      done = true;
      continue;
    }
    const event = JSON.parse(data);
    if (typeof event.id === 'string') ids.add(event.id);
    text += event.choices?.[0]?.delta?.content ?? '';
  }
  return { text, done, ids: [...ids] };
}

async function listModelIds(w: World): Promise<string[]> {
  const res = await w.gw.request('GET', '/v1/models');
  assert.equal(res.status, 200, res.text);
  return res.json().data.map((m: { id: string }) => m.id);
}

function rule(rules: StatusRecord[], scope: string, subject: string, period: number): StatusRecord {
  const found = findRule(rules, scope, subject, period);
  assert.ok(found, `rule ${scope} ${subject} ${period} not listed`);
  return found;
}

const rules = (w: World): Promise<StatusRecord[]> => listRules(w.gw);

const alias = (strategy: string, targets: string): string => `aliases:\n  fast: { strategy: ${strategy}, targets: ${targets} }\n`;
const providerRules = (items: string): string => `rate_limits:\n  providers: [ ${items} ]\n`;
const concurrent1 = (...names: Name[]): string =>
  names.map((n) => `{ name: ${n}, limits: [ { period: concurrent, max_requests: 1 } ] }`).join(', ');

// ------------------------------------------------------------------------------------------

describe('routing: virtual models (aliases)', { concurrency: true }, () => {
  it('round_robin alternates a, b, a, b', async () => {
    await withWorld(alias('round_robin', '[a/m1, b/m1]'), async (w) => {
      const order: string[] = [];
      for (let i = 0; i < 4; i++) order.push(await sdkChat(w, 'fast'));
      assert.deepEqual(order, ['a', 'b', 'a', 'b']);
      assert.deepEqual(w.counts(), [2, 2, 0]);
      for (const call of [...w.a.calls, ...w.b.calls]) assert.equal(call.model, 'm1', 'the upstream gets its own model id');
    });
  });

  it('weighted 1:2 gives the smooth sequence b a b b a b over 6 requests', async () => {
    await withWorld(alias('weighted', '[a/m1, { model: b/m1, weight: 2 }]'), async (w) => {
      const order: string[] = [];
      for (let i = 0; i < 6; i++) order.push(await sdkChat(w, 'fast'));
      assert.deepEqual(order, ['b', 'a', 'b', 'b', 'a', 'b']);
      assert.deepEqual(w.counts(), [2, 4, 0], 'each target gets its weight share');
    });
  });

  it('first always uses the first target while it has capacity', async () => {
    await withWorld(alias('first', '[a/m1, b/m1, c/m1]'), async (w) => {
      for (let i = 0; i < 4; i++) assert.equal(await sdkChat(w, 'fast'), 'a');
      assert.deepEqual(w.counts(), [4, 0, 0]);
    });
  });

  it('/v1/models lists provider models and the alias', async () => {
    await withWorld(alias('first', '[a/m1, b/m1]'), async (w) => {
      const page = await w.sdk.models.list();
      const ids = page.data.map((m) => m.id);
      assert.deepEqual(ids.sort(), ['a/m1', 'b/m1', 'c/m1', 'fast']);
      assert.equal(page.data.find((m) => m.id === 'fast')?.owned_by, 'floodgate');
    });
  });

  it('a target saturated by a provider rule is skipped without being called; it is used again once free', async () => {
    await withWorld(alias('first', '[a/m1, b/m1]') + providerRules(concurrent1('a')), async (w) => {
      const release = w.a.holdStreamNext();
      const held = await streamChat(w, 'fast');
      assert.equal(held.status, 200);
      assert.equal(w.a.callCount(), 1);
      assert.equal(await sdkChat(w, 'fast'), 'b', 'a is saturated: the next target serves');
      assert.equal(await sdkChat(w, 'fast'), 'b');
      assert.deepEqual(w.counts(), [1, 2, 0], "a's call count is unchanged: it was never called");
      release();
      const body = streamText(await held.text());
      assert.ok(body.done);
      assert.deepEqual(body.ids.map(servedBy), ['a']);
      await eventually(async () => (await sdkChat(w, 'fast')) === 'a', 3000, 'a used again after its slot came back');
    });
  });

  it('round_robin: a pick that is saturated falls through to the next target', async () => {
    await withWorld(alias('round_robin', '[a/m1, b/m1]') + providerRules(concurrent1('a')), async (w) => {
      const release = w.a.holdStreamNext();
      const held = await streamChat(w, 'fast'); // pick a (held)
      assert.equal(held.status, 200);
      assert.equal(await sdkChat(w, 'fast'), 'b'); // pick b
      assert.equal(await sdkChat(w, 'fast'), 'b', 'pick a is saturated → b');
      assert.deepEqual(w.counts(), [1, 2, 0]);
      release();
      await held.text();
    });
  });

  it('a target saturated by a model rule is skipped too', async () => {
    const rest = alias('first', '[a/m1, b/m1]') + 'rate_limits:\n  models: [ { model: a/m1, limits: [ { period: minute, max_requests: 1 } ] } ]\n';
    await withWorld(rest, async (w) => {
      assert.equal(await sdkChat(w, 'fast'), 'a');
      assert.equal(await sdkChat(w, 'fast'), 'b');
      assert.equal(await sdkChat(w, 'fast'), 'b');
      assert.deepEqual(w.counts(), [1, 2, 0]);
    });
  });

  it('every target saturated: 429 with Retry-After and the first target\'s message, no upstream call; still listed', async () => {
    await withWorld(alias('round_robin', '[a/m1, b/m1]') + providerRules(concurrent1('a', 'b')), async (w) => {
      const releaseA = w.a.holdStreamNext();
      const releaseB = w.b.holdStreamNext();
      const heldA = await streamChat(w, 'fast');
      const heldB = await streamChat(w, 'fast');
      assert.equal(heldA.status, 200);
      assert.equal(heldB.status, 200);
      assert.deepEqual(w.counts(), [1, 1, 0]);
      // Both rotations (starting at a, then at b) report the alias's first target.
      for (let i = 0; i < 2; i++) {
        const res = await chat(w, 'fast');
        const retryAfter = assertRateLimited(res, 'rate limit exceeded for provider a: concurrent request limit of 1 reached');
        assert.equal(retryAfter, 1, 'concurrency: always 1');
      }
      // The SDK sees a RateLimitError
      await assert.rejects(w.sdk.chat.completions.create({ model: 'fast', messages: [{ role: 'user', content: 'x' }] }), (err: unknown) => {
        assert.ok(err instanceof APIError);
        assert.equal(err.status, 429);
        assert.equal(err.headers?.get('retry-after'), '1');
        return true;
      });
      assert.deepEqual(w.counts(), [1, 1, 0], 'no upstream was called');
      assert.ok((await listModelIds(w)).includes('fast'), 'the alias stays listed while all its targets are saturated');
      // The direct target reports itself
      assertRateLimited(await chat(w, 'b/m1'), 'rate limit exceeded for provider b: concurrent request limit of 1 reached');
      releaseA();
      releaseB();
      await Promise.all([heldA.text(), heldB.text()]);
      await eventually(async () => (await chat(w, 'fast')).status === 200, 3000, 'alias served again');
    });
  });

  it('every target saturated but failover configured for the alias: the failover candidate serves', async () => {
    const rest = alias('first', '[a/m1, b/m1]') + 'failover:\n  fast: [c/m1]\n' + providerRules(concurrent1('a', 'b'));
    await withWorld(rest, async (w) => {
      const releases = [w.a.holdStreamNext(), w.b.holdStreamNext()];
      const held = [await streamChat(w, 'fast'), await streamChat(w, 'fast')];
      assert.deepEqual(w.counts(), [1, 1, 0]);
      assert.equal(await sdkChat(w, 'fast'), 'c');
      assert.deepEqual(w.counts(), [1, 1, 1]);
      for (const r of releases) r();
      await Promise.all(held.map((h) => h.text()));
    });
  });

  it('an upstream failure of an alias target goes to the failover candidates, not to the alias\'s other targets', async () => {
    await withWorld(alias('first', '[a/m1, b/m1]') + 'failover:\n  fast: [c/m1]\n', async (w) => {
      w.a.failNext(1, { status: 500 });
      assert.equal(await sdkChat(w, 'fast'), 'c');
      assert.deepEqual(w.counts(), [1, 0, 1]);
    });
  });

  it('an alias named like a bare model is reachable under that name (it wins over bare-model resolution)', async () => {
    await withWorld('aliases:\n  m1: { strategy: round_robin, targets: [a/m1, b/m1] }\n', async (w) => {
      assert.ok((await listModelIds(w)).includes('m1'));
      const order = [await sdkChat(w, 'm1'), await sdkChat(w, 'm1'), await sdkChat(w, 'm1')];
      assert.deepEqual(order, ['a', 'b', 'a']);
      assert.equal(await sdkChat(w, 'b/m1'), 'b', 'provider/model still addresses one target');
    });
  });

  it('an alias whose target no provider serves stops the start-up with an error naming the key', async () => {
    await assert.rejects(start(alias('first', '[a/m1, a/nope]')), (err: unknown) => {
      assert.ok(err instanceof Error);
      assert.match(err.message, /aliases\.fast\.targets\[1\]/);
      assert.match(err.message, /a\/nope/);
      return true;
    });
  });
});

// ------------------------------------------------------------------------------------------

const FAILOVER_ABC = 'failover:\n  a/m1: [b/m1, c/m1]\n';

describe('routing: failover', { concurrency: true }, () => {
  it('upstream 500 on the primary: served by the next candidate', async () => {
    await withWorld(FAILOVER_ABC, async (w) => {
      w.a.failNext(1, { status: 500 });
      assert.equal(await sdkChat(w, 'a/m1'), 'b');
      assert.deepEqual(w.counts(), [1, 1, 0]);
      assert.equal(w.a.calls[0]!.status, 500);
      assert.equal(await sdkChat(w, 'a/m1'), 'a', 'the primary is tried first again on the next request');
    });
  });

  it('upstream 503 and 429 on the primary fail over too; a bare name uses the failover of its target', async () => {
    await withWorld(FAILOVER_ABC, async (w) => {
      w.a.failNext(1, { status: 503 });
      assert.equal(await sdkChat(w, 'a/m1'), 'b');
      w.a.failNext(1, { status: 429 });
      assert.equal(await sdkChat(w, 'm1'), 'b', 'bare m1 is a/m1 and has its failover');
      assert.deepEqual(w.counts(), [2, 2, 0]);
      // The 429 (with the fake's retry-after of 1 s) cools a down: b serves without a being asked.
      assert.equal(await sdkChat(w, 'a/m1'), 'b');
      assert.deepEqual(w.counts(), [2, 3, 0]);
    });
  });

  it('a fails, b fails, c serves — in order', async () => {
    await withWorld(FAILOVER_ABC, async (w) => {
      w.a.failNext(1, { status: 500 });
      w.b.failNext(1, { status: 429 });
      assert.equal(await sdkChat(w, 'a/m1'), 'c');
      assert.deepEqual(w.counts(), [1, 1, 1]);
      assert.ok(w.a.calls[0]!.at <= w.b.calls[0]!.at && w.b.calls[0]!.at <= w.c.calls[0]!.at, 'tried a, then b, then c');
    });
  });

  it('connection refused on the primary: served by the next candidate', async () => {
    const port = await refusedPort();
    await withWorld(FAILOVER_ABC, async (w) => {
      assert.equal(await sdkChat(w, 'a/m1'), 'b');
      assert.deepEqual(w.counts(), [0, 1, 0]);
    }, { urls: { a: `http://127.0.0.1:${port}` } });
  });

  it('timeout on the primary: served by the next candidate', async () => {
    await withWorld(FAILOVER_ABC, async (w) => {
      w.a.hangNext(1);
      const t0 = Date.now();
      assert.equal(await sdkChat(w, 'a/m1'), 'b');
      assert.ok(Date.now() - t0 >= 250, 'waited for the timeout');
      assert.deepEqual(w.counts(), [1, 1, 0]);
    }, { extra: { a: 'timeout_ms: 300' } });
  });

  it('failover works with rate limits disabled', async () => {
    await withWorld(FAILOVER_ABC, async (w) => {
      w.a.failNext(1, { status: 500 });
      w.b.failNext(1, { status: 500 });
      assert.equal(await sdkChat(w, 'a/m1'), 'c');
      assert.deepEqual(w.counts(), [1, 1, 1]);
    }, { env: { RATE_LIMITS_ENABLED: 'false' } });
  });

  it('every candidate fails: the last upstream error is passed on', async () => {
    await withWorld(FAILOVER_ABC, async (w) => {
      w.a.failNext(1, { status: 500 });
      w.b.failNext(1, { status: 500 });
      w.c.failNext(1, { status: 503, body: { error: { message: 'c is overloaded', type: 'server_error', code: 'overloaded' } } });
      const res = await chat(w, 'a/m1');
      const err = assertOpenAiError(res, 503, 'provider_error');
      assert.equal(err.message, 'c is overloaded');
      assert.deepEqual(w.counts(), [1, 1, 1]);
    });
  });

  it('a client error (400) is not failed over', async () => {
    await withWorld(FAILOVER_ABC, async (w) => {
      w.a.failNext(1, { status: 400, body: { error: { message: 'bad things', type: 'invalid_request_error' } } });
      const res = await chat(w, 'a/m1');
      assert.equal(res.status, 400, res.text);
      assert.equal(res.json().error.message, 'bad things');
      assert.deepEqual(w.counts(), [1, 0, 0]);
    });
  });

  it('without failover the upstream error is passed on with its status', async () => {
    await withWorld('', async (w) => {
      w.a.failNext(1, { status: 500 });
      assert.equal(assertOpenAiError(await chat(w, 'a/m1'), 500, 'provider_error').message, 'fake a: forced error 500');
      w.a.failNext(1, { status: 503 });
      await assert.rejects(w.sdk.chat.completions.create({ model: 'a/m1', messages: [{ role: 'user', content: 'x' }] }), (err: unknown) => err instanceof APIError && err.status === 503);
      w.a.failNext(1, { status: 429, headers: { 'retry-after': '7' } });
      const limited = await chat(w, 'a/m1');
      assertOpenAiError(limited, 429, 'provider_error');
      assert.equal(limited.headers.get('retry-after'), '7', "the upstream's Retry-After is passed on");
      assert.deepEqual(w.counts(), [3, 0, 0]);
      // Then the gateway itself refuses a/m1 until that Retry-After is up, without asking the upstream.
      const cooling = await chat(w, 'a/m1');
      assert.equal(assertOpenAiError(cooling, 429, 'rate_limit_error').message, 'rate limit exceeded for model a/m1: the provider refused and asked to retry later (learned from its answers)');
      assert.ok(['6', '7'].includes(cooling.headers.get('retry-after') ?? ''), `retry-after ${cooling.headers.get('retry-after')}`);
      assert.deepEqual(w.counts(), [3, 0, 0]);
    });
  });

  it('without failover a timeout is a 504 and a refused connection a 502', async () => {
    const port = await refusedPort();
    await withWorld('', async (w) => {
      w.a.hangNext(1);
      assertOpenAiError(await chat(w, 'a/m1'), 504, 'provider_error');
      assertOpenAiError(await chat(w, 'c/m1'), 502, 'provider_error');
    }, { extra: { a: 'timeout_ms: 300' }, urls: { c: `http://127.0.0.1:${port}` } });
  });

  it('a saturated primary (model rule) is not called; failover serves immediately', async () => {
    const rest = FAILOVER_ABC + 'rate_limits:\n  models: [ { model: a/m1, limits: [ { period: minute, max_requests: 1 } ] } ]\n';
    await withWorld(rest, async (w) => {
      assert.equal(await sdkChat(w, 'a/m1'), 'a');
      assert.equal(await sdkChat(w, 'a/m1'), 'b');
      assert.equal(await sdkChat(w, 'a/m1'), 'b');
      assert.deepEqual(w.counts(), [1, 2, 0]);
    });
  });

  it('without failover a saturated direct target answers 429 without an upstream call', async () => {
    const rest = 'rate_limits:\n  models: [ { model: a/m1, limits: [ { period: minute, max_requests: 1 } ] } ]\n';
    await withWorld(rest, async (w) => {
      assert.equal(await sdkChat(w, 'a/m1'), 'a');
      const res = await chat(w, 'a/m1');
      assertRateLimited(res, 'rate limit exceeded for model a/m1: minute request limit of 1 reached');
      assert.deepEqual(w.counts(), [1, 0, 0]);
    });
  });

  it('saturated failover candidates are skipped', async () => {
    const rest = FAILOVER_ABC + 'rate_limits:\n  models: [ { model: b/m1, limits: [ { period: minute, max_requests: 1 } ] } ]\n';
    await withWorld(rest, async (w) => {
      assert.equal(await sdkChat(w, 'b/m1'), 'b', 'uses up b/m1');
      w.a.failNext(1, { status: 500 });
      assert.equal(await sdkChat(w, 'a/m1'), 'c', 'a failed, b is saturated and skipped, c serves');
      assert.deepEqual(w.counts(), [1, 1, 1]);
    });
  });

  it('all candidates saturated: 429 of the first target with the smallest Retry-After among candidates', async () => {
    // a: one per hour; b: one per minute. The message is a's, the Retry-After the smaller of the
    // two: b's, except in the last minute of a UTC hour, when a's window closes first.
    const rest = 'failover:\n  a/m1: [b/m1]\n' + providerRules(
      '{ name: a, limits: [ { period: hour, max_requests: 1 } ] }, { name: b, limits: [ { period: minute, max_requests: 1 } ] }',
    );
    await withWorld(rest, async (w) => {
      const first = await timed(() => sdkChat(w, 'a/m1'));
      assert.equal(first.value, 'a');
      const second = await timed(() => sdkChat(w, 'a/m1'));
      assert.equal(second.value, 'b');
      const refused = await timed(() => chat(w, 'a/m1'));
      const retryAfter = assertRateLimited(refused.value, 'rate limit exceeded for provider a: hour request limit of 1 reached');
      const bRetry = possibleRetryAfters([{ at: second.at, amount: 1 }], refused.at, 60, 1);
      const aRetry = possibleRetryAfters([{ at: first.at, amount: 1 }], refused.at, 3600, 1);
      const expected = new Set([...aRetry].flatMap((x) => [...bRetry].map((y) => Math.min(x, y))));
      assert.ok(expected.has(retryAfter), `Retry-After ${retryAfter} should be the smaller of a's (${[...aRetry].join(', ')}) and b's (${[...bRetry].join(', ')})`);
      assert.equal(refused.value.headers.get('x-ratelimit-limit-requests'), '1');
      assert.equal(refused.value.headers.get('x-ratelimit-remaining-requests'), '0');
      assert.equal(refused.value.headers.get('x-ratelimit-reset-requests'), String(retryAfter), 'reset = Retry-After');
      assert.deepEqual(w.counts(), [1, 1, 0], 'no upstream called for the refusal');
    });
  });

  it('streaming: an upstream 500 before the stream starts fails over; the client gets one clean stream', async () => {
    await withWorld(FAILOVER_ABC, async (w) => {
      w.a.failNext(1, { status: 500 });
      const stream = await w.sdk.chat.completions.create({ model: 'a/m1', stream: true, messages: [{ role: 'user', content: 'one two three' }] });
      let text = '';
      const ids = new Set<string>();
      for await (const chunk of stream) {
        ids.add(chunk.id);
        text += chunk.choices[0]?.delta.content ?? '';
      }
      assert.equal(text, 'one two three');
      assert.deepEqual([...ids].map(servedBy), ['b']);
      assert.deepEqual(w.counts(), [1, 1, 0]);
      assert.equal(w.a.calls[0]!.stream, true);
    });
  });

  it('streaming: a stream that breaks before its first byte fails over', async () => {
    await withWorld(FAILOVER_ABC, async (w) => {
      w.a.dropStreamBeforeFirstByteNext(1);
      w.b.dropStreamBeforeFirstByteNext(1);
      const res = await streamChat(w, 'a/m1');
      assert.equal(res.status, 200);
      const body = streamText(await res.text());
      assert.equal(body.text, 'one two three');
      assert.ok(body.done);
      assert.deepEqual(body.ids.map(servedBy), ['c']);
      assert.deepEqual(w.counts(), [1, 1, 1]);
    });
  });

  it('streaming: a timeout before the first byte fails over', async () => {
    await withWorld(FAILOVER_ABC, async (w) => {
      w.a.hangNext(1);
      const res = await streamChat(w, 'a/m1');
      assert.equal(res.status, 200);
      const body = streamText(await res.text());
      assert.equal(body.text, 'one two three');
      assert.deepEqual(body.ids.map(servedBy), ['b']);
    }, { extra: { a: 'timeout_ms: 300' } });
  });

  it('streaming: a stream that breaks after its first byte is not failed over (the client already has data)', async () => {
    await withWorld(FAILOVER_ABC, async (w) => {
      w.a.dropStreamNext(1);
      const res = await streamChat(w, 'a/m1');
      assert.equal(res.status, 200);
      const text = await res.text().catch(() => '');
      assert.ok(!text.includes('[DONE]'), 'the stream is not completed by someone else');
      await waitFor(() => w.a.calls[0]?.aborted === true || w.a.calls[0]?.status === 200, 2000, 'a was called');
      assert.deepEqual(w.counts(), [1, 0, 0], 'no second upstream was called mid-stream');
    });
  });

  it('user-path rules count once per request even when failover made 3 attempts; provider rules each count their attempt', async () => {
    const rest = FAILOVER_ABC + 'rate_limits:\n' +
      '  user_paths: [ { path: /u, limits: [ { period: minute, max_requests: 100 } ] }, { path: /, limits: [ { period: minute, max_requests: 100 } ] } ]\n' +
      '  providers: [ ' + NAMES.map((n) => `{ name: ${n}, limits: [ { period: minute, max_requests: 100 } ] }`).join(', ') + ' ]\n';
    await withWorld(rest, async (w) => {
      w.a.failNext(1, { status: 500 });
      w.b.failNext(1, { status: 502 });
      const res = await chat(w, 'a/m1', { [USER_PATH_HEADER]: '/u/alice' });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(w.counts(), [1, 1, 1]);
      const list = await rules(w);
      assert.equal(rule(list, 'user_path', '/u', 60).requests_used, 1, 'user path counted once');
      assert.equal(rule(list, 'user_path', '/', 60).requests_used, 1, 'the root rule too');
      for (const n of NAMES) assert.equal(rule(list, 'provider', n, 60).requests_used, 1, `provider ${n} counted its attempt`);
      // the success headers come from the request's own admission
      assert.equal(res.headers.get('x-ratelimit-limit-requests'), '100');
    });
  });

  it('user path counted once when the primary is saturated and a candidate fails; a saturated target counts nothing', async () => {
    const rest = FAILOVER_ABC + 'rate_limits:\n' +
      '  user_paths: [ { path: /u, limits: [ { period: minute, max_requests: 100 } ] } ]\n' +
      '  models: [ { model: a/m1, limits: [ { period: minute, max_requests: 1 } ] } ]\n' +
      '  providers: [ ' + NAMES.map((n) => `{ name: ${n}, limits: [ { period: minute, max_requests: 100 } ] }`).join(', ') + ' ]\n';
    await withWorld(rest, async (w) => {
      assert.equal((await chat(w, 'a/m1')).status, 200, 'uses up a/m1 (as /, outside /u)');
      w.b.failNext(1, { status: 500 });
      const res = await chat(w, 'a/m1', { [USER_PATH_HEADER]: '/u' });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(w.counts(), [1, 1, 1]);
      const list = await rules(w);
      assert.equal(rule(list, 'user_path', '/u', 60).requests_used, 1);
      assert.equal(rule(list, 'model', 'a/m1', 60).requests_used, 1, 'the refused attempt counted nothing');
      assert.deepEqual(NAMES.map((n) => rule(list, 'provider', n, 60).requests_used), [1, 1, 1]);
    });
  });

  it('tokens are charged to the provider and model that executed the request', async () => {
    const rest = FAILOVER_ABC + 'rate_limits:\n' +
      '  providers: [ ' + NAMES.map((n) => `{ name: ${n}, limits: [ { period: minute, max_tokens: 100000 } ] }`).join(', ') + ' ]\n' +
      '  models: [ { model: c/m1, limits: [ { period: minute, max_tokens: 100000 } ] }, { model: a/m1, limits: [ { period: minute, max_tokens: 100000 } ] } ]\n';
    await withWorld(rest, async (w) => {
      w.a.failNext(1, { status: 500 });
      w.b.failNext(1, { status: 500 });
      assert.equal(await sdkChat(w, 'a/m1', 'twelve chars'), 'c');
      await eventually(async () => (rule(await rules(w), 'provider', 'c', 60).tokens_used ?? 0) > 0, 3000, 'c charged');
      const list = await rules(w);
      assert.equal(rule(list, 'provider', 'c', 60).tokens_used, 6, 'fake usage: 3 prompt + 3 completion tokens');
      assert.equal(rule(list, 'model', 'c/m1', 60).tokens_used, 6);
      assert.equal(rule(list, 'provider', 'a', 60).tokens_used, 0);
      assert.equal(rule(list, 'provider', 'b', 60).tokens_used, 0);
      assert.equal(rule(list, 'model', 'a/m1', 60).tokens_used, 0, 'the requested model is not charged');
      const usage = (await w.gw.request('GET', '/v1/usage')).json();
      assert.deepEqual(usage.by_model.map((r: { provider: string; model: string }) => `${r.provider}/${r.model}`), ['c/m1']);
    });
  });

  it('primary fails upstream and the only candidate is saturated: the upstream error is passed on', async () => {
    const rest = 'failover:\n  a/m1: [b/m1]\n' + 'rate_limits:\n  models: [ { model: b/m1, limits: [ { period: minute, max_requests: 1 } ] } ]\n';
    await withWorld(rest, async (w) => {
      assert.equal(await sdkChat(w, 'b/m1'), 'b');
      w.a.failNext(1, { status: 502 });
      assertOpenAiError(await chat(w, 'a/m1'), 502, 'provider_error');
      assert.deepEqual(w.counts(), [1, 1, 0]);
    });
  });

  it('provider concurrency slots of failed attempts are released, during a long stream and after the request', async () => {
    const rest = FAILOVER_ABC + 'rate_limits:\n' +
      '  user_paths: [ { path: /u, limits: [ { period: concurrent, max_requests: 5 } ] } ]\n' +
      '  providers: [ ' + NAMES.map((n) => `{ name: ${n}, limits: [ { period: concurrent, max_requests: 5 } ] }`).join(', ') + ' ]\n';
    await withWorld(rest, async (w) => {
      const inFlight = async (): Promise<Record<string, number | undefined>> => {
        const list = await rules(w);
        return {
          u: rule(list, 'user_path', '/u', 0).in_flight,
          a: rule(list, 'provider', 'a', 0).in_flight,
          b: rule(list, 'provider', 'b', 0).in_flight,
          c: rule(list, 'provider', 'c', 0).in_flight,
        };
      };
      // non-stream, 3 attempts
      w.a.failNext(1, { status: 500 });
      w.b.failNext(1, { status: 500 });
      assert.equal((await chat(w, 'a/m1', { [USER_PATH_HEADER]: '/u' })).status, 200);
      await eventually(async () => JSON.stringify(await inFlight()) === JSON.stringify({ u: 0, a: 0, b: 0, c: 0 }), 3000, 'all slots back after the request');

      // long stream served by c after a and b failed (one with 500, one timing out)
      w.a.failNext(1, { status: 500 });
      w.b.hangNext(1);
      const release = w.c.holdStreamNext();
      const held = await streamChat(w, 'a/m1', { [USER_PATH_HEADER]: '/u' });
      assert.equal(held.status, 200);
      assert.deepEqual(await inFlight(), { u: 1, a: 0, b: 0, c: 1 }, 'only the serving attempt and the request hold slots');
      release();
      const body = streamText(await held.text());
      assert.deepEqual(body.ids.map(servedBy), ['c']);
      await eventually(async () => JSON.stringify(await inFlight()) === JSON.stringify({ u: 0, a: 0, b: 0, c: 0 }), 3000, 'all slots back after the stream');
    }, { extra: { b: 'timeout_ms: 300' } });
  });
});
