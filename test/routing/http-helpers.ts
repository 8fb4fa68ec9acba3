/**
 * Small helpers for the routing and cache end-to-end tests (test/http/routing*.test.ts,
 * test/http/cache*.test.ts): rate-limit refusal assertions, the admin rule list, and the
 * contract §5 Retry-After computed independently.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TestGateway, TestResponse } from '../support/gateway.ts';
import { assertNoStack } from '../support/e2e.ts';

export const USER_PATH_HEADER = 'X-Floodgate-User-Path';

/** Asserts a 429 rate-limit refusal (exact OpenAI-dialect body, Retry-After in s and ms); returns Retry-After. */
export function assertRateLimited(res: TestResponse, message: string): number {
  assert.equal(res.status, 429, `expected 429, got ${res.status}: ${res.text}`);
  assert.match(res.headers.get('content-type') ?? '', /application\/json/);
  assert.equal(res.text, JSON.stringify({ error: { type: 'rate_limit_error', message, param: null, code: 'rate_limit_exceeded' } }));
  assertNoStack(res.text);
  const raw = res.headers.get('retry-after');
  assert.ok(raw !== null && /^\d+$/.test(raw), `retry-after must be an integer, got ${raw}`);
  const seconds = Number(raw);
  assert.ok(seconds >= 1, `retry-after >= 1, got ${seconds}`);
  assert.equal(res.headers.get('retry-after-ms'), String(seconds * 1000));
  return seconds;
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

export interface StatusRecord {
  scope: string;
  subject: string;
  period_seconds: number;
  requests_used?: number;
  tokens_used?: number;
  in_flight?: number;
}

/** GET /admin/rate-limits on a gateway without MASTER_KEY (loopback, open). */
export async function listRules(gw: TestGateway): Promise<StatusRecord[]> {
  const res = await gw.request('GET', '/admin/rate-limits');
  assert.equal(res.status, 200, res.text);
  return res.json().rate_limits;
}

export function findRule(rules: StatusRecord[], scope: string, subject: string, periodSeconds: number): StatusRecord | undefined {
  return rules.find((r) => r.scope === scope && r.subject.toLowerCase() === subject.toLowerCase() && r.period_seconds === periodSeconds);
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

/** Contract §5 sliding estimate at second `t`, counts keyed by fixed-window start. */
function estimateAt(counts: Map<number, number>, period: number, t: number): number {
  const start = t - (t % period);
  const current = counts.get(start) ?? 0;
  const previous = counts.get(start - period) ?? 0;
  return Math.floor((previous * (period - (t - start))) / period) + current;
}

/** Contract §5 Retry-After by brute force: the smallest whole d >= 1 after which the estimate is below the cap. */
function retryAfterFor(charges: Array<{ second: number; amount: number }>, period: number, cap: number, atSecond: number): number {
  const counts = new Map<number, number>();
  for (const c of charges) {
    const start = c.second - (c.second % period);
    counts.set(start, (counts.get(start) ?? 0) + c.amount);
  }
  for (let d = 1; d <= 3 * period + 1; d++) if (estimateAt(counts, period, atSecond + d) < cap) return d;
  throw new Error('unreachable: both windows roll off within 2 periods');
}

const secondsOf = (m: Moment): number[] => {
  const out: number[] = [];
  for (let s = Math.floor(m.lo / 1000); s <= Math.floor(m.hi / 1000); s++) out.push(s);
  return out;
};

/** Every Retry-After the contract formula allows, given when each counted request and the refusal happened. */
export function possibleRetryAfters(events: Array<{ at: Moment; amount: number }>, refusal: Moment, period: number, cap: number): Set<number> {
  const out = new Set<number>();
  const walk = (i: number, charges: Array<{ second: number; amount: number }>): void => {
    if (i === events.length) {
      for (const s of secondsOf(refusal)) out.add(retryAfterFor(charges, period, cap, s));
      return;
    }
    for (const s of secondsOf(events[i]!.at)) walk(i + 1, [...charges, { second: s, amount: events[i]!.amount }]);
  };
  walk(0, []);
  return out;
}
