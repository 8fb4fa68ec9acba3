/** Helpers for the rate-limit end-to-end tests (test/http/rate-limits*.test.ts). */
import assert from 'node:assert/strict';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TestGateway, TestResponse } from './gateway.ts';
import { assertNoStack } from './e2e.ts';
import type { FakeUpstream } from './fake-upstream.ts';

export { sleep };

export const USER_PATH_HEADER = 'X-Floodgate-User-Path';

/** YAML `providers:` block with one OpenAI-compatible instance `up` serving `models`. */
export function upProvider(url: string, models: string[] = ['gpt-x'], extra = ''): string {
  return `providers:\n  up: { type: openai, base_url: ${url}/v1, api_key: k, models: [${models.join(', ')}]${extra ? `, ${extra}` : ''} }\n`;
}

/** A small chat body; `content` decides the fake upstream's token usage (ceil(chars/4) each way). */
export function chat(model = 'up/gpt-x', content = 'hi', extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { model, messages: [{ role: 'user', content }], ...extra };
}

/** POST /v1/chat/completions as a given user path. */
export function chatAs(gw: TestGateway, userPath: string | undefined, body: Record<string, unknown> = chat(), headers: Record<string, string> = {}): Promise<TestResponse> {
  return gw.request('POST', '/v1/chat/completions', { body, headers: { ...(userPath === undefined ? {} : { [USER_PATH_HEADER]: userPath }), ...headers } });
}

/** The fake upstream's total_tokens for a one-message chat whose user text is `content`. */
export function fakeChatTokens(content: string): number {
  const t = Math.max(1, Math.ceil(content.length / 4));
  return t + t;
}

/** Every `x-ratelimit-*` header of a response. */
export function rateLimitHeaderNames(res: { headers: Headers }): string[] {
  return [...res.headers.keys()].filter((k) => k.startsWith('x-ratelimit-')).sort();
}

/**
 * Asserts a 429 rate-limit refusal in the OpenAI dialect: exact body (key order included),
 * Retry-After in seconds and milliseconds. Returns the Retry-After seconds.
 */
export function assertRateLimited(res: TestResponse, message: string): number {
  assert.equal(res.status, 429, `expected 429, got ${res.status}: ${res.text}`);
  assert.match(res.headers.get('content-type') ?? '', /application\/json/);
  assert.equal(res.text, JSON.stringify({ error: { type: 'rate_limit_error', message, param: null, code: 'rate_limit_exceeded' } }));
  assertNoStack(res.text);
  return assertRetryAfter(res);
}

/** `retry-after` is a whole number of seconds >= 1 and `retry-after-ms` is the same in ms. */
export function assertRetryAfter(res: { headers: Headers }): number {
  const raw = res.headers.get('retry-after');
  assert.ok(raw !== null && /^\d+$/.test(raw), `retry-after must be an integer, got ${raw}`);
  const seconds = Number(raw);
  assert.ok(seconds >= 1, `retry-after >= 1, got ${seconds}`);
  assert.equal(res.headers.get('retry-after-ms'), String(seconds * 1000));
  return seconds;
}

/** Asserts the triple of one dimension on a refusal: limit, remaining 0, reset = Retry-After. */
export function assertRefusalTriple(res: { headers: Headers }, dim: 'requests' | 'tokens', limit: number): void {
  assert.equal(res.headers.get(`x-ratelimit-limit-${dim}`), String(limit));
  assert.equal(res.headers.get(`x-ratelimit-remaining-${dim}`), '0');
  assert.equal(res.headers.get(`x-ratelimit-reset-${dim}`), res.headers.get('retry-after'));
}

// ------------------------------------------------------------------ time and windows

/** Waits until just after the next whole second (so a short burst stays within one second). */
export async function atSecondStart(marginMs = 15): Promise<void> {
  const ms = Date.now() % 1000;
  await sleep(1000 - ms + marginMs);
}

/** When something happened: Date.now() just before and just after it. */
export interface Moment {
  lo: number;
  hi: number;
}

export async function timed<T>(fn: () => Promise<T>): Promise<{ value: T; at: Moment }> {
  const lo = Date.now();
  const value = await fn();
  return { value, at: { lo, hi: Date.now() } };
}

/** Contract §5 sliding estimate at second `t` for counts keyed by fixed-window start. */
function estimateAt(counts: Map<number, number>, period: number, t: number): number {
  const start = t - (t % period);
  const elapsed = t - start;
  const current = counts.get(start) ?? 0;
  const previous = counts.get(start - period) ?? 0;
  return Math.floor((previous * (period - elapsed)) / period) + current;
}

/**
 * Contract §5 Retry-After computed independently by brute force: the smallest whole
 * d >= 1 after which the estimate would be below `cap` with no new traffic.
 */
export function retryAfterFor(charges: Array<{ second: number; amount: number }>, period: number, cap: number, atSecond: number): number {
  const counts = new Map<number, number>();
  for (const c of charges) {
    const start = c.second - (c.second % period);
    counts.set(start, (counts.get(start) ?? 0) + c.amount);
  }
  for (let d = 1; d <= 3 * period + 1; d++) {
    if (estimateAt(counts, period, atSecond + d) < cap) return d;
  }
  throw new Error('unreachable: both windows roll off within 2 periods');
}

