import type { FastifyInstance } from 'fastify';
import type { AddressInfo } from 'node:net';
import { buildOpenApiDocument, type RegisteredRoute } from '../openapi/document.ts';
import { OPENAPI_OPERATIONS, OPENAPI_SCHEMAS } from '../openapi/operations.ts';

/**
 * `GET /openapi.json` (public): the OpenAPI 3.1 document of every route the server registers.
 * Call it before any other route is registered: from then on it records each one as the router
 * sees it. The document is built on its first request, once every route is known and the server
 * listens (its address is the document's server).
 */
export function registerOpenApi(app: FastifyInstance, options: { userPathHeader: string }): void {
  const routes: RegisteredRoute[] = [];
  // The route object itself is kept: the access family stamps its level on it in a later onRoute hook.
  app.addHook('onRoute', (route) => {
    routes.push(route);
  });
  let document: string | undefined;
  app.get('/openapi.json', { config: { access: 'public' } }, async (_request, reply) => {
    document ??= JSON.stringify(buildOpenApiDocument(routes, {
      schemas: OPENAPI_SCHEMAS,
      operations: OPENAPI_OPERATIONS,
      servers: serversOf(app.server.address()),
      userPathHeader: options.userPathHeader,
    }));
    return reply.type('application/json').send(document);
  });
}

/** The listening address; a wildcard one (every address of the machine) leaves the host to the reader. */
function serversOf(address: AddressInfo | string | null): Array<Record<string, unknown>> {
  if (address === null || typeof address === 'string') return [{ url: '/', description: 'This gateway.' }];
  const { port } = address;
  if (address.address === '0.0.0.0' || address.address === '::') {
    return [{
      url: `http://{host}:${port}`,
      description: 'This gateway, which listens on every address of its machine.',
      variables: { host: { default: '127.0.0.1', description: 'An address clients reach it at.' } },
    }];
  }
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return [{ url: `http://${host}:${port}`, description: 'Where this gateway listens.' }];
}
