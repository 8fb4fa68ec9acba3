import assert from 'node:assert/strict';
import { MemoryCounterStore } from '../../src/counters/memory.ts';
import { RateLimiter } from '../../src/ratelimit/index.ts';
import type { AdmissionRefusal, AdmissionResult, AdmissionTicket, MaybePromise, RuleDefinition, Scope } from '../../src/ratelimit/index.ts';

/** 2023-11-14T22:14:00Z: aligned to minute windows (not to hours or days). */
export const T0 = 1_700_000_040;
/** 2023-11-15T00:00:00Z: aligned to minute, hour and day windows. */
export const MIDNIGHT = 1_700_006_400;

export const CREATED = new Date('2024-01-02T03:04:05.678Z');

export function rule(
  scope: Scope,
  subject: string,
  periodSeconds: number,
  caps: { maxRequests?: number; maxTokens?: number },
): RuleDefinition {
  return { scope, subject, periodSeconds, ...caps, source: 'manual', createdAt: CREATED, updatedAt: CREATED };
}

/** A limiter over `rules` on a clock that only moves when told to (`clock.setSeconds`). */
export function setup(rules: RuleDefinition[], options: { enforceTokens?: boolean; startSeconds?: number; reservations?: boolean } = {}) {
  let nowMs = (options.startSeconds ?? T0) * 1000;
  const clock = {
    now: () => nowMs,
    setSeconds(seconds: number): void {
      nowMs = seconds * 1000;
    },
  };
  const limiter = new RateLimiter({ clock, store: new MemoryCounterStore(), enforceTokens: options.enforceTokens ?? true, reservations: options.reservations });
  limiter.replaceRules(rules);
  return { clock, limiter };
}

/** A limiter over the memory store answers at once: the hot path never awaits. */
export function immediate<T>(value: MaybePromise<T>): T {
  assert.ok(!(value instanceof Promise), 'the memory store answered with a promise');
  return value;
}

export function admitted(answer: MaybePromise<AdmissionResult>): AdmissionTicket {
  const result = immediate(answer);
  assert.ok(result.ok, result.ok ? '' : `refused: ${result.message}`);
  return result;
}

export function refused(answer: MaybePromise<AdmissionResult>): AdmissionRefusal {
  const result = immediate(answer);
  assert.ok(!result.ok, 'expected a refusal');
  return result;
}

export function statusOf(limiter: RateLimiter, scope: Scope, subject: string, periodSeconds: number) {
  const found = immediate(limiter.status()).find(
    (s) => s.scope === scope && s.subject.toLowerCase() === subject.toLowerCase() && s.period_seconds === periodSeconds,
  );
  assert.ok(found, `no status for ${scope} ${subject} ${periodSeconds}`);
  return found;
}
