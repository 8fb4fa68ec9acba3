import type { FastifyInstance } from 'fastify';
import type { HttpServices } from '../context.ts';
import { GatewayError } from '../../errors/gateway-error.ts';

/**
 * `GET /health` (liveness) and `GET /ready` (readiness), both public; and, while the gateway
 * drains for a shutdown, a 503 for every new model request. The listener stays open meanwhile for
 * the probes and for the requests already running; `Connection: close` sends the client's retry
 * to a new connection, which the load balancer gives to another replica.
 */
export function registerHealth(app: FastifyInstance, services: Pick<HttpServices, 'health'>): void {
  const { health } = services;
  app.get('/health', { config: { access: 'public' } }, async () => health.live());
  app.get('/ready', { config: { access: 'public' } }, async (_request, reply) => {
    const report = await health.ready();
    return reply.code(report.status === 'ready' ? 200 : 503).send(report);
  });
  app.addHook('onRequest', async (request) => {
    if (!health.draining || request.routeOptions.config.access !== 'model') return;
    throw new GatewayError({
      status: 503,
      type: 'provider_error',
      message: 'the gateway is shutting down: send the request again (another replica will take it)',
      code: 'gateway_draining',
      headers: { connection: 'close' },
    });
  });
}
