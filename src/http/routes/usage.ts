import type { FastifyInstance } from 'fastify';
import { roundUsd } from '../../shared/money.ts';
import type { HttpServices } from '../context.ts';
import { badRequest } from '../../errors/gateway-error.ts';
import { usageQuery } from '../schemas/usage.ts';
import { parseBody } from '../validation.ts';

const DAY_MS = 86_400_000;

/** `GET /v1/usage?from&to`: the caller's own usage (its user path and below), by provider and model. */
export function registerUsage(app: FastifyInstance, services: Pick<HttpServices, 'now' | 'usage' | 'storage' | 'limiter' | 'budgets'>): void {
  app.get('/v1/usage', async (request) => {
    const query = parseBody(usageQuery, request.query);
    const to = query.to ? endOf(query.to) : new Date(services.now());
    const from = query.from ? parseDate(query.from, 'from') : new Date(to.getTime() - 30 * DAY_MS);
    if (from.getTime() >= to.getTime()) throw badRequest('from: must be before to', 'from');
    const userPath = request.identity.userPath;
    // Recent records may still sit in the recorder's buffer; a usage query is rare enough to wait for them.
    await services.usage.flush();
    const rows = await services.storage.usage.summarize({ userPathPrefix: userPath, from, to });
    const totals = { requests: 0, prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, cached_prompt_tokens: 0, cost_usd: 0, cached_requests: 0, estimated_requests: 0 };
    const byModel = rows.map((row) => {
      totals.requests += row.requests;
      totals.prompt_tokens += row.promptTokens;
      totals.completion_tokens += row.completionTokens;
      totals.total_tokens += row.totalTokens;
      totals.cached_prompt_tokens += row.cachedPromptTokens;
      totals.cost_usd += row.costUsd;
      totals.cached_requests += row.cachedRequests;
      totals.estimated_requests += row.estimatedRequests;
      return {
        provider: row.provider,
        model: row.model,
        requests: row.requests,
        prompt_tokens: row.promptTokens,
        completion_tokens: row.completionTokens,
        total_tokens: row.totalTokens,
        cached_prompt_tokens: row.cachedPromptTokens,
        cost_usd: roundUsd(row.costUsd),
        cached_requests: row.cachedRequests,
        estimated_requests: row.estimatedRequests,
      };
    });
    totals.cost_usd = roundUsd(totals.cost_usd);
    // The user-path rules and budgets governing the caller, so a consumer can see how close it is to a limit.
    const rateLimits = (await services.limiter?.usageFor(userPath)) ?? [];
    const budgets = (await services.budgets?.sharedStatusFor(userPath)) ?? [];
    return { user_path: userPath, from: from.toISOString(), to: to.toISOString(), totals, by_model: byModel, rate_limits: rateLimits, budgets };
  });
}

function parseDate(value: string, field: string): Date {
  const date = new Date(value.length === 10 ? `${value}T00:00:00Z` : value);
  // Date rolls impossible days over (2020-02-31 → March 2): a round trip catches them.
  if (Number.isNaN(date.getTime()) || date.toISOString().slice(0, 10) !== value.slice(0, 10)) throw badRequest(`${field}: not a valid date`, field);
  return date;
}

/** A bare date as `to` means the whole of that day. */
function endOf(value: string): Date {
  const date = parseDate(value, 'to');
  return value.length === 10 ? new Date(date.getTime() + DAY_MS) : date;
}
