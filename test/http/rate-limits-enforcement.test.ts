/**
 * End-to-end: rate-limit enforcement on the model endpoints (user-path, provider and model
 * rules; request and token windows; success headers; Anthropic shape; /v1/usage; passthrough).
 * Every test starts its own fake upstream and gateway, so the tests run in parallel.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';
import {
  USER_PATH_HEADER,
  assertRateLimited,
  assertRefusalTriple,
  atSecondStart,
  chat,
  chatAs,
  eventually,
  fakeChatTokens,
  possibleResets,
  possibleRetryAfters,
  rateLimitHeaderNames,
  sleep,
  timed,
  upProvider,
} from '../support/rate-limits.ts';

interface Setup {
  up: FakeUpstream;
  gw: TestGateway;
  close(): Promise<void>;
}

/** A fake upstream `up` (model gpt-x) and a gateway with `yaml` appended to its providers. */
async function setup(yaml: string, env: Record<string, string> = {}, models = ['gpt-x']): Promise<Setup> {
  const up = await startFakeUpstream({ name: 'up', models });
  const gw = await startTestGateway({ yaml: upProvider(up.url, models) + yaml, env });
  return {
    up,
    gw,
    close: async () => {
      await gw.close();
      await up.close();
    },
  };
}

const sdkFor = (gw: TestGateway, userPath: string): OpenAI =>
  new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: { [USER_PATH_HEADER]: userPath } });

const oneIn = (set: Set<number>, value: number, what: string): void =>
  assert.ok(set.has(value), `${what}: got ${value}, contract formula allows ${[...set].join(' or ')}`);

