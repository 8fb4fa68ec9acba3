import type { FastifyInstance } from 'fastify';
import { resetRuleCounters, type RuleManager } from '../../admin/rate-limit-rules.ts';
import type { RateLimiter, StatusOptions } from '../../ratelimit/index.ts';
import type { HttpServices } from '../context.ts';
import { GatewayError, badRequest } from '../../errors/gateway-error.ts';
import { deleteRateLimitBody, listRateLimitsQuery, putRateLimitBody, resetOneRateLimitBody, resetRateLimitsBody } from '../schemas/admin-rate-limits.ts';
import { parseBody } from '../validation.ts';
import { definitionChange } from './definition-changes.ts';

/** The rate-limit admin API (master key only; the auth hook has checked it already). */
export function registerAdminRateLimits(app: FastifyInstance, services: Pick<HttpServices, 'limiter' | 'rules' | 'now'>): void {
  const list = async (limiter: RateLimiter, options?: StatusOptions) => ({ rate_limits: await limiter.status(options), server_time: new Date(services.now()).toISOString() });

  // `?expand=children`: each per-child rule's active children (or its `children_limit` busiest) after it, one record each.
  app.get('/admin/rate-limits', async (request) => {
    const { limiter } = enabled(services);
    const query = parseBody(listRateLimitsQuery, request.query ?? {});
    if (query.children_limit !== undefined && query.expand !== 'children') throw badRequest('children_limit: needs expand=children', 'children_limit');
    return list(limiter, { expandChildren: query.expand === 'children', childrenLimit: query.children_limit });
  });

  // Each route checks the feature first: with rate limits disabled every body is answered 503, valid or not.
  app.put('/admin/rate-limits', async (request) => {
    const { limiter, rules } = enabled(services);
    const write = parseBody(putRateLimitBody, request.body);
    await definitionChange(() => rules.put(write), CODES);
    return list(limiter);
  });

  app.delete('/admin/rate-limits', async (request) => {
    const { limiter, rules } = enabled(services);
    const key = parseBody(deleteRateLimitBody, request.body);
    await definitionChange(() => rules.delete(key), CODES);
    return list(limiter);
  });

  app.post('/admin/rate-limits/reset-one', async (request) => {
    const { limiter } = enabled(services);
    const key = parseBody(resetOneRateLimitBody, request.body);
    await definitionChange(() => resetRuleCounters(limiter, key), CODES);
    return list(limiter);
  });

  app.post('/admin/rate-limits/reset', async (request) => {
    const { limiter } = enabled(services);
    parseBody(resetRateLimitsBody, request.body);
    await limiter.resetAll();
    return { status: 'ok' };
  });
}

/** The engine and rule manager, or the 503 every rate-limit admin route answers when rate limits are disabled. */
export function enabled(services: Pick<HttpServices, 'limiter' | 'rules'>): { limiter: RateLimiter; rules: RuleManager } {
  if (services.limiter === undefined || services.rules === undefined) {
    throw new GatewayError({ status: 503, type: 'invalid_request_error', message: 'rate limits are disabled on this gateway (RATE_LIMITS_ENABLED=false)', code: 'feature_unavailable' });
  }
  return { limiter: services.limiter, rules: services.rules };
}

const CODES = { notFound: 'rate_limit_not_found', managedByConfig: 'rule_managed_by_config' };
