import type { FastifyInstance } from 'fastify';
import { buildOpenApiDocument, type RegisteredRoute } from '../openapi/document.ts';
import { OPENAPI_OPERATIONS, OPENAPI_SCHEMAS } from '../openapi/operations.ts';

/**
 * `GET /openapi.json` (public): the OpenAPI 3.1 document of every route the server registers.
 * Call it before any other route is registered: from then on it records each one as the router
 * sees it. The document is built on its first request, once every route is known.
 */
export function registerOpenApi(app: FastifyInstance): void {
  const routes: RegisteredRoute[] = [];
  // The route object itself is kept: the access family stamps its level on it in a later onRoute hook.
  app.addHook('onRoute', (route) => {
    routes.push(route);
  });
  let document: string | undefined;
  app.get('/openapi.json', { config: { access: 'public' } }, async (_request, reply) => {
    document ??= JSON.stringify(buildOpenApiDocument(routes, { schemas: OPENAPI_SCHEMAS, operations: OPENAPI_OPERATIONS }));
    return reply.type('application/json').send(document);
  });
}
