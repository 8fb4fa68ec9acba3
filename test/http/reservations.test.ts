/**
 * End-to-end: reservations (rate_limits.reservations, budgets.reservations). Parallel requests
 * through the official OpenAI SDK against one gateway (memory counters): token windows and budgets
 * hold their caps, reservations settle on every ending (answered, aborted stream, failover), and
 * they show on the status records and /v1/usage.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { openaiProvider } from '../support/e2e.ts';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startFixedUsageUpstream, type FixedUsageUpstream } from '../support/fixed-usage-upstream.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';
import { eventually } from '../support/rate-limits.ts';

const MASTER = 'reservations-master';
const USER_PATH = 'x-floodgate-user-path';

function client(gw: TestGateway, userPath: string): OpenAI {
  return new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: MASTER, maxRetries: 0, defaultHeaders: { [USER_PATH]: userPath } });
}

/** Ten chat requests sent together; answers how many were admitted (200) and how many refused (429). */
async function tenTogether(sdk: OpenAI, model: string, maxTokens: number): Promise<{ admitted: number; refused: number; messages: string[] }> {
  const results = await Promise.allSettled(Array.from({ length: 10 }, () => sdk.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: maxTokens })));
  const refusals = results.flatMap((r) => (r.status === 'rejected' && r.reason instanceof OpenAI.APIError && r.reason.status === 429 ? [r.reason.message] : []));
  const admitted = results.filter((r) => r.status === 'fulfilled').length;
  assert.equal(admitted + refusals.length, 10, `every request is admitted or refused with a 429: ${results.map((r) => (r.status === 'rejected' ? String(r.reason) : 'ok')).join('; ')}`);
  return { admitted, refused: refusals.length, messages: refusals };
}

async function admin(gw: TestGateway, path: string): Promise<any> {
  const res = await gw.request('GET', path, { headers: { authorization: `Bearer ${MASTER}` } });
  assert.equal(res.status, 200, res.text);
  return res.json();
}

async function usageOf(gw: TestGateway, userPath: string): Promise<any> {
  const res = await gw.request('GET', '/v1/usage', { headers: { authorization: `Bearer ${MASTER}`, [USER_PATH]: userPath } });
  assert.equal(res.status, 200, res.text);
  return res.json();
}

function ruleOf(records: any[], scope: string, subject: string): any {
  const found = records.find((r) => r.scope === scope && r.subject === subject && r.user_path === (scope === 'user_path' ? subject : ''));
  assert.ok(found, `no status record for ${scope} ${subject}`);
  return found;
}

