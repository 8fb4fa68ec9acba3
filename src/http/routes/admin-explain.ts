import type { FastifyInstance } from 'fastify';
import { mayWaitFor, type Breach, type ExplainKind } from '../../admission/core.ts';
import { roundUsd } from '../../shared/money.ts';
import { normalizeUserPath } from '../../user-path/user-path.ts';
import type { HttpServices } from '../context.ts';
import { badRequest, notFound } from '../../errors/gateway-error.ts';
import { explainQuery, type ExplainEndpoint } from '../schemas/admin-explain.ts';
import { parseBody } from '../validation.ts';
import { enabled } from './admin-rate-limits.ts';

/**
 * How an endpoint admits a request: every model endpoint walks its route's targets, then
 * failover candidates; a realtime session the route's primary targets; a batch submission meets
 * user-path rules only, with no slot.
 */
const KIND: Readonly<Record<ExplainEndpoint, ExplainKind>> = {
  chat: 'dispatch',
  responses: 'dispatch',
  embeddings: 'dispatch',
  speech: 'dispatch',
  transcriptions: 'dispatch',
  messages: 'dispatch',
  realtime: 'session',
  batches: 'submission',
};

/**
 * `GET /admin/rate-limits/explain?model&user_path&endpoint`: what a request would meet right now
 * — the targets its model resolves to and whether each has capacity, every rule that would apply
 * with its live counters, and the decision with the breach a real request would get — walked by
 * the admission core exactly as a request is, counting nothing, taking no slot and leaving an
 * alias's rotation where it is.
 */
export function registerAdminExplain(app: FastifyInstance, services: Pick<HttpServices, 'limiter' | 'rules' | 'resolver' | 'admission' | 'options' | 'reservations'>): void {
  app.get('/admin/rate-limits/explain', async (request) => {
    enabled(services);
    const query = parseBody(explainQuery, request.query);
    const userPath = normalizeUserPath(query.user_path ?? '/', 'user_path');
    if (!userPath.ok) throw badRequest(userPath.error, 'user_path');
    const route = services.resolver.preview(query.model);
    if (route === undefined) throw notFound(`model "${query.model}" not found`, 'model_not_found');
    // The dry run has no body: the estimate is the completion the request would allow, without a prompt.
    const reservations = services.reservations;
    const estimate = reservations?.enabled === true && KIND[query.endpoint] === 'dispatch'
      ? await reservations.estimate(query.endpoint, query.model, query.max_tokens === undefined ? {} : { max_tokens: query.max_tokens })
      : undefined;
    const explained = await services.admission.explain(userPath.value, route, KIND[query.endpoint], query.priority, estimate);
    const { breach, target, refusal } = explained;
    const { defaultWaitMs, maxWaitMs } = services.options.patience;
    const waitMs = Math.min(query.max_wait === undefined ? defaultWaitMs : Math.round(query.max_wait * 1000), maxWaitMs);
    const wouldWait = refusal !== undefined && waitMs > 0 && mayWaitFor(refusal, waitMs);
    return {
      model: query.model,
      user_path: userPath.value,
      endpoint: query.endpoint,
      priority: query.priority,
      decision: breach === undefined ? 'admitted' : 'refused',
      // A refused request that may wait for capacity waits at most its whole wait, then gets the 429.
      wait: { would_wait: wouldWait, at_most_seconds: wouldWait ? waitMs / 1000 : 0 },
      ...(target !== undefined && { target: { provider: target.provider.name, model: target.model } }),
      targets: explained.targets.map((t) => ({
        provider: t.target.provider.name,
        model: t.target.model,
        failover: t.failover,
        has_capacity: t.breach === undefined,
        learned: t.learned !== undefined,
        ...(t.learned !== undefined && { learned_reset_at: new Date(Math.round(t.learned.untilMs)).toISOString() }),
        ...(t.breach !== undefined && { breach: breachRecord(t.breach) }),
      })),
      ...(estimate !== undefined && {
        reservation: {
          tokens: estimate.tokens,
          ...(estimate.costUsd !== undefined && target !== undefined && { cost_usd: roundUsd(estimate.costUsd(target)) }),
        },
      }),
      rules: explained.rules,
      budgets: explained.budgets,
      ...(breach !== undefined && { breach: breachRecord(breach) }),
    };
  });
}

function breachRecord(breach: Breach): { scope: string; subject: string; period_label: string; retry_after_seconds: number; message: string } {
  return { scope: breach.scope, subject: breach.subject, period_label: breach.periodLabel, retry_after_seconds: breach.retryAfterSeconds, message: breach.message };
}
