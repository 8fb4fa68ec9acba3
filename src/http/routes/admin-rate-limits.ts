import type { FastifyInstance } from 'fastify';
import { RuleChangeError, type RuleManager } from '../../admin/rate-limit-rules.ts';
import type { RateLimiter, StatusOptions } from '../../ratelimit/index.ts';
import type { HttpServices } from '../context.ts';
import { GatewayError, badRequest, notFound } from '../../errors/gateway-error.ts';
import { deleteRateLimitBody, listRateLimitsQuery, putRateLimitBody, resetOneRateLimitBody, resetRateLimitsBody } from '../schemas/admin-rate-limits.ts';
import { leadingField } from '../schemas/checks.ts';
import { parseBody } from '../validation.ts';

/** The rate-limit admin API (master key only; the auth hook has checked it already). */
export function registerAdminRateLimits(app: FastifyInstance, services: HttpServices): void {
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
    await change(() => rules.put(write));
    return list(limiter);
  });

  app.delete('/admin/rate-limits', async (request) => {
    const { limiter, rules } = enabled(services);
    const key = parseBody(deleteRateLimitBody, request.body);
    await change(() => rules.delete(key));
    return list(limiter);
  });

  app.post('/admin/rate-limits/reset-one', async (request) => {
    const { limiter, rules } = enabled(services);
    const key = parseBody(resetOneRateLimitBody, request.body);
    await change(() => rules.resetOne(key));
    return list(limiter);
  });

  app.post('/admin/rate-limits/reset', async (request) => {
    const { rules } = enabled(services);
    parseBody(resetRateLimitsBody, request.body);
    await rules.resetAll();
    return { status: 'ok' };
  });
}

/** The engine and rule manager, or the 503 every rate-limit admin route answers when rate limits are disabled. */
export function enabled(services: HttpServices): { limiter: RateLimiter; rules: RuleManager } {
  if (services.limiter === undefined || services.rules === undefined) {
    throw new GatewayError({ status: 503, type: 'invalid_request_error', message: 'rate limits are disabled on this gateway (RATE_LIMITS_ENABLED=false)', code: 'feature_unavailable' });
  }
  return { limiter: services.limiter, rules: services.rules };
}

async function change(action: () => Promise<void>): Promise<void> {
  try {
    await action();
  } catch (err) {
    if (!(err instanceof RuleChangeError)) throw err;
    if (err.reason === 'not_found') throw notFound(err.message, 'rate_limit_not_found');
    if (err.reason === 'managed_by_config') {
      throw new GatewayError({ status: 409, type: 'invalid_request_error', message: err.message, code: 'rule_managed_by_config' });
    }
    throw badRequest(err.message, leadingField(err.message) ?? null);
  }
}
