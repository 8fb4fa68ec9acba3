/**
 * A seeded fuzz of model and admin payloads against a real `floodgate` process: whatever the
 * body, the answer is never a 5xx, the process stays up, and the stored rules come back intact
 * after a restart.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { listeningUrl, runCli, withTimeout, type Run } from '../support/cli.ts';
import { openaiProvider } from '../support/e2e.ts';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.ts';
import { prng } from '../support/random.ts';

const MASTER = 'fuzz-master';
const SEED = 0x5eed_f00d;
const PAYLOADS = 1_200;


const ENDPOINTS: Array<[string, string]> = [
  ['POST', '/v1/chat/completions'],
  ['POST', '/v1/responses'],
  ['POST', '/v1/embeddings'],
  ['POST', '/v1/audio/speech'],
  ['POST', '/v1/messages'],
  ['POST', '/v1/batches'],
  ['PUT', '/admin/rate-limits'],
  ['DELETE', '/admin/rate-limits'],
  ['POST', '/admin/rate-limits/reset-one'],
  ['POST', '/admin/api-keys'],
];

const FIELDS = [
  'model', 'messages', 'stream', 'max_tokens', 'input', 'user_path', 'scope', 'subject', 'limit_key', 'period',
  'period_seconds', 'max_requests', 'confirmation', 'name', 'role', 'content', 'tools', 'input_file_id', 'endpoint',
  'completion_window', 'metadata', '__proto__', 'constructor', 'prototype', 'toString', '',
];

const NUMBERS = [0, 1, -1, 60, 300, 2 ** 31, 2 ** 53 - 1, 2 ** 53, 2 ** 53 + 2, 1e15, 1e21, 1e300, 1.7976931348623157e308, -1e308, 0.5, 1e-300, 31_622_400, 31_622_401];

const STRINGS = [
  '', ' ', '/', '//', '/fuzz', '/fuzz/a', 'fuzz//b/', '/a/../b', '..', '.', 'a:b', '\u0000', '\u001f', 'minute', 'hour', 'day',
  'concurrent', 'week', '300', '0', '-5', '1e400', '99999999999999999999', 'mock/mock-1', 'mock-1', 'mock/', '/mock', 'user_path',
  'provider', 'model', 'reset', 'RESET', 'mock', 'up/gpt-x', 'gpt-x', 'up', 'provider with space', '💥', '\ud800', '%2e%2e', '<script>', 'x'.repeat(5_000), '__proto__',
];

function generator(random: () => number) {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;

  const nested = (depth: number): unknown => {
    let value: unknown = pick(STRINGS);
    for (let i = 0; i < depth; i++) value = random() < 0.5 ? [value] : { n: value };
    return value;
  };

  const value = (depth: number): unknown => {
    const roll = random();
    if (roll < 0.25) return pick(NUMBERS);
    if (roll < 0.5) return pick(STRINGS);
    if (roll < 0.55) return random() < 0.5;
    if (roll < 0.6) return null;
    if (roll < 0.65) return nested(60 + Math.floor(random() * 200));
    if (depth > 4) return pick(STRINGS);
    if (roll < 0.8) return Array.from({ length: Math.floor(random() * 4) }, () => value(depth + 1));
    return object(depth + 1);
  };

  const object = (depth: number): Record<string, unknown> => {
    const out: Record<string, unknown> = {};
    const n = Math.floor(random() * 7);
    for (let i = 0; i < n; i++) out[pick(FIELDS)] = value(depth);
    return out;
  };

  const valid: Array<() => Record<string, unknown>> = [
    () => ({ model: 'mock/mock-1', messages: [{ role: 'user', content: 'hi' }] }),
    () => ({ model: 'up/gpt-x', messages: [{ role: 'user', content: 'hi' }] }),
    () => ({ model: 'gpt-x', input: 'hi' }),
    () => ({ model: 'mock-1', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }),
    () => ({ user_path: '/fuzz', limit_key: { period: 'minute' }, max_requests: 5 }),
    () => ({ scope: 'model', subject: 'mock/mock-1', limit_key: { period_seconds: 300 }, max_tokens: 100 }),
    () => ({ name: 'fuzz', user_path: '/fuzz/a' }),
  ];

  /** A body as text: mostly JSON, some broken. */
  return (): string => {
    const roll = random();
    if (roll < 0.1) return pick(['', '{', '{"model":', '[]', 'null', '1e999', '"text"', '{"a":1}}', '\u0000', '{"__proto__":{"x":1}}', '{"constructor":{"prototype":{"x":1}}}']);
    if (roll < 0.15) {
      // Nesting far past the limit, written as text: building it as objects would overflow the test's own stack.
      const depth = 1_000 + Math.floor(random() * 100_000);
      const open = random() < 0.5 ? '['.repeat(depth) : '{"n":'.repeat(depth);
      const close = open.startsWith('[') ? ']'.repeat(depth) : '}'.repeat(depth);
      const base = JSON.stringify(pick(valid)());
      return `${base.slice(0, -1)},"deep":${open}1${close}}`;
    }
    if (roll < 0.45) {
      const base = pick(valid)();
      base[pick(FIELDS)] = value(0);
      return JSON.stringify(base);
    }
    return JSON.stringify(random() < 0.9 ? object(0) : value(0));
  };
}

