import type { FastifyInstance, FastifyRequest } from 'fastify';
import { RuleChangeError, type RuleManager, type RuleWrite } from '../../admin/rate-limit-rules.ts';
import { normalizeSubject, parsePeriod, parsePeriodSeconds, parseScope, type RateLimiter, type RuleKey } from '../../ratelimit/index.ts';
import type { HttpServices } from '../context.ts';
import { GatewayError, badRequest, notFound } from '../errors.ts';

const PUT_FIELDS = new Set(['user_path', 'scope', 'subject', 'limit_key', 'max_requests', 'max_tokens']);
const DELETE_FIELDS = new Set(['user_path', 'scope', 'subject', 'limit_key']);
const RESET_ONE_FIELDS = new Set(['user_path', 'scope', 'subject', 'period', 'period_seconds']);
const LIMIT_KEY_FIELDS = new Set(['period', 'period_seconds']);

/** The rate-limit admin API (master key only; the auth hook has checked it already). */
export function registerAdminRateLimits(app: FastifyInstance, services: HttpServices): void {
  const list = (limiter: RateLimiter) => ({ rate_limits: limiter.status(), server_time: new Date(services.now()).toISOString() });

  app.get('/admin/rate-limits', async () => list(enabled(services).limiter));

  app.put('/admin/rate-limits', async (request) => {
    const { limiter, rules } = enabled(services);
    const body = objectBody(request, PUT_FIELDS);
    const write: RuleWrite = { ...ruleKey(body, limitKeyPeriod(body)) };
    if (body.max_requests !== undefined) write.maxRequests = body.max_requests as number;
    if (body.max_tokens !== undefined) write.maxTokens = body.max_tokens as number;
    await change(() => rules.put(write));
    return list(limiter);
  });

  app.delete('/admin/rate-limits', async (request) => {
    const { limiter, rules } = enabled(services);
    const body = objectBody(request, DELETE_FIELDS);
    const key = ruleKey(body, limitKeyPeriod(body));
    await change(() => rules.delete(key));
    return list(limiter);
  });

  app.post('/admin/rate-limits/reset-one', async (request) => {
    const { limiter, rules } = enabled(services);
    const body = objectBody(request, RESET_ONE_FIELDS);
    const key = ruleKey(body, period(body.period, body.period_seconds, ''));
    await change(async () => rules.resetOne(key));
    return list(limiter);
  });

  app.post('/admin/rate-limits/reset', async (request) => {
    const { rules } = enabled(services);
    const body = objectBody(request, new Set(['confirmation']));
    if (body.confirmation !== 'reset') {
      throw badRequest('confirmation: must be the word "reset" to reset every rate-limit counter', 'confirmation');
    }
    rules.resetAll();
    return { status: 'ok' };
  });
}

function enabled(services: HttpServices): { limiter: RateLimiter; rules: RuleManager } {
  if (services.limiter === undefined || services.rules === undefined) {
    throw new GatewayError({ status: 503, type: 'invalid_request_error', message: 'rate limits are disabled on this gateway (RATE_LIMITS_ENABLED=false)', code: 'feature_unavailable' });
  }
  return { limiter: services.limiter, rules: services.rules };
}

function objectBody(request: FastifyRequest, allowed: ReadonlySet<string>): Record<string, unknown> {
  const body = request.body;
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw badRequest('request body must be a JSON object');
  for (const field of Object.keys(body)) {
    if (!allowed.has(field)) throw badRequest(`${field}: unknown field (expected one of ${[...allowed].join(', ')})`, field);
  }
  return body as Record<string, unknown>;
}

/** `user_path` is shorthand for scope user_path; scope provider/model needs `subject` and rejects `user_path`. */
function ruleKey(body: Record<string, unknown>, periodSeconds: number): RuleKey {
  if (body.user_path !== undefined) {
    if (body.scope !== undefined && body.scope !== 'user_path') {
      throw badRequest(`user_path: not allowed with scope ${JSON.stringify(body.scope)}; use subject`, 'user_path');
    }
    if (body.subject !== undefined) throw badRequest('subject: not allowed together with user_path', 'subject');
    return { scope: 'user_path', subject: valid(normalizeSubject('user_path', body.user_path, 'user_path'), 'user_path'), periodSeconds };
  }
  if (body.scope === undefined) throw badRequest('scope: required (or user_path for a user-path rule)', 'scope');
  const scope = valid(parseScope(body.scope), 'scope');
  if (body.subject === undefined) throw badRequest('subject: required when scope is given', 'subject');
  return { scope, subject: valid(normalizeSubject(scope, body.subject, 'subject'), 'subject'), periodSeconds };
}

function limitKeyPeriod(body: Record<string, unknown>): number {
  const limitKey = body.limit_key;
  if (limitKey === undefined) throw badRequest('limit_key: required, e.g. {"period": "minute"} or {"period_seconds": 300}', 'limit_key');
  if (limitKey === null || typeof limitKey !== 'object' || Array.isArray(limitKey)) {
    throw badRequest('limit_key: must be an object with period or period_seconds', 'limit_key');
  }
  for (const field of Object.keys(limitKey)) {
    if (!LIMIT_KEY_FIELDS.has(field)) throw badRequest(`limit_key.${field}: unknown field (expected period or period_seconds)`, `limit_key.${field}`);
  }
  const { period: named, period_seconds: seconds } = limitKey as Record<string, unknown>;
  return period(named, seconds, 'limit_key.');
}

/** Exactly one of a named period (a numeric string means seconds) or period_seconds. */
function period(named: unknown, seconds: unknown, prefix: string): number {
  if (named !== undefined && seconds !== undefined) {
    throw badRequest(`${prefix}period: give either period or period_seconds, not both`, `${prefix}period`);
  }
  if (named !== undefined) return valid(parsePeriod(named, `${prefix}period`), `${prefix}period`);
  if (seconds !== undefined) return valid(parsePeriodSeconds(seconds, `${prefix}period_seconds`), `${prefix}period_seconds`);
  throw badRequest(`${prefix}period: required (minute, hour, day, concurrent) or ${prefix}period_seconds`, `${prefix}period`);
}

function valid<T>(result: { ok: true; value: T } | { ok: false; error: string }, param: string): T {
  if (!result.ok) throw badRequest(result.error, param);
  return result.value;
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
    throw badRequest(err.message, fieldOf(err.message));
  }
}

/** Engine messages begin with the field they are about. */
function fieldOf(message: string): string | null {
  const field = /^([a-z_.]+)\b/.exec(message)?.[1];
  return field ?? null;
}