describe('reservations: caps that hold under concurrency', { timeout: 60_000 }, () => {
  let up: FixedUsageUpstream;
  let gw: TestGateway;
  before(async () => {
    up = await startFixedUsageUpstream();
    // Answers come a moment later, so the ten requests of a test are all in flight together.
    up.delayMs = 300;
    up.setUsage({ prompt_tokens: 20, completion_tokens: 260, total_tokens: 280 });
    gw = await startTestGateway({
      yaml: [
        'providers:',
        openaiProvider('up', up.url, ['gpt-x', 'gpt-y']).trimEnd(),
        'pricing:',
        // Output at $1,000 per million: a completion allowed 300 tokens is $0.30; prompts are free.
        '  up/gpt-y: { input_per_mtok: 0, output_per_mtok: 1000 }',
        'rate_limits:',
        '  reservations: { enabled: true }',
        '  user_paths:',
        '    - { path: /tokens, limits: [ { period: hour, max_tokens: 1000 } ] }',
        '    - { path: /big, limits: [ { period: hour, max_tokens: 1000 } ] }',
        '    - { path: /pass, limits: [ { period: hour, max_tokens: 1000 } ] }',
        'budgets:',
        '  reservations: { enabled: true }',
        '  user_paths:',
        '    - { path: /dollars, limits: [ { period: day, max_usd: 1 } ] }',
        '',
      ].join('\n'),
      env: { MASTER_KEY: MASTER },
    });
  });
  after(async () => {
    await gw?.close();
    await up?.close();
  });

  it('a 1,000-token cap admits three of ten parallel requests allowed 300 tokens each, and the window ends within the cap', async () => {
    const { admitted, messages } = await tenTogether(client(gw, '/tokens'), 'up/gpt-x', 300);
    assert.equal(admitted, 3, 'each reserves its prompt plus 300: a fourth does not fit');
    for (const message of messages) assert.equal(message, '429 rate limit exceeded for /tokens: hour token limit of 1000 reached');
    const rule = ruleOf((await usageOf(gw, '/tokens')).rate_limits, 'user_path', '/tokens');
    assert.equal(rule.tokens_used, 3 * 280, 'settled to what the answers used');
    assert.ok(rule.tokens_used <= 1000);
    assert.equal(rule.tokens_reserved, 0, 'nothing stays reserved');
  });

  it('passthrough requests reserve too: three of ten parallel ones allowed 300 tokens each', async () => {
    const sdk = new OpenAI({ baseURL: `${gw.url}/p/up/v1`, apiKey: MASTER, maxRetries: 0, defaultHeaders: { [USER_PATH]: '/pass' } });
    const { admitted } = await tenTogether(sdk, 'gpt-x', 300);
    assert.equal(admitted, 3);
    const rule = ruleOf((await usageOf(gw, '/pass')).rate_limits, 'user_path', '/pass');
    assert.deepEqual([rule.tokens_used, rule.tokens_reserved], [3 * 280, 0]);
  });

  it('a request whose estimate alone exceeds the cap is refused, saying what it needs', async () => {
    const error = await client(gw, '/big').chat.completions.create({ model: 'up/gpt-x', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2000 }).then(
      () => assert.fail('admitted'),
      (err: unknown) => err,
    );
    assert.ok(error instanceof OpenAI.APIError && error.status === 429, String(error));
    assert.match(error.message, /^429 rate limit exceeded for \/big: hour token limit of 1000 reached \(this request needs an estimated 20\d\d tokens\)$/);
  });

  it('x-ratelimit-remaining-tokens counts the request\'s own reservation as used', async () => {
    const { response } = await client(gw, '/big/headers').chat.completions.create({ model: 'up/gpt-x', messages: [{ role: 'user', content: 'hi' }], max_tokens: 100 }).withResponse();
    const remaining = Number(response.headers.get('x-ratelimit-remaining-tokens'));
    // The window held 0 before it; the request reserved its prompt (a few tokens) plus 100.
    assert.ok(remaining < 900 && remaining > 850, `remaining ${remaining}`);
  });

  it('the explain dry run shows the estimate it would reserve, and judges the rules with it', async () => {
    const refused = await admin(gw, '/admin/rate-limits/explain?model=up/gpt-x&user_path=/big&max_tokens=2000');
    assert.deepEqual(refused.reservation, { tokens: 2000 });
    assert.equal(refused.decision, 'refused');
    assert.equal(refused.breach.message, 'rate limit exceeded for /big: hour token limit of 1000 reached (this request needs an estimated 2000 tokens)');
    const fits = await admin(gw, '/admin/rate-limits/explain?model=up/gpt-y&user_path=/big&max_tokens=300');
    assert.deepEqual([fits.decision, fits.reservation], ['admitted', { tokens: 300, cost_usd: 0.3 }]);
    const byDefault = await admin(gw, '/admin/rate-limits/explain?model=up/gpt-x&user_path=/big');
    assert.deepEqual(byDefault.reservation, { tokens: 256, cost_usd: 0 }, 'rate_limits.reservations.default_completion_tokens; a model without a price costs nothing');
  });

  it('a $1 budget admits three of ten parallel requests estimated at $0.30, and records at most $1', async () => {
    const { admitted, messages } = await tenTogether(client(gw, '/dollars'), 'up/gpt-y', 300);
    assert.equal(admitted, 3);
    for (const message of messages) assert.equal(message, '429 budget exceeded for /dollars: day budget of $1.00 reached');
    const [budget] = (await admin(gw, '/admin/budgets')).budgets.filter((b: any) => b.user_path === '/dollars');
    assert.equal(budget.spent_usd, 0.78, 'three answers of 260 completion tokens at $0.001');
    assert.equal(budget.reserved_usd, 0);
    const usage = await usageOf(gw, '/dollars');
    assert.ok(usage.totals.cost_usd <= 1);
    assert.deepEqual(usage.budgets.map((b: any) => [b.user_path, b.spent_usd, b.reserved_usd]), [['/dollars', 0.78, 0]]);
  });
});

