import type { FastifyInstance } from 'fastify';
import { normalizeUserPath, type AdmissionRefusal, type RateLimiter, type RuleStatus } from '../../ratelimit/index.ts';
import type { Route, Target } from '../../routing/resolver.ts';
import type { HttpServices } from '../context.ts';
import { badRequest, notFound } from '../errors.ts';
import { explainQuery, type ExplainEndpoint } from '../schemas/admin-explain.ts';
import { parseBody } from '../validation.ts';
import { enabled } from './admin-rate-limits.ts';

/**
 * How an endpoint admits a request: `dispatch` is every model endpoint (route targets, then
 * failover candidates, saturated ones skipped), `session` a realtime session (the route's
 * primary targets only), `user_path_only` a batch submission (user-path rules, no slot).
 */
type Admission = 'dispatch' | 'session' | 'user_path_only';
const ADMISSION: Readonly<Record<ExplainEndpoint, Admission>> = {
  chat: 'dispatch',
  responses: 'dispatch',
  embeddings: 'dispatch',
  speech: 'dispatch',
  transcriptions: 'dispatch',
  messages: 'dispatch',
  realtime: 'session',
  batches: 'user_path_only',
};

interface Breach {
  scope: string;
  subject: string;
  period_label: string;
  retry_after_seconds: number;
  message: string;
}

interface Decision {
  refusal: Breach | undefined;
  /** The target a request would be sent to; undefined when refused or when admission involves none. */
  target: Target | undefined;
}

/**
 * `GET /admin/rate-limits/explain?model&user_path&endpoint`: what a request would meet right now
 * — the targets its model resolves to and whether each has capacity, every rule that would apply
 * with its live counters, and the decision with the breach a real request would get — counting
 * nothing, taking no slot and leaving an alias's rotation where it is.
 */
export function registerAdminExplain(app: FastifyInstance, services: HttpServices): void {
  app.get('/admin/rate-limits/explain', async (request) => {
    const { limiter } = enabled(services);
    const query = parseBody(explainQuery, request.query);
    const userPath = normalizeUserPath(query.user_path ?? '/', 'user_path');
    if (!userPath.ok) throw badRequest(userPath.error, 'user_path');
    const route = services.resolver.preview(query.model);
    if (route === undefined) throw notFound(`model "${query.model}" not found`, 'model_not_found');
    const admission = ADMISSION[query.endpoint];
    const targets = admission === 'session' ? route.primary : [...route.primary, ...route.failover];

    const rules = new Map<string, RuleStatus>();
    const collect = (found: readonly RuleStatus[]): void => {
      for (const rule of found) rules.set(`${rule.scope}\u0000${rule.subject.toLowerCase()}\u0000${rule.period_seconds}`, rule);
    };
    const decision = await decide(limiter, admission, route, targets, userPath.value, collect);
    // Budgets come after the rate limits, on every endpoint.
    if (decision.refusal === undefined) {
      const budget = services.budgets?.check(userPath.value);
      if (budget !== undefined) {
        decision.refusal = { scope: 'user_path', subject: budget.userPath, period_label: budget.period, retry_after_seconds: Math.ceil(budget.retryAfterMs / 1000), message: budget.message };
        decision.target = undefined;
      }
    }
    const targetRecords = [];
    for (const [i, target] of targets.entries()) {
      // A target's own capacity, whoever asks: its provider and model rules alone.
      const own = await limiter.explain({ provider: target.provider.name, model: target.model });
      collect(own.rules);
      targetRecords.push({
        provider: target.provider.name,
        model: target.model,
        failover: i >= route.primary.length,
        has_capacity: own.refusal === undefined,
        ...(own.refusal !== undefined && { breach: breachOf(own.refusal, own.refusal.retryAfterSeconds) }),
      });
    }
    return {
      model: query.model,
      user_path: userPath.value,
      endpoint: query.endpoint,
      decision: decision.refusal === undefined ? 'admitted' : 'refused',
      ...(decision.target !== undefined && { target: { provider: decision.target.provider.name, model: decision.target.model } }),
      targets: targetRecords,
      rules: [...rules.values()],
      budgets: services.budgets?.statusFor(userPath.value) ?? [],
      ...(decision.refusal !== undefined && { breach: decision.refusal }),
    };
  });
}

/**
 * The decision a real request would get, step by step as the endpoint admits it (see dispatch.ts
 * `execute` and `allSaturated`, realtime.ts `admitSession`, and the batches route).
 */
async function decide(
  limiter: RateLimiter,
  admission: Admission,
  route: Route,
  targets: readonly Target[],
  userPath: string,
  collect: (rules: readonly RuleStatus[]) => void,
): Promise<Decision> {
  if (admission === 'user_path_only') {
    const preview = await limiter.explain({ userPath }, { holdSlot: false });
    collect(preview.rules);
    return { refusal: preview.refusal && breachOf(preview.refusal, preview.refusal.retryAfterSeconds), target: undefined };
  }
  const refusals: Array<{ target: Target; refusal: AdmissionRefusal }> = [];
  for (const target of targets) {
    const preview = await limiter.explain({ userPath, provider: target.provider.name, model: target.model });
    collect(preview.rules);
    const refusal = preview.refusal;
    if (refusal === undefined) return { refusal: undefined, target };
    // A consumer over its own limit is refused at once; a saturated target is only skipped.
    if (refusal.userPathBreached) return { refusal: breachOf(refusal, refusal.retryAfterSeconds), target: undefined };
    refusals.push({ target, refusal });
  }
  if (admission === 'session') {
    const first = refusals[0]!.refusal;
    return { refusal: breachOf(first, first.retryAfterSeconds), target: undefined };
  }
  // Every candidate saturated: the route's first target's breach, with the Retry-After of
  // whichever candidate frees up first.
  const original = (refusals.find((r) => r.target === route.first) ?? refusals[0]!).refusal;
  const retryAfter = Math.min(...refusals.map((r) => r.refusal.retryAfterSeconds));
  return { refusal: breachOf(original, retryAfter), target: undefined };
}

function breachOf(refusal: AdmissionRefusal, retryAfterSeconds: number): Breach {
  const { breach } = refusal;
  return { scope: breach.scope, subject: breach.subject, period_label: breach.label, retry_after_seconds: retryAfterSeconds, message: refusal.message };
}
