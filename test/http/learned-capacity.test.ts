/**
 * End-to-end: provider capacity learned from the upstream's own answers (CONTRACT §12) — its
 * rate-limit headers and its 429s steer requests to the failover target before the provider
 * refuses again; every target saturated gives the soonest reset; a request that may wait waits for
 * it; what was learned is listed, explained and measured — on a real gateway in front of fake
 * upstreams that say what real ones say.
 */
import assert from 'node:assert/strict';
import { after, afterEach, describe, it } from 'node:test';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { startTestGateway, type TestGateway, type TestResponse } from '../support/gateway.ts';
import { anthropicProvider, openaiProvider } from '../support/e2e.ts';
import { scrape } from '../support/prometheus.ts';
import { prng } from '../support/random.ts';
import { admin, MASTER, sleep } from '../support/rate-limits.ts';

const CHAT = '/v1/chat/completions';

interface World {
  primary: FakeUpstream;
  backup: FakeUpstream;
  gw: TestGateway;
  /** A chat request to `model` (default: the primary's), with these extra headers. */
  chat(headers?: Record<string, string>, model?: string): Promise<TestResponse>;
  /** Chat calls each upstream has had. */
  calls(): { primary: number; backup: number };
}

const worlds: World[] = [];
const upstreams: FakeUpstream[] = [];
after(async () => {
  await Promise.all(upstreams.map((up) => up.close()));
});
afterEach(async () => {
  await Promise.all(worlds.splice(0).map((world) => world.gw.close()));
});

/** Two upstreams, `primary` (OpenAI or Anthropic) failing over to `backup`, behind one gateway. */
async function world(options: { primaryExtra?: string; primaryType?: 'openai' | 'anthropic'; rest?: string } = {}): Promise<World> {
  const primary = await startFakeUpstream({ name: 'primary' });
  const backup = await startFakeUpstream({ name: 'backup' });
  upstreams.push(primary, backup);
  const provider = options.primaryType === 'anthropic' ? anthropicProvider : openaiProvider;
  const yaml = `server: { master_key: ${MASTER} }\nproviders:\n${provider('primary', primary.url, ['m'], options.primaryExtra)}${openaiProvider('backup', backup.url, ['m'])}`
    + `failover:\n  primary/m: [backup/m]\n${options.rest ?? ''}`;
  const gw = await startTestGateway({ yaml });
  const made: World = {
    primary,
    backup,
    gw,
    chat: (headers = {}, model = 'primary/m') =>
      gw.request('POST', CHAT, { body: { model, messages: [{ role: 'user', content: 'hello' }] }, headers: { authorization: `Bearer ${MASTER}`, ...headers } }),
    calls: () => ({ primary: primary.callCount(CHAT) + primary.callCount('/v1/messages'), backup: backup.callCount(CHAT) }),
  };
  worlds.push(made);
  return made;
}

/** A 200, which reached only `expected` (or, `failover`, the primary and then the backup). */
async function served(world: World, expected: 'primary' | 'backup' | 'failover', headers?: Record<string, string>): Promise<TestResponse> {
  const before = world.calls();
  const res = await world.chat(headers);
  assert.equal(res.status, 200, res.text);
  const now = world.calls();
  const reached = { primary: expected === 'backup' ? 0 : 1, backup: expected === 'primary' ? 0 : 1 };
  assert.deepEqual({ primary: now.primary - before.primary, backup: now.backup - before.backup }, reached, `served by ${expected}`);
  return res;
}

async function learned(world: World): Promise<Array<Record<string, unknown>>> {
  const res = await admin(world.gw, 'GET', '/admin/providers');
  assert.equal(res.status, 200, res.text);
  return res.json().providers;
}

