import type { FastifyInstance } from 'fastify';
import type { LearnedRecord } from '../../ratelimit/index.ts';
import type { HttpServices } from '../context.ts';
import { enabled } from './admin-rate-limits.ts';

/**
 * `GET /admin/providers`: what the providers' own answers said of their rate limits, per provider
 * and model (every replica's, with shared counters), and whether each is routed around now.
 */
export function registerAdminProviders(app: FastifyInstance, services: Pick<HttpServices, 'limiter' | 'rules'>): void {
  app.get('/admin/providers', async () => {
    const { limiter } = enabled(services);
    const { nowMs, records } = await limiter.learnedCapacity();
    return {
      providers: records.map(({ provider, model, record }) => ({ provider, model, ...learnedFields(record, nowMs) })),
      server_time: new Date(nowMs).toISOString(),
    };
  });
}

function learnedFields(record: LearnedRecord, nowMs: number): Record<string, unknown> {
  const saturated = record.cause !== undefined && record.saturatedUntilMs > nowMs;
  return {
    requests_limit: record.requests?.limit ?? null,
    requests_remaining: record.requests?.remaining ?? null,
    requests_reset_at: time(record.requests?.resetAtMs),
    tokens_limit: record.tokens?.limit ?? null,
    tokens_remaining: record.tokens?.remaining ?? null,
    tokens_reset_at: time(record.tokens?.resetAtMs),
    cooldown_until: time(record.cooldownUntilMs),
    saturated,
    saturated_until: saturated ? time(record.saturatedUntilMs) : null,
    cause: saturated ? record.cause : null,
    throttled_at: time(record.throttledAtMs),
    updated_at: time(record.updatedAtMs),
  };
}

/** RFC 3339 UTC with milliseconds (resets and cooldowns come to the millisecond); null when absent. */
function time(ms: number | undefined): string | null {
  return ms === undefined ? null : new Date(Math.round(ms)).toISOString();
}