describe('reservations: streams, aborts and failover', { timeout: 60_000 }, () => {
  let a: FakeUpstream;
  let b: FakeUpstream;
  let gw: TestGateway;
  before(async () => {
    a = await startFakeUpstream({ name: 'a' });
    b = await startFakeUpstream({ name: 'b' });
    gw = await startTestGateway({
      yaml: [
        'providers:',
        openaiProvider('a', a.url, ['m1']).trimEnd(),
        openaiProvider('b', b.url, ['m1']).trimEnd(),
        'failover:',
        '  a/m1: [b/m1]',
        'pricing:',
        // Prompts are free: a request allowing 50 completion tokens is $0.05 on a, $0.15 on b.
        '  a/m1: { input_per_mtok: 0, output_per_mtok: 1000 }',
        '  b/m1: { input_per_mtok: 0, output_per_mtok: 3000 }',
        'rate_limits:',
        '  reservations: { enabled: true, default_completion_tokens: 500 }',
        '  user_paths:',
        '    - { path: /s, limits: [ { period: hour, max_tokens: 100000 } ] }',
        '  providers:',
        '    - { name: a, limits: [ { period: hour, max_tokens: 100000 } ] }',
        '    - { name: b, limits: [ { period: hour, max_tokens: 100000 } ] }',
        'budgets:',
        '  reservations: { enabled: true }',
        '  user_paths:',
        '    - { path: /priced, limits: [ { period: day, max_usd: 10 } ] }',
        '    - { path: /tight, limits: [ { period: day, max_usd: 0.1 } ] }',
        '',
      ].join('\n'),
      env: { MASTER_KEY: MASTER },
    });
  });
  after(async () => {
    await gw?.close();
    await a?.close();
    await b?.close();
  });

  it('an aborted stream settles to its estimate, as its usage record says', async () => {
    a.holdStreamNext();
    const controller = new AbortController();
    const stream = await client(gw, '/s/abort').chat.completions.create(
      { model: 'a/m1', messages: [{ role: 'user', content: 'tell me a long story' }], stream: true },
      { signal: controller.signal },
    );
    const iterator = stream[Symbol.asyncIterator]();
    await iterator.next();
    const during = await usageOf(gw, '/s/abort');
    assert.ok(ruleOf(during.rate_limits, 'user_path', '/s').tokens_reserved >= 500, 'the default completion is reserved while it streams');
    controller.abort();
    // The gateway cuts the upstream call when its client goes: the stream never reports its usage.
    await eventually(async () => a.calls.at(-1)?.aborted === true, 5000, 'the upstream call is cut');
    await eventually(async () => (await usageOf(gw, '/s/abort')).totals.estimated_requests === 1, 5000, 'the aborted stream is recorded');
    const usage = await usageOf(gw, '/s/abort');
    const rule = ruleOf(usage.rate_limits, 'user_path', '/s');
    assert.equal(rule.tokens_reserved, 0);
    assert.ok(usage.totals.total_tokens > 0);
    assert.equal(rule.tokens_used, usage.totals.total_tokens, 'the window holds what the usage record says');
  });

  it('failover moves the reservation to the target that executes', async () => {
    const before = (await admin(gw, '/admin/rate-limits')).rate_limits;
    a.failNext(1, { status: 500 });
    const release = b.holdStreamNext();
    const stream = await client(gw, '/s/failover').chat.completions.create({ model: 'a/m1', messages: [{ role: 'user', content: 'hello there' }], stream: true, stream_options: { include_usage: true }, max_tokens: 50 });
    const iterator = stream[Symbol.asyncIterator]();
    await iterator.next();
    const rules = (await admin(gw, '/admin/rate-limits')).rate_limits;
    assert.equal(ruleOf(rules, 'provider', 'a').tokens_reserved, 0, 'the failed attempt reserves nothing any more');
    assert.ok(ruleOf(rules, 'provider', 'b').tokens_reserved > 50, 'the executing target holds it');
    assert.ok(ruleOf(rules, 'user_path', '/s').tokens_reserved > 50, 'the user path keeps its own');
    release();
    for await (const _ of { [Symbol.asyncIterator]: () => iterator }) {
      // drained
    }
    await eventually(async () => ruleOf((await admin(gw, '/admin/rate-limits')).rate_limits, 'provider', 'b').tokens_reserved === 0, 5000, 'the stream settles');
    const after = (await admin(gw, '/admin/rate-limits')).rate_limits;
    assert.equal(ruleOf(after, 'provider', 'a').tokens_used, ruleOf(before, 'provider', 'a').tokens_used, 'nothing charged where it failed');
    assert.ok(ruleOf(after, 'provider', 'b').tokens_used > ruleOf(before, 'provider', 'b').tokens_used);
  });

  it('failover moves the budget reservation to the price of the target that executes', async () => {
    const reserved = async (): Promise<number> => (await admin(gw, '/admin/budgets')).budgets.find((b: any) => b.user_path === '/priced').reserved_usd;
    a.failNext(1, { status: 500 });
    const release = b.holdStreamNext();
    const stream = await client(gw, '/priced').chat.completions.create({ model: 'a/m1', messages: [{ role: 'user', content: 'hello there' }], stream: true, max_tokens: 50 });
    const iterator = stream[Symbol.asyncIterator]();
    await iterator.next();
    assert.equal(await reserved(), 0.15, "b's price for the 50 tokens it allows, not a's $0.05");
    release();
    for await (const _ of { [Symbol.asyncIterator]: () => iterator }) {
      // drained
    }
    await eventually(async () => (await reserved()) === 0, 5000, 'the stream settles');
  });

  it("a failover whose target's price does not fit the budget is refused by the budget", async () => {
    a.failNext(1, { status: 500 });
    const calls = b.calls.length;
    const error = await client(gw, '/tight').chat.completions.create({ model: 'a/m1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 50 }).then(
      () => assert.fail('admitted'),
      (err: unknown) => err,
    );
    assert.ok(error instanceof OpenAI.APIError && error.status === 429, String(error));
    assert.equal(error.message, '429 budget exceeded for /tight: day budget of $0.10 reached (this request needs an estimated $0.15)');
    assert.equal(b.calls.length, calls, 'b is not called');
    const [tight] = (await admin(gw, '/admin/budgets')).budgets.filter((budget: any) => budget.user_path === '/tight');
    assert.deepEqual([tight.spent_usd, tight.reserved_usd], [0, 0]);
  });
});

describe('reservations: dollars only', { timeout: 30_000 }, () => {
  it('with budget reservations on and token reservations off, tokens are still counted after the response', async () => {
    const up = await startFixedUsageUpstream();
    up.setUsage({ prompt_tokens: 20, completion_tokens: 30, total_tokens: 50 });
    const gw = await startTestGateway({
      yaml: `providers:\n${openaiProvider('up', up.url, ['gpt-y'])}pricing:\n  up/gpt-y: { input_per_mtok: 0, output_per_mtok: 1000 }\nrate_limits:\n  user_paths: [ { path: /d, limits: [ { period: hour, max_tokens: 1000 } ] } ]\nbudgets:\n  reservations: { enabled: true }\n  user_paths: [ { path: /d, limits: [ { period: day, max_usd: 1 } ] } ]\n`,
      env: { MASTER_KEY: MASTER },
    });
    try {
      await client(gw, '/d').chat.completions.create({ model: 'up/gpt-y', messages: [{ role: 'user', content: 'hi' }], max_tokens: 100 });
      const usage = await usageOf(gw, '/d');
      const rule = ruleOf(usage.rate_limits, 'user_path', '/d');
      assert.equal(rule.tokens_used, 50);
      assert.equal(rule.tokens_reserved, undefined, 'no token reservations: no tokens_reserved');
      assert.deepEqual(usage.budgets.map((b: any) => [b.spent_usd, b.reserved_usd]), [[0.03, 0]]);
    } finally {
      await gw.close();
      await up.close();
    }
  });

  it('a request refused by its budget gives its concurrency slot back', async () => {
    const up = await startFixedUsageUpstream();
    const gw = await startTestGateway({
      yaml: `providers:\n${openaiProvider('up', up.url, ['gpt-y'])}pricing:\n  up/gpt-y: { input_per_mtok: 0, output_per_mtok: 1000 }\nrate_limits:\n  user_paths: [ { path: /c, limits: [ { period: concurrent, max_requests: 1 } ] } ]\nbudgets:\n  reservations: { enabled: true }\n  user_paths: [ { path: /c, limits: [ { period: day, max_usd: 0.01 } ] } ]\n`,
      env: { MASTER_KEY: MASTER },
    });
    try {
      for (let i = 0; i < 2; i++) {
        const error = await client(gw, '/c').chat.completions.create({ model: 'up/gpt-y', messages: [{ role: 'user', content: 'hi' }], max_tokens: 100 }).then(() => assert.fail('admitted'), (err: unknown) => err);
        assert.ok(error instanceof OpenAI.APIError && error.status === 429);
        assert.equal(error.message, '429 budget exceeded for /c: day budget of $0.01 reached (this request needs an estimated $0.10)', 'the budget refuses, never the slot');
      }
    } finally {
      await gw.close();
      await up.close();
    }
  });
});
