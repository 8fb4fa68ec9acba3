import type { FastifyInstance } from 'fastify';
import type { BudgetManager } from '../../admin/budgets.ts';
import type { BudgetTracker } from '../../budgets/tracker.ts';
import type { HttpServices } from '../context.ts';
import { GatewayError } from '../../errors/gateway-error.ts';
import { deleteBudgetBody, putBudgetBody } from '../schemas/admin-budgets.ts';
import { parseBody } from '../validation.ts';
import { definitionChange } from './definition-changes.ts';

/**
 * The budget admin API (master key only; the auth hook has checked it already), with the
 * conventions of `/admin/rate-limits`: every answer is the whole list, config budgets are
 * read-only (409), a bad field is a 400 naming it, and a disabled feature is a 503.
 */
export function registerAdminBudgets(app: FastifyInstance, services: Pick<HttpServices, 'budgets' | 'budgetManager' | 'now'>): void {
  // Every replica's reservations, with shared counters: what the admission check itself counts.
  const list = async (tracker: BudgetTracker) => ({ budgets: await tracker.sharedStatus(), server_time: new Date(services.now()).toISOString() });

  app.get('/admin/budgets', async () => list(enabled(services).tracker));

  // Each route checks the feature first: with budgets disabled every body is answered 503, valid or not.
  app.put('/admin/budgets', async (request) => {
    const { tracker, manager } = enabled(services);
    const write = parseBody(putBudgetBody, request.body);
    await definitionChange(() => manager.put(write), CODES);
    return list(tracker);
  });

  app.delete('/admin/budgets', async (request) => {
    const { tracker, manager } = enabled(services);
    const key = parseBody(deleteBudgetBody, request.body);
    await definitionChange(() => manager.delete(key), CODES);
    return list(tracker);
  });
}

function enabled(services: Pick<HttpServices, 'budgets' | 'budgetManager'>): { tracker: BudgetTracker; manager: BudgetManager } {
  if (services.budgets === undefined || services.budgetManager === undefined) {
    throw new GatewayError({ status: 503, type: 'invalid_request_error', message: 'budgets are disabled on this gateway (BUDGETS_ENABLED=false)', code: 'feature_unavailable' });
  }
  return { tracker: services.budgets, manager: services.budgetManager };
}

const CODES = { notFound: 'budget_not_found', managedByConfig: 'budget_managed_by_config' };
