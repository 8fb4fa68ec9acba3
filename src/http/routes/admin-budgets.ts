import type { FastifyInstance } from 'fastify';
import { BudgetChangeError, type BudgetManager } from '../../admin/budgets.ts';
import type { BudgetTracker } from '../../budgets/tracker.ts';
import type { HttpServices } from '../context.ts';
import { GatewayError, badRequest, notFound } from '../../errors/gateway-error.ts';
import { deleteBudgetBody, putBudgetBody } from '../schemas/admin-budgets.ts';
import { parseBody } from '../validation.ts';

/**
 * The budget admin API (master key only; the auth hook has checked it already), with the
 * conventions of `/admin/rate-limits`: every answer is the whole list, config budgets are
 * read-only (409), a bad field is a 400 naming it, and a disabled feature is a 503.
 */
export function registerAdminBudgets(app: FastifyInstance, services: HttpServices): void {
  const list = (tracker: BudgetTracker) => ({ budgets: tracker.status(), server_time: new Date(services.now()).toISOString() });

  app.get('/admin/budgets', async () => list(enabled(services).tracker));

  // Each route checks the feature first: with budgets disabled every body is answered 503, valid or not.
  app.put('/admin/budgets', async (request) => {
    const { tracker, manager } = enabled(services);
    const write = parseBody(putBudgetBody, request.body);
    await change(() => manager.put(write));
    return list(tracker);
  });

  app.delete('/admin/budgets', async (request) => {
    const { tracker, manager } = enabled(services);
    const key = parseBody(deleteBudgetBody, request.body);
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

async function change(action: () => Promise<void>): Promise<void> {
  try {
    await action();
  } catch (err) {
    if (!(err instanceof BudgetChangeError)) throw err;
    if (err.reason === 'not_found') throw notFound(err.message, 'budget_not_found');
    if (err.reason === 'managed_by_config') {
      throw new GatewayError({ status: 409, type: 'invalid_request_error', message: err.message, code: 'budget_managed_by_config' });
    }
    // The schema has checked every field; what is left is a stored budget the manager refuses.
    throw badRequest(err.message, null);
  }
}