interface RuleView {
  scope: string;
  subject: string;
  period_seconds: number;
  max_requests?: number;
  max_tokens?: number;
  source: string;
}

describe('fuzz: model and admin payloads', { timeout: 180_000 }, () => {
  let dir: string;
  let config: string;
  let run: Run | undefined;
  let up: FakeUpstream;

  const start = async (): Promise<string> => {
    run = runCli(['--config', config, '--port', '0'], dir, { MASTER_KEY: MASTER });
    return listeningUrl(run);
  };
  const stop = async (): Promise<number | null> => {
    run!.child.kill('SIGTERM');
    const { code } = await withTimeout(run!.exit, 15_000, 'the gateway to exit');
    return code;
  };
  const rules = async (url: string): Promise<RuleView[]> => {
    const res = await fetch(`${url}/admin/rate-limits`, { headers: { authorization: `Bearer ${MASTER}` } });
    assert.equal(res.status, 200);
    const body = (await res.json()) as { rate_limits: RuleView[] };
    return body.rate_limits.map(({ scope, subject, period_seconds, max_requests, max_tokens, source }) => ({ scope, subject, period_seconds, max_requests, max_tokens, source }));
  };

  before(async () => {
    up = await startFakeUpstream({ name: 'up', models: ['gpt-x'] });
    dir = mkdtempSync(join(tmpdir(), 'floodgate-fuzz-'));
    config = join(dir, 'fuzz.yaml');
    writeFileSync(config, [
      `storage: { type: sqlite, sqlite: { path: ${join(dir, 'fuzz.db')} } }`,
      'providers:',
      openaiProvider('up', up.url, ['gpt-x']).trimEnd(),
      '  mock: { type: mock }',
      'rate_limits:',
      '  user_paths: [ { path: /cfg-sentinel, limits: [ { period: hour, max_requests: 11 } ] } ]',
      '',
    ].join('\n'));
  });
  after(async () => {
    if (run && run.child.exitCode === null) run.child.kill('SIGKILL');
    await up?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it(`${PAYLOADS} seeded payloads: never a 5xx, the process stays up, stored rules survive a restart intact`, async () => {
    let url = await start();
    const sentinel = { user_path: '/manual-sentinel', limit_key: { period_seconds: 900 }, max_requests: 13, max_tokens: 17 };
    const created = await fetch(`${url}/admin/rate-limits`, { method: 'PUT', headers: { authorization: `Bearer ${MASTER}`, 'content-type': 'application/json' }, body: JSON.stringify(sentinel) });
    assert.equal(created.status, 200, await created.text());

    const random = prng(SEED);
    const body = generator(random);
    const statuses = new Map<number, number>();
    for (let i = 0; i < PAYLOADS; i++) {
      const [method, path] = ENDPOINTS[Math.floor(random() * ENDPOINTS.length)]!;
      const text = body();
      const res = await fetch(`${url}${path}`, { method, headers: { authorization: `Bearer ${MASTER}`, 'content-type': 'application/json' }, body: text });
      const answer = await res.text();
      assert.ok(res.status < 500, `#${i} ${method} ${path} ${text.slice(0, 300)} → ${res.status} ${answer.slice(0, 300)}`);
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      assert.equal(run!.child.exitCode, null, `the process died after #${i}`);
    }
    assert.ok((statuses.get(400) ?? 0) > PAYLOADS / 4, `mostly refused: ${JSON.stringify([...statuses])}`);
    assert.ok((statuses.get(200) ?? 0) > 0, `some accepted: ${JSON.stringify([...statuses])}`);

    const health = await fetch(`${url}/health`);
    assert.equal(health.status, 200);
    const beforeRestart = await rules(url);
    assert.deepEqual(beforeRestart.find((r) => r.subject === '/manual-sentinel'), { scope: 'user_path', subject: '/manual-sentinel', period_seconds: 900, max_requests: 13, max_tokens: 17, source: 'manual' });
    assert.deepEqual(beforeRestart.find((r) => r.subject === '/cfg-sentinel'), { scope: 'user_path', subject: '/cfg-sentinel', period_seconds: 3600, max_requests: 11, max_tokens: undefined, source: 'config' });

    assert.equal(await stop(), 0, run!.stderr());
    url = await start();
    assert.deepEqual(await rules(url), beforeRestart, 'every stored rule loads back as it was');
    assert.equal(await stop(), 0, run!.stderr());
  });
});
