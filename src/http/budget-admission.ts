import type { HttpServices } from './context.ts';
import { GatewayError } from './errors.ts';

/**
 * Admission against the budgets governing the caller's user path, run after the rate limits: a
 * reached budget is a 429 with Retry-After until its period ends. One in-memory lookup; nothing
 * at all when budgets are disabled or none exists.
 */
export function checkBudget(services: HttpServices, userPath: string): void {
  const breach = services.budgets?.check(userPath);
  if (breach === undefined) return;
  throw new GatewayError({
    status: 429,
    type: 'rate_limit_error',
    message: breach.message,
    code: 'budget_exceeded',
    // retry-after-ms is the exact wait, but never under a second, like the rate limits' (whose Retry-After is at least 1).
    headers: { 'retry-after': String(Math.ceil(breach.retryAfterMs / 1000)), 'retry-after-ms': String(Math.max(1000, breach.retryAfterMs)) },
  });
}