/** Whole seconds until the current fixed window ends (contract: reset headers, min 1). */
export function secondsToWindowEnd(period: number, atSecond: number): number {
  return period - (atSecond % period);
}

const secondsOf = (m: Moment): number[] => {
  const out: number[] = [];
  for (let s = Math.floor(m.lo / 1000); s <= Math.floor(m.hi / 1000); s++) out.push(s);
  return out;
};

/**
 * Every Retry-After the contract's formula allows, given when each counted event happened
 * (each may fall in any second its Moment spans) and when the refusal happened.
 */
export function possibleRetryAfters(events: Array<{ at: Moment; amount: number }>, refusal: Moment, period: number, cap: number): Set<number> {
  const out = new Set<number>();
  const walk = (i: number, charges: Array<{ second: number; amount: number }>): void => {
    if (i === events.length) {
      for (const s of secondsOf(refusal)) out.add(retryAfterFor(charges, period, cap, s));
      return;
    }
    const e = events[i]!;
    for (const s of secondsOf(e.at)) walk(i + 1, [...charges, { second: s, amount: e.amount }]);
  };
  walk(0, []);
  return out;
}

/** Every value of `secondsToWindowEnd` over the seconds a Moment spans. */
export function possibleResets(at: Moment, period: number): Set<number> {
  return new Set(secondsOf(at).map((s) => secondsToWindowEnd(period, s)));
}

/** Polls an async condition until it holds. */
export async function eventually(cond: () => Promise<boolean>, ms = 3000, what = 'condition'): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

/**
 * A streamed chat request to `up/gpt-x` (master key) whose answer the upstream holds until
 * `release()`: it holds its concurrency slots meanwhile. Resolves once the upstream has it.
 */
export async function heldRequest(gw: TestGateway, up: FakeUpstream, userPath: string): Promise<{ release(): void; response: Promise<Response> }> {
  const before = up.callCount('/v1/chat/completions');
  const release = up.holdStreamNext();
  const response = fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${MASTER}`, [USER_PATH_HEADER]: userPath },
    body: JSON.stringify(chat('up/gpt-x', 'hold me', { stream: true })),
  });
  await eventually(async () => up.callCount('/v1/chat/completions') > before, 3000, 'the held request reached the upstream');
  return { response, release };
}

// ------------------------------------------------------------------ admin

export const MASTER = 'master-key-for-tests';

export function admin(gw: TestGateway, method: string, path: string, body?: unknown, key = MASTER): Promise<TestResponse> {
  return gw.request(method, path, { body, headers: key === '' ? {} : { authorization: `Bearer ${key}` } });
}

export interface StatusRecord {
  scope: string;
  subject: string;
  user_path: string;
  source: string;
  period_label: string;
  period_seconds: number;
  max_requests?: number;
  max_tokens?: number;
  requests_used: number;
  requests_remaining?: number;
  tokens_used: number;
  tokens_remaining?: number;
  in_flight: number;
  window_start?: string;
  window_end?: string;
  created_at: string;
  updated_at: string;
  exhausted?: boolean;
}

export async function listRules(gw: TestGateway, key = MASTER): Promise<StatusRecord[]> {
  const res = await admin(gw, 'GET', '/admin/rate-limits', undefined, key);
  assert.equal(res.status, 200, res.text);
  return res.json().rate_limits;
}

export function findRule(rules: StatusRecord[], scope: string, subject: string, periodSeconds: number): StatusRecord | undefined {
  return rules.find((r) => r.scope === scope && r.subject.toLowerCase() === subject.toLowerCase() && r.period_seconds === periodSeconds);
}

// ------------------------------------------------------------------ in-flight counting proxy

export interface CountingProxy {
  url: string;
  readonly inFlight: number;
  readonly maxInFlight: number;
  readonly total: number;
  close(): Promise<void>;
}

/**
 * A transparent HTTP proxy in front of an upstream that counts requests in flight (from
 * request arrival to the end of the upstream's answer), to check concurrency caps from the
 * upstream's point of view.
 */
export async function startCountingProxy(target: string): Promise<CountingProxy> {
  const t = new URL(target);
  let inFlight = 0;
  let maxInFlight = 0;
  let total = 0;
  const server = createServer((req, res) => {
    inFlight++;
    total++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      inFlight--;
    };
    const up = httpRequest({ host: t.hostname, port: t.port, method: req.method, path: req.url, headers: req.headers }, (upRes) => {
      res.writeHead(upRes.statusCode ?? 502, upRes.headers);
      upRes.pipe(res);
      upRes.on('end', finish);
      upRes.on('error', finish);
    });
    up.on('error', () => {
      finish();
      res.destroy();
    });
    res.on('close', finish);
    req.pipe(up);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    get inFlight() {
      return inFlight;
    },
    get maxInFlight() {
      return maxInFlight;
    },
    get total() {
      return total;
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
