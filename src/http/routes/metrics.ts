import type { FastifyInstance } from 'fastify';
import type { GatewayMetrics } from '../../metrics/index.ts';
import type { HttpServices } from '../context.ts';

/**
 * Counts every response by the route the router matched (its pattern, never the URL's text) and
 * status. onResponse runs when a response finished, streams included; one whose client left
 * before its end is not counted.
 */
export function countResponses(app: FastifyInstance, metrics: GatewayMetrics): void {
  app.addHook('onResponse', (request, reply, done) => {
    metrics.responded(request.routeOptions.url, reply.statusCode);
    done();
  });
}

/** `GET /metrics`: the Prometheus text exposition (registered in the admin family: master key). */
export function registerMetrics(app: FastifyInstance, services: Pick<HttpServices, 'metrics'>): void {
  app.get('/metrics', async (_request, reply) => {
    const text = await services.metrics.exposition();
    return reply.type(services.metrics.contentType).send(text);
  });
}