describe('capacity learned from the upstream, end to end', () => {
  it('sends the next request to the failover target without calling a primary that said it has no requests left, and the primary again after its reset', async () => {
    const w = await world();
    w.primary.setAnswerHeaders({ 'x-ratelimit-limit-requests': '60', 'x-ratelimit-remaining-requests': '0', 'x-ratelimit-reset-requests': '2s' });
    await served(w, 'primary');
    // The reset counts from when the gateway had the answer: by now at the latest.
    const answeredAt = Date.now();
    w.primary.setAnswerHeaders(undefined);
    await served(w, 'backup');
    await served(w, 'backup');
    const [record] = await learned(w);
    assert.equal(record?.provider, 'primary');
    assert.equal(record?.model, 'm');
    assert.equal(record?.requests_limit, 60);
    assert.equal(record?.requests_remaining, 0);
    assert.equal(record?.saturated, true);
    assert.equal(record?.cause, 'requests');
    await sleep(Math.max(0, answeredAt + 2100 - Date.now()));
    await served(w, 'primary');
  });

  it('fails a 429 over, and sends nothing to the primary for its retry-after', async () => {
    const w = await world();
    w.primary.failNext(1, { status: 429, headers: { 'retry-after': '2' } });
    const startedAt = Date.now();
    await served(w, 'failover');
    const answeredAt = Date.now();
    while (Date.now() < startedAt + 1700) {
      await served(w, 'backup');
      await sleep(100);
    }
    await sleep(Math.max(0, answeredAt + 2100 - Date.now()));
    await served(w, 'primary');
  });

  it('cools a 429 without retry-after down for cooldown_seconds', async () => {
    const w = await world({ primaryExtra: 'learned: { cooldown_seconds: 1 }' });
    w.primary.failNext(1, { status: 429, headers: { 'retry-after': undefined } });
    const startedAt = Date.now();
    await served(w, 'failover');
    const answeredAt = Date.now();
    await served(w, 'backup');
    const [record] = await learned(w);
    assert.equal(record?.cause, 'cooldown');
    const until = Date.parse(String(record?.cooldown_until));
    assert.ok(until >= startedAt + 1000 && until <= answeredAt + 1000, `cooling down for a second: ${String(record?.cooldown_until)}`);
    await sleep(Math.max(0, answeredAt + 1100 - Date.now()));
    await served(w, 'primary');
  });

  it('spreads an alias over the targets that still have capacity', async () => {
    const w = await world({ rest: 'aliases:\n  fast: { strategy: round_robin, targets: [primary/m, backup/m] }\n' });
    w.primary.setAnswerHeaders({ 'x-ratelimit-remaining-tokens': '0', 'x-ratelimit-reset-tokens': '1m' });
    for (let i = 0; i < 6; i++) assert.equal((await w.chat({}, 'fast')).status, 200);
    assert.deepEqual(w.calls(), { primary: 1, backup: 5 }, 'the primary said once its tokens are spent, then was left alone');
  });

  it('answers 429 with the soonest reset when every target is saturated, and lets a request that may wait wait for it', async () => {
    const w = await world();
    w.primary.failNext(1, { status: 429, headers: { 'retry-after': '20' } });
    w.backup.setAnswerHeaders({ 'x-ratelimit-remaining-requests': '0', 'x-ratelimit-reset-requests': '1500ms' });
    const startedAt = Date.now();
    await served(w, 'failover');
    w.backup.setAnswerHeaders(undefined);
    const refused = await w.chat();
    assert.equal(refused.status, 429);
    assert.equal(refused.headers.get('retry-after'), '2', 'the backup frees first');
    assert.equal(refused.json().error.message, 'rate limit exceeded for model primary/m: the provider refused and asked to retry later (learned from its answers)');
    assert.equal(refused.json().error.code, 'rate_limit_exceeded');
    const waited = await w.chat({ 'x-floodgate-max-wait': '5' });
    assert.equal(waited.status, 200, waited.text);
    const wait = Number(waited.headers.get('x-floodgate-queue-wait-ms'));
    assert.ok(Date.now() - startedAt >= 1500 && wait > 0, `it waited for the reset (${wait} ms)`);
    assert.deepEqual(w.calls(), { primary: 1, backup: 2 });
  });

  it("learns from Anthropic's headers and their RFC 3339 resets", async () => {
    const w = await world({ primaryType: 'anthropic' });
    const reset = new Date(Date.now() + 60_000).toISOString();
    w.primary.setAnswerHeaders({
      'anthropic-ratelimit-requests-limit': '50',
      'anthropic-ratelimit-requests-remaining': '49',
      'anthropic-ratelimit-requests-reset': reset,
      'anthropic-ratelimit-tokens-limit': '8000',
      'anthropic-ratelimit-tokens-remaining': '0',
      'anthropic-ratelimit-tokens-reset': reset,
    });
    await served(w, 'primary');
    await served(w, 'backup');
    const [record] = await learned(w);
    assert.deepEqual(
      { requests: [record?.requests_limit, record?.requests_remaining], tokens: [record?.tokens_limit, record?.tokens_remaining], cause: record?.cause },
      { requests: [50, 49], tokens: [8000, 0], cause: 'tokens' },
    );
    // Learned a moment after the upstream said it (once the answer was read): never earlier.
    const learnedReset = Date.parse(String(record?.tokens_reset_at));
    assert.ok(learnedReset >= Date.parse(reset) && learnedReset - Date.parse(reset) < 1000, `${String(record?.tokens_reset_at)} is ${reset}`);
  });

  it('reads a retry-after given as an HTTP date', async () => {
    const w = await world();
    const until = new Date(Math.ceil((Date.now() + 3000) / 1000) * 1000);
    w.primary.failNext(1, { status: 429, headers: { 'retry-after': until.toUTCString() } });
    await served(w, 'failover');
    await served(w, 'backup');
    const [record] = await learned(w);
    assert.ok(Math.abs(Date.parse(String(record?.cooldown_until)) - until.getTime()) < 300, `${String(record?.cooldown_until)} is ${until.toISOString()}`);
  });

  it('never answers 5xx on malformed rate-limit headers: they are ignored and counted', async () => {
    const w = await world();
    const random = prng(1937);
    const pieces = ['0', '1', '-', '.', 's', 'ms', 'm', 'h', ' ', 'Z', 'T', ':', 'GMT', 'Jan', '9'.repeat(20), 'NaN', ',', 'é'];
    const value = (): string => Array.from({ length: Math.floor(random() * 6) }, () => pieces[Math.floor(random() * pieces.length)]).join('');
    const names = ['x-ratelimit-limit-requests', 'x-ratelimit-remaining-requests', 'x-ratelimit-reset-requests', 'x-ratelimit-remaining-tokens', 'x-ratelimit-reset-tokens', 'retry-after', 'retry-after-ms'];
    for (let i = 0; i < 40; i++) {
      const headers = Object.fromEntries(names.filter(() => random() < 0.5).map((name) => [name, value()]));
      if (random() < 0.3) w.primary.failNext(1, { status: 429, headers });
      else w.primary.setAnswerHeaders(headers);
      const res = await w.chat();
      assert.equal(res.status < 500, true, `${res.status} for ${JSON.stringify(headers)}: ${res.text}`);
    }
    const metrics = await scrape(w.gw, { authorization: `Bearer ${MASTER}` });
    const unreadable = metrics.samples('floodgate_provider_unreadable_headers_total').filter((s) => s.labels?.provider === 'primary');
    assert.ok(unreadable.reduce((sum, s) => sum + Number(s.value), 0) > 0, 'malformed values were counted');
    assert.equal((await w.gw.request('GET', '/health')).status, 200);
  });

  it('learns nothing with learned.enabled: false', async () => {
    const w = await world({ primaryExtra: 'learned: { enabled: false }' });
    w.primary.setAnswerHeaders({ 'x-ratelimit-remaining-requests': '0', 'x-ratelimit-reset-requests': '1m' });
    await served(w, 'primary');
    w.primary.failNext(1, { status: 429, headers: { 'retry-after': '60' } });
    await served(w, 'failover');
    await served(w, 'primary');
    assert.deepEqual(await learned(w), []);
  });

  it('explains a target saturated this way, and measures it', async () => {
    const w = await world();
    w.primary.setAnswerHeaders({ 'x-ratelimit-limit-requests': '10', 'x-ratelimit-remaining-requests': '4', 'x-ratelimit-reset-requests': '30s', 'x-ratelimit-limit-tokens': '900', 'x-ratelimit-remaining-tokens': '800', 'x-ratelimit-reset-tokens': '30s' });
    await served(w, 'primary');
    w.primary.failNext(1, { status: 429, headers: { 'retry-after': '30' } });
    await served(w, 'failover');
    await served(w, 'backup');
    const explained = await admin(w.gw, 'GET', '/admin/rate-limits/explain?model=primary/m');
    assert.equal(explained.status, 200, explained.text);
    const [primary, backup] = explained.json().targets;
    assert.equal(primary.learned, true);
    assert.equal(primary.has_capacity, false);
    assert.ok(Math.abs(Date.parse(primary.learned_reset_at) - (Date.now() + 30_000)) < 2000);
    assert.equal(primary.breach.period_label, 'learned');
    assert.equal(backup.learned, false);
    assert.equal(explained.json().target.provider, 'backup');

    const metrics = await scrape(w.gw, { authorization: `Bearer ${MASTER}` });
    const value = (name: string, labels: Record<string, string>): number | undefined => metrics.sample(name, labels) && metrics.value(name, labels);
    assert.equal(value('floodgate_provider_throttled_total', { provider: 'primary', model: 'm' }), 1);
    assert.equal(value('floodgate_provider_skipped_total', { provider: 'primary', model: 'm' }), 1);
    assert.equal(value('floodgate_provider_remaining', { provider: 'primary', model: 'm', kind: 'requests' }), 4);
    assert.equal(value('floodgate_provider_remaining', { provider: 'primary', model: 'm', kind: 'tokens' }), 800);
  });
});
