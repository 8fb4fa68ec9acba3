import type { FastifyInstance, FastifyRequest } from 'fastify';
import { BudgetChangeError, type BudgetManager } from '../../admin/budgets.ts';
import { parseBudgetPeriod } from '../../budgets/periods.ts';
import type { BudgetTracker } from '../../budgets/tracker.ts';
import { parseMaxUsd, type BudgetKey } from '../../budgets/types.ts';
import { normalizeUserPath } from '../../ratelimit/normalize.ts';
import type { Result } from '../../ratelimit/types.ts';
import { isRecord } from '../../shared/json.ts';
import type { HttpServices } from '../context.ts';
import { GatewayError, badRequest, notFound } from '../errors.ts';

const PUT_FIELDS = ['user_path', 'limit_key', 'max_usd'];
const DELETE_FIELDS = ['user_path', 'limit_key'];
const LIMIT_KEY_FIELDS = ['period', 'period_seconds'];

/**
 * The budget admin API (master key only; the auth hook has checked it already), with the
 * conventions of `/admin/rate-limits`: every answer is the whole list, config budgets are
 * read-only (409), a bad field is a 400 naming it, and a disabled feature is a 503.
 */
export function registerAdminBudgets(app: FastifyInstance, services: HttpServices): void {
  const list = (tracker: BudgetTracker) => ({ budgets: tracker.status(), server_time: new Date(services.now()).toISOString() });

  app.get('/admin/budgets', async () => list(enabled(services).tracker));

  app.put('/admin/budgets', async (request) => {
    const { tracker, manager } = enabled(services);
    const body = fieldsOf(request, PUT_FIELDS);
    const key = budgetKey(body);
    if (body.max_usd === undefined) throw badRequest('max_usd: required (US dollars, greater than 0)', 'max_usd');
    const maxUsd = valid(parseMaxUsd(body.max_usd), 'max_usd');
    await change(() => manager.put({ ...key, maxUsd }));
    return list(tracker);
  });

  app.delete('/admin/budgets', async (request) => {
    const { tracker, manager } = enabled(services);
    const key = budgetKey(fieldsOf(request, DELETE_FIELDS));
    await change(() => manager.delete(key));
    return list(tracker);
  });
}

function enabled(services: HttpServices): { tracker: BudgetTracker; manager: BudgetManager } {
  if (services.budgets === undefined || services.budgetManager === undefined) {
    throw new GatewayError({ status: 503, type: 'invalid_request_error', message: 'budgets are disabled on this gateway (BUDGETS_ENABLED=false)', code: 'feature_unavailable' });
  }
  return { tracker: services.budgets, manager: services.budgetManager };
}

function fieldsOf(request: FastifyRequest, allowed: readonly string[]): Record<string, unknown> {
  return onlyFields(request.body, allowed, '', 'request body must be a JSON object');
}

/** `value` as an object with only `allowed` fields; `where` prefixes the field names in messages. */
function onlyFields(value: unknown, allowed: readonly string[], where: string, notObject: string): Record<string, unknown> {
  if (!isRecord(value)) throw badRequest(notObject, where === '' ? null : where.slice(0, -1));
  for (const field of Object.keys(value)) {
    if (!allowed.includes(field)) throw badRequest(`${where}${field}: unknown field (expected one of ${allowed.join(', ')})`, `${where}${field}`);
  }
  return value;
}

/** `user_path` and `limit_key` (`{"period": "day" | "week" | "month"}` or `{"period_seconds": N}`). */
function budgetKey(body: Record<string, unknown>): BudgetKey {
  if (body.user_path === undefined) throw badRequest('user_path: required', 'user_path');
  const userPath = valid(normalizeUserPath(body.user_path, 'user_path'), 'user_path');
  if (body.limit_key === undefined) throw badRequest('limit_key: required, e.g. {"period": "month"} or {"period_seconds": 3600}', 'limit_key');
  const limitKey = onlyFields(body.limit_key, LIMIT_KEY_FIELDS, 'limit_key.', 'limit_key: must be an object with period or period_seconds');
  const period = parseBudgetPeriod(limitKey.period, limitKey.period_seconds, 'limit_key.');
  return { userPath, period: valid(period, limitKey.period_seconds !== undefined && limitKey.period === undefined ? 'limit_key.period_seconds' : 'limit_key.period') };
}

function valid<T>(result: Result<T>, param: string): T {
  if (!result.ok) throw badRequest(result.error, param);
  return result.value;
}

async function change(action: () => Promise<void>): Promise<void> {
  try {
    await action();
  } catch (err) {
    if (!(err instanceof BudgetChangeError)) throw err;
    if (err.reason === 'not_found') throw notFound(err.message, 'budget_not_found');
    if (err.reason === 'managed_by_config') {
      throw new GatewayError({ status: 409, type: 'invalid_request_error', message: err.message, code: 'budget_managed_by_config' });
    }
    throw badRequest(err.message, null);
  }
}