describe('rate limits: enforcement', { concurrency: true, timeout: 40_000 }, () => {
  it('user-path rule: one shared counter for the subtree, 429 via the SDK and raw, exact body and headers, window slides', async () => {
    const s = await setup('rate_limits:\n  user_paths: [ { path: /team, limits: [ { period_seconds: 3, max_requests: 2 } ] } ]\n');
    try {
      const alice = sdkFor(s.gw, '/team/alice');
      const bob = sdkFor(s.gw, '/team/bob');
      await atSecondStart();
      const first = await timed(() => alice.chat.completions.create({ model: 'up/gpt-x', messages: [{ role: 'user', content: 'a' }] }));
      const second = await timed(() => bob.chat.completions.create({ model: 'up/gpt-x', messages: [{ role: 'user', content: 'b' }] }));
      assert.equal(first.value.choices[0]?.message.content, 'a');
      assert.equal(second.value.choices[0]?.message.content, 'b');
      await assert.rejects(
        alice.chat.completions.create({ model: 'up/gpt-x', messages: [{ role: 'user', content: 'c' }] }),
        (err: unknown) => err instanceof OpenAI.RateLimitError && err.status === 429,
      );
      const refused = await timed(() => chatAs(s.gw, '/team/bob'));
      const res = refused.value;
      const retryAfter = assertRateLimited(res, 'rate limit exceeded for /team: 3s request limit of 2 reached');
      assertRefusalTriple(res, 'requests', 2);
      oneIn(possibleRetryAfters([{ at: first.at, amount: 1 }, { at: second.at, amount: 1 }], refused.at, 3, 2), retryAfter, 'retry-after');
      assert.equal(s.up.callCount('/v1/chat/completions'), 2, 'refused requests never reach the upstream');

      // `/team-b` is not under `/team`; matching is case-insensitive.
      const sibling = await chatAs(s.gw, '/team-b');
      assert.equal(sibling.status, 200, sibling.text);
      assert.deepEqual(rateLimitHeaderNames(sibling), []);
      assertRateLimited(await chatAs(s.gw, '/Team/Alice'), 'rate limit exceeded for /team: 3s request limit of 2 reached');
      assertRateLimited(await chatAs(s.gw, '/TEAM'), 'rate limit exceeded for /team: 3s request limit of 2 reached');
      assert.equal(s.up.callCount('/v1/chat/completions'), 3);

      // Still refused one second before Retry-After is up (when that second is observable)...
      const refusedSecond = Math.floor(refused.at.hi / 1000);
      if (Math.floor(refused.at.lo / 1000) === refusedSecond && retryAfter >= 2) {
        await sleep((refusedSecond + retryAfter - 1) * 1000 + 20 - Date.now());
        if (Math.floor(Date.now() / 1000) === refusedSecond + retryAfter - 1) {
          // (here the previous window's requests still weigh in: the sliding estimate, not a fixed reset)
          const late = await timed(() => chatAs(s.gw, '/team/carol'));
          const lateRetry = assertRateLimited(late.value, 'rate limit exceeded for /team: 3s request limit of 2 reached');
          oneIn(possibleRetryAfters([{ at: first.at, amount: 1 }, { at: second.at, amount: 1 }], late.at, 3, 2), lateRetry, 'retry-after one second before');
        }
      }
      // ...and admitted once it is.
      await sleep(Math.max(0, refused.at.hi + retryAfter * 1000 - Date.now()));
      const again = await alice.chat.completions.create({ model: 'up/gpt-x', messages: [{ role: 'user', content: 'again' }] });
      assert.equal(again.choices[0]?.message.content, 'again');
    } finally {
      await s.close();
    }
  });

  it('an invalid user-path header is a 400 naming the header, not a 5xx, and counts nothing', async () => {
    const s = await setup('rate_limits:\n  user_paths: [ { path: /, limits: [ { period: minute, max_requests: 1 } ] } ]\n');
    try {
      for (const bad of ['/a/../b', 'a:b', '/./x']) {
        const res = await chatAs(s.gw, bad);
        assert.equal(res.status, 400, `${bad}: ${res.text}`);
        assert.equal(res.json().error.type, 'invalid_request_error');
        assert.match(res.json().error.message, /user.path/i);
      }
      assert.equal(s.up.callCount(), 0);
      const ok = await chatAs(s.gw, 'team//a/');
      assert.equal(ok.status, 200, 'normalised paths are accepted, and the 400s counted nothing');
    } finally {
      await s.close();
    }
  });

  it('a rule on / governs every request, with or without a user path; named periods label the message', async () => {
    const s = await setup('rate_limits:\n  user_paths: [ { path: /, limits: [ { period: minute, max_requests: 2 } ] } ]\n');
    try {
      assert.equal((await chatAs(s.gw, undefined)).status, 200);
      assert.equal((await chatAs(s.gw, '/x/y/z')).status, 200);
      const res = await chatAs(s.gw, '/somebody/else');
      assertRateLimited(res, 'rate limit exceeded for /: minute request limit of 2 reached');
      assertRefusalTriple(res, 'requests', 2);
      assertRateLimited(await chatAs(s.gw, undefined), 'rate limit exceeded for /: minute request limit of 2 reached');
      assert.equal(s.up.callCount(), 2);
    } finally {
      await s.close();
    }
  });

  it('success headers come from the most constrained matching rule per dimension, all scopes competing', async () => {
    const s = await setup(
      'rate_limits:\n' +
        '  user_paths:\n' +
        '    - { path: /h, limits: [ { period: minute, max_requests: 10, max_tokens: 1000 } ] }\n' +
        '    - { path: /h/a, limits: [ { period_seconds: 30, max_requests: 3 } ] }\n' +
        '  providers: [ { name: up, limits: [ { period_seconds: 20, max_tokens: 500 } ] } ]\n',
    );
    try {
      const content = 'x'.repeat(40);
      const t = fakeChatTokens(content); // 20
      const r1 = await timed(() => chatAs(s.gw, '/h/a', chat('up/gpt-x', content)));
      assert.equal(r1.value.status, 200, r1.value.text);
      let h = r1.value.headers;
      // requests: /h has 9 left, /h/a 2 left -> /h/a wins
      assert.equal(h.get('x-ratelimit-limit-requests'), '3');
      assert.equal(h.get('x-ratelimit-remaining-requests'), '2');
      oneIn(possibleResets(r1.at, 30), Number(h.get('x-ratelimit-reset-requests')), 'reset-requests');
      // tokens: /h has 1000 left, provider up 500 -> up wins
      assert.equal(h.get('x-ratelimit-limit-tokens'), '500');
      assert.equal(h.get('x-ratelimit-remaining-tokens'), '500');
      oneIn(possibleResets(r1.at, 20), Number(h.get('x-ratelimit-reset-tokens')), 'reset-tokens');

      const r2 = await timed(() => chatAs(s.gw, '/h/a', chat('up/gpt-x', content)));
      h = r2.value.headers;
      assert.equal(h.get('x-ratelimit-remaining-requests'), '1');
      // the first response's tokens were charged to /h and to up (t each); a boundary of up's
      // 20 s window in between only lowers the estimate by the sliding blend, never raises it
      const remainingTokens = Number(h.get('x-ratelimit-remaining-tokens'));
      assert.equal(h.get('x-ratelimit-limit-tokens'), '500');
      assert.ok(remainingTokens <= 500 && remainingTokens >= 500 - t, `remaining tokens ${remainingTokens}`);
      if (Math.floor(r1.at.lo / 20000) === Math.floor(r2.at.hi / 20000)) assert.equal(remainingTokens, 500 - t);

      // /h/b only matches /h (shared with /h/a's two requests) and the provider rule
      const r3 = await timed(() => chatAs(s.gw, '/h/b', chat('up/gpt-x', content)));
      h = r3.value.headers;
      assert.equal(h.get('x-ratelimit-limit-requests'), '10');
      assert.equal(h.get('x-ratelimit-remaining-requests'), '7');
      oneIn(possibleResets(r3.at, 60), Number(h.get('x-ratelimit-reset-requests')), 'reset-requests');
      assert.deepEqual(rateLimitHeaderNames(r3.value), [
        'x-ratelimit-limit-requests', 'x-ratelimit-limit-tokens', 'x-ratelimit-remaining-requests',
        'x-ratelimit-remaining-tokens', 'x-ratelimit-reset-requests', 'x-ratelimit-reset-tokens',
      ]);
      // the answer's own headers and its length travel with the gateway's
      assert.equal(h.get('content-type'), 'application/json');
      assert.equal(h.get('content-length'), String(Buffer.byteLength(r3.value.text)));
    } finally {
      await s.close();
    }
  });

  it('no x-ratelimit-* headers when no windowed rule matches', async () => {
    const s = await setup(
      'rate_limits:\n  user_paths:\n    - { path: /limited, limits: [ { period: minute, max_requests: 5 } ] }\n' +
        '    - { path: /conc, limits: [ { period: concurrent, max_requests: 5 } ] }\n',
    );
    try {
      const limited = await chatAs(s.gw, '/limited/x');
      assert.equal(limited.headers.get('x-ratelimit-limit-requests'), '5', 'the rule matches here');
      for (const path of ['/free', undefined, '/limitedx', '/conc/a']) {
        const res = await chatAs(s.gw, path);
        assert.equal(res.status, 200, res.text);
        assert.deepEqual(rateLimitHeaderNames(res), [], `no x-ratelimit headers for ${path}`);
        assert.equal(res.headers.get('content-type'), 'application/json');
        assert.equal(res.headers.get('content-length'), String(Buffer.byteLength(res.text)));
      }
    } finally {
      await s.close();
    }
  });

  it('provider rule: a direct request over the cap gets 429 with Retry-After and no upstream call', async () => {
    const s = await setup('rate_limits:\n  providers: [ { name: up, limits: [ { period: minute, max_requests: 2 } ] } ]\n');
    try {
      const first = await timed(() => chatAs(s.gw, '/a'));
      const second = await timed(() => chatAs(s.gw, '/b'));
      assert.equal(first.value.status, 200);
      assert.equal(second.value.status, 200);
      const refused = await timed(() => chatAs(s.gw, '/c'));
      const retryAfter = assertRateLimited(refused.value, 'rate limit exceeded for provider up: minute request limit of 2 reached');
      oneIn(possibleRetryAfters([{ at: first.at, amount: 1 }, { at: second.at, amount: 1 }], refused.at, 60, 2), retryAfter, 'retry-after');
      assertRefusalTriple(refused.value, 'requests', 2);
      await assert.rejects(
        sdkFor(s.gw, '/d').chat.completions.create({ model: 'gpt-x', messages: [{ role: 'user', content: 'x' }] }),
        (err: unknown) => err instanceof OpenAI.RateLimitError && err.status === 429 && /provider up/.test(err.message),
      );
      assert.equal(s.up.callCount(), 2);
    } finally {
      await s.close();
    }
  });

  it('provider concurrency cap: a second request while one is in flight is refused without an upstream call', async () => {
    const s = await setup('rate_limits:\n  providers: [ { name: up, limits: [ { period: concurrent, max_requests: 1 } ] } ]\n');
    try {
      const release = s.up.holdStreamNext();
      const held = await fetch(`${s.gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(chat('up/gpt-x', 'hold me', { stream: true })) });
      assert.equal(held.status, 200);
      const res = await chatAs(s.gw, '/other');
      assert.equal(assertRateLimited(res, 'rate limit exceeded for provider up: concurrent request limit of 1 reached'), 1);
      assert.equal(s.up.callCount(), 1);
      release();
      assert.match(await held.text(), /\[DONE\]/);
      await eventually(async () => (await chatAs(s.gw, '/other')).status === 200, 3000, 'slot released');
    } finally {
      await s.close();
    }
  });

  it('model rules: a qualified subject covers one provider, a bare subject the model on any provider', async () => {
    const up = await startFakeUpstream({ name: 'up' });
    const up2 = await startFakeUpstream({ name: 'up2' });
    const gw = await startTestGateway({
      yaml:
        'providers:\n' +
        `  up: { type: openai, base_url: ${up.url}/v1, api_key: k, models: [gpt-x, gpt-y, gpt-z] }\n` +
        `  up2: { type: openai, base_url: ${up2.url}/v1, api_key: k, models: [gpt-x, gpt-z] }\n` +
        'rate_limits:\n  models:\n' +
        '    - { model: up/gpt-x, limits: [ { period: minute, max_requests: 1 } ] }\n' +
        '    - { model: gpt-z, limits: [ { period: hour, max_requests: 2 } ] }\n',
    });
    try {
      assert.equal((await chatAs(gw, '/u', chat('up/gpt-x'))).status, 200);
      const refused = await chatAs(gw, '/v', chat('up/gpt-x'));
      assertRateLimited(refused, 'rate limit exceeded for model up/gpt-x: minute request limit of 1 reached');
      assertRefusalTriple(refused, 'requests', 1);
      assert.equal((await chatAs(gw, '/u', chat('up2/gpt-x'))).status, 200, 'qualified rule does not cover up2');
      assert.equal((await chatAs(gw, '/u', chat('up/gpt-y'))).status, 200, 'nor another model of up');
      assert.equal(up.callCount(), 2);

      assert.equal((await chatAs(gw, '/u', chat('up/gpt-z'))).status, 200);
      assert.equal((await chatAs(gw, '/u', chat('up2/gpt-z'))).status, 200);
      assertRateLimited(await chatAs(gw, '/u', chat('up/gpt-z')), 'rate limit exceeded for model gpt-z: hour request limit of 2 reached');
      assertRateLimited(await chatAs(gw, '/u', chat('up2/gpt-z')), 'rate limit exceeded for model gpt-z: hour request limit of 2 reached');
      assert.equal(up.callCount(), 3);
      assert.equal(up2.callCount(), 2);
    } finally {
      await gw.close();
      await up.close();
      await up2.close();
    }
  });

  it('token limit on a user path: charged after the response, next request refused with the tokens triple', async () => {
    const s = await setup('rate_limits:\n  user_paths: [ { path: /tok, limits: [ { period_seconds: 5, max_tokens: 15 } ] } ]\n');
    try {
      const content = 'y'.repeat(40);
      const tokens = fakeChatTokens(content);
      assert.ok(tokens > 15);
      const first = await timed(() => chatAs(s.gw, '/tok/a', chat('up/gpt-x', content)));
      assert.equal(first.value.status, 200);
      assert.equal(first.value.json().usage.total_tokens, tokens);
      assert.equal(first.value.headers.get('x-ratelimit-limit-tokens'), '15');
      assert.equal(first.value.headers.get('x-ratelimit-remaining-tokens'), '15');
      const refused = await timed(() => chatAs(s.gw, '/tok/b', chat('up/gpt-x', 'z')));
      const retryAfter = assertRateLimited(refused.value, 'rate limit exceeded for /tok: 5s token limit of 15 reached');
      assertRefusalTriple(refused.value, 'tokens', 15);
      oneIn(possibleRetryAfters([{ at: first.at, amount: tokens }], refused.at, 5, 15), retryAfter, 'retry-after');
      assert.equal(s.up.callCount(), 1);
      assert.equal((await chatAs(s.gw, '/other', chat('up/gpt-x', content))).status, 200, 'other paths are not charged');
    } finally {
      await s.close();
    }
  });

  it('streamed responses are charged too, from the usage at the end of the stream', async () => {
    const s = await setup('rate_limits:\n  user_paths: [ { path: /st, limits: [ { period_seconds: 5, max_tokens: 15 } ] } ]\n');
    try {
      const content = 'w'.repeat(40);
      const res = await fetch(`${s.gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', [USER_PATH_HEADER]: '/st' },
        body: JSON.stringify(chat('up/gpt-x', content, { stream: true })),
      });
      assert.equal(res.status, 200);
      assert.match(await res.text(), /\[DONE\]/);
      // The charge lands once the gateway has finished the stream; /v1/usage shows it without counting a request.
      await eventually(async () => {
        const usage = await s.gw.request('GET', '/v1/usage', { headers: { [USER_PATH_HEADER]: '/st' } });
        return usage.json().rate_limits[0]?.tokens_used === fakeChatTokens(content);
      }, 3000, 'stream tokens charged');
      const refused = await chatAs(s.gw, '/st', chat('up/gpt-x', 'z', { stream: true }));
      assertRateLimited(refused, 'rate limit exceeded for /st: 5s token limit of 15 reached');
      assertRefusalTriple(refused, 'tokens', 15);
      assert.equal(s.up.callCount(), 1);
    } finally {
      await s.close();
    }
  });

  it('tokens are charged to the provider and model that executed the request', async () => {
    const up = await startFakeUpstream({ name: 'up' });
    const up2 = await startFakeUpstream({ name: 'up2' });
    const gw = await startTestGateway({
      yaml:
        'providers:\n' +
        `  up: { type: openai, base_url: ${up.url}/v1, api_key: k, models: [gpt-x, gpt-y] }\n` +
        `  up2: { type: openai, base_url: ${up2.url}/v1, api_key: k, models: [gpt-x, gpt-y] }\n` +
        'rate_limits:\n' +
        '  providers: [ { name: up, limits: [ { period_seconds: 5, max_tokens: 15 } ] } ]\n' +
        '  models: [ { model: gpt-y, limits: [ { period_seconds: 5, max_tokens: 15 } ] } ]\n',
    });
    try {
      const big = 'q'.repeat(40);
      // Heavy traffic on up2/gpt-x charges neither the up rule nor the gpt-y rule.
      for (let i = 0; i < 3; i++) assert.equal((await chatAs(gw, '/p', chat('up2/gpt-x', big))).status, 200);
      assert.equal((await chatAs(gw, '/p', chat('up/gpt-x', big))).status, 200);
      assertRateLimited(await chatAs(gw, '/p', chat('up/gpt-x', 'z')), 'rate limit exceeded for provider up: 5s token limit of 15 reached');
      assert.equal((await chatAs(gw, '/p', chat('up2/gpt-y', big))).status, 200);
      assertRateLimited(await chatAs(gw, '/p', chat('up2/gpt-y', 'z')), 'rate limit exceeded for model gpt-y: 5s token limit of 15 reached');
      assert.equal((await chatAs(gw, '/p', chat('up2/gpt-x', 'z'))).status, 200);
      assert.equal(up.callCount(), 1);
      assert.equal(up2.callCount(), 5);
    } finally {
      await gw.close();
      await up.close();
      await up2.close();
    }
  });

  it('USAGE_ENABLED=false: the gateway starts with token rules and does not enforce them; request caps still hold', async () => {
    const s = await setup(
      'rate_limits:\n  user_paths: [ { path: /nt, limits: [ { period_seconds: 5, max_tokens: 15 }, { period: minute, max_requests: 4 } ] } ]\n',
      { USAGE_ENABLED: 'false' },
    );
    try {
      const big = 'v'.repeat(60);
      for (let i = 0; i < 4; i++) {
        const res = await chatAs(s.gw, '/nt', chat('up/gpt-x', big));
        assert.equal(res.status, 200, `request ${i + 1}: ${res.text}`);
      }
      assertRateLimited(await chatAs(s.gw, '/nt'), 'rate limit exceeded for /nt: minute request limit of 4 reached');
    } finally {
      await s.close();
    }
  });

  it('Anthropic /v1/messages: 429 in the Anthropic shape with Retry-After; the Anthropic SDK throws RateLimitError', async () => {
    const ant = await startFakeUpstream({ name: 'ant' });
    const gw = await startTestGateway({
      yaml:
        `providers:\n  ant: { type: anthropic, base_url: ${ant.url}, api_key: k, models: [claude-x] }\n` +
        'rate_limits:\n  user_paths: [ { path: /a, limits: [ { period: minute, max_requests: 1 } ] } ]\n',
    });
    try {
      const body = { model: 'ant/claude-x', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] };
      const ok = await gw.request('POST', '/v1/messages', { body, headers: { [USER_PATH_HEADER]: '/a' } });
      assert.equal(ok.status, 200, ok.text);
      const res = await gw.request('POST', '/v1/messages', { body, headers: { [USER_PATH_HEADER]: '/a/b' } });
      assert.equal(res.status, 429);
      assert.equal(res.text, JSON.stringify({ type: 'error', error: { type: 'rate_limit_error', message: 'rate limit exceeded for /a: minute request limit of 1 reached' } }));
      const ra = Number(res.headers.get('retry-after'));
      assert.ok(Number.isInteger(ra) && ra >= 1 && ra <= 120, `retry-after ${ra}`);
      assert.equal(res.headers.get('retry-after-ms'), String(ra * 1000));
      assertRefusalTriple(res, 'requests', 1);

      const sdk = new Anthropic({ baseURL: gw.url, apiKey: 'unused', maxRetries: 0, defaultHeaders: { [USER_PATH_HEADER]: '/a' } });
      await assert.rejects(
        sdk.messages.create({ model: 'ant/claude-x', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] }),
        (err: unknown) => err instanceof Anthropic.RateLimitError && err.status === 429 && /rate limit exceeded for \/a/.test(err.message),
      );
      assert.equal(ant.callCount(), 1);
    } finally {
      await gw.close();
      await ant.close();
    }
  });

  it('/v1/usage lists the user-path rules governing the caller (own and ancestors), with exhausted once over', async () => {
    const s = await setup(
      'rate_limits:\n  user_paths:\n' +
        '    - { path: /org, limits: [ { period: minute, max_requests: 10 } ] }\n' +
        '    - { path: /org/team, limits: [ { period: minute, max_requests: 2, max_tokens: 100000 } ] }\n' +
        '    - { path: /org/other, limits: [ { period: minute, max_requests: 5 } ] }\n' +
        '    - { path: /org/team/alice, limits: [ { period: minute, max_requests: 7 } ] }\n' +
        '  providers: [ { name: up, limits: [ { period: minute, max_requests: 100 } ] } ]\n',
    );
    try {
      const usage = async (): Promise<any[]> => {
        const res = await s.gw.request('GET', '/v1/usage', { headers: { [USER_PATH_HEADER]: '/org/team' } });
        assert.equal(res.status, 200, res.text);
        return res.json().rate_limits;
      };
      let rules = await usage();
      assert.deepEqual(rules.map((r) => r.subject), ['/org', '/org/team']);
      assert.deepEqual(rules.map((r) => r.exhausted), [false, false]);
      assert.equal(rules[1].requests_used, 0);
      assert.equal(rules[1].requests_remaining, 2);

      assert.equal((await chatAs(s.gw, '/org/team')).status, 200);
      assert.equal((await chatAs(s.gw, '/org/team')).status, 200);
      rules = await usage();
      assert.equal(rules[0].scope, 'user_path');
      assert.equal(rules[0].requests_used, 2);
      assert.equal(rules[0].requests_remaining, 8);
      assert.equal(rules[0].exhausted, false);
      assert.equal(rules[1].requests_used, 2);
      assert.equal(rules[1].requests_remaining, 0);
      assert.ok(rules[1].tokens_used > 0);
      assert.equal(rules[1].exhausted, true);
      assertRateLimited(await chatAs(s.gw, '/org/team'), 'rate limit exceeded for /org/team: minute request limit of 2 reached');
      // the root caller sees no rules (none on /), a sibling sees its own
      const root = await s.gw.request('GET', '/v1/usage');
      assert.deepEqual(root.json().rate_limits, []);
      const other = await s.gw.request('GET', '/v1/usage', { headers: { [USER_PATH_HEADER]: '/org/other/x' } });
      assert.deepEqual(other.json().rate_limits.map((r: any) => r.subject), ['/org', '/org/other']);
    } finally {
      await s.close();
    }
  });

  it('passthrough /p/up/... counts against user-path and provider rules', async () => {
    const s = await setup(
      'rate_limits:\n' +
        '  user_paths: [ { path: /pt, limits: [ { period: minute, max_requests: 1 } ] } ]\n' +
        '  providers: [ { name: up, limits: [ { period: minute, max_requests: 3 } ] } ]\n',
    );
    try {
      const pass = (userPath: string): Promise<import('../support/gateway.ts').TestResponse> =>
        s.gw.request('POST', '/p/up/chat/completions', { body: chat('gpt-x'), headers: { [USER_PATH_HEADER]: userPath } });
      const ok = await pass('/pt');
      assert.equal(ok.status, 200, ok.text);
      assert.equal(ok.headers.get('x-ratelimit-remaining-requests'), '0');
      assertRateLimited(await pass('/pt/sub'), 'rate limit exceeded for /pt: minute request limit of 1 reached');
      assert.equal((await pass('/q')).status, 200);
      assert.equal((await chatAs(s.gw, '/q')).status, 200, 'model endpoint and passthrough share the provider counter');
      assertRateLimited(await pass('/r'), 'rate limit exceeded for provider up: minute request limit of 3 reached');
      assertRateLimited(await chatAs(s.gw, '/r'), 'rate limit exceeded for provider up: minute request limit of 3 reached');
      assert.equal(s.up.callCount(), 3);
    } finally {
      await s.close();
    }
  });
});
