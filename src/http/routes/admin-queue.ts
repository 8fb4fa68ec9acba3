import type { FastifyInstance } from 'fastify';
import type { HttpServices } from '../context.ts';
import { enabled } from './admin-rate-limits.ts';

/** `GET /admin/queue`: the requests waiting for capacity in this gateway, by priority and by the rule they wait on. */
export function registerAdminQueue(app: FastifyInstance, services: Pick<HttpServices, 'limiter' | 'rules' | 'admission'>): void {
  app.get('/admin/queue', async () => {
    enabled(services);
    const snapshot = services.admission.queue!.snapshot();
    return {
      waiting: snapshot.waiting,
      by_priority: snapshot.byPriority,
      rules: snapshot.rules.map((rule) => ({ scope: rule.scope, subject: rule.subject, period_label: rule.periodLabel, waiting: rule.waiting })),
    };
  });
}
